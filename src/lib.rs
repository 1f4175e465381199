//! ski: reference implementations of agent protocols and the codecs they share.
//!
//! - [`jsonrpc`]: JSON-RPC 2.0 messages, NDJSON framing and the peer every protocol runs on.
//! - [`acp`]: Agent Client Protocol wire types and the method table.
//! - [`transport`]: child processes killed as a process group, and the wire log of every channel.
//! - [`aof`]: AOF/1 agent task protocol: envelopes, router, task store, events, scheduler.
//! - [`kiro`]: the foundation of a bot driving `kiro-cli acp`: config, provisioner, ACP client.
//! - [`intercom`]: the intercom server: Slack threads for agent sessions, MCP tools, SQLite.
//! - [`exit`]: exit codes and the error type every `ski` subcommand returns.
//! - [`cli`]: subcommands whose arguments are built only when used.

pub mod acp;
pub mod aof;
pub mod cli;
pub mod exit;
pub mod intercom;
pub mod jsonrpc;
pub mod kiro;
pub mod teams;
pub mod transport;
