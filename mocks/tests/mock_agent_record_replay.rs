//! `ski-mock-agent --script RECORDING`: the recorded agent's answers with the live exchange's
//! request ids, session ids and times; a request of the recorded agent waits for the live reply;
//! a message the recording does not hold gets the configured answer, reported on the control
//! socket and in the transcript.

use crate::agent_support;

use agent_support::{Agent, Control, Start, texts, transcript};
use serde_json::{Value, json};

/// A recording made with ids and session ids no live client would use.
const RECORDING: &str = r#"
name = "recording of rec-agent"

[recording]
agent = "rec-agent"
agent_version = "3.1.0"
protocol_version = 1
recorded_at = "2026-01-01T00:00:00Z"
command = ["rec-agent", "--acp"]

[[exchange]]
client = '{"jsonrpc":"2.0","id":100,"method":"initialize","params":{"protocolVersion":1}}'
[[exchange.agent]]
after_ms = 2
line = '{"jsonrpc":"2.0","id":100,"result":{"protocolVersion":1,"agentCapabilities":{"loadSession":false},"agentInfo":{"name":"rec-agent","version":"3.1.0"}}}'

[[exchange]]
client = '{"jsonrpc":"2.0","id":101,"method":"session/new","params":{"cwd":".","mcpServers":[]}}'
[[exchange.agent]]
line = '{"jsonrpc":"2.0","id":101,"result":{"sessionId":"rec-sess"}}'

[[exchange]]
client = '{"jsonrpc":"2.0","id":102,"method":"session/prompt","params":{"sessionId":"rec-sess","prompt":[{"type":"text","text":"hello"}]}}'
[[exchange.agent]]
line = '{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"rec-sess","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"hi there, see ./notes.txt"},"_meta":{"at":"2026-01-01T00:00:01Z","path":"./notes.txt"}}}}'
[[exchange.agent]]
line = '{"jsonrpc":"2.0","id":102,"result":{"stopReason":"end_turn"}}'

[[exchange]]
client = '{"jsonrpc":"2.0","id":103,"method":"session/prompt","params":{"sessionId":"rec-sess","prompt":[{"type":"text","text":"write it"}]}}'
[[exchange.agent]]
line = '{"jsonrpc":"2.0","id":"perm-7","method":"session/request_permission","params":{"sessionId":"rec-sess","toolCall":{"toolCallId":"t1"},"options":[{"optionId":"allow","name":"Allow","kind":"allow_once"}]}}'

[[exchange]]
client = '{"jsonrpc":"2.0","id":"perm-7","result":{"outcome":{"outcome":"selected","optionId":"allow"}}}'
[[exchange.agent]]
line = '{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"rec-sess","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"written"}}}}'
[[exchange.agent]]
line = '{"jsonrpc":"2.0","id":103,"result":{"stopReason":"end_turn"}}'
"#;

fn replay(extra: &[&str]) -> Agent {
    let mut args = vec![
        "--script",
        "{dir}/rec.toml",
        "--transcript",
        "{dir}/t.ndjson",
        "--control",
        "{dir}/c.sock",
    ];
    args.extend_from_slice(extra);
    Agent::start(Start::args(&args).file("rec.toml", RECORDING))
}

async fn new_session(agent: &mut Agent) -> String {
    let cwd = agent.dir.path().display().to_string();
    let id = agent
        .request("session/new", json!({"cwd": cwd, "mcpServers": []}))
        .await;
    let (_, response) = agent.until_response(&json!(id)).await;
    response["result"]["sessionId"]
        .as_str()
        .expect("a session id")
        .to_owned()
}

