//! The `ski` command: reference implementations of the specified agent protocols.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// ski: reference implementations of agent protocols.
#[derive(Debug, Parser)]
#[command(name = "ski", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Agent Client Protocol: reference agent and client
    #[command(subcommand)]
    Acp(ski::acp::cli::AcpCommand),
    // The help text of `ski aof` comes from `AofArgs`.
    Aof(ski::aof::cli::AofArgs),
    // The help text of `ski teams` comes from `TeamsArgs`.
    Teams(ski::teams::cli::TeamsArgs),
    // The help text of `ski kiro` comes from `KiroArgs`.
    Kiro(ski::kiro::cli::KiroArgs),
    // The help text of `ski intercom` comes from `IntercomArgs`.
    Intercom(ski::intercom::cli::IntercomArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Acp(command) => command.run(),
        Command::Aof(args) => match ski::aof::cli::run(args) {
            Ok(()) => ExitCode::SUCCESS,
            Err(error) => error.report(),
        },
        Command::Teams(args) => ski::teams::cli::run(args),
        Command::Kiro(args) => ski::kiro::cli::run(args),
        Command::Intercom(args) => ski::intercom::cli::run(args),
    }
}
