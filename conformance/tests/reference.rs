//! Every scenario of the reference target as its own test, for `cargo test` and `cargo nextest`
//! (libtest-mimic trials): `cargo test -p ski-conformance --test trials -- acp::WS-001`.
//!
//! The reference profile runs this workspace's binaries from the cargo target dir this test was
//! built into. When a binary the profile needs is missing or older than the sources, the test
//! builds them first with `cargo build --workspace --bins`; set `SKI_CONFORMANCE_NO_BUILD=1` to
//! only locate them. A skipped scenario shows as ignored.

use crate::binaries;

use std::path::PathBuf;
use std::sync::Arc;

use binaries::prepare_binaries;

use libtest_mimic::{Completion, Failed, Trial};
use ski_conformance::context::Timeouts;
use ski_conformance::coverage;
use ski_conformance::report::junit::details;
use ski_conformance::runner::{Planned, RunOptions, run_one};
use ski_conformance::{Outcome, Target, catalog, suites};

/// This module's trials (the root runs them with every other module's).
pub fn trials() -> Vec<Trial> {
    match every_row() {
        Ok(trials) => trials,
        Err(message) => vec![Trial::test("reference::setup", move || {
            Err(Failed::from(message.clone()))
        })],
    }
}

/// One trial per row of the catalog the reference profile selects.
fn every_row() -> Result<Vec<Trial>, String> {
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
        ..RunOptions::default()
    };
    ski::transport::child::adopt_orphans();
    let result = runtime.block_on(run_one(&planned, target, &options));
    match result.outcome {
        Outcome::Pass => Ok(Completion::Completed),
        Outcome::Skip => Ok(Completion::ignored_with(result.message.unwrap_or_default())),
        // The reference never needs set-up it refuses: a blocked row is as wrong as a failure.
        Outcome::Fail | Outcome::Blocked | Outcome::Error => Err(Failed::from(format!(
            "{} {}\n{}Wire log:\n{}",
            result.outcome.as_str().to_uppercase(),
            result.id,
            details(&result),
            result.wire_text()
        ))),
    }
}
