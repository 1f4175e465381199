//! The WebSocket client side of a JSON-RPC connection: connecting to a `ws://` URL, one JSON
//! text per frame, a heartbeat that notices a dead connection, and the reconnect policy.
//!
//! - [`ConnectionFactory`] is the seam between a client and its network: it opens one connection
//!   and returns it as a [`Transport`]. [`WsConnector`] is the real one; tests script their own
//!   (for example one whose first connection fails on the first send or receive), so reconnect
//!   logic runs without a network.
//! - [`ReconnectPolicy`] says how often and how soon to try again: the delay before the n-th
//!   attempt is `base·2^(n−1)`, capped at [`MAX_RECONNECT_DELAY`].
//! - [`connect_with_backoff`] opens a connection, retrying by the policy.
//!
//! The heartbeat sends a WebSocket ping every interval. Any frame from the server (a pong, a
//! message) proves the connection alive; when nothing arrived for two intervals the input ends
//! with an error, so the peer on top fails its pending requests and a client can reconnect.

use std::fmt;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::task::{Context, Poll};
use std::time::Duration;

use futures::{Sink, SinkExt, Stream, StreamExt, stream};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::time::Instant;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::{Error as WsError, Message as WsMessage};
use tokio_util::sync::CancellationToken;

use crate::jsonrpc::Transport;
use crate::jsonrpc::peer::BoxFuture;
use crate::jsonrpc::websocket::Frame;

/// The default heartbeat interval.
pub const DEFAULT_HEARTBEAT: Duration = Duration::from_secs(15);

/// The longest delay between two reconnect attempts.
pub const MAX_RECONNECT_DELAY: Duration = Duration::from_secs(3);

/// The default number of reconnect attempts.
pub const DEFAULT_RECONNECT_ATTEMPTS: u32 = 2;

/// The default delay before the first reconnect attempt.
pub const DEFAULT_RECONNECT_BASE_DELAY: Duration = Duration::from_millis(200);

/// The default time a connection attempt (TCP and WebSocket handshake) may take.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Why a connection could not be opened.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConnectError {
    /// The URL is not a usable WebSocket URL.
    #[error("invalid websocket url {url:?}: {reason}")]
    InvalidUrl {
        /// The URL as given.
        url: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The server could not be reached or refused the upgrade.
    #[error("cannot connect to {url}: {reason}")]
    Unreachable {
        /// The URL.
        url: String,
        /// The underlying error.
        reason: String,
    },
    /// Connecting took longer than the connect timeout.
    #[error("connecting to {url} timed out after {timeout:?}")]
    Timeout {
        /// The URL.
        url: String,
        /// The timeout that expired.
        timeout: Duration,
    },
    /// A connection factory other than [`WsConnector`] failed.
    #[error("{0}")]
    Failed(String),
    /// Every attempt failed; the last error is kept.
    #[error("gave up after {attempts} attempts: {last}")]
    Exhausted {
        /// How many attempts were made.
        attempts: u32,
        /// The error of the last attempt.
        last: Box<ConnectError>,
    },
}

/// Opens connections: the seam that makes reconnect testable without a network.
///
/// Each call opens a new, independent connection to the same place (for a WebSocket: the same
/// URL, path included).
pub trait ConnectionFactory: Send + Sync + 'static {
    /// Opens one connection.
    fn connect(&self) -> BoxFuture<Result<Transport, ConnectError>>;

    /// Where connections go, for logs and errors (for example the URL).
    fn describe(&self) -> String;
}

/// How often and how soon a client tries to connect again after a failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReconnectPolicy {
    /// How many reconnect attempts follow a failure (0 disables reconnecting).
    pub attempts: u32,
    /// The delay before the first attempt; each further attempt doubles it.
    pub base_delay: Duration,
    /// The longest delay.
    pub max_delay: Duration,
}

