//! TASK-057 scenarios on the run result artifact (AOF-057-21 to AOF-057-24): `run result`
//! writes, `run show` reads, and the checks read `run_result.json` from the data dir itself.

use serde_json::{Value, json};

use super::adapter::Adapter;
use super::expect;
use super::fixture;
use super::message::{self, TASK_1};
use crate::{Check, CheckResult, Ctx, Failure, ensure_eq};

/// The checks of this module.
pub fn checks() -> Vec<Check> {
    vec![
        Check::new(
            "AOF-057-21",
            "Creates TASK-2026-02-09-001 in-progress, writes a partial RunResult with `run result`, \
             then reads <data dir>/runs/TASK-2026-02-09-001/run_result.json from disk: it must be \
             there, be JSON, conform to the RunResult schema and hold what was written.",
            aof_057_21,
        ),
        Check::new(
            "AOF-057-22",
            "Writes a RunResult, then reads it with `run show`: runResult must equal both what was \
             written and the file on disk.",
            aof_057_22,
        ),
        Check::new(
            "AOF-057-23",
            "Reads the run result of an in-progress task that has none with `run show`: exit 0, \
             runResult null, no error on stderr.",
            aof_057_23,
        ),
        Check::new(
            "AOF-057-24",
            "Writes a RunResult with two deliverables, a blocker and notes; the file on disk must \
             keep all three fields exactly.",
            aof_057_24,
        ),
    ]
}

/// Task 1 in progress with `result` written as its run result.
async fn given_result(ctx: &Ctx, result: &Value) -> Result<Adapter, crate::CheckError> {
    let adapter = Adapter::new(ctx)?;
    fixture::task(&adapter, TASK_1, "in-progress").await?;
    fixture::run_result(&adapter, TASK_1, result).await?;
    Ok(adapter)
}

async fn aof_057_21(ctx: Ctx) -> CheckResult {
    let written = message::with(
        message::run_result(TASK_1, "partial"),
        json!({"completedAt": "2026-02-09T21:30:00.000Z"}),
    );
    let adapter = given_result(&ctx, &written).await?;
    let on_disk = expect::run_result_on_disk(&adapter, TASK_1).await?;
    let problems = expect::run_result_problems(&on_disk);
    if !problems.is_empty() {
        return Err(Failure::new(
            "run_result.json matches the RunResult schema",
            "taskId, agentId, completedAt, outcome, summaryRef, handoffRef, deliverables, tests, \
             blockers and notes of the right types",
        )
        .actual(format!("{}; file: {on_disk}", problems.join("; ")))
        .into());
    }
    ensure_eq!(written, on_disk, "run_result.json on disk");
    Ok(())
}

async fn aof_057_22(ctx: Ctx) -> CheckResult {
    let written = message::run_result(TASK_1, "needs_review");
    let adapter = given_result(&ctx, &written).await?;
    let on_disk = expect::run_result_on_disk(&adapter, TASK_1).await?;
    let shown = adapter.run_show(TASK_1).await?;
    ensure_eq!(
        written,
        shown["runResult"],
        "runResult read back by `run show`"
    );
    ensure_eq!(
        on_disk,
        shown["runResult"],
        "runResult read back against the file on disk"
    );
    Ok(())
}

async fn aof_057_23(ctx: Ctx) -> CheckResult {
    let adapter = Adapter::new(&ctx)?;
    fixture::task(&adapter, TASK_1, "in-progress").await?;
    let output = adapter
        .run_data(&["run", "show", "--task", TASK_1], None, None)
        .await?;
    let shown = output.ok_json()?;
    ensure_eq!(
        Value::Null,
        shown["runResult"],
        "runResult of a task without one"
    );
    if output.stderr.contains("error") {
        return Err(
            Failure::new("no error is reported", "nothing about an error on stderr")
                .actual(output.stderr.trim().to_owned())
                .into(),
        );
    }
    expect::no_run_result(&adapter, TASK_1).await
}

async fn aof_057_24(ctx: Ctx) -> CheckResult {
    let written = message::with(
        message::run_result(TASK_1, "partial"),
        json!({
            "deliverables": ["src/foo.ts", "src/bar.ts"],
            "blockers": ["API key needed"],
            "notes": "Partial completion due to blocker",
        }),
    );
    let adapter = given_result(&ctx, &written).await?;
    let on_disk = expect::run_result_on_disk(&adapter, TASK_1).await?;
    for field in ["deliverables", "blockers", "notes"] {
        ensure_eq!(written[field], on_disk[field], "{field} in run_result.json");
    }
    Ok(())
}
