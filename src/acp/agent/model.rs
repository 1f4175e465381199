//! The deterministic echo back end: its reply is the text of the prompt. Switches make an
//! attempt take time, hold until the turn is stopped, or fail, so that every path of a turn can
//! be driven from outside.
//!
//! The switches come from the agent's [`EchoConfig`] and can be overridden per prompt with
//! [`PromptDirectives`] under the prompt request's `_meta.ski`.

use std::time::Duration;

use serde::Deserialize;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::config::{EchoConfig, ToolCallSpec};
use crate::acp::ContentBlock;

/// Per-prompt overrides of the echo back end, read from `_meta.ski` of `session/prompt` params,
/// e.g. `{"_meta": {"ski": {"delayMs": 200, "failAttempts": 1, "toolCalls": ["read:a.txt"]}}}`
/// or `{"_meta": {"ski": {"floodChunks": 100000}}}` (the reply sent as that many chunks).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PromptDirectives {
    /// How long each attempt takes, in milliseconds.
    pub delay_ms: Option<u64>,
    /// Whether each attempt runs until the turn is stopped.
    pub hold: Option<bool>,
    /// How many attempts fail before one succeeds.
    pub fail_attempts: Option<u32>,
    /// The tool calls of this turn, in the syntax of [`ToolCallSpec`].
    pub tool_calls: Option<Vec<String>>,
    /// How many times the reply's `agent_message_chunk` is sent (at least 1): a notification
    /// flood for benchmarks.
    pub flood_chunks: Option<u32>,
    /// Whether the turn makes a tool call that runs until it is cancelled.
    pub hold_tool_call: Option<bool>,
}

impl PromptDirectives {
    /// Reads the directives from a `_meta` object; absent directives are the defaults.
    pub fn from_meta(meta: Option<&serde_json::Map<String, Value>>) -> Result<Self, String> {
        match meta.and_then(|meta| meta.get("ski")) {
            None | Some(Value::Null) => Ok(Self::default()),
            Some(value) => serde_json::from_value(value.clone())
                .map_err(|error| format!("invalid _meta.ski prompt directives: {error}")),
        }
    }

    /// The plan of a turn: the configured echo behaviour with these overrides applied.
    pub fn apply(&self, base: &EchoConfig) -> Result<EchoConfig, String> {
        let mut plan = base.clone();
        if let Some(delay) = self.delay_ms {
            plan.delay = Duration::from_millis(delay);
        }
        if let Some(hold) = self.hold {
            plan.hold = hold;
        }
        if let Some(hold) = self.hold_tool_call {
            plan.hold_tool_call = hold;
        }
        if let Some(fail) = self.fail_attempts {
            plan.fail_attempts = fail;
        }
        if let Some(calls) = &self.tool_calls {
            plan.tool_calls = calls
                .iter()
                .map(|call| call.parse::<ToolCallSpec>())
                .collect::<Result<_, _>>()?;
        }
        if let Some(chunks) = self.flood_chunks {
            if chunks == 0 {
                return Err(
                    "invalid _meta.ski prompt directives: floodChunks must be at least 1"
                        .to_owned(),
                );
            }
            plan.reply_chunks = chunks;
        }
        Ok(plan)
    }
}

/// Why a model attempt did not produce the reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AttemptError {
    /// The turn was stopped (cancelled or timed out) during the attempt.
    Stopped,
    /// The attempt failed (an injected failure); it may be retried.
    Failed(String),
}

/// Runs attempt number `attempt` (from 1) of the echo back end.
pub async fn attempt(
    plan: &EchoConfig,
    attempt: u32,
    stop: &CancellationToken,
) -> Result<(), AttemptError> {
    if stop.is_cancelled() {
        return Err(AttemptError::Stopped);
    }
    if !plan.delay.is_zero() {
        tokio::select! {
            biased;
            () = stop.cancelled() => return Err(AttemptError::Stopped),
            () = tokio::time::sleep(plan.delay) => {}
        }
    }
    if plan.hold {
        stop.cancelled().await;
        return Err(AttemptError::Stopped);
    }
    if attempt <= plan.fail_attempts {
        return Err(AttemptError::Failed(format!(
            "echo back end failed on attempt {attempt} (injected failure {attempt} of {})",
            plan.fail_attempts
        )));
    }
    Ok(())
}

/// The reply to a prompt: its text blocks joined by newlines.
pub fn reply(prompt: &[ContentBlock]) -> String {
    let texts: Vec<&str> = prompt.iter().filter_map(ContentBlock::as_text).collect();
    if texts.is_empty() {
        return "(the prompt had no text)".to_owned();
    }
    texts.join("\n")
}

