//! ski-conformance: the scenario catalog, the engine that runs it against a target, and reports.
//!
//! - [`catalog`]: the scenario rows, loaded and validated from `conformance/catalog/*.toml`.
//! - [`check`]: what a check is, its outcomes, and the assertion helpers.
//! - [`context`]: the [`Ctx`] each check runs in (temp dir, processes, ports, wire log, target).
//! - [`target`]: target profiles (`conformance/targets/*.toml`).
//! - [`port`]: loopback ports with retry when a port is taken.
//! - [`select`]: `--suite`, `--id`, `--category` and `--shard` selection.
//! - [`runner`]: bounded parallel runs, cleanup, solo re-runs of unexpected failures.
//! - [`baseline`]: strict baselines of known failures.
//! - [`report`]: console, JUnit XML, `results.json` and `report.md`, and how much of a
//!   selection ran.
//! - [`pace`]: how many rows run at once without `-j`, from their measured CPU use.
//! - [`placed`]: files rows write outside their temp dirs, saved, serialised and put back.
//! - [`merge`]: `results.json` read back: shards merged into one report, baselines drafted.
//! - [`matrix`]: one selection against several targets, compared rows × targets.
//! - [`coverage`]: every catalog row has a check and every check a row.
//! - [`discover`]: what an ACP agent declares, found by starting it once.
//! - [`sqlite`]: a target's SQLite file, read through `ski-conformance-sqlite` (no SQLite linked).
//! - [`interrupt`]: SIGINT and SIGTERM: a run stops starting rows, ends its processes, reports.
//! - [`cli`]: the `ski-conformance` command line and its exit codes.
//! - [`vocabulary`]: the capabilities and settings a profile may name, checked before a run.
//! - [`suites`]: the registry of suites and how to add one (start there to write checks).

pub mod baseline;
pub mod catalog;
pub mod check;
pub mod cli;
pub mod context;
pub mod coverage;
pub mod discover;
pub mod interrupt;
pub mod matrix;
pub mod merge;
pub mod pace;
pub mod placed;
pub mod port;
pub mod report;
pub mod runner;
pub mod select;
pub mod setup;
pub mod sqlite;
pub mod suites;
pub mod target;
pub mod vocabulary;

pub use catalog::{Catalog, CatalogSet, Category, Level, Scenario, TimeoutClass};
pub use check::{Check, CheckError, CheckResult, Failure, OrFail, Outcome};
pub use context::{Ctx, CtxParts, Listening, Timeouts};
pub use target::Target;
