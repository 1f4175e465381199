//! `ski aof validate`: one input checked as an envelope, a payload, a run artifact, a task file
//! or an event line, and the report it prints.

use std::path::PathBuf;

use anyhow::anyhow;
use clap::{Args, ValueEnum};
use serde::Serialize;
use serde_json::{Value, json};

use super::{Io, print_json, read_input, to_json};
use crate::aof::envelope::{Envelope, PayloadKind, validate_payload};
use crate::aof::error::describe;
use crate::aof::event::Event;
use crate::aof::message::PREFIX;
use crate::aof::run::{RunArtifact, RunHeartbeat, RunResult};
use crate::aof::task::Task;
use crate::aof::validation::{Issue, IssueKind};
use crate::exit::{CommandError, CommandResult};

#[derive(Debug, Clone, Copy, ValueEnum)]
pub(super) enum ValidateKind {
    /// An envelope (JSON, optionally with the `AOF/1 ` prefix).
    Envelope,
    /// A CompletionReportPayload.
    CompletionReport,
    /// A StatusUpdatePayload.
    StatusUpdate,
    /// A HandoffRequestPayload.
    HandoffRequest,
    /// A HandoffAckPayload for handoff.accepted.
    HandoffAccepted,
    /// A HandoffAckPayload for handoff.rejected.
    HandoffRejected,
    /// A TestReport.
    TestReport,
    /// run_result.json.
    RunResult,
    /// run.json.
    Run,
    /// run_heartbeat.json.
    Heartbeat,
    /// A task file (Markdown with YAML frontmatter).
    Task,
    /// One event-log line.
    Event,
}

#[derive(Debug, Args)]
pub(super) struct ValidateArgs {
    /// What the input is.
    #[arg(long, value_enum, default_value = "envelope")]
    kind: ValidateKind,
    /// Read this file instead of stdin.
    file: Option<PathBuf>,
}

#[derive(Serialize)]
struct Validation {
    valid: bool,
    kind: String,
    #[serde(rename = "type", skip_serializing_if = "Option::is_none")]
    message_type: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    known: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    value: Option<Value>,
    errors: Vec<Issue>,
}

/// Validates text as `kind`; returns the printed report.
fn validate_text(kind: ValidateKind, text: &str) -> Validation {
    let kind_name = kind
        .to_possible_value()
        .map(|v| v.get_name().to_owned())
        .unwrap_or_default();
    let mut report = Validation {
        valid: false,
        kind: kind_name,
        message_type: None,
        known: None,
        value: None,
        errors: Vec::new(),
    };
    let parse = |text: &str| -> Result<Value, Vec<Issue>> {
        serde_json::from_str(text.trim()).map_err(|error| {
            vec![Issue::new(
                "",
                IssueKind::InvalidJson,
                format!("invalid JSON: {error}"),
            )]
        })
    };
    let payload = |kind: PayloadKind| parse(text).and_then(|v| validate_payload(kind, &v));
    let result: Result<Value, Vec<Issue>> = match kind {
        ValidateKind::Envelope => {
            let trimmed = text.trim();
            parse(trimmed.strip_prefix(PREFIX).unwrap_or(trimmed)).and_then(|value| {
                Envelope::from_value(&value).map(|envelope| {
                    report.message_type = Some(envelope.kind().to_owned());
                    report.known = Some(envelope.is_known());
                    envelope.to_value()
                })
            })
        }
        ValidateKind::CompletionReport => payload(PayloadKind::CompletionReport),
        ValidateKind::StatusUpdate => payload(PayloadKind::StatusUpdate),
        ValidateKind::HandoffRequest => payload(PayloadKind::HandoffRequest),
        ValidateKind::HandoffAccepted => payload(PayloadKind::HandoffAccepted),
        ValidateKind::HandoffRejected => payload(PayloadKind::HandoffRejected),
        ValidateKind::TestReport => payload(PayloadKind::TestReport),
        ValidateKind::RunResult => {
            parse(text).and_then(|v| RunResult::from_value(&v).map(|r| to_json(&r)))
        }
        ValidateKind::Run => {
            parse(text).and_then(|v| RunArtifact::from_value(&v).map(|r| to_json(&r)))
        }
        ValidateKind::Heartbeat => {
            parse(text).and_then(|v| RunHeartbeat::from_value(&v).map(|r| to_json(&r)))
        }
        ValidateKind::Event => parse(text).and_then(|value| {
            Event::from_value(&value)
                .map(|event| event.to_value())
                .ok_or_else(|| {
                    vec![Issue::new(
                        "",
                        IssueKind::InvalidType,
                        "an event needs eventId (positive integer), type, timestamp (ISO 8601 \
                         UTC), actor, an optional valid taskId and an object payload",
                    )]
                })
        }),
        ValidateKind::Task => Task::parse(text)
            .map(|task| json!({ "frontmatter": task.frontmatter, "body": task.body }))
            .map_err(|error| vec![Issue::new("", IssueKind::InvalidTaskFile, describe(&error))]),
    };
    match result {
        Ok(value) => {
            report.valid = true;
            report.value = Some(value);
        }
        Err(issues) => report.errors = issues,
    }
    report
}

/// Validates `text` as `kind` and returns the report as JSON (used by golden tests).
pub fn validation_report(kind: &str, text: &str) -> Option<Value> {
    let kind = ValidateKind::from_str(kind, false).ok()?;
    Some(to_json(&validate_text(kind, text)))
}

pub(super) fn validate(io: &mut Io<'_>, args: &ValidateArgs) -> CommandResult {
    let text = read_input(io, args.file.as_deref())?;
    let report = validate_text(args.kind, &text);
    print_json(io, &report)?;
    if report.valid {
        Ok(())
    } else {
        let first = report
            .errors
            .first()
            .map(|issue| issue.message.clone())
            .unwrap_or_default();
        Err(CommandError::invalid_input(anyhow!(
            "invalid {}: {first}",
            report.kind
        )))
    }
}
