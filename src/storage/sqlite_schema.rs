//! What a SQLite file holds beside what its program wrote: its schema objects compared with the
//! schema the program makes, and rows whose values have another storage class than their
//! column's declared type (a BLOB where TEXT belongs), a text outside a fixed set, or a text that
//! is not a JSON array. The teams ledger and the intercom database audit themselves with it.

use std::collections::BTreeMap;
use std::fmt;

use rusqlite::Connection;
use rusqlite::types::ValueRef;
use serde::Serialize;

/// Schema objects by type and name, with their table and SQL.
pub type Objects = BTreeMap<(String, String), (String, Option<String>)>;

/// The schema objects of `conn` (`sqlite_master`).
pub fn objects(conn: &Connection) -> rusqlite::Result<Objects> {
    let mut statement = conn.prepare("SELECT type, name, tbl_name, sql FROM sqlite_master")?;
    let rows = statement.query_map([], |row| {
        Ok((
            (row.get::<_, String>(0)?, row.get::<_, String>(1)?),
            (row.get::<_, String>(2)?, row.get::<_, Option<String>>(3)?),
        ))
    })?;
    rows.collect()
}

/// A schema object that is not as the program makes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SchemaFinding {
    /// `table`, `index`, `trigger` or `view`.
    #[serde(rename = "type")]
    pub kind: String,
    /// Its name.
    pub name: String,
    /// `foreign` (never created by the program), `changed` (its definition differs) or `missing`.
    pub problem: &'static str,
}

impl fmt::Display for SchemaFinding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = match self.problem {
            "foreign" => "not created by ski",
            "changed" => "changed",
            _ => "missing",
        };
        write!(f, "{} {:?} ({what})", self.kind, self.name)
    }
}

/// How [`schema_findings`] compares.
#[derive(Debug, Clone, Copy)]
pub struct Comparison {
    /// Tables must have the program's SQL too (else only their names count).
    pub table_sql: bool,
    /// An object of the program's schema that the file lacks is a finding.
    pub missing: bool,
}

/// Every object of `found` that `expected` does not have (triggers and views are never the
/// program's unless `expected` has them), or has with another table or SQL (tables only when
/// `how.table_sql`), and with `how.missing` every object of `expected` that `found` lacks.
pub fn schema_findings(found: &Objects, expected: &Objects, how: Comparison) -> Vec<SchemaFinding> {
    let mut findings = Vec::new();
    let finding = |(kind, name): &(String, String), problem| SchemaFinding {
        kind: kind.clone(),
        name: name.clone(),
        problem,
    };
    for (object, (table, sql)) in found {
        match expected.get(object) {
            None => findings.push(finding(object, "foreign")),
            Some((own_table, own_sql)) => {
                let compare_sql = object.0 != "table" || how.table_sql;
                if own_table != table || (compare_sql && own_sql != sql) {
                    findings.push(finding(object, "changed"));
                }
            }
        }
    }
    if how.missing {
        for object in expected.keys() {
            if !found.contains_key(object) {
                findings.push(finding(object, "missing"));
            }
        }
    }
    findings
}

/// A row holding a value its program never writes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RowFinding {
    /// The table.
    pub table: String,
    /// The row's primary key, its columns joined by `/`.
    pub key: String,
    /// The column.
    pub column: String,
    /// What is wrong.
    pub problem: String,
    /// The value is a text outside the column's fixed set (a status no one writes), not one of
    /// another type or shape.
    #[serde(skip)]
    pub outside_fixed_set: bool,
}

impl fmt::Display for RowFinding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {:?} column {}: {}",
            self.table, self.key, self.column, self.problem
        )
    }
}

/// What a program writes in one table beyond the declared types: the fixed texts of some columns
/// and the columns holding JSON arrays.
#[derive(Debug, Clone, Copy)]
pub struct TableRules<'a> {
    /// The table.
    pub table: &'a str,
    /// Columns holding one of a fixed set of texts.
    pub fixed_texts: &'a [(&'a str, &'a [&'a str])],
    /// Columns holding a JSON array.
    pub json_arrays: &'a [&'a str],
}

/// A stored value as text for a report: text as it is (lossily), numbers printed, a blob by size.
pub fn shown(value: ValueRef<'_>) -> String {
    match value {
        ValueRef::Null => "null".to_owned(),
        ValueRef::Integer(n) => n.to_string(),
        ValueRef::Real(x) => x.to_string(),
        ValueRef::Text(bytes) => String::from_utf8_lossy(bytes).into_owned(),
        ValueRef::Blob(bytes) => format!("a blob of {} bytes", bytes.len()),
    }
}

