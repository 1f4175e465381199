//! Golden fixtures of the newer message kinds: every v2 `session/update` kind decoded into
//! ski's v2 types and encoded back unchanged (snapshotted in `golden/acp_v2/`), and the framing of
//! the remote `/acp` transport through its real code paths (snapshotted in
//! `golden/acp_http/snapshots/`): an SSE event as `acp::remote::sse::event` frames it, and the
//! status and headers `ski acp serve --transport http` answers an initialize POST (200), a later
//! POST (202) and the WebSocket upgrade (101) with.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::{Value, json};
use ski::acp::v2;
use ski::transport::child::{self, ChildSpec};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const SKI: &str = env!("CARGO_BIN_EXE_ski");
const V2_SNAPSHOTS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/golden/acp_v2");
const HTTP_SNAPSHOTS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/golden/acp_http/snapshots");

/// How long any wait may take before the test fails.
const PATIENCE: Duration = Duration::from_secs(30);

/// One fixture per v2 update kind, as the v2 schema (npm-sdk 2.4.0) shapes it.
fn v2_updates() -> Vec<Value> {
    let text = json!({"type": "text", "text": "hi"});
    vec![
        json!({"sessionUpdate": "user_message_chunk", "messageId": "msg_u", "content": text}),
        json!({"sessionUpdate": "user_message", "messageId": "msg_u", "content": [text]}),
        json!({"sessionUpdate": "agent_message_chunk", "messageId": "msg_a", "content": text}),
        json!({"sessionUpdate": "agent_message", "messageId": "msg_a", "content": null}),
        json!({"sessionUpdate": "agent_thought_chunk", "messageId": "msg_t", "content": text}),
        json!({"sessionUpdate": "agent_thought", "messageId": "msg_t", "content": [text]}),
        json!({"sessionUpdate": "state_update", "state": "running"}),
        json!({"sessionUpdate": "state_update", "state": "requires_action"}),
        json!({"sessionUpdate": "state_update", "state": "idle", "stopReason": "error"}),
        json!({"sessionUpdate": "tool_call_content_chunk", "toolCallId": "call_1",
               "content": {"type": "content", "content": text}}),
        json!({"sessionUpdate": "tool_call_update", "toolCallId": "call_1", "title": "Read",
               "kind": "read", "status": "cancelled", "capabilities": {"cancel": {}}}),
        json!({"sessionUpdate": "plan_update", "plan": {"type": "items", "planId": "plan",
               "entries": [{"content": "Reply", "priority": "high", "status": "in_progress"}]}}),
        json!({"sessionUpdate": "available_commands_update",
               "availableCommands": [{"name": "echo", "description": "Echo"}]}),
        json!({"sessionUpdate": "config_option_update", "configOptions": [{"configId": "model",
               "name": "Model", "type": "select", "currentValue": "echo",
               "options": [{"value": "echo", "name": "Echo"}]}]}),
        json!({"sessionUpdate": "session_info_update", "title": "A title",
               "updatedAt": "2026-01-01T00:00:00Z"}),
        json!({"sessionUpdate": "usage_update", "used": 12, "size": 200000}),
        json!({"sessionUpdate": "notice", "severity": "warning", "title": "Heads up"}),
    ]
}

#[test]
fn every_v2_update_kind_round_trips_and_matches_its_snapshot() {
    let mut covered = BTreeMap::new();
    for fixture in v2_updates() {
        let update: v2::SessionUpdate = serde_json::from_value(fixture.clone())
            .unwrap_or_else(|e| panic!("{fixture} does not decode: {e}"));
        assert!(update.is_known(), "{fixture}");
        assert_eq!(serde_json::to_value(&update).unwrap(), fixture);
        let kind = update.kind().to_owned();
        covered.entry(kind).or_insert_with(Vec::new).push(fixture);
    }
    let missing: Vec<&&str> = v2::SessionUpdate::KNOWN
        .iter()
        .filter(|kind| !covered.contains_key(**kind))
        .collect();
    assert!(missing.is_empty(), "no v2 fixture for {missing:?}");
    insta::with_settings!({ snapshot_path => V2_SNAPSHOTS, prepend_module_to_snapshot => false, omit_expression => true }, {
        insta::assert_json_snapshot!("update_kinds", covered);
    });
}

