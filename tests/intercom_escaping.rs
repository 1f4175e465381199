//! What an agent says reaches Slack escaped (`&` → `&amp;`, `<` → `&lt;`, `>` → `&gt;`, Slack's
//! formatting rules), so it cannot mention `@channel` or a user, or hide a link behind a label;
//! the mentions ski writes itself stay live. Both ways in: MCP tools and an ACP agent's stream.

use crate::intercom_support;

use intercom_support::*;
use serde_json::{Value, json};
use ski_mocks::slack::{FakeSlack, Message, SlashCommand};

/// What a hostile agent writes.
const HOSTILE: &str = "<!channel> & <@U0000000003> <https://evil.example|click>";
/// How Slack must receive it.
const ESCAPED: &str =
    "&lt;!channel&gt; &amp; &lt;@U0000000003&gt; &lt;https://evil.example|click&gt;";

async fn message(slack: &FakeSlack, what: &str, predicate: impl Fn(&Message) -> bool) -> Message {
    slack
        .wait_for_message(predicate, WAIT)
        .await
        .unwrap_or_else(|error| panic!("{what}: {error}"))
}

/// The text fields of a message's blocks, joined.
fn block_texts(message: &Message) -> String {
    message.message["blocks"]
        .as_array()
        .map(|blocks| {
            blocks
                .iter()
                .filter_map(|block| block["text"]["text"].as_str())
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default()
}

/// Neither the text nor the blocks of `message` carry the raw sequences; both carry the escaped.
fn assert_escaped(message: &Message, what: &str) {
    let blocks = block_texts(message);
    for (field, text) in [("text", message.text().to_string()), ("blocks", blocks)] {
        if field == "blocks" && text.is_empty() {
            continue;
        }
        assert!(
            !text.contains("<!channel>") && !text.contains("<@U0000000003>"),
            "{what}: raw control sequences in the {field}: {text}"
        );
        assert!(
            text.contains(ESCAPED),
            "{what}: the {field} lacks the escaped text: {text}"
        );
    }
}

#[tokio::test]
async fn mcp_tool_texts_are_escaped_and_ski_s_own_mentions_stay() {
    let slack = fake_slack().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let config = write_config(dir.path(), &slack, "");
    let server = Server::start(&config, &[]).await;
    let client = mcp_client(&server.mcp_url("workspace_id=myproj")).await;

    let (answer, error) = call(&client, "broadcast", json!({"message": HOSTILE})).await;
    assert!(!error, "{answer}");
    let broadcast = message(&slack, "the broadcast", |m| {
        m.text().contains("evil.example")
    })
    .await;
    assert_escaped(&broadcast, "broadcast");

    let pending = ask_clearance(
        &client,
        json!({"title": HOSTILE, "description": HOSTILE, "diff": "a < b && c > d\n", "file_path": "src/main.rs"}),
    );
    let approval = message(&slack, "the approval", |m| {
        m.text().contains("Approval request")
    })
    .await;
    assert_escaped(&approval, "check_clearance");
    assert!(
        block_texts(&approval).contains("a &lt; b &amp;&amp; c &gt; d"),
        "the diff is escaped: {}",
        block_texts(&approval)
    );
    approve(&slack, &approval);
    let (answer, error) = tokio::time::timeout(WAIT, pending)
        .await
        .expect("answered")
        .expect("task");
    assert!(!error, "{answer}");
    // ski's own mention of the operator stays a mention.
    let note = message(&slack, "the decision", |m| m.text().contains("*Approved*")).await;
    assert!(
        note.text().contains(&format!("<@{ALICE}>")),
        "{}",
        note.text()
    );
    // The approved content is written as the agent sent it, unescaped.
    let (answer, error) = call(&client, "check_diff", json!({"request_id": "req-001"})).await;
    assert!(!error, "{answer}");
    assert_eq!(
        std::fs::read_to_string(dir.path().join("ws-myproj/src/main.rs")).expect("written"),
        "a < b && c > d\n"
    );

    let peer: rmcp::Peer<rmcp::RoleClient> = (*client).clone();
    let transmit =
        tokio::spawn(async move { call(&peer, "transmit", json!({"prompt_text": HOSTILE})).await });
    let prompt = message(&slack, "the prompt", |m| m.text().contains("Agent prompt")).await;
    assert_escaped(&prompt, "transmit");
    let peer: rmcp::Peer<rmcp::RoleClient> = (*client).clone();
    let standby = tokio::spawn(async move {
        call(
            &peer,
            "standby",
            json!({"message": HOSTILE, "timeout_seconds": 0}),
        )
        .await
    });
    let waiting = message(&slack, "the standby", |m| m.text().starts_with("⏸️")).await;
    assert_escaped(&waiting, "standby");
    transmit.abort();
    standby.abort();
    drop(client);
    assert_eq!(server.stop().await, Some(0));
}

/// An agent of the stream dialect that says hostile things on each way it can.
const HOSTILE_AGENT: &str = r#"read prompt
msg='<!channel> & <@U0000000003> <https://evil.example|click>'
printf '{"method":"status/update","params":{"message":"%s"}}\n' "$msg"
printf '{"method":"clearance/request","id":"req-<!here>","params":{"title":"%s","file_path":"a.rs","diff":"x"}}\n' "$msg"
printf '{"method":"prompt/forward","id":"fwd-1","params":{"text":"%s","type":"clarification"}}\n' "$msg"
while read line; do :; done"#;

#[tokio::test]
async fn an_acp_agent_s_status_clearance_and_prompt_are_escaped() {
    let dir = tempfile::tempdir().expect("tempdir");
    let slack = fake_slack().await;
    let config = write_config(
        dir.path(),
        &slack,
        &format!(
            "host_cli = \"/bin/sh\"\nhost_cli_args = [\"-c\", {HOSTILE_AGENT:?}]\n[acp]\nstop_grace_ms = 300\n"
        ),
    );
    std::fs::create_dir_all(dir.path().join("ws-myproj")).expect("workspace dir");
    let server = Server::start(&config, &["--mode", "acp"]).await;
    let ack = slack
        .slash_command(SlashCommand {
            command: SLASH.into(),
            text: "session-start go".into(),
            channel: CHANNEL_X.into(),
            user: ALICE.into(),
        })
        .expect("inject")
        .ack(WAIT)
        .await
        .expect("ack");
    let reply = ack
        .payload
        .as_ref()
        .and_then(|p| p.get("text").and_then(Value::as_str))
        .unwrap_or_default()
        .to_string();
    assert!(reply.contains("Starting session"), "{reply}");
    let status = message(&slack, "the status", |m| {
        m.text().contains("evil.example")
            && !m.text().contains("Approval request")
            && !m.text().contains("Agent prompt")
    })
    .await;
    assert_escaped(&status, "status/update");
    let approval = message(&slack, "the approval", |m| {
        m.text().contains("Approval request")
    })
    .await;
    assert_escaped(&approval, "clearance/request");
    // The request id is the agent's too: the operator's decision note shows it escaped.
    approve(&slack, &approval);
    let note = message(&slack, "the decision", |m| m.text().contains("*Approved*")).await;
    assert!(
        note.text().contains("req-&lt;!here&gt;") && !note.text().contains("<!here>"),
        "the decision note escapes the agent's request id: {}",
        note.text()
    );
    let prompt = message(&slack, "the prompt", |m| m.text().contains("Agent prompt")).await;
    assert_escaped(&prompt, "prompt/forward");
    assert_eq!(server.stop().await, Some(0));
}
