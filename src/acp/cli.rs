//! The `ski acp` command tree, and the logging options its subcommands share.

pub mod client;
pub mod serve;

use std::process::ExitCode;

use clap::{Args, Subcommand, ValueEnum};
use tracing_subscriber::EnvFilter;

use crate::exit::CommandError;

/// What `ski acp` is, in one line.
pub const ABOUT: &str = "Agent Client Protocol: reference agent and client";

/// `ski acp`: the Agent Client Protocol.
#[derive(Debug, Subcommand)]
pub enum AcpCommand {
    /// Run the reference ACP agent (a deterministic echo back end) over stdio or WebSocket.
    ///
    /// The agent answers every prompt with its text and implements the ACP v1 agent methods,
    /// session list, resume, fork, delete and close, the legacy session/set_model, and the ski
    /// extensions session/export and session/stop. Flags inject delays, holds, failures,
    /// retries, timeouts and tool calls so that every path can be driven from outside.
    Serve(serve::ServeArgs),
    /// Talk to an ACP agent as its client (over stdio or WebSocket)
    #[command(subcommand)]
    Client(client::ClientCommand),
}

impl AcpCommand {
    /// Runs the subcommand and returns the process exit code.
    pub fn run(self) -> ExitCode {
        let result = match self {
            AcpCommand::Serve(args) => serve::run(args),
            AcpCommand::Client(command) => return command.run(),
        };
        match result {
            Ok(()) => ExitCode::SUCCESS,
            Err(error) => error.report(),
        }
    }
}

/// Log verbosity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogLevel {
    /// Only errors.
    Error,
    /// Errors and warnings.
    Warn,
    /// Lifecycle events (default).
    Info,
    /// Every decision.
    Debug,
    /// Everything, wire events included.
    Trace,
}

/// Log line format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
}

/// Logging options: logs go to stderr only.
#[derive(Debug, Clone, Args)]
pub struct LogArgs {
    /// Log verbosity [default: info, or RUST_LOG when set].
    #[arg(long, value_enum, value_name = "LEVEL")]
    pub log_level: Option<LogLevel>,
    /// Log line format.
    #[arg(long, value_enum, value_name = "FORMAT", default_value = "text")]
    pub log_format: LogFormat,
}

impl LogArgs {
    /// Installs the global tracing subscriber writing to stderr. `--log-level` wins over
    /// `RUST_LOG`; an unusable `RUST_LOG` is a configuration error.
    pub fn init(&self) -> Result<(), CommandError> {
        let filter = match (self.log_level, std::env::var("RUST_LOG")) {
            (Some(level), _) => EnvFilter::new(level_name(level)),
            (None, Ok(spec)) if !spec.trim().is_empty() => EnvFilter::try_new(&spec)
                .map_err(|error| {
                    CommandError::configuration(anyhow::anyhow!(
                        "RUST_LOG={spec:?} is not a valid log filter ({error}); fix it or pass --log-level"
                    ))
                })?,
            (None, _) => EnvFilter::new("info"),
        };
        let builder = tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_writer(std::io::stderr);
        let installed = match self.log_format {
            LogFormat::Text => builder.with_ansi(false).try_init(),
            LogFormat::Json => builder.json().try_init(),
        };
        // A subscriber installed earlier (in tests) keeps working; nothing to do then.
        let _ = installed;
        Ok(())
    }
}

fn level_name(level: LogLevel) -> &'static str {
    match level {
        LogLevel::Error => "error",
        LogLevel::Warn => "warn",
        LogLevel::Info => "info",
        LogLevel::Debug => "debug",
        LogLevel::Trace => "trace",
    }
}
