//! The ledger's file and schema: the DDL of each version, forward migrations under
//! `PRAGMA user_version`, and creating the file or opening it to write (WAL, pragmas, migrations)
//! or only to read (nothing written, so a read-only root can be read).

use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::{Connection, ErrorCode, OpenFlags};

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
pub(super) const MIGRATIONS: &[&str] = &[
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
        let mut ledger = Self::configure(conn, path, busy)?;
        ledger.migrate()?;
        Ok(ledger)
    }

    /// Opens an existing ledger for writing, migrating it forward; never creates the file. An
    /// empty file, or one without the ledger's schema, is a damaged ledger and refused.
    pub fn open(path: &Path, busy: BusyPolicy) -> TeamsResult<Self> {
        refuse_empty(path)?;
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn = Connection::open_with_flags(path, flags).map_err(|e| unusable(path, &e))?;
        let mut ledger = Self::configure(conn, path, busy)?;
        let version = ledger.user_version()?;
        if version == 0 {
            return Err(no_schema(path));
        }
        if version <= schema_version() {
            ledger.refuse_foreign_schema(version)?;
        }
        ledger.migrate()?;
        Ok(ledger)
    }

    /// Opens an existing ledger for reading only: nothing is migrated, created or written, so it
    /// works on a read-only teams root. The ledger is opened as for a write when it can be; when
    /// its directory cannot be written, read-only; and when SQLite cannot even make its `-shm`
    /// file there and no `-wal` holds changes, as an immutable file (no writer can be at work in a
    /// directory where the `-wal` cannot be created).
    pub fn open_read(path: &Path, busy: BusyPolicy) -> TeamsResult<Self> {
        let mut ledger = Self::open_to_inspect(path, busy)?;
        ledger.refuse_foreign_schema(schema_version())?;
        Ok(ledger)
    }

    /// Opens an existing ledger to read it as [`Ledger::open_read`] does, but keeps a ledger whose
    /// schema ski did not make, so `maintenance check` can say what it holds.
    pub fn open_to_inspect(path: &Path, busy: BusyPolicy) -> TeamsResult<Self> {
        refuse_empty(path)?;
        let mut ways = vec![ReadWay::AsForWrite, ReadWay::ReadOnly];
        if !std::fs::metadata(wal_path(path)).is_ok_and(|meta| meta.len() > 0) {
            ways.push(ReadWay::Immutable);
        }
        let mut refused = None;
        for way in ways {
            match Self::connect_read(path, busy, way) {
                Ok(ledger) => return Ok(ledger),
                Err(TeamsError::Sqlite(error)) if is_read_only_refusal(&error) => {
                    refused = Some(error);
                }
                Err(error) => return Err(error),
            }
        }
        Err(match refused {
            Some(error) => unusable(path, &error),
            None => no_schema(path),
        })
    }

    /// One way of [`Ledger::open_read`]: the connection, and its schema version checked.
    fn connect_read(path: &Path, busy: BusyPolicy, way: ReadWay) -> TeamsResult<Self> {
        let conn = match way {
            ReadWay::AsForWrite => Connection::open_with_flags(
                path,
                OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
            ),
            ReadWay::ReadOnly => Connection::open_with_flags(
                path,
                OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
            ),
            ReadWay::Immutable => Connection::open_with_flags(
                immutable_uri(path)?,
                OpenFlags::SQLITE_OPEN_READ_ONLY
                    | OpenFlags::SQLITE_OPEN_URI
                    | OpenFlags::SQLITE_OPEN_NO_MUTEX,
            ),
        }
        .map_err(TeamsError::Sqlite)?;
        conn.busy_timeout(SQLITE_BUSY_TIMEOUT)
            .map_err(|e| unusable(path, &e))?;
        let mut ledger = Self {
            conn,
            path: path.to_owned(),
            busy,
            retries: 0,
        };
        let version: i64 = ledger.retrying(|conn| {
            conn.query_row("PRAGMA user_version", [], |row| row.get(0))
                .map_err(TeamsError::Sqlite)
        })?;
        let known = schema_version();
        match version {
            0 => Err(no_schema(path)),
            v if v > known => Err(newer_schema(path, v)),
            v if v < known => Err(TeamsError::LedgerUnusable {
                path: path.display().to_string(),
                reason: format!(
                    "written by an older schema (version {v}; this build reads {known}): any command that writes migrates it"
                ),
            }),
            _ => Ok(ledger),
        }
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
            return Err(newer_schema(&self.path, version));
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

/// How [`Ledger::open_read`] tries to open a ledger, in order.
#[derive(Debug, Clone, Copy)]
enum ReadWay {
    AsForWrite,
    ReadOnly,
    Immutable,
}

/// SQLite refusing because the file or its directory cannot be written.
fn is_read_only_refusal(error: &rusqlite::Error) -> bool {
    matches!(
        error.sqlite_error_code(),
        Some(ErrorCode::ReadOnly | ErrorCode::CannotOpen | ErrorCode::PermissionDenied)
    )
}

/// An empty file is a damaged ledger (SQLite would take it for a new database and the team's
/// tasks and members would vanish); only `team create` makes a ledger.
fn refuse_empty(path: &Path) -> TeamsResult<()> {
    match std::fs::metadata(path) {
        Ok(meta) if meta.len() == 0 => Err(TeamsError::LedgerUnusable {
            path: path.display().to_string(),
            reason: "the file is empty, not a ledger database".to_owned(),
        }),
        _ => Ok(()),
    }
}

fn no_schema(path: &Path) -> TeamsError {
    TeamsError::LedgerUnusable {
        path: path.display().to_string(),
        reason: "the file holds no ledger schema (user_version 0)".to_owned(),
    }
}

fn newer_schema(path: &Path, version: i64) -> TeamsError {
    TeamsError::LedgerUnusable {
        path: path.display().to_string(),
        reason: format!(
            "written by a newer schema (version {version}; this build knows {})",
            schema_version()
        ),
    }
}

/// `file:PATH?immutable=1`, the path percent-encoded but for unreserved bytes and `/`.
fn immutable_uri(path: &Path) -> TeamsResult<String> {
    use std::os::unix::ffi::OsStrExt;
    let absolute = std::path::absolute(path)
        .map_err(|e| TeamsError::storage(format!("resolving {}", path.display()), e))?;
    let mut uri = String::from("file:");
    for byte in absolute.as_os_str().as_bytes() {
        if byte.is_ascii_alphanumeric() || b"/-._~".contains(byte) {
            uri.push(char::from(*byte));
        } else {
            uri.push_str(&format!("%{byte:02X}"));
        }
    }
    uri.push_str("?immutable=1");
    Ok(uri)
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
