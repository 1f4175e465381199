//! `ski acp client connect` against an agent that floods it with requests and notifications and
//! reads nothing until the flood is over, as a peer that writes before it reads does: the client
//! keeps reading while its answers wait (queued apart from its own sends, bounded), so neither
//! waits for the other on full pipes; every request is answered once the agent reads, and the
//! turn ends.

use crate::acp_backpressure_support;

use acp_backpressure_support::{CAT_BUFFER_ALLOWANCE, PATIENCE, pipe_capacity};
use ski::acp::client::ANSWER_QUEUE_BYTES;
use ski::jsonrpc::peer::DEFAULT_MAX_IN_FLIGHT_SENDS;
use ski::transport::child::{self, ChildSpec};
use tokio::io::{AsyncBufReadExt, BufReader};

const SKI: &str = env!("CARGO_BIN_EXE_ski");

/// The client's answer to a flood request, at most (an unknown method: -32601 with its name).
const ANSWER_BYTES: u64 = 160;

/// A `sh` agent: answers `initialize` and `session/new`; on `session/prompt` writes the flood
/// file to its stdout without reading, then reads one answer per flood request into the answers
/// file, then ends the turn; it exits when its stdin closes.
fn flooding_agent(flood: &std::path::Path, answers: &std::path::Path, requests: usize) -> String {
    r#"#!/bin/sh
while IFS= read -r line; do
  id=$(printf '%s' "$line" | sed -n 's/.*"id":\([0-9][0-9]*\).*/\1/p')
  case "$line" in
    *'"method":"initialize"'*)
      printf '%s\n' "{\"jsonrpc\":\"2.0\",\"id\":$id,\"result\":{\"protocolVersion\":1,\"agentCapabilities\":{},\"agentInfo\":{\"name\":\"flood\",\"version\":\"1\"}}}" ;;
    *'"method":"session/new"'*)
      printf '%s\n' "{\"jsonrpc\":\"2.0\",\"id\":$id,\"result\":{\"sessionId\":\"sess-1\"}}" ;;
    *'"method":"session/prompt"'*)
      cat '{flood}'
      head -n {requests} > '{answers}'
      printf '%s\n' "{\"jsonrpc\":\"2.0\",\"id\":$id,\"result\":{\"stopReason\":\"end_turn\"}}" ;;
  esac
done
"#
    .replace("{flood}", flood.to_str().expect("a UTF-8 path"))
    .replace("{answers}", answers.to_str().expect("a UTF-8 path"))
    .replace("{requests}", &requests.to_string())
}

/// The n-th flood request, and every tenth a notification the client prints.
fn flood_lines(requests: usize) -> String {
    let mut out = String::new();
    for n in 0..requests {
        out.push_str(&format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":\"f-{n:06}\",\"method\":\"_flood/probe\",\"params\":{{}}}}\n"
        ));
        if n % 10 == 0 {
            out.push_str(&format!(
                "{{\"jsonrpc\":\"2.0\",\"method\":\"session/update\",\"params\":{{\"sessionId\":\"sess-1\",\"update\":{{\"sessionUpdate\":\"agent_message_chunk\",\"content\":{{\"type\":\"text\",\"text\":\"chunk {n:06}\\n\"}}}}}}}}\n"
            ));
        }
    }
    out
}

#[tokio::test]
async fn an_agent_that_floods_before_it_reads_does_not_deadlock_the_client() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let (probe_read, _probe_write) = nix::unistd::pipe().expect("a pipe");
    let pipe = pipe_capacity(&probe_read);
    let request_bytes = flood_lines(1).lines().next().unwrap().len() as u64 + 1;
    // Twice what fills both pipes, the agent's `cat` and the client's send queue: a client that
    // stops reading while its answers wait is stuck well before the end.
    let held = 2 * pipe + CAT_BUFFER_ALLOWANCE + DEFAULT_MAX_IN_FLIGHT_SENDS as u64 * ANSWER_BYTES;
    let requests = usize::try_from(2 * held / request_bytes).expect("a count");
    assert!(
        requests as u64 * ANSWER_BYTES < ANSWER_QUEUE_BYTES as u64,
        "the answers fit the client's queue"
    );
    let flood = dir.path().join("flood.ndjson");
    std::fs::write(&flood, flood_lines(requests)).expect("write the flood");
    let answers = dir.path().join("answers.ndjson");
    let script = dir.path().join("agent.sh");
    std::fs::write(&script, flooding_agent(&flood, &answers, requests)).expect("write the agent");

    let mut client = child::spawn(
        ChildSpec::new("client", SKI)
            .args(["acp", "client", "connect", "--agent-cmd", "sh", "--args"])
            .arg(&script)
            .args(["--prompt", "flood", "--request-timeout-ms", "0", "--cwd"])
            .arg(dir.path())
            .env_remove("RUST_LOG"),
    )
    .expect("spawn ski acp client");
    let stdout = client.take_stdout().expect("stdout");
    let mut printed = BufReader::new(stdout).lines();
    let mut chunks = 0;
    let last = loop {
        let line = tokio::time::timeout(PATIENCE, printed.next_line())
            .await
            .expect("the client and the agent went on: no deadlock")
            .expect("stdout readable")
            .expect("a line before the end");
        if line.starts_with("chunk ") {
            assert_eq!(line, format!("chunk {:06}", chunks * 10), "in order");
            chunks += 1;
        } else {
            break line;
        }
    };
    assert_eq!(chunks, requests.div_ceil(10), "every notification printed");
    assert_eq!(last, "stopReason: end_turn");
    let status = tokio::time::timeout(PATIENCE, client.wait())
        .await
        .expect("the client exits after its turn")
        .expect("exit status");
    assert_eq!(status.code(), Some(0));
    assert!(client.shutdown().await.expect("teardown").group_gone);

    let answered = std::fs::read_to_string(&answers).expect("the agent's answers");
    let answered: Vec<serde_json::Value> = answered
        .lines()
        .map(|line| serde_json::from_str(line).expect("an answer is JSON"))
        .collect();
    assert_eq!(answered.len(), requests, "one answer per request");
    for answer in &answered {
        assert_eq!(answer["error"]["code"], -32601, "{answer}");
        assert!(answer.to_string().len() as u64 <= ANSWER_BYTES, "{answer}");
    }
    // Answers are matched by id (JSON-RPC does not order them): each request got exactly one.
    let mut ids: Vec<String> = answered
        .iter()
        .map(|answer| answer["id"].as_str().expect("a string id").to_owned())
        .collect();
    ids.sort();
    let expected: Vec<String> = (0..requests).map(|n| format!("f-{n:06}")).collect();
    assert!(ids == expected, "every request answered exactly once");
}
