//! The fake Slack's listeners bound what clients can hold (`[limits]`): a connection past
//! `max_connections` is answered 503 and closed, on the Web API, Socket Mode and the control
//! API alike; headers (and a kept-alive connection's next request) and a Socket Mode handshake
//! must come within `header_timeout_ms`; a Socket Mode client heard from for `idle_timeout_ms`
//! is closed with 1001.

use std::time::Duration;

use futures::StreamExt;
use ski_mocks::slack::config::LimitsConfig;
use ski_mocks::slack::{Config, FakeSlack};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message as Frame;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;

/// How long a test waits for what it expects before it counts as never.
const WAIT: Duration = Duration::from_secs(20);

/// A request any Web API listener answers at once.
const API_TEST: &[u8] = b"POST /api/api.test HTTP/1.1\r\nhost: fake\r\ncontent-length: 0\r\n\r\n";

/// A request the control API answers at once.
const CONTROL_STATE: &[u8] =
    b"POST /ephemerals HTTP/1.1\r\nhost: fake\r\ncontent-length: 0\r\n\r\n";

async fn fake(max_connections: usize, header_timeout_ms: u64, idle_timeout_ms: u64) -> FakeSlack {
    let mut config = Config {
        limits: LimitsConfig {
            max_connections,
            header_timeout_ms,
            idle_timeout_ms,
        },
        ..Config::default()
    };
    config.socket_mode.ping_interval_ms = 0;
    FakeSlack::start(config).await.expect("the fake starts")
}

/// `host:port` of a URL.
fn address(url: &str) -> String {
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    rest.split('/').next().unwrap_or(rest).to_owned()
}

/// Writes `request` and reads until the end of the first response's head.
async fn head_of_answer(stream: &mut TcpStream, request: &[u8]) -> String {
    stream.write_all(request).await.expect("write");
    let read = async {
        let mut received = Vec::new();
        let mut chunk = [0u8; 4096];
        while !received.windows(4).any(|w| w == b"\r\n\r\n") {
            let n = stream.read(&mut chunk).await.expect("read");
            assert!(n > 0, "closed without an answer");
            received.extend_from_slice(&chunk[..n]);
        }
        String::from_utf8_lossy(&received).into_owned()
    };
    tokio::time::timeout(WAIT, read).await.expect("an answer")
}

/// Everything the server sends until it closes the connection.
async fn until_closed(stream: &mut TcpStream) -> String {
    let read = async {
        let mut received = Vec::new();
        let mut chunk = [0u8; 4096];
        loop {
            match stream.read(&mut chunk).await {
                Ok(0) | Err(_) => break,
                Ok(n) => received.extend_from_slice(&chunk[..n]),
            }
        }
        String::from_utf8_lossy(&received).into_owned()
    };
    tokio::time::timeout(WAIT, read)
        .await
        .expect("the fake closes the connection")
}

#[tokio::test]
async fn a_connection_past_the_cap_is_answered_503_and_a_freed_place_is_taken_again() {
    let slack = fake(2, 60_000, 0).await;
    for (url, request) in [
        (slack.api_base_url(), API_TEST),
        (slack.control_url(), CONTROL_STATE),
    ] {
        let target = address(&url);
        // Two kept-alive connections, each admitted: it has had its answer and stays open.
        let mut held = Vec::new();
        for _ in 0..2 {
            let mut stream = TcpStream::connect(&target).await.expect("connect");
            let head = head_of_answer(&mut stream, request).await;
            assert!(head.starts_with("HTTP/1.1 200"), "{url}: {head}");
            held.push(stream);
        }
        let mut third = TcpStream::connect(&target).await.expect("connect");
        third.write_all(request).await.expect("write");
        let refusal = until_closed(&mut third).await;
        assert!(
            refusal.starts_with("HTTP/1.1 503"),
            "{url}: the third connection is refused: {refusal}"
        );
        assert!(
            refusal.to_ascii_lowercase().contains("retry-after: 1"),
            "{refusal}"
        );
        assert!(refusal.contains("too_many_connections"), "{refusal}");
        // Once a held connection is gone its place is free: a later connection is served.
        drop(held.pop());
        let served = async {
            loop {
                let mut stream = TcpStream::connect(&target).await.expect("connect");
                let head = head_of_answer(&mut stream, request).await;
                if head.starts_with("HTTP/1.1 200") {
                    break;
                }
            }
        };
        tokio::time::timeout(WAIT, served)
            .await
            .expect("a connection is served once a place is free");
    }
}

#[tokio::test]
async fn unfinished_headers_and_an_idle_kept_alive_connection_are_closed() {
    let slack = fake(16, 300, 0).await;
    for url in [slack.api_base_url(), slack.control_url()] {
        let target = address(&url);
        let mut stream = TcpStream::connect(&target).await.expect("connect");
        stream
            .write_all(b"POST /api/api.test HTTP/1.1\r\nhost: fake\r\n")
            .await
            .expect("write");
        until_closed(&mut stream).await;

        let mut stream = TcpStream::connect(&target).await.expect("connect");
        let request = if url.contains("/api") {
            API_TEST
        } else {
            CONTROL_STATE
        };
        let head = head_of_answer(&mut stream, request).await;
        assert!(head.starts_with("HTTP/1.1 200"), "{url}: {head}");
        until_closed(&mut stream).await;
    }
}

#[tokio::test]
async fn socket_mode_refuses_past_the_cap_and_closes_a_silent_handshake() {
    let slack = fake(1, 300, 0).await;
    let url = slack.socket_mode_url();
    let (mut first, _) = tokio_tungstenite::connect_async(url.as_str())
        .await
        .expect("the first connection is served");
    let hello = tokio::time::timeout(WAIT, first.next())
        .await
        .expect("hello");
    assert!(matches!(hello, Some(Ok(Frame::Text(_)))), "{hello:?}");
    match tokio_tungstenite::connect_async(url.as_str()).await {
        Err(tokio_tungstenite::tungstenite::Error::Http(response)) => {
            assert_eq!(response.status().as_u16(), 503);
        }
        other => panic!("the second connection is refused with 503: {other:?}"),
    }
    drop(first);

    // A client that opens a connection and never sends its handshake.
    let slack = fake(16, 300, 0).await;
    let mut silent = TcpStream::connect(address(&slack.socket_mode_url()))
        .await
        .expect("connect");
    until_closed(&mut silent).await;
}

#[tokio::test]
async fn a_socket_mode_client_heard_from_for_the_idle_timeout_is_closed_1001() {
    let slack = fake(16, 60_000, 300).await;
    let (mut socket, _) = tokio_tungstenite::connect_async(slack.socket_mode_url().as_str())
        .await
        .expect("connect");
    let closed = async {
        loop {
            match socket.next().await {
                Some(Ok(Frame::Close(frame))) => return frame,
                Some(Ok(_)) => continue,
                other => panic!("a close frame before the end: {other:?}"),
            }
        }
    };
    let frame = tokio::time::timeout(WAIT, closed)
        .await
        .expect("the silent client is closed");
    assert_eq!(frame.map(|f| f.code), Some(CloseCode::Away));
}
