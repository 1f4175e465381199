//! Helpers shared by the `jsonrpc_*` tests: a peer with the raw other end of its pipe, a
//! connected pair of peers, and a deterministic random generator.

use serde_json::Value;
use ski::jsonrpc::{LineReader, Message, Peer, PeerBuilder, Transport, VersionField, decode};
use tokio::io::{AsyncWriteExt, DuplexStream, ReadHalf, WriteHalf};

/// A peer under test and the raw other end of its pipe, driven line by line by the test.
pub struct Remote {
    pub reader: LineReader<ReadHalf<DuplexStream>>,
    pub writer: WriteHalf<DuplexStream>,
}

impl Remote {
    pub async fn recv(&mut self) -> Message {
        let line = self
            .reader
            .next_line()
            .await
            .expect("peer closed its output")
            .expect("frame error");
        decode(line, VersionField::Required).expect("peer wrote an invalid message")
    }

    pub async fn recv_line(&mut self) -> Option<String> {
        self.reader
            .next_line()
            .await
            .map(|line| String::from_utf8(line.unwrap().to_vec()).unwrap())
    }

    pub async fn send(&mut self, text: &str) {
        self.writer.write_all(text.as_bytes()).await.unwrap();
        self.writer.write_all(b"\n").await.unwrap();
    }

    pub async fn send_bytes(&mut self, bytes: &[u8]) {
        self.writer.write_all(bytes).await.unwrap();
    }

    pub async fn send_message(&mut self, message: &Message) {
        self.send(&message.to_line().unwrap()).await;
    }
}

pub fn peer_with_remote(builder: PeerBuilder) -> (Peer, Remote) {
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

pub fn connected_pair(left: PeerBuilder, right: PeerBuilder) -> (Peer, Peer) {
    let (a, b) = tokio::io::duplex(1 << 16);
    let (ar, aw) = tokio::io::split(a);
    let (br, bw) = tokio::io::split(b);
    (
        left.spawn(Transport::bytes(ar, aw)),
        right.spawn(Transport::bytes(br, bw)),
    )
}

pub fn echo_server() -> PeerBuilder {
    Peer::builder().on_request("echo", |_cx, params: Option<Value>| async move {
        Ok(params.unwrap_or(Value::Null))
    })
}

pub fn request_of(message: Message) -> ski::jsonrpc::Request {
    match message {
        Message::Request(request) => request,
        other => panic!("expected a request, got {other:?}"),
    }
}

pub fn response_of(message: Message) -> ski::jsonrpc::Response {
    match message {
        Message::Response(response) => response,
        other => panic!("expected a response, got {other:?}"),
    }
}

/// A small deterministic generator for shuffles and random choices.
pub struct Lcg(pub u64);

impl Lcg {
    pub fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        self.0 >> 33
    }

    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    pub fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            items.swap(i, self.below(i + 1));
        }
    }
}
