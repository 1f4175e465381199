//! AOF/1 envelopes and payloads: validation with field paths and limits, and the encoded form.
//!
//! Validation follows the original schema: `protocol` is the literal `"aof"`, `version` the
//! number 1, task ids match `TASK-YYYY-MM-DD-NNN`, timestamps are ISO 8601 UTC with a `Z`, and the
//! size limits below apply. Arrays that may be omitted default to `[]`. Unknown fields are dropped.
//! An envelope whose `type` is not one of the five known types is kept as [`Body::Unknown`] so that
//! the router can log it as unknown (E-AOF-08).

use serde::Serialize;
use serde_json::{Map, Value, json};

use super::task::{STATUS_VALUES, TaskStatus};
use super::task_id::TaskId;
use super::timestamp::Timestamp;
use super::validation::{Fields, Issue, IssueKind};

/// The `protocol` literal.
pub const PROTOCOL: &str = "aof";
/// The only supported `version`.
pub const VERSION: u64 = 1;
/// Longest `summaryRef`.
pub const MAX_SUMMARY_REF: usize = 256;
/// Longest `notes`.
pub const MAX_NOTES: usize = 10_000;
/// Longest `progress`.
pub const MAX_PROGRESS: usize = 1_000;
/// Longest `reason`.
pub const MAX_REASON: usize = 512;
/// Longest item of any string array.
pub const MAX_ITEM: usize = 256;
/// Most `deliverables`.
pub const MAX_DELIVERABLES: usize = 50;
/// Most `blockers`.
pub const MAX_BLOCKERS: usize = 20;
/// Most items of each handoff list.
pub const MAX_HANDOFF_ITEMS: usize = 50;
/// Longest agent name or `type`.
pub const MAX_NAME: usize = 256;

/// The outcome of a completion report.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// Finished.
    Done,
    /// Cannot go on.
    Blocked,
    /// Wants a reviewer.
    NeedsReview,
    /// Partly done.
    Partial,
}

/// The allowed outcomes, for error messages.
pub const OUTCOME_VALUES: &str = "done, blocked, needs_review, partial";

impl Outcome {
    /// Parses a wire name.
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "done" => Some(Self::Done),
            "blocked" => Some(Self::Blocked),
            "needs_review" => Some(Self::NeedsReview),
            "partial" => Some(Self::Partial),
            _ => None,
        }
    }

    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Done => "done",
            Self::Blocked => "blocked",
            Self::NeedsReview => "needs_review",
            Self::Partial => "partial",
        }
    }
}

/// Test counts of a completion report.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct TestReport {
    /// Tests run.
    pub total: u64,
    /// Tests passed.
    pub passed: u64,
    /// Tests failed.
    pub failed: u64,
}

impl TestReport {
    /// Validates a test report found at `path`.
    pub fn read(value: &Value, path: &str, issues: &mut Vec<Issue>) -> Option<Self> {
        let mut fields = Fields::new(value, path, issues);
        let total = fields.req_count("total");
        let passed = fields.req_count("passed");
        let failed = fields.req_count("failed");
        let (total, passed, failed) = (total?, passed?, failed?);
        if passed.saturating_add(failed) > total {
            fields.push(Issue::new(
                path,
                IssueKind::Inconsistent,
                format!("passed + failed must not exceed total ({passed} + {failed} > {total})"),
            ));
            return None;
        }
        Some(Self {
            total,
            passed,
            failed,
        })
    }
}

/// The payload of `completion.report`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CompletionReportPayload {
    /// The outcome.
    pub outcome: Outcome,
    /// Where the summary is, relative to the task's directory.
    pub summary_ref: String,
    /// Files produced.
    pub deliverables: Vec<String>,
    /// Test counts.
    pub tests: TestReport,
    /// What blocks the task.
    pub blockers: Vec<String>,
    /// Free notes.
    pub notes: String,
}

