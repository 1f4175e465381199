//! SQLite persistence (rusqlite, WAL): sessions, pending approvals keyed by session and request
//! id, and the steering queue; the schema bootstrap migrates an older database in place. A
//! database holding what the server did not write is refused on open ([`audit`]).

mod audit;

use std::path::Path;
use std::sync::{Mutex, MutexGuard};

use rusqlite::{Connection, OptionalExtension, params};

use super::config::Mode;
use super::vocab::{
    ApprovalStatus, Clearance, Connectivity, RiskLevel, SessionStatus, WorkMode, sql_list,
};

/// What can go wrong with the database.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("database: {0}")]
    Sqlite(#[from] rusqlite::Error),
    #[error("cannot create the database directory {path}: {source}")]
    Directory {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("not found: {0}")]
    NotFound(String),
    /// The database holds schema objects or values the server never writes.
    #[error(
        "database {path} holds what intercom did not write: {found}; move it aside or restore it"
    )]
    Foreign {
        /// The file.
        path: String,
        /// What was found.
        found: String,
    },
}

/// A session row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Session {
    pub id: String,
    pub owner_user_id: String,
    pub status: SessionStatus,
    pub protocol_mode: Mode,
    pub mode: WorkMode,
    pub workspace_id: Option<String>,
    pub channel_id: Option<String>,
    pub thread_ts: Option<String>,
    pub connectivity_status: Connectivity,
    pub prompt: Option<String>,
    pub created_at: String,
    pub last_activity_at: Option<String>,
}

impl Session {
    /// The first eight characters of the id, as Slack messages show it.
    pub fn short_id(&self) -> &str {
        self.id.get(..8).unwrap_or(&self.id)
    }
}

/// What a new session starts with.
#[derive(Debug, Clone)]
pub struct NewSession<'a> {
    pub id: &'a str,
    pub owner_user_id: &'a str,
    pub protocol_mode: Mode,
    pub mode: WorkMode,
    pub workspace_id: Option<&'a str>,
    pub workspace_root: Option<&'a str>,
    pub channel_id: Option<&'a str>,
    pub prompt: Option<&'a str>,
}

/// An approval to record as pending: what the agent asks to change and how risky it says it is.
#[derive(Debug, Clone, Copy)]
pub struct NewApproval<'a> {
    pub session_id: &'a str,
    /// Session-scoped: the agent's own id (ACP clearance) or [`Store::next_request_id`].
    pub request_id: &'a str,
    pub title: &'a str,
    pub description: Option<&'a str>,
    /// The proposed change; empty when the request carries none.
    pub diff: &'a str,
    pub file_path: &'a str,
    pub risk_level: RiskLevel,
}

/// A pending or decided approval.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Approval {
    pub session_id: String,
    pub request_id: String,
    pub title: String,
    pub file_path: String,
    pub diff_content: String,
    pub status: ApprovalStatus,
    pub reason: Option<String>,
}

/// An approval that expired: request id, and the channel and `ts` of its message if posted.
pub type ExpiredApproval = (String, Option<String>, Option<String>);

/// The database: one connection behind a mutex (every statement is short).
pub struct Store {
    connection: Mutex<Connection>,
}

/// The `session` table; its `CHECK` lists every [`SessionStatus`].
fn session_table() -> String {
    format!(
        "CREATE TABLE IF NOT EXISTS session (
    id TEXT PRIMARY KEY,
    owner_user_id TEXT NOT NULL,
    workspace_root TEXT,
    status TEXT NOT NULL CHECK (status IN ({})),
    prompt TEXT,
    mode TEXT NOT NULL DEFAULT 'remote',
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    terminated_at TEXT,
    last_tool TEXT,
    nudge_count INTEGER NOT NULL DEFAULT 0,
    stall_paused INTEGER NOT NULL DEFAULT 0,
    progress_snapshot TEXT
)",
        sql_list(SessionStatus::ALL, ",")
    )
}

/// `status IN ('created', 'active', 'paused')`: the filter of every query for live sessions,
/// built from [`SessionStatus::LIVE`].
fn live_filter() -> String {
    format!("status IN ({})", sql_list(SessionStatus::LIVE, ", "))
}

