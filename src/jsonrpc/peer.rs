//! The peer: one JSON-RPC connection, symmetric (either side may send requests and
//! notifications), over any [`Transport`].
//!
//! - Outgoing requests get monotonic, unique ids, allocated only once a send permit is held, so
//!   they are contiguous however many callers race (a caller cancelled while waiting for a permit
//!   takes neither a permit nor an id).
//! - Every outgoing request waits in a pending table until its response, its timeout (tokio time,
//!   so `tokio::time::pause` drives it), the connection's end (`CallError::Eof`) or the caller
//!   dropping it; exactly one of these wins.
//! - Inbound requests run on their own tasks, so the read loop never waits on a handler beyond its
//!   first poll: a response or `$/cancel_request` is read while a long request runs. A cancelled
//!   request is answered `-32800`. Unknown methods are answered `-32601` with `data.method`.
//! - Arrival order holds up to each handler's first suspension point: a handler runs until its
//!   first await before the next message is dispatched. The read loop polls a request's handler
//!   once on its own task and spawns the rest only if it is pending, so state the handler
//!   registers before its first await (a running turn, say) is seen by a `$/cancel_request` or a
//!   notification written right behind the request. A handler must therefore not block
//!   synchronously before its first await: that would stall the read loop, and is a bug of the
//!   handler. Notification handlers keep their order among themselves on their own task, each
//!   starting only after every request read before it was polled once; a request read after a
//!   notification may start before that notification's handler has run.
//! - Inbound notifications are handled one at a time in arrival order on a separate task, fed by
//!   a queue: while [`MAX_QUEUED_NOTIFICATIONS`] wait to be handled the read loop reads nothing
//!   more (backpressure), so a slow notification handler slows the remote down instead of
//!   growing this process's memory. Only while a notification handler waits for the answer to a
//!   request of its own does the read loop read on (the answer is behind the notifications the
//!   remote sent first; stopping there would deadlock). By default a response is handed to its
//!   caller only after the notifications that arrived before it were handled, so a client sees
//!   every `session/update` before the prompt's result; a caller inside a notification handler
//!   does not wait, which avoids a deadlock.
//! - Every write goes through a bounded send gate (a FIFO semaphore): at most
//!   `max_in_flight_sends` messages are queued or being written. While the gate is full the read
//!   loop reads nothing more (backpressure): a remote that writes without reading what it is
//!   sent finds its own pipe or socket full instead of growing this process's memory. Answers the
//!   read loop owes itself (parse errors, invalid and oversize messages) queue at the gate too.
//!   With [`PeerBuilder::read_while_answers_wait`] answers queue apart, bounded in bytes, and the
//!   read loop waits only for their room: the peer reads on while its own sends wait.
//!
//! ```no_run
//! use ski::jsonrpc::{Peer, Transport, RpcError};
//! use serde_json::{Value, json};
//!
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let peer = Peer::builder()
//!     .first_id(1)
//!     .on_request("echo", |_cx, params: Option<Value>| async move {
//!         params.ok_or_else(|| RpcError::invalid_params("echo needs params"))
//!     })
//!     .spawn(Transport::stdio());
//! let result = peer.request("ping", Some(json!({}))).await?;
//! peer.close().await;
//! # let _ = result; Ok(()) }
//! ```

mod driver;
mod handler;
mod params;
mod pending;

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use serde_json::value::RawValue;
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore, mpsc, oneshot, watch};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

pub use handler::{
    BoxFuture, NotificationContext, NotificationHandler, RequestContext, RequestHandler,
    TextRequestHandler,
};

use self::handler::{Router, TypedRequest};
use self::pending::{Deadline, PendingTable};
use super::error::RpcError;
use super::framing::DEFAULT_MAX_LINE_BYTES;
use super::id::RequestId;
use super::message::{
    EncodeError, Message, Notification, Request, Response, VersionField, encode_into,
    encode_notification_into, encode_result_into,
};
use super::transport::Transport;
use super::wire::{WireEvent, WireObserver};

/// The notification either side sends to cancel one of its requests: `{"requestId": <id>}`.
pub const CANCEL_REQUEST_METHOD: &str = "$/cancel_request";

/// The default bound of the send gate.
pub const DEFAULT_MAX_IN_FLIGHT_SENDS: usize = 64;

/// The most notifications read and waiting to be handled: beyond, the read loop takes in no
/// further message until a handler finishes (unless a notification handler waits for an answer
/// from the remote).
pub const MAX_QUEUED_NOTIFICATIONS: usize = 256;

