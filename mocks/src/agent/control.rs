//! The control channel: a Unix socket over which a test runner drives an agent that some other
//! program spawned. One JSON command per line; one JSON reply per line.
//!
//! The agent either listens on a path (`--control PATH`) or connects to a runner that listens
//! (`--control-connect PATH`) and then first sends `{"hello": <state>}`. Commands:
//!
//! | command | fields | reply |
//! |---|---|---|
//! | `state` | | `{"ok":true,"state":{...}}` |
//! | `send` | `message` (JSON) or `line` (text) | `{"ok":true}` once written |
//! | `run` | `steps` (script steps as JSON) | `{"ok":true}` once they ran |
//! | `trigger` | `name` | `{"ok":true,"rules":N}` once the `control = NAME` rules ran |
//! | `release` | `gate` | `{"ok":true}` |
//! | `wait` | `method`, `count` (1), `timeout_ms` | `{"ok":true,"count":N}` once N messages of that method arrived |
//! | `wait` | `stdin: "closed"`, `timeout_ms` | `{"ok":true}` once stdin reached its end |
//! | `exit` | `code` (0) | `{"ok":true}`, then the agent exits |
//!
//! A command may carry `"id"`, which its reply repeats. Failures reply
//! `{"ok":false,"error":"..."}`. Commands run concurrently, so a `release` can free a `run`
//! that waits on a gate.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use ski::jsonrpc::LineReader;
use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::Mutex;

use super::runtime::Agent;
use super::runtime::sequence;
use super::script::step::{Step, StepSpec};
use super::transcript::Kind;

/// The longest command line accepted.
const MAX_COMMAND_BYTES: usize = 16 * 1024 * 1024;

/// Binds the control socket. A stale socket file (nobody listening) is replaced; a live one is
/// an error.
pub async fn bind(path: &Path) -> std::io::Result<UnixListener> {
    if path.exists() {
        if UnixStream::connect(path).await.is_ok() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::AddrInUse,
                "another process listens on this control socket",
            ));
        }
        std::fs::remove_file(path)?;
    }
    UnixListener::bind(path)
}

/// Serves every connection to the listener.
pub async fn serve(agent: Arc<Agent>, listener: UnixListener) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let clone = Arc::clone(&agent);
        agent.spawn(async move { connection(clone, stream, false).await });
    }
}

/// Connects to a runner's socket, says hello and serves its commands.
pub async fn connect(agent: Arc<Agent>, path: &Path) -> std::io::Result<()> {
    let stream = UnixStream::connect(path).await?;
    let clone = Arc::clone(&agent);
    agent.spawn(async move { connection(clone, stream, true).await });
    Ok(())
}

type SharedWriter = Arc<Mutex<Box<dyn AsyncWrite + Send + Unpin>>>;

async fn write_reply(agent: &Agent, writer: &SharedWriter, reply: &Value) {
    // What the command wrote to stdout is on the wire before the reply says it is done: a
    // runner may stop the agent (SIGSTOP) as soon as the reply arrives.
    agent.flush_output().await;
    let mut line = reply.to_string();
    agent
        .transcript
        .line(Kind::ControlOut, line.as_bytes(), None);
    line.push('\n');
    let mut writer = writer.lock().await;
    let _ = writer.write_all(line.as_bytes()).await;
    let _ = writer.flush().await;
}

async fn connection(agent: Arc<Agent>, stream: UnixStream, hello: bool) {
    let (read, write) = stream.into_split();
    let writer: SharedWriter = Arc::new(Mutex::new(Box::new(write)));
    if hello {
        let state = agent.report().await;
        write_reply(&agent, &writer, &json!({ "hello": state })).await;
    }
    let mut reader = LineReader::with_max_line_bytes(read, MAX_COMMAND_BYTES);
    while let Some(line) = reader.next_line().await {
        let Ok(line) = line else {
            let reply = json!({"ok": false, "error": "command line too long or unreadable"});
            write_reply(&agent, &writer, &reply).await;
            continue;
        };
        agent.transcript.line(Kind::ControlIn, line, None);
        let parsed: Result<Value, _> = serde_json::from_slice(line);
        let agent = Arc::clone(&agent);
        let writer = Arc::clone(&writer);
        let task_agent = Arc::clone(&agent);
        agent.spawn(async move {
            let (reply, exit) = match parsed {
                Ok(command) => execute(&task_agent, &command).await,
                Err(error) => (
                    json!({"ok": false, "error": format!("not json: {error}")}),
                    None,
                ),
            };
            write_reply(&task_agent, &writer, &reply).await;
            if let Some(code) = exit {
                task_agent.request_exit(code, "control exit");
            }
        });
    }
}

