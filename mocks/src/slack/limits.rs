//! The bounds every listener of the fake Slack keeps (Web API, its TLS front, Socket Mode, the
//! control API): at most `[limits] max_connections` open connections each, one more answered
//! 503 with `Retry-After` and closed; a request's headers (like a kept-alive connection's next
//! request) and a Socket Mode handshake within `[limits] header_timeout_ms`.

use std::sync::Arc;
use std::time::Duration;

use hyper::server::conn::http1;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::config::LimitsConfig;

/// How long a refused client is given to take its 503 before the connection is dropped.
const REFUSAL_GRACE: Duration = Duration::from_secs(1);

/// How long an accept loop pauses after a failed accept (out of file descriptors), so that it
/// does not spin while none can be had.
const ACCEPT_ERROR_PAUSE: Duration = Duration::from_millis(50);

/// The open connections of one listener.
#[derive(Debug, Clone)]
pub struct Gate {
    permits: Arc<Semaphore>,
    limit: usize,
}

impl Gate {
    /// A gate that lets `limit` connections in at once (at least one).
    pub fn new(limit: usize) -> Gate {
        let limit = limit.max(1);
        Gate {
            permits: Arc::new(Semaphore::new(limit)),
            limit,
        }
    }

    /// Room for one more connection, held until the permit is dropped; `None` at the cap.
    pub fn admit(&self) -> Option<OwnedSemaphorePermit> {
        self.permits.clone().try_acquire_owned().ok()
    }

    /// Answers a connection past the cap with 503 and closes it, in a task of its own so the
    /// accept loop goes on; the refusal itself is bounded by [`REFUSAL_GRACE`].
    pub fn refuse(&self, stream: TcpStream, listener: &'static str) {
        let limit = self.limit;
        tokio::spawn(async move {
            let _ = tokio::time::timeout(REFUSAL_GRACE, refuse(stream, listener, limit)).await;
        });
    }
}

async fn refuse(mut stream: TcpStream, listener: &str, limit: usize) {
    let body = format!(
        "{{\"ok\":false,\"error\":\"too_many_connections\",\"listener\":\"{listener}\",\"limit\":{limit}}}"
    );
    let response = format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\nretry-after: 1\r\n\
         content-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    if stream.write_all(response.as_bytes()).await.is_err() {
        return;
    }
    let _ = stream.shutdown().await;
    // What the client sent meanwhile is read and dropped, so that closing does not reset the
    // connection before the client has read the answer.
    let mut sink = [0u8; 4096];
    while matches!(stream.read(&mut sink).await, Ok(n) if n > 0) {}
}

/// An HTTP/1 connection builder whose header timeout also bounds how long an idle kept-alive
/// connection waits for its next request.
pub fn http1_builder(limits: &LimitsConfig) -> http1::Builder {
    let mut builder = http1::Builder::new();
    builder
        .timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(limits.header_timeout());
    builder
}

/// The pause after a failed accept.
pub async fn after_accept_error() {
    tokio::time::sleep(ACCEPT_ERROR_PAUSE).await;
}
