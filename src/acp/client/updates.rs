//! Routing of `session/update` notifications to the code that follows each session.
//!
//! Updates are kept per session id. A session nobody follows yet (its `session/new` result has
//! not arrived, or it is another session such as a subagent's) gets a buffer; following it later
//! delivers the buffered updates first, in arrival order. Buffers are bounded: past
//! [`UPDATE_BUFFER_LIMIT`] updates the oldest is dropped, and past [`BUFFERED_SESSION_LIMIT`]
//! unfollowed sessions the one that was updated longest ago is forgotten.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

use serde_json::Value;
use tokio::sync::mpsc;

use crate::acp::{SessionNotification, SessionUpdate};

/// The most updates kept for one session nobody follows.
pub const UPDATE_BUFFER_LIMIT: usize = 4096;

/// The most unfollowed sessions whose updates are kept.
pub const BUFFERED_SESSION_LIMIT: usize = 256;

/// The updates of one session, in arrival order; see [`crate::acp::client::Client::follow`].
#[derive(Debug)]
pub struct SessionUpdates {
    session_id: String,
    rx: mpsc::UnboundedReceiver<SessionNotification>,
}

impl SessionUpdates {
    /// The session followed.
    pub fn session_id(&self) -> &str {
        &self.session_id
    }

    /// The next update; `None` once the client is gone or another follower took over.
    pub async fn next(&mut self) -> Option<SessionNotification> {
        self.rx.recv().await
    }

    /// The next update if one is already there.
    pub fn try_next(&mut self) -> Option<SessionNotification> {
        self.rx.try_recv().ok()
    }
}

#[derive(Default)]
struct Queue {
    buffer: VecDeque<SessionNotification>,
    follower: Option<mpsc::UnboundedSender<SessionNotification>>,
    last_touched: u64,
}

/// Counters of what the router saw.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct UpdateCounters {
    /// Updates accepted and routed.
    pub accepted: u64,
    /// Updates dropped because they did not decode (a kind missing a required field).
    pub invalid: u64,
    /// Buffered updates dropped because a buffer was full or a session was forgotten.
    pub overflowed: u64,
}

/// The router shared by every connection of a client.
#[derive(Default)]
pub(crate) struct SessionRouter {
    queues: Mutex<HashMap<String, Queue>>,
    clock: AtomicU64,
    accepted: AtomicU64,
    invalid: AtomicU64,
    overflowed: AtomicU64,
}

impl SessionRouter {
    fn lock(&self) -> MutexGuard<'_, HashMap<String, Queue>> {
        self.queues.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Decodes and routes the params of one `session/update`; invalid ones are dropped and
    /// logged.
    pub(crate) fn receive(&self, params: Option<Value>) {
        let params = params.unwrap_or(Value::Null);
        match serde_json::from_value::<SessionNotification>(params) {
            Ok(notification) => self.route(notification),
            Err(error) => {
                self.invalid.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(%error, "dropped an invalid session/update");
            }
        }
    }

    /// Routes one decoded update.
    pub(crate) fn route(&self, notification: SessionNotification) {
        self.accepted.fetch_add(1, Ordering::Relaxed);
        if let SessionUpdate::Unknown(_) = &notification.update {
            tracing::debug!(
                session_id = %notification.session_id,
                "session/update of a kind this client does not know"
            );
        }
        let tick = self.clock.fetch_add(1, Ordering::Relaxed);
        let mut queues = self.lock();
        let is_new = !queues.contains_key(&notification.session_id);
        if is_new {
            self.make_room(&mut queues);
        }
        let queue = queues.entry(notification.session_id.clone()).or_default();
        queue.last_touched = tick;
        let notification = match &queue.follower {
            Some(follower) => match follower.send(notification) {
                Ok(()) => return,
                Err(mpsc::error::SendError(notification)) => {
                    // The follower went away; keep buffering for a later one.
                    queue.follower = None;
                    notification
                }
            },
            None => notification,
        };
        if queue.buffer.len() >= UPDATE_BUFFER_LIMIT {
            queue.buffer.pop_front();
            self.overflowed.fetch_add(1, Ordering::Relaxed);
        }
        queue.buffer.push_back(notification);
    }

