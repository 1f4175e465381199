//! The client side of ACP's remote transport, both profiles, as connection factories for the ACP
//! client ([`crate::transport::ws_client::ConnectionFactory`]), each with a [`CookieJar`] kept
//! for as long as the factory lives (across reconnects too).
//!
//! - [`StreamableConnector`]: Streamable HTTP over one HTTP/2 connection, as the RFD requires:
//!   cleartext with prior knowledge for `http://`, TLS with ALPN `h2` for `https://`. `initialize` is POSTed without `Acp-Connection-Id` and its
//!   `200` answer read from the body; then the connection-scoped stream is opened with `GET`
//!   (`Accept: text/event-stream`), and before the first message of a session that session's
//!   stream. Every POST has `Content-Type: application/json`, `Acp-Connection-Id`, the
//!   negotiated `Acp-Protocol-Version`, and `Acp-Session-Id` when the message belongs to a
//!   session (its params' `sessionId`, or a response to an agent request of a session); it must
//!   be answered `202`. A request refused with another status is answered locally with a
//!   JSON-RPC error (-32603) naming the status. Closing the transport sends `DELETE`; the end of
//!   the connection-scoped stream ends the input.
//! - [`UpgradeConnector`]: the WebSocket profile, an upgrade of `GET /acp` (the `http://` URL
//!   becomes `ws://`, `https://` becomes `wss://` over TLS with ALPN `http/1.1`), cookies sent
//!   with the upgrade and taken from its answer.
//!
//! An `https://` endpoint's certificate is checked against the CA file given
//! ([`connector`]'s `ca_cert`) or else the platform's roots ([`super::tls::client_config`]).
//! Cookies the server marks `Secure` are kept and sent only over `https://`.

use std::collections::{HashMap, HashSet};
use std::convert::Infallible;
use std::future::Future;
use std::path::Path;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll, ready};
use std::time::Duration;

use futures::{Sink, StreamExt};
use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::client::conn::http2::SendRequest;
use hyper::header::{self, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioExecutor, TokioIo};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_rustls::rustls::ClientConfig;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_util::sync::{CancellationToken, WaitForCancellationFutureOwned};

use super::cookies::CookieJar;
use super::sse::SseReader;
use super::{
    CONNECTION_ID_HEADER, EVENT_STREAM, PROTOCOL_VERSION_HEADER, SESSION_ID_HEADER, id_key,
    params_session,
};
use crate::jsonrpc::peer::BoxFuture;
use crate::jsonrpc::{DEFAULT_MAX_LINE_BYTES, Transport};
use crate::transport::ws_client::{
    ConnectError, ConnectionFactory, DEFAULT_CONNECT_TIMEOUT, websocket_transport,
};

/// Which profile of the remote transport a client speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Profile {
    /// The WebSocket upgrade of `GET /acp` (what the RFD has every client support).
    WebSocket,
    /// Streamable HTTP: POST, SSE GET streams, DELETE, over HTTP/2.
    Streamable,
}

/// Messages waiting to be POSTed; the sender waits past it.
const OUTBOUND_QUEUE: usize = 64;

/// How long closing the transport waits for the answer to its `DELETE`.
const DELETE_WAIT: Duration = Duration::from_secs(5);

/// Messages read from the streams and not yet taken by the peer.
const INBOUND_QUEUE: usize = 64;

/// The host, port and path of an `http://` or `https://` endpoint URL.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Endpoint {
    url: String,
    authority: String,
    path_and_query: String,
    /// `https://`: TLS.
    secure: bool,
}

impl Endpoint {
    fn scheme(&self, plain: &'static str, secure: &'static str) -> &'static str {
        if self.secure { secure } else { plain }
    }
}

/// The TLS settings of a connector: `None` for `http://`; for `https://` the CA file's
/// authorities, or the platform's roots, offering `alpn`.
fn client_tls(
    endpoint: &Endpoint,
    ca_cert: Option<&Path>,
    alpn: &[u8],
) -> Result<Option<Arc<ClientConfig>>, ConnectError> {
    if !endpoint.secure {
        if let Some(ca) = ca_cert {
            return Err(ConnectError::InvalidUrl {
                url: endpoint.url.clone(),
                reason: format!(
                    "a CA file ({}) applies only to an https:// endpoint",
                    ca.display()
                ),
            });
        }
        return Ok(None);
    }
    super::tls::client_config(ca_cert, &[alpn])
        .map(Some)
        .map_err(|error| ConnectError::Failed(error.to_string()))
}

