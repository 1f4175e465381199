//! Reliability of `ski aof route` against crashes and concurrency.
//!
//! 1. `ski aof route` is killed with SIGKILL at seeded random points in at least 200 runs; after
//!    every kill each task file, run artifact, handoff artifact and event line must parse and every
//!    task must exist exactly once.
//! 2. Two processes route 100 status updates each to one task at the same time; all 200 Work Log
//!    entries and events must be there.
//!
//! Set `SKI_AOF_KILL_SEED` to replay another sequence of kill points.

use crate::aof_support;

use std::collections::BTreeSet;
use std::path::Path;
use std::thread;
use std::time::{Duration, Instant};

use aof_support::{
    NOW, check_disk, child_output, create_task, envelope, events, run_ski, spawn_ski,
};
use serde_json::{Value, json};
use ski::aof::store::TaskStore;
use ski::aof::task::TaskStatus;
use ski::aof::task_id::TaskId;

const PARENT: &str = "TASK-2026-02-09-001";
const WORKER: &str = "TASK-2026-02-09-002";
const CHILD: &str = "TASK-2026-02-09-003";
const KILL_RUNS: usize = 200;

/// A small deterministic generator (splitmix64) for the kill points.
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, bound: u64) -> u64 {
        if bound == 0 { 0 } else { self.next() % bound }
    }
}

/// The messages the crash test cycles through: every handler and every kind of write.
fn message_cycle() -> Vec<String> {
    let status = |fields: Value| {
        let mut payload = json!({ "taskId": WORKER, "agentId": "swe-backend" });
        if let (Some(map), Value::Object(extra)) = (payload.as_object_mut(), fields) {
            map.extend(extra);
        }
        envelope("status.update", WORKER, "swe-backend", payload)
    };
    vec![
        status(json!({ "status": "blocked", "blockers": ["Waiting on dependency"] })),
        status(json!({ "status": "ready", "notes": "unblocked" })),
        status(json!({ "status": "in-progress", "progress": "picked up again" })),
        status(json!({ "progress": "75% complete, on track", "notes": "fine" })),
        envelope(
            "completion.report",
            WORKER,
            "swe-backend",
            json!({
                "outcome": "partial",
                "summaryRef": "outputs/summary.md",
                "deliverables": ["src/foo.ts"],
                "tests": { "total": 10, "passed": 8, "failed": 2 },
                "blockers": [],
                "notes": "50% complete, needs more time",
            }),
        ),
        status(json!({ "status": "in-progress", "notes": "back to work" })),
        envelope(
            "handoff.request",
            CHILD,
            "swe-backend",
            json!({
                "taskId": CHILD,
                "parentTaskId": PARENT,
                "fromAgent": "swe-backend",
                "toAgent": "swe-qa",
                "acceptanceCriteria": ["All tests pass", "Docs updated"],
                "expectedOutputs": ["tests/report.md"],
                "contextRefs": ["tasks/in-progress/TASK-2026-02-09-001.md"],
                "constraints": ["No new dependencies"],
                "dueBy": "2026-02-11T12:00:00.000Z",
            }),
        ),
        envelope(
            "handoff.rejected",
            CHILD,
            "swe-qa",
            json!({ "taskId": CHILD, "accepted": false, "reason": "Insufficient context" }),
        ),
    ]
}

fn route_args(data: &Path) -> Vec<String> {
    vec![
        "aof".into(),
        "route".into(),
        "--data-dir".into(),
        data.to_string_lossy().into_owned(),
        "--now".into(),
        NOW.into(),
    ]
}

fn assert_each_task_once(data: &Path, context: &str) {
    let summary = check_disk(data).unwrap_or_else(|error| panic!("{context}: {error}"));
    for id in [PARENT, WORKER, CHILD] {
        let places = summary.tasks.get(id).cloned().unwrap_or_default();
        assert_eq!(
            places.len(),
            1,
            "{context}: task {id} must exist exactly once, found in {places:?}"
        );
    }
}

/// Temp files under the task directories, companion `inputs/` directories and run directories.
fn temp_files(data: &Path) -> Vec<std::path::PathBuf> {
    let mut dirs = Vec::new();
    for status in TaskStatus::ALL {
        let dir = data.join("tasks").join(status.as_str());
        dirs.push(dir.clone());
        for id in [PARENT, WORKER, CHILD] {
            dirs.push(dir.join(id).join("inputs"));
        }
    }
    for id in [PARENT, WORKER, CHILD] {
        dirs.push(data.join("runs").join(id));
    }
    dirs.iter()
        .filter_map(|dir| std::fs::read_dir(dir).ok())
        .flat_map(|entries| entries.flatten())
        .map(|entry| entry.path())
        .filter(|path| {
            path.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(".tmp-"))
        })
        .collect()
}

