//! `ski aof run`: write and read a task's run artifacts (run.json, run_heartbeat.json,
//! run_result.json).

use anyhow::{Context, anyhow};
use clap::{Args, Subcommand};
use serde_json::{Value, json};

use super::{DataArgs, Io, failure, open, parse_task_id, print_json, read_input, relative};
use crate::aof::run::{RunArtifact, RunHeartbeat, RunResult, RunStatus};
use crate::aof::scheduler::DEFAULT_HEARTBEAT_TTL_MS;
use crate::aof::timestamp::Timestamp;
use crate::exit::{CommandError, CommandResult};

#[derive(Debug, Subcommand)]
pub(super) enum RunCommand {
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
pub(super) struct RunTaskArgs {
    #[command(flatten)]
    data: DataArgs,
    /// The task id.
    #[arg(long)]
    task: String,
}

#[derive(Debug, Args)]
pub(super) struct RunAgentArgs {
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
pub(super) struct RunHeartbeatArgs {
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
pub(super) struct RunExpireArgs {
    #[command(flatten)]
    data: DataArgs,
    /// The task id.
    #[arg(long)]
    task: String,
    /// The expiry reason.
    #[arg(long, default_value = "stale_heartbeat")]
    reason: String,
}

pub(super) fn run_artifacts(io: &mut Io<'_>, command: RunCommand) -> CommandResult {
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
                crate::aof::run::RunError::TaskMismatch { .. } => CommandError::invalid_input(e),
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
            let read = |e: crate::aof::run::RunError| failure(e.into());
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
