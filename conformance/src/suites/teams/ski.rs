//! The `teams-ski` suite: what `ski teams` decides where `agent-teams-bdd.md` is silent or only
//! suggests (the lead's role, `team_not_found` after a delete, who may send a shutdown request,
//! the dependency fields and refusal, "100KB" as 100,000 bytes, a deleted task kept with its
//! status, the sender's member name as `teammate_id`). A target declares
//! `teams-ski-extensions` when it makes the same decisions; the `teams` rows never require them.

use super::adapter::{Adapter, LEAD, inbox_lines, refusal};
use super::mailbox::two_messages;
use super::tasks::{RESEARCHER, TESTER, ids, team};
use super::xml::parse_block;
use crate::vocabulary::{Capability, capability};
use crate::{Check, CheckResult, Ctx, OrFail, ensure, ensure_eq};

const TEAM: &str = "alpha-squad";
const CAPABILITY: Capability = capability::TEAMS_SKI_EXTENSIONS;

/// The checks of the `teams-ski` suite.
pub fn checks() -> Vec<Check> {
    vec![
        Check::new(
            "TEAM-SKI-01",
            "Creates alpha-squad as agent:main:main; `member list` must give the lead role \"lead\" (E-TEAM-19).",
            ski_01,
        ),
        Check::new(
            "TEAM-SKI-02",
            "Deletes a team; a later `task list` on it must be refused with team_not_found (E-TEAM-23).",
            ski_02,
        ),
        Check::new(
            "TEAM-SKI-03",
            "A teammate sends another teammate a shutdown_request; it must be refused and the recipient's inbox left as it was (E-TEAM-16).",
            ski_03,
        ),
        Check::new(
            "TEAM-SKI-04",
            "Creates T2 depending on T1; T2.dependsOn must be [T1] and T1.blocks [T2]; a dependency on an unknown task must be refused with unknown_dependency (E-TEAM-15).",
            ski_04,
        ),
        Check::new(
            "TEAM-SKI-05",
            "Sends 100,001 bytes and 50,001 x \"é\" (100,002 bytes); each must be refused with message_too_large and nothing written (E-TEAM-17).",
            ski_05,
        ),
        Check::new(
            "TEAM-SKI-06",
            "Deletes a pending task; `task delete` and `task show` must give it status deleted, and a claim must be refused with invalid_transition (E-TEAM-11).",
            ski_06,
        ),
        Check::new(
            "TEAM-SKI-07",
            "Researcher has messages from tester and the lead; `context inject` must give each element the sender's member name as teammate_id (E-TEAM-08).",
            ski_07,
        ),
    ]
}

async fn ski_01(ctx: Ctx) -> CheckResult {
    ctx.require(CAPABILITY)?;
    let adapter = Adapter::new(&ctx);
    adapter.create_team(TEAM).await?;
    let members = adapter.ok(LEAD, &["member", "list", TEAM]).await?;
    let lead = members["members"]
        .as_array()
        .and_then(|m| m.iter().find(|m| m["sessionKey"] == LEAD))
        .or_fail(format!("member list holds the lead, got {members}"))?;
    ensure_eq!(
        "lead",
        lead["role"].as_str().unwrap_or(""),
        "the lead's role"
    );
    Ok(())
}

async fn ski_02(ctx: Ctx) -> CheckResult {
    ctx.require(CAPABILITY)?;
    ctx.require(capability::TEAMS_SHUTDOWN)?;
    let adapter = Adapter::new(&ctx);
    adapter.create_team(TEAM).await?;
    adapter.ok(LEAD, &["team", "delete", TEAM]).await?;
    let again = adapter.run(LEAD, &["task", "list", TEAM]).await?;
    refusal(&again, "team_not_found")?;
    Ok(())
}

async fn ski_03(ctx: Ctx) -> CheckResult {
    ctx.require(CAPABILITY)?;
    let adapter = Adapter::new(&ctx);
    team(&adapter).await?;
    let inbox = adapter.inbox_file(TEAM, RESEARCHER).await?;
    let before = inbox_lines(&inbox)?;
    let output = adapter
        .run(
            TESTER,
            &[
                "message",
                "send",
                TEAM,
                "--to",
                RESEARCHER,
                "--type",
                "shutdown_request",
                "--request-id",
                "req-2",
                "--content",
                "stop",
            ],
        )
        .await?;
    ensure!(
        output.code != Some(0),
        "a teammate's shutdown_request is refused",
        "exit {}; {}",
        output.exit(),
        output.stdout.trim()
    );
    ensure_eq!(
        before,
        inbox_lines(&inbox)?,
        "the recipient's inbox after the refused request"
    );
    Ok(())
}

