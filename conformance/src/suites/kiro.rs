//! The kiro suite: one check per row of `catalog/kiro.toml` (the rules and named tests of
//! `kiro-unit1-business-rules.md`), judged through the adapter contract of
//! `conformance/targets/kiro-adapter.md` with `ski-mock-agent` on `PATH` as `kiro-cli`.
//!
//! - [`harness`]: the scenario's template, home, `kiro-cli` stand-in, adapter runs, transcripts.
//! - [`config`]: BR-01, BR-02 and the configuration tests.
//! - [`provision`]: BR-03, BR-04 and the provisioner tests.
//! - [`wire`]: BR-05 and the JSON-RPC format tests, from the transcript.
//! - [`state`]: BR-06 and the integration tests.
//! - [`streaming`]: BR-07 and BR-08.
//! - [`ski`]: the `kiro-ski` suite, ski's decisions beyond the document (KIRO-SKI-*).

pub mod config;
pub mod harness;
pub mod provision;
pub mod ski;
pub mod state;
pub mod streaming;
pub mod wire;

use crate::Check;

/// Every check of the suite.
pub fn checks() -> Vec<Check> {
    let mut checks = config::checks();
    checks.extend(provision::checks());
    checks.extend(wire::checks());
    checks.extend(state::checks());
    checks.extend(streaming::checks());
    checks
}
