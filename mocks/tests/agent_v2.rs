//! ACP v2 (draft) in the mock agent: `ski acp client connect --protocol 2` drives a v2 turn
//! through `ski-mock-agent` (config options set by `configId`, the prompt acknowledged with its
//! `messageId`, the user message echoed, chunks with the reply's message id, a held tool call
//! cancelled with `tool_call/cancel`, idle at the end); the version rule at `initialize` and the
//! `--protocol 1` pin; what v2 drops (modes, `session/load`) refused or not sent; and the
//! official TypeScript SDK's v2 client (`experimental/v2`, the peer
//! `conformance/targets/peers/ts-sdk-v2`, installed by the test) cancelling a held tool call.

use crate::agent_support;
use crate::peer_support;

use std::path::{Path, PathBuf};
use std::time::Duration;

use agent_support::{Agent, PATIENCE, Start, binary};
use serde_json::{Value, json};
use ski::transport::child::{ChildSpec, OutputStream, spawn};

/// `ski`, built beside the mock agent.
fn ski() -> PathBuf {
    let path = Path::new(binary()).with_file_name("ski");
    assert!(
        path.is_file(),
        "{} is missing: run `cargo build -p ski --bin ski`",
        path.display()
    );
    path
}

/// Every prompt holds a tool call until it is cancelled, then echoes.
const HOLD: &str = r#"
[[on]]
prompt = "*"
do = [{ hold_tool_call = "Wait until cancelled" }, { turn = "${prompt}" }]
"#;

/// `ski acp client connect` with `args` against the mock agent with `agent_args`: its exit
/// code, stdout lines (JSON) and stderr.
async fn client(args: &[&str], agent_args: &str) -> (Option<i32>, Vec<Value>, String) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    std::fs::write(dir.path().join("hold.toml"), HOLD).expect("write the script");
    let agent_cmd = format!(
        "{} {}",
        binary(),
        agent_args.replace("{dir}", &dir.path().display().to_string())
    );
    let spec = ChildSpec::new("client", ski())
        .args(["acp", "client", "connect", "--json", "--log-level", "error"])
        .args(args)
        .args(["--agent-cmd", &agent_cmd])
        .cwd(dir.path())
        .grace(Duration::from_millis(500));
    let mut child = spawn(spec).expect("ski acp client starts");
    child.close_stdin();
    let mut out = Vec::new();
    let mut err = String::new();
    let read = async {
        while let Some((stream, line)) = child.next_output_line().await {
            match stream {
                OutputStream::Stdout => out.push(
                    serde_json::from_str(&line)
                        .unwrap_or_else(|e| panic!("stdout line is not JSON ({e}): {line}")),
                ),
                OutputStream::Stderr => {
                    err.push_str(&line);
                    err.push('\n');
                }
            }
        }
    };
    tokio::time::timeout(PATIENCE, read)
        .await
        .expect("the client ends");
    let status = child.wait().await.expect("an exit status");
    (status.code(), out, err)
}

/// The payloads of the client's `session_update` lines of kind `kind`.
fn updates<'a>(lines: &'a [Value], kind: &str) -> Vec<&'a Value> {
    lines
        .iter()
        .filter(|line| line["type"] == "session_update" && line["update"] == kind)
        .map(|line| &line["payload"])
        .collect()
}

