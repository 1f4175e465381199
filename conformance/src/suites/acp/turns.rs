//! Checks of prompt turns: their result, the updates they send and in which order, content
//! blocks, large messages, and the same turn over stdio and WebSocket.

use serde_json::{Value, json};

use super::agent::{PLAIN, Transport, declared};
use super::connection::Connection;
use super::exchange::{self, QUIET, agent_text, open, open_on, prompt_ok, since, start_prompt};
use crate::check::{Check, CheckError, CheckResult, Failure, OrFail};
use crate::context::Ctx;
use crate::vocabulary::capability;
use crate::{ensure, ensure_eq, fail};

/// The checks of this module.
pub fn checks() -> Vec<Check> {
    vec![
        Check::new(
            "WS-001",
            "Starts the agent on WebSocket, runs initialize, session/new and a prompt; requires at \
             least one session/update for the session before the result {stopReason: end_turn}.",
            ws_001,
        ),
        Check::new(
            "WS-002",
            "Runs initialize, session/new and a prompt over stdio and compares the answered \
             methods, the stop reason and (with turn-sequence) the update kinds with the pinned \
             stdio baseline (stdio-baseline.json).",
            ws_002,
        ),
        Check::new(
            "WS-006",
            "Prompts an echo agent with a 600 KB text block (multi-byte characters included) \
             over stdio, and over ws when declared; the reply must equal the prompt and end \
             end_turn.",
            ws_006,
        ),
        Check::new(
            "WS-042",
            "Runs a turn and requires the first tool_call before the first tool_call_update of \
             its toolCallId, that before the first agent_message_chunk, all before the result.",
            ws_042,
        ),
        Check::new(
            "WS-043",
            "Runs a turn and requires the first available_commands_update and the first plan \
             before the first tool_call.",
            ws_043,
        ),
        Check::new(
            "WS-045",
            "Prompts with text, resource_link and (when advertised) image and audio blocks; the \
             turn must end end_turn, every message chunk must be a valid ContentBlock and, with \
             echo, the reply must contain the text.",
            ws_045,
        ),
        Check::new(
            "WS-048",
            "Runs one script over stdio and over ws (a prompt, and a prompt on an unknown \
             session) and requires the same update kinds, stop reasons and error codes.",
            ws_048,
        ),
        Check::new(
            "WS-058",
            "Runs the first prompt of a session; requires a session_info_update with a string \
             title and an RFC 3339 updatedAt before the result, and (with session-list) the same \
             values in session/list.",
            ws_058,
        ),
        Check::new(
            "WS-064c",
            "Runs a prompt on the plain agent and requires no execution_state_update at all.",
            ws_064c,
        ),
        Check::new(
            "ACP-CORE-003",
            "Runs a turn, listens for a quiet period after its result, and requires no content \
             update of the session after the result.",
            core_003,
        ),
        Check::new(
            "ACP-CORE-004",
            "Sends session/new and requires that no frame naming the new sessionId arrives \
             before its result.",
            core_004,
        ),
        Check::new(
            "ACP-CORE-010",
            "Initializes without fs or terminal capabilities and runs a turn (the fs and \
             terminal variants when declared); no fs/* or terminal/* request may arrive and the \
             turn must be answered.",
            core_010,
        ),
        Check::new(
            "ACP-CORE-025",
            "Prompts with one text block and one resource_link block; requires a result, not an \
             error.",
            core_025,
        ),
    ]
}

async fn ws_001(ctx: Ctx) -> CheckResult {
    let mut opened = open_on(&ctx, Transport::Ws, PLAIN).await?;
    let turn = prompt_ok(&mut opened.conn, &opened.session, "hello over websocket").await?;
    ensure!(
        !turn.updates(&opened.conn).is_empty(),
        "at least one session/update for the session before the prompt result",
        "none between the request and the result {}",
        turn.describe()
    );
    Ok(())
}

