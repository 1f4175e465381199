//! The fake model's script: the turns it answers with, in order, loaded from TOML or built in
//! code, and the reply used once every turn has been answered.

use std::path::Path;
use std::time::Duration;

use serde::Deserialize;
use serde_json::Value;

use super::FakeModelError;

/// The text answered once the script has no turn left for a request.
pub const END_OF_SCRIPT: &str = "end of script";

/// What the fake answers, turn by turn. Each model request (chat completion, response or
/// message, whichever API asks) takes the first turn not yet used whose `match` (if any) is in
/// the last user message's text; when none is left, it answers the text `exhausted_text`.
#[derive(Debug, Clone, PartialEq)]
pub struct Script {
    pub turns: Vec<Turn>,
    pub exhausted_text: String,
}

impl Default for Script {
    fn default() -> Self {
        Script {
            turns: Vec::new(),
            exhausted_text: END_OF_SCRIPT.into(),
        }
    }
}

/// One scripted answer.
#[derive(Debug, Clone, PartialEq)]
pub struct Turn {
    /// Taken only by a request whose last user message contains this text.
    pub when_user_says: Option<String>,
    /// Taken only by a request that offers tools: every tool a tool-call turn calls, by name, or
    /// any tool for another turn (an agent's side requests, such as a title, offer none).
    pub when_tools_offered: bool,
    pub reply: Reply,
}

/// The kinds of answer a turn gives.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    /// Assistant text, streamed in `stream.chunks` pieces.
    Text { text: String, stream: Pacing },
    /// Calls of named tools (optionally after some text); each call's JSON arguments are
    /// streamed in `stream.chunks` pieces.
    ToolCalls {
        text: Option<String>,
        calls: Vec<ToolCall>,
        stream: Pacing,
    },
    /// The model declines: OpenAI's `refusal`, Anthropic's `stop_reason: "refusal"`.
    Refusal { text: String, stream: Pacing },
    /// An HTTP error in the API's own shape.
    Error(ErrorReply),
    /// No answer: the response is held open until the client goes away; the request is then
    /// recorded as cancelled.
    Hang,
}

/// How a streamed answer is cut and paced: `chunks` pieces (fewer when the text is shorter),
/// `delay` before each piece (a slow stream).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pacing {
    pub chunks: usize,
    pub delay: Duration,
}

impl Default for Pacing {
    fn default() -> Self {
        Pacing {
            chunks: 3,
            delay: Duration::ZERO,
        }
    }
}

/// One call of a tool by name with JSON arguments.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCall {
    pub name: String,
    pub arguments: Value,
}

/// An error answer: its kind decides the status and the API's error type.
#[derive(Debug, Clone, PartialEq)]
pub struct ErrorReply {
    pub kind: ErrorKind,
    /// The `retry-after` header, in seconds.
    pub retry_after: Option<u64>,
    /// The error's message; each kind has a default.
    pub message: Option<String>,
    /// For a streaming request: status 200, the stream's first events, then the error as an
    /// event (Chat: a chunk with `error`; Responses and Messages: an `error` event), as a
    /// provider that fails after it began answering does.
    pub in_stream: bool,
}

/// The errors the fake can answer with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorKind {
    /// 400, a request the API refuses.
    InvalidRequest,
    /// 401, a key the API does not accept.
    Authentication,
    /// 429, too many requests (with `retry-after` when set).
    RateLimit,
    /// 500, the provider failed.
    Server,
    /// Anthropic's 529 `overloaded_error`; OpenAI's 503.
    Overloaded,
}

impl Turn {
    /// A turn that answers `text`.
    pub fn text(text: impl Into<String>) -> Turn {
        Turn::new(Reply::Text {
            text: text.into(),
            stream: Pacing::default(),
        })
    }

    /// A turn that calls tool `name` with `arguments`.
    pub fn tool_call(name: impl Into<String>, arguments: Value) -> Turn {
        Turn::new(Reply::ToolCalls {
            text: None,
            calls: vec![ToolCall {
                name: name.into(),
                arguments,
            }],
            stream: Pacing::default(),
        })
    }

    /// A turn that refuses with `text`.
    pub fn refusal(text: impl Into<String>) -> Turn {
        Turn::new(Reply::Refusal {
            text: text.into(),
            stream: Pacing::default(),
        })
    }