/// Columns the bootstrap adds to a `session` table from an older schema, with their definitions.
pub const ADDED_SESSION_COLUMNS: &[(&str, &str)] = &[
    ("protocol_mode", "TEXT NOT NULL DEFAULT 'mcp'"),
    ("channel_id", "TEXT"),
    ("thread_ts", "TEXT"),
    ("connectivity_status", "TEXT NOT NULL DEFAULT 'online'"),
    ("last_activity_at", "TEXT"),
    ("activity_seq", "INTEGER NOT NULL DEFAULT 0"),
    ("restart_of", "TEXT"),
    ("agent_session_id", "TEXT"),
    ("title", "TEXT"),
    ("workspace_id", "TEXT"),
    ("agent_pid", "INTEGER"),
    ("end_reason", "TEXT"),
    ("restart_count", "INTEGER NOT NULL DEFAULT 0"),
];

const OTHER_TABLES: &str = "
CREATE TABLE IF NOT EXISTS approval_request (
    session_id TEXT NOT NULL,
    request_id TEXT NOT NULL,
    title TEXT NOT NULL,
    description TEXT,
    diff_content TEXT NOT NULL,
    file_path TEXT NOT NULL,
    risk_level TEXT NOT NULL DEFAULT 'low',
    status TEXT NOT NULL DEFAULT 'pending',
    reason TEXT,
    slack_channel TEXT,
    slack_ts TEXT,
    created_at TEXT NOT NULL,
    decided_at TEXT,
    consumed_at TEXT,
    PRIMARY KEY (session_id, request_id)
);
CREATE TABLE IF NOT EXISTS steering_message (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id TEXT NOT NULL,
    channel_id TEXT,
    message TEXT NOT NULL,
    source TEXT NOT NULL DEFAULT 'slack',
    created_at TEXT NOT NULL,
    consumed INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS schema_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
";

const SESSION_COLUMNS: &str = "id, owner_user_id, status, protocol_mode, mode, workspace_id, \
channel_id, thread_ts, connectivity_status, prompt, created_at, last_activity_at";

fn now() -> String {
    time::OffsetDateTime::now_utc()
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default()
}

fn session_from_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<Session> {
    Ok(Session {
        id: row.get(0)?,
        owner_user_id: row.get(1)?,
        status: row.get(2)?,
        protocol_mode: row.get(3)?,
        mode: row.get(4)?,
        workspace_id: row.get(5)?,
        channel_id: row.get(6)?,
        thread_ts: row.get(7)?,
        connectivity_status: row.get(8)?,
        prompt: row.get(9)?,
        created_at: row.get(10)?,
        last_activity_at: row.get(11)?,
    })
}

/// What a restart found of an earlier run and marked interrupted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Leftovers {
    pub sessions: usize,
    pub approvals: usize,
}

/// Creates the missing tables, adds the columns an older `session` table lacks, and creates the
/// routing indexes; answers the columns added.
fn bootstrap(tx: &Connection) -> rusqlite::Result<Vec<&'static str>> {
    tx.execute_batch(&session_table())?;
    let existing: Vec<String> = {
        let mut statement = tx.prepare("SELECT name FROM pragma_table_info('session')")?;
        statement
            .query_map([], |row| row.get(0))?
            .collect::<Result<_, _>>()?
    };
    let mut added = Vec::new();
    for (column, definition) in ADDED_SESSION_COLUMNS {
        if !existing.iter().any(|name| name == column) {
            tx.execute_batch(&format!(
                "ALTER TABLE session ADD COLUMN {column} {definition}"
            ))?;
            added.push(*column);
        }
    }
    tx.execute_batch(OTHER_TABLES)?;
    tx.execute_batch(
        "CREATE INDEX IF NOT EXISTS idx_session_channel ON session(channel_id, status);
         CREATE INDEX IF NOT EXISTS idx_session_channel_thread ON session(channel_id, thread_ts);",
    )?;
    tx.execute(
        "INSERT INTO schema_meta(key, value) VALUES ('schema_version', '1')
         ON CONFLICT(key) DO UPDATE SET value = excluded.value",
        [],
    )?;
    Ok(added)
}

