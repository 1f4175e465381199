//! A WebSocket listener for JSON-RPC peers: it binds (port 0 allowed), accepts connections on
//! any path (`/acp` and `/` included), answers each upgrade with an `Acp-Connection-Id`
//! header, and hands every established connection over as a message [`Transport`] (one JSON
//! text per text frame; binary frames are ignored, pings answered). A message over
//! [`WsServerOptions::max_message_bytes`] is refused from its frame header; the peer answers it
//! -32600 with id null and the connection closes with code 1009 (see [`crate::jsonrpc`]'s
//! WebSocket transport).
//!
//! Handshakes run on their own tasks, so a slow or silent client never holds up the accept
//! loop; a handshake that does not finish within the handshake timeout is dropped. What runs
//! over each connection is up to the caller: the ACP agent gives every connection its own peer
//! over shared sessions (see [`crate::acp::agent`]).
//!
//! # Limits
//!
//! - At most [`WsServerOptions::max_connections`] connections live at once, handshakes under
//!   way included. A client past the cap gets its upgrade and then at once a close frame with
//!   code 1013 (try again later) and a reason naming the cap; at most
//!   [`MAX_REFUSALS_AT_ONCE`] such refusals run at a time, beyond which a client's TCP
//!   connection is closed unanswered.
//! - After the upgrade every connection is guarded ([`super::ws_guard`]): an inbound message must
//!   arrive whole within [`Liveness::message_timeout`] of its first byte (else close code 1008),
//!   and a client silent for [`Liveness::idle_timeout`] is pinged and must send something within
//!   [`Liveness::pong_timeout`] (else close code 1001).
//! - Each connection reads into a buffer of [`READ_BUFFER_BYTES`], grown only for a larger
//!   message, so an idle connection costs a few KiB.
//!
//! ```no_run
//! use ski::transport::ws_server::{WsServer, WsServerOptions};
//!
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let mut server = WsServer::bind("127.0.0.1:0", WsServerOptions::default()).await?;
//! eprintln!("listening on {}", server.url());
//! while let Some(connection) = server.accept().await {
//!     let transport = connection.into_transport();
//!     # let _ = transport;
//! }
//! # Ok(()) }
//! ```

use std::fmt;
use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use std::sync::Arc;

use futures::SinkExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message as WsMessage;
use tokio_tungstenite::tungstenite::handshake::server::{ErrorResponse, Request, Response};
use tokio_tungstenite::tungstenite::http::HeaderValue;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::{CloseFrame, WebSocketConfig};
use tokio_util::sync::{CancellationToken, DropGuard};

pub use super::ws_guard::{GuardedStream, Liveness};
use crate::jsonrpc::{DEFAULT_MAX_LINE_BYTES, Transport};

/// The response header that names the connection (ACP remote-transport RFD).
pub const CONNECTION_ID_HEADER: &str = "Acp-Connection-Id";

/// The path the server advertises in its URL; every other path is accepted too.
pub const ENDPOINT_PATH: &str = "/acp";

/// Established connections waiting for `accept`.
const ACCEPT_BACKLOG: usize = 64;

/// The default cap on live connections.
pub const DEFAULT_MAX_CONNECTIONS: usize = 1024;

/// How many clients past the cap are refused with a close frame at a time (each costs a few KiB
/// for at most the handshake timeout and [`REFUSAL_LINGER`]).
pub const MAX_REFUSALS_AT_ONCE: usize = 1024;

/// How long a refused client has to answer the close frame before its connection is dropped.
pub const REFUSAL_LINGER: Duration = Duration::from_secs(1);

/// The read buffer of a connection (tungstenite's default, 128 KiB, made every idle connection
/// cost that much).
pub const READ_BUFFER_BYTES: usize = 8 * 1024;

/// Close code 1013: the server is at its connection cap.
const TRY_AGAIN_LATER: u16 = 1013;

/// Settings of a [`WsServer`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WsServerOptions {
    /// The largest message (and frame) accepted from a client.
    pub max_message_bytes: usize,
    /// How long a client may take to complete the upgrade.
    pub handshake_timeout: Duration,
    /// The most connections live at once (handshakes under way included); at least 1.
    pub max_connections: usize,
    /// How long a message may take to arrive and a client may stay silent.
    pub liveness: Liveness,
}

