//! S027–S035: the `workspace_id` and legacy `channel_id` query parameters place an MCP session
//! in a channel; duplicate and empty ids are refused at startup; a hot reload changes the
//! mapping for new sessions only.

use serde_json::json;

use crate::{Check, CheckResult, Ctx, ensure, ensure_eq};

use super::harness::{CHANNEL_X, CHANNEL_Y, CHANNEL_Z, World, call, shows};
use crate::vocabulary::capability;

/// The checks of this part.
pub fn checks() -> Vec<Check> {
    vec![
        Check::new(
            "S027",
            "Connects with ?workspace_id=myproj; expects the session row's channel_id to be myproj's channel and its thread root posted there.",
            s027,
        ),
        Check::new(
            "S028",
            "Connects with ?workspace_id=unknown; expects a warning naming workspace_id in the log, a session row with channel_id NULL and nothing posted.",
            s028,
        ),
        Check::new(
            "S029",
            "Connects with only ?channel_id=C0000000002; expects a deprecation warning and the session in that channel (row and root post).",
            s029,
        ),
        Check::new(
            "S030",
            "Connects with ?workspace_id=myproj&channel_id=C0000000002; expects myproj's channel to win and a deprecation warning.",
            s030,
        ),
        Check::new(
            "S031",
            "Connects to /mcp without parameters; expects a session row with channel_id NULL and nothing posted to Slack.",
            s031,
        ),
        Check::new(
            "S032",
            "Starts with two [[workspace]] entries with id myproj; expects exit 1 and \"duplicate workspace id: myproj\".",
            s032,
        ),
        Check::new(
            "S033",
            "Starts with a [[workspace]] entry whose id is empty; expects exit 1 and \"workspace id must not be empty\".",
            s033,
        ),
        Check::new(
            "S034",
            "With a session live in myproj's channel, saves the config with myproj mapped to another channel; expects the reload logged, a new session's broadcast in the new channel and the live one's still in the old.",
            s034,
        ),
        Check::new(
            "S035",
            "With a session live in myproj's channel, saves the config without myproj; expects a new myproj connection's broadcast posted nowhere and the live session's still in the old channel.",
            s035,
        ),
    ]
}

async fn placed(
    ctx: &Ctx,
    query: &str,
    expected: Option<&str>,
    warning: Option<&str>,
) -> CheckResult {
    let world = World::new(ctx).await?;
    let server = world.start(None).await?;
    let client = server.connect(query).await?;
    // A server may fill the row's channel a moment after the handshake: wait for it.
    let row = match expected {
        Some(channel) => world.session_placed(0, channel).await?,
        None => world.session(0).await?,
    };
    ensure_eq!(
        expected.map(str::to_string),
        row.channel_id,
        "the session's channel_id"
    );
    ensure_eq!("mcp", row.protocol_mode.as_str(), "protocol_mode");
    if let Some(warning) = warning {
        server.wait_log(&ctx.text("log", warning)).await?;
    }
    match expected {
        Some(channel) => {
            let root = world
                .message("the session's first post", |m| m.channel == channel)
                .await?;
            ensure_eq!(
                row.thread_ts.as_deref(),
                Some(root.ts()),
                "thread_ts is the root's ts"
            );
        }
        None => {
            let (answer, _) = call(&client, "broadcast", json!({"message": "local only"})).await?;
            ensure!(
                world.slack.all_messages().is_empty(),
                "a session without a channel posts nothing",
                "messages {:?} (broadcast answered {answer})",
                world
                    .slack
                    .all_messages()
                    .iter()
                    .map(|m| m.text().to_string())
                    .collect::<Vec<_>>()
            );
        }
    }
    let _ = client.cancel().await;
    server.stop().await?;
    Ok(())
}

async fn s027(ctx: Ctx) -> CheckResult {
    placed(&ctx, "workspace_id=myproj", Some(CHANNEL_X), None).await
}

async fn s028(ctx: Ctx) -> CheckResult {
    placed(
        &ctx,
        "workspace_id=unknown",
        None,
        Some("workspace_id not found"),
    )
    .await
}

