//! Checks of `session/request_permission` before a prompt runs: the client's decision, failures
//! of the permission bridge under the serve modes, and the permission policy with its memory.
//!
//! Variants: `permission` asks the client before every prompt; `permissive` and `required` ask
//! with a short permission timeout in those modes; `permission_lost` asks in required mode with
//! a long timeout; `policy_allow`, `policy_deny` and `policy_ask` run the permission policy.

use std::time::Duration;

use serde_json::json;
use tokio::time::Instant;

use super::agent::{Agent, Transport};
use super::connection::{Connection, PermissionReply};
use super::exchange::{
    self, Turn, content_updates, execution_state, expect_error, initialize, open, open_on, prompt,
    text_prompt,
};
use crate::check::{Check, CheckResult, Failure};
use crate::context::Ctx;
use crate::vocabulary::capability;
use crate::{ensure, ensure_eq, fail};

/// How long WS-027 lets the agent fail a pending permission request after its link closed.
const FAIL_FAST: Duration = Duration::from_secs(5);

/// The checks of this module.
pub fn checks() -> Vec<Check> {
    vec![
        Check::new(
            "WS-025",
            "Answers the permission request with a reject_once option; the prompt must end \
             cancelled with no content update, no agent reply and no running state.",
            ws_025,
        ),
        Check::new(
            "WS-026",
            "Over ws, answers the permission request with an allow_once option; the request must \
             reach this connection and the prompt end end_turn.",
            ws_026,
        ),
        Check::new(
            "WS-027",
            "Over ws in required mode with a long permission timeout, closes the connection \
             while the permission request is pending; a prompt on the same session from a new \
             connection must not stay refused as already running for more than 5 s.",
            ws_027,
        ),
        Check::new(
            "WS-028",
            "In permissive mode with a short permission timeout, never answers the permission \
             request; the prompt must still end end_turn.",
            ws_028,
        ),
        Check::new(
            "WS-029",
            "In required mode with a short permission timeout, refuses once (the prompt must end \
             cancelled) and never answers once (error -32603), with no content update either \
             time.",
            ws_029,
        ),
        Check::new(
            "WS-063d",
            "Under permission policy allow, runs a prompt; it must end end_turn without any \
             session/request_permission.",
            ws_063d,
        ),
        Check::new(
            "WS-064d",
            "Under permission policy deny, runs a prompt; it must end cancelled with no content \
             update and without any session/request_permission.",
            ws_064d,
        ),
        Check::new(
            "WS-065d",
            "Under policy ask, answers allow_always once: the next prompt of the session is not \
             asked and ends end_turn, a new session is asked; answers reject_always there: its \
             next prompt ends cancelled without asking.",
            ws_065d,
        ),
        Check::new(
            "WS-066d",
            "Under policy ask, remembers allow_always, deletes the session and requires the \
             unknown-session error for a later prompt on it; with logout, after logout every \
             session is gone and a new session is asked again.",
            ws_066d,
        ),
    ]
}

/// The permission requests for `session` read during `turn`.
fn asked(conn: &Connection, turn: &Turn) -> usize {
    conn.frames()[turn.start..turn.end]
        .iter()
        .filter(|f| {
            f.method() == Some("session/request_permission")
                && f.session_id() == Some(&turn.session)
        })
        .count()
}

fn answer_with(conn: &Connection, reply: PermissionReply) {
    conn.set_responder(|r| r.permission = reply);
}

fn select(kind: &str) -> PermissionReply {
    PermissionReply::Select(kind.to_owned())
}

/// Fails unless the turn sent no content update, no reply text and no `running` state.
fn nothing_ran(conn: &Connection, turn: &Turn, check: &str) -> CheckResult {
    let frames = exchange::since(conn, turn.start);
    let content = content_updates(&frames, &turn.session);
    ensure!(content.is_empty(), check, "{}", exchange::list(&content));
    let running: Vec<_> = frames
        .iter()
        .copied()
        .filter(|f| f.is_update_for(&turn.session) && execution_state(f) == Some("running"))
        .collect();
    ensure!(
        running.is_empty(),
        format!("{check} (no model call: no running state)"),
        "{}",
        exchange::list(&running)
    );
    Ok(())
}

