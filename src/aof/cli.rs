//! `ski aof`: the command-line adapter over the AOF/1 reference implementation.
//!
//! Every command prints JSON on stdout. Exit codes: 0 success, 2 invalid input or a rejected
//! message, 3 an unusable data dir, 5 a handler failure. The full contract is in
//! `conformance/targets/aof-adapter.md`.

use std::collections::BTreeMap;
use std::io::{self, BufRead, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context, anyhow};
use clap::{Args, Subcommand, ValueEnum};
use serde::Serialize;
use serde_json::{Value, json};

use super::clock::{Clock, FixedClock, SystemClock};
use super::completion::resolve_completion_transitions;
use super::data_dir::{DEFAULT_RUNS_DIR, DataDir, Journal};
use super::envelope::{Envelope, OUTCOME_VALUES, Outcome, PayloadKind, validate_payload};
use super::error::{AofError, describe};
use super::event::{Event, kind};
use super::message::PREFIX;
use super::router::{RouteOutcome, Router, RouterConfig};
use super::run::{RunArtifact, RunHeartbeat, RunResult, RunStatus};
use super::scheduler::{DEFAULT_HEARTBEAT_TTL_MS, PollConfig, poll, session_end};
use super::store::{NewTask, StoreError};
use super::task::{Lease, Priority, Routing, STATUS_VALUES, Task, TaskStatus};
use super::task_id::TaskId;
use super::timestamp::Timestamp;
use super::validation::{Issue, IssueKind};

mod batch;
use crate::exit::{CommandError, CommandResult};

/// What `ski aof` is, in one line (also the stub `ski --help` lists before it is built).
pub const ABOUT: &str = "AOF/1 agent task protocol: validate envelopes, route messages into a \
filesystem task store, run the scheduler poll and session-end processing";

const LONG_ABOUT: &str =
    "AOF/1 agent task protocol: the reference implementation as a command-line adapter.

A data dir holds tasks/<status>/<TASK-id>.md (YAML frontmatter + Markdown body) with a companion
directory tasks/<status>/<TASK-id>/{inputs,work,outputs,subtasks}/, runs/<TASK-id>/ (run.json,
run_heartbeat.json, run_result.json) and events/YYYY-MM-DD.jsonl (one event per line).

Example:
  ski aof task create --data-dir D --title Parser --status in-progress
  ski aof route --data-dir D --now 2026-02-09T21:05:00.000Z < message.json
  ski aof events --data-dir D --type task.transitioned

Every command prints JSON on stdout. Exit codes: 0 ok; 2 invalid input or a rejected message;
3 unusable data dir; 5 a handler failed (the failure is also logged as protocol.message.error).
Time comes from --now (ISO 8601 UTC) when given, else from the system clock.";

/// `ski aof`.
#[derive(Debug, Args)]
#[command(about = ABOUT, long_about = LONG_ABOUT)]
pub struct AofArgs {
    #[command(subcommand)]
    command: AofCommand,
}

#[derive(Debug, Subcommand)]
enum AofCommand {
    /// Validate one input (stdin or FILE) and print {valid, kind, value|errors}; exit 2 when invalid.
    Validate(ValidateArgs),
    /// Route one message from stdin (an event object, `AOF/1 {...}` text or plain JSON);
    /// exit 2 when it is rejected.
    Route(RouteArgs),
    /// Run one scheduler poll: detect stale heartbeats of in-progress tasks and recover them.
    Poll(PollArgs),
    /// Apply the run_result.json of every in-progress task (what a session end does).
    SessionEnd(DataArgs),
    /// Manage tasks.
    #[command(subcommand)]
    Task(TaskCommand),
    /// Write and read run artifacts.
    #[command(subcommand)]
    Run(RunCommand),
    /// Print the event log as a JSON array, ordered by eventId.
    Events(EventsArgs),
    /// Print the transitions a completion outcome maps to from a status.
    Resolve(ResolveArgs),
    /// Run many commands in this one process: each stdin line {"args": [...], "stdin": "..."}
    /// gets one line {"code", "stdout", "stderr"}.
    Batch,
}

