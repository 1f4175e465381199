//! The `/acp` listener of `ski acp serve --transport http`: Streamable HTTP and the WebSocket
//! upgrade on one loopback port, HTTP/1.1 and cleartext HTTP/2 (prior knowledge) alike, or, with
//! a certificate ([`HttpServer::with_tls`]), the same over TLS (`https://`), HTTP/2 chosen by ALPN
//! `h2` and HTTP/1.1 by `http/1.1` (what a WebSocket upgrade needs).
//!
//! # Routing (the RFD's table)
//!
//! - `POST /acp`: `Content-Type: application/json` (else 415), a body of at most
//!   [`HttpOptions::max_message_bytes`] (else 413), one JSON-RPC message (a batch is 501, bad
//!   JSON 400). Without `Acp-Connection-Id` only `initialize` is taken: it creates a
//!   connection and is answered `200` with the agent's JSON response and the
//!   `Acp-Connection-Id` header. With an unknown id, 404. A message of a session (its params'
//!   `sessionId`, or a response to an agent request of a session) needs a matching
//!   `Acp-Session-Id` (400) naming a session the agent has (404; `session/load`, `resume` and
//!   `fork` may name one this connection has not used). An `Acp-Protocol-Version` other than the
//!   negotiated one is 400. Everything else is answered `202` with an empty body.
//! - `GET /acp` with `Upgrade: websocket`: a WebSocket connection (HTTP/1.1), `101` with
//!   `Acp-Connection-Id`, one JSON-RPC message per text frame, binary frames ignored.
//! - `GET /acp` otherwise: `Accept` must name `text/event-stream` (406); `Acp-Connection-Id`
//!   (400 missing, 404 unknown) opens the connection-scoped stream, with `Acp-Session-Id` (404
//!   unknown) that session's stream (see [`super::routes`] for which messages each carries).
//! - `DELETE /acp`: ends the connection named by `Acp-Connection-Id` (400 missing, 404
//!   unknown) and its streams, `202`. Its sessions stay with the agent for `session/load`.
//! - Any other path is 404, any other method 405.
//!
//! # Bounds
//!
//! At most [`HttpOptions::max_connections`] ACP connections (Streamable HTTP and WebSocket
//! together; one more gets 503), [`HttpOptions::max_tcp_connections`] TCP connections (one more
//! is closed unanswered), request headers within [`HttpOptions::header_timeout`] on HTTP/1.1,
//! messages of [`HttpOptions::max_message_bytes`] both ways in, and [`HttpOptions::sse_queue`]
//! messages waiting per stream. Over TLS the handshake too must end within
//! [`HttpOptions::header_timeout`]. A POST waits while the agent has
//! [`super::routes::INBOUND_QUEUE`] messages of the connection unread.

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use futures::StreamExt;
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Empty, Full, Limited, StreamBody};
use hyper::body::{Bytes, Frame, Incoming};
use hyper::header::{self, HeaderValue};
use hyper::{Method, Request, Response, StatusCode, Version};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use serde_json::Value;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls::ServerConfig;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::handshake::derive_accept_key;
use tokio_tungstenite::tungstenite::protocol::{Role, WebSocketConfig};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::host::{Host, Link, ReferenceHost};
use super::routes::{Routes, Target, event_stream};
use super::{
    ATTACHING_METHODS, CONNECTION_ID_HEADER, ENDPOINT_PATH, EVENT_STREAM, PROTOCOL_VERSION_HEADER,
    SESSION_ID_HEADER,
};
use crate::acp::agent::{Agent, ConnectionOptions};
use crate::jsonrpc::DEFAULT_MAX_LINE_BYTES;
use crate::transport::ws_server::{READ_BUFFER_BYTES, WsServerError};

/// The default [`HttpOptions::sse_queue`].
pub const DEFAULT_SSE_QUEUE: usize = 1024;

/// The body type of every response.
pub type Body = UnsyncBoxBody<Bytes, Infallible>;

/// Settings of an [`HttpServer`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HttpOptions {
    /// The largest POST body and WebSocket message.
    pub max_message_bytes: usize,
    /// The most ACP connections at once (Streamable HTTP and WebSocket).
    pub max_connections: usize,
    /// The most TCP connections at once.
    pub max_tcp_connections: usize,
    /// How long an HTTP/1.1 client may take to send a request's headers.
    pub header_timeout: Duration,
    /// The most messages one SSE stream holds for its reader (see [`super::routes`]).
    pub sse_queue: usize,
}

