//! The prompt turn: `session/prompt`, its stop reasons and token use, `session/cancel`, and the
//! protocol-level `$/cancel_request`.

use std::fmt;

use serde::de::{SeqAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize};

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
    #[serde(deserialize_with = "content_blocks")]
    pub prompt: Vec<ContentBlock>,
    /// `_meta` and unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// A prompt's blocks, with room for one made first: nearly every prompt has one block, and the
/// four a `Vec` makes room for at its first push (1.4 KB) are past the allocator's fast path.
fn content_blocks<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Vec<ContentBlock>, D::Error> {
    struct Blocks;

    impl<'de> Visitor<'de> for Blocks {
        type Value = Vec<ContentBlock>;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a sequence")
        }

        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
            let mut blocks = Vec::with_capacity(seq.size_hint().unwrap_or(1).clamp(1, 16));
            while let Some(block) = seq.next_element()? {
                blocks.push(block);
            }
            Ok(blocks)
        }
    }

    deserializer.deserialize_seq(Blocks)
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

#[cfg(test)]
mod tests {
    use super::*;

    fn decode(params: &str) -> Result<PromptRequest, String> {
        serde_json::from_str(params).map_err(|error| error.to_string())
    }

    #[test]
    fn prompts_of_any_length_decode_with_their_blocks_in_order() {
        for count in [0, 1, 3, 20] {
            let blocks: Vec<String> = (0..count)
                .map(|n| format!(r#"{{"type":"text","text":"b{n}"}}"#))
                .collect();
            let request = decode(&format!(
                r#"{{"sessionId":"s","prompt":[{}]}}"#,
                blocks.join(",")
            ))
            .expect("a prompt");
            let texts: Vec<_> = request
                .prompt
                .iter()
                .filter_map(ContentBlock::as_text)
                .collect();
            let expected: Vec<String> = (0..count).map(|n| format!("b{n}")).collect();
            assert_eq!(texts, expected);
        }
    }

    #[test]
    fn a_prompt_that_is_not_an_array_fails_as_a_sequence_would() {
        let error = decode(r#"{"sessionId":"s","prompt":"hi"}"#).unwrap_err();
        assert!(
            error.starts_with(r#"invalid type: string "hi", expected a sequence"#),
            "{error}"
        );
        let error = decode(r#"{"sessionId":"s"}"#).unwrap_err();
        assert!(error.starts_with("missing field `prompt`"), "{error}");
    }
}
