//! `cargo xtask fuzz`: builds `ski-fuzz` and runs its campaigns, one after the other, each for
//! `--time` seconds (see `fuzz/` and the Fuzzing section of `docs/ARCHITECTURE.md`).

use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use clap::Args;
use xshell::{Shell, cmd};

use crate::ci::{target_dir, workspace_root};

/// Options of `cargo xtask fuzz`.
#[derive(Debug, Args)]
pub struct FuzzArgs {
    /// Seconds to fuzz each target.
    #[arg(long, default_value_t = 60)]
    pub time: u64,
    /// Only this target (repeatable); `--list` names them.
    #[arg(long)]
    pub target: Vec<String>,
    /// The seed of the mutation sequence (a run prints the one it used).
    #[arg(long)]
    pub seed: Option<u64>,
    /// List the targets.
    #[arg(long)]
    pub list: bool,
    /// Run one saved input through the target(s) and say what happens.
    #[arg(long, value_name = "FILE")]
    pub reproduce: Option<PathBuf>,
    /// Save inputs that reach a new outcome class to `fuzz/corpus/<target>/`.
    #[arg(long)]
    pub save_corpus: bool,
}

/// Builds `ski-fuzz` and runs it with these options.
pub fn run(args: &FuzzArgs) -> Result<()> {
    let sh = Shell::new()?;
    sh.change_dir(workspace_root());
    let mut options = vec!["--time".to_owned(), args.time.to_string()];
    for target in &args.target {
        options.extend(["--target".to_owned(), target.clone()]);
    }
    if let Some(seed) = args.seed {
        options.extend(["--seed".to_owned(), seed.to_string()]);
    }
    if args.list {
        options.push("--list".to_owned());
    }
    if let Some(path) = &args.reproduce {
        options.extend(["--reproduce".to_owned(), path.display().to_string()]);
    }
    if args.save_corpus {
        options.push("--save-corpus".to_owned());
    }
    campaign(&sh, &options, Build::Now)
}

/// Where the `ski-fuzz` program of a campaign comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Build {
    /// Built now, as `cargo build --workspace` builds it (so nothing is rebuilt with other
    /// features).
    Now,
    /// Already built by a test build that included `ski-fuzz`'s regression pass (CI's fuzz
    /// step: cargo builds a package's programs for its integration tests).
    Done,
}

/// Runs `ski-fuzz` with `options`, building it first when `build` says so.
pub fn campaign(sh: &Shell, options: &[String], build: Build) -> Result<()> {
    if build == Build::Now {
        cmd!(sh, "cargo build --workspace --bin ski-fuzz")
            .run()
            .context("cannot build ski-fuzz")?;
    }
    let program = target_dir(sh, &workspace_root())?
        .join("debug")
        .join("ski-fuzz");
    if cmd!(sh, "{program} {options...}").run().is_err() {
        bail!(
            "ski-fuzz found a problem (above; the input is saved under fuzz/artifacts/, and `cargo \
             xtask fuzz --target T --reproduce FILE` runs it again)"
        );
    }
    Ok(())
}