impl Default for HttpOptions {
    fn default() -> Self {
        Self {
            max_message_bytes: DEFAULT_MAX_LINE_BYTES,
            max_connections: crate::transport::ws_server::DEFAULT_MAX_CONNECTIONS,
            max_tcp_connections: 4 * crate::transport::ws_server::DEFAULT_MAX_CONNECTIONS,
            header_timeout: Duration::from_secs(10),
            sse_queue: DEFAULT_SSE_QUEUE,
        }
    }
}

/// A bound `/acp` listener; [`HttpServer::serve`] runs it.
pub struct HttpServer {
    listener: TcpListener,
    local_addr: SocketAddr,
    options: HttpOptions,
    tls: Option<TlsAcceptor>,
}

impl std::fmt::Debug for HttpServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpServer")
            .field("local_addr", &self.local_addr)
            .field("options", &self.options)
            .field("tls", &self.tls.is_some())
            .finish_non_exhaustive()
    }
}

impl HttpServer {
    /// Binds `address` (`HOST:PORT`; port 0 picks a free port).
    pub async fn bind(address: &str, options: HttpOptions) -> Result<Self, WsServerError> {
        let addrs: Vec<SocketAddr> = tokio::net::lookup_host(address)
            .await
            .map_err(|source| WsServerError::Resolve {
                address: address.to_owned(),
                source,
            })?
            .collect();
        let mut last_error = None;
        for addr in addrs {
            match TcpListener::bind(addr).await {
                Ok(listener) => {
                    let local_addr =
                        listener
                            .local_addr()
                            .map_err(|source| WsServerError::Bind {
                                address: address.to_owned(),
                                source,
                            })?;
                    return Ok(Self {
                        listener,
                        local_addr,
                        options,
                        tls: None,
                    });
                }
                Err(error) => last_error = Some(error),
            }
        }
        Err(WsServerError::Bind {
            address: address.to_owned(),
            source: last_error.unwrap_or_else(|| {
                std::io::Error::new(std::io::ErrorKind::AddrNotAvailable, "no address to bind")
            }),
        })
    }

    /// The bound address.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Serves `https://` with `config` (see [`super::tls::server_config`]: its ALPN list
    /// decides whether HTTP/2 is offered).
    pub fn with_tls(mut self, config: Arc<ServerConfig>) -> Self {
        self.tls = Some(super::tls::acceptor(config));
        self
    }

    /// The endpoint's URL, `http://HOST:PORT/acp` (`https://` with TLS).
    pub fn url(&self) -> String {
        let scheme = if self.tls.is_some() { "https" } else { "http" };
        format!("{scheme}://{}{ENDPOINT_PATH}", self.local_addr)
    }

    /// Serves ski's reference `agent` until `shutdown` fires, then ends every connection and
    /// stops the turns.
    pub async fn serve(
        self,
        agent: Agent,
        connection: ConnectionOptions,
        shutdown: CancellationToken,
    ) {
        let connection = ConnectionOptions {
            max_message_bytes: self.options.max_message_bytes,
            ..connection
        };
        self.serve_host(Arc::new(ReferenceHost::new(agent, connection)), shutdown)
            .await;
    }

