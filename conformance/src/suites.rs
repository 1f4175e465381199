//! The registry of suites: one module per suite under `suites/`, each exporting its checks.
//!
//! # Adding a suite
//!
//! 1. Write the catalog `conformance/catalog/<suite>.toml` (format: `catalog/README.md`).
//! 2. Create `conformance/src/suites/<suite>.rs` (and `suites/<suite>/` for more modules) with
//!    `pub fn checks() -> Vec<Check>`.
//! 3. Declare the module (`pub mod <suite>;`) and add its entry to [`all`] at the bottom of
//!    this file.
//!
//! The coverage test (`conformance/tests/catalog.rs`) then fails until every catalog row has a
//! check and every check has a row.
//!
//! # Adding a row of ski's own decisions
//!
//! Where a system's document is silent or admits more and ski decides, the row goes to the
//! system's `-ski` suite, never to the document's suite: catalog `catalog/<system>-ski.toml`, row
//! id `<PREFIX>-SKI-NN` requiring `<system>-ski-extensions`, an ERRATA entry named in its `errata`,
//! and its check in `suites/<system>/ski.rs` (the one place for every system), which uses the
//! system's harness through `super::`. A system's first such row also adds `ski!(<system>)` to
//! [`all`], right after `document!(<system>)`, and a `[suites.<system>-ski]` section with
//! `extends = "<system>"` to the profiles that make the same decisions
//! (`conformance/targets/README.md`).
//!
//! # Adding a check
//!
//! A check is an `async fn(Ctx) -> CheckResult` registered under its catalog ID with a sentence on
//! how it checks the scenario (printed by `ski-conformance explain ID`):
//!
//! ```
//! use ski_conformance::{Check, CheckResult, Ctx, OrFail, ensure, ensure_eq};
//!
//! pub fn checks() -> Vec<Check> {
//!     vec![Check::new(
//!         "DEMO-01",
//!         "Starts the agent over stdio, sends one line and expects it echoed back.",
//!         demo_01,
//!     )]
//! }
//!
//! async fn demo_01(ctx: Ctx) -> CheckResult {
//!     ctx.require(ski_conformance::vocabulary::capability::STDIO)?; // skip unless the target declares it (catalog `requires` does too)
//!     let mut agent = ctx.spawn_target("agent", &[])?; // from the target profile
//!     agent.send_line("ping").await?; // recorded in the wire log
//!     let line = ctx
//!         .within("an answer line", agent.next_line())
//!         .await? // fail if nothing comes within the scenario's timeout
//!         .or_fail("an answer line")?; // the target's fault: an i/o error
//!     let line = line.or_fail("an answer line before end of output")?;
//!     ensure_eq!("ping", line.as_str(), "the echoed line");
//!     ensure!(agent.try_status().is_none(), "the agent keeps running");
//!     Ok(()) // the runner tears down every process and the temp dir
//! }
//! ```
//!
//! Rules for checks: talk to the target only through the profile ([`Ctx::command`](crate::Ctx::command),
//! [`Ctx::spawn_target`](crate::Ctx::spawn_target), [`Ctx::url`](crate::Ctx::url),
//! [`Ctx::spawn_listening`](crate::Ctx::spawn_listening)) and start every process with
//! [`Ctx::spawn`](crate::Ctx::spawn); compare wording through [`Ctx::text`](crate::Ctx::text) so a profile can override it; return a
//! [`Failure`](crate::Failure) (through `ensure!`, `ensure_eq!`, `fail!`, [`OrFail`](crate::OrFail))
//! when the target is at fault and let `?` turn harness errors into the `error` outcome; never
//! sleep for readiness.

use crate::check::Check;

/// One registered suite: its name (also its catalog's file stem) and its checks.
#[derive(Debug, Clone, Copy)]
pub struct Suite {
    /// The suite's name.
    pub name: &'static str,
    /// The function that lists its checks.
    pub checks: fn() -> Vec<Check>,
}

pub mod acp;
pub mod aof;
pub mod intercom;
pub mod kiro;
pub mod teams;

/// The suite of a system's document: named as the system's module, its checks that module's
/// `checks`.
macro_rules! document {
    ($system:ident) => {
        Suite {
            name: stringify!($system),
            checks: $system::checks,
        }
    };
}

/// The `<system>-ski` suite of ski's own decisions beside a system's document: always the
/// `checks` of the module `<system>::ski`, registered right after the document's suite.
macro_rules! ski {
    ($system:ident) => {
        Suite {
            name: concat!(stringify!($system), "-ski"),
            checks: $system::ski::checks,
        }
    };
}

/// Every registered suite, in the order of the list: one line per suite.
pub fn all() -> Vec<Suite> {
    vec![
        document!(acp),
        document!(aof),
        ski!(aof),
        document!(teams),
        ski!(teams),
        document!(kiro),
        ski!(kiro),
        document!(intercom),
        ski!(intercom),
    ]
}

#[cfg(test)]
mod tests {
    use super::all;

    #[test]
    fn every_ski_suite_follows_its_document_suite() {
        let names: Vec<&str> = all().iter().map(|suite| suite.name).collect();
        for (index, name) in names.iter().enumerate() {
            if let Some(system) = name.strip_suffix("-ski") {
                assert!(
                    index > 0 && names[index - 1] == system,
                    "{name} is registered right after {system}: {names:?}"
                );
            }
        }
    }
}
