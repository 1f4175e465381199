//! Checks of turns that are cancelled, stopped or timed out, and of concurrent prompts: the
//! `hold` variant keeps a turn running until it is cancelled, the `delay` variant makes every
//! turn take a while, the `prompt_timeout` variant ends a held turn by the agent's own timeout.

use serde_json::{Value, json};

use super::agent::{PLAIN, Transport, declared};
use super::connection::Connection;
use super::exchange::{
    self, QUIET, Turn, cancel, content_updates, expect_error, finish_prompt, open, open_on,
    start_prompt, text_prompt, wait_running,
};
use crate::catalog::TimeoutClass;
use crate::check::{Check, CheckError, CheckResult};
use crate::context::Ctx;
use crate::{ensure, ensure_eq, fail};

/// The variant whose turns run until they are cancelled.
pub const HOLD: &str = "hold";
/// The variant whose turns take a while and then end normally.
pub const DELAY: &str = "delay";
/// The variant whose held turns end by the agent's prompt timeout.
pub const PROMPT_TIMEOUT: &str = "prompt_timeout";

/// The checks of this module.
pub fn checks() -> Vec<Check> {
    vec![
        Check::new(
            "WS-007",
            "Holds a prompt on a session and sends a second session/prompt on it; the second \
             must be refused with -32602, then the first is cancelled.",
            ws_007,
        ),
        Check::new(
            "WS-013",
            "Cancels a held turn (and, with prompt-timeout, lets one time out): no content \
             update of the session after the cancel, during a quiet period too; on a normal \
             turn every update precedes the result.",
            ws_013,
        ),
        Check::new(
            "WS-059",
            "Runs slow prompts on two sessions, cancels one with $/cancel_request and sends \
             session/new meanwhile; the cancelled one ends (-32800 or a result), the other ends \
             end_turn and session/new succeeds.",
            ws_059,
        ),
        Check::new(
            "WS-061",
            "Holds a prompt and names its id in $/cancel_request; the prompt must be answered \
             with error -32800.",
            ws_061,
        ),
        Check::new(
            "WS-067",
            "On every declared transport, stops a held prompt with the session/stop request \
             (answered {}) and another with the session/stop notification; both end cancelled \
             with no content update after the stop.",
            ws_067,
        ),
        Check::new(
            "ACP-CORE-001",
            "Holds a prompt, sends session/cancel, and requires {stopReason: cancelled}; a \
             normal turn of the plain agent must not end cancelled.",
            core_001,
        ),
        Check::new(
            "ACP-CORE-002",
            "For a normal turn and a cancelled one, listens a quiet period after the answer and \
             requires exactly one response with the prompt's id.",
            core_002,
        ),
        Check::new(
            "ACP-CORE-022",
            "Holds a prompt and names its id in $/cancel_request; the prompt must get exactly \
             one response: a result or error -32800.",
            core_022,
        ),
    ]
}

/// A held turn that is running: the request id and the cursor before it.
async fn hold_turn(
    conn: &mut Connection,
    init: &Value,
    session: &str,
) -> Result<(Value, usize), CheckError> {
    let (id, start) = start_prompt(conn, session, text_prompt("hold this turn")).await?;
    wait_running(conn, init, session, start).await?;
    Ok((id, start))
}

/// The responses carrying `id` among every frame of `conn`.
fn responses_to(conn: &Connection, id: &Value) -> usize {
    conn.frames().iter().filter(|f| f.answers(id)).count()
}

/// Fails if a content update of `session` was read at or after `from`.
fn no_content_after(conn: &Connection, session: &str, from: usize, check: &str) -> CheckResult {
    let late = content_updates(&exchange::since(conn, from), session);
    ensure!(late.is_empty(), check, "{}", exchange::list(&late));
    Ok(())
}

async fn ws_007(ctx: Ctx) -> CheckResult {
    let mut opened = open(&ctx, HOLD).await?;
    let session = opened.session.clone();
    let (first, start) = hold_turn(&mut opened.conn, &opened.init, &session).await?;
    let second = opened
        .conn
        .request(
            "session/prompt",
            json!({"sessionId": session, "prompt": text_prompt("a second prompt")}),
        )
        .await?;
    let index = opened
        .conn
        .wait_for_within(
            "the answer -32602 to a second concurrent session/prompt",
            0,
            TimeoutClass::Short.base(),
            |f| f.answers(&second),
        )
        .await?;
    let reply = opened.conn.frames()[index]
        .reply()
        .ok_or_else(|| CheckError::Harness("a response without a reply".into()))?;
    expect_error(
        &reply,
        &[-32602],
        "a second concurrent prompt on the session answers -32602",
    )?;
    ensure!(
        !opened.conn.frames().iter().any(|f| f.answers(&first)),
        "the first prompt keeps running while the second is refused",
        "the first prompt was answered: {}",
        opened.conn.tail(3)
    );
    cancel(&opened.conn, &session).await?;
    finish_prompt(&mut opened.conn, &session, first, start).await?;
    Ok(())
}

