//! Answers to `session/request_permission`: the configured policy, and the rule that a
//! cancelled turn answers every pending request with `cancelled`.
//!
//! A request is answered with ACP's `outcome` structure only: `{"outcome": {"outcome":
//! "selected", "optionId": ...}}` or `{"outcome": {"outcome": "cancelled"}}`. "Allow" selects
//! the first option of kind `allow_once`, else `allow_always`; "deny" selects `reject_once`,
//! else `reject_always`; when no option of the wanted kinds is offered the answer is
//! `cancelled`. Once the client cancels a session's turn, every permission request of that
//! session that is pending, or arrives before the next prompt, is answered `cancelled`.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use tokio::sync::{oneshot, watch};

use crate::acp::{
    PermissionOption, PermissionOptionKind, PermissionOutcome, RequestPermissionRequest,
    RequestPermissionResponse,
};
use crate::jsonrpc::peer::BoxFuture;

/// Decides permission requests in application code (a user interface, a test).
///
/// Any `Fn(RequestPermissionRequest) -> impl Future<Output = RequestPermissionResponse>`
/// closure is a handler. The client answers `cancelled` instead if the turn is cancelled while
/// the handler runs.
pub trait PermissionHandler: Send + Sync + 'static {
    /// Decides one request.
    fn decide(&self, request: RequestPermissionRequest) -> BoxFuture<RequestPermissionResponse>;
}

impl<F, Fut> PermissionHandler for F
where
    F: Fn(RequestPermissionRequest) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = RequestPermissionResponse> + Send + 'static,
{
    fn decide(&self, request: RequestPermissionRequest) -> BoxFuture<RequestPermissionResponse> {
        Box::pin(self(request))
    }
}

/// How the client answers `session/request_permission`.
#[derive(Clone, Default)]
pub enum PermissionPolicy {
    /// Select an allow option at once.
    #[default]
    Allow,
    /// Select a reject option at once.
    Deny,
    /// Never answer by itself: the request stays pending until the turn is cancelled (then it
    /// is answered `cancelled`) or the connection ends. For drivers that test cancellation.
    Hold,
    /// Ask a handler.
    Handler(Arc<dyn PermissionHandler>),
}

impl fmt::Debug for PermissionPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PermissionPolicy::Allow => f.write_str("Allow"),
            PermissionPolicy::Deny => f.write_str("Deny"),
            PermissionPolicy::Hold => f.write_str("Hold"),
            PermissionPolicy::Handler(_) => f.write_str("Handler(..)"),
        }
    }
}

/// Selects the option that expresses `allow` (or deny), or `cancelled` when none is offered.
pub fn choose(options: &[PermissionOption], allow: bool) -> RequestPermissionResponse {
    let preferred = if allow {
        [
            PermissionOptionKind::AllowOnce,
            PermissionOptionKind::AllowAlways,
        ]
    } else {
        [
            PermissionOptionKind::RejectOnce,
            PermissionOptionKind::RejectAlways,
        ]
    };
    preferred
        .iter()
        .find_map(|kind| options.iter().find(|option| &option.kind == kind))
        .map_or_else(RequestPermissionResponse::cancelled, |option| {
            RequestPermissionResponse::selected(option.option_id.clone())
        })
}

/// Counters of the permission requests answered.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PermissionCounters {
    /// Requests received.
    pub requests: u64,
    /// Answered with an option (allow or reject).
    pub selected: u64,
    /// Answered `cancelled`.
    pub cancelled: u64,
}

struct Waiting {
    session_id: String,
    tx: oneshot::Sender<RequestPermissionResponse>,
}

#[derive(Default)]
struct State {
    next: u64,
    waiting: HashMap<u64, Waiting>,
    cancelled: HashSet<String>,
}

/// The permission side of a client, shared by every connection.
pub(crate) struct PermissionBroker {
    policy: PermissionPolicy,
    state: Mutex<State>,
    pending: watch::Sender<usize>,
    requests: AtomicU64,
    selected: AtomicU64,
    cancelled: AtomicU64,
}

