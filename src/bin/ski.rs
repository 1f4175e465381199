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
    /// Agent Client Protocol: the reference agent.
    #[command(subcommand)]
    Acp(ski::acp::cli::AcpCommand),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Acp(command) => command.run(),
    }
}