fn storage_class(value: ValueRef<'_>) -> &'static str {
    match value {
        ValueRef::Null => "null",
        ValueRef::Integer(_) => "an integer",
        ValueRef::Real(_) => "a real",
        ValueRef::Text(_) => "text",
        ValueRef::Blob(_) => "a blob",
    }
}

fn quoted(identifier: &str) -> String {
    format!("\"{}\"", identifier.replace('"', "\"\""))
}

/// A column as `PRAGMA table_info` describes it.
struct Column {
    name: String,
    /// `text` or `integer`: the storage class the program writes there.
    storage: &'static str,
    /// Never null (declared `NOT NULL`, or part of the primary key).
    required: bool,
    /// Its place in the primary key, 0 when it is not part of it.
    key_rank: i64,
}

fn columns(conn: &Connection, table: &str) -> rusqlite::Result<Vec<Column>> {
    let mut statement =
        conn.prepare("SELECT name, type, \"notnull\", pk FROM pragma_table_info(?1)")?;
    let rows = statement.query_map([table], |row| {
        let key_rank: i64 = row.get(3)?;
        let declared: String = row.get(1)?;
        Ok(Column {
            name: row.get(0)?,
            storage: if declared.eq_ignore_ascii_case("INTEGER") {
                "integer"
            } else {
                "text"
            },
            required: row.get::<_, bool>(2)? || key_rank > 0,
            key_rank,
        })
    })?;
    rows.collect()
}

/// What one check of [`row_findings`] looks for.
enum Problem<'a> {
    /// Another storage class than the column's.
    Class(&'static str),
    /// A text outside the column's fixed set.
    Unknown(&'a [&'a str]),
    /// A text that is not a JSON array.
    NotAnArray,
}

impl Problem<'_> {
    fn describe(&self, value: ValueRef<'_>) -> String {
        match self {
            Problem::Class(storage) => {
                format!("{} where ski writes {storage}", storage_class(value))
            }
            Problem::Unknown(allowed) => {
                format!("{:?} is none of {}", shown(value), allowed.join(", "))
            }
            Problem::NotAnArray => format!("{:?} is not a JSON array", shown(value)),
        }
    }
}

/// At most `room` rows of `rules.table` holding values the program never writes: a storage class
/// other than the declared type's (`INTEGER` columns hold integers, all others text; null only
/// where the column may be null), a text outside its fixed set, a text that is not a JSON array.
/// Columns the table does not have are skipped; a table without a primary key is keyed by rowid.
pub fn row_findings(
    conn: &Connection,
    rules: &TableRules<'_>,
    room: usize,
) -> rusqlite::Result<Vec<RowFinding>> {
    let columns = columns(conn, rules.table)?;
    let mut key: Vec<&Column> = columns.iter().filter(|c| c.key_rank > 0).collect();
    key.sort_by_key(|c| c.key_rank);
    let key_sql = if key.is_empty() {
        "rowid".to_owned()
    } else {
        key.iter()
            .map(|c| quoted(&c.name))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let key_width = key.len().max(1);
    let mut findings = Vec::new();
    for column in &columns {
        let name = quoted(&column.name);
        let classes = if column.required {
            format!("'{}'", column.storage)
        } else {
            format!("'{}', 'null'", column.storage)
        };
        let mut checks = vec![(
            format!("typeof({name}) NOT IN ({classes})"),
            Problem::Class(column.storage),
        )];
        if let Some((_, allowed)) = rules.fixed_texts.iter().find(|(c, _)| *c == column.name) {
            let list: Vec<String> = allowed
                .iter()
                .map(|text| format!("'{}'", text.replace('\'', "''")))
                .collect();
            checks.push((
                format!(
                    "typeof({name}) = 'text' AND {name} NOT IN ({})",
                    list.join(", ")
                ),
                Problem::Unknown(allowed),
            ));
        }
        if rules.json_arrays.contains(&column.name.as_str()) {
            checks.push((
                format!(
                    "typeof({name}) = 'text' AND CASE WHEN json_valid({name}) THEN json_type({name}) <> 'array' ELSE 1 END"
                ),
                Problem::NotAnArray,
            ));
        }
        for (condition, problem) in checks {
            if findings.len() >= room {
                return Ok(findings);
            }
            let sql = format!(
                "SELECT {key_sql}, {name} FROM {} WHERE {condition} LIMIT {}",
                quoted(rules.table),
                room - findings.len()
            );
            let mut statement = conn.prepare(&sql)?;
            let mut rows = statement.query([])?;
            while let Some(row) = rows.next()? {
                let key = (0..key_width)
                    .map(|i| row.get_ref(i).map(shown))
                    .collect::<rusqlite::Result<Vec<_>>>()?
                    .join("/");
                findings.push(RowFinding {
                    table: rules.table.to_owned(),
                    key,
                    column: column.name.clone(),
                    problem: problem.describe(row.get_ref(key_width)?),
                    outside_fixed_set: matches!(problem, Problem::Unknown(_)),
                });
            }
        }
    }
    Ok(findings)
}