async fn ws_025(ctx: Ctx) -> CheckResult {
    let mut opened = open(&ctx, "permission").await?;
    answer_with(&opened.conn, select("reject_once"));
    let turn = prompt(&mut opened.conn, &opened.session, "may I?").await?;
    ensure!(
        asked(&opened.conn, &turn) >= 1,
        "the agent asks session/request_permission before it runs the prompt",
        "no permission request; {}",
        turn.describe()
    );
    turn.expect_stop(
        "cancelled",
        "a denied prompt ends with stopReason cancelled",
    )?;
    opened.conn.quiet(exchange::QUIET).await;
    nothing_ran(
        &opened.conn,
        &turn,
        "no content update after a denied permission",
    )
}

async fn ws_026(ctx: Ctx) -> CheckResult {
    let mut opened = open_on(&ctx, Transport::Ws, "permission").await?;
    answer_with(&opened.conn, select("allow_once"));
    let turn = prompt(&mut opened.conn, &opened.session, "allowed over websocket").await?;
    ensure!(
        asked(&opened.conn, &turn) >= 1,
        "the permission request reaches the connection that sent the prompt",
        "no permission request; {}",
        turn.describe()
    );
    turn.expect_stop("end_turn", "an allowed prompt ends end_turn")
}

async fn ws_027(ctx: Ctx) -> CheckResult {
    let mut agent = Agent::start_on(&ctx, Transport::Ws, "permission_lost").await?;
    let mut first = agent.connect().await?;
    initialize(&mut first).await?;
    let session = exchange::new_session(&ctx, &mut first).await?;
    answer_with(&first, PermissionReply::Ignore);
    let (_, start) = exchange::start_prompt(&mut first, &session, text_prompt("pending")).await?;
    first
        .wait_for("a session/request_permission", start, |f| {
            f.method() == Some("session/request_permission")
        })
        .await?;
    first.close().await;
    drop(first);
    let closed_at = Instant::now();
    let mut second = agent.connect().await?;
    initialize(&mut second).await?;
    answer_with(&second, select("allow_once"));
    let limit = ctx.timeouts().scale(FAIL_FAST);
    loop {
        let turn = prompt(&mut second, &session, "after the link closed").await?;
        match &turn.reply {
            Err(fault) if fault.code == Some(-32602) && closed_at.elapsed() < limit => {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(fault) if fault.code == Some(-32602) => {
                fail!(
                    format!(
                        "the pending permission request fails within {limit:?} of the link \
                         closing, so the session takes a new prompt"
                    ),
                    "still refused after {:?}: {}",
                    closed_at.elapsed(),
                    turn.describe()
                );
            }
            _ => {
                turn.expect_stop(
                    "end_turn",
                    "a prompt from the new connection runs and ends end_turn",
                )?;
                return Ok(());
            }
        }
    }
}

async fn ws_028(ctx: Ctx) -> CheckResult {
    let mut opened = open(&ctx, "permissive").await?;
    answer_with(&opened.conn, PermissionReply::Ignore);
    let turn = prompt(&mut opened.conn, &opened.session, "nobody answers").await?;
    ensure!(
        asked(&opened.conn, &turn) >= 1,
        "the agent asks for permission",
        "no permission request; {}",
        turn.describe()
    );
    turn.expect_stop(
        "end_turn",
        "in permissive mode a permission timeout lets the prompt proceed to end_turn",
    )
}

async fn ws_029(ctx: Ctx) -> CheckResult {
    let mut opened = open(&ctx, "required").await?;
    answer_with(&opened.conn, select("reject_once"));
    let refused = prompt(&mut opened.conn, &opened.session, "refused").await?;
    refused.expect_stop(
        "cancelled",
        "in required mode a refusal ends the prompt cancelled",
    )?;
    answer_with(&opened.conn, PermissionReply::Ignore);
    let second = exchange::new_session(&ctx, &mut opened.conn).await?;
    let unanswered = prompt(&mut opened.conn, &second, "unanswered").await?;
    expect_error(
        &unanswered.reply,
        &[-32603],
        "in required mode a permission bridge failure (timeout) answers -32603",
    )?;
    opened.conn.quiet(exchange::QUIET).await;
    nothing_ran(&opened.conn, &refused, "no content update after a refusal")?;
    nothing_ran(
        &opened.conn,
        &unanswered,
        "no content update after a bridge failure",
    )
}

async fn ws_063d(ctx: Ctx) -> CheckResult {
    let mut opened = open(&ctx, "policy_allow").await?;
    answer_with(&opened.conn, select("reject_once"));
    let turn = prompt(&mut opened.conn, &opened.session, "policy allows").await?;
    ensure_eq!(
        0,
        asked(&opened.conn, &turn),
        "permission requests under policy allow"
    );
    turn.expect_stop("end_turn", "policy allow grants the prompt: end_turn")
}

async fn ws_064d(ctx: Ctx) -> CheckResult {
    let mut opened = open(&ctx, "policy_deny").await?;
    answer_with(&opened.conn, select("allow_once"));
    let turn = prompt(&mut opened.conn, &opened.session, "policy denies").await?;
    ensure_eq!(
        0,
        asked(&opened.conn, &turn),
        "permission requests under policy deny"
    );
    turn.expect_stop("cancelled", "policy deny refuses the prompt: cancelled")?;
    opened.conn.quiet(exchange::QUIET).await;
    nothing_ran(&opened.conn, &turn, "no content update under policy deny")
}

async fn ws_065d(ctx: Ctx) -> CheckResult {
    let mut opened = open(&ctx, "policy_ask").await?;
    let conn = &mut opened.conn;
    answer_with(conn, select("allow_always"));
    let first = prompt(conn, &opened.session, "remember yes").await?;
    ensure_eq!(
        1,
        asked(conn, &first),
        "permission requests of the first prompt"
    );
    first.expect_stop("end_turn", "the allowed first prompt ends end_turn")?;
    answer_with(conn, select("reject_once"));
    let again = prompt(conn, &opened.session, "remembered yes").await?;
    ensure_eq!(
        0,
        asked(conn, &again),
        "permission requests after allow_always in the same session"
    );
    again.expect_stop("end_turn", "a remembered allow_always runs the prompt")?;
    let other = exchange::new_session(&ctx, conn).await?;
    answer_with(conn, select("reject_always"));
    let fresh = prompt(conn, &other, "a new session").await?;
    ensure_eq!(
        1,
        asked(conn, &fresh),
        "permission requests of a new session's first prompt"
    );
    fresh.expect_stop(
        "cancelled",
        "a prompt refused with reject_always ends cancelled",
    )?;
    answer_with(conn, select("allow_once"));
    let refused = prompt(conn, &other, "remembered no").await?;
    ensure_eq!(
        0,
        asked(conn, &refused),
        "permission requests after reject_always in the same session"
    );
    refused.expect_stop(
        "cancelled",
        "a remembered reject_always ends the prompt cancelled",
    )
}

/// Requires the unknown-session error (E-ACP-19) for a prompt on `session`.
async fn gone(conn: &mut Connection, session: &str, check: &str) -> CheckResult {
    let turn = prompt(conn, session, "are you still there").await?;
    match &turn.reply {
        Err(fault) if matches!(fault.code, Some(-32002 | -32602)) => Ok(()),
        _ => Err(Failure::new(
            check,
            "error -32002 or -32602 for a prompt on the session, not a turn under the old decision",
        )
        .actual(format!(
            "{} with {} permission request(s)",
            turn.describe(),
            asked(conn, &turn)
        ))
        .into()),
    }
}

async fn ws_066d(ctx: Ctx) -> CheckResult {
    let mut opened = open(&ctx, "policy_ask").await?;
    let conn = &mut opened.conn;
    answer_with(conn, select("allow_always"));
    let first = prompt(conn, &opened.session, "remember me").await?;
    first.expect_stop("end_turn", "the allowed prompt ends end_turn")?;
    let deleted = conn
        .call("session/delete", json!({"sessionId": opened.session}))
        .await?;
    exchange::expect_result(deleted, "session/delete succeeds")?;
    gone(
        conn,
        &opened.session,
        "after session/delete no prompt runs under the session's remembered decision",
    )
    .await?;
    if ctx.has(capability::LOGOUT) {
        let kept = exchange::new_session(&ctx, conn).await?;
        answer_with(conn, select("allow_always"));
        prompt(conn, &kept, "remember me too").await?;
        let reply = conn.call("logout", json!({})).await?;
        exchange::expect_result(reply, "logout succeeds")?;
        gone(
            conn,
            &kept,
            "after logout no session keeps a remembered decision",
        )
        .await?;
        let fresh = exchange::new_session(&ctx, conn).await?;
        answer_with(conn, select("allow_once"));
        let turn = prompt(conn, &fresh, "ask me again").await?;
        ensure_eq!(
            1,
            asked(conn, &turn),
            "permission requests of a session created after logout"
        );
    }
    Ok(())
}
