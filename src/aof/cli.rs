//! `ski aof`: the command-line adapter over the AOF/1 reference implementation.
//!
//! Every command prints JSON on stdout. Exit codes: 0 success, 2 invalid input or a rejected
//! message, 3 an unusable data dir, 5 a handler failure. The full contract is in
//! `conformance/targets/aof-adapter.md`.

mod batch;
mod events;
mod poll;
mod resolve;
mod route;
mod runs;
mod task;
mod validate;

use std::io::{self, BufRead, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context, anyhow};
use clap::{Args, Subcommand};
use serde::Serialize;
use serde_json::Value;

use super::clock::{Clock, FixedClock, SystemClock};
use super::data_dir::{DEFAULT_RUNS_DIR, DataDir};
use super::error::AofError;
use super::store::StoreError;
use super::task::{STATUS_VALUES, TaskStatus};
use super::task_id::TaskId;
use super::timestamp::Timestamp;
use crate::cli::output;
use crate::exit::{CommandError, CommandResult};
use events::EventsArgs;
use poll::PollArgs;
use resolve::ResolveArgs;
use route::RouteArgs;
use runs::RunCommand;
use task::TaskCommand;
use validate::ValidateArgs;

pub use validate::validation_report;

/// What `ski aof` is, in one line (also the stub `ski --help` lists before it is built).
pub const ABOUT: &str = "AOF/1 agent task protocol: validate envelopes, route messages into a \
filesystem task store, run the scheduler poll and session-end processing";

const LONG_ABOUT: &str =
    "AOF/1 agent task protocol: the reference implementation as a command-line adapter.

A data dir holds tasks/<status>/<TASK-id>.md (YAML frontmatter + Markdown body) with a companion
directory tasks/<status>/<TASK-id>/{inputs,work,outputs,subtasks}/, runs/<TASK-id>/ (run.json,
run_heartbeat.json, run_result.json) and events/YYYY-MM-DD.jsonl (one event per line).

Every command prints JSON on stdout. Exit codes: 0 ok; 2 invalid input or a rejected message;
3 unusable data dir; 5 a handler failed (the failure is also logged as protocol.message.error).
Time comes from --now (ISO 8601 UTC) when given, else from the system clock.";

const AFTER_HELP: &str = "\
Examples:
  ski aof task create --data-dir D --title Parser --status in-progress
  ski aof route --data-dir D --now 2026-02-09T21:05:00.000Z < message.json
  ski aof poll --data-dir D --dry-run
  ski aof events --data-dir D --type task.transitioned
  ski aof resolve --status in-progress --outcome done";

/// `ski aof`.
#[derive(Debug, Args)]
#[command(about = ABOUT, long_about = LONG_ABOUT, after_help = AFTER_HELP)]
pub struct AofArgs {
    #[command(subcommand)]
    command: AofCommand,
}

