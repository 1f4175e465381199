//! A target's SQLite file as checks read it, through `ski-conformance-sqlite` (a process of its
//! own, started from `{bin_dir}` like every other program of a run), so the runner links no SQLite:
//! the layers are Cargo's to enforce (see `docs/ARCHITECTURE.md`, "Layers").
//!
//! Each [`Sqlite`] is one connection, open until it is dropped; its requests and answers are in
//! the scenario's wire log. A request has two outcomes, and they are kept apart: the outer
//! `Result` is the harness's (the program is missing or died), the inner one is the database's
//! answer, which a check turns into a failure with [`crate::OrFail`].

use std::fmt;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use ski::transport::child::{Child, ChildSpec};

use crate::{CheckError, Ctx, OrFail};

/// The program that holds the connection, found in the run's `{bin_dir}`.
pub const PROGRAM: &str = "ski-conformance-sqlite";

/// How a connection opens its file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Read-only; the file must exist.
    ReadOnly,
    /// Read and write; the file must exist.
    ReadWrite,
    /// Read and write, creating the file when it is missing.
    Create,
}

impl Mode {
    fn word(self) -> &'static str {
        match self {
            Mode::ReadOnly => "read-only",
            Mode::ReadWrite => "read-write",
            Mode::Create => "create",
        }
    }
}

/// What SQLite answered instead of a result: the target's database refused the request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused(pub String);