/// How long `close()` lets queued messages drain before it abandons a blocked write.
pub const DEFAULT_CLOSE_GRACE: Duration = Duration::from_secs(2);

/// Why an outgoing request did not produce a result.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    /// The remote side answered with an error object.
    #[error(transparent)]
    Rpc(RpcError),
    /// The connection ended (remote end of stream, local `close()`, or a failed write) while the
    /// request was pending.
    #[error("connection closed before the response arrived")]
    Eof,
    /// The peer was already closed (or its input had ended) when the request was made.
    #[error("not connected")]
    NotConnected,
    /// No response arrived in time.
    #[error("request {method} timed out after {timeout:?}")]
    Timeout {
        /// The request's method.
        method: String,
        /// The timeout that expired.
        timeout: Duration,
    },
    /// A response with this request's id arrived but was malformed.
    #[error("invalid response: {0}")]
    InvalidResponse(String),
    /// The result did not decode into the requested type.
    #[error("cannot decode result: {0}")]
    Decode(#[source] serde_json::Error),
    /// The params could not be encoded.
    #[error("cannot encode params: {0}")]
    Params(#[source] serde_json::Error),
    /// The request could not be sent.
    #[error(transparent)]
    Send(SendError),
}

impl From<SendError> for CallError {
    fn from(value: SendError) -> Self {
        match value {
            SendError::NotConnected => CallError::NotConnected,
            other => CallError::Send(other),
        }
    }
}

/// Why a message could not be sent.
#[derive(Debug, thiserror::Error)]
pub enum SendError {
    /// The peer is closed.
    #[error("not connected")]
    NotConnected,
    /// The message could not be encoded.
    #[error(transparent)]
    Encode(#[from] EncodeError),
    /// Writing failed; the connection is over.
    #[error("write failed: {0}")]
    Write(#[source] io::Error),
    /// Raw bytes for a frame transport were not valid UTF-8.
    #[error("a raw frame must be valid utf-8")]
    InvalidFrame,
}

/// How outgoing request ids look.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum IdStyle {
    /// Integers counting up from the first id (the TypeScript SDK, acpx, kiro).
    #[default]
    Integer,
    /// Strings made of a prefix and a counter, for example `"s2c-1"`.
    Prefixed(String),
    /// Random UUID v4 strings (the Rust SDK); unique but not contiguous.
    Uuid,
}

/// The timeout of one request.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Timeout {
    /// The peer's default (see [`PeerBuilder::request_timeout`]).
    #[default]
    Default,
    /// No timeout.
    Never,
    /// This timeout.
    After(Duration),
}

/// Options of one outgoing request.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RequestOptions {
    /// The timeout, counted from the moment the request is registered as pending.
    pub timeout: Timeout,
}

impl RequestOptions {
    /// Options with this timeout.
    pub fn timeout(timeout: Duration) -> Self {
        Self {
            timeout: Timeout::After(timeout),
        }
    }

    /// Options without a timeout.
    pub fn no_timeout() -> Self {
        Self {
            timeout: Timeout::Never,
        }
    }
}

/// A snapshot of a peer's internal state, for tests and diagnostics.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PeerStats {
    /// Outgoing requests waiting for a response.
    pub pending_requests: usize,
    /// Pending requests with an armed timeout.
    pub pending_timeouts: usize,
    /// Inbound requests whose handler has not finished.
    pub inbound_requests: usize,
    /// Send permits free right now.
    pub available_send_permits: usize,
    /// Responses ignored because no pending request had their id (unknown or duplicate).
    pub ignored_responses: u64,
    /// Lines or frames that were not JSON (or not UTF-8).
    pub parse_errors: u64,
    /// JSON texts that were not valid messages (batches, missing `jsonrpc`, bad responses, ...).
    pub invalid_messages: u64,
    /// Lines or frames over the size limit.
    pub oversize_messages: u64,
}

/// Configures and starts a [`Peer`].
pub struct PeerBuilder {
    router: Router,
    observers: Vec<Arc<dyn WireObserver>>,
    first_id: i64,
    id_style: IdStyle,
    request_timeout: Option<Duration>,
    max_in_flight_sends: usize,
    max_message_bytes: usize,
    version: VersionField,
    ordered_responses: bool,
    close_grace: Duration,
    answer_queue_bytes: Option<usize>,
}

impl fmt::Debug for PeerBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PeerBuilder")
            .field("first_id", &self.first_id)
            .field("id_style", &self.id_style)
            .field("request_timeout", &self.request_timeout)
            .field("max_in_flight_sends", &self.max_in_flight_sends)
            .field("max_message_bytes", &self.max_message_bytes)
            .field("version", &self.version)
            .field("ordered_responses", &self.ordered_responses)
            .finish_non_exhaustive()
    }
}

