//! What a ledger holds that ski did not write (E-TEAM-29). Its schema is compared with the one
//! ski's own migrations make (built in memory for the file's version): a trigger, a view, a table
//! or an index beside ski's, or one of ski's objects changed or missing, is a finding, and every
//! command but `maintenance check` refuses such a ledger before it reads or writes a row (a
//! planted trigger would otherwise run inside ski's own transactions). The rows of ski's tables
//! are checked for values ski never writes: a status or role no enum names, a value of another
//! SQLite type than the column's (a BLOB where TEXT belongs), a task list that is not a JSON array.

use rusqlite::Connection;

use super::rows::{MemberRole, MemberStatus, TaskStatus};
use super::schema::MIGRATIONS;
use crate::storage::sqlite_schema::{
    self, Comparison, Objects, RowFinding, SchemaFinding, TableRules,
};

/// At most this many row findings are listed; the check says when there were more.
pub const MAX_ROW_FINDINGS: usize = 100;

/// The schema ski's migrations make up to `version`.
fn expected(version: i64) -> rusqlite::Result<Objects> {
    let conn = Connection::open_in_memory()?;
    let applied = usize::try_from(version).unwrap_or(0).min(MIGRATIONS.len());
    for sql in &MIGRATIONS[..applied] {
        conn.execute_batch(sql)?;
    }
    sqlite_schema::objects(&conn)
}

/// Every schema object of `conn` that is not as the migrations up to `version` make it.
pub fn schema_findings(conn: &Connection, version: i64) -> rusqlite::Result<Vec<SchemaFinding>> {
    Ok(sqlite_schema::schema_findings(
        &sqlite_schema::objects(conn)?,
        &expected(version)?,
        Comparison {
            table_sql: true,
            missing: true,
        },
    ))
}

/// The strings of an enum's variants.
fn texts<T: Copy>(all: &[T], text: fn(T) -> &'static str) -> Vec<&'static str> {
    all.iter().map(|value| text(*value)).collect()
}

/// The rows of ski's tables holding values ski never writes, at most [`MAX_ROW_FINDINGS`] (the
/// flag says whether there were more). A table with a schema finding is skipped: its columns are
/// not ski's to judge.
pub fn row_findings(
    conn: &Connection,
    version: i64,
    schema: &[SchemaFinding],
) -> rusqlite::Result<(Vec<RowFinding>, bool)> {
    let task_statuses = texts(TaskStatus::ALL, TaskStatus::as_str);
    let member_statuses = texts(MemberStatus::ALL, MemberStatus::as_str);
    let member_roles = texts(MemberRole::ALL, MemberRole::as_str);
    let tasks_fixed = [("status", task_statuses.as_slice())];
    let members_fixed = [
        ("status", member_statuses.as_slice()),
        ("role", member_roles.as_slice()),
    ];
    let answers: &[&str] = &["pending", "approved", "rejected"];
    let requests_fixed = [("status", answers)];
    let no_texts: &[(&str, &[&str])] = &[];
    let tables = [
        TableRules {
            table: "tasks",
            fixed_texts: &tasks_fixed,
            json_arrays: &["dependsOn", "blockedBy", "blocks"],
        },
        TableRules {
            table: "members",
            fixed_texts: &members_fixed,
            json_arrays: &[],
        },
        TableRules {
            table: "shutdown_requests",
            fixed_texts: &requests_fixed,
            json_arrays: &[],
        },
        TableRules {
            table: "activity",
            fixed_texts: no_texts,
            json_arrays: &[],
        },
    ];
    let wanted = expected(version)?;
    let mut findings = Vec::new();
    for rules in &tables {
        let table = rules.table.to_owned();
        let ours = wanted.contains_key(&("table".to_owned(), table.clone()));
        let judged = !schema.iter().any(|f| f.kind == "table" && f.name == table);
        if !ours || !judged {
            continue;
        }
        let room = MAX_ROW_FINDINGS + 1 - findings.len();
        findings.extend(sqlite_schema::row_findings(conn, rules, room)?);
        if findings.len() > MAX_ROW_FINDINGS {
            findings.truncate(MAX_ROW_FINDINGS);
            return Ok((findings, true));
        }
    }
    Ok((findings, false))
}
