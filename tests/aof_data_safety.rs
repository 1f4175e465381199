//! What `ski aof` must never lose or duplicate: a task whose `task.created` event cannot be written
//! is not created (a retry does not make a second task); a transition whose `task.transitioned`
//! event cannot be written, or whose move into the new status directory fails, does not happen
//! (readers keep seeing the old status, and a retry makes one transition with one event); and one
//! batch line that is not UTF-8 is refused on its own while the lines after it are still answered;
//! the temp files of run-artifact writers killed mid-write are swept by the next open, and nothing
//! else in the run directories is.

use crate::aof_support;

use std::fs;
use std::io::Write;
use std::path::Path;
use std::process::Stdio;

use aof_support::{NOW, events, ski};
use rstest::rstest;
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

/// `ski aof <args>` in `data` at `now`, with `stdin`.
fn aof(data: &Path, now: &str, args: &[&str], stdin: &str) -> std::process::Output {
    let data = data.to_str().expect("utf-8 path");
    let mut child = ski()
        .arg("aof")
        .args(args)
        .args(["--data-dir", data, "--now", now])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("ski aof runs");
    let mut input = child.stdin.take().expect("stdin");
    input.write_all(stdin.as_bytes()).expect("stdin is written");
    drop(input);
    child.wait_with_output().expect("ski aof ends")
}

/// The status `ski aof task show` reports for `id`.
fn shown_status(data: &Path, id: &str) -> Value {
    let shown = aof(data, NOW, &["task", "show", id], "");
    assert!(shown.status.success(), "{shown:?}");
    let task: Value = serde_json::from_slice(&shown.stdout).expect("JSON");
    task["status"].clone()
}

/// Task, from and to of every `task.transitioned` event.
fn transitions(data: &Path) -> Vec<(Value, Value, Value)> {
    events(data)
        .into_iter()
        .filter(|event| event["type"] == "task.transitioned")
        .map(|event| {
            let payload = &event["payload"];
            (
                event["taskId"].clone(),
                payload["from"].clone(),
                payload["to"].clone(),
            )
        })
        .collect()
}

/// The day before [`NOW`]: set-up happens then, so that only [`NOW`]'s event file is broken.
const DAY_BEFORE: &str = "2026-02-08T10:00:00.000Z";
const TASK: &str = "TASK-2026-02-08-001";

/// A data dir with one task of [`DAY_BEFORE`] in `status`.
fn one_task(status: &str) -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().expect("temp dir");
    let data = dir.path().join("data");
    let created = create(&data, DAY_BEFORE, &["--status", status]);
    assert!(created.status.success(), "{created:?}");
    (dir, data)
}