#[test]
fn sigkill_at_random_points_never_leaves_a_torn_file() {
    let seed = std::env::var("SKI_AOF_KILL_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5EED_A0F1_u64);
    let dir = tempfile::tempdir().expect("temp dir");
    let data = dir.path().join("data");
    create_task(
        &data,
        PARENT,
        TaskStatus::InProgress,
        json!({ "delegationDepth": 0 }),
    );
    create_task(&data, WORKER, TaskStatus::InProgress, json!({}));
    create_task(&data, CHILD, TaskStatus::InProgress, json!({}));
    let args = route_args(&data);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let messages = message_cycle();

    // Calibrate the kill window on this machine: the slowest of a few complete runs.
    let mut longest = Duration::ZERO;
    for message in messages.iter().take(4) {
        let started = Instant::now();
        let output = run_ski(&args, message);
        longest = longest.max(started.elapsed());
        assert!(
            output.status.success(),
            "calibration run failed: {output:?}"
        );
    }
    let window_us = u64::try_from(longest.as_micros())
        .unwrap_or(u64::MAX)
        .max(1000)
        * 5
        / 4;

    let started = Instant::now();
    let mut rng = SplitMix(seed);
    let mut killed = 0;
    for run in 0..KILL_RUNS {
        let message = &messages[run % messages.len()];
        let delay = Duration::from_micros(rng.below(window_us));
        let mut child = spawn_ski(&args, message);
        // The pause is the random kill point, not a wait for readiness.
        thread::sleep(delay);
        if child.try_wait().expect("poll child").is_none() {
            killed += 1;
        }
        let _ = child.kill();
        let output = child_output(child);
        assert_ne!(
            output.status.code(),
            Some(5),
            "run {run} (seed {seed:#x}) failed inside: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        assert_each_task_once(
            &data,
            &format!("after run {run} killed at {delay:?} (seed {seed:#x})"),
        );
    }
    let elapsed = started.elapsed();
    eprintln!(
        "sigkill: {KILL_RUNS} runs, {killed} killed mid-run, window {window_us} us, seed {seed:#x}, {elapsed:?}"
    );
    assert!(
        killed >= KILL_RUNS / 10,
        "only {killed} of {KILL_RUNS} runs were killed before they finished; the kill window \
         ({window_us} us) is too short to test anything"
    );

    // Interrupted moves are finished by the next locked access: afterwards every task file
    // sits in its status directory with its companion directory beside it.
    for message in &messages {
        let output = run_ski(&args, message);
        assert!(
            output.status.code() == Some(0) || output.status.code() == Some(2),
            "a run after the kills failed: {output:?}"
        );
    }
    assert_each_task_once(&data, "after the final runs");
    let leftovers = temp_files(&data);
    assert!(
        leftovers.is_empty(),
        "temp files of killed processes must be swept by later writes: {leftovers:?}"
    );
    let store = TaskStore::open(&data).expect("open store");
    for id in [PARENT, WORKER, CHILD] {
        let id = TaskId::parse(id).expect("valid id");
        let task = store.read(&id).expect("read").expect("task exists");
        let file = store.file_path(task.status(), &id);
        assert!(
            file.is_file(),
            "{id} is not in its status directory {file:?}"
        );
    }
    let all = events(&data);
    let ids: Vec<u64> = all.iter().filter_map(|e| e["eventId"].as_u64()).collect();
    let unique: BTreeSet<u64> = ids.iter().copied().collect();
    assert_eq!(ids.len(), unique.len(), "event ids must be unique");
}

#[test]
fn two_processes_routing_100_updates_each_lose_none() {
    const PER_WRITER: usize = 100;
    let dir = tempfile::tempdir().expect("temp dir");
    let data = dir.path().join("data");
    create_task(&data, WORKER, TaskStatus::InProgress, json!({}));
    let started = Instant::now();
    let writers: Vec<_> = ["a", "b"]
        .into_iter()
        .map(|writer| {
            let data = data.clone();
            thread::spawn(move || {
                let args = route_args(&data);
                let args: Vec<&str> = args.iter().map(String::as_str).collect();
                for index in 0..PER_WRITER {
                    let message = envelope(
                        "status.update",
                        WORKER,
                        "swe-backend",
                        json!({
                            "taskId": WORKER,
                            "agentId": "swe-backend",
                            "notes": format!("update {writer}-{index:03}"),
                        }),
                    );
                    let output = run_ski(&args, &message);
                    assert!(
                        output.status.success(),
                        "writer {writer} update {index} failed: {}",
                        String::from_utf8_lossy(&output.stderr)
                    );
                }
            })
        })
        .collect();
    for writer in writers {
        writer.join().expect("writer thread");
    }
    let elapsed = started.elapsed();
    eprintln!("concurrent: {} updates in {elapsed:?}", 2 * PER_WRITER);

    let store = TaskStore::open(&data).expect("open store");
    let task = store
        .read(&TaskId::parse(WORKER).expect("valid id"))
        .expect("read")
        .expect("task exists");
    let log = task.work_log();
    let expected: BTreeSet<String> = ["a", "b"]
        .iter()
        .flat_map(|w| (0..PER_WRITER).map(move |i| format!("Notes: update {w}-{i:03}")))
        .collect();
    let found: BTreeSet<String> = log
        .iter()
        .filter_map(|line| line.split_once("Z ").map(|(_, rest)| rest.to_owned()))
        .collect();
    assert_eq!(
        log.len(),
        2 * PER_WRITER,
        "every update must leave one Work Log line"
    );
    assert_eq!(found, expected, "no update may be lost or duplicated");
    assert_eq!(task.status(), TaskStatus::InProgress);

    let all = events(&data);
    let count = |kind: &str| all.iter().filter(|e| e["type"] == kind).count();
    assert_eq!(count("protocol.message.received"), 2 * PER_WRITER);
    assert_eq!(count("task.updated"), 2 * PER_WRITER);
    let ids: Vec<u64> = all.iter().filter_map(|e| e["eventId"].as_u64()).collect();
    let expected_ids: Vec<u64> = (1..=ids.len() as u64).collect();
    assert_eq!(
        ids, expected_ids,
        "event ids must be unique and gapless across processes"
    );
}
