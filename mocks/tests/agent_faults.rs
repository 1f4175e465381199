//! Every fault, driven through a real pipe to the built binary, with the bytes asserted.

use crate::agent_support;

use std::time::{Duration, Instant};

use agent_support::{Agent, Control, Start, chunk_text, texts, transcript};
use serde_json::{Value, json};

/// Spawns an agent with an inline script, written into the agent's directory first.
fn with_script(text: &str, extra: &[&str]) -> Agent {
    let mut args = vec![
        "--script",
        "{dir}/script.toml",
        "--transcript",
        "{dir}/t.ndjson",
    ];
    args.extend_from_slice(extra);
    Agent::start(Start::args(&args).file("script.toml", text))
}

fn faults(extra: &[&str]) -> Agent {
    let mut args = vec!["--script", "faults", "--transcript", "{dir}/t.ndjson"];
    args.extend_from_slice(extra);
    Agent::spawn(&args)
}

#[tokio::test]
async fn delay_holds_a_step_back() {
    let mut agent = faults(&[]);
    let session = agent.handshake().await;
    let started = Instant::now();
    let id = agent.prompt(&session, "slow").await;
    let update = agent.json().await;
    assert!(
        started.elapsed() >= Duration::from_millis(500),
        "the update came after {:?}",
        started.elapsed()
    );
    assert_eq!(chunk_text(&update), Some("slow reply"));
    let (_, response) = agent.until_response(&json!(id)).await;
    assert_eq!(response["result"]["stopReason"], "end_turn");
}

#[tokio::test]
async fn a_line_is_written_in_flushed_fragments() {
    let mut agent = with_script(
        r#"
[[on]]
prompt = "go"
do = [
  { update = { sessionUpdate = "agent_message_chunk", content = { type = "text", text = "fragmented" } }, fragments = [5, 7], fragment_gate = "next" },
  { respond = { stopReason = "end_turn" } },
]
"#,
        &["--control", "{dir}/ctl.sock"],
    );
    let session = agent.handshake().await;
    let mut control = Control::connect(&agent.path("ctl.sock")).await;
    agent.prompt(&session, "go").await;
    let expected = format!(
        r#"{{"jsonrpc":"2.0","method":"session/update","params":{{"sessionId":"{session}","update":{{"content":{{"text":"fragmented","type":"text"}},"sessionUpdate":"agent_message_chunk"}}}}}}"#
    );
    let first = agent.bytes(5).await;
    assert_eq!(first, expected.as_bytes()[..5]);
    // The agent waits on the gate, so nothing more can arrive until it is released.
    assert!(agent.quiet_for(Duration::from_millis(200)).await);
    assert_eq!(
        control
            .call(json!({"cmd": "release", "gate": "next"}))
            .await["ok"],
        true
    );
    let second = agent.bytes(7).await;
    assert_eq!(second, expected.as_bytes()[5..12]);
    assert!(agent.quiet_for(Duration::from_millis(200)).await);
    assert_eq!(
        control
            .call(json!({"cmd": "release", "gate": "next"}))
            .await["ok"],
        true
    );
    let rest = agent.raw_line().await.expect("the rest of the line");
    assert_eq!(rest, expected.as_bytes()[12..]);
    let response = agent.json().await;
    assert_eq!(response["result"]["stopReason"], "end_turn");
    agent.close_stdin();
    assert_eq!(agent.code().await, 0);
    let records = transcript(&agent.path("t.ndjson"));
    let out = records
        .iter()
        .find(|r| r["kind"] == "out" && r["text"] == expected.as_str())
        .expect("the fragmented line is in the transcript once, whole");
    let total = expected.len() + 1;
    assert_eq!(out["fragments"], json!([5, 7, total - 12]));
}

#[tokio::test]
async fn fragment_lines_splits_every_line() {
    let mut agent = Agent::spawn(&[
        "--fault",
        "fragment-lines=3",
        "--fault",
        "fragment-delay-ms=1",
        "--transcript",
        "{dir}/t.ndjson",
    ]);
    let id = agent
        .request("initialize", json!({"protocolVersion": 1}))
        .await;
    let (_, response) = agent.until_response(&json!(id)).await;
    assert_eq!(response["result"]["protocolVersion"], 1);
    agent.close_stdin();
    assert_eq!(agent.code().await, 0);
    let records = transcript(&agent.path("t.ndjson"));
    let out: Vec<&Value> = records.iter().filter(|r| r["kind"] == "out").collect();
    assert_eq!(out.len(), 1);
    assert_eq!(out[0]["fragments"].as_array().map(Vec::len), Some(3));
}

