//! The intercom server (`ski intercom`): bridges headless coding agents to Slack threads, after
//! `intercom-acp-server-matrix.md`. Operators start, steer, approve and stop agent sessions from
//! Slack; agents reach the server over MCP ([`mcp`]), or are spawned by it (ACP mode, through the
//! [`driver::AgentDriver`] seam).
//!
//! - [`config`]: the TOML file and its validation; tokens only from the environment.
//! - [`store`]: SQLite persistence (sessions, approvals, steering) and the schema bootstrap.
//! - [`vocab`]: the closed sets (statuses, risk levels, connectivity, modes, answers) as enums,
//!   stored in SQLite and written on the wire under their fixed names.
//! - [`hub`]: shared state, session threads (the first post's `ts` is the immutable `thread_ts`).
//! - [`slack`], [`socket`]: the Web API and Socket Mode through slack-morphism.
//! - [`acp`]: ACP mode, spawned agents on stdio (the stream dialect or standard ACP), stall
//!   detection and the offline queue.
//! - [`outbox`]: the ordered, bounded queue every post goes through (429s, retries).
//! - [`commands`], [`interactions`]: slash commands and button clicks, routed by channel and thread.
//! - [`blocks`]: the Block Kit the server posts.
//! - [`cli`]: startup, readiness and shutdown, hot reload of the workspace mapping.
//! - [`policy`]: the workspace auto-approve policy (`.intercom/settings.json`) of `auto_check`.
//! - [`redact`]: the log writer that scrubs the Slack tokens from every record.
//!
//! Decisions where the matrix contradicts itself or the upstream implementation are `E-INT-*`
//! entries in `conformance/ERRATA.md`.

pub mod acp;
pub mod blocks;
pub mod cli;
pub mod commands;
pub mod config;
pub mod driver;
pub mod hub;
pub mod interactions;
pub mod mcp;
pub mod outbox;
pub mod policy;
pub mod redact;
pub mod slack;
pub mod socket;
pub mod store;
pub mod vocab;
