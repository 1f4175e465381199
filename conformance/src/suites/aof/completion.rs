//! TASK-059 scenarios (AOF-059-01 to AOF-059-22): completion reports and their outcome mapping,
//! session end, `resolve`, and status updates with and without a status (the Work Log).

use serde_json::{Value, json};

use super::adapter::Adapter;
use super::delivery::{self, Delivery};
use super::disk;
use super::events::Events;
use super::expect;
use super::fixture::{self, TaskSpec};
use super::message::{self, NOW, TASK_1, TASK_2, TASK_3, TASK_4, TASK_5};
use crate::{Check, CheckError, CheckResult, Ctx, Failure, ensure, ensure_eq};

/// The checks of this module.
pub fn checks() -> Vec<Check> {
    vec![
        Check::new(
            "AOF-059-01",
            "Routes completion.report outcome done for an in-progress task (reviewRequired unset); \
             expects runs/<id>/run_result.json with outcome done, the task in tasks/review/, one \
             transition in-progress → review and task.completed.",
            aof_059_01,
        ),
        Check::new(
            "AOF-059-02",
            "Routes outcome done for a task with reviewRequired false; expects run_result.json, the \
             task in tasks/done/ and task.transitioned in-progress → review then review → done.",
            aof_059_02,
        ),
        Check::new(
            "AOF-059-03",
            "Routes outcome blocked with blockers [\"API key needed\"]; expects run_result.json, the \
             task in tasks/blocked/, a transition reason naming the blocker and task.completed.",
            aof_059_03,
        ),
        Check::new(
            "AOF-059-04",
            "Routes outcome needs_review; expects run_result.json, the task in tasks/review/ and \
             task.completed.",
            aof_059_04,
        ),
        Check::new(
            "AOF-059-05",
            "Routes outcome partial with notes; expects run_result.json with the notes, the task in \
             tasks/review/ and task.completed.",
            aof_059_05,
        ),
        Check::new(
            "AOF-059-06",
            "Routes outcome partial for a task already in review; expects run_result.json written, \
             no task.transitioned, the task still in review, and task.completed.",
            aof_059_06,
        ),
        Check::new(
            "AOF-059-07",
            "Writes a partial run_result.json for an in-progress task, runs `session-end`; expects \
             the task in tasks/review/ and task.transitioned in-progress → review.",
            aof_059_07,
        ),
        Check::new(
            "AOF-059-08",
            "Runs `session-end` with an in-progress task without run_result.json; expects exit 0, \
             no task change and no event at all.",
            aof_059_08,
        ),
        Check::new(
            "AOF-059-09",
            "Five in-progress tasks with run results done, done (reviewRequired false), blocked, \
             needs_review and partial; after `session-end` each must be in review, done, blocked, \
             review and review with exactly its own transitions.",
            aof_059_09,
        ),
        Check::new(
            "AOF-059-10",
            "Runs `resolve --status in-progress --outcome done --review-required true`; expects \
             [\"review\"].",
            aof_059_10,
        ),
        Check::new(
            "AOF-059-11",
            "Runs `resolve` for outcome done with reviewRequired false; expects [\"review\", \"done\"].",
            aof_059_11,
        ),
        Check::new(
            "AOF-059-12",
            "Runs `resolve` for outcome blocked; expects [\"blocked\"].",
            aof_059_12,
        ),
        Check::new(
            "AOF-059-13",
            "Runs `resolve` for outcome needs_review; expects [\"review\"].",
            aof_059_13,
        ),
        Check::new(
            "AOF-059-14",
            "Runs `resolve` for outcome partial; expects [\"review\"].",
            aof_059_14,
        ),
        Check::new(
            "AOF-059-15",
            "Runs `resolve --status review --outcome partial`; expects [] (E-AOF-11).",
            aof_059_15,
        ),
        Check::new(
            "AOF-059-16",
            "Routes status.update with status blocked and a blocker for an in-progress task; expects \
             the task in tasks/blocked/ and task.transitioned whose reason names the blocker.",
            aof_059_16,
        ),
        Check::new(
            "AOF-059-17",
            "Routes status.update with only progress; expects the task still in-progress, no \
             transition, and a Work Log entry with the progress text and the current time.",
            aof_059_17,
        ),
        Check::new(
            "AOF-059-18",
            "Routes status.update with only notes; expects the status unchanged and a Work Log entry \
             with the notes.",
            aof_059_18,
        ),
        Check::new(
            "AOF-059-19",
            "Routes status.update with only two blockers; expects the status unchanged and a Work \
             Log entry listing both.",
            aof_059_19,
        ),
        Check::new(
            "AOF-059-20",
            "Routes a progress update to a task whose body has no Work Log; expects the body kept, \
             then one \"## Work Log\" heading appended with the entry under it.",
            aof_059_20,
        ),
        Check::new(
            "AOF-059-21",
            "Routes a notes update to a task whose body has a Work Log with one entry; expects one \
             Work Log section holding the old entry, then the new one.",
            aof_059_21,
        ),
        Check::new(
            "AOF-059-22",
            "Routes status.update status blocked with notes to a task already blocked; expects no \
             transition and a Work Log entry with the notes.",
            aof_059_22,
        ),
    ]
}

