//! The AOF suite: one check per row of `catalog/aof.toml` (the scenarios of
//! `aof-protocols-bdd.md`), judged only through the adapter contract of
//! `conformance/targets/aof-adapter.md`: what the adapter prints, its exit codes, the files it
//! leaves in the scenario's data dir and its event log.
//!
//! - [`adapter`]: runs the profile's `adapter` command with the adapter's own arguments.
//! - [`message`]: envelope and payload builders.
//! - [`fixture`]: the Given of a scenario (tasks, run results).
//! - [`disk`]: task files, companion directories and artifacts read from the data dir.
//! - [`events`]: the event log and assertions on it.
//! - [`delivery`]: one message routed, with its report and the events it logged.
//! - [`expect`]: assertions on validation and route reports, run artifacts and schemas.
//! - The checks, one module per part of the document: [`schemas`] and [`run_artifacts`]
//!   (TASK-057), [`parsing`] (TASK-058), [`completion`] (TASK-059), [`handoff`] (TASK-060),
//!   [`recovery`] (TASK-061) and [`cross_cutting`].
//! - [`ski`]: the `aof-ski` suite, ski's outputs beyond the document (AOF-SKI-*).

pub mod adapter;
pub mod completion;
pub mod cross_cutting;
pub mod delivery;
pub mod disk;
pub mod events;
pub mod expect;
pub mod fixture;
pub mod handoff;
pub mod message;
pub mod parsing;
pub mod recovery;
pub mod run_artifacts;
pub mod schemas;
pub mod ski;

use crate::Check;

/// Every check of the suite.
pub fn checks() -> Vec<Check> {
    let mut checks = schemas::checks();
    checks.extend(run_artifacts::checks());
    checks.extend(parsing::checks());
    checks.extend(completion::checks());
    checks.extend(handoff::checks());
    checks.extend(recovery::checks());
    checks.extend(cross_cutting::checks());
    checks
}