fn parse_endpoint(url: &str) -> Result<Endpoint, ConnectError> {
    let invalid = |reason: &str| ConnectError::InvalidUrl {
        url: url.to_owned(),
        reason: reason.to_owned(),
    };
    let (rest, secure) = if let Some(rest) = url.strip_prefix("http://") {
        (rest, false)
    } else if let Some(rest) = url.strip_prefix("https://") {
        (rest, true)
    } else {
        return Err(invalid("the url must start with http:// or https://"));
    };
    let split = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, path) = rest.split_at(split);
    if authority.is_empty() {
        return Err(invalid("the url names no host"));
    }
    let authority = if authority
        .rsplit_once(':')
        .is_some_and(|(_, port)| !port.is_empty() && port.bytes().all(|b| b.is_ascii_digit()))
    {
        authority.to_owned()
    } else {
        format!("{authority}:{}", if secure { 443 } else { 80 })
    };
    let path = path.split('#').next().unwrap_or_default();
    Ok(Endpoint {
        url: url.to_owned(),
        secure,
        authority,
        path_and_query: if path.is_empty() {
            "/".to_owned()
        } else {
            path.to_owned()
        },
    })
}

/// The connector of a profile for an `http(s)://HOST:PORT/PATH` URL; `ca_cert`, a PEM file of
/// the authorities an `https://` server's certificate is checked against (else the platform's
/// roots), is refused for `http://`.
pub fn connector(
    url: &str,
    profile: Profile,
    heartbeat: Option<Duration>,
    ca_cert: Option<&Path>,
) -> Result<Arc<dyn ConnectionFactory>, ConnectError> {
    Ok(match profile {
        Profile::Streamable => Arc::new(StreamableConnector::with_ca(url, ca_cert)?),
        Profile::WebSocket => {
            Arc::new(UpgradeConnector::with_ca(url, ca_cert)?.heartbeat(heartbeat))
        }
    })
}

/// Connects TCP to the endpoint, then TLS when it is `https://`, requiring `alpn` to be chosen.
async fn open_stream(
    endpoint: &Endpoint,
    tls: Option<&Arc<ClientConfig>>,
    alpn: &[u8],
) -> Result<Box<dyn Stream>, ConnectError> {
    let unreachable = |reason: String| ConnectError::Unreachable {
        url: endpoint.url.clone(),
        reason,
    };
    let tcp = tokio::net::TcpStream::connect(&endpoint.authority)
        .await
        .map_err(|error| unreachable(error.to_string()))?;
    let _ = tcp.set_nodelay(true);
    let Some(tls) = tls else {
        return Ok(Box::new(tcp));
    };
    let stream = super::tls::connect(tls.clone(), &endpoint.authority, tcp)
        .await
        .map_err(unreachable)?;
    if super::tls::negotiated(&stream) != Some(alpn) {
        return Err(unreachable(format!(
            "the server did not choose {} by ALPN in the TLS handshake",
            String::from_utf8_lossy(alpn)
        )));
    }
    Ok(Box::new(stream))
}

/// A byte stream to the server, TCP or TLS over TCP.
trait Stream: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static {}

impl<S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static> Stream for S {}

/// Opens Streamable HTTP connections to one endpoint.
#[derive(Debug, Clone)]
pub struct StreamableConnector {
    endpoint: Endpoint,
    tls: Option<Arc<ClientConfig>>,
    jar: Arc<Mutex<CookieJar>>,
    connect_timeout: Duration,
    max_message_bytes: usize,
}

impl StreamableConnector {
    /// A connector for an `http://` or `https://` URL (the platform's roots for `https://`).
    pub fn new(url: &str) -> Result<Self, ConnectError> {
        Self::with_ca(url, None)
    }

    /// A connector whose `https://` server is checked against the CA file `ca_cert`.
    pub fn with_ca(url: &str, ca_cert: Option<&Path>) -> Result<Self, ConnectError> {
        let endpoint = parse_endpoint(url)?;
        Ok(Self {
            tls: client_tls(&endpoint, ca_cert, super::tls::ALPN_H2)?,
            endpoint,
            jar: Arc::default(),
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            max_message_bytes: DEFAULT_MAX_LINE_BYTES,
        })
    }

