//! `ski aof events`: the event log, filtered by type and task.

use anyhow::Context;
use clap::Args;

use super::{DataArgs, Io, open, parse_task_id, print_json};
use crate::aof::event::Event;
use crate::exit::{CommandError, CommandResult};

#[derive(Debug, Args)]
pub(super) struct EventsArgs {
    #[command(flatten)]
    data: DataArgs,
    /// Only events of this type.
    #[arg(long = "type")]
    kind: Option<String>,
    /// Only events of this task.
    #[arg(long)]
    task: Option<String>,
}

pub(super) fn events(io: &mut Io<'_>, args: &EventsArgs) -> CommandResult {
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
