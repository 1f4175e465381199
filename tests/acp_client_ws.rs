//! The client over a real WebSocket on loopback: a small agent made of a `Peer` with a few
//! handlers serves every accepted connection (port 0, address read back).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures::SinkExt;
use serde_json::{Value, json};
use ski::acp::client::{Client, ClientConfig};
use ski::acp::{NewSessionRequest, PromptRequest, SessionUpdate, StopReason};
use ski::jsonrpc::{CallError, Peer, RequestContext, RpcError, Transport};
use ski::transport::ws_client::{ReconnectPolicy, WsConnector};
use tokio::net::TcpListener;
use tokio_tungstenite::tungstenite::Message as WsMessage;

/// How the test agent treats its connections.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Behaviour {
    /// Answer everything.
    Serve,
    /// On the first connection, close it on reading the first `session/prompt`.
    DropFirstPrompt,
    /// Complete the handshake, then never read (so pings get no answer).
    Deaf,
}

struct Server {
    url: String,
    connections: Arc<AtomicUsize>,
    initializes: Arc<AtomicUsize>,
}

async fn serve(behaviour: Behaviour) -> Server {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("ws://{}/acp", listener.local_addr().unwrap());
    let connections = Arc::new(AtomicUsize::new(0));
    let initializes = Arc::new(AtomicUsize::new(0));
    let (count, inits) = (connections.clone(), initializes.clone());
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            let mut socket = tokio_tungstenite::accept_async(stream).await.unwrap();
            let index = count.fetch_add(1, Ordering::SeqCst);
            if behaviour == Behaviour::Deaf {
                tokio::spawn(async move {
                    tokio::time::sleep(Duration::from_secs(60)).await;
                    drop(socket);
                });
                continue;
            }
            // A binary frame must be ignored by the client.
            socket
                .send(WsMessage::Binary(vec![1, 2, 3].into()))
                .await
                .unwrap();
            let drop_prompt = behaviour == Behaviour::DropFirstPrompt && index == 0;
            let agent = agent(Transport::websocket(socket), inits.clone(), drop_prompt);
            std::mem::forget(agent);
        }
    });
    Server {
        url,
        connections,
        initializes,
    }
}

fn agent(transport: Transport, initializes: Arc<AtomicUsize>, drop_prompt: bool) -> Peer {
    Peer::builder()
        .on_request("initialize", move |_cx, _params: Option<Value>| {
            initializes.fetch_add(1, Ordering::SeqCst);
            async { Ok(json!({"protocolVersion": 1, "agentCapabilities": {}})) }
        })
        .on_request("session/new", |_cx, _params: Option<Value>| async {
            Ok(json!({"sessionId": "ws-session"}))
        })
        .on_request(
            "session/prompt",
            move |cx: RequestContext, params: Option<Value>| async move {
                if drop_prompt {
                    cx.peer().close().await;
                    return Err(RpcError::internal_error("closed"));
                }
                let params = params.unwrap_or_default();
                let text = params["prompt"][0]["text"].clone();
                let update = json!({"sessionId": params["sessionId"], "update": {
                    "sessionUpdate": "agent_message_chunk",
                    "content": {"type": "text", "text": text}}});
                cx.peer()
                    .notify("session/update", Some(update))
                    .await
                    .map_err(|e| RpcError::internal_error(e.to_string()))?;
                Ok(json!({"stopReason": "end_turn"}))
            },
        )
        .spawn(transport)
}

fn config(attempts: u32) -> ClientConfig {
    ClientConfig {
        reconnect: ReconnectPolicy::new(attempts, Duration::from_millis(20)),
        request_timeout: Some(Duration::from_secs(30)),
        ..ClientConfig::default()
    }
}