impl CompletionReportPayload {
    /// Validates a completion payload found at `path`.
    pub fn read(value: &Value, path: &str, issues: &mut Vec<Issue>) -> Option<Self> {
        let mut fields = Fields::new(value, path, issues);
        let outcome = fields.req_enum("outcome", Outcome::parse, OUTCOME_VALUES);
        let summary_ref = fields.req_str("summaryRef", Some(MAX_SUMMARY_REF));
        let deliverables = fields.opt_str_array("deliverables", MAX_DELIVERABLES, MAX_ITEM);
        let deliverables_ok = deliverables.is_some() || fields.raw("deliverables").is_none();
        let tests = fields.nested("tests", true, TestReport::read);
        let blockers = fields.opt_str_array("blockers", MAX_BLOCKERS, MAX_ITEM);
        let blockers_ok = blockers.is_some() || fields.raw("blockers").is_none();
        let notes = fields.req_str("notes", Some(MAX_NOTES));
        if !(fields.is_object() && deliverables_ok && blockers_ok) {
            return None;
        }
        Some(Self {
            outcome: outcome?,
            summary_ref: summary_ref?,
            deliverables: deliverables.unwrap_or_default(),
            tests: tests?,
            blockers: blockers.unwrap_or_default(),
            notes: notes?,
        })
    }
}

/// The payload of `status.update`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StatusUpdatePayload {
    /// The task; must equal the envelope's.
    pub task_id: TaskId,
    /// The reporting agent.
    pub agent_id: String,
    /// A new status.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<TaskStatus>,
    /// Progress text.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub progress: Option<String>,
    /// What blocks the task.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub blockers: Option<Vec<String>>,
    /// Free notes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub notes: Option<String>,
}

impl StatusUpdatePayload {
    /// Validates a status update payload found at `path`.
    pub fn read(value: &Value, path: &str, issues: &mut Vec<Issue>) -> Option<Self> {
        let mut fields = Fields::new(value, path, issues);
        let task_id = fields.req_task_id("taskId");
        let agent_id = fields.req_str("agentId", Some(MAX_NAME));
        let status = fields.opt_enum("status", TaskStatus::parse, STATUS_VALUES);
        let progress = fields.opt_str("progress", Some(MAX_PROGRESS));
        let blockers = fields.opt_str_array("blockers", MAX_BLOCKERS, MAX_ITEM);
        let notes = fields.opt_str("notes", Some(MAX_NOTES));
        let present = ["status", "progress", "blockers", "notes"]
            .iter()
            .any(|field| fields.raw(field).is_some());
        if fields.is_object() && !present {
            fields.push(Issue::new(
                path,
                IssueKind::NoUpdateField,
                "at least one update field is required: status, progress, blockers, or notes",
            ));
            return None;
        }
        let optional_ok = ["status", "progress", "blockers", "notes"]
            .iter()
            .zip([
                status.is_some(),
                progress.is_some(),
                blockers.is_some(),
                notes.is_some(),
            ])
            .all(|(field, read)| read || fields.raw(field).is_none());
        if !optional_ok {
            return None;
        }
        Some(Self {
            task_id: task_id?,
            agent_id: agent_id?,
            status,
            progress,
            blockers,
            notes,
        })
    }
}

/// The payload of `handoff.request`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HandoffRequestPayload {
    /// The child task; must equal the envelope's.
    pub task_id: TaskId,
    /// The delegating task.
    pub parent_task_id: TaskId,
    /// The delegating agent.
    pub from_agent: String,
    /// The agent that takes the child task.
    pub to_agent: String,
    /// What "done" means.
    pub acceptance_criteria: Vec<String>,
    /// Files the child must produce.
    pub expected_outputs: Vec<String>,
    /// Paths to read first.
    pub context_refs: Vec<String>,
    /// Rules to respect.
    pub constraints: Vec<String>,
    /// The deadline.
    pub due_by: Timestamp,
}

