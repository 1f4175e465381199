//! `ski acp client`: connect to an ACP agent over stdio (spawning it), WebSocket or ACP's remote
//! `/acp` transport (either profile, see [`crate::acp::remote::client`]), run prompt turns and
//! print the reply; stop a session; run a scripted driver for conformance runners.
//!
//! Output: the human form streams the reply text and ends each turn with `stopReason: <r>`.
//! With `--json`, every line is one JSON object with sorted keys:
//! `{"payload":{...},"sessionId","text"?,"type":"session_update","update":<kind>}` for each
//! session update (the payload is the whole update re-encoded; unknown kinds are skipped),
//! `{"chunks","messageId","role","sessionId","text","type":"message"}` for each message of the
//! turn whose chunks carried a `messageId` (chunks grouped by id, in order of first arrival;
//! `role` is `user`, `agent` or `thought`), then
//! `{"sessionId","stopReason","type":"prompt_result"}` after each turn and
//! `{"sessionId","type":"session_stop"}` for `stop`. Diagnostics and the agent's own stderr go to
//! stderr. Output nobody reads stops the client: past its bounded queues it reads no more from
//! the agent, whose writes then block; nothing is dropped. An agent that does not read what the
//! client sends does not stop the client reading: its answers wait in a queue of up to 16 MiB
//! (then the client waits too, see [`crate::acp::client`]). Exit codes: 0 ok, 2 invalid input,
//! 3 configuration, 4 the agent or the connection failed, 5 internal error.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

mod v2;

use anyhow::{Context, anyhow};
use clap::{Args, Subcommand, ValueEnum};
use serde_json::{Value, json};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::acp::client::driver::{self, sorted_line};
use crate::acp::client::messages::Messages;
use crate::acp::client::{
    Client, ClientConfig, ClientError, FsConfig, PermissionPolicy, TerminalConfig,
};
use crate::acp::remote::client::{Profile, connector as remote_connector};
use crate::acp::{
    NewSessionRequest, PROTOCOL_VERSION, PromptRequest, SessionNotification, SessionUpdate,
    StopReason,
};
use crate::cli::output;
use crate::exit::{CommandError, CommandResult};
use crate::jsonrpc::{CallError, ErrorCode, Transport};
use crate::storage::inside_root::Root;
use crate::transport::child::{self, ChildSpec};
use crate::transport::ws_client::{
    ConnectError, ConnectionFactory, DEFAULT_HEARTBEAT, DEFAULT_RECONNECT_ATTEMPTS,
    DEFAULT_RECONNECT_BASE_DELAY, ReconnectPolicy, WsConnector,
};

/// How long a spawned agent may take to exit by itself once its stdin is closed, before it is
/// terminated.
const AGENT_EXIT_WAIT: Duration = Duration::from_secs(1);

/// The time between SIGTERM and SIGKILL when a spawned agent is terminated.
const AGENT_GRACE: Duration = Duration::from_secs(2);

/// `ski acp client`: talk to an ACP agent as its client.
#[derive(Debug, Subcommand)]
pub enum ClientCommand {
    /// Connect to an agent, run one turn per --prompt on one session, print the reply
    #[command(after_help = CONNECT_EXAMPLES)]
    Connect(ConnectArgs),
    /// Ask an agent to stop a session's running prompt (the ski session/stop request)
    #[command(after_help = STOP_EXAMPLES)]
    Stop(StopArgs),
    /// Run a scripted driver and report every request's outcome as JSON lines (for
    /// conformance runners)
    #[command(after_long_help = DRIVE_HELP)]
    Drive(DriveArgs),
}

const CONNECT_EXAMPLES: &str = "\
Examples:
  ski acp client connect --agent-cmd 'ski acp serve' --prompt hi
  ski acp client connect --agent-cmd ski --args acp --args serve --prompt hi --json
  ski acp client connect --transport ws --endpoint ws://127.0.0.1:8900 --prompt hi --prompt again
  ski acp client connect --transport http --endpoint http://127.0.0.1:8900/acp --profile http --prompt hi
  ski acp client connect --transport http --endpoint https://127.0.0.1:8900/acp --ca-cert ca.pem --prompt hi";

const STOP_EXAMPLES: &str = "\
Examples:
  ski acp client stop --transport ws --endpoint ws://127.0.0.1:8900 --session-id sess-1
  ski acp client stop --agent-cmd 'ski acp serve' --session-id sess-1 --json";

/// `ski acp client --help`'s examples.
pub const CLIENT_EXAMPLES: &str = "\
Examples:
  ski acp client connect --agent-cmd 'ski acp serve' --prompt hello
      Spawn an agent, run one turn and print the reply.
  ski acp client connect --transport ws --endpoint ws://127.0.0.1:8900 --prompt hi --json
      Talk to a listening agent; print JSON lines.
  ski acp client stop --transport ws --endpoint ws://127.0.0.1:8900 --session-id sess-1
      Stop a session's running prompt.
  ski acp client drive --agent-cmd 'ski acp serve' --script steps.json
      Run a scripted driver (see `ski acp client drive --help`).";

const DRIVE_HELP: &str = "\
The script is a JSON array of steps, run in order; every request reports one outcome line
(success, eof, not_connected, request_timeout, cancelled, send_failed, invalid_response) and
the run ends with a summary line holding the outcome counts and the final pending and timeout
counters. \"$session\" in params stands for the current session id.