/// Routes a completion report for `task` and expects it handled, `run_result.json` on disk for
/// it with `outcome`, and `task.completed` with `outcome`.
async fn complete(adapter: &Adapter, task: &str, payload: Value) -> Result<Delivery, CheckError> {
    let outcome = payload["outcome"].clone();
    let report = message::envelope("completion.report", task, payload);
    let routed = delivery::route(adapter, &report, NOW, "handled").await?;
    let result = expect::run_result_on_disk(adapter, task).await?;
    ensure_eq!(outcome, result["outcome"], "outcome in run_result.json");
    ensure_eq!(json!(task), result["taskId"], "taskId in run_result.json");
    routed
        .events
        .expect("task.completed", json!({"outcome": outcome}))?;
    Ok(routed)
}

async fn aof_059_01(ctx: Ctx) -> CheckResult {
    let adapter = Adapter::new(&ctx)?;
    fixture::task(&adapter, TASK_1, "in-progress").await?;
    let routed = complete(&adapter, TASK_1, message::completion("done")).await?;
    let dir = expect::run_dir(&adapter, TASK_1).await?;
    ensure!(
        dir.join("run_result.json").is_file(),
        "run_result.json in runs/TASK-2026-02-09-001/"
    );
    disk::ensure_status(adapter.data_dir(), TASK_1, "review")?;
    routed
        .events
        .expect_transitions(TASK_1, &[("in-progress", "review")])
}

async fn aof_059_02(ctx: Ctx) -> CheckResult {
    let adapter = Adapter::new(&ctx)?;
    TaskSpec::new(TASK_1, "in-progress")
        .metadata(json!({"reviewRequired": false}))
        .create(&adapter)
        .await?;
    let routed = complete(&adapter, TASK_1, message::completion("done")).await?;
    disk::ensure_status(adapter.data_dir(), TASK_1, "done")?;
    routed
        .events
        .expect_transitions(TASK_1, &[("in-progress", "review"), ("review", "done")])
}

async fn aof_059_03(ctx: Ctx) -> CheckResult {
    let adapter = Adapter::new(&ctx)?;
    fixture::task(&adapter, TASK_1, "in-progress").await?;
    let payload = message::with(
        message::completion("blocked"),
        json!({"blockers": ["API key needed"]}),
    );
    let routed = complete(&adapter, TASK_1, payload).await?;
    disk::ensure_status(adapter.data_dir(), TASK_1, "blocked")?;
    routed
        .events
        .expect_transitions(TASK_1, &[("in-progress", "blocked")])?;
    routed
        .events
        .expect_reason(TASK_1, "blocked", "API key needed")
}