    /// The cookies kept so far.
    pub fn cookies(&self) -> CookieJar {
        self.jar
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Opens one connection: an HTTP/2 connection to the server, as a message transport. The
    /// ACP connection itself starts with the first message sent, `initialize`.
    pub async fn open(&self) -> Result<Transport, ConnectError> {
        let unreachable = |reason: String| ConnectError::Unreachable {
            url: self.endpoint.url.clone(),
            reason,
        };
        let connecting = async {
            let stream =
                open_stream(&self.endpoint, self.tls.as_ref(), super::tls::ALPN_H2).await?;
            hyper::client::conn::http2::Builder::new(TokioExecutor::new())
                .handshake::<_, Full<Bytes>>(TokioIo::new(stream))
                .await
                .map_err(|error| unreachable(format!("HTTP/2 handshake failed: {error}")))
        };
        let (send, connection) = tokio::time::timeout(self.connect_timeout, connecting)
            .await
            .map_err(|_| ConnectError::Timeout {
                url: self.endpoint.url.clone(),
                timeout: self.connect_timeout,
            })??;
        let ended = CancellationToken::new();
        {
            let ended = ended.clone();
            tokio::spawn(async move {
                if let Err(error) = connection.await {
                    tracing::debug!(%error, "HTTP/2 connection failed");
                }
                ended.cancel();
            });
        }
        let (inbound, inbound_rx) = mpsc::channel::<String>(INBOUND_QUEUE);
        let state = Arc::new(ClientState {
            send,
            endpoint: self.endpoint.clone(),
            jar: self.jar.clone(),
            inner: Mutex::default(),
            inbound,
            ended: ended.clone(),
            max_message_bytes: self.max_message_bytes,
        });
        let (messages, mut outbound_rx) = futures::channel::mpsc::channel::<String>(OUTBOUND_QUEUE);
        let outgoing = Outgoing {
            messages,
            ended: ended.clone(),
            waiting: None,
        };
        {
            let state = state.clone();
            tokio::spawn(async move {
                loop {
                    let next = tokio::select! {
                        biased;
                        () = state.ended.cancelled() => break,
                        next = outbound_rx.next() => next,
                    };
                    let Some(message) = next else {
                        if tokio::time::timeout(DELETE_WAIT, state.delete())
                            .await
                            .is_err()
                        {
                            tracing::debug!("no answer to the connection's DELETE");
                        }
                        break;
                    };
                    if let Err(error) = state.post(message).await {
                        tracing::warn!(%error, "ACP over Streamable HTTP: the connection is lost");
                        break;
                    }
                }
                state.ended.cancel();
            });
        }
        let incoming = futures::stream::unfold((inbound_rx, ended), |(mut rx, ended)| async move {
            let message = tokio::select! {
                message = rx.recv() => message,
                () = ended.cancelled() => rx.try_recv().ok(),
            }?;
            Some((Ok::<_, Infallible>(message), (rx, ended)))
        });
        Ok(Transport::frames(incoming, outgoing))
    }
}

/// The Streamable HTTP transport's sink: messages go to the task that POSTs them, and closing
/// it waits until that task has ended, after its `DELETE` (or the connection was lost), so a
/// client that closes its transport and exits has ended the connection on the server.
struct Outgoing {
    messages: futures::channel::mpsc::Sender<String>,
    /// Cancelled when the POSTing task ends.
    ended: CancellationToken,
    waiting: Option<Pin<Box<WaitForCancellationFutureOwned>>>,
}

impl Sink<String> for Outgoing {
    type Error = futures::channel::mpsc::SendError;

    fn poll_ready(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.messages.poll_ready(cx)
    }

    fn start_send(mut self: Pin<&mut Self>, message: String) -> Result<(), Self::Error> {
        self.messages.start_send(message)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Pin::new(&mut self.messages).poll_flush(cx)
    }

    fn poll_close(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        ready!(Pin::new(&mut self.messages).poll_close(cx))?;
        let this = &mut *self;
        let ended = &this.ended;
        let waiting = this
            .waiting
            .get_or_insert_with(|| Box::pin(ended.clone().cancelled_owned()));
        waiting.as_mut().poll(cx).map(Ok)
    }
}

impl ConnectionFactory for StreamableConnector {
    fn connect(&self) -> BoxFuture<Result<Transport, ConnectError>> {
        let this = self.clone();
        Box::pin(async move { this.open().await })
    }

