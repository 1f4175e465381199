//! The scripted driver against a scripted agent over an in-memory pipe: outcomes per request,
//! consecutive ids, close and timeout races, the send gate and permission cancellation.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use ski::acp::client::driver::{self, Emit};
use ski::acp::client::{Client, ClientConfig, PermissionPolicy};
use ski::jsonrpc::{LineReader, Transport};
use tokio::io::{AsyncWriteExt, DuplexStream, ReadHalf, WriteHalf};
use tokio::sync::mpsc;

struct Agent {
    reader: LineReader<ReadHalf<DuplexStream>>,
    writer: WriteHalf<DuplexStream>,
}

impl Agent {
    async fn recv(&mut self) -> Value {
        let line = self
            .reader
            .next_line()
            .await
            .expect("the client closed its output")
            .expect("frame error");
        serde_json::from_slice(line).expect("invalid json from the client")
    }

    async fn send(&mut self, message: Value) {
        let mut line = message.to_string();
        line.push('\n');
        self.writer.write_all(line.as_bytes()).await.unwrap();
    }

    async fn respond(&mut self, id: &Value, result: Value) {
        self.send(json!({"jsonrpc": "2.0", "id": id, "result": result}))
            .await;
    }

    async fn answer_initialize(&mut self) {
        let message = self.recv().await;
        assert_eq!(message["method"], "initialize");
        self.respond(&message["id"], json!({"protocolVersion": 1}))
            .await;
    }
}

fn connect(config: ClientConfig, pipe: usize) -> (Client, Agent) {
    let (ours, theirs) = tokio::io::duplex(pipe);
    let (read, write) = tokio::io::split(ours);
    let client = Client::over(Transport::bytes(read, write), config);
    let (read, write) = tokio::io::split(theirs);
    (
        client,
        Agent {
            reader: LineReader::new(read),
            writer: write,
        },
    )
}

/// Collects the driver's lines, and forwards each to a channel the agent may watch.
fn collector() -> (Emit, Arc<Mutex<Vec<Value>>>, mpsc::UnboundedReceiver<Value>) {
    let lines = Arc::new(Mutex::new(Vec::new()));
    let (tx, rx) = mpsc::unbounded_channel();
    let sink = lines.clone();
    let emit: Emit = Arc::new(move |line: Value| {
        // The driver's lines must already be printable with sorted keys.
        assert!(line.is_object());
        sink.lock().unwrap().push(line.clone());
        let _ = tx.send(line);
    });
    (emit, lines, rx)
}

fn outcomes(lines: &[Value], step: u64) -> Vec<Value> {
    lines
        .iter()
        .filter(|line| line["type"] == "outcome" && line["step"] == step)
        .cloned()
        .collect()
}

fn summary(lines: &[Value]) -> Value {
    lines
        .iter()
        .find(|line| line["type"] == "summary")
        .cloned()
        .expect("no summary line")
}

#[tokio::test]
async fn concurrent_requests_answered_in_reverse_get_consecutive_ids_and_clear_state() {
    let (client, mut agent) = connect(ClientConfig::default(), 1 << 20);
    let script = driver::parse_script(
        r#"[{"op":"initialize"},
            {"op":"request","method":"session/new","params":{"cwd":"/tmp","mcpServers":[]},"count":200},
            {"op":"stats"}]"#,
    )
    .unwrap();
    let agent_task = tokio::spawn(async move {
        agent.answer_initialize().await;
        let mut ids = Vec::new();
        for _ in 0..200 {
            let message = agent.recv().await;
            assert_eq!(message["method"], "session/new");
            ids.push(message["id"].clone());
        }
        for id in ids.iter().rev() {
            agent
                .respond(id, json!({"sessionId": format!("s{id}")}))
                .await;
        }
        ids
    });
    let (emit, lines, _rx) = collector();
    let counts = driver::run(&client, &script, "/tmp", emit).await.unwrap();
    let wire_ids = agent_task.await.unwrap();
    assert_eq!(counts.get("success"), Some(&201));
    let lines = lines.lock().unwrap();
    let reported: BTreeSet<i64> = outcomes(&lines, 1)
        .iter()
        .map(|line| {
            assert_eq!(line["outcome"], "success", "{line}");
            line["id"].as_i64().unwrap()
        })
        .collect();
    assert_eq!(reported, (2..=201).collect::<BTreeSet<i64>>());
    let on_wire: Vec<i64> = wire_ids.iter().map(|id| id.as_i64().unwrap()).collect();
    assert_eq!(
        on_wire,
        (2..=201).collect::<Vec<i64>>(),
        "ids leave in order"
    );
    let stats = lines.iter().find(|line| line["type"] == "stats").unwrap();
    assert_eq!(
        (stats["pending"].clone(), stats["timeouts"].clone()),
        (json!(0), json!(0))
    );
    assert_eq!(summary(&lines)["outcomes"], json!({"success": 201}));
}