#[tokio::test]
async fn hang_never_answers_but_the_agent_goes_on() {
    let mut agent = faults(&[]);
    let session = agent.handshake().await;
    let hung = agent.prompt(&session, "hang").await;
    let other = agent.request("session/list", json!({})).await;
    let (before, response) = agent.until_response(&json!(other)).await;
    assert!(before.is_empty(), "{before:?}");
    assert_eq!(
        response["result"]["sessions"][0]["sessionId"],
        session.as_str()
    );
    agent.close_stdin();
    let rest = agent.rest().await;
    assert!(rest.is_empty(), "{}", String::from_utf8_lossy(&rest));
    assert_eq!(agent.code().await, 0);
    let records = transcript(&agent.path("t.ndjson"));
    let answered = texts(&records, "out")
        .iter()
        .any(|t| t.contains(&format!("\"id\":{hung},")));
    assert!(!answered, "the hung prompt was answered");
}

#[tokio::test]
async fn exit_with_a_code_mid_turn() {
    let mut agent = faults(&[]);
    let session = agent.handshake().await;
    agent.prompt(&session, "exit").await;
    let update = agent.json().await;
    assert_eq!(chunk_text(&update), Some("exiting with code 3"));
    assert!(agent.raw_line().await.is_none(), "stdout closes");
    assert_eq!(agent.code().await, 3);
    let records = transcript(&agent.path("t.ndjson"));
    let exit = records.last().expect("records");
    assert_eq!(exit["kind"], "exit");
    assert_eq!(exit["code"], 3);
    assert_eq!(exit["reason"], "script exit");
}

#[tokio::test]
async fn exit_on_a_method_from_the_command_line() {
    let mut agent = Agent::spawn(&["--fault", "exit-on=session/new:42"]);
    let id = agent
        .request("initialize", json!({"protocolVersion": 1}))
        .await;
    agent.until_response(&json!(id)).await;
    agent
        .request("session/new", json!({"cwd": "/", "mcpServers": []}))
        .await;
    assert!(agent.raw_line().await.is_none());
    assert_eq!(agent.code().await, 42);
}

#[tokio::test]
async fn close_stdout_and_keep_running() {
    let mut agent = faults(&["--control", "{dir}/ctl.sock"]);
    let session = agent.handshake().await;
    agent.prompt(&session, "close stdout").await;
    assert!(agent.raw_line().await.is_none(), "stdout is closed");
    assert!(agent.child.try_status().is_none(), "the process still runs");
    let mut control = Control::connect(&agent.path("ctl.sock")).await;
    let state = control.call(json!({"cmd": "state"})).await;
    assert_eq!(state["state"]["stdoutOpen"], false, "{state}");
    // Input is still read after stdout closed.
    agent.request("session/list", json!({})).await;
    let waited = control
        .call(json!({"cmd": "wait", "method": "session/list", "timeout_ms": 10000}))
        .await;
    assert_eq!(waited["count"], 1, "{waited}");
    agent.close_stdin();
    assert_eq!(agent.code().await, 0);
    let records = transcript(&agent.path("t.ndjson"));
    assert!(texts(&records, "note").iter().any(|t| t == "stdout closed"));
    let dropped = records
        .iter()
        .any(|r| r["kind"] == "out" && r["dropped"] == "stdout is closed");
    assert!(dropped, "the answer to session/list is recorded as dropped");
}

#[tokio::test]
async fn malformed_json_line() {
    let mut agent = faults(&[]);
    let session = agent.handshake().await;
    let id = agent.prompt(&session, "malformed").await;
    let line = agent.raw_line().await.expect("a line");
    assert_eq!(
        line,
        br#"{"jsonrpc":"2.0","method":"session/update","params":{"#
    );
    assert!(serde_json::from_slice::<Value>(&line).is_err());
    let (_, response) = agent.until_response(&json!(id)).await;
    assert_eq!(response["result"]["stopReason"], "end_turn");
}

#[tokio::test]
async fn oversize_line_of_exactly_n_bytes() {
    let mut agent = faults(&[]);
    let session = agent.handshake().await;
    let id = agent.prompt(&session, "oversize").await;
    let line = agent.raw_line().await.expect("a line");
    assert_eq!(line.len(), 1_048_577);
    let value: Value = serde_json::from_slice(&line).expect("valid json");
    assert_eq!(
        value["params"]["update"]["sessionUpdate"],
        "agent_message_chunk"
    );
    assert_eq!(value["params"]["sessionId"], session.as_str());
    let (_, response) = agent.until_response(&json!(id)).await;
    assert_eq!(response["result"]["stopReason"], "end_turn");
}

#[tokio::test]
async fn n_bytes_of_stderr() {
    let mut agent = faults(&[]);
    let session = agent.handshake().await;
    let id = agent.prompt(&session, "stderr").await;
    let text = agent.stderr_until(|t| t.len() >= 70_000).await;
    assert_eq!(text.len(), 70_000);
    assert!(text.bytes().all(|b| b == b'x' || b == b'\n'));
    let (_, response) = agent.until_response(&json!(id)).await;
    assert_eq!(response["result"]["stopReason"], "end_turn");
}

