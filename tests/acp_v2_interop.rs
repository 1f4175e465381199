//! ACP v2 (draft) interop with the official Rust SDK (`agent-client-protocol` 5.0.0, feature
//! `unstable_protocol_v2`), both ways: an agent written here with the SDK's v2 builder against
//! `ski acp client connect --protocol 2` (the real binary), and the SDK's v2 client against
//! `ski acp serve --protocol 2` (the real binary) and against the mock agent's interpreter
//! (`ski_mocks::agent`, the program `ski-mock-agent` runs). Each conversation: `initialize`
//! answered 2 with the `session` capability, `session/new`, a prompt acknowledged with its
//! `messageId`, the user message echoed, a tool call that advertises `cancel` cancelled with
//! `tool_call/cancel` and ending `cancelled`, the reply's chunks with a message id, and idle with
//! `end_turn` at the end. The same with the official TypeScript SDK's `experimental/v2` (the
//! peer `conformance/targets/peers/ts-sdk-v2`, installed by the test from npm): its client
//! against `ski acp serve --protocol 2`, its agent against ski's client (its client against the
//! mock agent is in `mocks/tests/agent_v2.rs`).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_client_protocol::schema::{MaybeUndefined, ProtocolVersion};
use agent_client_protocol::v2::{ConnectionTo, Responder, schema};
use agent_client_protocol::{Agent, Client, ConnectTo, Lines};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::net::TcpListener;
use tokio::sync::{Notify, mpsc};

const SKI: &str = env!("CARGO_BIN_EXE_ski");

/// How long any wait may take before the test fails.
const PATIENCE: Duration = Duration::from_secs(60);

/// What the SDK agent answers every prompt with.
const SDK_ANSWER: &str = "sdk v2 agent says hello";

async fn within<T>(what: &str, fut: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(PATIENCE, fut)
        .await
        .unwrap_or_else(|_| panic!("timed out waiting for {what}"))
}

/// The SDK's line transport over a pair of byte streams (a child's pipes, a socket's halves).
fn lines<R, W>(
    read: R,
    write: W,
) -> Lines<
    impl futures::Sink<String, Error = std::io::Error> + Send + 'static,
    impl futures::Stream<Item = std::io::Result<String>> + Send + 'static,
>
where
    R: AsyncRead + Send + Unpin + 'static,
    W: AsyncWrite + Send + Unpin + 'static,
{
    let outgoing = Box::pin(futures::sink::unfold(
        write,
        |mut write, line: String| async move {
            write.write_all(line.as_bytes()).await?;
            write.write_all(b"\n").await?;
            write.flush().await?;
            Ok::<_, std::io::Error>(write)
        },
    ));
    let incoming = Box::pin(futures::stream::unfold(
        BufReader::new(read).lines(),
        |mut lines| async move {
            match lines.next_line().await {
                Ok(Some(line)) => Some((Ok(line), lines)),
                Ok(None) => None,
                Err(error) => Some((Err(error), lines)),
            }
        },
    ));
    Lines::new(outgoing, incoming)
}

// ---- the SDK's v2 client against ski's agents ---------------------------------------------

/// What the SDK's client saw of one conversation.
#[derive(Debug)]
struct Seen {
    /// `initialize`'s result.
    initialize: Value,
    /// The session `session/new` created.
    session: String,
    /// The prompt's result (`{messageId}`).
    ack: Value,
    /// The session's updates up to the idle `state_update` that ended the turn.
    updates: Vec<Value>,
    /// The tool calls the client cancelled.
    cancelled: Vec<String>,
}

