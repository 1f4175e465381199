//! What replay remembers of the live exchange, kept in the agent's shared state.

use std::collections::{HashMap, HashSet};

use serde_json::{Value, json};
use ski::jsonrpc::RequestId;

/// What replay remembers of the live exchange.
#[derive(Debug, Default)]
pub struct ReplayState {
    /// Exchanges played, by index.
    pub(super) used: HashSet<usize>,
    /// Recorded session id → live session id.
    pub(super) sessions: HashMap<String, String>,
    /// Every live session id handed out so far; none is handed out twice.
    pub(super) minted: HashSet<String>,
    /// Recorded client request id (JSON text) → the live id.
    pub(super) ids: HashMap<String, RequestId>,
    /// The live working directory relative paths resolve against.
    pub(super) cwd: Option<String>,
    /// Exchanges played.
    pub(super) played: u64,
    /// Client messages the recording did not hold, as reported.
    pub(super) unrecorded: Vec<Value>,
}

impl ReplayState {
    /// The `replay` part of the state report.
    pub fn report(&self) -> Value {
        json!({
            "played": self.played,
            "sessions": self.sessions,
            "unrecorded": self.unrecorded,
        })
    }
}
