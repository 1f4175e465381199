//! What `ski aof` must never lose or duplicate: a task whose `task.created` event cannot be written
//! is not created (a retry does not make a second task), and one batch line that is not UTF-8 is
//! refused on its own while the lines after it are still answered.

mod aof_support;

use std::fs;
use std::io::Write;
use std::path::Path;
use std::process::Stdio;

use aof_support::{NOW, events, ski};
use serde_json::{Value, json};
use ski_mocks::testing::tree;

/// `ski aof task create` in `data` at `now`, with `extra` arguments.
fn create(data: &Path, now: &str, extra: &[&str]) -> std::process::Output {
    let data = data.to_str().expect("utf-8 path");
    ski()
        .args([
            "aof",
            "task",
            "create",
            "--data-dir",
            data,
            "--now",
            now,
            "--title",
            "Parser",
        ])
        .args(extra)
        .stdin(Stdio::null())
        .output()
        .expect("ski aof task create runs")
}

/// The files under `data/tasks`, temp files included.
fn task_tree(data: &Path) -> Vec<String> {
    tree(&data.join("tasks"))
}

#[test]
fn a_task_whose_event_cannot_be_written_is_not_created_and_a_retry_makes_exactly_one() {
    for fixed_id in [Some("TASK-2026-02-09-001"), None] {
        let dir = tempfile::tempdir().expect("temp dir");
        let data = dir.path().join("data");
        let extra: Vec<&str> = fixed_id.map(|id| vec!["--id", id]).unwrap_or_default();
        // A task of the day before, and this day's event file cannot be written: a directory
        // stands where it belongs (a failure that holds for root too).
        let laid_out = create(&data, "2026-02-08T10:00:00.000Z", &[]);
        assert!(laid_out.status.success(), "{laid_out:?}");
        let before = task_tree(&data);
        let day_file = data.join("events/2026-02-09.jsonl");
        fs::create_dir(&day_file).expect("a directory where the event file belongs");

        let failed = create(&data, NOW, &extra);
        assert_eq!(
            failed.status.code(),
            Some(5),
            "the failed event log is an internal failure: {failed:?}"
        );
        assert_eq!(
            task_tree(&data),
            before,
            "{fixed_id:?}: a task was left behind without its task.created event"
        );

        fs::remove_dir(&day_file).expect("the event log is writable again");
        let retried = create(&data, NOW, &extra);
        assert!(retried.status.success(), "{retried:?}");
        let printed: Value = serde_json::from_slice(&retried.stdout).expect("JSON");
        assert_eq!(printed["id"], "TASK-2026-02-09-001", "{printed}");
        let tasks: Vec<String> = task_tree(&data)
            .into_iter()
            .filter(|path| path.ends_with(".md"))
            .collect();
        assert_eq!(
            tasks,
            [
                "backlog/TASK-2026-02-08-001.md",
                "backlog/TASK-2026-02-09-001.md"
            ],
            "{fixed_id:?}: the retry made one task, not a second"
        );
        let created: Vec<Value> = events(&data)
            .into_iter()
            .filter(|event| event["type"] == "task.created")
            .map(|event| event["taskId"].clone())
            .collect();
        assert_eq!(
            created,
            [json!("TASK-2026-02-08-001"), json!("TASK-2026-02-09-001")],
            "{fixed_id:?}: one task.created event per task"
        );
    }
}

#[test]
fn a_batch_line_that_is_not_utf8_is_refused_and_the_next_lines_are_answered() {
    let resolve = br#"{"args": ["resolve", "--status", "in-progress", "--outcome", "done"]}"#;
    let mut input = Vec::new();
    input.extend_from_slice(resolve);
    input.push(b'\n');
    input.extend_from_slice(b"{\"args\": [\"resolve\", \"--status\", \"\xff\xfe\"]}\n");
    input.extend_from_slice(resolve);
    input.push(b'\n');
    let mut child = ski()
        .args(["aof", "batch"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("ski aof batch starts");
    let mut stdin = child.stdin.take().expect("stdin");
    stdin.write_all(&input).expect("the batch is written");
    drop(stdin);
    let output = child.wait_with_output().expect("ski aof batch ends");
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    let answers: Vec<Value> = String::from_utf8(output.stdout)
        .expect("UTF-8 answers")
        .lines()
        .map(|line| serde_json::from_str(line).expect("one JSON answer per line"))
        .collect();
    let codes: Vec<u64> = answers
        .iter()
        .map(|a| a["code"].as_u64().unwrap_or(99))
        .collect();
    assert_eq!(codes, [0, 2, 0], "{answers:#?}");
    assert!(
        answers[1]["stderr"]
            .as_str()
            .unwrap_or("")
            .contains("UTF-8"),
        "{answers:#?}"
    );
    assert_eq!(answers[2]["stdout"], answers[0]["stdout"]);
}
