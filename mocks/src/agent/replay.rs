//! Replay of a recording ([`super::recording`]): each client message is answered with the lines
//! the recorded agent wrote after the same message, with request ids, session ids, timestamps
//! and relative paths rewritten to the live exchange. A message the recording does not hold gets
//! the configured answer ([`Unrecorded`]), noted in the transcript and the state report.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use serde_json::{Value, json};
use ski::jsonrpc::RpcError;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

pub mod state;
pub use state::ReplayState;

use super::recording::{AgentLine, MessageKind, Recording, Unrecorded, method_of, prompt_text_of};
use super::runtime::ctx::Ctx;
use super::runtime::state::id_key;
use super::runtime::{Agent, Inbound};
use super::script::Quirk;

/// The recording's exchange for a client message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Choice {
    /// A recorded message of the same method (and prompt text).
    Recorded(usize),
    /// The nearest of the same method (under [`Unrecorded::Nearest`]).
    Nearest(usize),
    /// Nothing fits.
    Unrecorded,
}

/// Plays what the recorded agent wrote before the client said anything.
pub fn start(agent: &Arc<Agent>, recording: &Arc<Recording>) {
    if recording
        .exchanges
        .first()
        .is_some_and(|e| e.client.is_none() && e.malformed.is_none() && !e.agent.is_empty())
    {
        agent.state().replay.used.insert(0);
        let task_agent = Arc::clone(agent);
        let recording = Arc::clone(recording);
        agent.spawn(async move {
            let mut ctx = task_agent.detached_context();
            emit(&task_agent, &recording, 0, &mut ctx).await;
        });
    }
}

/// Answers the trigger of `ctx` as the recording says.
pub async fn answer(agent: &Arc<Agent>, recording: &Arc<Recording>, ctx: &mut Ctx) {
    let Some(inbound) = ctx.trigger.clone() else {
        return;
    };
    let live_text = prompt_text(&inbound);
    let missing = missing_fields(recording, &inbound);
    if inbound.id.is_some() && !missing.is_empty() {
        report(agent, &inbound, live_text.as_deref(), "invalid params");
        let reason = format!(
            "ski-mock-agent replay: {} without {}, which every recorded {} carried",
            inbound.method,
            missing.join(", "),
            inbound.method
        );
        let error = RpcError::invalid_params(reason.clone())
            .with_data(json!({"reason": reason, "method": inbound.method, "missing": missing}));
        agent.respond(&inbound, Err(error), None).await;
        return;
    }
    let policy = recording.spec.unrecorded.unwrap_or_default();
    let choice = choose(agent, recording, &inbound, live_text.as_deref(), policy);
    let index = match choice {
        Choice::Recorded(index) => index,
        Choice::Nearest(index) => {
            report(agent, &inbound, live_text.as_deref(), "nearest");
            index
        }
        Choice::Unrecorded => {
            if inbound.method == "session/load" && agent.config.kiro.has(Quirk::ExitOnUnknownLoad) {
                report(
                    agent,
                    &inbound,
                    live_text.as_deref(),
                    "exit (exit-on-unknown-load)",
                );
                super::personality::exit_on_unknown_load(agent, ctx).await;
            }
            let known = method_recorded(recording, &inbound.method);
            unrecorded(agent, &inbound, live_text.as_deref(), policy, known).await;
            return;
        }
    };
    bind(agent, recording, index, &inbound);
    emit(agent, recording, index, ctx).await;
}

/// The top-level params the ACP schema requires of the inbound's method, that every recorded
/// request of the method carried and the inbound lacks: the recorded agent was never seen
/// without them, so replay answers as an agent that requires them (an optional field, such as
/// `clientInfo`, is never asked for).
fn missing_fields(recording: &Recording, inbound: &Inbound) -> Vec<String> {
    let mut recorded = recording
        .exchanges
        .iter()
        .filter_map(|e| e.client.as_ref())
        .filter(|c| {
            MessageKind::of(c) == MessageKind::Request
                && method_of(c) == Some(inbound.method.as_str())
        })
        .map(|c| c.get("params").and_then(Value::as_object));
    let Some(Some(first)) = recorded.next() else {
        return Vec::new();
    };
    let mut common: Vec<&String> = first.keys().filter(|k| !k.starts_with('_')).collect();
    for params in recorded {
        common.retain(|key| params.is_some_and(|p| p.contains_key(key.as_str())));
    }
    let live = inbound.params_value().and_then(Value::as_object);
    let required = |key: &str| {
        let mut without = first.clone();
        without.remove(key);
        ski::acp::MethodParams::decode(&inbound.method, Some(Value::Object(without))).is_err()
    };
    common
        .into_iter()
        .filter(|key| !live.is_some_and(|p| p.contains_key(key.as_str())))
        .filter(|key| required(key))
        .cloned()
        .collect()
}

