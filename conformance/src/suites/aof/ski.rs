//! The `aof-ski` suite: outputs of `ski aof` that `aof-protocols-bdd.md` does not ask for but the
//! adapter contract documents as extensions (`aof-adapter.md`, "Extensions"). A target declares
//! `aof-ski-extensions` only when it produces them; the document's own rows never require them.

use serde_json::json;

use super::adapter::Adapter;
use super::fixture::TaskSpec;
use super::handoff;
use super::message::{self, TASK_1, TASK_2};
use super::recovery::{self, RECLAIM};
use crate::{Check, CheckResult, Ctx, ensure, ensure_eq};

/// The checks of the `aof-ski` suite.
pub fn checks() -> Vec<Check> {
    vec![
        Check::new(
            "AOF-SKI-01",
            "Routes a handoff.request whose lists name neither task; handoff.md must name the child \
             TASK-2026-02-09-002 and the parent TASK-2026-02-09-001 (E-AOF-27's layout).",
            aof_ski_01,
        ),
        Check::new(
            "AOF-SKI-02",
            "A dry-run poll at 10:05 over an in-progress task whose heartbeat expired at 10:00; its \
             stale_heartbeat action must carry fromStatus \"in-progress\".",
            aof_ski_02,
        ),
        Check::new(
            "AOF-SKI-03",
            "A poll reclaims an in-progress task with a stale heartbeat and no run result; \
             run.expired must be logged for the task with reason stale_heartbeat.",
            aof_ski_03,
        ),
        Check::new(
            "AOF-SKI-04",
            "A poll recovers one stale heartbeat; its output must report \
             staleHeartbeatsProcessed 1.",
            aof_ski_04,
        ),
    ]
}

async fn aof_ski_01(ctx: Ctx) -> CheckResult {
    let adapter = Adapter::new(&ctx)?;
    let payload = message::handoff_full(TASK_2, TASK_1);
    for list in [
        "acceptanceCriteria",
        "expectedOutputs",
        "contextRefs",
        "constraints",
    ] {
        if payload[list].to_string().contains("TASK-") {
            return Err(crate::CheckError::Harness(format!(
                "the request's {list} names a task, so it cannot tell a rendered task id"
            )));
        }
    }
    let request = message::envelope("handoff.request", TASK_2, payload);
    handoff::delegate(
        &adapter,
        TaskSpec::new(TASK_1, "in-progress"),
        TaskSpec::new(TASK_2, "ready"),
        &request,
    )
    .await?;
    let (_, markdown) = handoff::artifacts(&adapter, TASK_2)?;
    for (role, id) in [("child", TASK_2), ("parent", TASK_1)] {
        ensure!(
            markdown.contains(id),
            format!("handoff.md names the {role} task"),
            "handoff.md lacks {id}:\n{markdown}"
        );
    }
    Ok(())
}

async fn aof_ski_02(ctx: Ctx) -> CheckResult {
    let adapter = Adapter::new(&ctx)?;
    recovery::stale(&adapter, &RECLAIM).await?;
    let (report, _) = recovery::poll(&adapter, true).await?;
    let actions = recovery::stale_actions(&report, TASK_1);
    ensure_eq!(1, actions.len(), "stale_heartbeat actions for {TASK_1}");
    ensure_eq!(
        json!("in-progress"),
        actions[0]["fromStatus"],
        "the action's fromStatus"
    );
    Ok(())
}

async fn aof_ski_03(ctx: Ctx) -> CheckResult {
    let (_, events) = recovery::recovers(&ctx, &RECLAIM).await?;
    let expired = events.expect("run.expired", json!({"reason": "stale_heartbeat"}))?;
    ensure_eq!(json!(TASK_1), expired["taskId"], "run.expired taskId");
    Ok(())
}

async fn aof_ski_04(ctx: Ctx) -> CheckResult {
    let adapter = Adapter::new(&ctx)?;
    recovery::stale(&adapter, &RECLAIM).await?;
    let (report, events) = recovery::poll(&adapter, false).await?;
    RECLAIM.judge(&adapter, &events)?;
    ensure_eq!(
        json!(1),
        report["staleHeartbeatsProcessed"],
        "staleHeartbeatsProcessed of the poll"
    );
    Ok(())
}
