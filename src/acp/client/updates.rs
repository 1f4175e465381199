//! Routing of `session/update` notifications to the code that follows each session.
//!
//! Updates are decoded as v1's. On a connection that settled on v2 ([`SessionRouter::speak_v2`])
//! an update v1 cannot decode but v2 can (a v2 `config_option_update`, options keyed by
//! `configId`) is routed whole as a kind v1 does not know, for [`super::v2::as_v2`] to read; on
//! v1 it is dropped as invalid.
//!
//! Updates are kept per session id. A session nobody follows yet (its `session/new` result has
//! not arrived, or it is another session such as a subagent's) gets a buffer; following it later
//! delivers the buffered updates first, in arrival order. Buffers are bounded: past
//! [`UPDATE_BUFFER_LIMIT`] updates the oldest is dropped, and past [`BUFFERED_SESSION_LIMIT`]
//! unfollowed sessions the one that was updated longest ago is forgotten.
//!
//! A follower gets its updates on a channel of [`UPDATE_BUFFER_LIMIT`] updates, and nothing is
//! dropped: while that many wait for the follower to take them, routing waits for room. The
//! `session/update` handler is then pending, and once
//! [`MAX_QUEUED_NOTIFICATIONS`](crate::jsonrpc::peer::MAX_QUEUED_NOTIFICATIONS) notifications
//! queue behind it the connection reads no more from the agent: a follower that cannot keep up
//! (a printer whose output nobody reads) slows the agent down instead of growing this process's
//! memory. A follower must thus take updates while a prompt runs, since the prompt's result is
//! delivered only after its updates were handed on.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
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
    rx: mpsc::Receiver<SessionNotification>,
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
    follower: Option<mpsc::Sender<SessionNotification>>,
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
    v2: AtomicBool,
}

impl SessionRouter {
    /// Reads later updates as the updates of a v2 connection too.
    pub(crate) fn speak_v2(&self) {
        self.v2.store(true, Ordering::Relaxed);
    }

