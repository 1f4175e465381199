//! The transcript (every line both ways, start and exit records) and the control channel
//! (listening and connecting), through the built binary.

use crate::agent_support;

use agent_support::{Agent, Control, Start, chunk_text, texts, transcript};
use serde_json::json;
use tokio::net::UnixListener;

#[tokio::test]
async fn the_transcript_holds_every_line_both_ways() {
    let mut agent = Agent::start(
        Start::args(&["--transcript", "{dir}/t.ndjson", "--script", "echo"])
            .env("API_TOKEN", "hunter2")
            .env("INTERCOM_SESSION_ID", "id-42"),
    );
    let mut sent = Vec::new();
    let mut received = Vec::new();
    let lines = [
        r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}"#.to_owned(),
        r#"{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/","mcpServers":[]}}"#.to_owned(),
        r#"{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"sess-1","prompt":[{"type":"text","text":"hi"}]}}"#.to_owned(),
    ];
    for (index, line) in lines.iter().enumerate() {
        agent.send(line).await;
        sent.push(line.clone());
        let replies = if index == 2 { 2 } else { 1 };
        for _ in 0..replies {
            received.push(agent.line().await);
        }
    }
    agent.close_stdin();
    assert_eq!(agent.code().await, 0);
    let records = transcript(&agent.path("t.ndjson"));
    assert_eq!(texts(&records, "in"), sent);
    assert_eq!(texts(&records, "out"), received);
    let start = &records[0];
    assert_eq!(start["kind"], "start");
    assert_eq!(start["argv"][1], "--transcript");
    assert_eq!(start["cwd"], agent.dir.path().display().to_string());
    assert_eq!(start["env"]["API_TOKEN"], "<redacted>");
    assert_eq!(start["env"]["INTERCOM_SESSION_ID"], "id-42");
    assert!(
        start["env"]
            .as_object()
            .is_some_and(|env| env.contains_key("PATH"))
    );
    assert!(!records.iter().any(|r| r.to_string().contains("hunter2")));
    let exit = records.last().expect("records");
    assert_eq!(
        (exit["kind"].clone(), exit["code"].clone()),
        (json!("exit"), json!(0))
    );
    let times: Vec<f64> = records
        .iter()
        .map(|r| r["at"].as_f64().unwrap_or(-1.0))
        .collect();
    assert!(
        times.windows(2).all(|w| w[0] <= w[1]),
        "monotonic: {times:?}"
    );
}

#[tokio::test]
async fn environment_variables_configure_an_agent_spawned_by_someone_else() {
    let script = r#"
[[on]]
prompt = "ping"
do = [{ turn = "pong from ${identity}" }]
"#;
    let mut agent = Agent::start(
        Start::args::<&str>(&[])
            .file("s.toml", script)
            .env("SKI_MOCK_AGENT_SCRIPT", "{dir}/s.toml")
            .env("SKI_MOCK_AGENT_TRANSCRIPT", "{dir}/t-{pid}.ndjson")
            .env("SKI_MOCK_AGENT_CONTROL", "{dir}/c.sock")
            .env("INTERCOM_SESSION_ID", "abc"),
    );
    let session = agent.handshake().await;
    let id = agent.prompt(&session, "ping").await;
    let (before, _) = agent.until_response(&json!(id)).await;
    assert_eq!(chunk_text(&before[0]), Some("pong from abc"));
    let mut control = Control::connect(&agent.path("c.sock")).await;
    let state = control.call(json!({"cmd": "state"})).await;
    let pid = state["state"]["pid"].as_u64().expect("pid");
    assert_eq!(
        state["state"]["transcript"],
        agent.path(&format!("t-{pid}.ndjson")).display().to_string()
    );
    agent.close_stdin();
    assert_eq!(agent.code().await, 0);
    assert!(
        !agent.path("c.sock").exists(),
        "the socket file is removed at exit"
    );
}

