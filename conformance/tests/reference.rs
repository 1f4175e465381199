//! Every scenario of the reference target as its own test, for `cargo test` and `cargo nextest`
//! (`harness = false`, libtest-mimic): `cargo test -p ski-conformance --test reference -- WS-001`.
//!
//! The reference profile runs this workspace's binaries from the cargo target dir this test was
//! built into. When a binary the profile needs is missing or older than the sources, the test
//! builds them first with `cargo build --workspace --bins`; set `SKI_CONFORMANCE_NO_BUILD=1` to
//! only locate them. A skipped scenario shows as ignored.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use libtest_mimic::{Arguments, Completion, Failed, Trial};
use ski::transport::child::{ChildSpec, spawn};
use ski_conformance::context::Timeouts;
use ski_conformance::coverage;
use ski_conformance::report::junit::details;
use ski_conformance::runner::{Planned, RunOptions, run_one};
use ski_conformance::target::CommandTemplate;
use ski_conformance::{Outcome, Target, catalog, suites};

fn main() {
    let args = Arguments::from_args();
    let trials = match trials() {
        Ok(trials) => trials,
        Err(message) => vec![Trial::test("reference::setup", move || {
            Err(Failed::from(message.clone()))
        })],
    };
    libtest_mimic::run(&args, trials).exit();
}

fn trials() -> Result<Vec<Trial>, String> {
    let catalogs = catalog::builtin().map_err(|e| e.to_string())?;
    let target = Arc::new(Target::load("reference").map_err(|e| e.to_string())?);
    let checks: Vec<_> = coverage::registered(&suites::all())
        .into_iter()
        .flat_map(|s| s.checks)
        .collect();
    let selected: Vec<_> = catalogs
        .scenarios()
        .filter(|s| target.suite(&s.suite).is_some())
        .cloned()
        .collect();
    if selected.is_empty() {
        return Ok(Vec::new());
    }
    let bin_dir = Arc::new(std::sync::OnceLock::<Result<PathBuf, String>>::new());
    let multiplier = std::env::var("SKI_TIMEOUT_MULTIPLIER")
        .ok()
        .and_then(|v| v.parse::<f64>().ok())
        .unwrap_or(1.0);
    Ok(selected
        .into_iter()
        .map(|scenario| {
            let name = format!("{}::{}", scenario.suite, scenario.id);
            let planned = Planned {
                check: checks.iter().find(|c| c.id() == scenario.id).cloned(),
                scenario,
            };
            let target = Arc::clone(&target);
            let bin_dir = Arc::clone(&bin_dir);
            Trial::ignorable_test(name, move || {
                let bin_dir = bin_dir
                    .get_or_init(|| prepare_binaries(&target))
                    .clone()
                    .map_err(Failed::from)?;
                run_trial(planned, target, bin_dir, multiplier)
            })
        })
        .collect())
}

fn run_trial(
    planned: Planned,
    target: Arc<Target>,
    bin_dir: PathBuf,
    multiplier: f64,
) -> Result<Completion, Failed> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| Failed::from(format!("cannot start a runtime: {e}")))?;
    let options = RunOptions {
        jobs: 1,
        timeouts: Timeouts::new(multiplier),
        bin_dir,
        rerun: false,
        keep_temp: false,
        temp_root: None,
    };
    ski::transport::child::adopt_orphans();
    let result = runtime.block_on(run_one(&planned, target, &options));
    match result.outcome {
        Outcome::Pass => Ok(Completion::Completed),
        Outcome::Skip => Ok(Completion::ignored_with(result.message.unwrap_or_default())),
        Outcome::Fail | Outcome::Error => Err(Failed::from(format!(
            "{} {}\n{}Wire log:\n{}",
            result.outcome.as_str().to_uppercase(),
            result.id,
            details(&result),
            result.wire_text()
        ))),
    }
}

