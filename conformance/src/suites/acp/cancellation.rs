//! Checks of turns that are cancelled, stopped or timed out, and of concurrent prompts: the
//! `hold` variant keeps a turn running until it is cancelled, the `delay` variant makes every
//! turn take a while, the `prompt_timeout` variant ends a held turn by the agent's own timeout.
//!
//! The `session/cancel` rows and ACP-CORE-022 (`$/cancel_request`) run on any agent that
//! completes a turn ([`hold_for_cancel`]): with `hold` the variant holds the turn; otherwise the
//! runner holds it by leaving the agent's permission request unanswered, cancels, and only then
//! answers that request `cancelled` (as ACP asks of a client), which is as deterministic as a
//! held turn. An agent that never asks is cancelled right after its prompt, and judged only when
//! the turn was still running (it ends `cancelled`, or -32800 for `$/cancel_request`): one that
//! ended `end_turn` may have finished before the cancel arrived, and the row skips saying so.
//!
//! An agent whose turns end only when cancelled (`cancel-turn`, discovered when no model answers
//! its probe turn) gets no `prompt`, yet its turns are exactly what the `session/cancel` rows
//! judge: every plain turn of it is a held turn. Those rows need a session and one of `prompt`,
//! `hold` or `cancel-turn` ([`turn_to_cancel`]); without any, they are *not tested*.

use serde_json::{Value, json};

use super::agent::HOLD;
use super::agent::{PLAIN, Transport, declared};
use super::connection::{Connection, PermissionReply, permission_outcome};
use super::exchange::{
    self, Opened, QUIET, Turn, cancel, content_updates, expect_error, finish_prompt, open, open_on,
    start_prompt, text_prompt, wait_running,
};
use crate::catalog::TimeoutClass;
use crate::check::{Check, CheckError, CheckResult};
use crate::context::Ctx;
use crate::vocabulary::capability;
use crate::{ensure, ensure_eq, fail};

/// The variant whose turns take a while and then end normally.
pub const DELAY: &str = "delay";
/// The variant whose held turns end by the agent's prompt timeout.
pub const PROMPT_TIMEOUT: &str = "prompt_timeout";

/// Skips (the row is then *not tested*) unless the runner can get a turn of the target running
/// to cancel: it completes turns (`prompt`), its `hold` variant holds them, or its turns run
/// until cancelled (`cancel-turn`).
pub fn turn_to_cancel(ctx: &Ctx) -> CheckResult {
    if ctx.has(capability::PROMPT) || ctx.has(capability::HOLD) || ctx.has(capability::CANCEL_TURN)
    {
        return Ok(());
    }
    Err(CheckError::Skip(
        "the runner cannot get a turn of the agent running to cancel: it declares none of \
         prompt (a turn ends end_turn), hold or cancel-turn (a turn runs until cancelled)"
            .to_owned(),
    ))
}

/// Whether the target's plain turns run until they are cancelled and never end by themselves.
pub fn turns_end_only_on_cancel(ctx: &Ctx) -> bool {
    ctx.has(capability::CANCEL_TURN) && !ctx.has(capability::PROMPT)
}

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
            "Cancels a held turn (the hold variant, else a turn held at its unanswered \
             permission request, else one cancelled right after its prompt; and, with \
             prompt-timeout, lets one time out): no content update of the session after the \
             cancel, during a quiet period too; on a normal turn every update precedes the \
             result.",
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
            "Holds a prompt (the hold variant, else at its unanswered permission request, which \
             is answered cancelled after the cancel; an agent that never asks is cancelled right \
             after its prompt and judged only if the turn ends cancelled), sends \
             session/cancel, and requires {stopReason: cancelled}; a normal turn of the plain \
             agent must not end cancelled.",
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
            "Holds a prompt (the hold variant, else at its unanswered permission request, which \
             is answered cancelled after the cancel; an agent that never asks is cancelled right \
             after its prompt and judged only if the answer shows the turn was still running) and \
             names its id in $/cancel_request; the prompt must get exactly one response: a \
             result or error -32800.",
            core_022,
        ),
    ]
}

/// A turn kept running until the runner cancels it.
#[derive(Debug)]
pub struct HeldTurn {
    /// The agent, its connection and the session.
    pub opened: Opened,
    /// The `session/prompt` request id.
    pub id: Value,
    /// The cursor before the prompt.
    pub start: usize,
    /// The permission request the runner leaves unanswered to hold the turn, when it holds it
    /// so (else the `hold` variant holds it).
    pub permission: Option<Value>,
}