impl HandoffRequestPayload {
    /// Validates a handoff request payload found at `path`.
    pub fn read(value: &Value, path: &str, issues: &mut Vec<Issue>) -> Option<Self> {
        let mut fields = Fields::new(value, path, issues);
        let task_id = fields.req_task_id("taskId");
        let parent_task_id = fields.req_task_id("parentTaskId");
        let from_agent = fields.req_str("fromAgent", Some(MAX_NAME));
        let to_agent = fields.req_str("toAgent", Some(MAX_NAME));
        let mut lists = Vec::new();
        let mut lists_ok = true;
        for field in [
            "acceptanceCriteria",
            "expectedOutputs",
            "contextRefs",
            "constraints",
        ] {
            let list = fields.opt_str_array(field, MAX_HANDOFF_ITEMS, MAX_ITEM);
            lists_ok &= list.is_some() || fields.raw(field).is_none();
            lists.push(list.unwrap_or_default());
        }
        let due_by = fields.req_datetime("dueBy");
        if !lists_ok {
            return None;
        }
        let mut lists = lists.into_iter();
        Some(Self {
            task_id: task_id?,
            parent_task_id: parent_task_id?,
            from_agent: from_agent?,
            to_agent: to_agent?,
            acceptance_criteria: lists.next().unwrap_or_default(),
            expected_outputs: lists.next().unwrap_or_default(),
            context_refs: lists.next().unwrap_or_default(),
            constraints: lists.next().unwrap_or_default(),
            due_by: due_by?,
        })
    }
}

/// The payload of `handoff.accepted` and `handoff.rejected`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HandoffAckPayload {
    /// The child task; must equal the envelope's.
    pub task_id: TaskId,
    /// Must agree with the type when present (E-AOF-04).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub accepted: Option<bool>,
    /// Why, mostly for rejections.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

impl HandoffAckPayload {
    /// Validates an acknowledgement payload found at `path`; `accepted` is what the type says.
    pub fn read(
        value: &Value,
        path: &str,
        issues: &mut Vec<Issue>,
        accepted_by_type: bool,
    ) -> Option<Self> {
        let mut fields = Fields::new(value, path, issues);
        let task_id = fields.req_task_id("taskId");
        let accepted = fields.opt_bool("accepted");
        let accepted_ok = accepted.is_some() || fields.raw("accepted").is_none();
        let reason = fields.opt_str("reason", Some(MAX_REASON));
        let reason_ok = reason.is_some() || fields.raw("reason").is_none();
        if accepted.is_some_and(|flag| flag != accepted_by_type) {
            let path = fields.path_of("accepted");
            fields.push(Issue::new(
                path,
                IssueKind::Inconsistent,
                format!("accepted must be {accepted_by_type} for this message type"),
            ));
            return None;
        }
        if !(accepted_ok && reason_ok) {
            return None;
        }
        Some(Self {
            task_id: task_id?,
            accepted,
            reason,
        })
    }
}

/// The five message types ski handles.
pub const KNOWN_TYPES: [&str; 5] = [
    "completion.report",
    "status.update",
    "handoff.request",
    "handoff.accepted",
    "handoff.rejected",
];

/// The typed payload of an envelope.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Body {
    /// `completion.report`.
    CompletionReport(CompletionReportPayload),
    /// `status.update`.
    StatusUpdate(StatusUpdatePayload),
    /// `handoff.request`.
    HandoffRequest(HandoffRequestPayload),
    /// `handoff.accepted`.
    HandoffAccepted(HandoffAckPayload),
    /// `handoff.rejected`.
    HandoffRejected(HandoffAckPayload),
    /// Any other type: the payload is kept as it came.
    Unknown {
        /// The type as sent.
        kind: String,
        /// The payload as sent.
        payload: Value,
    },
}

impl Body {
    /// The wire type name.
    pub fn kind(&self) -> &str {
        match self {
            Body::CompletionReport(_) => "completion.report",
            Body::StatusUpdate(_) => "status.update",
            Body::HandoffRequest(_) => "handoff.request",
            Body::HandoffAccepted(_) => "handoff.accepted",
            Body::HandoffRejected(_) => "handoff.rejected",
            Body::Unknown { kind, .. } => kind,
        }
    }

    /// The payload as JSON, defaults filled in.
    pub fn payload_value(&self) -> Value {
        let encoded = match self {
            Body::CompletionReport(p) => serde_json::to_value(p),
            Body::StatusUpdate(p) => serde_json::to_value(p),
            Body::HandoffRequest(p) => serde_json::to_value(p),
            Body::HandoffAccepted(p) | Body::HandoffRejected(p) => serde_json::to_value(p),
            Body::Unknown { payload, .. } => Ok(payload.clone()),
        };
        encoded.unwrap_or(Value::Null)
    }
}

