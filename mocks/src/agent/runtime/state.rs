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
pub type Seen = std::sync::Arc<super::inbound::Inbound>;

/// The inbound requests and notifications by arrival, for `wait_for` steps to search from a
/// position. An agent nothing can ask (no `wait_for` step in its script, no control channel to
/// run one) keeps only the count and the last message, so a long run holds no memory per
/// message it answered.
#[derive(Debug)]
pub struct SeenLog {
    kept: Option<Vec<Seen>>,
    count: usize,
    last: Option<Seen>,
}

impl Default for SeenLog {
    fn default() -> Self {
        Self::new(true)
    }
}

impl SeenLog {
    /// A log that keeps every message (`keep`), or only the count and the last.
    pub fn new(keep: bool) -> Self {
        Self {
            kept: keep.then(Vec::new),
            count: 0,
            last: None,
        }
    }

    /// Adds a message.
    pub fn push(&mut self, seen: &Seen) {
        if let Some(kept) = &mut self.kept {
            kept.push(Arc::clone(seen));
        }
        self.count += 1;
        self.last = Some(Arc::clone(seen));
    }

    /// Whether the messages are kept for searching.
    pub fn is_kept(&self) -> bool {
        self.kept.is_some()
    }

    /// How many messages arrived: the position the next one takes.
    pub fn len(&self) -> usize {
        self.count
    }

    /// Whether no message arrived.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The last message.
    pub fn last(&self) -> Option<&Seen> {
        self.last.as_ref()
    }

    /// The first kept message at or after `start` that `matches`, with its position.
    pub fn find_from(
        &self,
        start: usize,
        matches: impl Fn(&Seen) -> bool,
    ) -> Option<(usize, &Seen)> {
        let kept = self.kept.as_ref()?;
        let start = start.min(kept.len());
        kept[start..]
            .iter()
            .position(matches)
            .map(|offset| (start + offset, &kept[start + offset]))
    }
}

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
    /// Prompt turns running now: each holds a [`super::ctx::TurnGuard`], which counts
    /// itself here without locking the state.
    pub active_prompts: Arc<AtomicU32>,
    /// Closed or deleted.
    pub closed: bool,
    /// Ended by `_session/terminate`.
    pub terminated: bool,
    /// ACP v2: the `messageId` of the agent message the current turn streams.
    pub message_id: Option<String>,
    /// Tool calls held until cancelled (a `hold_tool_call` step), by id: sending ends one.
    pub held_tool_calls: HashMap<String, oneshot::Sender<()>>,
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
            message_id: None,
            held_tool_calls: HashMap::new(),
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
    /// `initialize` settled on ACP v2 (draft).
    pub v2: bool,
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
    /// The inbound requests and notifications.
    pub seen: SeenLog,
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
    pub replay: crate::agent::replay::state::ReplayState,
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::runtime::Inbound;

    fn message(method: &str) -> Seen {
        Arc::new(Inbound {
            method: method.to_owned(),
            id: None,
            params: None,
            jsonrpc: true,
        })
    }

    #[test]
    fn a_kept_log_is_searched_from_a_position() {
        let mut log = SeenLog::new(true);
        for method in ["a", "b", "a"] {
            log.push(&message(method));
        }
        assert_eq!(log.len(), 3);
        assert_eq!(
            log.find_from(0, |m| m.method == "a").map(|(at, _)| at),
            Some(0)
        );
        assert_eq!(
            log.find_from(1, |m| m.method == "a").map(|(at, _)| at),
            Some(2)
        );
        assert!(log.find_from(3, |m| m.method == "a").is_none());
        assert!(log.find_from(9, |m| m.method == "a").is_none());
    }

    #[test]
    fn a_log_nothing_searches_keeps_only_the_count_and_the_last() {
        let mut log = SeenLog::new(false);
        log.push(&message("a"));
        log.push(&message("b"));
        assert_eq!(log.len(), 2);
        assert_eq!(log.last().map(|m| m.method.as_str()), Some("b"));
        assert!(log.find_from(0, |_| true).is_none());
        // The first message is no longer held by the log.
        let first = message("c");
        log.push(&first);
        log.push(&message("d"));
        assert_eq!(Arc::strong_count(&first), 1);
    }
}
