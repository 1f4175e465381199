//! `ski acp client` as a user runs it: help, flag validation and exit codes, a turn over stdio
//! against a tiny scripted agent (a shell script answering by request id), a turn over a
//! loopback WebSocket, `stop`, `drive`, and the end of a spawned agent that ignores EOF.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use assert_cmd::Command;
use predicates::prelude::*;
use serde_json::{Value, json};
use ski::jsonrpc::{Peer, RequestContext, RpcError, Transport};
use tokio::net::TcpListener;

/// The client sends initialize as id 1 and session/new as id 2; prompts and stops echo their id.
/// Prompt text must not contain quotes.
const SCRIPTED_AGENT: &str = r#"
while IFS= read -r line; do
  [ -n "$AGENT_LOG" ] && printf '%s\n' "$line" >> "$AGENT_LOG"
  id=$(printf '%s' "$line" | sed -n 's/.*"id":\([0-9][0-9]*\).*/\1/p')
  case "$line" in
    *'"method":"initialize"'*)
      printf '%s\n' "{\"jsonrpc\":\"2.0\",\"id\":$id,\"result\":{\"protocolVersion\":1,\"agentCapabilities\":{}}}" ;;
    *'"method":"session/new"'*)
      printf '%s\n' "{\"jsonrpc\":\"2.0\",\"id\":$id,\"result\":{\"sessionId\":\"sess-1\"}}" ;;
    *'"method":"session/prompt"'*)
      text=$(printf '%s' "$line" | sed -n 's/.*"text":"\([^"]*\)".*/\1/p')
      session=$(printf '%s' "$line" | sed -n 's/.*"sessionId":"\([^"]*\)".*/\1/p')
      printf '%s\n' "{\"jsonrpc\":\"2.0\",\"method\":\"_vendor/noise\",\"params\":{}}"
      printf '%s\n' "{\"jsonrpc\":\"2.0\",\"method\":\"session/update\",\"params\":{\"sessionId\":\"$session\",\"update\":{\"sessionUpdate\":\"turn_end\"}}}"
      printf '%s\n' "{\"jsonrpc\":\"2.0\",\"method\":\"session/update\",\"params\":{\"sessionId\":\"$session\",\"update\":{\"sessionUpdate\":\"agent_message_chunk\",\"content\":{\"type\":\"text\",\"text\":\"$text\"}}}}"
      printf '%s\n' "{\"jsonrpc\":\"2.0\",\"id\":$id,\"result\":{\"stopReason\":\"end_turn\"}}" ;;
    *'"method":"session/stop"'*)
      printf '%s\n' "{\"jsonrpc\":\"2.0\",\"id\":$id,\"result\":{}}" ;;
  esac
done
"#;

fn ski() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_ski"));
    command.timeout(Duration::from_secs(60));
    command.env_remove("RUST_LOG");
    command
}

/// Writes the scripted agent (plus `tail`, run after stdin closes) into `dir`.
fn agent_script(dir: &Path, tail: &str) -> String {
    let path = dir.join("agent.sh");
    std::fs::write(&path, format!("{SCRIPTED_AGENT}{tail}\n")).unwrap();
    path.to_string_lossy().into_owned()
}

fn json_lines(output: &[u8]) -> Vec<Value> {
    String::from_utf8_lossy(output)
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{line}: {e}")))
        .collect()
}

#[test]
fn help_lists_the_subcommands_and_flags() {
    ski()
        .args(["acp", "client", "--help"])
        .assert()
        .success()
        .stdout(predicate::str::contains("connect").and(predicate::str::contains("drive")));
    ski()
        .args(["acp", "client", "connect", "--help"])
        .assert()
        .success()
        .stdout(
            predicate::str::contains("--ws-reconnect-base-delay-ms")
                .and(predicate::str::contains("--max-in-flight-sends"))
                .and(predicate::str::contains("--permission-decision"))
                .and(predicate::str::contains("Examples:")),
        );
    ski()
        .args(["acp", "client", "drive", "--help"])
        .assert()
        .success()
        .stdout(predicate::str::contains("cancel_waiting"));
}

