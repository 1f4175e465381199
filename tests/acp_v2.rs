//! ACP v2 (draft) between the real binaries over real pipes: `ski acp client connect
//! --protocol 2` against `ski acp serve` (initialize at 2, session set-up with config options, a
//! prompt acknowledged with its `messageId` and followed to its idle `state_update`, a held tool
//! call cancelled with `tool_call/cancel`), each side pinned to 1 against the other offering 2,
//! and invalid v2 input answered with its JSON-RPC error. The v2 messages are snapshotted in
//! `golden/acp_v2/` with their generated ids numbered in order of appearance.

use std::collections::HashMap;
use std::time::Duration;

use assert_cmd::cargo::cargo_bin_cmd;
use serde_json::{Value, json};
use ski::transport::child::{self, ChildSpec};

const SKI: &str = env!("CARGO_BIN_EXE_ski");
const SNAPSHOTS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/golden/acp_v2");

/// How long any wait may take before the test fails.
const PATIENCE: Duration = Duration::from_secs(30);

async fn within<T>(what: &str, fut: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(PATIENCE, fut)
        .await
        .unwrap_or_else(|_| panic!("timed out waiting for {what}"))
}

/// Generated ids (`sess_…`, `msg_…`, `call_…`) numbered in order of appearance, so snapshots
/// and comparisons do not depend on them.
#[derive(Default)]
struct Ids(HashMap<String, String>);

impl Ids {
    fn normalize(&mut self, value: &Value) -> Value {
        match value {
            Value::String(text) => {
                for prefix in ["sess_", "msg_", "call_"] {
                    if let Some(rest) = text.strip_prefix(prefix)
                        && rest.len() == 32
                        && rest.chars().all(|c| c.is_ascii_hexdigit())
                    {
                        let next = self.0.len() + 1;
                        let named = self
                            .0
                            .entry(text.clone())
                            .or_insert_with(|| format!("{prefix}{next}"));
                        return json!(named);
                    }
                }
                value.clone()
            }
            Value::Array(items) => Value::Array(items.iter().map(|v| self.normalize(v)).collect()),
            Value::Object(map) => Value::Object(
                map.iter()
                    .map(|(k, v)| (k.clone(), self.normalize(v)))
                    .collect(),
            ),
            other => other.clone(),
        }
    }
}

fn lines(stdout: &[u8]) -> Vec<Value> {
    String::from_utf8_lossy(stdout)
        .lines()
        .map(|line| {
            serde_json::from_str(line)
                .unwrap_or_else(|e| panic!("stdout line is not JSON ({e}): {line}"))
        })
        .collect()
}

fn agent_cmd(args: &str) -> String {
    format!("{SKI} acp serve --log-level error {args}")
}

/// The `update` payloads of kind `kind` among the client's lines.
fn updates<'a>(lines: &'a [Value], kind: &str) -> Vec<&'a Value> {
    lines
        .iter()
        .filter(|line| line["type"] == "session_update" && line["update"] == kind)
        .map(|line| &line["payload"])
        .collect()
}