    fn describe(&self) -> String {
        self.endpoint.url.clone()
    }
}

#[derive(Default)]
struct Inner {
    connection_id: Option<String>,
    protocol_version: Option<u64>,
    open_sessions: HashSet<String>,
    /// The session of each agent request not yet answered, by id.
    agent_requests: HashMap<String, String>,
}

/// One Streamable HTTP connection's client state.
struct ClientState {
    send: SendRequest<Full<Bytes>>,
    endpoint: Endpoint,
    jar: Arc<Mutex<CookieJar>>,
    inner: Mutex<Inner>,
    inbound: mpsc::Sender<String>,
    ended: CancellationToken,
    max_message_bytes: usize,
}

/// A failure that ends the connection.
#[derive(Debug, thiserror::Error)]
enum Lost {
    #[error("HTTP request failed: {0}")]
    Http(#[from] hyper::Error),
    #[error("{0}")]
    Refused(String),
}

impl ClientState {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A request to the endpoint with the connection's headers and cookies.
    fn request(&self, method: Method, session: Option<&str>, body: Bytes) -> Request<Full<Bytes>> {
        let uri = format!(
            "{}://{}{}",
            self.endpoint.scheme("http", "https"),
            self.endpoint.authority,
            self.endpoint.path_and_query
        );
        let mut request = Request::new(Full::new(body));
        *request.method_mut() = method;
        *request.uri_mut() = uri.parse().unwrap_or_default();
        let headers = request.headers_mut();
        let (connection, version) = {
            let inner = self.lock();
            (inner.connection_id.clone(), inner.protocol_version)
        };
        if let Some(value) = connection.and_then(|id| HeaderValue::from_str(&id).ok()) {
            headers.insert(CONNECTION_ID_HEADER, value);
        }
        if let Some(version) = version {
            headers.insert(PROTOCOL_VERSION_HEADER, HeaderValue::from(version));
        }
        if let Some(value) = session.and_then(|id| HeaderValue::from_str(id).ok()) {
            headers.insert(SESSION_ID_HEADER, value);
        }
        if let Some(cookies) = self
            .jar
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .header(self.endpoint.secure)
        {
            headers.insert(header::COOKIE, cookies);
        }
        request
    }

    async fn exchange(&self, request: Request<Full<Bytes>>) -> Result<Response<Incoming>, Lost> {
        let mut send = self.send.clone();
        send.ready().await?;
        let response = send.send_request(request).await?;
        self.jar
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .store(response.headers(), self.endpoint.secure);
        Ok(response)
    }

    /// Reads a response body as text, at most the message bound.
    async fn text(&self, response: Response<Incoming>) -> Result<String, Lost> {
        let limited = http_body_util::Limited::new(response.into_body(), self.max_message_bytes);
        let bytes = limited
            .collect()
            .await
            .map_err(|error| Lost::Refused(format!("cannot read a response body: {error}")))?
            .to_bytes();
        String::from_utf8(bytes.to_vec())
            .map_err(|_| Lost::Refused("a response body is not UTF-8".to_owned()))
    }

