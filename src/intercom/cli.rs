//! `ski intercom`: startup in the matrix's order (arguments, config, tokens, database, Slack,
//! listeners), one readiness line on stdout (on stderr with `--mcp-stdio`, where stdout carries
//! MCP), logs on stderr scrubbed of the tokens, shutdown on SIGINT or SIGTERM.
//!
//! Startup checks what it can before it creates anything: the config and the tokens, then that
//! Slack answers `auth.test` and that the MCP address can be bound, and only then opens (and
//! perhaps creates) the database; a later startup failure removes a database it created.
//!
//! Exit codes ([`crate::exit`]'s, but 1 for configuration as the matrix asks): 0 after a signal,
//! 1 configuration (the file, the tokens, the database path, the MCP address), 2 usage, 4 Slack
//! unreachable or refusing, 5 internal.
//! Every failure is one `error: …` line on stderr.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::anyhow;
use clap::{Args, ValueEnum};
use serde_json::json;
use tokio::signal::unix::{SignalKind, signal};
use tokio_util::sync::CancellationToken;

use super::acp::AcpDriver;
use super::config::{
    APP_TOKEN_ENV, BOT_TOKEN_ENV, Config, MCP_TOKEN_ENV, Mode, Tokens, validate_workspaces,
};
use super::driver::{AgentDriver, McpDriver};
use super::hub::Hub;
use super::redact::RedactingStderr;
use super::slack::{self, Poster, SlackError};
use super::store::Store;
use super::vocab::SessionStatus;
use super::{mcp, socket};
use crate::exit::{CommandError, CommandResult, FailureClass};

/// How long startup waits for Slack's Socket Mode `hello`.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);
/// How long the config watcher waits for an editor's burst of file events to settle.
const RELOAD_SETTLE: Duration = Duration::from_millis(100);

/// `--log-format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

/// What `ski intercom` is, in one line (also the stub `ski --help` lists before it is built).
pub const ABOUT: &str =
    "Intercom server: bridges coding agents to Slack threads (MCP tools, approvals, steering)";

/// `ski intercom`.
#[derive(Debug, Args)]
#[command(
    about = ABOUT,
    long_about = "Intercom server: bridges coding agents to Slack threads.

Agents connect to the MCP endpoint (http://HOST:PORT/mcp?workspace_id=ID) and call nine tools;
operators approve, steer, list and stop sessions from Slack with the slash command. Tokens come
only from SLACK_BOT_TOKEN and SLACK_APP_TOKEN. Prints one JSON readiness line on stdout once the
listeners are up and Slack is connected; logs go to stderr.

The endpoint refuses a browser Origin that is neither loopback nor in [mcp] allowed_origins (403);
with SKI_INTERCOM_MCP_TOKEN set, requests need Authorization: Bearer <token> (401; /health answers
without it); an initialize beyond [mcp] max_sessions live sessions (default 32) is refused. At most
[mcp] max_connections connections are open at once (default 256, idle keep-alive ones included; one
more is answered 503), and request headers must arrive within [mcp] header_timeout_ms (default
10000), as must an idle keep-alive connection's next request.

With --mcp-stdio one more MCP session is served over this process's stdin and stdout (placed
like ?workspace_id=ID with --workspace ID); the readiness line then goes to stderr. End of
stdin ends that session only: the server and its HTTP endpoint keep running.

The [[workspace]] mapping is reloaded when the config file changes (its directory is watched,
so editors that replace the file are seen); an invalid edit keeps the last good mapping.

Exit codes: 0 after SIGINT/SIGTERM; 1 configuration (file, tokens, database, MCP address: the
intercom matrix asks for 1 where ski's other commands exit 3); 2 usage; 4 Slack unreachable or
refusing; 5 internal.",
    after_help = "Examples:
  SLACK_BOT_TOKEN=xoxb-... SLACK_APP_TOKEN=xapp-... ski intercom --config intercom.toml
  ski intercom --config intercom.toml --mode acp      # spawn host_cli per session
  ski intercom --config intercom.toml --mcp-stdio --workspace myproj"
)]
pub struct IntercomArgs {
    /// The configuration file (TOML).
    #[arg(long, value_name = "FILE")]
    pub config: PathBuf,
    /// How agents reach the server.
    #[arg(long, value_enum, default_value = "mcp")]
    pub mode: Mode,
    /// Log format on stderr.
    #[arg(long, value_enum, default_value = "text")]
    pub log_format: LogFormat,
    /// Also serve one MCP session over stdin/stdout (MCP mode only); readiness goes to stderr.
    #[arg(long)]
    pub mcp_stdio: bool,
    /// The workspace of the stdio MCP session (as the `workspace_id` query parameter).
    #[arg(long, value_name = "ID", requires = "mcp_stdio")]
    pub workspace: Option<String>,
}

