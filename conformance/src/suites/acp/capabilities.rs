//! General `capability` rows judged by ACP v1 alone, each applying where the agent advertises
//! the feature in its `initialize` result (not where a profile declares it): `session/list`,
//! `session/resume`, `session/close`, `session/delete`, `session/fork`, `logout` and
//! `authenticate` (ACP-CAP-001 to ACP-CAP-007). The seed document's stricter WS rows stay
//! separate, under `ski-serve-spec`.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::agent::HOLD;
use super::agent::PLAIN;
use super::connection::{Connection, Reply};
use super::exchange::{
    self, Opened, QUIET, expect_result, finish_prompt, new_session_params, open, prompt,
    session_id_of, start_prompt, text_prompt, wait_running,
};
use super::jsonrpc::still_serves_as;
use crate::check::{Check, CheckError, CheckResult};
use crate::context::Ctx;
use crate::vocabulary::capability;
use crate::{ensure, fail};

/// The checks of this module.
pub fn checks() -> Vec<Check> {
    vec![
        Check::new(
            "ACP-CAP-001",
            "Where sessionCapabilities.list is advertised: session/list {} and session/list \
             filtered by cwd answer {sessions: [...]}, every entry with a string sessionId and \
             an absolute cwd (the filter's, when filtered), nextCursor a string when present.",
            cap_001,
        ),
        Check::new(
            "ACP-CAP-002",
            "Where sessionCapabilities.resume is advertised: after a turn (where declared), \
             session/resume of the session answers a result, no message chunk of the session \
             is replayed before the answer or in a quiet period after it, and the session takes \
             a prompt afterwards.",
            cap_002,
        ),
        Check::new(
            "ACP-CAP-003",
            "Where sessionCapabilities.close is advertised: session/close answers a result; a \
             turn held open when the session is closed ends with stopReason cancelled.",
            cap_003,
        ),
        Check::new(
            "ACP-CAP-004",
            "Where sessionCapabilities.delete is advertised: once session/list (where \
             advertised) names the session (waited for up to a set-up step), session/delete \
             answers a result, and session/list no longer names the session.",
            cap_004,
        ),
        Check::new(
            "ACP-CAP-005",
            "Where sessionCapabilities.fork is advertised: session/fork answers a new sessionId \
             other than the source's; the fork and the source each take a prompt afterwards.",
            cap_005,
        ),
        Check::new(
            "ACP-CAP-006",
            "Where agentCapabilities.auth.logout is advertised: logout {} answers a result and \
             the agent goes on answering requests.",
            cap_006,
        ),
        Check::new(
            "ACP-CAP-007",
            "Where authMethods is not empty (the auth variant where declared): authenticate with \
             a methodId the agent did not advertise answers an error, and the agent goes on \
             answering requests.",
            cap_007,
        ),
    ]
}

/// Goes on only when the agent's `initialize` result advertises something at `pointer`; the
/// row does not apply to an agent that does not.
fn require_advertised(ctx: &Ctx, init: &Value, pointer: &str) -> CheckResult {
    let advertised = init
        .pointer(pointer)
        .is_some_and(|v| !v.is_null() && v != &json!(false));
    if advertised {
        Ok(())
    } else {
        Err(CheckError::Undeclared {
            target: ctx.target().name.clone(),
            capability: pointer.trim_start_matches('/').replace('/', "."),
        })
    }
}

/// Opens the plain agent and goes on only where it advertises `pointer`.
async fn open_advertising(ctx: &Ctx, pointer: &str) -> Result<Opened, CheckError> {
    let opened = open(ctx, PLAIN).await?;
    require_advertised(ctx, &opened.init, pointer)?;
    Ok(opened)
}

/// A prompt turn where the target can run one; fails unless the turn is answered with a result.
async fn turn_if_declared(
    ctx: &Ctx,
    conn: &mut Connection,
    session: &str,
    check: &str,
) -> CheckResult {
    if !ctx.has(capability::PROMPT) {
        return Ok(());
    }
    let turn = prompt(conn, session, "hello").await?;
    ensure!(turn.fault().is_none(), check, "{}", turn.describe());
    Ok(())
}