/// An in-progress task completed with `payload` ends in review with one transition.
async fn completes_to_review(ctx: &Ctx, payload: Value) -> Result<Adapter, CheckError> {
    let adapter = Adapter::new(ctx)?;
    fixture::task(&adapter, TASK_1, "in-progress").await?;
    let routed = complete(&adapter, TASK_1, payload).await?;
    disk::ensure_status(adapter.data_dir(), TASK_1, "review")?;
    routed
        .events
        .expect_transitions(TASK_1, &[("in-progress", "review")])?;
    Ok(adapter)
}

async fn aof_059_04(ctx: Ctx) -> CheckResult {
    completes_to_review(&ctx, message::completion("needs_review")).await?;
    Ok(())
}

async fn aof_059_05(ctx: Ctx) -> CheckResult {
    let notes = "50% complete, needs more time";
    let payload = message::with(message::completion("partial"), json!({"notes": notes}));
    let adapter = completes_to_review(&ctx, payload).await?;
    let result = expect::run_result_on_disk(&adapter, TASK_1).await?;
    ensure_eq!(json!(notes), result["notes"], "notes in run_result.json");
    Ok(())
}

async fn aof_059_06(ctx: Ctx) -> CheckResult {
    let adapter = Adapter::new(&ctx)?;
    fixture::task(&adapter, TASK_1, "review").await?;
    let routed = complete(&adapter, TASK_1, message::completion("partial")).await?;
    routed.events.expect_transitions(TASK_1, &[])?;
    disk::ensure_status(adapter.data_dir(), TASK_1, "review")?;
    Ok(())
}

/// Runs `session-end` and returns the events it logged.
async fn session_end(adapter: &Adapter) -> Result<Events, CheckError> {
    let mark = Events::mark(adapter).await?;
    adapter.session_end(NOW).await?.ok_json()?;
    Events::since(adapter, mark).await
}

async fn aof_059_07(ctx: Ctx) -> CheckResult {
    let adapter = Adapter::new(&ctx)?;
    fixture::task(&adapter, TASK_1, "in-progress").await?;
    fixture::run_result(&adapter, TASK_1, &message::run_result(TASK_1, "partial")).await?;
    let events = session_end(&adapter).await?;
    disk::ensure_status(adapter.data_dir(), TASK_1, "review")?;
    events.expect_transitions(TASK_1, &[("in-progress", "review")])
}

async fn aof_059_08(ctx: Ctx) -> CheckResult {
    let adapter = Adapter::new(&ctx)?;
    fixture::task(&adapter, TASK_1, "in-progress").await?;
    let before = disk::tasks_snapshot(adapter.data_dir())?;
    let events = session_end(&adapter).await?;
    events.expect_empty("a session end without run results")?;
    disk::ensure_tasks_unchanged(adapter.data_dir(), &before, "a session end")
}

/// One task of a scenario with several in-progress tasks: how it is arranged (reviewRequired,
/// the outcome of its run result; outcome blocked comes with a blocker) and where it must end.
pub struct Case {
    /// The task.
    pub task: &'static str,
    /// Whether the task has `metadata.reviewRequired: false`.
    pub no_review: bool,
    /// The run result's outcome, or none.
    pub outcome: Option<&'static str>,
    /// The status it must end in.
    pub status: &'static str,
    /// Its transitions, in order.
    pub steps: &'static [(&'static str, &'static str)],
}

impl Case {
    /// Creates the task in progress and writes its run result.
    pub async fn arrange(&self, adapter: &Adapter) -> CheckResult {
        let mut spec = TaskSpec::new(self.task, "in-progress");
        if self.no_review {
            spec = spec.metadata(json!({"reviewRequired": false}));
        }
        spec.create(adapter).await?;
        if let Some(outcome) = self.outcome {
            let mut result = message::run_result(self.task, outcome);
            if outcome == "blocked" {
                result["blockers"] = json!(["Dependency not ready"]);
            }
            fixture::run_result(adapter, self.task, &result).await?;
        }
        Ok(())
    }