impl HeldTurn {
    /// Sends `session/cancel`, then answers the held permission request `cancelled`; the cursor
    /// from which frames came after the cancel.
    pub async fn cancel(&mut self) -> Result<usize, CheckError> {
        let at = self.opened.conn.cursor();
        cancel(&self.opened.conn, &self.opened.session).await?;
        self.release_permission().await?;
        Ok(at)
    }

    /// Names the held prompt in `$/cancel_request`, then answers the held permission request
    /// `cancelled`: the client gives up what it was asked for a request it cancelled.
    pub async fn cancel_request(&mut self) -> Result<(), CheckError> {
        self.opened
            .conn
            .notify("$/cancel_request", json!({"requestId": self.id}))
            .await?;
        self.release_permission().await
    }

    /// Answers the permission request that holds the turn `cancelled`, if one does.
    async fn release_permission(&mut self) -> Result<(), CheckError> {
        if let Some(request) = &self.permission {
            let answer =
                json!({"jsonrpc": "2.0", "id": request, "result": permission_outcome(None)});
            self.opened.conn.send(&answer).await?;
        }
        Ok(())
    }

    /// Waits for the answer of the held prompt.
    pub async fn finish(&mut self) -> Result<Turn, CheckError> {
        let session = self.opened.session.clone();
        finish_prompt(&mut self.opened.conn, &session, self.id.clone(), self.start).await
    }
}

/// How a `session/cancel` row got a turn to cancel.
#[derive(Debug)]
pub enum Holding {
    /// A turn held open until the runner cancels it.
    Held(HeldTurn),
    /// The plain agent ran a turn to its end without asking for permission: nothing holds its
    /// turns (the session is ready for [`cancel_at_once`]).
    NeverAsks(Opened),
}

/// A session with a running turn to cancel: the `hold` variant's held turn when the target
/// declares `hold`; else a turn of the plain agent held at its permission request, which the
/// runner leaves unanswered until it has cancelled. An agent that answers the prompt without
/// asking is [`Holding::NeverAsks`].
pub async fn hold_for_cancel(ctx: &Ctx) -> Result<Holding, CheckError> {
    if ctx.has(capability::HOLD) {
        let mut opened = open(ctx, HOLD).await?;
        let session = opened.session.clone();
        let (id, start) = hold_turn(ctx, &mut opened.conn, &opened.init, &session).await?;
        return Ok(Holding::Held(HeldTurn {
            opened,
            id,
            start,
            permission: None,
        }));
    }
    if turns_end_only_on_cancel(ctx) {
        // Every turn of the plain agent runs until it is cancelled: it is held as it starts.
        let mut opened = open(ctx, PLAIN).await?;
        let session = opened.session.clone();
        let (id, start) =
            start_prompt(&mut opened.conn, &session, text_prompt("hold this turn")).await?;
        ctx.note("the agent's turns run until cancelled (cancel-turn): the plain turn is held");
        return Ok(Holding::Held(HeldTurn {
            opened,
            id,
            start,
            permission: None,
        }));
    }
    let mut opened = open(ctx, PLAIN).await?;
    let session = opened.session.clone();
    opened
        .conn
        .set_responder(|r| r.permission = PermissionReply::Ignore);
    let (id, start) =
        start_prompt(&mut opened.conn, &session, text_prompt("hold this turn")).await?;
    let what = format!("a session/request_permission for {session}, or the answer to the prompt");
    let index = opened
        .conn
        .wait_for(&what, start, |f| {
            f.answers(&id)
                || (f.is_request()
                    && f.method() == Some("session/request_permission")
                    && f.session_id() == Some(session.as_str()))
        })
        .await?;
    let frame = &opened.conn.frames()[index];
    if frame.is_request() {
        let permission = frame.id().cloned();
        ctx.note(format!(
            "the turn is held at the agent's permission request (id {}), answered cancelled after the cancel",
            permission.clone().unwrap_or(Value::Null)
        ));
        return Ok(Holding::Held(HeldTurn {
            opened,
            id,
            start,
            permission,
        }));
    }
    opened
        .conn
        .set_responder(|r| r.permission = PermissionReply::Allow);
    Ok(Holding::NeverAsks(opened))
}