impl Default for PeerBuilder {
    fn default() -> Self {
        Self {
            router: Router::default(),
            observers: Vec::new(),
            first_id: 0,
            id_style: IdStyle::Integer,
            request_timeout: None,
            max_in_flight_sends: DEFAULT_MAX_IN_FLIGHT_SENDS,
            max_message_bytes: DEFAULT_MAX_LINE_BYTES,
            version: VersionField::Required,
            ordered_responses: true,
            close_grace: DEFAULT_CLOSE_GRACE,
            answer_queue_bytes: None,
        }
    }
}

impl PeerBuilder {
    /// The counter value of the first outgoing request id (default 0).
    #[must_use]
    pub fn first_id(mut self, first_id: i64) -> Self {
        self.first_id = first_id;
        self
    }

    /// How outgoing ids look (default: integers).
    #[must_use]
    pub fn id_style(mut self, style: IdStyle) -> Self {
        self.id_style = style;
        self
    }

    /// The default timeout of outgoing requests (default: none).
    #[must_use]
    pub fn request_timeout(mut self, timeout: Option<Duration>) -> Self {
        self.request_timeout = timeout;
        self
    }

    /// The bound of the send gate (default 64, at least 1).
    #[must_use]
    pub fn max_in_flight_sends(mut self, max: usize) -> Self {
        self.max_in_flight_sends = max.max(1);
        self
    }

    /// The maximum size of one inbound line or frame (default 32 MiB).
    #[must_use]
    pub fn max_message_bytes(mut self, max: usize) -> Self {
        self.max_message_bytes = max;
        self
    }

    /// The treatment of the `jsonrpc` member (default: required and written).
    #[must_use]
    pub fn version_field(mut self, version: VersionField) -> Self {
        self.version = version;
        self
    }

    /// Whether a response waits for the notifications that arrived before it to be handled
    /// (default true). A caller inside a notification handler never waits.
    #[must_use]
    pub fn ordered_responses(mut self, ordered: bool) -> Self {
        self.ordered_responses = ordered;
        self
    }

    /// Answers to inbound requests (and the read loop's own error answers) queue apart from the
    /// send gate, up to `max_bytes` of them unwritten, and the read loop waits only for that
    /// room, not for the send gate: a peer whose own requests and notifications wait for a
    /// remote that does not read goes on reading that remote, so two peers that both write before
    /// they read never wait for each other on full pipes. Past `max_bytes` (or while an answer
    /// waits for room) the read loop reads nothing more, as it does behind a full gate otherwise.
    /// Default: off (answers pass the send gate like every other message).
    #[must_use]
    pub fn read_while_answers_wait(mut self, max_bytes: usize) -> Self {
        self.answer_queue_bytes = Some(max_bytes.clamp(1, u32::MAX as usize));
        self
    }

    /// How long `close()` lets queued messages drain before abandoning a blocked write.
    #[must_use]
    pub fn close_grace(mut self, grace: Duration) -> Self {
        self.close_grace = grace;
        self
    }

    /// Adds an observer of every raw line or frame in and out.
    #[must_use]
    pub fn observer(mut self, observer: impl WireObserver) -> Self {
        self.observers.push(Arc::new(observer));
        self
    }

    /// Handles requests of `method`.
    #[must_use]
    pub fn on_request(mut self, method: impl Into<String>, handler: impl RequestHandler) -> Self {
        self.router.add_request(method.into(), Arc::new(handler));
        self
    }

    /// Handles requests of `method` with typed params and result: params that do not decode
    /// into `P` are answered `-32602`.
    #[must_use]
    pub fn on_typed_request<P, R, F, Fut>(mut self, method: impl Into<String>, handler: F) -> Self
    where
        F: Fn(RequestContext, P) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<R, RpcError>> + Send + 'static,
        P: DeserializeOwned + Send + 'static,
        R: Serialize + Send + 'static,
    {
        self.router
            .add_request(method.into(), Arc::new(TypedRequest::new(handler)));
        self
    }

    /// Handles requests of `method` from their params' text, which the handler decodes into its
    /// own types (no `Value` is built for them): see [`TextRequestHandler`].
    #[must_use]
    pub fn on_text_request(
        mut self,
        method: impl Into<String>,
        handler: impl TextRequestHandler,
    ) -> Self {
        self.router
            .add_text_request(method.into(), Arc::new(handler));
        self
    }

