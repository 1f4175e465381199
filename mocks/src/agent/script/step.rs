//! Steps: one action (send a response, a notification, a request, raw bytes; wait; exit; ...)
//! plus the faults that can be put on any step (delay, repeat, fragments).

use std::time::Duration;

use serde::Deserialize;
use serde_json::Value;

use crate::agent::commands::scenario::Scenario;
use crate::agent::template;

/// The default wait for a reply to an agent-to-client request or for an awaited message.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// The largest `oversize` line and `stderr_bytes` count a step may ask for (1 GiB).
pub const MAX_GENERATED_BYTES: u64 = 1 << 30;

/// The line a `malformed = true` step writes: JSON cut off in the middle of an object.
pub const DEFAULT_MALFORMED: &str = r#"{"jsonrpc":"2.0","method":"session/update","params":{"#;

/// A step as written in a script or sent on the control channel.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct StepSpec {
    /// Action: a success response to the triggering request, with this result.
    pub respond: Option<Value>,
    /// Action: an error response to the triggering request.
    pub error: Option<ErrorSpec>,
    /// Action: a notification with this method (and `params`).
    pub notify: Option<String>,
    /// Action: a `session/update` for the current session with this update object.
    pub update: Option<Value>,
    /// Action: an agent-to-client request with this method (and `params`).
    pub request: Option<String>,
    /// Action: this JSON value written as one line.
    pub send: Option<Value>,
    /// Action: this text written as is (plus a newline unless `newline = false`).
    pub raw: Option<String>,
    /// Action: these bytes, written as is (hex digits; a newline is added only with
    /// `newline = true`).
    pub raw_hex: Option<String>,
    /// Action: a malformed JSON line (`true` for the default one, or the text to write).
    pub malformed: Option<Malformed>,
    /// Action: a valid JSON notification padded to exactly this many bytes (newline excluded).
    pub oversize: Option<u64>,
    /// Action: this text and a newline written to stderr.
    pub stderr: Option<String>,
    /// Action: this many bytes written to stderr (lines of `x`).
    pub stderr_bytes: Option<u64>,
    /// Action: pause.
    pub sleep_ms: Option<u64>,
    /// Action: wait for an inbound message with this method (or `{method, id, timeout_ms}`).
    pub wait_for: Option<WaitForSpec>,
    /// Action: wait until the control channel releases this gate.
    pub gate: Option<String>,
    /// Action: exit with this code.
    pub exit: Option<i32>,
    /// Action: never go on (the triggering request is never answered).
    pub hang: Option<bool>,
    /// Action: close stdout and keep running.
    pub close_stdout: Option<bool>,
    /// Action: close stdin (the writer at the other end gets EPIPE) and keep running.
    pub close_stdin: Option<bool>,
    /// Action: run the personality's built-in handling of the triggering message here.
    pub default: Option<bool>,
    /// Action: run a scenario of the test-agent vocabulary (`session_updates`, `callbacks`, ...).
    pub scenario: Option<String>,
    /// Action: a whole prompt turn in the personality's shape whose reply is this text.
    pub turn: Option<String>,
    /// Action: a tool call with this title that runs until it is cancelled (`tool_call/cancel`
    /// of its id in ACP v2, `session/cancel` of its turn in either version).
    pub hold_tool_call: Option<String>,
    /// Action: a prompt turn that asks `session/request_permission` first and replies with this
    /// text only when the client selects the allow option (any other answer ends the turn
    /// `cancelled` with no reply).
    pub permitted_turn: Option<String>,

    /// Parameter: `params` of `notify` and `request`.
    pub params: Option<Value>,
    /// Parameter: the id of `respond`/`error` (to answer with a wrong id) or of `request`.
    pub id: Option<Value>,
    /// Parameter: the session of `update` (default: the current session).
    pub session: Option<String>,
    /// Parameter: how long `request` waits for its reply (default 30000).
    pub timeout_ms: Option<u64>,
    /// Parameter: whether `raw` and `raw_hex` end with a newline.
    pub newline: Option<bool>,
    /// Parameter: whether `request` waits for its reply (default true).
    #[serde(rename = "await")]
    pub await_reply: Option<bool>,
    /// Parameter: the method whose arrival with the same id counts as the reply to `request`
    /// (intercom: `clearance/response`, `prompt/response`).
    pub reply_method: Option<String>,

    /// Fault: pause before the step.
    pub delay_ms: Option<u64>,
    /// Fault: do the step this many times (a response twice is a duplicate response).
    pub repeat: Option<u32>,
    /// Fault: write the line in this many fragments, or in fragments of these sizes.
    pub fragments: Option<Fragments>,
    /// Fault: pause between fragments.
    pub fragment_delay_ms: Option<u64>,
    /// Fault: wait for this control gate between fragments.
    pub fragment_gate: Option<String>,
    /// Whether messages carry `"jsonrpc":"2.0"` (default: as the personality writes them).
    pub jsonrpc: Option<bool>,
}

