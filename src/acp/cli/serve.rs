//! `ski acp serve`: runs the reference ACP agent over stdio, WebSocket or ACP's remote `/acp`
//! transport (Streamable HTTP and the WebSocket upgrade), with a flag for every behaviour a test
//! may need to drive.
//!
//! On stdio, stdout carries only ACP messages and the process exits when stdin ends. On
//! WebSocket, the bound address is printed on stderr as `listening on ws://HOST:PORT/acp` once
//! connections are accepted; on HTTP as `listening on http://HOST:PORT/acp`, or with
//! `--tls-cert` and `--tls-key` as `listening on https://HOST:PORT/acp` (see
//! [`crate::acp::remote::server`] and [`crate::acp::remote::tls`]; a certificate or key that
//! cannot be used exits 2 before anything listens). Logs go to stderr only.
//!
//! Each connection is bounded: messages of 32 MiB, `--max-in-flight-sends` (64) messages waiting
//! to be written, while which the connection's input is not read, and `--max-sessions` (1024) live
//! sessions (see [`crate::acp::agent`]); the agent as a whole keeps `--max-total-sessions` (4096).
//! On WebSocket, `--max-connections` (1024) clients at once, an upgrade within
//! `--handshake-timeout-ms`, each message whole within `--message-timeout-ms` of its first byte,
//! and a ping after `--idle-timeout-ms` of silence answered within `--pong-timeout-ms` (see
//! [`crate::transport::ws_server`]).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::anyhow;
use clap::{Args, ValueEnum};
use tokio_rustls::rustls::ServerConfig;
use tokio_util::sync::CancellationToken;

use super::LogArgs;
use crate::acp::agent::{
    Agent, AgentConfig, AuthMethodSpec, ConnectionOptions, EchoConfig, Feature, Features,
    PermissionConfig, PermissionMode, PolicyMode, ToolCallSpec, TurnUpdates,
    config::{
        DEFAULT_MAX_SESSIONS, DEFAULT_MAX_TOTAL_SESSIONS, DEFAULT_PAGE_SIZE,
        DEFAULT_PERMISSION_TIMEOUT,
    },
};
use crate::acp::methods::Generation;
use crate::acp::remote::server::{DEFAULT_SSE_QUEUE, HttpOptions, HttpServer};
use crate::exit::{CommandError, CommandResult};
use crate::jsonrpc::Transport;
use crate::transport::ws_server::{Liveness, WsServer, WsServerOptions};

/// The default `--listen` address.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:8900";

/// How long the runtime waits for its last tasks after serving ended.
const RUNTIME_SHUTDOWN: Duration = Duration::from_secs(1);

const EXAMPLES: &str = "\
Examples:
  ski acp serve
      Serve on stdio (for clients that spawn the agent, e.g. `acpx --agent \"ski acp serve\"`).
  ski acp serve --transport ws --listen 127.0.0.1:0
      Serve on a free loopback port; the address is printed on stderr.
  ski acp serve --transport http --listen 127.0.0.1:0
      Serve ACP's remote transport on http://HOST:PORT/acp: Streamable HTTP (POST, SSE GET
      streams, DELETE; HTTP/1.1 or cleartext HTTP/2) and the WebSocket upgrade.
  ski acp serve --transport http --listen 127.0.0.1:0 --tls-cert server.pem --tls-key key.pem
      The same on https://HOST:PORT/acp: HTTP/2 chosen by ALPN (h2), HTTP/1.1 for the
      WebSocket upgrade; clients trust the CA that signed server.pem (ski's client: --ca-cert).
  ski acp serve --permission-mode disabled --hold
      Every prompt runs until it is cancelled.
  ski acp serve --execution-state --max-retries 2 --fail-attempts 1
      The first model attempt fails, the retry succeeds; states and retries are reported.
  ski acp serve --tool-call read:notes.txt --tool-call 'terminal:ls -l'
      Every prompt reads a file and runs a command through the client.
  ski acp serve --minimal
      Advertise no optional capability (no loadSession, no sessionCapabilities, no logout).
  ski acp serve --enable fork --enable set-model
      Also offer the unstable session/fork and the legacy models state, which stable ACP v1
      output leaves out by default.
  ski acp serve --strict-version
      Refuse any protocolVersion but 1 with -32602 instead of answering 1 (the seed document's WS-023).

A prompt may override the echo back end under `_meta.ski` of its params: delayMs, hold,
failAttempts, toolCalls (a list of tool call specs), and floodChunks (send the reply's
agent_message_chunk that many times, a notification flood for benchmarks), e.g.
  {\"_meta\": {\"ski\": {\"delayMs\": 200, \"floodChunks\": 100000}}}

Limits of one connection: messages of 32 MiB (an oversize line is answered -32600 and skipped, an
oversize WebSocket message is answered -32600 and the socket closed with code 1009);
--max-in-flight-sends messages waiting to be written, while which no input is read; --max-sessions
live sessions, after which session/new and session/fork answer -32603 (and --max-total-sessions
across all connections). On WebSocket: --max-connections clients at once (one more gets close code
1013), the upgrade within --handshake-timeout-ms, a message whole within --message-timeout-ms of its
first byte (else close code 1008), and a client silent for --idle-timeout-ms is pinged and must send
something within --pong-timeout-ms (else close code 1001). On HTTP: --max-connections ACP
connections (Streamable HTTP and WebSocket; one more is answered 503), request headers within
--handshake-timeout-ms, POST bodies of 32 MiB (413), and --max-sse-queue messages waiting per SSE
stream: a reader that falls that far behind loses its stream (it ends, the message that did not fit
is dropped, and the next GET gets messages from then on).

Exit codes: 0 ok, 2 invalid arguments, 3 configuration error, 4 cannot listen, 5 internal error.";

/// Which transport to serve on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum TransportArg {
    /// Newline-delimited JSON-RPC on stdin and stdout.
    Stdio,
    /// WebSocket, one JSON-RPC message per text frame, several clients at once.
    Ws,
    /// ACP's remote transport on /acp: Streamable HTTP and the WebSocket upgrade.
    Http,
}

/// `--permission-mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum PermissionModeArg {
    /// Never ask; every prompt runs.
    Disabled,
    /// Ask; if the client does not answer in time or the connection fails, run anyway.
    Permissive,
    /// Ask; if asking fails the prompt ends with an error, if the client refuses it is cancelled.
    Required,
}

/// `--permission-policy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum PolicyArg {
    /// Grant allow_once without asking the client.
    Allow,
    /// Refuse without asking; every prompt ends cancelled.
    Deny,
    /// Ask the client and remember allow_always / reject_always per session.
    Ask,
}

