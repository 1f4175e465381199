//! Assertions shared by the AOF checks: validation reports, route reports, run artifact
//! locations and the RunResult schema, each failing with a readable Expected/Actual.

use std::path::PathBuf;

use serde_json::{Value, json};

use super::adapter::{Adapter, EXIT_INVALID, EXIT_OK, Output};
use super::disk;
use crate::vocabulary::aof;
use crate::{CheckError, Failure};

/// The completion outcomes (E-AOF-11).
pub const OUTCOMES: [&str; 4] = ["done", "blocked", "needs_review", "partial"];

/// A `validate` report that says valid: exit 0, `valid: true`, no errors. Returns the report.
pub fn valid(output: &Output) -> Result<Value, CheckError> {
    let report = output.json()?;
    let errors = report.get("errors").cloned().unwrap_or(Value::Null);
    if report.get("valid") != Some(&json!(true)) || output.code != Some(EXIT_OK) {
        return Err(Failure::new(
            format!("`{}` says valid", output.command),
            "valid: true, exit 0",
        )
        .actual(format!(
            "valid: {}, exit {}, errors: {errors}",
            report.get("valid").unwrap_or(&Value::Null),
            output.exit()
        ))
        .into());
    }
    if errors.as_array().is_some_and(|e| !e.is_empty()) {
        return Err(Failure::new(
            format!("`{}` reports no errors", output.command),
            "errors: []",
        )
        .actual(format!("errors: {errors}"))
        .into());
    }
    Ok(report)
}

/// The encoded `value` of a valid report.
pub fn valid_value(output: &Output) -> Result<Value, CheckError> {
    let report = valid(output)?;
    report.get("value").cloned().ok_or_else(|| {
        Failure::new(
            format!("`{}` prints the value", output.command),
            "a valid report carries the encoded value",
        )
        .actual(report.to_string())
        .into()
    })
}

/// A `validate` report that says invalid (exit 2, `valid: false`) with an error at `path` of
/// `kind` (E-AOF-07). Returns that error.
pub fn invalid(output: &Output, path: &str, kind: &str) -> Result<Value, CheckError> {
    invalid_where(output, Some(path), kind)
}

/// A `validate` report that says invalid with an error of `kind` at any path: for rules on a
/// whole object (at least one update field, passed + failed within total).
pub fn invalid_kind(output: &Output, kind: &str) -> Result<Value, CheckError> {
    invalid_where(output, None, kind)
}

fn invalid_where(output: &Output, path: Option<&str>, kind: &str) -> Result<Value, CheckError> {
    let report = output.json()?;
    let errors = report.get("errors").cloned().unwrap_or(Value::Null);
    if report.get("valid") != Some(&json!(false)) || output.code != Some(EXIT_INVALID) {
        return Err(Failure::new(
            format!("`{}` says invalid", output.command),
            format!("valid: false, exit {EXIT_INVALID}"),
        )
        .actual(format!(
            "valid: {}, exit {}, errors: {errors}",
            report.get("valid").unwrap_or(&Value::Null),
            output.exit()
        ))
        .into());
    }
    let at_path = |error: &Value| match path {
        None => true,
        Some(path) => error
            .get("path")
            .and_then(Value::as_str)
            .is_some_and(|p| same_path(p, path)),
    };
    let wanted = match path {
        Some(path) => json!({"path": path, "kind": kind}),
        None => json!({"kind": kind}),
    };
    errors
        .as_array()
        .and_then(|list| {
            list.iter()
                .find(|e| at_path(e) && e.get("kind").and_then(Value::as_str) == Some(kind))
        })
        .cloned()
        .ok_or_else(|| {
            let place = path.map_or_else(String::new, |p| format!(" at {p:?}"));
            Failure::new(
                format!("an error of kind {kind}{place}"),
                format!("errors include {wanted}"),
            )
            .actual(format!("errors: {errors}"))
            .into()
        })
}

/// Whether two field paths name the same field; `a[1]` and `a.1` are the same.
fn same_path(a: &str, b: &str) -> bool {
    let normal = |p: &str| p.replace('[', ".").replace(']', "");
    normal(a) == normal(b)
}

/// Fails unless the validated `value` holds `expected` at the dotted `path`.
pub fn value_at(value: &Value, path: &str, expected: &Value) -> Result<(), CheckError> {
    let actual = path.split('.').try_fold(value, |node, key| node.get(key));
    if actual == Some(expected) {
        return Ok(());
    }
    Err(Failure::new(
        format!("the validated value has {path}"),
        format!("{path}: {expected}"),
    )
    .actual(match actual {
        Some(actual) => format!("{path}: {actual}"),
        None => format!("no {path} in {value}"),
    })
    .into())
}

/// The exit code the adapter contract gives a route `outcome`.
pub fn route_exit_code(outcome: &str) -> i32 {
    match outcome {
        "rejected" => EXIT_INVALID,
        "failed" => super::adapter::EXIT_FAILED,
        _ => EXIT_OK,
    }
}

