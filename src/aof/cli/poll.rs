//! `ski aof poll` and `ski aof session-end`: the scheduler's poll (stale heartbeats of
//! in-progress tasks) and the processing of run results a session end does.

use clap::Args;

use super::{DataArgs, Io, failure, open, print_json};
use crate::aof::scheduler::{self, DEFAULT_HEARTBEAT_TTL_MS, PollConfig};
use crate::exit::CommandResult;

#[derive(Debug, Args)]
pub(super) struct PollArgs {
    #[command(flatten)]
    data: DataArgs,
    /// Plan only: report actions, change nothing.
    #[arg(long)]
    dry_run: bool,
    /// TTL for heartbeats that carry no expiresAt.
    #[arg(long, default_value_t = DEFAULT_HEARTBEAT_TTL_MS)]
    heartbeat_ttl_ms: i64,
}

/// `ski aof poll`: one scheduler poll.
pub(super) fn poll(io: &mut Io<'_>, args: &PollArgs) -> CommandResult {
    let (data, clock) = open(&args.data)?;
    let config = PollConfig {
        dry_run: args.dry_run,
        heartbeat_ttl_ms: args.heartbeat_ttl_ms,
    };
    let result = scheduler::poll(&data, clock.as_ref(), config).map_err(failure)?;
    print_json(io, &result)
}

/// `ski aof session-end`: what a session end does.
pub(super) fn session_end(io: &mut Io<'_>, args: &DataArgs) -> CommandResult {
    let (data, clock) = open(args)?;
    let report = scheduler::session_end(&data, clock.as_ref()).map_err(failure)?;
    print_json(io, &report)
}
