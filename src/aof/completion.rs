//! Completion outcomes: the status steps an outcome maps to, and applying them to a task.
//!
//! | outcome | steps |
//! |---|---|
//! | done, review required (default) | review |
//! | done, `metadata.reviewRequired: false` | review, done |
//! | blocked | blocked |
//! | needs_review, partial | review |
//!
//! Steps the task has already reached are dropped (E-AOF-11), and a step the transition table
//! forbids is skipped without changing anything (AOF-X-04).

use serde::Serialize;
use serde_json::json;

use super::data_dir::{DataDir, Journal};
use super::envelope::Outcome;
use super::error::AofError;
use super::event::kind;
use super::task::{Task, TaskStatus, is_valid_transition};
use super::timestamp::Timestamp;

/// The steps an outcome still needs from the task's current status.
pub fn resolve_completion_transitions(
    current: TaskStatus,
    outcome: Outcome,
    review_required: bool,
) -> Vec<TaskStatus> {
    if current == TaskStatus::Done {
        return Vec::new();
    }
    let mapping: &[TaskStatus] = match outcome {
        Outcome::Done if review_required => &[TaskStatus::Review],
        Outcome::Done => &[TaskStatus::Review, TaskStatus::Done],
        Outcome::Blocked => &[TaskStatus::Blocked],
        Outcome::NeedsReview | Outcome::Partial => &[TaskStatus::Review],
    };
    match mapping.iter().position(|status| *status == current) {
        Some(index) => mapping[index + 1..].to_vec(),
        None => mapping.to_vec(),
    }
}

/// The reason recorded for an outcome's transitions: the blockers for `blocked`, else the notes.
pub fn outcome_reason(outcome: Outcome, blockers: &[String], notes: &str) -> String {
    if outcome == Outcome::Blocked && !blockers.is_empty() {
        blockers.join("; ")
    } else {
        notes.to_owned()
    }
}

/// One transition that happened.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AppliedTransition {
    /// The status before.
    pub from: TaskStatus,
    /// The status after.
    pub to: TaskStatus,
    /// Why.
    pub reason: String,
}

/// Moves a task through `steps`, logging `task.transitioned` for each one that happens; steps
/// equal to the current status or forbidden by the table are skipped. Each step happens only
/// together with its event ([`super::store::TaskStore::transition_recorded`]): when one fails, the
/// steps before it stay done with their events and the task is in the status the last of them
/// reached. Call under the task's lock.
pub fn apply_steps(
    data: &DataDir,
    journal: &mut Journal<'_>,
    task: &mut Task,
    steps: &[TaskStatus],
    reason: &str,
    actor: &str,
    now: Timestamp,
) -> Result<Vec<AppliedTransition>, AofError> {
    let mut applied = Vec::new();
    for &to in steps {
        let from = task.status();
        if from == to || !is_valid_transition(from, to) {
            continue;
        }
        data.store.transition_recorded(task, to, now, |task| {
            journal.emit(
                kind::TASK_TRANSITIONED,
                actor,
                Some(task.id()),
                json!({ "from": from, "to": to, "reason": reason }),
            )
        })?;
        applied.push(AppliedTransition {
            from,
            to,
            reason: reason.to_owned(),
        });
    }
    Ok(applied)
}

#[cfg(test)]
mod tests {
    use super::*;
    use TaskStatus::*;

    #[test]
    fn mapping_follows_the_outcome_table() {
        let r = resolve_completion_transitions;
        assert_eq!(r(InProgress, Outcome::Done, true), vec![Review]);
        assert_eq!(r(InProgress, Outcome::Done, false), vec![Review, Done]);
        assert_eq!(r(InProgress, Outcome::Blocked, true), vec![Blocked]);
        assert_eq!(r(InProgress, Outcome::NeedsReview, true), vec![Review]);
        assert_eq!(r(InProgress, Outcome::Partial, true), vec![Review]);
        assert_eq!(r(Review, Outcome::Partial, true), Vec::<TaskStatus>::new());
        assert_eq!(r(Review, Outcome::Done, false), vec![Done]);
        assert_eq!(r(Done, Outcome::Partial, true), Vec::<TaskStatus>::new());
    }
}