async fn ws_013(ctx: Ctx) -> CheckResult {
    // [1] The cancel path.
    let mut opened = open(&ctx, HOLD).await?;
    let session = opened.session.clone();
    let (id, start) = hold_turn(&mut opened.conn, &opened.init, &session).await?;
    let early = content_updates(&exchange::since(&opened.conn, start), &session);
    if !early.is_empty() {
        return Err(CheckError::Harness(format!(
            "the held turn sent content before it was cancelled ({}); the hold variant must \
             hold before any content",
            exchange::list(&early)
        )));
    }
    let cancelled_at = opened.conn.cursor();
    cancel(&opened.conn, &session).await?;
    let turn = finish_prompt(&mut opened.conn, &session, id, start).await?;
    opened.conn.quiet(QUIET).await;
    no_content_after(
        &opened.conn,
        &session,
        cancelled_at,
        "no content session/update after the cancel, before or after the result",
    )?;
    ensure!(
        turn.end >= cancelled_at,
        "the held turn ends only after it is cancelled",
        "{}",
        turn.describe()
    );
    // [1] The timeout path.
    if ctx.has("prompt-timeout") {
        let mut timed = open(&ctx, PROMPT_TIMEOUT).await?;
        let session = timed.session.clone();
        let (id, start) = start_prompt(&mut timed.conn, &session, text_prompt("time out")).await?;
        let turn = finish_prompt(&mut timed.conn, &session, id, start).await?;
        let fault = expect_error(
            &turn.reply,
            &[-32603],
            "a prompt that times out in the agent answers -32603",
        )?;
        ensure!(
            fault.message.to_lowercase().contains("timed out")
                || fault.message.to_lowercase().contains("timeout"),
            "the -32603 message says the prompt timed out",
            "message {:?}",
            fault.message
        );
        timed.conn.quiet(QUIET).await;
        no_content_after(
            &timed.conn,
            &session,
            start,
            "no content session/update on the timeout path",
        )?;
    }
    // [2] The normal path.
    let mut normal = open(&ctx, PLAIN).await?;
    let session = normal.session.clone();
    let turn = exchange::prompt_ok(&mut normal.conn, &session, "normal path").await?;
    ensure!(
        !turn.updates(&normal.conn).is_empty(),
        "session/update notifications before the prompt result",
        "none; {}",
        turn.describe()
    );
    normal.conn.quiet(QUIET).await;
    let late: Vec<_> = exchange::since(&normal.conn, turn.end + 1)
        .into_iter()
        .filter(|f| f.is_update_for(&session))
        .collect();
    ensure!(
        late.is_empty(),
        "every session/update of the turn precedes the prompt result",
        "after the result: {}",
        exchange::list(&late)
    );
    Ok(())
}

async fn ws_059(ctx: Ctx) -> CheckResult {
    let mut opened = open(&ctx, DELAY).await?;
    let first = opened.session.clone();
    let second = exchange::new_session(&ctx, &mut opened.conn).await?;
    let (target, target_start) =
        start_prompt(&mut opened.conn, &first, text_prompt("cancel me")).await?;
    let (other, other_start) =
        start_prompt(&mut opened.conn, &second, text_prompt("leave me")).await?;
    wait_running(&mut opened.conn, &opened.init, &first, target_start).await?;
    opened
        .conn
        .notify("$/cancel_request", json!({"requestId": target}))
        .await?;
    let reply = opened
        .conn
        .call("session/new", exchange::new_session_params(&ctx))
        .await?;
    exchange::expect_result(reply, "a request sent meanwhile completes normally")?;
    let cancelled = finish_prompt(&mut opened.conn, &first, target, target_start).await?;
    let untouched = finish_prompt(&mut opened.conn, &second, other, other_start).await?;
    untouched.expect_stop("end_turn", "the prompt on the other session ends end_turn")?;
    match &cancelled.reply {
        Err(fault) if fault.code == Some(-32800) => {}
        Ok(result) if result.get("stopReason") == Some(&json!("cancelled")) => {}
        other => fail!(
            "the prompt named by $/cancel_request is cancelled (-32800 or stopReason cancelled)",
            "{}",
            super::connection::describe(other)
        ),
    }
    Ok(())
}

async fn ws_061(ctx: Ctx) -> CheckResult {
    let mut opened = open(&ctx, HOLD).await?;
    let session = opened.session.clone();
    let (id, start) = hold_turn(&mut opened.conn, &opened.init, &session).await?;
    opened
        .conn
        .notify("$/cancel_request", json!({"requestId": id}))
        .await?;
    let turn = finish_prompt(&mut opened.conn, &session, id, start).await?;
    expect_error(
        &turn.reply,
        &[-32800],
        "a prompt cancelled by $/cancel_request answers -32800",
    )?;
    Ok(())
}

