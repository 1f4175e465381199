//! The agent-teams suite: one check per row of `catalog/teams.toml` (the 33 scenarios of
//! `agent-teams-bdd.md`), judged only through the adapter contract of
//! `conformance/targets/teams-adapter.md`: what the adapter prints, its exit codes, the files it
//! leaves under the teams root, and, where a row says so, the SQLite ledger opened read-only.
//!
//! - [`adapter`]: runs the profile's `adapter` command, one-shot or gated.
//! - [`ledger`]: the ledger as the suite may read it, and the write lock of TEAM-CC-01/02.
//! - [`xml`]: a strict reader of the injected `<teammate-message>` block.
//! - The checks, one module per feature: [`lifecycle`], [`tasks`], [`mailbox`], [`concurrency`]
//!   and [`security`].
//! - [`ski`]: the `teams-ski` suite, ski's decisions where the document is silent (E-TEAM-28).

pub mod adapter;
pub mod concurrency;
pub mod ledger;
pub mod lifecycle;
pub mod mailbox;
pub mod security;
pub mod ski;
pub mod tasks;
pub mod xml;

use crate::Check;

/// Every check of the suite.
pub fn checks() -> Vec<Check> {
    let mut checks = lifecycle::checks();
    checks.extend(tasks::checks());
    checks.extend(mailbox::checks());
    checks.extend(concurrency::checks());
    checks.extend(security::checks());
    checks
}
