//! The control of a running prompt turn, shared by the turn, the session store and the request
//! handlers: why it was stopped ([`StopCause`]), stopping it and waiting for its end
//! ([`TurnControl`]), and how it ended ([`TurnOutcome`]).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, PoisonError};

use tokio_util::sync::CancellationToken;

use crate::acp::ExecutionStateKind;

/// Why a turn was stopped before it finished.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopCause {
    /// `session/cancel`, `session/stop`, or the session being deleted, closed or logged out:
    /// the turn answers `stopReason: cancelled`.
    Cancelled,
    /// `$/cancel_request` for the prompt request: the turn answers `-32800`.
    RequestCancelled,
    /// The prompt timeout fired: the turn answers `-32603`.
    TimedOut,
}

/// The control of a running turn: stopping it and waiting for its end.
#[derive(Debug)]
pub struct TurnControl {
    stop: CancellationToken,
    cause: Mutex<Option<StopCause>>,
    done: CancellationToken,
    /// Set once the turn reported the session's `updatedAt` in a `session_info_update`.
    reported_update: AtomicBool,
}

impl Default for TurnControl {
    fn default() -> Self {
        Self::new()
    }
}

impl TurnControl {
    /// A control for a turn that has not been stopped.
    pub fn new() -> Self {
        Self {
            stop: CancellationToken::new(),
            cause: Mutex::new(None),
            done: CancellationToken::new(),
            reported_update: AtomicBool::new(false),
        }
    }

    /// Stops the turn; the first cause wins. Returns whether this call stopped it.
    pub fn stop(&self, cause: StopCause) -> bool {
        let mut current = self.cause.lock().unwrap_or_else(PoisonError::into_inner);
        if current.is_some() {
            return false;
        }
        *current = Some(cause);
        self.stop.cancel();
        true
    }

    /// Why the turn was stopped, if it was.
    pub fn cause(&self) -> Option<StopCause> {
        *self.cause.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether the turn was stopped.
    pub fn is_stopped(&self) -> bool {
        self.stop.is_cancelled()
    }

    /// The token cancelled when the turn is stopped.
    pub fn token(&self) -> &CancellationToken {
        &self.stop
    }

    /// Resolves once the turn has ended (its outcome is decided and its last update sent).
    pub async fn finished(&self) {
        self.done.cancelled().await;
    }

    /// Whether the turn reported the session's `updatedAt`, which must then stay as reported.
    pub(super) fn reported_update(&self) -> bool {
        self.reported_update.load(Ordering::SeqCst)
    }

    /// Notes that the turn reported the session's `updatedAt`.
    pub(super) fn report_update(&self) {
        self.reported_update.store(true, Ordering::SeqCst);
    }

    pub(super) fn mark_finished(&self) {
        self.done.cancel();
    }
}

/// How a turn ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TurnOutcome {
    /// The reply was sent: `stopReason: end_turn`.
    EndTurn,
    /// The turn was stopped.
    Stopped(StopCause),
    /// Permission was refused: `stopReason: cancelled`.
    Denied,
    /// The model failed for good, or the permission bridge failed under `required`: `-32603`.
    Failed(String),
}

impl TurnOutcome {
    /// The outcome of a stopped turn: its cause, `Cancelled` when none was recorded.
    pub(crate) fn stopped(control: &TurnControl) -> TurnOutcome {
        TurnOutcome::Stopped(control.cause().unwrap_or(StopCause::Cancelled))
    }

    /// The execution state the turn reports last.
    pub(super) fn final_state(&self) -> ExecutionStateKind {
        match self {
            TurnOutcome::EndTurn => ExecutionStateKind::Completed,
            TurnOutcome::Stopped(StopCause::TimedOut) => ExecutionStateKind::TimedOut,
            TurnOutcome::Stopped(_) | TurnOutcome::Denied => ExecutionStateKind::Cancelled,
            TurnOutcome::Failed(_) => ExecutionStateKind::Failed,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_stop_cause_wins() {
        let control = TurnControl::new();
        assert!(!control.is_stopped());
        assert!(control.stop(StopCause::RequestCancelled));
        assert!(!control.stop(StopCause::TimedOut));
        assert_eq!(control.cause(), Some(StopCause::RequestCancelled));
        assert!(control.token().is_cancelled());
    }

    #[test]
    fn outcomes_map_to_their_final_state() {
        assert_eq!(
            TurnOutcome::EndTurn.final_state(),
            ExecutionStateKind::Completed
        );
        assert_eq!(
            TurnOutcome::Stopped(StopCause::TimedOut).final_state(),
            ExecutionStateKind::TimedOut
        );
        assert_eq!(
            TurnOutcome::Stopped(StopCause::RequestCancelled).final_state(),
            ExecutionStateKind::Cancelled
        );
        assert_eq!(
            TurnOutcome::Denied.final_state(),
            ExecutionStateKind::Cancelled
        );
        assert_eq!(
            TurnOutcome::Failed("x".into()).final_state(),
            ExecutionStateKind::Failed
        );
    }
}
