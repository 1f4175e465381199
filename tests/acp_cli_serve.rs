//! `ski acp serve` as a user runs it: help, argument errors and their exit codes, a prompt round
//! trip over stdio through the real binary, and the WebSocket server announcing its address.

use std::time::Duration;

use assert_cmd::cargo::cargo_bin_cmd;
use nix::sys::signal::Signal;
use predicates::prelude::*;
use serde_json::{Value, json};
use ski::jsonrpc::{Peer, Transport};
use ski::transport::child::{self, ChildSpec};

const SKI: &str = env!("CARGO_BIN_EXE_ski");

/// How long any wait may take before the test fails.
const PATIENCE: Duration = Duration::from_secs(30);

async fn within<T>(what: &str, fut: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(PATIENCE, fut)
        .await
        .unwrap_or_else(|_| panic!("timed out waiting for {what}"))
}

#[test]
fn help_describes_every_group_of_flags_and_exits_0() {
    cargo_bin_cmd!("ski")
        .args(["acp", "serve", "--help"])
        .assert()
        .success()
        .stdout(
            predicate::str::contains("--transport <TRANSPORT>")
                .and(predicate::str::contains("--listen <HOST:PORT>"))
                .and(predicate::str::contains("--permission-mode"))
                .and(predicate::str::contains("--permission-timeout-ms"))
                .and(predicate::str::contains("--permission-policy"))
                .and(predicate::str::contains("--execution-state"))
                .and(predicate::str::contains("--max-retries"))
                .and(predicate::str::contains("--fail-attempts"))
                .and(predicate::str::contains("--prompt-timeout-ms"))
                .and(predicate::str::contains("--hold"))
                .and(predicate::str::contains("--tool-call"))
                .and(predicate::str::contains("--session-ttl-ms"))
                .and(predicate::str::contains("--page-size"))
                .and(predicate::str::contains("--max-sessions"))
                .and(predicate::str::contains("--auth-method"))
                .and(predicate::str::contains("--disable"))
                .and(predicate::str::contains("--minimal"))
                .and(predicate::str::contains("--strict-version"))
                .and(predicate::str::contains("--log-format"))
                .and(predicate::str::contains("Examples:"))
                .and(predicate::str::contains("Exit codes")),
        );
    cargo_bin_cmd!("ski")
        .args(["acp", "--help"])
        .assert()
        .success()
        .stdout(
            predicate::str::contains("serve")
                .and(predicate::str::contains("Examples:"))
                .and(predicate::str::contains(
                    "ski acp client connect --agent-cmd",
                )),
        );
    cargo_bin_cmd!("ski")
        .args(["acp", "client", "--help"])
        .assert()
        .success()
        .stdout(
            predicate::str::contains("Examples:")
                .and(predicate::str::contains("ski acp client drive --agent-cmd")),
        );
}

#[test]
fn bad_arguments_exit_2_and_say_what_to_fix() {
    for (args, needle) in [
        (&["--bogus"][..], "unexpected argument"),
        (&["--transport", "tcp"][..], "possible values"),
        (
            &["--transport", "ws", "--listen", "127.0.0.1"][..],
            "HOST:PORT",
        ),
        (
            &["--transport", "ws", "--listen", "127.0.0.1:99999"][..],
            "0 to 65535",
        ),
        (&["--listen", "127.0.0.1:0"][..], "--transport ws"),
        (
            &[
                "--permission-mode",
                "disabled",
                "--permission-timeout-ms",
                "5",
            ][..],
            "remove one",
        ),
        (&["--disable", "everything"][..], "expected one of"),
        (&["--tool-call", "read:"][..], "read:PATH"),
        (&["--auth-required"][..], "--auth-method"),
        (&["--page-size", "0"][..], "at least 1"),
    ] {
        cargo_bin_cmd!("ski")
            .args(["acp", "serve"])
            .args(args)
            .assert()
            .code(2)
            .stderr(predicate::str::contains(needle));
    }
}

#[test]
fn an_unusable_rust_log_is_a_configuration_error() {
    cargo_bin_cmd!("ski")
        .args(["acp", "serve"])
        .env("RUST_LOG", "ski=[")
        .assert()
        .code(3)
        .stderr(predicate::str::contains("RUST_LOG"));
}

#[test]
fn a_port_in_use_exits_4() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = taken.local_addr().unwrap().to_string();
    cargo_bin_cmd!("ski")
        .args(["acp", "serve", "--transport", "ws", "--listen", &address])
        .assert()
        .code(4)
        .stderr(predicate::str::contains("in use"));
}

