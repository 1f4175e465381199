//! ACP's remote transport (the "Streamable HTTP & WebSocket Transport" RFD): one `/acp` endpoint
//! that serves both profiles, and the client side of each.
//!
//! - [`server`]: the listener of `ski acp serve --transport http`. `POST /acp` carries client
//!   messages (`initialize` answered `200` with JSON and `Acp-Connection-Id`, every other
//!   message `202`), `GET /acp` opens a connection-scoped or (with `Acp-Session-Id`) a
//!   session-scoped SSE stream, `GET /acp` with `Upgrade: websocket` opens a WebSocket
//!   connection, `DELETE /acp` ends a connection. HTTP/1.1 and cleartext HTTP/2 (prior
//!   knowledge) on one port, or with a certificate `https://`: HTTP/2 chosen by ALPN `h2`,
//!   HTTP/1.1 (`http/1.1`) for the WebSocket upgrade.
//! - [`host`]: the seam to the agent core the server drives ([`host::Host`]): ski's reference
//!   agent, or another (the mock agent), given each connection as a [`host::Link`].
//! - [`routes`]: one Streamable HTTP connection: which stream carries each message the agent
//!   sends, and the bounded queue of each stream.
//! - [`sse`]: Server-Sent Events, written and read with a size bound.
//! - [`client`]: the Streamable HTTP client transport (HTTP/2, cookies kept), a
//!   [`crate::transport::ws_client::ConnectionFactory`] as the WebSocket one is.
//! - [`cookies`]: the client's cookie jar.
//! - [`tls`]: `https://` for both sides (rustls, ring provider): the server's PEM certificate and
//!   key, the client's CA file or the platform's roots.
//!
//! Every connection, whichever profile, drives the same [`crate::acp::agent::Agent`] as stdio
//! and `--transport ws` do: the transport turns HTTP into a message [`crate::jsonrpc::Transport`].
//! Another agent core plugs in as a [`host::Host`].

pub mod client;
pub mod cookies;
pub mod host;
pub mod routes;
pub mod server;
pub mod sse;
pub mod tls;

/// The endpoint's path.
pub const ENDPOINT_PATH: &str = "/acp";

/// The header naming a connection (returned by `initialize` and the WebSocket upgrade).
pub const CONNECTION_ID_HEADER: &str = "acp-connection-id";

/// The header naming a session on session-scoped POSTs and GET streams.
pub const SESSION_ID_HEADER: &str = "acp-session-id";

/// The header a client sends after `initialize` with the negotiated protocol version.
pub const PROTOCOL_VERSION_HEADER: &str = "acp-protocol-version";

/// The media type of SSE streams.
pub const EVENT_STREAM: &str = "text/event-stream";

/// Methods that carry a `sessionId` but whose response goes on the connection-scoped stream: the
/// client may not have that session's stream open yet (the RFD names `session/new` and
/// `session/load`; `session/resume` and `session/fork` attach or create a session the same way).
pub const CONNECTION_SCOPED_RESPONSES: &[&str] = &[
    "session/new",
    "session/load",
    "session/resume",
    "session/fork",
];

/// Methods that may name a session the agent knows but this connection has not used yet.
pub const ATTACHING_METHODS: &[&str] = &["session/load", "session/resume", "session/fork"];

/// The `sessionId` in a message's params, if it is a string.
pub fn params_session(message: &serde_json::Value) -> Option<&str> {
    message.get("params")?.get("sessionId")?.as_str()
}

/// A key for a JSON-RPC id (`1` and `"1"` differ), or `None` without one.
pub fn id_key(message: &serde_json::Value) -> Option<String> {
    match message.get("id")? {
        serde_json::Value::Null => None,
        id => Some(id.to_string()),
    }
}
