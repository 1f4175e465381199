//! What an intercom database holds that the server did not write, checked when it is opened,
//! before the schema bootstrap writes anything (E-INT-28). A trigger or a view (never the
//! server's), a table or an index it does not know (the `continuation_prompt` table of the
//! upstream layout aside), or one of its indexes changed, is refused; so is a row of its tables
//! holding a value of another SQLite type than its column's (a BLOB where TEXT belongs), which
//! later reads could not take. A session or an approval with a status (or a mode, connectivity or
//! risk level) the server never writes is reported and left alone: no query takes it for a live
//! one, and reading it by id is an error naming the value ([`crate::intercom::vocab`]).

use rusqlite::Connection;

use crate::intercom::config::Mode;
use crate::intercom::vocab::{ApprovalStatus, Connectivity, RiskLevel, SessionStatus, WorkMode};

use crate::storage::sqlite_schema::{
    self, Comparison, Objects, RowFinding, SchemaFinding, TableRules,
};

/// At most this many rows are named in a refusal or a report.
const MAX_LISTED: usize = 20;

/// The tables the server writes, and the one of the upstream layout it keeps.
const KNOWN_TABLES: &[&str] = &[
    "session",
    "approval_request",
    "steering_message",
    "schema_meta",
    "continuation_prompt",
];

/// The protocol modes the server writes (`session.protocol_mode`).
const PROTOCOL_MODES: &[&str] = &[Mode::Mcp.as_str(), Mode::Acp.as_str()];

/// The `session` columns that hold a closed set, with its names.
const SESSION_SETS: &[(&str, &[&str])] = &[
    ("status", SessionStatus::NAMES),
    ("protocol_mode", PROTOCOL_MODES),
    ("mode", WorkMode::NAMES),
    ("connectivity_status", Connectivity::NAMES),
];
/// The `approval_request` columns that hold a closed set, with its names.
const APPROVAL_SETS: &[(&str, &[&str])] = &[
    ("status", ApprovalStatus::NAMES),
    ("risk_level", RiskLevel::NAMES),
];

/// The schema objects of `conn` the server did not make: `expected` is the schema its bootstrap
/// makes. Tables are judged by name (an older layout is migrated in place); the automatic
/// indexes of known tables' constraints go with their tables.
pub fn schema_findings(
    conn: &Connection,
    expected: &Objects,
) -> rusqlite::Result<Vec<SchemaFinding>> {
    let mut found = loose(sqlite_schema::objects(conn)?);
    let expected = &loose(expected.clone());
    found.retain(|(kind, name), (table, _)| {
        let known_table = KNOWN_TABLES.contains(&table.as_str());
        let kept_table =
            kind == "table" && known_table && !expected.contains_key(&(kind.clone(), name.clone()));
        let constraint_index =
            kind == "index" && known_table && name.starts_with("sqlite_autoindex_");
        !(kept_table || constraint_index)
    });
    Ok(sqlite_schema::schema_findings(
        &found,
        expected,
        Comparison {
            table_sql: false,
            missing: false,
        },
    ))
}

/// The objects with their SQL lower-cased and without whitespace: an index made by another
/// build with other spacing is the same index.
fn loose(objects: Objects) -> Objects {
    objects
        .into_iter()
        .map(|(object, (table, sql))| {
            let sql = sql.map(|sql| {
                sql.chars()
                    .filter(|c| !c.is_whitespace())
                    .collect::<String>()
                    .to_ascii_lowercase()
            });
            (object, (table, sql))
        })
        .collect()
}

/// What the rows of the server's tables hold that it never writes.
#[derive(Debug, Default)]
pub struct RowReport {
    /// Values of another SQLite type than their column's: the database is refused.
    pub mistyped: Vec<RowFinding>,
    /// Sessions and approvals with a status (or mode, connectivity, risk level) the server
    /// never writes: reported.
    pub unknown_values: Vec<RowFinding>,
}

/// Splits findings into type mismatches and unknown values of closed sets.
fn split(findings: Vec<RowFinding>, report: &mut RowReport) {
    for finding in findings {
        if finding.outside_fixed_set {
            if report.unknown_values.len() < MAX_LISTED {
                report.unknown_values.push(finding);
            }
        } else if report.mistyped.len() < MAX_LISTED {
            report.mistyped.push(finding);
        }
    }
}

/// The rows of the server's tables holding values it never writes (at most [`MAX_LISTED`] of
/// each kind per table).
pub fn row_report(conn: &Connection) -> rusqlite::Result<RowReport> {
    let no_texts: &[(&str, &[&str])] = &[];
    let tables = [
        TableRules {
            table: "session",
            fixed_texts: SESSION_SETS,
            json_arrays: &[],
        },
        TableRules {
            table: "approval_request",
            fixed_texts: APPROVAL_SETS,
            json_arrays: &[],
        },
        TableRules {
            table: "steering_message",
            fixed_texts: no_texts,
            json_arrays: &[],
        },
        TableRules {
            table: "schema_meta",
            fixed_texts: no_texts,
            json_arrays: &[],
        },
    ];
    let mut report = RowReport::default();
    for rules in &tables {
        split(
            sqlite_schema::row_findings(conn, rules, 2 * MAX_LISTED)?,
            &mut report,
        );
    }
    Ok(report)
}

/// Findings as one line of text.
pub fn listed<T: std::fmt::Display>(findings: &[T]) -> String {
    findings
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}