/// Whether the recording holds any client message of this method.
fn method_recorded(recording: &Recording, method: &str) -> bool {
    recording
        .exchanges
        .iter()
        .filter_map(|e| e.client.as_ref())
        .any(|c| method_of(c) == Some(method))
}

fn prompt_text(inbound: &Inbound) -> Option<String> {
    let params = inbound.params_value()?;
    prompt_text_of(&json!({ "params": params }))
}

/// The first unplayed recorded message of the same method (and, for a prompt, the same text),
/// else the last one played again, else what the policy allows.
fn choose(
    agent: &Agent,
    recording: &Recording,
    inbound: &Inbound,
    live_text: Option<&str>,
    policy: Unrecorded,
) -> Choice {
    let state = agent.state();
    let used = &state.replay.used;
    let same_method: Vec<(usize, &Value)> = recording
        .exchanges
        .iter()
        .enumerate()
        .filter_map(|(index, e)| Some((index, e.client.as_ref()?)))
        .filter(|(_, client)| {
            matches!(
                MessageKind::of(client),
                MessageKind::Request | MessageKind::Notification
            ) && method_of(client) == Some(inbound.method.as_str())
        })
        .collect();
    let same_text = |client: &Value| {
        inbound.method != "session/prompt" || prompt_text_of(client).as_deref() == live_text
    };
    if let Some((index, _)) = same_method
        .iter()
        .find(|(index, client)| !used.contains(index) && same_text(client))
    {
        return Choice::Recorded(*index);
    }
    if let Some((index, _)) = same_method
        .iter()
        .rev()
        .find(|(index, client)| used.contains(index) && same_text(client))
    {
        return Choice::Recorded(*index);
    }
    if policy != Unrecorded::Nearest {
        return Choice::Unrecorded;
    }
    let closeness = |client: &Value| {
        let recorded = prompt_text_of(client).unwrap_or_default();
        let live = live_text.unwrap_or_default();
        recorded
            .chars()
            .zip(live.chars())
            .take_while(|(a, b)| a == b)
            .count()
    };
    same_method
        .iter()
        .max_by_key(|(index, client)| {
            (!used.contains(index), closeness(client), usize::MAX - index)
        })
        .map_or(Choice::Unrecorded, |(index, _)| Choice::Nearest(*index))
}

/// Notes an unrecorded message in the state report and the transcript.
fn report(agent: &Agent, inbound: &Inbound, live_text: Option<&str>, answer: &str) {
    let mut entry = json!({"method": inbound.method, "answer": answer});
    if let Some(id) = &inbound.id {
        entry["id"] = json!(id);
    }
    if let Some(text) = live_text {
        entry["prompt"] = json!(text);
    }
    agent.transcript.note(&format!(
        "replay: {} is not in the recording; answered {answer}",
        inbound.method
    ));
    agent.state().replay.unrecorded.push(entry);
}

async fn unrecorded(
    agent: &Arc<Agent>,
    inbound: &Inbound,
    live_text: Option<&str>,
    policy: Unrecorded,
    method_recorded: bool,
) {
    match policy {
        Unrecorded::Fail => {
            report(agent, inbound, live_text, "fail");
            agent.request_exit(
                1,
                &format!("replay: {} is not in the recording", inbound.method),
            );
        }
        Unrecorded::Error | Unrecorded::Nearest if !method_recorded => {
            // The recorded agent was never asked this method: answered as an agent that does
            // not implement it.
            report(agent, inbound, live_text, "method not found");
            if inbound.id.is_some() {
                let error = RpcError::method_not_found(&inbound.method);
                agent.respond(inbound, Err(error), None).await;
            }
        }
        Unrecorded::Error | Unrecorded::Nearest => {
            report(agent, inbound, live_text, "error");
            let mut data = json!({"method": inbound.method});
            if let Some(text) = live_text {
                data["prompt"] = json!(text);
            }
            let error = RpcError::internal_error(format!(
                "ski-mock-agent replay: {} is not in the recording",
                inbound.method
            ))
            .with_data(data);
            if inbound.id.is_some() {
                agent.respond(inbound, Err(error), None).await;
            }
        }
    }
}

