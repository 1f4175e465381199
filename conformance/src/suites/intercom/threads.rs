//! S036–S042: a session's first post is the thread root and its `ts` the session's `thread_ts`;
//! everything after (broadcasts, approvals, decisions, the final message when the agent closes
//! its MCP session) is a reply in that thread, which never moves.

use serde_json::json;

use crate::{Check, CheckResult, Ctx, OrFail, ensure, ensure_eq};

use super::harness::{
    ALICE, CHANNEL_X, World, ask_clearance, call, clearance_answer, has_button, shows,
};
use super::lifecycle::SESSION_ENDED;

/// The checks of this part.
pub fn checks() -> Vec<Check> {
    vec![
        Check::new(
            "S036",
            "Connects a session in myproj; expects its first post at the top level of the channel and the session row's thread_ts equal to that post's ts.",
            s036,
        ),
        Check::new(
            "S037",
            "Calls broadcast; expects the message posted with thread_ts equal to the session's thread_ts.",
            s037,
        ),
        Check::new(
            "S038",
            "Calls check_clearance; expects the message with Accept/Reject buttons posted in the session's thread.",
            s038,
        ),
        Check::new(
            "S039",
            "Clicks Accept on the threaded approval; expects a new message about the decision in the same thread.",
            s039,
        ),
        Check::new(
            "S040",
            "The MCP agent closes its session (a way every build's MCP sessions end; no slash command); expects a \"Session ended\" reply (override final) in the session's thread.",
            s040,
        ),
        Check::new(
            "S041",
            "Connects two sessions in the same channel; expects two different thread roots, and each session's broadcast only in its own thread.",
            s041,
        ),
        Check::new(
            "S042",
            "Calls broadcast with a different thread_ts argument (the attempt to update it), then broadcasts again; expects the session row's thread_ts unchanged and the later broadcast in the original thread. Where the attempt's own post goes is the broadcast tool's argument, not the row's subject, and is not judged.",
            s042,
        ),
    ]
}

async fn one_session(
    ctx: &Ctx,
) -> Result<
    (
        World,
        super::harness::Server,
        super::harness::Client,
        String,
    ),
    crate::CheckError,
> {
    let world = World::new(ctx).await?;
    let server = world.start(None).await?;
    let client = server.connect("workspace_id=myproj").await?;
    let root = world
        .message("the session's first post", |m| m.channel == CHANNEL_X)
        .await?;
    let thread_ts = root.ts().to_string();
    Ok((world, server, client, thread_ts))
}

async fn s036(ctx: Ctx) -> CheckResult {
    let (world, server, client, thread_ts) = one_session(&ctx).await?;
    let first = world.slack.messages(CHANNEL_X, None);
    let root = first.first().cloned();
    ensure!(
        root.as_ref().is_some_and(|m| m.thread_ts().is_none()),
        "the first post is top-level"
    );
    let row = world
        .session_when(0, "has its thread_ts", |row| row.thread_ts.is_some())
        .await?;
    ensure_eq!(Some(thread_ts), row.thread_ts, "the session's thread_ts");
    let _ = client.cancel().await;
    server.stop().await?;
    Ok(())
}

async fn s037(ctx: Ctx) -> CheckResult {
    let (world, server, client, thread_ts) = one_session(&ctx).await?;
    call(
        &client,
        "broadcast",
        json!({"message": "compiling the parser"}),
    )
    .await?;
    let posted = world
        .message("the broadcast", |m| shows(m, "compiling the parser"))
        .await?;
    ensure_eq!(
        Some(thread_ts.as_str()),
        posted.thread_ts(),
        "the broadcast's thread_ts"
    );
    let _ = client.cancel().await;
    server.stop().await?;
    Ok(())
}

async fn s038(ctx: Ctx) -> CheckResult {
    let (world, server, client, thread_ts) = one_session(&ctx).await?;
    let pending = ask_clearance(&client, "edit main");
    let approval = world
        .approval("the approval message", |_| true, "approve_accept")
        .await?;
    ensure_eq!(
        Some(thread_ts.as_str()),
        approval.thread_ts(),
        "the approval's thread_ts"
    );
    ensure!(
        has_button(&approval, "approve_reject"),
        "the approval has Reject too"
    );
    world.click(&approval, "approve_accept", ALICE)?;
    clearance_answer(&ctx, pending).await?;
    let _ = client.cancel().await;
    server.stop().await?;
    Ok(())
}