/// A route report with `outcome` and the exit code the contract gives it. Returns the report;
/// `logged` (the events of the message, when known) is shown when it differs.
pub fn routed(output: &Output, outcome: &str, logged: Option<&str>) -> Result<Value, CheckError> {
    let code = route_exit_code(outcome);
    let report = output.json()?;
    let actual = report.get("outcome").and_then(Value::as_str);
    if actual == Some(outcome) && output.code == Some(code) {
        return Ok(report);
    }
    let reason = report
        .get("reason")
        .and_then(Value::as_str)
        .map_or_else(String::new, |r| format!(", reason {r:?}"));
    let exit = output.exit();
    let mut text = format!(
        "outcome {}{reason} (exit {exit})",
        actual.unwrap_or("(none)")
    );
    match logged {
        Some(events) => text.push_str(&format!("; events logged:\n{events}")),
        None => text.push_str(&format!("; report: {report}")),
    }
    Err(Failure::new(
        format!("the message is {outcome}"),
        format!("route outcome {outcome} (exit {code})"),
    )
    .actual(text)
    .into())
}

/// The run artifact directory of `task`: `run show`'s `dir`, which must be `<runs_dir>/<task>`
/// (`runs_dir` is the profile setting, default `runs`; E-AOF-02).
pub async fn run_dir(adapter: &Adapter, task: &str) -> Result<PathBuf, CheckError> {
    let shown = adapter.run_show(task).await?;
    let runs = adapter
        .ctx()
        .setting(&aof::RUNS_DIR)?
        .unwrap_or_else(|| "runs".to_owned());
    let expected = format!("{}/{task}", runs.trim_end_matches('/'));
    let dir = shown.get("dir").and_then(Value::as_str);
    if dir.map(|d| d.trim_end_matches('/')) != Some(expected.as_str()) {
        return Err(Failure::new(
            "run artifacts live in the runs directory",
            format!("`run show` reports dir {expected}"),
        )
        .actual(format!("dir: {}", shown.get("dir").unwrap_or(&Value::Null)))
        .into());
    }
    Ok(adapter.data_dir().join(expected))
}

/// `<run dir>/run_result.json` read from disk, which must exist.
pub async fn run_result_on_disk(adapter: &Adapter, task: &str) -> Result<Value, CheckError> {
    let path = run_dir(adapter, task).await?.join("run_result.json");
    disk::read_json(&path)?.ok_or_else(|| {
        Failure::new(
            "run_result.json is written",
            format!("{} exists", path.display()),
        )
        .actual("no such file")
        .into()
    })
}

/// Fails when `run_result.json` of `task` exists.
pub async fn no_run_result(adapter: &Adapter, task: &str) -> Result<(), CheckError> {
    let path = run_dir(adapter, task).await?.join("run_result.json");
    if path.exists() {
        return Err(Failure::new(
            "no run_result.json is written",
            format!("no file {}", path.display()),
        )
        .actual(format!(
            "it exists: {}",
            std::fs::read_to_string(&path).unwrap_or_default()
        ))
        .into());
    }
    Ok(())
}

/// Every way `value` breaks the RunResult schema (empty when it conforms).
pub fn run_result_problems(value: &Value) -> Vec<String> {
    let mut problems = Vec::new();
    let Some(object) = value.as_object() else {
        return vec!["not a JSON object".to_owned()];
    };
    let string = |key: &str, problems: &mut Vec<String>| match object.get(key) {
        Some(Value::String(_)) => {}
        Some(other) => problems.push(format!("{key} is not a string: {other}")),
        None => problems.push(format!("{key} is missing")),
    };
    for key in ["agentId", "summaryRef", "handoffRef", "notes"] {
        string(key, &mut problems);
    }
    match object.get("taskId").and_then(Value::as_str) {
        Some(id) if is_task_id(id) => {}
        other => problems.push(format!("taskId is not a TASK-YYYY-MM-DD-NNN id: {other:?}")),
    }
    match object.get("completedAt").and_then(Value::as_str) {
        Some(at) if is_utc_timestamp(at) => {}
        other => problems.push(format!(
            "completedAt is not an ISO 8601 UTC time: {other:?}"
        )),
    }
    match object.get("outcome").and_then(Value::as_str) {
        Some(outcome) if OUTCOMES.contains(&outcome) => {}
        other => problems.push(format!("outcome is not one of {OUTCOMES:?}: {other:?}")),
    }
    for key in ["deliverables", "blockers"] {
        let ok = object
            .get(key)
            .and_then(Value::as_array)
            .is_some_and(|items| items.iter().all(Value::is_string));
        if !ok {
            problems.push(format!("{key} is not an array of strings"));
        }
    }
    let tests = object.get("tests");
    for key in ["total", "passed", "failed"] {
        if tests
            .and_then(|t| t.get(key))
            .and_then(Value::as_u64)
            .is_none()
        {
            problems.push(format!("tests.{key} is not a non-negative integer"));
        }
    }
    problems
}

/// Whether `id` matches `^TASK-\d{4}-\d{2}-\d{2}-\d{3}$`.
pub fn is_task_id(id: &str) -> bool {
    let Some(rest) = id.strip_prefix("TASK-") else {
        return false;
    };
    let parts: Vec<&str> = rest.split('-').collect();
    parts.len() == 4
        && [4, 2, 2, 3]
            .iter()
            .zip(&parts)
            .all(|(len, part)| part.len() == *len && part.bytes().all(|b| b.is_ascii_digit()))
}

/// Whether `text` is an ISO 8601 UTC date-time with a `Z` suffix (E-AOF-21).
pub fn is_utc_timestamp(text: &str) -> bool {
    let Some(text) = text.strip_suffix('Z') else {
        return false;
    };
    let format = time::format_description::well_known::Iso8601::DEFAULT;
    time::PrimitiveDateTime::parse(text, &format).is_ok()
}
