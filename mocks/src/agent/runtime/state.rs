//! What the agent remembers: sessions and their history, counters, the requests it waits on,
//! the log of inbound messages that `wait_for` steps search, and which rules fired.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use serde_json::{Value, json};
use ski::jsonrpc::RequestId;
use tokio::sync::{oneshot, watch};
use tokio::task::AbortHandle;

/// A reply to one of the agent's own requests.
#[derive(Debug, Clone, PartialEq)]
pub struct Reply {
    /// `Ok(result)`, or `Err(error object)`.
    pub result: Result<Value, Value>,
}

impl Reply {
    /// The reply as one JSON value: the result, or `{"error": ...}`.
    pub fn as_value(&self) -> Value {
        match &self.result {
            Ok(result) => result.clone(),
            Err(error) => json!({ "error": error }),
        }
    }
}

/// A request the agent sent and waits on.
#[derive(Debug)]
pub struct Pending {
    /// Where the reply goes.
    pub reply: oneshot::Sender<Reply>,
    /// A method that also counts as the reply when it arrives with this id.
    pub reply_method: Option<String>,
}

/// A session id as a sequence, its template variables and the agent's last session hold it:
/// made once per message, shared by reference count.
pub type SessionId = Arc<str>;

/// One inbound request or notification, as `wait_for` steps see it.
pub type Seen = std::sync::Arc<super::Inbound>;

/// Who wrote a message of a session's history.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// The client's prompt.
    User,
    /// The agent's text.
    Agent,
}

impl Role {
    /// The role of a stored history line: `user`, else the agent.
    pub fn from_name(name: &str) -> Self {
        if name == "user" {
            Role::User
        } else {
            Role::Agent
        }
    }
}

/// A session.
#[derive(Debug)]
pub struct Session {
    /// Its id.
    pub id: String,
    /// Its working directory, as the client gave it.
    pub cwd: Option<String>,
    /// The current mode.
    pub mode: String,
    /// The current model (legacy `session/set_model`).
    pub model: Option<String>,
    /// The current value of the `verbosity` config option.
    pub verbosity: String,
    /// The messages of the session, for replay on `session/load`; texts are shared with the
    /// template variables of later turns.
    pub history: Vec<(Role, Arc<str>)>,
    /// Counts cancellations; prompt turns watch it.
    pub cancel: watch::Sender<u64>,
    /// A cancel arrived while no prompt ran (reported by `cancel_status`).
    pub pending_cancel: bool,
    /// Prompt turns running now: each holds a [`super::sequence::TurnGuard`], which counts
    /// itself here without locking the state.
    pub active_prompts: Arc<AtomicU32>,
    /// Closed or deleted.
    pub closed: bool,
    /// Ended by `_session/terminate`.
    pub terminated: bool,
}

impl Session {
    /// How many prompt turns run now.
    pub fn running_prompts(&self) -> u32 {
        self.active_prompts.load(Ordering::SeqCst)
    }

    /// A new session.
    pub fn new(id: String, cwd: Option<String>, mode: &str) -> Self {
        Self {
            id,
            cwd,
            mode: mode.to_owned(),
            model: None,
            verbosity: "normal".to_owned(),
            history: Vec::new(),
            cancel: watch::channel(0).0,
            pending_cancel: false,
            active_prompts: Arc::default(),
            closed: false,
            terminated: false,
        }
    }
}

/// A request the agent is working on, which `$/cancel_request` can end.
#[derive(Debug)]
pub struct Running {
    /// The task working on it.
    pub task: AbortHandle,
}

/// Everything the agent keeps.
#[derive(Debug, Default)]
pub struct State {
    /// `initialize` was answered.
    pub initialized: bool,
    /// The client's `clientCapabilities`.
    pub client_capabilities: Value,
    /// The protocol version the client asked for.
    pub client_protocol_version: Option<Value>,
    /// `authenticate` succeeded.
    pub authenticated: bool,
    /// Sessions, in creation order.
    pub sessions: Vec<Session>,
    /// The counter for session ids.
    pub next_session: u64,
    /// The counter for the agent's request ids.
    pub next_request: u64,
    /// The counter for tool-call and message ids.
    pub next_item: u64,
    /// Requests the agent waits on, by the id's JSON text.
    pub pending: HashMap<String, Pending>,
    /// Requests being worked on, by the id's JSON text.
    pub running: HashMap<String, Running>,
    /// Every inbound request and notification.
    pub seen: Vec<Seen>,
    /// How many messages of each method arrived.
    pub method_counts: BTreeMap<String, u64>,
    /// Lines read.
    pub lines_in: u64,
    /// Prompts received.
    pub prompts: u64,
    /// The last session created or prompted.
    pub last_session: Option<SessionId>,
    /// Rules with `once` that fired.
    pub fired: HashSet<usize>,
    /// What replay of a recording remembers.
    pub replay: crate::agent::replay::ReplayState,
}

impl State {
    /// The session with this id.
    pub fn session(&mut self, id: &str) -> Option<&mut Session> {
        self.sessions.iter_mut().find(|s| s.id == id)
    }

    /// The next id for an item (tool call, message).
    pub fn next_item(&mut self) -> u64 {
        self.next_item += 1;
        self.next_item
    }
}

/// The key under which a request id is stored: its JSON text, so `1` and `"1"` differ.
pub fn id_key(id: &RequestId) -> String {
    serde_json::to_string(id).unwrap_or_default()
}
