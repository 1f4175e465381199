//! A WebSocket message over the size limit sent to a real `ski acp serve --transport ws`: the
//! client gets the -32600 answer with id null that an oversize stdio line gets, then a close
//! frame with code 1009 (message too big); the server serves the next connection.

use std::time::Duration;

use futures::{SinkExt, StreamExt};
use nix::sys::signal::Signal;
use serde_json::{Value, json};
use ski::jsonrpc::DEFAULT_MAX_LINE_BYTES;
use ski::transport::child::{self, Child, ChildSpec};
use tokio_tungstenite::tungstenite::Message as Frame;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;

const SKI: &str = env!("CARGO_BIN_EXE_ski");

/// How long any wait may take before the test fails.
const PATIENCE: Duration = Duration::from_secs(60);

async fn within<T>(what: &str, fut: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(PATIENCE, fut)
        .await
        .unwrap_or_else(|_| panic!("timed out waiting for {what}"))
}

/// The address the agent prints once it accepts connections.
async fn listening_url(agent: &mut Child) -> String {
    crate::acp_serve_support::listening_url(agent, PATIENCE).await
}

/// Connects and checks that the connection answers `initialize`.
async fn connect_and_initialize(
    url: &str,
) -> tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>> {
    let (mut socket, _) = within("connect", Box::pin(tokio_tungstenite::connect_async(url)))
        .await
        .expect("connect");
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                            "params": {"protocolVersion": 1}});
    socket
        .send(Frame::text(initialize.to_string()))
        .await
        .expect("send initialize");
    let answer = within("the initialize answer", socket.next())
        .await
        .expect("a frame")
        .expect("a readable frame");
    let answer: Value = serde_json::from_str(answer.to_text().expect("a text frame")).unwrap();
    assert_eq!(answer["result"]["protocolVersion"], 1, "{answer}");
    socket
}

#[tokio::test]
async fn an_oversize_websocket_message_is_answered_32600_then_closed_1009() {
    let mut agent = child::spawn(ChildSpec::new("agent", SKI).args([
        "acp",
        "serve",
        "--transport",
        "ws",
        "--listen",
        "127.0.0.1:0",
    ]))
    .expect("spawn ski acp serve");
    let url = listening_url(&mut agent).await;
    let socket = connect_and_initialize(&url).await;

    // One byte over the limit, as a request the agent would otherwise answer.
    let head = r#"{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"pad":""#;
    let tail = r#""}}"#;
    let pad = "x".repeat(DEFAULT_MAX_LINE_BYTES + 1 - head.len() - tail.len());
    let oversize = format!("{head}{pad}{tail}");
    assert_eq!(oversize.len(), DEFAULT_MAX_LINE_BYTES + 1);
    let (mut sink, mut frames) = socket.split();
    // The server stops reading the message at its header, so the send may never finish; the
    // answers are read meanwhile.
    let sending = tokio::spawn(async move {
        let _ = sink.send(Frame::text(oversize)).await;
        sink
    });

    let answer = within("the -32600 answer", frames.next())
        .await
        .expect("a frame before the connection ends")
        .expect("a readable frame");
    let Frame::Text(answer) = answer else {
        panic!("expected the -32600 answer in a text frame, got {answer:?}");
    };
    let answer: Value = serde_json::from_str(answer.as_str()).expect("the answer is JSON");
    assert_eq!(answer["id"], Value::Null, "{answer}");
    assert_eq!(answer["error"]["code"], -32600, "{answer}");
    let reason = answer["error"]["data"]["reason"]
        .as_str()
        .unwrap_or_default();
    assert!(
        reason.contains(&DEFAULT_MAX_LINE_BYTES.to_string()),
        "the reason names the limit: {answer}"
    );
    let close = within("the close frame", frames.next())
        .await
        .expect("a close frame")
        .expect("a readable close frame");
    let Frame::Close(Some(close)) = close else {
        panic!("expected a close frame with a code, got {close:?}");
    };
    assert_eq!(close.code, CloseCode::Size, "{close:?}");
    sending.abort();
    drop(frames);

    // The server goes on serving.
    let mut again = connect_and_initialize(&url).await;
    let _ = again.close(None).await;
    agent
        .signal_group(Signal::SIGTERM)
        .expect("signal the agent");
    let status = within("the agent to stop on SIGTERM", agent.wait())
        .await
        .expect("exit status");
    assert_eq!(status.code(), Some(0));
    assert!(agent.shutdown().await.expect("teardown").group_gone);
}