/// The SDK's v2 client over `transport`: initialize at 2, `session/new`, one prompt followed to
/// its idle state, every tool call that advertises `cancel` cancelled with `tool_call/cancel`.
async fn sdk_client(transport: impl ConnectTo<Client> + 'static, cwd: &str) -> Seen {
    let (sender, mut receiver) = mpsc::unbounded_channel::<schema::UpdateSessionNotification>();
    let cwd = cwd.to_owned();
    let seen: Arc<Mutex<Option<Seen>>> = Arc::default();
    let out = Arc::clone(&seen);
    Client
        .v2()
        .name("ski-v2-interop-client")
        .on_receive_notification(
            async move |notification: schema::UpdateSessionNotification,
                        _cx: ConnectionTo<Agent>| {
                let _ = sender.send(notification);
                Ok(())
            },
            agent_client_protocol::on_receive_notification!(),
        )
        .connect_with(transport, async move |cx| {
            let initialize = cx
                .send_request(schema::InitializeRequest::new(
                    ProtocolVersion::V2,
                    schema::Implementation::new("ski-v2-interop-client", "1.0.0"),
                ))
                .block_task()
                .await?;
            let new = cx
                .send_request(schema::NewSessionRequest::new(cwd.as_str()))
                .block_task()
                .await?;
            let session = new.session_id.clone();
            let ack = cx
                .send_request(schema::PromptRequest::new(
                    session.clone(),
                    vec![schema::ContentBlock::from("hello sdk")],
                ))
                .block_task()
                .await?;
            let mut updates = Vec::new();
            let mut cancelled = Vec::new();
            while let Some(notification) = receiver.recv().await {
                if notification.session_id != session {
                    continue;
                }
                let update = notification.update;
                updates.push(serde_json::to_value(&update).unwrap_or(Value::Null));
                match update {
                    schema::SessionUpdate::ToolCallUpdate(call)
                        if matches!(&call.capabilities, MaybeUndefined::Value(c) if c.cancel.is_some())
                            && !matches!(
                                &call.status,
                                MaybeUndefined::Value(
                                    schema::ToolCallStatus::Completed
                                        | schema::ToolCallStatus::Failed
                                        | schema::ToolCallStatus::Cancelled
                                )
                            ) =>
                    {
                        cx.send_request(schema::CancelToolCallRequest::new(
                            session.clone(),
                            call.tool_call_id.clone(),
                        ))
                        .block_task()
                        .await?;
                        cancelled.push(call.tool_call_id.to_string());
                    }
                    schema::SessionUpdate::StateUpdate(schema::StateUpdate::Idle(_)) => break,
                    _ => {}
                }
            }
            *out.lock().unwrap() = Some(Seen {
                initialize: serde_json::to_value(&initialize).unwrap_or(Value::Null),
                session: session.to_string(),
                ack: serde_json::to_value(&ack).unwrap_or(Value::Null),
                updates,
                cancelled,
            });
            Ok(())
        })
        .await
        .expect("the SDK client's conversation");
    seen.lock().unwrap().take().expect("the conversation ran")
}

/// The updates of kind `kind`.
fn of_kind<'a>(updates: &'a [Value], kind: &str) -> Vec<&'a Value> {
    updates
        .iter()
        .filter(|u| u["sessionUpdate"] == kind)
        .collect()
}

