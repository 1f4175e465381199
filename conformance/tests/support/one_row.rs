//! One catalog row run alone against a target profile, as the runner runs it (one job, scale 1,
//! no re-run), for tests that judge rows against stand-in adapters. Each program's root declares
//! it, next to `binaries.rs`.

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use ski_conformance::context::Timeouts;
use ski_conformance::runner::{Planned, RunOptions, ScenarioResult, run_one};
use ski_conformance::{Target, catalog, coverage, suites};

use crate::binaries;

/// Runs row `id` against the target `target` makes from the binaries' directory and the
/// reference profile (which it may return as it is).
pub fn run_row(
    id: &str,
    target: impl FnOnce(&Path, Target) -> Result<Target, String>,
) -> Result<ScenarioResult, String> {
    let catalogs = catalog::builtin().map_err(|e| e.to_string())?;
    let scenario = catalogs
        .scenarios()
        .find(|s| s.id == id)
        .cloned()
        .ok_or_else(|| format!("no row {id}"))?;
    let reference = Target::load("reference").map_err(|e| e.to_string())?;
    let bin_dir = bin_dir(&reference)?;
    let target = Arc::new(target(&bin_dir, reference)?);
    let check = coverage::registered(&suites::all())
        .into_iter()
        .flat_map(|s| s.checks)
        .find(|c| c.id() == id);
    let planned = Planned { check, scenario };
    let options = RunOptions {
        jobs: 1,
        timeouts: Timeouts::new(1.0),
        bin_dir,
        rerun: false,
        keep_temp: false,
        temp_root: None,
        ..RunOptions::default()
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start a runtime: {e}"))?;
    ski::transport::child::adopt_orphans();
    Ok(runtime.block_on(run_one(&planned, target, &options)))
}

/// The reference binaries' directory, built (when stale) once per test process: every row of a
/// test binary runs against the same build.
fn bin_dir(reference: &Target) -> Result<PathBuf, String> {
    static BIN_DIR: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    BIN_DIR
        .get_or_init(|| binaries::prepare_binaries(reference))
        .clone()
}
