//! JSON-RPC 2.0 as ACP and the other protocols use it: messages, ids, error codes, NDJSON framing
//! and the peer.

pub mod id;

pub use id::RequestId;
