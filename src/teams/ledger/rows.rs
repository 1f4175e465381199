//! The ledger's rows as Rust values: the task and member rows, their statuses and roles as enums
//! stored and printed as the same strings as always, and the mapping from SQLite rows.

use std::fmt;

use rusqlite::types::{Type, ValueRef};
use serde::Serialize;
use serde_json::Value;

pub use crate::storage::closed_set::UnknownName;
use crate::storage::closed_set::closed_set;

closed_set! {
    /// Where a task is in its life: `pending` → `in_progress` → `completed`, or `deleted` from
    /// either of the first two.
    TaskStatus, "task status" {
        /// Waiting to be claimed (possibly blocked by dependencies).
        Pending = "pending",
        /// Claimed by its owner.
        InProgress = "in_progress",
        /// Done; its dependents no longer wait for it.
        Completed = "completed",
        /// Soft-deleted by the lead; its dependents no longer wait for it.
        Deleted = "deleted",
    }
}

impl TaskStatus {
    /// A completed or deleted task never changes again and blocks nobody.
    pub fn is_finished(self) -> bool {
        matches!(self, TaskStatus::Completed | TaskStatus::Deleted)
    }
}

closed_set! {
    /// What a member is doing.
    MemberStatus, "member status" {
        /// Holds no task.
        Idle = "idle",
        /// Holds a task in progress.
        Working = "working",
        /// Waiting on something outside the ledger.
        Blocked = "blocked",
        /// Approved a shutdown, or was shut down with the team.
        Shutdown = "shutdown",
    }
}

closed_set! {
    /// A member's role: one lead per team, everyone else a member.
    MemberRole, "member role" {
        /// The team's creator: deletes tasks, spawns teammates, shuts the team down.
        Lead = "lead",
        /// A teammate.
        Member = "member",
    }
}

/// A task row (the adapter contract's task object).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Task {
    /// The id (a decimal number, in creation order).
    pub id: String,
    /// The subject.
    pub subject: String,
    /// The description.
    pub description: String,
    /// Where the task is in its life.
    pub status: TaskStatus,
    /// The session key of the member holding it.
    pub owner: Option<String>,
    /// Tasks not yet completed that this one waits for.
    pub blocked_by: Vec<String>,
    /// Tasks that wait for this one.
    pub blocks: Vec<String>,
    /// Every dependency ever declared.
    pub depends_on: Vec<String>,
    /// Epoch ms.
    pub created_at: i64,
    /// Epoch ms of the claim.
    pub claimed_at: Option<i64>,
    /// Epoch ms of the completion.
    pub completed_at: Option<i64>,
    /// Epoch ms of the deletion.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deleted_at: Option<i64>,
    /// The present-tense form shown while in progress.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub active_form: Option<String>,
    /// Free JSON.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Value>,
    /// The completion summary.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
}

/// A member row.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Member {
    /// The session key (the member's identity).
    pub session_key: String,
    /// The agent id.
    pub agent_id: String,
    /// The unique member name.
    pub name: String,
    /// Lead or member.
    pub role: MemberRole,
    /// The agent type.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent_type: Option<String>,
    /// What the member is doing.
    pub status: MemberStatus,
    /// The task it holds.
    pub current_task: Option<String>,
    /// Epoch ms.
    pub joined_at: i64,
    /// The sanitised key naming its inbox directory.
    pub inbox_key: String,
}

impl Member {
    /// Whether this member is the team's lead.
    pub fn is_lead(&self) -> bool {
        self.role == MemberRole::Lead
    }
}

/// A task to create.
#[derive(Debug, Clone, Default)]
pub struct NewTask {
    /// The subject.
    pub subject: String,
    /// The description.
    pub description: String,
    /// Ids this task waits for.
    pub depends_on: Vec<String>,
    /// The present-tense form.
    pub active_form: Option<String>,
    /// Free JSON.
    pub metadata: Option<Value>,
}

