//! `ski-mock-agent record` between a test client and a real agent (the mock agent itself, so
//! nothing needs installing): lines pass through unchanged, the recording holds every exchange
//! with its provenance, and no planted secret reaches the file.

use crate::agent_support;

use agent_support::{Agent, Start, binary};
use serde_json::{Value, json};

const PLANTED: &str = "planted-Secret-5f3a9c";
const GITHUB_TOKEN: &str = "ghp_0123456789abcdefghijABCDEFGHIJ";

/// A recorder around `ski-mock-agent --script echo`, in the test's directory.
fn recorder(extra: &[&str]) -> Agent {
    let mut args = vec!["record", "--out", "{dir}/rec.toml", "--tag", "echo"];
    args.extend_from_slice(extra);
    args.extend_from_slice(&["--", binary(), "--script", "echo"]);
    Agent::start(Start::args(&args).env("PLANTED_TOKEN", PLANTED))
}

#[tokio::test]
async fn lines_pass_through_unchanged_and_the_recording_keeps_no_secret() {
    let mut agent = recorder(&["--redact-field", "orgCode"]);
    let dir = agent.dir.path().display().to_string();
    let id = agent
        .request(
            "initialize",
            json!({"protocolVersion": 1, "orgCode": "ACME-77"}),
        )
        .await;
    let (_, init) = agent.until_response(&json!(id)).await;
    assert_eq!(init["result"]["agentInfo"]["name"], "ski-mock-agent");
    let id = agent
        .request(
            "session/new",
            json!({"cwd": dir, "mcpServers": [{"name": "gh", "command": "gh-mcp", "args": [],
                   "env": [{"name": "GITHUB_TOKEN", "value": GITHUB_TOKEN}]}]}),
        )
        .await;
    let (_, new) = agent.until_response(&json!(id)).await;
    let session = new["result"]["sessionId"]
        .as_str()
        .expect("a session id")
        .to_owned();
    let text = format!("read {dir}/notes.txt with {PLANTED} and Bearer abcdefghijklmnop");
    let id = agent.prompt(&session, &text).await;
    let (updates, result) = agent.until_response(&json!(id)).await;
    // The client sees the agent's words as the agent wrote them: nothing is redacted on the wire.
    assert_eq!(
        updates[0]["params"]["update"]["content"]["text"],
        text.as_str()
    );
    assert_eq!(result["result"]["stopReason"], "end_turn");
    agent.close_stdin();
    assert_eq!(agent.code().await, 0);

    let recording = std::fs::read_to_string(agent.path("rec.toml")).expect("the recording");
    for secret in [
        PLANTED,
        GITHUB_TOKEN,
        "abcdefghijklmnop",
        "ACME-77",
        dir.as_str(),
    ] {
        assert!(
            !recording.contains(secret),
            "{secret} is in the recording:\n{recording}"
        );
    }
    let file: toml::Value = toml::from_str(&recording).expect("the recording is TOML");
    let provenance = &file["recording"];
    assert_eq!(provenance["agent"].as_str(), Some("ski-mock-agent"));
    assert_eq!(provenance["protocol_version"].as_integer(), Some(1));
    assert_eq!(provenance["tags"].as_array().map(Vec::len), Some(1));
    assert!(
        provenance["recorded_at"]
            .as_str()
            .is_some_and(|d| d.ends_with('Z'))
    );
    let command: Vec<&str> = provenance["command"]
        .as_array()
        .expect("the command")
        .iter()
        .filter_map(toml::Value::as_str)
        .collect();
    assert_eq!(command[1..], ["--script", "echo"]);
    let redacted: Vec<&str> = provenance["redacted"]
        .as_array()
        .expect("what was redacted")
        .iter()
        .filter_map(toml::Value::as_str)
        .collect();
    for what in [
        "cwd",
        "env:PLANTED_TOKEN",
        "field:orgCode",
        "pattern:bearer",
    ] {
        assert!(redacted.contains(&what), "{what} not in {redacted:?}");
    }
    let exchanges = file["exchange"].as_array().expect("exchanges");
    let methods: Vec<String> = exchanges
        .iter()
        .map(|e| {
            let client: Value =
                serde_json::from_str(e["client"].as_str().expect("client")).expect("client JSON");
            client["method"].as_str().unwrap_or_default().to_owned()
        })
        .collect();
    assert_eq!(methods, ["initialize", "session/new", "session/prompt"]);
    let prompt_lines = exchanges[2]["agent"]
        .as_array()
        .expect("the prompt's lines");
    assert_eq!(prompt_lines.len(), 2, "an update and the result");
    let echoed: Value =
        serde_json::from_str(prompt_lines[0]["line"].as_str().expect("a line")).expect("JSON");
    assert_eq!(
        echoed["params"]["update"]["content"]["text"],
        "read ./notes.txt with [redacted:env:PLANTED_TOKEN] and [redacted:bearer]"
    );
    let new: Value =
        serde_json::from_str(exchanges[1]["client"].as_str().expect("client")).expect("JSON");
    assert_eq!(new["params"]["cwd"], ".");
    assert_eq!(
        new["params"]["mcpServers"][0]["env"][0]["value"],
        "[redacted]"
    );
}

#[tokio::test]
async fn a_bad_redaction_pattern_is_refused_before_the_agent_starts() {
    let agent = Agent::start(Start::args(&[
        "record",
        "--out",
        "{dir}/rec.toml",
        "--redact-pattern",
        "(unclosed",
        "--",
        binary(),
    ]));
    assert_eq!(agent.code().await, 2);
    assert!(!agent.path("rec.toml").exists());
}

#[tokio::test]
async fn the_agents_exit_code_is_passed_on_and_the_recording_still_written() {
    let mut agent = Agent::start(Start::args(&[
        "record",
        "--out",
        "{dir}/rec.toml",
        "--",
        binary(),
        "--fault",
        "exit-on=session/new:7",
    ]));
    agent.initialize().await;
    agent
        .request("session/new", json!({"cwd": "/", "mcpServers": []}))
        .await;
    assert_eq!(agent.code().await, 7);
    let recording = std::fs::read_to_string(agent.path("rec.toml")).expect("the recording");
    assert!(recording.contains("session/new"), "{recording}");
}