/// The pinned stdio baseline.
#[derive(Debug, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct Baseline {
    responses: Vec<String>,
    update_kinds: Vec<String>,
    stop_reason: String,
}

const BASELINE: &str = include_str!("stdio-baseline.json");

async fn ws_002(ctx: Ctx) -> CheckResult {
    let baseline: Baseline = serde_json::from_str(BASELINE).or_error("stdio-baseline.json")?;
    let mut opened = open_on(&ctx, Transport::Stdio, PLAIN).await?;
    let turn = exchange::prompt(&mut opened.conn, &opened.session, "hello").await?;
    // The runner authenticates where the target's auth asks it to: not part of the baseline.
    let mut answered = answered_methods(&opened.conn);
    answered.retain(|m| m != "authenticate");
    ensure_eq!(
        baseline.responses,
        answered,
        "the methods answered, in order"
    );
    ensure_eq!(
        Some(baseline.stop_reason.as_str()),
        turn.stop_reason(),
        "the stop reason"
    );
    let mut kinds = turn.kinds(&opened.conn);
    ensure!(
        kinds.iter().any(|k| k == "agent_message_chunk"),
        "the turn sends its reply as agent_message_chunk",
        "update kinds {kinds:?}"
    );
    if ctx.has(capability::TURN_SEQUENCE) {
        let mut expected = baseline.update_kinds.clone();
        if !ctx.has(capability::SESSION_INFO) {
            expected.retain(|k| k != "session_info_update");
            kinds.retain(|k| k != "session_info_update");
        }
        ensure_eq!(expected, kinds, "the sessionUpdate kinds of the turn");
    }
    Ok(())
}

/// The method of every response on `conn`, in order (the methods of the client's requests).
fn answered_methods(conn: &Connection) -> Vec<String> {
    conn.frames()
        .iter()
        .filter(|f| f.is_response())
        .map(|f| {
            let id = f.id().cloned().unwrap_or(Value::Null);
            conn.sent_method(&id)
                .unwrap_or_else(|| format!("a request with id {id} the client never sent"))
        })
        .collect()
}

async fn ws_006(ctx: Ctx) -> CheckResult {
    ctx.require(capability::ECHO)?;
    let unit = "ski conformance: 大きな行 — ";
    let mut text = String::with_capacity(620_000);
    while text.len() < 600 * 1024 {
        text.push_str(unit);
    }
    for transport in declared(&ctx) {
        let mut opened = open_on(&ctx, transport, PLAIN).await?;
        let turn = prompt_ok(&mut opened.conn, &opened.session, &text).await?;
        let reply = agent_text(&turn.updates(&opened.conn));
        ensure!(
            reply == text,
            format!(
                "over {} the reply equals the {} byte prompt",
                transport.name(),
                text.len()
            ),
            "a reply of {} bytes{}",
            reply.len(),
            first_difference(&text, &reply)
        );
    }
    Ok(())
}

fn first_difference(a: &str, b: &str) -> String {
    match a.chars().zip(b.chars()).position(|(x, y)| x != y) {
        Some(i) => format!(", first different at character {i}"),
        None => String::new(),
    }
}

async fn ws_042(ctx: Ctx) -> CheckResult {
    let mut opened = open(&ctx, PLAIN).await?;
    let turn = prompt_ok(&mut opened.conn, &opened.session, "show me the tool call").await?;
    let updates = turn.updates(&opened.conn);
    let position =
        |pred: &dyn Fn(&&super::connection::Frame) -> bool| updates.iter().position(pred);
    let kinds = exchange::kinds(&updates);
    let Some(call) = position(&|f| f.update_kind() == Some("tool_call")) else {
        fail!("a tool_call update in the turn", "update kinds {kinds:?}");
    };
    let call_id = updates[call]
        .update()
        .and_then(|u| u.get("toolCallId"))
        .cloned()
        .unwrap_or(Value::Null);
    let Some(update) = position(&|f| {
        f.update_kind() == Some("tool_call_update")
            && f.update().and_then(|u| u.get("toolCallId")) == Some(&call_id)
    }) else {
        fail!(
            format!("a tool_call_update for toolCallId {call_id}"),
            "update kinds {kinds:?}"
        );
    };
    let Some(chunk) = position(&|f| f.update_kind() == Some("agent_message_chunk")) else {
        fail!(
            "an agent_message_chunk in the turn",
            "update kinds {kinds:?}"
        );
    };
    ensure!(
        call < update && update < chunk,
        "tool_call, then tool_call_update, then agent_message_chunk",
        "positions tool_call {call}, tool_call_update {update}, agent_message_chunk {chunk} in {kinds:?}"
    );
    Ok(())
}