#[test]
fn client_and_agent_hold_a_v2_conversation_and_cancel_a_tool_call() {
    let output = cargo_bin_cmd!("ski")
        .args(["acp", "client", "connect", "--protocol", "2", "--json"])
        .args(["--cancel-tool-calls", "--config", "thought_level=high"])
        .args(["--prompt", "hello v2", "--log-level", "error"])
        .args(["--agent-cmd", &agent_cmd("--hold-tool-call")])
        .timeout(PATIENCE)
        .output()
        .expect("ski acp client runs");
    assert!(output.status.success(), "{output:?}");
    let lines = lines(&output.stdout);

    // Config options, keyed by configId, after the change.
    let options = &lines[0];
    assert_eq!(options["type"], "config_options", "{options}");
    let level = options["configOptions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["configId"] == "thought_level")
        .expect("a thought_level option");
    assert_eq!(level["currentValue"], "high");

    // The prompt is acknowledged with the id of the user message it became.
    let ack = &lines[1];
    assert_eq!(ack["type"], "prompt_ack", "{ack}");
    let user = updates(&lines, "user_message");
    assert_eq!(user.len(), 1, "{lines:?}");
    assert_eq!(user[0]["messageId"], ack["messageId"]);
    assert_eq!(user[0]["content"][0]["text"], "hello v2");

    // The change's v2 config_option_update reaches the client too (v1's decoder cannot read it).
    let changed = updates(&lines, "config_option_update");
    assert!(
        changed.iter().any(|update| {
            update["configOptions"].as_array().is_some_and(|options| {
                options
                    .iter()
                    .any(|o| o["configId"] == "thought_level" && o["currentValue"] == "high")
            })
        }),
        "{lines:?}"
    );
    // The first turn titles the session, in v2 as in v1.
    let info = updates(&lines, "session_info_update");
    assert_eq!(info.len(), 1, "{lines:?}");
    assert_eq!(info[0]["title"], "hello v2");

    // running first, requires_action while the permission request waits, running again once it
    // is answered, idle with end_turn last.
    let states = updates(&lines, "state_update");
    let order: Vec<&Value> = states.iter().map(|s| &s["state"]).collect();
    assert_eq!(
        order,
        [
            &json!("running"),
            &json!("requires_action"),
            &json!("running"),
            &json!("idle")
        ],
        "{lines:?}"
    );
    assert_eq!(states.first().map(|s| &s["state"]), Some(&json!("running")));
    assert_eq!(
        states.last().copied(),
        Some(&json!({"sessionUpdate": "state_update", "state": "idle", "stopReason": "end_turn"}))
    );

    // The held tool call advertised cancel, was cancelled, and ended `cancelled`.
    let calls = updates(&lines, "tool_call_update");
    let held = calls
        .iter()
        .find(|c| c["capabilities"]["cancel"] == json!({}))
        .expect("a cancellable tool call");
    let id = &held["toolCallId"];
    assert!(
        lines
            .iter()
            .any(|l| l["type"] == "tool_call_cancel" && &l["toolCallId"] == id),
        "{lines:?}"
    );
    assert!(
        calls
            .iter()
            .any(|c| &c["toolCallId"] == id && c["status"] == "cancelled"),
        "{calls:?}"
    );

    // Every chunk carries the one message id of the reply.
    let chunks = updates(&lines, "agent_message_chunk");
    assert!(!chunks.is_empty(), "{lines:?}");
    for chunk in &chunks {
        let id = chunk["messageId"].as_str().expect("a messageId");
        assert!(!id.is_empty() && id != ack["messageId"], "{chunk}");
    }
    assert_eq!(chunks[0]["content"]["text"], "hello v2");
    assert_eq!(
        lines.last().unwrap(),
        &json!({"type": "prompt_result", "sessionId": lines[1]["sessionId"], "stopReason": "end_turn"})
    );

    let mut ids = Ids::default();
    let transcript: Vec<Value> = lines.iter().map(|line| ids.normalize(line)).collect();
    insta::with_settings!({ snapshot_path => SNAPSHOTS, prepend_module_to_snapshot => false, omit_expression => true }, {
        insta::assert_json_snapshot!("client_conversation", transcript, {
            "[].payload.updatedAt" => "[time]",
        });
    });
}

#[test]
fn a_client_pinned_to_2_stops_when_the_agent_is_pinned_to_1() {
    let output = cargo_bin_cmd!("ski")
        .args([
            "acp",
            "client",
            "connect",
            "--protocol",
            "2",
            "--prompt",
            "hi",
        ])
        .args([
            "--log-level",
            "error",
            "--agent-cmd",
            &agent_cmd("--protocol 1"),
        ])
        .timeout(PATIENCE)
        .output()
        .expect("ski acp client runs");
    assert!(!output.status.success(), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("answered initialize with protocol version 1")
            && stderr.contains("pinned to 2"),
        "{stderr}"
    );
    assert!(output.stdout.is_empty(), "no turn ran: {output:?}");
}

#[test]
fn a_client_pinned_to_1_gets_1_from_an_agent_offering_2() {
    let output = cargo_bin_cmd!("ski")
        .args([
            "acp",
            "client",
            "connect",
            "--protocol",
            "1",
            "--json",
            "--prompt",
            "hi",
        ])
        .args(["--log-level", "error", "--agent-cmd", &agent_cmd("")])
        .timeout(PATIENCE)
        .output()
        .expect("ski acp client runs");
    assert!(output.status.success(), "{output:?}");
    let lines = lines(&output.stdout);
    // A v1 turn: the prompt's own result ends it, and no v2 kind is sent.
    assert_eq!(lines.last().unwrap()["stopReason"], "end_turn", "{lines:?}");
    assert!(updates(&lines, "state_update").is_empty(), "{lines:?}");
    assert!(updates(&lines, "user_message").is_empty(), "{lines:?}");
}

/// Sends one request to a spawned agent and returns its response, skipping notifications.
async fn call(agent: &mut child::Child, id: u64, method: &str, params: Value) -> Value {
    let request = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
    agent.send_line(&request.to_string()).await.unwrap();
    loop {
        let line = within(method, agent.next_line()).await.unwrap().unwrap();
        let message: Value = serde_json::from_str(&line).unwrap();
        if message["id"] == json!(id) {
            return message;
        }
    }
}

#[tokio::test]
async fn an_agent_offering_2_settles_by_the_version_rule_and_refuses_invalid_v2_input() {
    let info = json!({"name": "test", "version": "1"});
    let mut agent = child::spawn(ChildSpec::new("agent", SKI).args([
        "acp",
        "serve",
        "--log-level",
        "error",
        "--permission-mode",
        "disabled",
    ]))
    .expect("spawn ski");
    let mut ids = Ids::default();
    let mut answers = Vec::new();
    // Below every version the agent speaks: -32022 with what it speaks.
    let below = call(
        &mut agent,
        1,
        "initialize",
        json!({"protocolVersion": 0, "info": info}),
    )
    .await;
    assert_eq!(below["error"]["code"], -32022, "{below}");
    assert_eq!(
        below["error"]["data"],
        json!({"requested": 0, "supported": [1, 2]})
    );
    answers.push(below);
    // v2 params with an invalid info: -32602.
    let bad = call(
        &mut agent,
        2,
        "initialize",
        json!({"protocolVersion": 2, "info": 7}),
    )
    .await;
    assert_eq!(bad["error"]["code"], -32602, "{bad}");
    // Above its newest: its newest, 2, in v2's form.
    let above = call(
        &mut agent,
        3,
        "initialize",
        json!({"protocolVersion": 9, "info": info}),
    )
    .await;
    assert_eq!(above["result"]["protocolVersion"], 2, "{above}");
    assert!(
        above["result"]["capabilities"]["session"].is_object(),
        "{above}"
    );
    answers.push(above);
    // v1 methods v2 dropped, and auth/login without authMethods: -32601.
    for (id, method) in [
        (4, "session/load"),
        (5, "session/set_mode"),
        (6, "auth/login"),
    ] {
        let gone = call(
            &mut agent,
            id,
            method,
            json!({"sessionId": "s", "methodId": "m"}),
        )
        .await;
        assert_eq!(gone["error"]["code"], -32601, "{method}: {gone}");
    }
    let new = call(&mut agent, 7, "session/new", json!({"cwd": "/tmp"})).await;
    let session = new["result"]["sessionId"].clone();
    assert!(session.is_string(), "{new}");
    answers.push(new);
    // tool_call/cancel of no tool call: -32602; of no session: -32002.
    let unknown = call(
        &mut agent,
        8,
        "tool_call/cancel",
        json!({"sessionId": session, "toolCallId": "call_x"}),
    )
    .await;
    assert_eq!(unknown["error"]["code"], -32602, "{unknown}");
    let nosession = call(
        &mut agent,
        9,
        "tool_call/cancel",
        json!({"sessionId": "sess_x", "toolCallId": "call_x"}),
    )
    .await;
    assert_eq!(nosession["error"]["code"], -32002, "{nosession}");
    // A config value whose type does not fit it, and v1's form without `type`: -32602.
    let misfit = call(
        &mut agent,
        10,
        "session/set_config_option",
        json!({"sessionId": session, "configId": "model", "type": "boolean", "value": "echo"}),
    )
    .await;
    assert_eq!(misfit["error"]["code"], -32602, "{misfit}");
    let untyped = call(
        &mut agent,
        11,
        "session/set_config_option",
        json!({"sessionId": session, "configId": "model", "value": "echo"}),
    )
    .await;
    assert_eq!(untyped["error"]["code"], -32602, "{untyped}");
    // A prompt without a session id: -32602; the acknowledgement of a good one.
    let noid = call(
        &mut agent,
        12,
        "session/prompt",
        json!({"prompt": [{"type": "text", "text": "x"}]}),
    )
    .await;
    assert_eq!(noid["error"]["code"], -32602, "{noid}");
    let ack = call(
        &mut agent,
        13,
        "session/prompt",
        json!({"sessionId": session, "prompt": [{"type": "text", "text": "x"}]}),
    )
    .await;
    assert!(ack["result"]["messageId"].is_string(), "{ack}");
    answers.push(ack);
    let answers: Vec<Value> = answers.iter().map(|a| ids.normalize(a)).collect();
    insta::with_settings!({ snapshot_path => SNAPSHOTS, prepend_module_to_snapshot => false, omit_expression => true }, {
        insta::assert_json_snapshot!("agent_answers", answers, {
            "[].result.info.version" => "[version]",
        });
    });
    agent.shutdown().await.unwrap();
}

#[tokio::test]
async fn an_agent_pinned_to_1_answers_1_to_a_v2_client_and_serves_no_v2_method() {
    let mut agent = child::spawn(ChildSpec::new("agent", SKI).args([
        "acp",
        "serve",
        "--log-level",
        "error",
        "--protocol",
        "1",
    ]))
    .expect("spawn ski");
    let init = call(
        &mut agent,
        1,
        "initialize",
        json!({"protocolVersion": 2, "info": {"name": "test", "version": "1"}}),
    )
    .await;
    assert_eq!(init["result"]["protocolVersion"], 1, "{init}");
    assert!(
        init["result"]["agentCapabilities"].is_object(),
        "v1's form: {init}"
    );
    let login = call(&mut agent, 2, "auth/login", json!({"methodId": "m"})).await;
    assert_eq!(login["error"]["code"], -32601, "{login}");
    agent.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_v2_resume_replays_from_the_start_and_refuses_an_unknown_cursor() {
    let mut agent = child::spawn(ChildSpec::new("agent", SKI).args([
        "acp",
        "serve",
        "--log-level",
        "error",
        "--permission-mode",
        "disabled",
    ]))
    .expect("spawn ski");
    let info = json!({"name": "test", "version": "1"});
    let init = call(
        &mut agent,
        1,
        "initialize",
        json!({"protocolVersion": 2, "info": info}),
    )
    .await;
    assert_eq!(init["result"]["protocolVersion"], 2, "{init}");
    let created = call(&mut agent, 2, "session/new", json!({"cwd": "/"})).await;
    let session = created["result"]["sessionId"].clone();
    // The turn ends with its idle state_update, after the prompt's acknowledgement.
    let ack = call(
        &mut agent,
        3,
        "session/prompt",
        json!({"sessionId": session, "prompt": [{"type": "text", "text": "remember me"}]}),
    )
    .await;
    assert!(ack["result"]["messageId"].is_string(), "{ack}");
    let mut commands = None;
    loop {
        let line = within("the idle state", agent.next_line())
            .await
            .unwrap()
            .unwrap();
        let update: Value = serde_json::from_str(&line).unwrap();
        let update = &update["params"]["update"];
        if update["sessionUpdate"] == "available_commands_update" {
            commands = Some(update["availableCommands"].clone());
        }
        if update["sessionUpdate"] == "state_update" && update["state"] == "idle" {
            break;
        }
    }
    // v2 names a command input's type.
    let commands = commands.expect("an available_commands_update");
    assert!(
        commands
            .as_array()
            .unwrap()
            .iter()
            .filter(|c| c.get("input").is_some())
            .all(|c| c["input"]["type"] == "text"),
        "{commands}"
    );
    let unknown = call(
        &mut agent,
        4,
        "session/resume",
        json!({"sessionId": session, "cwd": "/", "replayFrom": {"type": "_somewhere"}}),
    )
    .await;
    assert_eq!(unknown["error"]["code"], -32602, "{unknown}");
    // From the start: the prompt and the reply again, each whole with an id, then the answer.
    let request = json!({"jsonrpc": "2.0", "id": 5, "method": "session/resume",
        "params": {"sessionId": session, "cwd": "/", "replayFrom": {"type": "start"}}});
    agent.send_line(&request.to_string()).await.unwrap();
    let mut replayed = Vec::new();
    loop {
        let line = within("the resume", agent.next_line())
            .await
            .unwrap()
            .unwrap();
        let message: Value = serde_json::from_str(&line).unwrap();
        if message["id"] == 5 {
            assert!(message["result"].is_object(), "{message}");
            break;
        }
        replayed.push(message["params"]["update"].clone());
    }
    let kinds: Vec<&Value> = replayed.iter().map(|u| &u["sessionUpdate"]).collect();
    assert_eq!(
        kinds,
        [&json!("user_message"), &json!("agent_message")],
        "{replayed:?}"
    );
    for update in &replayed {
        assert!(
            update["messageId"]
                .as_str()
                .is_some_and(|id| !id.is_empty())
        );
        assert_eq!(update["content"][0]["text"], "remember me");
    }
    agent.shutdown().await.unwrap();
}