impl Default for ReconnectPolicy {
    fn default() -> Self {
        Self {
            attempts: DEFAULT_RECONNECT_ATTEMPTS,
            base_delay: DEFAULT_RECONNECT_BASE_DELAY,
            max_delay: MAX_RECONNECT_DELAY,
        }
    }
}

impl ReconnectPolicy {
    /// A policy that never reconnects.
    pub fn never() -> Self {
        Self {
            attempts: 0,
            ..Self::default()
        }
    }

    /// A policy of `attempts` attempts starting at `base_delay`, capped at
    /// [`MAX_RECONNECT_DELAY`].
    pub fn new(attempts: u32, base_delay: Duration) -> Self {
        Self {
            attempts,
            base_delay,
            max_delay: MAX_RECONNECT_DELAY,
        }
    }

    /// The delay before attempt `attempt` (1-based): `base·2^(attempt−1)`, capped.
    pub fn delay(&self, attempt: u32) -> Duration {
        let exponent = attempt.saturating_sub(1).min(31);
        self.base_delay
            .checked_mul(1u32 << exponent)
            .unwrap_or(self.max_delay)
            .min(self.max_delay)
    }
}

/// Opens a connection through `factory`: one immediate try, then up to `policy.attempts`
/// retries, the n-th after [`ReconnectPolicy::delay`]`(n)` (tokio time).
pub async fn connect_with_backoff(
    factory: &dyn ConnectionFactory,
    policy: &ReconnectPolicy,
) -> Result<Transport, ConnectError> {
    let mut last = match factory.connect().await {
        Ok(transport) => return Ok(transport),
        Err(error) => error,
    };
    for attempt in 1..=policy.attempts {
        let delay = policy.delay(attempt);
        tracing::info!(
            target = %factory.describe(),
            attempt,
            delay_ms = delay.as_millis() as u64,
            error = %last,
            "connection failed; trying again"
        );
        tokio::time::sleep(delay).await;
        match factory.connect().await {
            Ok(transport) => return Ok(transport),
            Err(error) => last = error,
        }
    }
    if policy.attempts == 0 {
        return Err(last);
    }
    Err(ConnectError::Exhausted {
        attempts: policy.attempts + 1,
        last: Box::new(last),
    })
}

/// Connects to a `ws://` URL with tokio-tungstenite.
#[derive(Debug, Clone)]
pub struct WsConnector {
    url: String,
    heartbeat: Option<Duration>,
    connect_timeout: Duration,
}

impl WsConnector {
    /// A connector for `url`, which must be a `ws://host:port[/path]` URL. `wss://` needs TLS,
    /// which this build does not include.
    pub fn new(url: impl Into<String>) -> Result<Self, ConnectError> {
        let url = url.into();
        validate_url(&url)?;
        Ok(Self {
            url,
            heartbeat: Some(DEFAULT_HEARTBEAT),
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
        })
    }

    /// Sets the heartbeat interval; `None` (or a zero duration) disables the heartbeat.
    #[must_use]
    pub fn heartbeat(mut self, interval: Option<Duration>) -> Self {
        self.heartbeat = interval.filter(|interval| !interval.is_zero());
        self
    }

    /// Sets how long one connection attempt may take.
    #[must_use]
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// The URL.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Opens one connection.
    pub async fn open(&self) -> Result<Transport, ConnectError> {
        let connecting = Box::pin(tokio_tungstenite::connect_async_with_config(
            self.url.as_str(),
            None,
            true,
        ));
        let (socket, _response) = tokio::time::timeout(self.connect_timeout, connecting)
            .await
            .map_err(|_| ConnectError::Timeout {
                url: self.url.clone(),
                timeout: self.connect_timeout,
            })?
            .map_err(|error| ConnectError::Unreachable {
                url: self.url.clone(),
                reason: error.to_string(),
            })?;
        tracing::debug!(url = %self.url, "websocket connected");
        Ok(websocket_transport(socket, self.heartbeat))
    }
}

