//! The ledger as the suite may read it (capability `teams-ledger-read`): opened read-only for
//! `tasks(id, status, owner, claimedAt, completedAt)`, the journal mode and the table names, and,
//! in TEAM-CC-01/02 only, opened to hold the write lock (`BEGIN IMMEDIATE … ROLLBACK`, nothing
//! written).

use std::path::{Path, PathBuf};

use serde_json::json;

use crate::sqlite::{self, Mode, Refused, Sqlite};
use crate::{CheckError, Ctx, OrFail};

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

/// The journal mode and whether tables `tasks` and `members` exist.
pub async fn layout(ctx: &Ctx, path: &Path) -> Result<(String, bool), CheckError> {
    let mut conn = Sqlite::read_only(ctx, path).await?;
    let mode = conn
        .query_row("PRAGMA journal_mode", &[])
        .await?
        .and_then(|row| sqlite::text(row.as_ref().and_then(|r| r.first()), "journal_mode"))
        .or_fail("PRAGMA journal_mode answers")?;
    let tables = conn
        .query_row(
            "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name IN ('tasks', 'members')",
            &[],
        )
        .await?
        .and_then(|row| sqlite::integer(row.as_ref().and_then(|r| r.first()), "COUNT(*)"))
        .or_fail("sqlite_master can be read")?;
    conn.close().await?;
    Ok((mode.to_ascii_lowercase(), tables == 2))
}

/// The row of task `id`, if any.
pub async fn task(ctx: &Ctx, path: &Path, id: &str) -> Result<Option<Row>, CheckError> {
    let mut conn = Sqlite::read_only(ctx, path).await?;
    let row = conn
        .query_row(
            "SELECT status, owner, claimedAt, completedAt FROM tasks WHERE id = ?1",
            &[json!(id)],
        )
        .await?
        .and_then(|row| row.map(|cells| read_row(&cells)).transpose())
        .or_fail(format!(
            "table tasks has columns status, owner, claimedAt, completedAt ({})",
            path.display()
        ))?;
    conn.close().await?;
    Ok(row)
}

fn read_row(cells: &[serde_json::Value]) -> Result<Row, Refused> {
    Ok(Row {
        status: sqlite::text(cells.first(), "status")?,
        owner: sqlite::optional_text(cells.get(1), "owner")?,
        claimed_at: sqlite::optional_integer(cells.get(2), "claimedAt")?,
        completed_at: sqlite::optional_integer(cells.get(3), "completedAt")?,
    })
}

/// The harness's own connection holding the ledger's write lock until [`WriteLock::release`].
pub struct WriteLock {
    conn: Sqlite,
}

impl WriteLock {
    /// Opens the ledger and runs `BEGIN IMMEDIATE` (waiting up to 30 s for a writer to finish).
    pub async fn take(ctx: &Ctx, path: &Path) -> Result<Self, CheckError> {
        let mut conn = Sqlite::open(ctx, path, Mode::ReadWrite, 30_000).await?;
        conn.execute("BEGIN IMMEDIATE")
            .await?
            .or_error("taking the ledger's write lock")?;
        Ok(Self { conn })
    }

    /// `ROLLBACK`: releases the lock; nothing was written.
    pub async fn release(mut self) -> Result<(), CheckError> {
        self.conn
            .execute("ROLLBACK")
            .await?
            .or_error("releasing the ledger's write lock")?;
        self.conn.close().await
    }
}