    /// Checks the task's final status and its transitions among `events`.
    pub fn judge(&self, adapter: &Adapter, events: &Events) -> CheckResult {
        disk::ensure_status(adapter.data_dir(), self.task, self.status)?;
        events.expect_transitions(self.task, self.steps)
    }
}

/// One task per outcome, as in AOF-059-09.
pub const OUTCOME_CASES: [Case; 5] = [
    Case {
        task: TASK_1,
        no_review: false,
        outcome: Some("done"),
        status: "review",
        steps: &[("in-progress", "review")],
    },
    Case {
        task: TASK_2,
        no_review: true,
        outcome: Some("done"),
        status: "done",
        steps: &[("in-progress", "review"), ("review", "done")],
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
        no_review: false,
        outcome: Some("needs_review"),
        status: "review",
        steps: &[("in-progress", "review")],
    },
    Case {
        task: TASK_5,
        no_review: false,
        outcome: Some("partial"),
        status: "review",
        steps: &[("in-progress", "review")],
    },
];

async fn aof_059_09(ctx: Ctx) -> CheckResult {
    let adapter = Adapter::new(&ctx)?;
    for case in &OUTCOME_CASES {
        case.arrange(&adapter).await?;
    }
    let events = session_end(&adapter).await?;
    for case in &OUTCOME_CASES {
        case.judge(&adapter, &events)?;
    }
    Ok(())
}

/// `resolve` from `status` for `outcome` prints `expected`.
async fn resolves(
    ctx: &Ctx,
    status: &str,
    outcome: &str,
    review_required: bool,
    expected: Value,
) -> CheckResult {
    let adapter = Adapter::new(ctx)?;
    let printed = adapter
        .resolve(status, outcome, review_required)
        .await?
        .ok_json()?;
    ensure_eq!(
        expected,
        printed,
        "the transitions for {outcome} from {status} (reviewRequired {review_required})"
    );
    Ok(())
}

async fn aof_059_10(ctx: Ctx) -> CheckResult {
    resolves(&ctx, "in-progress", "done", true, json!(["review"])).await
}

async fn aof_059_11(ctx: Ctx) -> CheckResult {
    resolves(
        &ctx,
        "in-progress",
        "done",
        false,
        json!(["review", "done"]),
    )
    .await
}

async fn aof_059_12(ctx: Ctx) -> CheckResult {
    resolves(&ctx, "in-progress", "blocked", true, json!(["blocked"])).await
}

async fn aof_059_13(ctx: Ctx) -> CheckResult {
    resolves(&ctx, "in-progress", "needs_review", true, json!(["review"])).await
}

async fn aof_059_14(ctx: Ctx) -> CheckResult {
    resolves(&ctx, "in-progress", "partial", true, json!(["review"])).await
}

async fn aof_059_15(ctx: Ctx) -> CheckResult {
    resolves(&ctx, "review", "partial", true, json!([])).await
}

/// Task 1 created from `spec`, then a status update with `fields` routed and handled.
async fn update(
    spec: TaskSpec,
    ctx: &Ctx,
    fields: Value,
) -> Result<(Adapter, Delivery), CheckError> {
    let adapter = Adapter::new(ctx)?;
    spec.create(&adapter).await?;
    let routed = delivery::route(
        &adapter,
        &message::status_update(TASK_1, fields),
        NOW,
        "handled",
    )
    .await?;
    Ok((adapter, routed))
}

async fn aof_059_16(ctx: Ctx) -> CheckResult {
    let fields = json!({"status": "blocked", "blockers": ["Waiting on dependency"]});
    let (adapter, routed) = update(TaskSpec::new(TASK_1, "in-progress"), &ctx, fields).await?;
    disk::ensure_status(adapter.data_dir(), TASK_1, "blocked")?;
    routed
        .events
        .expect_transitions(TASK_1, &[("in-progress", "blocked")])?;
    routed
        .events
        .expect_reason(TASK_1, "blocked", "Waiting on dependency")
}

