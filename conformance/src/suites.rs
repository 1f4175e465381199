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
//!     ctx.require("stdio")?; // skip unless the target declares it (catalog `requires` does too)
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
pub mod intercom_ski;
pub mod kiro;
pub mod teams;

/// Every registered suite, in the order of the list: one line per suite.
pub fn all() -> Vec<Suite> {
    vec![
        Suite {
            name: "acp",
            checks: acp::checks,
        },
        Suite {
            name: "aof",
            checks: aof::checks,
        },
        Suite {
            name: "aof-ski",
            checks: aof::extensions::checks,
        },
        Suite {
            name: "teams",
            checks: teams::checks,
        },
        Suite {
            name: "teams-ski",
            checks: teams::ski::checks,
        },
        Suite {
            name: "kiro",
            checks: kiro::checks,
        },
        Suite {
            name: "kiro-ski",
            checks: kiro::decisions::checks,
        },
        Suite {
            name: "intercom",
            checks: intercom::checks,
        },
        Suite {
            name: "intercom-ski",
            checks: intercom_ski::checks,
        },
    ]
}
