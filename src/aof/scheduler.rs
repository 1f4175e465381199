//! The scheduler poll and session-end processing: stale heartbeats are found and recovered, and
//! run results left by ended sessions are applied.
//!
//! A heartbeat is stale when `expiresAt <= now` (or, without `expiresAt`, when `lastHeartbeat +
//! heartbeatTtlMs <= now`); only `in-progress` tasks are checked. Recovery applies the task's
//! `run_result.json` outcome (reason `stale_heartbeat_<outcome>`), or without one reclaims the task
//! to `ready` (reason `stale_heartbeat_reclaim`) and marks `run.json` failed and expired. ski's poll
//! plans no dispatch actions, and `stale_heartbeat` actions never count in `actionsExecuted`.

use std::time::Instant;

use serde::Serialize;
use serde_json::json;

use super::clock::Clock;
use super::completion::{
    AppliedTransition, apply_steps, outcome_reason, resolve_completion_transitions,
};
use super::data_dir::{DataDir, Journal};
use super::error::{AofError, describe};
use super::event::{Event, kind};
use super::task::TaskStatus;
use super::task_id::TaskId;
use super::timestamp::Timestamp;

/// The default heartbeat TTL, 5 minutes.
pub const DEFAULT_HEARTBEAT_TTL_MS: i64 = 300_000;
/// The actor of scheduler events.
pub const SCHEDULER_ACTOR: &str = "scheduler";
/// The actor of session-end events.
pub const SESSION_END_ACTOR: &str = "session-end";

/// Poll options.
#[derive(Debug, Clone, Copy)]
pub struct PollConfig {
    /// Plan only; change nothing.
    pub dry_run: bool,
    /// TTL for heartbeats without `expiresAt`.
    pub heartbeat_ttl_ms: i64,
}

impl Default for PollConfig {
    fn default() -> Self {
        Self {
            dry_run: false,
            heartbeat_ttl_ms: DEFAULT_HEARTBEAT_TTL_MS,
        }
    }
}

/// A task whose heartbeat went stale.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StaleHeartbeat {
    /// The task.
    pub task_id: TaskId,
    /// The agent that stopped beating.
    pub agent_id: String,
    /// The last beat.
    pub last_heartbeat: Timestamp,
    /// The expiry that passed.
    pub expires_at: Timestamp,
}

/// One planned scheduler action.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SchedulerAction {
    /// Always `stale_heartbeat` in ski.
    #[serde(rename = "type")]
    pub kind: String,
    /// The task.
    pub task_id: TaskId,
    /// Its title.
    pub task_title: String,
    /// The agent concerned.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// Why.
    pub reason: String,
    /// The task's status when planned.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub from_status: Option<TaskStatus>,
    /// What executing it did (absent in a dry run).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result: Option<ActionResult>,
}

/// What executing one action did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ActionResult {
    /// `reclaimed`, `outcome_applied`, `skipped` or `failed`.
    pub status: String,
    /// The outcome applied, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub outcome: Option<String>,
    /// Transitions made.
    pub transitions: Vec<AppliedTransition>,
    /// Whether `run.json` was marked expired.
    pub run_expired: bool,
    /// The error, when it failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Task counts by status.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PollStats {
    /// All tasks.
    pub total: usize,
    /// In backlog.
    pub backlog: usize,
    /// Ready.
    pub ready: usize,
    /// In progress.
    pub in_progress: usize,
    /// Blocked.
    pub blocked: usize,
    /// In review.
    pub review: usize,
    /// Done.
    pub done: usize,
}

/// The result of one poll.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PollResult {
    /// When the poll ran.
    pub scanned_at: Timestamp,
    /// Wall time the poll took.
    pub duration_ms: u64,
    /// Whether it only planned.
    pub dry_run: bool,
    /// The planned actions.
    pub actions: Vec<SchedulerAction>,
    /// Counts by status, before the actions ran.
    pub stats: PollStats,
    /// Dispatch actions executed (stale heartbeat recovery does not count).
    pub actions_executed: usize,
    /// Actions that failed.
    pub actions_failed: usize,
    /// Stale heartbeat actions executed.
    pub stale_heartbeats_processed: usize,
    /// Events logged by the poll.
    pub events: Vec<Event>,
}

