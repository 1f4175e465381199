//! The agent behind the WebSocket server, over real loopback sockets: the upgrade and its
//! `Acp-Connection-Id`, text and binary frames, several clients with the same request ids,
//! owner routing, cancellation, a lost connection during a permission request, sending with
//! no client connected, and stdio/ws consistency.

use crate::acp_agent_support;

use std::time::{Duration, Instant};

use acp_agent_support::{
    PermissionAnswer, TestClient, duplex_client, reply_text, within, ws_client,
};
use futures::{SinkExt, StreamExt};
use serde_json::{Value, json};
use ski::acp::agent::{
    Agent, AgentConfig, ConnectionOptions, EchoConfig, PermissionConfig, PermissionMode, PolicyMode,
};
use ski::jsonrpc::CallError;
use ski::transport::ws_server::{CONNECTION_ID_HEADER, WsServer, WsServerOptions};
use tokio_tungstenite::tungstenite::Message as Frame;
use tokio_util::sync::CancellationToken;

fn config() -> AgentConfig {
    AgentConfig {
        permission: PermissionConfig {
            mode: PermissionMode::Disabled,
            ..PermissionConfig::default()
        },
        execution_state: true,
        ..AgentConfig::default()
    }
}

/// A served agent on a free loopback port; the server stops when this is dropped.
struct Served {
    agent: Agent,
    url: String,
    shutdown: CancellationToken,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Served {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

async fn serve(config: AgentConfig) -> Served {
    let server = WsServer::bind("127.0.0.1:0", WsServerOptions::default())
        .await
        .expect("bind a free port");
    let url = server.url();
    assert!(
        url.starts_with("ws://127.0.0.1:") && url.ends_with("/acp"),
        "{url}"
    );
    let agent = Agent::new(config);
    let shutdown = CancellationToken::new();
    let task = tokio::spawn({
        let agent = agent.clone();
        let shutdown = shutdown.clone();
        async move {
            agent
                .serve_websocket(server, &ConnectionOptions::default(), &shutdown)
                .await;
        }
    });
    Served {
        agent,
        url,
        shutdown,
        task,
    }
}

async fn connected(url: &str) -> TestClient {
    let (client, _) = ws_client(url).await;
    client.initialize().await;
    client
}

#[tokio::test]
async fn the_upgrade_carries_a_connection_id_on_acp_and_on_the_root_path() {
    let served = serve(config()).await;
    let (first, headers) = ws_client(&served.url).await;
    let first_id = headers
        .get(CONNECTION_ID_HEADER)
        .expect("Acp-Connection-Id header")
        .to_str()
        .unwrap()
        .to_owned();
    assert!(!first_id.is_empty());
    let root = served.url.trim_end_matches("/acp").to_owned() + "/";
    let (second, headers) = ws_client(&root).await;
    let second_id = headers.get(CONNECTION_ID_HEADER).unwrap().to_str().unwrap();
    assert_ne!(first_id, second_id);
    for client in [&first, &second] {
        assert_eq!(client.initialize().await["protocolVersion"], 1);
    }
}

#[tokio::test]
async fn binary_frames_are_ignored_and_every_frame_holds_one_message() {
    let served = serve(config()).await;
    let (mut socket, _) = Box::pin(tokio_tungstenite::connect_async(&served.url))
        .await
        .unwrap();
    socket
        .send(Frame::Binary(
            br#"{"jsonrpc":"2.0","id":9,"method":"initialize"}"#.to_vec().into(),
        ))
        .await
        .unwrap();
    socket
        .send(Frame::text(
            r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}"#,
        ))
        .await
        .unwrap();
    socket
        .send(Frame::text(
            r#"{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"/","mcpServers":[]}}"#,
        ))
        .await
        .unwrap();
    let mut answered = Vec::new();
    while answered.len() < 2 {
        let frame = within("a frame", socket.next()).await.unwrap().unwrap();
        let Frame::Text(text) = frame else {
            panic!("expected a text frame, got {frame:?}");
        };
        let value: Value = serde_json::from_str(text.as_str()).expect("one JSON message");
        assert!(value.is_object());
        answered.push(value["id"].clone());
    }
    answered.sort_by_key(|id| id.as_i64());
    assert_eq!(
        answered,
        [json!(1), json!(2)],
        "the binary frame got no answer"
    );
    socket.close(None).await.unwrap();
}

#[tokio::test]
async fn two_clients_with_the_same_ids_get_their_own_answers_and_updates() {
    let served = serve(config()).await;
    let a = connected(&served.url).await;
    let b = connected(&served.url).await;
    let (sa, sb) = tokio::join!(a.new_session(), b.new_session());
    let (ra, rb) = tokio::join!(a.prompt(&sa, "from a"), b.prompt(&sb, "from b"));
    assert_eq!(ra.unwrap()["stopReason"], "end_turn");
    assert_eq!(rb.unwrap()["stopReason"], "end_turn");
    assert_eq!(reply_text(&a.updates(&sa)).as_deref(), Some("from a"));
    assert_eq!(reply_text(&b.updates(&sb)).as_deref(), Some("from b"));
    assert!(
        a.all_updates()
            .iter()
            .all(|u| u["sessionId"] == sa.as_str())
    );
    assert!(
        b.all_updates()
            .iter()
            .all(|u| u["sessionId"] == sb.as_str())
    );
    // Both peers number their requests alike, so every id above was in use on both
    // connections at once; sessions are shared all the same.
    let list = a.call("session/list", json!({})).await.unwrap();
    assert_eq!(list["sessions"].as_array().unwrap().len(), 2);
}

#[tokio::test]
async fn raw_clients_sending_the_same_id_at_once_each_get_their_answer() {
    let served = serve(config()).await;
    let mut sockets = Vec::new();
    for _ in 0..2 {
        let (socket, _) = Box::pin(tokio_tungstenite::connect_async(&served.url))
            .await
            .unwrap();
        sockets.push(socket);
    }
    for (i, socket) in sockets.iter_mut().enumerate() {
        // A version that is no integer is refused whether or not the agent negotiates.
        let version = if i == 0 { "1" } else { "\"7\"" };
        socket
            .send(Frame::text(format!(
                r#"{{"jsonrpc":"2.0","id":"same","method":"initialize","params":{{"protocolVersion":{version}}}}}"#
            )))
            .await
            .unwrap();
    }
    let mut answers = Vec::new();
    for socket in &mut sockets {
        let frame = within("an answer", socket.next()).await.unwrap().unwrap();
        let value: Value = serde_json::from_str(frame.to_text().unwrap()).unwrap();
        assert_eq!(value["id"], "same");
        answers.push(value);
    }
    assert_eq!(answers[0]["result"]["protocolVersion"], 1, "{}", answers[0]);
    assert_eq!(answers[1]["error"]["code"], -32602, "{}", answers[1]);
}

#[tokio::test]
async fn updates_go_to_the_connection_that_last_named_the_session() {
    let served = serve(config()).await;
    let a = connected(&served.url).await;
    let b = connected(&served.url).await;
    let session = a.new_session().await;
    a.prompt(&session, "one").await.unwrap();
    let seen_by_a = a.updates(&session).len();
    assert!(seen_by_a > 0);
    assert!(b.all_updates().is_empty());
    b.call("session/resume", json!({"sessionId": session, "cwd": "/"}))
        .await
        .unwrap();
    b.prompt(&session, "two").await.unwrap();
    assert_eq!(reply_text(&b.updates(&session)).as_deref(), Some("two"));
    assert_eq!(
        a.updates(&session).len(),
        seen_by_a,
        "a no longer receives them"
    );
    // A prompt from a makes it the owner again.
    a.prompt(&session, "three").await.unwrap();
    assert_eq!(
        b.updates(&session)
            .iter()
            .filter(|u| u["content"]["text"] == "three")
            .count(),
        0
    );
    assert!(
        a.updates(&session)
            .iter()
            .any(|u| u["content"]["text"] == "three")
    );
}

#[tokio::test]
async fn cancel_request_session_cancel_and_session_stop_end_prompts_over_websocket() {
    let served = serve(AgentConfig {
        echo: EchoConfig {
            hold: true,
            ..EchoConfig::default()
        },
        ..config()
    })
    .await;
    let client = connected(&served.url).await;
    let session = client.new_session().await;

    let (id, prompt) = client.start_prompt(&session, "hold").await;
    client.wait_for_state(&session, "running").await;
    client.peer.cancel_request(&id).await.unwrap();
    match within("the cancelled prompt", prompt).await.unwrap() {
        Err(CallError::Rpc(error)) => assert_eq!(error.code.0, -32800),
        other => panic!("expected -32800, got {other:?}"),
    }

    for (round, how) in [(2, "session/cancel"), (3, "session/stop")] {
        let (_, prompt) = client.start_prompt(&session, "hold").await;
        client
            .wait_for("the next running state", |c| {
                c.states(&session)
                    .iter()
                    .filter(|s| *s == "running")
                    .count()
                    == round
            })
            .await;
        client
            .peer
            .notify(how, Some(json!({"sessionId": session})))
            .await
            .unwrap();
        let result = within(how, prompt).await.unwrap().unwrap();
        assert_eq!(result["stopReason"], "cancelled", "{how}");
    }
}

#[tokio::test]
async fn a_lost_connection_fails_its_pending_permission_request_at_once() {
    let served = serve(AgentConfig {
        permission: PermissionConfig {
            mode: PermissionMode::Required,
            timeout: Duration::from_secs(60),
            policy: PolicyMode::Ask,
        },
        ..config()
    })
    .await;
    let a = connected(&served.url).await;
    a.default_permission(PermissionAnswer::Never);
    let session = a.new_session().await;
    let (_, _abandoned) = a.start_prompt(&session, "waiting for permission").await;
    a.wait_for("the permission request", |c| {
        !c.requests("session/request_permission").is_empty()
    })
    .await;
    let closed_at = Instant::now();
    a.peer.close().await;
    within("the abandoned turn to end", served.agent.turns_finished()).await;
    assert_eq!(served.agent.running_turns(), 0);

    let b = connected(&served.url).await;
    let result = b.prompt(&session, "from b").await.unwrap();
    assert_eq!(result["stopReason"], "end_turn");
    assert_eq!(
        b.requests("session/request_permission").len(),
        1,
        "b was asked"
    );
    assert!(
        closed_at.elapsed() < Duration::from_secs(30),
        "well under the 60 s permission timeout: {:?}",
        closed_at.elapsed()
    );
}

#[tokio::test]
async fn permissive_mode_proceeds_when_the_connection_is_lost_during_the_request() {
    let served = serve(AgentConfig {
        permission: PermissionConfig {
            mode: PermissionMode::Permissive,
            timeout: Duration::from_secs(60),
            policy: PolicyMode::Ask,
        },
        ..config()
    })
    .await;
    let a = connected(&served.url).await;
    a.default_permission(PermissionAnswer::Never);
    let session = a.new_session().await;
    let (_, _abandoned) = a.start_prompt(&session, "x").await;
    a.wait_for("the permission request", |c| {
        !c.requests("session/request_permission").is_empty()
    })
    .await;
    a.peer.close().await;
    within("the turn to run on and end", served.agent.turns_finished()).await;
    // The turn ran to its end with nobody to send to; the reply is in the history.
    let b = connected(&served.url).await;
    let export = b
        .call("session/export", json!({"sessionId": session}))
        .await
        .unwrap();
    assert!(
        export["content"]
            .as_str()
            .unwrap()
            .contains(r#""role":"assistant""#)
    );
}

#[tokio::test]
async fn sending_with_no_client_connected_is_an_error_not_a_crash() {
    let served = serve(AgentConfig {
        echo: EchoConfig {
            delay: Duration::from_millis(200),
            ..EchoConfig::default()
        },
        ..config()
    })
    .await;
    let a = connected(&served.url).await;
    let session = a.new_session().await;
    let (_, _abandoned) = a.start_prompt(&session, "nobody will read this").await;
    a.wait_for_state(&session, "running").await;
    a.peer.close().await;
    within("the turn to end", served.agent.turns_finished()).await;
    // Its updates and answer had nowhere to go; the agent is still serving.
    let b = connected(&served.url).await;
    let fresh = b.new_session().await;
    let result = b.prompt(&fresh, "still alive").await.unwrap();
    assert_eq!(result["stopReason"], "end_turn");
    assert!(!served.task.is_finished());
}

#[tokio::test]
async fn stdio_and_websocket_produce_the_same_turn() {
    let served = serve(config()).await;
    let ws = connected(&served.url).await;
    let (pipe, _connection) = duplex_client(&served.agent);
    pipe.initialize().await;
    let mut sequences = Vec::new();
    for client in [&ws, &pipe] {
        let session = client.new_session().await;
        let result = client.prompt(&session, "same").await.unwrap();
        sequences.push((client.kinds(&session), result));
    }
    assert_eq!(sequences[0], sequences[1]);
}

#[tokio::test]
async fn shutdown_stops_the_server_and_closes_every_connection() {
    let mut served = serve(config()).await;
    let client = connected(&served.url).await;
    served.shutdown.cancel();
    within("the client to see the end", client.peer.input_closed()).await;
    within("the server task", &mut served.task).await.unwrap();
}

#[tokio::test]
async fn connections_closing_mid_prompt_leave_the_agent_consistent() {
    let served = serve(AgentConfig {
        echo: EchoConfig {
            delay: Duration::from_millis(20),
            ..EchoConfig::default()
        },
        ..config()
    })
    .await;
    let mut sessions = Vec::new();
    for round in 0..6 {
        let client = connected(&served.url).await;
        let session = client.new_session().await;
        let (_, _abandoned) = client.start_prompt(&session, "going away").await;
        // Close once the turn is registered, before or after the model started.
        let state = if round % 2 == 1 { "running" } else { "queued" };
        client.wait_for_state(&session, state).await;
        client.peer.close().await;
        sessions.push(session);
    }
    within("every abandoned turn", served.agent.turns_finished()).await;
    assert_eq!(served.agent.running_turns(), 0);
    // Every session is still there and takes a prompt from a new connection.
    let client = connected(&served.url).await;
    for session in &sessions {
        client
            .call("session/resume", json!({"sessionId": session, "cwd": "/"}))
            .await
            .unwrap();
        let result = client.prompt(session, "back").await.unwrap();
        assert_eq!(result["stopReason"], "end_turn");
    }
}

#[tokio::test]
async fn a_600_kb_prompt_is_echoed_byte_for_byte_over_websocket() {
    let served = serve(config()).await;
    let client = connected(&served.url).await;
    let session = client.new_session().await;
    let text: String = "ä€😀x".repeat(600 * 1024 / 10);
    let result = client.prompt(&session, &text).await.unwrap();
    assert_eq!(result["stopReason"], "end_turn");
    assert_eq!(reply_text(&client.updates(&session)).unwrap(), text);
}
