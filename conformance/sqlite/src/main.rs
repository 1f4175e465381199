//! `ski-conformance-sqlite`: one SQLite connection, driven by JSON lines on stdin, for the
//! conformance runner, which links no SQLite itself (the runner never links what it judges).
//!
//! Each line is one request and gets one answer line on stdout: `{"ok":true}`,
//! `{"rows":[[...],...]}` or `{"error":"..."}`. `open` (again) replaces the connection, so a
//! reader can see the file as it is now; `close` ends it:
//!
//! ```text
//! {"open":"PATH","mode":"read-only"|"read-write"|"create","busy_timeout_ms":10000}
//! {"query":"SELECT ...","params":["x",1,null]}
//! {"execute":"BEGIN IMMEDIATE"}
//! {"close":true}
//! ```
//!
//! Values map as SQLite stores them: integer and real to JSON numbers, text to strings, null to
//! null, a blob to `{"blob_hex":"..."}`. The connection, and any transaction it holds (a write
//! lock taken with `BEGIN IMMEDIATE`), lasts until it is closed or replaced, stdin ends or the
//! process is ended; SQLite's error answers the request and keeps the connection. A line that is
//! no request of these exits 2.

use std::io::{self, BufRead, Read, Write};
use std::process::ExitCode;
use std::time::Duration;

use rusqlite::types::{Value as SqlValue, ValueRef};
use rusqlite::{Connection, OpenFlags};
use serde_json::{Map, Value, json};

/// The longest request line read; a longer one is refused (exit 2).
const MAX_LINE_BYTES: usize = 1024 * 1024;

fn main() -> ExitCode {
    let stdin = io::stdin();
    let mut input = stdin.lock();
    let stdout = io::stdout();
    let mut output = stdout.lock();
    let mut connection: Option<Connection> = None;
    let mut line = String::new();
    loop {
        line.clear();
        match (&mut input)
            .take(MAX_LINE_BYTES as u64 + 1)
            .read_line(&mut line)
        {
            Ok(0) => return ExitCode::SUCCESS,
            Ok(_) if line.len() > MAX_LINE_BYTES => {
                eprintln!("ski-conformance-sqlite: a request line over {MAX_LINE_BYTES} bytes");
                return ExitCode::from(2);
            }
            Ok(_) => {}
            Err(e) => {
                eprintln!("ski-conformance-sqlite: reading stdin: {e}");
                return ExitCode::from(2);
            }
        }
        let request = match serde_json::from_str::<Map<String, Value>>(line.trim_end()) {
            Ok(request) => request,
            Err(e) => {
                eprintln!("ski-conformance-sqlite: a request is a JSON object per line: {e}");
                return ExitCode::from(2);
            }
        };
        let answer = match answer(&mut connection, &request) {
            Ok(answer) => answer,
            Err(Refusal::Usage(message)) => {
                eprintln!("ski-conformance-sqlite: {message}");
                return ExitCode::from(2);
            }
            Err(Refusal::Sqlite(message)) => json!({ "error": message }),
        };
        if writeln!(output, "{answer}")
            .and_then(|()| output.flush())
            .is_err()
        {
            // The runner went away: nothing is left to answer.
            return ExitCode::SUCCESS;
        }
    }
}

/// Why a request got no result.
enum Refusal {
    /// The request is not one this program knows: the caller is broken, exit 2.
    Usage(String),
    /// SQLite refused: answered as `{"error": ...}`.
    Sqlite(String),
}

impl From<rusqlite::Error> for Refusal {
    fn from(error: rusqlite::Error) -> Self {
        Refusal::Sqlite(error.to_string())
    }
}

fn answer(
    connection: &mut Option<Connection>,
    request: &Map<String, Value>,
) -> Result<Value, Refusal> {
    if let Some(path) = request.get("open") {
        let path = path
            .as_str()
            .ok_or_else(|| Refusal::Usage("`open` is a path".into()))?;
        // A new `open` replaces the connection: every read can see the file as it is now.
        *connection = None;
        let flags = match request
            .get("mode")
            .and_then(Value::as_str)
            .unwrap_or("read-only")
        {
            "read-only" => OpenFlags::SQLITE_OPEN_READ_ONLY,
            "read-write" => OpenFlags::SQLITE_OPEN_READ_WRITE,
            "create" => OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_CREATE,
            other => return Err(Refusal::Usage(format!("unknown mode {other:?}"))),
        };
        let opened = Connection::open_with_flags(path, flags)?;
        if let Some(ms) = request.get("busy_timeout_ms").and_then(Value::as_u64) {
            opened.busy_timeout(Duration::from_millis(ms))?;
        }
        *connection = Some(opened);
        return Ok(json!({ "ok": true }));
    }
    if request.contains_key("close") {
        *connection = None;
        return Ok(json!({ "ok": true }));
    }
    let Some(connection) = connection.as_mut() else {
        return Err(Refusal::Usage("no database is open (`open` first)".into()));
    };
    if let Some(sql) = request.get("execute") {
        let sql = sql
            .as_str()
            .ok_or_else(|| Refusal::Usage("`execute` is SQL text".into()))?;
        connection.execute_batch(sql)?;
        return Ok(json!({ "ok": true }));
    }
    if let Some(sql) = request.get("query") {
        let sql = sql
            .as_str()
            .ok_or_else(|| Refusal::Usage("`query` is SQL text".into()))?;
        let params = match request.get("params") {
            None => Vec::new(),
            Some(Value::Array(params)) => params.iter().map(to_sql).collect::<Result<_, _>>()?,
            Some(_) => return Err(Refusal::Usage("`params` is an array".into())),
        };
        return Ok(json!({ "rows": query(connection, sql, &params)? }));
    }
    Err(Refusal::Usage(
        "a request has `open`, `query`, `execute` or `close`".into(),
    ))
}

fn query(connection: &Connection, sql: &str, params: &[SqlValue]) -> Result<Vec<Value>, Refusal> {
    let mut statement = connection.prepare(sql)?;
    let width = statement.column_count();
    let mut rows = statement.query(rusqlite::params_from_iter(params))?;
    let mut answer = Vec::new();
    while let Some(row) = rows.next()? {
        let mut cells = Vec::with_capacity(width);
        for index in 0..width {
            cells.push(from_sql(row.get_ref(index)?));
        }
        answer.push(Value::Array(cells));
    }
    Ok(answer)
}

fn to_sql(value: &Value) -> Result<SqlValue, Refusal> {
    Ok(match value {
        Value::Null => SqlValue::Null,
        Value::Bool(b) => SqlValue::Integer(i64::from(*b)),
        Value::Number(n) => match (n.as_i64(), n.as_f64()) {
            (Some(i), _) => SqlValue::Integer(i),
            (None, Some(f)) => SqlValue::Real(f),
            (None, None) => {
                return Err(Refusal::Usage(format!("parameter {n} does not fit SQLite")));
            }
        },
        Value::String(s) => SqlValue::Text(s.clone()),
        Value::Array(_) | Value::Object(_) => {
            return Err(Refusal::Usage(
                "a parameter is null, a number, a boolean or text".into(),
            ));
        }
    })
}

fn from_sql(value: ValueRef<'_>) -> Value {
    match value {
        ValueRef::Null => Value::Null,
        ValueRef::Integer(i) => json!(i),
        ValueRef::Real(f) => json!(f),
        ValueRef::Text(t) => Value::String(String::from_utf8_lossy(t).into_owned()),
        ValueRef::Blob(b) => {
            let hex: String = b.iter().map(|byte| format!("{byte:02x}")).collect();
            json!({ "blob_hex": hex })
        }
    }
}
