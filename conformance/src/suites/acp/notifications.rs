//! Checks of what the agent sends around notifications and turns: nothing answers a
//! notification (ACP-CORE-042), a cancelled turn ends `cancelled` with nothing of it after its
//! answer (ACP-CORE-043), every update names its own session (ACP-CORE-044), and every stop
//! reason is one the schema defines (ACP-CORE-045).

use serde_json::{Value, json};

use super::agent::PLAIN;
use super::cancellation::{cancelled_turn, turn_to_cancel, turns_end_only_on_cancel};
use super::connection::{Connection, Frame};
use super::exchange::{self, QUIET, Turn, cancel, new_session, open, prompt};
use crate::check::{Check, CheckError, CheckResult};
use crate::context::Ctx;
use crate::vocabulary::capability;
use crate::{ensure, fail, skip};

/// The stop reasons of the ACP v1 schema (`StopReason`).
pub const STOP_REASONS: &[&str] = &[
    "end_turn",
    "max_tokens",
    "max_turn_requests",
    "refusal",
    "cancelled",
];

/// Update kinds that belong to one prompt turn of their session.
const TURN_KINDS: &[&str] = &[
    "user_message_chunk",
    "agent_message_chunk",
    "agent_thought_chunk",
    "tool_call",
    "tool_call_update",
    "plan",
];

/// The checks of this module.
pub fn checks() -> Vec<Check> {
    vec![
        Check::new(
            "ACP-CORE-042",
            "Sends notifications (session/cancel for an idle session and for an unknown one, \
             $/cancel_request for an id never sent, a method no agent has), then a session/new; \
             after its answer and a quiet period, no response may carry an id the runner did \
             not send (null and absent ids included).",
            core_042,
        ),
        Check::new(
            "ACP-CORE-043",
            "Cancels a running turn as ACP-CORE-001 does (the hold variant, else a turn held at \
             its unanswered permission request, else one cancelled right after its prompt) and \
             requires the result {stopReason: cancelled} (not an error), no response to the \
             cancel notification, and no session/update of the session after the prompt's \
             answer during a quiet period.",
            core_043,
        ),
        Check::new(
            "ACP-CORE-044",
            "Opens two sessions on one connection and runs a turn on each in turn; every \
             session/update names one of the two sessions, and each turn's content updates \
             name the session of that turn.",
            core_044,
        ),
        Check::new(
            "ACP-CORE-045",
            "Runs a prompt turn and a cancelled one (as ACP-CORE-001 cancels it; an agent whose \
             turn cannot be caught running is judged on the first only) and requires every \
             session/prompt result's stopReason to be one of the schema's values.",
            core_045,
        ),
    ]
}

/// Responses among `frames` that answer no request the runner sent.
fn unsolicited<'a>(conn: &Connection, frames: &[&'a Frame]) -> Vec<&'a Frame> {
    frames
        .iter()
        .copied()
        .filter(|f| f.is_response())
        .filter(|f| f.id().is_none_or(|id| conn.sent_method(id).is_none()))
        .collect()
}

/// Fails when a response on `conn` answers something the runner never asked.
fn no_unsolicited_responses(conn: &Connection, check: &str) -> CheckResult {
    let all = exchange::since(conn, 0);
    let stray = unsolicited(conn, &all);
    ensure!(stray.is_empty(), check, "{}", exchange::list(&stray));
    Ok(())
}

async fn core_042(ctx: Ctx) -> CheckResult {
    let mut opened = open(&ctx, PLAIN).await?;
    let conn = &mut opened.conn;
    cancel(conn, &opened.session).await?;
    cancel(conn, "ski-conformance-unknown-session").await?;
    conn.notify(
        "$/cancel_request",
        json!({"requestId": "ski-conformance-never-sent"}),
    )
    .await?;
    conn.notify("ski_conformance/no_such_notification", json!({}))
        .await?;
    new_session(&ctx, conn).await?;
    conn.quiet(QUIET).await;
    no_unsolicited_responses(
        conn,
        "no response or error answers a notification (session/cancel, $/cancel_request, an \
         unknown method)",
    )
}

async fn core_043(ctx: Ctx) -> CheckResult {
    turn_to_cancel(&ctx)?;
    let (mut opened, turn) = cancelled_turn(&ctx).await?;
    if let Some(fault) = turn.fault() {
        fail!(
            "a cancelled turn is answered with a result, not an error",
            "error {}",
            fault.raw
        );
    }
    turn.expect_stop(
        "cancelled",
        "a cancelled turn ends with stopReason cancelled",
    )?;
    let conn = &mut opened.conn;
    conn.quiet(QUIET).await;
    // The session's commands (available_commands_update) may change at any time (E-ACP-61).
    let late: Vec<&Frame> = exchange::since(conn, turn.end + 1)
        .into_iter()
        .filter(|f| {
            f.is_update_for(&turn.session) && f.update_kind() != Some("available_commands_update")
        })
        .collect();
    ensure!(
        late.is_empty(),
        "no session/update of the cancelled turn's session after its session/prompt answer",
        "{}",
        exchange::list(&late)
    );
    no_unsolicited_responses(conn, "nothing answers the session/cancel notification")
}