    /// Handles every request method without its own handler (instead of answering `-32601`).
    #[must_use]
    pub fn on_any_request(mut self, handler: impl RequestHandler) -> Self {
        self.router.set_any_request(Arc::new(handler));
        self
    }

    /// Handles notifications of `method`.
    #[must_use]
    pub fn on_notification(
        mut self,
        method: impl Into<String>,
        handler: impl NotificationHandler,
    ) -> Self {
        self.router
            .add_notification(method.into(), Arc::new(handler));
        self
    }

    /// Handles every notification method without its own handler (instead of ignoring it).
    #[must_use]
    pub fn on_any_notification(mut self, handler: impl NotificationHandler) -> Self {
        self.router.set_any_notification(Arc::new(handler));
        self
    }

    /// Starts the peer's tasks on the current tokio runtime and returns its handle.
    ///
    /// # Panics
    ///
    /// Panics when called outside a tokio runtime.
    pub fn spawn(self, transport: Transport) -> Peer {
        let frames = transport.is_frames();
        let text_params = self.router.reads_text();
        let (input, output) = transport.split(self.max_message_bytes, self.version);
        let (writes, write_rx) = mpsc::unbounded_channel();
        let (notifications, notification_rx) = mpsc::unbounded_channel();
        let (handled, _) = watch::channel(0);
        let shared = Arc::new(Shared {
            router: self.router,
            observers: self.observers,
            ids: IdAllocator {
                style: self.id_style,
                next: AtomicI64::new(self.first_id),
            },
            config: Config {
                request_timeout: self.request_timeout,
                version: self.version,
                ordered_responses: self.ordered_responses,
                close_grace: self.close_grace,
                frames,
                text_params,
            },
            pending: PendingTable::default(),
            inbound: Mutex::new(InboundTable::default()),
            gate: Arc::new(Semaphore::new(self.max_in_flight_sends)),
            answer_room: self
                .answer_queue_bytes
                .map(|bytes| (Arc::new(Semaphore::new(bytes)), bytes)),
            writes,
            closed: AtomicBool::new(false),
            closing: CancellationToken::new(),
            abort_writes: CancellationToken::new(),
            input_done: CancellationToken::new(),
            writer_done: CancellationToken::new(),
            notifications_handled: handled,
            handler_calls: watch::channel(0).0,
            inbound_idle: Notify::new(),
            counters: Counters::default(),
        });
        let peer = Peer { shared };
        let writer = driver::WriterParts {
            shared: Arc::downgrade(&peer.shared),
            observers: peer.shared.observers.clone(),
            abort_writes: peer.shared.abort_writes.clone(),
            writer_done: peer.shared.writer_done.clone(),
        };
        tokio::spawn(driver::write_loop(writer, output, write_rx));
        tokio::spawn(driver::read_loop(peer.clone(), input, notifications));
        tokio::spawn(driver::notification_loop(peer.clone(), notification_rx));
        peer
    }
}

/// A handle to one JSON-RPC connection; clones share it.
///
/// The connection ends with [`Peer::close`], or when the remote side ends its output (then
/// pending requests fail with [`CallError::Eof`], new requests fail with
/// [`CallError::NotConnected`], and sending notifications and responses still works until
/// `close()`).
#[derive(Clone)]
pub struct Peer {
    shared: Arc<Shared>,
}

impl fmt::Debug for Peer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Peer")
            .field("closed", &self.is_closed())
            .field("stats", &self.stats())
            .finish()
    }
}

impl Peer {
    /// A builder with the defaults.
    pub fn builder() -> PeerBuilder {
        PeerBuilder::default()
    }

    /// Sends a request and waits for its result, with the default timeout.
    ///
    /// `params` should be an object or an array (or `None`); anything else is sent as given and
    /// a conforming remote answers `-32600`.
    pub async fn request(
        &self,
        method: impl Into<String>,
        params: Option<Value>,
    ) -> Result<Value, CallError> {
        self.request_with(method, params, RequestOptions::default())
            .await
    }

    /// Sends a request with options and waits for its result.
    pub async fn request_with(
        &self,
        method: impl Into<String>,
        params: Option<Value>,
        options: RequestOptions,
    ) -> Result<Value, CallError> {
        self.start_request(method, params, options).await?.await
    }

    /// Sends a request with typed params and decodes its result.
    pub async fn request_typed<R: DeserializeOwned>(
        &self,
        method: impl Into<String>,
        params: &impl Serialize,
    ) -> Result<R, CallError> {
        let params = serde_json::to_value(params).map_err(CallError::Params)?;
        let result = self.request(method, Some(params)).await?;
        serde_json::from_value(result).map_err(CallError::Decode)
    }

