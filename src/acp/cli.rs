//! The `ski acp` command tree, and the logging options its subcommands share.

pub mod client;
pub mod serve;

use std::process::ExitCode;

use clap::{Args, Command, Subcommand, ValueEnum};
use tracing_subscriber::filter::LevelFilter;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer, Registry, fmt};

use crate::cli::deferred;
use crate::exit::CommandError;

/// What `ski acp` is, in one line.
pub const ABOUT: &str = "Agent Client Protocol: reference agent and client";

/// `ski acp --help`'s examples.
pub const EXAMPLES: &str = "\
Examples:
  ski acp serve                                       the reference agent on stdio
  ski acp serve --transport ws --listen 127.0.0.1:0   on WebSocket (the address goes to stderr)
  ski acp client connect --agent-cmd 'ski acp serve' --prompt hello
  ski acp client connect --transport ws --endpoint ws://127.0.0.1:8900 --prompt hello";

/// `ski acp serve` in one line.
const SERVE_ABOUT: &str =
    "Run the reference ACP agent (a deterministic echo back end) over stdio or WebSocket";

/// `ski acp serve --help`'s description.
const SERVE_LONG_ABOUT: &str = "Run the reference ACP agent (a deterministic echo back end) \
over stdio or WebSocket.\n\nThe agent answers every prompt with its text and implements the ACP \
v1 agent methods, session list, resume, fork, delete and close, the legacy session/set_model, \
and the ski extensions session/export and session/stop. Flags inject delays, holds, failures, \
retries, timeouts and tool calls so that every path can be driven from outside.";

/// `ski acp client` in one line.
const CLIENT_ABOUT: &str = "Talk to an ACP agent as its client (over stdio or WebSocket)";

/// `ski acp`: the Agent Client Protocol.
#[derive(Debug, Subcommand)]
pub enum AcpCommand {
    /// `ski acp serve`: the reference agent.
    #[command(about = SERVE_ABOUT, long_about = SERVE_LONG_ABOUT)]
    Serve(serve::ServeArgs),
    /// `ski acp client`: a client of any agent.
    #[command(
        subcommand,
        about = CLIENT_ABOUT,
        long_about = None,
        after_help = client::CLIENT_EXAMPLES
    )]
    Client(client::ClientCommand),
}

/// Adds `ski acp`'s subcommands to `acp` as stubs whose arguments clap builds only for the one
/// that is parsed or whose help is shown: `ski acp serve` does not pay at start-up for the
/// client's flags. Names and help are those of [`AcpCommand`], which parses the matches.
/// `acp` gets its examples ([`EXAMPLES`]) too.
pub fn add_deferred_subcommands(acp: Command) -> Command {
    acp.after_help(EXAMPLES)
        .subcommand(
            deferred("serve", SERVE_ABOUT, |serve| {
                serve::ServeArgs::augment_args(serve)
                    .about(SERVE_ABOUT)
                    .long_about(SERVE_LONG_ABOUT)
            })
            .long_about(SERVE_LONG_ABOUT),
        )
        .subcommand(
            deferred("client", CLIENT_ABOUT, |client| {
                client::ClientCommand::augment_subcommands(client)
                    .about(CLIENT_ABOUT)
                    .long_about(None)
                    .after_help(client::CLIENT_EXAMPLES)
            })
            .subcommand_required(true)
            .arg_required_else_help(true),
        )
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
        // A bare level needs no directive parser: the usual start installs a plain level filter.
        match (self.log_level, std::env::var("RUST_LOG")) {
            (Some(level), _) => install(level_filter(level), self.log_format),
            (None, Ok(spec)) if !spec.trim().is_empty() => {
                let directives = EnvFilter::try_new(&spec).map_err(|error| {
                    CommandError::configuration(anyhow::anyhow!(
                        "RUST_LOG={spec:?} is not a valid log filter ({error}); fix it or pass --log-level"
                    ))
                })?;
                install(directives, self.log_format);
            }
            (None, _) => install(LevelFilter::INFO, self.log_format),
        }
        Ok(())
    }
}

/// Installs the global subscriber: `filter`, then lines in `format` on stderr. A subscriber
/// installed earlier (in tests) keeps working; nothing to do then.
fn install<F>(filter: F, format: LogFormat)
where
    F: Layer<Registry> + Send + Sync + 'static,
{
    let registry = tracing_subscriber::registry().with(filter);
    let _installed = match format {
        LogFormat::Text => registry
            .with(fmt::layer().with_ansi(false).with_writer(std::io::stderr))
            .try_init(),
        LogFormat::Json => registry
            .with(fmt::layer().json().with_writer(std::io::stderr))
            .try_init(),
    };
}

