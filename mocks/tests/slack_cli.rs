//! The `ski-fake-slack` binary: readiness line, the HTTP control API, the NDJSON transcript, and
//! shutdown on stdin close and on SIGTERM.

use crate::slack_support;

use std::time::Duration;

use nix::sys::signal::Signal;
use serde_json::{Value, json};
use ski::transport::child::{Child, ChildSpec, spawn};
use slack_support::{api, https_get, raw};

fn binary() -> &'static str {
    env!("CARGO_BIN_EXE_ski-fake-slack")
}

async fn start(args: &[&str]) -> (Child, Value) {
    let mut child = spawn(
        ChildSpec::new("ski-fake-slack", binary())
            .args(args)
            .grace(Duration::from_millis(500)),
    )
    .expect("spawn");
    let line = child
        .next_line()
        .await
        .expect("read")
        .expect("a readiness line");
    let ready: Value = serde_json::from_str(&line).expect("json readiness line");
    (child, ready)
}

async fn control(ready: &Value, operation: &str, body: Value) -> Value {
    let url = format!(
        "{}/{operation}",
        ready["control_url"].as_str().expect("control url")
    );
    let (status, text) = raw(
        "POST",
        &url,
        Some("application/json"),
        None,
        body.to_string().as_bytes(),
    )
    .await;
    let answer: Value = serde_json::from_str(&text).expect("json");
    assert_eq!(status == 200, answer["ok"] == true, "{text}");
    answer
}