impl Default for WsServerOptions {
    fn default() -> Self {
        Self {
            max_message_bytes: DEFAULT_MAX_LINE_BYTES,
            handshake_timeout: Duration::from_secs(10),
            max_connections: DEFAULT_MAX_CONNECTIONS,
            liveness: Liveness::default(),
        }
    }
}

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
pub enum WsServerError {
    /// The address did not resolve.
    #[error("cannot resolve {address}: {source}")]
    Resolve {
        /// The address as given.
        address: String,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// Binding failed (for example the address is in use).
    #[error("cannot listen on {address}: {source}")]
    Bind {
        /// The address as given.
        address: String,
        /// Why.
        #[source]
        source: io::Error,
    },
}

impl WsServerError {
    /// The underlying I/O error.
    pub fn io_error(&self) -> &io::Error {
        match self {
            WsServerError::Resolve { source, .. } | WsServerError::Bind { source, .. } => source,
        }
    }
}

/// One established WebSocket connection.
pub struct WsConnection {
    /// The id sent in the `Acp-Connection-Id` header.
    pub id: String,
    /// The client's address.
    pub remote: SocketAddr,
    /// The request path of the upgrade.
    pub path: String,
    socket: WebSocketStream<GuardedStream>,
}

impl fmt::Debug for WsConnection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WsConnection")
            .field("id", &self.id)
            .field("remote", &self.remote)
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl WsConnection {
    /// The connection as a JSON-RPC message transport.
    pub fn into_transport(self) -> Transport {
        Transport::websocket(self.socket)
    }

    /// The raw WebSocket, for callers that speak frames themselves.
    pub fn into_socket(self) -> WebSocketStream<GuardedStream> {
        self.socket
    }
}

/// A listening WebSocket server. Dropping it stops accepting; established connections live on.
#[derive(Debug)]
pub struct WsServer {
    local_addr: SocketAddr,
    incoming: mpsc::Receiver<WsConnection>,
    _stop: DropGuard,
}

impl WsServer {
    /// Binds `address` (`HOST:PORT`; port 0 picks a free port) and starts accepting.
    pub async fn bind(address: &str, options: WsServerOptions) -> Result<Self, WsServerError> {
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
                Ok(listener) => return Self::from_listener(listener, options),
                Err(error) => last_error = Some(error),
            }
        }
        Err(WsServerError::Bind {
            address: address.to_owned(),
            source: last_error.unwrap_or_else(|| {
                io::Error::new(io::ErrorKind::AddrNotAvailable, "no address to bind")
            }),
        })
    }

    /// Serves on an already bound listener.
    pub fn from_listener(
        listener: TcpListener,
        options: WsServerOptions,
    ) -> Result<Self, WsServerError> {
        let local_addr = listener
            .local_addr()
            .map_err(|source| WsServerError::Bind {
                address: "listener".to_owned(),
                source,
            })?;
        let (ready, incoming) = mpsc::channel(ACCEPT_BACKLOG);
        let stop = CancellationToken::new();
        tokio::spawn(accept_loop(listener, options, ready, stop.clone()));
        Ok(Self {
            local_addr,
            incoming,
            _stop: stop.drop_guard(),
        })
    }

    /// The bound address.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// The URL clients connect to, `ws://HOST:PORT/acp`.
    pub fn url(&self) -> String {
        format!("ws://{}{ENDPOINT_PATH}", self.local_addr)
    }

    /// The next established connection; `None` once the listener failed for good.
    pub async fn accept(&mut self) -> Option<WsConnection> {
        self.incoming.recv().await
    }
}

