//! The MCP endpoint's connection limits, with small configured values: a request whose headers
//! never finish, and an idle keep-alive connection, are closed after `[mcp] header_timeout_ms`;
//! `[mcp] max_connections` open connections at most (idle ones count), one more answered 503
//! and the next one after a close served; `/health` answers without the bearer token.

use crate::intercom_support;

use std::path::{Path, PathBuf};

use intercom_support::*;
use ski_mocks::slack::FakeSlack;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// The usual test config with `extra` added to its `[mcp]` table.
fn config_with_mcp(dir: &Path, slack: &FakeSlack, extra: &str) -> PathBuf {
    let path = write_config(dir, slack, "");
    let text = std::fs::read_to_string(&path).expect("config");
    let text = text.replacen(
        "[mcp]\nport = 0\n",
        &format!("[mcp]\nport = 0\n{extra}\n"),
        1,
    );
    std::fs::write(&path, text).expect("config");
    path
}

/// The endpoint's `HOST:PORT`.
fn authority(server: &Server) -> String {
    let url = server.mcp_url("");
    let rest = url.strip_prefix("http://").expect("an http url");
    rest[..rest.find('/').expect("a path")].to_owned()
}

/// Reads one response head and a body of `content-length` bytes; `None` if the connection closed
/// before a head.
async fn read_response(stream: &mut TcpStream) -> Option<(u16, String, String)> {
    let mut received = Vec::new();
    let mut chunk = [0u8; 1024];
    let end = loop {
        if let Some(end) = received.windows(4).position(|w| w == b"\r\n\r\n") {
            break end;
        }
        let n = stream.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        received.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&received[..end]).to_ascii_lowercase();
    let status = head.split_whitespace().nth(1)?.parse().ok()?;
    let length: usize = head
        .lines()
        .find_map(|line| line.strip_prefix("content-length:"))
        .and_then(|value| value.trim().parse().ok())
        .unwrap_or(0);
    let mut body = received[end + 4..].to_vec();
    while body.len() < length {
        let n = stream.read(&mut chunk).await.ok()?;
        if n == 0 {
            break;
        }
        body.extend_from_slice(&chunk[..n]);
    }
    Some((status, head, String::from_utf8_lossy(&body).into_owned()))
}

/// `GET /health` on a new connection kept alive: the connection and the answer.
async fn health(authority: &str) -> (TcpStream, Option<(u16, String, String)>) {
    let mut stream = TcpStream::connect(authority).await.expect("connect");
    let request = format!("GET /health HTTP/1.1\r\nhost: {authority}\r\n\r\n");
    stream.write_all(request.as_bytes()).await.expect("write");
    let answer = read_response(&mut stream).await;
    (stream, answer)
}

/// Waits for the server to close `stream`: end of stream (or a reset) must come.
async fn closed_by_server(stream: &mut TcpStream) {
    let mut rest = Vec::new();
    let outcome = tokio::time::timeout(WAIT, stream.read_to_end(&mut rest)).await;
    assert!(outcome.is_ok(), "the server kept the connection open");
}

#[tokio::test]
async fn unfinished_headers_and_idle_keep_alive_connections_are_closed_at_the_header_timeout() {
    let slack = fake_slack().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let config = config_with_mcp(dir.path(), &slack, "header_timeout_ms = 300");
    let server = Server::start(&config, &[]).await;
    let authority = authority(&server);
    let started = tokio::time::Instant::now();
    let mut unfinished = Vec::new();
    for _ in 0..20 {
        let mut stream = TcpStream::connect(&authority).await.expect("connect");
        stream
            .write_all(b"POST /mcp HTTP/1.1\r\nhost: 127.0.0.1\r\nx-slow: ")
            .await
            .expect("write");
        unfinished.push(stream);
    }
    for stream in &mut unfinished {
        closed_by_server(stream).await;
    }
    assert!(started.elapsed() >= std::time::Duration::from_millis(300));

    let (mut kept_alive, answer) = health(&authority).await;
    let (status, _, body) = answer.expect("an answer");
    assert_eq!((status, body.as_str()), (200, "ok"));
    closed_by_server(&mut kept_alive).await;
    assert_eq!(server.stop().await, Some(0));
}

#[tokio::test]
async fn past_max_connections_a_client_gets_503_until_a_connection_closes() {
    let slack = fake_slack().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let config = config_with_mcp(dir.path(), &slack, "max_connections = 2");
    let server = Server::start(&config, &[]).await;
    let authority = authority(&server);
    // Two idle keep-alive connections hold both places (they are accepted in order).
    let (first, answer) = health(&authority).await;
    assert_eq!(answer.expect("an answer").0, 200);
    let (_second, answer) = health(&authority).await;
    assert_eq!(answer.expect("an answer").0, 200);

    let (_, answer) = health(&authority).await;
    let (status, head, body) = answer.expect("a refusal");
    assert_eq!(status, 503, "{head}");
    assert!(head.contains("connection: close"), "{head}");
    assert!(head.contains("retry-after:"), "{head}");
    assert!(
        body.contains("limit of 2 open connections") && body.contains("max_connections"),
        "{body}"
    );

    drop(first);
    let served = tokio::time::timeout(WAIT, async {
        loop {
            let (_, answer) = health(&authority).await;
            match answer {
                Some((200, _, body)) => break body,
                Some((503, _, _)) => continue,
                other => panic!("unexpected answer {other:?}"),
            }
        }
    })
    .await
    .expect("a place freed by the closed connection");
    assert_eq!(served, "ok");
    assert_eq!(server.stop().await, Some(0));
}

#[tokio::test]
async fn health_answers_without_the_bearer_token_and_says_nothing_more() {
    let slack = fake_slack().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let config = write_config(dir.path(), &slack, "");
    let server =
        Server::start_with_env(&config, &[], &[("SKI_INTERCOM_MCP_TOKEN", "s3cret-token")]).await;
    let (_, answer) = health(&authority(&server)).await;
    let (status, _, body) = answer.expect("an answer");
    assert_eq!((status, body.as_str()), (200, "ok"));
    assert_eq!(server.stop().await, Some(0));
}
