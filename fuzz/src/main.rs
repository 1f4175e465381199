//! `ski-fuzz`: runs the in-tree fuzz campaigns (`cargo xtask fuzz` builds and starts it).

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::Parser;
use ski_fuzz::alloc::CountingAllocator;
use ski_fuzz::corpus::repository_root;
use ski_fuzz::engine::{self, Settings};
use ski_fuzz::rng::fresh_seed;
use ski_fuzz::targets::{self, TARGETS};

#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator;

/// Fuzzes the parsers of ski with mutated input; exits 1 when anything was found.
#[derive(Debug, Parser)]
#[command(name = "ski-fuzz")]
struct Cli {
    /// Seconds to fuzz each target.
    #[arg(long, default_value_t = 10)]
    time: u64,
    /// Only this target (repeatable); default every target.
    #[arg(long)]
    target: Vec<String>,
    /// The seed of the mutation sequence (printed when chosen at random).
    #[arg(long)]
    seed: Option<u64>,
    /// List the targets and exit.
    #[arg(long)]
    list: bool,
    /// Run this file once through the target(s) and print the outcome.
    #[arg(long, value_name = "FILE")]
    reproduce: Option<PathBuf>,
    /// The longest generated input, in bytes.
    #[arg(long, default_value_t = 64 * 1024)]
    max_len: usize,
    /// Milliseconds one input may run before it is a hang.
    #[arg(long, default_value_t = 5000)]
    exec_timeout_ms: u64,
    /// MiB one input may make live at once before it is a memory finding.
    #[arg(long, default_value_t = 512)]
    alloc_limit_mb: usize,
    /// MiB of resident memory that stop the campaign as a memory finding.
    #[arg(long, default_value_t = 2048)]
    rss_limit_mb: u64,
    /// Also save inputs that reach a new outcome class to fuzz/corpus/<target>/.
    #[arg(long)]
    save_corpus: bool,
    /// The repository (seeds, corpus, artifacts); default the one this was built in.
    #[arg(long)]
    root: Option<PathBuf>,
}

fn main() -> ExitCode {
    match run(Cli::parse()) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(error) => {
            eprintln!("ski-fuzz: {error:#}");
            ExitCode::from(2)
        }
    }
}

/// Runs what the command line asks; `Ok(false)` when something was found.
fn run(cli: Cli) -> Result<bool> {
    if cli.list {
        for target in TARGETS {
            println!("{:<15} {}", target.name, target.about);
        }
        return Ok(true);
    }
    let chosen = if cli.target.is_empty() {
        TARGETS.iter().collect::<Vec<_>>()
    } else {
        let mut chosen = Vec::new();
        for name in &cli.target {
            match targets::find(name) {
                Some(target) => chosen.push(target),
                None => bail!(
                    "unknown target {name:?} (known: {})",
                    TARGETS
                        .iter()
                        .map(|t| t.name)
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            }
        }
        chosen
    };
    if let Some(path) = &cli.reproduce {
        let input =
            std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
        let mut clean = true;
        for target in chosen {
            let failures = engine::replay(
                target,
                vec![(path.display().to_string(), input.clone())],
                Duration::from_millis(cli.exec_timeout_ms),
            );
            match failures.first() {
                None => println!("{:<15} ok", target.name),
                Some(failure) => {
                    clean = false;
                    println!("{:<15} FAILED: {}", target.name, failure.message);
                    if failure.message.contains("a hang") {
                        return Ok(false);
                    }
                }
            }
        }
        return Ok(clean);
    }
    let seed = cli.seed.unwrap_or_else(fresh_seed);
    let settings = Settings {
        time: Duration::from_secs(cli.time),
        seed,
        max_len: cli.max_len,
        exec_timeout: Duration::from_millis(cli.exec_timeout_ms),
        alloc_limit: cli.alloc_limit_mb << 20,
        rss_limit: cli.rss_limit_mb << 20,
        root: cli.root.clone().unwrap_or_else(repository_root),
        save_corpus: cli.save_corpus,
    };
    println!(
        "ski-fuzz: seed {seed}, {} s per target (again: --seed {seed})",
        cli.time
    );
    let mut clean = true;
    for target in chosen {
        let summary = engine::fuzz(target, &settings);
        println!("{}", summary.line());
        for finding in &summary.findings {
            clean = false;
            let saved = finding
                .saved
                .as_ref()
                .map(|path| format!(" -> {}", path.display()))
                .unwrap_or_default();
            println!("  {}: {}{saved}", finding.kind, finding.message);
        }
        if summary.stuck {
            println!("  the campaign stops here: the input is still running");
            return Ok(false);
        }
    }
    Ok(clean)
}