    /// Sends a request and returns once it is queued for writing (in order with everything sent
    /// after it), with a future for its result that also tells its id (for `$/cancel_request`).
    /// A write that fails later ends that future with [`SendError::Write`]. Dropping the future
    /// forgets the request.
    pub async fn start_request(
        &self,
        method: impl Into<String>,
        params: Option<Value>,
        options: RequestOptions,
    ) -> Result<ResponseFuture, CallError> {
        let shared = &self.shared;
        if !shared.accepts_requests() {
            return Err(CallError::NotConnected);
        }
        let permit = shared.acquire_permit().await?;
        let id = shared.ids.next();
        let mut message = Message::Request(Request {
            id: id.clone(),
            method: method.into(),
            params,
        });
        let mut bytes = Vec::with_capacity(256);
        encode_into(&message, shared.config.version, &mut bytes).map_err(SendError::Encode)?;
        let method = match &mut message {
            Message::Request(request) => std::mem::take(&mut request.method),
            _ => String::new(),
        };
        let timeout = match options.timeout {
            Timeout::Default => shared.config.request_timeout,
            Timeout::Never => None,
            Timeout::After(timeout) => Some(timeout),
        };
        let deadline = timeout.map(|timeout| Deadline {
            at: Instant::now() + timeout,
            timeout,
            method,
        });
        let expires_at = deadline.as_ref().map(|deadline| deadline.at);
        let rx = shared.pending.insert(id.clone(), deadline)?;
        let guard = PendingGuard::new(shared, &id);
        // The caller waits for the response, not for the flush: a failed write completes the
        // pending entry with its error instead (one wake-up less per round trip).
        shared.enqueue(bytes, false, permit, WriteDone::Request(id.clone()))?;
        let shared = shared.clone();
        let fut_id = id.clone();
        let fut = async move {
            let guard = guard;
            let mut rx = rx;
            let delivery = match expires_at {
                Some(expires_at) => {
                    tokio::select! {
                        biased;
                        delivery = &mut rx => delivery,
                        () = tokio::time::sleep_until(expires_at) => {
                            if let Some(timeout) = shared.pending.expire(&fut_id) {
                                return Err(timeout);
                            }
                            // The response or the close got to the table first; its outcome
                            // is on the way.
                            rx.await
                        }
                    }
                }
                None => rx.await,
            };
            drop(guard);
            let Ok(delivery) = delivery else {
                return Err(CallError::Eof);
            };
            if shared.config.ordered_responses && !driver::in_notification_handler() {
                shared
                    .wait_notifications_handled(delivery.notifications_before)
                    .await;
            }
            delivery.outcome
        };
        Ok(ResponseFuture {
            id,
            fut: Box::pin(fut),
        })
    }

    /// Sends a notification.
    ///
    /// Returns once the notification is queued for writing, in order with everything sent after
    /// it, without waiting for its flush: a sender streaming updates thus lets the writer put many
    /// into one write. The send gate still bounds what is queued and unwritten, and a write that
    /// fails later closes the connection (later sends fail with `NotConnected`).
    pub async fn notify(
        &self,
        method: impl Into<String>,
        params: Option<Value>,
    ) -> Result<(), SendError> {
        let message = Message::Notification(Notification {
            method: method.into(),
            params,
        });
        self.queue_message(&message).await
    }

    /// Queues a message for writing without waiting for its flush (see [`Peer::notify`]).
    pub(crate) async fn queue_message(&self, message: &Message) -> Result<(), SendError> {
        if self.is_closed() {
            return Err(SendError::NotConnected);
        }
        let mut bytes = Vec::with_capacity(256);
        encode_into(message, self.shared.config.version, &mut bytes)?;
        self.queue_encoded(bytes).await
    }

    /// Queues the answer to an inbound request (or an error answer the read loop owes): through
    /// the answer room when the peer has one, else like any message.
    pub(crate) async fn queue_answer(&self, response: Response) -> Result<(), SendError> {
        if self.is_closed() {
            return Err(SendError::NotConnected);
        }
        let mut bytes = Vec::with_capacity(256);
        encode_into(
            &Message::Response(response),
            self.shared.config.version,
            &mut bytes,
        )?;
        self.queue_answer_encoded(bytes).await
    }