/// A readable rendering of a prompt for exports and titles: text as it is, other blocks as a
/// short bracketed description.
pub fn describe(prompt: &[ContentBlock]) -> String {
    let parts: Vec<String> = prompt
        .iter()
        .map(|block| match block {
            ContentBlock::Text(text) => text.text.clone(),
            ContentBlock::Image(image) => format!("[image {}]", image.mime_type),
            ContentBlock::Audio(audio) => format!("[audio {}]", audio.mime_type),
            ContentBlock::ResourceLink(link) => format!("[resource_link {}]", link.uri),
            ContentBlock::Resource(_) => "[resource]".to_owned(),
            ContentBlock::Unknown(value) => format!(
                "[{}]",
                value
                    .get("type")
                    .and_then(Value::as_str)
                    .unwrap_or("unknown")
            ),
        })
        .collect();
    parts.join("\n")
}

/// A session title derived from a prompt: its first non-empty line, at most 60 characters.
pub fn title(prompt: &[ContentBlock]) -> String {
    let text = describe(prompt);
    let line = text
        .lines()
        .map(str::trim)
        .find(|line| !line.is_empty())
        .unwrap_or("Untitled session");
    let mut title: String = line.chars().take(60).collect();
    if line.chars().count() > 60 {
        title.push('…');
    }
    title
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[tokio::test]
    async fn attempts_fail_the_configured_number_of_times() {
        let plan = EchoConfig {
            fail_attempts: 2,
            ..EchoConfig::default()
        };
        let stop = CancellationToken::new();
        assert!(matches!(
            attempt(&plan, 1, &stop).await,
            Err(AttemptError::Failed(_))
        ));
        assert!(matches!(
            attempt(&plan, 2, &stop).await,
            Err(AttemptError::Failed(_))
        ));
        assert_eq!(attempt(&plan, 3, &stop).await, Ok(()));
    }

    #[tokio::test(start_paused = true)]
    async fn hold_ends_only_when_stopped() {
        let plan = EchoConfig {
            hold: true,
            ..EchoConfig::default()
        };
        let stop = CancellationToken::new();
        let held = tokio::spawn({
            let stop = stop.clone();
            async move { attempt(&plan, 1, &stop).await }
        });
        tokio::time::sleep(Duration::from_secs(3600)).await;
        assert!(!held.is_finished());
        stop.cancel();
        assert_eq!(held.await.unwrap(), Err(AttemptError::Stopped));
    }

    #[test]
    fn directives_override_the_defaults_and_reject_unknown_keys() {
        let meta = json!({"ski": {"delayMs": 5, "failAttempts": 1, "toolCalls": ["read:a"]}});
        let directives = PromptDirectives::from_meta(meta.as_object()).unwrap();
        let plan = directives.apply(&EchoConfig::default()).unwrap();
        assert_eq!(plan.delay, Duration::from_millis(5));
        assert_eq!(plan.fail_attempts, 1);
        assert_eq!(plan.tool_calls.len(), 1);
        let bad = json!({"ski": {"holdd": true}});
        assert!(PromptDirectives::from_meta(bad.as_object()).is_err());
        let bad_tool = PromptDirectives {
            tool_calls: Some(vec!["x".into()]),
            ..Default::default()
        };
        assert!(bad_tool.apply(&EchoConfig::default()).is_err());
    }

    #[test]
    fn flood_chunks_repeat_the_reply_and_must_be_positive() {
        let meta = json!({"ski": {"floodChunks": 3}});
        let directives = PromptDirectives::from_meta(meta.as_object()).unwrap();
        assert_eq!(
            directives
                .apply(&EchoConfig::default())
                .unwrap()
                .reply_chunks,
            3
        );
        let none = PromptDirectives::default()
            .apply(&EchoConfig::default())
            .unwrap();
        assert_eq!(none.reply_chunks, 1);
        let zero = json!({"ski": {"floodChunks": 0}});
        let error = PromptDirectives::from_meta(zero.as_object())
            .unwrap()
            .apply(&EchoConfig::default())
            .unwrap_err();
        assert!(error.contains("at least 1"), "{error}");
    }

    #[test]
    fn reply_and_title_come_from_the_text() {
        let prompt = vec![
            ContentBlock::text("hello"),
            serde_json::from_value(
                json!({"type": "image", "data": "AA==", "mimeType": "image/png"}),
            )
            .unwrap(),
            ContentBlock::text("world"),
        ];
        assert_eq!(reply(&prompt), "hello\nworld");
        assert_eq!(describe(&prompt), "hello\n[image image/png]\nworld");
        assert_eq!(title(&prompt), "hello");
        let long = vec![ContentBlock::text("x".repeat(100))];
        assert_eq!(title(&long).chars().count(), 61);
    }
}
