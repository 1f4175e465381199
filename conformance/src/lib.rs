//! ski-conformance: the scenario catalog, the engine that runs it against a target, and reports.
//!
//! - [`catalog`]: the scenario rows, loaded and validated from `conformance/catalog/*.toml`.
//! - [`check`]: what a check is, its outcomes, and the assertion helpers.
//! - [`context`]: the [`Ctx`] each check runs in (temp dir, processes, ports, wire log, target).
//! - [`target`]: target profiles (`conformance/targets/*.toml`).
//! - [`port`]: loopback ports with retry when a port is taken.
//! - [`suites`]: the registry of suites and how to add one (start there to write checks).

pub mod catalog;
pub mod check;
pub mod context;
pub mod port;
pub mod suites;
pub mod target;

pub use catalog::{Catalog, CatalogSet, Category, Level, Scenario, TimeoutClass};
pub use check::{Check, CheckError, CheckResult, Failure, OrFail, Outcome};
pub use context::{Ctx, CtxParts, Listening, Timeouts};
pub use target::Target;