/// The `sessions` of a `session/list` result, checked entry by entry.
fn listed_sessions(result: &Value, cwd: Option<&str>) -> Result<Vec<String>, CheckError> {
    let Some(sessions) = result.get("sessions").and_then(Value::as_array) else {
        fail!(
            "the session/list result has a sessions array",
            "result {result}"
        );
    };
    if let Some(cursor) = result.get("nextCursor")
        && !cursor.is_null()
        && !cursor.is_string()
    {
        fail!("nextCursor is a string when present", "nextCursor {cursor}");
    }
    let mut ids = Vec::new();
    for entry in sessions {
        let id = entry.get("sessionId").and_then(Value::as_str);
        let path = entry.get("cwd").and_then(Value::as_str);
        let (Some(id), Some(path)) = (id, path) else {
            fail!(
                "every session/list entry has a string sessionId and a string cwd",
                "entry {entry}"
            );
        };
        ensure!(
            path.starts_with('/'),
            "every session/list entry's cwd is an absolute path",
            "entry {entry}"
        );
        if let Some(filter) = cwd {
            ensure!(
                path == filter,
                "session/list filtered by cwd lists only sessions of that cwd",
                "filter {filter}, entry {entry}"
            );
        }
        ids.push(id.to_owned());
    }
    Ok(ids)
}

async fn cap_001(ctx: Ctx) -> CheckResult {
    let mut opened = open_advertising(&ctx, "/agentCapabilities/sessionCapabilities/list").await?;
    turn_if_declared(
        &ctx,
        &mut opened.conn,
        &opened.session,
        "the turn is answered",
    )
    .await?;
    let all = opened.conn.call_ok("session/list", json!({})).await?;
    listed_sessions(&all, None)?;
    let cwd = ctx.temp_dir().display().to_string();
    let filtered = opened
        .conn
        .call_ok("session/list", json!({"cwd": cwd}))
        .await?;
    listed_sessions(&filtered, Some(&cwd))?;
    Ok(())
}

async fn cap_002(ctx: Ctx) -> CheckResult {
    let mut opened =
        open_advertising(&ctx, "/agentCapabilities/sessionCapabilities/resume").await?;
    let session = opened.session.clone();
    let conn = &mut opened.conn;
    turn_if_declared(
        &ctx,
        conn,
        &session,
        "the turn before the resume is answered",
    )
    .await?;
    conn.quiet(QUIET).await;
    let start = conn.cursor();
    let mut params = new_session_params(&ctx);
    params["sessionId"] = json!(session);
    let reply = conn.call("session/resume", params).await?;
    expect_result(
        reply,
        "session/resume of an existing session answers a result",
    )?;
    conn.quiet(QUIET).await;
    let replayed: Vec<_> = exchange::since(conn, start)
        .into_iter()
        .filter(|f| f.is_update_for(&session))
        .filter(|f| {
            matches!(
                f.update_kind(),
                Some("user_message_chunk" | "agent_message_chunk")
            )
        })
        .collect();
    ensure!(
        replayed.is_empty(),
        "session/resume replays no message of the conversation, before its answer or after \
         (unlike session/load)",
        "{}",
        exchange::list(&replayed)
    );
    turn_if_declared(&ctx, conn, &session, "the resumed session takes a prompt").await
}

async fn cap_003(ctx: Ctx) -> CheckResult {
    let mut opened = open_advertising(&ctx, "/agentCapabilities/sessionCapabilities/close").await?;
    let reply = opened
        .conn
        .call("session/close", json!({"sessionId": opened.session}))
        .await?;
    expect_result(reply, "session/close of an idle session answers a result")?;
    if !ctx.has(capability::HOLD) {
        return Ok(());
    }
    let mut held = open(&ctx, HOLD).await?;
    require_advertised(
        &ctx,
        &held.init,
        "/agentCapabilities/sessionCapabilities/close",
    )?;
    let session = held.session.clone();
    let conn = &mut held.conn;
    let (id, start) = start_prompt(conn, &session, text_prompt("hold this turn")).await?;
    wait_running(conn, &held.init, &session, start).await?;
    let close = conn
        .request("session/close", json!({"sessionId": session}))
        .await?;
    let turn = finish_prompt(conn, &session, id, start).await?;
    turn.expect_stop(
        "cancelled",
        "a turn running when its session is closed ends with stopReason cancelled",
    )?;
    let reply: Reply = conn.reply(&close, "session/close").await?;
    expect_result(
        reply,
        "session/close of a session with a running turn answers a result",
    )?;
    Ok(())
}