/// The cargo target profile dir this test binary lives in (`target/debug`).
fn profile_dir() -> Result<PathBuf, String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot locate the test binary: {e}"))?;
    // target/<profile>/deps/reference-<hash>
    exe.parent()
        .and_then(Path::parent)
        .map(Path::to_path_buf)
        .ok_or_else(|| format!("{} is not inside a cargo target dir", exe.display()))
}

/// The binaries the reference profile starts as `{bin_dir}/NAME`.
fn needed_binaries(target: &Target) -> Vec<String> {
    let mut names: Vec<String> = target
        .suites
        .values()
        .flat_map(|s| s.commands.values())
        .filter_map(|c: &CommandTemplate| c.words().ok())
        .flatten()
        .filter_map(|w| w.strip_prefix("{bin_dir}/").map(str::to_owned))
        .collect();
    names.sort();
    names.dedup();
    names
}

fn prepare_binaries(target: &Target) -> Result<PathBuf, String> {
    let bin_dir = profile_dir()?;
    let needed = needed_binaries(target);
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .ok_or("the package has no workspace root")?;
    let newest_source = newest_mtime(&root);
    let stale: Vec<&String> = needed
        .iter()
        .filter(|name| {
            let modified = std::fs::metadata(bin_dir.join(name)).and_then(|m| m.modified());
            match (modified, newest_source) {
                (Ok(built), Some(source)) => built < source,
                (Ok(_), None) => false,
                (Err(_), _) => true,
            }
        })
        .collect();
    if stale.is_empty() {
        return Ok(bin_dir);
    }
    let names: Vec<&str> = stale.iter().map(|s| s.as_str()).collect();
    if std::env::var_os("SKI_CONFORMANCE_NO_BUILD").is_some() {
        return Err(format!(
            "the reference binaries {} are missing or older than the sources in {}; run \
             `cargo build --workspace --bins` (or `cargo xtask conformance`)",
            names.join(", "),
            bin_dir.display()
        ));
    }
    build(&root, &bin_dir).map_err(|e| {
        format!(
            "the reference binaries {} are missing or stale and building them failed: {e}; run \
             `cargo build --workspace --bins` and retry",
            names.join(", ")
        )
    })?;
    Ok(bin_dir)
}

/// Runs `cargo build --workspace --bins` into the target dir this test was built into.
fn build(root: &Path, bin_dir: &Path) -> Result<(), String> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let profile = bin_dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "debug".to_owned());
    let target_dir = bin_dir.parent().ok_or("no target dir")?;
    let mut spec = ChildSpec::new("cargo", cargo)
        .args(["build", "--workspace", "--bins"])
        .env("CARGO_TARGET_DIR", target_dir)
        .cwd(root);
    if profile != "debug" {
        let name = if profile == "release" {
            "release"
        } else {
            profile.as_str()
        };
        spec = spec.arg("--profile").arg(name);
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    runtime.block_on(async move {
        let mut child = spawn(spec).map_err(|e| e.to_string())?;
        child.close_stdin();
        let mut output = String::new();
        while let Some((_, line)) = child.next_output_line().await {
            output.push_str(&line);
            output.push('\n');
        }
        let status = child.wait().await.map_err(|e| e.to_string())?;
        if status.success() {
            Ok(())
        } else {
            Err(format!("cargo build ended with {status}:\n{output}"))
        }
    })
}

/// The newest modification time of the workspace's sources (Rust files and manifests).
fn newest_mtime(root: &Path) -> Option<SystemTime> {
    let mut newest: Option<SystemTime> = None;
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let name = entry.file_name();
            let name = name.to_string_lossy();
            if name.starts_with('.') || name == "target" {
                continue;
            }
            if path.is_dir() {
                stack.push(path);
            } else if (name.ends_with(".rs") || name == "Cargo.toml" || name == "Cargo.lock")
                && let Ok(modified) = entry.metadata().and_then(|m| m.modified())
            {
                newest = Some(newest.map_or(modified, |n| n.max(modified)));
            }
        }
    }
    // File systems with coarse time stamps: treat sources up to a second newer as equal.
    newest.map(|n| n.checked_sub(Duration::from_secs(1)).unwrap_or(n))
}
