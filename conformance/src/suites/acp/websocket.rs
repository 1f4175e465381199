//! Checks of the WebSocket server: several clients on one listener, routing of responses and
//! updates to their connection, sending with no client connected, frames and the `/acp` upgrade.

use serde_json::{Value, json};

use super::agent::{Agent, PLAIN, Transport};
use super::cancellation::DELAY;
use super::connection::{Connection, FrameKind};
use super::exchange::{
    self, QUIET, agent_text, initialize, new_session, new_session_params, prompt_ok, start_prompt,
    text_prompt,
};
use crate::check::{Check, CheckError, CheckResult};
use crate::context::Ctx;
use crate::vocabulary::capability;
use crate::{ensure, ensure_eq};

/// The checks of this module.
pub fn checks() -> Vec<Check> {
    vec![
        Check::new(
            "WS-003",
            "Over ws, starts a slow prompt and disconnects at once, so its updates and result \
             are sent with no client; the agent must stay up and serve a new connection through \
             initialize, session/new and a prompt.",
            ws_003,
        ),
        Check::new(
            "WS-019",
            "Opens two ws connections on one port, runs initialize, session/new and a prompt on \
             both at once; each must get only its own responses and its own session's updates.",
            ws_019,
        ),
        Check::new(
            "WS-020",
            "Sends session/new with the same id on two ws connections at once and a request on \
             the first only; every response must reach only the connection that asked.",
            ws_020,
        ),
        Check::new(
            "WS-021",
            "Two ws connections each own a session and prompt at once; each must receive every \
             update of its own session and none of the other's.",
            ws_021,
        ),
        Check::new(
            "ACP-CORE-026",
            "Over ws, sends a binary frame, then initialize and session/new as text frames; the \
             binary frame gets no reply and keeps the connection, every frame of the agent is a \
             text frame with one JSON-RPC message.",
            core_026,
        ),
        Check::new(
            "ACP-CORE-027",
            "Opens a WebSocket on /acp; the upgrade must carry an Acp-Connection-Id header and \
             initialize be answered.",
            core_027,
        ),
    ]
}

/// A new initialized connection.
async fn joined(agent: &mut Agent) -> Result<Connection, CheckError> {
    let mut conn = agent.connect().await?;
    initialize(&mut conn).await?;
    Ok(conn)
}

async fn ws_003(ctx: Ctx) -> CheckResult {
    let mut agent = Agent::start_on(&ctx, Transport::Ws, DELAY).await?;
    let mut gone = joined(&mut agent).await?;
    let session = new_session(&ctx, &mut gone).await?;
    start_prompt(&mut gone, &session, text_prompt("nobody will read this")).await?;
    gone.close().await;
    drop(gone);
    let mut next = joined(&mut agent).await?;
    let fresh = new_session(&ctx, &mut next).await?;
    prompt_ok(&mut next, &fresh, "a new client is served").await?;
    ensure!(
        agent.is_running(),
        "the agent keeps running after sending with no client connected",
        "it exited: {:?}",
        agent.child().and_then(|c| c.try_status())
    );
    Ok(())
}

/// Frames of `conn` that name `session`.
fn naming<'a>(conn: &'a Connection, session: &str) -> Vec<&'a super::connection::Frame> {
    conn.frames()
        .iter()
        .filter(|f| f.session_id() == Some(session) || f.text.contains(session))
        .collect()
}

async fn ws_019(ctx: Ctx) -> CheckResult {
    let mut agent = Agent::start_on(&ctx, Transport::Ws, PLAIN).await?;
    let mut a = joined(&mut agent).await?;
    let mut b = joined(&mut agent).await?;
    let sa = new_session(&ctx, &mut a).await?;
    let sb = new_session(&ctx, &mut b).await?;
    let (ia, start_a) = start_prompt(&mut a, &sa, text_prompt("from client a")).await?;
    let (ib, start_b) = start_prompt(&mut b, &sb, text_prompt("from client b")).await?;
    let ta = exchange::finish_prompt(&mut a, &sa, ia, start_a).await?;
    let tb = exchange::finish_prompt(&mut b, &sb, ib, start_b).await?;
    ta.expect_stop("end_turn", "client a's prompt ends end_turn")?;
    tb.expect_stop("end_turn", "client b's prompt ends end_turn")?;
    a.quiet(QUIET).await;
    b.quiet(QUIET).await;
    let crossed_a = naming(&a, &sb);
    let crossed_b = naming(&b, &sa);
    ensure!(
        crossed_a.is_empty() && crossed_b.is_empty(),
        "no frame of one client's session reaches the other client",
        "a got {}; b got {}",
        exchange::list(&crossed_a),
        exchange::list(&crossed_b)
    );
    if ctx.has(capability::ECHO) {
        ensure_eq!(
            "from client a".to_owned(),
            agent_text(&ta.updates(&a)),
            "client a's reply"
        );
        ensure_eq!(
            "from client b".to_owned(),
            agent_text(&tb.updates(&b)),
            "client b's reply"
        );
    }
    Ok(())
}