/// What stopping held turns showed on one transport.
#[derive(Debug, PartialEq)]
struct Stopped {
    request_result: String,
    by_request: String,
    by_notification: String,
}

async fn stop_on(ctx: &Ctx, transport: Transport) -> Result<Stopped, CheckError> {
    let mut opened = open_on(ctx, transport, HOLD).await?;
    let session = opened.session.clone();
    let name = transport.name();
    // The request form.
    let (id, start) = hold_turn(&mut opened.conn, &opened.init, &session).await?;
    let stopped_at = opened.conn.cursor();
    let stop = opened
        .conn
        .request("session/stop", json!({"sessionId": session}))
        .await?;
    let reply = opened.conn.reply(&stop, "session/stop").await?;
    let request_result = exchange::expect_result(reply, "the session/stop request succeeds")?;
    let turn = finish_prompt(&mut opened.conn, &session, id, start).await?;
    turn.expect_stop(
        "cancelled",
        &format!("over {name} a prompt stopped by the session/stop request ends cancelled"),
    )?;
    // The notification form.
    let (id, start) = hold_turn(&mut opened.conn, &opened.init, &session).await?;
    opened
        .conn
        .notify("session/stop", json!({"sessionId": session}))
        .await?;
    let second: Turn = finish_prompt(&mut opened.conn, &session, id, start).await?;
    second.expect_stop(
        "cancelled",
        &format!("over {name} a prompt stopped by the session/stop notification ends cancelled"),
    )?;
    opened.conn.quiet(QUIET).await;
    no_content_after(
        &opened.conn,
        &session,
        stopped_at,
        &format!("over {name} no content update after session/stop"),
    )?;
    Ok(Stopped {
        request_result: request_result.to_string(),
        by_request: turn.describe(),
        by_notification: second.describe(),
    })
}

async fn ws_067(ctx: Ctx) -> CheckResult {
    let transports = declared(&ctx);
    let mut seen: Vec<(Transport, Stopped)> = Vec::new();
    for transport in transports {
        seen.push((transport, stop_on(&ctx, transport).await?));
    }
    if let [(_, first), (_, second)] = seen.as_slice() {
        ensure_eq!(
            first,
            second,
            "the session/stop outcomes over stdio (expected) and ws (actual)"
        );
    }
    Ok(())
}

async fn core_001(ctx: Ctx) -> CheckResult {
    let mut opened = open(&ctx, HOLD).await?;
    let session = opened.session.clone();
    let (id, start) = hold_turn(&mut opened.conn, &opened.init, &session).await?;
    cancel(&opened.conn, &session).await?;
    let turn = finish_prompt(&mut opened.conn, &session, id, start).await?;
    turn.expect_stop(
        "cancelled",
        "a turn cancelled with session/cancel ends with stopReason cancelled",
    )?;
    let mut plain = open(&ctx, PLAIN).await?;
    let normal = exchange::prompt(&mut plain.conn, &plain.session, "not cancelled").await?;
    ensure!(
        normal.stop_reason() != Some("cancelled"),
        "a turn that was not cancelled does not end cancelled",
        "{}",
        normal.describe()
    );
    Ok(())
}

async fn core_002(ctx: Ctx) -> CheckResult {
    let mut plain = open(&ctx, PLAIN).await?;
    let turn = exchange::prompt(&mut plain.conn, &plain.session, "one answer").await?;
    plain.conn.quiet(QUIET).await;
    ensure_eq!(
        1,
        responses_to(&plain.conn, &turn.id),
        "responses carrying the id of a normal turn's prompt"
    );
    let mut held = open(&ctx, HOLD).await?;
    let session = held.session.clone();
    let (id, start) = hold_turn(&mut held.conn, &held.init, &session).await?;
    cancel(&held.conn, &session).await?;
    finish_prompt(&mut held.conn, &session, id.clone(), start).await?;
    held.conn.quiet(QUIET).await;
    ensure_eq!(
        1,
        responses_to(&held.conn, &id),
        "responses carrying the id of a cancelled turn's prompt"
    );
    Ok(())
}

async fn core_022(ctx: Ctx) -> CheckResult {
    let mut opened = open(&ctx, HOLD).await?;
    let session = opened.session.clone();
    let (id, start) = hold_turn(&mut opened.conn, &opened.init, &session).await?;
    opened
        .conn
        .notify("$/cancel_request", json!({"requestId": id}))
        .await?;
    let turn = finish_prompt(&mut opened.conn, &session, id.clone(), start).await?;
    match &turn.reply {
        Ok(_) => {}
        Err(fault) if fault.code == Some(-32800) => {}
        other => fail!(
            "the request named by $/cancel_request is answered with a result or -32800",
            "{}",
            super::connection::describe(other)
        ),
    }
    opened.conn.quiet(QUIET).await;
    ensure_eq!(
        1,
        responses_to(&opened.conn, &id),
        "responses carrying the cancelled request's id"
    );
    Ok(())
}
