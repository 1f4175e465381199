//! S049–S058: how the target reads a spawned agent's stdout (single, batched and split lines,
//! malformed JSON, unknown methods, missing fields, end of stream, oversize and blank lines) and
//! the exact line it writes back. The agent writes what the check tells it through its control
//! socket; what the target made of it is seen in the thread, the log and the session row.

use serde_json::{Value, json};

use crate::{Check, CheckResult, Ctx, ensure, ensure_eq};

use super::agents::{AcpWorld, Dialect, Options, Started, each_dialect};
use super::harness::{ALICE, CHANNEL_X, has_button};
use super::lifecycle::approval_message;
use super::profile::Knobs;

const BOTH: &[Dialect] = &[Dialect::Intercom, Dialect::Acp];
const STREAM: &[Dialect] = &[Dialect::Intercom];

/// The checks of this part.
pub fn checks() -> Vec<Check> {
    vec![
        Check::new(
            "S049",
            "The agent writes one status/update line \"hello\"; expects \"hello\" as a reply in the thread.",
            s049,
        ),
        Check::new(
            "S050",
            "The agent writes two status lines in one write; expects each status once in the thread, in order (posted apart or gathered into one post).",
            s050,
        ),
        Check::new(
            "S051",
            "The agent writes a status line in two pieces (flushed apart); expects the status \"hi\" once in the thread and no parse warning.",
            s051,
        ),
        Check::new(
            "S052",
            "The agent writes {not valid json} then a status; expects a warning about malformed JSON and the status still posted.",
            s052,
        ),
        Check::new(
            "S053",
            "The agent writes an unknown method then a status; expects \"unknown method: unknown/method\" logged and the status still posted.",
            s053,
        ),
        Check::new(
            "S054",
            "The agent writes clearance/request without file_path, then a status; expects \"missing required field\" logged, no approval, and the status posted.",
            s054,
        ),
        Check::new(
            "S055",
            "The agent closes its stdout and keeps running; expects the session ended as interrupted with \"stream closed\" (whether the agent is ended is INT-SKI-03).",
            s055,
        ),
        Check::new(
            "S056",
            "Approves req-001; expects the agent to read a line carrying {\"method\":\"clearance/response\",\"id\":\"req-001\",\"params\":{\"status\":\"approved\"}} (members of the build's own, such as FR-040's seq, allowed).",
            s056,
        ),
        Check::new(
            "S057",
            "With a 4096-byte line limit (or the build's own fixed limit, settings.max_line_length) the agent writes a line 1904 bytes over it (6000 bytes); expects \"line exceeded max length\" logged and the server still running, exiting 0 on SIGTERM (the connection may close; that the session goes on is INT-SKI-11).",
            s057,
        ),
        Check::new(
            "S058",
            "The agent writes a blank line, then a status; expects the status posted and no warning for the blank line.",
            s058,
        ),
    ]
}

/// How many bytes S057's line is longer than the limit.
const OVER_THE_LIMIT: usize = 1904;

/// A clearance request without its required `file_path` (S054, INT-SKI-09).
pub const CLEARANCE_WITHOUT_FILE_PATH: &str =
    r#"{"method":"clearance/request","id":"req-009","params":{"title":"x"}}"#;

/// A `status/update` line with `message`.
pub fn status_line(message: &str) -> String {
    json!({"method": "status/update", "params": {"message": message}}).to_string()
}

/// Starts a world and a session; the agent's greeting or first turn is awaited so later lines
/// are the only news.
pub async fn session(
    ctx: &Ctx,
    options: Options,
) -> Result<(AcpWorld, Started), crate::CheckError> {
    let dialect = options.dialect;
    let world = AcpWorld::start(ctx, options).await?;
    let started = world.start_session(CHANNEL_X, "stream test").await?;
    let settled = match dialect {
        Dialect::Intercom | Dialect::IntercomJsonrpc => "received: stream test",
        Dialect::Acp => "stream test",
    };
    world.reply_with(&started.root, settled).await?;
    Ok((world, started))
}

async fn s049(ctx: Ctx) -> CheckResult {
    each_dialect(&ctx, STREAM, |ctx, dialect| async move {
        let (world, started) = session(&ctx, Options::new(dialect)).await?;
        started.agent.send_line(&status_line("hello")).await?;
        let reply = world.reply_with(&started.root, "hello").await?;
        ensure_eq!(
            Some(started.root.ts()),
            reply.thread_ts(),
            "the status's thread"
        );
        world.server.stop().await?;
        Ok(())
    })
    .await
}

