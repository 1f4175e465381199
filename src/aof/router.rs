//! The protocol router: logs what it receives, serialises handlers per task (across processes,
//! through the task's lock file) and dispatches each message type to its handler.
//!
//! Every known message first logs `protocol.message.received`; an unknown type logs
//! `protocol.message.unknown` and reaches no handler. A refused message logs
//! `protocol.message.rejected` with a `reason` (`invalid_json`, `invalid_envelope`,
//! `task_not_found`, `taskId_mismatch`, `parent_not_found`, `nested_delegation`,
//! `unassigned_task`, `unauthorized_agent`). A handler that fails on I/O logs
//! `protocol.message.error` and the router carries on with the next message.

use std::path::{Component, Path};

use serde::Serialize;
use serde_json::{Value, json};

use super::clock::Clock;
use super::completion::{
    AppliedTransition, apply_steps, outcome_reason, resolve_completion_transitions,
};
use super::data_dir::{DataDir, Journal};
use super::envelope::{
    Body, CompletionReportPayload, Envelope, HandoffAckPayload, HandoffRequestPayload,
    StatusUpdatePayload,
};
use super::error::{AofError, describe};
use super::event::{Event, kind};
use super::handoff::{MAX_DELEGATION_DEPTH, write_artifacts};
use super::message::{Parsed, Rejection, parse_input};
use super::run::{HANDOFF_REF, RunResult};
use super::task::{Task, TaskStatus, is_valid_transition, work_log_line};
use super::task_id::TaskId;
use super::timestamp::Timestamp;
use crate::storage::inside_root::Root;

/// The actor of events the router logs on its own behalf.
pub const SYSTEM_ACTOR: &str = "system";

/// Router options.
#[derive(Debug, Clone, Copy, Default)]
pub struct RouterConfig {
    /// Require `fromAgent` to equal the task's lease agent, or failing that its routing agent
    /// (E-AOF-15). Off by default: the specification does not ask for it.
    pub authorize: bool,
}

/// How a message ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RouteOutcome {
    /// A handler processed it.
    Handled,
    /// It was not an AOF/1 message.
    Ignored,
    /// It was refused; see the reason.
    Rejected,
    /// Its type has no handler.
    Unknown,
    /// Its handler failed; the error was logged.
    Failed,
}

/// What routing one message did.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RouteReport {
    /// How it ended.
    pub outcome: RouteOutcome,
    /// The message type, when known.
    #[serde(rename = "type", skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// The task, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub task_id: Option<String>,
    /// Why it was rejected, or the error.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Status changes made.
    pub transitions: Vec<AppliedTransition>,
    /// Events logged, in order.
    pub events: Vec<Event>,
}

impl RouteReport {
    fn new(outcome: RouteOutcome) -> Self {
        Self {
            outcome,
            kind: None,
            task_id: None,
            reason: None,
            transitions: Vec::new(),
            events: Vec::new(),
        }
    }
}

/// A handler's verdict.
enum Verdict {
    Done(Vec<AppliedTransition>),
    Rejected(String),
}

/// The router of one data dir.
pub struct Router<'c> {
    data: DataDir,
    clock: &'c dyn Clock,
    config: RouterConfig,
}

impl<'c> Router<'c> {
    /// A router over `data` reading time from `clock`.
    pub fn new(data: DataDir, clock: &'c dyn Clock, config: RouterConfig) -> Self {
        Self {
            data,
            clock,
            config,
        }
    }

    /// The data dir.
    pub fn data(&self) -> &DataDir {
        &self.data
    }

    /// Parses raw input (an event object, `AOF/1 ` text or plain JSON) and routes it.
    pub fn route_input(&self, text: &str) -> Result<RouteReport, AofError> {
        self.route_parsed(parse_input(text))
    }

    /// Routes the result of parsing; rejections are logged with their reason.
    pub fn route_parsed(&self, parsed: Parsed) -> Result<RouteReport, AofError> {
        match parsed {
            Parsed::NotProtocol => Ok(RouteReport::new(RouteOutcome::Ignored)),
            Parsed::Envelope(envelope, _) => self.route(&envelope),
            Parsed::Rejected(rejection) => {
                let now = self.clock.now();
                let mut journal = Journal::new(&self.data.events, now);
                let task_id = match &rejection {
                    Rejection::InvalidEnvelope { task_id, .. } => {
                        task_id.as_deref().and_then(|id| TaskId::parse(id).ok())
                    }
                    Rejection::InvalidJson { .. } => None,
                };
                let payload = serde_json::to_value(&rejection).unwrap_or(Value::Null);
                let reason = payload
                    .get("reason")
                    .and_then(Value::as_str)
                    .map(str::to_owned);
                journal.emit(
                    kind::MESSAGE_REJECTED,
                    SYSTEM_ACTOR,
                    task_id.as_ref(),
                    payload,
                )?;
                let mut report = RouteReport::new(RouteOutcome::Rejected);
                report.reason = reason;
                report.task_id = task_id.map(|id| id.to_string());
                report.events = journal.recorded;
                Ok(report)
            }
        }
    }

