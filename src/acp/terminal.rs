//! Terminal methods the agent calls on the client (`terminal/create`, `output`,
//! `wait_for_exit`, `kill`, `release`), all gated by the client's `terminal` capability.

use serde::{Deserialize, Serialize};

use super::mcp::EnvVariable;
use super::meta::{Empty, Extra, Nullable};

/// Params of `terminal/create`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CreateTerminalRequest {
    /// The session.
    pub session_id: String,
    /// The command to run.
    pub command: String,
    /// Its arguments.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub args: Option<Vec<String>>,
    /// Environment variables.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub env: Option<Vec<EnvVariable>>,
    /// Absolute working directory.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// Most output bytes to keep; older output is dropped first.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output_byte_limit: Option<u64>,
    /// `_meta` and unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// Result of `terminal/create`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CreateTerminalResponse {
    /// The new terminal.
    pub terminal_id: String,
    /// `_meta` and unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// Params of `terminal/output`, `terminal/wait_for_exit`, `terminal/kill` and
/// `terminal/release`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TerminalRequest {
    /// The session.
    pub session_id: String,
    /// The terminal.
    pub terminal_id: String,
    /// `_meta` and unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// Params of `terminal/output`.
pub type TerminalOutputRequest = TerminalRequest;
/// Params of `terminal/wait_for_exit`.
pub type WaitForTerminalExitRequest = TerminalRequest;
/// Params of `terminal/kill`; the terminal stays valid until released.
pub type KillTerminalRequest = TerminalRequest;
/// Params of `terminal/release`; the agent releases every terminal it creates.
pub type ReleaseTerminalRequest = TerminalRequest;
/// Result of `terminal/kill`.
pub type KillTerminalResponse = Empty;
/// Result of `terminal/release`.
pub type ReleaseTerminalResponse = Empty;

/// Result of `terminal/output`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TerminalOutputResponse {
    /// The output kept so far.
    pub output: String,
    /// Whether older output was dropped.
    pub truncated: bool,
    /// How the command ended, once it has.
    #[serde(default, skip_serializing_if = "Nullable::is_absent")]
    pub exit_status: Nullable<TerminalExitStatus>,
    /// `_meta` and unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// How a command ended; also the result of `terminal/wait_for_exit`. Peers often write
/// `"exitCode": null` for a signalled process, so `null` is kept apart from absent.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TerminalExitStatus {
    /// The exit code, if it exited.
    #[serde(default, skip_serializing_if = "Nullable::is_absent")]
    pub exit_code: Nullable<u32>,
    /// The signal, if one ended it.
    #[serde(default, skip_serializing_if = "Nullable::is_absent")]
    pub signal: Nullable<String>,
    /// `_meta` and unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// Result of `terminal/wait_for_exit`.
pub type WaitForTerminalExitResponse = TerminalExitStatus;
