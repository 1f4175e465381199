//! The prompt turn: `session/prompt`, its stop reasons and token use, `session/cancel`, and the
//! protocol-level `$/cancel_request`.

use serde::{Deserialize, Serialize};

use super::content::ContentBlock;
use super::meta::{Extra, string_enum};
use crate::jsonrpc::RequestId;

/// Params of `session/prompt`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PromptRequest {
    /// The session.
    pub session_id: String,
    /// The user's message.
    pub prompt: Vec<ContentBlock>,
    /// `_meta` and unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

impl PromptRequest {
    /// A prompt of one text block.
    pub fn text(session_id: impl Into<String>, text: impl Into<String>) -> Self {
        Self {
            session_id: session_id.into(),
            prompt: vec![ContentBlock::text(text)],
            extra: Extra::new(),
        }
    }
}

/// Result of `session/prompt`; it ends the turn.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PromptResponse {
    /// Why the turn ended.
    pub stop_reason: StopReason,
    /// Unstable: token use of the turn.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    /// `_meta` and unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

impl PromptResponse {
    /// A result with only a stop reason.
    pub fn new(stop_reason: StopReason) -> Self {
        Self {
            stop_reason,
            usage: None,
            extra: Extra::new(),
        }
    }
}

string_enum! {
    /// Why a prompt turn ended. A cancelled turn is a result, not an error.
    pub enum StopReason {
        /// The model finished.
        EndTurn = "end_turn",
        /// The token limit was reached.
        MaxTokens = "max_tokens",
        /// The limit of model requests in one turn was reached.
        MaxTurnRequests = "max_turn_requests",
        /// The model refused.
        Refusal = "refusal",
        /// The client cancelled the turn.
        Cancelled = "cancelled",
    }
}

/// Unstable: token use of a turn.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Usage {
    /// All tokens.
    pub total_tokens: u64,
    /// Input tokens.
    pub input_tokens: u64,
    /// Output tokens.
    pub output_tokens: u64,
    /// Reasoning tokens.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub thought_tokens: Option<u64>,
    /// Tokens read from cache.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cached_read_tokens: Option<u64>,
    /// Tokens written to cache.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cached_write_tokens: Option<u64>,
    /// `_meta` and unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// Params of `session/cancel` (client to agent notification).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CancelNotification {
    /// The session whose turn to cancel.
    pub session_id: String,
    /// `_meta` and unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// Params of `$/cancel_request` (either direction). The receiver still answers the request,
/// with its result or with error -32800.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CancelRequestNotification {
    /// The id of the request to cancel, as its sender wrote it.
    pub request_id: RequestId,
    /// `_meta` and unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}