    /// Routes a validated envelope to its handler, under the task's lock.
    pub fn route(&self, envelope: &Envelope) -> Result<RouteReport, AofError> {
        let now = self.clock.now();
        let mut journal = Journal::new(&self.data.events, now);
        let mut report = RouteReport::new(RouteOutcome::Handled);
        report.kind = Some(envelope.kind().to_owned());
        report.task_id = Some(envelope.task_id.to_string());
        let actor = envelope.from_agent.as_str();
        let task_id = &envelope.task_id;
        if !envelope.is_known() {
            journal.emit(
                kind::MESSAGE_UNKNOWN,
                actor,
                Some(task_id),
                json!({ "type": envelope.kind() }),
            )?;
            report.outcome = RouteOutcome::Unknown;
            report.events = journal.recorded;
            return Ok(report);
        }
        journal.emit(
            kind::MESSAGE_RECEIVED,
            actor,
            Some(task_id),
            json!({ "type": envelope.kind() }),
        )?;
        let result = self.dispatch(envelope, &mut journal, now);
        match result {
            Ok(Verdict::Done(transitions)) => report.transitions = transitions,
            Ok(Verdict::Rejected(reason)) => {
                report.outcome = RouteOutcome::Rejected;
                report.reason = Some(reason);
            }
            Err(error) => {
                let text = describe(&error);
                journal.emit(
                    kind::MESSAGE_ERROR,
                    SYSTEM_ACTOR,
                    Some(task_id),
                    json!({ "type": envelope.kind(), "error": text }),
                )?;
                report.outcome = RouteOutcome::Failed;
                report.reason = Some(text);
            }
        }
        report.events = journal.recorded;
        Ok(report)
    }

    fn dispatch(
        &self,
        envelope: &Envelope,
        journal: &mut Journal<'_>,
        now: Timestamp,
    ) -> Result<Verdict, AofError> {
        let payload_task = match &envelope.body {
            Body::StatusUpdate(p) => Some(&p.task_id),
            Body::HandoffRequest(p) => Some(&p.task_id),
            Body::HandoffAccepted(p) | Body::HandoffRejected(p) => Some(&p.task_id),
            Body::CompletionReport(_) | Body::Unknown { .. } => None,
        };
        if let Some(payload_task) = payload_task
            && payload_task != &envelope.task_id
        {
            return self.reject(
                journal,
                envelope,
                "taskId_mismatch",
                json!({ "payloadTaskId": payload_task }),
            );
        }
        let _lock = self.data.store.lock(&envelope.task_id)?;
        let Some(mut task) = self.data.store.load(&envelope.task_id)? else {
            let verdict = self.reject(journal, envelope, "task_not_found", json!({}))?;
            if matches!(envelope.body, Body::HandoffRequest(_)) {
                journal.emit(
                    kind::DELEGATION_REJECTED,
                    &envelope.from_agent,
                    Some(&envelope.task_id),
                    json!({ "reason": "task_not_found" }),
                )?;
            }
            return Ok(verdict);
        };
        if self.config.authorize
            && let Some(verdict) = self.authorize(journal, envelope, &task)?
        {
            return Ok(verdict);
        }
        match &envelope.body {
            Body::CompletionReport(p) => self.completion(journal, envelope, p, &mut task, now),
            Body::StatusUpdate(p) => self.status_update(journal, envelope, p, &mut task, now),
            Body::HandoffRequest(p) => self.handoff_request(journal, envelope, p, &mut task, now),
            Body::HandoffAccepted(p) => {
                self.handoff_ack(journal, envelope, p, &mut task, true, now)
            }
            Body::HandoffRejected(p) => {
                self.handoff_ack(journal, envelope, p, &mut task, false, now)
            }
            Body::Unknown { .. } => Ok(Verdict::Done(Vec::new())),
        }
    }