/// Fails when an update during `turn` names a session other than `sessions`, or a content
/// update of the turn names another of them.
fn updates_name_their_session(conn: &Connection, turn: &Turn, sessions: &[&str]) -> CheckResult {
    let during = &conn.frames()[turn.start..turn.end];
    let foreign: Vec<&Frame> = during
        .iter()
        .filter(|f| f.update().is_some())
        .filter(|f| f.session_id().is_none_or(|s| !sessions.contains(&s)))
        .collect();
    ensure!(
        foreign.is_empty(),
        "every session/update carries the sessionId of a session the client opened",
        "{}",
        exchange::list(&foreign)
    );
    let crossed: Vec<&Frame> = during
        .iter()
        .filter(|f| f.update_kind().is_some_and(|k| TURN_KINDS.contains(&k)))
        .filter(|f| f.session_id() != Some(turn.session.as_str()))
        .collect();
    ensure!(
        crossed.is_empty(),
        format!(
            "the content updates of the turn on {} carry that session's id",
            turn.session
        ),
        "{}",
        exchange::list(&crossed)
    );
    Ok(())
}

async fn core_044(ctx: Ctx) -> CheckResult {
    let mut opened = open(&ctx, PLAIN).await?;
    let first = opened.session.clone();
    let conn = &mut opened.conn;
    let second = new_session(&ctx, conn).await?;
    conn.quiet(QUIET).await;
    let sessions = [first.as_str(), second.as_str()];
    for session in [&first, &second, &first] {
        let turn = prompt(conn, session, "which session is this").await?;
        updates_name_their_session(conn, &turn, &sessions)?;
    }
    Ok(())
}

/// Fails unless `turn` ended with a result whose stopReason is a schema value.
fn stop_reason_is_defined(turn: &Turn) -> CheckResult {
    let reason = turn
        .reply
        .as_ref()
        .ok()
        .map(|result| result.get("stopReason").cloned().unwrap_or(Value::Null));
    match reason {
        None => Ok(()),
        Some(Value::String(reason)) if STOP_REASONS.contains(&reason.as_str()) => Ok(()),
        Some(other) => fail!(
            "the session/prompt result's stopReason is one of end_turn, max_tokens, \
             max_turn_requests, refusal, cancelled",
            "stopReason {other}"
        ),
    }
}

/// Needs a session, not a completed turn: discovery declares `prompt` only for a turn that ended
/// `end_turn`, so a stop reason outside the schema would leave the row that judges it unrun. A turn
/// answered with an error fails only where discovery saw a turn complete; elsewhere (an agent that
/// cannot work without set-up) it is *not tested*.
async fn core_045(ctx: Ctx) -> CheckResult {
    if turns_end_only_on_cancel(&ctx) {
        // No turn ends by itself: the cancelled one is the only stop reason to judge.
        let (_, cancelled) = cancelled_turn(&ctx).await?;
        return stop_reason_is_defined(&cancelled);
    }
    let mut opened = open(&ctx, PLAIN).await?;
    let turn = match prompt(&mut opened.conn, &opened.session, "say something").await {
        // An agent whose model is out of reach never ends the turn: there is no stop reason.
        Err(CheckError::Fail(failure))
            if failure.deadline_passed && !ctx.has(capability::PROMPT) =>
        {
            skip!(
                "the prompt turn was not answered ({}), and discovery saw no turn complete",
                failure.actual
            )
        }
        other => other?,
    };
    if let Some(fault) = turn.fault().filter(|_| !ctx.has(capability::PROMPT)) {
        skip!(
            "the prompt turn was answered with an error ({fault}), and discovery saw no turn \
             complete"
        );
    }
    ensure!(
        turn.fault().is_none(),
        "the prompt turn is answered with a result",
        "{}",
        turn.describe()
    );
    stop_reason_is_defined(&turn)?;
    match cancelled_turn(&ctx).await {
        Ok((_, cancelled)) => stop_reason_is_defined(&cancelled)?,
        Err(CheckError::Skip(why)) => ctx.note(format!("no cancelled turn judged: {why}")),
        Err(other) => return Err(other),
    }
    Ok(())
}
