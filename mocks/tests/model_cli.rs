//! `ski-fake-model` as a program: the readiness line, a scripted answer through its URL, the
//! exit on stdin's end, and the exit codes of bad arguments and scripts.

use crate::model_support;

use std::time::Duration;

use serde_json::{Value, json};
use ski::transport::child::{ChildSpec, spawn};

fn fake_model() -> ChildSpec {
    ChildSpec::new("ski-fake-model", env!("CARGO_BIN_EXE_ski-fake-model"))
        .grace(Duration::from_millis(500))
}

/// Runs the program to its end: its exit code and both output streams.
async fn run_to_end(spec: ChildSpec) -> (Option<i32>, String) {
    let mut child = spawn(spec).expect("spawn");
    let mut output = String::new();
    while let Some((_, line)) = child.next_output_line().await {
        output.push_str(&line);
        output.push('\n');
    }
    let status = child.wait().await.expect("exit");
    (status.code(), output)
}

#[tokio::test]
async fn serve_prints_its_urls_answers_the_script_and_stops_when_stdin_closes() {
    let dir = tempfile::tempdir().expect("a directory");
    let script = dir.path().join("turns.toml");
    std::fs::write(&script, "[[turn]]\ntext = \"scripted hello\"\n").expect("the script");
    let mut child = spawn(
        fake_model()
            .args(["serve", "--api-key", "sk-one", "--script"])
            .arg(&script),
    )
    .expect("spawn");
    let ready: Value = serde_json::from_str(&child.next_line().await.unwrap().unwrap()).unwrap();
    assert_eq!(ready["api_keys"], json!(["sk-one"]));
    let base = ready["anthropic_base_url"].as_str().unwrap();
    assert_eq!(ready["openai_base_url"], format!("{base}/v1"));
    let address = base.strip_prefix("http://").unwrap().parse().unwrap();
    assert!(matches!(address, std::net::SocketAddr::V4(v4) if v4.ip().is_loopback()));
    let body = json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]});
    let exchange = model_support::send(
        address,
        "POST",
        "/v1/chat/completions",
        &[("authorization", "Bearer sk-one")],
        body.to_string(),
    )
    .await;
    assert_eq!(exchange.status, 200);
    assert_eq!(
        exchange.json().await["choices"][0]["message"]["content"],
        "scripted hello"
    );
    child.close_stdin();
    let status = child.wait().await.expect("exit");
    assert_eq!(status.code(), Some(0));
}

#[tokio::test]
async fn bad_arguments_and_scripts_exit_with_their_codes_and_a_reason() {
    let (code, output) = run_to_end(fake_model().args(["serve", "--listen", "0.0.0.0:0"])).await;
    assert_eq!(code, Some(2), "{output}");
    assert!(output.contains("not a loopback address"), "{output}");

    let dir = tempfile::tempdir().expect("a directory");
    let script = dir.path().join("turns.toml");
    std::fs::write(&script, "[[turn]]\ntext = \"a\"\nhang = true\n").expect("the script");
    let (code, output) = run_to_end(fake_model().args(["serve", "--script"]).arg(&script)).await;
    assert_eq!(code, Some(3), "{output}");
    assert!(output.contains("turn 1"), "{output}");

    let missing = dir.path().join("missing.toml");
    let (code, output) = run_to_end(fake_model().args(["serve", "--script"]).arg(&missing)).await;
    assert_eq!(code, Some(3), "{output}");
    assert!(output.contains("missing.toml"), "{output}");

    let (code, output) = run_to_end(fake_model().args(["serve", "--help"])).await;
    assert_eq!(code, Some(0));
    assert!(
        output.contains("Examples:") && output.contains("OPENAI_BASE_URL"),
        "{output}"
    );
}