    fn make_room(&self, queues: &mut HashMap<String, Queue>) {
        let unfollowed = queues
            .values()
            .filter(|queue| queue.follower.is_none())
            .count();
        if unfollowed < BUFFERED_SESSION_LIMIT {
            return;
        }
        let oldest = queues
            .iter()
            .filter(|(_, queue)| queue.follower.is_none())
            .min_by_key(|(_, queue)| queue.last_touched)
            .map(|(id, _)| id.clone());
        if let Some(id) = oldest
            && let Some(queue) = queues.remove(&id)
        {
            self.overflowed
                .fetch_add(queue.buffer.len() as u64, Ordering::Relaxed);
            tracing::warn!(session_id = %id, "forgot the buffered updates of an unfollowed session");
        }
    }

    /// Follows `session_id`: the buffered updates come first. A previous follower of the same
    /// session stops receiving.
    pub(crate) fn follow(&self, session_id: &str) -> SessionUpdates {
        let (tx, rx) = mpsc::unbounded_channel();
        let mut queues = self.lock();
        let queue = queues.entry(session_id.to_owned()).or_default();
        for notification in queue.buffer.drain(..) {
            // The receiver is still in hand, so this cannot fail.
            let _ = tx.send(notification);
        }
        queue.follower = Some(tx);
        SessionUpdates {
            session_id: session_id.to_owned(),
            rx,
        }
    }

    /// Stops following `session_id` and forgets its buffer.
    pub(crate) fn forget(&self, session_id: &str) {
        self.lock().remove(session_id);
    }

    /// How many updates are buffered for `session_id`.
    #[cfg(test)]
    pub(crate) fn buffered(&self, session_id: &str) -> usize {
        self.lock()
            .get(session_id)
            .map_or(0, |queue| queue.buffer.len())
    }

    pub(crate) fn counters(&self) -> UpdateCounters {
        UpdateCounters {
            accepted: self.accepted.load(Ordering::Relaxed),
            invalid: self.invalid.load(Ordering::Relaxed),
            overflowed: self.overflowed.load(Ordering::Relaxed),
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn update(session: &str, text: &str) -> Value {
        json!({
            "sessionId": session,
            "update": {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}}
        })
    }

    fn text_of(notification: &SessionNotification) -> String {
        match &notification.update {
            SessionUpdate::AgentMessageChunk(chunk) => {
                chunk.content.as_text().unwrap_or_default().to_owned()
            }
            other => panic!("unexpected update {other:?}"),
        }
    }

    #[tokio::test]
    async fn updates_before_following_are_delivered_first_in_order() {
        let router = SessionRouter::default();
        router.receive(Some(update("s1", "a")));
        router.receive(Some(update("s2", "other")));
        router.receive(Some(update("s1", "b")));
        assert_eq!(router.buffered("s1"), 2);
        let mut updates = router.follow("s1");
        router.receive(Some(update("s1", "c")));
        let mut seen = Vec::new();
        while let Some(notification) = updates.try_next() {
            seen.push(text_of(&notification));
        }
        assert_eq!(seen, ["a", "b", "c"]);
        assert_eq!(
            router.buffered("s2"),
            1,
            "another session's update stays apart"
        );
    }

    #[test]
    fn invalid_updates_are_dropped_and_counted() {
        let router = SessionRouter::default();
        router.receive(Some(
            json!({"sessionId": "s", "update": {"sessionUpdate": "tool_call"}}),
        ));
        router.receive(Some(
            json!({"update": {"sessionUpdate": "plan", "entries": []}}),
        ));
        router.receive(None);
        router.receive(Some(
            json!({"sessionId": "s", "update": {"sessionUpdate": "turn_end"}}),
        ));
        let counters = router.counters();
        assert_eq!(counters.invalid, 3);
        assert_eq!(counters.accepted, 1, "an unknown kind is accepted and kept");
        assert_eq!(router.buffered("s"), 1);
    }

    #[test]
    fn buffers_are_bounded() {
        let router = SessionRouter::default();
        for n in 0..UPDATE_BUFFER_LIMIT + 3 {
            router.receive(Some(update("s", &n.to_string())));
        }
        assert_eq!(router.buffered("s"), UPDATE_BUFFER_LIMIT);
        for n in 0..BUFFERED_SESSION_LIMIT + 1 {
            router.receive(Some(update(&format!("other-{n}"), "x")));
        }
        assert_eq!(
            router.buffered("s"),
            0,
            "the oldest unfollowed session was forgotten"
        );
        assert!(router.counters().overflowed >= 3 + UPDATE_BUFFER_LIMIT as u64);
    }
}
