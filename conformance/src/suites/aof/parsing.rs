//! TASK-058 scenarios (AOF-058-01 to AOF-058-15): where a message is found, rejections of bad
//! JSON and bad envelopes, routing to the handler of each type, unknown types and missing tasks.
//! A handler "is invoked" when its effect is on disk and in the log; a message "returns null"
//! when nothing but its rejection is logged and no task changes.

use serde_json::{Value, json};

use super::adapter::Adapter;
use super::delivery::{self, Delivery};
use super::disk;
use super::events::Events;
use super::expect;
use super::fixture;
use super::message::{self, MISSING_TASK, NOW, TASK_1, TASK_2};
use crate::{Check, CheckError, CheckResult, Ctx, Failure, ensure_eq};

/// The checks of this module.
pub fn checks() -> Vec<Check> {
    vec![
        Check::new(
            "AOF-058-01",
            "Routes an event object whose payload is a status.update envelope; expects it handled: \
             protocol.message.received, the progress in the task's Work Log, nothing rejected.",
            aof_058_01,
        ),
        Check::new(
            "AOF-058-02",
            "Routes an event whose message is \"AOF/1 {…}\" text; expects the envelope parsed and \
             handled like AOF-058-01.",
            aof_058_02,
        ),
        Check::new(
            "AOF-058-03",
            "Routes an event whose content is plain JSON text starting with \"{\"; expects it parsed \
             and handled like AOF-058-01.",
            aof_058_03,
        ),
        Check::new(
            "AOF-058-04",
            "Routes \"Hello, this is a chat message\" as stdin text and as an event's content; expects \
             outcome ignored, exit 0, no event logged, no task changed.",
            aof_058_04,
        ),
        Check::new(
            "AOF-058-05",
            "Routes an event with message \"AOF/1 {invalid json\"; expects exit 2, exactly one \
             protocol.message.rejected with reason invalid_json, no handler and no task change.",
            aof_058_05,
        ),
        Check::new(
            "AOF-058-06",
            "Routes \"AOF/1 \" with JSON that lacks taskId, fromAgent, toAgent, sentAt and payload; \
             expects protocol.message.rejected with reason invalid_envelope naming each missing \
             field, no handler and no task change.",
            aof_058_06,
        ),
        Check::new(
            "AOF-058-07",
            "Routes a completion.report; expects protocol.message.received with its type and the \
             completion handler's effects (run_result.json, task.completed).",
            aof_058_07,
        ),
        Check::new(
            "AOF-058-08",
            "Routes a status.update with progress; expects protocol.message.received with its type \
             and the status handler's Work Log entry.",
            aof_058_08,
        ),
        Check::new(
            "AOF-058-09",
            "Routes a handoff.request from an in-progress parent to a ready child; expects \
             protocol.message.received with its type, delegation.requested and handoff.json.",
            aof_058_09,
        ),
        Check::new(
            "AOF-058-10",
            "Routes handoff.accepted; expects protocol.message.received with its type and \
             delegation.accepted (the accepted branch), no delegation.rejected, no transition.",
            aof_058_10,
        ),
        Check::new(
            "AOF-058-11",
            "Routes handoff.rejected; expects protocol.message.received with its type and \
             delegation.rejected (the rejected branch), no delegation.accepted.",
            aof_058_11,
        ),
        Check::new(
            "AOF-058-12",
            "Routes an envelope of type custom.message; expects outcome unknown, exactly one event, \
             protocol.message.unknown with type custom.message, and no task change.",
            aof_058_12,
        ),
        Check::new(
            "AOF-058-13",
            "Routes a completion.report for TASK-2026-02-09-999, which does not exist; expects \
             protocol.message.rejected with reason task_not_found, no transition, no task change and \
             no run_result.json.",
            aof_058_13,
        ),
        Check::new(
            "AOF-058-14",
            "Routes a status.update for a task that does not exist; expects \
             protocol.message.rejected with reason task_not_found, no transition, no task change.",
            aof_058_14,
        ),
        Check::new(
            "AOF-058-15",
            "Routes a handoff.request whose child does not exist; expects protocol.message.rejected \
             with reason task_not_found, delegation.rejected, and no handoff.json or handoff.md.",
            aof_058_15,
        ),
    ]
}

/// Task 1 in progress, then `text` routed; expects it handled as the status update it wraps
/// (progress `progress`).
async fn handled_status_update(ctx: &Ctx, text: &str, progress: &str) -> CheckResult {
    let adapter = Adapter::new(ctx)?;
    fixture::task(&adapter, TASK_1, "in-progress").await?;
    let routed = delivery::route_text(&adapter, text, NOW, "handled").await?;
    ensure_eq!(
        json!("status.update"),
        routed.report["type"],
        "the route report's type"
    );
    ensure_eq!(
        json!(TASK_1),
        routed.report["taskId"],
        "the route report's taskId"
    );
    routed.events.expect(
        "protocol.message.received",
        json!({"type": "status.update"}),
    )?;
    routed.events.expect_none("protocol.message.rejected")?;
    disk::ensure_status(adapter.data_dir(), TASK_1, "in-progress")?;
    disk::ensure_work_log_entry(adapter.data_dir(), TASK_1, &[progress])?;
    Ok(())
}

