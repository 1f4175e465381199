//! Feature 3, mailboxes (TEAM-MB-01…07): direct messages, broadcasts, unknown recipients,
//! context injection and its draining, and the shutdown request and response messages.

use serde_json::Value;

use super::adapter::{Adapter, LEAD, inbox_lines};
use super::tasks::{RESEARCHER, TESTER, team};
use super::xml::parse_block;
use crate::vocabulary::capability;
use crate::{Check, CheckResult, Ctx, OrFail, ensure, ensure_eq};

const TEAM: &str = "alpha-squad";

/// The checks of this module.
pub fn checks() -> Vec<Check> {
    vec![
        Check::new(
            "TEAM-MB-01",
            "Tester sends researcher a message; expects exactly one line in researcher's inbox (found through `inbox path`) with from, type, content and timestamp.",
            mb_01,
        ),
        Check::new(
            "TEAM-MB-02",
            "The lead broadcasts in a team of three; expects one broadcast line in each other member's inbox and none in the lead's.",
            mb_02,
        ),
        Check::new(
            "TEAM-MB-03",
            "Sends to a session key that is not a member; expects unknown_recipient and no inbox directory created.",
            mb_03,
        ),
        Check::new(
            "TEAM-MB-04",
            "Researcher has 2 messages with XML metacharacters; `context inject --system-prompt P` returns 2 <teammate-message> elements (parsed, attributes teammate_id, type, summary; text = the content) followed by P; which name teammate_id gives is TEAM-SKI-07.",
            mb_04,
        ),
        Check::new(
            "TEAM-MB-05",
            "After an injection researcher's messages.jsonl is gone and a second injection injects 0.",
            mb_05,
        ),
        Check::new(
            "TEAM-MB-06",
            "The lead sends a shutdown_request with a request id; the teammate's inbox holds it (that a teammate's is refused is TEAM-SKI-03).",
            mb_06,
        ),
        Check::new(
            "TEAM-MB-07",
            "The teammate answers with shutdown_response, the same request id, approve and reason; the lead's inbox holds all four.",
            mb_07,
        ),
    ]
}

async fn mb_01(ctx: Ctx) -> CheckResult {
    let adapter = Adapter::new(&ctx);
    team(&adapter).await?;
    adapter
        .ok(
            TESTER,
            &[
                "--now-ms",
                "5000",
                "message",
                "send",
                TEAM,
                "--to",
                RESEARCHER,
                "--content",
                "found a bug",
                "--summary",
                "bug",
            ],
        )
        .await?;
    let inbox = adapter.inbox_file(TEAM, RESEARCHER).await?;
    let lines = inbox_lines(&inbox)?;
    ensure_eq!(
        1,
        lines.len(),
        "lines in researcher's inbox {}",
        inbox.display()
    );
    let line = &lines[0];
    ensure_eq!(
        TESTER,
        line["from"].as_str().unwrap_or(""),
        "the line's from (the sender)"
    );
    ensure_eq!(
        "message",
        line["type"].as_str().unwrap_or(""),
        "the line's type"
    );
    ensure_eq!(
        "found a bug",
        line["content"].as_str().unwrap_or(""),
        "the line's content"
    );
    ensure_eq!(
        Some(5000),
        line["timestamp"].as_i64(),
        "the line's timestamp"
    );
    Ok(())
}

async fn mb_02(ctx: Ctx) -> CheckResult {
    let adapter = Adapter::new(&ctx);
    team(&adapter).await?;
    adapter
        .ok(
            LEAD,
            &[
                "message",
                "send",
                TEAM,
                "--broadcast",
                "--content",
                "standup",
            ],
        )
        .await?;
    for key in [RESEARCHER, TESTER] {
        let lines = inbox_lines(&adapter.inbox_file(TEAM, key).await?)?;
        ensure_eq!(1, lines.len(), "broadcast lines in {key}'s inbox");
        ensure_eq!(
            "broadcast",
            lines[0]["type"].as_str().unwrap_or(""),
            "the type in {key}'s inbox"
        );
        ensure_eq!(
            "standup",
            lines[0]["content"].as_str().unwrap_or(""),
            "the content in {key}'s inbox"
        );
    }
    let lead = inbox_lines(&adapter.inbox_file(TEAM, LEAD).await?)?;
    ensure_eq!(0, lead.len(), "lines in the sender's own inbox");
    Ok(())
}

async fn mb_03(ctx: Ctx) -> CheckResult {
    let adapter = Adapter::new(&ctx);
    team(&adapter).await?;
    let stranger = "agent:stranger:main";
    let inbox = adapter.inbox_file(TEAM, stranger).await?;
    adapter
        .refused(
            LEAD,
            &["message", "send", TEAM, "--to", stranger, "--content", "hi"],
            "unknown_recipient",
        )
        .await?;
    let dir = inbox.parent().or_fail("the inbox path has a directory")?;
    ensure!(
        !dir.exists(),
        "no inbox directory is created for a non-member",
        "{} exists",
        dir.display()
    );
    Ok(())
}

pub(super) async fn two_messages(adapter: &Adapter) -> Result<(), crate::CheckError> {
    team(adapter).await?;
    adapter
        .ok(
            TESTER,
            &[
                "message",
                "send",
                TEAM,
                "--to",
                RESEARCHER,
                "--content",
                "Found a <critical> bug & \"more\"",
                "--summary",
                "auth \"bug\" <x>",
            ],
        )
        .await?;
    adapter
        .ok(
            LEAD,
            &[
                "message",
                "send",
                TEAM,
                "--to",
                RESEARCHER,
                "--content",
                "it's fixed </teammate-message>",
                "--summary",
                "fixed & 'done'",
            ],
        )
        .await?;
    Ok(())
}