    /// Sends one client message.
    async fn post(self: &Arc<Self>, text: String) -> Result<(), Lost> {
        let message: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        let method = message.get("method").and_then(Value::as_str);
        let connected = self.lock().connection_id.is_some();
        if !connected {
            if method != Some(crate::acp::methods::INITIALIZE) {
                return Err(Lost::Refused(format!(
                    "the first message over Streamable HTTP must be initialize, not {}",
                    method.unwrap_or("a response")
                )));
            }
            return self.initialize(text).await;
        }
        let session = match method {
            Some(_) => params_session(&message).map(str::to_owned),
            None => id_key(&message).and_then(|key| self.lock().agent_requests.remove(&key)),
        };
        if let Some(session) = &session {
            let open = self.lock().open_sessions.contains(session);
            if !open {
                self.open_stream(Some(session.clone())).await?;
            }
        }
        let mut request = self.request(Method::POST, session.as_deref(), Bytes::from(text));
        let headers = request.headers_mut();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        headers.insert(
            header::ACCEPT,
            HeaderValue::from_static("application/json, text/event-stream"),
        );
        let response = self.exchange(request).await?;
        let status = response.status();
        if status == StatusCode::ACCEPTED || status == StatusCode::OK {
            return Ok(());
        }
        let reason = self.text(response).await.unwrap_or_default();
        let reason = format!(
            "the server answered the POST with HTTP {status}: {}",
            reason.trim()
        );
        if status == StatusCode::NOT_FOUND && reason.contains("no connection") {
            return Err(Lost::Refused(reason));
        }
        tracing::warn!(%reason, "a message was refused");
        if let (Some(_), Some(id)) = (method, message.get("id").filter(|id| !id.is_null())) {
            let answer =
                json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32603, "message": reason}});
            let _ = self.inbound.send(answer.to_string()).await;
        }
        Ok(())
    }

    /// POSTs the `initialize` that creates the connection, keeps its id and negotiated version,
    /// opens the connection-scoped stream and passes the answer on.
    async fn initialize(self: &Arc<Self>, text: String) -> Result<(), Lost> {
        let mut request = self.request(Method::POST, None, Bytes::from(text));
        let headers = request.headers_mut();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        headers.insert(
            header::ACCEPT,
            HeaderValue::from_static("application/json, text/event-stream"),
        );
        let response = self.exchange(request).await?;
        let status = response.status();
        let connection = response
            .headers()
            .get(CONNECTION_ID_HEADER)
            .and_then(|value| value.to_str().ok())
            .map(str::to_owned);
        let body = self.text(response).await?;
        if status != StatusCode::OK {
            return Err(Lost::Refused(format!(
                "the server answered initialize with HTTP {status}: {}",
                body.trim()
            )));
        }
        let answer: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
        let Some(connection) = connection else {
            // A refused initialize: pass the error on, there is no connection.
            let _ = self.inbound.send(body).await;
            return Err(Lost::Refused(
                "initialize created no connection (no Acp-Connection-Id)".to_owned(),
            ));
        };
        {
            let mut inner = self.lock();
            inner.connection_id = Some(connection);
            inner.protocol_version = answer
                .get("result")
                .and_then(|result| result.get("protocolVersion"))
                .and_then(Value::as_u64);
        }
        self.open_stream(None).await?;
        let _ = self.inbound.send(body).await;
        Ok(())
    }

    /// Opens the connection-scoped stream, or a session's, and reads it on a task of its own.
    async fn open_stream(self: &Arc<Self>, session: Option<String>) -> Result<(), Lost> {
        let mut request = self.request(Method::GET, session.as_deref(), Bytes::new());
        request
            .headers_mut()
            .insert(header::ACCEPT, HeaderValue::from_static(EVENT_STREAM));
        let response = self.exchange(request).await?;
        let status = response.status();
        if status != StatusCode::OK {
            let body = self.text(response).await.unwrap_or_default();
            let reason = format!(
                "GET of the {} stream answered HTTP {status}: {}",
                scope(session.as_deref()),
                body.trim()
            );
            if session.is_none() {
                return Err(Lost::Refused(reason));
            }
            tracing::warn!(%reason, "a session stream did not open");
            return Ok(());
        }
        if let Some(session) = &session {
            self.lock().open_sessions.insert(session.clone());
        }
        let state = self.clone();
        tokio::spawn(async move {
            let result = state.read_stream(response.into_body()).await;
            if let Err(reason) = &result {
                tracing::warn!(stream = %scope(session.as_deref()), %reason, "an event stream failed");
            }
            match session {
                Some(session) => {
                    state.lock().open_sessions.remove(&session);
                }
                None => state.ended.cancel(),
            }
        });
        Ok(())
    }

    async fn read_stream(&self, mut body: Incoming) -> Result<(), String> {
        let mut reader = SseReader::new(self.max_message_bytes);
        loop {
            let frame = tokio::select! {
                () = self.ended.cancelled() => return Ok(()),
                frame = body.frame() => frame,
            };
            let Some(frame) = frame else { return Ok(()) };
            let frame = frame.map_err(|error| error.to_string())?;
            let Ok(data) = frame.into_data() else {
                continue;
            };
            for event in reader.push(&data).map_err(|error| error.to_string())? {
                if let Ok(message) = serde_json::from_str::<Value>(&event)
                    && message.get("method").is_some()
                    && let (Some(key), Some(session)) = (id_key(&message), params_session(&message))
                {
                    self.lock().agent_requests.insert(key, session.to_owned());
                }
                if self.inbound.send(event).await.is_err() {
                    return Ok(());
                }
            }
        }
    }

    /// Ends the connection with `DELETE`.
    async fn delete(&self) {
        if self.lock().connection_id.is_none() {
            return;
        }
        let request = self.request(Method::DELETE, None, Bytes::new());
        match self.exchange(request).await {
            Ok(response) => tracing::debug!(status = %response.status(), "connection deleted"),
            Err(error) => tracing::debug!(%error, "DELETE of the connection failed"),
        }
    }
}

