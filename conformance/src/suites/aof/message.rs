//! Builders of AOF/1 envelopes and payloads with the values of the document's fixtures: task ids
//! of 2026-02-09, agents `swe-backend` → `swe-qa`, project `test-project`.
//!
//! Every builder returns a complete, valid message; a check changes one field to make it what its
//! scenario needs (`with`, `without`).

use serde_json::{Map, Value, json};

/// The task most scenarios name.
pub const TASK_1: &str = "TASK-2026-02-09-001";
/// The second task (a child in handoff scenarios).
pub const TASK_2: &str = "TASK-2026-02-09-002";
/// A third task.
pub const TASK_3: &str = "TASK-2026-02-09-003";
/// A fourth task.
pub const TASK_4: &str = "TASK-2026-02-09-004";
/// A fifth task.
pub const TASK_5: &str = "TASK-2026-02-09-005";
/// A task id that no scenario creates.
pub const MISSING_TASK: &str = "TASK-2026-02-09-999";

/// The sending agent.
pub const FROM_AGENT: &str = "swe-backend";
/// The receiving agent.
pub const TO_AGENT: &str = "swe-qa";
/// When messages were sent (not the current time).
pub const SENT_AT: &str = "2026-02-09T21:00:00.000Z";
/// When the Given tasks are created.
pub const CREATED_AT: &str = "2026-02-09T20:00:00.000Z";
/// The current time while a message is handled (`--now`).
pub const NOW: &str = "2026-02-09T21:05:00.000Z";
/// A later current time, for a second receipt.
pub const LATER: &str = "2026-02-09T21:10:00.000Z";

/// An envelope of `kind` for `task` carrying `payload`.
pub fn envelope(kind: &str, task: &str, payload: Value) -> Value {
    json!({
        "protocol": "aof",
        "version": 1,
        "projectId": "test-project",
        "type": kind,
        "taskId": task,
        "fromAgent": FROM_AGENT,
        "toAgent": TO_AGENT,
        "sentAt": SENT_AT,
        "payload": payload,
    })
}

/// A complete CompletionReportPayload with `outcome` (summaryRef, tests and notes included,
/// E-AOF-05).
pub fn completion(outcome: &str) -> Value {
    json!({
        "outcome": outcome,
        "summaryRef": "outputs/summary.md",
        "deliverables": ["src/parser.rs"],
        "tests": {"total": 10, "passed": 8, "failed": 2},
        "notes": format!("finished with outcome {outcome}"),
    })
}

/// A completion.report envelope for `task` with `outcome`.
pub fn completion_report(task: &str, outcome: &str) -> Value {
    envelope("completion.report", task, completion(outcome))
}

/// A StatusUpdatePayload for `task` with the update fields of `fields` (an object).
pub fn status(task: &str, fields: Value) -> Value {
    with(json!({"taskId": task, "agentId": FROM_AGENT}), fields)
}

/// A status.update envelope for `task` with the update fields of `fields`.
pub fn status_update(task: &str, fields: Value) -> Value {
    envelope("status.update", task, status(task, fields))
}

/// A HandoffRequestPayload delegating `child` from `parent` with only the required fields.
pub fn handoff_minimal(child: &str, parent: &str) -> Value {
    json!({
        "taskId": child,
        "parentTaskId": parent,
        "fromAgent": FROM_AGENT,
        "toAgent": TO_AGENT,
        "dueBy": "2026-02-11T12:00:00.000Z",
    })
}

/// A HandoffRequestPayload with every field the document lists. No list names either task, so
/// that a rendering that shows a task id shows it because it renders that id.
pub fn handoff_full(child: &str, parent: &str) -> Value {
    with(
        handoff_minimal(child, parent),
        json!({
            "acceptanceCriteria": ["All tests pass", "Documentation updated"],
            "expectedOutputs": ["tests/report.md"],
            "contextRefs": ["docs/parser-design.md", "notes/api-review.md"],
            "constraints": ["No new dependencies"],
        }),
    )
}

/// A handoff.request envelope for `child` (the envelope's task) from `parent`.
pub fn handoff_request(child: &str, parent: &str) -> Value {
    envelope(
        "handoff.request",
        child,
        with(
            handoff_minimal(child, parent),
            json!({"acceptanceCriteria": ["All tests pass", "Docs updated"]}),
        ),
    )
}

/// A HandoffAckPayload for `task`; `accepted` agrees with the type (E-AOF-04).
pub fn ack(task: &str, accepted: bool, reason: Option<&str>) -> Value {
    let mut payload = json!({"taskId": task, "accepted": accepted});
    if let Some(reason) = reason {
        payload["reason"] = json!(reason);
    }
    payload
}

/// A handoff.accepted or handoff.rejected envelope for `task`.
pub fn handoff_ack(task: &str, accepted: bool, reason: Option<&str>) -> Value {
    let kind = if accepted {
        "handoff.accepted"
    } else {
        "handoff.rejected"
    };
    envelope(kind, task, ack(task, accepted, reason))
}

/// A run_result.json for `task` with `outcome`.
pub fn run_result(task: &str, outcome: &str) -> Value {
    json!({
        "taskId": task,
        "agentId": FROM_AGENT,
        "completedAt": SENT_AT,
        "outcome": outcome,
        "summaryRef": "outputs/summary.md",
        "handoffRef": "outputs/handoff.md",
        "deliverables": [],
        "tests": {"total": 4, "passed": 4, "failed": 0},
        "blockers": [],
        "notes": format!("run ended with outcome {outcome}"),
    })
}

/// `base` with the keys of `extra` (an object) set; other values of `extra` are ignored.
pub fn with(mut base: Value, extra: Value) -> Value {
    if let (Some(target), Value::Object(extra)) = (base.as_object_mut(), extra) {
        for (key, value) in extra {
            target.insert(key, value);
        }
    }
    base
}

/// `base` without the key at the dotted `path` (e.g. `payload.deliverables`).
pub fn without(mut base: Value, path: &str) -> Value {
    let mut keys: Vec<&str> = path.split('.').collect();
    let Some(last) = keys.pop() else {
        return base;
    };
    let mut node: Option<&mut Map<String, Value>> = base.as_object_mut();
    for key in keys {
        node = node
            .and_then(|map| map.get_mut(key))
            .and_then(Value::as_object_mut);
    }
    if let Some(map) = node {
        map.remove(last);
    }
    base
}

/// `base` with the value at the dotted `path` replaced by `value` (parents must exist).
pub fn set(mut base: Value, path: &str, value: Value) -> Value {
    let mut node = &mut base;
    for key in path.split('.') {
        if !node.is_object() {
            return base;
        }
        node = &mut node[key];
    }
    *node = value;
    base
}
