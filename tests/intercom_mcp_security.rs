//! The MCP endpoint's guards, as the streamable HTTP transport's security guidance asks: a present
//! `Origin` that is neither loopback nor configured is refused (403), an optional bearer token
//! (`SKI_INTERCOM_MCP_TOKEN`) refuses requests without it (401), and `[mcp] max_sessions` caps the
//! live sessions (an `initialize` beyond it is refused, nothing posted). Refused requests are
//! raw HTTP; accepted sessions are real rmcp clients.

use crate::intercom_support;

use std::path::{Path, PathBuf};

use intercom_support::*;
use rmcp::ServiceExt;
use rmcp::model::ClientConfig;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::json;
use ski_mocks::slack::FakeSlack;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}"#;
const TOKEN: &str = "mcp-s3cret-token";

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

/// The answer to one raw request: status, head (lower case) and, unless it is an event stream,
/// the body.
struct Answer {
    status: u16,
    head: String,
    body: String,
}

/// POSTs `initialize` to `url` with `headers` (HTTP/1.1, one connection per request).
async fn post_initialize(url: &str, headers: &[(&str, &str)]) -> Answer {
    let rest = url.strip_prefix("http://").expect("http url");
    let (authority, path) = rest.split_at(rest.find('/').expect("a path"));
    let mut request = format!(
        "POST {path} HTTP/1.1\r\nhost: {authority}\r\ncontent-type: application/json\r\naccept: application/json, text/event-stream\r\ncontent-length: {}\r\nconnection: close\r\n",
        INITIALIZE.len()
    );
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str("\r\n");
    request.push_str(INITIALIZE);
    let exchange = async {
        let mut stream = TcpStream::connect(authority).await.expect("connect");
        stream.write_all(request.as_bytes()).await.expect("write");
        let mut received = Vec::new();
        let mut chunk = [0u8; 4096];
        let end = loop {
            if let Some(end) = received.windows(4).position(|w| w == b"\r\n\r\n") {
                break end;
            }
            let n = stream.read(&mut chunk).await.expect("read");
            assert!(n > 0, "closed before the head");
            received.extend_from_slice(&chunk[..n]);
        };
        let head = String::from_utf8_lossy(&received[..end]).to_ascii_lowercase();
        let status = head
            .split_whitespace()
            .nth(1)
            .and_then(|code| code.parse().ok())
            .expect("a status");
        let mut body = received[end + 4..].to_vec();
        if !head.contains("text/event-stream") {
            stream.read_to_end(&mut body).await.expect("body");
        }
        Answer {
            status,
            head,
            body: String::from_utf8_lossy(&body).into_owned(),
        }
    };
    tokio::time::timeout(WAIT, exchange)
        .await
        .expect("an answer")
}

/// The sessions' thread roots posted so far.
fn roots(slack: &FakeSlack) -> usize {
    slack.messages(CHANNEL_X, None).len()
}

/// An rmcp client sending `token` as its bearer token.
async fn client_with_token(
    url: &str,
    token: Option<&str>,
) -> Result<
    rmcp::service::RunningService<rmcp::RoleClient, ClientConfig>,
    rmcp::service::ClientInitializeError,
> {
    let _ = tokio_rustls::rustls::crypto::ring::default_provider().install_default();
    let mut config = StreamableHttpClientTransportConfig::with_uri(url.to_string());
    if let Some(token) = token {
        config = config.auth_header(token);
    }
    Box::pin(ClientConfig::default().serve(StreamableHttpClientTransport::from_config(config)))
        .await
}

