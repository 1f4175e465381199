//! TASK-060 scenarios (AOF-060-01 to AOF-060-13): handoff requests and their artifacts in the
//! child's `inputs/`, the delegation depth guard, refusals, and handoff acknowledgements.

use std::path::PathBuf;

use serde_json::{Value, json};

use super::adapter::Adapter;
use super::delivery::{self, Delivery};
use super::disk;
use super::fixture::{self, TaskSpec};
use super::message::{
    self, CREATED_AT, MISSING_TASK, NOW, TASK_1, TASK_2, TASK_3, TASK_4, TASK_5, TO_AGENT,
};
use crate::{Check, CheckError, CheckResult, Ctx, Failure, ensure, ensure_eq};

/// The checks of this module.
pub fn checks() -> Vec<Check> {
    vec![
        Check::new(
            "AOF-060-01",
            "Parent TASK-2026-02-09-001 in-progress, child TASK-2026-02-09-002 ready; routes a \
             handoff.request; expects tasks/ready/TASK-2026-02-09-002/inputs/handoff.json and \
             handoff.md on disk and delegation.requested naming the parent.",
            aof_060_01,
        ),
        Check::new(
            "AOF-060-02",
            "Routes a handoff.request with every payload field; expects handoff.json to hold each \
             field as sent (contextRefs as the same list) and handoff.md, which must not be JSON, \
             to show every criterion, output, reference, constraint and the due date (the Given's \
             five fields; the layout and the task ids are not judged, E-AOF-27).",
            aof_060_02,
        ),
        Check::new(
            "AOF-060-03",
            "Parent with delegationDepth 0, child without one; after a handoff.request the child's \
             file on disk has metadata.delegationDepth 1, updatedAt at the current time, still \
             parses, and lies alone in its status directory with no stray files.",
            aof_060_03,
        ),
        Check::new(
            "AOF-060-04",
            "Parent with delegationDepth 1; routes a handoff.request to a child without depth; \
             expects protocol.message.rejected and delegation.rejected with reason \
             nested_delegation, no handoff artifacts and no task file changed.",
            aof_060_04,
        ),
        Check::new(
            "AOF-060-05",
            "Routes a handoff.request whose envelope names TASK-2026-02-09-002 and whose payload \
             names TASK-2026-02-09-003; expects protocol.message.rejected with reason \
             taskId_mismatch, no artifacts and no task change.",
            aof_060_05,
        ),
        Check::new(
            "AOF-060-06",
            "Routes a handoff.request whose parent TASK-2026-02-09-999 does not exist; expects \
             delegation.rejected with reason parent_not_found, no artifacts and no task change.",
            aof_060_06,
        ),
        Check::new(
            "AOF-060-07",
            "Routes handoff.accepted for an in-progress child; expects delegation.accepted, no \
             task.transitioned and the child still in tasks/in-progress/.",
            aof_060_07,
        ),
        Check::new(
            "AOF-060-08",
            "Routes handoff.rejected with reason \"Insufficient context\" for an in-progress child; \
             expects the child in tasks/blocked/, task.transitioned with that reason, and \
             delegation.rejected.",
            aof_060_08,
        ),
        Check::new(
            "AOF-060-09",
            "Routes handoff.accepted for TASK-2026-02-09-999, which does not exist; expects \
             protocol.message.rejected with reason task_not_found, no transition, no task change.",
            aof_060_09,
        ),
        Check::new(
            "AOF-060-10",
            "Creates a task without a parent; its frontmatter on disk has no \
             metadata.delegationDepth or 0.",
            aof_060_10,
        ),
        Check::new(
            "AOF-060-11",
            "Parent with delegationDepth 0 and a child task created under it; after a \
             handoff.request the child's metadata.delegationDepth on disk is the number 1.",
            aof_060_11,
        ),
        Check::new(
            "AOF-060-12",
            "Parent with delegationDepth 1; routes a handoff.request; expects delegation.rejected \
             with reason nested_delegation, no delegation.requested, no artifacts, child unchanged.",
            aof_060_12,
        ),
        Check::new(
            "AOF-060-13",
            "Applies the guard to three pairs: parent depth 1 with an unset child (rejected), parent \
             depth 1 with a child at depth 0 (rejected), parent depth 0 with a child at depth 5 \
             (accepted, child set to 1): only parentDepth + 1 > 1 decides.",
            aof_060_13,
        ),
    ]
}

/// The child's `inputs/` directory as it lies on disk.
fn inputs(adapter: &Adapter, child: &str) -> Result<PathBuf, CheckError> {
    Ok(disk::task(adapter.data_dir(), child)?
        .companion()
        .join("inputs"))
}

