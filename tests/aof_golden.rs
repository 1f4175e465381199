//! Golden AOF/1 fixtures: every file under `golden/aof/<kind>/{valid,invalid}/` is validated as
//! `<kind>`, must be valid or invalid as its directory says, must re-encode to a fixed point, and
//! its validation report is pinned by an insta snapshot in `golden/aof/snapshots/`. The files under
//! `golden/aof/message/` are raw inputs whose parse result is pinned the same way.
//!
//! After an intended change: `cargo insta review` (CI never writes snapshots).

use std::fs;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use ski::aof::cli::validation_report;
use ski::aof::message::{Parsed, parse_input};
use ski::aof::task::Task;

fn golden_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("golden/aof")
}

const SNAPSHOTS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/golden/aof/snapshots");

/// Pins `value` as `golden/aof/snapshots/<name>.snap`.
fn pin(name: &str, value: &Value) {
    insta::with_settings!({ snapshot_path => SNAPSHOTS, prepend_module_to_snapshot => false, omit_expression => true, sort_maps => true }, {
        insta::assert_json_snapshot!(name, value);
    });
}

/// The fixtures of one kind: (case name, expected validity, path).
fn cases(kind: &str) -> Vec<(String, bool, PathBuf)> {
    let mut out = Vec::new();
    for (verdict, valid) in [("valid", true), ("invalid", false)] {
        let dir = golden_root().join(kind).join(verdict);
        let Ok(entries) = fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let stem = path
                .file_stem()
                .and_then(|s| s.to_str())
                .unwrap_or_default()
                .to_owned();
            out.push((format!("{kind}__{verdict}__{stem}"), valid, path));
        }
    }
    out.sort();
    out
}

const KINDS: [&str; 12] = [
    "envelope",
    "completion-report",
    "status-update",
    "handoff-request",
    "handoff-accepted",
    "handoff-rejected",
    "test-report",
    "run-result",
    "run",
    "heartbeat",
    "task",
    "event",
];

#[test]
fn every_fixture_validates_as_its_directory_says_and_is_pinned() {
    let mut checked = 0;
    for kind in KINDS {
        for (name, expected_valid, path) in cases(kind) {
            let text = fs::read_to_string(&path).expect("fixture readable");
            let report = validation_report(kind, &text).expect("known kind");
            assert_eq!(
                report["valid"],
                json!(expected_valid),
                "{}: expected valid={expected_valid}, report: {report:#}",
                path.display()
            );
            if expected_valid {
                assert_fixed_point(kind, &report, &path);
            } else {
                let errors = report["errors"].as_array().cloned().unwrap_or_default();
                assert!(
                    !errors.is_empty(),
                    "{}: an invalid fixture must report errors",
                    path.display()
                );
            }
            pin(&name, &report);
            checked += 1;
        }
    }
    assert!(
        checked >= 60,
        "only {checked} fixtures found under golden/aof"
    );
}

/// Encoding the decoded value and decoding it again gives the same value.
fn assert_fixed_point(kind: &str, report: &Value, path: &Path) {
    if kind == "task" {
        let text = fs::read_to_string(path).expect("fixture readable");
        let task = Task::parse(&text).expect("valid task");
        let rendered = task.render().expect("renders");
        let again = Task::parse(&rendered).expect("rendered task parses");
        assert_eq!(
            task,
            again,
            "{}: task file does not round-trip",
            path.display()
        );
        return;
    }
    let encoded = report["value"].to_string();
    let again = validation_report(kind, &encoded).expect("known kind");
    assert_eq!(
        again["value"],
        report["value"],
        "{}: the encoded form is not a fixed point",
        path.display()
    );
}

fn describe(parsed: &Parsed) -> Value {
    match parsed {
        Parsed::NotProtocol => json!({ "parsed": "not_protocol" }),
        Parsed::Envelope(envelope, source) => json!({
            "parsed": "envelope",
            "source": source,
            "envelope": envelope.to_value(),
        }),
        Parsed::Rejected(rejection) => json!({ "parsed": "rejected", "rejection": rejection }),
    }
}

#[test]
fn every_message_fixture_parses_as_pinned() {
    let dir = golden_root().join("message");
    let mut paths: Vec<PathBuf> = fs::read_dir(&dir)
        .expect("golden/aof/message exists")
        .flatten()
        .map(|entry| entry.path())
        .collect();
    paths.sort();
    assert!(paths.len() >= 10, "expected at least 10 message fixtures");
    for path in paths {
        let text = fs::read_to_string(&path).expect("fixture readable");
        let stem = path
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or_default();
        let result = describe(&parse_input(&text));
        pin(&format!("message__{stem}"), &result);
    }
}