#[test]
fn invalid_flags_exit_2_with_a_fix() {
    let cases: &[(&[&str], &str)] = &[
        (&["connect", "--prompt", "hi"], "needs --agent-cmd"),
        (
            &[
                "connect",
                "--prompt",
                "hi",
                "--agent-cmd",
                "x",
                "--ws-heartbeat-ms",
                "5",
            ],
            "--ws-heartbeat-ms only applies to --transport ws",
        ),
        (
            &[
                "connect",
                "--prompt",
                "hi",
                "--agent-cmd",
                "x",
                "--endpoint",
                "ws://127.0.0.1:1",
            ],
            "--endpoint only applies to --transport ws",
        ),
        (
            &["connect", "--prompt", "hi", "--transport", "ws"],
            "needs --endpoint",
        ),
        (
            &[
                "connect",
                "--prompt",
                "hi",
                "--transport",
                "ws",
                "--endpoint",
                "http://x:1",
            ],
            "must start with ws://",
        ),
        (
            &[
                "connect",
                "--prompt",
                "hi",
                "--transport",
                "ws",
                "--endpoint",
                "ws://x:1",
                "--agent-cmd",
                "a",
            ],
            "only apply to --transport stdio",
        ),
        (
            &["connect", "--prompt", "  ", "--agent-cmd", "x"],
            "must not be blank",
        ),
        (
            &[
                "connect",
                "--prompt",
                "hi",
                "--agent-cmd",
                "x",
                "--fs-root",
                "/",
            ],
            "--fs-root needs --fs",
        ),
        (
            &[
                "connect",
                "--prompt",
                "hi",
                "--agent-cmd",
                "x",
                "--cwd",
                "/nonexistent/ski-dir",
            ],
            "--cwd",
        ),
        (&["connect", "--agent-cmd", "x"], "--prompt"),
        (
            &[
                "connect",
                "--prompt",
                "hi",
                "--agent-cmd",
                "x",
                "--max-in-flight-sends",
                "0",
            ],
            "0",
        ),
        (&["stop", "--agent-cmd", "x"], "--session-id"),
        (
            &["connect", "--prompt", "hi", "--agent-cmd", "ski 'acp serve"],
            "cannot split --agent-cmd \"ski 'acp serve\" into words: a quote (' or \") is never closed",
        ),
    ];
    for (args, message) in cases {
        ski()
            .args(["acp", "client"])
            .args(*args)
            .assert()
            .code(2)
            .stderr(predicate::str::contains(*message));
    }
}

#[test]
fn an_invalid_drive_script_exits_2_before_connecting() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("script.json");
    std::fs::write(&script, r#"[{"op":"fly"}]"#).unwrap();
    ski()
        .args([
            "acp",
            "client",
            "drive",
            "--agent-cmd",
            "/nonexistent/agent",
            "--script",
        ])
        .arg(&script)
        .assert()
        .code(2)
        .stderr(predicate::str::contains("invalid driver script"));
}

#[test]
fn upstream_failures_exit_4() {
    ski()
        .args([
            "acp",
            "client",
            "connect",
            "--prompt",
            "hi",
            "--agent-cmd",
            "/nonexistent/ski-agent",
        ])
        .assert()
        .code(4)
        .stderr(
            predicate::str::contains("cannot start").and(predicate::str::contains("--agent-cmd")),
        );
    // An agent that exits at once.
    ski()
        .args([
            "acp",
            "client",
            "connect",
            "--prompt",
            "hi",
            "--agent-cmd",
            "/bin/true",
        ])
        .assert()
        .code(4)
        .stderr(predicate::str::contains("initialize failed"));
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let listener = runtime.block_on(TcpListener::bind("127.0.0.1:0")).unwrap();
    let url = format!("ws://{}", listener.local_addr().unwrap());
    drop(listener);
    ski()
        .args([
            "acp",
            "client",
            "connect",
            "--prompt",
            "hi",
            "--transport",
            "ws",
        ])
        .args([
            "--endpoint",
            &url,
            "--ws-reconnect-attempts",
            "1",
            "--ws-reconnect-base-delay-ms",
            "10",
        ])
        .assert()
        .code(4)
        .stderr(predicate::str::contains("is an agent listening there"));
}