async fn accept_loop(
    listener: TcpListener,
    options: WsServerOptions,
    ready: mpsc::Sender<WsConnection>,
    stop: CancellationToken,
) {
    let places = Arc::new(Semaphore::new(options.max_connections.max(1)));
    let refusals = Arc::new(Semaphore::new(MAX_REFUSALS_AT_ONCE));
    loop {
        let accepted = tokio::select! {
            biased;
            () = stop.cancelled() => return,
            accepted = listener.accept() => accepted,
        };
        match accepted {
            Ok((stream, remote)) => match places.clone().try_acquire_owned() {
                Ok(place) => {
                    let ready = ready.clone();
                    let stop = stop.clone();
                    tokio::spawn(async move {
                        admit(stream, remote, place, options, ready, stop).await;
                    });
                }
                Err(_) => match refusals.clone().try_acquire_owned() {
                    Ok(refusal) => {
                        let stop = stop.clone();
                        tokio::spawn(async move {
                            tokio::select! {
                                biased;
                                () = stop.cancelled() => {}
                                () = refuse(stream, remote, options) => {}
                            }
                            drop(refusal);
                        });
                    }
                    Err(_) => {
                        tracing::info!(%remote, "connection cap and refusal queue full; connection closed unanswered");
                        drop(stream);
                    }
                },
            },
            Err(error) => {
                // Errors such as too many open files are transient; keep accepting.
                tracing::warn!(%error, "accepting a tcp connection failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}

/// Runs the upgrade of a connection that has its place under the cap and hands it over.
async fn admit(
    stream: TcpStream,
    remote: SocketAddr,
    place: OwnedSemaphorePermit,
    options: WsServerOptions,
    ready: mpsc::Sender<WsConnection>,
    stop: CancellationToken,
) {
    let stream = GuardedStream::new(stream, Some(place), options.liveness);
    let handshake = handshake(stream, remote, options);
    let connection = tokio::select! {
        biased;
        () = stop.cancelled() => return,
        result = tokio::time::timeout(options.handshake_timeout, handshake) => result,
    };
    match connection {
        Ok(Ok(connection)) => {
            tracing::debug!(id = %connection.id, %remote, path = %connection.path, "websocket connection established");
            if ready.send(connection).await.is_err() {
                tracing::debug!(%remote, "server gone; connection dropped");
            }
        }
        Ok(Err(error)) => {
            tracing::info!(%remote, %error, "websocket handshake failed");
        }
        Err(_) => {
            tracing::info!(%remote, "websocket handshake timed out");
        }
    }
}

/// Upgrades a connection past the cap and closes it at once with code 1013 and a reason.
async fn refuse(stream: TcpStream, remote: SocketAddr, options: WsServerOptions) {
    let stream = GuardedStream::new(stream, None, options.liveness);
    let upgrade = tokio::time::timeout(
        options.handshake_timeout,
        handshake(stream, remote, options),
    );
    let mut connection = match upgrade.await {
        Ok(Ok(connection)) => connection,
        Ok(Err(error)) => {
            tracing::info!(%remote, %error, "refusing a connection failed");
            return;
        }
        Err(_) => {
            tracing::info!(%remote, "refusing a connection timed out");
            return;
        }
    };
    let frame = CloseFrame {
        code: CloseCode::from(TRY_AGAIN_LATER),
        reason: format!(
            "the server has its limit of {} connections; try again later",
            options.max_connections
        )
        .into(),
    };
    let closing = async {
        connection
            .socket
            .send(WsMessage::Close(Some(frame)))
            .await?;
        // The client's close frame (or its end) completes the closing handshake.
        while let Some(Ok(_)) = futures::StreamExt::next(&mut connection.socket).await {}
        Ok::<_, tokio_tungstenite::tungstenite::Error>(())
    };
    // A client that does not answer the close frame is dropped after a moment.
    match tokio::time::timeout(REFUSAL_LINGER, closing).await {
        Ok(Err(error)) => tracing::info!(%remote, %error, "refusing a connection failed"),
        Ok(Ok(())) | Err(_) => {
            tracing::info!(%remote, "connection refused: the server is at its cap");
        }
    }
}

// The callback's error type is tungstenite's own rejection response, large or not.
#[allow(clippy::result_large_err)]
async fn handshake(
    stream: GuardedStream,
    remote: SocketAddr,
    options: WsServerOptions,
) -> Result<WsConnection, tokio_tungstenite::tungstenite::Error> {
    // Small JSON-RPC messages must not wait for Nagle's algorithm (a round trip would take the
    // peer's delayed-ACK time, some 40 ms).
    if let Err(error) = stream.get_ref().set_nodelay(true) {
        tracing::debug!(%remote, %error, "cannot turn off Nagle's algorithm");
    }
    let id = uuid::Uuid::new_v4().to_string();
    let mut path = String::new();
    let header_id = id.clone();
    let path_out = &mut path;
    let callback = |request: &Request, mut response: Response| -> Result<Response, ErrorResponse> {
        *path_out = request.uri().path().to_owned();
        if let Ok(value) = HeaderValue::from_str(&header_id) {
            response.headers_mut().insert(CONNECTION_ID_HEADER, value);
        }
        Ok(response)
    };
    let config = WebSocketConfig::default()
        .read_buffer_size(READ_BUFFER_BYTES)
        .max_message_size(Some(options.max_message_bytes))
        .max_frame_size(Some(options.max_message_bytes));
    let socket =
        tokio_tungstenite::accept_hdr_async_with_config(stream, callback, Some(config)).await?;
    Ok(WsConnection {
        id,
        remote,
        path,
        socket,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn accepted_connections_send_without_nagle_delay() {
        let mut server = WsServer::bind("127.0.0.1:0", WsServerOptions::default())
            .await
            .unwrap();
        let url = server.url();
        let client = tokio::spawn(async move {
            Box::pin(tokio_tungstenite::connect_async(url.as_str()))
                .await
                .unwrap()
        });
        let connection = server.accept().await.unwrap();
        let socket = connection.into_socket();
        assert!(socket.get_ref().get_ref().nodelay().unwrap());
        drop(client.await.unwrap());
    }
}
