//! TASK-061 scenarios (AOF-061-01 to AOF-061-14): stale heartbeat detection by the scheduler
//! poll, recovery with and without `run_result.json`, and run artifact expiry. Time is fixed
//! with `--now`: heartbeats expire at 10:00 (or 10:10) and the poll runs at 10:05.

use serde_json::{Value, json};

use super::adapter::Adapter;
use super::completion::Case;
use super::disk;
use super::events::Events;
use super::expect;
use super::fixture;
use super::message::{FROM_AGENT, TASK_1, TASK_2, TASK_3, TASK_4, TASK_5};
use crate::{Check, CheckError, CheckResult, Ctx, Failure, ensure_eq};

/// When the heartbeats are written.
const BEAT_AT: &str = "2026-02-10T09:55:00.000Z";
/// The expiry of a stale heartbeat.
const EXPIRED_AT: &str = "2026-02-10T10:00:00.000Z";
/// The expiry of a live heartbeat.
const LIVE_UNTIL: &str = "2026-02-10T10:10:00.000Z";
/// When the scheduler polls.
const POLL_AT: &str = "2026-02-10T10:05:00.000Z";
/// The scenario's heartbeatTtlMs.
const TTL_MS: u64 = 300_000;

/// The checks of this module.
pub fn checks() -> Vec<Check> {
    vec![
        Check::new(
            "AOF-061-01",
            "In-progress task with run_heartbeat.json expiring 10:00; a dry-run poll at 10:05 with \
             heartbeatTtlMs 300000 must plan exactly one action {type: stale_heartbeat, taskId} for \
             it (other action fields are not judged; fromStatus is AOF-SKI-02).",
            aof_061_01,
        ),
        Check::new(
            "AOF-061-02",
            "Heartbeat expiring 10:10; a poll at 10:05 must plan no stale_heartbeat action for the \
             task and leave it in progress.",
            aof_061_02,
        ),
        Check::new(
            "AOF-061-03",
            "In-progress task with run.json but no run_heartbeat.json; a poll must plan no \
             stale_heartbeat action for it and leave it in progress.",
            aof_061_03,
        ),
        Check::new(
            "AOF-061-04",
            "Stale heartbeat, no run result; after a poll the task is in tasks/ready/, run.json is \
             failed and task.transitioned in-progress → ready has reason stale_heartbeat_reclaim.",
            aof_061_04,
        ),
        Check::new(
            "AOF-061-05",
            "Stale heartbeat, run result partial; after a poll the task is in review and the \
             transition's reason names the outcome partial.",
            aof_061_05,
        ),
        Check::new(
            "AOF-061-06",
            "Stale heartbeat, run result needs_review; after a poll the task is in review with \
             task.transitioned in-progress → review.",
            aof_061_06,
        ),
        Check::new(
            "AOF-061-07",
            "Stale heartbeat, run result blocked with blockers [\"Dependency not ready\"]; after a \
             poll the task is blocked and the transition's reason names the blocker.",
            aof_061_07,
        ),
        Check::new(
            "AOF-061-08",
            "Stale heartbeat, run result done, reviewRequired false; after a poll the task is done \
             with task.transitioned in-progress → review and review → done.",
            aof_061_08,
        ),
        Check::new(
            "AOF-061-09",
            "Stale heartbeat, run result done, reviewRequired unset; after a poll the task is in \
             review with one transition in-progress → review.",
            aof_061_09,
        ),
        Check::new(
            "AOF-061-10",
            "Stale heartbeat, no run result; after the reclaim run.json on disk has status failed \
             and metadata.expiredAt at the poll's time.",
            aof_061_10,
        ),
        Check::new(
            "AOF-061-11",
            "Stale heartbeat, no run result; after the reclaim run.json on disk has \
             metadata.expiredReason stale_heartbeat and status failed (the artifact marked expired; \
             no event is required, run.expired is AOF-SKI-03).",
            aof_061_11,
        ),
        Check::new(
            "AOF-061-12",
            "Expired heartbeat, heartbeatTtlMs 300000: a dry-run poll plans the stale_heartbeat \
             action and changes nothing; a real poll plans it, executes it and reclaims the task.",
            aof_061_12,
        ),
        Check::new(
            "AOF-061-13",
            "A poll that recovers one stale heartbeat reports actionsExecuted 0 in its output while \
             the task is recovered; a scheduler.poll event, when one is logged with \
             actionsExecuted, must say 0 too (staleHeartbeatsProcessed is AOF-SKI-04).",
            aof_061_13,
        ),
        Check::new(
            "AOF-061-14",
            "Five in-progress tasks with stale heartbeats and no result, partial, blocked, done \
             (reviewRequired false) and needs_review; one poll must leave them ready, review, \
             blocked, done and review, each with exactly its own transitions.",
            aof_061_14,
        ),
    ]
}

/// Gives `task` (already created) run.json and a heartbeat expiring at `expires_at`.
pub(super) async fn beating(adapter: &Adapter, task: &str, expires_at: &str) -> CheckResult {
    adapter.run_start(task, FROM_AGENT, BEAT_AT).await?;
    adapter
        .run_heartbeat(task, FROM_AGENT, expires_at, BEAT_AT)
        .await
}

