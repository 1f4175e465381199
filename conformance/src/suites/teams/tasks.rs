//! Feature 2, the task ledger (TEAM-TL-01…10): creation, dependencies, listing, the claim and its
//! refusals, completion with unblocking, deletion and cycle detection.

use serde_json::Value;

use super::adapter::{Adapter, LEAD};
use super::ledger;
use crate::vocabulary::capability;
use crate::vocabulary::teams;
use crate::{Check, CheckResult, Ctx, OrFail, ensure, ensure_eq};

/// The team of every row.
const TEAM: &str = "alpha-squad";
/// The teammates.
pub const RESEARCHER: &str = "agent:researcher:main";
/// The other teammate.
pub const TESTER: &str = "agent:tester:main";
/// The time the claim rows pass as `--now-ms`.
const CLAIM_AT: i64 = 1_767_225_600_000;

/// The checks of this module.
pub fn checks() -> Vec<Check> {
    vec![
        Check::new(
            "TEAM-TL-01",
            "Creates a task; expects status pending, no owner, the subject and description, empty blockedBy, createdAt set.",
            tl_01,
        ),
        Check::new(
            "TEAM-TL-02",
            "Creates T2 depending on T1; expects T2.blockedBy = [T1] (dependsOn, blocks and unknown_dependency are TEAM-SKI-04).",
            tl_02,
        ),
        Check::new(
            "TEAM-TL-03",
            "With a pending, an in-progress and a completed task, `task list --status pending` returns exactly the pending one.",
            tl_03,
        ),
        Check::new(
            "TEAM-TL-04",
            "Researcher claims T1 with --now-ms T; expects in_progress, owner researcher and claimedAt T, in the output and in the ledger.",
            tl_04,
        ),
        Check::new(
            "TEAM-TL-05",
            "Tester holds T1; researcher's claim is refused with already_claimed and \"Task already claimed by another agent\"; the owner stays tester.",
            tl_05,
        ),
        Check::new(
            "TEAM-TL-06",
            "T2 is blocked by an unfinished T1 (E-TEAM-12); its claim is refused with blocked, \"Task has unmet dependencies\" and blockedBy [T1].",
            tl_06,
        ),
        Check::new(
            "TEAM-TL-07",
            "The owner completes an in-progress task; expects completed with completedAt; completing a pending task is refused.",
            tl_07,
        ),
        Check::new(
            "TEAM-TL-08",
            "Completing T1 removes it from T2.blockedBy, reports T2 unblocked, and T2 becomes claimable.",
            tl_08,
        ),
        Check::new(
            "TEAM-TL-09",
            "Deletes a pending task; expects it hidden from the default list and a claim of it refused (the status deleted kept and invalid_transition are TEAM-SKI-06).",
            tl_09,
        ),
        Check::new(
            "TEAM-TL-10",
            "Makes A depend on B, then B on A; expects dependency_cycle with the cycle and B unchanged, or, with the setting cycle_detection = \"query\", the edge added and `task cycles` reporting a cycle of A and B.",
            tl_10,
        ),
    ]
}

/// A team with the lead, researcher and tester.
pub async fn team(adapter: &Adapter) -> Result<(), crate::CheckError> {
    adapter.create_team(TEAM).await?;
    adapter.join(TEAM, RESEARCHER, "researcher").await?;
    adapter.join(TEAM, TESTER, "tester").await?;
    Ok(())
}