/// `--turn-updates`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum TurnUpdatesArg {
    /// available_commands_update, plan, tool_call, tool_call_update, agent_message_chunk, and
    /// session_info_update after a session's first turn.
    Full,
    /// Only the agent_message_chunk (plus the updates of injected tool calls).
    Message,
}

fn positive_ms(text: &str) -> Result<u64, String> {
    match text.parse::<u64>() {
        Ok(0) => Err("must be at least 1".to_owned()),
        Ok(n) => Ok(n),
        Err(_) => Err(format!("{text:?} is not a whole number of milliseconds")),
    }
}

fn positive(text: &str) -> Result<usize, String> {
    match text.parse::<usize>() {
        Ok(0) => Err("must be at least 1".to_owned()),
        Ok(n) => Ok(n),
        Err(_) => Err(format!("{text:?} is not a whole number")),
    }
}

/// Arguments of `ski acp serve`.
#[derive(Debug, Clone, Args)]
#[command(after_long_help = EXAMPLES)]
pub struct ServeArgs {
    /// Transport to serve on.
    #[arg(long, value_enum, default_value = "stdio")]
    pub transport: TransportArg,

    /// Address for --transport ws or http, HOST:PORT (port 0 picks a free port) [default:
    /// 127.0.0.1:8900].
    #[arg(long, value_name = "HOST:PORT")]
    pub listen: Option<String>,

    /// Most messages queued for sending on one connection before senders wait (and the
    /// connection's input is not read).
    #[arg(long, value_name = "N", default_value_t = 64, value_parser = positive)]
    pub max_in_flight_sends: usize,