/// A validated AOF/1 envelope.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Envelope {
    /// The project (optional in ski, E-AOF-03; `project_id` is accepted as an alias).
    pub project_id: Option<String>,
    /// The task file's path relative to the data dir, informative.
    pub task_relpath: Option<String>,
    /// The task the message is about.
    pub task_id: TaskId,
    /// The sender.
    pub from_agent: String,
    /// The addressee.
    pub to_agent: String,
    /// When it was sent.
    pub sent_at: Timestamp,
    /// Type and payload.
    pub body: Body,
}

/// A type name ski accepts for an unknown type: dotted lower-case words.
fn plausible_type(kind: &str) -> bool {
    !kind.is_empty()
        && kind.len() <= MAX_NAME
        && kind.split('.').all(|part| {
            !part.is_empty()
                && part
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-')
        })
}

impl Envelope {
    /// Validates a JSON value as an envelope, reporting every problem found.
    pub fn from_value(value: &Value) -> Result<Self, Vec<Issue>> {
        let mut issues = Vec::new();
        let envelope = Self::read(value, &mut issues);
        match envelope {
            Some(envelope) if issues.is_empty() => Ok(envelope),
            _ => {
                if issues.is_empty() {
                    issues.push(Issue::new("", IssueKind::InvalidType, "invalid envelope"));
                }
                Err(issues)
            }
        }
    }

    fn read(value: &Value, issues: &mut Vec<Issue>) -> Option<Self> {
        let mut fields = Fields::new(value, "", issues);
        if !fields.is_object() {
            return None;
        }
        match fields.raw("protocol") {
            None => {
                fields.req_str("protocol", None);
            }
            Some(Value::String(text)) if text == PROTOCOL => {}
            Some(other) => fields.push(Issue::new(
                "protocol",
                IssueKind::InvalidLiteral,
                format!("invalid protocol: expected \"aof\", got {other}"),
            )),
        }
        match fields.raw("version") {
            None => {
                fields.req_count("version");
            }
            Some(version) if version.as_u64() == Some(VERSION) => {}
            Some(other) => fields.push(Issue::new(
                "version",
                IssueKind::UnsupportedVersion,
                format!("unsupported version: expected 1, got {other}"),
            )),
        }
        let project_id = match fields.raw("projectId") {
            Some(_) => fields.opt_str("projectId", Some(MAX_NAME)),
            None => fields.opt_str("project_id", Some(MAX_NAME)),
        };
        let task_relpath = fields.opt_str("taskRelpath", Some(MAX_ITEM));
        let task_id = fields.req_task_id("taskId");
        let from_agent = fields.req_str("fromAgent", Some(MAX_NAME));
        let to_agent = fields.req_str("toAgent", Some(MAX_NAME));
        let sent_at = fields.req_datetime("sentAt");
        let kind = fields.req_str("type", Some(MAX_NAME));
        let payload = fields.raw("payload");
        if payload.is_none() {
            fields.req_str("payload", None);
        }
        let body = match (kind.as_deref(), payload) {
            (Some(kind), Some(payload)) => Self::read_body(kind, payload, issues),
            _ => None,
        };
        Some(Self {
            project_id,
            task_relpath,
            task_id: task_id?,
            from_agent: from_agent?,
            to_agent: to_agent?,
            sent_at: sent_at?,
            body: body?,
        })
    }

