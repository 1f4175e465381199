//! The task ledger: one SQLite file per team (`<team>/ledger.db`) in WAL mode.
//!
//! Every write is one `BEGIN IMMEDIATE` transaction, retried as a whole while the database is
//! busy or locked: a short `busy_timeout`, then a bounded exponential backoff (1 ms doubling to
//! 100 ms, within the `--busy-timeout-ms` budget) that announces each wait as a `busy` trace event
//! and counts it (E-TEAM-20). The claim is one conditional `UPDATE` whose changed-row count
//! decides (E-TEAM-13); completion and deletion unblock dependents in the same transaction. The
//! schema is versioned with `PRAGMA user_version` and migrated forward on open.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rusqlite::{
    Connection, ErrorCode, OpenFlags, OptionalExtension, Transaction, TransactionBehavior, params,
};
use serde::Serialize;
use serde_json::Value;

use super::error::{TeamsError, TeamsResult};

/// The ledger's file name inside a team directory.
pub const LEDGER_FILE: &str = "ledger.db";
/// SQLite's own wait before it reports busy, per attempt.
const SQLITE_BUSY_TIMEOUT: Duration = Duration::from_millis(5);
/// The first backoff delay.
const FIRST_DELAY_MS: u64 = 1;
/// The longest backoff delay.
const MAX_DELAY_MS: u64 = 100;
/// The WAL file is truncated to at most this size after a checkpoint.
const JOURNAL_SIZE_LIMIT: i64 = 4 * 1024 * 1024;

/// The forward migrations; `user_version` is the number applied.
const MIGRATIONS: &[&str] = &[
    // 1: tasks, members, shutdown requests, the activity trail.
    "CREATE TABLE tasks (
        id TEXT PRIMARY KEY,
        seq INTEGER NOT NULL UNIQUE,
        subject TEXT NOT NULL,
        description TEXT NOT NULL,
        activeForm TEXT,
        status TEXT NOT NULL CHECK (status IN ('pending', 'in_progress', 'completed', 'deleted')),
        owner TEXT,
        dependsOn TEXT NOT NULL DEFAULT '[]',
        blockedBy TEXT NOT NULL DEFAULT '[]',
        blocks TEXT NOT NULL DEFAULT '[]',
        metadata TEXT,
        createdAt INTEGER NOT NULL,
        claimedAt INTEGER,
        completedAt INTEGER,
        deletedAt INTEGER,
        summary TEXT
    );
    CREATE INDEX tasks_status ON tasks (status, seq);
    CREATE INDEX tasks_owner ON tasks (owner);
    CREATE INDEX tasks_created ON tasks (createdAt);
    CREATE TABLE members (
        sessionKey TEXT PRIMARY KEY,
        agentId TEXT NOT NULL,
        name TEXT NOT NULL UNIQUE COLLATE NOCASE,
        role TEXT NOT NULL CHECK (role IN ('lead', 'member')),
        agentType TEXT,
        status TEXT NOT NULL CHECK (status IN ('idle', 'working', 'blocked', 'shutdown')),
        currentTask TEXT,
        joinedAt INTEGER NOT NULL,
        lastActiveAt INTEGER,
        inboxKey TEXT NOT NULL UNIQUE COLLATE NOCASE
    );
    CREATE TABLE shutdown_requests (
        requestId TEXT NOT NULL,
        sessionKey TEXT NOT NULL,
        status TEXT NOT NULL CHECK (status IN ('pending', 'approved', 'rejected')),
        reason TEXT,
        createdAt INTEGER NOT NULL,
        PRIMARY KEY (requestId, sessionKey)
    );
    CREATE TABLE activity (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        at INTEGER NOT NULL,
        actor TEXT NOT NULL,
        action TEXT NOT NULL,
        taskId TEXT,
        detail TEXT
    );",
];

/// The schema version this build writes.
pub fn schema_version() -> i64 {
    MIGRATIONS.len() as i64
}

/// How long and how visibly to retry a busy ledger.
#[derive(Debug, Clone, Copy)]
pub struct BusyPolicy {
    /// The total time a command may spend waiting for the lock.
    pub budget: Duration,
    /// Print a `busy` event on stderr before each wait.
    pub trace: bool,
}