async fn aof_058_01(ctx: Ctx) -> CheckResult {
    let progress = "parsed from an event payload";
    let envelope = message::status_update(TASK_1, json!({"progress": progress}));
    let event = json!({"type": "message", "payload": envelope});
    handled_status_update(&ctx, &event.to_string(), progress).await
}

async fn aof_058_02(ctx: Ctx) -> CheckResult {
    let progress = "parsed after the AOF/1 prefix";
    let envelope = message::status_update(TASK_1, json!({"progress": progress}));
    let event = json!({"message": format!("AOF/1 {envelope}")});
    handled_status_update(&ctx, &event.to_string(), progress).await
}

async fn aof_058_03(ctx: Ctx) -> CheckResult {
    let progress = "parsed from plain JSON";
    let envelope = message::status_update(TASK_1, json!({"progress": progress}));
    let event = json!({"content": envelope.to_string()});
    handled_status_update(&ctx, &event.to_string(), progress).await
}

async fn aof_058_04(ctx: Ctx) -> CheckResult {
    let adapter = Adapter::new(&ctx)?;
    fixture::task(&adapter, TASK_1, "in-progress").await?;
    let chat = "Hello, this is a chat message";
    let before = disk::tasks_snapshot(adapter.data_dir())?;
    for text in [chat.to_owned(), json!({"content": chat}).to_string()] {
        let routed = delivery::route_text(&adapter, &text, NOW, "ignored").await?;
        routed.events.expect_empty("a chat message")?;
    }
    disk::ensure_tasks_unchanged(adapter.data_dir(), &before, "a chat message")
}

/// Task 1 in progress, then `text` routed and rejected with `reason`: one rejection event, no
/// handler, no task change. Returns the rejection event.
async fn rejected_before_handler(ctx: &Ctx, text: &str, reason: &str) -> Result<Value, CheckError> {
    let adapter = Adapter::new(ctx)?;
    fixture::task(&adapter, TASK_1, "in-progress").await?;
    let before = disk::tasks_snapshot(adapter.data_dir())?;
    let routed = delivery::route_text(&adapter, text, NOW, "rejected").await?;
    let event = routed
        .events
        .expect("protocol.message.rejected", json!({"reason": reason}))?
        .clone();
    routed.events.expect_types(&["protocol.message.rejected"])?;
    disk::ensure_tasks_unchanged(adapter.data_dir(), &before, "a rejected message")?;
    Ok(event)
}

async fn aof_058_05(ctx: Ctx) -> CheckResult {
    let event = json!({"message": "AOF/1 {invalid json"});
    rejected_before_handler(&ctx, &event.to_string(), "invalid_json").await?;
    Ok(())
}

async fn aof_058_06(ctx: Ctx) -> CheckResult {
    let partial = json!({"protocol": "aof", "version": 1, "type": "status.update"});
    let event = json!({"message": format!("AOF/1 {partial}")});
    let rejected = rejected_before_handler(&ctx, &event.to_string(), "invalid_envelope").await?;
    let payload = &rejected["payload"];
    let issues = payload["issues"].as_array().cloned().unwrap_or_default();
    let errors = payload["errors"].as_array().cloned().unwrap_or_default();
    for field in ["taskId", "fromAgent", "toAgent", "sentAt", "payload"] {
        let in_issues = issues
            .iter()
            .any(|i| i["path"] == json!(field) && i["kind"] == json!("missing"));
        let in_errors = errors
            .iter()
            .any(|e| e.as_str().is_some_and(|text| text.contains(field)));
        if !in_issues && !in_errors {
            return Err(Failure::new(
                format!("the rejection names the missing field {field}"),
                format!("an issue {{path: {field}, kind: missing}} or an error naming {field}"),
            )
            .actual(format!("rejection payload: {payload}"))
            .into());
        }
    }
    Ok(())
}

/// Routes `message` for `task` and expects it handled with protocol.message.received of its type.
async fn received(adapter: &Adapter, message: &Value) -> Result<Delivery, CheckError> {
    let routed = delivery::route(adapter, message, NOW, "handled").await?;
    routed.events.expect(
        "protocol.message.received",
        json!({"type": message["type"]}),
    )?;
    routed.events.expect_none("protocol.message.rejected")?;
    Ok(routed)
}

async fn aof_058_07(ctx: Ctx) -> CheckResult {
    let adapter = Adapter::new(&ctx)?;
    fixture::task(&adapter, TASK_1, "in-progress").await?;
    let routed = received(&adapter, &message::completion_report(TASK_1, "partial")).await?;
    routed
        .events
        .expect("task.completed", json!({"outcome": "partial"}))?;
    expect::run_result_on_disk(&adapter, TASK_1).await?;
    Ok(())
}

