//! Opening a session again: `session/load` (with the history replayed before its result) and
//! `session/resume` (without), from a second connection on WebSocket.
//!
//! ACP asks the agent to replay "the entire conversation" before it answers `session/load`;
//! ACP-CORE-005 requires the agent's part (its message chunks), ACP-CORE-048 (should) the user's
//! prompts as `user_message_chunk`s, which ACP's example shows but its MUST does not name
//! (E-ACP-35).

use serde_json::Value;

use super::super::agent::{Agent, PLAIN, Transport};
use super::super::connection::Connection;
use super::super::exchange::{
    self, AUTH_REQUIRED, QUIET, expect_result, initialize, open, prompt_ok,
};
use super::session_params;
use super::state::state_problems;
use crate::check::{Check, CheckError, CheckResult};
use crate::context::Ctx;
use crate::vocabulary::capability;
use crate::{ensure, fail};

/// The checks of this module.
pub(super) fn checks() -> Vec<Check> {
    vec![
        Check::new(
            "WS-039",
            "Loads a session (from a second connection on ws) and requires an object result whose \
             modes and configOptions, when present, are well formed.",
            ws_039,
        ),
        Check::new(
            "WS-051",
            "After a prompt turn, resumes the session (from a second connection on ws); no \
             message chunk of the session may arrive before or after the result, and a prompt \
             afterwards ends end_turn.",
            ws_051,
        ),
        Check::new(
            "ACP-CORE-005",
            "After a prompt turn, loads the session (from a second connection on ws); the \
             agent's message chunks must be replayed before the load result and no update of the \
             session after it.",
            core_005,
        ),
        Check::new(
            "ACP-CORE-048",
            "After a prompt turn, loads the session (from a second connection on ws); the \
             prompt must be replayed as a user_message_chunk before the load result.",
            core_048,
        ),
    ]
}

/// A second initialized connection on WebSocket or the remote endpoint; `None` on stdio (the
/// same connection serves).
pub(crate) async fn second(agent: &mut Agent) -> Result<Option<Connection>, CheckError> {
    if agent.transport() == Transport::Stdio {
        return Ok(None);
    }
    let mut conn = agent.connect().await?;
    initialize(&mut conn).await?;
    Ok(Some(conn))
}

async fn ws_039(ctx: Ctx) -> CheckResult {
    let mut opened = open(&ctx, PLAIN).await?;
    if ctx.has(capability::PROMPT) {
        prompt_ok(&mut opened.conn, &opened.session, "load me later").await?;
    }
    let mut other = second(&mut opened.agent).await?;
    let conn = other.as_mut().unwrap_or(&mut opened.conn);
    let reply = conn
        .call("session/load", session_params(&ctx, &opened.session))
        .await?;
    // -32000 is ACP's "authentication required", an answer the schema allows any request.
    if let Err(fault) = &reply
        && fault.code == Some(AUTH_REQUIRED)
    {
        return Err(CheckError::Blocked(format!(
            "the agent refused session/load with -32000 (authentication required): {}; \
             authenticate with --auth-method ID (and the key its method reads) or the profile's \
             [suites.acp.auth]",
            fault.raw
        )));
    }
    let result = expect_result(reply, "session/load of an existing session succeeds")?;
    ensure!(
        result.is_object(),
        "the session/load result is an object (possibly empty)",
        "{result}"
    );
    let problems = state_problems(&result);
    ensure!(
        problems.is_empty(),
        "modes and configOptions of session/load, when present, are well formed",
        "{}",
        problems.join("; ")
    );
    Ok(())
}

