//! Quirk profiles: kiro-cli's quirks switched on by name for any personality, in a script, a
//! recording or on the command line.

use crate::agent_support;

use agent_support::{Agent, Start};
use serde_json::json;

const RECORDING: &str = r#"
profiles = ["chunked"]

[recording]
agent = "rec-agent"

[[exchange]]
client = '{"jsonrpc":"2.0","id":5,"method":"initialize","params":{"protocolVersion":1}}'
[[exchange.agent]]
line = '{"jsonrpc":"2.0","id":5,"result":{"protocolVersion":1}}'

[[exchange]]
client = '{"jsonrpc":"2.0","id":6,"method":"session/new","params":{"cwd":".","mcpServers":[]}}'
[[exchange.agent]]
line = '{"jsonrpc":"2.0","id":6,"result":{"sessionId":"s1"}}'

[[exchange]]
client = '{"jsonrpc":"2.0","id":7,"method":"session/prompt","params":{"sessionId":"s1","prompt":[{"type":"text","text":"hi"}]}}'
[[exchange.agent]]
line = '{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"twenty characters ok"}}}}'
[[exchange.agent]]
line = '{"jsonrpc":"2.0","id":7,"result":{"stopReason":"end_turn"}}'
"#;

#[tokio::test]
async fn exit_on_unknown_load_is_a_profile_of_the_standard_personality() {
    let load = json!({"sessionId": "nope", "cwd": "/", "mcpServers": []});
    let mut plain = Agent::spawn(&["--script", "echo"]);
    plain.initialize().await;
    let id = plain.request("session/load", load.clone()).await;
    let (_, answer) = plain.until_response(&json!(id)).await;
    assert!(answer.get("error").is_some(), "{answer}");

    let mut quirky = Agent::spawn(&["--script", "echo", "--profile", "exit-on-unknown-load"]);
    quirky.initialize().await;
    quirky.request("session/load", load).await;
    assert_eq!(quirky.code().await, 0);
    assert!(quirky.rest().await.is_empty(), "no answer before the exit");
}

#[tokio::test]
async fn the_kiro_cli_profile_chunks_answers_and_sends_context_usage_after_the_result() {
    let mut agent = Agent::spawn(&["--script", "echo", "--profile", "kiro-cli"]);
    let session = agent.handshake().await;
    let id = agent.prompt(&session, "sixteen chars ok").await;
    let (updates, result) = agent.until_response(&json!(id)).await;
    let texts: Vec<&str> = updates
        .iter()
        .filter_map(|u| u["params"]["update"]["content"]["text"].as_str())
        .collect();
    assert_eq!(texts, ["sixteen ", "chars ok"]);
    assert_eq!(result["result"]["stopReason"], "end_turn");
    let after = agent.json().await;
    assert_eq!(
        after["params"]["update"]["_meta"]["kiro"]["kind"],
        "context_usage"
    );
}

#[tokio::test]
async fn a_recording_switches_on_chunking_for_its_replayed_answers() {
    let mut agent =
        Agent::start(Start::args(&["--script", "{dir}/rec.toml"]).file("rec.toml", RECORDING));
    let session = agent.handshake().await;
    let id = agent.prompt(&session, "hi").await;
    let (updates, _) = agent.until_response(&json!(id)).await;
    let texts: Vec<&str> = updates
        .iter()
        .filter_map(|u| u["params"]["update"]["content"]["text"].as_str())
        .collect();
    assert_eq!(texts, ["twenty c", "haracter", "s ok"]);
}

#[tokio::test]
async fn replay_with_exit_on_unknown_load_exits_on_an_unrecorded_load() {
    let mut agent = Agent::start(
        Start::args(&[
            "--script",
            "{dir}/rec.toml",
            "--profile",
            "exit-on-unknown-load",
        ])
        .file("rec.toml", RECORDING),
    );
    agent.initialize().await;
    agent
        .request(
            "session/load",
            json!({"sessionId": "x", "cwd": "/", "mcpServers": []}),
        )
        .await;
    assert_eq!(agent.code().await, 0);
}

#[tokio::test]
async fn an_unknown_profile_is_refused() {
    let agent = Agent::spawn(&["--profile", "nope"]);
    assert_eq!(agent.code().await, 2);
    let agent = Agent::start(
        Start::args(&["--script", "{dir}/s.toml"]).file("s.toml", "profiles = [\"nope\"]\n"),
    );
    assert_eq!(agent.code().await, 3);
}