    /// As [`Peer::queue_answer`], for a success whose result is already JSON text.
    pub(crate) async fn queue_answer_text(
        &self,
        id: &RequestId,
        result: &RawValue,
    ) -> Result<(), SendError> {
        if self.is_closed() {
            return Err(SendError::NotConnected);
        }
        let mut bytes = Vec::with_capacity(64 + result.get().len());
        encode_result_into(id, result, self.shared.config.version, &mut bytes)?;
        self.queue_answer_encoded(bytes).await
    }

    async fn queue_answer_encoded(&self, bytes: Vec<u8>) -> Result<(), SendError> {
        let Some((room, bound)) = &self.shared.answer_room else {
            return self.queue_encoded(bytes).await;
        };
        // An answer longer than the whole room takes all of it.
        let wanted = u32::try_from(bytes.len().clamp(1, *bound)).unwrap_or(u32::MAX);
        let permit = room
            .clone()
            .acquire_many_owned(wanted)
            .await
            .map_err(|_| SendError::NotConnected)?;
        self.shared.enqueue(bytes, false, permit, WriteDone::Nobody)
    }

    /// Queues an encoded message (one line without its terminator) for writing.
    async fn queue_encoded(&self, bytes: Vec<u8>) -> Result<(), SendError> {
        let permit = self.shared.acquire_permit().await?;
        self.shared.enqueue(bytes, false, permit, WriteDone::Nobody)
    }

    /// Sends a notification with typed params, encoded straight from their type: the same line
    /// as [`Peer::notify`] with their value form, without building that value.
    pub async fn notify_typed<P: Serialize + ?Sized>(
        &self,
        method: &str,
        params: &P,
    ) -> Result<(), SendError> {
        if self.is_closed() {
            return Err(SendError::NotConnected);
        }
        let mut bytes = Vec::with_capacity(256);
        encode_notification_into(method, params, self.shared.config.version, &mut bytes)?;
        self.queue_encoded(bytes).await
    }

    /// Sends a notification the caller writes itself as one line into the buffer it is given,
    /// with `"jsonrpc":"2.0"` when the flag says so: for a line assembled from fixed text that is
    /// what [`Peer::notify_typed`] would write (ACP's `agent_message_chunk`, `acp::turn_lines`).
    /// A line holding a newline is refused, as every encoder here refuses one.
    pub async fn notify_encoded(
        &self,
        encode: impl FnOnce(bool, &mut Vec<u8>) -> serde_json::Result<()>,
    ) -> Result<(), SendError> {
        if self.is_closed() {
            return Err(SendError::NotConnected);
        }
        let mut bytes = Vec::with_capacity(256);
        encode(
            self.shared.config.version == VersionField::Required,
            &mut bytes,
        )
        .map_err(EncodeError::from)?;
        if memchr::memchr(b'\n', &bytes).is_some() {
            return Err(EncodeError::EmbeddedNewline.into());
        }
        self.queue_encoded(bytes).await
    }

    /// Asks the remote side to cancel one of our requests (`$/cancel_request`). The request stays
    /// pending until its answer (a result or `-32800`) arrives.
    pub async fn cancel_request(&self, id: &RequestId) -> Result<(), SendError> {
        self.notify(
            CANCEL_REQUEST_METHOD,
            Some(serde_json::json!({ "requestId": id })),
        )
        .await
    }

    /// Sends any message as it is: responses with any id, requests with ids of the caller's
    /// choosing (these are not tracked as pending), and so on.
    pub async fn send_message(&self, message: &Message) -> Result<(), SendError> {
        if self.is_closed() {
            return Err(SendError::NotConnected);
        }
        let mut bytes = Vec::with_capacity(256);
        encode_into(message, self.shared.config.version, &mut bytes)?;
        let permit = self.shared.acquire_permit().await?;
        self.shared.write(bytes, false, permit).await
    }

    /// Writes bytes exactly as given: no terminator, no check (over a frame transport: one text
    /// frame, which must be UTF-8). For producing malformed or fragmented output on purpose.
    pub async fn send_raw(&self, bytes: impl Into<Vec<u8>>) -> Result<(), SendError> {
        if self.is_closed() {
            return Err(SendError::NotConnected);
        }
        let bytes = bytes.into();
        if self.shared.config.frames && std::str::from_utf8(&bytes).is_err() {
            return Err(SendError::InvalidFrame);
        }
        let permit = self.shared.acquire_permit().await?;
        self.shared.write(bytes, true, permit).await
    }