    /// Whether the client is asked before a prompt runs, and how strictly.
    #[arg(
        long,
        value_enum,
        default_value = "permissive",
        help_heading = "Permission"
    )]
    pub permission_mode: PermissionModeArg,

    /// How long to wait for the client's permission answer [default: 10000].
    #[arg(long, value_name = "MS", help_heading = "Permission")]
    pub permission_timeout_ms: Option<u64>,

    /// Decide locally (allow, deny) or ask the client (ask).
    #[arg(long, value_enum, default_value = "ask", help_heading = "Permission")]
    pub permission_policy: PolicyArg,

    /// Send execution_state_update (queued, running, retrying, completed, cancelled, timed_out, failed).
    #[arg(long, help_heading = "Prompt turns")]
    pub execution_state: bool,

    /// Retry a failed model attempt up to N times, reporting retry_update.
    #[arg(
        long,
        value_name = "N",
        default_value_t = 0,
        help_heading = "Prompt turns"
    )]
    pub max_retries: u32,

    /// Base delay between retries; retry n waits n times this.
    #[arg(
        long,
        value_name = "MS",
        default_value_t = 100,
        help_heading = "Prompt turns"
    )]
    pub retry_base_delay_ms: u64,

    /// Make the first N model attempts of every prompt fail.
    #[arg(
        long,
        value_name = "N",
        default_value_t = 0,
        help_heading = "Prompt turns"
    )]
    pub fail_attempts: u32,

    /// End a prompt that runs longer than this with error -32603.
    #[arg(long, value_name = "MS", help_heading = "Prompt turns")]
    pub prompt_timeout_ms: Option<u64>,

    /// Make every model attempt take this long.
    #[arg(
        long,
        value_name = "MS",
        conflicts_with = "hold",
        help_heading = "Prompt turns"
    )]
    pub delay_ms: Option<u64>,

    /// Keep every prompt running until it is cancelled (or times out).
    #[arg(long, help_heading = "Prompt turns")]
    pub hold: bool,

    /// Make every turn a tool call that runs until it is cancelled (tool_call/cancel in ACP
    /// v2, where it ends `cancelled` and the turn goes on; otherwise the turn's own cancel)
    #[arg(long, help_heading = "Prompt turns")]
    pub hold_tool_call: bool,

    // The help text is an attribute, not a doc comment, because its brackets are not links.
    #[arg(
        long,
        value_name = "SPEC",
        help_heading = "Prompt turns",
        help = "Make a tool call through the client in every prompt: read:PATH[:LINE[:LIMIT]], \
                write:PATH[=CONTENT] or terminal:COMMAND [ARGS...]; repeatable"
    )]
    pub tool_call: Vec<String>,

    /// Which updates a successful prompt sends.
    #[arg(
        long,
        value_enum,
        default_value = "full",
        help_heading = "Prompt turns"
    )]
    pub turn_updates: TurnUpdatesArg,

    /// Remove sessions idle for longer than this.
    #[arg(long, value_name = "MS", help_heading = "Sessions")]
    pub session_ttl_ms: Option<u64>,

    /// Sessions per session/list page.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_PAGE_SIZE, value_parser = positive, help_heading = "Sessions")]
    pub page_size: usize,

    /// Live sessions one connection may own; session/new and session/fork beyond it answer
    /// -32603 until one is closed or deleted.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MAX_SESSIONS, value_parser = positive, help_heading = "Sessions")]
    pub max_sessions: usize,

    /// Live sessions across all connections; session/new and session/fork beyond it answer
    /// -32603 until one is closed or deleted.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MAX_TOTAL_SESSIONS, value_parser = positive, help_heading = "Sessions")]
    pub max_total_sessions: usize,

    /// WebSocket connections at once, upgrades under way included; a client past it is
    /// closed with code 1013 and a reason. With --transport http: ACP connections at once
    /// (Streamable HTTP and WebSocket), one more answered 503 [default: 1024]
    #[arg(long, value_name = "N", value_parser = positive, help_heading = "WebSocket limits")]
    pub max_connections: Option<usize>,

    /// How long a client may take to complete the WebSocket upgrade; with --transport http,
    /// to send a request's headers [default: 10000]
    #[arg(long, value_name = "MS", value_parser = positive_ms, help_heading = "WebSocket limits")]
    pub handshake_timeout_ms: Option<u64>,

    /// How long an inbound message may take from its first byte to its last; past it the
    /// connection is closed with code 1008 [default: 30000]
    #[arg(long, value_name = "MS", value_parser = positive_ms, help_heading = "WebSocket limits")]
    pub message_timeout_ms: Option<u64>,

    /// How long a client may send nothing before it is pinged [default: 60000]
    #[arg(long, value_name = "MS", value_parser = positive_ms, help_heading = "WebSocket limits")]
    pub idle_timeout_ms: Option<u64>,

    /// How long a pinged client has to send anything; past it the connection is closed with
    /// code 1001 [default: 30000]
    #[arg(long, value_name = "MS", value_parser = positive_ms, help_heading = "WebSocket limits")]
    pub pong_timeout_ms: Option<u64>,

    /// With --transport http: serve https:// with this PEM certificate chain, the server's
    /// certificate first (needs --tls-key)
    #[arg(long, value_name = "PEM", requires = "tls_key", help_heading = "TLS")]
    pub tls_cert: Option<PathBuf>,

    /// With --transport http: the PEM private key of --tls-cert (PKCS#8, PKCS#1 or SEC1)
    #[arg(long, value_name = "PEM", requires = "tls_cert", help_heading = "TLS")]
    pub tls_key: Option<PathBuf>,

    /// Messages one SSE stream holds for its reader; past it the stream ends and the message is
    /// dropped [default: 1024]
    #[arg(long, value_name = "N", value_parser = positive, help_heading = "HTTP limits")]
    pub max_sse_queue: Option<usize>,

    /// Advertise an auth method, ID or ID=NAME; repeatable.
    #[arg(long, value_name = "ID[=NAME]", help_heading = "Capabilities")]
    pub auth_method: Vec<String>,

    /// Refuse session work with -32000 until the client called authenticate.
    #[arg(long, help_heading = "Capabilities")]
    pub auth_required: bool,

    /// Turn an optional capability off: load-session, list, resume, fork, delete, close,
    /// export, stop, logout, set-model; repeatable.
    #[arg(long, value_name = "FEATURE", help_heading = "Capabilities")]
    pub disable: Vec<String>,

    /// Turn on a capability beyond stable ACP v1, off by default: fork (the unstable
    /// session/fork) or set-model (the legacy models state and session/set_model); repeatable.
    #[arg(long, value_name = "FEATURE", help_heading = "Capabilities")]
    pub enable: Vec<String>,

    /// Turn every optional capability off (--enable still turns one on).
    #[arg(long, help_heading = "Capabilities")]
    pub minimal: bool,

    /// Refuse an initialize whose protocolVersion is not 1 with -32602, as
    /// acp-websocket-serve-spec.md asks; by default any version is answered with 1, as ACP
    /// negotiates, and the client decides.
    #[arg(long, help_heading = "Capabilities")]
    pub strict_version: bool,

    /// The newest ACP protocol version to speak: 2 offers ACP v2 (draft) and v1, and
    /// initialize settles on the one the client asks for; 1 offers v1 alone
    #[arg(long, value_name = "VERSION", default_value_t = 2,
        value_parser = clap::value_parser!(u16).range(1..=2), help_heading = "Capabilities")]
    pub protocol: u16,

    #[command(flatten)]
    pub log: LogArgs,
}

