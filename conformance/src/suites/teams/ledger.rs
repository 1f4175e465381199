//! The ledger as the suite may read it (capability `teams-ledger-read`): opened read-only for
//! `tasks(id, status, owner, claimedAt, completedAt)`, the journal mode and the table names, and,
//! in TEAM-CC-01/02 only, opened to hold the write lock (`BEGIN IMMEDIATE … ROLLBACK`, nothing
//! written).

use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::{Connection, OpenFlags, OptionalExtension};

use crate::{CheckError, OrFail};

/// `D/<team>/ledger.db`.
pub fn path(root: &Path, team: &str) -> PathBuf {
    root.join(team).join("ledger.db")
}

/// One task row as the suite reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    /// `status`.
    pub status: String,
    /// `owner`.
    pub owner: Option<String>,
    /// `claimedAt`.
    pub claimed_at: Option<i64>,
    /// `completedAt`.
    pub completed_at: Option<i64>,
}

fn open_read_only(path: &Path) -> Result<Connection, CheckError> {
    let conn = Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_ONLY)
        .or_fail(format!("{} opens as a SQLite database", path.display()))?;
    conn.busy_timeout(Duration::from_secs(10))
        .or_error("setting a busy timeout")?;
    Ok(conn)
}

/// The journal mode and whether tables `tasks` and `members` exist.
pub fn layout(path: &Path) -> Result<(String, bool), CheckError> {
    let conn = open_read_only(path)?;
    let mode: String = conn
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .or_fail("PRAGMA journal_mode answers")?;
    let tables: i64 = conn
        .query_row(
            "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name IN ('tasks', 'members')",
            [],
            |r| r.get(0),
        )
        .or_fail("sqlite_master can be read")?;
    Ok((mode.to_ascii_lowercase(), tables == 2))
}

/// The row of task `id`, if any.
pub fn task(path: &Path, id: &str) -> Result<Option<Row>, CheckError> {
    let conn = open_read_only(path)?;
    conn.query_row(
        "SELECT status, owner, claimedAt, completedAt FROM tasks WHERE id = ?1",
        [id],
        |r| {
            Ok(Row {
                status: r.get(0)?,
                owner: r.get(1)?,
                claimed_at: r.get(2)?,
                completed_at: r.get(3)?,
            })
        },
    )
    .optional()
    .or_fail(format!(
        "table tasks has columns status, owner, claimedAt, completedAt ({})",
        path.display()
    ))
}

/// The harness's own connection holding the ledger's write lock until [`WriteLock::release`].
pub struct WriteLock {
    conn: Connection,
}

impl WriteLock {
    /// Opens the ledger and runs `BEGIN IMMEDIATE`.
    pub fn take(path: &Path) -> Result<Self, CheckError> {
        let conn = Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_WRITE)
            .or_fail(format!("{} opens as a SQLite database", path.display()))?;
        conn.busy_timeout(Duration::from_secs(30))
            .or_error("setting a busy timeout")?;
        conn.execute_batch("BEGIN IMMEDIATE")
            .or_error("taking the ledger's write lock")?;
        Ok(Self { conn })
    }

    /// `ROLLBACK`: releases the lock; nothing was written.
    pub fn release(self) -> Result<(), CheckError> {
        self.conn
            .execute_batch("ROLLBACK")
            .or_error("releasing the ledger's write lock")
    }
}