impl ConnectionFactory for WsConnector {
    fn connect(&self) -> BoxFuture<Result<Transport, ConnectError>> {
        let this = self.clone();
        Box::pin(async move { this.open().await })
    }

    fn describe(&self) -> String {
        self.url.clone()
    }
}

fn validate_url(url: &str) -> Result<(), ConnectError> {
    let invalid = |reason: &str| ConnectError::InvalidUrl {
        url: url.to_owned(),
        reason: reason.to_owned(),
    };
    let rest = if let Some(rest) = url.strip_prefix("ws://") {
        rest
    } else if url.starts_with("wss://") {
        return Err(invalid(
            "wss:// needs TLS, which this build does not include; use ws://",
        ));
    } else {
        return Err(invalid("the url must start with ws://"));
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    if authority.is_empty() {
        return Err(invalid("the url names no host"));
    }
    Ok(())
}

/// Wraps an established client WebSocket as a message transport with an optional heartbeat.
///
/// Text frames carry one JSON text each; binary frames are ignored; a close frame ends the
/// input. With a heartbeat, a ping goes out every interval and the input ends with an error when
/// nothing arrived from the server for two intervals.
pub fn websocket_transport<S>(socket: WebSocketStream<S>, heartbeat: Option<Duration>) -> Transport
where
    S: AsyncRead + AsyncWrite + Send + Unpin + 'static,
{
    let (sink, frames) = socket.split();
    let sink = Arc::new(Mutex::new(sink));
    let liveness = Arc::new(Liveness::new());
    let dead = CancellationToken::new();
    let ended = CancellationToken::new();
    if let Some(interval) = heartbeat.filter(|interval| !interval.is_zero()) {
        tokio::spawn(heartbeat_loop(
            Arc::downgrade(&sink),
            liveness.clone(),
            interval,
            dead.clone(),
            ended.clone(),
        ));
    }
    let incoming = incoming_frames(frames, liveness, dead, ended);
    Transport::frames(incoming, SharedSink { inner: sink })
}

/// When the last frame from the server arrived, in milliseconds since `origin`.
struct Liveness {
    origin: Instant,
    last_seen_ms: AtomicU64,
}

impl Liveness {
    fn new() -> Self {
        Self {
            origin: Instant::now(),
            last_seen_ms: AtomicU64::new(0),
        }
    }

    fn touch(&self) {
        let now = Instant::now().saturating_duration_since(self.origin);
        self.last_seen_ms
            .store(now.as_millis() as u64, Ordering::Relaxed);
    }

    fn silent_for(&self) -> Duration {
        let now = Instant::now().saturating_duration_since(self.origin);
        now.saturating_sub(Duration::from_millis(
            self.last_seen_ms.load(Ordering::Relaxed),
        ))
    }
}

/// Ends the input when dropped: the frame stream is gone, so the heartbeat must stop.
struct EndGuard(CancellationToken);

impl Drop for EndGuard {
    fn drop(&mut self) {
        self.0.cancel();
    }
}

fn incoming_frames<St>(
    frames: St,
    liveness: Arc<Liveness>,
    dead: CancellationToken,
    ended: CancellationToken,
) -> impl Stream<Item = Result<String, WsError>> + Send + 'static
where
    St: Stream<Item = Result<WsMessage, WsError>> + Send + Unpin + 'static,
{
    let state = (frames, liveness, dead, EndGuard(ended), false);
    stream::unfold(
        state,
        |(mut frames, liveness, dead, guard, finished)| async move {
            if finished {
                return None;
            }
            loop {
                let next = tokio::select! {
                    biased;
                    () = dead.cancelled() => {
                        let error = WsError::Io(std::io::Error::new(
                            std::io::ErrorKind::TimedOut,
                            "the server did not answer the heartbeat",
                        ));
                        return Some((Err(error), (frames, liveness, dead, guard, true)));
                    }
                    next = frames.next() => next,
                };
                match Frame::of(next) {
                    Frame::Text(text) => {
                        liveness.touch();
                        return Some((Ok(text), (frames, liveness, dead, guard, false)));
                    }
                    Frame::Ignored => liveness.touch(),
                    Frame::End => return None,
                    Frame::Failed(error) => {
                        return Some((Err(error), (frames, liveness, dead, guard, true)));
                    }
                }
            }
        },
    )
}

type SharedSplitSink<S> = Arc<Mutex<futures::stream::SplitSink<WebSocketStream<S>, WsMessage>>>;

/// The write half shared by the peer's writer and the heartbeat: each poll takes the lock for
/// the duration of one non-blocking call.
struct SharedSink<S> {
    inner: SharedSplitSink<S>,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl<S> Sink<String> for SharedSink<S>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    type Error = WsError;

    fn poll_ready(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        lock(&self.inner).poll_ready_unpin(cx)
    }

    fn start_send(self: Pin<&mut Self>, item: String) -> Result<(), Self::Error> {
        lock(&self.inner).start_send_unpin(WsMessage::text(item))
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        lock(&self.inner).poll_flush_unpin(cx)
    }

    fn poll_close(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        lock(&self.inner).poll_close_unpin(cx)
    }
}

impl<S> fmt::Debug for SharedSink<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SharedSink").finish_non_exhaustive()
    }
}