#[tokio::test]
async fn serve_controls_records_and_stops_when_stdin_closes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let record = dir.path().join("slack.ndjson");
    let (mut child, ready) = start(&["serve", "--record", record.to_str().expect("path")]).await;
    let base = ready["api_base_url"]
        .as_str()
        .expect("api base url")
        .to_string();
    assert!(
        base.starts_with("http://127.0.0.1:") && base.ends_with("/api"),
        "{ready}"
    );
    assert!(
        ready["socket_mode_url"]
            .as_str()
            .is_some_and(|u| u.starts_with("ws://127.0.0.1:"))
    );

    // A waiter registered before the post sees it.
    let waiter = {
        let ready = ready.clone();
        tokio::spawn(async move {
            control(
                &ready,
                "wait_for_message",
                json!({"channel": "C0000000001", "text_contains": "deploy", "timeout_ms": 10_000}),
            )
            .await
        })
    };
    let posted = api(
        &format!("{base}/chat.postMessage"),
        Some("application/json"),
        Some("xoxb-1"),
        br#"{"channel":"general","text":"deploy done"}"#,
    )
    .await;
    assert_eq!(posted["ok"], true);
    let found = waiter.await.expect("waiter");
    assert_eq!(found["message"]["message"]["ts"], posted["ts"]);

    let messages = control(&ready, "messages", json!({"channel": "general"})).await;
    assert_eq!(messages["messages"][0]["message"]["text"], "deploy done");
    let requests = control(&ready, "requests", json!({"method": "chat.postMessage"})).await;
    assert_eq!(requests["requests"][0]["token_kind"], "bot");
    let injected = control(
        &ready,
        "slash_command",
        json!({"command": "/ski", "text": "hi", "channel": "general", "user": "U0000000002"}),
    )
    .await;
    let envelope = injected["envelope_id"]
        .as_str()
        .expect("envelope id")
        .to_string();
    let ack = control(&ready, "ack", json!({"envelope_id": envelope})).await;
    assert_eq!(ack["ack"], Value::Null, "nobody is connected to ack it");
    let raw_injected = control(
        &ready,
        "raw_envelope",
        json!({"type": "interactive", "payload": {"type": "block_actions", "user": 5}}),
    )
    .await;
    assert!(raw_injected["envelope_id"].is_string(), "{raw_injected}");
    let refused = control(
        &ready,
        "raw_envelope",
        json!({"type": "carrier_pigeon", "payload": {}}),
    )
    .await;
    assert_eq!(refused["ok"], false, "{refused}");
    let timed_out = control(
        &ready,
        "ack",
        json!({"envelope_id": envelope, "timeout_ms": 10}),
    )
    .await;
    assert!(
        timed_out["error"]
            .as_str()
            .is_some_and(|e| e.contains("timed out")),
        "{timed_out}"
    );

    control(
        &ready,
        "fail_next",
        json!({"method": "auth.test", "fault": {"kind": "rate_limited", "retry_after": 2}}),
    )
    .await;
    let (status, text) = raw(
        "POST",
        &format!("{base}/auth.test"),
        None,
        Some("xoxb-1"),
        b"",
    )
    .await;
    assert_eq!(
        (status, text.as_str()),
        (429, r#"{"ok":false,"error":"ratelimited"}"#)
    );
    let bad = control(
        &ready,
        "slash_command",
        json!({"command": "/ski", "channel": "nowhere", "user": "U0000000002"}),
    )
    .await;
    assert_eq!(bad["error"], "unknown channel nowhere");
    let (status, _) = raw(
        "POST",
        &format!(
            "{}/nonsense",
            ready["control_url"].as_str().unwrap_or_default()
        ),
        None,
        None,
        b"{",
    )
    .await;
    assert_eq!(status, 400);

    child.close_stdin();
    let status = child.wait().await.expect("exit");
    assert_eq!(status.code(), Some(0));
    let transcript = std::fs::read_to_string(&record).expect("transcript");
    let kinds: Vec<String> = transcript
        .lines()
        .map(|line| {
            serde_json::from_str::<Value>(line).expect("ndjson")["kind"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        })
        .collect();
    assert_eq!(kinds, ["request", "request"], "{transcript}");
}

#[tokio::test]
async fn serve_stops_on_sigterm_and_rejects_a_bad_config() {
    let (child, _ready) = start(&["serve"]).await;
    child.signal_group(Signal::SIGTERM).expect("signal");
    assert_eq!(child.wait().await.expect("exit").code(), Some(0));

    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("workspace.toml");
    std::fs::write(&config, "[team]\nid = \"T1\"\nnmae = \"typo\"\n").expect("write");
    let mut child = spawn(ChildSpec::new("ski-fake-slack", binary()).args([
        "serve",
        "--config",
        config.to_str().expect("path"),
    ]))
    .expect("spawn");
    assert_eq!(child.wait().await.expect("exit").code(), Some(3));
    let mut stderr = String::new();
    while let Some(line) = child.next_stderr_line().await {
        stderr.push_str(&line);
    }
    assert!(stderr.contains("unknown field `nmae`"), "{stderr}");
}

#[tokio::test]
async fn a_workspace_file_sets_the_ids() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("workspace.toml");
    std::fs::write(
        &config,
        "[team]\nid = \"T9\"\nname = \"acme\"\ndomain = \"acme\"\n[[channels]]\nid = \"C9\"\nname = \"ops\"\n",
    )
    .expect("write");
    let (child, ready) = start(&["serve", "--config", config.to_str().expect("path")]).await;
    assert_eq!(ready["team_id"], "T9");
    let base = ready["api_base_url"].as_str().expect("base");
    let info = api(
        &format!("{base}/conversations.info?channel=ops"),
        None,
        Some("xoxb-1"),
        b"",
    )
    .await;
    assert_eq!(info["channel"]["id"], "C9");
    child.shutdown().await.expect("shutdown");
}

#[tokio::test]
async fn serve_tls_writes_its_ca_and_answers_over_https() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ca_file = dir.path().join("fake-slack-ca.pem");
    let (child, ready) = start(&[
        "serve",
        "--tls",
        "--ca-file",
        ca_file.to_str().expect("path"),
    ])
    .await;
    assert_eq!(ready["ca_file"], ca_file.to_str().expect("path"), "{ready}");
    let base = ready["api_base_url"].as_str().expect("base");
    assert!(base.starts_with("https://127.0.0.1:"), "{ready}");
    assert!(
        ready["socket_mode_url"]
            .as_str()
            .is_some_and(|u| u.starts_with("wss://127.0.0.1:")),
        "{ready}"
    );
    let ca = std::fs::read_to_string(&ca_file).expect("the CA file");
    assert!(ca.starts_with("-----BEGIN CERTIFICATE-----"), "{ca}");
    let (status, answer) = https_get(&ca, &format!("{base}/auth.test"), "xoxb-1").await;
    assert_eq!(status, 200);
    assert_eq!(answer["team_id"], ready["team_id"]);
    // The control API stays on plain HTTP.
    let requests = control(&ready, "requests", json!({"method": "auth.test"})).await;
    assert_eq!(requests["requests"][0]["token_kind"], "bot");
    child.shutdown().await.expect("shutdown");
}