async fn ws_043(ctx: Ctx) -> CheckResult {
    let mut opened = open(&ctx, PLAIN).await?;
    let turn = prompt_ok(&mut opened.conn, &opened.session, "plan first").await?;
    let kinds = turn.kinds(&opened.conn);
    let first = |kind: &str| kinds.iter().position(|k| k == kind);
    let (Some(commands), Some(plan), Some(call)) = (
        first("available_commands_update"),
        first("plan"),
        first("tool_call"),
    ) else {
        fail!(
            "available_commands_update, plan and tool_call in the turn",
            "update kinds {kinds:?}"
        );
    };
    ensure!(
        commands < call && plan < call,
        "available_commands_update and plan before the first tool_call",
        "update kinds {kinds:?}"
    );
    Ok(())
}

/// A one-pixel PNG.
const PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==";

/// A short WAV header.
const WAV: &str = "UklGRiQAAABXQVZFZm10IBAAAAABAAEAQB8AAEAfAAABAAgAZGF0YQAAAAA=";

async fn ws_045(ctx: Ctx) -> CheckResult {
    let mut opened = open(&ctx, PLAIN).await?;
    let caps = opened
        .init
        .pointer("/agentCapabilities/promptCapabilities")
        .cloned()
        .unwrap_or(Value::Null);
    let mut blocks = vec![json!({"type": "text", "text": "describe these"})];
    if caps.get("image").and_then(Value::as_bool) == Some(true) {
        blocks.push(json!({"type": "image", "mimeType": "image/png", "data": PNG}));
    }
    if caps.get("audio").and_then(Value::as_bool) == Some(true) {
        blocks.push(json!({"type": "audio", "mimeType": "audio/wav", "data": WAV}));
    }
    blocks.push(json!({
        "type": "resource_link",
        "uri": "file:///tmp/ski-conformance/notes.txt",
        "name": "notes.txt",
        "mimeType": "text/plain",
    }));
    let (id, start) = start_prompt(&mut opened.conn, &opened.session, Value::Array(blocks)).await?;
    let turn = exchange::finish_prompt(&mut opened.conn, &opened.session, id, start).await?;
    turn.expect_stop(
        "end_turn",
        "a prompt of text, image, audio and resource_link blocks ends end_turn",
    )?;
    let updates = turn.updates(&opened.conn);
    for frame in &updates {
        let kind = frame.update_kind().unwrap_or_default();
        if !kind.ends_with("_message_chunk") {
            continue;
        }
        let content = frame
            .update()
            .and_then(|u| u.get("content"))
            .cloned()
            .unwrap_or(Value::Null);
        if let Err(error) = serde_json::from_value::<agent_client_protocol_schema::v1::ContentBlock>(
            content.clone(),
        ) {
            fail!(
                "every message chunk carries a valid ContentBlock",
                "frame #{}: {content} ({error})",
                frame.seq
            );
        }
    }
    if ctx.has(capability::ECHO) {
        let reply = agent_text(&updates);
        ensure!(
            reply.contains("describe these"),
            "the echo reply contains the text block's text",
            "reply {reply:?}"
        );
    }
    Ok(())
}