#[tokio::test]
async fn replay_answers_with_live_ids_sessions_times_and_paths() {
    let mut agent = replay(&[]);
    let id = agent
        .request("initialize", json!({"protocolVersion": 1}))
        .await;
    let (_, init) = agent.until_response(&json!(id)).await;
    assert_eq!(init["id"], 0, "the live id, not the recorded 100: {init}");
    assert_eq!(init["result"]["agentInfo"]["name"], "rec-agent");
    let first = new_session(&mut agent).await;
    let second = new_session(&mut agent).await;
    assert_eq!(first, "rec-sess");
    assert_eq!(
        second, "rec-sess-2",
        "a replayed session/new gets its own id"
    );

    let id = agent.prompt(&second, "hello").await;
    let (updates, result) = agent.until_response(&json!(id)).await;
    assert_eq!(result["id"], id);
    assert_eq!(result["result"]["stopReason"], "end_turn");
    let update = &updates[0]["params"];
    assert_eq!(update["sessionId"], second.as_str());
    let dir = agent.dir.path().display().to_string();
    assert_eq!(
        update["update"]["content"]["text"], "hi there, see ./notes.txt",
        "text is not a path"
    );
    let at = update["update"]["_meta"]["at"].as_str().expect("a time");
    assert!(at > "2026-11-01", "the recorded time moved to now: {at}");
    assert_eq!(
        update["update"]["_meta"]["path"],
        format!("{dir}/notes.txt")
    );

    // The recorded agent asked for permission: the live request gets a live id, and what the
    // agent wrote after the reply follows the live reply.
    let id = agent.prompt(&second, "write it").await;
    let request = agent.json().await;
    assert_eq!(request["method"], "session/request_permission");
    assert_ne!(request["id"], "perm-7");
    assert_eq!(request["params"]["sessionId"], second.as_str());
    agent
        .send_json(json!({"jsonrpc": "2.0", "id": request["id"], "result": {"outcome": {"outcome": "selected", "optionId": "allow"}}}))
        .await;
    let (updates, result) = agent.until_response(&json!(id)).await;
    assert_eq!(updates[0]["params"]["update"]["content"]["text"], "written");
    assert_eq!(result["result"]["stopReason"], "end_turn");
    agent.close_stdin();
    assert_eq!(agent.code().await, 0);
}

#[tokio::test]
async fn an_unrecorded_message_gets_an_error_reported_on_the_control_socket_and_transcript() {
    let mut agent = replay(&[]);
    agent.initialize().await;
    let session = new_session(&mut agent).await;
    let id = agent.prompt(&session, "never recorded").await;
    let (_, response) = agent.until_response(&json!(id)).await;
    assert_eq!(response["error"]["code"], -32603, "{response}");
    assert_eq!(response["error"]["data"]["prompt"], "never recorded");
    let mut control = Control::connect(&agent.path("c.sock")).await;
    let state = control.call(json!({"cmd": "state"})).await;
    let unrecorded = &state["state"]["replay"]["unrecorded"];
    assert_eq!(
        unrecorded,
        &json!([{"method": "session/prompt", "answer": "error", "id": id, "prompt": "never recorded"}])
    );
    agent.close_stdin();
    assert_eq!(agent.code().await, 0);
    let notes: Vec<Value> = transcript(&agent.path("t.ndjson"))
        .into_iter()
        .filter(|r| r["kind"] == "note")
        .collect();
    assert!(
        notes.iter().any(|n| n["text"]
            .as_str()
            .is_some_and(|t| t.contains("not in the recording"))),
        "{notes:?}"
    );
}

#[tokio::test]
async fn unrecorded_nearest_answers_as_the_closest_recorded_prompt() {
    let mut agent = replay(&["--unrecorded", "nearest"]);
    agent.initialize().await;
    let session = new_session(&mut agent).await;
    let id = agent.prompt(&session, "hello again").await;
    let (updates, response) = agent.until_response(&json!(id)).await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    assert_eq!(
        updates[0]["params"]["update"]["content"]["text"],
        "hi there, see ./notes.txt"
    );
}

#[tokio::test]
async fn unrecorded_fail_ends_the_run_with_code_1() {
    let mut agent = replay(&["--unrecorded", "fail"]);
    agent.initialize().await;
    agent
        .request(
            "session/load",
            json!({"sessionId": "x", "cwd": "/", "mcpServers": []}),
        )
        .await;
    assert_eq!(agent.code().await, 1);
}

#[tokio::test]
async fn replay_options_without_a_recording_are_refused() {
    let agent = Agent::start(Start::args(&["--script", "echo", "--unrecorded", "fail"]));
    assert_eq!(agent.code().await, 2);
}

/// A small recording of agent `name` answering `prompt` with `answer`.
fn member(name: &str, tag: &str, prompt: &str, answer: &str) -> String {
    format!(
        r#"
[recording]
agent = "{name}"
tags = ["{tag}"]

[[exchange]]
client = '{{"jsonrpc":"2.0","id":1,"method":"initialize","params":{{"protocolVersion":1}}}}'
[[exchange.agent]]
line = '{{"jsonrpc":"2.0","id":1,"result":{{"protocolVersion":1,"agentInfo":{{"name":"{name}","version":"1"}}}}}}'

[[exchange]]
client = '{{"jsonrpc":"2.0","id":2,"method":"session/new","params":{{"cwd":".","mcpServers":[]}}}}'
[[exchange.agent]]
line = '{{"jsonrpc":"2.0","id":2,"result":{{"sessionId":"{name}-s"}}}}'

[[exchange]]
client = '{{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{{"sessionId":"{name}-s","prompt":[{{"type":"text","text":"{prompt}"}}]}}}}'
[[exchange.agent]]
line = '{{"jsonrpc":"2.0","method":"session/update","params":{{"sessionId":"{name}-s","update":{{"sessionUpdate":"agent_message_chunk","content":{{"type":"text","text":"{answer}"}}}}}}}}'
[[exchange.agent]]
line = '{{"jsonrpc":"2.0","id":3,"result":{{"stopReason":"end_turn"}}}}'
"#
    )
}