    fn read_body(kind: &str, payload: &Value, issues: &mut Vec<Issue>) -> Option<Body> {
        let path = "payload";
        match kind {
            "completion.report" => {
                CompletionReportPayload::read(payload, path, issues).map(Body::CompletionReport)
            }
            "status.update" => {
                StatusUpdatePayload::read(payload, path, issues).map(Body::StatusUpdate)
            }
            "handoff.request" => {
                HandoffRequestPayload::read(payload, path, issues).map(Body::HandoffRequest)
            }
            "handoff.accepted" => {
                HandoffAckPayload::read(payload, path, issues, true).map(Body::HandoffAccepted)
            }
            "handoff.rejected" => {
                HandoffAckPayload::read(payload, path, issues, false).map(Body::HandoffRejected)
            }
            other if plausible_type(other) => {
                if !payload.is_object() {
                    issues.push(Issue::new(
                        path,
                        IssueKind::InvalidType,
                        "expected a JSON object",
                    ));
                    return None;
                }
                Some(Body::Unknown {
                    kind: other.to_owned(),
                    payload: payload.clone(),
                })
            }
            other => {
                issues.push(Issue::new(
                    "type",
                    IssueKind::InvalidEnum,
                    format!(
                        "type must be one of: {} (or a dotted lower-case name), got {other:?}",
                        KNOWN_TYPES.join(", ")
                    ),
                ));
                None
            }
        }
    }

    /// The wire type name.
    pub fn kind(&self) -> &str {
        self.body.kind()
    }

    /// Whether the type is one of the five known types.
    pub fn is_known(&self) -> bool {
        !matches!(self.body, Body::Unknown { .. })
    }

    /// The encoded form: every field, defaults filled in, keys sorted.
    pub fn to_value(&self) -> Value {
        let mut map = Map::new();
        map.insert("protocol".into(), json!(PROTOCOL));
        map.insert("version".into(), json!(VERSION));
        if let Some(project_id) = &self.project_id {
            map.insert("projectId".into(), json!(project_id));
        }
        if let Some(relpath) = &self.task_relpath {
            map.insert("taskRelpath".into(), json!(relpath));
        }
        map.insert("type".into(), json!(self.kind()));
        map.insert("taskId".into(), json!(self.task_id));
        map.insert("fromAgent".into(), json!(self.from_agent));
        map.insert("toAgent".into(), json!(self.to_agent));
        map.insert("sentAt".into(), json!(self.sent_at));
        map.insert("payload".into(), self.body.payload_value());
        Value::Object(map)
    }
}

/// Payload kinds that can be validated on their own (`ski aof validate --kind`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PayloadKind {
    /// `CompletionReportPayload`.
    CompletionReport,
    /// `StatusUpdatePayload`.
    StatusUpdate,
    /// `HandoffRequestPayload`.
    HandoffRequest,
    /// `HandoffAckPayload` of an accepted handoff.
    HandoffAccepted,
    /// `HandoffAckPayload` of a rejected handoff.
    HandoffRejected,
    /// `TestReport`.
    TestReport,
}

/// Validates a bare payload and returns its encoded form with defaults.
pub fn validate_payload(kind: PayloadKind, value: &Value) -> Result<Value, Vec<Issue>> {
    let mut issues = Vec::new();
    let encoded = match kind {
        PayloadKind::CompletionReport => CompletionReportPayload::read(value, "", &mut issues)
            .map(|p| serde_json::to_value(p).unwrap_or(Value::Null)),
        PayloadKind::StatusUpdate => StatusUpdatePayload::read(value, "", &mut issues)
            .map(|p| serde_json::to_value(p).unwrap_or(Value::Null)),
        PayloadKind::HandoffRequest => HandoffRequestPayload::read(value, "", &mut issues)
            .map(|p| serde_json::to_value(p).unwrap_or(Value::Null)),
        PayloadKind::HandoffAccepted | PayloadKind::HandoffRejected => {
            let accepted = kind == PayloadKind::HandoffAccepted;
            HandoffAckPayload::read(value, "", &mut issues, accepted)
                .map(|p| serde_json::to_value(p).unwrap_or(Value::Null))
        }
        PayloadKind::TestReport => TestReport::read(value, "", &mut issues)
            .map(|p| serde_json::to_value(p).unwrap_or(Value::Null)),
    };
    match encoded {
        Some(value) if issues.is_empty() => Ok(value),
        _ => {
            if issues.is_empty() {
                issues.push(Issue::new("", IssueKind::InvalidType, "invalid payload"));
            }
            Err(issues)
        }
    }
}