#[tokio::test]
async fn close_fails_in_flight_requests_with_eof_then_not_connected() {
    let (client, mut agent) = connect(ClientConfig::default(), 1 << 20);
    let script = driver::parse_script(
        r#"[{"op":"initialize"},
            {"op":"request","method":"session/prompt","params":{"sessionId":"s","prompt":[]},"count":50,"wait":false},
            {"op":"await_sent"},
            {"op":"close"},
            {"op":"close"},
            {"op":"request","method":"session/new","params":{"cwd":"/","mcpServers":[]},"count":3},
            {"op":"stats"}]"#,
    )
    .unwrap();
    let agent_task = tokio::spawn(async move {
        agent.answer_initialize().await;
        let mut read = 0;
        while agent.reader.next_line().await.is_some() {
            read += 1;
        }
        read
    });
    let (emit, lines, _rx) = collector();
    driver::run(&client, &script, "/tmp", emit).await.unwrap();
    assert_eq!(
        agent_task.await.unwrap(),
        50,
        "nothing is written after close"
    );
    let lines = lines.lock().unwrap();
    assert!(
        outcomes(&lines, 1)
            .iter()
            .all(|line| line["outcome"] == "eof")
    );
    assert!(
        outcomes(&lines, 5)
            .iter()
            .all(|line| line["outcome"] == "not_connected" && line["id"].is_null())
    );
    let summary = summary(&lines);
    assert_eq!(
        summary["outcomes"],
        json!({"eof": 50, "not_connected": 3, "success": 1})
    );
    assert_eq!(
        (summary["pending"].clone(), summary["timeouts"].clone()),
        (json!(0), json!(0))
    );
}

#[tokio::test(start_paused = true)]
async fn close_and_timeout_races_end_in_exactly_one_outcome() {
    let (client, mut agent) = connect(ClientConfig::default(), 1 << 20);
    let script = driver::parse_script(
        r#"[{"op":"initialize"},
            {"op":"request","method":"session/new","params":{},"timeoutMs":100,"wait":false},
            {"op":"request","method":"session/new","params":{},"timeoutMs":1000,"wait":false},
            {"op":"sleep","ms":200},
            {"op":"close"}]"#,
    )
    .unwrap();
    tokio::spawn(async move {
        agent.answer_initialize().await;
        while agent.reader.next_line().await.is_some() {}
    });
    let (emit, lines, _rx) = collector();
    driver::run(&client, &script, "/tmp", emit).await.unwrap();
    let lines = lines.lock().unwrap();
    assert_eq!(outcomes(&lines, 1)[0]["outcome"], "request_timeout");
    assert_eq!(outcomes(&lines, 2)[0]["outcome"], "eof");
    assert_eq!(
        summary(&lines)["outcomes"],
        json!({"eof": 1, "request_timeout": 1, "success": 1})
    );
}

#[tokio::test]
async fn a_sender_cancelled_at_the_full_gate_takes_no_permit() {
    let config = ClientConfig {
        max_in_flight_sends: 2,
        ..ClientConfig::default()
    };
    // A small pipe and an agent that stops reading: the first writes block, the gate fills.
    let (client, mut agent) = connect(config, 1024);
    let padding = "x".repeat(4096);
    let script = driver::parse_script(&format!(
        r#"[{{"op":"initialize"}},
            {{"op":"request","method":"session/new","params":{{"cwd":"/","mcpServers":[],"_meta":{{"pad":"{padding}"}}}},"count":6,"wait":false}},
            {{"op":"stats"}},
            {{"op":"cancel_waiting","count":1}},
            {{"op":"await"}},
            {{"op":"request","method":"session/new","params":{{"cwd":"/","mcpServers":[]}}}},
            {{"op":"stats"}}]"#
    ))
    .unwrap();
    let (emit, lines, mut rx) = collector();
    let agent_task = tokio::spawn(async move {
        agent.answer_initialize().await;
        // Read nothing more until the driver has cancelled a waiting sender.
        while let Some(line) = rx.recv().await {
            if line["type"] == "cancel_waiting" {
                break;
            }
        }
        let mut seen = Vec::new();
        for _ in 0..6 {
            let message = agent.recv().await;
            seen.push(message["id"].as_i64().unwrap());
            agent
                .respond(&message["id"], json!({"sessionId": "s"}))
                .await;
        }
        seen
    });
    driver::run(&client, &script, "/tmp", emit).await.unwrap();
    let seen = agent_task.await.unwrap();
    assert_eq!(
        seen,
        [2, 3, 4, 5, 6, 7],
        "five of the batch, then the new send, in order"
    );
    let lines = lines.lock().unwrap();
    let stats: Vec<&Value> = lines.iter().filter(|l| l["type"] == "stats").collect();
    assert_eq!(stats[0]["sendPermitsAvailable"], 0, "the gate was full");
    assert_eq!(stats[0]["maxInFlightSends"], 2);
    assert_eq!(
        stats[1]["sendPermitsAvailable"], 2,
        "every permit came back"
    );
    let batch = outcomes(&lines, 1);
    let cancelled: Vec<&Value> = batch
        .iter()
        .filter(|l| l["outcome"] == "cancelled")
        .collect();
    assert_eq!(cancelled.len(), 1);
    assert_eq!(
        cancelled[0]["index"], 5,
        "the most recent waiter was cancelled"
    );
    assert_eq!(outcomes(&lines, 5)[0]["outcome"], "success");
    assert_eq!(
        summary(&lines)["outcomes"],
        json!({"cancelled": 1, "success": 7})
    );
}