/// Ties the recorded client message of exchange `index` to the live one: its id and session.
fn bind(agent: &Agent, recording: &Recording, index: usize, inbound: &Inbound) {
    let mut state = agent.state();
    let replay = &mut state.replay;
    replay.used.insert(index);
    replay.played += 1;
    let Some(client) = recording.exchanges[index].client.as_ref() else {
        return;
    };
    if let (Some(recorded), Some(live)) = (client.get("id"), &inbound.id) {
        replay.ids.insert(recorded.to_string(), live.clone());
    }
    let recorded_session = client
        .get("params")
        .and_then(|p| p.get("sessionId"))
        .and_then(Value::as_str);
    if let (Some(recorded), Some(live)) = (recorded_session, inbound.param_str("sessionId")) {
        replay.sessions.insert(recorded.to_owned(), live.to_owned());
    }
    if inbound.method == "session/new"
        && let Some(cwd) = inbound.param_str("cwd")
    {
        replay.cwd = Some(cwd.trim_end_matches('/').to_owned());
    }
}

/// Writes the agent lines of exchange `index`; a request of the agent's waits for the client's
/// reply after the exchange's lines, then the lines recorded after that reply follow.
fn emit<'a>(
    agent: &'a Arc<Agent>,
    recording: &'a Arc<Recording>,
    index: usize,
    ctx: &'a mut Ctx,
) -> Pin<Box<dyn Future<Output = ()> + Send + 'a>> {
    Box::pin(async move {
        let mut awaiting = Vec::new();
        let mut previous = 0;
        for line in &recording.exchanges[index].agent {
            if let Some(pause) = recording
                .timing
                .pause(line.after_ms.saturating_sub(previous))
            {
                ctx.park();
                tokio::time::sleep(pause).await;
            }
            previous = line.after_ms;
            if let Some(wait) = write_line(agent, recording, line).await {
                awaiting.push(wait);
            }
        }
        for (recorded_id, reply) in awaiting {
            ctx.park();
            if reply.await.is_err() {
                return;
            }
            let next = {
                let state = agent.state();
                recording.exchanges.iter().enumerate().position(|(i, e)| {
                    !state.replay.used.contains(&i)
                        && e.client.as_ref().is_some_and(|c| {
                            MessageKind::of(c).is_response() && c.get("id") == Some(&recorded_id)
                        })
                })
            };
            if let Some(next) = next {
                agent.state().replay.used.insert(next);
                emit(agent, recording, next, ctx).await;
            }
        }
    })
}

type Awaiting = (
    Value,
    tokio::sync::oneshot::Receiver<super::runtime::state::Reply>,
);

/// Writes one recorded line, rewritten; answers the wait for the reply to a request.
async fn write_line(agent: &Agent, recording: &Recording, line: &AgentLine) -> Option<Awaiting> {
    let Some(message) = &line.message else {
        agent.write_bytes(line.text.as_bytes(), true, None).await;
        return None;
    };
    let mut message = message.clone();
    let kind = MessageKind::of(&message);
    let mut awaiting = None;
    {
        let mut state = agent.state();
        let replay = &mut state.replay;
        if kind.is_response() && !answers_a_live_request(replay, &message) {
            // The recorded request it answered was never sent in this exchange (a notification
            // such as `session/cancel` played before the turn it ended): an answer now would
            // answer nothing the client asked, or the notification itself.
            agent.transcript.note(&format!(
                "replay: a recorded answer to id {} left out: no live request of that id",
                message.get("id").map_or_else(String::new, Value::to_string)
            ));
            return None;
        }
        if kind.is_response()
            && message
                .get("id")
                .is_some_and(|id| mints_session(recording, id))
        {
            allocate_sessions(replay, message.get("result"));
        }
        if kind.is_response()
            && let Some(live) = message
                .get("id")
                .and_then(|id| replay.ids.get(&id.to_string()))
        {
            message["id"] = json!(live);
        }
        rewrite(&mut message, replay, recording.recorded_at);
    }
    if kind == MessageKind::Request {
        let recorded = message.get("id").cloned().unwrap_or(Value::Null);
        let live = agent.next_request_id();
        let reply = agent.expect_reply(&live, None);
        message["id"] = json!(live);
        awaiting = Some((recorded, reply));
        agent.transcript.note(&format!(
            "replay: request {} sent as id {}",
            recorded_text(&message),
            id_key(&live)
        ));
    }
    for message in rechunked(message, agent.config.kiro.chunk_chars) {
        match serde_json::to_vec(&message) {
            Ok(bytes) => {
                agent.write_bytes(&bytes, true, None).await;
            }
            Err(error) => agent
                .transcript
                .note(&format!("replay: cannot encode a line: {error}")),
        }
    }
    awaiting
}

