//! S043–S048: clicks and commands reach the session of their channel and thread; a bare
//! command picks the channel's most recently active session; a channel without one says so (in
//! ACP mode, where `session-stop` exists).

use serde_json::{Value, json};
use ski_mocks::slack::Message;

use crate::{Check, CheckError, CheckResult, ensure, ensure_eq};

use super::agents::{AcpWorld, Dialect, Options, each_dialect};
use super::harness::{
    ALICE, CHANNEL_X, CHANNEL_Y, CHANNEL_Z, SessionRow, World, ask_clearance, call,
    clearance_answer, shows,
};
use crate::Ctx;
use crate::vocabulary::capability;

const BOTH: &[Dialect] = &[Dialect::Intercom, Dialect::Acp];

/// The checks of this part.
pub fn checks() -> Vec<Check> {
    vec![
        Check::new(
            "S043",
            "Sessions A (channel X) and B (channel Y) both wait in check_clearance; approving in X (Accept, or the profile's `approval = \"reply\"`) returns A's call while B's keeps waiting, and rejecting B's then returns B's.",
            s043,
        ),
        Check::new(
            "S044",
            "Sessions A (X) and B (Y); the operator steers in Y; expects B's next ping to carry the message and A's to carry nothing.",
            s044,
        ),
        Check::new(
            "S045",
            "In ACP mode (where session-stop is a command of every build), with a session in channel X and none in Z, session-stop in Z; expects the reply \"No active session in this channel\" (override reply) and X's session still active.",
            s045,
        ),
        Check::new(
            "S046",
            "Sessions A and B in the same channel both ask (both request ids may be equal); the click in A's thread returns A's call only, B's click then returns B's.",
            s046,
        ),
        Check::new(
            "S047",
            "Sessions A (older) and B (newer) in channel X; a bare status names B; after A pings, status names A.",
            s047,
        ),
        Check::new(
            "S048",
            "Sessions in X, Y and Z ask at once; approving X, rejecting Y and approving Z (in reverse order) returns each call its own decision.",
            s048,
        ),
    ]
}

/// The two messages of a two-title [`World::approvals_showing`].
fn two(messages: Vec<Message>) -> Result<[Message; 2], CheckError> {
    <[Message; 2]>::try_from(messages)
        .map_err(|_| CheckError::harness("approvals_showing answers one message per title"))
}

fn status(answer: &Value) -> String {
    answer["status"].as_str().unwrap_or_default().to_string()
}

async fn s043(ctx: Ctx) -> CheckResult {
    let world = World::new(&ctx).await?;
    let server = world.start(None).await?;
    let a = server.connect("workspace_id=myproj").await?;
    let b = server.connect("workspace_id=other").await?;
    let pa = ask_clearance(&a, "for A");
    let pb = ask_clearance(&b, "for B");
    // Both asked at once: found by their titles wherever they landed, then their channels judged.
    let [ma, mb] = two(world.approvals_showing(&["for A", "for B"]).await?)?;
    ensure_eq!(
        CHANNEL_X,
        ma.channel.as_str(),
        "the channel of A's approval"
    );
    ensure_eq!(
        CHANNEL_Y,
        mb.channel.as_str(),
        "the channel of B's approval"
    );
    world.approve(&ma)?;
    ensure_eq!(
        "approved",
        status(&clearance_answer(&ctx, pa).await?),
        "A's decision"
    );
    ensure!(!pb.is_finished(), "B still waits after the click in X");
    world.reject(&mb, "not now").await?;
    ensure_eq!(
        "rejected",
        status(&clearance_answer(&ctx, pb).await?),
        "B's decision"
    );
    let _ = (a.cancel().await, b.cancel().await);
    server.stop().await?;
    Ok(())
}

async fn s044(ctx: Ctx) -> CheckResult {
    let world = World::new(&ctx).await?;
    let server = world.start(None).await?;
    let a = server.connect("workspace_id=myproj").await?;
    let b = server.connect("workspace_id=other").await?;
    // The row's Given is session B in channel Y: a server may make a session a moment after
    // its MCP handshake, so the steer waits for B's row.
    world.session(1).await?;
    world
        .slash_command(CHANNEL_Y, ALICE, "steer use the new parser")
        .await?;
    let (answer_a, _) = call(&a, "ping", json!({"status_message": "working"})).await?;
    let (answer_b, _) = call(&b, "ping", json!({"status_message": "working"})).await?;
    ensure!(
        answer_b.to_string().contains("use the new parser"),
        "B's ping carries the steering message",
        "B's ping answered {answer_b}"
    );
    ensure!(
        !answer_a.to_string().contains("use the new parser"),
        "A's ping carries nothing for B",
        "A's ping answered {answer_a}"
    );
    let _ = (a.cancel().await, b.cancel().await);
    server.stop().await?;
    Ok(())
}

async fn s045(ctx: Ctx) -> CheckResult {
    // session-stop is an ACP-mode command (the public server has none in MCP mode), so the row is
    // judged where a build offers it.
    each_dialect(&ctx, BOTH, |ctx, dialect| async move {
        let world = AcpWorld::start(&ctx, Options::new(dialect)).await?;
        let started = world.start_session(CHANNEL_X, "hello there").await?;
        let reply = world.slash(CHANNEL_Z, "session-stop").await?;
        let expected = ctx.text("reply", "No active session in this channel");
        ensure!(
            reply.to_lowercase().contains(&expected.to_lowercase()),
            format!("the reply says {expected:?}"),
            "reply {reply:?}"
        );
        world.ensure_status(&started.row.id, "active").await?;
        world.server.stop().await?;
        Ok(())
    })
    .await
}