async fn aof_058_08(ctx: Ctx) -> CheckResult {
    let adapter = Adapter::new(&ctx)?;
    fixture::task(&adapter, TASK_1, "in-progress").await?;
    let progress = "routed to the status handler";
    received(
        &adapter,
        &message::status_update(TASK_1, json!({"progress": progress})),
    )
    .await?;
    disk::ensure_work_log_entry(adapter.data_dir(), TASK_1, &[progress])?;
    Ok(())
}

async fn aof_058_09(ctx: Ctx) -> CheckResult {
    let adapter = Adapter::new(&ctx)?;
    fixture::task(&adapter, TASK_1, "in-progress").await?;
    fixture::task(&adapter, TASK_2, "ready").await?;
    let routed = received(&adapter, &message::handoff_request(TASK_2, TASK_1)).await?;
    routed
        .events
        .expect("delegation.requested", json!({"parentTaskId": TASK_1}))?;
    let child = disk::task(adapter.data_dir(), TASK_2)?;
    let handoff = child.companion().join("inputs").join("handoff.json");
    if disk::read_json(&handoff)?.is_none() {
        return Err(Failure::new(
            "the handoff handler writes handoff.json",
            format!("{} exists", handoff.display()),
        )
        .actual("no such file")
        .into());
    }
    Ok(())
}

async fn aof_058_10(ctx: Ctx) -> CheckResult {
    let adapter = Adapter::new(&ctx)?;
    fixture::task(&adapter, TASK_2, "in-progress").await?;
    let routed = received(&adapter, &message::handoff_ack(TASK_2, true, None)).await?;
    routed.events.expect("delegation.accepted", json!({}))?;
    routed.events.expect_none("delegation.rejected")?;
    routed.events.expect_none("task.transitioned")?;
    disk::ensure_status(adapter.data_dir(), TASK_2, "in-progress")?;
    Ok(())
}

async fn aof_058_11(ctx: Ctx) -> CheckResult {
    let adapter = Adapter::new(&ctx)?;
    fixture::task(&adapter, TASK_2, "in-progress").await?;
    let routed = received(
        &adapter,
        &message::handoff_ack(TASK_2, false, Some("Insufficient context")),
    )
    .await?;
    routed.events.expect("delegation.rejected", json!({}))?;
    routed.events.expect_none("delegation.accepted")?;
    Ok(())
}

async fn aof_058_12(ctx: Ctx) -> CheckResult {
    let adapter = Adapter::new(&ctx)?;
    fixture::task(&adapter, TASK_1, "in-progress").await?;
    let before = disk::tasks_snapshot(adapter.data_dir())?;
    let custom = message::envelope("custom.message", TASK_1, json!({"anything": "goes"}));
    let routed = delivery::route(&adapter, &custom, NOW, "unknown").await?;
    routed.events.expect(
        "protocol.message.unknown",
        json!({"type": "custom.message"}),
    )?;
    routed.events.expect_types(&["protocol.message.unknown"])?;
    disk::ensure_tasks_unchanged(adapter.data_dir(), &before, "an unknown message type")
}

/// Task 1 in progress, then `message` for the missing task routed: rejected with
/// task_not_found, no transition, no task change. Returns the events it logged.
async fn missing_task(adapter: &Adapter, message: &Value) -> Result<Events, CheckError> {
    fixture::task(adapter, TASK_1, "in-progress").await?;
    let before = disk::tasks_snapshot(adapter.data_dir())?;
    let routed = delivery::route(adapter, message, NOW, "rejected").await?;
    routed.events.expect(
        "protocol.message.rejected",
        json!({"reason": "task_not_found"}),
    )?;
    routed.events.expect_none("task.transitioned")?;
    disk::ensure_tasks_unchanged(adapter.data_dir(), &before, "a message for a missing task")?;
    Ok(routed.events)
}

async fn aof_058_13(ctx: Ctx) -> CheckResult {
    let adapter = Adapter::new(&ctx)?;
    missing_task(&adapter, &message::completion_report(MISSING_TASK, "done")).await?;
    expect::no_run_result(&adapter, MISSING_TASK).await
}

async fn aof_058_14(ctx: Ctx) -> CheckResult {
    let adapter = Adapter::new(&ctx)?;
    let update = message::status_update(MISSING_TASK, json!({"status": "blocked"}));
    missing_task(&adapter, &update).await?;
    Ok(())
}

async fn aof_058_15(ctx: Ctx) -> CheckResult {
    let adapter = Adapter::new(&ctx)?;
    let events = missing_task(&adapter, &message::handoff_request(MISSING_TASK, TASK_1)).await?;
    events.expect("delegation.rejected", json!({}))?;
    disk::ensure_no_handoff_artifacts(adapter.data_dir())
}
