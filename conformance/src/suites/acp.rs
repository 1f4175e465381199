//! The ACP suite: the rows of `conformance/catalog/acp.toml`, judged by driving the agent (and,
//! for client rows, the client) of the target over its real wire.
//!
//! Infrastructure, shared by every check:
//! - [`agent`]: starts the agent through the profile over stdio or WebSocket, in named variants
//!   (`agent_hold`, `agent_permission`, ...), and picks the transport of a row that names none;
//! - [`connection`]: one raw JSON-RPC connection with ski's framing, every frame kept and logged,
//!   and a responder for the agent's requests to the client;
//! - [`oracle`]: the schema oracle that judges every frame the agent sends;
//! - [`model`]: the fake model a profile may ask for, started and scripted per agent;
//! - [`exchange`]: typed steps (initialize, session/new, prompt turns, cancel) and shared
//!   judgements.
//!
//! Checks, grouped by what they drive: [`jsonrpc`] (framing and JSON-RPC rules), [`turns`]
//! (prompt turns and their updates), [`cancellation`], [`permissions`], [`execution`] (execution
//! state and retries), [`sessions`] (session methods, auth), [`websocket`] (the WebSocket
//! server), [`lifecycle`] (the agent process), [`schema`] (the wire against the ACP schema),
//! [`negotiation`] (the version and session ids agreed on), [`notifications`] (nothing answers a
//! notification; cancelled turns, update session ids, stop reasons), [`offers`] (nothing the
//! client did not advertise), [`capabilities`] (the advertised optional methods, by ACP alone),
//! [`additions`] (v1's newer additions: additional directories, message ids, notices and
//! compaction), [`harness`] (the rows that judge the runner itself) and [`v2`] (the ACP v2
//! draft's rows, `catalog/acp-v2.toml`, on a connection initialized at protocol version 2).

pub mod additions;
pub mod agent;
pub mod cancellation;
pub mod capabilities;
pub mod client;
pub mod connection;
pub mod declared;
pub mod exchange;
pub mod execution;
pub mod harness;
pub mod jsonrpc;
pub mod lifecycle;
pub mod model;
pub mod negotiation;
pub mod notifications;
pub mod offers;
pub mod oracle;
pub mod permissions;
pub mod remote;
pub mod schema;
pub mod sessions;
pub mod turns;
pub mod v2;
pub mod websocket;

use crate::check::Check;

/// Every check of the ACP suite.
pub fn checks() -> Vec<Check> {
    [
        jsonrpc::checks(),
        turns::checks(),
        cancellation::checks(),
        permissions::checks(),
        execution::checks(),
        sessions::checks(),
        websocket::checks(),
        remote::rows::checks(),
        lifecycle::checks(),
        schema::checks(),
        negotiation::checks(),
        notifications::checks(),
        offers::checks(),
        capabilities::checks(),
        additions::checks(),
        harness::checks(),
        client::checks(),
        v2::checks(),
    ]
    .into_iter()
    .flatten()
    .collect()
}