#[tokio::test]
async fn cancelling_a_turn_answers_the_held_permission_request_cancelled() {
    let config = ClientConfig {
        permission: PermissionPolicy::Hold,
        ..ClientConfig::default()
    };
    let (client, mut agent) = connect(config, 1 << 20);
    let script = driver::parse_script(
        r#"[{"op":"initialize"},
            {"op":"new_session"},
            {"op":"prompt","text":"hi","wait":false},
            {"op":"wait_permission"},
            {"op":"cancel"},
            {"op":"await"}]"#,
    )
    .unwrap();
    let agent_task = tokio::spawn(async move {
        agent.answer_initialize().await;
        let new = agent.recv().await;
        assert_eq!(new["params"]["cwd"], "/srv/project");
        agent.respond(&new["id"], json!({"sessionId": "s-1"})).await;
        let prompt = agent.recv().await;
        assert_eq!(prompt["params"]["sessionId"], "s-1");
        agent
            .send(
                json!({"jsonrpc": "2.0", "id": "perm-1", "method": "session/request_permission",
                "params": {"sessionId": "s-1", "toolCall": {"toolCallId": "c"},
                           "options": [{"optionId": "a", "name": "A", "kind": "allow_once"}]}}),
            )
            .await;
        let cancel = agent.recv().await;
        let answer = agent.recv().await;
        agent
            .respond(&prompt["id"], json!({"stopReason": "cancelled"}))
            .await;
        (cancel, answer)
    });
    let (emit, lines, _rx) = collector();
    driver::run(&client, &script, "/srv/project", emit)
        .await
        .unwrap();
    let (cancel, answer) = agent_task.await.unwrap();
    assert_eq!(cancel["method"], "session/cancel");
    assert_eq!(cancel["params"], json!({"sessionId": "s-1"}));
    assert_eq!(answer["id"], "perm-1");
    assert_eq!(
        answer["result"],
        json!({"outcome": {"outcome": "cancelled"}})
    );
    let lines = lines.lock().unwrap();
    let prompt = &outcomes(&lines, 2)[0];
    assert_eq!(prompt["stopReason"], "cancelled");
    let cancelled = lines.iter().find(|l| l["type"] == "cancelled").unwrap();
    assert_eq!(cancelled["permissionsAnswered"], 1);
}

#[tokio::test]
async fn a_thousand_sequential_calls_leave_nothing_behind() {
    let config = ClientConfig {
        request_timeout: Some(Duration::from_secs(60)),
        ..ClientConfig::default()
    };
    let (client, mut agent) = connect(config, 1 << 16);
    let script = driver::parse_script(
        r#"[{"op":"request","method":"session/new","params":{},"count":1000,"mode":"sequential"},
            {"op":"stats"}]"#,
    )
    .unwrap();
    tokio::spawn(async move {
        loop {
            let message = agent.recv().await;
            agent
                .respond(&message["id"], json!({"sessionId": "s"}))
                .await;
        }
    });
    let (emit, lines, _rx) = collector();
    let counts = driver::run(&client, &script, "/", emit).await.unwrap();
    assert_eq!(counts.get("success"), Some(&1000));
    let lines = lines.lock().unwrap();
    let stats = lines.iter().find(|l| l["type"] == "stats").unwrap();
    assert_eq!(
        (stats["pending"].clone(), stats["timeouts"].clone()),
        (json!(0), json!(0))
    );
}

#[tokio::test]
async fn a_step_that_needs_a_session_fails_with_a_clear_error() {
    let (client, _agent) = connect(ClientConfig::default(), 1 << 16);
    let script = driver::parse_script(r#"[{"op":"prompt","text":"hi"}]"#).unwrap();
    let (emit, lines, _rx) = collector();
    let error = driver::run(&client, &script, "/", emit).await.unwrap_err();
    assert!(
        error.to_string().contains("run new_session first"),
        "{error}"
    );
    let summary = summary(&lines.lock().unwrap());
    assert!(
        summary["error"]
            .as_str()
            .unwrap()
            .contains("needs a session")
    );
}
