//! The `ski` command: reference implementations of the specified agent protocols.

use std::process::ExitCode;

// Paths stay qualified where a system uses them, so no `use` depends on which systems are built.
use clap::{Command, FromArgMatches, Subcommand};

/// The subcommands; each one's arguments are built only when it is the one invoked.
#[derive(Debug, Subcommand)]
enum SkiCommand {
    #[cfg(feature = "acp")]
    #[command(subcommand)]
    Acp(ski::acp::cli::AcpCommand),
    #[cfg(feature = "aof")]
    Aof(ski::aof::cli::AofArgs),
    #[cfg(feature = "teams")]
    Teams(ski::teams::cli::TeamsArgs),
    #[cfg(feature = "kiro")]
    Kiro(ski::kiro::cli::KiroArgs),
    #[cfg(feature = "intercom")]
    Intercom(ski::intercom::cli::IntercomArgs),
}

const EXAMPLES: &str = "\
Examples:
  ski acp serve
      An ACP agent on stdio (`--transport ws --listen 127.0.0.1:0` for WebSocket).
  ski acp client connect --agent-cmd 'ski acp serve' --prompt hello
      Spawn an agent, run one turn and print the reply.
  ski aof task create --data-dir D --title Parser --status in-progress
  ski teams --root D --as agent:main:main team create alpha-squad
  ski kiro check --env-file bot.env
  SLACK_BOT_TOKEN=xoxb-... SLACK_APP_TOKEN=xapp-... ski intercom --config intercom.toml

Each subcommand's --help has more examples and its exit codes: 0 success, 2 invalid input,
3 configuration (1 for `ski intercom`, as its matrix asks), 4 upstream, 5 internal.";

/// The command line. Each subcommand is a stub naming itself, filled in by clap
/// (`Command::defer`) only when it is parsed or its help is shown: building every flag of every
/// subcommand would cost more at start-up than an agent's first answer.
fn command_line() -> Command {
    let command = Command::new("ski")
        .version(env!("CARGO_PKG_VERSION"))
        .about(env!("CARGO_PKG_DESCRIPTION"))
        .after_help(EXAMPLES)
        .subcommand_required(true)
        .arg_required_else_help(true);
    #[cfg(feature = "acp")]
    let command = command.subcommand(
        // The enum's own doc comment would replace the about line.
        ski::cli::deferred("acp", ski::acp::cli::ABOUT, |acp| {
            ski::acp::cli::add_deferred_subcommands(acp).about(ski::acp::cli::ABOUT)
        })
        .subcommand_required(true)
        .arg_required_else_help(true),
    );
    #[cfg(feature = "aof")]
    let command = command.subcommand(ski::cli::deferred(
        "aof",
        ski::aof::cli::ABOUT,
        <ski::aof::cli::AofArgs as clap::Args>::augment_args,
    ));
    #[cfg(feature = "teams")]
    let command = command.subcommand(ski::cli::deferred(
        "teams",
        ski::teams::cli::ABOUT,
        ski::teams::cli::augment_args,
    ));
    #[cfg(feature = "kiro")]
    let command = command.subcommand(ski::cli::deferred(
        "kiro",
        ski::kiro::cli::ABOUT,
        <ski::kiro::cli::KiroArgs as clap::Args>::augment_args,
    ));
    #[cfg(feature = "intercom")]
    let command = command.subcommand(ski::cli::deferred(
        "intercom",
        ski::intercom::cli::ABOUT,
        <ski::intercom::cli::IntercomArgs as clap::Args>::augment_args,
    ));
    command
}

// Built with no system at all, the program has no subcommand to run.
#[cfg_attr(
    not(any(
        feature = "acp",
        feature = "aof",
        feature = "teams",
        feature = "kiro",
        feature = "intercom"
    )),
    allow(unreachable_code, unused_variables)
)]
fn main() -> ExitCode {
    let mut matches = command_line().get_matches();
    // `from_arg_matches` would clone every match first; the matches are not used again.
    let command =
        SkiCommand::from_arg_matches_mut(&mut matches).unwrap_or_else(|error| error.exit());
    match command {
        #[cfg(feature = "acp")]
        SkiCommand::Acp(command) => command.run(),
        #[cfg(feature = "aof")]
        SkiCommand::Aof(args) => match ski::aof::cli::run(args) {
            Ok(()) => ExitCode::SUCCESS,
            Err(error) => error.report(),
        },
        #[cfg(feature = "teams")]
        SkiCommand::Teams(args) => ski::teams::cli::run(args),
        #[cfg(feature = "kiro")]
        SkiCommand::Kiro(args) => ski::kiro::cli::run(args),
        #[cfg(feature = "intercom")]
        SkiCommand::Intercom(args) => ski::intercom::cli::run(args),
    }
}