fn scope(session: Option<&str>) -> String {
    session.map_or_else(
        || "connection-scoped".to_owned(),
        |id| format!("session {id:?}"),
    )
}

/// Opens WebSocket connections to an `/acp` endpoint (the upgrade profile), keeping cookies.
#[derive(Debug, Clone)]
pub struct UpgradeConnector {
    endpoint: Endpoint,
    tls: Option<Arc<ClientConfig>>,
    jar: Arc<Mutex<CookieJar>>,
    heartbeat: Option<Duration>,
    connect_timeout: Duration,
}

impl UpgradeConnector {
    /// A connector for an `http://` or `https://` URL (the platform's roots for `https://`).
    pub fn new(url: &str) -> Result<Self, ConnectError> {
        Self::with_ca(url, None)
    }

    /// A connector whose `https://` server is checked against the CA file `ca_cert`.
    pub fn with_ca(url: &str, ca_cert: Option<&Path>) -> Result<Self, ConnectError> {
        let endpoint = parse_endpoint(url)?;
        Ok(Self {
            tls: client_tls(&endpoint, ca_cert, super::tls::ALPN_HTTP1)?,
            endpoint,
            jar: Arc::default(),
            heartbeat: None,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
        })
    }

    /// Sends a ping every `interval` (`None` or zero: never).
    pub fn heartbeat(mut self, interval: Option<Duration>) -> Self {
        self.heartbeat = interval.filter(|interval| !interval.is_zero());
        self
    }

    /// The cookies kept so far.
    pub fn cookies(&self) -> CookieJar {
        self.jar
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Opens one connection.
    pub async fn open(&self) -> Result<Transport, ConnectError> {
        let url = format!(
            "{}://{}{}",
            self.endpoint.scheme("ws", "wss"),
            self.endpoint.authority,
            self.endpoint.path_and_query
        );
        let unreachable = |reason: String| ConnectError::Unreachable {
            url: self.endpoint.url.clone(),
            reason,
        };
        let mut request = url
            .as_str()
            .into_client_request()
            .map_err(|error| unreachable(error.to_string()))?;
        if let Some(cookies) = self
            .jar
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .header(self.endpoint.secure)
        {
            request.headers_mut().insert(header::COOKIE, cookies);
        }
        let connecting = Box::pin(async {
            let stream =
                open_stream(&self.endpoint, self.tls.as_ref(), super::tls::ALPN_HTTP1).await?;
            tokio_tungstenite::client_async_with_config(request, stream, None)
                .await
                .map_err(|error| unreachable(error.to_string()))
        });
        let (socket, response) = tokio::time::timeout(self.connect_timeout, connecting)
            .await
            .map_err(|_| ConnectError::Timeout {
                url: self.endpoint.url.clone(),
                timeout: self.connect_timeout,
            })??;
        self.jar
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .store(response.headers(), self.endpoint.secure);
        tracing::debug!(
            url = %self.endpoint.url,
            connection = ?response.headers().get(CONNECTION_ID_HEADER),
            "websocket connected"
        );
        Ok(websocket_transport(socket, self.heartbeat))
    }
}

impl ConnectionFactory for UpgradeConnector {
    fn connect(&self) -> BoxFuture<Result<Transport, ConnectError>> {
        let this = self.clone();
        Box::pin(async move { this.open().await })
    }

    fn describe(&self) -> String {
        self.endpoint.url.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_are_http_urls_with_a_host() {
        let endpoint = parse_endpoint("http://127.0.0.1:9/acp").unwrap();
        assert_eq!(endpoint.authority, "127.0.0.1:9");
        assert_eq!(endpoint.path_and_query, "/acp");
        assert!(!endpoint.secure);
        assert_eq!(
            parse_endpoint("http://example/").unwrap().authority,
            "example:80"
        );
        let secure = parse_endpoint("https://example/acp").unwrap();
        assert!(secure.secure);
        assert_eq!(secure.authority, "example:443");
        for bad in ["ws://h/acp", "wss://h/acp", "http:///acp", "https:///acp"] {
            assert!(parse_endpoint(bad).is_err(), "{bad}");
        }
    }
}
