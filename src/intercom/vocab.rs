//! The intercom server's closed sets (session statuses, approval statuses, risk levels,
//! connectivity, operational modes, the operator's answers): one enum each, written on the wire
//! (serde) and in the database (rusqlite's `ToSql`/`FromSql`) under the names the server always
//! used. A stored value outside its set reads as an error naming the set and the value.

use rusqlite::types::{FromSql, FromSqlError, FromSqlResult, ToSql, ToSqlOutput, ValueRef};

pub use crate::storage::closed_set::UnknownName;
use crate::storage::closed_set::closed_set;

use super::config::Mode;

closed_set! {
    /// `session.status`.
    SessionStatus, "session status" {
        Created = "created",
        Active = "active",
        Paused = "paused",
        Terminated = "terminated",
        Interrupted = "interrupted",
    }
}

impl SessionStatus {
    /// The statuses of a session that still runs: every query for live sessions filters on
    /// these, and a restart interrupts them.
    pub const LIVE: &'static [SessionStatus] = &[
        SessionStatus::Created,
        SessionStatus::Active,
        SessionStatus::Paused,
    ];

    /// Whether a session with this status still runs.
    pub fn is_live(self) -> bool {
        SessionStatus::LIVE.contains(&self)
    }
}

closed_set! {
    /// `approval_request.status`.
    ApprovalStatus, "approval status" {
        Pending = "pending",
        Approved = "approved",
        Rejected = "rejected",
        Expired = "expired",
        Consumed = "consumed",
        Interrupted = "interrupted",
    }
}

closed_set! {
    /// How risky the agent says a change is (`approval_request.risk_level`).
    RiskLevel, "risk level" {
        Low = "low",
        High = "high",
        Critical = "critical",
    }
}

closed_set! {
    /// `session.connectivity_status`: whether the agent answers.
    Connectivity, "connectivity status" {
        Online = "online",
        Stalled = "stalled",
    }
}

closed_set! {
    /// `session.mode`: where the operator works with the session (`switch_freq`).
    WorkMode, "operational mode" {
        Remote = "remote",
        Local = "local",
        Hybrid = "hybrid",
    }
}

closed_set! {
    /// The operator's answer to a clearance request, or `interrupted` when the session ended
    /// first.
    Clearance, "clearance decision" {
        Approved = "approved",
        Rejected = "rejected",
        Interrupted = "interrupted",
    }
}

impl Clearance {
    /// The approval's status once decided so.
    pub fn approval_status(self) -> ApprovalStatus {
        match self {
            Clearance::Approved => ApprovalStatus::Approved,
            Clearance::Rejected => ApprovalStatus::Rejected,
            Clearance::Interrupted => ApprovalStatus::Interrupted,
        }
    }
}

closed_set! {
    /// The operator's answer to a forwarded prompt.
    PromptAnswer, "prompt decision" {
        Continue = "continue",
        Refine = "refine",
        Stop = "stop",
    }
}

closed_set! {
    /// The operator's answer to an agent on standby.
    WaitAnswer, "standby decision" {
        Resumed = "resumed",
        Stopped = "stopped",
    }
}

/// `'a', 'b', …`: `members` as an SQL list of literals, for `IN (…)` (the names are fixed
/// identifiers without quotes).
pub fn sql_list<T: Copy + std::fmt::Display>(members: &[T], separator: &str) -> String {
    members
        .iter()
        .map(|member| format!("'{member}'"))
        .collect::<Vec<_>>()
        .join(separator)
}

impl ToSql for Mode {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(ToSqlOutput::from(self.as_str()))
    }
}

impl FromSql for Mode {
    fn column_result(value: ValueRef<'_>) -> FromSqlResult<Self> {
        match value.as_str()? {
            "mcp" => Ok(Mode::Mcp),
            "acp" => Ok(Mode::Acp),
            other => Err(FromSqlError::Other(Box::new(UnknownName {
                set: "protocol mode",
                value: other.to_owned(),
                known: &["mcp", "acp"],
            }))),
        }
    }
}

#[cfg(test)]
mod tests {
    use rusqlite::{Connection, params};

    use super::*;

    /// Writes every member of a set into a real SQLite table and reads it back.
    fn round_trip<T>(members: &[T]) -> Vec<T>
    where
        T: ToSql + FromSql,
    {
        let db = Connection::open_in_memory().expect("in-memory database");
        db.execute_batch("CREATE TABLE t (n INTEGER PRIMARY KEY, v TEXT NOT NULL)")
            .expect("table");
        for (n, member) in members.iter().enumerate() {
            db.execute("INSERT INTO t (n, v) VALUES (?1, ?2)", params![n, member])
                .expect("insert");
        }
        let mut statement = db.prepare("SELECT v FROM t ORDER BY n").expect("select");
        statement
            .query_map([], |row| row.get(0))
            .expect("query")
            .collect::<Result<_, _>>()
            .expect("read back")
    }