#[tokio::test]
async fn startup_stderr_bytes() {
    let mut agent = Agent::spawn(&["--fault", "startup-stderr-bytes=100"]);
    let text = agent.stderr_until(|t| t.len() >= 100).await;
    assert_eq!(text.len(), 100);
}

#[tokio::test]
async fn update_before_the_session_new_result() {
    let mut agent = Agent::spawn(&["--fault", "update-before-session-result"]);
    let id = agent
        .request("initialize", json!({"protocolVersion": 1}))
        .await;
    agent.until_response(&json!(id)).await;
    let id = agent
        .request("session/new", json!({"cwd": "/", "mcpServers": []}))
        .await;
    let first = agent.line().await;
    assert_eq!(
        first,
        r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"sess-1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"update before the session/new result"}}}}"#
    );
    let response = agent.json().await;
    assert_eq!(response["id"], id);
    assert_eq!(response["result"]["sessionId"], "sess-1");
}

#[tokio::test]
async fn duplicate_response() {
    let mut agent = faults(&[]);
    let session = agent.handshake().await;
    let id = agent.prompt(&session, "duplicate").await;
    let first = agent.line().await;
    let second = agent.line().await;
    let expected = format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{{"stopReason":"end_turn"}}}}"#);
    assert_eq!(first, expected);
    assert_eq!(second, expected);
}

#[tokio::test]
async fn duplicate_responses_everywhere() {
    let mut agent = Agent::spawn(&["--fault", "duplicate-responses"]);
    agent
        .request("initialize", json!({"protocolVersion": 1}))
        .await;
    let first = agent.line().await;
    let second = agent.line().await;
    assert_eq!(first, second);
    assert!(
        first.starts_with(r#"{"jsonrpc":"2.0","id":0,"result":"#),
        "{first}"
    );
}

#[tokio::test]
async fn response_with_an_unknown_id() {
    let mut agent = faults(&[]);
    let session = agent.handshake().await;
    let id = agent.prompt(&session, "unknown id").await;
    assert_eq!(
        agent.line().await,
        r#"{"jsonrpc":"2.0","id":999999,"result":{"stopReason":"end_turn"}}"#
    );
    assert_eq!(
        agent.line().await,
        format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{{"stopReason":"end_turn"}}}}"#)
    );
}

#[tokio::test]
async fn updates_after_the_prompt_result() {
    let mut agent = faults(&[]);
    let session = agent.handshake().await;
    let id = agent.prompt(&session, "late updates").await;
    let response = agent.json().await;
    assert_eq!(response["id"], id);
    assert_eq!(chunk_text(&agent.json().await), Some("late 1"));
    assert_eq!(chunk_text(&agent.json().await), Some("late 2"));
}

#[tokio::test]
async fn updates_after_every_prompt_result_from_the_command_line() {
    let mut agent = Agent::spawn(&["--fault", "updates-after-prompt-result"]);
    let session = agent.handshake().await;
    let id = agent.prompt(&session, "hi").await;
    let (before, _) = agent.until_response(&json!(id)).await;
    assert_eq!(chunk_text(&before[0]), Some("hi"));
    let late = agent.json().await;
    assert_eq!(
        chunk_text(&late),
        Some("late update after the prompt result")
    );
}

