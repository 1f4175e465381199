//! ACP v1's newer additions (ACP-V1X-*): `additionalDirectories` validated before a session is
//! made and never reactivated implicitly, message ids on streamed agent message chunks and on
//! the chunks `session/load` replays, and the `notice` and compaction updates kept from a client
//! that did not advertise them.

use std::collections::BTreeSet;

use serde_json::{Value, json};

use super::agent::PLAIN;
use super::connection::{Connection, Frame};
use super::exchange::{self, Opened, QUIET, open, prompt};
use super::sessions::load::second;

// `agent: _agent` keeps the agent running while its connection is used (dropping it ends it).
use crate::check::{Check, CheckError, CheckResult};
use crate::context::Ctx;
use crate::vocabulary::capability;
use crate::{ensure, skip};

const ADDITIONAL: &str = "/agentCapabilities/sessionCapabilities/additionalDirectories";
const LIST: &str = "/agentCapabilities/sessionCapabilities/list";
const RESUME: &str = "/agentCapabilities/sessionCapabilities/resume";
const LOAD: &str = "/agentCapabilities/loadSession";

/// The checks of this module.
pub fn checks() -> Vec<Check> {
    vec![
        Check::new(
            "ACP-V1X-001",
            "Where the agent advertises sessionCapabilities.additionalDirectories, sends \
             session/new with additionalDirectories that is not an array, holds a number, an \
             empty string, or a relative path; each must be answered with an error.",
            v1x_001,
        ),
        Check::new(
            "ACP-V1X-002",
            "Where the agent advertises additionalDirectories, list and resume: opens a session \
             with one additional directory, resumes it without additionalDirectories, and \
             requires session/list to report no additional directory for it any more (when the \
             agent reports them at all).",
            v1x_002,
        ),
        Check::new(
            "ACP-V1X-003",
            "Runs two prompt turns; where the agent puts a messageId on its agent_message_chunks \
             (optional in v1), every chunk should carry a non-empty string one, and no id of the \
             first turn's messages may reappear in the second's.",
            v1x_003,
        ),
        Check::new(
            "ACP-V1X-004",
            "A client without session.notices runs a turn, and the agent's own notice command \
             when it offers one; the agent must send no notice update.",
            v1x_004,
        ),
        Check::new(
            "ACP-V1X-005",
            "A client without session.compaction runs a turn, and the agent's own compact \
             command when it offers one; the agent must send no compaction_update or \
             compaction_summary_chunk.",
            v1x_005,
        ),
        Check::new(
            "ACP-V1X-006",
            "Where the agent advertises loadSession and puts a messageId on its live \
             agent_message_chunks: after two prompt turns, loads the session (from a second \
             connection where the transport has one); every replayed user_message_chunk and \
             agent_message_chunk should carry a non-empty string messageId, and no id may \
             belong to two messages (to two runs of chunks of different kinds).",
            v1x_006,
        ),
    ]
}

/// Goes on only where the `initialize` result advertises something at every pointer.
fn require_advertised(ctx: &Ctx, init: &Value, pointers: &[&str]) -> CheckResult {
    for pointer in pointers {
        let advertised = init
            .pointer(pointer)
            .is_some_and(|v| !v.is_null() && v != &json!(false));
        if !advertised {
            return Err(CheckError::Undeclared {
                target: ctx.target().name.clone(),
                capability: pointer.trim_start_matches('/').replace('/', "."),
            });
        }
    }
    Ok(())
}

/// A new directory below the scenario's temp dir, as an absolute path.
fn extra_root(ctx: &Ctx) -> Result<String, CheckError> {
    let dir = ctx.temp_dir().join("additional-root");
    std::fs::create_dir_all(&dir)
        .map_err(|e| CheckError::Harness(format!("cannot create {}: {e}", dir.display())))?;
    Ok(dir.display().to_string())
}

fn new_session_params(ctx: &Ctx, additional: Value) -> Value {
    json!({
        "cwd": ctx.temp_dir().display().to_string(),
        "mcpServers": [],
        "additionalDirectories": additional,
    })
}

async fn v1x_001(ctx: Ctx) -> CheckResult {
    let Opened {
        agent: _agent,
        mut conn,
        init,
        ..
    } = open(&ctx, PLAIN).await?;
    require_advertised(&ctx, &init, &[ADDITIONAL])?;
    for bad in [
        json!("not-an-array"),
        json!([7]),
        json!([""]),
        json!(["relative/dir"]),
    ] {
        let reply = conn
            .call("session/new", new_session_params(&ctx, bad.clone()))
            .await?;
        ensure!(
            reply.is_err(),
            format!(
                "session/new with additionalDirectories {bad} is refused with an error (the \
                 agent must reject a value that is not an array of non-empty absolute paths)"
            ),
            "a result: {}",
            reply.as_ref().map(Value::to_string).unwrap_or_default()
        );
    }
    Ok(())
}

