//! ACP protocol v2 (draft), beside v1: the types of the v2 surface of the newest schema ski
//! follows, [`GENERATION`] (`@agentclientprotocol/sdk` 2.4.0, `schema/v2/schema.json`).
//!
//! Only what v2 changes has a type here; what it keeps is the v1 type, re-used rather than
//! copied: content blocks, [`Implementation`](super::Implementation), the
//! [`Capability`](super::Capability) marker, tool kinds, locations and content, the item-based
//! [`PlanUpdate`](super::PlanUpdate), available commands, `session/list`, `session/delete`,
//! `session/close`, `session/cancel`, `session/request_permission`, elicitation and
//! `$/cancel_request`. The v2 rows of the method table ([`methods::v2`](super::methods::v2))
//! name these types.
//!
//! What v2 changes: `initialize` carries `info`/`capabilities` (the agent's `session` capability
//! stands for the session baseline: `session/new`, `session/list`, `session/resume`,
//! `session/close`, `session/prompt`, `session/cancel` and `session/update`); `session/prompt`
//! answers once the prompt is accepted (`{messageId}`) and the turn's end is a
//! `state_update` with `state: "idle"` and a `stopReason`; config options replace modes
//! (`configId`, and `type: "id"` for a select value); every message update and chunk carries a
//! `messageId`; tool calls are reported by `tool_call_update` alone and can be cancelled one by
//! one (`tool_call/cancel`, status `cancelled`); `auth/login`/`auth/logout` replace
//! `authenticate`/`logout`; the client has no `fs/*` or `terminal/*` methods; and `-32022`
//! answers an `initialize` whose version is below every version the agent speaks.

pub mod initialize;
pub mod session;
pub mod update;

use serde::{Deserialize, Serialize};

pub use initialize::*;
pub use session::*;
pub use update::*;

use super::meta::Extra;
use crate::jsonrpc::{ErrorCode, RpcError};

/// The schema generation the v2 types follow.
pub const GENERATION: &str = "npm-sdk 2.4.0 / schema v2 (draft)";

/// The `protocolVersion` of ACP v2.
pub const PROTOCOL_VERSION: u16 = 2;

/// `-32022`: no protocol version the agent speaks is at or below the one requested.
pub const UNSUPPORTED_PROTOCOL_VERSION: ErrorCode = ErrorCode(-32022);

/// `data` of a `-32022` error.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UnsupportedProtocolVersionData {
    /// The version the client requested.
    pub requested: u16,
    /// The versions the agent speaks.
    pub supported: Vec<u16>,
    /// `_meta` and unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// The `-32022` error for a client that asked for `requested` of an agent speaking `supported`.
pub fn unsupported_protocol_version(requested: u16, supported: &[u16]) -> RpcError {
    let data = UnsupportedProtocolVersionData {
        requested,
        supported: supported.to_vec(),
        extra: Extra::new(),
    };
    let listed: Vec<String> = supported.iter().map(u16::to_string).collect();
    let error = RpcError::new(
        UNSUPPORTED_PROTOCOL_VERSION,
        format!(
            "unsupported protocol version {requested}: this agent speaks {}",
            listed.join(", ")
        ),
    );
    match serde_json::to_value(data) {
        Ok(data) => error.with_data(data),
        Err(_) => error,
    }
}
