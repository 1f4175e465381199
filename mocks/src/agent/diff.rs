//! `ski-mock-agent diff`: replays a recording's client side against the live agent and reports,
//! exchange by exchange, what changed in the agent's answers ([`shape`]). The live agent's
//! requests get the recorded client's replies; session ids and the working directory are
//! rewritten to the live ones. The live answers are redacted as the recording was (this
//! environment's values, the recording's extra fields, paths under the working directory made
//! relative) before they are compared, so a secret is neither reported as a change nor printed.

pub mod shape;

use std::collections::HashMap;
use std::time::Duration;

use anyhow::anyhow;
use serde_json::{Value, json};
use ski::exit::CommandError;
use ski::transport::child::{Child, ChildSpec, spawn};
use tokio::time::Instant;

use super::record::redact::{Extra, Redactor};
use super::recording::{MessageKind, Recording, method_of};
use super::script::Script;

/// What to check and how.
#[derive(Debug, Clone)]
pub struct DiffOptions {
    /// The recording (a script file holding one).
    pub recording: String,
    /// The live agent's command line.
    pub command: Vec<String>,
    /// What the comparison leaves out.
    pub shape: shape::Options,
    /// How long to wait for an answer the recording holds.
    pub timeout: Duration,
    /// How long to wait for lines the recording holds that answer nothing (updates after a
    /// result, a notification's effects).
    pub settle: Duration,
    /// The live agent's working directory, which relative paths of the recording resolve to.
    pub cwd: String,
    /// This process's environment, whose values are redacted from the live answers.
    pub env: Vec<(String, String)>,
}

/// The outcome: one line per difference.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Drift {
    /// `exchange N METHOD: ...` per difference.
    pub changes: Vec<String>,
    /// Exchanges compared.
    pub exchanges: usize,
    /// Live agent lines read.
    pub lines: usize,
}

impl Drift {
    /// The report printed on stdout.
    pub fn render(&self) -> String {
        let mut out = String::new();
        for change in &self.changes {
            out.push_str(change);
            out.push('\n');
        }
        if self.changes.is_empty() {
            out.push_str(&format!(
                "no structural drift: {} exchanges, {} agent lines\n",
                self.exchanges, self.lines
            ));
        } else {
            out.push_str(&format!(
                "drift: {} difference(s) in {} exchanges\n",
                self.changes.len(),
                self.exchanges
            ));
        }
        out
    }
}

/// The live agent and what is known of it.
struct Live {
    child: Child,
    /// Recorded session id → live session id.
    sessions: HashMap<String, String>,
    /// Agent requests answered so far (their position in the recording's order).
    requests_seen: usize,
    lines: usize,
    ended: bool,
}

/// Runs the check. A recording that cannot be loaded is a configuration error (exit 3), an agent
/// that cannot be started an upstream error (exit 4).
pub async fn diff(options: &DiffOptions) -> Result<Drift, CommandError> {
    let script = Script::load(&options.recording).map_err(CommandError::configuration)?;
    let recording = script.recording.ok_or_else(|| {
        CommandError::configuration(anyhow!(
            "{} is a script, not a recording (no [[exchange]])",
            options.recording
        ))
    })?;
    let redactor = Redactor::new(&options.cwd, &options.env, &extra_of(&recording))
        .map_err(|e| CommandError::internal(anyhow!(e)))?;
    let spec = ChildSpec::from_argv("agent", &options.command)
        .ok_or_else(|| CommandError::invalid_input(anyhow!("no agent command after --")))?
        .die_with_parent();
    let child = spawn(spec).map_err(|e| CommandError::upstream(anyhow!(e)))?;
    let mut live = Live {
        child,
        sessions: HashMap::new(),
        requests_seen: 0,
        lines: 0,
        ended: false,
    };
    let recorded_requests: Vec<(usize, Value)> = agent_requests(&recording);
    let mut drift = Drift::default();
    for (index, exchange) in recording.exchanges.iter().enumerate() {
        let client = match &exchange.client {
            Some(client) if MessageKind::of(client).is_response() => continue,
            other => other.clone(),
        };
        let label = format!(
            "exchange {index} {}",
            client
                .as_ref()
                .and_then(method_of)
                .unwrap_or("(before the client)")
        );
        if let Some(mut client) = client {
            rewrite_client(&mut client, &live.sessions, &options.cwd);
            if live.child.send_line(&client.to_string()).await.is_err() {
                live.ended = true;
            }
        }
        let expected: Vec<Value> = exchange
            .agent
            .iter()
            .filter_map(|l| l.message.clone())
            .collect();
        let got = collect(
            &mut live,
            &recording,
            &recorded_requests,
            &expected,
            options,
        )
        .await;
        learn_sessions(&expected, &got, &mut live.sessions);
        let got: Vec<Value> = got
            .into_iter()
            .map(|mut message| {
                redactor.value(&mut message);
                message
            })
            .collect();
        for change in shape::compare_exchange(&expected, &got, &options.shape) {
            drift.changes.push(format!("{label}: {change}"));
        }
        drift.exchanges += 1;
    }
    live.child.close_stdin();
    let rest = read_until_quiet(&mut live, options.settle).await;
    for message in rest
        .iter()
        .filter(|m| !matches!(MessageKind::of(m), MessageKind::Request))
    {
        drift.changes.push(format!(
            "after the last exchange: new message: {}",
            shape::signature(message)
        ));
    }
    drift.lines = live.lines;
    let _ = live.child.shutdown().await;
    Ok(drift)
}