/// Parent and child created, then `request` routed and handled with `delegation.requested`.
pub(super) async fn delegate(
    adapter: &Adapter,
    parent: TaskSpec,
    child: TaskSpec,
    request: &Value,
) -> Result<Delivery, CheckError> {
    parent.create(adapter).await?;
    child.create(adapter).await?;
    let routed = delivery::route(adapter, request, NOW, "handled").await?;
    routed.events.expect(
        "delegation.requested",
        json!({"parentTaskId": request["payload"]["parentTaskId"]}),
    )?;
    Ok(routed)
}

/// The handoff artifacts of `child`: handoff.json parsed and handoff.md as text.
pub(super) fn artifacts(adapter: &Adapter, child: &str) -> Result<(Value, String), CheckError> {
    let dir = inputs(adapter, child)?;
    let json_path = dir.join("handoff.json");
    let handoff = disk::read_json(&json_path)?.ok_or_else(|| {
        CheckError::from(
            Failure::new(
                "handoff.json is written",
                format!("{} exists", json_path.display()),
            )
            .actual("no such file"),
        )
    })?;
    let md_path = dir.join("handoff.md");
    let markdown = std::fs::read_to_string(&md_path).map_err(|e| {
        CheckError::from(
            Failure::new(
                "handoff.md is written",
                format!("{} exists", md_path.display()),
            )
            .actual(e.to_string()),
        )
    })?;
    Ok((handoff, markdown))
}

async fn aof_060_01(ctx: Ctx) -> CheckResult {
    let adapter = Adapter::new(&ctx)?;
    let request = message::handoff_request(TASK_2, TASK_1);
    let routed = delegate(
        &adapter,
        TaskSpec::new(TASK_1, "in-progress"),
        TaskSpec::new(TASK_2, "ready"),
        &request,
    )
    .await?;
    routed.events.expect(
        "delegation.requested",
        json!({"parentTaskId": TASK_1, "toAgent": TO_AGENT}),
    )?;
    let expected = adapter
        .data_dir()
        .join("tasks/ready")
        .join(TASK_2)
        .join("inputs");
    ensure_eq!(
        expected,
        inputs(&adapter, TASK_2)?,
        "the child's inputs directory"
    );
    let (handoff, markdown) = artifacts(&adapter, TASK_2)?;
    ensure_eq!(
        json!(["All tests pass", "Docs updated"]),
        handoff["acceptanceCriteria"],
        "acceptanceCriteria in handoff.json"
    );
    ensure!(
        !markdown.trim().is_empty(),
        "handoff.md has content",
        "handoff.md is empty"
    );
    Ok(())
}

async fn aof_060_02(ctx: Ctx) -> CheckResult {
    let adapter = Adapter::new(&ctx)?;
    let payload = message::handoff_full(TASK_2, TASK_1);
    let request = message::envelope("handoff.request", TASK_2, payload.clone());
    delegate(
        &adapter,
        TaskSpec::new(TASK_1, "in-progress"),
        TaskSpec::new(TASK_2, "ready"),
        &request,
    )
    .await?;
    let (handoff, markdown) = artifacts(&adapter, TASK_2)?;
    for (key, value) in payload.as_object().into_iter().flatten() {
        ensure_eq!(*value, handoff[key], "{key} in handoff.json");
    }
    ensure!(
        handoff["contextRefs"].is_array(),
        "contextRefs is a list in handoff.json"
    );
    let mut shown: Vec<String> = vec![payload["dueBy"].as_str().unwrap_or_default().to_owned()];
    for list in [
        "acceptanceCriteria",
        "expectedOutputs",
        "contextRefs",
        "constraints",
    ] {
        shown.extend(
            payload[list]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .map(str::to_owned),
        );
    }
    let missing: Vec<&String> = shown
        .iter()
        .filter(|s| !markdown.contains(s.as_str()))
        .collect();
    ensure!(
        missing.is_empty(),
        "handoff.md shows every field of the request",
        "handoff.md lacks {missing:?}:\n{markdown}"
    );
    ensure!(
        serde_json::from_str::<Value>(&markdown).is_err(),
        "handoff.md is a rendering for people, not the JSON again",
        "handoff.md parses as JSON:\n{markdown}"
    );
    Ok(())
}