async fn ws_051(ctx: Ctx) -> CheckResult {
    let mut opened = open(&ctx, PLAIN).await?;
    prompt_ok(&mut opened.conn, &opened.session, "resume me").await?;
    opened.conn.quiet(QUIET).await;
    let session = opened.session.clone();
    let mut other = second(&mut opened.agent).await?;
    let conn = other.as_mut().unwrap_or(&mut opened.conn);
    let from = conn.cursor();
    let reply = conn
        .call("session/resume", session_params(&ctx, &session))
        .await?;
    let result = expect_result(reply, "session/resume succeeds")?;
    ensure!(
        result.is_object(),
        "the session/resume result is an object",
        "{result}"
    );
    conn.quiet(QUIET).await;
    let replayed: Vec<_> = exchange::since(conn, from)
        .into_iter()
        .filter(|f| {
            f.is_update_for(&session)
                && f.update_kind()
                    .is_some_and(|k| k.ends_with("_message_chunk"))
        })
        .collect();
    ensure!(
        replayed.is_empty(),
        "session/resume replays no history",
        "{}",
        exchange::list(&replayed)
    );
    let problems = state_problems(&result);
    ensure!(
        problems.is_empty(),
        "modes and configOptions of session/resume, when present, are well formed",
        "{}",
        problems.join("; ")
    );
    prompt_ok(conn, &session, "after the resume").await?;
    Ok(())
}

/// The prompt of the turn that [`load_replay`] loads again.
const REPLAYED_PROMPT: &str = "replay this prompt";

/// Runs a turn on a session, loads it (from a second connection on ws) and returns the updates
/// of the session sent before the `session/load` result; fails when one arrives after it.
async fn load_replay(ctx: &Ctx) -> Result<Vec<Value>, CheckError> {
    let mut opened = open(ctx, PLAIN).await?;
    prompt_ok(&mut opened.conn, &opened.session, REPLAYED_PROMPT).await?;
    opened.conn.quiet(QUIET).await;
    let session = opened.session.clone();
    let mut other = second(&mut opened.agent).await?;
    let conn = other.as_mut().unwrap_or(&mut opened.conn);
    let from = conn.cursor();
    let id = conn
        .request("session/load", session_params(ctx, &session))
        .await?;
    let reply = conn.reply(&id, "session/load").await?;
    expect_result(reply, "session/load succeeds")?;
    conn.quiet(QUIET).await;
    let answer = conn
        .frames()
        .iter()
        .position(|f| f.answers(&id))
        .unwrap_or_default();
    let before: Vec<Value> = conn.frames()[from..answer]
        .iter()
        .filter(|f| f.is_update_for(&session))
        .filter_map(|f| f.update().cloned())
        .collect();
    if conn.streams_unordered() {
        // Over Streamable HTTP the replay comes on the session's stream and the result on the
        // connection's: their order as read is not the order sent (E-ACP-64).
        ctx.note("the replay and the session/load result came on different streams: their order is not judged");
        return Ok(conn.frames()[from..]
            .iter()
            .filter(|f| f.is_update_for(&session))
            .filter_map(|f| f.update().cloned())
            .collect());
    }
    // What the conversation holds; the session's commands (available_commands_update) may
    // follow the result (E-ACP-61).
    let after = exchange::turn_content_updates(&exchange::since(conn, answer + 1), &session);
    ensure!(
        after.is_empty(),
        "no replayed update after the session/load result",
        "{}",
        exchange::list(&after)
    );
    Ok(before)
}

/// The `sessionUpdate` kinds of `updates`, in order.
fn kinds_of(updates: &[Value]) -> Vec<&str> {
    updates
        .iter()
        .filter_map(|u| u.get("sessionUpdate").and_then(Value::as_str))
        .collect()
}

async fn core_005(ctx: Ctx) -> CheckResult {
    let before = load_replay(&ctx).await?;
    let agent = before
        .iter()
        .any(|u| u.get("sessionUpdate").and_then(Value::as_str) == Some("agent_message_chunk"));
    ensure!(
        agent,
        "the conversation (the agent's reply, agent_message_chunk) is replayed before the session/load result",
        "before the result: {:?}",
        kinds_of(&before)
    );
    Ok(())
}

async fn core_048(ctx: Ctx) -> CheckResult {
    let before = load_replay(&ctx).await?;
    let user = before.iter().any(|u| {
        u.get("sessionUpdate").and_then(Value::as_str) == Some("user_message_chunk")
            && u.pointer("/content/text")
                .and_then(Value::as_str)
                .is_some_and(|t| t.contains(REPLAYED_PROMPT))
    });
    if !user {
        fail!(
            "the user's prompt is replayed as a user_message_chunk before the session/load result",
            "before the result: {:?}",
            kinds_of(&before)
        );
    }
    Ok(())
}