async fn mb_04(ctx: Ctx) -> CheckResult {
    ctx.require(capability::TEAMS_CONTEXT)?;
    let adapter = Adapter::new(&ctx);
    two_messages(&adapter).await?;
    let value = adapter
        .ok(
            RESEARCHER,
            &[
                "context",
                "inject",
                TEAM,
                "--system-prompt",
                "SYSTEM PROMPT",
            ],
        )
        .await?;
    ensure_eq!(Some(2), value["injected"].as_u64(), "messages injected");
    let prompt = value["prompt"]
        .as_str()
        .or_fail(format!("context inject prints prompt, got {value}"))?;
    let block = prompt.strip_suffix("SYSTEM PROMPT").or_fail(format!(
        "the prompt ends with the system prompt, got {prompt:?}"
    ))?;
    let elements = parse_block(block)
        .or_fail("the block before the system prompt parses as <teammate-message> elements")?;
    ensure_eq!(2, elements.len(), "elements in the block");
    let expected: [(&str, &str); 2] = [
        ("auth \"bug\" <x>", "Found a <critical> bug & \"more\""),
        ("fixed & 'done'", "it's fixed </teammate-message>"),
    ];
    for (element, (summary, text)) in elements.iter().zip(expected) {
        ensure!(
            element
                .attribute("teammate_id")
                .is_some_and(|id| !id.is_empty()),
            "a teammate_id attribute (which name it gives is TEAM-SKI-07)",
            "{:?}",
            element.attribute("teammate_id")
        );
        ensure_eq!(
            Some("message"),
            element.attribute("type"),
            "the type attribute"
        );
        ensure_eq!(
            Some(summary),
            element.attribute("summary"),
            "the summary attribute"
        );
        ensure_eq!(text, element.text.trim(), "the element's text");
    }
    Ok(())
}

async fn mb_05(ctx: Ctx) -> CheckResult {
    ctx.require(capability::TEAMS_CONTEXT)?;
    let adapter = Adapter::new(&ctx);
    two_messages(&adapter).await?;
    let inbox = adapter.inbox_file(TEAM, RESEARCHER).await?;
    ensure!(
        inbox.is_file(),
        "researcher's messages.jsonl exists before injection"
    );
    adapter.ok(RESEARCHER, &["context", "inject", TEAM]).await?;
    ensure!(
        !inbox.exists(),
        "messages.jsonl is deleted after injection",
        "{} exists",
        inbox.display()
    );
    let again = adapter.ok(RESEARCHER, &["context", "inject", TEAM]).await?;
    ensure_eq!(
        Some(0),
        again["injected"].as_u64(),
        "messages injected by a second injection"
    );
    Ok(())
}

async fn mb_06(ctx: Ctx) -> CheckResult {
    let adapter = Adapter::new(&ctx);
    team(&adapter).await?;
    adapter
        .ok(
            LEAD,
            &[
                "message",
                "send",
                TEAM,
                "--to",
                RESEARCHER,
                "--type",
                "shutdown_request",
                "--request-id",
                "req-1",
                "--content",
                "please stop",
            ],
        )
        .await?;
    let lines = inbox_lines(&adapter.inbox_file(TEAM, RESEARCHER).await?)?;
    let request = lines
        .iter()
        .find(|m| m["type"] == "shutdown_request")
        .or_fail(format!(
            "researcher's inbox holds a shutdown_request, got {lines:?}"
        ))?;
    ensure_eq!(
        "req-1",
        request["requestId"].as_str().unwrap_or(""),
        "the request's requestId"
    );
    ensure_eq!(
        LEAD,
        request["from"].as_str().unwrap_or(""),
        "the request's sender"
    );
    Ok(())
}

async fn mb_07(ctx: Ctx) -> CheckResult {
    let adapter = Adapter::new(&ctx);
    team(&adapter).await?;
    adapter
        .ok(
            LEAD,
            &[
                "message",
                "send",
                TEAM,
                "--to",
                RESEARCHER,
                "--type",
                "shutdown_request",
                "--request-id",
                "req-1",
                "--content",
                "please stop",
            ],
        )
        .await?;
    adapter
        .ok(
            RESEARCHER,
            &[
                "message",
                "send",
                TEAM,
                "--to",
                LEAD,
                "--type",
                "shutdown_response",
                "--request-id",
                "req-1",
                "--approve",
                "true",
                "--reason",
                "work saved",
                "--content",
                "ok",
            ],
        )
        .await?;
    let lines = inbox_lines(&adapter.inbox_file(TEAM, LEAD).await?)?;
    let response: &Value = lines
        .iter()
        .find(|m| m["type"] == "shutdown_response")
        .or_fail(format!(
            "the lead's inbox holds a shutdown_response, got {lines:?}"
        ))?;
    ensure_eq!(
        "req-1",
        response["requestId"].as_str().unwrap_or(""),
        "the response's requestId"
    );
    ensure_eq!(
        Some(true),
        response["approve"].as_bool(),
        "the response's approve"
    );
    ensure_eq!(
        "work saved",
        response["reason"].as_str().unwrap_or(""),
        "the response's reason"
    );
    ensure_eq!(
        RESEARCHER,
        response["from"].as_str().unwrap_or(""),
        "the response's sender"
    );
    Ok(())
}