async fn aof_060_03(ctx: Ctx) -> CheckResult {
    let adapter = Adapter::new(&ctx)?;
    delegate(
        &adapter,
        TaskSpec::new(TASK_1, "in-progress").metadata(json!({"delegationDepth": 0})),
        TaskSpec::new(TASK_2, "ready").body("Write the tests."),
        &message::handoff_request(TASK_2, TASK_1),
    )
    .await?;
    let child = disk::ensure_status(adapter.data_dir(), TASK_2, "ready")?;
    ensure_eq!(
        Some(&json!(1)),
        child.field("metadata.delegationDepth"),
        "the child's metadata.delegationDepth"
    );
    ensure_eq!(
        Some(&json!(NOW)),
        child.field("updatedAt"),
        "the child's updatedAt (created at {CREATED_AT}, delegated at {NOW})"
    );
    ensure_eq!("Write the tests.", child.body.trim(), "the child's body");
    let listing = disk::snapshot(&adapter.data_dir().join("tasks/ready"))?;
    let stray: Vec<&String> = listing
        .keys()
        .filter(|path| !path.starts_with(TASK_2))
        .collect();
    ensure!(
        stray.is_empty(),
        "no partial or temporary task file is left beside the child",
        "tasks/ready/ also holds {stray:?}"
    );
    Ok(())
}

/// Parent at depth 1, child TASK-2 without depth; a handoff.request is refused as
/// nested_delegation with no artifact and no task change. Returns the routed message.
async fn refused_nested(ctx: &Ctx) -> Result<Delivery, CheckError> {
    let adapter = Adapter::new(ctx)?;
    TaskSpec::new(TASK_1, "in-progress")
        .metadata(json!({"delegationDepth": 1}))
        .create(&adapter)
        .await?;
    fixture::task(&adapter, TASK_2, "ready").await?;
    let before = disk::tasks_snapshot(adapter.data_dir())?;
    let routed = delivery::route(
        &adapter,
        &message::handoff_request(TASK_2, TASK_1),
        NOW,
        "rejected",
    )
    .await?;
    routed.events.expect(
        "delegation.rejected",
        json!({"reason": "nested_delegation"}),
    )?;
    routed.events.expect_none("delegation.requested")?;
    disk::ensure_no_handoff_artifacts(adapter.data_dir())?;
    disk::ensure_tasks_unchanged(adapter.data_dir(), &before, "a nested delegation")?;
    Ok(routed)
}

async fn aof_060_04(ctx: Ctx) -> CheckResult {
    let routed = refused_nested(&ctx).await?;
    routed
        .events
        .expect("protocol.message.rejected", json!({}))?;
    Ok(())
}

/// Tasks 1 (in progress), 2 and 3 (ready) exist; `request` is rejected with `reason` and no
/// artifact and no task change. Returns the routed message.
async fn refused(
    ctx: &Ctx,
    request: &Value,
    reason: &str,
    event: &str,
) -> Result<Delivery, CheckError> {
    let adapter = Adapter::new(ctx)?;
    fixture::task(&adapter, TASK_1, "in-progress").await?;
    fixture::task(&adapter, TASK_2, "ready").await?;
    fixture::task(&adapter, TASK_3, "ready").await?;
    let before = disk::tasks_snapshot(adapter.data_dir())?;
    let routed = delivery::route(&adapter, request, NOW, "rejected").await?;
    routed.events.expect(event, json!({"reason": reason}))?;
    routed.events.expect_none("delegation.requested")?;
    disk::ensure_no_handoff_artifacts(adapter.data_dir())?;
    disk::ensure_tasks_unchanged(adapter.data_dir(), &before, "a refused handoff")?;
    Ok(routed)
}

async fn aof_060_05(ctx: Ctx) -> CheckResult {
    let request = message::envelope(
        "handoff.request",
        TASK_2,
        message::handoff_full(TASK_3, TASK_1),
    );
    refused(
        &ctx,
        &request,
        "taskId_mismatch",
        "protocol.message.rejected",
    )
    .await?;
    Ok(())
}

async fn aof_060_06(ctx: Ctx) -> CheckResult {
    let request = message::handoff_request(TASK_2, MISSING_TASK);
    refused(&ctx, &request, "parent_not_found", "delegation.rejected").await?;
    Ok(())
}

async fn aof_060_07(ctx: Ctx) -> CheckResult {
    let adapter = Adapter::new(&ctx)?;
    fixture::task(&adapter, TASK_2, "in-progress").await?;
    let routed = delivery::route(
        &adapter,
        &message::handoff_ack(TASK_2, true, None),
        NOW,
        "handled",
    )
    .await?;
    routed.events.expect("delegation.accepted", json!({}))?;
    routed.events.expect_transitions(TASK_2, &[])?;
    disk::ensure_status(adapter.data_dir(), TASK_2, "in-progress")?;
    Ok(())
}