Steps:
  {\"op\":\"initialize\"}
  {\"op\":\"new_session\",\"cwd\":\"/abs\"}                  the new session becomes current
  {\"op\":\"request\",\"method\":M,\"params\":P,\"count\":N,\"mode\":\"concurrent\"|\"sequential\",
   \"timeoutMs\":T,\"wait\":true|false}
  {\"op\":\"notify\",\"method\":M,\"params\":P,\"count\":N}
  {\"op\":\"prompt\",\"text\":T,\"wait\":true|false,\"timeoutMs\":T}
  {\"op\":\"cancel\"}   session/cancel; pending permission requests are answered cancelled
  {\"op\":\"stop\"}     session/stop
  {\"op\":\"wait_permission\",\"count\":N,\"timeoutMs\":T}     with --permission-decision hold
  {\"op\":\"cancel_waiting\",\"count\":N}      give up senders still waiting for a send permit
  {\"op\":\"await_sent\"}   wait until every request issued so far was written
  {\"op\":\"sleep\",\"ms\":N}  {\"op\":\"await\"}  {\"op\":\"close\"}  {\"op\":\"stats\"}

Examples:
  ski acp client drive --agent-cmd 'ski acp serve' --script steps.json
  ski acp client drive --transport ws --endpoint ws://127.0.0.1:8900 --script - < steps.json

A script (40 concurrent session/new, then the counters):
  [{\"op\":\"initialize\"},
   {\"op\":\"request\",\"method\":\"session/new\",\"params\":{\"cwd\":\"/tmp\",\"mcpServers\":[]},\"count\":40},
   {\"op\":\"stats\"}]";

/// How the client reaches the agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum TransportKind {
    /// Spawn the agent (--agent-cmd) and speak NDJSON over its stdin and stdout
    Stdio,
    /// Connect to a WebSocket endpoint (--endpoint), one JSON message per text frame
    Ws,
    /// Connect to an ACP remote endpoint (--endpoint http://HOST:PORT/acp, or https:// with
    /// --ca-cert for a private CA) in the --profile given
    Http,
}

/// Which profile of the remote transport `--transport http` speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ProfileArg {
    /// The WebSocket upgrade of GET /acp, which every remote ACP server offers
    Ws,
    /// Streamable HTTP: POST, SSE GET streams and DELETE over HTTP/2
    Http,
}

/// How the client answers session/request_permission.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum PermissionDecision {
    /// Select an allow_once (else allow_always) option
    Allow,
    /// Select a reject_once (else reject_always) option
    Deny,
    /// Never answer until the turn is cancelled, then answer cancelled (for drivers)
    Hold,
}

/// Where the agent is and how the connection behaves.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Connection")]
pub struct TransportArgs {
    /// How to reach the agent
    #[arg(long, value_enum, default_value_t = TransportKind::Stdio)]
    transport: TransportKind,
    /// stdio: the agent program to spawn; without --args a command line such as
    /// 'ski acp serve' is split into words
    #[arg(long = "agent-cmd", alias = "cmd", value_name = "PROG")]
    agent_cmd: Option<String>,
    /// stdio: one argument for the agent; repeat for more (write --args=--flag for a flag)
    #[arg(long = "args", value_name = "ARG", allow_hyphen_values = true)]
    args: Vec<String>,
    /// ws: the agent's URL, ws://HOST:PORT[/PATH]; http: http://HOST:PORT/acp or
    /// https://HOST:PORT/acp
    #[arg(long, value_name = "URL")]
    endpoint: Option<String>,
    /// http: the remote transport's profile
    #[arg(long, value_enum, value_name = "PROFILE")]
    profile: Option<ProfileArg>,
    /// http: a PEM file of the certificate authorities an https:// endpoint's certificate is
    /// checked against (for a private CA); without it the platform's roots
    #[arg(long, value_name = "PEM")]
    ca_cert: Option<PathBuf>,
    /// Timeout of each request in milliseconds; 0 waits forever
    #[arg(long, value_name = "MS", default_value_t = 300_000)]
    request_timeout_ms: u64,
    /// ws: heartbeat ping interval in milliseconds; 0 disables it [default: 15000]
    #[arg(long, value_name = "MS")]
    ws_heartbeat_ms: Option<u64>,
    /// ws: reconnect attempts after a failed connect, send or receive; 0 disables [default: 2]
    #[arg(long, value_name = "N")]
    ws_reconnect_attempts: Option<u32>,
    /// ws: delay before the first reconnect attempt in milliseconds, doubled per attempt and
    /// capped at 3000 [default: 200]
    #[arg(long, value_name = "MS")]
    ws_reconnect_base_delay_ms: Option<u64>,
    /// Most messages queued or being written at once; further senders wait
    #[arg(long, value_name = "N", default_value_t = 64,
          value_parser = clap::value_parser!(u64).range(1..))]
    max_in_flight_sends: u64,
    #[command(flatten)]
    log: super::LogArgs,
}

/// What the client offers the agent.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Offered to the agent")]
pub struct OfferArgs {
    /// Working directory of the session [default: the current directory]
    #[arg(long, value_name = "DIR")]
    cwd: Option<PathBuf>,
    /// How to answer the agent's permission requests
    #[arg(long, value_enum, default_value_t = PermissionDecision::Allow)]
    permission_decision: PermissionDecision,
    /// A note printed on stderr with each permission decision (never sent to the agent)
    #[arg(long, value_name = "TEXT")]
    permission_message: Option<String>,
    /// Offer fs/read_text_file and fs/write_text_file, inside --fs-root directories
    #[arg(long)]
    fs: bool,
    /// A directory the agent may read and write below (with --fs; links out of it, FIFOs and
    /// devices are refused); repeat for more [default: the session's cwd]
    #[arg(long, value_name = "DIR")]
    fs_root: Vec<PathBuf>,
    /// Offer terminal/* (the agent may run commands on this machine)
    #[arg(long)]
    terminal: bool,
    /// A further root of the session, sent in session/new's additionalDirectories (only to an
    /// agent that advertises sessionCapabilities.additionalDirectories) and, with --fs and no
    /// --fs-root, a directory the agent may read and write below; repeat for more
    #[arg(long = "add-dir", value_name = "DIR")]
    add_dir: Vec<PathBuf>,
}

/// `ski acp client connect`.
#[derive(Debug, Clone, Args)]
pub struct ConnectArgs {
    /// The prompt text; repeat for several turns on one session
    #[arg(long, value_name = "TEXT", required = true)]
    prompt: Vec<String>,
    /// Reuse this session instead of creating one (no session/load is sent)
    #[arg(long, value_name = "ID")]
    session_id: Option<String>,
    /// Print sorted-key JSON lines instead of text
    #[arg(long)]
    json: bool,
    /// The ACP protocol version to ask for and accept: 1 (the default) or 2 (the v2 draft); an
    /// agent that answers another version is an error
    #[arg(long, value_name = "VERSION", default_value_t = 1,
        value_parser = clap::value_parser!(u16).range(1..=2))]
    protocol: u16,
    /// With --protocol 2: cancel every tool call that can be cancelled (tool_call/cancel)
    #[arg(long)]
    cancel_tool_calls: bool,
    /// With --protocol 2: set a config option before the first prompt; repeatable
    #[arg(long, value_name = "ID=VALUE")]
    config: Vec<String>,
    #[command(flatten)]
    transport: TransportArgs,
    #[command(flatten)]
    offer: OfferArgs,
}

/// `ski acp client stop`.
#[derive(Debug, Clone, Args)]
pub struct StopArgs {
    /// The session whose prompt to stop
    #[arg(long, value_name = "ID", required = true)]
    session_id: String,
    /// Print a sorted-key JSON line instead of text
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    transport: TransportArgs,
}

/// `ski acp client drive`.
#[derive(Debug, Clone, Args)]
pub struct DriveArgs {
    /// The script: a JSON file of steps, or - for stdin
    #[arg(long, value_name = "FILE")]
    script: PathBuf,
    #[command(flatten)]
    transport: TransportArgs,
    #[command(flatten)]
    offer: OfferArgs,
}

impl ClientCommand {
    /// Runs the command and returns the process exit code.
    pub fn run(self) -> ExitCode {
        let transport = match &self {
            ClientCommand::Connect(args) => &args.transport,
            ClientCommand::Stop(args) => &args.transport,
            ClientCommand::Drive(args) => &args.transport,
        };
        if let Err(error) = transport.log.init() {
            return error.report();
        }
        let runtime = match tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
        {
            Ok(runtime) => runtime,
            Err(error) => {
                return CommandError::internal(anyhow!("cannot start the async runtime: {error}"))
                    .report();
            }
        };
        let command = async move {
            match self {
                ClientCommand::Connect(args) => connect(args).await,
                ClientCommand::Stop(args) => stop(args).await,
                ClientCommand::Drive(args) => drive(args).await,
            }
        };
        // The command runs as a task on the workers, beside the connection's tasks: waking
        // each other there costs no hand-over to the main thread.
        let result = runtime.block_on(async move {
            tokio::spawn(command).await.unwrap_or_else(|error| {
                Err(CommandError::internal(anyhow!(
                    "the client command failed: {error}"
                )))
            })
        });
        // Tasks still running (a stuck agent's stderr reader) must not keep the process alive.
        runtime.shutdown_timeout(Duration::from_millis(100));
        match result {
            Ok(()) => ExitCode::SUCCESS,
            Err(error) => error.report(),
        }
    }
}

/// Where the agent is, validated.
enum Endpoint {
    Spawn {
        argv: Vec<String>,
    },
    WebSocket {
        connector: Arc<dyn ConnectionFactory>,
        policy: ReconnectPolicy,
    },
}

/// Splits `--agent-cmd` into words like a POSIX shell, without expansions ([`shell_words`]).
fn split_command_line(cmd: &str) -> CommandResult<Vec<String>> {
    // shell-words' only error is a quote left open.
    shell_words::split(cmd).map_err(|_| {
        CommandError::invalid_input(anyhow!(
            "cannot split --agent-cmd {cmd:?} into words: a quote (' or \") is never closed"
        ))
    })
}

/// Checks the transport flags together and turns them into an endpoint.
fn endpoint(args: &TransportArgs) -> CommandResult<Endpoint> {
    let invalid = |message: String| Err(CommandError::invalid_input(anyhow!(message)));
    match args.transport {
        TransportKind::Stdio => {
            let ws_flags = [
                ("--endpoint", args.endpoint.is_some()),
                ("--ws-heartbeat-ms", args.ws_heartbeat_ms.is_some()),
                (
                    "--ws-reconnect-attempts",
                    args.ws_reconnect_attempts.is_some(),
                ),
                (
                    "--ws-reconnect-base-delay-ms",
                    args.ws_reconnect_base_delay_ms.is_some(),
                ),
            ];
            if let Some((flag, _)) = ws_flags.iter().find(|(_, set)| *set) {
                return invalid(format!(
                    "{flag} only applies to --transport ws; remove it or add --transport ws"
                ));
            }
            if args.profile.is_some() || args.ca_cert.is_some() {
                let flag = if args.profile.is_some() {
                    "--profile"
                } else {
                    "--ca-cert"
                };
                return invalid(format!(
                    "{flag} only applies to --transport http; remove it or add --transport http"
                ));
            }
            let Some(cmd) = args.agent_cmd.as_deref() else {
                return invalid(
                    "--transport stdio needs --agent-cmd PROG, the agent to spawn (for example --agent-cmd 'ski acp serve')"
                        .to_owned(),
                );
            };
            let argv = if args.args.is_empty()
                && cmd.contains(char::is_whitespace)
                && !Path::new(cmd).exists()
            {
                split_command_line(cmd)?
            } else {
                std::iter::once(cmd.to_owned())
                    .chain(args.args.iter().cloned())
                    .collect()
            };
            if argv.first().is_none_or(|program| program.trim().is_empty()) {
                return invalid("--agent-cmd must name a program".to_owned());
            }
            Ok(Endpoint::Spawn { argv })
        }
        TransportKind::Ws | TransportKind::Http => {
            if args.agent_cmd.is_some() || !args.args.is_empty() {
                return invalid(
                    "--agent-cmd and --args only apply to --transport stdio; with ws give --endpoint"
                        .to_owned(),
                );
            }
            let http = args.transport == TransportKind::Http;
            let Some(url) = args.endpoint.as_deref() else {
                return invalid(if http {
                    "--transport http needs --endpoint http://HOST:PORT/acp (start an agent with `ski acp serve --transport http --listen 127.0.0.1:0`)"
                } else {
                    "--transport ws needs --endpoint ws://HOST:PORT (start an agent with `ski acp serve --transport ws --listen 127.0.0.1:0`)"
                }
                .to_owned());
            };
            if !http && (args.profile.is_some() || args.ca_cert.is_some()) {
                let flag = if args.profile.is_some() {
                    "--profile"
                } else {
                    "--ca-cert"
                };
                return invalid(format!(
                    "{flag} only applies to --transport http; remove it or use --transport http"
                ));
            }
            let heartbeat = args
                .ws_heartbeat_ms
                .map_or(DEFAULT_HEARTBEAT, Duration::from_millis);
            let connector: Arc<dyn ConnectionFactory> = if http {
                let profile = match args.profile.unwrap_or(ProfileArg::Ws) {
                    ProfileArg::Ws => Profile::WebSocket,
                    ProfileArg::Http => Profile::Streamable,
                };
                if profile == Profile::Streamable && args.ws_heartbeat_ms.is_some() {
                    return invalid(
                        "--ws-heartbeat-ms applies to WebSocket connections; remove it or use --profile ws"
                            .to_owned(),
                    );
                }
                remote_connector(url, profile, Some(heartbeat), args.ca_cert.as_deref())
                    .map_err(CommandError::invalid_input)?
            } else {
                Arc::new(
                    WsConnector::new(url)
                        .map_err(CommandError::invalid_input)?
                        .heartbeat(Some(heartbeat)),
                )
            };
            let policy = ReconnectPolicy::new(
                args.ws_reconnect_attempts
                    .unwrap_or(DEFAULT_RECONNECT_ATTEMPTS),
                args.ws_reconnect_base_delay_ms
                    .map_or(DEFAULT_RECONNECT_BASE_DELAY, Duration::from_millis),
            );
            Ok(Endpoint::WebSocket { connector, policy })
        }
    }
}

/// The session working directory: absolute and an existing directory.
fn session_cwd(cwd: Option<&Path>) -> CommandResult<PathBuf> {
    let current = std::env::current_dir().map_err(|e| {
        CommandError::configuration(anyhow!("cannot read the current directory: {e}"))
    })?;
    let cwd = match cwd {
        Some(dir) => current.join(dir),
        None => current,
    };
    let cwd = cwd.canonicalize().map_err(|e| {
        CommandError::invalid_input(anyhow!("--cwd {} is not usable: {e}", cwd.display()))
    })?;
    if !cwd.is_dir() {
        return Err(CommandError::invalid_input(anyhow!(
            "--cwd {} is not a directory",
            cwd.display()
        )));
    }
    Ok(cwd)
}

/// The `--add-dir` directories, each made absolute (against the session's `cwd`), resolved and
/// checked to be a directory; duplicates and the `cwd` itself are left out.
fn additional_directories(offer: &OfferArgs, cwd: &Path) -> CommandResult<Vec<PathBuf>> {
    let mut dirs: Vec<PathBuf> = Vec::new();
    for dir in &offer.add_dir {
        let resolved = cwd.join(dir).canonicalize().map_err(|e| {
            CommandError::invalid_input(anyhow!("--add-dir {} is not usable: {e}", dir.display()))
        })?;
        if !resolved.is_dir() {
            return Err(CommandError::invalid_input(anyhow!(
                "--add-dir {} is not a directory",
                dir.display()
            )));
        }
        if resolved != cwd && !dirs.contains(&resolved) {
            dirs.push(resolved);
        }
    }
    Ok(dirs)
}

/// The client configuration of the flags.
fn client_config(
    transport: &TransportArgs,
    offer: Option<&OfferArgs>,
    cwd: &Path,
) -> CommandResult<ClientConfig> {
    let mut config = ClientConfig {
        request_timeout: Some(Duration::from_millis(transport.request_timeout_ms))
            .filter(|timeout| !timeout.is_zero()),
        max_in_flight_sends: usize::try_from(transport.max_in_flight_sends).unwrap_or(usize::MAX),
        // The printer presents notices and compaction progress (on stderr, or as JSON lines).
        notices: true,
        compaction: true,
        ..ClientConfig::default()
    };
    let Some(offer) = offer else {
        return Ok(config);
    };
    if !offer.fs && !offer.fs_root.is_empty() {
        return Err(CommandError::invalid_input(anyhow!(
            "--fs-root needs --fs (it says where the agent may read and write)"
        )));
    }
    if offer.fs {
        let roots = if offer.fs_root.is_empty() {
            let mut roots = vec![cwd.to_path_buf()];
            roots.extend(additional_directories(offer, cwd)?);
            roots
        } else {
            let mut roots = Vec::new();
            for root in &offer.fs_root {
                let resolved = Root::new(&cwd.join(root)).map_err(|e| {
                    CommandError::configuration(anyhow!("--fs-root {}: {e}", root.display()))
                })?;
                roots.push(resolved.path().to_owned());
            }
            roots
        };
        config.fs = Some(FsConfig::read_write(roots));
    }
    if offer.terminal {
        config.terminal = Some(TerminalConfig {
            default_cwd: Some(cwd.to_path_buf()),
            ..TerminalConfig::default()
        });
    }
    let message = offer.permission_message.clone();
    let policy = match offer.permission_decision {
        PermissionDecision::Allow => PermissionPolicy::Allow,
        PermissionDecision::Deny => PermissionPolicy::Deny,
        PermissionDecision::Hold => PermissionPolicy::Hold,
    };
    config.permission = match (message, policy) {
        (Some(message), PermissionPolicy::Allow | PermissionPolicy::Deny) => {
            let allow = offer.permission_decision == PermissionDecision::Allow;
            PermissionPolicy::Handler(Arc::new(
                move |request: crate::acp::RequestPermissionRequest| {
                    let message = message.clone();
                    async move {
                        eprintln!(
                            "permission {} for {:?}: {message}",
                            if allow { "granted" } else { "denied" },
                            request
                                .tool_call
                                .title
                                .value()
                                .map_or("a tool call", String::as_str)
                        );
                        crate::acp::client::choose(&request.options, allow)
                    }
                },
            ))
        }
        (_, policy) => policy,
    };
    Ok(config)
}

/// A connected client and, over stdio, the agent process behind it.
struct Session {
    client: Client,
    agent: Option<AgentProcess>,
}

impl Session {
    async fn open(endpoint: Endpoint, config: ClientConfig) -> CommandResult<Session> {
        match endpoint {
            Endpoint::Spawn { argv } => {
                tracing::debug!(transport = "stdio", command = %argv.join(" "), "ACP client connecting");
                let (transport, agent) = AgentProcess::spawn(&argv)?;
                Ok(Session {
                    client: Client::over(transport, config),
                    agent: Some(agent),
                })
            }
            Endpoint::WebSocket { connector, policy } => {
                let url = connector.describe();
                tracing::debug!(endpoint = %url, "ACP client connecting");
                let config = ClientConfig {
                    reconnect: policy,
                    ..config
                };
                let client = Client::connect(connector, config)
                    .await
                    .map_err(|error| connect_failure(&url, error))?;
                Ok(Session {
                    client,
                    agent: None,
                })
            }
        }
    }

    async fn finish(self) {
        let permissions = self.client.stats().permissions;
        tracing::info!(
            requests = permissions.requests,
            cancelled = permissions.cancelled,
            "ACP client permission requests"
        );
        self.client.close().await;
        if let Some(agent) = self.agent {
            agent.finish().await;
        }
    }
}

fn connect_failure(url: &str, error: ClientError) -> CommandError {
    let hint = match &error {
        ClientError::Connect(ConnectError::InvalidUrl { .. }) => {
            return CommandError::invalid_input(error);
        }
        _ => {
            if url.starts_with("https://") {
                "is an agent listening there, and is its certificate signed by the CA given with --ca-cert (or one of the platform's roots)?"
            } else if url.starts_with("http://") {
                "is an agent listening there? start one with `ski acp serve --transport http --listen 127.0.0.1:0`"
            } else {
                "is an agent listening there? start one with `ski acp serve --transport ws --listen 127.0.0.1:0`"
            }
        }
    };
    CommandError::upstream(anyhow!(error).context(format!("cannot connect to {url}; {hint}")))
}

/// A spawned agent: its stderr is passed through, and at the end it gets a moment to exit after
/// its stdin closed before it is terminated as a process group.
struct AgentProcess {
    stop: oneshot::Sender<()>,
    task: JoinHandle<()>,
}

impl AgentProcess {
    fn spawn(argv: &[String]) -> CommandResult<(Transport, AgentProcess)> {
        let spec = ChildSpec::from_argv("agent", argv)
            .ok_or_else(|| CommandError::invalid_input(anyhow!("--agent-cmd must name a program")))?
            .grace(AGENT_GRACE);
        // The error's text already includes its cause, so it is not chained a second time.
        let mut child = child::spawn(spec).map_err(|error| {
            CommandError::upstream(anyhow!("{error}; check --agent-cmd and --args"))
        })?;
        let stdin = child.take_stdin().map_err(CommandError::internal)?;
        let stdout = child.take_stdout().map_err(CommandError::internal)?;
        let (stop, mut stopped) = oneshot::channel();
        let task = tokio::spawn(async move {
            let mut stderr_open = true;
            loop {
                tokio::select! {
                    biased;
                    _ = &mut stopped => break,
                    line = child.next_stderr_line(), if stderr_open => match line {
                        Some(line) => eprintln!("{line}"),
                        None => stderr_open = false,
                    },
                }
            }
            if tokio::time::timeout(AGENT_EXIT_WAIT, child.wait())
                .await
                .is_err()
            {
                tracing::info!("the agent did not exit after its stdin closed; terminating it");
            }
            match child.shutdown().await {
                Ok(termination) if !termination.group_gone => {
                    tracing::warn!(%termination, "the agent's process group survived");
                }
                Ok(termination) => tracing::debug!(%termination, "agent ended"),
                Err(error) => tracing::warn!(%error, "ending the agent failed"),
            }
        });
        Ok((Transport::bytes(stdout, stdin), AgentProcess { stop, task }))
    }

    async fn finish(self) {
        let _ = self.stop.send(());
        if let Err(error) = self.task.await {
            tracing::warn!(%error, "the agent supervisor failed");
        }
    }
}

/// Maps a failed request to an exit code and a message that says what to do.
fn call_failure(error: ClientError) -> CommandError {
    let hint = match error.call_error() {
        Some(CallError::Timeout { .. }) => Some("raise --request-timeout-ms (0 waits forever)"),
        Some(CallError::Eof | CallError::NotConnected) => {
            Some("the agent closed the connection; see its output above")
        }
        _ => None,
    };
    let error = anyhow!(error);
    CommandError::upstream(match hint {
        Some(hint) => error.context(hint.to_owned()),
        None => error,
    })
}

/// Prints updates and turn results in the chosen form.
struct Printer {
    json: bool,
    printed_text: bool,
    ends_with_newline: bool,
    /// The turn's messages, from chunks that carry a `messageId`.
    messages: Messages,
    /// The `messageId` of the agent message last printed (human form).
    last_message: Option<String>,
}

impl Printer {
    fn new(json: bool) -> Self {
        Self {
            json,
            printed_text: false,
            ends_with_newline: true,
            messages: Messages::default(),
            last_message: None,
        }
    }

    /// What the human form shows on stderr for an update that is not the reply's text: a
    /// notice, the context use, a compaction's progress.
    fn aside(update: &SessionUpdate) -> Option<String> {
        match update {
            SessionUpdate::Notice(notice) => Some(match &notice.description {
                Some(description) => format!(
                    "notice ({}): {}: {description}",
                    notice.severity, notice.title
                ),
                None => format!("notice ({}): {}", notice.severity, notice.title),
            }),
            SessionUpdate::UsageUpdate(usage) => Some(format!(
                "context: {} of {} tokens in use",
                usage.used, usage.size
            )),
            SessionUpdate::CompactionUpdate(compaction) => Some(format!(
                "compaction {}: {}",
                compaction.compaction_id, compaction.status
            )),
            _ => None,
        }
    }

    /// Prints `text`; a closed stdout (a pipe whose reader left) ends the output quietly. A
    /// stdout nobody reads blocks the write, outside the runtime's workers so the connection's
    /// tasks go on meanwhile; the turn stops taking updates, and the client's bounded update
    /// hand-off stops reading the agent.
    fn write(text: &str) {
        output::blocking_write(|| output::text(text));
    }

    fn line(value: &Value) {
        Self::write(&format!("{}\n", sorted_line(value)));
    }

    fn update(&mut self, notification: &SessionNotification) {
        let update = &notification.update;
        if let SessionUpdate::Unknown(raw) = update {
            let kind = raw.get(SessionUpdate::TAG).and_then(Value::as_str);
            tracing::debug!(
                kind = kind.unwrap_or("?"),
                "skipped an update of an unknown kind"
            );
            return;
        }
        let text = match update {
            SessionUpdate::AgentMessageChunk(chunk)
            | SessionUpdate::AgentThoughtChunk(chunk)
            | SessionUpdate::UserMessageChunk(chunk) => chunk.content.as_text(),
            _ => None,
        };
        let message_id = self.messages.push(update).map(str::to_owned);
        let payload = match serde_json::to_value(update) {
            Ok(payload) => payload,
            Err(error) => {
                tracing::warn!(%error, "cannot re-encode an update");
                return;
            }
        };
        let kind = payload
            .get(SessionUpdate::TAG)
            .cloned()
            .unwrap_or(Value::Null);
        if self.json {
            let mut line = json!({
                "type": "session_update",
                "sessionId": notification.session_id,
                "update": kind,
                "payload": payload,
            });
            if let Some(text) = text {
                line["text"] = json!(text);
            }
            Self::line(&line);
            return;
        }
        match (update, text) {
            (SessionUpdate::AgentMessageChunk(_), Some(text)) if !text.is_empty() => {
                // A new message id starts a new paragraph.
                let new_message = message_id.is_some()
                    && self.last_message.is_some()
                    && message_id != self.last_message;
                if new_message && self.printed_text {
                    Self::write(if self.ends_with_newline { "\n" } else { "\n\n" });
                }
                if message_id.is_some() {
                    self.last_message = message_id;
                }
                Self::write(text);
                self.printed_text = true;
                self.ends_with_newline = text.ends_with('\n');
            }
            _ => match Self::aside(update) {
                Some(aside) => eprintln!("{aside}"),
                None => tracing::debug!(update = %kind, "session update"),
            },
        }
    }

    fn turn_end(&mut self, session_id: &str, stop_reason: &StopReason) {
        let messages = self.messages.take();
        self.last_message = None;
        if self.json {
            // The turn's messages, each whole, before its result.
            for message in messages {
                Self::line(&json!({
                    "type": "message",
                    "sessionId": session_id,
                    "messageId": message.message_id,
                    "role": message.role.as_str(),
                    "text": message.text,
                    "chunks": message.chunks,
                }));
            }
            Self::line(&json!({
                "type": "prompt_result",
                "sessionId": session_id,
                "stopReason": stop_reason.as_str(),
            }));
            return;
        }
        if self.printed_text && !self.ends_with_newline {
            Self::write("\n");
        }
        self.printed_text = false;
        self.ends_with_newline = true;
        Self::write(&format!("stopReason: {stop_reason}\n"));
    }
}

async fn connect(args: ConnectArgs) -> CommandResult {
    if let Some(index) = args.prompt.iter().position(|p| p.trim().is_empty()) {
        return Err(CommandError::invalid_input(anyhow!(
            "--prompt must not be blank (prompt {} is)",
            index + 1
        )));
    }
    if args
        .session_id
        .as_deref()
        .is_some_and(|id| id.trim().is_empty())
    {
        return Err(CommandError::invalid_input(anyhow!(
            "--session-id must not be blank"
        )));
    }
    let endpoint = endpoint(&args.transport)?;
    let cwd = session_cwd(args.offer.cwd.as_deref())?;
    let config = client_config(&args.transport, Some(&args.offer), &cwd)?;
    if args.protocol == 1 && (args.cancel_tool_calls || !args.config.is_empty()) {
        return Err(CommandError::invalid_input(anyhow!(
            "--cancel-tool-calls and --config need --protocol 2"
        )));
    }
    let session = Session::open(endpoint, config).await?;
    let result = match args.protocol {
        1 => turns(&session.client, &args, &cwd).await,
        _ => turns_v2(&session.client, &args, &cwd).await,
    };
    session.finish().await;
    result
}

/// Initializes asking for protocol version 2 and, if the agent answers 2, runs the turns in v2.
async fn turns_v2(client: &Client, args: &ConnectArgs, cwd: &Path) -> CommandResult {
    let negotiated = client
        .initialize_as(crate::acp::v2::PROTOCOL_VERSION)
        .await
        .map_err(call_failure)?;
    if negotiated.protocol_version() != crate::acp::v2::PROTOCOL_VERSION {
        return Err(CommandError::upstream(anyhow!(
            "the agent answered initialize with protocol version {}; this client is pinned to 2 \
             (--protocol 2), so it stops here",
            negotiated.protocol_version()
        )));
    }
    let takes_roots = match &negotiated {
        crate::acp::client::v2::Negotiated::V2(response) => response
            .capabilities
            .session
            .as_ref()
            .is_some_and(|session| session.additional_directories.is_some()),
        crate::acp::client::v2::Negotiated::V1(_) => false,
    };
    if !takes_roots && !additional_directories(&args.offer, cwd)?.is_empty() {
        return Err(CommandError::upstream(anyhow!(
            "the agent does not advertise session.additionalDirectories, so --add-dir cannot be \
             sent to it"
        )));
    }
    v2::turns(client, args, cwd).await
}

/// Initializes and checks that the agent speaks protocol version 1.
async fn initialize(client: &Client) -> CommandResult<crate::acp::InitializeResponse> {
    let response = client.initialize().await.map_err(call_failure)?;
    if response.protocol_version != PROTOCOL_VERSION {
        return Err(CommandError::upstream(anyhow!(
            "the agent answered initialize with protocol version {}; this client speaks {PROTOCOL_VERSION}",
            response.protocol_version
        )));
    }
    Ok(response)
}

/// The `additionalDirectories` of `session/new`: none without `--add-dir`; with it, refused
/// unless the agent advertised `sessionCapabilities.additionalDirectories` (ACP: clients send
/// them only then).
fn requested_roots(
    init: &crate::acp::InitializeResponse,
    args: &ConnectArgs,
    cwd: &Path,
) -> CommandResult<Option<Vec<String>>> {
    let dirs = additional_directories(&args.offer, cwd)?;
    if dirs.is_empty() {
        return Ok(None);
    }
    let advertised = init
        .agent_capabilities
        .as_ref()
        .and_then(|caps| caps.session_capabilities.as_ref())
        .is_some_and(|session| session.additional_directories.is_some());
    if !advertised {
        return Err(CommandError::upstream(anyhow!(
            "the agent does not advertise sessionCapabilities.additionalDirectories, so --add-dir \
             cannot be sent to it"
        )));
    }
    Ok(Some(
        dirs.iter()
            .map(|dir| dir.to_string_lossy().into_owned())
            .collect(),
    ))
}

async fn turns(client: &Client, args: &ConnectArgs, cwd: &Path) -> CommandResult {
    let init = initialize(client).await?;
    let session_id = match &args.session_id {
        Some(id) => id.clone(),
        None => {
            let mut request = NewSessionRequest::new(cwd.to_string_lossy());
            request.additional_directories = requested_roots(&init, args, cwd)?;
            client
                .new_session(&request)
                .await
                .map_err(call_failure)?
                .session_id
        }
    };
    let mut updates = client.follow(&session_id);
    let mut printer = Printer::new(args.json);
    let mut interrupted = false;
    let mut signals = true;
    for text in &args.prompt {
        let request = PromptRequest::text(&session_id, text);
        let prompt = client.prompt(&request);
        tokio::pin!(prompt);
        let result = loop {
            tokio::select! {
                biased;
                result = &mut prompt => break result,
                Some(update) = updates.next() => printer.update(&update),
                signal = tokio::signal::ctrl_c(), if signals => {
                    if signal.is_err() {
                        signals = false;
                    } else if interrupted {
                        return Err(CommandError::upstream(anyhow!(
                            "interrupted twice; the turn was left unfinished"
                        )));
                    } else {
                        interrupted = true;
                        tracing::info!("interrupted; cancelling the turn (press Ctrl-C again to quit)");
                        if let Err(error) = client.cancel(&session_id).await {
                            tracing::warn!(%error, "cannot send session/cancel");
                        }
                    }
                }
            }
        };
        while let Some(update) = updates.try_next() {
            printer.update(&update);
        }
        let stop_reason = match result {
            Ok(response) => response.stop_reason,
            // An agent that cancels a turn by request id ends it with -32800: the turn is over.
            Err(error) if error.is_rpc(ErrorCode::REQUEST_CANCELLED) => StopReason::Cancelled,
            Err(error) => return Err(call_failure(error)),
        };
        printer.turn_end(&session_id, &stop_reason);
        if interrupted {
            break;
        }
    }
    Ok(())
}

async fn stop(args: StopArgs) -> CommandResult {
    if args.session_id.trim().is_empty() {
        return Err(CommandError::invalid_input(anyhow!(
            "--session-id must not be blank"
        )));
    }
    let endpoint = endpoint(&args.transport)?;
    let cwd = session_cwd(None)?;
    let config = client_config(&args.transport, None, &cwd)?;
    let session = Session::open(endpoint, config).await?;
    let result = async {
        initialize(&session.client).await?;
        session
            .client
            .stop(&args.session_id)
            .await
            .map_err(call_failure)?;
        if args.json {
            Printer::line(&json!({"type": "session_stop", "sessionId": args.session_id}));
        } else {
            Printer::write(&format!("stopped session {}\n", args.session_id));
        }
        Ok(())
    }
    .await;
    session.finish().await;
    result
}

async fn drive(args: DriveArgs) -> CommandResult {
    let text = if args.script == Path::new("-") {
        std::io::read_to_string(std::io::stdin())
            .context("cannot read the script from stdin")
            .map_err(CommandError::invalid_input)?
    } else {
        std::fs::read_to_string(&args.script)
            .with_context(|| format!("cannot read --script {}", args.script.display()))
            .map_err(CommandError::invalid_input)?
    };
    let steps = driver::parse_script(&text).map_err(CommandError::invalid_input)?;
    let endpoint = endpoint(&args.transport)?;
    let cwd = session_cwd(args.offer.cwd.as_deref())?;
    let config = client_config(&args.transport, Some(&args.offer), &cwd)?;
    let session = Session::open(endpoint, config).await?;
    let emit: driver::Emit = Arc::new(|line: Value| Printer::line(&line));
    let result = driver::run(&session.client, &steps, &cwd.to_string_lossy(), emit).await;
    session.finish().await;
    result.map(|_| ()).map_err(|error| match error {
        driver::DriverError::NoSession { .. } | driver::DriverError::Script(_) => {
            CommandError::invalid_input(error)
        }
        _ => CommandError::upstream(error),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn command_lines_split_like_a_shell() {
        assert_eq!(
            split_command_line("ski acp serve  --transport stdio").unwrap(),
            ["ski", "acp", "serve", "--transport", "stdio"]
        );
        assert_eq!(
            split_command_line(r#"a 'b c' "d \"e\"" f\ g ''"#).unwrap(),
            ["a", "b c", "d \"e\"", "f g", ""]
        );
        for open in ["a 'b", "a \"b"] {
            let error = split_command_line(open).unwrap_err().to_string();
            assert!(
                error.contains("--agent-cmd") && error.contains("never closed"),
                "{open}: {error}"
            );
        }
    }
}