/// The `additionalDirectories` of `session` in a `session/list` result: `None` when the
/// session is not listed, `Some([])` when it is listed without any.
fn listed_roots(list: &Value, session: &str) -> Option<Vec<Value>> {
    let entry = list
        .get("sessions")
        .and_then(Value::as_array)?
        .iter()
        .find(|s| s.get("sessionId").and_then(Value::as_str) == Some(session))?;
    Some(
        entry
            .get("additionalDirectories")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default(),
    )
}

async fn v1x_002(ctx: Ctx) -> CheckResult {
    let Opened {
        agent: _agent,
        mut conn,
        init,
        ..
    } = open(&ctx, PLAIN).await?;
    require_advertised(&ctx, &init, &[ADDITIONAL, LIST, RESUME])?;
    let extra = extra_root(&ctx)?;
    let created = conn
        .call_ok("session/new", new_session_params(&ctx, json!([extra])))
        .await?;
    let Some(session) = created.get("sessionId").and_then(Value::as_str) else {
        skip!("session/new with an additional directory answered no sessionId: {created}");
    };
    let session = session.to_owned();
    if ctx.has(capability::PROMPT) {
        prompt(&mut conn, &session, "hello").await?;
    }
    let before = conn.call_ok("session/list", json!({})).await?;
    match listed_roots(&before, &session) {
        Some(roots) if !roots.is_empty() => {}
        _ => skip!(
            "session/list does not report the session's additionalDirectories (which ACP \
             allows); nothing to compare after the resume"
        ),
    }
    let cwd = ctx.temp_dir().display().to_string();
    conn.call_ok(
        "session/resume",
        json!({"sessionId": session, "cwd": cwd, "mcpServers": []}),
    )
    .await?;
    let after = conn.call_ok("session/list", json!({})).await?;
    let roots = listed_roots(&after, &session).unwrap_or_default();
    ensure!(
        roots.is_empty(),
        "after session/resume without additionalDirectories, session/list reports no additional \
         directory for the session (stored roots are not reactivated implicitly)",
        "additionalDirectories {}",
        Value::Array(roots.clone())
    );
    Ok(())
}

/// The agent message chunks among `frames`, each with its `messageId` when it has a non-empty
/// string one.
fn chunk_ids(frames: &[&Frame]) -> Vec<(Value, Option<String>)> {
    frames
        .iter()
        .filter(|frame| frame.update_kind() == Some("agent_message_chunk"))
        .map(|frame| {
            let update = frame.update().cloned().unwrap_or(Value::Null);
            let id = update
                .get("messageId")
                .and_then(Value::as_str)
                .filter(|id| !id.is_empty())
                .map(str::to_owned);
            (update, id)
        })
        .collect()
}

async fn v1x_003(ctx: Ctx) -> CheckResult {
    let Opened {
        agent: _agent,
        mut conn,
        session,
        ..
    } = open(&ctx, PLAIN).await?;
    let mut chunks = Vec::new();
    for text in ["first message", "second message"] {
        let turn = prompt(&mut conn, &session, text).await?;
        let of_turn = chunk_ids(&turn.updates(&conn));
        if of_turn.is_empty() {
            skip!("the turn of {text:?} streamed no agent_message_chunk; no id to judge");
        }
        chunks.push(of_turn);
    }
    if chunks.iter().flatten().all(|(_, id)| id.is_none()) {
        skip!(
            "the agent puts no messageId on its chunks (optional in v1); the row judges the ids \
             of an agent that uses them"
        );
    }
    if let Some((chunk, _)) = chunks.iter().flatten().find(|(_, id)| id.is_none()) {
        crate::fail!(
            "every agent_message_chunk carries a non-empty string messageId, as the agent's other \
             chunks do",
            "{chunk}"
        );
    }
    let turns: Vec<BTreeSet<&String>> = chunks
        .iter()
        .map(|of_turn| of_turn.iter().filter_map(|(_, id)| id.as_ref()).collect())
        .collect();
    let shared: Vec<&&String> = turns[0].intersection(&turns[1]).collect();
    ensure!(
        shared.is_empty(),
        "the second turn's messages have ids of their own (a changed messageId starts a new \
         message; ids are unique)",
        "ids of both turns: {shared:?}"
    );
    Ok(())
}

/// The commands the agent offered in `available_commands_update`s so far.
fn offered_commands(conn: &Connection) -> BTreeSet<String> {
    conn.frames()
        .iter()
        .filter(|f| f.update_kind() == Some("available_commands_update"))
        .filter_map(|f| f.update()?.get("availableCommands")?.as_array().cloned())
        .flatten()
        .filter_map(|c| c.get("name")?.as_str().map(str::to_owned))
        .collect()
}

