//! Peer behaviour over in-memory pipes: request/response, ids, pending state, close, timeouts,
//! noise responses, cancellation, notification order, concurrent dispatch and the send gate.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use ski::jsonrpc::{
    CallError, ErrorCode, IdStyle, LineReader, Message, Peer, PeerBuilder, RequestId,
    RequestOptions, RpcError, Transport, VersionField, WireLog, decode,
};
use tokio::io::{AsyncWriteExt, DuplexStream, ReadHalf, WriteHalf};
use tokio::sync::{Notify, oneshot};

/// A peer under test and the raw other end of its pipe, driven line by line by the test.
struct Remote {
    reader: LineReader<ReadHalf<DuplexStream>>,
    writer: WriteHalf<DuplexStream>,
}

impl Remote {
    async fn recv(&mut self) -> Message {
        let line = self
            .reader
            .next_line()
            .await
            .expect("peer closed its output")
            .expect("frame error");
        decode(line, VersionField::Required).expect("peer wrote an invalid message")
    }

    async fn recv_line(&mut self) -> Option<String> {
        match self.reader.next_line().await {
            None => None,
            Some(line) => Some(String::from_utf8(line.unwrap().to_vec()).unwrap()),
        }
    }

    async fn send(&mut self, text: &str) {
        self.writer.write_all(text.as_bytes()).await.unwrap();
        self.writer.write_all(b"\n").await.unwrap();
    }

    async fn send_message(&mut self, message: &Message) {
        self.send(&message.to_line().unwrap()).await;
    }
}

fn peer_with_remote(builder: PeerBuilder) -> (Peer, Remote) {
    let (ours, theirs) = tokio::io::duplex(1 << 20);
    let (read, write) = tokio::io::split(ours);
    let peer = builder.spawn(Transport::bytes(read, write));
    let (read, write) = tokio::io::split(theirs);
    (
        peer,
        Remote {
            reader: LineReader::new(read),
            writer: write,
        },
    )
}

fn connected_pair(left: PeerBuilder, right: PeerBuilder) -> (Peer, Peer) {
    let (a, b) = tokio::io::duplex(1 << 16);
    let (ar, aw) = tokio::io::split(a);
    let (br, bw) = tokio::io::split(b);
    (
        left.spawn(Transport::bytes(ar, aw)),
        right.spawn(Transport::bytes(br, bw)),
    )
}

fn echo_server() -> PeerBuilder {
    Peer::builder().on_request("echo", |_cx, params: Option<Value>| async move {
        Ok(params.unwrap_or(Value::Null))
    })
}

fn request_of(message: Message) -> ski::jsonrpc::Request {
    match message {
        Message::Request(request) => request,
        other => panic!("expected a request, got {other:?}"),
    }
}

fn response_of(message: Message) -> ski::jsonrpc::Response {
    match message {
        Message::Response(response) => response,
        other => panic!("expected a response, got {other:?}"),
    }
}

#[tokio::test]
async fn request_and_response_between_two_peers() {
    let (client, _server) = connected_pair(Peer::builder(), echo_server());
    let result = client.request("echo", Some(json!({"x": 1}))).await.unwrap();
    assert_eq!(result, json!({"x": 1}));
    let error = client.request("nope", None).await.unwrap_err();
    let CallError::Rpc(error) = error else {
        panic!("expected an rpc error, got {error:?}");
    };
    assert_eq!(error.code, ErrorCode::METHOD_NOT_FOUND);
    assert_eq!(error.data, Some(json!({"method": "nope"})));
    assert_eq!(client.stats().pending_requests, 0);
}

#[tokio::test]
async fn ids_start_at_the_configured_value_and_can_be_strings() {
    let (peer, mut remote) = peer_with_remote(Peer::builder().first_id(1));
    let call = tokio::spawn({
        let peer = peer.clone();
        async move { peer.request("a", None).await }
    });
    let request = request_of(remote.recv().await);
    assert_eq!(request.id, RequestId::Number(1));
    remote
        .send_message(&Message::success(request.id, json!("ok")))
        .await;
    assert_eq!(call.await.unwrap().unwrap(), json!("ok"));

    let (peer, mut remote) = peer_with_remote(
        Peer::builder()
            .id_style(IdStyle::Prefixed("c-".into()))
            .first_id(7),
    );
    let call = tokio::spawn({
        let peer = peer.clone();
        async move { peer.request("a", None).await }
    });
    let request = request_of(remote.recv().await);
    assert_eq!(request.id, RequestId::String("c-7".into()));
    remote
        .send_message(&Message::success(request.id, json!(1)))
        .await;
    assert_eq!(call.await.unwrap().unwrap(), json!(1));
}
