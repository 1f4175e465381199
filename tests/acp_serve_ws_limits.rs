//! The limits of a real `ski acp serve --transport ws`, each with a small configured value: the
//! connection cap (a client past it gets close code 1013 and the next one after a close is
//! served), the upgrade deadline, the deadline for a message to arrive whole (a frame trickled a
//! byte at a time is closed with 1008), pings to a silent client (closed with 1001 when it does
//! not answer, kept when it does), and the cap on sessions across all connections.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures::{SinkExt, StreamExt};
use nix::sys::signal::Signal;
use serde_json::{Value, json};
use ski::transport::child::{self, Child, ChildSpec};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message as Frame;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

const SKI: &str = env!("CARGO_BIN_EXE_ski");

/// How long any wait may take before the test fails.
const PATIENCE: Duration = Duration::from_secs(60);

/// A limit long enough never to run out during a test.
const NEVER_MS: &str = "600000";

type Client = WebSocketStream<MaybeTlsStream<TcpStream>>;

async fn within<T>(what: &str, fut: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(PATIENCE, fut)
        .await
        .unwrap_or_else(|_| panic!("timed out waiting for {what}"))
}

/// A running `ski acp serve --transport ws` on a free loopback port.
struct Served {
    agent: Child,
    url: String,
}

impl Served {
    /// Starts the agent with `args` after the transport flags; limits not given never run out.
    async fn start(args: &[&str]) -> Self {
        let mut all = vec![
            "acp",
            "serve",
            "--transport",
            "ws",
            "--listen",
            "127.0.0.1:0",
        ];
        for flag in [
            "--idle-timeout-ms",
            "--pong-timeout-ms",
            "--message-timeout-ms",
            "--handshake-timeout-ms",
        ] {
            if !args.contains(&flag) {
                all.extend([flag, NEVER_MS]);
            }
        }
        all.extend(args);
        let mut agent =
            child::spawn(ChildSpec::new("agent", SKI).args(all)).expect("spawn ski acp serve");
        let url = crate::acp_serve_support::listening_url(&mut agent, PATIENCE).await;
        Self { agent, url }
    }

    fn address(&self) -> &str {
        self.url
            .trim_start_matches("ws://")
            .trim_end_matches("/acp")
    }

    async fn connect(&self) -> Client {
        let (socket, _) = within(
            "connect",
            Box::pin(tokio_tungstenite::connect_async(self.url.as_str())),
        )
        .await
        .expect("connect");
        socket
    }

    /// A TCP connection that has completed the upgrade by hand, so the test writes raw frames.
    async fn raw_upgraded(&self) -> TcpStream {
        let mut stream = TcpStream::connect(self.address()).await.expect("connect");
        let request = format!(
            "GET /acp HTTP/1.1\r\nHost: {}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
             Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n",
            self.address()
        );
        stream.write_all(request.as_bytes()).await.unwrap();
        let mut head = Vec::new();
        while !head.ends_with(b"\r\n\r\n") {
            let mut byte = [0u8; 1];
            let read = within("the upgrade response", stream.read(&mut byte))
                .await
                .unwrap();
            assert_eq!(read, 1, "the server closed during the upgrade");
            head.push(byte[0]);
        }
        let head = String::from_utf8_lossy(&head);
        assert!(head.starts_with("HTTP/1.1 101"), "{head}");
        stream
    }

    async fn stop(self) {
        self.agent
            .signal_group(Signal::SIGTERM)
            .expect("signal the agent");
        let status = within("the agent to stop on SIGTERM", self.agent.wait())
            .await
            .expect("exit status");
        assert_eq!(status.code(), Some(0));
        assert!(self.agent.shutdown().await.expect("teardown").group_gone);
    }
}

/// Sends a request and returns its answer, skipping notifications and pings.
async fn call(socket: &mut Client, id: u64, method: &str, params: Value) -> Value {
    let request = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
    socket
        .send(Frame::text(request.to_string()))
        .await
        .expect("send a request");
    loop {
        let frame = within("an answer", socket.next())
            .await
            .expect("a frame")
            .expect("a readable frame");
        if let Frame::Text(text) = frame {
            let message: Value = serde_json::from_str(text.as_str()).unwrap();
            if message["id"] == json!(id) {
                return message;
            }
        }
    }
}