#[test]
fn a_stdio_turn_streams_the_echo_and_the_stop_reason() {
    let dir = tempfile::tempdir().unwrap();
    let agent = agent_script(dir.path(), "");
    ski()
        .args([
            "acp",
            "client",
            "connect",
            "--transport",
            "stdio",
            "--agent-cmd",
            "/bin/sh",
        ])
        .args([
            "--args",
            &agent,
            "--prompt",
            "hello there",
            "--prompt",
            "twice",
        ])
        .args(["--cwd"])
        .arg(dir.path())
        .assert()
        .success()
        .stdout("hello there\nstopReason: end_turn\ntwice\nstopReason: end_turn\n");
    // The whole command line in --agent-cmd is split into words.
    ski()
        .args([
            "acp",
            "client",
            "connect",
            "--agent-cmd",
            &format!("/bin/sh {agent}"),
            "--prompt",
            "hi",
        ])
        .assert()
        .success()
        .stdout("hi\nstopReason: end_turn\n");
    // The flag's old name, --cmd, still works.
    ski()
        .args([
            "acp", "client", "connect", "--cmd", "/bin/sh", "--args", &agent,
        ])
        .args(["--prompt", "old name"])
        .assert()
        .success()
        .stdout("old name\nstopReason: end_turn\n");
}

#[test]
fn json_output_is_sorted_lines_with_the_full_update() {
    let dir = tempfile::tempdir().unwrap();
    let agent = agent_script(dir.path(), "");
    let output = ski()
        .args([
            "acp",
            "client",
            "connect",
            "--agent-cmd",
            "/bin/sh",
            "--args",
            &agent,
        ])
        .args(["--prompt", "hi", "--json", "--log-level", "error"])
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let text = String::from_utf8(output.clone()).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines,
        [
            r#"{"payload":{"content":{"text":"hi","type":"text"},"sessionUpdate":"agent_message_chunk"},"sessionId":"sess-1","text":"hi","type":"session_update","update":"agent_message_chunk"}"#,
            r#"{"sessionId":"sess-1","stopReason":"end_turn","type":"prompt_result"}"#,
        ],
        "the unknown kind turn_end is skipped, the chunk printed in full"
    );
}

#[test]
fn a_reused_session_id_skips_session_new() {
    let dir = tempfile::tempdir().unwrap();
    let agent = agent_script(dir.path(), "");
    let log = dir.path().join("agent.log");
    let output = ski()
        .args([
            "acp",
            "client",
            "connect",
            "--agent-cmd",
            "/bin/sh",
            "--args",
            &agent,
        ])
        .args(["--prompt", "hi", "--session-id", "old-7", "--json"])
        .env("AGENT_LOG", &log)
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let lines = json_lines(&output);
    assert_eq!(lines.last().unwrap()["sessionId"], "old-7");
    assert_eq!(lines[0]["sessionId"], "old-7");
    let methods: Vec<Value> = json_lines(&std::fs::read(&log).unwrap())
        .into_iter()
        .map(|message| message["method"].clone())
        .collect();
    assert_eq!(methods, [json!("initialize"), json!("session/prompt")]);
}

#[test]
fn stop_sends_session_stop() {
    let dir = tempfile::tempdir().unwrap();
    let agent = agent_script(dir.path(), "");
    ski()
        .args([
            "acp",
            "client",
            "stop",
            "--agent-cmd",
            "/bin/sh",
            "--args",
            &agent,
        ])
        .args(["--session-id", "sess-9", "--json"])
        .assert()
        .success()
        .stdout("{\"sessionId\":\"sess-9\",\"type\":\"session_stop\"}\n");
}