impl Default for BusyPolicy {
    fn default() -> Self {
        Self {
            budget: Duration::from_millis(5000),
            trace: false,
        }
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
    /// `pending`, `in_progress`, `completed` or `deleted`.
    pub status: String,
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
    /// `lead` or `member`.
    pub role: String,
    /// The agent type.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent_type: Option<String>,
    /// `idle`, `working`, `blocked` or `shutdown`.
    pub status: String,
    /// The task it holds.
    pub current_task: Option<String>,
    /// Epoch ms.
    pub joined_at: i64,
    /// The sanitised key naming its inbox directory.
    pub inbox_key: String,
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
    pub status: Option<String>,
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

/// An open ledger.
#[derive(Debug)]
pub struct Ledger {
    conn: Connection,
    path: PathBuf,
    busy: BusyPolicy,
    retries: u32,
}

fn is_busy(error: &rusqlite::Error) -> bool {
    matches!(
        error.sqlite_error_code(),
        Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked)
    )
}

fn unusable(path: &Path, error: &rusqlite::Error) -> TeamsError {
    TeamsError::LedgerUnusable {
        path: path.display().to_string(),
        reason: error.to_string(),
    }
}

/// A busy error stays retryable; any other error means the file cannot be used.
fn busy_or_unusable(path: &Path, error: rusqlite::Error) -> TeamsError {
    if is_busy(&error) {
        TeamsError::Sqlite(error)
    } else {
        unusable(path, &error)
    }
}

fn json_list(text: &str) -> Vec<String> {
    serde_json::from_str(text).unwrap_or_default()
}

fn list_text(list: &[String]) -> String {
    serde_json::to_string(list).unwrap_or_else(|_| "[]".to_owned())
}

const TASK_COLUMNS: &str = "id, subject, description, status, owner, blockedBy, blocks, dependsOn, createdAt, claimedAt, completedAt, deletedAt, activeForm, metadata, summary";

fn task_from_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<Task> {
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

const MEMBER_COLUMNS: &str =
    "sessionKey, agentId, name, role, agentType, status, currentTask, joinedAt, inboxKey";

fn member_from_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<Member> {
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

fn get_task(tx: &Connection, id: &str) -> TeamsResult<Option<Task>> {
    Ok(tx
        .query_row(
            &format!("SELECT {TASK_COLUMNS} FROM tasks WHERE id = ?1"),
            [id],
            task_from_row,
        )
        .optional()?)
}

fn get_member(tx: &Connection, key: &str) -> TeamsResult<Option<Member>> {
    Ok(tx
        .query_row(
            &format!("SELECT {MEMBER_COLUMNS} FROM members WHERE sessionKey = ?1"),
            [key],
            member_from_row,
        )
        .optional()?)
}

fn require_member(tx: &Connection, key: &str) -> TeamsResult<Member> {
    get_member(tx, key)?.ok_or_else(|| TeamsError::NotAMember(key.to_owned()))
}

fn log(
    tx: &Connection,
    at: i64,
    actor: &str,
    action: &str,
    task: Option<&str>,
    detail: Option<&str>,
) -> TeamsResult<()> {
    tx.execute(
        "INSERT INTO activity (at, actor, action, taskId, detail) VALUES (?1, ?2, ?3, ?4, ?5)",
        params![at, actor, action, task, detail],
    )?;
    Ok(())
}

/// Removes `id` from the `blockedBy` of every task in `dependents`; returns those now unblocked.
fn unblock_dependents(
    tx: &Connection,
    id: &str,
    dependents: &[String],
) -> TeamsResult<Vec<String>> {
    let mut unblocked = Vec::new();
    for dependent in dependents {
        let Some(task) = get_task(tx, dependent)? else {
            continue;
        };
        if !task.blocked_by.iter().any(|b| b == id) {
            continue;
        }
        let rest: Vec<String> = task.blocked_by.into_iter().filter(|b| b != id).collect();
        tx.execute(
            "UPDATE tasks SET blockedBy = ?2 WHERE id = ?1",
            params![dependent, list_text(&rest)],
        )?;
        if rest.is_empty() && task.status == "pending" {
            unblocked.push(dependent.clone());
        }
    }
    Ok(unblocked)
}

impl Ledger {
    /// Creates a new ledger at `path` with the current schema.
    pub fn create(path: &Path, busy: BusyPolicy) -> TeamsResult<Self> {
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_CREATE
            | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn = Connection::open_with_flags(path, flags).map_err(|e| unusable(path, &e))?;
        let mode: String = conn
            .query_row("PRAGMA journal_mode = WAL", [], |row| row.get(0))
            .map_err(|e| unusable(path, &e))?;
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(TeamsError::LedgerUnusable {
                path: path.display().to_string(),
                reason: format!("journal mode stays {mode:?}; WAL needs a local filesystem"),
            });
        }
        Self::configure(conn, path, busy)
    }

    /// Opens an existing ledger, migrating it forward; never creates the file.
    pub fn open(path: &Path, busy: BusyPolicy) -> TeamsResult<Self> {
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn = Connection::open_with_flags(path, flags).map_err(|e| unusable(path, &e))?;
        Self::configure(conn, path, busy)
    }

    fn configure(conn: Connection, path: &Path, busy: BusyPolicy) -> TeamsResult<Self> {
        conn.busy_timeout(SQLITE_BUSY_TIMEOUT)
            .map_err(|e| unusable(path, &e))?;
        let mut ledger = Self {
            conn,
            path: path.to_owned(),
            busy,
            retries: 0,
        };
        // Opening can meet a lock too: another process's last close checkpoints and removes the
        // WAL under an exclusive lock. The pragmas are retried like any transaction.
        let path = ledger.path.clone();
        ledger.retrying(|conn| {
            conn.execute_batch(&format!(
                "PRAGMA synchronous = NORMAL; PRAGMA wal_autocheckpoint = 1000; PRAGMA journal_size_limit = {JOURNAL_SIZE_LIMIT};"
            ))
            .map_err(|e| busy_or_unusable(&path, e))
        })?;
        ledger.migrate()?;
        Ok(ledger)
    }

    fn user_version(&mut self) -> TeamsResult<i64> {
        let path = self.path.clone();
        self.retrying(|conn| {
            conn.query_row("PRAGMA user_version", [], |row| row.get(0))
                .map_err(|e| busy_or_unusable(&path, e))
        })
    }

    fn migrate(&mut self) -> TeamsResult<()> {
        let version = self.user_version()?;
        let known = schema_version();
        if version > known {
            return Err(TeamsError::LedgerUnusable {
                path: self.path.display().to_string(),
                reason: format!(
                    "written by a newer schema (version {version}; this build knows {known})"
                ),
            });
        }
        if version == known {
            return Ok(());
        }
        let path = self.path.clone();
        self.write(|tx| {
            let current: i64 = tx.query_row("PRAGMA user_version", [], |row| row.get(0))?;
            for (index, sql) in MIGRATIONS
                .iter()
                .enumerate()
                .skip(usize::try_from(current).unwrap_or(0))
            {
                tx.execute_batch(sql)
                    .map_err(|e| busy_or_unusable(&path, e))?;
                tx.execute_batch(&format!("PRAGMA user_version = {}", index + 1))?;
            }
            Ok(())
        })
    }

    /// How many times this ledger waited for the lock so far.
    pub fn retries(&self) -> u32 {
        self.retries
    }

    /// Runs `work` in one `BEGIN IMMEDIATE` transaction, retried while the ledger is busy.
    pub fn write<T>(
        &mut self,
        work: impl FnMut(&Transaction<'_>) -> TeamsResult<T>,
    ) -> TeamsResult<T> {
        self.transaction(TransactionBehavior::Immediate, work)
    }

    /// Reads in one deferred transaction (a consistent snapshot), retried while busy.
    pub fn read<T>(
        &mut self,
        work: impl FnMut(&Transaction<'_>) -> TeamsResult<T>,
    ) -> TeamsResult<T> {
        self.transaction(TransactionBehavior::Deferred, work)
    }

    fn transaction<T>(
        &mut self,
        behavior: TransactionBehavior,
        mut work: impl FnMut(&Transaction<'_>) -> TeamsResult<T>,
    ) -> TeamsResult<T> {
        self.retrying(|conn| {
            let tx = conn.transaction_with_behavior(behavior)?;
            let value = work(&tx)?;
            tx.commit()?;
            Ok(value)
        })
    }

    /// Runs `attempt` until it is not refused as busy or locked: 1 ms doubling to 100 ms, within
    /// the busy budget, each wait announced (`--trace`) and counted.
    fn retrying<T>(
        &mut self,
        mut attempt: impl FnMut(&mut Connection) -> TeamsResult<T>,
    ) -> TeamsResult<T> {
        let started = Instant::now();
        let mut delay_ms = FIRST_DELAY_MS;
        loop {
            match attempt(&mut self.conn) {
                Err(TeamsError::Sqlite(error)) if is_busy(&error) => {
                    let waited = started.elapsed();
                    if waited + Duration::from_millis(delay_ms) > self.busy.budget {
                        return Err(TeamsError::Busy {
                            attempts: self.retries,
                            waited_ms: u64::try_from(waited.as_millis()).unwrap_or(u64::MAX),
                        });
                    }
                    self.retries += 1;
                    if self.busy.trace {
                        eprintln!(
                            "{}",
                            serde_json::json!({"event": "busy", "attempt": self.retries, "delayMs": delay_ms})
                        );
                    }
                    std::thread::sleep(Duration::from_millis(delay_ms));
                    delay_ms = (delay_ms * 2).min(MAX_DELAY_MS);
                }
                Err(TeamsError::Sqlite(error))
                    if matches!(
                        error.sqlite_error_code(),
                        Some(ErrorCode::DatabaseCorrupt | ErrorCode::NotADatabase)
                    ) =>
                {
                    return Err(unusable(&self.path, &error));
                }
                other => return other,
            }
        }
    }

    /// Adds a member; refuses a duplicate name, key or inbox key, and one past `max_members`.
    pub fn add_member(&mut self, member: &Member, max_members: usize) -> TeamsResult<Member> {
        self.write(|tx| {
            let count: i64 = tx.query_row("SELECT COUNT(*) FROM members", [], |r| r.get(0))?;
            if usize::try_from(count).unwrap_or(usize::MAX) >= max_members {
                return Err(TeamsError::MemberLimit(max_members));
            }
            if get_member(tx, &member.session_key)?.is_some() {
                return Err(TeamsError::MemberExists(format!(
                    "session key {:?} is already a member",
                    member.session_key
                )));
            }
            let name_taken: bool = tx.query_row(
                "SELECT EXISTS (SELECT 1 FROM members WHERE name = ?1)",
                [&member.name],
                |r| r.get(0),
            )?;
            if name_taken {
                return Err(TeamsError::MemberExists(format!(
                    "member name {:?} is already taken",
                    member.name
                )));
            }
            let key_taken: bool = tx.query_row(
                "SELECT EXISTS (SELECT 1 FROM members WHERE inboxKey = ?1)",
                [&member.inbox_key],
                |r| r.get(0),
            )?;
            if key_taken {
                return Err(TeamsError::MemberExists(format!(
                    "session key {:?} sanitises to inbox {:?}, which another member uses",
                    member.session_key, member.inbox_key
                )));
            }
            tx.execute(
                "INSERT INTO members (sessionKey, agentId, name, role, agentType, status, currentTask, joinedAt, lastActiveAt, inboxKey)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, NULL, ?7, ?7, ?8)",
                params![
                    member.session_key,
                    member.agent_id,
                    member.name,
                    member.role,
                    member.agent_type,
                    member.status,
                    member.joined_at,
                    member.inbox_key
                ],
            )?;
            log(tx, member.joined_at, &member.session_key, "join", None, Some(&member.name))?;
            Ok(member.clone())
        })
    }

    /// One member by session key.
    pub fn member(&mut self, key: &str) -> TeamsResult<Option<Member>> {
        self.read(|tx| get_member(tx, key))
    }

    /// Every member, in joining order.
    pub fn members(&mut self) -> TeamsResult<Vec<Member>> {
        self.read(|tx| {
            let mut statement = tx.prepare(&format!(
                "SELECT {MEMBER_COLUMNS} FROM members ORDER BY joinedAt, rowid"
            ))?;
            let rows = statement.query_map([], member_from_row)?;
            Ok(rows.collect::<Result<Vec<_>, _>>()?)
        })
    }

    /// Sets a member's status.
    pub fn set_member_status(&mut self, key: &str, status: &str) -> TeamsResult<()> {
        self.write(|tx| {
            tx.execute(
                "UPDATE members SET status = ?2 WHERE sessionKey = ?1",
                params![key, status],
            )?;
            Ok(())
        })
    }

    /// Creates a task; every dependency must exist, and the task limit holds.
    pub fn create_task(
        &mut self,
        caller: &str,
        new: &NewTask,
        now: i64,
        max_tasks: usize,
    ) -> TeamsResult<Task> {
        self.write(|tx| {
            require_member(tx, caller)?;
            let count: i64 = tx.query_row(
                "SELECT COUNT(*) FROM tasks WHERE status != 'deleted'",
                [],
                |r| r.get(0),
            )?;
            if usize::try_from(count).unwrap_or(usize::MAX) >= max_tasks {
                return Err(TeamsError::TaskLimit(max_tasks));
            }
            let mut depends_on: Vec<String> = Vec::new();
            let mut blocked_by = Vec::new();
            for dep in &new.depends_on {
                if depends_on.contains(dep) {
                    continue;
                }
                match get_task(tx, dep)? {
                    Some(task) if task.status != "deleted" => {
                        if task.status != "completed" {
                            blocked_by.push(dep.clone());
                        }
                    }
                    _ => return Err(TeamsError::UnknownDependency(dep.clone())),
                }
                depends_on.push(dep.clone());
            }
            let seq: i64 = tx.query_row("SELECT COALESCE(MAX(seq), 0) + 1 FROM tasks", [], |r| r.get(0))?;
            let id = seq.to_string();
            tx.execute(
                "INSERT INTO tasks (id, seq, subject, description, activeForm, status, owner, dependsOn, blockedBy, blocks, metadata, createdAt)
                 VALUES (?1, ?2, ?3, ?4, ?5, 'pending', NULL, ?6, ?7, '[]', ?8, ?9)",
                params![
                    id,
                    seq,
                    new.subject,
                    new.description,
                    new.active_form,
                    list_text(&depends_on),
                    list_text(&blocked_by),
                    new.metadata.as_ref().map(Value::to_string),
                    now
                ],
            )?;
            for dep in &depends_on {
                add_block(tx, dep, &id)?;
            }
            log(tx, now, caller, "create", Some(&id), Some(&new.subject))?;
            get_task(tx, &id)?.ok_or_else(|| TeamsError::TaskNotFound(id.clone()))
        })
    }

    /// One task.
    pub fn task(&mut self, id: &str) -> TeamsResult<Task> {
        self.read(|tx| get_task(tx, id)?.ok_or_else(|| TeamsError::TaskNotFound(id.to_owned())))
    }

    /// Claims a pending, unowned, unblocked task for `caller`: one conditional `UPDATE`.
    pub fn claim(&mut self, id: &str, caller: &str, now: i64) -> TeamsResult<Task> {
        self.write(|tx| {
            require_member(tx, caller)?;
            let changed = tx.execute(
                "UPDATE tasks SET status = 'in_progress', owner = ?2, claimedAt = ?3
                 WHERE id = ?1 AND status = 'pending' AND owner IS NULL AND blockedBy = '[]'",
                params![id, caller, now],
            )?;
            let task = get_task(tx, id)?.ok_or_else(|| TeamsError::TaskNotFound(id.to_owned()))?;
            if changed == 0 {
                match task.status.as_str() {
                    "deleted" => return Err(TeamsError::InvalidTransition("Task is deleted".into())),
                    "completed" => return Err(TeamsError::InvalidTransition("Task is completed".into())),
                    _ => {}
                }
                match &task.owner {
                    // A re-claim by the holder is an idempotent success that keeps claimedAt.
                    Some(owner) if owner == caller => return Ok(task),
                    Some(owner) => return Err(TeamsError::AlreadyClaimed { owner: owner.clone() }),
                    None => {}
                }
                return Err(TeamsError::Blocked {
                    blocked_by: task.blocked_by.clone(),
                });
            }
            tx.execute(
                "UPDATE members SET status = 'working', currentTask = ?2, lastActiveAt = ?3 WHERE sessionKey = ?1",
                params![caller, id, now],
            )?;
            log(tx, now, caller, "claim", Some(id), None)?;
            Ok(task)
        })
    }

    /// Completes an in-progress task (its owner or the lead) and unblocks its dependents.
    pub fn complete(
        &mut self,
        id: &str,
        caller: &str,
        summary: Option<&str>,
        now: i64,
    ) -> TeamsResult<(Task, Vec<String>)> {
        self.write(|tx| {
            let member = require_member(tx, caller)?;
            let task = get_task(tx, id)?.ok_or_else(|| TeamsError::TaskNotFound(id.to_owned()))?;
            match task.status.as_str() {
                "in_progress" => {}
                "completed" => return Err(TeamsError::InvalidTransition("Task is completed".into())),
                "deleted" => return Err(TeamsError::InvalidTransition("Task is deleted".into())),
                _ => {
                    return Err(TeamsError::InvalidTransition(
                        "Task is pending: only an in_progress task can be completed".into(),
                    ));
                }
            }
            let owner = task.owner.clone().unwrap_or_default();
            if owner != caller && member.role != "lead" {
                return Err(TeamsError::NotOwner(id.to_owned()));
            }
            tx.execute(
                "UPDATE tasks SET status = 'completed', completedAt = ?2, summary = ?3 WHERE id = ?1",
                params![id, now, summary],
            )?;
            let unblocked = unblock_dependents(tx, id, &task.blocks)?;
            tx.execute(
                "UPDATE members SET status = 'idle', currentTask = NULL, lastActiveAt = ?2 WHERE sessionKey = ?1 AND currentTask = ?3",
                params![owner, now, id],
            )?;
            log(tx, now, caller, "complete", Some(id), summary)?;
            let task = get_task(tx, id)?.ok_or_else(|| TeamsError::TaskNotFound(id.to_owned()))?;
            Ok((task, unblocked))
        })
    }

    /// Soft-deletes a pending or in-progress task (the lead only) and unblocks its dependents.
    pub fn delete(&mut self, id: &str, caller: &str, now: i64) -> TeamsResult<(Task, Vec<String>)> {
        self.write(|tx| {
            let member = require_member(tx, caller)?;
            if member.role != "lead" {
                return Err(TeamsError::NotLead("delete tasks".into()));
            }
            let task = get_task(tx, id)?.ok_or_else(|| TeamsError::TaskNotFound(id.to_owned()))?;
            match task.status.as_str() {
                "completed" => return Err(TeamsError::InvalidTransition("Task is completed".into())),
                "deleted" => return Err(TeamsError::InvalidTransition("Task is deleted".into())),
                _ => {}
            }
            tx.execute(
                "UPDATE tasks SET status = 'deleted', deletedAt = ?2 WHERE id = ?1",
                params![id, now],
            )?;
            let unblocked = unblock_dependents(tx, id, &task.blocks)?;
            if let Some(owner) = &task.owner {
                tx.execute(
                    "UPDATE members SET status = 'idle', currentTask = NULL WHERE sessionKey = ?1 AND currentTask = ?2",
                    params![owner, id],
                )?;
            }
            log(tx, now, caller, "delete", Some(id), None)?;
            let task = get_task(tx, id)?.ok_or_else(|| TeamsError::TaskNotFound(id.to_owned()))?;
            Ok((task, unblocked))
        })
    }

    /// Returns an in-progress task to pending (its owner or the lead): a crashed teammate's task
    /// becomes claimable again.
    pub fn release(&mut self, id: &str, caller: &str, now: i64) -> TeamsResult<Task> {
        self.write(|tx| {
            let member = require_member(tx, caller)?;
            let task = get_task(tx, id)?.ok_or_else(|| TeamsError::TaskNotFound(id.to_owned()))?;
            if task.status != "in_progress" {
                return Err(TeamsError::InvalidTransition(format!(
                    "Task is {}: only an in_progress task can be released",
                    task.status
                )));
            }
            let owner = task.owner.clone().unwrap_or_default();
            if owner != caller && member.role != "lead" {
                return Err(TeamsError::NotOwner(id.to_owned()));
            }
            tx.execute(
                "UPDATE tasks SET status = 'pending', owner = NULL, claimedAt = NULL WHERE id = ?1",
                params![id],
            )?;
            tx.execute(
                "UPDATE members SET status = 'idle', currentTask = NULL WHERE sessionKey = ?1 AND currentTask = ?2",
                params![owner, id],
            )?;
            log(tx, now, caller, "release", Some(id), Some(&owner))?;
            get_task(tx, id)?.ok_or_else(|| TeamsError::TaskNotFound(id.to_owned()))
        })
    }

    /// Adds the edge "`id` waits for `dep`"; refuses an edge that would close a cycle.
    pub fn depend(&mut self, id: &str, dep: &str, caller: &str, now: i64) -> TeamsResult<Task> {
        self.write(|tx| {
            require_member(tx, caller)?;
            let task = get_task(tx, id)?.ok_or_else(|| TeamsError::TaskNotFound(id.to_owned()))?;
            let target = match get_task(tx, dep)? {
                Some(t) if t.status != "deleted" => t,
                _ => return Err(TeamsError::UnknownDependency(dep.to_owned())),
            };
            if task.status != "pending" {
                return Err(TeamsError::InvalidTransition(format!(
                    "Task is {}: only a pending task can gain a dependency",
                    task.status
                )));
            }
            if task.depends_on.iter().any(|d| d == dep) {
                return Ok(task);
            }
            if let Some(path) = path_between(tx, dep, id)? {
                let mut cycle = vec![id.to_owned()];
                cycle.extend(path);
                return Err(TeamsError::DependencyCycle(cycle));
            }
            let mut depends_on = task.depends_on.clone();
            depends_on.push(dep.to_owned());
            let mut blocked_by = task.blocked_by.clone();
            if target.status != "completed" {
                blocked_by.push(dep.to_owned());
            }
            tx.execute(
                "UPDATE tasks SET dependsOn = ?2, blockedBy = ?3 WHERE id = ?1",
                params![id, list_text(&depends_on), list_text(&blocked_by)],
            )?;
            add_block(tx, dep, id)?;
            log(tx, now, caller, "depend", Some(id), Some(dep))?;
            get_task(tx, id)?.ok_or_else(|| TeamsError::TaskNotFound(id.to_owned()))
        })
    }

    /// Tasks matching `filter`, oldest first.
    pub fn list(&mut self, filter: &TaskFilter) -> TeamsResult<Vec<Task>> {
        self.read(|tx| {
            let mut sql = format!("SELECT {TASK_COLUMNS} FROM tasks WHERE 1 = 1");
            let mut values: Vec<String> = Vec::new();
            if filter.available {
                sql.push_str(" AND status = 'pending' AND owner IS NULL AND blockedBy = '[]'");
            } else if let Some(status) = &filter.status {
                values.push(status.clone());
                sql.push_str(&format!(" AND status = ?{}", values.len()));
            } else if !filter.include_completed {
                sql.push_str(" AND status IN ('pending', 'in_progress')");
            }
            if let Some(owner) = &filter.owner {
                values.push(owner.clone());
                sql.push_str(&format!(" AND owner = ?{}", values.len()));
            }
            sql.push_str(" ORDER BY seq");
            if let Some(limit) = filter.limit {
                sql.push_str(&format!(" LIMIT {limit}"));
            }
            let mut statement = tx.prepare(&sql)?;
            let rows =
                statement.query_map(rusqlite::params_from_iter(values.iter()), task_from_row)?;
            Ok(rows.collect::<Result<Vec<_>, _>>()?)
        })
    }

    /// Task counts per status.
    pub fn counts(&mut self) -> TeamsResult<Counts> {
        self.read(|tx| {
            let mut counts = Counts::default();
            let mut statement = tx.prepare("SELECT status, COUNT(*) FROM tasks GROUP BY status")?;
            let rows =
                statement.query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?)))?;
            for row in rows {
                let (status, n) = row?;
                match status.as_str() {
                    "pending" => counts.pending = n,
                    "in_progress" => counts.in_progress = n,
                    "completed" => counts.completed = n,
                    _ => counts.deleted = n,
                }
            }
            Ok(counts)
        })
    }

    /// Records one shutdown request per member in `keys`.
    pub fn record_shutdown_request(
        &mut self,
        request_id: &str,
        keys: &[String],
        now: i64,
    ) -> TeamsResult<()> {
        self.write(|tx| {
            for key in keys {
                tx.execute(
                    "INSERT OR REPLACE INTO shutdown_requests (requestId, sessionKey, status, createdAt) VALUES (?1, ?2, 'pending', ?3)",
                    params![request_id, key, now],
                )?;
            }
            Ok(())
        })
    }

    /// Records a member's answer; returns how many answers of the request are still pending, or
    /// `None` when the member was not asked.
    pub fn answer_shutdown(
        &mut self,
        request_id: &str,
        key: &str,
        approve: bool,
        reason: Option<&str>,
        now: i64,
    ) -> TeamsResult<Option<(i64, i64)>> {
        self.write(|tx| {
            let changed = tx.execute(
                "UPDATE shutdown_requests SET status = ?3, reason = ?4 WHERE requestId = ?1 AND sessionKey = ?2",
                params![request_id, key, if approve { "approved" } else { "rejected" }, reason],
            )?;
            if changed == 0 {
                return Ok(None);
            }
            if approve {
                tx.execute(
                    "UPDATE members SET status = 'shutdown' WHERE sessionKey = ?1",
                    [key],
                )?;
            }
            log(tx, now, key, if approve { "approve_shutdown" } else { "reject_shutdown" }, None, reason)?;
            let pending: i64 = tx.query_row(
                "SELECT COUNT(*) FROM shutdown_requests WHERE requestId = ?1 AND status = 'pending'",
                [request_id],
                |r| r.get(0),
            )?;
            let rejected: i64 = tx.query_row(
                "SELECT COUNT(*) FROM shutdown_requests WHERE requestId = ?1 AND status = 'rejected'",
                [request_id],
                |r| r.get(0),
            )?;
            Ok(Some((pending, rejected)))
        })
    }

    /// The activity trail, oldest first.
    pub fn activity(&mut self, limit: usize) -> TeamsResult<Vec<Value>> {
        self.read(|tx| {
            let mut statement = tx.prepare(
                "SELECT seq, at, actor, action, taskId, detail FROM activity ORDER BY seq DESC LIMIT ?1",
            )?;
            let rows = statement.query_map([i64::try_from(limit).unwrap_or(i64::MAX)], |r| {
                Ok(serde_json::json!({
                    "seq": r.get::<_, i64>(0)?,
                    "at": r.get::<_, i64>(1)?,
                    "actor": r.get::<_, String>(2)?,
                    "action": r.get::<_, String>(3)?,
                    "taskId": r.get::<_, Option<String>>(4)?,
                    "detail": r.get::<_, Option<String>>(5)?,
                }))
            })?;
            let mut entries = rows.collect::<Result<Vec<_>, _>>()?;
            entries.reverse();
            Ok(entries)
        })
    }

    /// `PRAGMA wal_checkpoint(TRUNCATE)`: returns the WAL size before and after, in bytes.
    pub fn checkpoint(&mut self) -> TeamsResult<(u64, u64)> {
        let wal = wal_path(&self.path);
        let size = |p: &Path| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0);
        let before = size(&wal);
        let started = Instant::now();
        let mut delay_ms = FIRST_DELAY_MS;
        loop {
            let busy: i64 = self
                .conn
                .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| r.get(0))?;
            if busy == 0 {
                break;
            }
            if started.elapsed() + Duration::from_millis(delay_ms) > self.busy.budget {
                return Err(TeamsError::Busy {
                    attempts: self.retries,
                    waited_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
                });
            }
            self.retries += 1;
            std::thread::sleep(Duration::from_millis(delay_ms));
            delay_ms = (delay_ms * 2).min(MAX_DELAY_MS);
        }
        Ok((before, size(&wal)))
    }

