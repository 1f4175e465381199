//! The ledger's file and schema: the DDL of each version, forward migrations under
//! `PRAGMA user_version`, and opening or creating the file (WAL, pragmas).

use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::{Connection, OpenFlags};

use super::{BusyPolicy, Ledger, busy_or_unusable, unusable};
use crate::teams::error::{TeamsError, TeamsResult};

/// The ledger's file name inside a team directory.
pub const LEDGER_FILE: &str = "ledger.db";
/// SQLite's own wait before it reports busy, per attempt.
const SQLITE_BUSY_TIMEOUT: Duration = Duration::from_millis(5);
/// The WAL file is truncated to at most this size after a checkpoint.
const JOURNAL_SIZE_LIMIT: i64 = 4 * 1024 * 1024;

/// The forward migrations; `user_version` is the number applied. A migration, once released,
/// never changes: its `CHECK` lists are the strings of [`super::TaskStatus`],
/// [`super::MemberStatus`] and [`super::MemberRole`] (a test holds them together).
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

/// The `-wal` file beside a ledger.
pub fn wal_path(ledger: &Path) -> PathBuf {
    let mut name = ledger.as_os_str().to_owned();
    name.push("-wal");
    PathBuf::from(name)
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::teams::ledger::{MemberRole, MemberStatus, TaskStatus};

    #[test]
    fn the_schema_accepts_every_status_and_role_the_enums_write() {
        let conn = Connection::open_in_memory().expect("in-memory database");
        for sql in MIGRATIONS {
            conn.execute_batch(sql).expect("migration");
        }
        for (seq, status) in TaskStatus::ALL.iter().enumerate() {
            conn.execute(
                "INSERT INTO tasks (id, seq, subject, description, status, createdAt) VALUES (?1, ?1, 's', 'd', ?2, 0)",
                rusqlite::params![seq.to_string(), status],
            )
            .expect("task status accepted");
        }
        let mut n = 0;
        for role in MemberRole::ALL {
            for status in MemberStatus::ALL {
                n += 1;
                conn.execute(
                    "INSERT INTO members (sessionKey, agentId, name, role, status, joinedAt, inboxKey) VALUES (?1, 'a', ?1, ?2, ?3, 0, ?1)",
                    rusqlite::params![format!("k{n}"), role, status],
                )
                .expect("member role and status accepted");
            }
        }
    }
}
