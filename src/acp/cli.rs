//! `ski acp`: the command-line front of the ACP reference implementations.

pub mod client;

use std::process::ExitCode;

use clap::Subcommand;

/// `ski acp`: Agent Client Protocol agent and client.
#[derive(Debug, Subcommand)]
pub enum AcpCommand {
    /// Talk to an ACP agent as its client (over stdio or WebSocket)
    #[command(subcommand)]
    Client(client::ClientCommand),
}

impl AcpCommand {
    /// Runs the command and returns the process exit code.
    pub fn run(self) -> ExitCode {
        match self {
            AcpCommand::Client(command) => command.run(),
        }
    }
}
