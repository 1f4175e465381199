//! Cross-cutting scenarios (AOF-X-01 to AOF-X-05): idempotent replays of completion reports and
//! handoff requests, a router that survives a failing handler, forbidden transitions skipped, and
//! missing summary files.

use std::os::unix::fs::MetadataExt;
use std::path::Path;

use serde_json::{Value, json};
use ski::transport::child::Child;

use super::adapter::Adapter;
use super::delivery;
use super::disk;
use super::events::Events;
use super::expect;
use super::fixture::{self, TaskSpec};
use super::message::{self, LATER, NOW, TASK_1, TASK_2, TASK_3};
use crate::{Check, CheckError, CheckResult, Ctx, Failure, OrFail, ensure, ensure_eq};

/// The checks of this module.
pub fn checks() -> Vec<Check> {
    vec![
        Check::new(
            "AOF-X-01",
            "Completes an in-progress task with outcome partial (it moves to review), overwrites \
             run_result.json on disk with {}, and routes the same report again: run_result.json \
             must hold the first data again, no second transition may happen, and the replay must \
             log protocol.message.received and task.completed again.",
            aof_x_01,
        ),
        Check::new(
            "AOF-X-02",
            "Delegates a child once, overwrites handoff.json and handoff.md on disk, and routes the \
             same handoff.request again: both files must hold the first content again, each \
             replaced by a new file (an atomic rename), the child's delegationDepth must stay 1 and \
             delegation.requested must be logged again.",
            aof_x_02,
        ),
        Check::new(
            "AOF-X-03",
            "Turns the run directory of one task into a plain file, starts one `route --ndjson` \
             process and writes to it, one line at a time and each after the previous report, a \
             completion.report for that task, a status.update and a completion.report for two \
             others: the same process must report the first failed (protocol.message.error \
             logged), then handle both later messages (Work Log entry, task in review), and exit \
             0 at the end of its input; the failing message alone must exit 5 with a failed report.",
            aof_x_03,
        ),
        Check::new(
            "AOF-X-04",
            "Routes completion.report outcome partial for a task in done; expects no \
             task.transitioned, the task still in tasks/done/ with its lastTransitionAt unchanged.",
            aof_x_04,
        ),
        Check::new(
            "AOF-X-05",
            "Routes a completion.report whose summaryRef outputs/summary.md does not exist; expects \
             the task moved to review and protocol.message.warning with reason \
             summary_file_not_found; with the file present in the task's outputs/ no warning.",
            aof_x_05,
        ),
    ]
}

async fn aof_x_01(ctx: Ctx) -> CheckResult {
    let adapter = Adapter::new(&ctx)?;
    fixture::task(&adapter, TASK_1, "in-progress").await?;
    let report = message::completion_report(TASK_1, "partial");
    delivery::route(&adapter, &report, NOW, "handled").await?;
    disk::ensure_status(adapter.data_dir(), TASK_1, "review")?;
    let first = expect::run_result_on_disk(&adapter, TASK_1).await?;
    let path = expect::run_dir(&adapter, TASK_1)
        .await?
        .join("run_result.json");
    std::fs::write(&path, "{}").or_error(format!("overwriting {}", path.display()))?;

    let replay = delivery::route(&adapter, &report, LATER, "handled").await?;
    let second = expect::run_result_on_disk(&adapter, TASK_1).await?;
    ensure_eq!(first, second, "run_result.json after the duplicate report");
    replay.events.expect_transitions(TASK_1, &[])?;
    disk::ensure_status(adapter.data_dir(), TASK_1, "review")?;
    replay.events.expect(
        "protocol.message.received",
        json!({"type": "completion.report"}),
    )?;
    replay
        .events
        .expect("task.completed", json!({"outcome": "partial"}))?;
    Ok(())
}

/// The content and inode of a file.
fn content_and_inode(path: &Path) -> Result<(Vec<u8>, u64), CheckError> {
    let content = std::fs::read(path).or_error(format!("reading {}", path.display()))?;
    let inode = std::fs::metadata(path)
        .or_error(format!("reading {}", path.display()))?
        .ino();
    Ok((content, inode))
}