#[tokio::test]
async fn ski_client_at_2_drives_a_v2_turn_and_cancels_a_held_tool_call() {
    let (code, lines, err) = client(
        &[
            "--protocol",
            "2",
            "--cancel-tool-calls",
            "--config",
            "verbosity=brief",
            "--prompt",
            "hello v2",
        ],
        "--script {dir}/hold.toml",
    )
    .await;
    assert_eq!(code, Some(0), "{lines:?}\n{err}");

    // The config option set by configId.
    assert_eq!(lines[0]["type"], "config_options", "{lines:?}");
    let verbosity = &lines[0]["configOptions"][0];
    assert_eq!(verbosity["configId"], "verbosity", "{verbosity}");
    assert_eq!(verbosity["currentValue"], "brief", "{verbosity}");

    // The acknowledgement names the user message, which echoes the prompt.
    let ack = &lines[1];
    assert_eq!(ack["type"], "prompt_ack", "{lines:?}");
    let user = updates(&lines, "user_message");
    assert_eq!(user.len(), 1, "{lines:?}");
    assert_eq!(user[0]["messageId"], ack["messageId"]);
    assert_eq!(
        user[0]["content"],
        json!([{"type": "text", "text": "hello v2"}])
    );

    // The held tool call advertised cancel, was cancelled and ended `cancelled`.
    let calls = updates(&lines, "tool_call_update");
    let held = calls
        .iter()
        .find(|c| c["capabilities"]["cancel"] == json!({}))
        .unwrap_or_else(|| panic!("a cancellable tool call: {lines:?}"));
    let id = &held["toolCallId"];
    assert_eq!(held["status"], "in_progress");
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

    // The reply's chunks carry its own message id.
    let chunks = updates(&lines, "agent_message_chunk");
    assert_eq!(chunks.len(), 1, "{lines:?}");
    let message = chunks[0]["messageId"].as_str().expect("a messageId");
    assert!(message.starts_with("msg_") && chunks[0]["messageId"] != ack["messageId"]);
    assert_eq!(chunks[0]["content"]["text"], "hello v2");

    // running after the user message, idle with end_turn last.
    let states = updates(&lines, "state_update");
    assert_eq!(states.first().map(|s| &s["state"]), Some(&json!("running")));
    assert_eq!(
        states.last().copied(),
        Some(&json!({"sessionUpdate": "state_update", "state": "idle", "stopReason": "end_turn"}))
    );
    assert_eq!(lines.last().unwrap()["stopReason"], "end_turn", "{lines:?}");
}

#[tokio::test]
async fn the_built_in_echo_turn_in_v2_and_a_client_pinned_to_1() {
    // No script: the standard personality's echo, in v2.
    let (code, lines, err) = client(&["--protocol", "2", "--prompt", "plain"], "").await;
    assert_eq!(code, Some(0), "{lines:?}\n{err}");
    let chunks = updates(&lines, "agent_message_chunk");
    assert_eq!(chunks.len(), 1, "{lines:?}");
    assert!(chunks[0]["messageId"].is_string(), "{lines:?}");
    assert_eq!(
        updates(&lines, "state_update").last().map(|s| &s["state"]),
        Some(&json!("idle"))
    );
    // A v1 client gets v1: the prompt's own result, no v2 kind.
    let (code, lines, err) = client(&["--protocol", "1", "--prompt", "plain"], "").await;
    assert_eq!(code, Some(0), "{lines:?}\n{err}");
    assert!(updates(&lines, "state_update").is_empty(), "{lines:?}");
    assert_eq!(lines.last().unwrap()["stopReason"], "end_turn", "{lines:?}");
}

#[tokio::test]
async fn a_mock_pinned_to_1_stops_a_client_pinned_to_2() {
    let (code, lines, err) = client(&["--protocol", "2", "--prompt", "hi"], "--protocol 1").await;
    assert_ne!(code, Some(0), "{lines:?}");
    assert!(lines.is_empty(), "no turn ran: {lines:?}");
    assert!(
        err.contains("answered initialize with protocol version 1"),
        "{err}"
    );
}

/// One request and its response, skipping what comes before it.
async fn call(agent: &mut Agent, method: &str, params: Value) -> (Vec<Value>, Value) {
    let id = agent.request(method, params).await;
    agent.until_response(&json!(id)).await
}

