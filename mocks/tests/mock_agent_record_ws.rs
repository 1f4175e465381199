//! `ski-mock-agent record` over WebSocket: a client that connects to the recorder (`--listen`),
//! an agent the recorder connects to (`--connect`), or both. Frames pass through byte for byte,
//! ski's own client sees the same turns through the recorder as straight from `ski acp serve`,
//! and the recording replays to that client with the same transcript shape.

use crate::agent_support;

use std::path::{Path, PathBuf};
use std::time::Duration;

use agent_support::{Agent, PATIENCE, Start, binary, texts, transcript};
use futures::{SinkExt, StreamExt};
use serde_json::{Value, json};
use ski::transport::child::{Child, ChildSpec, OutputStream, spawn};
use tokio_tungstenite::tungstenite::Message;

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

/// The URL a process prints on stderr as `listening on ws://...`.
async fn listening_url(child: &mut Child) -> String {
    let read = async {
        while let Some(line) = child.next_stderr_line().await {
            if let Some(at) = line.find("ws://") {
                return line[at..].trim().to_owned();
            }
        }
        panic!("the process ended without saying where it listens");
    };
    tokio::time::timeout(PATIENCE, read)
        .await
        .expect("a listening line")
}

/// The reference agent on WebSocket, with its URL.
async fn reference_agent() -> (Child, String) {
    let spec = ChildSpec::new("serve", ski())
        .args([
            "acp",
            "serve",
            "--transport",
            "ws",
            "--listen",
            "127.0.0.1:0",
        ])
        .grace(Duration::from_millis(500));
    let mut child = spawn(spec).expect("ski acp serve starts");
    let url = listening_url(&mut child).await;
    (child, url)
}

/// The recorder with these arguments, and the URL it listens on.
async fn ws_recorder(args: &[&str]) -> (Agent, String) {
    let mut all = vec![
        "record",
        "--out",
        "{dir}/rec.toml",
        "--listen",
        "127.0.0.1:0",
    ];
    all.extend_from_slice(args);
    let mut recorder = Agent::start(Start::args(&all));
    let text = recorder
        .stderr_until(|text| text.contains("listening on"))
        .await;
    let url = text
        .lines()
        .find_map(|line| line.strip_prefix("listening on "))
        .expect("the recorder's URL")
        .to_owned();
    (recorder, url)
}

/// What a client shows of its turns: each update's kind and text, and each stop reason.
fn shape(lines: &[String]) -> Vec<String> {
    lines
        .iter()
        .map(|line| serde_json::from_str::<Value>(line).expect("a JSON line"))
        .filter_map(|line| match line["type"].as_str() {
            Some("session_update") => Some(format!(
                "update {} {}",
                line["update"].as_str().unwrap_or("?"),
                line["text"].as_str().unwrap_or("")
            )),
            Some("prompt_result") => Some(format!(
                "result {}",
                line["stopReason"].as_str().unwrap_or("?")
            )),
            _ => None,
        })
        .collect()
}

/// `ski acp client connect --json` with two prompts, run to its end; its stdout lines.
async fn ski_client(connection: &[&str]) -> Vec<String> {
    let spec = ChildSpec::new("client", ski())
        .args(["acp", "client", "connect", "--json"])
        .args(connection)
        .args(["--prompt", "hello", "--prompt", "say two"])
        .grace(Duration::from_millis(500));
    let mut child = spawn(spec).expect("ski acp client starts");
    child.close_stdin();
    let mut out = Vec::new();
    let mut err = String::new();
    let read = async {
        while let Some((stream, line)) = child.next_output_line().await {
            match stream {
                OutputStream::Stdout => out.push(line),
                OutputStream::Stderr => err.push_str(&line),
            }
        }
    };
    tokio::time::timeout(PATIENCE, read)
        .await
        .expect("the client ends");
    let status = child.wait().await.expect("an exit status");
    assert_eq!(
        status.code(),
        Some(0),
        "ski acp client {connection:?}: {err}"
    );
    out
}

fn recorded_methods(recording: &toml::Value) -> Vec<String> {
    recording["exchange"]
        .as_array()
        .expect("exchanges")
        .iter()
        .filter_map(|e| e["client"].as_str())
        .map(|c| serde_json::from_str::<Value>(c).expect("client JSON"))
        .filter_map(|c| c["method"].as_str().map(str::to_owned))
        .collect()
}