/// Filters of `task list`.
#[derive(Debug, Clone, Default)]
pub struct TaskFilter {
    /// Only this status (completed and deleted included when asked for by name).
    pub status: Option<TaskStatus>,
    /// Only tasks held by this key.
    pub owner: Option<String>,
    /// Only pending, unowned, unblocked tasks, oldest first.
    pub available: bool,
    /// Show completed and deleted tasks too.
    pub include_completed: bool,
    /// At most this many.
    pub limit: Option<usize>,
}

/// Task counts per status.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct Counts {
    /// Pending tasks.
    pub pending: i64,
    /// Tasks in progress.
    pub in_progress: i64,
    /// Completed tasks.
    pub completed: i64,
    /// Deleted tasks.
    pub deleted: i64,
}

impl Counts {
    /// The counter of `status`.
    pub(super) fn of_mut(&mut self, status: TaskStatus) -> &mut i64 {
        match status {
            TaskStatus::Pending => &mut self.pending,
            TaskStatus::InProgress => &mut self.in_progress,
            TaskStatus::Completed => &mut self.completed,
            TaskStatus::Deleted => &mut self.deleted,
        }
    }
}

/// A list of task ids as stored in `dependsOn`, `blockedBy` and `blocks` (a JSON array).
pub(super) fn json_list(text: &str) -> Vec<String> {
    serde_json::from_str(text).unwrap_or_default()
}

/// The stored form of a list of task ids.
pub(super) fn list_text(list: &[String]) -> String {
    serde_json::to_string(list).unwrap_or_else(|_| "[]".to_owned())
}

/// The columns [`task_from_row`] reads, in its order.
pub(super) const TASK_COLUMNS: &str = "id, subject, description, status, owner, blockedBy, blocks, dependsOn, createdAt, claimedAt, completedAt, deletedAt, activeForm, metadata, summary";

/// A row of ski's tables holding a value ski never writes, named by its key: what a command that
/// meets it refuses (see [`foreign_value`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ForeignRow {
    /// `task "3"`, `member "agent:x"`.
    pub row: String,
    /// What is wrong with it.
    pub problem: String,
}

impl fmt::Display for ForeignRow {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} holds a value ski does not write: {}",
            self.row, self.problem
        )
    }
}

impl std::error::Error for ForeignRow {}

/// What makes a stored value unreadable, when it is a value ski never writes.
fn unreadable(error: &rusqlite::Error) -> Option<String> {
    match error {
        rusqlite::Error::FromSqlConversionFailure(_, _, inner) => Some(inner.to_string()),
        rusqlite::Error::InvalidColumnType(_, column, found) => Some(format!(
            "column {column} holds {} value",
            match found {
                Type::Null => "a null",
                Type::Integer => "an integer",
                Type::Real => "a real",
                Type::Text => "a text",
                Type::Blob => "a blob",
            }
        )),
        rusqlite::Error::IntegralValueOutOfRange(_, n) => {
            Some(format!("the integer {n} is out of range"))
        }
        rusqlite::Error::Utf8Error(_) => Some("a text that is not UTF-8".to_owned()),
        _ => None,
    }
}

/// Why a command cannot go on with what it read, when the ledger holds a value ski never writes:
/// the row by name where the reader knew it, else the value; `None` for any other failure.
pub fn foreign_value(error: &rusqlite::Error) -> Option<String> {
    if let rusqlite::Error::FromSqlConversionFailure(_, _, inner) = error
        && let Some(row) = inner.downcast_ref::<ForeignRow>()
    {
        return Some(row.to_string());
    }
    if let rusqlite::Error::SqliteFailure(_, Some(message)) = error
        && message.contains("malformed JSON")
    {
        return Some("a task list is not JSON".to_owned());
    }
    unreadable(error).map(|problem| format!("a stored value ski does not write: {problem}"))
}

/// `error` of reading a `what` row, named by the row's key when the value is one ski never writes.
fn in_row(row: &rusqlite::Row<'_>, what: &str, error: rusqlite::Error) -> rusqlite::Error {
    let Some(problem) = unreadable(&error) else {
        return error;
    };
    let row = match row.get_ref(0) {
        Ok(ValueRef::Text(key)) => format!("{what} {:?}", String::from_utf8_lossy(key)),
        Ok(key) => format!(
            "the {what} keyed by {}",
            crate::storage::sqlite_schema::shown(key)
        ),
        Err(_) => format!("a {what}"),
    };
    rusqlite::Error::FromSqlConversionFailure(0, Type::Null, Box::new(ForeignRow { row, problem }))
}