    /// `PRAGMA integrity_check`: `ok` or the problems found.
    pub fn integrity_check(&mut self) -> TeamsResult<Vec<String>> {
        let mut statement = self.conn.prepare("PRAGMA integrity_check")?;
        let rows = statement.query_map([], |r| r.get::<_, String>(0))?;
        Ok(rows.collect::<Result<Vec<_>, _>>()?)
    }

    /// Closes the connection; the last one out checkpoints and removes the WAL.
    pub fn close(self) -> TeamsResult<()> {
        self.conn.close().map_err(|(_, e)| TeamsError::Sqlite(e))
    }
}

/// The `-wal` file beside a ledger.
pub fn wal_path(ledger: &Path) -> PathBuf {
    let mut name = ledger.as_os_str().to_owned();
    name.push("-wal");
    PathBuf::from(name)
}

fn add_block(tx: &Connection, dep: &str, id: &str) -> TeamsResult<()> {
    let Some(task) = get_task(tx, dep)? else {
        return Err(TeamsError::UnknownDependency(dep.to_owned()));
    };
    let mut blocks = task.blocks;
    if !blocks.iter().any(|b| b == id) {
        blocks.push(id.to_owned());
    }
    tx.execute(
        "UPDATE tasks SET blocks = ?2 WHERE id = ?1",
        params![dep, list_text(&blocks)],
    )?;
    Ok(())
}

/// A path `from -> … -> to` along `dependsOn` edges, if one exists.
fn path_between(tx: &Connection, from: &str, to: &str) -> TeamsResult<Option<Vec<String>>> {
    let mut stack: Vec<Vec<String>> = vec![vec![from.to_owned()]];
    let mut seen = std::collections::HashSet::new();
    while let Some(path) = stack.pop() {
        let Some(last) = path.last().cloned() else {
            continue;
        };
        if last == to {
            return Ok(Some(path));
        }
        if !seen.insert(last.clone()) {
            continue;
        }
        if let Some(task) = get_task(tx, &last)? {
            for next in task.depends_on {
                let mut longer = path.clone();
                longer.push(next);
                stack.push(longer);
            }
        }
    }
    Ok(None)
}
