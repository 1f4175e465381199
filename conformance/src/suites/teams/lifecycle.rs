//! Feature 1, team lifecycle (TEAM-LC-01…07): create, reject invalid and duplicate names, spawn,
//! spawn into a missing team, the shutdown handshake, and deletion.

use serde_json::Value;

use super::adapter::{Adapter, LEAD, inbox_lines, tree};
use super::ledger;
use crate::vocabulary::capability;
use crate::{Check, CheckResult, Ctx, OrFail, ensure, ensure_eq};

/// The checks of this module.
pub fn checks() -> Vec<Check> {
    vec![
        Check::new(
            "TEAM-LC-01",
            "Creates alpha-squad as agent:main:main; expects D/alpha-squad/config.json with lead = the caller, ledger.db in WAL mode with tables tasks and members, and the caller listed as a member (its role is TEAM-SKI-01).",
            lc_01,
        ),
        Check::new(
            "TEAM-LC-02",
            "Creates \"invalid name!\" (invalid_team_name, message contains \"alphanumeric\"), the document's valid names (accepted) and its invalid ones plus 51 characters (refused, nothing created).",
            lc_02,
        ),
        Check::new(
            "TEAM-LC-03",
            "Creates a team twice; expects team_exists and config.json byte-identical.",
            lc_03,
        ),
        Check::new(
            "TEAM-LC-04",
            "Spawns researcher; expects a key agent:{id}:teammate:{uuid}, the member listed, and the teammate able to claim a task.",
            lc_04,
        ),
        Check::new(
            "TEAM-LC-05",
            "Spawns into a missing team; expects team_not_found and no file created.",
            lc_05,
        ),
        Check::new(
            "TEAM-LC-06",
            "A working teammate gets a shutdown_request with the requestId of `team shutdown`; its approval lands in the lead's inbox as shutdown_response and the team ends shut down.",
            lc_06,
        ),
        Check::new(
            "TEAM-LC-07",
            "Deletes a team with a ledger and inboxes; expects its directory gone and a sibling team untouched (team_not_found afterwards is TEAM-SKI-02).",
            lc_07,
        ),
    ]
}

fn is_uuid(text: &str) -> bool {
    text.len() == 36
        && text.chars().enumerate().all(|(i, c)| {
            if [8, 13, 18, 23].contains(&i) {
                c == '-'
            } else {
                c.is_ascii_hexdigit() && !c.is_ascii_uppercase()
            }
        })
}

/// Whether a key has the form `agent:{id}:teammate:{uuid}`.
pub fn is_teammate_key(key: &str) -> bool {
    let parts: Vec<&str> = key.split(':').collect();
    parts.len() == 4
        && parts[0] == "agent"
        && !parts[1].is_empty()
        && parts[1]
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_')
        && parts[2] == "teammate"
        && is_uuid(parts[3])
}

async fn lc_01(ctx: Ctx) -> CheckResult {
    ctx.require(capability::TEAMS_LEDGER_READ)?;
    let adapter = Adapter::new(&ctx);
    let created = adapter.create_team("alpha-squad").await?;
    ensure_eq!(
        "active",
        created["status"].as_str().unwrap_or(""),
        "team create reports status"
    );
    let dir = adapter.root().join("alpha-squad");
    ensure!(
        dir.is_dir(),
        "D/alpha-squad is a directory",
        "{} is missing",
        dir.display()
    );
    let config: Value = serde_json::from_slice(
        &std::fs::read(dir.join("config.json")).or_fail("D/alpha-squad/config.json exists")?,
    )
    .or_fail("config.json is JSON")?;
    ensure_eq!(
        LEAD,
        config["lead"].as_str().unwrap_or(""),
        "config.json lead"
    );
    let (mode, tables) = ledger::layout(&ctx, &ledger::path(adapter.root(), "alpha-squad")).await?;
    ensure_eq!("wal", mode.as_str(), "ledger.db journal mode");
    ensure!(tables, "ledger.db has tables tasks and members");
    let members = adapter.ok(LEAD, &["member", "list", "alpha-squad"]).await?;
    ensure!(
        members["members"]
            .as_array()
            .is_some_and(|m| m.iter().any(|m| m["sessionKey"] == LEAD)),
        "the lead is registered as a team member",
        "member list: {members}"
    );
    Ok(())
}

async fn lc_02(ctx: Ctx) -> CheckResult {
    let adapter = Adapter::new(&ctx);
    let error = adapter
        .refused(
            LEAD,
            &["team", "create", "invalid name!"],
            "invalid_team_name",
        )
        .await?;
    let message = error["message"].as_str().unwrap_or("");
    ensure!(
        message.contains("alphanumeric"),
        "the error message contains \"alphanumeric\"",
        "message {message:?}"
    );
    let fifty = "a".repeat(50);
    for name in ["alpha-squad", "team_123", "a", fifty.as_str()] {
        adapter.create_team(name).await?;
    }
    let before = tree(ctx.temp_dir());
    let fifty_one = "b".repeat(51);
    for name in ["Alpha Squad", "team!", "", fifty_one.as_str()] {
        adapter
            .refused(LEAD, &["team", "create", name], "invalid_team_name")
            .await?;
    }
    ensure_eq!(
        before,
        tree(ctx.temp_dir()),
        "files after the refused names"
    );
    Ok(())
}

async fn lc_03(ctx: Ctx) -> CheckResult {
    let adapter = Adapter::new(&ctx);
    adapter.create_team("alpha-squad").await?;
    let config = adapter.root().join("alpha-squad").join("config.json");
    let before = std::fs::read(&config).or_fail("config.json exists")?;
    adapter
        .refused(LEAD, &["team", "create", "alpha-squad"], "team_exists")
        .await?;
    let after = std::fs::read(&config).or_fail("config.json still exists")?;
    ensure!(
        before == after,
        "config.json is byte-identical after the refused create"
    );
    Ok(())
}