/// What one transport showed for the WS-048 script.
#[derive(Debug, PartialEq)]
struct Outcome {
    kinds: Vec<String>,
    stop: Option<String>,
    error: Option<i64>,
}

async fn script_048(ctx: &Ctx, transport: Transport) -> Result<Outcome, CheckError> {
    let mut opened = open_on(ctx, transport, PLAIN).await?;
    let turn =
        exchange::prompt(&mut opened.conn, &opened.session, "same on every transport").await?;
    let mut kinds = turn.kinds(&opened.conn);
    kinds.dedup();
    let (id, start) = start_prompt(
        &mut opened.conn,
        "sess_ski_conformance_unknown",
        exchange::text_prompt("nobody"),
    )
    .await?;
    let unknown =
        exchange::finish_prompt(&mut opened.conn, "sess_ski_conformance_unknown", id, start)
            .await?;
    Ok(Outcome {
        kinds,
        stop: turn.stop_reason().map(str::to_owned),
        error: unknown.fault().and_then(|f| f.code),
    })
}

async fn ws_048(ctx: Ctx) -> CheckResult {
    let stdio = script_048(&ctx, Transport::Stdio).await?;
    let ws = script_048(&ctx, Transport::Ws).await?;
    ensure_eq!(
        stdio.kinds,
        ws.kinds,
        "the update kinds over stdio (expected) and ws (actual)"
    );
    ensure_eq!(
        stdio.stop,
        ws.stop,
        "the stop reason over stdio (expected) and ws (actual)"
    );
    ensure_eq!(
        stdio.error,
        ws.error,
        "the error code for an unknown session over stdio (expected) and ws (actual)"
    );
    ensure_eq!(Some("end_turn".to_owned()), stdio.stop, "the stop reason");
    Ok(())
}

/// Whether `text` looks like an RFC 3339 date-time (`2026-01-01T00:00:00Z`, offsets allowed).
fn is_rfc3339(text: &str) -> bool {
    time::OffsetDateTime::parse(text, &time::format_description::well_known::Rfc3339).is_ok()
}

async fn ws_058(ctx: Ctx) -> CheckResult {
    let mut opened = open(&ctx, PLAIN).await?;
    let turn = prompt_ok(&mut opened.conn, &opened.session, "name this session").await?;
    let updates = turn.updates(&opened.conn);
    let Some(info) = updates
        .iter()
        .find(|f| f.update_kind() == Some("session_info_update"))
        .and_then(|f| f.update().cloned())
    else {
        fail!(
            "a session_info_update before the first prompt's result",
            "update kinds {:?}",
            exchange::kinds(&updates)
        );
    };
    let title = info.get("title").cloned();
    ensure!(
        title.as_ref().is_some_and(Value::is_string),
        "the session_info_update carries a string title",
        "{info}"
    );
    if let Some(updated) = info.get("updatedAt").filter(|v| !v.is_null()) {
        ensure!(
            updated.as_str().is_some_and(is_rfc3339),
            "updatedAt is an RFC 3339 date-time",
            "{updated}"
        );
    }
    if ctx.has(capability::SESSION_LIST) {
        let list = opened.conn.call_ok("session/list", json!({})).await?;
        let entry = list
            .get("sessions")
            .and_then(Value::as_array)
            .and_then(|s| {
                s.iter()
                    .find(|e| e.get("sessionId").and_then(Value::as_str) == Some(&opened.session))
            })
            .cloned();
        let Some(entry) = entry else {
            fail!("the session is in session/list", "{list}");
        };
        ensure_eq!(
            title,
            entry.get("title").cloned(),
            "the title in session/list"
        );
        if let Some(updated) = info.get("updatedAt").filter(|v| !v.is_null()) {
            ensure_eq!(
                Some(updated.clone()),
                entry.get("updatedAt").cloned(),
                "the updatedAt in session/list (the session_info_update's)"
            );
        }
    }
    Ok(())
}