/// A status update with `fields` and no status leaves the in-progress task where it is and adds
/// a Work Log entry containing `needles`.
async fn logs_work(ctx: &Ctx, fields: Value, needles: &[&str]) -> Result<String, CheckError> {
    let (adapter, routed) = update(TaskSpec::new(TASK_1, "in-progress"), ctx, fields).await?;
    routed.events.expect_transitions(TASK_1, &[])?;
    disk::ensure_status(adapter.data_dir(), TASK_1, "in-progress")?;
    disk::ensure_work_log_entry(adapter.data_dir(), TASK_1, needles)
}

async fn aof_059_17(ctx: Ctx) -> CheckResult {
    let progress = "75% complete, on track";
    logs_work(&ctx, json!({"progress": progress}), &[progress, NOW]).await?;
    Ok(())
}

async fn aof_059_18(ctx: Ctx) -> CheckResult {
    let notes = "Encountered minor issue, resolved";
    logs_work(&ctx, json!({"notes": notes}), &[notes]).await?;
    Ok(())
}

async fn aof_059_19(ctx: Ctx) -> CheckResult {
    logs_work(
        &ctx,
        json!({"blockers": ["API rate limit", "Test flake"]}),
        &["API rate limit", "Test flake"],
    )
    .await?;
    Ok(())
}

/// Fails unless the body has exactly one `## Work Log` heading.
fn one_work_log(body: &str) -> CheckResult {
    let headings = disk::work_log_headings(body);
    if headings == 1 {
        return Ok(());
    }
    Err(Failure::new(
        "the body has one Work Log section",
        "exactly one \"## Work Log\" heading",
    )
    .actual(format!("{headings} headings; body: {body:?}"))
    .into())
}

async fn aof_059_20(ctx: Ctx) -> CheckResult {
    let original = "Implement the parser.";
    let progress = "Initial work started";
    let spec = TaskSpec::new(TASK_1, "in-progress").body(original);
    let (adapter, _) = update(spec, &ctx, json!({"progress": progress})).await?;
    let file = disk::task(adapter.data_dir(), TASK_1)?;
    one_work_log(&file.body)?;
    let heading = file.body.find("## Work Log").unwrap_or(0);
    let entry = file.body.find(progress);
    ensure!(
        file.body.trim_start().starts_with(original),
        "the original body is kept before the Work Log",
        "body: {:?}",
        file.body
    );
    ensure!(
        entry.is_some_and(|at| at > heading),
        "the entry is under the \"## Work Log\" heading",
        "body: {:?}",
        file.body
    );
    disk::ensure_work_log_entry(adapter.data_dir(), TASK_1, &[progress])?;
    Ok(())
}

async fn aof_059_21(ctx: Ctx) -> CheckResult {
    let old = "- 2026-02-09T20:30:00.000Z Progress: earlier work";
    let body = format!("Implement the parser.\n\n## Work Log\n\n{old}");
    let notes = "Additional update";
    let spec = TaskSpec::new(TASK_1, "in-progress").body(&body);
    let (adapter, _) = update(spec, &ctx, json!({"notes": notes})).await?;
    let file = disk::task(adapter.data_dir(), TASK_1)?;
    one_work_log(&file.body)?;
    let entries = disk::work_log(&file.body);
    let keeps_old = entries.first().is_some_and(|e| e == old);
    let new_last = entries.len() == 2 && entries[1].contains(notes);
    ensure!(
        keeps_old && new_last,
        "the Work Log holds the old entry, then the new one",
        "entries: {entries:?}"
    );
    Ok(())
}

async fn aof_059_22(ctx: Ctx) -> CheckResult {
    let notes = "Still waiting on the vendor";
    let fields = json!({"status": "blocked", "notes": notes});
    let (adapter, routed) = update(TaskSpec::new(TASK_1, "blocked"), &ctx, fields).await?;
    routed.events.expect_transitions(TASK_1, &[])?;
    disk::ensure_status(adapter.data_dir(), TASK_1, "blocked")?;
    disk::ensure_work_log_entry(adapter.data_dir(), TASK_1, &[notes])?;
    Ok(())
}