/// What the recording says it redacted beyond the defaults: its fields, and its environment
/// variables whatever their length here.
fn extra_of(recording: &Recording) -> Extra {
    let named = |prefix: &str| -> Vec<String> {
        recording
            .spec
            .redacted
            .iter()
            .filter_map(|what| what.strip_prefix(prefix).map(str::to_owned))
            .collect()
    };
    Extra {
        fields: named("field:"),
        patterns: Vec::new(),
        env: named("env:"),
    }
}

/// The recorded agent requests in order, with the exchange holding the client's reply.
fn agent_requests(recording: &Recording) -> Vec<(usize, Value)> {
    let mut out = Vec::new();
    for exchange in &recording.exchanges {
        for line in &exchange.agent {
            let Some(message) = &line.message else {
                continue;
            };
            if MessageKind::of(message) != MessageKind::Request {
                continue;
            }
            let id = message.get("id").cloned().unwrap_or(Value::Null);
            if let Some(reply) = recording.exchanges.iter().position(|e| {
                e.client
                    .as_ref()
                    .is_some_and(|c| MessageKind::of(c).is_response() && c.get("id") == Some(&id))
            }) {
                out.push((reply, id));
            } else {
                out.push((usize::MAX, id));
            }
        }
    }
    out
}

/// Reads the live agent's lines for one exchange: until every response the recording has for it
/// arrived (up to the timeout), then as many lines as were recorded (up to the settle time).
async fn collect(
    live: &mut Live,
    recording: &Recording,
    requests: &[(usize, Value)],
    expected: &[Value],
    options: &DiffOptions,
) -> Vec<Value> {
    let wanted_responses = expected
        .iter()
        .filter(|m| MessageKind::of(m).is_response())
        .count();
    let mut got = Vec::new();
    let deadline = Instant::now() + options.timeout;
    let mut responses = 0;
    while responses < wanted_responses && !live.ended {
        match next_message(live, deadline).await {
            Some(message) => {
                if MessageKind::of(&message).is_response() {
                    responses += 1;
                }
                answer_request(live, recording, requests, &message).await;
                got.push(message);
            }
            None => break,
        }
    }
    let settle = Instant::now() + options.settle;
    while got.len() < expected.len() && !live.ended {
        match next_message(live, settle).await {
            Some(message) => {
                answer_request(live, recording, requests, &message).await;
                got.push(message);
            }
            None => break,
        }
    }
    got
}

/// The next JSON line of the live agent before `deadline`; its stderr is passed on.
async fn next_message(live: &mut Live, deadline: Instant) -> Option<Value> {
    loop {
        let line = tokio::time::timeout_at(deadline, live.child.next_output_line()).await;
        match line {
            Err(_) => return None,
            Ok(None) => {
                live.ended = true;
                return None;
            }
            Ok(Some((ski::transport::child::OutputStream::Stderr, line))) => {
                eprintln!("{line}");
            }
            Ok(Some((ski::transport::child::OutputStream::Stdout, line))) => {
                live.lines += 1;
                match serde_json::from_str::<Value>(&line) {
                    Ok(message) if message.is_object() => return Some(message),
                    _ => return Some(json!({"unparsed": line})),
                }
            }
        }
    }
}

/// A live request gets the recorded client's reply to the request in the same position.
async fn answer_request(
    live: &mut Live,
    recording: &Recording,
    requests: &[(usize, Value)],
    message: &Value,
) {
    if MessageKind::of(message) != MessageKind::Request {
        return;
    }
    let id = message.get("id").cloned().unwrap_or(Value::Null);
    let recorded = requests
        .get(live.requests_seen)
        .and_then(|(reply, _)| recording.exchanges.get(*reply))
        .and_then(|e| e.client.clone());
    live.requests_seen += 1;
    let reply = match recorded {
        Some(mut reply) => {
            reply["id"] = id;
            rewrite_client(&mut reply, &live.sessions, "");
            reply
        }
        None => json!({"jsonrpc": "2.0", "id": id, "error": {
            "code": -32603, "message": "ski-mock-agent diff: no reply to this request in the recording"}}),
    };
    if live.child.send_line(&reply.to_string()).await.is_err() {
        live.ended = true;
    }
}

/// Reads what the live agent still writes until it is quiet for `settle` or ends.
async fn read_until_quiet(live: &mut Live, settle: Duration) -> Vec<Value> {
    let mut out = Vec::new();
    while !live.ended {
        match next_message(live, Instant::now() + settle).await {
            Some(message) => out.push(message),
            None => break,
        }
    }
    out
}

/// Session ids of recorded results matched to the live ones, in order.
fn learn_sessions(expected: &[Value], got: &[Value], sessions: &mut HashMap<String, String>) {
    let ids = |messages: &[Value]| -> Vec<String> {
        messages
            .iter()
            .filter_map(|m| {
                m.get("result")?
                    .get("sessionId")?
                    .as_str()
                    .map(str::to_owned)
            })
            .collect()
    };
    for (recorded, live) in ids(expected).into_iter().zip(ids(got)) {
        sessions.insert(recorded, live);
    }
}

/// A recorded client message made live: session ids mapped, relative paths made absolute.
fn rewrite_client(value: &mut Value, sessions: &HashMap<String, String>, cwd: &str) {
    match value {
        Value::String(text) => {
            if let Some(live) = sessions.get(text.as_str()) {
                text.clone_from(live);
            } else if !cwd.is_empty() {
                if text == "." {
                    *text = cwd.to_owned();
                } else if let Some(rest) = text.strip_prefix("./") {
                    *text = format!("{cwd}/{rest}");
                }
            }
        }
        Value::Array(items) => items
            .iter_mut()
            .for_each(|item| rewrite_client(item, sessions, cwd)),
        Value::Object(map) => map
            .values_mut()
            .for_each(|item| rewrite_client(item, sessions, cwd)),
        _ => {}
    }
}