async fn ws_020(ctx: Ctx) -> CheckResult {
    let mut agent = Agent::start_on(&ctx, Transport::Ws, PLAIN).await?;
    let mut a = joined(&mut agent).await?;
    let mut b = joined(&mut agent).await?;
    let id = json!(7_000);
    a.request_with_id(id.clone(), "session/new", new_session_params(&ctx))
        .await?;
    b.request_with_id(id.clone(), "session/new", new_session_params(&ctx))
        .await?;
    let ra = a.reply(&id, "session/new").await?;
    let rb = b.reply(&id, "session/new").await?;
    let ra = exchange::expect_result(ra, "connection a's session/new succeeds")?;
    let rb = exchange::expect_result(rb, "connection b's session/new succeeds")?;
    let (sa, sb) = (
        exchange::session_id_of(&ra, "session/new")?,
        exchange::session_id_of(&rb, "session/new")?,
    );
    ensure!(
        sa != sb,
        "each connection gets its own response to the same id",
        "both got session {sa}"
    );
    // A request on the first connection after the second connected.
    let only = a.request("session/new", new_session_params(&ctx)).await?;
    let _answer = a.reply(&only, "session/new").await?;
    a.quiet(QUIET).await;
    b.quiet(QUIET).await;
    let count =
        |conn: &Connection, id: &Value| conn.frames().iter().filter(|f| f.answers(id)).count();
    ensure_eq!(1, count(&a, &id), "responses with id 7000 on connection a");
    ensure_eq!(1, count(&b, &id), "responses with id 7000 on connection b");
    let stray: Vec<_> = b.frames().iter().filter(|f| f.answers(&only)).collect();
    ensure!(
        stray.is_empty(),
        "a response goes back to the connection of its request, not to the last connected",
        "connection b got {}",
        exchange::list(&stray)
    );
    Ok(())
}

async fn ws_021(ctx: Ctx) -> CheckResult {
    let mut agent = Agent::start_on(&ctx, Transport::Ws, PLAIN).await?;
    let mut a = joined(&mut agent).await?;
    let mut b = joined(&mut agent).await?;
    let sa = new_session(&ctx, &mut a).await?;
    let sb = new_session(&ctx, &mut b).await?;
    let (ia, start_a) = start_prompt(&mut a, &sa, text_prompt("updates for a")).await?;
    let (ib, start_b) = start_prompt(&mut b, &sb, text_prompt("updates for b")).await?;
    let ta = exchange::finish_prompt(&mut a, &sa, ia, start_a).await?;
    let tb = exchange::finish_prompt(&mut b, &sb, ib, start_b).await?;
    a.quiet(QUIET).await;
    b.quiet(QUIET).await;
    for (name, conn, turn, other) in [("a", &a, &ta, &sb), ("b", &b, &tb, &sa)] {
        let kinds = turn.kinds(conn);
        ensure!(
            kinds.iter().any(|k| k == "agent_message_chunk"),
            format!("connection {name} receives the updates of its own session"),
            "update kinds {kinds:?}"
        );
        let foreign: Vec<_> = conn
            .frames()
            .iter()
            .filter(|f| f.is_update_for(other))
            .collect();
        ensure!(
            foreign.is_empty(),
            format!("connection {name} receives no update of the other connection's session"),
            "{}",
            exchange::list(&foreign)
        );
    }
    Ok(())
}

async fn core_026(ctx: Ctx) -> CheckResult {
    let mut agent = Agent::start_on(&ctx, Transport::Ws, PLAIN).await?;
    let mut conn = agent.connect().await?;
    conn.send_binary(
        br#"{"jsonrpc":"2.0","id":99,"method":"initialize","params":{"protocolVersion":1}}"#
            .to_vec(),
    )
    .await?;
    initialize(&mut conn).await?;
    new_session(&ctx, &mut conn).await?;
    conn.quiet(QUIET).await;
    ensure!(
        conn.closed().is_none(),
        "a binary frame does not close the connection",
        "{}",
        conn.closed().unwrap_or_default()
    );
    let answered: Vec<_> = conn
        .frames()
        .iter()
        .filter(|f| f.answers(&json!(99)))
        .collect();
    ensure!(
        answered.is_empty(),
        "a binary frame gets no reply",
        "{}",
        exchange::list(&answered)
    );
    let bad: Vec<_> = conn
        .frames()
        .iter()
        .filter(|f| f.kind != FrameKind::Text || !f.value.as_ref().is_some_and(Value::is_object))
        .collect();
    ensure!(
        bad.is_empty(),
        "every frame of the agent is a text frame holding one JSON-RPC message",
        "{}",
        exchange::list(&bad)
    );
    Ok(())
}

async fn core_027(ctx: Ctx) -> CheckResult {
    let mut agent = Agent::start_on(&ctx, Transport::Ws, PLAIN).await?;
    let mut conn = agent.connect_path("/acp").await?;
    let id = conn
        .headers()
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case("acp-connection-id"))
        .map(|(_, v)| v.clone());
    ensure!(
        id.as_deref().is_some_and(|v| !v.is_empty()),
        "the 101 response of GET /acp carries an Acp-Connection-Id header",
        "headers {:?}",
        conn.headers()
    );
    initialize(&mut conn).await?;
    Ok(())
}
