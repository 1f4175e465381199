//! A target that is ready but refuses its MCP endpoint fails the row at once: right after the
//! readiness, one plain `GET` of the endpoint (no session, so no server creates one) must get an
//! HTTP answer other than a server error. A working build answers it with a stream, 400 or 405;
//! a build that answers 5xx or drops the connection answers every request so, and a row that
//! waited for the MCP handshake, Socket Mode or a slash command would wait out its full time.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::{CheckError, Ctx, Failure};

/// How long the probe waits for the status line (scaled).
const PROBE_WAIT: Duration = Duration::from_secs(5);

/// What the endpoint answered: its HTTP status, or why there was none.
async fn status_of(url: &str) -> Result<u16, String> {
    let rest = url
        .strip_prefix("http://")
        .ok_or_else(|| format!("{url} is not an http:// URL"))?;
    let (authority, path) = match rest.find('/') {
        Some(slash) => (&rest[..slash], &rest[slash..]),
        None => (rest, "/"),
    };
    let mut stream = TcpStream::connect(authority)
        .await
        .map_err(|e| format!("connecting failed: {e}"))?;
    let request = format!(
        "GET {path} HTTP/1.1\r\nHost: {authority}\r\nAccept: text/event-stream\r\nConnection: close\r\n\r\n"
    );
    stream
        .write_all(request.as_bytes())
        .await
        .map_err(|e| format!("sending failed: {e}"))?;
    let mut head = Vec::new();
    let mut buf = [0u8; 256];
    while !head.contains(&b'\n') && head.len() < 4096 {
        let n = stream
            .read(&mut buf)
            .await
            .map_err(|e| format!("reading the answer failed: {e}"))?;
        if n == 0 {
            return Err("the connection was closed without an HTTP answer".to_owned());
        }
        head.extend_from_slice(&buf[..n]);
    }
    let line = String::from_utf8_lossy(&head);
    line.split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .ok_or_else(|| format!("no HTTP status line: {:?}", line.lines().next()))
}

/// Fails the row when the MCP endpoint at `url` answers a plain GET with a server error or no
/// HTTP answer at all, and records the refusal for the run (no solo re-runs then).
pub async fn ensure_mcp_answers(ctx: &Ctx, url: &str) -> Result<(), CheckError> {
    let wait = ctx.timeouts().scale(PROBE_WAIT);
    let answer = match tokio::time::timeout(wait, status_of(url)).await {
        Ok(answer) => answer,
        // A server that holds the request open (a stream without headers yet) is answering.
        Err(_) => return Ok(()),
    };
    let refusal = match answer {
        Ok(status) if status < 500 => return Ok(()),
        Ok(status) => format!("HTTP {status}"),
        Err(why) => why,
    };
    ctx.setup_gauge().record_refusal();
    ctx.note(format!("the MCP endpoint {url} refused a GET: {refusal}"));
    Err(Failure::new(
        "the ready target's MCP endpoint answers",
        format!("{url} answers a GET without a session with a stream or a client error (400, 405)"),
    )
    .actual(format!(
        "{refusal}: the endpoint refuses requests, so the row fails here instead of waiting out its time"
    ))
    .into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::net::TcpListener;

    /// A server on a loopback port that answers one request with `answer` (or closes at once).
    async fn answering(answer: &'static [u8]) -> String {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            let (mut socket, _) = listener.accept().await.unwrap();
            let mut buf = [0u8; 1024];
            let _ = socket.read(&mut buf).await;
            let _ = socket.write_all(answer).await;
        });
        format!("http://{addr}/mcp")
    }

    #[tokio::test]
    async fn the_probe_reads_the_status_or_says_why_there_is_none() {
        let url =
            answering(b"HTTP/1.1 500 Internal Server Error\r\ncontent-length: 0\r\n\r\n").await;
        assert_eq!(status_of(&url).await, Ok(500));
        let url = answering(b"HTTP/1.1 405 Method Not Allowed\r\ncontent-length: 0\r\n\r\n").await;
        assert_eq!(status_of(&url).await, Ok(405));
        let url = answering(b"").await;
        let why = status_of(&url).await.unwrap_err();
        assert!(why.contains("without an HTTP answer"), "{why}");
        assert!(status_of("https://example.invalid/").await.is_err());
    }
}
