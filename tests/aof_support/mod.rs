//! Shared helpers of the AOF integration tests: the one place that starts `ski`, message builders
//! and the on-disk consistency check.

use std::collections::BTreeMap;
use std::fs;
use std::io::Write;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};

use serde_json::{Value, json};
use ski::aof::run::{RunArtifact, RunHeartbeat, RunResult};
use ski::aof::store::{NewTask, TaskStore};
use ski::aof::task::{Task, TaskStatus};
use ski::aof::task_id::TaskId;
use ski::aof::timestamp::Timestamp;

/// The fixed time the tests run at.
pub const NOW: &str = "2026-02-09T21:05:00.000Z";

/// A `ski` command for the built binary; every process the tests start comes from here.
pub fn ski() -> Command {
    let mut command = Command::new(assert_cmd::cargo::cargo_bin!("ski"));
    command.env_remove("SKI_AOF_DATA_DIR");
    command
}

/// Runs `ski` with `args` and `stdin`, waiting for it.
pub fn run_ski(args: &[&str], stdin: &str) -> Output {
    child_output(spawn_ski(args, stdin))
}

/// Starts `ski` with `args`, writes `stdin` and closes it.
pub fn spawn_ski(args: &[&str], stdin: &str) -> Child {
    let mut child = ski()
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the ski binary starts");
    if let Some(mut input) = child.stdin.take() {
        // A child killed early closes the pipe; that is part of what the tests provoke.
        let _ = input.write_all(stdin.as_bytes());
    }
    child
}

/// Waits for a child while draining its output, so a full pipe cannot stall it.
pub fn child_output(child: Child) -> Output {
    child.wait_with_output().expect("wait for ski")
}

/// An envelope as one JSON line.
pub fn envelope(kind: &str, task: &str, from: &str, payload: Value) -> String {
    json!({
        "protocol": "aof",
        "version": 1,
        "projectId": "test-project",
        "type": kind,
        "taskId": task,
        "fromAgent": from,
        "toAgent": "swe-qa",
        "sentAt": "2026-02-09T21:01:00.000Z",
        "payload": payload,
    })
    .to_string()
}

/// Creates a task directly through the library.
pub fn create_task(data: &Path, id: &str, status: TaskStatus, metadata: Value) -> Task {
    let store = TaskStore::open(data).expect("open store");
    let mut new = NewTask::new(format!("Task {id}"));
    new.id = Some(TaskId::parse(id).expect("valid id"));
    new.status = status;
    new.project = "test-project".into();
    if let Value::Object(map) = metadata {
        new.metadata = map.into_iter().collect::<BTreeMap<_, _>>();
    }
    new.body = format!("# Task {id}\n\nDo the work.");
    store
        .create(new, Timestamp::parse(NOW).expect("valid now"))
        .expect("create task")
}

/// What the consistency check saw.
#[derive(Debug, Default)]
pub struct DiskSummary {
    /// Task files, by id: the status directories they were found in.
    pub tasks: BTreeMap<String, Vec<String>>,
    /// Run artifacts checked.
    pub run_files: usize,
    /// Event lines checked.
    pub event_lines: usize,
    /// Event lines a killed writer left unfinished (the start of a JSON object).
    pub torn_event_lines: usize,
}

/// Reads every task file, run artifact, handoff artifact and event line under `data`; returns
/// the first file that is torn or does not parse.
pub fn check_disk(data: &Path) -> Result<DiskSummary, String> {
    let mut summary = DiskSummary::default();
    let visible = |path: &Path| {
        path.file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| !n.starts_with('.'))
    };
    let tasks = data.join("tasks");
    for status in TaskStatus::ALL {
        let dir = tasks.join(status.as_str());
        let Ok(entries) = fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if !visible(&path) {
                continue;
            }
            if path.extension().is_some_and(|e| e == "md") {
                let text = fs::read_to_string(&path).map_err(|e| format!("{path:?}: {e}"))?;
                let task = Task::parse(&text).map_err(|e| format!("{path:?}: {e}\n{text}"))?;
                summary
                    .tasks
                    .entry(task.id().to_string())
                    .or_default()
                    .push(status.as_str().to_owned());
            } else if path.is_dir() {
                let inputs = path.join("inputs");
                let handoff = inputs.join("handoff.json");
                if handoff.exists() {
                    let text =
                        fs::read_to_string(&handoff).map_err(|e| format!("{handoff:?}: {e}"))?;
                    serde_json::from_str::<Value>(&text)
                        .map_err(|e| format!("{handoff:?}: {e}\n{text}"))?;
                }
                let md = inputs.join("handoff.md");
                if md.exists() {
                    let text = fs::read_to_string(&md).map_err(|e| format!("{md:?}: {e}"))?;
                    if !text.starts_with("# Handoff Request\n") || !text.contains("## Constraints")
                    {
                        return Err(format!("{md:?} is incomplete:\n{text}"));
                    }
                }
            }
        }
    }
    if let Ok(run_dirs) = fs::read_dir(data.join("runs")) {
        for run_dir in run_dirs.flatten() {
            for entry in fs::read_dir(run_dir.path()).into_iter().flatten().flatten() {
                let path = entry.path();
                if !visible(&path) {
                    continue;
                }
                let text = fs::read_to_string(&path).map_err(|e| format!("{path:?}: {e}"))?;
                let value: Value =
                    serde_json::from_str(&text).map_err(|e| format!("{path:?}: {e}\n{text}"))?;
                let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
                let checked = match name {
                    "run_result.json" => RunResult::from_value(&value).map(|_| ()),
                    "run.json" => RunArtifact::from_value(&value).map(|_| ()),
                    "run_heartbeat.json" => RunHeartbeat::from_value(&value).map(|_| ()),
                    _ => Ok(()),
                };
                checked.map_err(|issues| format!("{path:?}: {issues:?}"))?;
                summary.run_files += 1;
            }
        }
    }
    if let Ok(entries) = fs::read_dir(data.join("events")) {
        for entry in entries.flatten() {
            let path = entry.path();
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
            if !visible(&path) || name == "events.jsonl" || !name.ends_with(".jsonl") {
                continue;
            }
            let text = fs::read_to_string(&path).map_err(|e| format!("{path:?}: {e}"))?;
            for (index, line) in text.lines().enumerate() {
                match serde_json::from_str::<Value>(line) {
                    Ok(_) => summary.event_lines += 1,
                    // A write cut short by SIGKILL leaves the start of a line, which readers skip
                    // and the next append closes (`aof::event`): the start of valid JSON is
                    // allowed, anything else is not.
                    Err(error) if error.is_eof() => summary.torn_event_lines += 1,
                    Err(error) => {
                        return Err(format!("{path:?} line {}: {error}: {line}", index + 1));
                    }
                }
            }
        }
    }
    Ok(summary)
}

/// Every event of a data dir, through the CLI.
pub fn events(data: &Path) -> Vec<Value> {
    let output = run_ski(
        &["aof", "events", "--data-dir", &data.to_string_lossy()],
        "",
    );
    assert!(output.status.success(), "ski aof events failed: {output:?}");
    serde_json::from_slice::<Vec<Value>>(&output.stdout).expect("events are a JSON array")
}