    /// Serves any agent core (see [`Host`]) until `shutdown` fires, then ends every connection
    /// and stops the host.
    pub async fn serve_host(self, host: Arc<dyn Host>, shutdown: CancellationToken) {
        let shared = Arc::new(Shared {
            host: host.clone(),
            options: self.options,
            connections: Mutex::new(HashMap::new()),
            places: Arc::new(Semaphore::new(self.options.max_connections.max(1))),
            shutdown: shutdown.clone(),
            tasks: TaskTracker::new(),
        });
        let sockets = Arc::new(Semaphore::new(self.options.max_tcp_connections.max(1)));
        loop {
            let accepted = tokio::select! {
                biased;
                () = shutdown.cancelled() => break,
                accepted = self.listener.accept() => accepted,
            };
            let (stream, remote) = match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    // Errors such as too many open files are transient; keep accepting.
                    tracing::warn!(%error, "accepting a tcp connection failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            };
            let Ok(socket) = sockets.clone().try_acquire_owned() else {
                tracing::info!(%remote, "tcp connection cap reached; connection closed unanswered");
                continue;
            };
            if let Err(error) = stream.set_nodelay(true) {
                tracing::debug!(%remote, %error, "cannot turn off Nagle's algorithm");
            }
            let shared = shared.clone();
            let tls = self.tls.clone();
            shared.tasks.clone().spawn(async move {
                match tls {
                    None => shared.serve_connection(stream, remote).await,
                    Some(acceptor) => {
                        let handshake = tokio::time::timeout(
                            shared.options.header_timeout,
                            acceptor.accept(stream),
                        );
                        let stream = tokio::select! {
                            done = handshake => done,
                            () = shared.shutdown.cancelled() => return,
                        };
                        match stream {
                            Ok(Ok(stream)) => shared.serve_connection(stream, remote).await,
                            Ok(Err(error)) => {
                                tracing::debug!(%remote, %error, "tls handshake failed");
                            }
                            Err(_) => {
                                tracing::debug!(%remote, "tls handshake not done in time; closed");
                            }
                        }
                    }
                }
                drop(socket);
            });
        }
        drop(self.listener);
        for routes in shared.lock().values() {
            routes.close();
        }
        host.stop().await;
        shared.tasks.close();
        shared.tasks.wait().await;
    }
}

/// What every request handler shares.
struct Shared {
    host: Arc<dyn Host>,
    options: HttpOptions,
    connections: Mutex<HashMap<String, Arc<Routes>>>,
    places: Arc<Semaphore>,
    shutdown: CancellationToken,
    tasks: TaskTracker,
}

/// An error response that ends a handler early (boxed: a response is large).
type Refused = Box<Response<Body>>;

/// A finished response, or the error response that ends a handler early.
type Handled = Result<Response<Body>, Refused>;

fn body(bytes: impl Into<Bytes>) -> Body {
    Full::new(bytes.into()).boxed_unsync()
}

fn empty() -> Body {
    Empty::new().boxed_unsync()
}

/// An error response with a plain-text reason.
fn refuse(status: StatusCode, reason: impl std::fmt::Display) -> Refused {
    let mut response = Response::new(body(format!("{reason}\n")));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    Box::new(response)
}

/// A header's value as text; `Err` (400) when it is not visible ASCII.
fn header_text<'r>(request: &'r Request<Incoming>, name: &str) -> Result<Option<&'r str>, Refused> {
    match request.headers().get(name) {
        None => Ok(None),
        Some(value) => value.to_str().map(Some).map_err(|_| {
            refuse(
                StatusCode::BAD_REQUEST,
                format!("the {name} header is not visible ASCII"),
            )
        }),
    }
}

/// Whether a comma-separated header names `media` (parameters ignored).
fn names_media(value: Option<&str>, media: &str) -> bool {
    value.is_some_and(|value| {
        value.split(',').any(|item| {
            item.split(';')
                .next()
                .is_some_and(|essence| essence.trim().eq_ignore_ascii_case(media))
        })
    })
}