#[tokio::test]
async fn ignore_cancel_in_a_scripted_turn() {
    let mut agent = faults(&[]);
    let session = agent.handshake().await;
    let id = agent.prompt(&session, "ignore cancel").await;
    agent
        .send_json(
            json!({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": session}}),
        )
        .await;
    let (before, response) = agent.until_response(&json!(id)).await;
    assert_eq!(chunk_text(&before[0]), Some("finished anyway"));
    assert_eq!(response["result"]["stopReason"], "end_turn");
}

#[tokio::test]
async fn ignore_cancel_from_the_command_line() {
    let mut agent = Agent::spawn(&[
        "--script",
        "testy",
        "--fault",
        "ignore-cancel",
        "--control",
        "{dir}/ctl.sock",
        "--transcript",
        "{dir}/t.ndjson",
    ]);
    let session = agent.handshake().await;
    let mut control = Control::connect(&agent.path("ctl.sock")).await;
    let id = agent.prompt(&session, "wait_for_cancel").await;
    agent
        .send_json(
            json!({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": session}}),
        )
        .await;
    let waited = control
        .call(json!({"cmd": "wait", "method": "session/cancel", "timeout_ms": 10000}))
        .await;
    assert_eq!(waited["ok"], true);
    let state = control.call(json!({"cmd": "state"})).await;
    assert_eq!(state["state"]["sessions"][0]["cancelled"], 0, "{state}");
    assert_eq!(state["state"]["sessions"][0]["activePrompts"], 1, "{state}");
    // The turn waits for a cancel that was ignored, so it is still open.
    assert!(agent.quiet_for(Duration::from_millis(200)).await);
    agent.close_stdin();
    assert_eq!(agent.code().await, 0);
    let records = transcript(&agent.path("t.ndjson"));
    assert!(
        texts(&records, "note")
            .iter()
            .any(|t| t == "fault: ignoring session/cancel")
    );
    assert!(
        !texts(&records, "out")
            .iter()
            .any(|t| t.contains(&format!("\"id\":{id},")))
    );
}

#[tokio::test]
async fn no_exit_on_stdin_eof() {
    let mut agent = Agent::spawn(&[
        "--fault",
        "ignore-eof",
        "--control",
        "{dir}/ctl.sock",
        "--transcript",
        "{dir}/t.ndjson",
    ]);
    agent.initialize().await;
    let mut control = Control::connect(&agent.path("ctl.sock")).await;
    agent.close_stdin();
    let closed = control
        .call(json!({"cmd": "wait", "stdin": "closed", "timeout_ms": 20000}))
        .await;
    assert_eq!(closed["ok"], true, "{closed}");
    let state = control.call(json!({"cmd": "state"})).await;
    assert_eq!(state["state"]["stdinOpen"], false, "{state}");
    assert!(
        agent.child.try_status().is_none(),
        "still running after stdin closed"
    );
    let reply = control.call(json!({"cmd": "exit", "code": 7})).await;
    assert_eq!(reply["ok"], true);
    assert_eq!(agent.code().await, 7);
    assert!(agent.rest().await.is_empty());
    let records = transcript(&agent.path("t.ndjson"));
    assert!(
        texts(&records, "note")
            .iter()
            .any(|t| t == "fault: staying after stdin closed")
    );
    let exit = records.last().expect("records");
    assert_eq!(
        (
            exit["kind"].clone(),
            exit["code"].clone(),
            exit["reason"].clone()
        ),
        (json!("exit"), json!(7), json!("control exit"))
    );
}

#[tokio::test]
async fn raw_bytes_that_are_not_utf8() {
    let mut agent = faults(&[]);
    let session = agent.handshake().await;
    agent.prompt(&session, "bad utf8").await;
    let line = agent.raw_line().await.expect("a line");
    assert_eq!(line, [0xff, 0xfe]);
    agent.close_stdin();
    assert_eq!(agent.code().await, 0);
    let records = transcript(&agent.path("t.ndjson"));
    assert!(
        records
            .iter()
            .any(|r| r["kind"] == "out" && r["hex"] == "fffe0a")
    );
}

#[tokio::test]
async fn sigterm_is_recorded_with_its_exit_code() {
    let mut agent = Agent::spawn(&[
        "--transcript",
        "{dir}/t.ndjson",
        "--control",
        "{dir}/ctl.sock",
    ]);
    agent.initialize().await;
    let mut control = Control::connect(&agent.path("ctl.sock")).await;
    assert_eq!(control.call(json!({"cmd": "state"})).await["ok"], true);
    agent
        .child
        .signal_group(nix::sys::signal::Signal::SIGTERM)
        .expect("signal");
    assert_eq!(agent.code().await, 143);
    assert!(agent.rest().await.is_empty());
    let records = transcript(&agent.path("t.ndjson"));
    let exit = records.last().expect("records");
    assert_eq!(exit["kind"], "exit");
    assert_eq!(exit["code"], 143);
    assert_eq!(exit["reason"], "signal TERM");
}

#[tokio::test]
async fn hang_on_a_method_from_the_command_line() {
    let mut agent = Agent::spawn(&[
        "--fault",
        "hang-on=session/new",
        "--transcript",
        "{dir}/t.ndjson",
    ]);
    let id = agent
        .request("initialize", json!({"protocolVersion": 1}))
        .await;
    agent.until_response(&json!(id)).await;
    agent
        .request("session/new", json!({"cwd": "/", "mcpServers": []}))
        .await;
    let list = agent.request("session/list", json!({})).await;
    let (before, response) = agent.until_response(&json!(list)).await;
    assert!(before.is_empty());
    // session/new was never processed: no session exists and it was never answered.
    assert_eq!(response["result"]["sessions"], json!([]));
    agent.close_stdin();
    assert_eq!(agent.code().await, 0);
    let records = transcript(&agent.path("t.ndjson"));
    assert!(
        texts(&records, "note")
            .iter()
            .any(|t| t == "fault: never answering session/new")
    );
}