/// Runs a turn, then `command` where the agent offers it, on a client that advertises no
/// session capability; fails when any update of `kinds` arrives.
async fn nothing_unadvertised(
    ctx: &Ctx,
    command: &str,
    prompt_text: &str,
    kinds: &[&str],
    advertised: &str,
) -> CheckResult {
    let Opened {
        agent: _agent,
        mut conn,
        session,
        ..
    } = open(ctx, PLAIN).await?;
    if ctx.has(capability::PROMPT) {
        prompt(&mut conn, &session, "hello").await?;
        if offered_commands(&conn).contains(command) {
            prompt(&mut conn, &session, prompt_text).await?;
        }
    }
    let sent: Vec<String> = conn
        .frames()
        .iter()
        .filter(|f| f.update_kind().is_some_and(|k| kinds.contains(&k)))
        .map(|f| f.short(300))
        .collect();
    ensure!(
        sent.is_empty(),
        format!(
            "no {} update to a client that did not advertise {advertised}",
            kinds.join(" or ")
        ),
        "{}",
        sent.join("\n")
    );
    Ok(())
}

async fn v1x_004(ctx: Ctx) -> CheckResult {
    nothing_unadvertised(
        &ctx,
        "notice",
        "/notice conformance",
        &["notice"],
        "session.notices",
    )
    .await
}

async fn v1x_005(ctx: Ctx) -> CheckResult {
    nothing_unadvertised(
        &ctx,
        "compact",
        "/compact",
        &["compaction_update", "compaction_summary_chunk"],
        "session.compaction",
    )
    .await
}

/// The replayed message chunks among `frames` (user and agent), each as its kind, the update
/// and its `messageId` when it has a non-empty string one.
fn replayed_chunks<'a>(frames: &[&'a Frame]) -> Vec<(&'a str, Value, Option<String>)> {
    frames
        .iter()
        .filter_map(|frame| {
            let kind = frame.update_kind()?;
            if !matches!(kind, "user_message_chunk" | "agent_message_chunk") {
                return None;
            }
            let update = frame.update().cloned().unwrap_or(Value::Null);
            let id = update
                .get("messageId")
                .and_then(Value::as_str)
                .filter(|id| !id.is_empty())
                .map(str::to_owned);
            Some((kind, update, id))
        })
        .collect()
}

async fn v1x_006(ctx: Ctx) -> CheckResult {
    let Opened {
        mut agent,
        mut conn,
        init,
        session,
        ..
    } = open(&ctx, PLAIN).await?;
    require_advertised(&ctx, &init, &[LOAD])?;
    let mut live = Vec::new();
    for text in ["first message", "second message"] {
        let turn = prompt(&mut conn, &session, text).await?;
        live.extend(chunk_ids(&turn.updates(&conn)));
    }
    if live.iter().all(|(_, id)| id.is_none()) {
        skip!(
            "the agent puts no messageId on its live chunks (optional in v1); the row judges the \
             replay of an agent that uses them"
        );
    }
    conn.quiet(QUIET).await;
    let mut other = second(&mut agent).await?;
    let conn = other.as_mut().unwrap_or(&mut conn);
    let from = conn.cursor();
    let mut params = exchange::new_session_params(&ctx);
    params["sessionId"] = json!(session);
    conn.call_ok("session/load", params).await?;
    conn.quiet(QUIET).await;
    let of_session: Vec<&Frame> = exchange::since(conn, from)
        .into_iter()
        .filter(|f| f.is_update_for(&session))
        .collect();
    let chunks = replayed_chunks(&of_session);
    if chunks.is_empty() {
        skip!(
            "session/load replayed no message chunk; no id to judge (ACP-CORE-005 judges the replay)"
        );
    }
    if let Some((_, chunk, _)) = chunks.iter().find(|(_, _, id)| id.is_none()) {
        crate::fail!(
            "every replayed user_message_chunk and agent_message_chunk carries a non-empty string \
             messageId, as the agent's live chunks do (a replayed message is one the agent can \
             identify)",
            "{chunk}"
        );
    }
    // The chunks of one message follow each other and are of one kind: an id seen in two runs
    // of different kinds names two messages.
    let mut runs: Vec<(&str, BTreeSet<&str>)> = Vec::new();
    for (kind, _, id) in &chunks {
        let id = id.as_deref().unwrap_or_default();
        match runs.last_mut() {
            Some((last, ids)) if last == kind => {
                ids.insert(id);
            }
            _ => runs.push((kind, BTreeSet::from([id]))),
        }
    }
    for (at, (kind, ids)) in runs.iter().enumerate() {
        if let Some(shared) = runs[at + 1..]
            .iter()
            .find_map(|(other, later)| ids.intersection(later).next().map(|id| (other, id)))
        {
            crate::fail!(
                "each replayed message has an id of its own (chunks sharing a messageId belong to \
                 one message; a changed one starts a new message)",
                "messageId {} names a {kind} and a later {} of the replay",
                shared.1,
                shared.0
            );
        }
    }
    Ok(())
}