/// Where to serve.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Listen {
    /// stdin and stdout.
    Stdio,
    /// A WebSocket server on `HOST:PORT`.
    Ws(String),
    /// The remote `/acp` transport on `HOST:PORT`.
    Http(String),
}

impl ServeArgs {
    /// Checks the arguments and turns them into the agent's configuration.
    pub fn config(&self) -> Result<(AgentConfig, Listen), CommandError> {
        let invalid = |message: String| CommandError::invalid_input(anyhow!(message));
        let listen = match (self.transport, &self.listen) {
            (TransportArg::Stdio, Some(_)) => {
                return Err(invalid(
                    "--listen applies only to --transport ws or http; remove it or add --transport ws"
                        .to_owned(),
                ));
            }
            (TransportArg::Stdio, None) => Listen::Stdio,
            (TransportArg::Ws, listen) => Listen::Ws(
                parse_listen(listen.as_deref().unwrap_or(DEFAULT_LISTEN)).map_err(invalid)?,
            ),
            (TransportArg::Http, listen) => Listen::Http(
                parse_listen(listen.as_deref().unwrap_or(DEFAULT_LISTEN)).map_err(invalid)?,
            ),
        };
        let mode = match self.permission_mode {
            PermissionModeArg::Disabled => PermissionMode::Disabled,
            PermissionModeArg::Permissive => PermissionMode::Permissive,
            PermissionModeArg::Required => PermissionMode::Required,
        };
        let policy = match self.permission_policy {
            PolicyArg::Allow => PolicyMode::Allow,
            PolicyArg::Deny => PolicyMode::Deny,
            PolicyArg::Ask => PolicyMode::Ask,
        };
        if mode == PermissionMode::Disabled {
            if self.permission_timeout_ms.is_some() {
                return Err(invalid(
                    "--permission-timeout-ms has no effect with --permission-mode disabled; remove one of them"
                        .to_owned(),
                ));
            }
            if policy != PolicyMode::Ask {
                return Err(invalid(format!(
                    "--permission-policy {} has no effect with --permission-mode disabled; use --permission-mode permissive or required",
                    policy.name()
                )));
            }
        }
        if self.permission_timeout_ms == Some(0) {
            return Err(invalid(
                "--permission-timeout-ms must be at least 1".to_owned(),
            ));
        }
        if self.prompt_timeout_ms == Some(0) {
            return Err(invalid("--prompt-timeout-ms must be at least 1".to_owned()));
        }
        let auth_methods = self
            .auth_method
            .iter()
            .map(|spec| spec.parse::<AuthMethodSpec>())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|error| invalid(format!("--auth-method: {error}")))?;
        if self.auth_required && auth_methods.is_empty() {
            return Err(invalid(
                "--auth-required needs at least one --auth-method to authenticate with".to_owned(),
            ));
        }
        let mut features = if self.minimal {
            Features::minimal()
        } else {
            Features::stable()
        };
        let parse = |flag: &str, names: &[String]| {
            names
                .iter()
                .map(|name| name.parse::<Feature>())
                .collect::<Result<Vec<_>, _>>()
                .map_err(|error| invalid(format!("{flag}: {error}")))
        };
        let enabled = parse("--enable", &self.enable)?;
        let disabled = parse("--disable", &self.disable)?;
        if let Some(both) = enabled.iter().find(|f| disabled.contains(f)) {
            return Err(invalid(format!(
                "--enable {both} and --disable {both} contradict each other; keep one"
            )));
        }
        for feature in enabled {
            features.set(feature, true);
        }
        for feature in disabled {
            features.set(feature, false);
        }
        let tool_calls = self
            .tool_call
            .iter()
            .map(|spec| spec.parse::<ToolCallSpec>())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|error| invalid(format!("--tool-call: {error}")))?;
        let config = AgentConfig {
            features,
            auth_methods,
            auth_required: self.auth_required,
            strict_version: self.strict_version,
            max_protocol: Generation::from_protocol_version(self.protocol)
                .unwrap_or(Generation::V2),
            additional_directories: !self.minimal,
            permission: PermissionConfig {
                mode,
                timeout: self
                    .permission_timeout_ms
                    .map_or(DEFAULT_PERMISSION_TIMEOUT, Duration::from_millis),
                policy,
            },
            execution_state: self.execution_state,
            max_retries: self.max_retries,
            retry_base_delay: Duration::from_millis(self.retry_base_delay_ms),
            prompt_timeout: self.prompt_timeout_ms.map(Duration::from_millis),
            session_ttl: self.session_ttl_ms.map(Duration::from_millis),
            page_size: self.page_size,
            max_sessions: self.max_sessions,
            max_total_sessions: self.max_total_sessions,
            turn_updates: match self.turn_updates {
                TurnUpdatesArg::Full => TurnUpdates::Full,
                TurnUpdatesArg::Message => TurnUpdates::Message,
            },
            echo: EchoConfig {
                delay: Duration::from_millis(self.delay_ms.unwrap_or(0)),
                hold: self.hold,
                hold_tool_call: self.hold_tool_call,
                fail_attempts: self.fail_attempts,
                tool_calls,
                ..EchoConfig::default()
            },
            ..AgentConfig::default()
        };
        Ok((config, listen))
    }
}

