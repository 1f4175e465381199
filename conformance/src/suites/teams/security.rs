//! Feature 5, security (TEAM-SEC-01…04): path traversal in team names, sanitised inbox keys,
//! the message size limit and the member limit.

use super::adapter::{Adapter, LEAD, refusal, tree};
use crate::{Check, CheckResult, Ctx, OrFail, ensure, ensure_eq};

const TEAM: &str = "alpha-squad";

/// The checks of this module.
pub fn checks() -> Vec<Check> {
    vec![
        Check::new(
            "TEAM-SEC-01",
            "Creates teams named ../../../etc/passwd, .., a/b, a\\b and %2e%2e (and lists tasks of them); expects invalid_team_name each time and no new file anywhere under the scenario's temp dir.",
            sec_01,
        ),
        Check::new(
            "TEAM-SEC-02",
            "A member with key agent:main:user@example.com receives a message at D/alpha-squad/inbox/agent_main_user_example_com/messages.jsonl; members with /, \\ and .. in their keys get inboxes that stay directly inside inbox/.",
            sec_02,
        ),
        Check::new(
            "TEAM-SEC-03",
            "Sends 100,000 bytes (accepted), then 102,401 bytes (over 100KB in either reading: refused with message_too_large and \"size limit\", nothing written; 100,001 bytes is TEAM-SKI-05).",
            sec_03,
        ),
        Check::new(
            "TEAM-SEC-04",
            "With N = limits.maxMembersPerTeam (lead included), N members are accepted and the next join is refused with member_limit (\"limit\"), the count unchanged.",
            sec_04,
        ),
    ]
}

async fn sec_01(ctx: Ctx) -> CheckResult {
    let adapter = Adapter::new(&ctx);
    adapter.create_team(TEAM).await?;
    let before = tree(ctx.temp_dir());
    for name in [
        "../../../etc/passwd",
        "..",
        "a/b",
        "a\\b",
        "%2e%2e",
        "../alpha-squad",
    ] {
        adapter
            .refused(LEAD, &["team", "create", name], "invalid_team_name")
            .await?;
        adapter
            .refused(LEAD, &["task", "list", name], "invalid_team_name")
            .await?;
    }
    ensure_eq!(
        before,
        tree(ctx.temp_dir()),
        "files under the temp dir after the refused names"
    );
    Ok(())
}

async fn sec_02(ctx: Ctx) -> CheckResult {
    let adapter = Adapter::new(&ctx);
    adapter.create_team(TEAM).await?;
    let outside_before: Vec<String> = tree(ctx.temp_dir())
        .into_iter()
        .filter(|p| !p.starts_with("state"))
        .collect();
    let keys = [
        "agent:main:user@example.com",
        "agent:x:../../../../tmp/evil",
        "agent:y:a\\b/c",
    ];
    for (i, key) in keys.iter().enumerate() {
        adapter.join(TEAM, key, &format!("member{i}")).await?;
        adapter
            .ok(
                LEAD,
                &["message", "send", TEAM, "--to", key, "--content", "hello"],
            )
            .await?;
    }
    let expected = adapter
        .root()
        .join(TEAM)
        .join("inbox")
        .join("agent_main_user_example_com")
        .join("messages.jsonl");
    ensure!(
        expected.is_file(),
        "the inbox path uses the sanitized name agent_main_user_example_com",
        "{} is missing",
        expected.display()
    );
    let inbox = adapter.root().join(TEAM).join("inbox");
    let mut names = Vec::new();
    for entry in std::fs::read_dir(&inbox)
        .or_fail("the inbox directory can be read")?
        .flatten()
    {
        names.push(entry.file_name().to_string_lossy().into_owned());
    }
    for name in &names {
        ensure!(
            name.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-'),
            "inbox directory names hold only [A-Za-z0-9_-]",
            "{name:?}"
        );
    }
    let outside: Vec<String> = tree(ctx.temp_dir())
        .into_iter()
        .filter(|p| !p.starts_with("state"))
        .collect();
    ensure_eq!(outside_before, outside, "files outside the teams root");
    Ok(())
}

async fn sec_03(ctx: Ctx) -> CheckResult {
    let adapter = Adapter::new(&ctx);
    adapter.create_team(TEAM).await?;
    let key = "agent:researcher:main";
    adapter.join(TEAM, key, "researcher").await?;
    let write = |name: &str, content: String| {
        let path = ctx.temp_dir().join(name);
        std::fs::write(&path, content).map(|()| path)
    };
    let fits = write("fits.txt", "x".repeat(100_000)).or_error("writing a content file")?;
    adapter
        .ok(
            LEAD,
            &[
                "message",
                "send",
                TEAM,
                "--to",
                key,
                "--content-file",
                &fits.display().to_string(),
            ],
        )
        .await?;
    let inbox = adapter.inbox_file(TEAM, key).await?;
    let before = std::fs::read(&inbox).or_fail("the 100,000-byte message is in the inbox")?;
    let expected = ctx.text("message_too_large", "size limit");
    // Over 100KB whether a KB is 1,000 or 1,024 bytes; 100,001 bytes is TEAM-SKI-05 (E-TEAM-17).
    let path = write("over.txt", "x".repeat(102_401)).or_error("writing a content file")?;
    let output = adapter
        .run(
            LEAD,
            &[
                "message",
                "send",
                TEAM,
                "--to",
                key,
                "--content-file",
                &path.display().to_string(),
            ],
        )
        .await?;
    let error = refusal(&output, "message_too_large")?;
    ensure!(
        error["message"].as_str().unwrap_or("").contains(&expected),
        "the error message names the size limit",
        "{}",
        error["message"]
    );
    let after = std::fs::read(&inbox).or_fail("the inbox is still there")?;
    ensure!(
        before == after,
        "refused messages write nothing",
        "the inbox changed from {} to {} bytes",
        before.len(),
        after.len()
    );
    Ok(())
}

async fn sec_04(ctx: Ctx) -> CheckResult {
    let adapter = Adapter::new(&ctx);
    let limits = adapter.ok(LEAD, &["limits"]).await?;
    let max = limits["maxMembersPerTeam"]
        .as_u64()
        .or_fail(format!("limits prints maxMembersPerTeam, got {limits}"))?;
    ensure!(
        (2..=64).contains(&max),
        "maxMembersPerTeam is a small limit",
        "{max}"
    );
    adapter.create_team(TEAM).await?;
    for i in 1..max {
        adapter
            .join(TEAM, &format!("agent:m{i}:main"), &format!("m{i}"))
            .await?;
    }
    let error = adapter
        .refused(
            "agent:one-more:main",
            &["member", "join", TEAM, "one-more"],
            "member_limit",
        )
        .await?;
    ensure!(
        error["message"].as_str().unwrap_or("").contains("limit"),
        "the error message says limit",
        "{}",
        error["message"]
    );
    let members = adapter.ok(LEAD, &["member", "list", TEAM]).await?;
    ensure_eq!(
        Some(max as usize),
        members["members"].as_array().map(Vec::len),
        "members after the refused join"
    );
    Ok(())
}
