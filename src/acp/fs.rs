//! File system methods the agent calls on the client: `fs/read_text_file` and
//! `fs/write_text_file`, each gated by its client capability.

use serde::{Deserialize, Serialize};

use super::meta::{Empty, Extra};

/// Params of `fs/read_text_file`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReadTextFileRequest {
    /// The session.
    pub session_id: String,
    /// Absolute path.
    pub path: String,
    /// 1-based first line to read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<u32>,
    /// Most lines to read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limit: Option<u32>,
    /// `_meta` and unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// Result of `fs/read_text_file`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReadTextFileResponse {
    /// The text read, including unsaved editor changes.
    pub content: String,
    /// `_meta` and unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// Params of `fs/write_text_file`; the client creates a missing file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WriteTextFileRequest {
    /// The session.
    pub session_id: String,
    /// Absolute path.
    pub path: String,
    /// The whole new text.
    pub content: String,
    /// `_meta` and unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// Result of `fs/write_text_file`.
pub type WriteTextFileResponse = Empty;