fn level_filter(level: LogLevel) -> LevelFilter {
    match level {
        LogLevel::Error => LevelFilter::ERROR,
        LogLevel::Warn => LevelFilter::WARN,
        LogLevel::Info => LevelFilter::INFO,
        LogLevel::Debug => LevelFilter::DEBUG,
        LogLevel::Trace => LevelFilter::TRACE,
    }
}

#[cfg(test)]
mod tests {
    use clap::FromArgMatches;

    use super::*;

    /// Every help page under a command, keyed by its subcommand path.
    fn help_pages(command: &mut Command, path: &str, pages: &mut Vec<(String, String)>) {
        command.build();
        pages.push((format!("{path} -h"), command.render_help().to_string()));
        pages.push((
            format!("{path} --help"),
            command.render_long_help().to_string(),
        ));
        // clap's generated `help` subcommand lists the tree as built so far; it is not a page.
        for sub in command
            .get_subcommands_mut()
            .filter(|sub| sub.get_name() != "help")
        {
            let sub_path = format!("{path} {}", sub.get_name());
            help_pages(sub, &sub_path, pages);
        }
    }

    #[test]
    fn the_deferred_subcommands_show_the_same_help_as_the_derived_ones() {
        // The enum's doc comment becomes the derived tree's about line; `ski` sets its own.
        let mut derived = AcpCommand::augment_subcommands(Command::new("acp"))
            .about(ABOUT)
            .after_help(EXAMPLES);
        let mut deferred = add_deferred_subcommands(Command::new("acp")).about(ABOUT);
        let (mut derived_pages, mut deferred_pages) = (Vec::new(), Vec::new());
        help_pages(&mut derived, "acp", &mut derived_pages);
        help_pages(&mut deferred, "acp", &mut deferred_pages);
        assert!(derived_pages.len() > 10, "{} pages", derived_pages.len());
        let paths = |pages: &[(String, String)]| {
            pages
                .iter()
                .map(|(path, _)| path.clone())
                .collect::<Vec<_>>()
        };
        let (deferred_paths, derived_paths) = (paths(&deferred_pages), paths(&derived_pages));
        let missing: Vec<_> = derived_paths
            .iter()
            .filter(|p| !deferred_paths.contains(p))
            .collect();
        let extra: Vec<_> = deferred_paths
            .iter()
            .filter(|p| !derived_paths.contains(p))
            .collect();
        assert_eq!(
            deferred_paths, derived_paths,
            "missing {missing:?}, extra {extra:?}"
        );
        for ((path, deferred), (_, derived)) in deferred_pages.iter().zip(&derived_pages) {
            assert_eq!(deferred, derived, "help of `{path}` differs");
        }
    }

    #[test]
    fn every_help_page_has_examples() {
        let mut deferred = add_deferred_subcommands(Command::new("acp")).about(ABOUT);
        let mut pages = Vec::new();
        help_pages(&mut deferred, "acp", &mut pages);
        for (path, page) in pages.iter().filter(|(path, _)| path.ends_with("--help")) {
            assert!(
                page.contains("Examples:"),
                "`{path}` has no examples:\n{page}"
            );
        }
    }

    #[test]
    fn the_agent_command_flag_is_agent_cmd_and_cmd_still_works() {
        for flag in ["--agent-cmd", "--cmd"] {
            let matches = add_deferred_subcommands(Command::new("acp"))
                .try_get_matches_from(["acp", "client", "connect", flag, "ski", "--prompt", "x"])
                .expect("parses");
            let parsed = AcpCommand::from_arg_matches(&matches).expect("converts");
            assert!(
                format!("{parsed:?}").contains("agent_cmd: Some(\"ski\")"),
                "{parsed:?}"
            );
        }
        let mut client = add_deferred_subcommands(Command::new("acp"));
        client.build();
        let connect = client
            .find_subcommand_mut("client")
            .and_then(|client| client.find_subcommand_mut("connect"))
            .expect("connect");
        let help = connect.render_long_help().to_string();
        assert!(help.contains("--agent-cmd <PROG>"), "{help}");
        assert!(
            !help.contains("--cmd"),
            "the old name is a hidden alias:\n{help}"
        );
    }

    #[test]
    fn the_deferred_subcommands_parse_into_the_derived_command() {
        let command = add_deferred_subcommands(Command::new("acp"));
        let matches = command
            .try_get_matches_from(["acp", "serve", "--turn-updates", "message"])
            .expect("parses");
        let parsed = AcpCommand::from_arg_matches(&matches).expect("converts");
        assert!(matches!(parsed, AcpCommand::Serve(_)), "{parsed:?}");
    }
}