    /// Closes the connection: every pending request fails with [`CallError::Eof`], running
    /// inbound handlers are dropped without an answer, queued messages are written (for up to the
    /// close grace), and the output is shut down (a child's stdin is closed). Idempotent; every
    /// call returns once the output is done. Later requests and sends fail with `NotConnected`.
    pub async fn close(&self) {
        self.shared.shut_down();
        let writer_done = self.shared.writer_done.cancelled();
        tokio::pin!(writer_done);
        tokio::select! {
            () = &mut writer_done => return,
            () = tokio::time::sleep(self.shared.config.close_grace) => {}
        }
        self.shared.abort_writes.cancel();
        writer_done.await;
    }

    /// Whether `close()` was called or the connection was lost on a write.
    pub fn is_closed(&self) -> bool {
        self.shared.closed.load(Ordering::SeqCst)
    }

    /// Resolves once no more input will be read: the remote side ended its output, reading
    /// failed, or the peer was closed.
    pub async fn input_closed(&self) {
        self.shared.input_done.cancelled().await;
    }

    /// Resolves once every inbound handler has finished (useful after [`Peer::input_closed`], to
    /// let running requests answer before closing).
    pub async fn handlers_idle(&self) {
        loop {
            let idle = self.shared.inbound_idle.notified();
            tokio::pin!(idle);
            // Listening before looking: a handler that ends after the look wakes this wait.
            idle.as_mut().enable();
            if self.shared.inbound_lock().entries.is_empty() {
                return;
            }
            idle.await;
        }
    }

    /// A snapshot of the internal state.
    pub fn stats(&self) -> PeerStats {
        let shared = &self.shared;
        PeerStats {
            pending_requests: shared.pending.len(),
            pending_timeouts: shared.pending.armed_timeouts(),
            inbound_requests: shared.inbound_lock().entries.len(),
            available_send_permits: shared.gate.available_permits(),
            ignored_responses: shared.counters.ignored_responses.load(Ordering::Relaxed),
            parse_errors: shared.counters.parse_errors.load(Ordering::Relaxed),
            invalid_messages: shared.counters.invalid_messages.load(Ordering::Relaxed),
            oversize_messages: shared.counters.oversize_messages.load(Ordering::Relaxed),
        }
    }
}

/// The result of a request sent with [`Peer::start_request`].
pub struct ResponseFuture {
    id: RequestId,
    fut: BoxFuture<Result<Value, CallError>>,
}

impl fmt::Debug for ResponseFuture {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResponseFuture")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

impl ResponseFuture {
    /// The id the request was sent with.
    pub fn id(&self) -> &RequestId {
        &self.id
    }
}

impl Future for ResponseFuture {
    type Output = Result<Value, CallError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.fut.as_mut().poll(cx)
    }
}

/// Removes a pending request when its caller stops waiting for any reason; counts it among the
/// requests of notification handlers while it waits, if one sent it.
struct PendingGuard {
    shared: Arc<Shared>,
    id: RequestId,
    from_notification_handler: bool,
}

impl PendingGuard {
    fn new(shared: &Arc<Shared>, id: &RequestId) -> Self {
        let from_notification_handler = driver::in_notification_handler();
        if from_notification_handler {
            shared.handler_calls.send_modify(|calls| *calls += 1);
        }
        Self {
            shared: shared.clone(),
            id: id.clone(),
            from_notification_handler,
        }
    }
}

impl Drop for PendingGuard {
    fn drop(&mut self) {
        self.shared.pending.remove(&self.id);
        if self.from_notification_handler {
            self.shared
                .handler_calls
                .send_modify(|calls| *calls = calls.saturating_sub(1));
        }
    }
}

struct Config {
    request_timeout: Option<Duration>,
    version: VersionField,
    ordered_responses: bool,
    close_grace: Duration,
    frames: bool,
    /// Some request handler reads its params as text: inbound params are kept as text.
    text_params: bool,
}

struct IdAllocator {
    style: IdStyle,
    next: AtomicI64,
}

impl IdAllocator {
    fn next(&self) -> RequestId {
        match &self.style {
            IdStyle::Integer => RequestId::Number(self.next.fetch_add(1, Ordering::SeqCst)),
            IdStyle::Prefixed(prefix) => {
                let n = self.next.fetch_add(1, Ordering::SeqCst);
                RequestId::String(format!("{prefix}{n}"))
            }
            IdStyle::Uuid => RequestId::String(uuid::Uuid::new_v4().to_string()),
        }
    }
}

#[derive(Default)]
struct Counters {
    ignored_responses: AtomicU64,
    parse_errors: AtomicU64,
    invalid_messages: AtomicU64,
    oversize_messages: AtomicU64,
}