    /// `params` as a v2 `session/update`, kept whole under v1's unknown kind.
    fn as_v2_update(&self, params: &Value) -> Option<SessionNotification> {
        if !self.v2.load(Ordering::Relaxed) {
            return None;
        }
        let v2: crate::acp::v2::SessionNotification =
            serde_json::from_value(params.clone()).ok()?;
        let update = params.get("update")?.clone();
        Some(SessionNotification {
            session_id: v2.session_id,
            update: SessionUpdate::Unknown(update),
            extra: v2.extra,
        })
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<String, Queue>> {
        self.queues.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Decodes and routes the params of one `session/update`; invalid ones are dropped and
    /// logged. Waits while the session's follower has no room.
    pub(crate) async fn receive(&self, params: Option<Value>) {
        let params = params.unwrap_or(Value::Null);
        match serde_json::from_value::<SessionNotification>(params.clone()) {
            Ok(notification) => self.route(notification).await,
            Err(_) if let Some(notification) = self.as_v2_update(&params) => {
                self.route(notification).await;
            }
            Err(error) => {
                self.invalid.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(%error, "dropped an invalid session/update");
            }
        }
    }

    /// Routes one decoded update: to the session's follower, waiting while it has no room, or
    /// into the session's buffer when nobody follows it.
    async fn route(&self, notification: SessionNotification) {
        self.accepted.fetch_add(1, Ordering::Relaxed);
        if let SessionUpdate::Unknown(_) = &notification.update {
            tracing::debug!(
                session_id = %notification.session_id,
                "session/update of a kind this client does not know"
            );
        }
        let mut notification = notification;
        while let Some((follower, waiting)) = self.hand_over(notification) {
            match follower.send(waiting).await {
                Ok(()) => return,
                Err(mpsc::error::SendError(returned)) => {
                    // The follower went away while the update waited: route it again.
                    self.unfollow(&returned.session_id, &follower);
                    notification = returned;
                }
            }
        }
    }

    /// Hands an update to the session's follower if it has room, or buffers it if nobody
    /// follows the session. Returns the follower and the update when the follower is full.
    fn hand_over(
        &self,
        notification: SessionNotification,
    ) -> Option<(mpsc::Sender<SessionNotification>, SessionNotification)> {
        let tick = self.clock.fetch_add(1, Ordering::Relaxed);
        let mut queues = self.lock();
        let is_new = !queues.contains_key(&notification.session_id);
        if is_new {
            self.make_room(&mut queues);
        }
        let queue = queues.entry(notification.session_id.clone()).or_default();
        queue.last_touched = tick;
        let notification = match &queue.follower {
            Some(follower) => match follower.try_send(notification) {
                Ok(()) => return None,
                Err(mpsc::error::TrySendError::Full(notification)) => {
                    return Some((follower.clone(), notification));
                }
                Err(mpsc::error::TrySendError::Closed(notification)) => {
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
        None
    }

    /// Forgets `follower` of `session_id` if it still is the session's follower.
    fn unfollow(&self, session_id: &str, follower: &mpsc::Sender<SessionNotification>) {
        if let Some(queue) = self.lock().get_mut(session_id)
            && queue
                .follower
                .as_ref()
                .is_some_and(|current| current.same_channel(follower))
        {
            queue.follower = None;
        }
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
        let (tx, rx) = mpsc::channel(UPDATE_BUFFER_LIMIT);
        let mut queues = self.lock();
        let queue = queues.entry(session_id.to_owned()).or_default();
        for notification in queue.buffer.drain(..) {
            // A buffer holds at most what the channel does and the receiver is still in hand,
            // so this cannot fail.
            let _ = tx.try_send(notification);
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
    use futures::FutureExt;
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
        router.receive(Some(update("s1", "a"))).await;
        router.receive(Some(update("s2", "other"))).await;
        router.receive(Some(update("s1", "b"))).await;
        assert_eq!(router.buffered("s1"), 2);
        let mut updates = router.follow("s1");
        router.receive(Some(update("s1", "c"))).await;
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

    #[tokio::test]
    async fn invalid_updates_are_dropped_and_counted() {
        let router = SessionRouter::default();
        router
            .receive(Some(
                json!({"sessionId": "s", "update": {"sessionUpdate": "tool_call"}}),
            ))
            .await;
        router
            .receive(Some(
                json!({"update": {"sessionUpdate": "plan", "entries": []}}),
            ))
            .await;
        router.receive(None).await;
        router
            .receive(Some(
                json!({"sessionId": "s", "update": {"sessionUpdate": "turn_end"}}),
            ))
            .await;
        let counters = router.counters();
        assert_eq!(counters.invalid, 3);
        assert_eq!(counters.accepted, 1, "an unknown kind is accepted and kept");
        assert_eq!(router.buffered("s"), 1);
    }

    #[tokio::test]
    async fn buffers_are_bounded() {
        let router = SessionRouter::default();
        for n in 0..UPDATE_BUFFER_LIMIT + 3 {
            router.receive(Some(update("s", &n.to_string()))).await;
        }
        assert_eq!(router.buffered("s"), UPDATE_BUFFER_LIMIT);
        for n in 0..BUFFERED_SESSION_LIMIT + 1 {
            router
                .receive(Some(update(&format!("other-{n}"), "x")))
                .await;
        }
        assert_eq!(
            router.buffered("s"),
            0,
            "the oldest unfollowed session was forgotten"
        );
        assert!(router.counters().overflowed >= 3 + UPDATE_BUFFER_LIMIT as u64);
    }

    /// Hands `count` updates to a follower of `session` that takes none of them.
    async fn fill(router: &SessionRouter, session: &str, count: usize) {
        for n in 0..count {
            router
                .receive(Some(update(session, &n.to_string())))
                .now_or_never()
                .expect("routed at once while the follower has room");
        }
    }

    #[tokio::test]
    async fn a_full_follower_makes_routing_wait_and_loses_nothing() {
        let router = SessionRouter::default();
        let mut updates = router.follow("s");
        fill(&router, "s", UPDATE_BUFFER_LIMIT).await;
        let mut waiting = Box::pin(router.receive(Some(update("s", "last"))));
        assert!(
            (&mut waiting).now_or_never().is_none(),
            "routing waits while the follower is full"
        );
        assert_eq!(text_of(&updates.next().await.unwrap()), "0");
        waiting.await;
        let mut seen = Vec::new();
        while let Some(notification) = updates.try_next() {
            seen.push(text_of(&notification));
        }
        assert_eq!(seen.len(), UPDATE_BUFFER_LIMIT);
        assert_eq!(seen.first().map(String::as_str), Some("1"));
        assert_eq!(seen.last().map(String::as_str), Some("last"));
        assert_eq!(router.counters().overflowed, 0);
    }

    #[tokio::test]
    async fn an_update_waiting_for_a_follower_that_leaves_is_kept_for_the_next() {
        let router = SessionRouter::default();
        let updates = router.follow("s");
        fill(&router, "s", UPDATE_BUFFER_LIMIT).await;
        let mut waiting = Box::pin(router.receive(Some(update("s", "late"))));
        assert!((&mut waiting).now_or_never().is_none());
        drop(updates);
        waiting.await;
        assert_eq!(router.buffered("s"), 1);
        let mut next = router.follow("s");
        assert_eq!(text_of(&next.next().await.unwrap()), "late");
    }
}
