//! Finding AOF/1 envelopes in incoming events: an object, an `AOF/1 ` prefixed string, or a
//! plain JSON string.
//!
//! An event object is unwrapped first: an object with a `protocol` key is the candidate itself;
//! otherwise its `payload`, then `message`, then `content` field is (E-AOF-24). Then:
//! 1. an object with `protocol: "aof"` is validated; other objects are not protocol messages;
//! 2. a string starting (after trimming) with `AOF/1 ` is parsed as JSON and validated, whatever
//!    its `protocol` says;
//! 3. a string starting with `{` or `[` is parsed as JSON; an object with `protocol: "aof"` is
//!    validated, anything else is not a protocol message (chat may carry JSON);
//! 4. anything else is not a protocol message, and nothing is logged.

use serde::Serialize;
use serde_json::Value;

use super::envelope::{Envelope, PROTOCOL};
use super::validation::Issue;

/// The `AOF/1 ` prefix.
pub const PREFIX: &str = "AOF/1 ";

/// Where an envelope was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Source {
    /// A JSON object.
    #[serde(rename = "object")]
    Object,
    /// A string with the `AOF/1 ` prefix.
    #[serde(rename = "AOF/1 prefix")]
    Prefix,
    /// A plain JSON string.
    #[serde(rename = "json")]
    Json,
}

/// Why a protocol message was refused before routing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "reason", rename_all = "snake_case")]
pub enum Rejection {
    /// The JSON did not parse.
    InvalidJson {
        /// Where the text came from.
        source: Source,
        /// The parser's message.
        error: String,
    },
    /// The JSON is not a valid envelope.
    InvalidEnvelope {
        /// Where it came from.
        source: Source,
        /// Each problem's message.
        errors: Vec<String>,
        /// Each problem with path and kind.
        issues: Vec<Issue>,
        /// The task id, when the message had a readable one.
        #[serde(rename = "taskId", skip_serializing_if = "Option::is_none")]
        task_id: Option<String>,
    },
}

/// What an event contained.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Parsed {
    /// Not an AOF/1 message.
    NotProtocol,
    /// A valid envelope.
    Envelope(Box<Envelope>, Source),
    /// An AOF/1 message that was refused.
    Rejected(Rejection),
}

/// Looks for an envelope in an event value.
pub fn parse_event(event: &Value) -> Parsed {
    let candidate = match event {
        Value::Object(map) if !map.contains_key("protocol") => ["payload", "message", "content"]
            .iter()
            .find_map(|key| map.get(*key).filter(|v| !v.is_null()))
            .unwrap_or(event),
        _ => event,
    };
    match candidate {
        Value::Object(map) => {
            if map.get("protocol").and_then(Value::as_str) == Some(PROTOCOL) {
                validate(candidate, Source::Object)
            } else {
                Parsed::NotProtocol
            }
        }
        Value::String(text) => parse_str(text),
        _ => Parsed::NotProtocol,
    }
}

/// Looks for an envelope in raw input: JSON text is read as an event value, any other text as a
/// message string.
pub fn parse_input(text: &str) -> Parsed {
    match serde_json::from_str::<Value>(text) {
        Ok(value) if value.is_object() => parse_event(&value),
        _ => parse_str(text),
    }
}

/// Looks for an envelope in a message string.
pub fn parse_str(text: &str) -> Parsed {
    let trimmed = text.trim();
    if let Some(rest) = trimmed.strip_prefix(PREFIX) {
        return match serde_json::from_str::<Value>(rest.trim()) {
            Ok(value) => validate(&value, Source::Prefix),
            Err(error) => Parsed::Rejected(Rejection::InvalidJson {
                source: Source::Prefix,
                error: error.to_string(),
            }),
        };
    }
    if trimmed.starts_with('{') || trimmed.starts_with('[') {
        return match serde_json::from_str::<Value>(trimmed) {
            Ok(value) => {
                if value.get("protocol").and_then(Value::as_str) == Some(PROTOCOL) {
                    validate(&value, Source::Json)
                } else {
                    Parsed::NotProtocol
                }
            }
            Err(error) => Parsed::Rejected(Rejection::InvalidJson {
                source: Source::Json,
                error: error.to_string(),
            }),
        };
    }
    Parsed::NotProtocol
}

fn validate(value: &Value, source: Source) -> Parsed {
    match Envelope::from_value(value) {
        Ok(envelope) => Parsed::Envelope(Box::new(envelope), source),
        Err(issues) => Parsed::Rejected(Rejection::InvalidEnvelope {
            source,
            errors: issues
                .iter()
                .map(|issue| {
                    if issue.path.is_empty() {
                        issue.message.clone()
                    } else {
                        format!("{}: {}", issue.path, issue.message)
                    }
                })
                .collect(),
            issues,
            task_id: value
                .get("taskId")
                .and_then(Value::as_str)
                .map(str::to_owned),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chat_text_is_not_protocol() {
        assert_eq!(
            parse_input("Hello, this is a chat message"),
            Parsed::NotProtocol
        );
        assert_eq!(parse_input("{\"text\":\"hi\"}"), Parsed::NotProtocol);
    }

    #[test]
    fn broken_prefixed_json_is_invalid_json() {
        let Parsed::Rejected(Rejection::InvalidJson { source, .. }) =
            parse_input("AOF/1 {invalid json")
        else {
            panic!("expected invalid_json");
        };
        assert_eq!(source, Source::Prefix);
    }
}