impl PermissionBroker {
    pub(crate) fn new(policy: PermissionPolicy) -> Self {
        Self {
            policy,
            state: Mutex::new(State::default()),
            pending: watch::channel(0).0,
            requests: AtomicU64::new(0),
            selected: AtomicU64::new(0),
            cancelled: AtomicU64::new(0),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Answers one request by the policy.
    pub(crate) async fn answer(
        self: &Arc<Self>,
        request: RequestPermissionRequest,
    ) -> RequestPermissionResponse {
        self.requests.fetch_add(1, Ordering::Relaxed);
        let response = self.decide(request).await;
        let counter = match response.outcome {
            PermissionOutcome::Cancelled(_) => &self.cancelled,
            _ => &self.selected,
        };
        counter.fetch_add(1, Ordering::Relaxed);
        response
    }

    async fn decide(
        self: &Arc<Self>,
        request: RequestPermissionRequest,
    ) -> RequestPermissionResponse {
        let (key, rx) = {
            let mut state = self.lock();
            if state.cancelled.contains(&request.session_id) {
                return RequestPermissionResponse::cancelled();
            }
            match &self.policy {
                PermissionPolicy::Allow => return choose(&request.options, true),
                PermissionPolicy::Deny => return choose(&request.options, false),
                PermissionPolicy::Hold | PermissionPolicy::Handler(_) => {}
            }
            let key = state.next;
            state.next += 1;
            let (tx, rx) = oneshot::channel();
            state.waiting.insert(
                key,
                Waiting {
                    session_id: request.session_id.clone(),
                    tx,
                },
            );
            let count = state.waiting.len();
            self.pending.send_replace(count);
            (key, rx)
        };
        let _guard = WaitingGuard {
            broker: self.clone(),
            key,
        };
        match &self.policy {
            PermissionPolicy::Handler(handler) => {
                let decided = handler.decide(request);
                tokio::select! {
                    biased;
                    cancelled = rx => cancelled.unwrap_or_else(|_| RequestPermissionResponse::cancelled()),
                    decided = decided => decided,
                }
            }
            _ => rx
                .await
                .unwrap_or_else(|_| RequestPermissionResponse::cancelled()),
        }
    }

    fn remove(&self, key: u64) {
        let mut state = self.lock();
        if state.waiting.remove(&key).is_some() {
            let count = state.waiting.len();
            self.pending.send_replace(count);
        }
    }

    /// Marks the session's turn cancelled and answers its pending requests `cancelled`; returns
    /// how many were pending.
    pub(crate) fn cancel_session(&self, session_id: &str) -> usize {
        let mut state = self.lock();
        state.cancelled.insert(session_id.to_owned());
        let keys: Vec<u64> = state
            .waiting
            .iter()
            .filter(|(_, waiting)| waiting.session_id == session_id)
            .map(|(key, _)| *key)
            .collect();
        for key in &keys {
            if let Some(waiting) = state.waiting.remove(key) {
                // The handler may have been dropped (its request was cancelled); nothing to do.
                let _ = waiting.tx.send(RequestPermissionResponse::cancelled());
            }
        }
        let count = state.waiting.len();
        self.pending.send_replace(count);
        keys.len()
    }

    /// A new turn starts on the session: its permission requests are decided again.
    pub(crate) fn resume_session(&self, session_id: &str) {
        self.lock().cancelled.remove(session_id);
    }

    /// How many requests wait for a decision.
    pub(crate) fn pending(&self) -> usize {
        *self.pending.borrow()
    }

    /// Waits until at least `count` requests wait for a decision.
    pub(crate) async fn wait_pending(&self, count: usize) {
        let mut pending = self.pending.subscribe();
        // The sender lives as long as the broker, so this cannot fail.
        let _ = pending.wait_for(|pending| *pending >= count).await;
    }

    pub(crate) fn counters(&self) -> PermissionCounters {
        PermissionCounters {
            requests: self.requests.load(Ordering::Relaxed),
            selected: self.selected.load(Ordering::Relaxed),
            cancelled: self.cancelled.load(Ordering::Relaxed),
        }
    }
}

/// Removes a waiting request when its handler ends for any reason (answered, dropped).
struct WaitingGuard {
    broker: Arc<PermissionBroker>,
    key: u64,
}

impl Drop for WaitingGuard {
    fn drop(&mut self) {
        self.broker.remove(self.key);
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn request(session: &str, kinds: &[&str]) -> RequestPermissionRequest {
        let options: Vec<_> = kinds
            .iter()
            .map(|kind| json!({"optionId": format!("opt-{kind}"), "name": kind, "kind": kind}))
            .collect();
        serde_json::from_value(json!({
            "sessionId": session,
            "toolCall": {"toolCallId": "call-1"},
            "options": options,
        }))
        .unwrap()
    }

    fn encoded(response: &RequestPermissionResponse) -> serde_json::Value {
        serde_json::to_value(response).unwrap()
    }

    #[test]
    fn allow_and_deny_pick_the_matching_kind_or_cancel() {
        let all = request(
            "s",
            &["reject_always", "allow_always", "allow_once", "reject_once"],
        );
        assert_eq!(
            encoded(&choose(&all.options, true)),
            json!({"outcome": {"outcome": "selected", "optionId": "opt-allow_once"}})
        );
        assert_eq!(
            encoded(&choose(&all.options, false)),
            json!({"outcome": {"outcome": "selected", "optionId": "opt-reject_once"}})
        );
        let always = request("s", &["allow_always", "reject_always"]);
        assert_eq!(
            encoded(&choose(&always.options, true)),
            json!({"outcome": {"outcome": "selected", "optionId": "opt-allow_always"}})
        );
        let only_allow = request("s", &["allow_once"]);
        assert_eq!(
            encoded(&choose(&only_allow.options, false)),
            json!({"outcome": {"outcome": "cancelled"}})
        );
    }

    #[tokio::test]
    async fn cancel_answers_pending_requests_of_that_session_only() {
        let broker = Arc::new(PermissionBroker::new(PermissionPolicy::Hold));
        let first = tokio::spawn({
            let broker = broker.clone();
            async move { broker.answer(request("s1", &["allow_once"])).await }
        });
        let other = tokio::spawn({
            let broker = broker.clone();
            async move { broker.answer(request("s2", &["allow_once"])).await }
        });
        broker.wait_pending(2).await;
        assert_eq!(broker.cancel_session("s1"), 1);
        let answer = first.await.unwrap();
        assert_eq!(
            encoded(&answer),
            json!({"outcome": {"outcome": "cancelled"}})
        );
        assert_eq!(
            broker.pending(),
            1,
            "the other session's request still waits"
        );
        // A request that arrives after the cancel, before the next turn, is cancelled at once.
        let late = broker.answer(request("s1", &["allow_once"])).await;
        assert_eq!(encoded(&late), json!({"outcome": {"outcome": "cancelled"}}));
        broker.resume_session("s1");
        assert_eq!(broker.cancel_session("s2"), 1);
        other.await.unwrap();
        assert_eq!(broker.pending(), 0);
        let counters = broker.counters();
        assert_eq!((counters.requests, counters.cancelled), (3, 3));
    }

    #[tokio::test]
    async fn a_handler_decides_and_a_cancel_overrides_a_slow_one() {
        let handler = |request: RequestPermissionRequest| async move {
            if request.session_id == "slow" {
                std::future::pending::<()>().await;
            }
            choose(&request.options, false)
        };
        let broker = Arc::new(PermissionBroker::new(PermissionPolicy::Handler(Arc::new(
            handler,
        ))));
        let fast = broker
            .answer(request("fast", &["allow_once", "reject_once"]))
            .await;
        assert_eq!(
            encoded(&fast),
            json!({"outcome": {"outcome": "selected", "optionId": "opt-reject_once"}})
        );
        let slow = tokio::spawn({
            let broker = broker.clone();
            async move { broker.answer(request("slow", &["allow_once"])).await }
        });
        broker.wait_pending(1).await;
        broker.cancel_session("slow");
        assert_eq!(
            encoded(&slow.await.unwrap()),
            json!({"outcome": {"outcome": "cancelled"}})
        );
    }

    #[tokio::test]
    async fn a_dropped_request_leaves_nothing_pending() {
        let broker = Arc::new(PermissionBroker::new(PermissionPolicy::Hold));
        let task = tokio::spawn({
            let broker = broker.clone();
            async move { broker.answer(request("s", &["allow_once"])).await }
        });
        broker.wait_pending(1).await;
        task.abort();
        let _ = task.await;
        assert_eq!(broker.pending(), 0);
    }
}