#[test]
fn stdin_at_end_without_a_request_exits_0_with_nothing_on_stdout() {
    cargo_bin_cmd!("ski")
        .args(["acp", "serve", "--log-format", "json"])
        .write_stdin("")
        .assert()
        .success()
        .stdout("")
        .stderr(predicate::str::contains(r#""level":"INFO""#));
}

fn message(line: &str) -> Value {
    serde_json::from_str(line).unwrap_or_else(|e| panic!("stdout line is not JSON ({e}): {line}"))
}

#[tokio::test]
async fn a_stdio_prompt_round_trip_through_the_binary_echoes_and_ends_the_turn() {
    let mut agent = child::spawn(ChildSpec::new("agent", SKI).args([
        "acp",
        "serve",
        "--permission-mode",
        "disabled",
    ]))
    .expect("spawn ski");
    let requests = [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
               "params": {"protocolVersion": 1, "clientCapabilities": {}}}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "session/new",
               "params": {"cwd": "/tmp", "mcpServers": []}}),
    ];
    let mut session = None;
    for request in &requests {
        agent.send_line(&request.to_string()).await.unwrap();
        let line = within("a response", agent.next_line())
            .await
            .unwrap()
            .unwrap();
        let response = message(&line);
        assert_eq!(response["id"], request["id"], "{line}");
        if response["id"] == 2 {
            session = response["result"]["sessionId"].as_str().map(str::to_owned);
        }
    }
    let session = session.expect("a session id");
    let prompt = json!({"jsonrpc": "2.0", "id": 3, "method": "session/prompt",
        "params": {"sessionId": session, "prompt": [{"type": "text", "text": "hi"}]}});
    agent.send_line(&prompt.to_string()).await.unwrap();
    let mut kinds = Vec::new();
    let result = loop {
        let line = within("the prompt turn", agent.next_line())
            .await
            .unwrap()
            .unwrap();
        let value = message(&line);
        if value["id"] == 3 {
            break value;
        }
        assert_eq!(value["method"], "session/update", "{line}");
        assert_eq!(value["params"]["sessionId"], json!(session));
        let update = &value["params"]["update"];
        if update["sessionUpdate"] == "agent_message_chunk" {
            assert_eq!(update["content"], json!({"type": "text", "text": "hi"}));
        }
        kinds.push(update["sessionUpdate"].as_str().unwrap().to_owned());
    };
    assert_eq!(result["result"], json!({"stopReason": "end_turn"}));
    assert!(
        kinds.contains(&"agent_message_chunk".to_owned()),
        "{kinds:?}"
    );
    agent.close_stdin();
    let status = within("the agent to exit at end of input", agent.wait())
        .await
        .unwrap();
    assert_eq!(status.code(), Some(0));
    assert!(
        within("stdout to end", agent.next_line())
            .await
            .unwrap()
            .is_none()
    );
    let termination = agent.shutdown().await.unwrap();
    assert!(termination.group_gone);
}

#[tokio::test]
async fn ws_serve_prints_its_address_and_serves_a_prompt() {
    let mut agent = child::spawn(ChildSpec::new("agent", SKI).args([
        "acp",
        "serve",
        "--transport",
        "ws",
        "--listen",
        "127.0.0.1:0",
        "--permission-mode",
        "disabled",
    ]))
    .expect("spawn ski");
    let url = crate::acp_serve_support::listening_url(&mut agent, PATIENCE).await;
    assert!(
        url.starts_with("ws://127.0.0.1:") && url.ends_with("/acp"),
        "{url}"
    );
    let (socket, _) = within("connect", Box::pin(tokio_tungstenite::connect_async(&url)))
        .await
        .unwrap();
    let client = Peer::builder().spawn(Transport::websocket(socket));
    let init = client
        .request("initialize", Some(json!({"protocolVersion": 1})))
        .await
        .unwrap();
    assert_eq!(init["protocolVersion"], 1);
    let session = client
        .request(
            "session/new",
            Some(json!({"cwd": "/tmp", "mcpServers": []})),
        )
        .await
        .unwrap()["sessionId"]
        .clone();
    let result = within(
        "the prompt",
        client.request(
            "session/prompt",
            Some(json!({"sessionId": session, "prompt": [{"type": "text", "text": "over ws"}]})),
        ),
    )
    .await
    .unwrap();
    assert_eq!(result["stopReason"], "end_turn");
    client.close().await;
    agent.signal_group(Signal::SIGTERM).unwrap();
    let status = within("the agent to stop on SIGTERM", agent.wait())
        .await
        .unwrap();
    assert_eq!(status.code(), Some(0));
    agent.shutdown().await.unwrap();
}