/// Reads the next frame a raw connection gets from the server: (opcode, payload). The server's
/// frames are unmasked and short here.
async fn next_raw_frame(stream: &mut (impl AsyncRead + Unpin)) -> Option<(u8, Vec<u8>)> {
    let mut header = [0u8; 2];
    match within("a frame", stream.read_exact(&mut header)).await {
        Ok(_) => {}
        Err(error) if error.kind() == std::io::ErrorKind::UnexpectedEof => return None,
        Err(error) => panic!("reading a frame: {error}"),
    }
    let length = usize::from(header[1] & 0x7f);
    assert!(length < 126, "a short frame expected");
    let mut payload = vec![0u8; length];
    within("a frame's payload", stream.read_exact(&mut payload))
        .await
        .unwrap();
    Some((header[0] & 0x0f, payload))
}

/// The code and reason of a close frame's payload.
fn close_of(payload: &[u8]) -> (u16, String) {
    let code = u16::from_be_bytes([payload[0], payload[1]]);
    (code, String::from_utf8_lossy(&payload[2..]).into_owned())
}

/// Reads until end of stream, which must come.
async fn read_to_end(stream: &mut (impl AsyncRead + Unpin)) {
    let mut rest = Vec::new();
    within("the server to close", stream.read_to_end(&mut rest))
        .await
        .ok();
}

/// A masked client text frame with `payload` (mask zero, so the payload is as written).
fn client_text_frame(payload: &[u8]) -> Vec<u8> {
    assert!(payload.len() < 126);
    let mut frame = vec![0x81, 0x80 | payload.len() as u8, 0, 0, 0, 0];
    frame.extend_from_slice(payload);
    frame
}

#[tokio::test]
async fn a_client_past_the_connection_cap_is_closed_1013_and_a_freed_place_is_served() {
    let served = Served::start(&["--max-connections", "2"]).await;
    let mut first = served.connect().await;
    let mut second = served.connect().await;
    // Each answers, so each holds its place.
    call(&mut first, 1, "initialize", json!({"protocolVersion": 1})).await;
    call(&mut second, 1, "initialize", json!({"protocolVersion": 1})).await;

    let mut third = served.connect().await;
    let close = within("the refusal", third.next())
        .await
        .expect("a close frame")
        .expect("a readable close frame");
    let Frame::Close(Some(close)) = close else {
        panic!("expected a close frame with a code, got {close:?}");
    };
    assert_eq!(close.code, CloseCode::Again, "{close:?}");
    assert!(close.reason.contains("limit of 2 connections"), "{close:?}");

    // The first client leaves; its place is given back once the server has dropped it, and a
    // new client is then served (refusals before that are the same clear 1013).
    first.close(None).await.expect("close the first client");
    while first.next().await.is_some() {}
    let served_again = within("a place freed by the closed client", async {
        loop {
            let mut next = served.connect().await;
            let request = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                                 "params": {"protocolVersion": 1}});
            next.send(Frame::text(request.to_string())).await.ok();
            match next.next().await {
                Some(Ok(Frame::Text(answer))) => break answer,
                Some(Ok(Frame::Close(Some(close)))) => {
                    assert_eq!(close.code, CloseCode::Again, "{close:?}");
                }
                other => panic!("unexpected {other:?}"),
            }
        }
    })
    .await;
    let answer: Value = serde_json::from_str(served_again.as_str()).unwrap();
    assert_eq!(answer["result"]["protocolVersion"], 1, "{answer}");
    call(&mut second, 2, "session/list", json!({})).await;
    served.stop().await;
}

#[tokio::test]
async fn an_upgrade_that_does_not_finish_in_time_is_dropped_and_frees_its_place() {
    let served = Served::start(&["--max-connections", "1", "--handshake-timeout-ms", "300"]).await;
    let mut silent = TcpStream::connect(served.address()).await.expect("connect");
    silent.write_all(b"GET /acp HTTP/1.1\r\n").await.unwrap();
    // The server gives up on the upgrade and closes the connection.
    read_to_end(&mut silent).await;
    let mut client = served.connect().await;
    let answer = call(&mut client, 1, "initialize", json!({"protocolVersion": 1})).await;
    assert_eq!(answer["result"]["protocolVersion"], 1, "{answer}");
    served.stop().await;
}