async fn s039(ctx: Ctx) -> CheckResult {
    let (world, server, client, thread_ts) = one_session(&ctx).await?;
    let pending = ask_clearance(&client, "edit main");
    let approval = world
        .approval("the approval message", |_| true, "approve_accept")
        .await?;
    let before = world.slack.messages(CHANNEL_X, Some(&thread_ts)).len();
    world.click(&approval, "approve_accept", ALICE)?;
    clearance_answer(&ctx, pending).await?;
    let approval_ts = approval.ts().to_string();
    let expected_thread = thread_ts.clone();
    let response = world
        .message("a response in the thread after the click", |m| {
            m.thread_ts() == Some(expected_thread.as_str())
                && m.ts() != approval_ts
                && m.ts() > approval_ts.as_str()
        })
        .await?;
    ensure!(
        world.slack.messages(CHANNEL_X, Some(&thread_ts)).len() > before,
        "the thread grew"
    );
    ensure!(
        response.channel == CHANNEL_X,
        "the response is in the session's channel"
    );
    let _ = client.cancel().await;
    server.stop().await?;
    Ok(())
}

async fn s040(ctx: Ctx) -> CheckResult {
    let (world, server, client, thread_ts) = one_session(&ctx).await?;
    // The row's trigger is only "Session terminates": no slash command ends an MCP session in
    // every build (the public server's session-stop is ACP mode's), but in each one the session
    // ends when its agent closes the MCP session (the spec's "disconnect", with a Slack notice).
    client
        .cancel()
        .await
        .or_fail("the MCP client closes its session")?;
    let ended = ctx.text("final", SESSION_ENDED);
    let last = world
        .message_as_session_ends(
            &format!("a final message containing {ended:?}"),
            |_| true,
            |m| shows(m, &ended),
        )
        .await?;
    ensure_eq!(
        Some(thread_ts.as_str()),
        last.thread_ts(),
        "the final message's thread_ts"
    );
    server.stop().await?;
    Ok(())
}

async fn s041(ctx: Ctx) -> CheckResult {
    let world = World::new(&ctx).await?;
    let server = world.start(None).await?;
    let a = server.connect("workspace_id=myproj").await?;
    let b = server.connect("workspace_id=myproj").await?;
    // Each row's thread_ts is written once the session's first post is out, a moment after the
    // row itself: wait for it on both, as S036 does.
    let (ra, rb) = (
        world
            .session_when(0, "has its thread_ts", |row| row.thread_ts.is_some())
            .await?,
        world
            .session_when(1, "has its thread_ts", |row| row.thread_ts.is_some())
            .await?,
    );
    let (ta, tb) = (
        ra.thread_ts.clone().unwrap_or_default(),
        rb.thread_ts.clone().unwrap_or_default(),
    );
    ensure!(
        !ta.is_empty() && !tb.is_empty() && ta != tb,
        "two sessions get two threads",
        "{ta:?} and {tb:?}"
    );
    let (pa, pb) = tokio::join!(
        call(&a, "broadcast", json!({"message": "from session A"})),
        call(&b, "broadcast", json!({"message": "from session B"}))
    );
    pa?;
    pb?;
    let ma = world
        .message("A's broadcast", |m| shows(m, "from session A"))
        .await?;
    let mb = world
        .message("B's broadcast", |m| shows(m, "from session B"))
        .await?;
    ensure_eq!(Some(ta.as_str()), ma.thread_ts(), "A's broadcast thread");
    ensure_eq!(Some(tb.as_str()), mb.thread_ts(), "B's broadcast thread");
    let _ = (a.cancel().await, b.cancel().await);
    server.stop().await?;
    Ok(())
}

async fn s042(ctx: Ctx) -> CheckResult {
    let (world, server, client, thread_ts) = one_session(&ctx).await?;
    call(
        &client,
        "broadcast",
        json!({"message": "moved?", "thread_ts": "1234.5678"}),
    )
    .await?;
    call(
        &client,
        "broadcast",
        json!({"message": "after the attempt"}),
    )
    .await?;
    // The later broadcast is posted after the attempt was handled: by then any change the
    // attempt made to the session's thread_ts is in its row.
    let posted = world
        .message("the broadcast after the attempt", |m| {
            shows(m, "after the attempt")
        })
        .await?;
    ensure_eq!(
        Some(thread_ts.clone()),
        world.session(0).await?.thread_ts,
        "the session's thread_ts after the attempt"
    );
    ensure_eq!(
        Some(thread_ts.as_str()),
        posted.thread_ts(),
        "the thread of the broadcast after the attempt"
    );
    let _ = client.cancel().await;
    server.stop().await?;
    Ok(())
}