    /// Logs `protocol.message.rejected` with `reason` and extra payload fields.
    fn reject(
        &self,
        journal: &mut Journal<'_>,
        envelope: &Envelope,
        reason: &str,
        extra: Value,
    ) -> Result<Verdict, AofError> {
        let mut payload = json!({ "reason": reason, "type": envelope.kind() });
        if let (Some(map), Value::Object(extra)) = (payload.as_object_mut(), extra) {
            map.extend(extra);
        }
        journal.emit(
            kind::MESSAGE_REJECTED,
            &envelope.from_agent,
            Some(&envelope.task_id),
            payload,
        )?;
        Ok(Verdict::Rejected(reason.to_owned()))
    }

    fn authorize(
        &self,
        journal: &mut Journal<'_>,
        envelope: &Envelope,
        task: &Task,
    ) -> Result<Option<Verdict>, AofError> {
        let front = &task.frontmatter;
        let expected = front
            .lease
            .as_ref()
            .map(|lease| lease.agent.as_str())
            .or(front.routing.agent.as_deref());
        match expected {
            None => self
                .reject(
                    journal,
                    envelope,
                    "unassigned_task",
                    json!({ "sender": envelope.from_agent }),
                )
                .map(Some),
            Some(agent) if agent != envelope.from_agent => self
                .reject(
                    journal,
                    envelope,
                    "unauthorized_agent",
                    json!({ "expected": agent, "received": envelope.from_agent }),
                )
                .map(Some),
            Some(_) => Ok(None),
        }
    }

    fn completion(
        &self,
        journal: &mut Journal<'_>,
        envelope: &Envelope,
        payload: &CompletionReportPayload,
        task: &mut Task,
        now: Timestamp,
    ) -> Result<Verdict, AofError> {
        let companion = self.data.store.companion_dir(task);
        if !summary_exists(&companion, &payload.summary_ref) {
            journal.emit(
                kind::MESSAGE_WARNING,
                &envelope.from_agent,
                Some(task.id()),
                json!({
                    "reason": "summary_file_not_found",
                    "summaryRef": payload.summary_ref,
                    "type": envelope.kind(),
                }),
            )?;
        }
        let result = RunResult {
            task_id: task.id().clone(),
            agent_id: envelope.from_agent.clone(),
            completed_at: envelope.sent_at,
            outcome: payload.outcome,
            summary_ref: payload.summary_ref.clone(),
            handoff_ref: HANDOFF_REF.to_owned(),
            deliverables: payload.deliverables.clone(),
            tests: payload.tests,
            blockers: payload.blockers.clone(),
            notes: payload.notes.clone(),
        };
        self.data.runs.write_result(task.id(), &result)?;
        let steps = resolve_completion_transitions(
            task.status(),
            payload.outcome,
            task.frontmatter.review_required(),
        );
        let reason = outcome_reason(payload.outcome, &payload.blockers, &payload.notes);
        let applied = apply_steps(
            &self.data,
            journal,
            task,
            &steps,
            &reason,
            &envelope.from_agent,
            now,
        )?;
        journal.emit(
            kind::TASK_COMPLETED,
            &envelope.from_agent,
            Some(task.id()),
            json!({
                "outcome": payload.outcome,
                "status": task.status(),
                "transitions": applied.len(),
            }),
        )?;
        Ok(Verdict::Done(applied))
    }

    fn status_update(
        &self,
        journal: &mut Journal<'_>,
        envelope: &Envelope,
        payload: &StatusUpdatePayload,
        task: &mut Task,
        now: Timestamp,
    ) -> Result<Verdict, AofError> {
        let actor = payload.agent_id.as_str();
        let blockers = payload.blockers.clone().unwrap_or_default();
        let mut applied = Vec::new();
        if let Some(to) = payload.status
            && to != task.status()
        {
            let from = task.status();
            if is_valid_transition(from, to) {
                let reason = if !blockers.is_empty() {
                    blockers.join("; ")
                } else {
                    payload
                        .notes
                        .clone()
                        .or_else(|| payload.progress.clone())
                        .unwrap_or_else(|| "status_update".to_owned())
                };
                applied = apply_steps(&self.data, journal, task, &[to], &reason, actor, now)?;
            } else {
                journal.emit(
                    kind::MESSAGE_WARNING,
                    actor,
                    Some(task.id()),
                    json!({
                        "reason": "invalid_transition",
                        "from": from,
                        "to": to,
                        "type": envelope.kind(),
                    }),
                )?;
            }
        }
        let has_text =
            payload.progress.is_some() || payload.notes.is_some() || !blockers.is_empty();
        if applied.is_empty() && has_text {
            let line = work_log_line(
                now,
                payload.progress.as_deref(),
                payload.notes.as_deref(),
                &blockers,
            );
            task.append_work_log(&line, now);
            self.data.store.save_recorded(task, |task| {
                journal.emit(
                    kind::TASK_UPDATED,
                    actor,
                    Some(task.id()),
                    json!({ "workLog": line }),
                )
            })?;
        }
        Ok(Verdict::Done(applied))
    }