fn failure(message: impl Into<String>) -> Value {
    json!({"ok": false, "error": message.into()})
}

/// Runs one command; returns the reply and, for `exit`, the code to exit with after replying.
pub async fn execute(agent: &Arc<Agent>, command: &Value) -> (Value, Option<i32>) {
    let (mut reply, exit) = execute_inner(agent, command).await;
    if let (Some(id), Some(map)) = (command.get("id"), reply.as_object_mut()) {
        map.insert("id".to_owned(), id.clone());
    }
    (reply, exit)
}

async fn execute_inner(agent: &Arc<Agent>, command: &Value) -> (Value, Option<i32>) {
    let Some(name) = command.get("cmd").and_then(Value::as_str) else {
        return (failure("missing \"cmd\""), None);
    };
    match name {
        "state" => (json!({"ok": true, "state": agent.report().await}), None),
        "send" => {
            let bytes = match (command.get("message"), command.get("line")) {
                (Some(message), None) => message.to_string().into_bytes(),
                (None, Some(Value::String(line))) => line.clone().into_bytes(),
                _ => {
                    return (
                        failure("send needs \"message\" (json) or \"line\" (text)"),
                        None,
                    );
                }
            };
            agent.write_bytes(&bytes, true, None).await;
            (json!({"ok": true}), None)
        }
        "run" => {
            let Some(Value::Array(specs)) = command.get("steps") else {
                return (failure("run needs \"steps\" (an array)"), None);
            };
            let mut steps = Vec::with_capacity(specs.len());
            for (index, spec) in specs.iter().enumerate() {
                let spec: StepSpec = match serde_json::from_value(spec.clone()) {
                    Ok(spec) => spec,
                    Err(error) => return (failure(format!("steps[{index}]: {error}")), None),
                };
                match Step::from_spec(&spec, &format!("steps[{index}]")) {
                    Ok(step) => steps.push(step),
                    Err((at, message)) => return (failure(format!("{at}: {message}")), None),
                }
            }
            let mut ctx = agent.detached_context();
            sequence::run_steps(agent, &steps, &mut ctx).await;
            (json!({"ok": true}), None)
        }
        "trigger" => {
            let Some(name) = command.get("name").and_then(Value::as_str) else {
                return (failure("trigger needs \"name\""), None);
            };
            let ran = agent.fire_control(name).await;
            if ran == 0 {
                return (
                    failure(format!(
                        "no rule with control = {name:?} (or it fired once already)"
                    )),
                    None,
                );
            }
            (json!({"ok": true, "rules": ran}), None)
        }
        "release" => {
            let Some(gate) = command.get("gate").and_then(Value::as_str) else {
                return (failure("release needs \"gate\""), None);
            };
            agent.gates.release(gate);
            (json!({"ok": true}), None)
        }
        "wait" if command.get("stdin").and_then(Value::as_str) == Some("closed") => {
            let wait = agent.stdin_closed();
            let reached = match command.get("timeout_ms").and_then(Value::as_u64) {
                Some(ms) => tokio::time::timeout(Duration::from_millis(ms), wait)
                    .await
                    .is_ok(),
                None => {
                    wait.await;
                    true
                }
            };
            if reached {
                (json!({"ok": true}), None)
            } else {
                (failure("timed out waiting for stdin to close"), None)
            }
        }
        "wait" => {
            let Some(method) = command.get("method").and_then(Value::as_str) else {
                return (
                    failure("wait needs \"method\" or \"stdin\": \"closed\""),
                    None,
                );
            };
            let count = command.get("count").and_then(Value::as_u64).unwrap_or(1);
            let wait = agent.wait_count(method, count);
            let reached = match command.get("timeout_ms").and_then(Value::as_u64) {
                Some(ms) => tokio::time::timeout(Duration::from_millis(ms), wait)
                    .await
                    .ok(),
                None => Some(wait.await),
            };
            match reached {
                Some(count) => (json!({"ok": true, "count": count}), None),
                None => (failure(format!("timed out waiting for {method}")), None),
            }
        }
        "exit" => {
            let code = command
                .get("code")
                .and_then(Value::as_i64)
                .and_then(|c| i32::try_from(c).ok())
                .unwrap_or(0);
            (json!({"ok": true}), Some(code))
        }
        other => (
            failure(format!(
                "unknown command {other:?}; known: state, send, run, trigger, release, wait, exit"
            )),
            None,
        ),
    }
}
