//! The peer over real transports: a WebSocket on 127.0.0.1 (one message per text frame, binary
//! frames ignored) and an OS socket pair carrying NDJSON.

use std::sync::{Arc, Mutex};

use futures::{SinkExt, StreamExt};
use serde_json::{Value, json};
use ski::jsonrpc::{
    ErrorCode, Message, Peer, PeerBuilder, RequestContext, RequestId, RpcError, Transport,
    VersionField, decode,
};
use tokio::net::TcpListener;
use tokio_tungstenite::tungstenite::Message as WsMessage;

/// Starts a WebSocket server on an ephemeral port that runs one peer per connection, and
/// returns its URL.
async fn serve(
    builder: impl Fn() -> PeerBuilder + Send + 'static,
) -> (String, Arc<Mutex<Vec<Peer>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("ws://{}/acp", listener.local_addr().unwrap());
    let peers = Arc::new(Mutex::new(Vec::new()));
    tokio::spawn({
        let peers = peers.clone();
        async move {
            while let Ok((stream, _)) = listener.accept().await {
                let socket = tokio_tungstenite::accept_async(stream).await.unwrap();
                let peer = builder().spawn(Transport::websocket(socket));
                peers.lock().unwrap().push(peer);
            }
        }
    });
    (url, peers)
}

fn agent() -> PeerBuilder {
    Peer::builder()
        .on_request("echo", |_cx, params: Option<Value>| async move {
            Ok(params.unwrap_or(Value::Null))
        })
        .on_request(
            "session/prompt",
            |cx: RequestContext, params: Option<Value>| async move {
                let session = params.unwrap_or(Value::Null)["sessionId"].clone();
                let peer = cx.peer();
                let notify = |text: &str| {
                    peer.notify(
                        "session/update",
                        Some(json!({"sessionId": session, "update": {
                            "sessionUpdate": "agent_message_chunk",
                            "content": {"type": "text", "text": text}
                        }})),
                    )
                };
                notify("hello")
                    .await
                    .map_err(|e| RpcError::internal_error(e.to_string()))?;
                let permission = peer
                    .request(
                        "session/request_permission",
                        Some(json!({"sessionId": session})),
                    )
                    .await
                    .map_err(|e| RpcError::internal_error(e.to_string()))?;
                notify("world")
                    .await
                    .map_err(|e| RpcError::internal_error(e.to_string()))?;
                Ok(json!({"stopReason": "end_turn", "permission": permission}))
            },
        )
}

#[tokio::test]
async fn two_peers_over_a_real_websocket() {
    let (url, server_peers) = serve(agent).await;
    let (socket, response) = Box::pin(tokio_tungstenite::connect_async(&url))
        .await
        .unwrap();
    assert_eq!(response.status(), 101);
    let updates = Arc::new(Mutex::new(Vec::new()));
    let client = Peer::builder()
        .first_id(1)
        .on_notification("session/update", {
            let updates = updates.clone();
            move |_cx, params: Option<Value>| {
                let updates = updates.clone();
                async move {
                    let text = params.unwrap()["update"]["content"]["text"].clone();
                    updates.lock().unwrap().push(text);
                }
            }
        })
        .on_request(
            "session/request_permission",
            |_cx, _params: Option<Value>| async move {
                Ok(json!({"outcome": {"outcome": "selected", "optionId": "allow"}}))
            },
        )
        .spawn(Transport::websocket(socket));

    let echoed = client
        .request("echo", Some(json!({"big": "x".repeat(600_000)})))
        .await
        .unwrap();
    assert_eq!(echoed["big"].as_str().unwrap().len(), 600_000);
    let result = client
        .request(
            "session/prompt",
            Some(json!({"sessionId": "s1", "prompt": []})),
        )
        .await
        .unwrap();
    assert_eq!(result["stopReason"], "end_turn");
    assert_eq!(result["permission"]["outcome"]["optionId"], "allow");
    // Ordered delivery: both updates were handled before the prompt's result came back.
    assert_eq!(
        *updates.lock().unwrap(),
        vec![json!("hello"), json!("world")]
    );

    client.close().await;
    let server = server_peers.lock().unwrap().pop().expect("one server peer");
    server.input_closed().await;
    assert_eq!(client.stats().pending_requests, 0);
}

#[tokio::test]
async fn text_frames_carry_one_message_and_binary_frames_are_ignored() {
    let (url, _server_peers) = serve(agent).await;
    let (mut socket, _) = Box::pin(tokio_tungstenite::connect_async(&url))
        .await
        .unwrap();
    let next_text = async |socket: &mut tokio_tungstenite::WebSocketStream<_>| loop {
        match socket.next().await.expect("server closed").unwrap() {
            WsMessage::Text(text) => {
                return decode(text.as_bytes(), VersionField::Required).unwrap();
            }
            WsMessage::Ping(_) | WsMessage::Pong(_) => {}
            other => panic!("unexpected frame {other:?}"),
        }
    };
    socket
        .send(WsMessage::binary(
            br#"{"jsonrpc":"2.0","id":0,"method":"echo","params":["binary"]}"#.to_vec(),
        ))
        .await
        .unwrap();
    socket
        .send(WsMessage::text(
            r#"[{"jsonrpc":"2.0","id":1,"method":"echo"}]"#,
        ))
        .await
        .unwrap();
    let Message::Response(batch) = next_text(&mut socket).await else {
        panic!("expected a response");
    };
    assert_eq!(batch.id, RequestId::Null);
    assert_eq!(batch.result.unwrap_err().code, ErrorCode::INVALID_REQUEST);
    socket
        .send(WsMessage::text(
            "{\"jsonrpc\":\"2.0\",\n\"id\":\"t\",\"method\":\"echo\",\"params\":[\"text\"]}",
        ))
        .await
        .unwrap();
    let Message::Response(echo) = next_text(&mut socket).await else {
        panic!("expected a response");
    };
    // The binary frame got no answer: the next answer is for the text frame.
    assert_eq!(echo.id, RequestId::String("t".into()));
    assert_eq!(echo.result.unwrap(), json!(["text"]));
    socket.close(None).await.unwrap();
}

#[cfg(unix)]
#[tokio::test]
async fn two_peers_over_an_os_socket_pair() {
    let (left, right) = tokio::net::UnixStream::pair().unwrap();
    let (lr, lw) = left.into_split();
    let (rr, rw) = right.into_split();
    let client = Peer::builder().spawn(Transport::bytes(lr, lw));
    let server = agent()
        .on_request(
            "session/request_permission",
            |_cx, _params: Option<Value>| async move { Ok(json!("unused")) },
        )
        .spawn(Transport::bytes(rr, rw));
    let calls: Vec<_> = (0..50)
        .map(|i| {
            let client = client.clone();
            tokio::spawn(async move {
                client
                    .request("echo", Some(json!([i, "x".repeat(i * 1000)])))
                    .await
            })
        })
        .collect();
    for (i, call) in calls.into_iter().enumerate() {
        assert_eq!(call.await.unwrap().unwrap()[0], json!(i));
    }
    client.close().await;
    server.input_closed().await;
    server.close().await;
}
