//! Session lifecycle methods: `session/new`, `load`, `resume`, `fork`, `list`, `delete`,
//! `close`, and the unstable `archive`, `unarchive`, `status` and `set_title`.

use serde::{Deserialize, Serialize};

use super::config::{SessionConfigOption, SessionModeState, SessionModelState};
use super::content::ContentBlock;
use super::mcp::McpServer;
use super::meta::{Empty, Extra, Nullable, string_enum};

/// Params of `session/new`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NewSessionRequest {
    /// Absolute working directory.
    pub cwd: String,
    /// MCP servers to connect to; required, possibly empty.
    pub mcp_servers: Vec<McpServer>,
    /// More absolute directories the session may use.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub additional_directories: Option<Vec<String>>,
    /// Unstable: a system prompt.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub system_prompt: Option<SystemPrompt>,
    /// `_meta` and unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

impl NewSessionRequest {
    /// A session in `cwd` with no MCP servers.
    pub fn new(cwd: impl Into<String>) -> Self {
        Self {
            cwd: cwd.into(),
            mcp_servers: Vec::new(),
            additional_directories: None,
            system_prompt: None,
            extra: Extra::new(),
        }
    }
}

/// Result of `session/new`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NewSessionResponse {
    /// The new session.
    pub session_id: String,
    /// Modes, if the agent has them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub modes: Option<SessionModeState>,
    /// Config options, if the agent has them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub config_options: Option<Vec<SessionConfigOption>>,
    /// Legacy model selection.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub models: Option<SessionModelState>,
    /// `_meta` and unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

impl NewSessionResponse {
    /// A result with only the session id.
    pub fn new(session_id: impl Into<String>) -> Self {
        Self {
            session_id: session_id.into(),
            modes: None,
            config_options: None,
            models: None,
            extra: Extra::new(),
        }
    }
}

/// Unstable: a system prompt for session setup.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SystemPrompt {
    /// How it combines with the agent's own.
    pub mode: SystemPromptMode,
    /// The prompt.
    pub content: Vec<ContentBlock>,
    /// `_meta` and unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

string_enum! {
    /// How a system prompt combines with the agent's own (open).
    pub enum SystemPromptMode {
        /// Added after the agent's own.
        Append = "append",
        /// Replaces the agent's own.
        Override = "override",
    }
}

/// Params of `session/load`. The agent replays the history as `session/update` before it
/// answers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LoadSessionRequest {
    /// The session to load.
    pub session_id: String,
    /// Absolute working directory.
    pub cwd: String,
    /// MCP servers to connect to.
    pub mcp_servers: Vec<McpServer>,
    /// More absolute directories.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub additional_directories: Option<Vec<String>>,
    /// Unstable: a system prompt.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub system_prompt: Option<SystemPrompt>,
    /// `_meta` and unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// Result of `session/load` and of `session/resume`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionStateResponse {
    /// Modes, if the agent has them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub modes: Option<SessionModeState>,
    /// Config options, if the agent has them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub config_options: Option<Vec<SessionConfigOption>>,
    /// Legacy model selection.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub models: Option<SessionModelState>,
    /// `_meta` and unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// Result of `session/load`.
pub type LoadSessionResponse = SessionStateResponse;
/// Result of `session/resume`.
pub type ResumeSessionResponse = SessionStateResponse;

/// Params of `session/resume` (no history replay) and of the unstable `session/fork`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResumeSessionRequest {
    /// The session to resume or fork.
    pub session_id: String,
    /// Absolute working directory.
    pub cwd: String,
    /// MCP servers to connect to.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mcp_servers: Option<Vec<McpServer>>,
    /// More absolute directories.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub additional_directories: Option<Vec<String>>,
    /// Unstable: a system prompt.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub system_prompt: Option<SystemPrompt>,
    /// `_meta` and unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// Params of the unstable `session/fork`.
pub type ForkSessionRequest = ResumeSessionRequest;
/// Result of the unstable `session/fork`: the new session, like `session/new`.
pub type ForkSessionResponse = NewSessionResponse;

/// Params of `session/list`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListSessionsRequest {
    /// Only sessions in this directory.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// Where to continue; from a previous `nextCursor`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cursor: Option<String>,
    /// Unstable: which archived sessions to include.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub archived: Option<ArchiveFilter>,
    /// `_meta` and unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

string_enum! {
    /// Unstable: which archived sessions `session/list` includes (open).
    pub enum ArchiveFilter {
        /// Leave them out.
        Exclude = "exclude",
        /// Include them.
        Include = "include",
        /// Only them.
        Only = "only",
    }
}

/// Result of `session/list`. An absent (or `null`) `nextCursor` means the last page.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListSessionsResponse {
    /// One page of sessions.
    pub sessions: Vec<SessionInfo>,
    /// The cursor of the next page.
    #[serde(default, skip_serializing_if = "Nullable::is_absent")]
    pub next_cursor: Nullable<String>,
    /// `_meta` and unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// One entry of `session/list`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionInfo {
    /// The session.
    pub session_id: String,
    /// Its working directory.
    pub cwd: String,
    /// Its extra directories.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub additional_directories: Option<Vec<String>>,
    /// Its title.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// When it last changed (ISO 8601).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub updated_at: Option<String>,
    /// Unstable: whether it is archived.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub archived: Option<bool>,
    /// ski extension: the session it was forked from.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parent_session_id: Option<String>,
    /// ski extension: how many transcript entries it has.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message_count: Option<u64>,
    /// `_meta` and unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// Params of every method that names only a session: `session/delete`, `session/close`, the
/// unstable `session/archive`, `session/unarchive`, `session/status`, and the ski
/// `session/stop`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionIdRequest {
    /// The session.
    pub session_id: String,
    /// `_meta` and unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

impl SessionIdRequest {
    /// Params naming `session_id`.
    pub fn new(session_id: impl Into<String>) -> Self {
        Self {
            session_id: session_id.into(),
            extra: Extra::new(),
        }
    }
}

/// Params of `session/delete`; deleting an unknown session should succeed.
pub type DeleteSessionRequest = SessionIdRequest;
/// Result of `session/delete`.
pub type DeleteSessionResponse = Empty;
/// Params of `session/close`: cancel work and free the session.
pub type CloseSessionRequest = SessionIdRequest;
/// Result of `session/close`.
pub type CloseSessionResponse = Empty;

/// Result of the unstable `session/status`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionStatusResponse {
    /// The status.
    pub status: SessionStatus,
    /// `_meta` and unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

string_enum! {
    /// Unstable: whether a session is loaded (open).
    pub enum SessionStatus {
        /// Loaded in the agent.
        Open = "open",
        /// Stored, not loaded.
        Saved = "saved",
    }
}

/// Params of the unstable `session/set_title`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SetSessionTitleRequest {
    /// The session.
    pub session_id: String,
    /// The new title.
    pub title: String,
    /// `_meta` and unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// Result of the unstable `session/set_title`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SetSessionTitleResponse {
    /// The title in effect.
    pub title: String,
    /// `_meta` and unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}
