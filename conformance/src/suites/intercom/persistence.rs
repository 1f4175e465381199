//! S069–S072: session rows carry their protocol mode; an older database gains the new columns in
//! place; an unauthorized user's command changes nothing.

use crate::Ctx;
use crate::sqlite::{self, Mode, Sqlite};
use crate::{Check, CheckResult, OrFail, ensure, ensure_eq};

use super::harness::{ALICE, BOB, CHANNEL_X, World};

/// The checks of this part.
pub fn checks() -> Vec<Check> {
    vec![
        Check::new(
            "S069",
            "In ACP mode, session-start with a prompt; expects a session row with protocol_mode 'acp'.",
            s069,
        ),
        Check::new(
            "S070",
            "An MCP agent connects; expects a session row with protocol_mode 'mcp' created by the handshake alone.",
            s070,
        ),
        Check::new(
            "S071",
            "Starts the target on a database whose session table lacks protocol_mode, channel_id and thread_ts, with one row; expects the three columns added and the row kept.",
            s071,
        ),
        Check::new(
            "S072",
            "An unauthorized user types session-start and session-stop; expects no reply, no session created or stopped and nothing posted (an authorized command afterwards is answered).",
            s072,
        ),
    ]
}

async fn s069(ctx: Ctx) -> CheckResult {
    super::agents::each_dialect(
        &ctx,
        &[super::agents::Dialect::Intercom],
        |ctx, dialect| async move {
            let world =
                super::agents::AcpWorld::start(&ctx, super::agents::Options::new(dialect)).await?;
            let started = world
                .start_session(CHANNEL_X, "\"build a web server\"")
                .await?;
            ensure_eq!(
                "acp",
                world.row(&started.row.id).await?.protocol_mode,
                "protocol_mode"
            );
            world.server.stop().await?;
            Ok(())
        },
    )
    .await
}

async fn s070(ctx: Ctx) -> CheckResult {
    let world = World::new(&ctx).await?;
    let server = world.start(None).await?;
    ensure!(
        world.sessions().await?.is_empty(),
        "no session before a connection"
    );
    let client = server.connect("workspace_id=myproj").await?;
    let row = world.session(0).await?;
    ensure_eq!("mcp", row.protocol_mode.as_str(), "protocol_mode");
    ensure!(
        matches!(row.status.as_str(), "active" | "created"),
        "the session is live",
        "status {}",
        row.status
    );
    let _ = client.cancel().await;
    server.stop().await?;
    Ok(())
}

async fn s071(ctx: Ctx) -> CheckResult {
    let world = World::new(&ctx).await?;
    if let Some(dir) = world.database.parent() {
        std::fs::create_dir_all(dir).or_error("create the data dir")?;
    }
    {
        let mut db = Sqlite::open(&ctx, &world.database, Mode::Create, 10_000).await?;
        db.execute(
            "CREATE TABLE session (id TEXT PRIMARY KEY, owner_user_id TEXT NOT NULL,
                workspace_root TEXT, status TEXT NOT NULL, prompt TEXT,
                mode TEXT NOT NULL DEFAULT 'remote', created_at TEXT NOT NULL,
                updated_at TEXT NOT NULL, terminated_at TEXT, last_tool TEXT,
                nudge_count INTEGER NOT NULL DEFAULT 0, stall_paused INTEGER NOT NULL DEFAULT 0,
                progress_snapshot TEXT);
             INSERT INTO session (id, owner_user_id, status, prompt, created_at, updated_at)
             VALUES ('old-session-1', 'U0000000002', 'terminated', 'old work',
                     '2026-01-01T00:00:00Z', '2026-01-01T00:00:00Z');",
        )
        .await?
        .or_error("write the old schema")?;
        db.close().await?;
    }
    let server = world.start(None).await?;
    let columns: Vec<String> = world
        .read("SELECT name FROM pragma_table_info('session')", &[])
        .await?
        .or_fail("pragma_table_info")?
        .iter()
        .map(|cells| sqlite::text(cells.first(), "name"))
        .collect::<Result<_, _>>()
        .or_fail("columns")?;
    for column in ["protocol_mode", "channel_id", "thread_ts"] {
        ensure!(
            columns.iter().any(|c| c == column),
            format!("column {column} added"),
            "columns {columns:?}"
        );
    }
    let rows = world
        .read(
            "SELECT prompt, protocol_mode FROM session WHERE id = 'old-session-1'",
            &[],
        )
        .await?
        .or_fail("the old row kept")?;
    let old_row = rows.first().or_fail("the old row kept")?;
    let (prompt, mode) = (
        sqlite::optional_text(old_row.first(), "prompt").or_fail("the old row's prompt")?,
        sqlite::optional_text(old_row.get(1), "protocol_mode")
            .or_fail("the old row's protocol_mode")?,
    );
    ensure_eq!(Some("old work".to_string()), prompt, "the old row's prompt");
    ensure_eq!(
        Some("mcp".to_string()),
        mode,
        "the old row's protocol_mode (the default)"
    );
    server.stop().await?;
    Ok(())
}

async fn s072(ctx: Ctx) -> CheckResult {
    let world = World::new(&ctx).await?;
    let server = world.start(None).await?;
    let client = server.connect("workspace_id=myproj").await?;
    let live = world.session(0).await?;
    let posted_before = world.slack.all_messages().len();
    let ephemerals_before = world.slack.ephemerals().len();
    let start = world
        .slash_command(CHANNEL_X, BOB, "session-start \"build a web server\"")
        .await?;
    let stop = world
        .slash_command(CHANNEL_X, BOB, &format!("session-stop {}", live.id))
        .await?;
    ensure_eq!(
        (None, None),
        (start.clone(), stop.clone()),
        "no reply to an unauthorized user"
    );
    // An authorized command afterwards is answered: the guard, not a dead listener, was silent.
    let reply = world.slash_command(CHANNEL_X, ALICE, "sessions").await?;
    ensure!(reply.is_some(), "an authorized user's command is answered");
    ensure_eq!(
        1,
        world.sessions().await?.len(),
        "sessions after the attempts"
    );
    ensure_eq!(
        "active",
        world.session(0).await?.status,
        "the live session's status"
    );
    ensure_eq!(
        posted_before,
        world.slack.all_messages().len(),
        "messages posted"
    );
    ensure_eq!(
        ephemerals_before + 1,
        world.slack.ephemerals().len(),
        "ephemeral replies (only Alice's)"
    );
    let _ = client.cancel().await;
    server.stop().await?;
    Ok(())
}