/// Inbound requests whose handler runs, with the token that cancels each. A generation number
/// tells apart two requests that reuse one id.
#[derive(Default)]
struct InboundTable {
    next_generation: u64,
    entries: HashMap<RequestId, (u64, CancellationToken)>,
}

enum WriteCommand {
    Write {
        bytes: Vec<u8>,
        raw: bool,
        permit: OwnedSemaphorePermit,
        done: WriteDone,
    },
    Shutdown,
}

/// Who learns how a queued write ended.
enum WriteDone {
    /// A sender waiting for the flush: told the outcome either way.
    Waiter(oneshot::Sender<Result<(), SendError>>),
    /// A request's caller, which waits for the response anyway: only a failed write completes
    /// its pending entry (with the write error), so a successful write wakes nobody.
    Request(RequestId),
    /// Nobody (a notification: a failed write closes the connection).
    Nobody,
}

struct Shared {
    router: Router,
    observers: Vec<Arc<dyn WireObserver>>,
    ids: IdAllocator,
    config: Config,
    pending: PendingTable,
    inbound: Mutex<InboundTable>,
    gate: Arc<Semaphore>,
    /// With [`PeerBuilder::read_while_answers_wait`]: the bytes of answers that may wait
    /// unwritten (one permit a byte), and that bound.
    answer_room: Option<(Arc<Semaphore>, usize)>,
    writes: mpsc::UnboundedSender<WriteCommand>,
    /// Set once by `close()` or a failed write.
    closed: AtomicBool,
    /// Cancelled with `closed`: stops the read loop, the notification task and every handler.
    closing: CancellationToken,
    /// Cancelled when `close()` gives up waiting for queued writes.
    abort_writes: CancellationToken,
    input_done: CancellationToken,
    writer_done: CancellationToken,
    notifications_handled: watch::Sender<u64>,
    /// Requests sent from notification handlers and waiting for their answer: while any does,
    /// the read loop reads on past [`MAX_QUEUED_NOTIFICATIONS`].
    handler_calls: watch::Sender<usize>,
    /// Notified whenever the last running inbound handler ends (`inbound.entries` empties): a
    /// wake-up only when someone waits, where a watch channel woke its eight slots on every
    /// request.
    inbound_idle: Notify,
    counters: Counters,
}

impl Shared {
    fn accepts_requests(&self) -> bool {
        !self.closed.load(Ordering::SeqCst) && !self.input_done.is_cancelled()
    }

    fn inbound_lock(&self) -> MutexGuard<'_, InboundTable> {
        self.inbound.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn observe(&self, event: &WireEvent<'_>) {
        for observer in &self.observers {
            observer.observe(event);
        }
    }

    /// Waits for a send permit; cancel-safe (a dropped waiter holds nothing).
    async fn acquire_permit(&self) -> Result<OwnedSemaphorePermit, SendError> {
        self.gate
            .clone()
            .acquire_owned()
            .await
            .map_err(|_| SendError::NotConnected)
    }

    /// Queues bytes for the writer and waits until they were written and flushed.
    async fn write(
        &self,
        bytes: Vec<u8>,
        raw: bool,
        permit: OwnedSemaphorePermit,
    ) -> Result<(), SendError> {
        let (done, written) = oneshot::channel();
        self.enqueue(bytes, raw, permit, WriteDone::Waiter(done))?;
        written.await.unwrap_or(Err(SendError::NotConnected))
    }

    /// Queues bytes for the writer without waiting for them to be written; the permit is held
    /// until they are, and `done` learns how the write ended.
    fn enqueue(
        &self,
        bytes: Vec<u8>,
        raw: bool,
        permit: OwnedSemaphorePermit,
        done: WriteDone,
    ) -> Result<(), SendError> {
        self.writes
            .send(WriteCommand::Write {
                bytes,
                raw,
                permit,
                done,
            })
            .map_err(|_| SendError::NotConnected)
    }

    /// Marks the peer closed and starts the shutdown; idempotent.
    fn shut_down(&self) {
        if self.closed.swap(true, Ordering::SeqCst) {
            return;
        }
        self.closing.cancel();
        self.pending.close(|| CallError::Eof);
        self.gate.close();
        if let Some((room, _)) = &self.answer_room {
            room.close();
        }
        let _ = self.writes.send(WriteCommand::Shutdown);
    }

    async fn wait_notifications_handled(&self, count: u64) {
        if count == 0 {
            return;
        }
        let mut handled = self.notifications_handled.subscribe();
        // An error means the notification task is gone; nothing is left to wait for.
        let _ = handled.wait_for(|handled| *handled >= count).await;
    }
}