#[tokio::test]
async fn a_foreign_origin_is_refused_and_loopback_or_configured_ones_are_served() {
    let slack = fake_slack().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let config = config_with_mcp(
        dir.path(),
        &slack,
        r#"allowed_origins = ["https://ide.example"]"#,
    );
    let server = Server::start(&config, &[]).await;
    let url = server.mcp_url("workspace_id=myproj");
    for origin in [
        "http://evil.example",
        "http://localhost.evil.example:3000",
        "null",
    ] {
        let answer = post_initialize(&url, &[("origin", origin)]).await;
        assert_eq!(answer.status, 403, "{origin}: {}", answer.head);
    }
    assert_eq!(roots(&slack), 0, "a refused initialize posts nothing");
    for origin in [
        "http://localhost:5173",
        "http://127.0.0.1:8080",
        "https://ide.example",
    ] {
        let answer = post_initialize(&url, &[("origin", origin)]).await;
        assert_eq!(answer.status, 200, "{origin}: {}", answer.head);
    }
    // No Origin at all (a non-browser client) is served too.
    let client = mcp_client(&url).await;
    let (answer, error) = call(&client, "ping", json!({})).await;
    assert!(!error, "{answer}");
    assert_eq!(roots(&slack), 4);
    drop(client);
    assert_eq!(server.stop().await, Some(0));
}

#[tokio::test]
async fn with_a_token_set_requests_without_it_are_refused_with_401() {
    let slack = fake_slack().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let config = write_config(dir.path(), &slack, "");
    let server = Server::start_with_env(&config, &[], &[("SKI_INTERCOM_MCP_TOKEN", TOKEN)]).await;
    let url = server.mcp_url("workspace_id=myproj");
    for authorization in [None, Some("Bearer wrong"), Some(TOKEN), Some("Basic eDp5")] {
        let headers: Vec<(&str, &str)> = authorization
            .iter()
            .map(|value| ("authorization", *value))
            .collect();
        let answer = post_initialize(&url, &headers).await;
        assert_eq!(answer.status, 401, "{authorization:?}: {}", answer.head);
        assert!(
            answer.head.contains("www-authenticate: bearer"),
            "{}",
            answer.head
        );
        assert!(!answer.body.contains(TOKEN), "{}", answer.body);
    }
    assert!(client_with_token(&url, None).await.is_err());
    assert_eq!(roots(&slack), 0, "a refused request posts nothing");
    let bearer = format!("Bearer {TOKEN}");
    let answer = post_initialize(&url, &[("authorization", bearer.as_str())]).await;
    assert_eq!(answer.status, 200, "{}", answer.head);
    let client = client_with_token(&url, Some(TOKEN))
        .await
        .expect("the right token connects");
    let (answer, error) = call(&client, "ping", json!({})).await;
    assert!(!error, "{answer}");
    assert_eq!(roots(&slack), 2);
    drop(client);
    let log = server.log().join("\n");
    assert!(!log.contains(TOKEN), "the token reached the log");
    assert_eq!(server.stop().await, Some(0));
}

#[tokio::test]
async fn initialize_beyond_max_sessions_is_refused_without_a_post_until_one_ends() {
    let slack = fake_slack().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let config = config_with_mcp(dir.path(), &slack, "max_sessions = 2");
    let server = Server::start(&config, &[]).await;
    let url = server.mcp_url("workspace_id=myproj");
    let first = mcp_client(&url).await;
    let second = mcp_client(&url).await;
    assert_eq!(roots(&slack), 2);
    let refused = client_with_token(&url, None)
        .await
        .expect_err("a third session is refused");
    assert!(
        refused.to_string().contains("max_sessions"),
        "the refusal says why: {refused}"
    );
    assert_eq!(roots(&slack), 2, "the refused initialize posted nothing");
    // One ends; its place is free again.
    first.cancel().await.expect("the first session ends");
    slack
        .wait_for_message(|m| m.text().contains("Session ended"), WAIT)
        .await
        .expect("the first session's end");
    let third = mcp_client(&url).await;
    let (answer, error) = call(&third, "ping", json!({})).await;
    assert!(!error, "{answer}");
    assert_eq!(roots(&slack), 3);
    drop((second, third));
    assert_eq!(server.stop().await, Some(0));
}