/// The answer `ski acp serve ARGS` writes to one `initialize` asking for `protocolVersion` 2.
fn answer_to_version_2(args: &[&str]) -> Value {
    let output = cargo_bin_cmd!("ski")
        .args(["acp", "serve", "--permission-mode", "disabled"])
        .args(args)
        .write_stdin(
            "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{\"protocolVersion\":2}}\n",
        )
        .timeout(PATIENCE)
        .output()
        .expect("ski acp serve runs");
    assert!(output.status.success(), "{output:?}");
    let stdout = String::from_utf8(output.stdout).expect("UTF-8 on stdout");
    let line = stdout.lines().next().expect("an answer on stdout");
    message(line)
}

#[test]
fn an_unsupported_protocol_version_gets_1_by_default_and_minus_32602_with_strict_version() {
    let negotiated = answer_to_version_2(&[]);
    assert_eq!(
        negotiated["result"]["protocolVersion"],
        json!(1),
        "{negotiated}"
    );
    let strict = answer_to_version_2(&["--strict-version"]);
    assert_eq!(strict["error"]["code"], json!(-32602), "{strict}");
    assert!(
        strict["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("unsupported protocolVersion: 2")),
        "{strict}"
    );
}

/// The `initialize` and `session/new` results `ski acp serve ARGS` writes.
fn initialize_and_new_session(args: &[&str]) -> (Value, Value) {
    let output = cargo_bin_cmd!("ski")
        .args(["acp", "serve", "--permission-mode", "disabled"])
        .args(args)
        .write_stdin(concat!(
            "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{\"protocolVersion\":1}}\n",
            "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"session/new\",\"params\":{\"cwd\":\"/\",\"mcpServers\":[]}}\n",
        ))
        .timeout(PATIENCE)
        .output()
        .expect("ski acp serve runs");
    assert!(output.status.success(), "{output:?}");
    let stdout = String::from_utf8(output.stdout).expect("UTF-8 on stdout");
    let answers: Vec<Value> = stdout.lines().map(message).collect();
    let result = |id: i64| {
        answers
            .iter()
            .find(|a| a["id"] == json!(id))
            .and_then(|a| a.get("result"))
            .cloned()
            .unwrap_or_else(|| panic!("no result for id {id} in {stdout}"))
    };
    (result(1), result(2))
}

/// The keys of the object at `pointer` in `value`.
fn keys(value: &Value, pointer: &str) -> Vec<String> {
    value
        .pointer(pointer)
        .and_then(Value::as_object)
        .map(|object| object.keys().cloned().collect())
        .unwrap_or_default()
}

#[test]
fn default_output_holds_only_stable_v1_fields_and_enable_adds_fork_and_models() {
    let (init, created) = initialize_and_new_session(&[]);
    let stable_agent = [
        "loadSession",
        "promptCapabilities",
        "mcpCapabilities",
        "sessionCapabilities",
        "auth",
        "_meta",
    ];
    let stable_session = [
        "list",
        "delete",
        "additionalDirectories",
        "resume",
        "close",
        "_meta",
    ];
    let stable_new = ["sessionId", "modes", "configOptions", "_meta"];
    for (pointer, stable) in [
        ("/agentCapabilities", &stable_agent[..]),
        (
            "/agentCapabilities/sessionCapabilities",
            &stable_session[..],
        ),
    ] {
        let extra: Vec<String> = keys(&init, pointer)
            .into_iter()
            .filter(|k| !stable.contains(&k.as_str()))
            .collect();
        assert!(
            extra.is_empty(),
            "{pointer} beyond stable v1: {extra:?} in {init}"
        );
    }
    let extra: Vec<String> = keys(&created, "")
        .into_iter()
        .filter(|k| !stable_new.contains(&k.as_str()))
        .collect();
    assert!(
        extra.is_empty(),
        "session/new beyond stable v1: {extra:?} in {created}"
    );

    let (init, created) =
        initialize_and_new_session(&["--enable", "fork", "--enable", "set-model"]);
    assert!(
        init.pointer("/agentCapabilities/sessionCapabilities/fork")
            .is_some(),
        "{init}"
    );
    assert!(created.get("models").is_some(), "{created}");
}