async fn turn(client: &Client, text: &str) -> (StopReason, String) {
    let mut updates = client.follow("ws-session");
    let result = client
        .prompt(&PromptRequest::text("ws-session", text))
        .await
        .unwrap();
    let update = updates.next().await.unwrap();
    let SessionUpdate::AgentMessageChunk(chunk) = update.update else {
        panic!("unexpected update {update:?}");
    };
    (
        result.stop_reason,
        chunk.content.as_text().unwrap().to_owned(),
    )
}

#[tokio::test]
async fn a_turn_over_a_loopback_websocket() {
    let server = serve(Behaviour::Serve).await;
    let connector = WsConnector::new(&server.url).unwrap();
    let client = Client::connect(Arc::new(connector), config(0))
        .await
        .unwrap();
    client.initialize().await.unwrap();
    let session = client
        .new_session(&NewSessionRequest::new("/tmp"))
        .await
        .unwrap();
    assert_eq!(session.session_id, "ws-session");
    let big = "é".repeat(300_000);
    assert_eq!(
        turn(&client, "hi").await,
        (StopReason::EndTurn, "hi".to_owned())
    );
    assert_eq!(turn(&client, &big).await, (StopReason::EndTurn, big));
    client.close().await;
    assert_eq!(server.connections.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_connection_closed_mid_prompt_is_replaced_and_the_prompt_retried() {
    let server = serve(Behaviour::DropFirstPrompt).await;
    let connector = WsConnector::new(&server.url).unwrap();
    let client = Client::connect(Arc::new(connector), config(2))
        .await
        .unwrap();
    client.initialize().await.unwrap();
    client
        .new_session(&NewSessionRequest::new("/tmp"))
        .await
        .unwrap();
    assert_eq!(
        turn(&client, "again").await,
        (StopReason::EndTurn, "again".to_owned())
    );
    assert_eq!(server.connections.load(Ordering::SeqCst), 2);
    assert_eq!(
        server.initializes.load(Ordering::SeqCst),
        2,
        "initialize was sent again"
    );
    assert_eq!(client.stats().reconnects, 1);
    client.close().await;
}

#[tokio::test]
async fn the_heartbeat_ends_a_connection_whose_server_went_silent() {
    let server = serve(Behaviour::Deaf).await;
    let connector = WsConnector::new(&server.url)
        .unwrap()
        .heartbeat(Some(Duration::from_millis(50)));
    let client = Client::connect(
        Arc::new(connector),
        ClientConfig {
            request_timeout: None,
            ..config(0)
        },
    )
    .await
    .unwrap();
    let started = tokio::time::Instant::now();
    let error = client.initialize().await.unwrap_err();
    assert!(
        matches!(error.call_error(), Some(CallError::Eof)),
        "{error}"
    );
    assert!(
        started.elapsed() >= Duration::from_millis(100),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn an_answering_server_keeps_the_heartbeat_alive() {
    let server = serve(Behaviour::Serve).await;
    let connector = WsConnector::new(&server.url)
        .unwrap()
        .heartbeat(Some(Duration::from_millis(100)));
    let client = Client::connect(Arc::new(connector), config(0))
        .await
        .unwrap();
    client.initialize().await.unwrap();
    // Idle for many heartbeat intervals: the pongs keep the connection.
    tokio::time::sleep(Duration::from_millis(600)).await;
    client
        .new_session(&NewSessionRequest::new("/tmp"))
        .await
        .unwrap();
    assert_eq!(server.connections.load(Ordering::SeqCst), 1);
    client.close().await;
}

#[tokio::test]
async fn an_unreachable_endpoint_fails_after_the_configured_attempts() {
    // Bind and drop a listener to get a port nobody listens on.
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("ws://{}", listener.local_addr().unwrap());
    drop(listener);
    let connector = WsConnector::new(&url).unwrap();
    let error = Client::connect(Arc::new(connector), config(1))
        .await
        .unwrap_err();
    let text = error.to_string();
    assert!(text.contains("gave up after 2 attempts"), "{text}");
    assert!(text.contains(&url), "{text}");
}