/// An agent replaying the pool `{dir}/pool` of two recordings, with these extra arguments.
fn pool(extra: &[&str]) -> Agent {
    let mut args = vec!["--script", "{dir}/pool"];
    args.extend_from_slice(extra);
    Agent::start(
        Start::args(&args)
            .file("pool/a.toml", &member("agent-a", "a", "hello", "from A"))
            .file("pool/b.toml", &member("agent-b", "b", "bye", "from B")),
    )
}

async fn turn_text(agent: &mut Agent, session: &str, prompt: &str) -> Value {
    let id = agent.prompt(session, prompt).await;
    let (updates, result) = agent.until_response(&json!(id)).await;
    match updates.first() {
        Some(update) => update["params"]["update"]["content"]["text"].clone(),
        None => result,
    }
}

#[tokio::test]
async fn a_pool_answers_each_prompt_from_the_recording_holding_it() {
    let mut agent = pool(&[]);
    let id = agent
        .request("initialize", json!({"protocolVersion": 1}))
        .await;
    let (_, init) = agent.until_response(&json!(id)).await;
    assert_eq!(init["result"]["agentInfo"]["name"], "agent-a");
    let session = new_session(&mut agent).await;
    assert_eq!(turn_text(&mut agent, &session, "bye").await, "from B");
    assert_eq!(turn_text(&mut agent, &session, "hello").await, "from A");

    let mut agent = pool(&["--pool-seed", "1"]);
    let id = agent
        .request("initialize", json!({"protocolVersion": 1}))
        .await;
    let (_, init) = agent.until_response(&json!(id)).await;
    assert_eq!(init["result"]["agentInfo"]["name"], "agent-b");

    let mut agent = pool(&["--pool-tag", "b"]);
    agent.initialize().await;
    let session = new_session(&mut agent).await;
    let answer = turn_text(&mut agent, &session, "hello").await;
    assert_eq!(
        answer["error"]["code"], -32603,
        "agent-a is not in the pool: {answer}"
    );
}

/// The runner's ACP-CORE-041 against a replay: every session/new, however often the recorded one
/// is played again, gets a session id no earlier one got.
#[tokio::test]
async fn every_replayed_session_new_gets_a_session_id_of_its_own() {
    let mut agent = replay(&[]);
    agent.initialize().await;
    let mut ids = Vec::new();
    for _ in 0..4 {
        ids.push(new_session(&mut agent).await);
    }
    let distinct: std::collections::HashSet<&String> = ids.iter().collect();
    assert_eq!(distinct.len(), ids.len(), "{ids:?}");
    agent.close_stdin();
    assert_eq!(agent.code().await, 0);
}

/// The runner's ACP-CORE-006 against a replay: a method the recorded agent was never asked
/// answers -32601, as the live agent answers a method it does not implement.
#[tokio::test]
async fn a_method_the_recording_never_holds_answers_method_not_found() {
    let mut agent = replay(&["--unrecorded", "nearest"]);
    agent.initialize().await;
    let id = agent.request("_vendor/unknown", json!({})).await;
    let (_, response) = agent.until_response(&json!(id)).await;
    assert_eq!(response["error"]["code"], -32601, "{response}");
    assert_eq!(response["error"]["data"]["method"], "_vendor/unknown");
    agent.close_stdin();
    assert_eq!(agent.code().await, 0);
}

/// The runner's ACP-CORE-021 against a replay: a request without a field every recorded request
/// of its method carried answers -32602 naming the field, whatever the policy.
#[tokio::test]
async fn a_request_without_a_field_every_recorded_one_carried_answers_invalid_params() {
    let mut agent = replay(&["--unrecorded", "nearest"]);
    agent.initialize().await;
    let id = agent.request("session/new", json!({"cwd": "/"})).await;
    let (_, response) = agent.until_response(&json!(id)).await;
    assert_eq!(response["error"]["code"], -32602, "{response}");
    assert_eq!(response["error"]["data"]["missing"], json!(["mcpServers"]));
    // The agent keeps answering.
    let session = new_session(&mut agent).await;
    assert!(!session.is_empty());
    agent.close_stdin();
    assert_eq!(agent.code().await, 0);
}