async fn ski_04(ctx: Ctx) -> CheckResult {
    ctx.require(CAPABILITY)?;
    let adapter = Adapter::new(&ctx);
    team(&adapter).await?;
    let t1 = adapter.create_task(TEAM, "T1", &[]).await?;
    let t2 = adapter.create_task(TEAM, "T2", &[&t1]).await?;
    let task2 = adapter.task(TEAM, &t2).await?;
    ensure_eq!(vec![t1.clone()], ids(&task2["dependsOn"]), "T2.dependsOn");
    let task1 = adapter.task(TEAM, &t1).await?;
    ensure_eq!(vec![t2.clone()], ids(&task1["blocks"]), "T1.blocks");
    let mut args = vec!["task", "create", TEAM, "--subject", "T3"];
    if adapter.description_required()? {
        args.extend(["--description", "T3"]);
    }
    args.extend(["--depends-on", "no-such-task"]);
    adapter.refused(LEAD, &args, "unknown_dependency").await?;
    Ok(())
}

async fn ski_05(ctx: Ctx) -> CheckResult {
    ctx.require(CAPABILITY)?;
    let adapter = Adapter::new(&ctx);
    adapter.create_team(TEAM).await?;
    adapter.join(TEAM, RESEARCHER, "researcher").await?;
    let inbox = adapter.inbox_file(TEAM, RESEARCHER).await?;
    let before = inbox_lines(&inbox)?;
    for (name, content) in [
        ("one-over.txt", "x".repeat(100_001)),
        ("accents.txt", "é".repeat(50_001)),
    ] {
        let path = ctx.temp_dir().join(name);
        std::fs::write(&path, content).or_error("writing a content file")?;
        let output = adapter
            .run(
                LEAD,
                &[
                    "message",
                    "send",
                    TEAM,
                    "--to",
                    RESEARCHER,
                    "--content-file",
                    &path.display().to_string(),
                ],
            )
            .await?;
        refusal(&output, "message_too_large")?;
    }
    ensure_eq!(
        before,
        inbox_lines(&inbox)?,
        "the inbox after the refused messages"
    );
    Ok(())
}

async fn ski_06(ctx: Ctx) -> CheckResult {
    ctx.require(CAPABILITY)?;
    let adapter = Adapter::new(&ctx);
    team(&adapter).await?;
    let t1 = adapter.create_task(TEAM, "T1", &[]).await?;
    let deleted = adapter.ok(LEAD, &["task", "delete", TEAM, &t1]).await?;
    ensure_eq!(
        "deleted",
        deleted["task"]["status"].as_str().unwrap_or(""),
        "the deleted task's status"
    );
    let shown = adapter.task(TEAM, &t1).await?;
    ensure_eq!(
        "deleted",
        shown["status"].as_str().unwrap_or(""),
        "the deleted task's status in task show"
    );
    adapter
        .refused(
            RESEARCHER,
            &["task", "claim", TEAM, &t1],
            "invalid_transition",
        )
        .await?;
    Ok(())
}

async fn ski_07(ctx: Ctx) -> CheckResult {
    ctx.require(CAPABILITY)?;
    ctx.require(capability::TEAMS_CONTEXT)?;
    let adapter = Adapter::new(&ctx);
    two_messages(&adapter).await?;
    let value = adapter.ok(RESEARCHER, &["context", "inject", TEAM]).await?;
    let block = value["block"]
        .as_str()
        .or_fail(format!("context inject prints block, got {value}"))?;
    let elements = parse_block(block).or_fail("the block parses as <teammate-message> elements")?;
    let senders: Vec<Option<&str>> = elements
        .iter()
        .map(|element| element.attribute("teammate_id"))
        .collect();
    ensure_eq!(
        vec![Some("tester"), Some("lead")],
        senders,
        "teammate_id (the sender's member name)"
    );
    Ok(())
}