/// Whether a recorded response answers a request the live client sent: its recorded id is tied
/// to a live one ([`bind`]), or it is null (the answer to a line that was no message).
fn answers_a_live_request(replay: &ReplayState, response: &Value) -> bool {
    match response.get("id") {
        None | Some(Value::Null) => true,
        Some(id) => replay.ids.contains_key(&id.to_string()),
    }
}

/// Answers a client line that is no JSON-RPC message with what the recorded agent wrote after the
/// same line, when the recording holds it (byte for byte, the first unplayed one first); `false`
/// when it does not, and the line gets the answer it gets without a recording.
pub async fn answer_malformed(agent: &Arc<Agent>, recording: &Arc<Recording>, line: &[u8]) -> bool {
    let text = String::from_utf8_lossy(line);
    let text = text.trim_end_matches(['\r', '\n']);
    let index = {
        let state = agent.state();
        let used = &state.replay.used;
        let same: Vec<usize> = recording
            .exchanges
            .iter()
            .enumerate()
            .filter(|(_, e)| e.malformed.as_deref() == Some(text))
            .map(|(index, _)| index)
            .collect();
        same.iter()
            .find(|index| !used.contains(index))
            .or_else(|| same.last())
            .copied()
    };
    let Some(index) = index else {
        return false;
    };
    {
        let mut state = agent.state();
        state.replay.used.insert(index);
        state.replay.played += 1;
    }
    let mut ctx = agent.detached_context();
    emit(agent, recording, index, &mut ctx).await;
    true
}

/// A recorded `agent_message_chunk` split into chunks of at most `size` characters (a quirk
/// profile's chunking); any other message as it is.
fn rechunked(message: Value, size: usize) -> Vec<Value> {
    let text = message
        .get("params")
        .and_then(|p| p.get("update"))
        .filter(|u| u.get("sessionUpdate").and_then(Value::as_str) == Some("agent_message_chunk"))
        .and_then(|u| u.get("content"))
        .and_then(|c| c.get("text"))
        .and_then(Value::as_str)
        .filter(|text| size > 0 && text.chars().count() > size)
        .map(str::to_owned);
    let Some(text) = text else {
        return vec![message];
    };
    super::personality::chunks(&text, size)
        .map(|piece| {
            let mut chunk = message.clone();
            chunk["params"]["update"]["content"]["text"] = json!(piece);
            chunk
        })
        .collect()
}

/// Whether the recorded client request with this id made a session (`session/new`, a fork).
fn mints_session(recording: &Recording, id: &Value) -> bool {
    recording.exchanges.iter().any(|e| {
        e.client.as_ref().is_some_and(|c| {
            c.get("id") == Some(id)
                && matches!(
                    method_of(c),
                    Some("session/new" | "session/fork" | "unstable_forkSession")
                )
        })
    })
}

fn recorded_text(message: &Value) -> &str {
    method_of(message).unwrap_or("?")
}

/// A session id in a result that the live exchange has not seen yet gets a live one: the
/// recorded id itself the first time, with a counter after it on each replay. A live id is
/// never handed out twice, even after the recorded id has moved on to a newer one.
fn allocate_sessions(replay: &mut ReplayState, result: Option<&Value>) {
    let Some(recorded) = result
        .and_then(|r| r.get("sessionId"))
        .and_then(Value::as_str)
    else {
        return;
    };
    let live = std::iter::once(recorded.to_owned())
        .chain((2..).map(|n| format!("{recorded}-{n}")))
        .find(|id| !replay.minted.contains(id) && !replay.sessions.values().any(|v| v == id))
        .unwrap_or_else(|| recorded.to_owned());
    replay.minted.insert(live.clone());
    replay.sessions.insert(recorded.to_owned(), live);
}