/// Makes [`NOW`]'s event file impossible to write (a directory where it belongs, a failure that
/// holds for root too); returns its path, to be removed again.
fn break_the_event_log(data: &Path) -> std::path::PathBuf {
    let day_file = data.join("events/2026-02-09.jsonl");
    fs::create_dir(&day_file).expect("a directory where the event file belongs");
    day_file
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

#[test]
fn a_transition_whose_event_cannot_be_written_does_not_happen_and_a_retry_makes_exactly_one() {
    let (_dir, data) = one_task("backlog");
    let before = task_tree(&data);
    let day_file = break_the_event_log(&data);

    let failed = aof(&data, NOW, &["task", "transition", TASK, "ready"], "");
    assert_eq!(
        failed.status.code(),
        Some(5),
        "the failed event log is an internal failure: {failed:?}"
    );
    assert_eq!(
        task_tree(&data),
        before,
        "the transition happened without its task.transitioned event"
    );
    assert_eq!(shown_status(&data, TASK), "backlog");

    fs::remove_dir(&day_file).expect("the event log is writable again");
    let retried = aof(&data, NOW, &["task", "transition", TASK, "ready"], "");
    assert!(retried.status.success(), "{retried:?}");
    assert_eq!(shown_status(&data, TASK), "ready");
    assert_eq!(
        transitions(&data),
        [(json!(TASK), json!("backlog"), json!("ready"))],
        "one transition, one event"
    );
}

#[test]
fn a_session_end_whose_event_cannot_be_written_applies_nothing_and_a_retry_applies_it_once() {
    // session-end applies a run result through the router's completion steps with no event
    // before them, so the transition's own event is the first write that fails.
    let (_dir, data) = one_task("in-progress");
    let result = json!({
        "taskId": TASK, "agentId": "swe-backend", "completedAt": DAY_BEFORE,
        "outcome": "partial", "summaryRef": "outputs/summary.md",
        "handoffRef": "outputs/handoff.md", "tests": { "total": 1, "passed": 1, "failed": 0 },
        "blockers": [], "notes": "half of it",
    });
    let written = aof(
        &data,
        DAY_BEFORE,
        &["run", "result", "--task", TASK],
        &result.to_string(),
    );
    assert!(written.status.success(), "{written:?}");
    let before = task_tree(&data);
    let day_file = break_the_event_log(&data);

    let failed = aof(&data, NOW, &["session-end"], "");
    assert_eq!(failed.status.code(), Some(5), "{failed:?}");
    assert_eq!(
        task_tree(&data),
        before,
        "the completion's transition happened without its event"
    );
    assert_eq!(shown_status(&data, TASK), "in-progress");

    fs::remove_dir(&day_file).expect("the event log is writable again");
    let retried = aof(&data, NOW, &["session-end"], "");
    assert!(retried.status.success(), "{retried:?}");
    assert_eq!(shown_status(&data, TASK), "review");
    assert_eq!(
        transitions(&data),
        [(json!(TASK), json!("in-progress"), json!("review"))],
        "one transition, one event"
    );
}

#[rstest]
#[case::the_file_cannot_move("TASK-2026-02-08-001.md")]
#[case::the_companion_directory_cannot_move("TASK-2026-02-08-001")]
fn a_transition_whose_move_fails_is_reported_as_not_done_and_readers_agree(#[case] name: &str) {
    let (_dir, data) = one_task("backlog");
    // A directory that is not empty stands in the way of the move into ready/ (a failure that
    // holds for root too).
    let obstacle = data.join("tasks/ready").join(name);
    fs::create_dir(&obstacle).expect("an obstacle in ready/");
    fs::write(obstacle.join("stray"), "").expect("the obstacle is not empty");

    let failed = aof(&data, NOW, &["task", "transition", TASK, "ready"], "");
    assert_eq!(failed.status.code(), Some(5), "{failed:?}");
    assert_eq!(
        shown_status(&data, TASK),
        "backlog",
        "the transition was reported as failed, but readers see it done"
    );
    let listed = aof(&data, NOW, &["task", "list"], "");
    let listed: Value = serde_json::from_slice(&listed.stdout).expect("JSON");
    assert_eq!(listed["tasks"][0]["status"], "backlog", "{listed}");
    assert_eq!(
        transitions(&data),
        [],
        "an event of a transition that failed"
    );
    assert!(
        data.join("tasks/backlog")
            .join(TASK)
            .join("inputs")
            .is_dir(),
        "the companion directory stays with the task"
    );

    fs::remove_dir_all(&obstacle).expect("the obstacle is removed");
    let retried = aof(&data, NOW, &["task", "transition", TASK, "ready"], "");
    assert!(retried.status.success(), "{retried:?}");
    assert_eq!(shown_status(&data, TASK), "ready");
    assert_eq!(
        transitions(&data),
        [(json!(TASK), json!("backlog"), json!("ready"))],
        "one transition, one event"
    );
}

/// A process id no process ever has (above Linux's largest `pid_max`).
const DEAD_PID: i32 = i32::MAX;

#[test]
fn the_next_open_sweeps_the_run_temporaries_of_killed_writers_and_only_those() {
    let (_dir, data) = one_task("ready");
    let runs = data.join("runs");
    let run_dir = runs.join(TASK);
    fs::create_dir_all(&run_dir).expect("run dir");
    let live = std::process::id();
    let left_by_killed_writers = [
        format!(".tmp-run.json.{DEAD_PID}.0"),
        format!(".tmp-run_heartbeat.json.{DEAD_PID}.3"),
        format!(".tmp-run_result.json.{DEAD_PID}.12"),
    ];
    let kept = [
        "run.json".to_owned(),
        "run_result.json".to_owned(),
        format!(".tmp-run.json.{live}.0"),
        format!(".tmp-notes.md.{DEAD_PID}.0"),
        format!(".tmp-run.json.{DEAD_PID}.draft"),
        ".tmp-run.json".to_owned(),
        "my-notes.txt".to_owned(),
    ];
    for name in left_by_killed_writers.iter().chain(&kept) {
        fs::write(run_dir.join(name), "{}\n").expect("file");
    }
    let not_a_run = runs.join("scratch");
    fs::create_dir_all(&not_a_run).expect("scratch dir");
    let foreign = format!(".tmp-run.json.{DEAD_PID}.0");
    fs::write(not_a_run.join(&foreign), "mine").expect("file");

    let shown = aof(&data, NOW, &["task", "show", TASK], "");
    assert!(shown.status.success(), "{shown:?}");

    let mut left: Vec<String> = fs::read_dir(&run_dir)
        .expect("run dir")
        .flatten()
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    let mut expected = kept.to_vec();
    expected.sort();
    assert_eq!(
        left, expected,
        "only the killed writers' temporaries are gone"
    );
    assert!(
        not_a_run.join(&foreign).exists(),
        "a directory not named by a task id is left alone"
    );
}