#[test]
fn a_spawned_agent_that_ignores_eof_and_term_is_killed_as_a_group() {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("pid");
    let tail = format!(
        "trap '' TERM; (trap '' TERM; sleep 600) & echo $$ > {}; wait",
        pid_file.display()
    );
    let agent = agent_script(dir.path(), &tail);
    ski()
        .args([
            "acp",
            "client",
            "connect",
            "--agent-cmd",
            "/bin/sh",
            "--args",
            &agent,
            "--prompt",
            "hi",
        ])
        .assert()
        .success()
        .stdout("hi\nstopReason: end_turn\n");
    let pid: u32 = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(
        !ski::transport::child::group_exists(pid),
        "the agent's process group outlived the client"
    );
}

/// A WebSocket agent on loopback, served from a runtime of its own while the test thread runs
/// the command.
struct WsAgent {
    url: String,
    prompts: Arc<AtomicUsize>,
    _runtime: tokio::runtime::Runtime,
}

fn ws_agent() -> WsAgent {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let listener = runtime.block_on(TcpListener::bind("127.0.0.1:0")).unwrap();
    let url = format!("ws://{}", listener.local_addr().unwrap());
    let prompts = Arc::new(AtomicUsize::new(0));
    let counter = prompts.clone();
    runtime.spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let Ok(socket) = tokio_tungstenite::accept_async(stream).await else {
                continue;
            };
            let counter = counter.clone();
            let peer = Peer::builder()
                .on_request("initialize", |_cx, _p: Option<Value>| async {
                    Ok(json!({"protocolVersion": 1, "agentCapabilities": {}}))
                })
                .on_request("session/new", |_cx, _p: Option<Value>| async {
                    Ok(json!({"sessionId": "ws-1"}))
                })
                .on_request(
                    "session/prompt",
                    move |cx: RequestContext, params: Option<Value>| {
                        counter.fetch_add(1, Ordering::SeqCst);
                        async move {
                            let params = params.unwrap_or_default();
                            let update = json!({"sessionId": params["sessionId"], "update": {
                                "sessionUpdate": "agent_message_chunk",
                                "content": params["prompt"][0]}});
                            cx.peer()
                                .notify("session/update", Some(update))
                                .await
                                .map_err(|e| RpcError::internal_error(e.to_string()))?;
                            Ok(json!({"stopReason": "end_turn"}))
                        }
                    },
                )
                .spawn(Transport::websocket(socket));
            std::mem::forget(peer);
        }
    });
    WsAgent {
        url,
        prompts,
        _runtime: runtime,
    }
}

#[test]
fn a_websocket_turn_streams_the_echo_and_the_stop_reason() {
    let agent = ws_agent();
    ski()
        .args([
            "acp",
            "client",
            "connect",
            "--transport",
            "ws",
            "--endpoint",
            &agent.url,
        ])
        .args(["--prompt", "hi over ws", "--ws-heartbeat-ms", "0"])
        .assert()
        .success()
        .stdout("hi over ws\nstopReason: end_turn\n");
    assert_eq!(agent.prompts.load(Ordering::SeqCst), 1);
}

#[test]
fn drive_reports_outcomes_and_counters_as_json_lines() {
    let agent = ws_agent();
    let script = r#"[{"op":"initialize"},{"op":"new_session"},
        {"op":"request","method":"session/new","params":{"cwd":"/","mcpServers":[]},"count":20},
        {"op":"prompt","text":"hi"},{"op":"close"},
        {"op":"request","method":"session/new","params":{}},{"op":"stats"}]"#;
    let output = ski()
        .args([
            "acp",
            "client",
            "drive",
            "--transport",
            "ws",
            "--endpoint",
            &agent.url,
        ])
        .args(["--script", "-", "--log-level", "error"])
        .write_stdin(script)
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let lines = json_lines(&output);
    let text = String::from_utf8(output).unwrap();
    assert_eq!(
        text.lines().last().unwrap(),
        r#"{"error":null,"outcomes":{"not_connected":1,"success":23},"pending":0,"requests":24,"timeouts":0,"type":"summary"}"#,
        "the summary, keys sorted"
    );
    let prompt = lines
        .iter()
        .find(|l| l["type"] == "outcome" && l["method"] == "session/prompt")
        .unwrap();
    assert_eq!(prompt["stopReason"], "end_turn");
}