    /// A turn that answers an error of `kind`.
    pub fn error(kind: ErrorKind, retry_after: Option<u64>) -> Turn {
        Turn::new(Reply::Error(ErrorReply {
            kind,
            retry_after,
            message: None,
            in_stream: false,
        }))
    }

    /// A turn that holds its response open until the client goes away.
    pub fn hang() -> Turn {
        Turn::new(Reply::Hang)
    }

    fn new(reply: Reply) -> Turn {
        Turn {
            when_user_says: None,
            when_tools_offered: false,
            reply,
        }
    }

    /// Taken only by a request whose last user message contains `text`.
    pub fn when_user_says(mut self, text: impl Into<String>) -> Turn {
        self.when_user_says = Some(text.into());
        self
    }

    /// Taken only by a request that offers tools (see [`Turn::when_tools_offered`]).
    pub fn when_tools_offered(mut self) -> Turn {
        self.when_tools_offered = true;
        self
    }

    /// An error that a streaming request gets inside its stream (see [`ErrorReply::in_stream`]).
    pub fn in_stream(mut self) -> Turn {
        if let Reply::Error(error) = &mut self.reply {
            error.in_stream = true;
        }
        self
    }

    /// Streams in `chunks` pieces with `delay` before each (no effect on errors and hangs).
    pub fn paced(mut self, chunks: usize, delay: Duration) -> Turn {
        if let Reply::Text { stream, .. }
        | Reply::ToolCalls { stream, .. }
        | Reply::Refusal { stream, .. } = &mut self.reply
        {
            *stream = Pacing {
                chunks: chunks.max(1),
                delay,
            };
        }
        self
    }
}

impl Script {
    /// A script of `turns`, answering "end of script" after them.
    pub fn new(turns: Vec<Turn>) -> Script {
        Script {
            turns,
            ..Script::default()
        }
    }

    /// Reads a TOML script file (see `mocks/README.md`).
    pub fn load(path: &Path) -> Result<Script, FakeModelError> {
        let text = std::fs::read_to_string(path).map_err(|source| FakeModelError::ReadScript {
            path: path.display().to_string(),
            source,
        })?;
        Script::parse(&text).map_err(|error| match error {
            FakeModelError::Script(message) => {
                FakeModelError::Script(format!("{}: {message}", path.display()))
            }
            other => other,
        })
    }