/// Whether `value` has every member of `wanted` with the same value (objects recursively; any
/// other value exactly).
fn includes(value: &Value, wanted: &Value) -> bool {
    match (value, wanted) {
        (Value::Object(have), Value::Object(want)) => want
            .iter()
            .all(|(key, inner)| have.get(key).is_some_and(|got| includes(got, inner))),
        _ => value == wanted,
    }
}

/// The text of a thread's replies in the order they were posted, one per line.
fn thread_text(world: &AcpWorld, root: &ski_mocks::slack::Message) -> String {
    world
        .replies(root)
        .iter()
        .map(|m| m.text().to_string())
        .collect::<Vec<_>>()
        .join("\n")
}

async fn s050(ctx: Ctx) -> CheckResult {
    each_dialect(&ctx, STREAM, |ctx, dialect| async move {
        let (world, started) = session(&ctx, Options::new(dialect)).await?;
        let two = format!(
            "{}\n{}",
            status_line("first batched"),
            status_line("second batched")
        );
        started.agent.send_line(&two).await?;
        world.reply_with(&started.root, "second batched").await?;
        // The matrix counts events, not posts: a server may post each status alone or gather
        // statuses that come together into one post, so the thread's text in order must show
        // each status once, the first before the second.
        let thread = thread_text(&world, &started.root);
        ensure_eq!(
            (1, 1),
            (
                thread.matches("first batched").count(),
                thread.matches("second batched").count()
            ),
            "each batched status in the thread once: {thread:?}"
        );
        ensure!(
            thread.find("first batched") < thread.find("second batched"),
            "the batched statuses in their order",
            "{thread:?}"
        );
        world.server.stop().await?;
        Ok(())
    })
    .await
}

async fn s051(ctx: Ctx) -> CheckResult {
    each_dialect(&ctx, STREAM, |ctx, dialect| async move {
        let (world, started) = session(&ctx, Options::new(dialect)).await?;
        // The control reply comes once the piece is written and flushed.
        started
            .agent
            .run(json!([{ "raw": "{\"method\":\"st", "newline": false }]))
            .await?;
        started
            .agent
            .run(json!([{ "raw": "atus/update\",\"params\":{\"message\":\"hi\"}}" }]))
            .await?;
        started
            .agent
            .send_line(&status_line("after the split"))
            .await?;
        world.reply_with(&started.root, "after the split").await?;
        // One status "hi" in the thread, posted alone or gathered with the marker that follows.
        let thread = thread_text(&world, &started.root).replace("after the split", "");
        ensure_eq!(
            1,
            thread.matches("hi").count(),
            "statuses \"hi\" in the thread: {thread:?}"
        );
        ensure!(
            !world
                .server
                .log()
                .iter()
                .any(|l| l.to_lowercase().contains("malformed")),
            "no malformed-JSON warning for a split line"
        );
        world.server.stop().await?;
        Ok(())
    })
    .await
}

async fn s052(ctx: Ctx) -> CheckResult {
    each_dialect(&ctx, BOTH, |ctx, dialect| async move {
        let (world, started) = session(&ctx, Options::new(dialect)).await?;
        started.agent.send_line("{not valid json}").await?;
        let line = world
            .server
            .wait_log(&ctx.text("log", "received malformed JSON"))
            .await?;
        ensure!(
            line.contains("WARN") || line.to_lowercase().contains("warn"),
            "the malformed line is logged as a warning",
            "{line}"
        );
        started
            .agent
            .send_line(&status_line("after malformed"))
            .await?;
        world.reply_with(&started.root, "after malformed").await?;
        world.ensure_status(&started.row.id, "active").await?;
        world.server.stop().await?;
        Ok(())
    })
    .await
}