async fn cap_004(ctx: Ctx) -> CheckResult {
    let mut opened =
        open_advertising(&ctx, "/agentCapabilities/sessionCapabilities/delete").await?;
    let session = opened.session.clone();
    let conn = &mut opened.conn;
    turn_if_declared(
        &ctx,
        conn,
        &session,
        "the turn before the delete is answered",
    )
    .await?;
    let lists = opened
        .init
        .pointer("/agentCapabilities/sessionCapabilities/list")
        .is_some_and(|v| !v.is_null());
    if lists {
        wait_listed(&ctx, conn, &session).await?;
    }
    let reply = conn
        .call("session/delete", json!({"sessionId": session}))
        .await?;
    expect_result(
        reply,
        "session/delete of an existing session answers a result",
    )?;
    if lists {
        let listed = conn.call_ok("session/list", json!({})).await?;
        let ids = listed_sessions(&listed, None)?;
        ensure!(
            !ids.contains(&session),
            "session/list no longer names a deleted session",
            "sessions {ids:?}"
        );
    }
    Ok(())
}

/// Waits, at most one set-up step, until `session/list` names `session`: ACP's `session/delete`
/// removes a session from `session/list`, and nothing says how soon a session appears there
/// (E-ACP-36, -62). A session never listed in that time is deleted as it is, saying so.
async fn wait_listed(ctx: &Ctx, conn: &mut Connection, session: &str) -> CheckResult {
    let allowance = ctx.setup_step();
    let deadline = Instant::now() + allowance;
    let mut asked = 0;
    loop {
        let listed = conn.call_ok("session/list", json!({})).await?;
        asked += 1;
        if listed_sessions(&listed, None)?
            .iter()
            .any(|id| id == session)
        {
            if asked > 1 {
                ctx.note(format!(
                    "session/list named the session after {asked} calls: deleted from there"
                ));
            }
            return Ok(());
        }
        if Instant::now() >= deadline {
            ctx.note(format!(
                "session/list did not name the session in {allowance:?} ({asked} calls): \
                 deleted as it is"
            ));
            return Ok(());
        }
        tokio::time::sleep(LIST_POLL).await;
    }
}

/// How often [`wait_listed`] asks again.
const LIST_POLL: Duration = Duration::from_millis(100);

async fn cap_005(ctx: Ctx) -> CheckResult {
    let mut opened = open_advertising(&ctx, "/agentCapabilities/sessionCapabilities/fork").await?;
    let source = opened.session.clone();
    let conn = &mut opened.conn;
    turn_if_declared(&ctx, conn, &source, "the turn before the fork is answered").await?;
    let mut params = new_session_params(&ctx);
    params["sessionId"] = json!(source);
    let forked = conn.call_ok("session/fork", params).await?;
    let fork = session_id_of(&forked, "session/fork")?;
    ensure!(
        fork != source,
        "session/fork returns a new sessionId, not the source's",
        "sessionId {fork}"
    );
    turn_if_declared(&ctx, conn, &fork, "the fork takes a prompt").await?;
    turn_if_declared(&ctx, conn, &source, "the source still takes a prompt").await
}

async fn cap_006(ctx: Ctx) -> CheckResult {
    let mut opened = open_advertising(&ctx, "/agentCapabilities/auth/logout").await?;
    let reply = opened.conn.call("logout", json!({})).await?;
    expect_result(reply, "logout answers a result")?;
    still_serves_as(&mut opened.conn, "the agent answers requests after logout").await
}

async fn cap_007(ctx: Ctx) -> CheckResult {
    let variant = if ctx.has(capability::AUTH) {
        "auth"
    } else {
        PLAIN
    };
    let mut opened = open(&ctx, variant).await?;
    let methods = opened
        .init
        .get("authMethods")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if methods.is_empty() {
        return Err(CheckError::Undeclared {
            target: ctx.target().name.clone(),
            capability: "authMethods".to_owned(),
        });
    }
    let unknown = "ski-conformance-not-advertised";
    let reply = opened
        .conn
        .call("authenticate", json!({"methodId": unknown}))
        .await?;
    if let Ok(result) = reply {
        fail!(
            "authenticate with a methodId the agent did not advertise answers an error",
            "result {result}"
        );
    }
    still_serves_as(
        &mut opened.conn,
        "the agent answers requests after a refused authenticate",
    )
    .await?;
    Ok(())
}