async fn lc_04(ctx: Ctx) -> CheckResult {
    let adapter = Adapter::new(&ctx);
    adapter.create_team("alpha-squad").await?;
    let spawned = adapter
        .ok(LEAD, &["member", "spawn", "alpha-squad", "researcher"])
        .await?;
    let key = spawned["member"]["sessionKey"]
        .as_str()
        .or_fail(format!(
            "member spawn prints member.sessionKey, got {spawned}"
        ))?
        .to_owned();
    ensure!(
        is_teammate_key(&key),
        "the session key has the form agent:{id}:teammate:{uuid}",
        "{key:?}"
    );
    let members = adapter.ok(LEAD, &["member", "list", "alpha-squad"]).await?;
    let listed = members["members"]
        .as_array()
        .and_then(|m| m.iter().find(|m| m["sessionKey"] == key.as_str()))
        .or_fail(format!("member list holds the teammate, got {members}"))?;
    ensure_eq!(
        "researcher",
        listed["name"].as_str().unwrap_or(""),
        "the teammate's name"
    );
    let task = adapter.create_task("alpha-squad", "T1", &[]).await?;
    let claimed = adapter
        .ok(&key, &["task", "claim", "alpha-squad", &task])
        .await?;
    ensure_eq!(
        key.as_str(),
        claimed["task"]["owner"].as_str().unwrap_or(""),
        "the claimed task's owner"
    );
    Ok(())
}

async fn lc_05(ctx: Ctx) -> CheckResult {
    let adapter = Adapter::new(&ctx);
    adapter.create_team("other").await?;
    let before = tree(ctx.temp_dir());
    adapter
        .refused(
            LEAD,
            &["member", "spawn", "alpha-squad", "researcher"],
            "team_not_found",
        )
        .await?;
    ensure_eq!(
        before,
        tree(ctx.temp_dir()),
        "files after spawning into a missing team"
    );
    Ok(())
}

async fn lc_06(ctx: Ctx) -> CheckResult {
    ctx.require(capability::TEAMS_SHUTDOWN)?;
    let adapter = Adapter::new(&ctx);
    adapter.create_team("alpha-squad").await?;
    let spawned = adapter
        .ok(LEAD, &["member", "spawn", "alpha-squad", "researcher"])
        .await?;
    let key = spawned["member"]["sessionKey"]
        .as_str()
        .unwrap_or("")
        .to_owned();
    let task = adapter.create_task("alpha-squad", "T1", &[]).await?;
    adapter
        .ok(&key, &["task", "claim", "alpha-squad", &task])
        .await?;
    let shutdown = adapter
        .ok(LEAD, &["team", "shutdown", "alpha-squad"])
        .await?;
    ensure_eq!(
        "pending_shutdown",
        shutdown["status"].as_str().unwrap_or(""),
        "team shutdown with a working teammate"
    );
    let request = shutdown["requestId"]
        .as_str()
        .or_fail(format!("team shutdown prints requestId, got {shutdown}"))?
        .to_owned();
    let inbox = adapter.inbox_file("alpha-squad", &key).await?;
    let lines = inbox_lines(&inbox)?;
    ensure!(
        lines
            .iter()
            .any(|m| m["type"] == "shutdown_request" && m["requestId"] == request.as_str()),
        "the teammate's inbox holds a shutdown_request with the requestId",
        "{lines:?}"
    );
    adapter
        .ok(
            &key,
            &[
                "member",
                "respond-shutdown",
                "alpha-squad",
                "--request-id",
                &request,
                "--approve",
            ],
        )
        .await?;
    let lead_inbox = adapter.inbox_file("alpha-squad", LEAD).await?;
    let lines = inbox_lines(&lead_inbox)?;
    ensure!(
        lines.iter().any(|m| m["type"] == "shutdown_response"
            && m["requestId"] == request.as_str()
            && m["approve"] == true),
        "the lead's inbox holds a shutdown_response with approve true and the requestId",
        "{lines:?}"
    );
    let show = adapter.ok(LEAD, &["team", "show", "alpha-squad"]).await?;
    ensure_eq!(
        "shutdown",
        show["team"]["status"].as_str().unwrap_or(""),
        "the team's status after every approval"
    );
    Ok(())
}

async fn lc_07(ctx: Ctx) -> CheckResult {
    ctx.require(capability::TEAMS_SHUTDOWN)?;
    let adapter = Adapter::new(&ctx);
    adapter.create_team("alpha-squad").await?;
    adapter.create_team("sibling").await?;
    let spawned = adapter
        .ok(LEAD, &["member", "spawn", "alpha-squad", "researcher"])
        .await?;
    let key = spawned["member"]["sessionKey"]
        .as_str()
        .unwrap_or("")
        .to_owned();
    adapter.create_task("alpha-squad", "T1", &[]).await?;
    adapter
        .ok(
            LEAD,
            &[
                "message",
                "send",
                "alpha-squad",
                "--to",
                &key,
                "--content",
                "hello",
            ],
        )
        .await?;
    let sibling_before: Vec<String> = tree(&adapter.root().join("sibling"));
    let output = adapter
        .run(LEAD, &["team", "delete", "alpha-squad"])
        .await?;
    let value = output.ok_json()?;
    ensure_eq!(
        true,
        value["deleted"].as_bool().unwrap_or(false),
        "team delete reports deleted"
    );
    ensure!(
        !adapter.root().join("alpha-squad").exists(),
        "D/alpha-squad is gone with its ledger, WAL and inboxes"
    );
    ensure_eq!(
        sibling_before,
        tree(&adapter.root().join("sibling")),
        "the sibling team's files"
    );
    Ok(())
}