#[tokio::test]
async fn a_frame_trickled_a_byte_at_a_time_is_closed_1008_at_the_message_deadline() {
    let served = Served::start(&["--message-timeout-ms", "600"]).await;
    let stream = served.raw_upgraded().await;
    let request =
        br#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}"#;
    let frame = client_text_frame(request);
    let started = tokio::time::Instant::now();
    let (mut reader, mut writer) = stream.into_split();
    let sent = Arc::new(AtomicUsize::new(0));
    let trickle = tokio::spawn({
        let sent = sent.clone();
        async move {
            for byte in frame {
                tokio::time::sleep(Duration::from_millis(50)).await;
                // The server may have closed already; the write then fails.
                if writer.write_all(&[byte]).await.is_err() {
                    break;
                }
                sent.fetch_add(1, Ordering::SeqCst);
            }
            writer
        }
    });
    let close = next_raw_frame(&mut reader).await;
    let sent = sent.load(Ordering::SeqCst);
    assert!(
        !trickle.is_finished() || sent < request.len(),
        "the frame went out whole"
    );
    trickle.abort();
    let (opcode, payload) = close.expect("a close frame before the end");
    assert_eq!(opcode, 0x8, "a close frame");
    let (code, reason) = close_of(&payload);
    assert_eq!(code, 1008, "{reason}");
    assert!(reason.contains("600 ms"), "{reason}");
    assert!(
        started.elapsed() >= Duration::from_millis(600),
        "closed before the deadline"
    );
    assert!(
        sent > 1 && sent < request.len(),
        "bytes kept coming: {sent}"
    );
    read_to_end(&mut reader).await;

    // A message that arrives whole in time is answered.
    let mut client = served.connect().await;
    let answer = call(&mut client, 1, "initialize", json!({"protocolVersion": 1})).await;
    assert_eq!(answer["result"]["protocolVersion"], 1, "{answer}");
    served.stop().await;
}

#[tokio::test]
async fn a_silent_client_is_pinged_and_closed_1001_when_it_does_not_answer() {
    let served = Served::start(&["--idle-timeout-ms", "200", "--pong-timeout-ms", "300"]).await;
    let mut stream = served.raw_upgraded().await;
    let (opcode, payload) = next_raw_frame(&mut stream).await.expect("a ping");
    assert_eq!(opcode, 0x9, "a ping first");
    assert!(payload.is_empty());
    let (opcode, payload) = next_raw_frame(&mut stream).await.expect("a close frame");
    assert_eq!(opcode, 0x8, "then a close frame");
    let (code, reason) = close_of(&payload);
    assert_eq!(code, 1001, "{reason}");
    assert!(reason.contains("300 ms"), "{reason}");
    read_to_end(&mut stream).await;
    served.stop().await;
}

#[tokio::test]
async fn a_client_that_answers_pings_stays_connected_through_many_idle_periods() {
    let served = Served::start(&["--idle-timeout-ms", "100", "--pong-timeout-ms", "200"]).await;
    let mut client = served.connect().await;
    // tungstenite answers each ping while it reads; the client itself sends nothing.
    let mut pings = 0;
    while pings < 5 {
        match within("a ping", client.next()).await {
            Some(Ok(Frame::Ping(_))) => pings += 1,
            other => panic!("expected pings only, got {other:?}"),
        }
    }
    let answer = call(&mut client, 1, "initialize", json!({"protocolVersion": 1})).await;
    assert_eq!(answer["result"]["protocolVersion"], 1, "{answer}");
    served.stop().await;
}

#[tokio::test]
async fn sessions_across_connections_are_capped_apart_from_each_connections_own_cap() {
    let served = Served::start(&["--max-total-sessions", "2", "--max-sessions", "5"]).await;
    let scratch = tempfile::tempdir().unwrap();
    let cwd = scratch.path().to_str().unwrap();
    let new = json!({"cwd": cwd, "mcpServers": []});
    let mut one = served.connect().await;
    let mut two = served.connect().await;
    call(&mut one, 1, "initialize", json!({"protocolVersion": 1})).await;
    call(&mut two, 1, "initialize", json!({"protocolVersion": 1})).await;
    let first = call(&mut one, 2, "session/new", new.clone()).await;
    let first = first["result"]["sessionId"].as_str().unwrap().to_owned();
    let second = call(&mut two, 2, "session/new", new.clone()).await;
    assert!(second["result"]["sessionId"].is_string(), "{second}");
    for socket in [&mut one, &mut two] {
        let refused = call(socket, 3, "session/new", new.clone()).await;
        assert_eq!(refused["error"]["code"], -32603, "{refused}");
        assert_eq!(refused["error"]["data"]["maxTotalSessions"], 2, "{refused}");
        let message = refused["error"]["message"].as_str().unwrap();
        assert!(message.contains("across all connections"), "{message}");
    }
    let closed = call(&mut one, 4, "session/close", json!({"sessionId": first})).await;
    assert!(closed.get("error").is_none(), "{closed}");
    let third = call(&mut two, 5, "session/new", new).await;
    assert!(
        third["result"]["sessionId"].is_string(),
        "room after a close: {third}"
    );
    served.stop().await;
}
