//! The test agent's prompt vocabulary, through a real pipe to the built binary.

use crate::agent_support;

use agent_support::{Agent, chunk_text};
use serde_json::{Value, json};

async fn testy() -> (Agent, String) {
    let mut agent = Agent::spawn(&["--script", "testy"]);
    let session = agent.handshake().await;
    (agent, session)
}

/// Runs a prompt that needs no client answers; returns (updates, final report, stop reason).
async fn run(agent: &mut Agent, session: &str, text: &str) -> (Vec<Value>, String, String) {
    let id = agent.prompt(session, text).await;
    let (mut before, response) = agent.until_response(&json!(id)).await;
    let report = before
        .pop()
        .and_then(|m| chunk_text(&m).map(str::to_owned))
        .unwrap_or_default();
    let reason = response["result"]["stopReason"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    (before, report, reason)
}

fn kinds(updates: &[Value]) -> Vec<String> {
    updates
        .iter()
        .map(|m| {
            m["params"]["update"]["sessionUpdate"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        })
        .collect()
}

#[tokio::test]
async fn help_greet_and_echo() {
    let (mut agent, session) = testy().await;
    let (_, text, reason) = run(&mut agent, &session, "help").await;
    assert!(
        text.starts_with("Commands: help, greet, echo <message>, session_updates"),
        "{text}"
    );
    assert_eq!(reason, "end_turn");
    let (_, text, _) = run(&mut agent, &session, "echo hi there").await;
    assert_eq!(text, "hi there");
    let (_, text, _) = run(
        &mut agent,
        &session,
        r#"{"command":"echo","message":"json form"}"#,
    )
    .await;
    assert_eq!(text, "json form");
    let (_, text, _) = run(&mut agent, &session, "anything else").await;
    assert_eq!(text, "Hello, world!");
}

#[tokio::test]
async fn session_updates_sends_every_stable_kind() {
    let (mut agent, session) = testy().await;
    let (updates, report, _) = run(&mut agent, &session, "session_updates").await;
    let kinds = kinds(&updates);
    for kind in [
        "session_info_update",
        "current_mode_update",
        "config_option_update",
        "available_commands_update",
        "usage_update",
        "user_message_chunk",
        "agent_thought_chunk",
        "agent_message_chunk",
        "tool_call",
        "tool_call_update",
        "plan",
    ] {
        assert!(
            kinds.iter().any(|k| k == kind),
            "missing {kind} in {kinds:?}"
        );
    }
    assert_eq!(report, "scenario: session_updates\nsession_updates: sent");
}

#[tokio::test]
async fn content_sends_every_content_block_kind() {
    let (mut agent, session) = testy().await;
    let (updates, report, _) = run(&mut agent, &session, "content").await;
    let types: Vec<&str> = updates
        .iter()
        .map(|m| {
            m["params"]["update"]["content"]["type"]
                .as_str()
                .unwrap_or_default()
        })
        .collect();
    assert_eq!(
        types,
        [
            "text",
            "text",
            "text",
            "image",
            "audio",
            "resource_link",
            "resource"
        ]
    );
    assert_eq!(report, "scenario: content\ncontent_blocks: 1");
}

#[tokio::test]
async fn tool_calls_create_and_update() {
    let (mut agent, session) = testy().await;
    let (updates, _, _) = run(&mut agent, &session, "tool calls").await;
    assert_eq!(
        kinds(&updates),
        [
            "tool_call",
            "tool_call_update",
            "tool_call_update",
            "tool_call",
            "tool_call_update",
            "plan"
        ]
    );
    assert_eq!(updates[4]["params"]["update"]["content"][0]["type"], "diff");
}

#[tokio::test]
async fn callbacks_send_every_client_request() {
    let mut agent = Agent::spawn(&["--script", "testy"]);
    let id = agent
        .request(
            "initialize",
            json!({"protocolVersion": 1, "clientCapabilities": {"fs": {"readTextFile": true, "writeTextFile": true}, "terminal": true, "elicitation": {"form": {}}}}),
        )
        .await;
    agent.until_response(&json!(id)).await;
    let id = agent
        .request("session/new", json!({"cwd": "/w", "mcpServers": []}))
        .await;
    let (_, response) = agent.until_response(&json!(id)).await;
    let session = response["result"]["sessionId"]
        .as_str()
        .expect("session")
        .to_owned();
    let prompt = agent.prompt(&session, "callbacks").await;
    let mut methods = Vec::new();
    loop {
        let message = agent.json().await;
        if message["id"] == prompt && message.get("method").is_none() {
            let report = methods.clone();
            assert_eq!(
                report,
                [
                    "session/request_permission",
                    "fs/write_text_file",
                    "fs/read_text_file",
                    "terminal/create",
                    "terminal/output",
                    "terminal/wait_for_exit",
                    "terminal/kill",
                    "terminal/release",
                    "elicitation/create",
                ]
            );
            // Form elicitation was advertised and URL elicitation was not.
            assert_eq!(message["error"]["code"], -32602, "{message}");
            break;
        }
        let method = message["method"].as_str().unwrap_or_default().to_owned();
        if message.get("id").is_some() {
            let result = match method.as_str() {
                "session/request_permission" => {
                    json!({"outcome": {"outcome": "selected", "optionId": "allow_once"}})
                }
                "fs/read_text_file" => json!({"content": "text"}),
                "terminal/create" => json!({"terminalId": "t-1"}),
                "terminal/output" => json!({"output": "mock terminal\n", "truncated": false}),
                "terminal/wait_for_exit" => json!({"exitCode": 0}),
                "elicitation/create" => json!({"action": "accept", "content": {"name": "x"}}),
                _ => json!({}),
            };
            agent
                .send_json(json!({"jsonrpc": "2.0", "id": message["id"], "result": result}))
                .await;
            methods.push(method);
        }
    }
}

#[tokio::test]
async fn cancel_status_and_wait_for_cancel() {
    let (mut agent, session) = testy().await;
    let (_, report, _) = run(&mut agent, &session, "cancel_status").await;
    assert_eq!(
        report,
        "scenario: cancel_status\ncancel_status: not_cancelled"
    );
    agent
        .send_json(
            json!({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": session}}),
        )
        .await;
    // A cancel that arrived between turns is reported by ending the turn `cancelled`, with no
    // report, as the official test agent does.
    let id = agent.prompt(&session, "cancel status").await;
    let (before, response) = agent.until_response(&json!(id)).await;
    assert!(before.is_empty(), "{before:?}");
    assert_eq!(response["result"]["stopReason"], "cancelled");
    let id = agent
        .prompt(
            &session,
            r#"{"command":"run_scenario","scenario":"wait_for_cancel"}"#,
        )
        .await;
    agent
        .send_json(
            json!({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": session}}),
        )
        .await;
    let (before, response) = agent.until_response(&json!(id)).await;
    assert!(before.is_empty(), "{before:?}");
    assert_eq!(response["result"]["stopReason"], "cancelled");
}

#[tokio::test]
async fn full_runs_everything_and_cancel_stops_callbacks() {
    let (mut agent, session) = testy().await;
    let prompt = agent.prompt(&session, "full").await;
    // Answer nothing: cancel at the first client request.
    loop {
        let message = agent.json().await;
        if message["method"] == "session/request_permission" {
            agent
                .send_json(json!({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": session}}))
                .await;
            break;
        }
    }
    let (before, response) = agent.until_response(&json!(prompt)).await;
    assert!(before.is_empty(), "nothing after the cancel: {before:?}");
    assert_eq!(response["result"]["stopReason"], "cancelled");
}