/// Where the data lives and what time it is.
#[derive(Debug, Args, Clone)]
struct DataArgs {
    /// The data dir (created when absent).
    #[arg(long, env = "SKI_AOF_DATA_DIR")]
    data_dir: PathBuf,
    /// The run artifact directory, relative to the data dir.
    #[arg(long, default_value = DEFAULT_RUNS_DIR)]
    runs_dir: PathBuf,
    /// The current time, ISO 8601 UTC (default: the system clock).
    #[arg(long)]
    now: Option<String>,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum ValidateKind {
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
struct ValidateArgs {
    /// What the input is.
    #[arg(long, value_enum, default_value = "envelope")]
    kind: ValidateKind,
    /// Read this file instead of stdin.
    file: Option<PathBuf>,
}

#[derive(Debug, Args)]
struct RouteArgs {
    #[command(flatten)]
    data: DataArgs,
    /// Require fromAgent to be the task's lease agent or routing agent.
    #[arg(long)]
    authorize: bool,
    /// Read one message per line and print one compact report per line; exit 0 unless fatal.
    #[arg(long)]
    ndjson: bool,
}

#[derive(Debug, Args)]
struct PollArgs {
    #[command(flatten)]
    data: DataArgs,
    /// Plan only: report actions, change nothing.
    #[arg(long)]
    dry_run: bool,
    /// TTL for heartbeats that carry no expiresAt.
    #[arg(long, default_value_t = DEFAULT_HEARTBEAT_TTL_MS)]
    heartbeat_ttl_ms: i64,
}

#[derive(Debug, Subcommand)]
enum TaskCommand {
    /// Create a task (status backlog unless --status) with its companion directories.
    Create(TaskCreateArgs),
    /// Print one task: path, frontmatter, body and Work Log.
    Show(TaskShowArgs),
    /// Print every task (frontmatter and path), optionally of one status.
    List(TaskListArgs),
    /// Move a task to another status (checked against the transition table).
    Transition(TaskTransitionArgs),
}

#[derive(Debug, Args)]
struct TaskCreateArgs {
    #[command(flatten)]
    data: DataArgs,
    /// The title.
    #[arg(long)]
    title: String,
    /// A fixed id (default: the next TASK-<date>-NNN of --now's date).
    #[arg(long)]
    id: Option<String>,
    /// The first status.
    #[arg(long, default_value = "backlog")]
    status: String,
    /// The project.
    #[arg(long, default_value = "default")]
    project: String,
    /// Who creates it.
    #[arg(long, default_value = "ski")]
    created_by: String,
    /// critical, high, normal or low.
    #[arg(long, default_value = "normal")]
    priority: String,
    /// Give the task a lease held by this agent.
    #[arg(long)]
    lease_agent: Option<String>,
    /// The lease's TTL.
    #[arg(long, default_value_t = 600_000)]
    lease_ttl_ms: i64,
    /// routing.agent.
    #[arg(long)]
    routing_agent: Option<String>,
    /// The parent task.
    #[arg(long)]
    parent_id: Option<String>,
    /// Metadata as a JSON object, e.g. '{"reviewRequired":false}'.
    #[arg(long)]
    metadata: Option<String>,
    /// The Markdown body.
    #[arg(long, default_value = "")]
    body: String,
}

#[derive(Debug, Args)]
struct TaskShowArgs {
    #[command(flatten)]
    data: DataArgs,
    /// The task id.
    id: String,
}

#[derive(Debug, Args)]
struct TaskListArgs {
    #[command(flatten)]
    data: DataArgs,
    /// Only this status.
    #[arg(long)]
    status: Option<String>,
}

#[derive(Debug, Args)]
struct TaskTransitionArgs {
    #[command(flatten)]
    data: DataArgs,
    /// The task id.
    id: String,
    /// The new status.
    status: String,
    /// Why (recorded in task.transitioned).
    #[arg(long, default_value = "manual")]
    reason: String,
    /// The actor recorded in the event.
    #[arg(long, default_value = "cli")]
    actor: String,
}

#[derive(Debug, Subcommand)]
enum RunCommand {
    /// Write run.json (status running) for a task.
    Start(RunAgentArgs),
    /// Write run_heartbeat.json: expiresAt = now + ttl, or exactly --expires-at.
    Heartbeat(RunHeartbeatArgs),
    /// Validate a run_result.json from stdin and write it for the task.
    Result(RunTaskArgs),
    /// Mark run.json failed with metadata.expiredAt and metadata.expiredReason.
    Expire(RunExpireArgs),
    /// Print {run, heartbeat, runResult} (null when missing or unreadable).
    Show(RunTaskArgs),
}

#[derive(Debug, Args)]
struct RunTaskArgs {
    #[command(flatten)]
    data: DataArgs,
    /// The task id.
    #[arg(long)]
    task: String,
}

#[derive(Debug, Args)]
struct RunAgentArgs {
    #[command(flatten)]
    data: DataArgs,
    /// The task id.
    #[arg(long)]
    task: String,
    /// The agent.
    #[arg(long)]
    agent: String,
}

#[derive(Debug, Args)]
struct RunHeartbeatArgs {
    #[command(flatten)]
    data: DataArgs,
    /// The task id.
    #[arg(long)]
    task: String,
    /// The agent.
    #[arg(long)]
    agent: String,
    /// The heartbeat TTL.
    #[arg(long, default_value_t = DEFAULT_HEARTBEAT_TTL_MS)]
    ttl_ms: i64,
    /// Write this expiresAt instead of now + ttl.
    #[arg(long)]
    expires_at: Option<String>,
}

#[derive(Debug, Args)]
struct RunExpireArgs {
    #[command(flatten)]
    data: DataArgs,
    /// The task id.
    #[arg(long)]
    task: String,
    /// The expiry reason.
    #[arg(long, default_value = "stale_heartbeat")]
    reason: String,
}

#[derive(Debug, Args)]
struct EventsArgs {
    #[command(flatten)]
    data: DataArgs,
    /// Only events of this type.
    #[arg(long = "type")]
    kind: Option<String>,
    /// Only events of this task.
    #[arg(long)]
    task: Option<String>,
}

#[derive(Debug, Args)]
struct ResolveArgs {
    /// The task's current status.
    #[arg(long)]
    status: String,
    /// The completion outcome.
    #[arg(long)]
    outcome: String,
    /// metadata.reviewRequired.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    review_required: bool,
}

/// Where a command reads its input and writes its JSON: the process's stdin and stdout, or one
/// request of a batch.
struct Io<'a> {
    input: &'a mut dyn BufRead,
    output: &'a mut dyn Write,
}

/// Runs `ski aof`.
pub fn run(args: AofArgs) -> CommandResult {
    if let AofCommand::Batch = args.command {
        return batch::serve(io::stdin().lock(), io::stdout().lock());
    }
    let stdin = io::stdin();
    let mut input = stdin.lock();
    let mut output = io::stdout().lock();
    execute(
        &mut Io {
            input: &mut input,
            output: &mut output,
        },
        args.command,
    )
}

/// Runs one command with `io` as its stdin and stdout.
fn execute(io: &mut Io<'_>, command: AofCommand) -> CommandResult {
    match command {
        AofCommand::Batch => Err(CommandError::invalid_input(anyhow!(
            "batch cannot be run inside a batch"
        ))),
        AofCommand::Validate(args) => validate(io, &args),
        AofCommand::Route(args) => route(io, &args),
        AofCommand::Poll(args) => {
            let (data, clock) = open(&args.data)?;
            let config = PollConfig {
                dry_run: args.dry_run,
                heartbeat_ttl_ms: args.heartbeat_ttl_ms,
            };
            let result = poll(&data, clock.as_ref(), config).map_err(failure)?;
            print_json(io, &result)
        }
        AofCommand::SessionEnd(args) => {
            let (data, clock) = open(&args)?;
            let report = session_end(&data, clock.as_ref()).map_err(failure)?;
            print_json(io, &report)
        }
        AofCommand::Task(command) => task(io, command),
        AofCommand::Run(command) => run_artifacts(io, command),
        AofCommand::Events(args) => events(io, &args),
        AofCommand::Resolve(args) => {
            let status = parse_status(&args.status)?;
            let outcome = Outcome::parse(&args.outcome).ok_or_else(|| {
                CommandError::invalid_input(anyhow!(
                    "outcome must be one of: {OUTCOME_VALUES}, got {:?}",
                    args.outcome
                ))
            })?;
            print_json(
                io,
                &resolve_completion_transitions(status, outcome, args.review_required),
            )
        }
    }
}

fn print_json(io: &mut Io<'_>, value: &impl Serialize) -> CommandResult {
    let text = serde_json::to_string_pretty(value)
        .map_err(|error| CommandError::internal(anyhow!(error)))?;
    writeln!(io.output, "{text}")
        .and_then(|()| io.output.flush())
        .context("writing to stdout")
        .map_err(CommandError::internal)
}

fn failure(error: AofError) -> CommandError {
    match &error {
        AofError::Store(StoreError::NotFound(_) | StoreError::InvalidTransition { .. })
        | AofError::Store(StoreError::Exists(_)) => CommandError::invalid_input(error),
        _ => CommandError::internal(error),
    }
}

fn parse_now(now: Option<&str>) -> CommandResult<Box<dyn Clock>> {
    match now {
        None => Ok(Box::new(SystemClock)),
        Some(text) => Timestamp::parse(text)
            .map(|ts| Box::new(FixedClock(ts)) as Box<dyn Clock>)
            .map_err(|error| CommandError::invalid_input(anyhow!("--now {error}"))),
    }
}

fn open(args: &DataArgs) -> CommandResult<(DataDir, Box<dyn Clock>)> {
    let clock = parse_now(args.now.as_deref())?;
    let data = DataDir::open(&args.data_dir, &args.runs_dir).map_err(|error| {
        CommandError::configuration(
            anyhow!(error).context(format!("cannot open data dir {}", args.data_dir.display())),
        )
    })?;
    Ok((data, clock))
}

fn parse_status(text: &str) -> CommandResult<TaskStatus> {
    TaskStatus::parse(text).ok_or_else(|| {
        CommandError::invalid_input(anyhow!(
            "status must be one of: {STATUS_VALUES}, got {text:?}"
        ))
    })
}

fn parse_task_id(text: &str) -> CommandResult<TaskId> {
    TaskId::parse(text).map_err(CommandError::invalid_input)
}

fn read_input(io: &mut Io<'_>, file: Option<&Path>) -> CommandResult<String> {
    let mut text = String::new();
    match file {
        Some(path) => {
            text = std::fs::read_to_string(path)
                .with_context(|| format!("cannot read {}", path.display()))
                .map_err(CommandError::invalid_input)?;
        }
        None => {
            io.input
                .read_to_string(&mut text)
                .context("cannot read stdin")
                .map_err(CommandError::invalid_input)?;
        }
    }
    Ok(text)
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

fn to_json(value: &impl Serialize) -> Value {
    serde_json::to_value(value).unwrap_or(Value::Null)
}

/// Validates `text` as `kind` and returns the report as JSON (used by golden tests).
pub fn validation_report(kind: &str, text: &str) -> Option<Value> {
    let kind = ValidateKind::from_str(kind, false).ok()?;
    Some(to_json(&validate_text(kind, text)))
}

fn validate(io: &mut Io<'_>, args: &ValidateArgs) -> CommandResult {
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

fn route(io: &mut Io<'_>, args: &RouteArgs) -> CommandResult {
    let (data, clock) = open(&args.data)?;
    let router = Router::new(
        data,
        clock.as_ref(),
        RouterConfig {
            authorize: args.authorize,
        },
    );
    if args.ndjson {
        let mut lines = String::new();
        loop {
            lines.clear();
            let read = io
                .input
                .read_line(&mut lines)
                .context("cannot read stdin")
                .map_err(CommandError::invalid_input)?;
            if read == 0 {
                break;
            }
            let line = lines.trim_end_matches(['\n', '\r']);
            if line.trim().is_empty() {
                continue;
            }
            let report = match router.route_input(line) {
                Ok(report) => to_json(&report),
                Err(error) => json!({ "outcome": "failed", "reason": describe(&error) }),
            };
            writeln!(io.output, "{report}")
                .and_then(|()| io.output.flush())
                .context("writing to stdout")
                .map_err(CommandError::internal)?;
        }
        return Ok(());
    }
    let text = read_input(io, None)?;
    let report = router.route_input(&text).map_err(failure)?;
    print_json(io, &report)?;
    let reason = report.reason.clone().unwrap_or_default();
    match report.outcome {
        RouteOutcome::Handled | RouteOutcome::Ignored | RouteOutcome::Unknown => Ok(()),
        RouteOutcome::Rejected => Err(CommandError::invalid_input(anyhow!(
            "message rejected: {reason}"
        ))),
        RouteOutcome::Failed => Err(CommandError::internal(anyhow!("handler failed: {reason}"))),
    }
}

fn relative(data: &DataDir, path: &Path) -> String {
    path.strip_prefix(&data.root)
        .unwrap_or(path)
        .display()
        .to_string()
}

fn task_json(data: &DataDir, task: &Task) -> Value {
    let path = data.store.file_path(task.status(), task.id());
    json!({
        "id": task.id(),
        "status": task.status(),
        "path": relative(data, &path),
        "frontmatter": task.frontmatter,
        "body": task.body,
        "workLog": task.work_log(),
    })
}

fn task(io: &mut Io<'_>, command: TaskCommand) -> CommandResult {
    match command {
        TaskCommand::Create(args) => {
            let (data, clock) = open(&args.data)?;
            let now = clock.now();
            let mut new = NewTask::new(args.title.clone());
            new.id = args.id.as_deref().map(parse_task_id).transpose()?;
            new.status = parse_status(&args.status)?;
            new.project = args.project.clone();
            new.created_by = args.created_by.clone();
            new.priority =
                serde_json::from_value::<Priority>(json!(args.priority)).map_err(|_| {
                    CommandError::invalid_input(anyhow!(
                        "priority must be one of: critical, high, normal, low"
                    ))
                })?;
            new.routing = Routing {
                agent: args.routing_agent.clone(),
                ..Routing::default()
            };
            new.lease = args.lease_agent.as_ref().map(|agent| Lease {
                agent: agent.clone(),
                acquired_at: now,
                expires_at: now.plus_ms(args.lease_ttl_ms),
                renew_count: 0,
            });
            new.parent_id = args.parent_id.as_deref().map(parse_task_id).transpose()?;
            if let Some(metadata) = &args.metadata {
                let parsed: BTreeMap<String, Value> = serde_json::from_str(metadata)
                    .context("--metadata must be a JSON object")
                    .map_err(CommandError::invalid_input)?;
                new.metadata = parsed;
            }
            new.body = args.body.clone();
            let task = data.store.create(new, now).map_err(|e| failure(e.into()))?;
            let mut journal = Journal::new(&data.events, now);
            journal
                .emit(
                    kind::TASK_CREATED,
                    &args.created_by,
                    Some(task.id()),
                    json!({ "status": task.status(), "title": task.frontmatter.title }),
                )
                .map_err(failure)?;
            print_json(io, &task_json(&data, &task))
        }
        TaskCommand::Show(args) => {
            let (data, _) = open(&args.data)?;
            let id = parse_task_id(&args.id)?;
            let task = data
                .store
                .read(&id)
                .map_err(|e| failure(e.into()))?
                .ok_or_else(|| CommandError::invalid_input(anyhow!("task {id} not found")))?;
            print_json(io, &task_json(&data, &task))
        }
        TaskCommand::List(args) => {
            let (data, _) = open(&args.data)?;
            let status = args.status.as_deref().map(parse_status).transpose()?;
            let (tasks, broken) = data.store.list().map_err(|e| failure(e.into()))?;
            let tasks: Vec<Value> = tasks
                .iter()
                .filter(|task| status.is_none_or(|s| task.status() == s))
                .map(|task| task_json(&data, task))
                .collect();
            let broken: Vec<String> = broken.iter().map(|e| describe(e)).collect();
            print_json(io, &json!({ "tasks": tasks, "invalidFiles": broken }))
        }
        TaskCommand::Transition(args) => {
            let (data, clock) = open(&args.data)?;
            let now = clock.now();
            let id = parse_task_id(&args.id)?;
            let to = parse_status(&args.status)?;
            let _lock = data.store.lock(&id).map_err(|e| failure(e.into()))?;
            let mut task = data
                .store
                .load(&id)
                .map_err(|e| failure(e.into()))?
                .ok_or_else(|| CommandError::invalid_input(anyhow!("task {id} not found")))?;
            let from = task.status();
            data.store
                .transition(&mut task, to, now)
                .map_err(|e| failure(e.into()))?;
            let mut journal = Journal::new(&data.events, now);
            journal
                .emit(
                    kind::TASK_TRANSITIONED,
                    &args.actor,
                    Some(&id),
                    json!({ "from": from, "to": to, "reason": args.reason }),
                )
                .map_err(failure)?;
            print_json(io, &task_json(&data, &task))
        }
    }
}

fn run_artifacts(io: &mut Io<'_>, command: RunCommand) -> CommandResult {
    match command {
        RunCommand::Start(args) => {
            let (data, clock) = open(&args.data)?;
            let run = RunArtifact {
                task_id: parse_task_id(&args.task)?,
                agent_id: args.agent.clone(),
                started_at: clock.now(),
                status: RunStatus::Running,
                artifact_paths: Default::default(),
                metadata: Default::default(),
            };
            data.runs.write_run(&run).map_err(|e| failure(e.into()))?;
            print_json(io, &run)
        }
        RunCommand::Heartbeat(args) => {
            let (data, clock) = open(&args.data)?;
            let id = parse_task_id(&args.task)?;
            let now = clock.now();
            let heartbeat = match &args.expires_at {
                None => data
                    .runs
                    .write_heartbeat(&id, &args.agent, args.ttl_ms, now)
                    .map_err(|e| failure(e.into()))?,
                Some(text) => {
                    let expires_at = Timestamp::parse(text).map_err(|error| {
                        CommandError::invalid_input(anyhow!("--expires-at {error}"))
                    })?;
                    let beat_count = data
                        .runs
                        .read_heartbeat(&id)
                        .map_err(|e| failure(e.into()))?
                        .map_or(0, |previous| previous.beat_count + 1);
                    let heartbeat = RunHeartbeat {
                        task_id: id.clone(),
                        agent_id: args.agent.clone(),
                        last_heartbeat: now,
                        beat_count,
                        expires_at: Some(expires_at),
                    };
                    data.runs
                        .put_heartbeat(&heartbeat)
                        .map_err(|e| failure(e.into()))?;
                    heartbeat
                }
            };
            print_json(io, &heartbeat)
        }
        RunCommand::Result(args) => {
            let (data, _) = open(&args.data)?;
            let id = parse_task_id(&args.task)?;
            let text = read_input(io, None)?;
            let value: Value = serde_json::from_str(&text)
                .context("run result is not JSON")
                .map_err(CommandError::invalid_input)?;
            let result = RunResult::from_value(&value).map_err(|issues| {
                let messages: Vec<String> = issues
                    .iter()
                    .map(|i| format!("{}: {}", i.path, i.message))
                    .collect();
                CommandError::invalid_input(anyhow!("invalid run result: {}", messages.join("; ")))
            })?;
            let path = data.runs.write_result(&id, &result).map_err(|e| match e {
                super::run::RunError::TaskMismatch { .. } => CommandError::invalid_input(e),
                other => failure(other.into()),
            })?;
            print_json(
                io,
                &json!({ "path": relative(&data, &path), "runResult": result }),
            )
        }
        RunCommand::Expire(args) => {
            let (data, clock) = open(&args.data)?;
            let id = parse_task_id(&args.task)?;
            let expired = data
                .runs
                .mark_expired(&id, &args.reason, clock.now())
                .map_err(|e| failure(e.into()))?;
            let run = data.runs.read_run(&id).map_err(|e| failure(e.into()))?;
            print_json(io, &json!({ "expired": expired, "run": run }))
        }
        RunCommand::Show(args) => {
            let (data, _) = open(&args.data)?;
            let id = parse_task_id(&args.task)?;
            let runs = &data.runs;
            let read = |e: super::run::RunError| failure(e.into());
            print_json(
                io,
                &json!({
                    "taskId": id,
                    "dir": relative(&data, &runs.dir_of(&id)),
                    "run": runs.read_run(&id).map_err(read)?,
                    "heartbeat": runs.read_heartbeat(&id).map_err(read)?,
                    "runResult": runs.read_result(&id).map_err(read)?,
                }),
            )
        }
    }
}

fn events(io: &mut Io<'_>, args: &EventsArgs) -> CommandResult {
    let (data, _) = open(&args.data)?;
    let task = args.task.as_deref().map(parse_task_id).transpose()?;
    let events = data
        .events
        .read_all()
        .context("cannot read the event log")
        .map_err(CommandError::internal)?;
    let selected: Vec<&Event> = events
        .iter()
        .filter(|e| args.kind.as_ref().is_none_or(|k| &e.kind == k))
        .filter(|e| task.as_ref().is_none_or(|t| e.task_id.as_ref() == Some(t)))
        .collect();
    print_json(io, &selected)
}
