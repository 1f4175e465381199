//! The recording format: what `ski-mock-agent record` writes and `--script` replays. A recording
//! is a script file with a `[recording]` table (provenance and replay settings) and one
//! `[[exchange]]` per line the client sent, holding the lines the agent wrote after it.
//!
//! ```toml
//! [recording]
//! agent = "echo-agent"
//! agent_version = "1.0.0"
//! protocol_version = 1
//! recorded_at = "2026-11-26T09:00:00Z"
//! command = ["node", "echo-agent.mjs"]
//!
//! [[exchange]]
//! at_ms = 0
//! client = '{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}'
//!
//! [[exchange.agent]]
//! after_ms = 3
//! line = '{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":1}}'
//! ```

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// `[recording]`: where a recording came from and how it is replayed.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RecordingSpec {
    /// `agentInfo.name` from the recorded `initialize` result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// `agentInfo.version`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_version: Option<String>,
    /// The protocol version the agent answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol_version: Option<i64>,
    /// When it was recorded (RFC 3339, UTC).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recorded_at: Option<String>,
    /// The recorded agent's command line (redacted); empty when it was reached by `--connect`.
    #[serde(default)]
    pub command: Vec<String>,
    /// The agent's WebSocket URL when it was reached by `--connect` (redacted).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
    /// Free labels a pool of recordings can be selected by.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
    /// What was redacted: `env:NAME`, `field:NAME`, `pattern:NAME`, `cwd`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub redacted: Vec<String>,
    /// What a client message that was not recorded gets (default `error`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unrecorded: Option<Unrecorded>,
    /// Replay timing: `none` (default), `recorded`, or `scale=F`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timing: Option<String>,
}

/// What a client message that was not recorded gets in replay.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Unrecorded {
    /// A JSON-RPC error (-32603) naming the message; a notification is only reported.
    #[default]
    Error,
    /// The recorded answer to the nearest message of the same method.
    Nearest,
    /// End the run: exit with code 1 after reporting it.
    Fail,
}

impl Unrecorded {
    /// Parses `error`, `nearest` or `fail`.
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "error" => Some(Self::Error),
            "nearest" => Some(Self::Nearest),
            "fail" => Some(Self::Fail),
            _ => None,
        }
    }
}

/// How replay paces the recorded lines.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub enum Timing {
    /// As fast as possible.
    #[default]
    None,
    /// The recorded gaps, multiplied by this factor (1.0: as recorded).
    Scaled(f64),
}

impl Timing {
    /// Parses `none`, `recorded` or `scale=F` (F a non-negative number).
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "none" => Some(Self::None),
            "recorded" => Some(Self::Scaled(1.0)),
            other => other
                .strip_prefix("scale=")
                .and_then(|f| f.parse::<f64>().ok())
                .filter(|f| f.is_finite() && *f >= 0.0)
                .map(Self::Scaled),
        }
    }

    /// The pause for a recorded gap of `ms` milliseconds.
    pub fn pause(self, ms: u64) -> Option<std::time::Duration> {
        match self {
            Self::None => None,
            Self::Scaled(factor) => {
                let scaled = (ms as f64 * factor).min(3_600_000.0);
                (scaled >= 1.0).then(|| std::time::Duration::from_millis(scaled as u64))
            }
        }
    }
}

/// `[[exchange]]`: one line the client sent and what the agent wrote until the next one.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ExchangeSpec {
    /// Milliseconds from the start of the recording.
    #[serde(default)]
    pub at_ms: u64,
    /// The client's line (absent for what the agent wrote before the client said anything).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client: Option<String>,
    /// The agent's lines, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub agent: Vec<AgentLineSpec>,
}

/// `[[exchange.agent]]`: one line the agent wrote.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct AgentLineSpec {
    /// Milliseconds after the client's line (or the start).
    #[serde(default)]
    pub after_ms: u64,
    /// The line as written (without its newline).
    pub line: String,
}

/// A recording as a whole file, for writing.
#[derive(Debug, Serialize)]
pub struct RecordingFile<'a> {
    /// The script's name.
    pub name: String,
    /// What it is.
    pub description: String,
    /// `[recording]`.
    pub recording: &'a RecordingSpec,
    /// `[[exchange]]`.
    pub exchange: &'a [ExchangeSpec],
}

impl RecordingFile<'_> {
    /// The TOML text.
    pub fn to_toml(&self) -> Result<String, toml::ser::Error> {
        toml::to_string(self)
    }
}

/// A loaded recording: the provenance and every exchange with its lines parsed.
#[derive(Debug, Clone, Default)]
pub struct Recording {
    /// `[recording]`.
    pub spec: RecordingSpec,
    /// The exchanges in recorded order.
    pub exchanges: Vec<Exchange>,
    /// The timing `[recording].timing` names.
    pub timing: Timing,
    /// `[recording].recorded_at`, parsed.
    pub recorded_at: Option<time::OffsetDateTime>,
}

/// One exchange, parsed.
#[derive(Debug, Clone, Default)]
pub struct Exchange {
    /// Milliseconds from the start.
    pub at_ms: u64,
    /// The client's message.
    pub client: Option<Value>,
    /// The client's line as sent, when it was not a JSON-RPC message (malformed JSON, or JSON
    /// that is not an object): replay answers the same line with what the agent wrote after it.
    pub malformed: Option<String>,
    /// The agent's lines.
    pub agent: Vec<AgentLine>,
}

