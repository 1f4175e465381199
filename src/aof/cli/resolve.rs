//! `ski aof resolve`: the transitions a completion outcome maps to from a status.

use anyhow::anyhow;
use clap::Args;

use super::{Io, parse_status, print_json};
use crate::aof::completion::resolve_completion_transitions;
use crate::aof::envelope::{OUTCOME_VALUES, Outcome};
use crate::exit::{CommandError, CommandResult};

#[derive(Debug, Args)]
pub(super) struct ResolveArgs {
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

/// `ski aof resolve`: the transitions a completion outcome maps to.
pub(super) fn resolve(io: &mut Io<'_>, args: &ResolveArgs) -> CommandResult {
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