#[tokio::test]
async fn control_commands() {
    let script = r#"
[[on]]
control = "announce"
do = [{ notify = "_mock/announce", params = { turn = "${turn}" } }]
"#;
    let mut agent = Agent::start(
        Start::args(&[
            "--script",
            "{dir}/s.toml",
            "--control",
            "{dir}/c.sock",
            "--transcript",
            "{dir}/t.ndjson",
        ])
        .file("s.toml", script),
    );
    let session = agent.handshake().await;
    let mut control = Control::connect(&agent.path("c.sock")).await;

    let reply = control
        .call(json!({"cmd": "send", "message": {"jsonrpc": "2.0", "method": "_mock/hello", "params": {}}, "id": 1}))
        .await;
    assert_eq!(reply, json!({"ok": true, "id": 1}));
    assert_eq!(
        agent.line().await,
        r#"{"jsonrpc":"2.0","method":"_mock/hello","params":{}}"#
    );

    let reply = control
        .call(json!({"cmd": "send", "line": "raw text"}))
        .await;
    assert_eq!(reply["ok"], true);
    assert_eq!(agent.line().await, "raw text");

    let reply = control
        .call(json!({"cmd": "run", "steps": [
            {"update": {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "pushed"}}},
            {"request": "session/request_permission", "params": {"sessionId": "${session}", "toolCall": {"toolCallId": "t"}, "options": []}, "await": false}
        ]}))
        .await;
    assert_eq!(reply["ok"], true, "{reply}");
    let update = agent.json().await;
    assert_eq!(update["params"]["sessionId"], session.as_str());
    assert_eq!(chunk_text(&update), Some("pushed"));
    assert_eq!(agent.json().await["method"], "session/request_permission");

    let reply = control
        .call(json!({"cmd": "trigger", "name": "announce"}))
        .await;
    assert_eq!(reply, json!({"ok": true, "rules": 1}));
    assert_eq!(
        agent.line().await,
        r#"{"jsonrpc":"2.0","method":"_mock/announce","params":{"turn":0}}"#
    );

    let reply = control
        .call(json!({"cmd": "trigger", "name": "missing"}))
        .await;
    assert_eq!(reply["ok"], false);
    let reply = control
        .call(json!({"cmd": "run", "steps": [{"exit": 1, "params": {}}]}))
        .await;
    assert_eq!(reply["ok"], false);
    assert!(
        reply["error"]
            .as_str()
            .unwrap_or_default()
            .contains("`params` does not apply to `exit`"),
        "{reply}"
    );
    let reply = control.call(json!({"cmd": "dance"})).await;
    assert!(
        reply["error"]
            .as_str()
            .unwrap_or_default()
            .starts_with("unknown command \"dance\""),
        "{reply}"
    );
    control.send(json!("not an object")).await;
    assert_eq!(control.read().await["ok"], false);

    let state = control.call(json!({"cmd": "state"})).await["state"].clone();
    assert_eq!(state["initialized"], true);
    assert_eq!(state["sessions"][0]["sessionId"], session.as_str());
    assert_eq!(state["methods"]["session/new"], 1);
    assert_eq!(state["personality"], "standard");

    let reply = control.call(json!({"cmd": "exit", "code": 5})).await;
    assert_eq!(reply["ok"], true);
    assert_eq!(agent.code().await, 5);
    let records = transcript(&agent.path("t.ndjson"));
    assert!(
        texts(&records, "control_in")
            .iter()
            .any(|t| t.contains("\"cmd\":\"exit\""))
    );
    assert!(
        texts(&records, "control_out")
            .iter()
            .any(|t| t.contains("\"rules\":1"))
    );
    assert_eq!(records.last().expect("records")["reason"], "control exit");
}

#[tokio::test]
async fn control_connect_says_hello_with_the_identity() {
    let dir = tempfile::tempdir().expect("dir");
    let socket = dir.path().join("runner.sock");
    let listener = UnixListener::bind(&socket).expect("bind");
    let mut agent = Agent::start(
        Start::args(&[
            "--control-connect",
            &socket.display().to_string(),
            "--script",
            "intercom",
        ])
        .env("INTERCOM_SESSION_ID", "spawned-7"),
    );
    let (stream, _) = tokio::time::timeout(agent_support::PATIENCE, listener.accept())
        .await
        .expect("the agent connects in time")
        .expect("accept");
    let mut control = Control::from_stream(stream);
    let hello = control.read().await;
    assert_eq!(
        hello["hello"]["identity"]["INTERCOM_SESSION_ID"],
        "spawned-7"
    );
    assert_eq!(hello["hello"]["personality"], "intercom");
    assert_eq!(agent.json().await["params"]["message"], "ready");
    let reply = control
        .call(json!({"cmd": "send", "message": {"method": "status/update", "params": {"message": "from the runner"}}}))
        .await;
    assert_eq!(reply["ok"], true);
    assert_eq!(
        agent.line().await,
        r#"{"method":"status/update","params":{"message":"from the runner"}}"#
    );
    let reply = control.call(json!({"cmd": "exit", "code": 0})).await;
    assert_eq!(reply["ok"], true);
    assert_eq!(agent.code().await, 0);
}