    fn handoff_request(
        &self,
        journal: &mut Journal<'_>,
        envelope: &Envelope,
        payload: &HandoffRequestPayload,
        child: &mut Task,
        now: Timestamp,
    ) -> Result<Verdict, AofError> {
        let delegation_rejected = |journal: &mut Journal<'_>, reason: &str, extra: Value| {
            let mut body = json!({ "reason": reason, "parentTaskId": payload.parent_task_id });
            if let (Some(map), Value::Object(extra)) = (body.as_object_mut(), extra) {
                map.extend(extra);
            }
            journal.emit(
                kind::DELEGATION_REJECTED,
                &envelope.from_agent,
                Some(&envelope.task_id),
                body,
            )
        };
        let Some(parent) = self.data.store.read(&payload.parent_task_id)? else {
            let verdict = self.reject(
                journal,
                envelope,
                "parent_not_found",
                json!({ "parentTaskId": payload.parent_task_id }),
            )?;
            delegation_rejected(journal, "parent_not_found", json!({}))?;
            return Ok(verdict);
        };
        let parent_depth = parent.frontmatter.delegation_depth();
        if parent_depth + 1 > MAX_DELEGATION_DEPTH {
            let extra = json!({ "parentDepth": parent_depth, "maxDepth": MAX_DELEGATION_DEPTH });
            let verdict = self.reject(journal, envelope, "nested_delegation", extra.clone())?;
            delegation_rejected(journal, "nested_delegation", extra)?;
            return Ok(verdict);
        }
        child
            .frontmatter
            .metadata
            .insert("delegationDepth".into(), json!(parent_depth + 1));
        child.frontmatter.updated_at = now;
        let relative = |path: &Path| {
            path.strip_prefix(&self.data.root)
                .unwrap_or(path)
                .display()
                .to_string()
        };
        // The depth is saved only with the event; the artifacts come first, so the event never
        // names files that are not there (a failed event leaves them, and a retry rewrites them).
        self.data.store.save_recorded(child, |child| {
            let companion = self.data.store.companion_dir(child);
            let (json_path, md_path) = write_artifacts(&companion, payload)?;
            journal.emit(
                kind::DELEGATION_REQUESTED,
                &envelope.from_agent,
                Some(child.id()),
                json!({
                    "parentTaskId": payload.parent_task_id,
                    "fromAgent": payload.from_agent,
                    "toAgent": payload.to_agent,
                    "delegationDepth": parent_depth + 1,
                    "handoffJson": relative(&json_path),
                    "handoffMd": relative(&md_path),
                }),
            )
        })?;
        Ok(Verdict::Done(Vec::new()))
    }

    fn handoff_ack(
        &self,
        journal: &mut Journal<'_>,
        envelope: &Envelope,
        payload: &HandoffAckPayload,
        task: &mut Task,
        accepted: bool,
        now: Timestamp,
    ) -> Result<Verdict, AofError> {
        if accepted {
            journal.emit(
                kind::DELEGATION_ACCEPTED,
                &envelope.from_agent,
                Some(task.id()),
                json!({ "reason": payload.reason }),
            )?;
            return Ok(Verdict::Done(Vec::new()));
        }
        let reason = payload
            .reason
            .clone()
            .unwrap_or_else(|| "handoff_rejected".to_owned());
        let applied = apply_steps(
            &self.data,
            journal,
            task,
            &[TaskStatus::Blocked],
            &reason,
            &envelope.from_agent,
            now,
        )?;
        journal.emit(
            kind::DELEGATION_REJECTED,
            &envelope.from_agent,
            Some(task.id()),
            json!({ "reason": reason }),
        )?;
        Ok(Verdict::Done(applied))
    }
}

/// Whether `summary_ref` names an existing regular file inside the task's companion directory;
/// absolute paths, `..` and links out of it never reach outside it (E-AOF-13).
fn summary_exists(companion: &Path, summary_ref: &str) -> bool {
    let relative = Path::new(summary_ref);
    let contained = relative
        .components()
        .all(|component| matches!(component, Component::Normal(_) | Component::CurDir));
    contained
        && !summary_ref.is_empty()
        && Root::new(companion)
            .and_then(|root| root.resolve(relative))
            .is_ok_and(|resolved| resolved.existing_file().is_ok())
}