/// `error = { code, message, data }`.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ErrorSpec {
    /// The error code.
    pub code: i64,
    /// The message (default: the standard text for the code).
    pub message: Option<String>,
    /// Structured detail.
    pub data: Option<Value>,
}

/// `malformed = true` or `malformed = "text"`.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(untagged)]
pub enum Malformed {
    /// The default malformed line.
    Default(bool),
    /// This text.
    Text(String),
}

/// `wait_for = "method"` or `wait_for = { method, id, timeout_ms }`.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(untagged)]
pub enum WaitForSpec {
    /// Any message with this method.
    Method(String),
    /// A message with this method (and id), within a time limit.
    Full {
        /// The method.
        method: String,
        /// The id the message must carry.
        id: Option<Value>,
        /// How long to wait; without it the wait has no limit.
        timeout_ms: Option<u64>,
    },
}

/// `fragments = N` or `fragments = [sizes]`.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(untagged)]
pub enum Fragments {
    /// Split the line into this many pieces of about equal size.
    Count(u32),
    /// Pieces of these sizes; the rest of the line is one more piece.
    Sizes(Vec<usize>),
}

impl Fragments {
    /// The byte ranges of the pieces of a line of `len` bytes; empty pieces are dropped.
    pub fn split(&self, len: usize) -> Vec<std::ops::Range<usize>> {
        let mut ranges = Vec::new();
        match self {
            Fragments::Count(count) => {
                let count = (*count as usize).clamp(1, len.max(1));
                let base = len / count;
                let extra = len % count;
                let mut start = 0;
                for index in 0..count {
                    let size = base + usize::from(index < extra);
                    if size > 0 {
                        ranges.push(start..start + size);
                    }
                    start += size;
                }
            }
            Fragments::Sizes(sizes) => {
                let mut start = 0;
                for size in sizes {
                    let end = (start + size).min(len);
                    if end > start {
                        ranges.push(start..end);
                    }
                    start = end;
                }
                if start < len {
                    ranges.push(start..len);
                }
            }
        }
        ranges
    }
}

/// How a written line is broken up.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FragmentPlan {
    /// The pieces; `None` writes the line at once.
    pub fragments: Option<Fragments>,
    /// Pause between pieces.
    pub delay: Option<Duration>,
    /// Control gate to wait for between pieces.
    pub gate: Option<String>,
}

/// What a step does.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// A success response.
    Respond {
        /// The result (templated).
        result: Value,
        /// An id other than the trigger's.
        id: Option<Value>,
    },
    /// An error response.
    Error {
        /// The error object.
        error: ErrorSpec,
        /// An id other than the trigger's.
        id: Option<Value>,
    },
    /// A notification.
    Notify {
        /// The method.
        method: String,
        /// The params.
        params: Option<Value>,
    },
    /// A `session/update`.
    Update {
        /// The update object.
        update: Value,
        /// A session other than the current one.
        session: Option<String>,
    },
    /// An agent-to-client request.
    Request {
        /// The method.
        method: String,
        /// The params.
        params: Option<Value>,
        /// A fixed id instead of the next one.
        id: Option<Value>,
        /// Whether to wait for the reply.
        wait: bool,
        /// How long to wait.
        timeout: Duration,
        /// A method that also counts as the reply when it arrives with the request's id.
        reply_method: Option<String>,
    },
    /// A JSON value as one line.
    Send(Value),
    /// Raw text or bytes.
    Raw {
        /// The text (templated) or bytes.
        bytes: RawBytes,
        /// Whether a newline follows.
        newline: bool,
    },
    /// A padded notification line of this many bytes.
    Oversize(u64),
    /// A line on stderr.
    Stderr(String),
    /// This many bytes on stderr.
    StderrBytes(u64),
    /// A pause.
    Sleep(Duration),
    /// Wait for an inbound message.
    WaitFor {
        /// The method.
        method: String,
        /// The id it must carry.
        id: Option<Value>,
        /// The time limit.
        timeout: Option<Duration>,
    },
    /// Wait for a control gate.
    Gate(String),
    /// Exit with a code.
    Exit(i32),
    /// Never go on.
    Hang,
    /// Close stdout.
    CloseStdout,
    /// Close stdin.
    CloseStdin,
    /// The built-in handling of the trigger.
    Default,
    /// A test-agent scenario.
    Scenario(Scenario),
    /// A whole prompt turn answering with this text (templated).
    Turn(String),
    /// A tool call with this title (templated), held until it is cancelled.
    HoldToolCall(String),
    /// A prompt turn answering with this text (templated) once the client allows it.
    PermittedTurn(String),
}