/// In-progress tasks whose heartbeat is stale at `now`.
pub fn check_stale_heartbeats(
    data: &DataDir,
    now: Timestamp,
    ttl_ms: i64,
) -> Result<Vec<StaleHeartbeat>, AofError> {
    let mut stale = Vec::new();
    for id in data.store.ids_in(TaskStatus::InProgress)? {
        let Some(heartbeat) = data.runs.read_heartbeat(&id)? else {
            continue;
        };
        if heartbeat.is_stale(now, ttl_ms) {
            stale.push(StaleHeartbeat {
                expires_at: heartbeat
                    .expires_at
                    .unwrap_or_else(|| heartbeat.last_heartbeat.plus_ms(ttl_ms)),
                task_id: id,
                agent_id: heartbeat.agent_id,
                last_heartbeat: heartbeat.last_heartbeat,
            });
        }
    }
    Ok(stale)
}

/// Runs one scheduler poll.
pub fn poll(data: &DataDir, clock: &dyn Clock, config: PollConfig) -> Result<PollResult, AofError> {
    let started = Instant::now();
    let now = clock.now();
    let mut journal = Journal::new(&data.events, now);
    let (tasks, _broken) = data.store.list()?;
    let mut stats = PollStats {
        total: tasks.len(),
        ..PollStats::default()
    };
    for task in &tasks {
        let counter = match task.status() {
            TaskStatus::Backlog => &mut stats.backlog,
            TaskStatus::Ready => &mut stats.ready,
            TaskStatus::InProgress => &mut stats.in_progress,
            TaskStatus::Blocked => &mut stats.blocked,
            TaskStatus::Review => &mut stats.review,
            TaskStatus::Done => &mut stats.done,
        };
        *counter += 1;
    }
    let mut actions = Vec::new();
    for stale in check_stale_heartbeats(data, now, config.heartbeat_ttl_ms)? {
        let title = tasks
            .iter()
            .find(|task| task.id() == &stale.task_id)
            .map(|task| task.frontmatter.title.clone())
            .unwrap_or_default();
        actions.push(SchedulerAction {
            kind: "stale_heartbeat".into(),
            task_id: stale.task_id.clone(),
            task_title: title,
            agent: Some(stale.agent_id.clone()),
            reason: format!("heartbeat expired at {}", stale.expires_at),
            from_status: Some(TaskStatus::InProgress),
            result: None,
        });
    }
    let mut processed = 0;
    let mut failed = 0;
    if !config.dry_run {
        for action in &mut actions {
            let result = recover_stale(data, &mut journal, &action.task_id, config, now);
            let result = match result {
                Ok(result) => result,
                Err(error) => {
                    failed += 1;
                    ActionResult {
                        status: "failed".into(),
                        outcome: None,
                        transitions: Vec::new(),
                        run_expired: false,
                        error: Some(describe(&error)),
                    }
                }
            };
            if result.status != "failed" {
                processed += 1;
            }
            action.result = Some(result);
        }
    }
    let reason = if tasks.is_empty() {
        Some("no_tasks")
    } else if config.dry_run {
        Some("dry_run_mode")
    } else if stats.ready == 0 {
        Some("no_ready_tasks")
    } else {
        Some("no_executor")
    };
    journal.emit(
        kind::SCHEDULER_POLL,
        SCHEDULER_ACTOR,
        None,
        json!({
            "dryRun": config.dry_run,
            "tasksEvaluated": tasks.len(),
            "tasksReady": stats.ready,
            "actionsPlanned": actions.len(),
            "actionsExecuted": 0,
            "actionsFailed": failed,
            "staleHeartbeatsProcessed": processed,
            "alertsRaised": 0,
            "leasesExpired": 0,
            "tasksRequeued": actions
                .iter()
                .filter(|a| a.result.as_ref().is_some_and(|r| r.status == "reclaimed"))
                .count(),
            "stats": stats,
            "reason": reason,
        }),
    )?;
    Ok(PollResult {
        scanned_at: now,
        duration_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
        dry_run: config.dry_run,
        actions,
        stats,
        actions_executed: 0,
        actions_failed: failed,
        stale_heartbeats_processed: processed,
        events: journal.recorded,
    })
}

