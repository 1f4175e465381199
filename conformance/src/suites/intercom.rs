//! The intercom suite: one check per row of `catalog/intercom.toml` (rows of
//! `intercom-acp-server-matrix.md` for startup, MCP mode, workspaces, threads, routing and
//! persistence). A check sees the target only as the profile starts it (`server`,
//! `server_mode`), through the fake Slack it is pointed at, MCP clients on the endpoint its
//! readiness line names, its SQLite file opened read-only, its log and its exit code.
//!
//! - [`harness`]: the fake Slack, the config from the profile's templates, the target process.
//! - [`profile`]: the knobs a profile sets for a build that is not the reference.
//! - [`slack_hosts`] and [`netns`]: `slack = "slack-hosts"`, for a build that calls Slack at its
//!   own host names (the fake over TLS, the target inside a namespace of the harness).
//! - [`agents`]: ACP mode's spawned `ski-mock-agent`s, driven by session over one control
//!   socket, and the dialects a row runs in.
//! - The checks: [`startup`] (S001–S007), [`clearance`] (S008, S009), [`lifecycle`]
//!   (S010–S026), [`workspaces`]
//!   (S027–S035), [`threads`] (S036–S042), [`routing`] (S043–S048), [`stream`] (S049–S058), [`stall`]
//!   (S059–S068), [`persistence`]
//!   (S069–S072).
//! - [`ski`]: the `intercom-ski` suite, ski's decisions beyond the matrix (INT-SKI-*).

pub mod agents;
pub mod clearance;
pub mod harness;
pub mod lifecycle;
pub mod netns;
pub mod persistence;
pub mod profile;
pub mod refusal;
pub mod routing;
pub mod ski;
pub mod slack_hosts;
pub mod slack_record;
pub mod stall;
pub mod startup;
pub mod stream;
pub mod threads;
pub mod workspaces;

use crate::Check;

/// Every check of the suite.
pub fn checks() -> Vec<Check> {
    let mut checks = startup::checks();
    checks.extend(clearance::checks());
    checks.extend(lifecycle::checks());
    checks.extend(workspaces::checks());
    checks.extend(threads::checks());
    checks.extend(routing::checks());
    checks.extend(stream::checks());
    checks.extend(stall::checks());
    checks.extend(persistence::checks());
    checks
}