/// Raw output: templated text or literal bytes.
#[derive(Debug, Clone, PartialEq)]
pub enum RawBytes {
    /// Text with `${...}` placeholders.
    Text(String),
    /// Bytes written exactly.
    Bytes(Vec<u8>),
}

/// A checked step.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    /// What it does.
    pub action: Action,
    /// Pause before it.
    pub delay: Option<Duration>,
    /// How many times it runs.
    pub repeat: u32,
    /// How its line is written.
    pub fragments: FragmentPlan,
    /// Whether its messages carry `jsonrpc` (`None`: as the personality writes them).
    pub jsonrpc: Option<bool>,
}

impl Step {
    /// A step with this action and no faults.
    pub fn new(action: Action) -> Self {
        Self {
            action,
            delay: None,
            repeat: 1,
            fragments: FragmentPlan::default(),
            jsonrpc: None,
        }
    }

    /// Checks a step spec; `at` names it in errors.
    pub fn from_spec(spec: &StepSpec, at: &str) -> Result<Self, (String, String)> {
        let fail = |message: String| (at.to_owned(), message);
        let mut actions: Vec<&str> = Vec::new();
        macro_rules! present {
            ($($field:ident),*) => {
                $(if spec.$field.is_some() { actions.push(stringify!($field)); })*
            };
        }
        present!(
            respond,
            error,
            notify,
            update,
            request,
            send,
            raw,
            raw_hex,
            malformed,
            oversize,
            stderr,
            stderr_bytes,
            sleep_ms,
            wait_for,
            gate,
            exit,
            hang,
            close_stdout,
            close_stdin,
            default,
            scenario,
            turn,
            hold_tool_call,
            permitted_turn
        );
        let action_name = match actions.as_slice() {
            [one] => *one,
            [] => return Err(fail("a step needs one action (respond, error, notify, update, request, send, raw, raw_hex, malformed, oversize, stderr, stderr_bytes, sleep_ms, wait_for, gate, exit, hang, close_stdout, close_stdin, default, scenario, turn, hold_tool_call, permitted_turn)".to_owned())),
            many => return Err(fail(format!("a step has one action, this one has {}", many.join(", ")))),
        };
        let check = |value: &Value| template::check_value(value).map_err(&fail);
        let check_str = |text: &str| template::check_str(text).map_err(&fail);
        if let Some(params) = &spec.params {
            check(params)?;
        }
        if let Some(id) = &spec.id {
            check(id)?;
        }
        let uses = |allowed: &[&str], key: &str| -> Result<(), (String, String)> {
            if allowed.contains(&action_name) {
                Ok(())
            } else {
                Err(fail(format!("`{key}` does not apply to `{action_name}`")))
            }
        };
        if spec.params.is_some() {
            uses(&["notify", "request"], "params")?;
        }
        if spec.id.is_some() {
            uses(&["respond", "error", "request"], "id")?;
        }
        if spec.session.is_some() {
            uses(&["update"], "session")?;
        }
        if spec.timeout_ms.is_some() {
            uses(&["request"], "timeout_ms")?;
        }
        if spec.newline.is_some() {
            uses(&["raw", "raw_hex"], "newline")?;
        }
        if spec.await_reply.is_some() {
            uses(&["request"], "await")?;
        }
        if spec.reply_method.is_some() {
            uses(&["request"], "reply_method")?;
        }
        let action = match action_name {
            "respond" => {
                let result = spec.respond.clone().unwrap_or(Value::Null);
                check(&result)?;
                Action::Respond {
                    result,
                    id: spec.id.clone(),
                }
            }
            "error" => {
                let error = spec
                    .error
                    .clone()
                    .ok_or_else(|| fail("missing error".into()))?;
                if let Some(message) = &error.message {
                    check_str(message)?;
                }
                if let Some(data) = &error.data {
                    check(data)?;
                }
                Action::Error {
                    error,
                    id: spec.id.clone(),
                }
            }
            "notify" => {
                let method = spec.notify.clone().unwrap_or_default();
                check_str(&method)?;
                Action::Notify {
                    method,
                    params: spec.params.clone(),
                }
            }
            "update" => {
                let update = spec.update.clone().unwrap_or(Value::Null);
                if !update.is_object() {
                    return Err(fail("`update` must be a table such as { sessionUpdate = \"agent_message_chunk\", content = { type = \"text\", text = \"hi\" } }".to_owned()));
                }
                check(&update)?;
                if let Some(session) = &spec.session {
                    check_str(session)?;
                }
                Action::Update {
                    update,
                    session: spec.session.clone(),
                }
            }
            "request" => {
                let method = spec.request.clone().unwrap_or_default();
                check_str(&method)?;
                Action::Request {
                    method,
                    params: spec.params.clone(),
                    id: spec.id.clone(),
                    wait: spec.await_reply.unwrap_or(true),
                    timeout: spec
                        .timeout_ms
                        .map_or(DEFAULT_TIMEOUT, Duration::from_millis),
                    reply_method: spec.reply_method.clone(),
                }
            }
            "send" => {
                let value = spec.send.clone().unwrap_or(Value::Null);
                check(&value)?;
                Action::Send(value)
            }
            "raw" => {
                let text = spec.raw.clone().unwrap_or_default();
                check_str(&text)?;
                Action::Raw {
                    bytes: RawBytes::Text(text),
                    newline: spec.newline.unwrap_or(true),
                }
            }
            "raw_hex" => {
                let hex = spec.raw_hex.clone().unwrap_or_default();
                let bytes = decode_hex(&hex).map_err(fail)?;
                Action::Raw {
                    bytes: RawBytes::Bytes(bytes),
                    newline: spec.newline.unwrap_or(false),
                }
            }
            "malformed" => {
                let text = match &spec.malformed {
                    Some(Malformed::Text(text)) => text.clone(),
                    Some(Malformed::Default(true)) => DEFAULT_MALFORMED.to_owned(),
                    _ => return Err(fail("`malformed` is true or the text to write".to_owned())),
                };
                Action::Raw {
                    bytes: RawBytes::Bytes(text.into_bytes()),
                    newline: true,
                }
            }
            "oversize" => Action::Oversize(generated(spec.oversize, "oversize").map_err(fail)?),
            "stderr" => {
                let text = spec.stderr.clone().unwrap_or_default();
                check_str(&text)?;
                Action::Stderr(text)
            }
            "stderr_bytes" => {
                Action::StderrBytes(generated(spec.stderr_bytes, "stderr_bytes").map_err(fail)?)
            }
            "sleep_ms" => Action::Sleep(Duration::from_millis(spec.sleep_ms.unwrap_or(0))),
            "wait_for" => match spec.wait_for.clone() {
                Some(WaitForSpec::Method(method)) => Action::WaitFor {
                    method,
                    id: None,
                    timeout: None,
                },
                Some(WaitForSpec::Full {
                    method,
                    id,
                    timeout_ms,
                }) => {
                    if let Some(id) = &id {
                        check(id)?;
                    }
                    Action::WaitFor {
                        method,
                        id,
                        timeout: timeout_ms.map(Duration::from_millis),
                    }
                }
                None => return Err(fail("missing wait_for".to_owned())),
            },
            "gate" => Action::Gate(spec.gate.clone().unwrap_or_default()),
            "exit" => Action::Exit(spec.exit.unwrap_or(0)),
            "hang" => flag(spec.hang, "hang", Action::Hang).map_err(fail)?,
            "close_stdout" => {
                flag(spec.close_stdout, "close_stdout", Action::CloseStdout).map_err(fail)?
            }
            "close_stdin" => {
                flag(spec.close_stdin, "close_stdin", Action::CloseStdin).map_err(fail)?
            }
            "default" => flag(spec.default, "default", Action::Default).map_err(fail)?,
            "scenario" => {
                let name = spec.scenario.clone().unwrap_or_default();
                let scenario = Scenario::parse(&name).ok_or_else(|| {
                    fail(format!(
                        "unknown scenario {name:?}; known: {}",
                        Scenario::NAMES.join(", ")
                    ))
                })?;
                Action::Scenario(scenario)
            }
            "turn" => {
                let text = spec.turn.clone().unwrap_or_default();
                check_str(&text)?;
                Action::Turn(text)
            }
            "hold_tool_call" => {
                let title = spec.hold_tool_call.clone().unwrap_or_default();
                check_str(&title)?;
                Action::HoldToolCall(title)
            }
            "permitted_turn" => {
                let text = spec.permitted_turn.clone().unwrap_or_default();
                check_str(&text)?;
                Action::PermittedTurn(text)
            }
            other => return Err(fail(format!("unknown action {other}"))),
        };
        let fragments = FragmentPlan {
            fragments: match &spec.fragments {
                Some(Fragments::Count(0)) => {
                    return Err(fail("`fragments` must be at least 1".to_owned()));
                }
                other => other.clone(),
            },
            delay: spec.fragment_delay_ms.map(Duration::from_millis),
            gate: spec.fragment_gate.clone(),
        };
        if fragments.fragments.is_none() && (fragments.delay.is_some() || fragments.gate.is_some())
        {
            return Err(fail(
                "`fragment_delay_ms` and `fragment_gate` need `fragments`".to_owned(),
            ));
        }
        let repeat = spec.repeat.unwrap_or(1);
        if repeat == 0 {
            return Err(fail("`repeat` must be at least 1".to_owned()));
        }
        Ok(Self {
            action,
            delay: spec.delay_ms.map(Duration::from_millis),
            repeat,
            fragments,
            jsonrpc: spec.jsonrpc,
        })
    }
}