async fn aof_x_02(ctx: Ctx) -> CheckResult {
    let adapter = Adapter::new(&ctx)?;
    TaskSpec::new(TASK_1, "in-progress")
        .metadata(json!({"delegationDepth": 0}))
        .create(&adapter)
        .await?;
    fixture::task(&adapter, TASK_2, "ready").await?;
    let request = message::envelope(
        "handoff.request",
        TASK_2,
        message::handoff_full(TASK_2, TASK_1),
    );
    delivery::route(&adapter, &request, NOW, "handled").await?;
    let inputs = disk::task(adapter.data_dir(), TASK_2)?
        .companion()
        .join("inputs");
    let mut originals = Vec::new();
    for name in ["handoff.json", "handoff.md"] {
        let path = inputs.join(name);
        let (content, _) = content_and_inode(&path).map_err(|_| {
            CheckError::from(
                Failure::new(
                    format!("{name} is written"),
                    format!("{} after the first request", path.display()),
                )
                .actual("no such file"),
            )
        })?;
        std::fs::write(&path, "overwritten by the check")
            .or_error(format!("overwriting {}", path.display()))?;
        let (_, inode) = content_and_inode(&path)?;
        originals.push((name, path, content, inode));
    }

    let replay = delivery::route(&adapter, &request, LATER, "handled").await?;
    for (name, path, content, inode) in originals {
        let (now_content, now_inode) = content_and_inode(&path)?;
        ensure!(
            now_content == content,
            format!("{name} is written again with the same data"),
            "{name} holds {:?}",
            String::from_utf8_lossy(&now_content)
        );
        ensure!(
            now_inode != inode,
            format!("{name} is replaced atomically (a new file renamed over the old one)"),
            "{name} was rewritten in place (inode {inode} kept)"
        );
    }
    let child = disk::task(adapter.data_dir(), TASK_2)?;
    ensure_eq!(
        Some(&json!(1)),
        child.field("metadata.delegationDepth"),
        "the child's delegationDepth after the duplicate request"
    );
    replay
        .events
        .expect("delegation.requested", json!({"parentTaskId": TASK_1}))?;
    Ok(())
}

/// The failure of a `route --ndjson` process that stopped before it handled `what`.
fn stopped(router: &Child, what: &str, actual: String) -> CheckError {
    Failure::new(
        "the router goes on after a handler error",
        format!("the `route --ndjson` process that reported the failure also handles {what}"),
    )
    .actual(format!(
        "{actual} (exit {:?})",
        router.try_status().map(|s| s.code())
    ))
    .into()
}

/// Writes `message` as one line to the `route --ndjson` process and reads its one report line.
async fn stream_route(
    ctx: &Ctx,
    router: &mut Child,
    message: &Value,
    what: &str,
) -> Result<Value, CheckError> {
    let line = ctx
        .within(&format!("the report of {what}"), async {
            if let Err(error) = router.send_line(&message.to_string()).await {
                return Err(stopped(
                    router,
                    what,
                    format!("writing to it failed: {error}"),
                ));
            }
            router
                .next_line()
                .await
                .or_fail(format!("the same `route --ndjson` process reports {what}"))
        })
        .await??;
    let Some(line) = line else {
        return Err(stopped(router, what, "its stdout closed".to_owned()));
    };
    serde_json::from_str(&line).or_fail(format!("a JSON report line for {what}, got {line:?}"))
}