/// Session ids, timestamps and relative paths of the recording rewritten for the live exchange.
fn rewrite(value: &mut Value, replay: &ReplayState, recorded_at: Option<OffsetDateTime>) {
    match value {
        Value::String(text) => {
            if let Some(live) = replay.sessions.get(text.as_str()) {
                text.clone_from(live);
            } else if let Some(shifted) = shift_timestamp(text, recorded_at) {
                *text = shifted;
            } else if let Some(cwd) = &replay.cwd {
                if text == "." {
                    text.clone_from(cwd);
                } else if let Some(rest) = text.strip_prefix("./") {
                    *text = format!("{cwd}/{rest}");
                }
            }
        }
        Value::Array(items) => items
            .iter_mut()
            .for_each(|item| rewrite(item, replay, recorded_at)),
        Value::Object(map) => map
            .values_mut()
            .for_each(|item| rewrite(item, replay, recorded_at)),
        _ => {}
    }
}

/// A recorded RFC 3339 time moved by as long as has passed since the recording.
fn shift_timestamp(text: &str, recorded_at: Option<OffsetDateTime>) -> Option<String> {
    let recorded_at = recorded_at?;
    let looks_like = text.len() >= 20
        && text.len() <= 40
        && text.as_bytes().first().is_some_and(u8::is_ascii_digit)
        && text.as_bytes().get(10) == Some(&b'T');
    if !looks_like {
        return None;
    }
    let time = OffsetDateTime::parse(text, &Rfc3339).ok()?;
    let shifted = time + (OffsetDateTime::now_utc() - recorded_at);
    shifted.format(&Rfc3339).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sessions_times_and_paths_are_rewritten() {
        let mut replay = ReplayState::default();
        replay.sessions.insert("rec-1".into(), "live-1".into());
        replay.cwd = Some("/live/dir".into());
        let recorded_at = OffsetDateTime::parse("2026-01-01T00:00:00Z", &Rfc3339).ok();
        let mut message = json!({"params": {"sessionId": "rec-1", "path": "./a.txt", "cwd": ".",
            "at": "2026-01-01T00:00:05Z", "text": "rec-1 said hi"}});
        rewrite(&mut message, &replay, recorded_at);
        let params = &message["params"];
        assert_eq!(params["sessionId"], "live-1");
        assert_eq!(params["path"], "/live/dir/a.txt");
        assert_eq!(params["cwd"], "/live/dir");
        assert_eq!(params["text"], "rec-1 said hi");
        let at = OffsetDateTime::parse(params["at"].as_str().unwrap(), &Rfc3339).unwrap();
        assert!(at > OffsetDateTime::parse("2026-11-01T00:00:00Z", &Rfc3339).unwrap());
    }

    #[test]
    fn a_profile_rechunks_recorded_message_chunks() {
        let message = json!({"method": "session/update", "params": {"sessionId": "s",
            "update": {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "abcdefghij"}}}});
        let texts: Vec<Value> = rechunked(message.clone(), 4)
            .iter()
            .map(|m| m["params"]["update"]["content"]["text"].clone())
            .collect();
        assert_eq!(texts, [json!("abcd"), json!("efgh"), json!("ij")]);
        assert_eq!(rechunked(message.clone(), 0), [message]);
    }

    #[test]
    fn a_replayed_session_gets_a_fresh_live_id() {
        let mut replay = ReplayState::default();
        allocate_sessions(&mut replay, Some(&json!({"sessionId": "s"})));
        assert_eq!(replay.sessions["s"], "s");
        allocate_sessions(&mut replay, Some(&json!({"sessionId": "s"})));
        assert_eq!(replay.sessions["s"], "s-2");
    }

    #[test]
    fn a_live_session_id_is_handed_out_once_however_often_its_session_is_replayed() {
        let mut replay = ReplayState::default();
        let mut handed_out = Vec::new();
        for _ in 0..4 {
            allocate_sessions(&mut replay, Some(&json!({"sessionId": "s"})));
            handed_out.push(replay.sessions["s"].clone());
        }
        assert_eq!(handed_out, ["s", "s-2", "s-3", "s-4"]);
    }
}