#[test]
fn an_sse_event_is_data_lines_then_a_blank_line() {
    let notification = json!({"jsonrpc": "2.0", "method": "session/update", "params": {
        "sessionId": "sess_1",
        "update": {"sessionUpdate": "agent_message_chunk", "messageId": "msg_1",
                   "content": {"type": "text", "text": "hi"}}}});
    let one = ski::acp::remote::sse::event(&notification.to_string());
    // A message of several lines (pretty-printed JSON, CRLF or LF) is one data line per line.
    let several = ski::acp::remote::sse::event("{\r\n  \"id\": 1\n}");
    let wire = format!(
        "{}{}",
        String::from_utf8(one.to_vec()).unwrap(),
        String::from_utf8(several.to_vec()).unwrap()
    );
    insta::with_settings!({ snapshot_path => HTTP_SNAPSHOTS, prepend_module_to_snapshot => false, omit_expression => true }, {
        insta::assert_snapshot!("sse_event_framing", wire);
    });
}

/// The status line and headers (names lowercase, sorted) of an HTTP/1.1 answer to `request`,
/// sent on a new connection to `address`; `date` is left out, the connection id named.
async fn answer_head(address: &str, request: &str) -> (String, BTreeMap<String, String>) {
    let mut stream = TcpStream::connect(address).await.expect("connect");
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut head = Vec::new();
    let mut byte = [0_u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        let read = tokio::time::timeout(PATIENCE, stream.read(&mut byte))
            .await
            .expect("the answer's head in time")
            .unwrap();
        assert_eq!(read, 1, "the connection ended inside the head: {head:?}");
        head.push(byte[0]);
    }
    let head = String::from_utf8(head).unwrap();
    let mut lines = head.split("\r\n").filter(|l| !l.is_empty());
    let status = lines.next().unwrap().to_owned();
    let headers = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(name, value)| (name.trim().to_ascii_lowercase(), value.trim().to_owned()))
        .filter(|(name, _)| name != "date")
        .collect();
    (status, headers)
}

fn post(address: &str, headers: &[(&str, &str)], body: &Value) -> String {
    let body = body.to_string();
    let mut request = format!(
        "POST /acp HTTP/1.1\r\nhost: {address}\r\ncontent-type: application/json\r\n\
         accept: application/json, text/event-stream\r\ncontent-length: {}\r\n",
        body.len()
    );
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str("\r\n");
    request.push_str(&body);
    request
}

#[tokio::test]
async fn the_remote_endpoint_answers_posts_and_the_upgrade_with_these_headers() {
    let mut agent = child::spawn(ChildSpec::new("agent", SKI).args([
        "acp",
        "serve",
        "--transport",
        "http",
        "--listen",
        "127.0.0.1:0",
        "--permission-mode",
        "disabled",
    ]))
    .expect("spawn ski acp serve");
    let url = tokio::time::timeout(PATIENCE, async {
        loop {
            let line = agent.next_stderr_line().await.expect("stderr open");
            if let Some(url) = line.strip_prefix("listening on ") {
                break url.to_owned();
            }
        }
    })
    .await
    .expect("the readiness line");
    let address = url
        .trim_start_matches("http://")
        .trim_end_matches("/acp")
        .to_owned();
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                            "params": {"protocolVersion": 1, "clientCapabilities": {}}});
    let (status, mut headers) = answer_head(&address, &post(&address, &[], &initialize)).await;
    let connection = headers
        .insert("acp-connection-id".into(), "[connection id]".into())
        .expect("an Acp-Connection-Id");
    // The answer's length follows the agent's capabilities, which golden/acp holds.
    headers.insert("content-length".into(), "[length]".into());
    let initialized = json!({"status": status, "headers": headers});

    let session_new = json!({"jsonrpc": "2.0", "id": 2, "method": "session/new",
                             "params": {"cwd": "/", "mcpServers": []}});
    let later = post(
        &address,
        &[
            ("acp-connection-id", &connection),
            ("acp-protocol-version", "1"),
        ],
        &session_new,
    );
    let (status, headers) = answer_head(&address, &later).await;
    let accepted = json!({"status": status, "headers": headers});

    let upgrade = format!(
        "GET /acp HTTP/1.1\r\nhost: {address}\r\nconnection: Upgrade\r\nupgrade: websocket\r\n\
         sec-websocket-version: 13\r\nsec-websocket-key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n"
    );
    let (status, mut headers) = answer_head(&address, &upgrade).await;
    headers
        .insert("acp-connection-id".into(), "[connection id]".into())
        .expect("an Acp-Connection-Id on the upgrade");
    let upgraded = json!({"status": status, "headers": headers});

    let framing = json!({
        "initialize POST": initialized,
        "later POST": accepted,
        "WebSocket upgrade": upgraded,
    });
    insta::with_settings!({ snapshot_path => HTTP_SNAPSHOTS, prepend_module_to_snapshot => false, omit_expression => true }, {
        insta::assert_json_snapshot!("answer_headers", framing);
    });
    agent.shutdown().await.unwrap();
}