impl ServeArgs {
    /// The WebSocket server's limits: the flags given, the defaults for the rest. With
    /// `--transport stdio` a WebSocket flag is refused.
    pub fn ws_options(&self) -> Result<WsServerOptions, CommandError> {
        let given = [
            ("--max-connections", self.max_connections.is_some()),
            (
                "--handshake-timeout-ms",
                self.handshake_timeout_ms.is_some(),
            ),
            ("--message-timeout-ms", self.message_timeout_ms.is_some()),
            ("--idle-timeout-ms", self.idle_timeout_ms.is_some()),
            ("--pong-timeout-ms", self.pong_timeout_ms.is_some()),
        ];
        if self.transport == TransportArg::Stdio
            && let Some((flag, _)) = given.iter().find(|(_, given)| *given)
        {
            return Err(CommandError::invalid_input(anyhow!(
                "{flag} applies only to --transport ws; remove it or add --transport ws"
            )));
        }
        if self.transport == TransportArg::Http
            && let Some((flag, _)) = given[2..].iter().find(|(_, given)| *given)
        {
            return Err(CommandError::invalid_input(anyhow!(
                "{flag} applies only to --transport ws (the WebSocket upgrade of --transport http has no message deadline or ping); remove it or use --transport ws"
            )));
        }
        if self.transport != TransportArg::Http && self.max_sse_queue.is_some() {
            return Err(CommandError::invalid_input(anyhow!(
                "--max-sse-queue applies only to --transport http; remove it or add --transport http"
            )));
        }
        let defaults = WsServerOptions::default();
        let millis =
            |given: Option<u64>, default: Duration| given.map_or(default, Duration::from_millis);
        Ok(WsServerOptions {
            max_connections: self.max_connections.unwrap_or(defaults.max_connections),
            handshake_timeout: millis(self.handshake_timeout_ms, defaults.handshake_timeout),
            liveness: Liveness {
                message_timeout: millis(self.message_timeout_ms, defaults.liveness.message_timeout),
                idle_timeout: millis(self.idle_timeout_ms, defaults.liveness.idle_timeout),
                pong_timeout: millis(self.pong_timeout_ms, defaults.liveness.pong_timeout),
            },
            ..defaults
        })
    }
}

impl ServeArgs {
    /// The TLS configuration of `--tls-cert` and `--tls-key` (read and checked now), `None`
    /// without them; refused with a transport other than http.
    pub fn tls(&self) -> Result<Option<Arc<ServerConfig>>, CommandError> {
        let (Some(cert), Some(key)) = (&self.tls_cert, &self.tls_key) else {
            return Ok(None);
        };
        if self.transport != TransportArg::Http {
            return Err(CommandError::invalid_input(anyhow!(
                "--tls-cert and --tls-key apply only to --transport http; remove them or add --transport http"
            )));
        }
        crate::acp::remote::tls::server_config(cert, key)
            .map(Some)
            .map_err(|error| CommandError::invalid_input(anyhow!("{error}")))
    }