impl fmt::Display for Refused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The answer of a query: rows of cells (integer and real as numbers, text as strings, null,
/// a blob as `{"blob_hex": ...}`).
pub type Rows = Vec<Vec<Value>>;

/// The program holding at most one connection to a SQLite file at a time.
pub struct Sqlite {
    child: Child,
    path: Option<PathBuf>,
}

impl Sqlite {
    /// Starts the program, with no file open yet.
    pub fn start(ctx: &Ctx) -> Result<Self, CheckError> {
        let program = ctx.bin(PROGRAM);
        if !program.is_file() {
            return Err(CheckError::harness(format!(
                "{} is missing: build it with `cargo build --workspace --bins`, or install it \
                 beside ski-conformance with `cargo install --locked --path conformance/sqlite`",
                program.display()
            )));
        }
        let child = ctx.spawn(ChildSpec::new("sqlite", &program))?;
        Ok(Self { child, path: None })
    }

    /// Starts the program and opens `path` with `mode`, waiting up to `busy_timeout_ms` for a
    /// lock held elsewhere. A file that does not open as a SQLite database is the target's
    /// failure.
    pub async fn open(
        ctx: &Ctx,
        path: &Path,
        mode: Mode,
        busy_timeout_ms: u64,
    ) -> Result<Self, CheckError> {
        let mut sqlite = Self::start(ctx)?;
        sqlite
            .open_file(path, mode, busy_timeout_ms)
            .await?
            .or_fail(format!("{} opens as a SQLite database", path.display()))?;
        Ok(sqlite)
    }

    /// Opens `path` read-only with a 10 s busy timeout: what most checks need.
    pub async fn read_only(ctx: &Ctx, path: &Path) -> Result<Self, CheckError> {
        Self::open(ctx, path, Mode::ReadOnly, 10_000).await
    }

    /// Opens `path`, replacing the connection open before (if any).
    pub async fn open_file(
        &mut self,
        path: &Path,
        mode: Mode,
        busy_timeout_ms: u64,
    ) -> Result<Result<(), Refused>, CheckError> {
        self.path = Some(path.to_path_buf());
        let request = json!({
            "open": path.to_string_lossy(),
            "mode": mode.word(),
            "busy_timeout_ms": busy_timeout_ms,
        });
        Ok(self.ask(&request).await?.map(|_| ()))
    }

    /// Closes the open connection (ending any transaction it holds); the program stays.
    pub async fn close_file(&mut self) -> Result<(), CheckError> {
        self.ask(&json!({ "close": true }))
            .await?
            .or_error(format!("{PROGRAM}: close"))?;
        self.path = None;
        Ok(())
    }

    /// Runs one statement with positional parameters (`?1`, `?2`, …) and returns every row.
    pub async fn query(
        &mut self,
        sql: &str,
        params: &[Value],
    ) -> Result<Result<Rows, Refused>, CheckError> {
        let answer = self.ask(&json!({ "query": sql, "params": params })).await?;
        Ok(answer.and_then(|answer| match answer.get("rows") {
            Some(Value::Array(rows)) => Ok(rows
                .iter()
                .map(|row| row.as_array().cloned().unwrap_or_default())
                .collect()),
            _ => Err(Refused(format!("an answer without rows: {answer}"))),
        }))
    }

    /// The first row of a query, if any.
    pub async fn query_row(
        &mut self,
        sql: &str,
        params: &[Value],
    ) -> Result<Result<Option<Vec<Value>>, Refused>, CheckError> {
        Ok(self
            .query(sql, params)
            .await?
            .map(|rows| rows.into_iter().next()))
    }

    /// Runs statements that return no rows (`BEGIN IMMEDIATE`, `ROLLBACK`, a schema).
    pub async fn execute(&mut self, sql: &str) -> Result<Result<(), Refused>, CheckError> {
        Ok(self.ask(&json!({ "execute": sql })).await?.map(|_| ()))
    }

    /// Ends the connection (and any transaction it holds) and waits for the program to exit.
    pub async fn close(mut self) -> Result<(), CheckError> {
        self.child.close_stdin();
        self.child
            .wait()
            .await
            .map(|_| ())
            .map_err(|e| CheckError::harness(format!("{PROGRAM}: {e}")))
    }

    async fn ask(&mut self, request: &Value) -> Result<Result<Value, Refused>, CheckError> {
        let died = |e: &dyn fmt::Display| {
            let file = self.path.as_deref().unwrap_or(Path::new("no file"));
            CheckError::harness(format!(
                "{PROGRAM} ({}) stopped answering: {e}",
                file.display()
            ))
        };
        self.child
            .send_line(&request.to_string())
            .await
            .map_err(|e| died(&e))?;
        let line = match self.child.next_line().await {
            Ok(Some(line)) => line,
            Ok(None) => return Err(died(&"its stdout ended")),
            Err(e) => return Err(died(&e)),
        };
        let answer: Value = serde_json::from_str(&line).map_err(|e| died(&e))?;
        Ok(match answer.get("error") {
            Some(error) => Err(Refused(error.as_str().unwrap_or_default().to_owned())),
            None => Ok(answer),
        })
    }
}

/// A cell that must hold text.
pub fn text(cell: Option<&Value>, column: &str) -> Result<String, Refused> {
    match cell {
        Some(Value::String(text)) => Ok(text.clone()),
        other => Err(Refused(format!(
            "{column} holds {}, not text",
            shown(other)
        ))),
    }
}

/// A cell that must hold text or null.
pub fn optional_text(cell: Option<&Value>, column: &str) -> Result<Option<String>, Refused> {
    match cell {
        Some(Value::Null) => Ok(None),
        other => text(other, column).map(Some),
    }
}

/// A cell that must hold an integer.
pub fn integer(cell: Option<&Value>, column: &str) -> Result<i64, Refused> {
    match cell.and_then(Value::as_i64) {
        Some(n) => Ok(n),
        None => Err(Refused(format!(
            "{column} holds {}, not an integer",
            shown(cell)
        ))),
    }
}

/// A cell that must hold an integer or null.
pub fn optional_integer(cell: Option<&Value>, column: &str) -> Result<Option<i64>, Refused> {
    match cell {
        Some(Value::Null) => Ok(None),
        other => integer(other, column).map(Some),
    }
}

fn shown(cell: Option<&Value>) -> String {
    cell.map_or_else(|| "nothing".to_owned(), Value::to_string)
}