/// For an agent that never asks: prompts, cancels at once, and returns the turn with the
/// cursor at the cancel when it ended `cancelled` (the cancel reached it while it ran); a turn
/// that ended otherwise with a result may have finished before the cancel arrived, and the row
/// skips saying so. An error answer is returned as it is, for the row to judge.
pub async fn cancel_at_once(opened: &mut Opened) -> Result<(Turn, usize), CheckError> {
    let session = opened.session.clone();
    let (id, start) = start_prompt(&mut opened.conn, &session, text_prompt("cancel me")).await?;
    let at = opened.conn.cursor();
    cancel(&opened.conn, &session).await?;
    let turn = finish_prompt(&mut opened.conn, &session, id, start).await?;
    match turn.stop_reason() {
        Some("cancelled") | None => Ok((turn, at)),
        Some(other) => Err(CheckError::Skip(format!(
            "the agent never asked for permission, so the runner could not hold its turn, and \
             the turn cancelled right after its prompt ended {other:?}: it may have finished \
             before the cancel arrived (declare hold with an agent_hold command that keeps \
             turns running to judge it)"
        ))),
    }
}

/// A held turn that is running: the request id and the cursor before it.
async fn hold_turn(
    ctx: &Ctx,
    conn: &mut Connection,
    init: &Value,
    session: &str,
) -> Result<(Value, usize), CheckError> {
    let (id, start) = start_prompt(conn, session, text_prompt("hold this turn")).await?;
    wait_running(conn, init, session, start).await?;
    super::model::wait_streaming(ctx).await;
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
    let (first, start) = hold_turn(&ctx, &mut opened.conn, &opened.init, &session).await?;
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
    let skipped = match hold_for_cancel(&ctx).await? {
        Holding::Held(mut held) if !ctx.has(capability::SKI_SERVE_SPEC) => {
            // ACP's rule (E-ACP-61): a turn cut mid-stream may flush what it had before its
            // `cancelled` result; nothing of the turn follows that result.
            let session = held.opened.session.clone();
            held.cancel().await?;
            let turn = held.finish().await?;
            turn.expect_stop("cancelled", "the cancelled turn ends cancelled")?;
            held.opened.conn.quiet(QUIET).await;
            let late = exchange::turn_content_updates(
                &exchange::since(&held.opened.conn, turn.end + 1),
                &session,
            );
            ensure!(
                late.is_empty(),
                "no content session/update of the turn after its cancelled result",
                "{}",
                exchange::list(&late)
            );
            None
        }
        Holding::Held(mut held) => {
            let session = held.opened.session.clone();
            let early = content_updates(&exchange::since(&held.opened.conn, held.start), &session);
            if held.permission.is_none() && !early.is_empty() {
                return Err(CheckError::Harness(format!(
                    "the held turn sent content before it was cancelled ({}); the hold variant \
                     must hold before any content",
                    exchange::list(&early)
                )));
            }
            let cancelled_at = held.cancel().await?;
            let turn = held.finish().await?;
            held.opened.conn.quiet(QUIET).await;
            no_content_after(
                &held.opened.conn,
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
            None
        }
        Holding::NeverAsks(mut opened) => match cancel_at_once(&mut opened).await {
            Ok((turn, _)) => {
                // The cancel raced the turn: only what follows the answer is judged.
                opened.conn.quiet(QUIET).await;
                no_content_after(
                    &opened.conn,
                    &opened.session,
                    turn.end + 1,
                    "no content session/update after the cancelled turn's result",
                )?;
                None
            }
            Err(CheckError::Skip(why)) => Some(why),
            Err(other) => return Err(other),
        },
    };
    // [1] The timeout path.
    if ctx.has(capability::PROMPT_TIMEOUT) {
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
    let after = exchange::since(&normal.conn, turn.end + 1);
    let late: Vec<_> = if ctx.has(capability::SKI_SERVE_SPEC) {
        after
            .into_iter()
            .filter(|f| f.is_update_for(&session))
            .collect()
    } else {
        // The session's commands may change at any time (E-ACP-61).
        exchange::turn_content_updates(&after, &session)
    };
    ensure!(
        late.is_empty(),
        "every session/update of the turn precedes the prompt result",
        "after the result: {}",
        exchange::list(&late)
    );
    match skipped {
        Some(why) => Err(CheckError::Skip(format!(
            "the normal path passed; the cancel path was not judged: {why}"
        ))),
        None => Ok(()),
    }
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
    let (id, start) = hold_turn(&ctx, &mut opened.conn, &opened.init, &session).await?;
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
    let (id, start) = hold_turn(ctx, &mut opened.conn, &opened.init, &session).await?;
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
    let (id, start) = hold_turn(ctx, &mut opened.conn, &opened.init, &session).await?;
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

/// Holds a turn (or, on an agent that never asks, cancels one at once), cancels it with
/// `session/cancel` and returns its connection and the cancelled turn.
pub async fn cancelled_turn(ctx: &Ctx) -> Result<(Opened, Turn), CheckError> {
    match hold_for_cancel(ctx).await? {
        Holding::Held(mut held) => {
            held.cancel().await?;
            let turn = held.finish().await?;
            Ok((held.opened, turn))
        }
        Holding::NeverAsks(mut opened) => {
            let (turn, _) = cancel_at_once(&mut opened).await?;
            Ok((opened, turn))
        }
    }
}

async fn core_001(ctx: Ctx) -> CheckResult {
    turn_to_cancel(&ctx)?;
    let (_opened, turn) = cancelled_turn(&ctx).await?;
    turn.expect_stop(
        "cancelled",
        "a turn cancelled with session/cancel ends with stopReason cancelled",
    )?;
    if turns_end_only_on_cancel(&ctx) {
        ctx.note(
            "no turn of the agent ends by itself (cancel-turn): only the cancelled one is judged",
        );
        return Ok(());
    }
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
    turn_to_cancel(&ctx)?;
    if turns_end_only_on_cancel(&ctx) {
        ctx.note(
            "no turn of the agent ends by itself (cancel-turn): only a cancelled one is judged",
        );
    } else {
        let mut plain = open(&ctx, PLAIN).await?;
        let turn = exchange::prompt(&mut plain.conn, &plain.session, "one answer").await?;
        plain.conn.quiet(QUIET).await;
        ensure_eq!(
            1,
            responses_to(&plain.conn, &turn.id),
            "responses carrying the id of a normal turn's prompt"
        );
    }
    let (mut held, turn) = cancelled_turn(&ctx).await?;
    held.conn.quiet(QUIET).await;
    ensure_eq!(
        1,
        responses_to(&held.conn, &turn.id),
        "responses carrying the id of a cancelled turn's prompt"
    );
    Ok(())
}

/// For an agent that never asks: prompts and names the prompt in `$/cancel_request` at once.
/// The turn comes back with why the row cannot judge it when its answer is a result (it may
/// have finished before the cancel arrived); -32800 shows the cancel reached it running, and
/// any other error is the row's to judge.
async fn cancel_request_at_once(opened: &mut Opened) -> Result<(Turn, Option<String>), CheckError> {
    let session = opened.session.clone();
    let (id, start) = start_prompt(&mut opened.conn, &session, text_prompt("cancel me")).await?;
    opened
        .conn
        .notify("$/cancel_request", json!({"requestId": id}))
        .await?;
    let turn = finish_prompt(&mut opened.conn, &session, id, start).await?;
    let raced = turn.stop_reason().map(|reason| {
        format!(
            "the agent never asked for permission, so the runner could not hold its turn, and \
             the prompt named by $/cancel_request right after it was sent ended {reason:?}: it \
             may have finished before the cancel arrived (declare hold with an agent_hold \
             command that keeps turns running to judge it)"
        )
    });
    Ok((turn, raced))
}

async fn core_022(ctx: Ctx) -> CheckResult {
    let (mut opened, turn, raced) = match hold_for_cancel(&ctx).await? {
        Holding::Held(mut held) => {
            held.cancel_request().await?;
            let turn = held.finish().await?;
            (held.opened, turn, None)
        }
        Holding::NeverAsks(mut opened) => {
            let (turn, raced) = cancel_request_at_once(&mut opened).await?;
            (opened, turn, raced)
        }
    };
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
        responses_to(&opened.conn, &turn.id),
        "responses carrying the cancelled request's id"
    );
    match raced {
        Some(why) => Err(CheckError::Skip(why)),
        None => Ok(()),
    }
}