/// Arranges `case` (its task in progress, its run result) with a heartbeat that expired at 10:00.
pub(super) async fn stale(adapter: &Adapter, case: &Case) -> CheckResult {
    case.arrange(adapter).await?;
    beating(adapter, case.task, EXPIRED_AT).await
}

/// A poll at 10:05 and the events it logged.
pub(super) async fn poll(adapter: &Adapter, dry_run: bool) -> Result<(Value, Events), CheckError> {
    let mark = Events::mark(adapter).await?;
    let report = adapter.poll(POLL_AT, TTL_MS, dry_run).await?.ok_json()?;
    let events = Events::since(adapter, mark).await?;
    Ok((report, events))
}

/// The poll's stale_heartbeat actions for `task`.
pub(super) fn stale_actions<'a>(report: &'a Value, task: &str) -> Vec<&'a Value> {
    report["actions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|a| a["type"] == json!("stale_heartbeat") && a["taskId"] == json!(task))
        .collect()
}

/// Fails unless the poll planned exactly `count` stale_heartbeat actions for `task`.
fn ensure_stale_actions(report: &Value, task: &str, count: usize) -> Result<(), CheckError> {
    let found = stale_actions(report, task).len();
    if found == count {
        return Ok(());
    }
    Err(Failure::new(
        format!("{count} stale_heartbeat action(s) for {task}"),
        format!("actions with {count} {{type: stale_heartbeat, taskId: {task}}}"),
    )
    .actual(format!("actions: {}", report["actions"]))
    .into())
}

async fn aof_061_01(ctx: Ctx) -> CheckResult {
    let adapter = Adapter::new(&ctx)?;
    stale(&adapter, &RECLAIM).await?;
    let (report, _) = poll(&adapter, true).await?;
    ensure_stale_actions(&report, TASK_1, 1)
}

/// An in-progress task whose heartbeat is live or absent is neither flagged nor moved.
async fn not_stale(adapter: &Adapter) -> CheckResult {
    let (report, events) = poll(adapter, false).await?;
    ensure_stale_actions(&report, TASK_1, 0)?;
    disk::ensure_status(adapter.data_dir(), TASK_1, "in-progress")?;
    events.expect_transitions(TASK_1, &[])
}

async fn aof_061_02(ctx: Ctx) -> CheckResult {
    let adapter = Adapter::new(&ctx)?;
    fixture::task(&adapter, TASK_1, "in-progress").await?;
    beating(&adapter, TASK_1, LIVE_UNTIL).await?;
    not_stale(&adapter).await
}

async fn aof_061_03(ctx: Ctx) -> CheckResult {
    let adapter = Adapter::new(&ctx)?;
    fixture::task(&adapter, TASK_1, "in-progress").await?;
    adapter.run_start(TASK_1, FROM_AGENT, BEAT_AT).await?;
    let heartbeat = expect::run_dir(&adapter, TASK_1)
        .await?
        .join("run_heartbeat.json");
    if heartbeat.exists() {
        return Err(CheckError::Harness(format!(
            "the Given has no heartbeat, but {} exists",
            heartbeat.display()
        )));
    }
    not_stale(&adapter).await
}

/// A stale task is recovered by one poll as `case` says. Returns the poll's events.
pub(super) async fn recovers(ctx: &Ctx, case: &Case) -> Result<(Adapter, Events), CheckError> {
    let adapter = Adapter::new(ctx)?;
    stale(&adapter, case).await?;
    let (_, events) = poll(&adapter, false).await?;
    case.judge(&adapter, &events)?;
    Ok((adapter, events))
}

/// Task 1 with a stale heartbeat and no run result, reclaimed.
pub(super) const RECLAIM: Case = Case {
    task: TASK_1,
    no_review: false,
    outcome: None,
    status: "ready",
    steps: &[("in-progress", "ready")],
};

/// `run.json` of task 1 as it lies on disk.
pub(super) async fn run_json(adapter: &Adapter) -> Result<Value, CheckError> {
    let path = expect::run_dir(adapter, TASK_1).await?.join("run.json");
    disk::read_json(&path)?.ok_or_else(|| {
        Failure::new("run.json is kept", format!("{} exists", path.display()))
            .actual("no such file")
            .into()
    })
}

async fn aof_061_04(ctx: Ctx) -> CheckResult {
    let (adapter, events) = recovers(&ctx, &RECLAIM).await?;
    events.expect_reason(TASK_1, "ready", "stale_heartbeat_reclaim")?;
    let run = run_json(&adapter).await?;
    ensure_eq!(
        json!("failed"),
        run["status"],
        "run.json status after the reclaim"
    );
    Ok(())
}

/// Task 1 with a stale heartbeat and a run result of `outcome`, ending in `status`.
fn outcome_case(outcome: &'static str, status: &'static str) -> Case {
    Case {
        task: TASK_1,
        no_review: false,
        outcome: Some(outcome),
        status,
        steps: &[],
    }
}

