//! Checks of ski's `execution_state_update` and prompt retries (E-ACP-31, E-ACP-32). Variants:
//! `execution_state` reports states; `retry` retries with a back end whose first attempt fails;
//! `retry_exhausted` reports states and retries once with a back end that always fails.

use serde_json::{Value, json};

use super::connection::Frame;
use super::exchange::{self, QUIET, agent_text, execution_state, expect_error, open, prompt};
use crate::check::{Check, CheckResult};
use crate::context::Ctx;
use crate::vocabulary::capability;
use crate::{ensure, ensure_eq, fail};

/// The states that end a turn.
const TERMINAL: &[&str] = &["completed", "cancelled", "timed_out", "failed"];

/// The checks of this module.
pub fn checks() -> Vec<Check> {
    vec![
        Check::new(
            "WS-063c",
            "With execution state enabled, runs a prompt; the session's states must be queued, \
             running, then exactly one terminal state (completed for end_turn), all before the \
             result and none after it.",
            ws_063c,
        ),
        Check::new(
            "WS-065c",
            "With two retries and a first attempt that fails, runs a prompt; requires exactly \
             one retry_update {attempt: 1, maxAttempts: 3}, the reply once, and end_turn.",
            ws_065c,
        ),
        Check::new(
            "WS-066c",
            "With one retry and a back end that always fails, runs a prompt; requires one \
             retry_update, an execution_state_update failed before the answer, and error -32603.",
            ws_066c,
        ),
    ]
}

fn states(frames: &[&Frame], session: &str) -> Vec<String> {
    frames
        .iter()
        .filter(|f| f.is_update_for(session))
        .filter_map(|f| execution_state(f).map(str::to_owned))
        .collect()
}

fn retries(frames: &[&Frame], session: &str) -> Vec<Value> {
    frames
        .iter()
        .filter(|f| f.is_update_for(session) && f.update_kind() == Some("retry_update"))
        .filter_map(|f| f.update()?.get("retry").cloned())
        .collect()
}

/// Whether `states` is queued, running, any number of (retrying, running?) and one terminal state.
fn well_ordered(states: &[String]) -> bool {
    let mut rest = states.iter().map(String::as_str).peekable();
    if rest.next() != Some("queued") || rest.next() != Some("running") {
        return false;
    }
    while rest.peek() == Some(&"retrying") {
        rest.next();
        if rest.peek() == Some(&"running") {
            rest.next();
        }
    }
    matches!(rest.next(), Some(state) if TERMINAL.contains(&state)) && rest.next().is_none()
}

async fn ws_063c(ctx: Ctx) -> CheckResult {
    let mut opened = open(&ctx, "execution_state").await?;
    let turn = prompt(&mut opened.conn, &opened.session, "report your states").await?;
    opened.conn.quiet(QUIET).await;
    let during = states(&turn.updates(&opened.conn), &opened.session);
    ensure!(
        well_ordered(&during),
        "queued, running, then exactly one terminal state, before the prompt result",
        "states {during:?}, then {}",
        turn.describe()
    );
    if turn.stop_reason() == Some("end_turn") {
        ensure_eq!(
            Some("completed"),
            during.last().map(String::as_str),
            "the terminal state of an end_turn turn"
        );
    }
    let after = states(
        &exchange::since(&opened.conn, turn.end + 1),
        &opened.session,
    );
    ensure!(
        after.is_empty(),
        "no execution_state_update after the prompt result",
        "{after:?}"
    );
    Ok(())
}

async fn ws_065c(ctx: Ctx) -> CheckResult {
    let mut opened = open(&ctx, "retry").await?;
    let text = "retry until it works";
    let turn = prompt(&mut opened.conn, &opened.session, text).await?;
    turn.expect_stop("end_turn", "a recovered retry ends end_turn")?;
    let updates = turn.updates(&opened.conn);
    let seen = retries(&updates, &opened.session);
    ensure_eq!(
        vec![json!({"attempt": 1, "maxAttempts": 3})],
        seen.iter()
            .map(|r| json!({"attempt": r.get("attempt"), "maxAttempts": r.get("maxAttempts")}))
            .collect::<Vec<_>>(),
        "the retry_update notifications (attempt and maxAttempts)"
    );
    let chunks = updates
        .iter()
        .filter(|f| f.update_kind() == Some("agent_message_chunk"))
        .count();
    ensure!(chunks >= 1, "the reply is sent", "no agent_message_chunk");
    if ctx.has(capability::ECHO) {
        ensure_eq!(
            text.to_owned(),
            agent_text(&updates),
            "the reply, sent once after the successful attempt"
        );
    }
    Ok(())
}

async fn ws_066c(ctx: Ctx) -> CheckResult {
    let mut opened = open(&ctx, "retry_exhausted").await?;
    let turn = prompt(&mut opened.conn, &opened.session, "this always fails").await?;
    expect_error(&turn.reply, &[-32603], "exhausted retries answer -32603")?;
    let updates = turn.updates(&opened.conn);
    let seen = retries(&updates, &opened.session);
    ensure_eq!(1, seen.len(), "retry_update notifications for one retry");
    let during = states(&updates, &opened.session);
    match during.last().map(String::as_str) {
        Some("failed") => {}
        other => fail!(
            "execution_state_update failed as the last state before the error",
            "states {during:?} (last {other:?})"
        ),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(states: &[&str]) -> Vec<String> {
        states.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn state_orders() {
        assert!(well_ordered(&s(&["queued", "running", "completed"])));
        assert!(well_ordered(&s(&[
            "queued",
            "running",
            "retrying",
            "running",
            "completed"
        ])));
        assert!(well_ordered(&s(&[
            "queued", "running", "retrying", "failed"
        ])));
        assert!(!well_ordered(&s(&["running", "completed"])));
        assert!(!well_ordered(&s(&[
            "queued",
            "running",
            "completed",
            "completed"
        ])));
        assert!(!well_ordered(&s(&["queued", "running"])));
    }
}
