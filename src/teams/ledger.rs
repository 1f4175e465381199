//! The task ledger: one SQLite file per team (`<team>/ledger.db`) in WAL mode.
//!
//! Every write is one `BEGIN IMMEDIATE` transaction, retried as a whole while the database is
//! busy or locked: a short `busy_timeout`, then a bounded exponential backoff (1 ms doubling to
//! 100 ms, within the `--busy-timeout-ms` budget) that announces each wait as a `busy` trace event
//! and counts it (E-TEAM-20). The claim is one conditional `UPDATE` whose changed-row count
//! decides (E-TEAM-13); completion and deletion unblock dependents in the same transaction. The
//! schema is versioned with `PRAGMA user_version` and migrated forward on open.
//!
//! - [`schema`]: the DDL, the migrations and opening the file.
//! - [`rows`]: tasks and members as Rust values, their statuses and roles as enums.
//! - [`operations`]: claims, transitions, dependencies and queries.
//! - [`audit`]: what the file holds that ski did not write (schema objects, rows).
//!
//! This module holds the connection and its retry discipline.

mod audit;
mod operations;
mod rows;
mod schema;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rusqlite::{Connection, ErrorCode, Transaction, TransactionBehavior};

pub use crate::storage::sqlite_schema::{RowFinding, SchemaFinding};
pub use audit::MAX_ROW_FINDINGS;
pub use rows::{
    Counts, ForeignRow, Member, MemberRole, MemberStatus, NewTask, Task, TaskFilter, TaskStatus,
    UnknownName,
};
pub use schema::{LEDGER_FILE, schema_version, wal_path};

use super::error::{TeamsError, TeamsResult};

/// The first backoff delay.
const FIRST_DELAY_MS: u64 = 1;
/// The longest backoff delay.
const MAX_DELAY_MS: u64 = 100;

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

impl Ledger {
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
                Err(TeamsError::Sqlite(error)) if rows::foreign_value(&error).is_some() => {
                    let found = rows::foreign_value(&error).unwrap_or_default();
                    return Err(TeamsError::LedgerUnusable {
                        path: self.path.display().to_string(),
                        reason: format!("{found} (maintenance check lists every such row)"),
                    });
                }
                other => return other,
            }
        }
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

    /// Refuses a ledger whose schema is not the one ski's migrations make up to `version`: a
    /// trigger, view, table or index ski did not create, or one of its own changed or missing.
    fn refuse_foreign_schema(&mut self, version: i64) -> TeamsResult<()> {
        let findings = self.schema_findings_at(version)?;
        if findings.is_empty() {
            return Ok(());
        }
        let listed: Vec<String> = findings.iter().map(ToString::to_string).collect();
        Err(TeamsError::LedgerUnusable {
            path: self.path.display().to_string(),
            reason: format!(
                "its schema is not the one ski writes: {} (maintenance check reports it; move the team aside or restore the ledger)",
                listed.join(", ")
            ),
        })
    }

    fn schema_findings_at(&mut self, version: i64) -> TeamsResult<Vec<SchemaFinding>> {
        self.retrying(|conn| audit::schema_findings(conn, version).map_err(TeamsError::Sqlite))
    }

    /// The schema objects that are not as ski's migrations make them.
    pub fn schema_findings(&mut self) -> TeamsResult<Vec<SchemaFinding>> {
        self.schema_findings_at(schema_version())
    }

    /// The rows holding values ski never writes (at most [`MAX_ROW_FINDINGS`], and whether there
    /// were more), in the tables whose schema is ski's.
    pub fn row_findings(
        &mut self,
        schema: &[SchemaFinding],
    ) -> TeamsResult<(Vec<RowFinding>, bool)> {
        self.read(|tx| Ok(audit::row_findings(tx, schema_version(), schema)?))
    }

    /// The inbox keys of the members as stored, skipping any row that holds no text there: what
    /// `maintenance check` compares the inbox directories with, whatever else the rows hold.
    pub fn stored_inbox_keys(&mut self) -> TeamsResult<Vec<String>> {
        self.read(|tx| {
            let mut statement =
                tx.prepare("SELECT inboxKey FROM members WHERE typeof(inboxKey) = 'text'")?;
            let rows = statement.query_map([], |row| {
                Ok(match row.get_ref(0)? {
                    rusqlite::types::ValueRef::Text(key) => {
                        String::from_utf8_lossy(key).into_owned()
                    }
                    _ => String::new(),
                })
            })?;
            Ok(rows.collect::<Result<Vec<_>, _>>()?)
        })
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