    /// The limits of `--transport http`: the flags given, the defaults for the rest.
    pub fn http_options(&self) -> HttpOptions {
        let defaults = HttpOptions::default();
        let max_connections = self.max_connections.unwrap_or(defaults.max_connections);
        HttpOptions {
            max_connections,
            max_tcp_connections: max_connections.saturating_mul(4),
            header_timeout: self
                .handshake_timeout_ms
                .map_or(defaults.header_timeout, Duration::from_millis),
            sse_queue: self.max_sse_queue.unwrap_or(DEFAULT_SSE_QUEUE),
            ..defaults
        }
    }
}

/// Reads a `--listen` value: `HOST:PORT`, optionally written as a `ws://` or `wss://` URL with
/// a path, IPv6 hosts in brackets.
pub fn parse_listen(text: &str) -> Result<String, String> {
    let bad = |why: &str| {
        format!(
            "invalid --listen value {text:?}: {why}; expected HOST:PORT with a port from 0 to 65535, for example 127.0.0.1:8900"
        )
    };
    let rest = text
        .strip_prefix("ws://")
        .or_else(|| text.strip_prefix("wss://"))
        .unwrap_or(text);
    let rest = rest.split('/').next().unwrap_or_default();
    let (host, port) = rest.rsplit_once(':').ok_or_else(|| bad("no port"))?;
    if host.is_empty() {
        return Err(bad("no host"));
    }
    if host.contains(':') && !(host.starts_with('[') && host.ends_with(']')) {
        return Err(bad("an IPv6 host must be in brackets, like [::1]"));
    }
    let port: u16 = port
        .parse()
        .map_err(|_| bad(&format!("port {port:?} is not a number from 0 to 65535")))?;
    Ok(format!("{host}:{port}"))
}

/// Runs `ski acp serve`.
pub fn run(args: ServeArgs) -> CommandResult {
    let (config, listen) = args.config()?;
    let ws_options = args.ws_options()?;
    let http_options = args.http_options();
    let tls = args.tls()?;
    args.log.init()?;
    // One connection on stdio needs one thread: reading, handling and writing on it means no
    // cross-thread hand-off per message. A WebSocket server serves many connections at once.
    let runtime = match listen {
        Listen::Stdio => tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build(),
        Listen::Ws(_) | Listen::Http(_) => tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build(),
    }
    .map_err(|error| CommandError::internal(anyhow!("cannot start the async runtime: {error}")))?;
    let options = ConnectionOptions {
        max_in_flight_sends: args.max_in_flight_sends,
        ..ConnectionOptions::default()
    };
    let json_logs = args.log.log_format == super::LogFormat::Json;
    let transports = Transports {
        ws: ws_options,
        http: http_options,
        tls,
    };
    let result = runtime.block_on(serve(config, listen, options, transports, json_logs));
    // The stdin reader may still wait on a blocking read; do not wait for it.
    runtime.shutdown_timeout(RUNTIME_SHUTDOWN);
    result
}

/// The limits of the network transports, and the TLS of `--transport http`.
struct Transports {
    ws: WsServerOptions,
    http: HttpOptions,
    tls: Option<Arc<ServerConfig>>,
}

/// Says where the server listens, on stderr.
fn announce(url: &str, json_logs: bool) {
    if json_logs {
        eprintln!(
            "{}",
            serde_json::json!({"level": "INFO", "event": "listening", "url": url})
        );
    } else {
        eprintln!("listening on {url}");
    }
}

/// The error of a failed bind, with a hint for a port in use.
fn bind_failure(error: &crate::transport::ws_server::WsServerError) -> CommandError {
    let hint = if error.io_error().kind() == std::io::ErrorKind::AddrInUse {
        "; pick another port, or port 0 for a free one"
    } else {
        ""
    };
    CommandError::upstream(anyhow!("{error}{hint}"))
}

async fn serve(
    config: AgentConfig,
    listen: Listen,
    options: ConnectionOptions,
    transports: Transports,
    json_logs: bool,
) -> CommandResult {
    let shutdown = CancellationToken::new();
    watch_signals(shutdown.clone());
    let agent = Agent::new(config);
    match listen {
        Listen::Stdio => {
            tracing::info!("serving ACP on stdio");
            agent
                .serve_stream(Transport::stdio(), &options, &shutdown)
                .await;
        }
        Listen::Ws(address) => {
            let server_options = WsServerOptions {
                max_message_bytes: options.max_message_bytes,
                ..transports.ws
            };
            let server = WsServer::bind(&address, server_options)
                .await
                .map_err(|error| bind_failure(&error))?;
            announce(&server.url(), json_logs);
            agent.serve_websocket(server, &options, &shutdown).await;
        }
        Listen::Http(address) => {
            let server_options = HttpOptions {
                max_message_bytes: options.max_message_bytes,
                ..transports.http
            };
            let mut server = HttpServer::bind(&address, server_options)
                .await
                .map_err(|error| bind_failure(&error))?;
            if let Some(tls) = transports.tls {
                server = server.with_tls(tls);
            }
            announce(&server.url(), json_logs);
            server.serve(agent, options, shutdown).await;
        }
    }
    tracing::info!("agent stopped");
    Ok(())
}