async fn heartbeat_loop<S>(
    sink: Weak<Mutex<futures::stream::SplitSink<WebSocketStream<S>, WsMessage>>>,
    liveness: Arc<Liveness>,
    interval: Duration,
    dead: CancellationToken,
    ended: CancellationToken,
) where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let mut ticks = tokio::time::interval_at(Instant::now() + interval, interval);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            biased;
            () = ended.cancelled() => return,
            _ = ticks.tick() => {}
        }
        if liveness.silent_for() > interval * 2 {
            tracing::warn!(
                silent_ms = liveness.silent_for().as_millis() as u64,
                "websocket heartbeat: the server went silent; ending the connection"
            );
            dead.cancel();
            return;
        }
        let Some(sink) = sink.upgrade() else {
            return;
        };
        let ping = async {
            futures::future::poll_fn(|cx| lock(&sink).poll_ready_unpin(cx)).await?;
            lock(&sink).start_send_unpin(WsMessage::Ping(Vec::new().into()))?;
            futures::future::poll_fn(|cx| lock(&sink).poll_flush_unpin(cx)).await
        };
        let sent = tokio::select! {
            biased;
            () = ended.cancelled() => return,
            sent = ping => sent,
        };
        if let Err(error) = sent {
            tracing::debug!(%error, "websocket heartbeat: the ping could not be sent");
            dead.cancel();
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_and_is_capped() {
        let policy = ReconnectPolicy::new(10, Duration::from_millis(200));
        let delays: Vec<u64> = (1..=6)
            .map(|attempt| policy.delay(attempt).as_millis() as u64)
            .collect();
        assert_eq!(delays, [200, 400, 800, 1600, 3000, 3000]);
        assert_eq!(policy.delay(200), MAX_RECONNECT_DELAY);
        let huge = ReconnectPolicy::new(1, Duration::from_secs(u64::MAX / 4));
        assert_eq!(huge.delay(3), MAX_RECONNECT_DELAY);
    }

    #[test]
    fn only_ws_urls_with_a_host_are_accepted() {
        assert!(WsConnector::new("ws://127.0.0.1:8900").is_ok());
        assert!(WsConnector::new("ws://localhost:1/acp?x=1").is_ok());
        for bad in ["http://127.0.0.1:1", "127.0.0.1:1", "ws://", "ws:///acp"] {
            let error = WsConnector::new(bad).unwrap_err();
            assert!(
                matches!(error, ConnectError::InvalidUrl { .. }),
                "{bad}: {error}"
            );
        }
        let error = WsConnector::new("wss://example.test").unwrap_err();
        assert!(error.to_string().contains("use ws://"), "{error}");
    }
}