async fn aof_061_05(ctx: Ctx) -> CheckResult {
    let case = Case {
        steps: &[("in-progress", "review")],
        ..outcome_case("partial", "review")
    };
    let (_, events) = recovers(&ctx, &case).await?;
    events.expect_reason(TASK_1, "review", "partial")
}

async fn aof_061_06(ctx: Ctx) -> CheckResult {
    let case = Case {
        steps: &[("in-progress", "review")],
        ..outcome_case("needs_review", "review")
    };
    recovers(&ctx, &case).await?;
    Ok(())
}

async fn aof_061_07(ctx: Ctx) -> CheckResult {
    let case = Case {
        steps: &[("in-progress", "blocked")],
        ..outcome_case("blocked", "blocked")
    };
    let (_, events) = recovers(&ctx, &case).await?;
    events.expect_reason(TASK_1, "blocked", "Dependency not ready")
}

async fn aof_061_08(ctx: Ctx) -> CheckResult {
    let case = Case {
        no_review: true,
        steps: &[("in-progress", "review"), ("review", "done")],
        ..outcome_case("done", "done")
    };
    recovers(&ctx, &case).await?;
    Ok(())
}

async fn aof_061_09(ctx: Ctx) -> CheckResult {
    let case = Case {
        steps: &[("in-progress", "review")],
        ..outcome_case("done", "review")
    };
    recovers(&ctx, &case).await?;
    Ok(())
}

async fn aof_061_10(ctx: Ctx) -> CheckResult {
    let (adapter, _) = recovers(&ctx, &RECLAIM).await?;
    let run = run_json(&adapter).await?;
    ensure_eq!(json!("failed"), run["status"], "run.json status");
    ensure_eq!(
        json!(POLL_AT),
        run["metadata"]["expiredAt"],
        "run.json metadata.expiredAt"
    );
    Ok(())
}

async fn aof_061_11(ctx: Ctx) -> CheckResult {
    let (adapter, _) = recovers(&ctx, &RECLAIM).await?;
    let run = run_json(&adapter).await?;
    ensure_eq!(
        json!("stale_heartbeat"),
        run["metadata"]["expiredReason"],
        "run.json metadata.expiredReason"
    );
    ensure_eq!(json!("failed"), run["status"], "run.json status");
    Ok(())
}

async fn aof_061_12(ctx: Ctx) -> CheckResult {
    let adapter = Adapter::new(&ctx)?;
    stale(&adapter, &RECLAIM).await?;
    let before = disk::tasks_snapshot(adapter.data_dir())?;
    let (planned, events) = poll(&adapter, true).await?;
    ensure_eq!(json!(true), planned["dryRun"], "dryRun of the dry-run poll");
    ensure_stale_actions(&planned, TASK_1, 1)?;
    events.expect_transitions(TASK_1, &[])?;
    disk::ensure_tasks_unchanged(adapter.data_dir(), &before, "a dry-run poll")?;
    let (executed, events) = poll(&adapter, false).await?;
    ensure_eq!(json!(false), executed["dryRun"], "dryRun of the real poll");
    ensure_stale_actions(&executed, TASK_1, 1)?;
    RECLAIM.judge(&adapter, &events)
}

async fn aof_061_13(ctx: Ctx) -> CheckResult {
    let adapter = Adapter::new(&ctx)?;
    stale(&adapter, &RECLAIM).await?;
    let (report, events) = poll(&adapter, false).await?;
    RECLAIM.judge(&adapter, &events)?;
    ensure_eq!(
        json!(0),
        report["actionsExecuted"],
        "actionsExecuted of the poll"
    );
    for logged in events.of_type("scheduler.poll") {
        if let Some(counted) = logged["payload"].get("actionsExecuted") {
            ensure_eq!(
                json!(0),
                *counted,
                "actionsExecuted in the scheduler.poll event"
            );
        }
    }
    Ok(())
}

/// The five tasks of AOF-061-14.
const RECOVERY_CASES: [Case; 5] = [
    Case {
        task: TASK_1,
        no_review: false,
        outcome: None,
        status: "ready",
        steps: &[("in-progress", "ready")],
    },
    Case {
        task: TASK_2,
        no_review: false,
        outcome: Some("partial"),
        status: "review",
        steps: &[("in-progress", "review")],
    },
    Case {
        task: TASK_3,
        no_review: false,
        outcome: Some("blocked"),
        status: "blocked",
        steps: &[("in-progress", "blocked")],
    },
    Case {
        task: TASK_4,
        no_review: true,
        outcome: Some("done"),
        status: "done",
        steps: &[("in-progress", "review"), ("review", "done")],
    },
    Case {
        task: TASK_5,
        no_review: false,
        outcome: Some("needs_review"),
        status: "review",
        steps: &[("in-progress", "review")],
    },
];

async fn aof_061_14(ctx: Ctx) -> CheckResult {
    let adapter = Adapter::new(&ctx)?;
    for case in &RECOVERY_CASES {
        stale(&adapter, case).await?;
    }
    let (report, events) = poll(&adapter, false).await?;
    for case in &RECOVERY_CASES {
        ensure_stale_actions(&report, case.task, 1)?;
        case.judge(&adapter, &events)?;
    }
    Ok(())
}