#[derive(Debug, Subcommand)]
enum AofCommand {
    /// Validate one input (stdin or FILE) and print {valid, kind, value|errors}; exit 2 when invalid.
    #[command(after_help = concat!(
        "Examples:\n",
        "  ski aof validate < envelope.json\n",
        "  ski aof validate --kind run-result D/runs/TASK-2026-02-09-001/run_result.json\n",
        "  ski aof validate --kind task D/tasks/ready/TASK-2026-02-09-001.md"
    ))]
    Validate(ValidateArgs),
    /// Route one message from stdin (an event object, `AOF/1 {...}` text or plain JSON);
    /// exit 2 when it is rejected.
    #[command(after_help = concat!(
        "Examples:\n",
        "  ski aof route --data-dir D --now 2026-02-09T21:05:00.000Z < message.json\n",
        "  ski aof route --data-dir D --authorize < message.json\n",
        "  ski aof route --data-dir D --ndjson < messages.ndjson"
    ))]
    Route(RouteArgs),
    /// Run one scheduler poll: detect stale heartbeats of in-progress tasks and recover them.
    #[command(after_help = concat!(
        "Examples:\n",
        "  ski aof poll --data-dir D --dry-run\n",
        "  ski aof poll --data-dir D --heartbeat-ttl-ms 60000 --now 2026-02-09T22:00:00.000Z"
    ))]
    Poll(PollArgs),
    /// Apply the run_result.json of every in-progress task (what a session end does).
    #[command(after_help = concat!(
        "Example:\n",
        "  ski aof session-end --data-dir D"
    ))]
    SessionEnd(DataArgs),
    /// Manage tasks.
    #[command(subcommand)]
    #[command(after_help = concat!(
        "Examples:\n",
        "  ski aof task create --data-dir D --title Parser --now 2026-02-09T21:00:00.000Z\n",
        "  ski aof task list --data-dir D --status backlog\n",
        "  ski aof task show --data-dir D TASK-2026-02-09-001\n",
        "  ski aof task transition --data-dir D TASK-2026-02-09-001 ready --reason triaged"
    ))]
    Task(TaskCommand),
    /// Write and read run artifacts.
    #[command(subcommand)]
    #[command(after_help = concat!(
        "Examples:\n",
        "  ski aof run start --data-dir D --task TASK-2026-02-09-001 --agent swe-backend\n",
        "  ski aof run heartbeat --data-dir D --task TASK-2026-02-09-001 --agent swe-backend\n",
        "  ski aof run result --data-dir D --task TASK-2026-02-09-001 < run_result.json\n",
        "  ski aof run show --data-dir D --task TASK-2026-02-09-001"
    ))]
    Run(RunCommand),
    /// Print the event log as a JSON array, ordered by eventId.
    #[command(after_help = concat!(
        "Examples:\n",
        "  ski aof events --data-dir D\n",
        "  ski aof events --data-dir D --type task.transitioned --task TASK-2026-02-09-001"
    ))]
    Events(EventsArgs),
    /// Print the transitions a completion outcome maps to from a status.
    #[command(after_help = concat!(
        "Examples:\n",
        "  ski aof resolve --status in-progress --outcome done\n",
        "  ski aof resolve --status in-progress --outcome done --review-required false"
    ))]
    Resolve(ResolveArgs),
    /// Run many commands in this one process: each stdin line {"args": [...], "stdin": "..."}
    /// gets one line {"code", "stdout", "stderr"}.
    #[command(after_help = concat!(
        "Example:\n",
        "  echo '{\"args\": [\"task\", \"list\", \"--data-dir\", \"D\"]}' | ski aof batch"
    ))]
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

/// Where a command reads its input and writes its JSON: the process's stdin and stdout, or one
/// request of a batch.
struct Io<'a> {
    input: &'a mut dyn BufRead,
    output: &'a mut dyn Write,
}

/// Runs `ski aof`.
pub fn run(args: AofArgs) -> CommandResult {
    if let AofCommand::Batch = args.command {
        return batch::serve(io::stdin().lock(), output::stdout());
    }
    let stdin = io::stdin();
    let mut input = stdin.lock();
    // A reader that went away (`| head -c0`) ends the output quietly, not the command.
    let mut output = output::stdout();
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
        AofCommand::Validate(args) => validate::validate(io, &args),
        AofCommand::Route(args) => route::route(io, &args),
        AofCommand::Poll(args) => poll::poll(io, &args),
        AofCommand::SessionEnd(args) => poll::session_end(io, &args),
        AofCommand::Task(command) => task::task(io, command),
        AofCommand::Run(command) => runs::run_artifacts(io, command),
        AofCommand::Events(args) => events::events(io, &args),
        AofCommand::Resolve(args) => resolve::resolve(io, &args),
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

fn to_json(value: &impl Serialize) -> Value {
    serde_json::to_value(value).unwrap_or(Value::Null)
}

fn relative(data: &DataDir, path: &Path) -> String {
    path.strip_prefix(&data.root)
        .unwrap_or(path)
        .display()
        .to_string()
}
