//! ski: reference implementations of agent protocols and the codecs they share.
//!
//! Always there:
//! - [`jsonrpc`]: JSON-RPC 2.0 messages, NDJSON framing and the peer every protocol runs on.
//! - [`transport`]: child processes killed as a process group, and the wire log of every channel.
//! - [`storage`]: atomic file replacement and cross-process file locks.
//! - [`exit`]: exit codes and the error type every `ski` subcommand returns.
//! - [`cli`]: subcommands whose arguments are built only when used.
//!
//! One Cargo feature per system (all on by default):
//! - `acp` → [`acp`]: Agent Client Protocol wire types, the method table, agent and client.
//! - `aof` → [`aof`]: AOF/1 agent task protocol: envelopes, router, task store, events, scheduler.
//! - `teams` → [`teams`]: agent teams: members, JSONL inboxes and the SQLite task ledger.
//! - `kiro` → [`kiro`]: the foundation of a bot driving `kiro-cli acp`: config, provisioner, client.
//! - `intercom` → [`intercom`]: the intercom server: Slack threads for agent sessions, MCP tools.

#[cfg(feature = "acp")]
pub mod acp;
#[cfg(feature = "aof")]
pub mod aof;
pub mod cli;
pub mod exit;
#[cfg(feature = "intercom")]
pub mod intercom;
pub mod jsonrpc;
#[cfg(feature = "kiro")]
pub mod kiro;
pub mod storage;
#[cfg(feature = "teams")]
pub mod teams;
pub mod transport;