async fn aof_x_03(ctx: Ctx) -> CheckResult {
    let adapter = Adapter::new(&ctx)?;
    fixture::task(&adapter, TASK_1, "in-progress").await?;
    fixture::task(&adapter, TASK_2, "in-progress").await?;
    fixture::task(&adapter, TASK_3, "in-progress").await?;
    let blocked = expect::run_dir(&adapter, TASK_1).await?;
    if let Some(parent) = blocked.parent() {
        std::fs::create_dir_all(parent).or_error(format!("creating {}", parent.display()))?;
    }
    std::fs::write(&blocked, "a file where the run directory belongs")
        .or_error(format!("writing {}", blocked.display()))?;

    let failing = message::completion_report(TASK_1, "partial");
    let progress = "still processed after a failed handler";
    let update = message::status_update(TASK_2, json!({"progress": progress}));
    let report = message::completion_report(TASK_3, "partial");
    let mark = Events::mark(&adapter).await?;
    let mut router = adapter.route_stream(NOW)?;
    let first = stream_route(&ctx, &mut router, &failing, "the failing completion.report").await?;
    ensure_eq!(
        json!("failed"),
        first["outcome"],
        "the failing message's outcome"
    );
    let second = stream_route(&ctx, &mut router, &update, "the next status.update").await?;
    ensure_eq!(
        json!("handled"),
        second["outcome"],
        "the next message's outcome"
    );
    let third = stream_route(&ctx, &mut router, &report, "a later completion.report").await?;
    ensure_eq!(
        json!("handled"),
        third["outcome"],
        "a later message's outcome"
    );
    router.close_stdin();
    let status = ctx
        .within("`route --ndjson` to end with its input", router.wait())
        .await?
        .or_error("waiting for `route --ndjson`")?;
    ensure_eq!(
        Some(super::adapter::EXIT_OK),
        status.code(),
        "the exit code of `route --ndjson` after a handler error"
    );

    let events = Events::since(&adapter, mark).await?;
    let error = events.expect(
        "protocol.message.error",
        json!({"type": "completion.report"}),
    )?;
    ensure!(
        !super::events::payload_str(error, "error").is_empty(),
        "the logged error says what failed",
        "payload: {}",
        error["payload"]
    );
    let received = events.expect(
        "protocol.message.received",
        json!({"type": "status.update"}),
    )?;
    ensure!(
        super::events::event_id(received) > super::events::event_id(error),
        "the later message is handled after the error is logged",
        "protocol.message.error {} and then protocol.message.received {}",
        error,
        received
    );
    disk::ensure_work_log_entry(adapter.data_dir(), TASK_2, &[progress])?;
    disk::ensure_status(adapter.data_dir(), TASK_3, "review")?;
    events.expect("task.completed", json!({"outcome": "partial"}))?;

    let alone = adapter.route(&failing, LATER).await?;
    expect::routed(&alone, "failed", None)?;
    Ok(())
}

async fn aof_x_04(ctx: Ctx) -> CheckResult {
    let adapter = Adapter::new(&ctx)?;
    fixture::task(&adapter, TASK_1, "done").await?;
    let before = disk::ensure_status(adapter.data_dir(), TASK_1, "done")?;
    let routed = delivery::route(
        &adapter,
        &message::completion_report(TASK_1, "partial"),
        NOW,
        "handled",
    )
    .await?;
    routed.events.expect_transitions(TASK_1, &[])?;
    let after = disk::ensure_status(adapter.data_dir(), TASK_1, "done")?;
    ensure_eq!(
        before.field("lastTransitionAt"),
        after.field("lastTransitionAt"),
        "lastTransitionAt of the done task"
    );
    Ok(())
}

async fn aof_x_05(ctx: Ctx) -> CheckResult {
    let adapter = Adapter::new(&ctx)?;
    fixture::task(&adapter, TASK_1, "in-progress").await?;
    fixture::task(&adapter, TASK_2, "in-progress").await?;
    let report = message::completion_report(TASK_1, "partial");
    ensure_eq!(
        json!("outputs/summary.md"),
        report["payload"]["summaryRef"],
        "the report's summaryRef"
    );
    let routed = delivery::route(&adapter, &report, NOW, "handled").await?;
    disk::ensure_status(adapter.data_dir(), TASK_1, "review")?;
    routed
        .events
        .expect_transitions(TASK_1, &[("in-progress", "review")])?;
    routed.events.expect(
        "protocol.message.warning",
        json!({"reason": "summary_file_not_found"}),
    )?;

    let outputs = disk::task(adapter.data_dir(), TASK_2)?
        .companion()
        .join("outputs");
    std::fs::create_dir_all(&outputs).or_error(format!("creating {}", outputs.display()))?;
    std::fs::write(outputs.join("summary.md"), "# Summary\n").or_error("writing summary.md")?;
    let present = delivery::route(
        &adapter,
        &message::completion_report(TASK_2, "partial"),
        NOW,
        "handled",
    )
    .await?;
    present.events.expect_none("protocol.message.warning")?;
    disk::ensure_status(adapter.data_dir(), TASK_2, "review")?;
    Ok(())
}
