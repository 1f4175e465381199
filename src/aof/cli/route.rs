//! `ski aof route`: one message (or, with `--ndjson`, one per line) through the router.

use anyhow::{Context, anyhow};
use clap::Args;
use serde_json::json;

use super::{DataArgs, Io, failure, open, print_json, read_input, to_json};
use crate::aof::error::describe;
use crate::aof::router::{RouteOutcome, Router, RouterConfig};
use crate::exit::{CommandError, CommandResult};

#[derive(Debug, Args)]
pub(super) struct RouteArgs {
    #[command(flatten)]
    data: DataArgs,
    /// Require fromAgent to be the task's lease agent or routing agent.
    #[arg(long)]
    authorize: bool,
    /// Read one message per line and print one compact report per line; exit 0 unless fatal.
    #[arg(long)]
    ndjson: bool,
}

pub(super) fn route(io: &mut Io<'_>, args: &RouteArgs) -> CommandResult {
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