/// Cancels `shutdown` on SIGINT or SIGTERM.
fn watch_signals(shutdown: CancellationToken) {
    tokio::spawn(async move {
        let terminate = async {
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(mut signal) => {
                    signal.recv().await;
                }
                Err(error) => {
                    tracing::warn!(%error, "cannot watch SIGTERM");
                    std::future::pending::<()>().await;
                }
            }
        };
        tokio::select! {
            _ = tokio::signal::ctrl_c() => tracing::info!("interrupted; stopping"),
            () = terminate => tracing::info!("terminated; stopping"),
        }
        shutdown.cancel();
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct Harness {
        #[command(flatten)]
        serve: ServeArgs,
    }

    fn config(args: &[&str]) -> Result<(AgentConfig, Listen), String> {
        let harness = Harness::try_parse_from(std::iter::once("serve").chain(args.iter().copied()))
            .map_err(|e| e.to_string())?;
        harness.serve.config().map_err(|e| e.to_string())
    }

    #[test]
    fn listen_values_parse_or_say_what_is_wrong() {
        assert_eq!(parse_listen("127.0.0.1:0").unwrap(), "127.0.0.1:0");
        assert_eq!(
            parse_listen("ws://localhost:8900/acp").unwrap(),
            "localhost:8900"
        );
        assert_eq!(parse_listen("[::1]:9").unwrap(), "[::1]:9");
        for bad in ["127.0.0.1", ":80", "h:70000", "h:x", "::1:80"] {
            let error = parse_listen(bad).unwrap_err();
            assert!(error.contains("HOST:PORT"), "{error}");
        }
    }

    #[test]
    fn flags_become_the_agent_configuration() {
        let (config, listen) = config(&[
            "--transport",
            "ws",
            "--listen",
            "127.0.0.1:0",
            "--permission-mode",
            "required",
            "--permission-timeout-ms",
            "250",
            "--permission-policy",
            "deny",
            "--execution-state",
            "--max-retries",
            "2",
            "--fail-attempts",
            "1",
            "--prompt-timeout-ms",
            "900",
            "--hold",
            "--tool-call",
            "read:a.txt",
            "--session-ttl-ms",
            "1000",
            "--page-size",
            "3",
            "--max-sessions",
            "7",
            "--auth-method",
            "token=Token",
            "--auth-required",
            "--disable",
            "delete",
        ])
        .unwrap();
        assert_eq!(listen, Listen::Ws("127.0.0.1:0".into()));
        assert_eq!(config.permission.mode, PermissionMode::Required);
        assert_eq!(config.permission.timeout, Duration::from_millis(250));
        assert_eq!(config.permission.policy, PolicyMode::Deny);
        assert!(config.execution_state && config.echo.hold && config.auth_required);
        assert_eq!(config.max_retries, 2);
        assert_eq!(config.echo.fail_attempts, 1);
        assert_eq!(config.prompt_timeout, Some(Duration::from_millis(900)));
        assert_eq!(config.echo.tool_calls.len(), 1);
        assert_eq!(config.session_ttl, Some(Duration::from_secs(1)));
        assert_eq!(config.page_size, 3);
        assert_eq!(config.max_sessions, 7);
        assert_eq!(config.auth_methods[0].id, "token");
        assert!(!config.features.has(Feature::Delete));
        assert!(config.features.has(Feature::List));
        let (config, listen) = config_default();
        assert_eq!(listen, Listen::Stdio);
        assert!(config.features.has(Feature::LoadSession));
    }

    fn config_default() -> (AgentConfig, Listen) {
        config(&[]).unwrap()
    }

    #[test]
    fn contradictory_flags_are_refused_with_a_fix() {
        for (args, needle) in [
            (&["--listen", "127.0.0.1:0"][..], "--transport ws"),
            (
                &[
                    "--permission-mode",
                    "disabled",
                    "--permission-timeout-ms",
                    "5",
                ][..],
                "remove one",
            ),
            (
                &[
                    "--permission-mode",
                    "disabled",
                    "--permission-policy",
                    "deny",
                ][..],
                "permissive",
            ),
            (&["--auth-required"][..], "--auth-method"),
            (&["--disable", "nothing"][..], "load-session"),
            (&["--enable", "nothing"][..], "load-session"),
            (&["--enable", "fork", "--disable", "fork"][..], "keep one"),
            (&["--tool-call", "bogus"][..], "expected"),
            (&["--transport", "ws", "--listen", "nope"][..], "HOST:PORT"),
            (&["--hold", "--delay-ms", "5"][..], "cannot be used with"),
            (&["--page-size", "0"][..], "at least 1"),
            (&["--max-sessions", "0"][..], "at least 1"),
        ] {
            let error = config(args).unwrap_err();
            assert!(error.contains(needle), "{args:?}: {error}");
        }
        let (minimal, _) = config(&["--minimal"]).unwrap();
        assert!(Feature::ALL.iter().all(|f| !minimal.features.has(*f)));
        let (listing, _) = config(&["--minimal", "--enable", "list"]).unwrap();
        assert!(listing.features.has(Feature::List));
        assert!(!listing.features.has(Feature::Fork));
    }

    fn ws_options(args: &[&str]) -> Result<WsServerOptions, String> {
        let harness = Harness::try_parse_from(std::iter::once("serve").chain(args.iter().copied()))
            .map_err(|e| e.to_string())?;
        harness.serve.ws_options().map_err(|e| e.to_string())
    }

    #[test]
    fn websocket_limits_come_from_flags_or_defaults_and_need_the_ws_transport() {
        let options = ws_options(&[
            "--transport",
            "ws",
            "--max-connections",
            "3",
            "--handshake-timeout-ms",
            "40",
            "--message-timeout-ms",
            "50",
            "--idle-timeout-ms",
            "60",
            "--pong-timeout-ms",
            "70",
            "--max-total-sessions",
            "9",
        ])
        .unwrap();
        assert_eq!(options.max_connections, 3);
        assert_eq!(options.handshake_timeout, Duration::from_millis(40));
        assert_eq!(options.liveness.message_timeout, Duration::from_millis(50));
        assert_eq!(options.liveness.idle_timeout, Duration::from_millis(60));
        assert_eq!(options.liveness.pong_timeout, Duration::from_millis(70));
        assert_eq!(
            config(&["--max-total-sessions", "9"])
                .unwrap()
                .0
                .max_total_sessions,
            9
        );
        assert_eq!(
            ws_options(&["--transport", "ws"]).unwrap(),
            WsServerOptions::default()
        );
        assert_eq!(config_default().0.max_total_sessions, 4096);
        for flag in [
            "--max-connections",
            "--handshake-timeout-ms",
            "--message-timeout-ms",
            "--idle-timeout-ms",
            "--pong-timeout-ms",
        ] {
            let error = ws_options(&[flag, "5"]).unwrap_err();
            assert!(error.contains("--transport ws"), "{flag}: {error}");
            let error = ws_options(&["--transport", "ws", flag, "0"]).unwrap_err();
            assert!(error.contains("at least 1"), "{flag}: {error}");
        }
    }

    #[test]
    fn the_http_transport_takes_its_limits_and_refuses_the_websocket_deadlines() {
        let (_, listen) = config(&["--transport", "http", "--listen", "127.0.0.1:0"]).unwrap();
        assert_eq!(listen, Listen::Http("127.0.0.1:0".into()));
        let harness = Harness::try_parse_from([
            "serve",
            "--transport",
            "http",
            "--max-connections",
            "3",
            "--handshake-timeout-ms",
            "40",
            "--max-sse-queue",
            "5",
        ])
        .unwrap();
        harness.serve.ws_options().unwrap();
        let options = harness.serve.http_options();
        assert_eq!(options.max_connections, 3);
        assert_eq!(options.max_tcp_connections, 12);
        assert_eq!(options.header_timeout, Duration::from_millis(40));
        assert_eq!(options.sse_queue, 5);
        for flag in [
            "--message-timeout-ms",
            "--idle-timeout-ms",
            "--pong-timeout-ms",
        ] {
            let error = ws_options(&["--transport", "http", flag, "5"]).unwrap_err();
            assert!(error.contains("--transport ws"), "{flag}: {error}");
        }
        for transport in ["stdio", "ws"] {
            let error =
                ws_options(&["--transport", transport, "--max-sse-queue", "5"]).unwrap_err();
            assert!(error.contains("--transport http"), "{transport}: {error}");
        }
    }

    #[test]
    fn fork_and_models_are_off_by_default_and_enable_turns_them_on() {
        let (stable, _) = config_default();
        assert!(!stable.features.has(Feature::Fork));
        assert!(!stable.features.has(Feature::SetModel));
        assert!(stable.features.has(Feature::Close));
        let (enabled, _) = config(&["--enable", "fork", "--enable", "set-model"]).unwrap();
        assert!(enabled.features.has(Feature::Fork));
        assert!(enabled.features.has(Feature::SetModel));
    }
}