#[tokio::test]
async fn frames_pass_byte_for_byte_between_a_websocket_client_and_a_stdio_agent() {
    let transcript_path = tempfile::tempdir().expect("a directory");
    let transcript_file = transcript_path.path().join("agent.ndjson");
    let transcript_arg = transcript_file.display().to_string();
    let (recorder, url) = ws_recorder(&[
        "--",
        binary(),
        "--script",
        "echo",
        "--transcript",
        &transcript_arg,
    ])
    .await;
    let (mut socket, _) = tokio_tungstenite::connect_async(url.as_str())
        .await
        .expect("the recorder accepts a client");
    // Spacing and key order a re-encoding would change.
    let sent = [
        r#"{ "params": {"protocolVersion": 1}, "method": "initialize", "id": 7, "jsonrpc": "2.0" }"#,
        r#"{"jsonrpc":"2.0","id":"n","method":"session/new","params":{"cwd":"/","mcpServers":[]}}"#,
    ];
    let mut received = Vec::new();
    for text in sent {
        socket.send(Message::text(text)).await.expect("send");
        let frame = tokio::time::timeout(PATIENCE, socket.next())
            .await
            .expect("an answer")
            .expect("a frame")
            .expect("a good frame");
        received.push(frame.into_text().expect("a text frame").to_string());
    }
    assert_eq!(
        serde_json::from_str::<Value>(&received[0]).expect("JSON")["id"],
        json!(7)
    );
    socket.close(None).await.expect("close");
    assert_eq!(recorder.code().await, 0);

    let records = transcript(&transcript_file);
    assert_eq!(texts(&records, "in"), sent);
    assert_eq!(texts(&records, "out"), received);
    let recording: toml::Value =
        toml::from_str(&std::fs::read_to_string(recorder.path("rec.toml")).expect("recording"))
            .expect("TOML");
    assert_eq!(recorded_methods(&recording), ["initialize", "session/new"]);
    assert_eq!(
        recording["recording"]["agent"].as_str(),
        Some("ski-mock-agent")
    );
}

#[tokio::test]
async fn skis_websocket_client_sees_the_same_turns_through_the_recorder_and_in_replay() {
    let (server, agent_url) = reference_agent().await;
    let live = shape(&ski_client(&["--transport", "ws", "--endpoint", &agent_url]).await);
    assert!(
        live.contains(&"update agent_message_chunk hello".to_owned()),
        "{live:?}"
    );

    let (recorder, url) = ws_recorder(&["--connect", &agent_url]).await;
    let through = shape(&ski_client(&["--transport", "ws", "--endpoint", &url]).await);
    assert_eq!(through, live);
    assert_eq!(recorder.code().await, 0);
    server.shutdown().await.expect("stop the reference agent");

    let path = recorder.path("rec.toml");
    let recording: toml::Value =
        toml::from_str(&std::fs::read_to_string(&path).expect("recording")).expect("TOML");
    let provenance = &recording["recording"];
    assert_eq!(provenance["agent"].as_str(), Some("ski"));
    assert_eq!(provenance["endpoint"].as_str(), Some(agent_url.as_str()));
    let methods = recorded_methods(&recording);
    assert_eq!(
        methods[..3],
        ["initialize", "session/new", "session/prompt"],
        "{methods:?}"
    );
    let replay_cmd = shell_words::join([binary(), "--script", &path.display().to_string()]);
    let replayed = shape(&ski_client(&["--agent-cmd", &replay_cmd]).await);
    assert_eq!(replayed, live);
}

#[tokio::test]
async fn a_stdio_client_reaches_an_agent_on_websocket() {
    let (server, agent_url) = reference_agent().await;
    let mut recorder = Agent::start(Start::args(&[
        "record",
        "--out",
        "{dir}/rec.toml",
        "--connect",
        &agent_url,
    ]));
    let session = recorder.handshake().await;
    assert!(session.starts_with("sess_"), "{session}");
    recorder.close_stdin();
    assert_eq!(recorder.code().await, 0);
    server.shutdown().await.expect("stop the reference agent");
    let text = std::fs::read_to_string(recorder.path("rec.toml")).expect("recording");
    assert!(text.contains("session/new"), "{text}");
}

#[tokio::test]
async fn an_agent_url_that_cannot_be_reached_or_a_command_beside_it_is_refused() {
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a port");
        listener.local_addr().expect("an address").port()
    };
    let unreachable = format!("ws://127.0.0.1:{port}/acp");
    let recorder = Agent::start(Start::args(&[
        "record",
        "--out",
        "{dir}/rec.toml",
        "--connect",
        &unreachable,
    ]));
    assert_eq!(recorder.code().await, 4);
    let both = Agent::start(Start::args(&[
        "record",
        "--out",
        "{dir}/rec.toml",
        "--connect",
        &unreachable,
        "--",
        binary(),
    ]));
    assert_eq!(both.code().await, 2);
    let bad_address = Agent::start(Start::args(&[
        "record",
        "--out",
        "{dir}/rec.toml",
        "--listen",
        "256.0.0.1:0",
        "--",
        binary(),
    ]));
    assert_eq!(bad_address.code().await, 3);
    assert!(!bad_address.path("rec.toml").exists());
}