fn init_logging(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| {
        tracing_subscriber::EnvFilter::new("info,slack_morphism=warn,rmcp=warn")
    });
    // Whatever a library logs at any level, the tokens' values are scrubbed.
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(token_scrubber())
        .with_ansi(false);
    let _ = match format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().try_init(),
    };
}

/// The log writer that scrubs the tokens' values as they are set now.
fn token_scrubber() -> RedactingStderr {
    RedactingStderr::new(
        [BOT_TOKEN_ENV, APP_TOKEN_ENV, MCP_TOKEN_ENV]
            .into_iter()
            .filter_map(|name| std::env::var(name).ok()),
    )
}

/// The exit code of a configuration error: the intercom matrix asks for 1 (S004, S005, S032,
/// S033; E-INT-02) where ski's other commands exit 3.
pub const CONFIGURATION_EXIT: u8 = 1;

/// Prints `error` as one `error: …` line, the tokens' values scrubbed; answers its exit code
/// (`ski::exit`'s, but [`CONFIGURATION_EXIT`] for a configuration error).
fn report(error: &CommandError) -> ExitCode {
    // The messages carry their causes; a cause's own lines are joined into the one line.
    let line = error.error.to_string().replace('\n', " ");
    eprintln!("error: {}", token_scrubber().scrub(&line));
    match error.class {
        FailureClass::Configuration => ExitCode::from(CONFIGURATION_EXIT),
        class => ExitCode::from(class.code()),
    }
}

/// What opening the database is about to create (the file, its companions, missing parent
/// directories), removed again when startup fails after it.
#[derive(Debug, Default)]
struct Created {
    files: Vec<PathBuf>,
    /// Deepest first.
    dirs: Vec<PathBuf>,
}

impl Created {
    /// What opening `database` would create now.
    fn by_opening(database: &Path) -> Created {
        let mut dirs = Vec::new();
        let mut parent = database.parent();
        while let Some(dir) = parent.filter(|dir| !dir.as_os_str().is_empty() && !dir.exists()) {
            dirs.push(dir.to_owned());
            parent = dir.parent();
        }
        let files = if database.exists() {
            Vec::new()
        } else {
            ["", "-wal", "-shm", "-journal"]
                .iter()
                .map(|suffix| {
                    let mut name = database.as_os_str().to_owned();
                    name.push(suffix);
                    PathBuf::from(name)
                })
                .collect()
        };
        Created { files, dirs }
    }

    fn remove(&self) {
        for file in &self.files {
            let _ = std::fs::remove_file(file);
        }
        for dir in &self.dirs {
            let _ = std::fs::remove_dir(dir);
        }
    }
}

/// Runs the server; answers the process exit code.
pub fn run(args: IntercomArgs) -> ExitCode {
    init_logging(args.log_format);
    crate::intercom::slack::use_ring_for_tls();
    let mut created = Created::default();
    match start(args, &mut created) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            created.remove();
            report(&error)
        }
    }
}

/// Checks the arguments, the config and the tokens, then serves on a runtime that is shut down
/// (and with it everything holding the database) before this returns.
fn start(args: IntercomArgs, created: &mut Created) -> CommandResult {
    if args.mcp_stdio && args.mode != Mode::Mcp {
        return Err(CommandError::invalid_input(anyhow!(
            "--mcp-stdio needs --mode mcp"
        )));
    }
    let config = Config::load(&args.config, args.mode).map_err(CommandError::configuration)?;
    let tokens = Tokens::from_env().map_err(CommandError::configuration)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|error| CommandError::internal(anyhow!("cannot start the runtime: {error}")))?;
    let result = runtime.block_on(serve(args, config, tokens, created));
    runtime.shutdown_timeout(Duration::from_secs(2));
    result
}