#[tokio::test]
async fn a_live_control_socket_is_not_taken_over() {
    let mut first = Agent::spawn(&["--control", "{dir}/c.sock"]);
    first.initialize().await;
    let _control = Control::connect(&first.path("c.sock")).await;
    let path = first.path("c.sock").display().to_string();
    let mut second = Agent::spawn(&["--control", &path]);
    let stderr = second.stderr_until(|t| t.contains("control socket")).await;
    assert!(stderr.contains("cannot use control socket"), "{stderr}");
    assert_eq!(second.code().await, 3);
}

#[tokio::test]
async fn timers_fire_after_a_delay() {
    let script = r#"
[[on]]
after_ms = 10
do = [{ notify = "_mock/tick", params = { n = 1 } }]
"#;
    let mut agent = Agent::start(Start::args(&["--script", "{dir}/s.toml"]).file("s.toml", script));
    assert_eq!(
        agent.line().await,
        r#"{"jsonrpc":"2.0","method":"_mock/tick","params":{"n":1}}"#
    );
}

#[tokio::test]
async fn wait_for_a_client_message_in_a_script() {
    let script = r#"
[[on]]
prompt = "handshake"
do = [
  { notify = "_mock/ready" },
  { wait_for = { method = "_mock/go", timeout_ms = 20000 } },
  { turn = "got ${reply.word}" },
]
"#;
    let mut agent = Agent::start(Start::args(&["--script", "{dir}/s.toml"]).file("s.toml", script));
    let session = agent.handshake().await;
    let id = agent.prompt(&session, "handshake").await;
    assert_eq!(agent.json().await["method"], "_mock/ready");
    agent
        .send_json(json!({"jsonrpc": "2.0", "method": "_mock/go", "params": {"word": "go"}}))
        .await;
    let (before, _) = agent.until_response(&json!(id)).await;
    assert_eq!(chunk_text(&before[0]), Some("got go"));
}

/// A `wait_for` step a control channel runs finds a message that arrives after it began, though
/// the script itself has no `wait_for` step (the agent keeps its log of messages for it).
#[tokio::test]
async fn wait_for_a_client_message_in_steps_a_control_channel_runs() {
    let mut agent = Agent::start(Start::args(&[
        "--script",
        "echo",
        "--control",
        "{dir}/c.sock",
    ]));
    agent.handshake().await;
    let mut control = Control::connect(&agent.path("c.sock")).await;
    let run = control.call(json!({"cmd": "run", "steps": [
        {"notify": "_mock/ready"},
        {"wait_for": {"method": "_mock/go", "timeout_ms": 20000}},
        {"notify": "_mock/after", "params": {"word": "${reply.word}"}}
    ]}));
    let client = async {
        assert_eq!(agent.json().await["method"], "_mock/ready");
        agent
            .send_json(json!({"jsonrpc": "2.0", "method": "_mock/go", "params": {"word": "go"}}))
            .await;
        agent.json().await
    };
    let (reply, after) = tokio::join!(run, client);
    assert_eq!(reply["ok"], true, "{reply}");
    assert_eq!(after["method"], "_mock/after", "{after}");
    assert_eq!(after["params"]["word"], "go", "{after}");
}

/// Stdout lines are queued and written together when the agent waits; what a control command
/// wrote must still be on the wire before its reply, because a runner may stop the agent the
/// moment the reply arrives (the ACP backpressure rows WS-005 and WS-016 do exactly that, and
/// failed under load before the reply flushed stdout first).
#[tokio::test]
async fn a_control_reply_comes_after_what_the_command_wrote() {
    let mut agent = Agent::start(Start::args(&[
        "--script",
        "echo",
        "--control",
        "{dir}/c.sock",
    ]));
    let session = agent.handshake().await;
    let mut control = Control::connect(&agent.path("c.sock")).await;
    let reply = control
        .call(json!({"cmd": "run", "steps": [
            {"request": "session/request_permission", "await": false, "params": {
                "sessionId": "${session}",
                "toolCall": {"toolCallId": "call-stall", "title": "before the reply"},
                "options": [{"optionId": "opt-allow", "name": "Allow", "kind": "allow_once"}]}}
        ]}))
        .await;
    assert_eq!(reply["ok"], true, "{reply}");
    // Stopped, the agent can write nothing more: the line must already be in the pipe.
    agent
        .child
        .signal_group(nix::sys::signal::Signal::SIGSTOP)
        .expect("stop the agent");
    let line = agent.json().await;
    agent
        .child
        .signal_group(nix::sys::signal::Signal::SIGCONT)
        .expect("resume the agent");
    assert_eq!(line["method"], "session/request_permission");
    assert_eq!(line["params"]["sessionId"], session.as_str());
    assert_eq!(line["params"]["toolCall"]["title"], "before the reply");
}