impl Shared {
    /// Serves HTTP/1.1 or HTTP/2 (told apart by the first bytes) on one connection until it
    /// ends or the server shuts down.
    async fn serve_connection<I>(self: Arc<Self>, stream: I, remote: SocketAddr)
    where
        I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let service = {
            let shared = self.clone();
            hyper::service::service_fn(move |request| {
                let shared = shared.clone();
                async move { Ok::<_, Infallible>(shared.handle(request).await) }
            })
        };
        let mut builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
        builder
            .http1()
            .timer(TokioTimer::new())
            .header_read_timeout(self.options.header_timeout);
        let serving = builder.serve_connection_with_upgrades(TokioIo::new(stream), service);
        tokio::select! {
            result = serving => {
                if let Err(error) = result {
                    tracing::debug!(%remote, %error, "http connection ended with an error");
                }
            }
            () = self.shutdown.cancelled() => {}
        }
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<String, Arc<Routes>>> {
        self.connections
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    fn routes(&self, id: &str) -> Option<Arc<Routes>> {
        self.lock().get(id).cloned()
    }

    async fn handle(self: Arc<Self>, request: Request<Incoming>) -> Response<Body> {
        if request.uri().path() != ENDPOINT_PATH {
            return *refuse(
                StatusCode::NOT_FOUND,
                format!("no such endpoint; ACP is served at {ENDPOINT_PATH}"),
            );
        }
        let handled = match *request.method() {
            Method::POST => self.post(request).await,
            Method::GET if is_upgrade(&request) => self.upgrade(request),
            Method::GET => self.get(request),
            Method::DELETE => self.delete(&request),
            _ => {
                let mut response = refuse(
                    StatusCode::METHOD_NOT_ALLOWED,
                    "the /acp endpoint takes POST, GET and DELETE",
                );
                response
                    .headers_mut()
                    .insert(header::ALLOW, HeaderValue::from_static("GET, POST, DELETE"));
                Err(response)
            }
        };
        handled.unwrap_or_else(|response| *response)
    }

    /// The connection a request names, or the 400/404 response.
    fn named_connection(
        &self,
        request: &Request<Incoming>,
    ) -> Result<(String, Arc<Routes>), Refused> {
        let Some(id) = header_text(request, CONNECTION_ID_HEADER)? else {
            return Err(refuse(
                StatusCode::BAD_REQUEST,
                "Acp-Connection-Id is required (POST initialize without it to get one)",
            ));
        };
        match self.routes(id) {
            Some(routes) if !routes.is_closed() => Ok((id.to_owned(), routes)),
            _ => Err(refuse(
                StatusCode::NOT_FOUND,
                format!("no connection {id:?}; it ended or never existed"),
            )),
        }
    }

    async fn post(self: &Arc<Self>, request: Request<Incoming>) -> Handled {
        let content_type = header_text(&request, header::CONTENT_TYPE.as_str())?;
        if !names_media(content_type, "application/json") {
            return Err(refuse(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "a POST to /acp must have Content-Type: application/json",
            ));
        }
        let connection = match header_text(&request, CONNECTION_ID_HEADER)? {
            Some(_) => Some(self.named_connection(&request)?),
            None => None,
        };
        let session_header = header_text(&request, SESSION_ID_HEADER)?.map(str::to_owned);
        let version_header = header_text(&request, PROTOCOL_VERSION_HEADER)?.map(str::to_owned);
        let limit = self.options.max_message_bytes;
        let bytes = match Limited::new(request.into_body(), limit).collect().await {
            Ok(collected) => collected.to_bytes(),
            Err(error) if error.is::<http_body_util::LengthLimitError>() => {
                return Err(refuse(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    format!("the body exceeds the limit of {limit} bytes"),
                ));
            }
            Err(error) => {
                return Err(refuse(
                    StatusCode::BAD_REQUEST,
                    format!("cannot read the body: {error}"),
                ));
            }
        };
        let text = String::from_utf8(bytes.to_vec())
            .map_err(|_| refuse(StatusCode::BAD_REQUEST, "the body is not UTF-8"))?;
        let message: Value = serde_json::from_str(&text).map_err(|error| {
            refuse(
                StatusCode::BAD_REQUEST,
                format!("the body is not JSON: {error}"),
            )
        })?;
        if message.is_array() {
            return Err(refuse(
                StatusCode::NOT_IMPLEMENTED,
                "batch JSON-RPC requests are not supported; send one message per POST",
            ));
        }
        if !message.is_object() {
            return Err(refuse(
                StatusCode::BAD_REQUEST,
                "the body must be one JSON-RPC message (an object)",
            ));
        }
        let method = message.get("method").and_then(Value::as_str);
        let Some((_, routes)) = connection else {
            if method == Some(crate::acp::methods::INITIALIZE) && super::id_key(&message).is_some()
            {
                return self.initialize(text, &message).await;
            }
            return Err(refuse(
                StatusCode::BAD_REQUEST,
                "Acp-Connection-Id is required; only an initialize request may come without it",
            ));
        };
        if let Some(version) = version_header {
            let negotiated = routes.protocol_version();
            match version.trim().parse::<u64>() {
                Ok(version) if negotiated.is_none_or(|negotiated| negotiated == version) => {}
                _ => {
                    return Err(refuse(
                        StatusCode::BAD_REQUEST,
                        format!(
                            "Acp-Protocol-Version {version:?} is not the negotiated version {}",
                            negotiated.map_or_else(|| "(none yet)".to_owned(), |v| v.to_string())
                        ),
                    ));
                }
            }
        }
        if let Some(session) = routes.session_of(&message) {
            match session_header.as_deref() {
                None => {
                    return Err(refuse(
                        StatusCode::BAD_REQUEST,
                        format!(
                            "a message of session {session:?} needs the header Acp-Session-Id: {session}"
                        ),
                    ));
                }
                Some(named) if named != session => {
                    return Err(refuse(
                        StatusCode::BAD_REQUEST,
                        format!(
                            "Acp-Session-Id {named:?} does not match the message's session {session:?}"
                        ),
                    ));
                }
                Some(_) => {}
            }
            let attaching = method.is_some_and(|method| ATTACHING_METHODS.contains(&method));
            if !attaching && !self.host.has_session(&session) {
                return Err(refuse(
                    StatusCode::NOT_FOUND,
                    format!("no session {session:?}"),
                ));
            }
        }
        routes
            .post(text, &message)
            .await
            .map_err(|_| refuse(StatusCode::NOT_FOUND, "the connection ended"))?;
        let mut response = Response::new(empty());
        *response.status_mut() = StatusCode::ACCEPTED;
        Ok(response)
    }

    /// Creates a connection for an `initialize` POST and answers with the agent's response.
    async fn initialize(self: &Arc<Self>, text: String, message: &Value) -> Handled {
        let Ok(place) = self.places.clone().try_acquire_owned() else {
            return Err(refuse(
                StatusCode::SERVICE_UNAVAILABLE,
                format!(
                    "the server has its limit of {} connections; try again later",
                    self.options.max_connections
                ),
            ));
        };
        let id = uuid::Uuid::new_v4().to_string();
        let (routes, link) = Routes::new(self.options.sse_queue);
        self.lock().insert(id.clone(), routes.clone());
        self.drive(id.clone(), link, routes.clone(), place);
        let answer = routes.initialize(text, message).await.map_err(|_| {
            refuse(
                StatusCode::SERVICE_UNAVAILABLE,
                "the connection ended during initialize",
            )
        })?;
        let failed = serde_json::from_str::<Value>(&answer)
            .map_or(true, |answer| answer.get("error").is_some());
        let mut response = Response::new(body(answer));
        response.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        if failed {
            // A refused initialize leaves no connection behind.
            routes.close();
        } else if let Ok(value) = HeaderValue::from_str(&id) {
            response.headers_mut().insert(CONNECTION_ID_HEADER, value);
        }
        tracing::info!(connection = %id, failed, "streamable http connection initialized");
        Ok(response)
    }

    /// Runs the agent over a Streamable HTTP connection until it ends.
    fn drive(
        self: &Arc<Self>,
        id: String,
        link: Link,
        routes: Arc<Routes>,
        place: OwnedSemaphorePermit,
    ) {
        let shared = self.clone();
        self.tasks.spawn(async move {
            let mut connection = shared.host.connect(link, &id);
            tokio::select! {
                () = connection.ended() => {}
                () = routes.closed() => {}
                () = shared.shutdown.cancelled() => {}
            }
            routes.close();
            shared.lock().remove(&id);
            connection.close().await;
            tracing::info!(connection = %id, "streamable http connection ended");
            drop(place);
        });
    }

    fn get(&self, request: Request<Incoming>) -> Handled {
        let accept = header_text(&request, header::ACCEPT.as_str())?;
        if !names_media(accept, EVENT_STREAM) {
            return Err(refuse(
                StatusCode::NOT_ACCEPTABLE,
                "a GET of /acp opens an event stream: Accept must include text/event-stream (or send Upgrade: websocket)",
            ));
        }
        let (_, routes) = self.named_connection(&request)?;
        let target = match header_text(&request, SESSION_ID_HEADER)? {
            None => Target::Connection,
            Some(session) if self.host.has_session(session) => Target::Session(session.to_owned()),
            Some(session) => {
                return Err(refuse(
                    StatusCode::NOT_FOUND,
                    format!("no session {session:?}"),
                ));
            }
        };
        let Some(rx) = routes.open(&target) else {
            return Err(refuse(StatusCode::NOT_FOUND, "the connection ended"));
        };
        let events = event_stream(rx, routes).map(|event| Ok::<_, Infallible>(Frame::data(event)));
        let mut response = Response::new(StreamBody::new(events).boxed_unsync());
        let headers = response.headers_mut();
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(EVENT_STREAM));
        headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
        Ok(response)
    }