/// Executes one stale heartbeat action under the task's lock.
fn recover_stale(
    data: &DataDir,
    journal: &mut Journal<'_>,
    id: &TaskId,
    config: PollConfig,
    now: Timestamp,
) -> Result<ActionResult, AofError> {
    let _lock = data.store.lock(id)?;
    let skipped = || ActionResult {
        status: "skipped".into(),
        outcome: None,
        transitions: Vec::new(),
        run_expired: false,
        error: None,
    };
    let Some(mut task) = data.store.load(id)? else {
        return Ok(skipped());
    };
    let still_stale = data
        .runs
        .read_heartbeat(id)?
        .is_some_and(|hb| hb.is_stale(now, config.heartbeat_ttl_ms));
    if task.status() != TaskStatus::InProgress || !still_stale {
        return Ok(skipped());
    }
    match data.runs.read_result(id)? {
        Some(result) => {
            let steps = resolve_completion_transitions(
                task.status(),
                result.outcome,
                task.frontmatter.review_required(),
            );
            let mut reason = format!("stale_heartbeat_{}", result.outcome.as_str());
            let detail = outcome_reason(result.outcome, &result.blockers, "");
            if !detail.is_empty() {
                reason = format!("{reason}: {detail}");
            }
            let transitions = apply_steps(
                data,
                journal,
                &mut task,
                &steps,
                &reason,
                SCHEDULER_ACTOR,
                now,
            )?;
            Ok(ActionResult {
                status: "outcome_applied".into(),
                outcome: Some(result.outcome.as_str().to_owned()),
                transitions,
                run_expired: false,
                error: None,
            })
        }
        None => {
            let transitions = apply_steps(
                data,
                journal,
                &mut task,
                &[TaskStatus::Ready],
                "stale_heartbeat_reclaim",
                SCHEDULER_ACTOR,
                now,
            )?;
            let run_expired = data.runs.mark_expired(id, "stale_heartbeat", now)?;
            if run_expired {
                journal.emit(
                    kind::RUN_EXPIRED,
                    SCHEDULER_ACTOR,
                    Some(id),
                    json!({ "reason": "stale_heartbeat", "status": "failed" }),
                )?;
            }
            Ok(ActionResult {
                status: "reclaimed".into(),
                outcome: None,
                transitions,
                run_expired,
                error: None,
            })
        }
    }
}

/// What session-end processing did to one task.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionEndTask {
    /// The task.
    pub task_id: TaskId,
    /// The outcome applied.
    pub outcome: String,
    /// Transitions made.
    pub transitions: Vec<AppliedTransition>,
}

/// The result of session-end processing.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionEndReport {
    /// Tasks with a run result that was applied.
    pub tasks: Vec<SessionEndTask>,
    /// Events logged.
    pub events: Vec<Event>,
}

/// Applies the run result of every in-progress task that has one; logs nothing for the others.
pub fn session_end(data: &DataDir, clock: &dyn Clock) -> Result<SessionEndReport, AofError> {
    let now = clock.now();
    let mut journal = Journal::new(&data.events, now);
    let mut tasks = Vec::new();
    for id in data.store.ids_in(TaskStatus::InProgress)? {
        let _lock = data.store.lock(&id)?;
        let Some(mut task) = data.store.load(&id)? else {
            continue;
        };
        if task.status() != TaskStatus::InProgress {
            continue;
        }
        let Some(result) = data.runs.read_result(&id)? else {
            continue;
        };
        let steps = resolve_completion_transitions(
            task.status(),
            result.outcome,
            task.frontmatter.review_required(),
        );
        let reason = outcome_reason(result.outcome, &result.blockers, &result.notes);
        let transitions = apply_steps(
            data,
            &mut journal,
            &mut task,
            &steps,
            &reason,
            SESSION_END_ACTOR,
            now,
        )?;
        tasks.push(SessionEndTask {
            task_id: id,
            outcome: result.outcome.as_str().to_owned(),
            transitions,
        });
    }
    Ok(SessionEndReport {
        tasks,
        events: journal.recorded,
    })
}