async fn s053(ctx: Ctx) -> CheckResult {
    each_dialect(&ctx, STREAM, |ctx, dialect| async move {
        let (world, started) = session(&ctx, Options::new(dialect)).await?;
        started
            .agent
            .send_line(r#"{"method":"unknown/method","params":{}}"#)
            .await?;
        world
            .server
            .wait_log(&ctx.text("log", "unknown method: unknown/method"))
            .await?;
        started
            .agent
            .send_line(&status_line("after unknown"))
            .await?;
        world.reply_with(&started.root, "after unknown").await?;
        world.server.stop().await?;
        Ok(())
    })
    .await
}

async fn s054(ctx: Ctx) -> CheckResult {
    each_dialect(&ctx, STREAM, |ctx, dialect| async move {
        let (world, started) = session(&ctx, Options::new(dialect)).await?;
        started.agent.send_line(CLEARANCE_WITHOUT_FILE_PATH).await?;
        world
            .server
            .wait_log(&ctx.text("log", "missing required field"))
            .await?;
        started
            .agent
            .send_line(&status_line("after missing"))
            .await?;
        world.reply_with(&started.root, "after missing").await?;
        let approvals: Vec<String> = world
            .replies(&started.root)
            .iter()
            .filter(|m| has_button(m, "approve_accept"))
            .map(|m| m.text().to_string())
            .collect();
        ensure!(
            approvals.is_empty(),
            "a clearance/request without file_path is skipped: no approval in the thread",
            "{approvals:?}"
        );
        world.server.stop().await?;
        Ok(())
    })
    .await
}

async fn s055(ctx: Ctx) -> CheckResult {
    each_dialect(&ctx, BOTH, |ctx, dialect| async move {
        let (world, started) = session(&ctx, Options::new(dialect)).await?;
        started.agent.run(json!([{ "close_stdout": true }])).await?;
        world
            .final_reply(
                &started.root,
                &started.row.id,
                &ctx.text("final", "stream closed"),
            )
            .await?;
        world.ensure_status(&started.row.id, "interrupted").await?;
        world.server.stop().await?;
        Ok(())
    })
    .await
}

async fn s056(ctx: Ctx) -> CheckResult {
    each_dialect(&ctx, STREAM, |ctx, dialect| async move {
        let world = AcpWorld::start(&ctx, Options::new(dialect)).await?;
        let started = world.start_session_asking_clearance(CHANNEL_X).await?;
        let message = approval_message(&world, &started).await?;
        world.world.click(&message, "approve_accept", ALICE)?;
        started.agent.wait_method("clearance/response", 1).await?;
        let line = started
            .agent
            .received()?
            .into_iter()
            .find(|l| l.contains("clearance/response"))
            .unwrap_or_default();
        // The row's line, member for member; a build may add members of its own (the spec's
        // FR-040 numbers every outbound message with `seq`) and order them as it likes.
        let expected = json!({"method": "clearance/response", "id": "req-001", "params": {"status": "approved"}});
        let read: Value = serde_json::from_str(&line).unwrap_or(Value::Null);
        ensure!(
            includes(&read, &expected),
            format!("the line the agent read carries {expected}"),
            "{line:?}"
        );
        world.server.stop().await?;
        Ok(())
    })
    .await
}

async fn s057(ctx: Ctx) -> CheckResult {
    each_dialect(&ctx, BOTH, |ctx, dialect| async move {
        let (world, _started) = oversize_line(&ctx, dialect).await?;
        // "connection may close": the session may end, the server handles the error and goes on.
        ensure_eq!(
            Some(0),
            world.server.stop().await?,
            "the server's exit code on SIGTERM after the oversize line"
        );
        Ok(())
    })
    .await
}

/// A session whose agent wrote a line `OVER_THE_LIMIT` bytes over the line limit (4096, or the
/// build's own fixed limit, settings.max_line_length), once the target logged it (S057,
/// INT-SKI-11).
pub async fn oversize_line(
    ctx: &Ctx,
    dialect: Dialect,
) -> Result<(AcpWorld, Started), crate::CheckError> {
    // The harness sets the limit unless the build has a fixed one of its own.
    let limit = Knobs::read(ctx)?.max_line_length.unwrap_or(4096);
    let mut options = Options::new(dialect);
    options.max_line_length = limit;
    let (world, started) = session(ctx, options).await?;
    started
        .agent
        .run(json!([{ "oversize": limit + OVER_THE_LIMIT }]))
        .await?;
    world
        .server
        .wait_log(&ctx.text("log", "line exceeded max length"))
        .await?;
    Ok((world, started))
}

async fn s058(ctx: Ctx) -> CheckResult {
    each_dialect(&ctx, BOTH, |ctx, dialect| async move {
        let (world, started) = session(&ctx, Options::new(dialect)).await?;
        let before = world.server.log().len();
        started.agent.send_line("").await?;
        started.agent.send_line(&status_line("after blank")).await?;
        world.reply_with(&started.root, "after blank").await?;
        let warnings: Vec<String> = world.server.log()[before..]
            .iter()
            .filter(|l| l.contains("WARN") || l.contains("ERROR"))
            .cloned()
            .collect();
        ensure!(
            warnings.is_empty(),
            "a blank line is skipped silently",
            "{warnings:?}"
        );
        world.server.stop().await?;
        Ok(())
    })
    .await
}