    /// The stored texts of a set's members.
    fn stored<T: ToSql>(members: &[T]) -> Vec<String> {
        let db = Connection::open_in_memory().expect("in-memory database");
        members
            .iter()
            .map(|member| {
                db.query_row("SELECT ?1", params![member], |row| row.get(0))
                    .expect("as text")
            })
            .collect()
    }

    #[test]
    fn every_set_round_trips_through_sqlite_under_its_names() {
        assert_eq!(round_trip(SessionStatus::ALL), SessionStatus::ALL);
        assert_eq!(round_trip(ApprovalStatus::ALL), ApprovalStatus::ALL);
        assert_eq!(round_trip(RiskLevel::ALL), RiskLevel::ALL);
        assert_eq!(round_trip(Connectivity::ALL), Connectivity::ALL);
        assert_eq!(round_trip(WorkMode::ALL), WorkMode::ALL);
        assert_eq!(round_trip(Clearance::ALL), Clearance::ALL);
        assert_eq!(round_trip(PromptAnswer::ALL), PromptAnswer::ALL);
        assert_eq!(round_trip(WaitAnswer::ALL), WaitAnswer::ALL);
        assert_eq!(round_trip(&[Mode::Mcp, Mode::Acp]), [Mode::Mcp, Mode::Acp]);
        assert_eq!(
            stored(SessionStatus::ALL),
            ["created", "active", "paused", "terminated", "interrupted"]
        );
        assert_eq!(
            stored(ApprovalStatus::ALL),
            [
                "pending",
                "approved",
                "rejected",
                "expired",
                "consumed",
                "interrupted"
            ]
        );
        assert_eq!(stored(RiskLevel::ALL), ["low", "high", "critical"]);
        assert_eq!(stored(Connectivity::ALL), ["online", "stalled"]);
        assert_eq!(stored(WorkMode::ALL), ["remote", "local", "hybrid"]);
        assert_eq!(stored(&[Mode::Mcp, Mode::Acp]), ["mcp", "acp"]);
    }

    #[test]
    fn the_wire_names_are_the_stored_names() {
        for status in SessionStatus::ALL {
            assert_eq!(
                serde_json::to_value(status).expect("json"),
                serde_json::json!(status.as_str())
            );
        }
        assert_eq!(
            serde_json::to_string(&Clearance::Approved).expect("json"),
            "\"approved\""
        );
        assert_eq!(
            serde_json::from_str::<PromptAnswer>("\"refine\"").expect("parse"),
            PromptAnswer::Refine
        );
        assert_eq!(
            serde_json::to_string(&WaitAnswer::Stopped).expect("json"),
            "\"stopped\""
        );
    }

    #[test]
    fn an_unknown_stored_value_is_an_error_naming_it() {
        let db = Connection::open_in_memory().expect("in-memory database");
        db.execute_batch(
            "CREATE TABLE t (v);
             INSERT INTO t VALUES ('archived'), (x'00ff'), (7);",
        )
        .expect("rows");
        let read = |rowid: i64| -> rusqlite::Result<SessionStatus> {
            db.query_row("SELECT v FROM t WHERE rowid = ?1", params![rowid], |row| {
                row.get(0)
            })
        };
        let error = read(1).expect_err("archived is no status").to_string();
        assert!(
            error.contains(
                "unknown session status \"archived\" \
                 (known: created, active, paused, terminated, interrupted)"
            ),
            "{error}"
        );
        assert!(read(2).is_err(), "a blob is no status");
        assert!(read(3).is_err(), "an integer is no status");
        let mode: rusqlite::Result<Mode> = db.query_row("SELECT 'sse'", [], |row| row.get(0));
        assert!(
            mode.expect_err("no such mode")
                .to_string()
                .contains("protocol mode \"sse\"")
        );
    }

    #[test]
    fn the_live_statuses_render_as_an_sql_list() {
        assert_eq!(
            sql_list(SessionStatus::LIVE, ", "),
            "'created', 'active', 'paused'"
        );
        assert!(SessionStatus::Paused.is_live());
        assert!(!SessionStatus::Interrupted.is_live());
        assert_eq!(
            "terminated".parse::<SessionStatus>(),
            Ok(SessionStatus::Terminated)
        );
        assert_eq!(
            Clearance::Rejected.approval_status(),
            ApprovalStatus::Rejected
        );
    }
}