/// A failed `auth.test`: Slack unreachable, or refusing the token.
fn slack_failure(api_base_url: &str, error: SlackError) -> CommandError {
    match error {
        SlackError::Unreachable { cause, .. } => {
            CommandError::upstream(anyhow!("cannot reach Slack at {api_base_url}: {cause}"))
        }
        other => CommandError::upstream(other),
    }
}

async fn serve(
    args: IntercomArgs,
    config: Config,
    tokens: Tokens,
    created: &mut Created,
) -> CommandResult {
    let mut terminate = signal(SignalKind::terminate())
        .map_err(|error| CommandError::internal(anyhow!("cannot handle SIGTERM: {error}")))?;
    let mut interrupt = signal(SignalKind::interrupt())
        .map_err(|error| CommandError::internal(anyhow!("cannot handle SIGINT: {error}")))?;
    // Slack and the MCP address first: nothing is created before they answer.
    let client = slack::client(&config.slack.api_base_url).map_err(CommandError::internal)?;
    let poster = Poster::new(client, &tokens.bot);
    let bot_user = poster
        .auth_test()
        .await
        .map_err(|error| slack_failure(&config.slack.api_base_url, error))?;
    let mcp_address = format!("{}:{}", config.mcp.host, config.mcp.port);
    let tcp =
        match args.mode {
            Mode::Mcp => Some(tokio::net::TcpListener::bind(&mcp_address).await.map_err(
                |error| {
                    CommandError::configuration(anyhow!("cannot listen on {mcp_address}: {error}"))
                },
            )?),
            Mode::Acp => None,
        };
    *created = Created::by_opening(&config.database.path);
    let store = Store::open(&config.database.path).map_err(CommandError::configuration)?;
    match super::acp::end_leftovers(&store) {
        0 => {}
        count => tracing::warn!(count, "agent processes of an earlier run ended"),
    }
    match store.interrupt_leftovers() {
        Ok(leftovers) if leftovers == Default::default() => {}
        Ok(leftovers) => tracing::warn!(
            sessions = leftovers.sessions,
            approvals = leftovers.approvals,
            "recovered an earlier run: {} sessions and {} pending approvals marked interrupted",
            leftovers.sessions,
            leftovers.approvals
        ),
        Err(error) => return Err(CommandError::internal(error)),
    }
    let mcp_driver = Arc::new(McpDriver::default());
    let acp_driver = Arc::new(AcpDriver::default());
    let driver: Arc<dyn AgentDriver> = match args.mode {
        Mode::Mcp => mcp_driver.clone(),
        Mode::Acp => acp_driver.clone(),
    };
    let database = config.database.path.display().to_string();
    let hub = Arc::new(Hub::new(
        args.mode, config, store, poster, mcp_driver, driver,
    ));
    acp_driver.attach(&hub);
    let (listener, mut connected) = socket::listen(hub.clone(), &tokens.app)
        .await
        .map_err(|error| CommandError::upstream(anyhow!("slack socket mode: {error}")))?;
    let hello = tokio::time::timeout(CONNECT_TIMEOUT, connected.wait_for(|up| *up)).await;
    if !matches!(hello, Ok(Ok(_))) {
        listener.shutdown().await;
        return Err(CommandError::upstream(anyhow!(
            "slack socket mode: no hello within 30 s"
        )));
    }
    let shutdown = CancellationToken::new();
    let mut ready = json!({
        "ready": true,
        "pid": std::process::id(),
        "mode": args.mode.as_str(),
        "database": database,
        "slack": "connected",
        "bot_user_id": bot_user,
        "slash_command": hub.config().slack.slash_command,
    });
    if let Some(tcp) = tcp {
        let address = match tcp.local_addr() {
            Ok(address) => address,
            Err(error) => {
                listener.shutdown().await;
                return Err(CommandError::internal(anyhow!(
                    "cannot read the MCP address: {error}"
                )));
            }
        };
        ready["mcp_url"] = json!(format!("http://{address}/mcp"));
        tokio::spawn(mcp::serve(
            tcp,
            hub.clone(),
            tokens.mcp.clone(),
            shutdown.clone(),
        ));
        if args.mcp_stdio {
            ready["mcp_stdio"] = json!(true);
            tokio::spawn(mcp::serve_stdio(
                hub.clone(),
                args.workspace.clone(),
                shutdown.clone(),
            ));
        }
    }
    // Started: the database stays whatever happens next.
    *created = Created::default();
    tokio::spawn(watch_config(
        args.config.clone(),
        hub.clone(),
        shutdown.clone(),
    ));
    tracing::info!(mode = args.mode.as_str(), "intercom server ready");
    if args.mcp_stdio {
        eprintln!("{ready}");
    } else {
        crate::cli::output::line(&ready);
    }
    tokio::select! {
        _ = terminate.recv() => tracing::info!("SIGTERM: shutting down"),
        _ = interrupt.recv() => tracing::info!("SIGINT: shutting down"),
    }
    // Live sessions end (their final messages posted and awaited) before the MCP sessions are
    // cancelled: a cancelled MCP session ends its own session from a task of its own, whose post
    // would race the runtime's end once this function returns.
    end_live_sessions(&hub).await;
    shutdown.cancel();
    // A session that started between the sweep and the cancel.
    end_live_sessions(&hub).await;
    listener.shutdown().await;
    Ok(())
}