/// Refuses a database with schema objects the bootstrap does not make (a trigger, a view, an
/// unknown table or index) or with values of another type than their column's; reports the rows
/// whose status the server never writes (E-INT-28).
fn refuse_foreign(connection: &Connection, path: &Path) -> Result<(), StoreError> {
    let expected = {
        let memory = Connection::open_in_memory()?;
        bootstrap(&memory)?;
        crate::storage::sqlite_schema::objects(&memory)?
    };
    let foreign = |found: String| StoreError::Foreign {
        path: path.display().to_string(),
        found,
    };
    let schema = audit::schema_findings(connection, &expected)?;
    if !schema.is_empty() {
        return Err(foreign(format!(
            "schema objects {}",
            audit::listed(&schema)
        )));
    }
    let rows = audit::row_report(connection)?;
    if !rows.mistyped.is_empty() {
        return Err(foreign(format!("rows {}", audit::listed(&rows.mistyped))));
    }
    if !rows.unknown_values.is_empty() {
        tracing::warn!(
            database = %path.display(),
            "rows with a status or other value intercom never writes are left as they are (never live; read by id, an error): {}",
            audit::listed(&rows.unknown_values)
        );
    }
    Ok(())
}

impl Store {
    /// Opens (creating it and its directory if needed) the database at `path` in WAL mode and
    /// bootstraps the schema.
    pub fn open(path: &Path) -> Result<Store, StoreError> {
        if let Some(dir) = path.parent().filter(|dir| !dir.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|source| StoreError::Directory {
                path: dir.display().to_string(),
                source,
            })?;
        }
        let connection = Connection::open(path)?;
        connection.pragma_update(None, "journal_mode", "WAL")?;
        connection.pragma_update(None, "busy_timeout", 5000)?;
        connection.pragma_update(None, "foreign_keys", "ON")?;
        refuse_foreign(&connection, path)?;
        let store = Store {
            connection: Mutex::new(connection),
        };
        store.bootstrap_schema()?;
        Ok(store)
    }

    fn db(&self) -> MutexGuard<'_, Connection> {
        self.connection
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Creates missing tables, adds the columns an older `session` table lacks (rows kept), and
    /// creates the routing indexes.
    pub fn bootstrap_schema(&self) -> Result<Vec<&'static str>, StoreError> {
        let mut db = self.db();
        let tx = db.transaction()?;
        let added = bootstrap(&tx)?;
        tx.commit()?;
        Ok(added)
    }

    /// Marks every session left created/active/paused by an earlier run as interrupted, and
    /// their pending approvals too (in one transaction); answers how many of each.
    pub fn interrupt_leftovers(&self) -> Result<Leftovers, StoreError> {
        let mut db = self.db();
        let stamp = now();
        let transaction = db.transaction()?;
        let approvals = transaction.execute(
            "UPDATE approval_request SET status = ?2, decided_at = ?1,
                reason = COALESCE(reason, 'server restarted')
             WHERE status = ?3",
            params![stamp, ApprovalStatus::Interrupted, ApprovalStatus::Pending],
        )?;
        let sessions = transaction.execute(
            &format!(
                "UPDATE session SET status = ?2, updated_at = ?1 WHERE {}",
                live_filter()
            ),
            params![stamp, SessionStatus::Interrupted],
        )?;
        transaction.commit()?;
        Ok(Leftovers {
            sessions,
            approvals,
        })
    }

    /// Inserts an active session.
    pub fn create_session(&self, new: &NewSession<'_>) -> Result<Session, StoreError> {
        let stamp = now();
        {
            let db = self.db();
            let seq: i64 = db.query_row(
                "SELECT COALESCE(MAX(activity_seq), 0) + 1 FROM session",
                [],
                |r| r.get(0),
            )?;
            db.execute(
                "INSERT INTO session (id, owner_user_id, workspace_root, status, prompt, mode,
                    created_at, updated_at, protocol_mode, channel_id, workspace_id,
                    connectivity_status, last_activity_at, activity_seq, title)
                 VALUES (?1, ?2, ?3, ?11, ?4, ?5, ?6, ?6, ?7, ?8, ?9, ?12, ?6, ?10, ?4)",
                params![
                    new.id,
                    new.owner_user_id,
                    new.workspace_root,
                    new.prompt,
                    new.mode,
                    stamp,
                    new.protocol_mode,
                    new.channel_id,
                    new.workspace_id,
                    seq,
                    SessionStatus::Active,
                    Connectivity::Online
                ],
            )?;
        }
        self.session(new.id)?
            .ok_or_else(|| StoreError::NotFound(format!("session {}", new.id)))
    }

    /// One session by id.
    pub fn session(&self, id: &str) -> Result<Option<Session>, StoreError> {
        let db = self.db();
        Ok(db
            .query_row(
                &format!("SELECT {SESSION_COLUMNS} FROM session WHERE id = ?1"),
                params![id],
                session_from_row,
            )
            .optional()?)
    }

    /// Active sessions of a channel, most recently active first.
    pub fn active_in_channel(&self, channel: &str) -> Result<Vec<Session>, StoreError> {
        let db = self.db();
        let mut statement = db.prepare(&format!(
            "SELECT {SESSION_COLUMNS} FROM session
             WHERE channel_id = ?1 AND {}
             ORDER BY activity_seq DESC",
            live_filter()
        ))?;
        Ok(statement
            .query_map(params![channel], session_from_row)?
            .collect::<Result<_, _>>()?)
    }

    /// The active session whose thread is `thread_ts` in `channel`.
    pub fn active_in_thread(
        &self,
        channel: &str,
        thread_ts: &str,
    ) -> Result<Option<Session>, StoreError> {
        let db = self.db();
        Ok(db
            .query_row(
                &format!(
                    "SELECT {SESSION_COLUMNS} FROM session
                     WHERE channel_id = ?1 AND thread_ts = ?2 AND {}",
                    live_filter()
                ),
                params![channel, thread_ts],
                session_from_row,
            )
            .optional()?)
    }

    /// Active sessions anywhere whose id starts with `prefix`.
    pub fn active_by_prefix(&self, prefix: &str) -> Result<Vec<Session>, StoreError> {
        let db = self.db();
        let mut statement = db.prepare(&format!(
            "SELECT {SESSION_COLUMNS} FROM session
             WHERE substr(id, 1, length(?1)) = ?1 AND {}
             ORDER BY activity_seq DESC",
            live_filter()
        ))?;
        Ok(statement
            .query_map(params![prefix], session_from_row)?
            .collect::<Result<_, _>>()?)
    }

    /// Records the thread root once: a session that has a `thread_ts` keeps it. Answers the
    /// session's `thread_ts` after the call.
    pub fn set_thread_ts(&self, id: &str, thread_ts: &str) -> Result<Option<String>, StoreError> {
        let db = self.db();
        db.execute(
            "UPDATE session SET thread_ts = ?2, updated_at = ?3
             WHERE id = ?1 AND thread_ts IS NULL",
            params![id, thread_ts, now()],
        )?;
        Ok(db
            .query_row(
                "SELECT thread_ts FROM session WHERE id = ?1",
                params![id],
                |row| row.get(0),
            )
            .optional()?
            .flatten())
    }

    /// The session did something: it becomes the most recently active one.
    pub fn touch(&self, id: &str, tool: Option<&str>) -> Result<(), StoreError> {
        let db = self.db();
        db.execute(
            "UPDATE session SET last_activity_at = ?2, updated_at = ?2,
                last_tool = COALESCE(?3, last_tool),
                activity_seq = (SELECT COALESCE(MAX(activity_seq), 0) + 1 FROM session)
             WHERE id = ?1",
            params![id, now(), tool],
        )?;
        Ok(())
    }

    /// Sets the operational mode; answers the previous one.
    pub fn set_mode(&self, id: &str, mode: WorkMode) -> Result<WorkMode, StoreError> {
        let db = self.db();
        let previous: WorkMode = db
            .query_row("SELECT mode FROM session WHERE id = ?1", params![id], |r| {
                r.get(0)
            })
            .optional()?
            .ok_or_else(|| StoreError::NotFound(format!("session {id}")))?;
        db.execute(
            "UPDATE session SET mode = ?2, updated_at = ?3 WHERE id = ?1",
            params![id, mode, now()],
        )?;
        Ok(previous)
    }

    /// Stores the progress snapshot a `ping` carried.
    pub fn set_progress(&self, id: &str, snapshot: &str) -> Result<(), StoreError> {
        self.db().execute(
            "UPDATE session SET progress_snapshot = ?2 WHERE id = ?1",
            params![id, snapshot],
        )?;
        Ok(())
    }

    /// Ends a session (`terminated` or `interrupted`) and its pending approvals; answers whether
    /// it was still live.
    pub fn end_session(&self, id: &str, status: SessionStatus) -> Result<bool, StoreError> {
        let db = self.db();
        let stamp = now();
        let changed = db.execute(
            &format!(
                "UPDATE session SET status = ?2, updated_at = ?3, terminated_at = ?3
                 WHERE id = ?1 AND {}",
                live_filter()
            ),
            params![id, status, stamp],
        )?;
        db.execute(
            "UPDATE approval_request SET status = ?3, decided_at = ?2
             WHERE session_id = ?1 AND status = ?4",
            params![
                id,
                stamp,
                ApprovalStatus::Interrupted,
                ApprovalStatus::Pending
            ],
        )?;
        Ok(changed > 0)
    }

    /// Records why a session ended (the text its final message gives).
    pub fn set_end_reason(&self, id: &str, reason: &str) -> Result<(), StoreError> {
        self.db().execute(
            "UPDATE session SET end_reason = ?2 WHERE id = ?1",
            params![id, reason],
        )?;
        Ok(())
    }

    /// Records the process (and process-group) id of a session's spawned agent; `None` once it
    /// is gone. A restart counts when `restarted`.
    pub fn set_agent_pid(
        &self,
        id: &str,
        pid: Option<u32>,
        restarted: bool,
    ) -> Result<(), StoreError> {
        self.db().execute(
            "UPDATE session SET agent_pid = ?2, restart_count = restart_count + ?3 WHERE id = ?1",
            params![id, pid, i64::from(restarted)],
        )?;
        Ok(())
    }

    /// Spawned agents an earlier run left recorded: `(session id, process-group id)`.
    pub fn recorded_agents(&self) -> Result<Vec<(String, u32)>, StoreError> {
        let db = self.db();
        let mut statement =
            db.prepare("SELECT id, agent_pid FROM session WHERE agent_pid IS NOT NULL")?;
        Ok(statement
            .query_map([], |row| Ok((row.get(0)?, row.get(1)?)))?
            .collect::<Result<_, _>>()?)
    }

    /// Forgets every recorded agent process (after the leftovers were ended).
    pub fn clear_agent_pids(&self) -> Result<(), StoreError> {
        self.db()
            .execute("UPDATE session SET agent_pid = NULL", [])?;
        Ok(())
    }

    /// Sets `connectivity_status`.
    pub fn set_connectivity(&self, id: &str, status: Connectivity) -> Result<(), StoreError> {
        self.db().execute(
            "UPDATE session SET connectivity_status = ?2, updated_at = ?3 WHERE id = ?1",
            params![id, status, now()],
        )?;
        Ok(())
    }

    /// Sets `nudge_count` and `stall_paused`.
    pub fn set_stall(&self, id: &str, nudge_count: u32, paused: bool) -> Result<(), StoreError> {
        self.db().execute(
            "UPDATE session SET nudge_count = ?2, stall_paused = ?3 WHERE id = ?1",
            params![id, nudge_count, i64::from(paused)],
        )?;
        Ok(())
    }

    /// Marks a session's pending approvals `expired`; answers `(request id, channel, ts)` of
    /// each so their messages can be updated.
    pub fn expire_approvals(
        &self,
        session_id: &str,
        reason: &str,
    ) -> Result<Vec<ExpiredApproval>, StoreError> {
        let mut db = self.db();
        let tx = db.transaction()?;
        let rows: Vec<ExpiredApproval> = {
            let mut statement = tx.prepare(
                "SELECT request_id, slack_channel, slack_ts FROM approval_request
                 WHERE session_id = ?1 AND status = ?2 ORDER BY created_at, request_id",
            )?;
            statement
                .query_map(params![session_id, ApprovalStatus::Pending], |row| {
                    Ok((row.get(0)?, row.get(1)?, row.get(2)?))
                })?
                .collect::<Result<_, _>>()?
        };
        tx.execute(
            "UPDATE approval_request SET status = ?4, reason = ?2, decided_at = ?3
             WHERE session_id = ?1 AND status = ?5",
            params![
                session_id,
                reason,
                now(),
                ApprovalStatus::Expired,
                ApprovalStatus::Pending
            ],
        )?;
        tx.commit()?;
        Ok(rows)
    }

    /// A session's queued steering messages in order, with their row ids (nothing consumed).
    pub fn pending_steering(&self, session_id: &str) -> Result<Vec<(i64, String)>, StoreError> {
        let db = self.db();
        let mut statement = db.prepare(
            "SELECT id, message FROM steering_message
             WHERE session_id = ?1 AND consumed = 0 ORDER BY id",
        )?;
        Ok(statement
            .query_map(params![session_id], |row| Ok((row.get(0)?, row.get(1)?)))?
            .collect::<Result<_, _>>()?)
    }

    /// Marks one steering message delivered.
    pub fn mark_steering_consumed(&self, id: i64) -> Result<(), StoreError> {
        self.db().execute(
            "UPDATE steering_message SET consumed = 1 WHERE id = ?1",
            params![id],
        )?;
        Ok(())
    }

    /// The next request id of a session: `req-001`, `req-002`, … (ids are session-scoped).
    pub fn next_request_id(&self, session_id: &str) -> Result<String, StoreError> {
        let count: i64 = self.db().query_row(
            "SELECT COUNT(*) FROM approval_request WHERE session_id = ?1",
            params![session_id],
            |r| r.get(0),
        )?;
        Ok(format!("req-{:03}", count + 1))
    }

    /// Records a pending approval.
    pub fn insert_approval(&self, approval: &NewApproval<'_>) -> Result<(), StoreError> {
        self.db().execute(
            "INSERT INTO approval_request (session_id, request_id, title, description,
                diff_content, file_path, risk_level, status, created_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?9, ?8)",
            params![
                approval.session_id,
                approval.request_id,
                approval.title,
                approval.description,
                approval.diff,
                approval.file_path,
                approval.risk_level,
                now(),
                ApprovalStatus::Pending
            ],
        )?;
        Ok(())
    }

    /// Where the approval message was posted.
    pub fn set_approval_message(
        &self,
        session_id: &str,
        request_id: &str,
        channel: &str,
        ts: &str,
    ) -> Result<(), StoreError> {
        self.db().execute(
            "UPDATE approval_request SET slack_channel = ?3, slack_ts = ?4
             WHERE session_id = ?1 AND request_id = ?2",
            params![session_id, request_id, channel, ts],
        )?;
        Ok(())
    }

    /// Decides a pending approval; answers false when it was not pending.
    pub fn decide_approval(
        &self,
        session_id: &str,
        request_id: &str,
        decision: Clearance,
        reason: Option<&str>,
    ) -> Result<bool, StoreError> {
        Ok(self.db().execute(
            "UPDATE approval_request SET status = ?3, reason = ?4, decided_at = ?5
             WHERE session_id = ?1 AND request_id = ?2 AND status = ?6",
            params![
                session_id,
                request_id,
                decision.approval_status(),
                reason,
                now(),
                ApprovalStatus::Pending
            ],
        )? > 0)
    }

    /// Marks an approved request consumed (its diff applied); answers false unless it was
    /// approved and unconsumed.
    pub fn consume_approval(&self, session_id: &str, request_id: &str) -> Result<bool, StoreError> {
        Ok(self.db().execute(
            "UPDATE approval_request SET status = ?4, consumed_at = ?3
             WHERE session_id = ?1 AND request_id = ?2 AND status = ?5",
            params![
                session_id,
                request_id,
                now(),
                ApprovalStatus::Consumed,
                ApprovalStatus::Approved
            ],
        )? > 0)
    }

    /// One approval.
    pub fn approval(
        &self,
        session_id: &str,
        request_id: &str,
    ) -> Result<Option<Approval>, StoreError> {
        Ok(self
            .db()
            .query_row(
                "SELECT session_id, request_id, title, file_path, diff_content, status, reason
                 FROM approval_request WHERE session_id = ?1 AND request_id = ?2",
                params![session_id, request_id],
                |row| {
                    Ok(Approval {
                        session_id: row.get(0)?,
                        request_id: row.get(1)?,
                        title: row.get(2)?,
                        file_path: row.get(3)?,
                        diff_content: row.get(4)?,
                        status: row.get(5)?,
                        reason: row.get(6)?,
                    })
                },
            )
            .optional()?)
    }

    /// Request ids of a session's pending approvals.
    pub fn pending_approvals(&self, session_id: &str) -> Result<Vec<String>, StoreError> {
        let db = self.db();
        let mut statement = db.prepare(
            "SELECT request_id FROM approval_request
             WHERE session_id = ?1 AND status = ?2 ORDER BY created_at, request_id",
        )?;
        Ok(statement
            .query_map(params![session_id, ApprovalStatus::Pending], |row| {
                row.get(0)
            })?
            .collect::<Result<_, _>>()?)
    }

    /// Queues a steering message (consumed = 0); answers how many are queued for the session.
    pub fn queue_steering(
        &self,
        session_id: &str,
        channel: Option<&str>,
        message: &str,
    ) -> Result<i64, StoreError> {
        let db = self.db();
        db.execute(
            "INSERT INTO steering_message (session_id, channel_id, message, source, created_at)
             VALUES (?1, ?2, ?3, 'slack', ?4)",
            params![session_id, channel, message, now()],
        )?;
        Ok(db.query_row(
            "SELECT COUNT(*) FROM steering_message WHERE session_id = ?1 AND consumed = 0",
            params![session_id],
            |r| r.get(0),
        )?)
    }

    /// Takes a session's queued steering messages in order and marks them consumed.
    pub fn take_steering(&self, session_id: &str) -> Result<Vec<String>, StoreError> {
        let mut db = self.db();
        let tx = db.transaction()?;
        let rows: Vec<(i64, String)> = {
            let mut statement = tx.prepare(
                "SELECT id, message FROM steering_message
                 WHERE session_id = ?1 AND consumed = 0 ORDER BY id",
            )?;
            statement
                .query_map(params![session_id], |row| Ok((row.get(0)?, row.get(1)?)))?
                .collect::<Result<_, _>>()?
        };
        for (id, _) in &rows {
            tx.execute(
                "UPDATE steering_message SET consumed = 1 WHERE id = ?1",
                params![id],
            )?;
        }
        tx.commit()?;
        Ok(rows.into_iter().map(|(_, message)| message).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn new_session<'a>(id: &'a str, channel: Option<&'a str>) -> NewSession<'a> {
        NewSession {
            id,
            owner_user_id: "agent:local",
            protocol_mode: Mode::Mcp,
            mode: WorkMode::Remote,
            workspace_id: None,
            workspace_root: None,
            channel_id: channel,
            prompt: None,
        }
    }

    #[test]
    fn an_older_session_table_gains_the_new_columns_and_keeps_its_rows() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("old.db");
        {
            let db = Connection::open(&path).expect("open");
            db.execute_batch(
                "CREATE TABLE session (id TEXT PRIMARY KEY, owner_user_id TEXT NOT NULL,
                    workspace_root TEXT, status TEXT NOT NULL, prompt TEXT,
                    mode TEXT NOT NULL DEFAULT 'remote', created_at TEXT NOT NULL,
                    updated_at TEXT NOT NULL, terminated_at TEXT, last_tool TEXT,
                    nudge_count INTEGER NOT NULL DEFAULT 0, stall_paused INTEGER NOT NULL DEFAULT 0,
                    progress_snapshot TEXT);
                 INSERT INTO session (id, owner_user_id, status, created_at, updated_at)
                 VALUES ('old-1', 'U1', 'terminated', 't', 't');",
            )
            .expect("legacy schema");
        }
        let store = Store::open(&path).expect("bootstrap");
        let old = store.session("old-1").expect("query").expect("row kept");
        assert_eq!(old.protocol_mode, Mode::Mcp);
        assert_eq!(old.channel_id, None);
        assert_eq!(store.bootstrap_schema().expect("again"), Vec::<&str>::new());
    }

    #[test]
    fn thread_ts_is_set_once_and_sessions_are_ordered_by_activity() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = Store::open(&dir.path().join("s.db")).expect("open");
        store
            .create_session(&new_session("aaaa", Some("C1")))
            .expect("a");
        store
            .create_session(&new_session("bbbb", Some("C1")))
            .expect("b");
        assert_eq!(
            store.set_thread_ts("aaaa", "1.1").expect("set"),
            Some("1.1".into())
        );
        assert_eq!(
            store.set_thread_ts("aaaa", "2.2").expect("set"),
            Some("1.1".into())
        );
        let ids = |store: &Store| -> Vec<String> {
            store
                .active_in_channel("C1")
                .expect("list")
                .into_iter()
                .map(|s| s.id)
                .collect()
        };
        assert_eq!(ids(&store), ["bbbb", "aaaa"]);
        store.touch("aaaa", Some("ping")).expect("touch");
        assert_eq!(ids(&store), ["aaaa", "bbbb"]);
        assert_eq!(store.next_request_id("aaaa").expect("id"), "req-001");
        assert_eq!(store.next_request_id("bbbb").expect("id"), "req-001");
    }

    #[test]
    fn typed_values_are_stored_and_read_back_through_the_store() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = Store::open(&dir.path().join("t.db")).expect("open");
        let session = store
            .create_session(&new_session("cccc", Some("C1")))
            .expect("create");
        assert_eq!(session.status, SessionStatus::Active);
        assert_eq!(session.connectivity_status, Connectivity::Online);
        assert_eq!(session.mode, WorkMode::Remote);
        assert_eq!(
            store.set_mode("cccc", WorkMode::Hybrid).expect("mode"),
            WorkMode::Remote
        );
        store
            .set_connectivity("cccc", Connectivity::Stalled)
            .expect("connectivity");
        let approval = |request_id| NewApproval {
            session_id: "cccc",
            request_id,
            title: "t",
            description: None,
            diff: "d",
            file_path: "f",
            risk_level: RiskLevel::Critical,
        };
        store.insert_approval(&approval("req-001")).expect("insert");
        store.insert_approval(&approval("req-002")).expect("insert");
        assert!(
            store
                .decide_approval("cccc", "req-001", Clearance::Approved, None)
                .expect("decide")
        );
        assert!(store.consume_approval("cccc", "req-001").expect("consume"));
        let risk: RiskLevel = store
            .db()
            .query_row(
                "SELECT risk_level FROM approval_request WHERE request_id = 'req-002'",
                [],
                |row| row.get(0),
            )
            .expect("risk");
        assert_eq!(risk, RiskLevel::Critical);
        assert!(
            store
                .end_session("cccc", SessionStatus::Terminated)
                .expect("end")
        );
        assert!(
            !store
                .end_session("cccc", SessionStatus::Interrupted)
                .expect("again")
        );
        let ended = store.session("cccc").expect("read").expect("row");
        assert_eq!(
            (ended.status, ended.mode, ended.connectivity_status),
            (
                SessionStatus::Terminated,
                WorkMode::Hybrid,
                Connectivity::Stalled
            )
        );
        let status = |id| {
            store
                .approval("cccc", id)
                .expect("read")
                .expect("row")
                .status
        };
        assert_eq!(status("req-001"), ApprovalStatus::Consumed);
        assert_eq!(status("req-002"), ApprovalStatus::Interrupted);
    }

    #[test]
    fn a_session_with_a_status_intercom_never_writes_reads_as_an_error_and_is_never_live() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("foreign.db");
        {
            // An older table without the CHECK, as an earlier layout made it.
            let db = Connection::open(&path).expect("open");
            db.execute_batch(
                "CREATE TABLE session (id TEXT PRIMARY KEY, owner_user_id TEXT NOT NULL,
                    workspace_root TEXT, status TEXT NOT NULL, prompt TEXT,
                    mode TEXT NOT NULL DEFAULT 'remote', created_at TEXT NOT NULL,
                    updated_at TEXT NOT NULL, terminated_at TEXT, last_tool TEXT,
                    nudge_count INTEGER NOT NULL DEFAULT 0, stall_paused INTEGER NOT NULL DEFAULT 0,
                    progress_snapshot TEXT);
                 INSERT INTO session (id, owner_user_id, status, created_at, updated_at)
                 VALUES ('odd-1', 'U1', 'archived', 't', 't');
                 INSERT INTO session (id, owner_user_id, status, mode, created_at, updated_at)
                 VALUES ('odd-2', 'U1', 'terminated', 'away', 't', 't');",
            )
            .expect("legacy schema");
            let report = audit::row_report(&db).expect("audit");
            assert_eq!(
                audit::listed(&report.unknown_values),
                "session \"odd-1\" column status: \"archived\" is none of \
                 created, active, paused, terminated, interrupted; \
                 session \"odd-2\" column mode: \"away\" is none of remote, local, hybrid"
            );
            assert!(report.mistyped.is_empty());
        }
        let store = Store::open(&path).expect("an unknown status is reported, not refused");
        let error = store
            .session("odd-1")
            .expect_err("no such status")
            .to_string();
        assert!(
            error.contains("unknown session status \"archived\" (known: "),
            "{error}"
        );
        let error = store
            .session("odd-2")
            .expect_err("no such mode")
            .to_string();
        assert!(error.contains("operational mode \"away\""), "{error}");
        assert!(store.active_by_prefix("odd").expect("live").is_empty());
        assert_eq!(store.interrupt_leftovers().expect("restart").sessions, 0);
    }

    #[test]
    fn the_session_table_checks_every_status_and_live_queries_name_the_live_ones() {
        assert!(session_table().contains(
            "CHECK (status IN ('created','active','paused','terminated','interrupted'))"
        ));
        assert_eq!(live_filter(), "status IN ('created', 'active', 'paused')");
    }
}