/// One agent line, parsed when it is JSON.
#[derive(Debug, Clone)]
pub struct AgentLine {
    /// Milliseconds after the client's line.
    pub after_ms: u64,
    /// The text as recorded.
    pub text: String,
    /// The message, when the text is JSON.
    pub message: Option<Value>,
}

impl Recording {
    /// Checks and parses a recording; an error names the part (`exchange[2].client`).
    pub fn from_spec(
        spec: &RecordingSpec,
        exchanges: &[ExchangeSpec],
    ) -> Result<Self, (String, String)> {
        let timing = match spec.timing.as_deref() {
            None => Timing::None,
            Some(text) => Timing::parse(text).ok_or_else(|| {
                (
                    "recording.timing".to_owned(),
                    format!("{text:?} is not none, recorded or scale=F"),
                )
            })?,
        };
        let mut parsed = Vec::with_capacity(exchanges.len());
        for exchange in exchanges {
            // A client that sent a line that is no JSON-RPC message was recorded as it was.
            let (client, malformed) = match &exchange.client {
                Some(text) => match serde_json::from_str::<Value>(text) {
                    Ok(message) if message.is_object() => (Some(message), None),
                    _ => (None, Some(text.clone())),
                },
                None => (None, None),
            };
            let agent = exchange
                .agent
                .iter()
                .map(|line| AgentLine {
                    after_ms: line.after_ms,
                    message: serde_json::from_str::<Value>(&line.line)
                        .ok()
                        .filter(Value::is_object),
                    text: line.line.clone(),
                })
                .collect();
            parsed.push(Exchange {
                at_ms: exchange.at_ms,
                client,
                malformed,
                agent,
            });
        }
        let recorded_at = match spec.recorded_at.as_deref() {
            None => None,
            Some(text) => Some(
                time::OffsetDateTime::parse(text, &time::format_description::well_known::Rfc3339)
                    .map_err(|e| {
                    (
                        "recording.recorded_at".to_owned(),
                        format!("{text:?} is not an RFC 3339 time: {e}"),
                    )
                })?,
            ),
        };
        Ok(Self {
            spec: spec.clone(),
            exchanges: parsed,
            timing,
            recorded_at,
        })
    }
}

/// What kind of JSON-RPC message a value is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MessageKind {
    /// A request (method and id).
    Request,
    /// A notification (method, no id).
    Notification,
    /// A response with a result.
    Result,
    /// A response with an error.
    Error,
    /// Anything else.
    Other,
}

impl MessageKind {
    /// The kind of `message`.
    pub fn of(message: &Value) -> Self {
        let has = |key: &str| message.get(key).is_some();
        if message.get("method").is_some_and(Value::is_string) {
            if has("id") {
                Self::Request
            } else {
                Self::Notification
            }
        } else if has("error") {
            Self::Error
        } else if has("result") {
            Self::Result
        } else {
            Self::Other
        }
    }

    /// The name used in reports.
    pub fn name(self) -> &'static str {
        match self {
            Self::Request => "request",
            Self::Notification => "notification",
            Self::Result => "result",
            Self::Error => "error",
            Self::Other => "other",
        }
    }

    /// Whether this is a response.
    pub fn is_response(self) -> bool {
        matches!(self, Self::Result | Self::Error)
    }
}

/// The method of a message, if it has one.
pub fn method_of(message: &Value) -> Option<&str> {
    message.get("method").and_then(Value::as_str)
}

/// The text of a `session/prompt`'s text blocks, joined by newlines.
pub fn prompt_text_of(message: &Value) -> Option<String> {
    let blocks = message.get("params")?.get("prompt")?.as_array()?;
    let texts: Vec<&str> = blocks
        .iter()
        .filter_map(|b| b.get("text").and_then(Value::as_str))
        .collect();
    Some(texts.join("\n"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timing_parses_the_three_forms() {
        assert_eq!(Timing::parse("none"), Some(Timing::None));
        assert_eq!(Timing::parse("recorded"), Some(Timing::Scaled(1.0)));
        assert_eq!(Timing::parse("scale=0.5"), Some(Timing::Scaled(0.5)));
        assert_eq!(Timing::parse("scale=-1"), None);
        assert_eq!(Timing::parse("fast"), None);
        assert_eq!(
            Timing::Scaled(0.5).pause(40),
            Some(std::time::Duration::from_millis(20))
        );
        assert_eq!(Timing::None.pause(40), None);
    }

    #[test]
    fn a_client_line_that_is_no_message_loads_as_a_malformed_line() {
        let spec = |text: &str| ExchangeSpec {
            client: Some(text.to_owned()),
            ..ExchangeSpec::default()
        };
        let recording = Recording::from_spec(
            &RecordingSpec::default(),
            &[
                spec("{oops"),
                spec("[1,2]"),
                spec(r#"{"jsonrpc":"2.0","method":"m"}"#),
            ],
        )
        .expect("a recording of a client that sent malformed lines loads");
        let malformed: Vec<Option<&str>> = recording
            .exchanges
            .iter()
            .map(|e| e.malformed.as_deref())
            .collect();
        assert_eq!(malformed, [Some("{oops"), Some("[1,2]"), None]);
        assert!(recording.exchanges[0].client.is_none());
        assert!(recording.exchanges[2].client.is_some());
    }
}