/// Ends every session still live at shutdown, waiting for each final message.
async fn end_live_sessions(hub: &Hub) {
    let live: Vec<String> = hub
        .store
        .active_by_prefix("")
        .map(|sessions| sessions.into_iter().map(|s| s.id).collect())
        .unwrap_or_default();
    for id in live {
        hub.end_session(&id, SessionStatus::Interrupted, "server shut down")
            .await;
    }
}

fn fingerprint(path: &Path) -> Option<Vec<u8>> {
    std::fs::read(path).ok()
}

/// Watches the config file's directory (editors often replace the file rather than write it);
/// answers the watcher (dropping it stops the events) and the receiver of "something changed".
fn watch_directory(
    path: &Path,
) -> notify::Result<(notify::RecommendedWatcher, tokio::sync::mpsc::Receiver<()>)> {
    use notify::Watcher;
    let (tx, rx) = tokio::sync::mpsc::channel(1);
    let name = path.file_name().map(std::ffi::OsStr::to_os_string);
    let mut watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
        let relevant = match &event {
            Ok(event) => event
                .paths
                .iter()
                .any(|changed| changed.file_name().map(std::ffi::OsStr::to_os_string) == name),
            Err(_) => true,
        };
        if relevant {
            // A full channel already holds a wake-up; the reload reads the file anyway.
            let _ = tx.try_send(());
        }
    })?;
    let directory = match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    };
    watcher.watch(directory, notify::RecursiveMode::NonRecursive)?;
    Ok((watcher, rx))
}

/// Re-reads `[[workspace]]` when the file changes; an invalid edit keeps the last good mapping.
/// The watch starts when this is called (before the readiness line), not when it is polled.
fn watch_config(
    path: PathBuf,
    hub: Arc<Hub>,
    shutdown: CancellationToken,
) -> impl std::future::Future<Output = ()> {
    let watch = watch_directory(&path);
    let mut last = fingerprint(&path);
    async move {
        let (_watcher, mut changed) = match watch {
            Ok(pair) => pair,
            Err(error) => {
                tracing::error!(%error, path = %path.display(), "cannot watch the config file; hot reload is off");
                return;
            }
        };
        loop {
            tokio::select! {
                event = changed.recv() => if event.is_none() { return },
                () = shutdown.cancelled() => return,
            }
            // Let an editor's write-rename-chmod burst settle before reading.
            loop {
                tokio::select! {
                    () = tokio::time::sleep(RELOAD_SETTLE) => break,
                    event = changed.recv() => if event.is_none() { return },
                }
            }
            let now = fingerprint(&path);
            if now == last {
                continue;
            }
            last = now;
            let Some(bytes) = &last else {
                tracing::warn!(path = %path.display(), "failed to reload workspace mappings — keeping previous values (file unreadable)");
                continue;
            };
            let text = String::from_utf8_lossy(bytes);
            match Config::parse(&text, &path).and_then(|config| {
                validate_workspaces(&config.workspaces)?;
                Ok(config)
            }) {
                Ok(config) => {
                    let count = config.workspaces.len();
                    hub.replace_workspaces(config.workspaces);
                    tracing::warn!(
                        workspaces = count,
                        "hot-reloaded workspace mappings from config; active sessions keep their channel"
                    );
                }
                Err(error) => {
                    tracing::warn!(%error, "failed to reload workspace mappings — keeping previous values");
                }
            }
        }
    }
}
