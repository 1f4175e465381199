//! `ski aof task`: create, show, list and transition tasks in the store.

use std::collections::BTreeMap;

use anyhow::{Context, anyhow};
use clap::{Args, Subcommand};
use serde_json::{Value, json};

use super::{DataArgs, Io, failure, open, parse_status, parse_task_id, print_json, relative};
use crate::aof::data_dir::{DataDir, Journal};
use crate::aof::error::describe;
use crate::aof::event::kind;
use crate::aof::store::NewTask;
use crate::aof::task::{Lease, Priority, Routing, Task};
use crate::exit::{CommandError, CommandResult};

#[derive(Debug, Subcommand)]
pub(super) enum TaskCommand {
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
pub(super) struct TaskCreateArgs {
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
pub(super) struct TaskShowArgs {
    #[command(flatten)]
    data: DataArgs,
    /// The task id.
    id: String,
}

#[derive(Debug, Args)]
pub(super) struct TaskListArgs {
    #[command(flatten)]
    data: DataArgs,
    /// Only this status.
    #[arg(long)]
    status: Option<String>,
}

#[derive(Debug, Args)]
pub(super) struct TaskTransitionArgs {
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

pub(super) fn task(io: &mut Io<'_>, command: TaskCommand) -> CommandResult {
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
            // The task appears only once its event is written (`TaskStore::create_recorded`).
            let mut journal = Journal::new(&data.events, now);
            let task = data
                .store
                .create_recorded(new, now, |task| {
                    journal.emit(
                        kind::TASK_CREATED,
                        &args.created_by,
                        Some(task.id()),
                        json!({ "status": task.status(), "title": task.frontmatter.title }),
                    )
                })
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
            // The task moves only once its event is written (`TaskStore::transition_recorded`).
            let mut journal = Journal::new(&data.events, now);
            data.store
                .transition_recorded(&mut task, to, now, |_| {
                    journal.emit(
                        kind::TASK_TRANSITIONED,
                        &args.actor,
                        Some(&id),
                        json!({ "from": from, "to": to, "reason": args.reason }),
                    )
                })
                .map_err(failure)?;
            print_json(io, &task_json(&data, &task))
        }
    }
}