    /// Parses a TOML script.
    pub fn parse(text: &str) -> Result<Script, FakeModelError> {
        let file: ScriptFile =
            toml::from_str(text).map_err(|error| FakeModelError::Script(error.to_string()))?;
        let turns = file
            .turn
            .into_iter()
            .enumerate()
            .map(|(index, turn)| {
                turn.into_turn().map_err(|message| {
                    FakeModelError::Script(format!("turn {}: {message}", index + 1))
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Script {
            turns,
            exhausted_text: file.exhausted_text.unwrap_or_else(|| END_OF_SCRIPT.into()),
        })
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ScriptFile {
    exhausted_text: Option<String>,
    #[serde(default)]
    turn: Vec<TurnFile>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TurnFile {
    #[serde(rename = "match")]
    when_user_says: Option<String>,
    #[serde(default)]
    when_tools_offered: bool,
    text: Option<String>,
    tool_calls: Option<Vec<ToolCallFile>>,
    refusal: Option<String>,
    error: Option<ErrorFile>,
    #[serde(default)]
    hang: bool,
    chunks: Option<usize>,
    chunk_delay_ms: Option<u64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ToolCallFile {
    name: String,
    #[serde(default = "empty_object")]
    arguments: toml::Value,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ErrorFile {
    kind: ErrorKind,
    retry_after: Option<u64>,
    message: Option<String>,
    #[serde(default)]
    in_stream: bool,
}

fn empty_object() -> toml::Value {
    toml::Value::Table(toml::Table::new())
}

impl TurnFile {
    fn into_turn(self) -> Result<Turn, String> {
        let stream = Pacing {
            chunks: self.chunks.unwrap_or(Pacing::default().chunks),
            delay: Duration::from_millis(self.chunk_delay_ms.unwrap_or(0)),
        };
        if stream.chunks == 0 {
            return Err("chunks must be at least 1".into());
        }
        let kinds = [
            self.tool_calls.is_some(),
            self.refusal.is_some(),
            self.error.is_some(),
            self.hang,
        ]
        .iter()
        .filter(|kind| **kind)
        .count();
        if kinds > 1 || (kinds == 1 && self.text.is_some() && self.tool_calls.is_none()) {
            return Err(
                "give one of text, tool_calls (text may go with them), refusal, error, hang".into(),
            );
        }
        let reply = if let Some(calls) = self.tool_calls {
            if calls.is_empty() {
                return Err("tool_calls is empty".into());
            }
            let calls = calls
                .into_iter()
                .map(|call| {
                    let arguments = serde_json::to_value(&call.arguments)
                        .map_err(|error| format!("arguments of {}: {error}", call.name))?;
                    if !arguments.is_object() {
                        return Err(format!("arguments of {} must be a table", call.name));
                    }
                    Ok(ToolCall {
                        name: call.name,
                        arguments,
                    })
                })
                .collect::<Result<Vec<_>, String>>()?;
            Reply::ToolCalls {
                text: self.text,
                calls,
                stream,
            }
        } else if let Some(text) = self.refusal {
            Reply::Refusal { text, stream }
        } else if let Some(error) = self.error {
            Reply::Error(ErrorReply {
                kind: error.kind,
                retry_after: error.retry_after,
                message: error.message,
                in_stream: error.in_stream,
            })
        } else if self.hang {
            Reply::Hang
        } else if let Some(text) = self.text {
            Reply::Text { text, stream }
        } else {
            return Err("give one of text, tool_calls, refusal, error, hang".into());
        };
        Ok(Turn {
            when_user_says: self.when_user_says,
            when_tools_offered: self.when_tools_offered,
            reply,
        })
    }
}

/// Cuts `text` into at most `chunks` pieces of about the same number of characters, never
/// inside a character; an empty text is one empty piece.
pub fn split_chunks(text: &str, chunks: usize) -> Vec<String> {
    let characters: Vec<char> = text.chars().collect();
    let chunks = chunks.clamp(1, characters.len().max(1));
    let size = characters.len().div_ceil(chunks).max(1);
    if characters.is_empty() {
        return vec![String::new()];
    }
    characters
        .chunks(size)
        .map(|piece| piece.iter().collect())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_of_turn_parses() {
        let script = Script::parse(
            r#"
            exhausted_text = "done"
            [[turn]]
            match = "weather"
            text = "Sunny."
            chunks = 2
            chunk_delay_ms = 5
            [[turn]]
            tool_calls = [{ name = "get_weather", arguments = { city = "Paris" } }]
            [[turn]]
            refusal = "No."
            [[turn]]
            error = { kind = "rate_limit", retry_after = 3 }
            [[turn]]
            hang = true
            "#,
        )
        .unwrap();
        assert_eq!(script.exhausted_text, "done");
        assert_eq!(
            script.turns[0],
            Turn::text("Sunny.")
                .when_user_says("weather")
                .paced(2, Duration::from_millis(5))
        );
        assert_eq!(
            script.turns[1],
            Turn::tool_call("get_weather", serde_json::json!({"city": "Paris"}))
        );
        assert_eq!(script.turns[2], Turn::refusal("No."));
        assert_eq!(script.turns[3], Turn::error(ErrorKind::RateLimit, Some(3)));
        assert_eq!(script.turns[4], Turn::hang());
    }

    #[test]
    fn a_turn_with_two_kinds_or_none_is_refused_by_number() {
        let error =
            Script::parse("[[turn]]\ntext = \"a\"\n[[turn]]\nrefusal = \"b\"\nhang = true\n")
                .unwrap_err();
        assert!(error.to_string().contains("turn 2"), "{error}");
        let error = Script::parse("[[turn]]\nchunks = 2\n").unwrap_err();
        assert!(error.to_string().contains("turn 1"), "{error}");
        assert!(Script::parse("[[turn]]\ntext = \"a\"\nchunks = 0\n").is_err());
        assert!(Script::parse("[[turn]]\ntxt = \"a\"\n").is_err());
    }

    #[test]
    fn chunks_cover_the_text_without_cutting_a_character() {
        assert_eq!(split_chunks("héllo wörld", 3), ["héll", "o wö", "rld"]);
        assert_eq!(split_chunks("ab", 5), ["a", "b"]);
        assert_eq!(split_chunks("", 3), [""]);
        assert_eq!(split_chunks("abc", 1), ["abc"]);
    }
}
