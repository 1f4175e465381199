//! ski extensions beyond ACP: `session/export`, `session/stop`, and the
//! `execution_state_update`, `retry_update` and `audit_update` session updates.

use serde::{Deserialize, Serialize};

use super::meta::{Empty, Extra, string_enum};

/// Params of `session/export` (needs `sessionCapabilities.export`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExportSessionRequest {
    /// The session.
    pub session_id: String,
    /// The export format; `jsonl` when absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub format: Option<String>,
    /// `_meta` and unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// Result of `session/export`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExportSessionResponse {
    /// The session.
    pub session_id: String,
    /// The format, e.g. `jsonl`.
    pub format: String,
    /// The MIME type, e.g. `application/x-ndjson`.
    pub mime_type: String,
    /// The export: a header line, then one line per transcript entry.
    pub content: String,
    /// `_meta` and unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// Params of `session/stop` (request or notification), handled like `session/cancel`.
pub type StopSessionRequest = super::session::SessionIdRequest;
/// Result of `session/stop`.
pub type StopSessionResponse = Empty;

/// `execution_state_update`: where a prompt is in its execution.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExecutionStateUpdate {
    /// The state.
    pub execution_state: ExecutionState,
    /// `_meta` and unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// The execution state of a prompt.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExecutionState {
    /// The state.
    pub state: ExecutionStateKind,
    /// The attempt, when retrying.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub attempt: Option<u32>,
    /// Why, when retrying or failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// `_meta` and unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

string_enum! {
    /// Execution states of a prompt.
    pub enum ExecutionStateKind {
        /// Accepted, not started.
        Queued = "queued",
        /// Running.
        Running = "running",
        /// Waiting for a tool.
        WaitingTool = "waiting_tool",
        /// Failed once, trying again.
        Retrying = "retrying",
        /// Finished.
        Completed = "completed",
        /// Failed for good.
        Failed = "failed",
        /// Cancelled.
        Cancelled = "cancelled",
        /// Ran out of time.
        TimedOut = "timed_out",
    }
}

/// `retry_update`: a prompt is being retried.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RetryUpdate {
    /// The retry.
    pub retry: RetryInfo,
    /// `_meta` and unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// One retry of a prompt.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RetryInfo {
    /// This attempt, from 1.
    pub attempt: u32,
    /// All attempts allowed, the first included.
    pub max_attempts: u32,
    /// Why the previous attempt failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// `_meta` and unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// `audit_update`: a permission policy decision.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AuditUpdate {
    /// The decision.
    pub audit: AuditInfo,
    /// `_meta` and unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// A permission policy decision.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AuditInfo {
    /// What was decided on.
    pub action: String,
    /// The decision.
    pub decision: String,
    /// Why.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// `_meta` and unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}
