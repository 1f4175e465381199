//! S008, S009: an MCP agent's `check_clearance` blocks until the operator clicks Accept or
//! Reject (with a reason through the modal), and returns that decision.

use crate::{Check, CheckResult, Ctx, ensure, ensure_eq};

use super::harness::{ALICE, CHANNEL_X, World, ask_clearance, clearance_answer, shows};

/// The checks of this part.
pub fn checks() -> Vec<Check> {
    vec![
        Check::new(
            "S008",
            "An MCP agent in workspace myproj calls check_clearance; expects an approval message with Accept in the channel, the call still blocked, and after Alice clicks Accept the call returning status approved; a second click changes nothing.",
            s008,
        ),
        Check::new(
            "S009",
            "As S008, then Reject and the modal submitted with \"wrong file\"; expects status rejected with reason \"wrong file\".",
            s009,
        ),
    ]
}

async fn s008(ctx: Ctx) -> CheckResult {
    let world = World::new(&ctx).await?;
    let server = world.start(None).await?;
    let client = server.connect("workspace_id=myproj").await?;
    let pending = ask_clearance(&client, "edit main");
    let approval = world
        .approval(
            "an approval message with Accept",
            |m| m.channel == CHANNEL_X,
            "approve_accept",
        )
        .await?;
    ensure!(
        !pending.is_finished(),
        "check_clearance blocks until the operator decides"
    );
    world.click(&approval, "approve_accept", ALICE)?;
    let answer = clearance_answer(&ctx, pending).await?;
    ensure_eq!(
        "approved",
        answer["status"].as_str().unwrap_or_default(),
        "the decision ({answer})"
    );
    // The pending entry is gone: a second request gets its own decision.
    let again = ask_clearance(&client, "second");
    let second = world
        .approval(
            "a second approval message",
            |m| shows(m, "second"),
            "approve_reject",
        )
        .await?;
    world.reject_with_reason(&second, "no").await?;
    let answer = clearance_answer(&ctx, again).await?;
    ensure_eq!(
        "rejected",
        answer["status"].as_str().unwrap_or_default(),
        "the second decision"
    );
    let _ = client.cancel().await;
    server.stop().await?;
    Ok(())
}

async fn s009(ctx: Ctx) -> CheckResult {
    let world = World::new(&ctx).await?;
    let server = world.start(None).await?;
    let client = server.connect("workspace_id=myproj").await?;
    let pending = ask_clearance(&client, "edit main");
    let approval = world
        .approval(
            "an approval message with Reject",
            |m| m.channel == CHANNEL_X,
            "approve_reject",
        )
        .await?;
    world.reject_with_reason(&approval, "wrong file").await?;
    let answer = clearance_answer(&ctx, pending).await?;
    ensure_eq!(
        "rejected",
        answer["status"].as_str().unwrap_or_default(),
        "the decision ({answer})"
    );
    ensure_eq!(
        "wrong file",
        answer["reason"].as_str().unwrap_or_default(),
        "the reason ({answer})"
    );
    let _ = client.cancel().await;
    server.stop().await?;
    Ok(())
}
