//! The personalities (standard ACP v1, kiro-cli, intercom in both handshakes), driven through a
//! real pipe to the built binary, with the bytes asserted.

use crate::agent_support;

use agent_support::{Agent, Control, Start, chunk_text, transcript};
use serde_json::{Value, json};

// ---- standard ------------------------------------------------------------------------------

#[tokio::test]
async fn standard_initialize_answers_exact_bytes() {
    let mut agent = Agent::spawn(&["--script", "echo"]);
    agent
        .send(r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}"#)
        .await;
    assert_eq!(
        agent.line().await,
        concat!(
            r#"{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":1,"agentCapabilities":{"loadSession":true,"#,
            r#""promptCapabilities":{"image":true,"audio":true,"embeddedContext":true},"mcpCapabilities":{"http":true,"sse":false},"#,
            r#""sessionCapabilities":{"list":{},"resume":{},"close":{},"delete":{}},"auth":{"logout":{}}},"authMethods":[],"#,
            r#""agentInfo":{"name":"ski-mock-agent","title":"ski mock agent","version":"0.1.0"}}}"#
        )
    );
}

#[tokio::test]
async fn standard_prompt_turn_echoes_and_load_replays_history() {
    let mut agent = Agent::spawn(&["--script", "echo"]);
    let session = agent.handshake().await;
    assert_eq!(session, "sess-1");
    let id = agent.prompt(&session, "hello there").await;
    assert_eq!(
        agent.line().await,
        r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"sess-1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"hello there"}}}}"#
    );
    assert_eq!(
        agent.line().await,
        format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{{"stopReason":"end_turn"}}}}"#)
    );
    let id = agent
        .request(
            "session/load",
            json!({"sessionId": session, "cwd": "/", "mcpServers": []}),
        )
        .await;
    let (replay, response) = agent.until_response(&json!(id)).await;
    let kinds: Vec<(&str, &str)> = replay
        .iter()
        .map(|m| {
            (
                m["params"]["update"]["sessionUpdate"]
                    .as_str()
                    .unwrap_or_default(),
                chunk_text(m).unwrap_or_default(),
            )
        })
        .collect();
    assert_eq!(
        kinds,
        [
            ("user_message_chunk", "hello there"),
            ("agent_message_chunk", "hello there")
        ]
    );
    assert_eq!(response["result"]["modes"]["currentModeId"], "default");
}