#[tokio::test]
async fn initialize_follows_the_version_rule_and_v2_drops_modes() {
    let script = r#"
[[on]]
prompt = "mode"
do = [
  { update = { sessionUpdate = "current_mode_update", currentModeId = "plan" } },
  { update = { sessionUpdate = "agent_message_chunk", content = { type = "text", text = "after" } } },
  { respond = { stopReason = "max_tokens" } },
]
"#;
    let mut agent =
        Agent::start(Start::args(&["--script", "{dir}/script.toml"]).file("script.toml", script));
    let info = json!({"name": "test", "version": "1"});
    // Below every version the agent speaks: -32022 with what it speaks.
    let (_, below) = call(
        &mut agent,
        "initialize",
        json!({"protocolVersion": 0, "info": info}),
    )
    .await;
    assert_eq!(below["error"]["code"], -32022, "{below}");
    assert_eq!(
        below["error"]["data"],
        json!({"requested": 0, "supported": [1, 2]})
    );
    // v1's params asking for 2: v1, as v1 negotiates.
    let (_, v1) = call(&mut agent, "initialize", json!({"protocolVersion": 2})).await;
    assert_eq!(v1["result"]["protocolVersion"], 1, "{v1}");
    assert!(v1["result"]["agentCapabilities"].is_object(), "{v1}");
    // v2's params asking for more than 2: 2, in v2's form.
    let (_, v2) = call(
        &mut agent,
        "initialize",
        json!({"protocolVersion": 7, "info": info}),
    )
    .await;
    assert_eq!(v2["result"]["protocolVersion"], 2, "{v2}");
    assert!(v2["result"]["capabilities"]["session"].is_object(), "{v2}");
    assert!(v2["result"]["info"]["name"].is_string(), "{v2}");

    // session/new without mcpServers, config options by configId, no modes.
    let cwd = agent.path("").display().to_string();
    let (_, new) = call(&mut agent, "session/new", json!({"cwd": cwd})).await;
    let session = new["result"]["sessionId"]
        .as_str()
        .expect("a session")
        .to_owned();
    assert!(new["result"].get("modes").is_none(), "{new}");
    assert_eq!(new["result"]["configOptions"][0]["configId"], "verbosity");
    // What v2 dropped: -32601.
    for method in ["session/set_mode", "session/load", "authenticate"] {
        let (_, gone) = call(
            &mut agent,
            method,
            json!({"sessionId": session, "modeId": "plan", "cwd": cwd, "mcpServers": [], "methodId": "m"}),
        )
        .await;
        assert_eq!(gone["error"]["code"], -32601, "{method}: {gone}");
    }
    // A config value without v2's `type`: -32602.
    let (_, untyped) = call(
        &mut agent,
        "session/set_config_option",
        json!({"sessionId": session, "configId": "verbosity", "value": "brief"}),
    )
    .await;
    assert_eq!(untyped["error"]["code"], -32602, "{untyped}");
    // tool_call/cancel of no tool call: -32602; of no session: -32002.
    let (_, unknown) = call(
        &mut agent,
        "tool_call/cancel",
        json!({"sessionId": session, "toolCallId": "call_x"}),
    )
    .await;
    assert_eq!(unknown["error"]["code"], -32602, "{unknown}");
    let (_, nosession) = call(
        &mut agent,
        "tool_call/cancel",
        json!({"sessionId": "nope", "toolCallId": "call_x"}),
    )
    .await;
    assert_eq!(nosession["error"]["code"], -32002, "{nosession}");

    // A scripted turn: acknowledged before its steps, the mode update not sent, the chunk
    // with a message id, the scripted result as the idle state's stop reason.
    let id = agent.prompt(&session, "mode").await;
    let (_, ack) = agent.until_response(&json!(id)).await;
    let user_id = ack["result"]["messageId"]
        .as_str()
        .expect("a messageId")
        .to_owned();
    let mut seen = Vec::new();
    loop {
        let message = agent.json().await;
        let update = message["params"]["update"].clone();
        seen.push(update.clone());
        if update["sessionUpdate"] == "state_update" && update["state"] == "idle" {
            break;
        }
    }
    let kinds: Vec<&str> = seen
        .iter()
        .map(|u| u["sessionUpdate"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(
        kinds,
        [
            "user_message",
            "state_update",
            "agent_message_chunk",
            "state_update"
        ],
        "{seen:?}"
    );
    assert_eq!(seen[0]["messageId"], user_id.as_str());
    assert!(seen[2]["messageId"].is_string(), "{seen:?}");
    assert_eq!(seen[3]["stopReason"], "max_tokens", "{seen:?}");
    let err = agent
        .stderr_until(|text| text.contains("current_mode_update"))
        .await;
    assert!(err.contains("no place in ACP v2"), "{err}");
}

#[tokio::test]
async fn the_typescript_sdk_v2_client_cancels_a_held_tool_call() {
    if !peer_support::on_path("node") || !peer_support::on_path("npm") {
        println!("ts-sdk-v2: NOT RUN (node or npm is not on PATH)");
        return;
    }
    let Some(peer) = peer_support::install("ts-sdk-v2").await else {
        return;
    };
    let dir = tempfile::tempdir().expect("a temporary directory");
    std::fs::write(dir.path().join("hold.toml"), HOLD).expect("write the script");
    let spec = ChildSpec::new("ts-sdk-v2-client", "node")
        .arg(peer.join("v2-client.mjs"))
        .args(["--prompt", "hello ts", "--", binary(), "--script"])
        .arg(dir.path().join("hold.toml"))
        .cwd(dir.path());
    let (code, output) = tokio::time::timeout(PATIENCE, peer_support::run_to_end(spec))
        .await
        .expect("the TypeScript client ends");
    assert_eq!(code, Some(0), "{output}");
    // The client's JSON lines (its agent's stderr, if any, comes on the same output).
    let lines: Vec<Value> = output
        .lines()
        .filter_map(|line| serde_json::from_str(line).ok())
        .collect();
    assert_eq!(
        lines[0],
        json!({"type": "initialize", "protocolVersion": 2, "session": true})
    );
    let ack = lines
        .iter()
        .find(|l| l["type"] == "prompt_ack")
        .expect("the prompt's acknowledgement");
    let payloads = |kind: &str| -> Vec<Value> {
        lines
            .iter()
            .filter(|l| l["type"] == "session_update" && l["payload"]["sessionUpdate"] == kind)
            .map(|l| l["payload"].clone())
            .collect()
    };
    let user = payloads("user_message");
    assert_eq!(user.len(), 1, "{output}");
    assert_eq!(user[0]["messageId"], ack["messageId"]);
    let cancel = lines
        .iter()
        .find(|l| l["type"] == "tool_call_cancel")
        .unwrap_or_else(|| panic!("a tool_call/cancel: {output}"));
    assert!(
        payloads("tool_call_update")
            .iter()
            .any(|c| c["toolCallId"] == cancel["toolCallId"] && c["status"] == "cancelled"),
        "{output}"
    );
    let chunks = payloads("agent_message_chunk");
    assert_eq!(chunks.len(), 1, "{output}");
    assert_eq!(chunks[0]["content"]["text"], "hello ts");
    assert!(chunks[0]["messageId"].is_string() && chunks[0]["messageId"] != ack["messageId"]);
    assert_eq!(
        lines.last().unwrap(),
        &json!({"type": "idle", "stopReason": "end_turn"}),
        "{output}"
    );
    println!("ts-sdk-v2 peer: ran, ok");
}

#[tokio::test]
async fn a_v2_turn_types_command_inputs_and_frames_a_permission_request() {
    let script = r#"
[[on]]
prompt = "*"
do = [
  { update = { sessionUpdate = "available_commands_update", availableCommands = [
      { name = "echo", description = "Echo", input = { hint = "text to echo" } },
      { name = "pick", description = "Pick", input = { type = "_pick", hint = "one" } },
      { name = "help", description = "Help" },
  ] } },
  { request = "session/request_permission", params = { sessionId = "${session}", toolCall = { toolCallId = "call_p", title = "Run", kind = "execute", status = "pending" }, options = [{ optionId = "allow", name = "Allow", kind = "allow_once" }] } },
  { turn = "${prompt}" },
]
"#;
    let mut agent =
        Agent::start(Start::args(&["--script", "{dir}/script.toml"]).file("script.toml", script));
    let info = json!({"name": "test", "version": "1"});
    let (_, init) = call(
        &mut agent,
        "initialize",
        json!({"protocolVersion": 2, "info": info}),
    )
    .await;
    assert_eq!(init["result"]["protocolVersion"], 2, "{init}");
    let cwd = agent.path("").display().to_string();
    let (_, new) = call(&mut agent, "session/new", json!({"cwd": cwd})).await;
    let session = new["result"]["sessionId"]
        .as_str()
        .expect("a session")
        .to_owned();
    agent.prompt(&session, "hello").await;
    // Read to the idle state, answering the permission request when it comes.
    let mut seen = Vec::new();
    loop {
        let message = agent.json().await;
        if message["method"] == "session/request_permission" {
            seen.push(json!("permission request"));
            agent
                .send_json(json!({"jsonrpc": "2.0", "id": message["id"],
                    "result": {"outcome": {"outcome": "selected", "optionId": "allow"}}}))
                .await;
            continue;
        }
        let update = &message["params"]["update"];
        if update.is_null() {
            continue;
        }
        seen.push(update.clone());
        if update["sessionUpdate"] == "state_update" && update["state"] == "idle" {
            break;
        }
    }
    let commands = seen
        .iter()
        .find(|u| u["sessionUpdate"] == "available_commands_update")
        .expect("an available_commands_update");
    assert_eq!(
        commands["availableCommands"][0]["input"],
        json!({"type": "text", "hint": "text to echo"}),
        "v1's free-text input gets v2's type"
    );
    assert_eq!(commands["availableCommands"][1]["input"]["type"], "_pick");
    assert!(commands["availableCommands"][2].get("input").is_none());
    let states: Vec<String> = seen
        .iter()
        .filter_map(|u| {
            if u == "permission request" {
                return Some("permission request".to_owned());
            }
            (u["sessionUpdate"] == "state_update")
                .then(|| u["state"].as_str().unwrap_or("").to_owned())
        })
        .collect();
    assert_eq!(
        states,
        [
            "running",
            "requires_action",
            "permission request",
            "running",
            "idle"
        ],
        "{seen:?}"
    );
}