/// The observable outcome every v2 conversation here must have, whoever the agent is.
fn assert_v2_conversation(seen: &Seen, prompt: &str, reply: &str) {
    assert_eq!(seen.initialize["protocolVersion"], 2, "{seen:?}");
    assert!(
        seen.initialize["capabilities"]["session"].is_object(),
        "the session baseline: {seen:?}"
    );
    assert!(!seen.session.is_empty());
    let ack = seen.ack["messageId"].as_str().expect("a messageId");
    let users = of_kind(&seen.updates, "user_message");
    assert_eq!(users.len(), 1, "{seen:?}");
    assert_eq!(users[0]["messageId"], ack);
    assert_eq!(
        users[0]["content"],
        json!([{"type": "text", "text": prompt}])
    );
    // The held tool call: advertised cancel, cancelled by the client, ended `cancelled`.
    assert_eq!(seen.cancelled.len(), 1, "{seen:?}");
    let calls = of_kind(&seen.updates, "tool_call_update");
    assert!(
        calls
            .iter()
            .any(|c| c["toolCallId"] == seen.cancelled[0].as_str() && c["status"] == "cancelled"),
        "{calls:?}"
    );
    // The reply's chunks: one message id, not the user's.
    let chunks = of_kind(&seen.updates, "agent_message_chunk");
    assert!(!chunks.is_empty(), "{seen:?}");
    let text: String = chunks
        .iter()
        .map(|c| c["content"]["text"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(text, reply);
    let message = &chunks[0]["messageId"];
    assert!(message.is_string() && message != ack, "{chunks:?}");
    assert!(
        chunks.iter().all(|c| &c["messageId"] == message),
        "{chunks:?}"
    );
    // running first, idle with end_turn last.
    let states = of_kind(&seen.updates, "state_update");
    assert_eq!(states.first().map(|s| &s["state"]), Some(&json!("running")));
    assert_eq!(
        seen.updates.last(),
        Some(&json!({"sessionUpdate": "state_update", "state": "idle", "stopReason": "end_turn"}))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sdk_v2_client_cancels_a_tool_call_of_ski_acp_serve() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let mut agent = tokio::process::Command::new(SKI)
        .args(["acp", "serve", "--protocol", "2", "--hold-tool-call"])
        .args(["--permission-mode", "disabled", "--log-level", "error"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("ski acp serve starts");
    let stdin = agent.stdin.take().expect("stdin");
    let stdout = agent.stdout.take().expect("stdout");
    let cwd = dir.path().display().to_string();
    let seen = within(
        "the SDK client against ski acp serve",
        sdk_client(lines(stdout, stdin), &cwd),
    )
    .await;
    assert_v2_conversation(&seen, "hello sdk", "hello sdk");
    agent.kill().await.expect("end ski acp serve");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sdk_v2_client_cancels_a_tool_call_of_the_mock_agent() {
    use ski_mocks::agent::{Config, Launch, Overrides, Script, run};
    let script = Script::parse(
        r#"
[[on]]
prompt = "*"
do = [{ hold_tool_call = "Wait until cancelled" }, { turn = "mock says ${prompt}" }]
"#,
        "inline",
    )
    .expect("a valid script");
    let config = Config::resolve(script, &Overrides::default());
    let (client_out, agent_in) = tokio::io::duplex(1 << 16);
    let (agent_out, client_in) = tokio::io::duplex(1 << 16);
    let agent = tokio::spawn(run(
        Launch::new(config),
        agent_in,
        agent_out,
        tokio::io::sink(),
    ));
    let dir = tempfile::tempdir().expect("a temporary directory");
    let cwd = dir.path().display().to_string();
    let seen = within(
        "the SDK client against the mock agent",
        sdk_client(lines(client_in, client_out), &cwd),
    )
    .await;
    assert_v2_conversation(&seen, "hello sdk", "mock says hello sdk");
    agent.abort();
}

// ---- ski's client against the SDK's v2 agent ----------------------------------------------

/// An agent written with the SDK's v2 builder: `initialize` at 2 with the session baseline,
/// `session/new`, and each prompt acknowledged, then the user message, `running`, a tool call
/// that advertises `cancel` and runs until `tool_call/cancel`, `cancelled`, one chunk of
/// [`SDK_ANSWER`] and idle with `end_turn`.
fn sdk_agent() -> impl ConnectTo<Client> {
    let cancelled = Arc::new(Notify::new());
    let on_cancel = Arc::clone(&cancelled);
    Agent
        .v2()
        .name("ski-v2-interop-agent")
        .on_receive_request(
            async |request: schema::InitializeRequest,
                   responder: Responder<schema::InitializeResponse>,
                   _cx: ConnectionTo<Client>| {
                responder.respond(
                    schema::InitializeResponse::new(
                        request.protocol_version,
                        schema::Implementation::new("ski-v2-interop-agent", "1.0.0"),
                    )
                    .capabilities(
                        schema::AgentCapabilities::new()
                            .session(schema::SessionCapabilities::new()),
                    ),
                )
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async |_request: schema::NewSessionRequest,
                   responder: Responder<schema::NewSessionResponse>,
                   _cx: ConnectionTo<Client>| {
                responder.respond(schema::NewSessionResponse::new("sdk-session-1"))
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: schema::CancelToolCallRequest,
                        responder: Responder<schema::CancelToolCallResponse>,
                        _cx: ConnectionTo<Client>| {
                if request.tool_call_id.to_string() != "sdk-call-1" {
                    return responder
                        .respond_with_error(agent_client_protocol::Error::invalid_params());
                }
                on_cancel.notify_one();
                responder.respond(schema::CancelToolCallResponse::new())
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: schema::PromptRequest,
                        responder: Responder<schema::PromptResponse>,
                        cx: ConnectionTo<Client>| {
                responder.respond(schema::PromptResponse::new("sdk-user-1"))?;
                let session = request.session_id.clone();
                let cancelled = Arc::clone(&cancelled);
                let turn = cx.clone();
                cx.spawn(async move {
                    let send = |update: schema::SessionUpdate| {
                        turn.send_notification(schema::UpdateSessionNotification::new(
                            session.clone(),
                            update,
                        ))
                    };
                    send(schema::SessionUpdate::UserMessage(
                        schema::UserMessage::new("sdk-user-1").content(request.prompt.clone()),
                    ))?;
                    send(schema::SessionUpdate::StateUpdate(
                        schema::StateUpdate::Running(schema::RunningStateUpdate::new()),
                    ))?;
                    send(schema::SessionUpdate::ToolCallUpdate(
                        schema::ToolCallUpdate::new("sdk-call-1")
                            .title("Wait until cancelled")
                            .status(schema::ToolCallStatus::InProgress)
                            .capabilities(
                                schema::ToolCallCapabilities::new()
                                    .cancel(schema::ToolCallCancelCapabilities::new()),
                            ),
                    ))?;
                    cancelled.notified().await;
                    send(schema::SessionUpdate::ToolCallUpdate(
                        schema::ToolCallUpdate::new("sdk-call-1")
                            .status(schema::ToolCallStatus::Cancelled),
                    ))?;
                    send(schema::SessionUpdate::AgentMessageChunk(
                        schema::ContentChunk::new(SDK_ANSWER.into(), "sdk-agent-1"),
                    ))?;
                    send(schema::SessionUpdate::StateUpdate(
                        schema::StateUpdate::Idle(
                            schema::IdleStateUpdate::new().stop_reason(schema::StopReason::EndTurn),
                        ),
                    ))
                })
            },
            agent_client_protocol::on_receive_request!(),
        )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ski_client_at_2_cancels_a_tool_call_of_the_sdk_v2_agent() {
    // The SDK agent on a loopback socket; the client's agent command joins its stdio to it.
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let port = listener.local_addr().expect("address").port();
    let server = tokio::spawn(async move {
        let (stream, _) = listener.accept().await.expect("the bridge connects");
        let (read, write) = stream.into_split();
        let _ = sdk_agent().connect_to(lines(read, write)).await;
    });
    let bridge = format!("bash -c 'exec 3<>/dev/tcp/127.0.0.1/{port}; cat <&3 & exec cat >&3'");
    let run = tokio::task::spawn_blocking(move || {
        std::process::Command::new(SKI)
            .args(["acp", "client", "connect", "--protocol", "2", "--json"])
            .args(["--cancel-tool-calls", "--prompt", "hello sdk"])
            .args(["--log-level", "error", "--agent-cmd", &bridge])
            .env_remove("RUST_LOG")
            .output()
            .expect("run ski acp client connect")
    });
    let output = within("ski's client", run).await.expect("client task");
    server.abort();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let lines: Vec<Value> = stdout
        .lines()
        .map(|line| serde_json::from_str(line).expect("a JSON line"))
        .collect();
    assert_ski_client_conversation(&lines, "sdk-session-1", "hello sdk", SDK_ANSWER);
}

// ---- the TypeScript SDK's v2 (experimental/v2), both ways -----------------------------------

/// Installs the TypeScript SDK's v2 peer into `<target>/peers/ts-sdk-v2` (one install at a
/// time: tests side by side share the folder); `None`, with a plain note, when node or npm is
/// missing or the registry cannot be reached.
async fn ts_peer() -> Option<std::path::PathBuf> {
    let on_path = |program: &str| {
        std::env::var_os("PATH")
            .is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join(program).is_file()))
    };
    if !on_path("node") || !on_path("npm") {
        println!("ts-sdk-v2: NOT RUN (node or npm is not on PATH)");
        return None;
    }
    let root = std::path::Path::new(SKI)
        .parent()
        .and_then(std::path::Path::parent)
        .expect("the target directory")
        .join("peers");
    std::fs::create_dir_all(&root).expect("the peers' folder");
    let lock = root.join("ts-sdk-v2.lock");
    let dest = root.join("ts-sdk-v2");
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("conformance/targets/peers/ts-sdk-v2/install.sh");
    let output = tokio::task::spawn_blocking(move || {
        let _installing =
            ski::storage::file_lock::FileLock::exclusive(&lock).expect("the install lock");
        std::process::Command::new("sh")
            .arg(script)
            .arg(&dest)
            .output()
            .expect("run install.sh")
    })
    .await
    .expect("the install task");
    if output.status.success() {
        Some(root.join("ts-sdk-v2"))
    } else {
        println!(
            "ts-sdk-v2: NOT RUN (install.sh failed, registry unreachable?):\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
        None
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_typescript_sdk_v2_client_cancels_a_tool_call_of_ski_acp_serve() {
    let Some(peer) = ts_peer().await else {
        return;
    };
    let dir = tempfile::tempdir().expect("a temporary directory");
    let client = peer.join("v2-client.mjs");
    let cwd = dir.path().to_owned();
    let run = tokio::task::spawn_blocking(move || {
        std::process::Command::new("node")
            .arg(client)
            .args([
                "--prompt",
                "hello ts",
                "--",
                SKI,
                "acp",
                "serve",
                "--protocol",
                "2",
            ])
            .args(["--hold-tool-call", "--permission-mode", "disabled"])
            .args(["--log-level", "error"])
            .current_dir(cwd)
            .env_remove("RUST_LOG")
            .output()
            .expect("run the TypeScript client")
    });
    let output = within("the TypeScript client", run)
        .await
        .expect("client task");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let lines: Vec<Value> = stdout
        .lines()
        .map(|line| serde_json::from_str(line).expect("a JSON line"))
        .collect();
    assert_eq!(
        lines[0],
        json!({"type": "initialize", "protocolVersion": 2, "session": true})
    );
    let ack = lines
        .iter()
        .find(|l| l["type"] == "prompt_ack")
        .expect("the prompt's acknowledgement");
    let updates: Vec<Value> = lines
        .iter()
        .filter(|l| l["type"] == "session_update")
        .map(|l| l["payload"].clone())
        .collect();
    let cancelled: Vec<String> = lines
        .iter()
        .filter(|l| l["type"] == "tool_call_cancel")
        .filter_map(|l| l["toolCallId"].as_str().map(str::to_owned))
        .collect();
    let seen = Seen {
        initialize: json!({"protocolVersion": 2, "capabilities": {"session": {}}}),
        session: lines[1]["sessionId"]
            .as_str()
            .unwrap_or_default()
            .to_owned(),
        ack: json!({"messageId": ack["messageId"]}),
        updates,
        cancelled,
    };
    assert_v2_conversation(&seen, "hello ts", "hello ts");
    assert_eq!(
        lines.last().unwrap(),
        &json!({"type": "idle", "stopReason": "end_turn"})
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ski_client_at_2_cancels_a_tool_call_of_the_typescript_sdk_v2_agent() {
    let Some(peer) = ts_peer().await else {
        return;
    };
    let agent_cmd = format!("node {}", peer.join("v2-agent.mjs").display());
    let run = tokio::task::spawn_blocking(move || {
        std::process::Command::new(SKI)
            .args(["acp", "client", "connect", "--protocol", "2", "--json"])
            .args(["--cancel-tool-calls", "--prompt", "hello ts"])
            .args(["--log-level", "error", "--agent-cmd", &agent_cmd])
            .env_remove("RUST_LOG")
            .output()
            .expect("run ski acp client connect")
    });
    let output = within("ski's client", run).await.expect("client task");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let lines: Vec<Value> = stdout
        .lines()
        .map(|line| serde_json::from_str(line).expect("a JSON line"))
        .collect();
    assert_ski_client_conversation(&lines, "ts-session-1", "hello ts", "ts v2 agent says hello");
}

/// The observable outcome of `ski acp client connect --protocol 2 --json --cancel-tool-calls`
/// against an SDK agent that holds one tool call: the acknowledgement, the user message, the
/// tool call cancelled and ending `cancelled`, one chunk of `reply` with a message id of its
/// own, and the turn's end at idle with `end_turn`.
fn assert_ski_client_conversation(lines: &[Value], session: &str, prompt: &str, reply: &str) {
    let payloads = |kind: &str| -> Vec<Value> {
        lines
            .iter()
            .filter(|l| l["type"] == "session_update" && l["update"] == kind)
            .map(|l| l["payload"].clone())
            .collect()
    };
    assert_eq!(lines[0]["type"], "prompt_ack", "{lines:?}");
    assert_eq!(lines[0]["sessionId"], session);
    let ack = &lines[0]["messageId"];
    let users = payloads("user_message");
    assert_eq!(users.len(), 1, "{lines:?}");
    assert_eq!(&users[0]["messageId"], ack);
    assert_eq!(users[0]["content"][0]["text"], prompt);
    let cancel = lines
        .iter()
        .find(|l| l["type"] == "tool_call_cancel")
        .unwrap_or_else(|| panic!("a tool_call/cancel: {lines:?}"));
    assert!(
        payloads("tool_call_update")
            .iter()
            .any(|c| c["toolCallId"] == cancel["toolCallId"] && c["status"] == "cancelled"),
        "{lines:?}"
    );
    let chunks = payloads("agent_message_chunk");
    assert_eq!(chunks.len(), 1, "{lines:?}");
    assert!(chunks[0]["messageId"].is_string() && &chunks[0]["messageId"] != ack);
    assert_eq!(chunks[0]["content"]["text"], reply);
    assert_eq!(
        payloads("state_update").last(),
        Some(&json!({"sessionUpdate": "state_update", "state": "idle", "stopReason": "end_turn"}))
    );
    assert_eq!(
        lines.last().unwrap(),
        &json!({"type": "prompt_result", "sessionId": session, "stopReason": "end_turn"})
    );
}