#[tokio::test]
async fn standard_errors_for_bad_input() {
    let mut agent = Agent::spawn::<&str>(&[]);
    agent.send("{not json").await;
    let parse = agent.json().await;
    assert_eq!(parse["id"], Value::Null);
    assert_eq!(parse["error"]["code"], -32700);
    agent.send(r#"{"id":5,"method":"initialize"}"#).await;
    let invalid = agent.json().await;
    assert_eq!(
        (invalid["id"].clone(), invalid["error"]["code"].clone()),
        (json!(5), json!(-32600))
    );
    agent
        .send(r#"[{"jsonrpc":"2.0","id":1,"method":"initialize"}]"#)
        .await;
    assert_eq!(agent.json().await["error"]["code"], -32600);
    agent
        .send(
            r#"{"jsonrpc":"2.0","id":"x","method":"initialize","params":{"protocolVersion":"1"}}"#,
        )
        .await;
    let version = agent.json().await;
    assert_eq!(
        (version["id"].clone(), version["error"]["code"].clone()),
        (json!("x"), json!(-32602))
    );
    agent
        .send(r#"{"jsonrpc":"2.0","id":7,"method":"_vendor/unknown","params":{}}"#)
        .await;
    assert_eq!(
        agent.line().await,
        r#"{"jsonrpc":"2.0","id":7,"error":{"code":-32601,"message":"Method not found","data":{"method":"_vendor/unknown"}}}"#
    );
    // An unknown notification is ignored; the next request is answered.
    agent
        .send(r#"{"jsonrpc":"2.0","method":"_vendor/note","params":{}}"#)
        .await;
    agent
        .send(r#"{"jsonrpc":"2.0","id":8,"method":"session/list","params":{}}"#)
        .await;
    assert_eq!(
        agent.line().await,
        r#"{"jsonrpc":"2.0","id":8,"result":{"sessions":[]}}"#
    );
}

#[tokio::test]
async fn standard_modes_config_and_unknown_sessions() {
    let mut agent = Agent::spawn::<&str>(&[]);
    let session = agent.handshake().await;
    let id = agent
        .request(
            "session/set_mode",
            json!({"sessionId": session, "modeId": "plan"}),
        )
        .await;
    assert_eq!(
        agent.json().await,
        json!({"jsonrpc": "2.0", "id": id, "result": {}})
    );
    let update = agent.json().await;
    assert_eq!(
        update["params"]["update"],
        json!({"sessionUpdate": "current_mode_update", "currentModeId": "plan"})
    );
    let id = agent
        .request(
            "session/set_config_option",
            json!({"sessionId": session, "configId": "verbosity", "value": "verbose"}),
        )
        .await;
    let response = agent.json().await;
    assert_eq!(response["id"], id);
    assert_eq!(
        response["result"]["configOptions"][0]["currentValue"],
        "verbose"
    );
    let id = agent.prompt("no-such-session", "hi").await;
    let response = agent.json().await;
    assert_eq!(response["id"], id);
    assert_eq!(response["error"]["code"], -32002);
}

#[tokio::test]
async fn standard_cancel_ends_a_waiting_turn_cancelled() {
    let mut agent = Agent::spawn(&["--commands"]);
    let session = agent.handshake().await;
    let id = agent.prompt(&session, "wait_for_cancel").await;
    agent
        .send_json(
            json!({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": session}}),
        )
        .await;
    let (before, response) = agent.until_response(&json!(id)).await;
    assert!(before.is_empty(), "no update after a cancel: {before:?}");
    assert_eq!(response["result"]["stopReason"], "cancelled");
}

#[tokio::test]
async fn standard_cancel_request_answers_minus_32800() {
    let mut agent = Agent::spawn(&["--script", "faults"]);
    let session = agent.handshake().await;
    let id = agent.prompt(&session, "hang").await;
    agent
        .send_json(
            json!({"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": id}}),
        )
        .await;
    let response = agent.json().await;
    assert_eq!(response["id"], id);
    assert_eq!(response["error"]["code"], -32800);
}

#[tokio::test]
async fn standard_auth_gate() {
    let script = r#"
[agent]
auth_required = true
auth_methods = [{ id = "mock-login", name = "Mock login" }]
"#;
    let mut agent =
        Agent::start(Start::args(&["--script", "{dir}/auth.toml"]).file("auth.toml", script));
    let id = agent
        .request("initialize", json!({"protocolVersion": 1}))
        .await;
    let (_, response) = agent.until_response(&json!(id)).await;
    assert_eq!(response["result"]["authMethods"][0]["id"], "mock-login");
    let id = agent
        .request("session/new", json!({"cwd": "/", "mcpServers": []}))
        .await;
    let (_, response) = agent.until_response(&json!(id)).await;
    assert_eq!(response["error"]["code"], -32000);
    let id = agent
        .request("authenticate", json!({"methodId": "mock-login"}))
        .await;
    agent.until_response(&json!(id)).await;
    let id = agent
        .request("session/new", json!({"cwd": "/", "mcpServers": []}))
        .await;
    let (_, response) = agent.until_response(&json!(id)).await;
    assert!(response["result"]["sessionId"].is_string(), "{response}");
}

#[tokio::test]
async fn standard_agent_requests_use_integer_ids_from_zero() {
    let mut agent = Agent::spawn(&["--commands"]);
    let session = agent.handshake().await;
    agent.prompt(&session, "callbacks").await;
    let request = agent.json().await;
    assert_eq!(request["method"], "session/request_permission");
    assert_eq!(request["id"], 0);
}

// ---- kiro ----------------------------------------------------------------------------------

fn kiro(extra: &[&str]) -> Agent {
    let mut args = vec!["--script", "kiro", "--transcript", "{dir}/t.ndjson"];
    args.extend_from_slice(extra);
    args.extend_from_slice(&[
        "acp",
        "--agent",
        "my-agent",
        "--model",
        "claude-x",
        "--trust-all-tools",
    ]);
    // The ready script keeps sessions under $HOME and requires the agent's file.
    Agent::start(
        Start::args(&args)
            .env("HOME", "{dir}")
            .file(".kiro/agents/my-agent.json", "{}"),
    )
}

#[tokio::test]
async fn kiro_session_new_sends_kiro_notifications_before_the_result() {
    let mut agent = kiro(&[]);
    let id = agent
        .request("initialize", json!({"protocolVersion": 1}))
        .await;
    let (_, response) = agent.until_response(&json!(id)).await;
    assert_eq!(
        response["result"]["agentCapabilities"],
        json!({"loadSession": true, "promptCapabilities": {"image": true}})
    );
    assert_eq!(response["result"]["agentInfo"]["name"], "Kiro CLI Agent");
    let id = agent
        .request(
            "session/new",
            json!({"cwd": "/w", "mcpServers": [{"name": "files", "command": "/bin/true", "args": [], "env": []}]}),
        )
        .await;
    let (before, response) = agent.until_response(&json!(id)).await;
    let session = response["result"]["sessionId"]
        .as_str()
        .expect("a session id")
        .to_owned();
    assert!(uuid_like(&session), "{session}");
    let methods: Vec<&str> = before
        .iter()
        .map(|m| m["method"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(
        methods,
        [
            "_kiro.dev/mcp/server_initialized",
            "_kiro.dev/commands/available",
            "_kiro.dev/metadata"
        ]
    );
    assert_eq!(
        before[0]["params"],
        json!({"sessionId": session, "serverName": "files"})
    );
    assert_eq!(response["result"]["modes"]["currentModeId"], "my-agent");
    assert_eq!(response["result"]["models"]["currentModelId"], "claude-x");
    let id = agent
        .request(
            "session/set_model",
            json!({"sessionId": session, "modelId": "mock-large"}),
        )
        .await;
    assert_eq!(
        agent.json().await,
        json!({"jsonrpc": "2.0", "id": id, "result": {}})
    );
    agent.close_stdin();
    assert_eq!(agent.code().await, 0);
    let records = transcript(&agent.path("t.ndjson"));
    assert_eq!(records[0]["personality"], "kiro");
    assert_eq!(records[0]["argv"][7], "my-agent");
}

fn uuid_like(text: &str) -> bool {
    text.len() == 36 && text.chars().filter(|c| *c == '-').count() == 4
}

#[tokio::test]
async fn kiro_turn_has_markers_and_metadata() {
    let mut agent = kiro(&[]);
    let session = agent.handshake().await;
    let id = agent.prompt(&session, "Say exactly: HELLO_ACP_TEST").await;
    let lines: Vec<String> = {
        let mut lines = Vec::new();
        for _ in 0..6 {
            lines.push(agent.line().await);
        }
        lines
    };
    assert_eq!(
        lines,
        [
            format!(
                r#"{{"jsonrpc":"2.0","method":"session/update","params":{{"sessionId":"{session}","update":{{"sessionUpdate":"session_info_update","_meta":{{"kiro":{{"kind":"turn_start"}}}}}}}}}}"#
            ),
            format!(
                r#"{{"jsonrpc":"2.0","method":"session/update","params":{{"sessionId":"{session}","update":{{"sessionUpdate":"agent_message_chunk","content":{{"type":"text","text":"HELLO_AC"}}}}}}}}"#
            ),
            // The ready script streams the answer in chunks of 8 characters.
            format!(
                r#"{{"jsonrpc":"2.0","method":"session/update","params":{{"sessionId":"{session}","update":{{"sessionUpdate":"agent_message_chunk","content":{{"type":"text","text":"P_TEST"}}}}}}}}"#
            ),
            format!(
                r#"{{"jsonrpc":"2.0","method":"session/update","params":{{"sessionId":"{session}","update":{{"sessionUpdate":"session_info_update","_meta":{{"kiro":{{"kind":"turn_end","stopReason":"end_turn","turnEnd":{{"stopReason":"end_turn"}}}}}}}}}}}}"#
            ),
            format!(
                r#"{{"jsonrpc":"2.0","method":"_kiro.dev/metadata","params":{{"sessionId":"{session}","contextUsagePercentage":1.5,"meteringUsage":[{{"value":0.01,"unit":"credit","unitPlural":"credits"}}],"turnDurationMs":0}}}}"#
            ),
            format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{{"stopReason":"end_turn"}}}}"#),
        ]
    );
}

#[tokio::test]
async fn kiro_permission_requests_carry_uuid_ids() {
    let mut agent = kiro(&[]);
    let session = agent.handshake().await;
    let id = agent.prompt(&session, "run a tool").await;
    let mut request = Value::Null;
    for _ in 0..3 {
        let message = agent.json().await;
        if message["method"] == "session/request_permission" {
            request = message;
            break;
        }
    }
    let request_id = request["id"].as_str().expect("a string id").to_owned();
    assert!(uuid_like(&request_id), "{request_id}");
    agent
        .send_json(json!({"jsonrpc": "2.0", "id": request_id,
            "result": {"outcome": {"outcome": "selected", "optionId": "allow"}}}))
        .await;
    let (before, response) = agent.until_response(&json!(id)).await;
    assert_eq!(
        before[0]["params"]["update"]["rawOutput"]["permission"],
        json!({"outcome": "selected", "optionId": "allow"})
    );
    assert_eq!(response["result"]["stopReason"], "end_turn");
}

#[tokio::test]
async fn kiro_subagent_sessions_and_session_terminate() {
    let mut agent = kiro(&[]);
    let session = agent.handshake().await;
    let id = agent.prompt(&session, "start a subagent").await;
    let (before, _) = agent.until_response(&json!(id)).await;
    assert_eq!(before[0]["method"], "_kiro.dev/subagent/list_update");
    assert_eq!(before[1]["params"]["sessionId"], "sub-1");
    assert_eq!(
        before[2],
        json!({"jsonrpc": "2.0", "method": "_session/terminate", "params": {"sessionId": "sub-1"}})
    );
    // `_session/terminate` from the client is accepted silently.
    agent
        .send_json(json!({"jsonrpc": "2.0", "method": "_session/terminate", "params": {"sessionId": session}}))
        .await;
    let id = agent.request("session/list", json!({})).await;
    assert_eq!(agent.json().await["id"], id);
}

#[tokio::test]
async fn kiro_quirk_exits_silently_without_mcp_servers() {
    let mut agent = kiro(&[]);
    let id = agent
        .request("initialize", json!({"protocolVersion": 1}))
        .await;
    agent.until_response(&json!(id)).await;
    agent.request("session/new", json!({"cwd": "/"})).await;
    assert!(agent.rest().await.is_empty(), "nothing is written");
    assert_eq!(agent.code().await, 0);
    let records = transcript(&agent.path("t.ndjson"));
    assert_eq!(
        records.last().expect("records")["reason"],
        "quirk: exit on missing mcpServers"
    );
}

#[tokio::test]
async fn kiro_quirk_never_answers_a_malformed_load() {
    let mut agent = kiro(&[]);
    let session = agent.handshake().await;
    let load = agent
        .request("session/load", json!({"sessionId": session}))
        .await;
    let list = agent.request("session/list", json!({})).await;
    let response = agent.json().await;
    assert_eq!(response["id"], list, "the load ({load}) got no answer");
    let stderr = agent.stderr_until(|t| t.contains("session/load")).await;
    assert!(
        stderr.contains("failed to parse session/load params"),
        "{stderr}"
    );
}

#[tokio::test]
async fn kiro_without_quirks_answers_as_standard() {
    let mut agent = Agent::spawn(&["acp", "--agent", "plain"]);
    let id = agent
        .request("initialize", json!({"protocolVersion": 1}))
        .await;
    agent.until_response(&json!(id)).await;
    let id = agent.request("session/new", json!({"cwd": "/"})).await;
    let (_, response) = agent.until_response(&json!(id)).await;
    assert_eq!(response["error"]["code"], -32602);
}

#[tokio::test]
async fn installed_as_kiro_cli_it_is_kiro() {
    let dir = tempfile::tempdir().expect("dir");
    let link = dir.path().join("kiro-cli");
    std::os::unix::fs::symlink(agent_support::binary(), &link).expect("symlink");
    let mut agent = Agent::start(Start::args(&["acp", "--agent", "tg-acp"]).program(link));
    let id = agent
        .request("initialize", json!({"protocolVersion": 1}))
        .await;
    let (_, response) = agent.until_response(&json!(id)).await;
    assert_eq!(response["result"]["agentInfo"]["name"], "Kiro CLI Agent");
}

#[tokio::test]
async fn kiro_context_usage_after_the_result() {
    let mut agent = kiro(&["--quirk", "context-usage-after-result"]);
    let session = agent.handshake().await;
    let id = agent.prompt(&session, "Count to 3.").await;
    let (before, _) = agent.until_response(&json!(id)).await;
    assert_eq!(chunk_text(&before[1]), Some("1, 2, 3"));
    let late = agent.json().await;
    assert_eq!(
        late["params"]["update"]["_meta"]["kiro"]["kind"],
        "context_usage"
    );
}

// ---- intercom ------------------------------------------------------------------------------

fn intercom(script: &str) -> Agent {
    Agent::start(
        Start::args(&[
            "--script",
            script,
            "--transcript",
            "{dir}/t.ndjson",
            "--control",
            "{dir}/ctl.sock",
        ])
        .env_clear()
        .env("INTERCOM_SESSION_ID", "7f0c-session")
        .env("PATH", "/usr/bin:/bin")
        .env("SLACK_BOT_TOKEN", "xoxb-secret"),
    )
}

#[tokio::test]
async fn intercom_stream_dialect_greets_and_asks_for_clearance() {
    let mut agent = intercom("intercom");
    assert_eq!(
        agent.line().await,
        r#"{"method":"status/update","params":{"message":"ready"}}"#
    );
    agent
        .send(r#"{"method":"prompt/send","params":{"text":"please get clearance"},"seq":0}"#)
        .await;
    assert_eq!(
        agent.line().await,
        r#"{"id":"req-001","method":"clearance/request","params":{"description":"create the entry point","diff":"+fn main() {}\n","file_path":"src/main.rs","risk_level":"low","title":"Write src/main.rs"}}"#
    );
    agent
        .send(r#"{"method":"clearance/response","id":"req-001","params":{"status":"approved","reason":null},"seq":1}"#)
        .await;
    assert_eq!(
        agent.line().await,
        r#"{"method":"status/update","params":{"message":"clearance req-001: approved"}}"#
    );
    agent
        .send(r#"{"method":"prompt/send","params":{"text":"forward a question"}}"#)
        .await;
    assert_eq!(
        agent.line().await,
        r#"{"id":"fwd-001","method":"prompt/forward","params":{"text":"Continue with the next step?","type":"continuation"}}"#
    );
    agent
        .send(r#"{"method":"prompt/response","id":"fwd-001","params":{"decision":"continue","instruction":null}}"#)
        .await;
    assert_eq!(
        agent.line().await,
        r#"{"method":"status/update","params":{"message":"prompt fwd-001: continue"}}"#
    );
    agent
        .send(r#"{"method":"nudge","params":{"message":"Continue working on the current task."}}"#)
        .await;
    assert_eq!(
        agent.line().await,
        r#"{"method":"status/update","params":{"message":"resuming after nudge"}}"#
    );
    assert_eq!(agent.json().await["method"], "heartbeat");
    let mut control = Control::connect(&agent.path("ctl.sock")).await;
    let state = control.call(json!({"cmd": "state"})).await;
    assert_eq!(
        state["state"]["identity"]["INTERCOM_SESSION_ID"],
        "7f0c-session"
    );
    agent
        .send(r#"{"method":"session/interrupt","params":{"reason":"Operator requested termination"}}"#)
        .await;
    assert_eq!(
        agent.line().await,
        r#"{"method":"status/update","params":{"message":"interrupted: Operator requested termination"}}"#
    );
    assert_eq!(agent.code().await, 0);
    let records = transcript(&agent.path("t.ndjson"));
    let start = &records[0];
    assert_eq!(start["identity"]["INTERCOM_SESSION_ID"], "7f0c-session");
    assert_eq!(start["env"]["INTERCOM_SESSION_ID"], "7f0c-session");
    assert_eq!(start["env"]["SLACK_BOT_TOKEN"], "<redacted>");
    let exit = records.last().expect("records");
    assert_eq!(
        (exit["code"].clone(), exit["reason"].clone()),
        (json!(0), json!("session/interrupt"))
    );
}

#[tokio::test]
async fn intercom_skips_malformed_and_unknown_lines() {
    let mut agent = intercom("intercom");
    assert_eq!(agent.json().await["params"]["message"], "ready");
    agent.send("{not json}").await;
    agent
        .send(r#"{"method":"unknown/method","params":{}}"#)
        .await;
    agent
        .send(r#"{"method":"prompt/send","params":{"text":"hello"}}"#)
        .await;
    assert_eq!(
        agent.line().await,
        r#"{"method":"status/update","params":{"message":"received: hello"}}"#
    );
    agent
        .send(r#"{"method":"prompt/send","params":{"text":"now crash"}}"#)
        .await;
    assert_eq!(agent.json().await["params"]["message"], "crashing");
    assert_eq!(agent.code().await, 1);
}

#[tokio::test]
async fn intercom_jsonrpc_handshake_echoes_string_ids() {
    let mut agent = intercom("intercom-jsonrpc");
    agent
        .send(r#"{"jsonrpc":"2.0","method":"initialize","id":"intercom-init-1b2c","params":{"protocolVersion":1,"processId":1,"clientInfo":{"name":"agent-intercom-acp","version":"0.2.0"},"workspaceFolders":[]}}"#)
        .await;
    let init = agent.json().await;
    assert_eq!(init["id"], "intercom-init-1b2c");
    assert_eq!(init["jsonrpc"], "2.0");
    assert_eq!(init["result"]["protocolVersion"], 1);
    agent
        .send(r#"{"jsonrpc":"2.0","method":"initialized"}"#)
        .await;
    agent
        .send(r#"{"jsonrpc":"2.0","method":"session/new","id":"intercom-sess-9","params":{"cwd":"/w","mcpServers":[]}}"#)
        .await;
    let new = agent.json().await;
    assert_eq!(new["id"], "intercom-sess-9");
    let session = new["result"]["sessionId"]
        .as_str()
        .expect("sessionId")
        .to_owned();
    agent
        .send_json(json!({"jsonrpc": "2.0", "method": "session/prompt", "id": "intercom-prompt-3",
            "params": {"sessionId": session, "prompt": [{"type": "text", "text": "build it"}]}, "seq": 0}))
        .await;
    assert_eq!(chunk_text(&agent.json().await), Some("received: build it"));
    assert_eq!(
        agent.line().await,
        r#"{"method":"status/update","params":{"message":"received: build it"}}"#
    );
    assert_eq!(
        agent.line().await,
        r#"{"jsonrpc":"2.0","id":"intercom-prompt-3","result":{"stopReason":"end_turn"}}"#
    );
    agent
        .send_json(json!({"jsonrpc": "2.0", "method": "session/prompt", "id": "intercom-prompt-4",
            "params": {"sessionId": session, "prompt": [{"type": "text", "text": "ask permission"}]}}))
        .await;
    let request = agent.json().await;
    assert_eq!(request["method"], "session/request_permission");
    assert_eq!(request["jsonrpc"], "2.0");
    agent
        .send_json(json!({"jsonrpc": "2.0", "id": request["id"], "result": {"outcome": {"outcome": "selected", "optionId": "allow"}}}))
        .await;
    let (before, response) = agent.until_response(&json!("intercom-prompt-4")).await;
    assert_eq!(chunk_text(&before[0]), Some("permission: selected allow"));
    assert_eq!(response["result"]["stopReason"], "end_turn");
}

#[tokio::test]
async fn intercom_heartbeats_on_a_timer() {
    let script = r#"
personality = "intercom"
[intercom]
greeting = ""
heartbeat_ms = 20
"#;
    let mut agent =
        Agent::start(Start::args(&["--script", "{dir}/hb.toml"]).file("hb.toml", script));
    for _ in 0..2 {
        assert_eq!(
            agent.line().await,
            r#"{"method":"heartbeat","params":{"progress":[{"label":"receive prompt","status":"pending"},{"label":"mock work","status":"in_progress"}]}}"#
        );
    }
}

#[tokio::test]
async fn pipelined_input_is_answered_in_order() {
    let script = r#"
[[on]]
method = "session/new"
do = [
  { update = { sessionUpdate = "agent_message_chunk", content = { type = "text", text = "early" } } },
  { default = true },
]
"#;
    let mut agent = Agent::start(Start::args(&["--script", "{dir}/s.toml"]).file("s.toml", script));
    for line in [
        r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/","mcpServers":[]}}"#,
        r#"{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"sess-1","prompt":[{"type":"text","text":"hi"}]}}"#,
    ] {
        agent.send(line).await;
    }
    agent.close_stdin();
    let mut order = Vec::new();
    while let Some(line) = agent.raw_line().await {
        let message: Value = serde_json::from_slice(&line).expect("json");
        order.push(match message.get("id") {
            Some(id) => format!("response {id}"),
            None => format!("update {}", chunk_text(&message).unwrap_or_default()),
        });
    }
    assert_eq!(
        order,
        [
            "response 0",
            "update early",
            "response 1",
            "update hi",
            "response 2"
        ]
    );
    assert_eq!(agent.code().await, 0);
}

#[tokio::test]
async fn a_close_stdin_step_closes_the_pipe_and_the_agent_runs_on() {
    let mut agent = intercom("intercom");
    assert_eq!(
        agent.line().await,
        r#"{"method":"status/update","params":{"message":"ready"}}"#
    );
    let mut control = Control::connect(&agent.path("ctl.sock")).await;
    let ran = control
        .call(json!({"cmd": "run", "steps": [{"close_stdin": true}]}))
        .await;
    assert_eq!(ran["ok"], true, "{ran}");
    let closed = control
        .call(json!({"cmd": "wait", "stdin": "closed", "timeout_ms": 10000}))
        .await;
    assert_eq!(closed["ok"], true, "{closed}");
    let error = agent
        .try_send(r#"{"method":"prompt/send","params":{"text":"hello"}}"#)
        .await
        .expect_err("the pipe has no reader any more");
    assert!(
        error.to_string().to_lowercase().contains("broken pipe"),
        "{error}"
    );
    let state = control.call(json!({"cmd": "state"})).await;
    assert_eq!(state["state"]["stdinOpen"], false);
    control.send(json!({"cmd": "exit", "code": 0})).await;
    assert_eq!(agent.code().await, 0);
}

#[tokio::test]
async fn the_intercom_acp_script_asks_permission_for_a_clearance_prompt() {
    let mut agent = Agent::start(Start::args(&["--script", "intercom-acp"]));
    let session = agent.handshake().await;
    let id = agent.prompt(&session, "please clearance").await;
    let request = agent.json().await;
    assert_eq!(request["method"], "session/request_permission");
    assert_eq!(request["params"]["options"][0]["kind"], "allow_once");
    agent
        .send_json(json!({"jsonrpc": "2.0", "id": request["id"],
            "result": {"outcome": {"outcome": "selected", "optionId": "reject"}}}))
        .await;
    let (before, response) = agent.until_response(&json!(id)).await;
    assert_eq!(chunk_text(&before[0]), Some("clearance: selected reject"));
    assert_eq!(response["result"]["stopReason"], "end_turn");
}