async fn s029(ctx: Ctx) -> CheckResult {
    placed(
        &ctx,
        &format!("channel_id={CHANNEL_Y}"),
        Some(CHANNEL_Y),
        Some("deprecat"),
    )
    .await
}

async fn s030(ctx: Ctx) -> CheckResult {
    placed(
        &ctx,
        &format!("workspace_id=myproj&channel_id={CHANNEL_Y}"),
        Some(CHANNEL_X),
        Some("deprecat"),
    )
    .await
}

async fn s031(ctx: Ctx) -> CheckResult {
    placed(&ctx, "", None, None).await
}

async fn refused(ctx: &Ctx, workspaces: &[(&str, &str)], default_text: &str) -> CheckResult {
    let world = World::new(ctx).await?;
    world.write_config(workspaces, "")?;
    let exit = world.run_to_exit(None).await?;
    let expected = ctx.text("stderr", default_text);
    ensure_eq!(
        Some(1),
        exit.code,
        "exit code (stderr: {})",
        exit.stderr.trim()
    );
    ensure!(
        exit.stderr.contains(&expected),
        format!("stderr says {expected:?}"),
        "stderr {:?}",
        exit.stderr
    );
    Ok(())
}

async fn s032(ctx: Ctx) -> CheckResult {
    refused(
        &ctx,
        &[("myproj", CHANNEL_X), ("myproj", CHANNEL_Y)],
        "duplicate workspace id: myproj",
    )
    .await
}

async fn s033(ctx: Ctx) -> CheckResult {
    refused(&ctx, &[("", CHANNEL_X)], "workspace id must not be empty").await
}

async fn reload(
    ctx: &Ctx,
    new_mapping: &[(&str, &str)],
    expected_new: Option<&str>,
) -> CheckResult {
    ctx.require(capability::HOT_RELOAD)?;
    let world = World::new(ctx).await?;
    let server = world.start(None).await?;
    // The rows speak of the channels sessions use, not of what a server stores: each session's
    // channel is where its broadcasts land.
    let live = server.connect("workspace_id=myproj").await?;
    call(&live, "broadcast", json!({"message": "before the reload"})).await?;
    let before = world
        .message("the live session's broadcast before the reload", |m| {
            shows(m, "before the reload")
        })
        .await?;
    ensure_eq!(
        CHANNEL_X,
        before.channel.as_str(),
        "the live session's channel"
    );
    world.write_config(new_mapping, "")?;
    server.wait_log(&ctx.text("log", "reload")).await?;
    let fresh = server.connect("workspace_id=myproj").await?;
    let (fresh_answer, _) = call(
        &fresh,
        "broadcast",
        json!({"message": "from the new session"}),
    )
    .await?;
    if let Some(channel) = expected_new {
        let posted = world
            .message("the new session's broadcast", |m| {
                shows(m, "from the new session")
            })
            .await?;
        ensure_eq!(
            channel,
            posted.channel.as_str(),
            "a new session's channel after the reload"
        );
    }
    call(&live, "broadcast", json!({"message": "still here"})).await?;
    let posted = world
        .message("the live session's broadcast", |m| shows(m, "still here"))
        .await?;
    ensure_eq!(
        CHANNEL_X,
        posted.channel.as_str(),
        "the live session keeps its channel"
    );
    if expected_new.is_none() {
        // The new session's broadcast call had returned before the live one was made.
        let stray: Vec<String> = world
            .slack
            .all_messages()
            .iter()
            .filter(|m| shows(m, "from the new session"))
            .map(|m| format!("{}: {}", m.channel, m.text()))
            .collect();
        ensure!(
            stray.is_empty(),
            "a new session for a removed mapping gets no channel: its broadcast is posted nowhere",
            "{stray:?} (broadcast answered {fresh_answer})"
        );
    }
    let _ = (live.cancel().await, fresh.cancel().await);
    server.stop().await?;
    Ok(())
}

async fn s034(ctx: Ctx) -> CheckResult {
    reload(
        &ctx,
        &[("myproj", CHANNEL_Z), ("other", CHANNEL_Y)],
        Some(CHANNEL_Z),
    )
    .await
}

async fn s035(ctx: Ctx) -> CheckResult {
    reload(&ctx, &[("other", CHANNEL_Y)], None).await
}