async fn aof_060_08(ctx: Ctx) -> CheckResult {
    let adapter = Adapter::new(&ctx)?;
    fixture::task(&adapter, TASK_2, "in-progress").await?;
    let reason = "Insufficient context";
    let routed = delivery::route(
        &adapter,
        &message::handoff_ack(TASK_2, false, Some(reason)),
        NOW,
        "handled",
    )
    .await?;
    disk::ensure_status(adapter.data_dir(), TASK_2, "blocked")?;
    routed
        .events
        .expect_transitions(TASK_2, &[("in-progress", "blocked")])?;
    routed.events.expect_reason(TASK_2, "blocked", reason)?;
    routed.events.expect("delegation.rejected", json!({}))?;
    Ok(())
}

async fn aof_060_09(ctx: Ctx) -> CheckResult {
    let adapter = Adapter::new(&ctx)?;
    fixture::task(&adapter, TASK_2, "in-progress").await?;
    let before = disk::tasks_snapshot(adapter.data_dir())?;
    let routed = delivery::route(
        &adapter,
        &message::handoff_ack(MISSING_TASK, true, None),
        NOW,
        "rejected",
    )
    .await?;
    routed.events.expect(
        "protocol.message.rejected",
        json!({"reason": "task_not_found"}),
    )?;
    routed.events.expect_none("task.transitioned")?;
    routed.events.expect_none("delegation.accepted")?;
    disk::ensure_tasks_unchanged(
        adapter.data_dir(),
        &before,
        "an acknowledgement for a missing task",
    )
}

async fn aof_060_10(ctx: Ctx) -> CheckResult {
    let adapter = Adapter::new(&ctx)?;
    fixture::task(&adapter, TASK_1, "backlog").await?;
    let root = disk::task(adapter.data_dir(), TASK_1)?;
    match root.field("metadata.delegationDepth") {
        None | Some(Value::Null) => Ok(()),
        Some(depth) if depth.as_f64() == Some(0.0) => Ok(()),
        Some(depth) => Err(Failure::new(
            "a root task has delegation depth 0",
            "metadata.delegationDepth absent or 0",
        )
        .actual(format!("metadata.delegationDepth: {depth}"))
        .into()),
    }
}

async fn aof_060_11(ctx: Ctx) -> CheckResult {
    let adapter = Adapter::new(&ctx)?;
    delegate(
        &adapter,
        TaskSpec::new(TASK_1, "in-progress").metadata(json!({"delegationDepth": 0})),
        TaskSpec::new(TASK_2, "ready").parent(TASK_1),
        &message::handoff_request(TASK_2, TASK_1),
    )
    .await?;
    let child = disk::task(adapter.data_dir(), TASK_2)?;
    ensure_eq!(
        Some(&json!(1)),
        child.field("metadata.delegationDepth"),
        "the child's metadata.delegationDepth"
    );
    Ok(())
}

async fn aof_060_12(ctx: Ctx) -> CheckResult {
    refused_nested(&ctx).await?;
    Ok(())
}

async fn aof_060_13(ctx: Ctx) -> CheckResult {
    let adapter = Adapter::new(&ctx)?;
    TaskSpec::new(TASK_1, "in-progress")
        .metadata(json!({"delegationDepth": 1}))
        .create(&adapter)
        .await?;
    fixture::task(&adapter, TASK_2, "ready").await?;
    TaskSpec::new(TASK_3, "ready")
        .metadata(json!({"delegationDepth": 0}))
        .create(&adapter)
        .await?;
    TaskSpec::new(TASK_4, "in-progress")
        .metadata(json!({"delegationDepth": 0}))
        .create(&adapter)
        .await?;
    TaskSpec::new(TASK_5, "ready")
        .metadata(json!({"delegationDepth": 5}))
        .create(&adapter)
        .await?;
    for child in [TASK_2, TASK_3] {
        let routed = delivery::route(
            &adapter,
            &message::handoff_request(child, TASK_1),
            NOW,
            "rejected",
        )
        .await?;
        routed.events.expect(
            "delegation.rejected",
            json!({"reason": "nested_delegation"}),
        )?;
    }
    disk::ensure_no_handoff_artifacts(adapter.data_dir())?;
    delivery::route(
        &adapter,
        &message::handoff_request(TASK_5, TASK_4),
        NOW,
        "handled",
    )
    .await?
    .events
    .expect("delegation.requested", json!({"parentTaskId": TASK_4}))?;
    let child = disk::task(adapter.data_dir(), TASK_5)?;
    ensure_eq!(
        Some(&json!(1)),
        child.field("metadata.delegationDepth"),
        "the depth of a child at 5 delegated from a parent at 0"
    );
    Ok(())
}