/// The strings of a JSON array of ids (none when it is not an array).
pub fn ids(value: &Value) -> Vec<String> {
    value
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

async fn tl_01(ctx: Ctx) -> CheckResult {
    let adapter = Adapter::new(&ctx);
    team(&adapter).await?;
    let value = adapter
        .ok(
            LEAD,
            &[
                "task",
                "create",
                TEAM,
                "--subject",
                "Parse input",
                "--description",
                "the parser",
                "--now-ms",
                "1000",
            ],
        )
        .await?;
    let task = &value["task"];
    ensure_eq!(
        "pending",
        task["status"].as_str().unwrap_or(""),
        "the new task's status"
    );
    ensure!(
        task["owner"].is_null(),
        "the new task has no owner",
        "{task}"
    );
    ensure_eq!(
        "Parse input",
        task["subject"].as_str().unwrap_or(""),
        "the subject"
    );
    ensure_eq!(
        "the parser",
        task["description"].as_str().unwrap_or(""),
        "the description"
    );
    ensure_eq!(Vec::<String>::new(), ids(&task["blockedBy"]), "blockedBy");
    ensure_eq!(Some(1000), task["createdAt"].as_i64(), "createdAt");
    let id = task["id"].as_str().or_fail("task.id")?;
    ensure_eq!(
        *task,
        adapter.task(TEAM, id).await?,
        "task show of the new task"
    );
    Ok(())
}

async fn tl_02(ctx: Ctx) -> CheckResult {
    let adapter = Adapter::new(&ctx);
    team(&adapter).await?;
    let t1 = adapter.create_task(TEAM, "T1", &[]).await?;
    let t2 = adapter.create_task(TEAM, "T2", &[&t1]).await?;
    let task2 = adapter.task(TEAM, &t2).await?;
    ensure_eq!(vec![t1.clone()], ids(&task2["blockedBy"]), "T2.blockedBy");
    Ok(())
}

async fn tl_03(ctx: Ctx) -> CheckResult {
    let adapter = Adapter::new(&ctx);
    team(&adapter).await?;
    let pending = adapter.create_task(TEAM, "pending one", &[]).await?;
    let working = adapter.create_task(TEAM, "in progress", &[]).await?;
    let done = adapter.create_task(TEAM, "completed", &[]).await?;
    adapter
        .ok(RESEARCHER, &["task", "claim", TEAM, &working])
        .await?;
    adapter.ok(TESTER, &["task", "claim", TEAM, &done]).await?;
    adapter
        .ok(TESTER, &["task", "complete", TEAM, &done])
        .await?;
    let listed = adapter
        .ok(LEAD, &["task", "list", TEAM, "--status", "pending"])
        .await?;
    let listed: Vec<String> = listed["tasks"]
        .as_array()
        .map(|t| {
            t.iter()
                .filter_map(|t| t["id"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    ensure_eq!(
        vec![pending],
        listed,
        "the ids listed by task list --status pending"
    );
    Ok(())
}

async fn tl_04(ctx: Ctx) -> CheckResult {
    ctx.require(capability::TEAMS_LEDGER_READ)?;
    let adapter = Adapter::new(&ctx);
    team(&adapter).await?;
    let t1 = adapter.create_task(TEAM, "T1", &[]).await?;
    let now = CLAIM_AT.to_string();
    let claimed = adapter
        .ok(RESEARCHER, &["--now-ms", &now, "task", "claim", TEAM, &t1])
        .await?;
    let task = &claimed["task"];
    ensure_eq!(
        "in_progress",
        task["status"].as_str().unwrap_or(""),
        "the claimed task's status"
    );
    ensure_eq!(
        RESEARCHER,
        task["owner"].as_str().unwrap_or(""),
        "the claimed task's owner"
    );
    ensure_eq!(Some(CLAIM_AT), task["claimedAt"].as_i64(), "claimedAt");
    let row = ledger::task(&ctx, &ledger::path(adapter.root(), TEAM), &t1)
        .await?
        .or_fail("the task's row in the ledger")?;
    ensure_eq!(
        ledger::Row {
            status: "in_progress".into(),
            owner: Some(RESEARCHER.into()),
            claimed_at: Some(CLAIM_AT),
            completed_at: None
        },
        row,
        "the task's row in ledger.db"
    );
    Ok(())
}

async fn tl_05(ctx: Ctx) -> CheckResult {
    let adapter = Adapter::new(&ctx);
    team(&adapter).await?;
    let t1 = adapter.create_task(TEAM, "T1", &[]).await?;
    adapter.ok(TESTER, &["task", "claim", TEAM, &t1]).await?;
    let error = adapter
        .refused(RESEARCHER, &["task", "claim", TEAM, &t1], "already_claimed")
        .await?;
    let expected = ctx.text("already_claimed", "Task already claimed by another agent");
    ensure!(
        error["message"].as_str().unwrap_or("").contains(&expected),
        "the error message is the document's",
        "{}",
        error["message"]
    );
    let task = adapter.task(TEAM, &t1).await?;
    ensure_eq!(
        TESTER,
        task["owner"].as_str().unwrap_or(""),
        "the owner after the refused claim"
    );
    Ok(())
}

async fn tl_06(ctx: Ctx) -> CheckResult {
    let adapter = Adapter::new(&ctx);
    team(&adapter).await?;
    let t1 = adapter.create_task(TEAM, "T1", &[]).await?;
    let t2 = adapter.create_task(TEAM, "T2", &[&t1]).await?;
    let error = adapter
        .refused(RESEARCHER, &["task", "claim", TEAM, &t2], "blocked")
        .await?;
    let expected = ctx.text("blocked", "Task has unmet dependencies");
    ensure!(
        error["message"].as_str().unwrap_or("").contains(&expected),
        "the error message is the document's",
        "{}",
        error["message"]
    );
    ensure_eq!(vec![t1], ids(&error["blockedBy"]), "the error's blockedBy");
    let task = adapter.task(TEAM, &t2).await?;
    ensure_eq!(
        "pending",
        task["status"].as_str().unwrap_or(""),
        "T2's status after the refused claim"
    );
    Ok(())
}

async fn tl_07(ctx: Ctx) -> CheckResult {
    let adapter = Adapter::new(&ctx);
    team(&adapter).await?;
    let t1 = adapter.create_task(TEAM, "T1", &[]).await?;
    adapter
        .refused(
            RESEARCHER,
            &["task", "complete", TEAM, &t1],
            "invalid_transition",
        )
        .await?;
    adapter
        .ok(RESEARCHER, &["task", "claim", TEAM, &t1])
        .await?;
    let done = adapter
        .ok(
            RESEARCHER,
            &["--now-ms", "2000", "task", "complete", TEAM, &t1],
        )
        .await?;
    ensure_eq!(
        "completed",
        done["task"]["status"].as_str().unwrap_or(""),
        "the completed task's status"
    );
    ensure_eq!(
        Some(2000),
        done["task"]["completedAt"].as_i64(),
        "completedAt"
    );
    let task = adapter.task(TEAM, &t1).await?;
    ensure_eq!(
        "completed",
        task["status"].as_str().unwrap_or(""),
        "task show after completion"
    );
    Ok(())
}

async fn tl_08(ctx: Ctx) -> CheckResult {
    let adapter = Adapter::new(&ctx);
    team(&adapter).await?;
    let t1 = adapter.create_task(TEAM, "T1", &[]).await?;
    let t2 = adapter.create_task(TEAM, "T2", &[&t1]).await?;
    adapter.ok(TESTER, &["task", "claim", TEAM, &t1]).await?;
    let done = adapter.ok(TESTER, &["task", "complete", TEAM, &t1]).await?;
    ensure_eq!(
        vec![t2.clone()],
        ids(&done["unblocked"]),
        "unblocked after completing T1"
    );
    let task2 = adapter.task(TEAM, &t2).await?;
    ensure!(
        !ids(&task2["blockedBy"]).contains(&t1),
        "T2's blockedBy no longer contains T1",
        "{task2}"
    );
    let claimed = adapter
        .ok(RESEARCHER, &["task", "claim", TEAM, &t2])
        .await?;
    ensure_eq!(
        "in_progress",
        claimed["task"]["status"].as_str().unwrap_or(""),
        "T2 after its claim"
    );
    Ok(())
}

async fn tl_09(ctx: Ctx) -> CheckResult {
    let adapter = Adapter::new(&ctx);
    team(&adapter).await?;
    let t1 = adapter.create_task(TEAM, "T1", &[]).await?;
    adapter.ok(LEAD, &["task", "delete", TEAM, &t1]).await?;
    let listed = adapter.ok(LEAD, &["task", "list", TEAM]).await?;
    ensure!(
        listed["tasks"]
            .as_array()
            .is_some_and(|t| t.iter().all(|t| t["id"] != t1.as_str())),
        "the default list hides the deleted task",
        "{listed}"
    );
    let claim = adapter
        .run(RESEARCHER, &["task", "claim", TEAM, &t1])
        .await?;
    ensure!(
        claim.code != Some(0),
        "a claim of the deleted task is refused",
        "exit {}; stdout: {}",
        claim.exit(),
        claim.stdout.trim()
    );
    Ok(())
}

async fn tl_10(ctx: Ctx) -> CheckResult {
    let adapter = Adapter::new(&ctx);
    team(&adapter).await?;
    let b = adapter.create_task(TEAM, "B", &[]).await?;
    let a = adapter.create_task(TEAM, "A", &[&b]).await?;
    match ctx.setting(&teams::CYCLE_DETECTION)?.as_deref() {
        None | Some("refuse-edge") => cycle_refused(&adapter, &a, &b).await,
        Some("query") => cycle_found(&adapter, &a, &b).await,
        Some(other) => Err(crate::CheckError::Harness(format!(
            "setting cycle_detection is {other:?}; expected \"refuse-edge\" or \"query\""
        ))),
    }
}

/// `cycle_detection = "refuse-edge"` (the reference): the edge that would close the cycle is
/// refused with the cycle, and B is unchanged.
async fn cycle_refused(adapter: &Adapter, a: &str, b: &str) -> CheckResult {
    let before = adapter.task(TEAM, b).await?;
    let error = adapter
        .refused(
            LEAD,
            &["task", "depend", TEAM, b, "--on", a],
            "dependency_cycle",
        )
        .await?;
    let cycle = ids(&error["cycle"]);
    ensure!(
        cycle.iter().any(|id| id == a) && cycle.iter().any(|id| id == b),
        "the error's cycle names A and B",
        "{}",
        error
    );
    ensure_eq!(
        before,
        adapter.task(TEAM, b).await?,
        "B after the refused edge"
    );
    Ok(())
}

/// `cycle_detection = "query"`: the implementation checks for cycles on request. The edge is
/// added, then `task cycles TEAM` must report a cycle naming A and B.
async fn cycle_found(adapter: &Adapter, a: &str, b: &str) -> CheckResult {
    adapter
        .ok(LEAD, &["task", "depend", TEAM, b, "--on", a])
        .await?;
    let found = adapter.ok(LEAD, &["task", "cycles", TEAM]).await?;
    let cycles = found["cycles"].as_array().cloned().unwrap_or_default();
    ensure!(
        cycles.iter().any(|cycle| {
            let cycle = ids(cycle);
            cycle.iter().any(|id| id == a) && cycle.iter().any(|id| id == b)
        }),
        "`task cycles` reports a cycle naming A and B",
        "{found}"
    );
    Ok(())
}