/// A field every recorded request carried but the ACP schema leaves optional (`clientInfo`) is
/// not asked for: the runner's discovery initializes without one.
#[tokio::test]
async fn an_optional_field_the_recording_always_carried_is_not_asked_for() {
    let recording = RECORDING.replace(
        r#""method":"initialize","params":{"protocolVersion":1}"#,
        r#""method":"initialize","params":{"protocolVersion":1,"clientInfo":{"name":"c","version":"1"}}"#,
    );
    assert_ne!(recording, RECORDING);
    let mut agent =
        Agent::start(Start::args(&["--script", "{dir}/rec.toml"]).file("rec.toml", &recording));
    let id = agent
        .request("initialize", json!({"protocolVersion": 1}))
        .await;
    let (_, response) = agent.until_response(&json!(id)).await;
    assert_eq!(
        response["result"]["agentInfo"]["name"], "rec-agent",
        "{response}"
    );
    agent.close_stdin();
    assert_eq!(agent.code().await, 0);
}

/// A recording of a client that sent a malformed line, and of a turn that ended on a cancel:
/// the recorder files the turn's answer under the `session/cancel` that came before it.
const CANCELLED_TURN: &str = r#"
name = "recording of a malformed line and a cancelled turn"

[recording]
agent = "rec-agent"
protocol_version = 1

[[exchange]]
client = '{"jsonrpc":"2.0","id":200,"method":"initialize","params":{"protocolVersion":1}}'
[[exchange.agent]]
line = '{"jsonrpc":"2.0","id":200,"result":{"protocolVersion":1,"agentCapabilities":{},"agentInfo":{"name":"rec-agent","version":"1.0.0"}}}'

[[exchange]]
client = '{oops'
[[exchange.agent]]
line = '{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"the recorded agent could not parse that"}}'

[[exchange]]
client = '{"jsonrpc":"2.0","id":201,"method":"session/new","params":{"cwd":".","mcpServers":[]}}'
[[exchange.agent]]
line = '{"jsonrpc":"2.0","id":201,"result":{"sessionId":"rec-sess"}}'

[[exchange]]
client = '{"jsonrpc":"2.0","id":202,"method":"session/prompt","params":{"sessionId":"rec-sess","prompt":[{"type":"text","text":"run until cancelled"}]}}'

[[exchange]]
client = '{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"rec-sess"}}'
[[exchange.agent]]
line = '{"jsonrpc":"2.0","id":202,"result":{"stopReason":"cancelled"}}'
"#;

fn replay_cancelled_turn() -> Agent {
    Agent::start(
        Start::args(&[
            "--script",
            "{dir}/rec.toml",
            "--transcript",
            "{dir}/t.ndjson",
        ])
        .file("rec.toml", CANCELLED_TURN),
    )
}

#[tokio::test]
async fn a_recorded_malformed_line_loads_and_gets_the_recorded_answer() {
    let mut agent = replay_cancelled_turn();
    agent.initialize().await;
    agent.send("{oops").await;
    let answer = agent.json().await;
    assert_eq!(
        answer["error"]["message"], "the recorded agent could not parse that",
        "the recorded agent's own answer to the same line: {answer}"
    );
    assert_eq!(answer["id"], Value::Null);
    // A malformed line the recording does not hold gets the answer any ACP agent owes.
    agent.send("{not recorded").await;
    let answer = agent.json().await;
    assert_eq!(answer["error"]["code"], -32700, "{answer}");
    agent.close_stdin();
    assert_eq!(agent.code().await, 0);
}

#[tokio::test]
async fn a_replayed_cancel_answers_the_live_turn_and_never_the_notification() {
    let mut agent = replay_cancelled_turn();
    agent.initialize().await;
    let session = new_session(&mut agent).await;
    // A cancel with no turn running: the recorded answer belongs to a turn this client never
    // started, so nothing answers the notification; the next line out answers the next request.
    agent
        .send_json(
            json!({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": session}}),
        )
        .await;
    let probe = agent
        .request("initialize", json!({"protocolVersion": 1}))
        .await;
    let next = agent.json().await;
    assert_eq!(
        next["id"], probe,
        "the first line after a lone session/cancel answers the probe, not the notification: {next}"
    );
    // A turn that runs until cancelled ends with the live id and `cancelled`.
    let turn = agent.prompt(&session, "run until cancelled").await;
    agent
        .send_json(
            json!({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": session}}),
        )
        .await;
    let (_, result) = agent.until_response(&json!(turn)).await;
    assert_eq!(result["result"]["stopReason"], "cancelled");
    agent.close_stdin();
    assert_eq!(agent.code().await, 0);
    let notes = texts(&transcript(&agent.path("t.ndjson")), "note");
    assert!(
        notes
            .iter()
            .any(|n| n.contains("left out: no live request")),
        "the left-out answer is noted: {notes:?}"
    );
}
