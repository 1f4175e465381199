//! The context a sequence runs in: its trigger, variables, session, cancel counter and turn.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use tokio::sync::{oneshot, watch};

use super::inbound::Inbound;
use super::state::{Session, SessionId};
use crate::agent::template::Vars;

/// A running prompt turn: counted in its session's running prompts from its start until it is
/// dropped.
#[derive(Debug)]
pub struct TurnGuard {
    running: Arc<AtomicU32>,
}

impl TurnGuard {
    /// A turn of `session`.
    pub fn new(session: &Session) -> Self {
        let running = Arc::clone(&session.active_prompts);
        running.fetch_add(1, Ordering::SeqCst);
        Self { running }
    }
}

impl Drop for TurnGuard {
    fn drop(&mut self) {
        self.running.fetch_sub(1, Ordering::SeqCst);
    }
}

/// What a sequence knows while it runs.
#[derive(Debug)]
pub struct Ctx {
    /// The message that started it, if any.
    pub trigger: Option<Arc<Inbound>>,
    /// Placeholder values.
    pub vars: Vars,
    /// The current session.
    pub session: Option<SessionId>,
    /// Where `wait_for` searches from in the inbound log.
    pub cursor: usize,
    /// Whether the trigger was answered.
    pub answered: bool,
    /// The session's cancel counter, for a prompt turn.
    pub cancel: Option<watch::Receiver<u64>>,
    /// The prompt turn this sequence is part of.
    pub turn: Option<TurnGuard>,
    /// Told when the sequence first waits (or ends, by being dropped), so that the reader of
    /// stdin handles the next message only then: input is handled in order, as a serial agent
    /// would, yet a sequence that waits for the client never blocks the input.
    pub parker: Option<oneshot::Sender<()>>,
    /// An ACP v2 prompt this sequence acknowledged: its end is an idle `state_update`, not a
    /// response.
    pub v2_prompt: bool,
}

impl Ctx {
    /// A context without a trigger.
    pub fn detached(vars: Vars, session: Option<SessionId>, cursor: usize) -> Self {
        Self {
            trigger: None,
            vars,
            session,
            cursor,
            answered: false,
            cancel: None,
            turn: None,
            parker: None,
            v2_prompt: false,
        }
    }

    /// Lets the reader of stdin go on: this sequence is about to wait.
    pub fn park(&mut self) {
        if let Some(parker) = self.parker.take() {
            let _ = parker.send(());
        }
    }

    /// Whether the session was cancelled since this turn started.
    pub fn cancelled(&self) -> bool {
        self.cancel
            .as_ref()
            .is_some_and(|receiver| receiver.has_changed().unwrap_or(false))
    }

    /// Waits until the session is cancelled (forever if this is not a prompt turn).
    pub async fn wait_cancelled(&mut self) {
        self.park();
        match self.cancel.as_mut() {
            Some(receiver) => {
                if receiver.has_changed().unwrap_or(false) {
                    return;
                }
                if receiver.changed().await.is_err() {
                    std::future::pending::<()>().await;
                }
                // Leave the change visible to `cancelled`.
                receiver.mark_changed();
            }
            None => std::future::pending::<()>().await,
        }
    }

    /// The session id, or an empty string.
    pub fn session_id(&self) -> String {
        self.session.as_deref().unwrap_or_default().to_owned()
    }
}