async fn s046(ctx: Ctx) -> CheckResult {
    let world = World::new(&ctx).await?;
    let server = world.start(None).await?;
    let a = server.connect("workspace_id=myproj").await?;
    let b = server.connect("workspace_id=myproj").await?;
    let has_thread = |row: &SessionRow| row.thread_ts.is_some();
    let (ta, tb) = (
        world
            .session_when(0, "has its thread_ts", has_thread)
            .await?
            .thread_ts
            .unwrap_or_default(),
        world
            .session_when(1, "has its thread_ts", has_thread)
            .await?
            .thread_ts
            .unwrap_or_default(),
    );
    let pa = ask_clearance(&a, "for A");
    let ma = world
        .approval("A's approval", |m| shows(m, "for A"), "approve_accept")
        .await?;
    ensure_eq!(
        Some(ta.as_str()),
        ma.thread_ts(),
        "the thread of A's approval"
    );
    let pb = ask_clearance(&b, "for B");
    let mb = world
        .approval("B's approval", |m| shows(m, "for B"), "approve_accept")
        .await?;
    ensure_eq!(
        Some(tb.as_str()),
        mb.thread_ts(),
        "the thread of B's approval"
    );
    world.click(&ma, "approve_accept", ALICE)?;
    ensure_eq!(
        "approved",
        status(&clearance_answer(&ctx, pa).await?),
        "A's decision"
    );
    ensure!(
        !pb.is_finished(),
        "B still waits after the click in A's thread"
    );
    world.click(&mb, "approve_accept", ALICE)?;
    ensure_eq!(
        "approved",
        status(&clearance_answer(&ctx, pb).await?),
        "B's decision"
    );
    let _ = (a.cancel().await, b.cancel().await);
    server.stop().await?;
    Ok(())
}

async fn s047(ctx: Ctx) -> CheckResult {
    ctx.require(capability::STATUS_COMMAND)?;
    let world = World::new(&ctx).await?;
    let server = world.start(None).await?;
    let a = server.connect("workspace_id=myproj").await?;
    let b = server.connect("workspace_id=myproj").await?;
    let (ra, rb) = (world.session(0).await?, world.session(1).await?);
    let reply = world
        .slash_command(CHANNEL_X, ALICE, "status")
        .await?
        .unwrap_or_default();
    ensure!(
        reply.contains(rb.short()) && !reply.contains(ra.short()),
        "status names the newer session B",
        "reply {reply:?}"
    );
    call(&a, "ping", json!({"status_message": "back"})).await?;
    let reply = world
        .slash_command(CHANNEL_X, ALICE, "status")
        .await?
        .unwrap_or_default();
    ensure!(
        reply.contains(ra.short()) && !reply.contains(rb.short()),
        "after A's ping, status names A",
        "reply {reply:?}"
    );
    let _ = (a.cancel().await, b.cancel().await);
    server.stop().await?;
    Ok(())
}

async fn s048(ctx: Ctx) -> CheckResult {
    let world = World::new(&ctx).await?;
    let server = world.start(None).await?;
    let x = server.connect("workspace_id=myproj").await?;
    let y = server.connect("workspace_id=other").await?;
    let z = server.connect("workspace_id=third").await?;
    let (px, py, pz) = (
        ask_clearance(&x, "in X"),
        ask_clearance(&y, "in Y"),
        ask_clearance(&z, "in Z"),
    );
    // Each approval is found by its title wherever it landed; its channel is then judged.
    // All three asked at once: found by their titles wherever they landed, then their channels
    // judged.
    let approvals = world.approvals_showing(&["in X", "in Y", "in Z"]).await?;
    for (approval, (channel, title)) in
        approvals
            .iter()
            .zip([(CHANNEL_X, "X"), (CHANNEL_Y, "Y"), (CHANNEL_Z, "Z")])
    {
        ensure_eq!(
            channel,
            approval.channel.as_str(),
            "the channel of the approval in {title}"
        );
    }
    let [mx, my, mz] = <[Message; 3]>::try_from(approvals)
        .map_err(|_| CheckError::harness("approvals_showing answers one message per title"))?;
    world.approve(&mz)?;
    world.reject(&my, "not in Y").await?;
    world.approve(&mx)?;
    let (ax, ay, az) = (
        clearance_answer(&ctx, px).await?,
        clearance_answer(&ctx, py).await?,
        clearance_answer(&ctx, pz).await?,
    );
    ensure_eq!(
        vec!["approved", "rejected", "approved"],
        vec![status(&ax), status(&ay), status(&az)],
        "the decisions in X, Y, Z"
    );
    ensure_eq!(
        "not in Y",
        ay["reason"].as_str().unwrap_or_default(),
        "Y's reason"
    );
    let _ = (x.cancel().await, y.cancel().await, z.cancel().await);
    server.stop().await?;
    Ok(())
}
