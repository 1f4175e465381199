//! The AOF/1 behaviours of `aof-protocols-bdd.md`, driven through the `ski aof` adapter exactly as
//! the conformance suite drives a target: messages in, then the data dir, the printed report and
//! the event log are inspected. Scenario IDs are those of `conformance/catalog/aof.toml`.

use crate::aof_support;

use std::fs;
use std::path::PathBuf;

use aof_support::{NOW, envelope, run_ski};
use rstest::rstest;
use serde_json::{Value, json};

const T1: &str = "TASK-2026-02-09-001";
const T2: &str = "TASK-2026-02-09-002";
const T3: &str = "TASK-2026-02-09-003";
const MISSING: &str = "TASK-2026-02-09-999";

/// One data dir driven through the adapter.
struct Adapter {
    _dir: tempfile::TempDir,
    data: PathBuf,
}

impl Adapter {
    fn new() -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let data = dir.path().join("data");
        Self { _dir: dir, data }
    }

    fn data_arg(&self) -> String {
        self.data.to_string_lossy().into_owned()
    }

    /// Runs `ski aof <args> --data-dir D --now now`; returns the exit code and parsed stdout.
    fn run_at(&self, args: &[&str], stdin: &str, now: &str) -> (i32, Value) {
        let data = self.data_arg();
        let mut full: Vec<&str> = vec!["aof"];
        full.extend_from_slice(args);
        full.extend_from_slice(&["--data-dir", &data, "--now", now]);
        let output = run_ski(&full, stdin);
        let code = output.status.code().unwrap_or(-1);
        let value = serde_json::from_slice(&output.stdout).unwrap_or_else(|_| {
            panic!(
                "ski aof {args:?} printed no JSON (exit {code}): {}{}",
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            )
        });
        (code, value)
    }

    fn run(&self, args: &[&str], stdin: &str) -> (i32, Value) {
        self.run_at(args, stdin, NOW)
    }

    fn create(&self, id: &str, status: &str, extra: &[&str]) {
        let mut args = vec![
            "task", "create", "--title", "A task", "--id", id, "--status", status,
        ];
        args.extend_from_slice(extra);
        let (code, _) = self.run(&args, "");
        assert_eq!(code, 0, "task create {id} failed");
    }

    fn route(&self, message: &str) -> (i32, Value) {
        self.run(&["route"], message)
    }

    fn show(&self, id: &str) -> Value {
        let (code, value) = self.run(&["task", "show", id], "");
        assert_eq!(code, 0, "task show {id} failed");
        value
    }

    fn status(&self, id: &str) -> String {
        self.show(id)["status"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    }

    fn events(&self) -> Vec<Value> {
        let (code, value) = self.run(&["events"], "");
        assert_eq!(code, 0);
        value.as_array().cloned().unwrap_or_default()
    }

    fn events_of(&self, kind: &str) -> Vec<Value> {
        self.events()
            .into_iter()
            .filter(|e| e["type"] == kind)
            .collect()
    }

    fn run_show(&self, id: &str) -> Value {
        self.run(&["run", "show", "--task", id], "").1
    }

    fn companion(&self, id: &str) -> PathBuf {
        self.data.join("tasks").join(self.status(id)).join(id)
    }
}

fn completion(task: &str, outcome: &str, extra: Value) -> String {
    let mut payload = json!({
        "outcome": outcome,
        "summaryRef": "outputs/summary.md",
        "tests": { "total": 10, "passed": 8, "failed": 2 },
        "notes": "50% complete, needs more time",
    });
    merge(&mut payload, extra);
    envelope("completion.report", task, "swe-backend", payload)
}

fn status_update(task: &str, extra: Value) -> String {
    let mut payload = json!({ "taskId": task, "agentId": "swe-backend" });
    merge(&mut payload, extra);
    envelope("status.update", task, "swe-backend", payload)
}