fn generated(value: Option<u64>, key: &str) -> Result<u64, String> {
    let value = value.unwrap_or(0);
    if value > MAX_GENERATED_BYTES {
        return Err(format!("`{key}` is at most {MAX_GENERATED_BYTES} bytes"));
    }
    Ok(value)
}

fn flag(value: Option<bool>, key: &str, action: Action) -> Result<Action, String> {
    match value {
        Some(true) => Ok(action),
        _ => Err(format!("`{key}` can only be true")),
    }
}

/// Decodes hex digits; spaces are allowed between bytes.
pub fn decode_hex(text: &str) -> Result<Vec<u8>, String> {
    let digits: Vec<u8> = text.bytes().filter(|b| !b.is_ascii_whitespace()).collect();
    if !digits.len().is_multiple_of(2) {
        return Err("`raw_hex` needs an even number of hex digits".to_owned());
    }
    digits
        .chunks(2)
        .map(|pair| {
            let text = std::str::from_utf8(pair).map_err(|_| "`raw_hex` is not hex".to_owned())?;
            u8::from_str_radix(text, 16).map_err(|_| format!("`raw_hex` has a bad byte {text:?}"))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fragments_split_lines_into_pieces() {
        assert_eq!(Fragments::Count(3).split(10), vec![0..4, 4..7, 7..10]);
        assert_eq!(Fragments::Count(5).split(2), vec![0..1, 1..2]);
        assert_eq!(
            Fragments::Sizes(vec![2, 3]).split(10),
            vec![0..2, 2..5, 5..10]
        );
        assert_eq!(Fragments::Sizes(vec![20]).split(10), vec![0..10]);
    }

    #[test]
    fn a_step_needs_exactly_one_action() {
        let none = StepSpec::default();
        assert!(
            Step::from_spec(&none, "x")
                .unwrap_err()
                .1
                .contains("needs one action")
        );
        let two = StepSpec {
            respond: Some(Value::Null),
            exit: Some(1),
            ..StepSpec::default()
        };
        let error = Step::from_spec(&two, "x").unwrap_err().1;
        assert!(error.contains("respond, exit"), "{error}");
    }

    #[test]
    fn parameters_must_fit_the_action() {
        let spec = StepSpec {
            exit: Some(2),
            params: Some(Value::Null),
            ..StepSpec::default()
        };
        let error = Step::from_spec(&spec, "x").unwrap_err().1;
        assert_eq!(error, "`params` does not apply to `exit`");
    }

    #[test]
    fn hex_decodes_with_spaces() {
        assert_eq!(decode_hex("ff 00 0a").unwrap(), vec![0xff, 0, 10]);
        assert!(decode_hex("f").is_err());
        assert!(decode_hex("zz").is_err());
    }
}