async fn ws_064c(ctx: Ctx) -> CheckResult {
    let mut opened = open(&ctx, PLAIN).await?;
    prompt_ok(&mut opened.conn, &opened.session, "no states please").await?;
    opened.conn.quiet(QUIET).await;
    let states: Vec<_> = opened
        .conn
        .frames()
        .iter()
        .filter(|f| f.update_kind() == Some("execution_state_update"))
        .collect();
    ensure!(
        states.is_empty(),
        "no execution_state_update unless it is enabled",
        "{}",
        exchange::list(&states)
    );
    Ok(())
}

async fn core_003(ctx: Ctx) -> CheckResult {
    let mut opened = open(&ctx, PLAIN).await?;
    let turn = exchange::prompt(&mut opened.conn, &opened.session, "and then silence").await?;
    ensure!(
        turn.reply.is_ok(),
        "the prompt turn ends with a result",
        "{}",
        turn.describe()
    );
    opened.conn.quiet(QUIET).await;
    let after = since(&opened.conn, turn.end + 1);
    let late = exchange::turn_content_updates(&after, &opened.session);
    ensure!(
        late.is_empty(),
        "no content update of the session after the prompt result",
        "{}",
        exchange::list(&late)
    );
    Ok(())
}

async fn core_004(ctx: Ctx) -> CheckResult {
    let mut agent = super::agent::Agent::start(&ctx, PLAIN).await?;
    let mut conn = agent.connect().await?;
    exchange::initialize(&mut conn).await?;
    let from = conn.cursor();
    let id = conn
        .request("session/new", exchange::new_session_params(&ctx))
        .await?;
    let reply = conn.reply(&id, "session/new").await?;
    let result = exchange::expect_session(&ctx, reply, "session/new succeeds")?;
    let session = exchange::session_id_of(&result, "session/new")?;
    let answer = conn
        .frames()
        .iter()
        .position(|f| f.answers(&id))
        .unwrap_or_default();
    let early: Vec<_> = conn.frames()[from..answer]
        .iter()
        .filter(|f| f.session_id() == Some(session.as_str()))
        .collect();
    ensure!(
        early.is_empty(),
        "no frame naming the new session before the session/new result",
        "{}",
        exchange::list(&early)
    );
    Ok(())
}

async fn core_010(ctx: Ctx) -> CheckResult {
    let mut variants = vec![PLAIN];
    if ctx.has(capability::AGENT_FS) {
        variants.push("fs");
    }
    if ctx.has(capability::AGENT_TERMINAL) {
        variants.push("terminal");
    }
    for variant in variants {
        let mut opened = open(&ctx, variant).await?;
        let turn = exchange::prompt(&mut opened.conn, &opened.session, "use your tools").await?;
        let calls: Vec<_> = opened
            .conn
            .frames()
            .iter()
            .filter(|f| {
                f.is_request()
                    && f.method()
                        .is_some_and(|m| m.starts_with("fs/") || m.starts_with("terminal/"))
            })
            .collect();
        ensure!(
            calls.is_empty(),
            "no fs/* or terminal/* request to a client that advertised neither",
            "{} (agent variant {:?}, turn {})",
            exchange::list(&calls),
            variant,
            turn.describe()
        );
    }
    Ok(())
}

async fn core_025(ctx: Ctx) -> CheckResult {
    let mut opened = open(&ctx, PLAIN).await?;
    let blocks = json!([
        {"type": "text", "text": "read this link"},
        {"type": "resource_link", "uri": "file:///tmp/ski-conformance/readme.md", "name": "readme.md"},
    ]);
    let (id, start) = start_prompt(&mut opened.conn, &opened.session, blocks).await?;
    let turn = exchange::finish_prompt(&mut opened.conn, &opened.session, id, start).await?;
    if turn.reply.is_err() {
        return Err(Failure::new(
            "a prompt of text and resource_link ends with a result",
            "a session/prompt result, not an error",
        )
        .actual(turn.describe())
        .into());
    }
    Ok(())
}