fn handoff(child: &str, parent: &str, extra: Value) -> String {
    let mut payload = json!({
        "taskId": child,
        "parentTaskId": parent,
        "fromAgent": "swe-backend",
        "toAgent": "swe-qa",
        "acceptanceCriteria": ["All tests pass", "Docs updated"],
        "dueBy": "2026-02-11T12:00:00.000Z",
    });
    merge(&mut payload, extra);
    envelope("handoff.request", child, "swe-backend", payload)
}

fn merge(target: &mut Value, extra: Value) {
    if let (Some(map), Value::Object(extra)) = (target.as_object_mut(), extra) {
        map.extend(extra);
    }
}

fn types(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .map(|e| e["type"].as_str().unwrap_or_default().to_owned())
        .collect()
}

#[test]
fn completion_outcomes_write_run_result_and_transition() {
    // AOF-059-01, -02, -03, -05, -06 and AOF-X-01.
    let a = Adapter::new();
    a.create(T1, "in-progress", &[]);
    let (code, report) = a.route(&completion(T1, "done", json!({})));
    assert_eq!(code, 0);
    assert_eq!(a.status(T1), "review");
    assert_eq!(a.run_show(T1)["runResult"]["outcome"], "done");
    assert_eq!(a.run_show(T1)["dir"], format!("runs/{T1}"));
    assert_eq!(
        types(report["events"].as_array().expect("events")),
        [
            "protocol.message.received",
            "protocol.message.warning",
            "task.transitioned",
            "task.completed"
        ]
    );

    a.create(
        T2,
        "in-progress",
        &["--metadata", r#"{"reviewRequired":false}"#],
    );
    let (_, report) = a.route(&completion(T2, "done", json!({})));
    assert_eq!(a.status(T2), "done");
    let transitions = report["transitions"].as_array().expect("transitions");
    assert_eq!(transitions.len(), 2, "review then done: {report:#}");

    a.create(T3, "in-progress", &[]);
    a.route(&completion(
        T3,
        "blocked",
        json!({ "blockers": ["API key needed"] }),
    ));
    assert_eq!(a.status(T3), "blocked");
    let transitioned = a.events_of("task.transitioned");
    let last = transitioned.last().expect("a transition");
    assert!(
        last["payload"]["reason"]
            .as_str()
            .is_some_and(|r| r.contains("API key needed"))
    );

    // Replays rewrite run_result.json and log again without a new transition.
    let before = a.events_of("task.transitioned").len();
    let (code, report) = a.route(&completion(T1, "partial", json!({ "notes": "again" })));
    assert_eq!(code, 0);
    assert_eq!(report["transitions"], json!([]));
    assert_eq!(a.status(T1), "review");
    assert_eq!(a.run_show(T1)["runResult"]["outcome"], "partial");
    assert_eq!(a.events_of("task.transitioned").len(), before);
    assert_eq!(a.events_of("task.completed").len(), 4);
}

#[test]
fn missing_tasks_are_rejected_with_task_not_found() {
    // AOF-058-13, -14, -15 and AOF-060-09.
    let a = Adapter::new();
    a.create(T1, "in-progress", &[]);
    for message in [
        completion(MISSING, "done", json!({})),
        status_update(MISSING, json!({ "status": "blocked" })),
        envelope(
            "handoff.accepted",
            MISSING,
            "swe-qa",
            json!({ "taskId": MISSING, "accepted": true }),
        ),
    ] {
        let (code, report) = a.route(&message);
        assert_eq!(code, 2);
        assert_eq!(report["reason"], "task_not_found");
    }
    let (code, report) = a.route(&handoff(MISSING, T1, json!({})));
    assert_eq!(code, 2);
    assert_eq!(
        types(report["events"].as_array().expect("events")),
        [
            "protocol.message.received",
            "protocol.message.rejected",
            "delegation.rejected"
        ]
    );
    assert_eq!(a.run_show(MISSING)["runResult"], Value::Null);
    assert!(!a.data.join("tasks/in-progress").join(MISSING).exists());
}

#[test]
fn parsing_ignores_chat_and_logs_rejections() {
    // AOF-058-04, -05, -06 and -12.
    let a = Adapter::new();
    a.create(T1, "in-progress", &[]);
    let before = a.events().len();
    let (code, report) = a.route("Hello, this is a chat message");
    assert_eq!((code, report["outcome"].clone()), (0, json!("ignored")));
    assert_eq!(a.events().len(), before, "chat must log nothing");

    let (code, report) = a.route("AOF/1 {invalid json");
    assert_eq!(code, 2);
    assert_eq!(report["events"][0]["payload"]["reason"], "invalid_json");

    let (code, report) = a.route(&json!({ "protocol": "aof", "version": 1 }).to_string());
    assert_eq!(code, 2);
    let payload = &report["events"][0]["payload"];
    assert_eq!(payload["reason"], "invalid_envelope");
    let paths: Vec<&str> = payload["issues"]
        .as_array()
        .expect("issues")
        .iter()
        .filter_map(|i| i["path"].as_str())
        .collect();
    assert!(
        paths.contains(&"taskId") && paths.contains(&"sentAt"),
        "{paths:?}"
    );

    let (code, report) = a.route(&envelope("custom.message", T1, "swe-backend", json!({})));
    assert_eq!((code, report["outcome"].clone()), (0, json!("unknown")));
    assert_eq!(report["events"][0]["type"], "protocol.message.unknown");
    assert_eq!(report["events"][0]["payload"]["type"], "custom.message");
}

#[test]
fn status_updates_transition_or_append_to_one_work_log() {
    // AOF-059-16 to -22.
    let a = Adapter::new();
    a.create(T1, "in-progress", &["--body", "# Task\n\nDo it."]);
    a.route(&status_update(
        T1,
        json!({ "progress": "Initial work started" }),
    ));
    a.route(&status_update(T1, json!({ "notes": "Additional update" })));
    a.route(&status_update(
        T1,
        json!({ "blockers": ["API rate limit", "Test flake"] }),
    ));
    let task = a.show(T1);
    assert_eq!(task["status"], "in-progress");
    let body = task["body"].as_str().expect("body");
    assert_eq!(body.matches("## Work Log").count(), 1, "{body}");
    let log = task["workLog"].as_array().expect("work log");
    assert_eq!(log.len(), 3);
    assert!(
        log[0]
            .as_str()
            .is_some_and(|l| l.contains(NOW) && l.contains("Initial work started"))
    );
    assert!(
        log[2]
            .as_str()
            .is_some_and(|l| l.contains("API rate limit, Test flake"))
    );

    let (_, report) = a.route(&status_update(
        T1,
        json!({ "status": "blocked", "blockers": ["Waiting on dependency"] }),
    ));
    assert_eq!(a.status(T1), "blocked");
    assert_eq!(report["transitions"][0]["reason"], "Waiting on dependency");

    let (_, report) = a.route(&status_update(
        T1,
        json!({ "status": "blocked", "notes": "still blocked" }),
    ));
    assert_eq!(report["transitions"], json!([]));
    assert_eq!(a.show(T1)["workLog"].as_array().map(Vec::len), Some(4));
}

#[test]
fn handoff_writes_artifacts_and_guards_depth() {
    // AOF-060-01 to -06, -10 to -13 and AOF-X-02.
    let a = Adapter::new();
    a.create(
        T1,
        "in-progress",
        &["--metadata", r#"{"delegationDepth":0}"#],
    );
    a.create(T2, "ready", &[]);
    let (code, _) = a.route(&handoff(
        T2,
        T1,
        json!({ "contextRefs": ["tasks/in-progress/TASK-2026-02-09-001.md"] }),
    ));
    assert_eq!(code, 0);
    let inputs = a.companion(T2).join("inputs");
    let written: Value = serde_json::from_str(
        &fs::read_to_string(inputs.join("handoff.json")).expect("handoff.json"),
    )
    .expect("json");
    assert_eq!(
        written["contextRefs"],
        json!(["tasks/in-progress/TASK-2026-02-09-001.md"])
    );
    assert_eq!(written["constraints"], json!([]));
    let md = fs::read_to_string(inputs.join("handoff.md")).expect("handoff.md");
    assert!(md.contains("- All tests pass") && md.contains("## Constraints\n\nNone"));
    assert_eq!(a.show(T2)["frontmatter"]["metadata"]["delegationDepth"], 1);
    assert!(
        a.show(T1)["frontmatter"]["metadata"]
            .get("delegationDepth")
            .is_some()
    );

    // A duplicate keeps the depth and logs again.
    a.route(&handoff(T2, T1, json!({})));
    assert_eq!(a.show(T2)["frontmatter"]["metadata"]["delegationDepth"], 1);
    assert_eq!(a.events_of("delegation.requested").len(), 2);

    // The child, now at depth 1, may not delegate further.
    a.create(T3, "ready", &[]);
    let before = a.show(T3);
    let (code, report) = a.route(&handoff(T3, T2, json!({})));
    assert_eq!(code, 2);
    assert_eq!(report["reason"], "nested_delegation");
    assert_eq!(
        types(report["events"].as_array().expect("events")),
        [
            "protocol.message.received",
            "protocol.message.rejected",
            "delegation.rejected"
        ]
    );
    assert!(!a.companion(T3).join("inputs/handoff.json").exists());
    assert_eq!(a.show(T3), before, "the child is not updated");

    let (_, report) = a.route(&handoff(T3, MISSING, json!({})));
    assert_eq!(report["reason"], "parent_not_found");
    let mut mismatch: Value = serde_json::from_str(&handoff(T2, T1, json!({}))).expect("json");
    mismatch["payload"]["taskId"] = json!(T3);
    let (_, report) = a.route(&mismatch.to_string());
    assert_eq!(report["reason"], "taskId_mismatch");
}

#[test]
fn acknowledgements_accept_or_block() {
    // AOF-060-07 and -08.
    let a = Adapter::new();
    a.create(T2, "in-progress", &[]);
    let ack = |kind: &str, accepted: bool| {
        envelope(
            kind,
            T2,
            "swe-qa",
            json!({ "taskId": T2, "accepted": accepted, "reason": "Insufficient context" }),
        )
    };
    let (_, report) = a.route(&ack("handoff.accepted", true));
    assert_eq!(report["events"][1]["type"], "delegation.accepted");
    assert_eq!(a.status(T2), "in-progress");
    let (_, report) = a.route(&ack("handoff.rejected", false));
    assert_eq!(a.status(T2), "blocked");
    assert_eq!(report["transitions"][0]["reason"], "Insufficient context");
    assert_eq!(a.events_of("delegation.rejected").len(), 1);
}

#[test]
fn session_end_applies_results_of_in_progress_tasks_only() {
    // AOF-059-07, -08 and -09.
    let a = Adapter::new();
    a.create(T1, "in-progress", &[]);
    a.create(T2, "in-progress", &[]);
    a.create(T3, "in-progress", &[]);
    let result = |task: &str, outcome: &str| {
        json!({
            "taskId": task, "agentId": "swe-backend", "completedAt": "2026-02-09T21:00:00.000Z",
            "outcome": outcome, "summaryRef": "outputs/summary.md", "handoffRef": "outputs/handoff.md",
            "tests": { "total": 1, "passed": 1, "failed": 0 }, "blockers": ["Dependency not ready"],
            "notes": "n",
        })
        .to_string()
    };
    assert_eq!(
        a.run(&["run", "result", "--task", T1], &result(T1, "partial"))
            .0,
        0
    );
    assert_eq!(
        a.run(&["run", "result", "--task", T2], &result(T2, "blocked"))
            .0,
        0
    );
    let before = a.events().len();
    let (code, report) = a.run(&["session-end"], "");
    assert_eq!(code, 0);
    assert_eq!(report["tasks"].as_array().map(Vec::len), Some(2));
    assert_eq!(a.status(T1), "review");
    assert_eq!(a.status(T2), "blocked");
    assert_eq!(a.status(T3), "in-progress");
    assert_eq!(
        a.events().len(),
        before + 2,
        "one transition event per task"
    );
    let (_, report) = a.run(&["session-end"], "");
    assert_eq!(report["events"], json!([]));
}

#[test]
fn poll_recovers_stale_heartbeats_by_outcome() {
    // AOF-061-01 to -14.
    let a = Adapter::new();
    let ids = [T1, T2, T3, "TASK-2026-02-09-004", "TASK-2026-02-09-005"];
    for id in ids {
        a.create(id, "in-progress", &[]);
        a.run_at(
            &["run", "start", "--task", id, "--agent", "swe-backend"],
            "",
            "2026-02-10T09:00:00.000Z",
        );
    }
    let beat = |id: &str, expires: &str| {
        a.run(
            &[
                "run",
                "heartbeat",
                "--task",
                id,
                "--agent",
                "swe-backend",
                "--expires-at",
                expires,
            ],
            "",
        )
    };
    beat(T1, "2026-02-10T10:00:00.000Z");
    beat(T2, "2026-02-10T10:00:00.000Z");
    beat(T3, "2026-02-10T10:10:00.000Z");
    beat("TASK-2026-02-09-005", "2026-02-10T10:05:00.000Z");
    let result = json!({
        "taskId": T2, "agentId": "swe-backend", "completedAt": "2026-02-10T09:59:00.000Z",
        "outcome": "blocked", "summaryRef": "s", "handoffRef": "outputs/handoff.md",
        "tests": { "total": 0, "passed": 0, "failed": 0 }, "blockers": ["Dependency not ready"],
        "notes": "n",
    });
    a.run(&["run", "result", "--task", T2], &result.to_string());

    let now = "2026-02-10T10:05:00.000Z";
    let (_, dry) = a.run_at(&["poll", "--dry-run"], "", now);
    let planned: Vec<&str> = dry["actions"]
        .as_array()
        .expect("actions")
        .iter()
        .filter_map(|x| x["taskId"].as_str())
        .collect();
    assert_eq!(
        planned,
        [T1, T2, "TASK-2026-02-09-005"],
        "expiresAt <= now is stale"
    );
    assert_eq!(a.status(T1), "in-progress", "a dry run changes nothing");

    let (_, poll) = a.run_at(&["poll"], "", now);
    assert_eq!(poll["actionsExecuted"], 0);
    assert_eq!(poll["staleHeartbeatsProcessed"], 3);
    assert_eq!(a.status(T1), "ready");
    assert_eq!(a.status(T2), "blocked");
    assert_eq!(a.status(T3), "in-progress");
    assert_eq!(
        a.status("TASK-2026-02-09-004"),
        "in-progress",
        "no heartbeat, not stale"
    );
    let run = &a.run_show(T1)["run"];
    assert_eq!(run["status"], "failed");
    assert_eq!(run["metadata"]["expiredReason"], "stale_heartbeat");
    assert_eq!(run["metadata"]["expiredAt"], now);
    let reasons: Vec<String> = a
        .events_of("task.transitioned")
        .iter()
        .filter(|e| e["actor"] == "scheduler")
        .filter_map(|e| e["payload"]["reason"].as_str().map(str::to_owned))
        .collect();
    assert!(reasons.contains(&"stale_heartbeat_reclaim".to_owned()));
    assert!(
        reasons
            .iter()
            .any(|r| r.contains("stale_heartbeat_blocked") && r.contains("Dependency not ready"))
    );
}

#[test]
fn router_goes_on_after_a_handler_error() {
    // AOF-X-03: the child's inputs path is a file, so writing handoff.json fails.
    let a = Adapter::new();
    a.create(T1, "in-progress", &[]);
    a.create(T2, "ready", &[]);
    let inputs = a.companion(T2).join("inputs");
    fs::remove_dir_all(&inputs).expect("remove inputs");
    fs::write(&inputs, "not a directory").expect("block inputs");
    let stream = format!(
        "{}\n{}\n",
        handoff(T2, T1, json!({})),
        status_update(T1, json!({ "notes": "still here" }))
    );
    let data = a.data_arg();
    let output = run_ski(
        &[
            "aof",
            "route",
            "--ndjson",
            "--data-dir",
            &data,
            "--now",
            NOW,
        ],
        &stream,
    );
    assert!(output.status.success());
    let reports: Vec<Value> = String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|line| serde_json::from_str(line).expect("a JSON report per line"))
        .collect();
    assert_eq!(reports[0]["outcome"], "failed");
    assert_eq!(reports[1]["outcome"], "handled");
    assert_eq!(a.events_of("protocol.message.error").len(), 1);
    assert_eq!(a.show(T1)["workLog"].as_array().map(Vec::len), Some(1));
}

#[test]
fn invalid_transitions_are_skipped_and_missing_summaries_warn() {
    // AOF-X-04 and AOF-X-05.
    let a = Adapter::new();
    a.create(T1, "done", &[]);
    let (code, report) = a.route(&completion(T1, "partial", json!({})));
    assert_eq!(code, 0);
    assert_eq!(report["transitions"], json!([]));
    assert_eq!(a.status(T1), "done");

    a.create(T2, "in-progress", &[]);
    let warning = |a: &Adapter| a.events_of("protocol.message.warning").len();
    let before = warning(&a);
    a.route(&completion(T2, "partial", json!({})));
    assert_eq!(warning(&a), before + 1);
    assert_eq!(a.status(T2), "review");

    a.create(T3, "in-progress", &[]);
    let outputs = a.companion(T3).join("outputs");
    fs::write(outputs.join("summary.md"), "# Summary\n").expect("summary");
    let before = warning(&a);
    a.route(&completion(T3, "partial", json!({})));
    assert_eq!(warning(&a), before, "an existing summary gives no warning");
}

#[test]
fn authorization_is_an_option() {
    // E-AOF-15.
    let a = Adapter::new();
    a.create(T1, "in-progress", &["--lease-agent", "swe-backend"]);
    a.create(T2, "in-progress", &[]);
    let foreign = envelope(
        "status.update",
        T1,
        "intruder",
        json!({ "taskId": T1, "agentId": "intruder", "status": "blocked" }),
    );
    let (code, report) = a.run(&["route", "--authorize"], &foreign);
    assert_eq!(
        (code, report["reason"].clone()),
        (2, json!("unauthorized_agent"))
    );
    assert_eq!(a.status(T1), "in-progress");
    let (code, report) = a.run(
        &["route", "--authorize"],
        &status_update(T2, json!({ "notes": "x" })),
    );
    assert_eq!(
        (code, report["reason"].clone()),
        (2, json!("unassigned_task"))
    );
    let (code, _) = a.run(
        &["route", "--authorize"],
        &status_update(T1, json!({ "notes": "x" })),
    );
    assert_eq!(code, 0);
    let (code, _) = a.route(&foreign);
    assert_eq!(code, 0, "without --authorize any sender is accepted");
}

#[rstest]
#[case::done("done")]
#[case::blocked("blocked")]
#[case::needs_review("needs_review")]
#[case::partial("partial")]
fn every_final_outcome_is_a_valid_completion_report(#[case] outcome: &str) {
    let payload = json!({ "outcome": outcome, "summaryRef": "s", "tests": { "total": 0, "passed": 0, "failed": 0 }, "notes": "n" });
    let out = run_ski(
        &["aof", "validate", "--kind", "completion-report"],
        &payload.to_string(),
    );
    assert_eq!(out.status.code(), Some(0), "{outcome}");
}

#[test]
fn validate_and_resolve_report_as_documented() {
    // AOF-057-08, -10b, -13 and AOF-059-10 to -15.
    let out = run_ski(
        &["aof", "validate"],
        &completion("invalid-format", "done", json!({})),
    );
    assert_eq!(out.status.code(), Some(2));
    let report: Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(report["errors"][0]["path"], "taskId");
    assert_eq!(report["errors"][0]["kind"], "invalid_task_id");
    let resolve = |status: &str, outcome: &str, review: &str| -> Value {
        let out = run_ski(
            &[
                "aof",
                "resolve",
                "--status",
                status,
                "--outcome",
                outcome,
                "--review-required",
                review,
            ],
            "",
        );
        serde_json::from_slice(&out.stdout).expect("json")
    };
    assert_eq!(resolve("in-progress", "done", "true"), json!(["review"]));
    assert_eq!(
        resolve("in-progress", "done", "false"),
        json!(["review", "done"])
    );
    assert_eq!(
        resolve("in-progress", "blocked", "true"),
        json!(["blocked"])
    );
    assert_eq!(resolve("review", "partial", "true"), json!([]));
}

#[test]
fn help_explains_the_commands() {
    let out = run_ski(&["aof", "--help"], "");
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    for command in [
        "validate",
        "route",
        "poll",
        "session-end",
        "task",
        "run",
        "events",
        "resolve",
    ] {
        assert!(
            text.contains(command),
            "--help does not mention {command}:\n{text}"
        );
    }
}

#[test]
fn batch_answers_each_request_before_reading_the_next() {
    use std::io::{BufRead, BufReader, Write};
    use std::process::Stdio;

    let a = Adapter::new();
    let data = a.data_arg();
    let mut child = aof_support::ski()
        .args(["aof", "batch"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("ski aof batch starts");
    let mut input = child.stdin.take().expect("stdin");
    let mut output = BufReader::new(child.stdout.take().expect("stdout"));
    let mut ask = |request: Value| -> Value {
        writeln!(input, "{request}").expect("write a request");
        input.flush().expect("flush");
        let mut line = String::new();
        output.read_line(&mut line).expect("read an answer");
        serde_json::from_str(&line).expect("one JSON answer per line")
    };
    let created = ask(
        json!({"args": ["task", "create", "--data-dir", data, "--now", NOW,
        "--title", "Parser", "--id", T1, "--status", "in-progress"]}),
    );
    assert_eq!(created["code"], 0, "{created}");
    let update = aof_support::envelope(
        "status.update",
        T1,
        "swe-backend",
        json!({"taskId": T1, "agentId": "swe-backend", "progress": "half way"}),
    );
    let routed = ask(json!({"args": ["route", "--data-dir", data, "--now", NOW],
        "stdin": update}));
    assert_eq!(routed["code"], 0, "{routed}");
    let report: Value =
        serde_json::from_str(routed["stdout"].as_str().unwrap_or("")).expect("a route report");
    assert_eq!(report["outcome"], "handled");
    let missing = ask(json!({"args": ["route", "--data-dir", data, "--now", NOW],
        "stdin": aof_support::envelope("status.update", T2, "swe-backend",
            json!({"taskId": T2, "agentId": "swe-backend", "progress": "x"}))}));
    assert_eq!(missing["code"], 2, "{missing}");
    assert!(
        missing["stderr"]
            .as_str()
            .unwrap_or("")
            .contains("rejected"),
        "{missing}"
    );
    let events = ask(json!({"args": ["events", "--data-dir", data, "--type", "task.updated"]}));
    let logged: Value =
        serde_json::from_str(events["stdout"].as_str().unwrap_or("")).expect("events");
    assert_eq!(logged.as_array().map(Vec::len), Some(1), "{logged}");
    drop(input);
    let status = child.wait().expect("batch ends");
    assert!(status.success(), "batch exits 0 at the end of its input");
}