/// A [`Task`] from a row selected with [`TASK_COLUMNS`]; a value ski never writes is refused with
/// the task's id.
pub(super) fn task_from_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<Task> {
    read_task(row).map_err(|error| in_row(row, "task", error))
}

fn read_task(row: &rusqlite::Row<'_>) -> rusqlite::Result<Task> {
    let metadata: Option<String> = row.get(13)?;
    Ok(Task {
        id: row.get(0)?,
        subject: row.get(1)?,
        description: row.get(2)?,
        status: row.get(3)?,
        owner: row.get(4)?,
        blocked_by: json_list(&row.get::<_, String>(5)?),
        blocks: json_list(&row.get::<_, String>(6)?),
        depends_on: json_list(&row.get::<_, String>(7)?),
        created_at: row.get(8)?,
        claimed_at: row.get(9)?,
        completed_at: row.get(10)?,
        deleted_at: row.get(11)?,
        active_form: row.get(12)?,
        metadata: metadata.and_then(|m| serde_json::from_str(&m).ok()),
        summary: row.get(14)?,
    })
}

/// The columns [`member_from_row`] reads, in its order.
pub(super) const MEMBER_COLUMNS: &str =
    "sessionKey, agentId, name, role, agentType, status, currentTask, joinedAt, inboxKey";

/// A [`Member`] from a row selected with [`MEMBER_COLUMNS`]; a value ski never writes is refused
/// with the member's session key.
pub(super) fn member_from_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<Member> {
    read_member(row).map_err(|error| in_row(row, "member", error))
}

fn read_member(row: &rusqlite::Row<'_>) -> rusqlite::Result<Member> {
    Ok(Member {
        session_key: row.get(0)?,
        agent_id: row.get(1)?,
        name: row.get(2)?,
        role: row.get(3)?,
        agent_type: row.get(4)?,
        status: row.get(5)?,
        current_task: row.get(6)?,
        joined_at: row.get(7)?,
        inbox_key: row.get(8)?,
    })
}

#[cfg(test)]
mod tests {
    use std::str::FromStr;

    use rusqlite::Connection;
    use rusqlite::types::{FromSql, ToSql};

    use super::*;

    fn round_trip<T>(all: &[T], texts: &[&str])
    where
        T: Copy + fmt::Debug + PartialEq + FromStr<Err = UnknownName> + ToSql + FromSql,
        T: Serialize + fmt::Display,
    {
        let conn = Connection::open_in_memory().expect("in-memory database");
        assert_eq!(all.len(), texts.len());
        for (value, text) in all.iter().zip(texts) {
            assert_eq!(value.to_string(), *text);
            assert_eq!(text.parse::<T>(), Ok(*value));
            assert_eq!(serde_json::to_value(value).unwrap(), Value::from(*text));
            let stored: String = conn
                .query_row("SELECT ?1", [value], |r| r.get(0))
                .expect("bind");
            assert_eq!(stored, *text);
            let read: T = conn
                .query_row("SELECT ?1", [text], |r| r.get(0))
                .expect("read");
            assert_eq!(read, *value);
        }
        assert!("Pending".parse::<T>().is_err());
        assert!(
            conn.query_row("SELECT 'nonsense'", [], |r| r.get::<_, T>(0))
                .is_err()
        );
    }

    #[test]
    fn statuses_and_roles_keep_their_strings_everywhere() {
        round_trip(
            TaskStatus::ALL,
            &["pending", "in_progress", "completed", "deleted"],
        );
        round_trip(
            MemberStatus::ALL,
            &["idle", "working", "blocked", "shutdown"],
        );
        round_trip(MemberRole::ALL, &["lead", "member"]);
    }

    #[test]
    fn display_pads_like_the_string() {
        assert_eq!(format!("{:<12}|", TaskStatus::InProgress), "in_progress |");
        assert_eq!(format!("{:<6}|", MemberRole::Lead), "lead  |");
    }
}