    fn delete(&self, request: &Request<Incoming>) -> Handled {
        let (id, routes) = self.named_connection(request)?;
        routes.close();
        tracing::info!(connection = %id, "connection deleted by the client");
        let mut response = Response::new(empty());
        *response.status_mut() = StatusCode::ACCEPTED;
        Ok(response)
    }

    /// Answers a WebSocket upgrade with `101` and `Acp-Connection-Id`, and runs the agent over it.
    fn upgrade(self: &Arc<Self>, mut request: Request<Incoming>) -> Handled {
        if request.version() != Version::HTTP_11 {
            return Err(refuse(
                StatusCode::BAD_REQUEST,
                "a WebSocket upgrade needs HTTP/1.1",
            ));
        }
        if header_text(&request, header::SEC_WEBSOCKET_VERSION.as_str())? != Some("13") {
            let mut response = refuse(
                StatusCode::UPGRADE_REQUIRED,
                "Sec-WebSocket-Version must be 13",
            );
            response.headers_mut().insert(
                header::SEC_WEBSOCKET_VERSION,
                HeaderValue::from_static("13"),
            );
            return Err(response);
        }
        let Some(key) = header_text(&request, header::SEC_WEBSOCKET_KEY.as_str())? else {
            return Err(refuse(
                StatusCode::BAD_REQUEST,
                "Sec-WebSocket-Key is missing",
            ));
        };
        let accept = derive_accept_key(key.as_bytes());
        let Ok(place) = self.places.clone().try_acquire_owned() else {
            return Err(refuse(
                StatusCode::SERVICE_UNAVAILABLE,
                format!(
                    "the server has its limit of {} connections; try again later",
                    self.options.max_connections
                ),
            ));
        };
        let id = uuid::Uuid::new_v4().to_string();
        let upgrade = hyper::upgrade::on(&mut request);
        let shared = self.clone();
        let label = id.clone();
        self.tasks.spawn(async move {
            let upgraded = match upgrade.await {
                Ok(upgraded) => upgraded,
                Err(error) => {
                    tracing::info!(%error, "websocket upgrade failed");
                    return;
                }
            };
            let limit = shared.options.max_message_bytes;
            let config = WebSocketConfig::default()
                .read_buffer_size(READ_BUFFER_BYTES)
                .max_message_size(Some(limit))
                .max_frame_size(Some(limit));
            let socket = WebSocketStream::from_raw_socket(
                TokioIo::new(upgraded),
                Role::Server,
                Some(config),
            )
            .await;
            tracing::info!(connection = %label, "websocket client connected");
            let mut connection = shared.host.connect(Link::websocket(socket), &label);
            tokio::select! {
                () = connection.ended() => {}
                () = shared.shutdown.cancelled() => {}
            }
            connection.close().await;
            tracing::info!(connection = %label, "websocket client disconnected");
            drop(place);
        });
        let mut response = Response::new(empty());
        *response.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
        let headers = response.headers_mut();
        headers.insert(header::UPGRADE, HeaderValue::from_static("websocket"));
        headers.insert(header::CONNECTION, HeaderValue::from_static("Upgrade"));
        if let Ok(accept) = HeaderValue::from_str(&accept) {
            headers.insert(header::SEC_WEBSOCKET_ACCEPT, accept);
        }
        if let Ok(value) = HeaderValue::from_str(&id) {
            headers.insert(CONNECTION_ID_HEADER, value);
        }
        Ok(response)
    }
}

/// Whether a GET asks for a WebSocket (`Upgrade: websocket`).
fn is_upgrade(request: &Request<Incoming>) -> bool {
    request
        .headers()
        .get_all(header::UPGRADE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .any(|value| {
            value
                .split(',')
                .any(|item| item.trim().eq_ignore_ascii_case("websocket"))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn media_lists_are_matched_by_essence() {
        assert!(names_media(
            Some("application/json; charset=utf-8"),
            "application/json"
        ));
        assert!(names_media(
            Some("text/html, text/event-stream;q=0.9"),
            EVENT_STREAM
        ));
        assert!(!names_media(Some("text/plain"), "application/json"));
        assert!(!names_media(None, EVENT_STREAM));
    }
}
