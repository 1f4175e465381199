//! The ACP client of the bot: `kiro-cli acp --agent NAME` spawned through
//! [`crate::transport::child`] (own process group, stdin, stdout and stderr piped) and spoken to
//! through a [`crate::jsonrpc::Peer`] (integer ids counting up from 0, one JSON message per line).
//!
//! States (BR-06): [`ClientState::New`] until `initialize` answered, then `Ready`; a prompt makes
//! it `Busy` until its response, and only one prompt is in flight (BR-06.2); `Dead` is entered
//! from any state when the process exits, its stdout closes or [`KiroClient::kill`] runs, and is
//! terminal (BR-06.5). `session/cancel` is a notification and can be sent in every state but
//! `Dead` (BR-05.4, BR-06.3). Kill is SIGTERM to the process group, the grace period (5 s by
//! default), then SIGKILL (BR-06.6).
//!
//! Streaming (BR-07): `session/update`s of the turn's session are handed over in arrival order;
//! the response of `session/prompt` ends the turn, after every update that arrived before it
//! (E-KIRO-01: a `turn_end` update is neither required nor acted on). Other notifications
//! (`_kiro.dev/*`, `_session/terminate`) and updates of other sessions are logged at debug.
//!
//! Memory stays bounded however fast kiro-cli streams: the turn's updates are handed over on a
//! channel of [`TURN_UPDATE_LIMIT`], and while it is full the `session/update` handler waits for
//! room; once [`MAX_QUEUED_NOTIFICATIONS`](crate::jsonrpc::peer::MAX_QUEUED_NOTIFICATIONS) more
//! notifications queue behind it the connection reads no more from kiro-cli, whose writes then
//! block. A consumer of [`KiroClient::finish_turn`] that cannot keep up (a printer whose output
//! nobody reads) thus slows kiro-cli down; nothing is dropped.
//!
//! Stderr (BR-08) is read from the first moment, line by line, and logged at the configured
//! level; its end does not make the client dead, only the process's exit does.
//!
//! Environment: kiro-cli starts from an empty environment plus the variables of
//! [`ENV_ALLOWLIST`] (and `LC_*`) this process has; `BOT_TOKEN` and everything else stay behind,
//! since whatever the agent runs can read what kiro-cli inherits.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::Serialize;
use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot, watch};

use super::agent_name::AgentName;
use super::config::LogLevel;
use crate::jsonrpc::{
    CallError, Peer, RequestOptions, ResponseFuture, RpcError, SendError, Transport,
};
use crate::transport::child::{self, Child, ChildError, ChildSpec, Termination};

/// The default time between SIGTERM and SIGKILL (BR-06.6).
pub const DEFAULT_KILL_GRACE: Duration = Duration::from_secs(5);

/// The default timeout of `initialize` and `session/new`.
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// The longest stderr line logged whole; longer lines are cut and say their length.
pub const MAX_LOGGED_STDERR: usize = 4096;

/// The most `session/update`s of a turn handed over and not yet taken by
/// [`KiroClient::finish_turn`]; past them the `session/update` handler waits for room.
pub const TURN_UPDATE_LIMIT: usize = 256;

/// The ACP protocol version sent in `initialize`.
pub const PROTOCOL_VERSION: u64 = 1;

/// The environment variables kiro-cli inherits (with every `LC_*`): the user and locale, the
/// terminal and temporary directories, the XDG directories (kiro-cli's log lives under
/// `XDG_RUNTIME_DIR`), proxies and CA bundles, kiro-cli's own logging knobs and the AWS profile
/// settings its sign-in reads. Everything else, the bot's token first, is withheld.
pub const ENV_ALLOWLIST: &[&str] = &[
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "LANG",
    "LANGUAGE",
    "TERM",
    "TMPDIR",
    "TZ",
    "XDG_RUNTIME_DIR",
    "XDG_CONFIG_HOME",
    "XDG_DATA_HOME",
    "XDG_STATE_HOME",
    "XDG_CACHE_HOME",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "NO_PROXY",
    "http_proxy",
    "https_proxy",
    "all_proxy",
    "no_proxy",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "KIRO_LOG_LEVEL",
    "KIRO_CHAT_LOG_FILE",
    "AWS_PROFILE",
    "AWS_REGION",
    "AWS_DEFAULT_REGION",
    "AWS_CONFIG_FILE",
    "AWS_SHARED_CREDENTIALS_FILE",
    "AWS_CA_BUNDLE",
];

/// Whether kiro-cli inherits the variable `name` ([`ENV_ALLOWLIST`] or a locale `LC_*`).
pub fn inherits(name: &str) -> bool {
    ENV_ALLOWLIST.contains(&name) || name.starts_with("LC_")
}

/// The client's state (BR-06).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum ClientState {
    /// Spawned, not initialized.
    New,
    /// Initialized, no prompt in flight.
    Ready,
    /// One prompt in flight.
    Busy,
    /// The process is gone or was killed; terminal.
    Dead,
}

impl ClientState {
    /// The state's name as printed.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::New => "NEW",
            Self::Ready => "READY",
            Self::Busy => "BUSY",
            Self::Dead => "DEAD",
        }
    }
}

/// Why a client operation failed.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// kiro-cli could not be started.
    #[error("cannot start kiro-cli: {0}")]
    Spawn(#[source] ChildError),
    /// The operation is not allowed in the current state.
    #[error("{operation} is not allowed in state {}: {reason}", .state.as_str())]
    WrongState {
        /// What was attempted.
        operation: &'static str,
        /// The state it was attempted in.
        state: ClientState,
        /// Which rule refuses it.
        reason: &'static str,
    },
    /// A request failed.
    #[error("{method} failed: {source}")]
    Call {
        /// The request's method.
        method: &'static str,
        /// Why.
        #[source]
        source: CallError,
    },
    /// A notification could not be written.
    #[error("cannot send {method}: {source}")]
    Send {
        /// The notification's method.
        method: &'static str,
        /// Why.
        #[source]
        source: SendError,
    },
    /// kiro-cli died during the operation.
    #[error("kiro-cli died during {operation}")]
    Died {
        /// What was in progress.
        operation: &'static str,
    },
    /// A result did not have the expected shape.
    #[error("unexpected {method} result: {detail}")]
    Protocol {
        /// The request's method.
        method: &'static str,
        /// What was wrong.
        detail: String,
    },
    /// Ending the process failed.
    #[error("cannot end kiro-cli: {0}")]
    Teardown(#[source] ChildError),
}

/// What the client hands over during a turn.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum TurnEvent {
    /// An `agent_message_chunk` with text: incremental, as it came (BR-07.2).
    Chunk {
        /// The chunk's text.
        text: String,
    },
    /// Any other update of the turn's session, by its `sessionUpdate` kind (BR-07.4).
    Update {
        /// The `sessionUpdate` value.
        kind: String,
    },
    /// The end of the turn: the `session/prompt` response arrived (BR-07.3, E-KIRO-01).
    TurnEnd {
        /// Its `stopReason`.
        #[serde(rename = "stopReason")]
        stop_reason: String,
    },
}

/// How to start kiro-cli.
#[derive(Debug, Clone)]
pub struct ClientOptions {
    /// The kiro-cli executable.
    pub program: PathBuf,
    /// The agent, passed as `acp --agent NAME`.
    pub agent: AgentName,
    /// The working directory of the process and the `cwd` of `session/new`.
    pub cwd: PathBuf,
    /// SIGTERM-to-SIGKILL grace of [`KiroClient::kill`].
    pub kill_grace: Duration,
    /// The timeout of `initialize` and `session/new`.
    pub request_timeout: Duration,
    /// The level kiro-cli's stderr lines are logged at (BR-08.2).
    pub stderr_level: LogLevel,
}

impl ClientOptions {
    /// Options with the default grace and timeout, stderr logged at INFO.
    pub fn new(program: &Path, agent: AgentName, cwd: &Path) -> Self {
        Self {
            program: program.to_owned(),
            agent,
            cwd: cwd.to_owned(),
            kill_grace: DEFAULT_KILL_GRACE,
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
            stderr_level: LogLevel::Info,
        }
    }
}

enum Control {
    /// End the group now (SIGTERM, grace, SIGKILL).
    Kill(oneshot::Sender<Result<Termination, ChildError>>),
    /// Wait up to the duration for the process to exit by itself, then end the group.
    Close(Duration, oneshot::Sender<Result<Termination, ChildError>>),
}

/// A running kiro-cli and the ACP connection to it.
pub struct KiroClient {
    peer: Peer,
    pid: u32,
    options: ClientOptions,
    state: watch::Sender<ClientState>,
    updates: tokio::sync::Mutex<mpsc::Receiver<Value>>,
    control: mpsc::UnboundedSender<Control>,
    turn_session: Arc<Mutex<Option<String>>>,
}

impl std::fmt::Debug for KiroClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KiroClient")
            .field("pid", &self.pid)
            .field("state", &self.state())
            .finish_non_exhaustive()
    }
}

/// A prompt in flight, finished with [`KiroClient::finish_turn`].
pub struct Turn {
    session_id: String,
    response: ResponseFuture,
}

impl Turn {
    /// The id of the `session/prompt` request.
    pub fn request_id(&self) -> String {
        self.response.id().to_string()
    }

    /// The session the prompt went to.
    pub fn session_id(&self) -> &str {
        &self.session_id
    }
}

impl KiroClient {
    /// Spawns `kiro-cli acp --agent NAME` in its own process group; the client is `New`.
    pub fn spawn(options: ClientOptions) -> Result<Self, ClientError> {
        let inherited = std::env::vars_os().filter(|(name, _)| name.to_str().is_some_and(inherits));
        let spec = ChildSpec::new("kiro-cli", &options.program)
            .args(["acp", "--agent", options.agent.as_str()])
            .env_clear()
            .envs(inherited)
            .cwd(&options.cwd)
            .grace(options.kill_grace);
        let mut process = child::spawn(spec).map_err(ClientError::Spawn)?;
        let pid = process.pid();
        let stdin = process.take_stdin().map_err(ClientError::Spawn)?;
        let stdout = process.take_stdout().map_err(ClientError::Spawn)?;
        let (state, _) = watch::channel(ClientState::New);
        let (update_tx, update_rx) = mpsc::channel(TURN_UPDATE_LIMIT);
        let turn_session: Arc<Mutex<Option<String>>> = Arc::new(Mutex::new(None));
        let peer = Peer::builder()
            .first_id(0)
            .on_notification("session/update", {
                let turn_session = turn_session.clone();
                move |_cx, params: Option<Value>| {
                    let update_tx = update_tx.clone();
                    let turn_session = turn_session.clone();
                    async move {
                        let params = params.unwrap_or(Value::Null);
                        let session = params.get("sessionId").and_then(Value::as_str);
                        let current = turn_session.lock().map(|s| s.clone()).unwrap_or(None);
                        if current.is_some() && session == current.as_deref() {
                            // Waits while the turn has not taken the updates before it: the
                            // peer then stops reading kiro-cli. An error means the client is
                            // gone, with nobody left to hand the update to.
                            if update_tx.send(params).await.is_err() {
                                tracing::debug!("session/update after the client was dropped");
                            }
                        } else {
                            tracing::debug!(session = ?session, update = %params, "session/update outside the turn");
                        }
                    }
                }
            })
            .on_any_notification(|cx: crate::jsonrpc::NotificationContext, params: Option<Value>| async move {
                let params = params.unwrap_or(serde_json::Value::Null);
                tracing::debug!(method = cx.method(), params = %params, "notification from kiro-cli");
            })
            .on_request("session/request_permission", |_cx, params: Option<Value>| async move {
                Ok::<Value, RpcError>(permission_answer(params.as_ref()))
            })
            .on_any_request(|cx: crate::jsonrpc::RequestContext, _params: Option<Value>| async move {
                tracing::debug!(method = cx.method(), "request from kiro-cli answered with {{}}");
                Ok::<Value, RpcError>(json!({}))
            })
            .spawn(Transport::bytes(stdout, stdin));
        let (control, control_rx) = mpsc::unbounded_channel();
        tokio::spawn(supervise(
            process,
            control_rx,
            state.clone(),
            options.stderr_level,
        ));
        tokio::spawn({
            let peer = peer.clone();
            let state = state.clone();
            async move {
                peer.input_closed().await;
                tracing::debug!("kiro-cli closed its stdout");
                state.send_replace(ClientState::Dead);
            }
        });
        Ok(Self {
            peer,
            pid,
            options,
            state,
            updates: tokio::sync::Mutex::new(update_rx),
            control,
            turn_session,
        })
    }

    /// The process id of kiro-cli, also its process-group id.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// The current state.
    pub fn state(&self) -> ClientState {
        *self.state.borrow()
    }

    /// Whether the client can still be used (not `Dead`).
    pub fn is_alive(&self) -> bool {
        self.state() != ClientState::Dead
    }

    /// A receiver that sees every state change.
    pub fn watch_state(&self) -> watch::Receiver<ClientState> {
        self.state.subscribe()
    }

    /// Moves from `from` to `to`, or says why the operation is refused.
    fn transition(
        &self,
        operation: &'static str,
        from: ClientState,
        to: ClientState,
    ) -> Result<(), ClientError> {
        let mut refused = None;
        self.state.send_if_modified(|state| {
            if *state == from {
                *state = to;
                true
            } else {
                refused = Some(*state);
                false
            }
        });
        match refused {
            None => Ok(()),
            Some(state) => Err(ClientError::WrongState {
                operation,
                state,
                reason: refusal(operation, state),
            }),
        }
    }

    /// Fails the operation when the client is dead; on a lost connection marks it dead.
    fn call_failed(&self, method: &'static str, source: CallError) -> ClientError {
        if matches!(source, CallError::Eof | CallError::NotConnected) {
            self.state.send_replace(ClientState::Dead);
            return ClientError::Died { operation: method };
        }
        ClientError::Call { method, source }
    }

    /// `initialize` (BR-06.1: only from `New`); `Ready` afterwards. Returns the result.
    pub async fn initialize(&self) -> Result<Value, ClientError> {
        let state = self.state();
        if state != ClientState::New {
            return Err(ClientError::WrongState {
                operation: "initialize",
                state,
                reason: refusal("initialize", state),
            });
        }
        let params = json!({
            "protocolVersion": PROTOCOL_VERSION,
            "clientCapabilities": {
                "fs": {"readTextFile": false, "writeTextFile": false},
                "terminal": false
            },
            "clientInfo": {"name": "ski-kiro", "title": "ski kiro", "version": env!("CARGO_PKG_VERSION")}
        });
        let result = self
            .peer
            .request_with(
                "initialize",
                Some(params),
                RequestOptions::timeout(self.options.request_timeout),
            )
            .await
            .map_err(|e| self.call_failed("initialize", e))?;
        self.transition("initialize", ClientState::New, ClientState::Ready)?;
        Ok(result)
    }

    /// `session/new` with the workspace as `cwd` and no MCP servers; returns the session id.
    pub async fn new_session(&self) -> Result<String, ClientError> {
        self.require_ready("session/new")?;
        let params = json!({"cwd": self.options.cwd.display().to_string(), "mcpServers": []});
        let result = self
            .peer
            .request_with(
                "session/new",
                Some(params),
                RequestOptions::timeout(self.options.request_timeout),
            )
            .await
            .map_err(|e| self.call_failed("session/new", e))?;
        match result.get("sessionId").and_then(Value::as_str) {
            Some(id) if !id.is_empty() => Ok(id.to_owned()),
            _ => Err(ClientError::Protocol {
                method: "session/new",
                detail: format!("no sessionId string in {result}"),
            }),
        }
    }

    fn require_ready(&self, operation: &'static str) -> Result<(), ClientError> {
        let state = self.state();
        if state == ClientState::Ready {
            Ok(())
        } else {
            Err(ClientError::WrongState {
                operation,
                state,
                reason: refusal(operation, state),
            })
        }
    }

    /// Sends `session/prompt` with `text`: `Ready` → `Busy` (BR-06.2: refused unless `Ready`).
    pub async fn start_prompt(&self, session_id: &str, text: &str) -> Result<Turn, ClientError> {
        self.transition("session/prompt", ClientState::Ready, ClientState::Busy)?;
        let mut updates = self.updates.lock().await;
        while let Ok(stale) = updates.try_recv() {
            tracing::debug!(update = %stale, "update before the turn");
        }
        drop(updates);
        if let Ok(mut current) = self.turn_session.lock() {
            *current = Some(session_id.to_owned());
        }
        let params = json!({"sessionId": session_id, "prompt": [{"type": "text", "text": text}]});
        match self
            .peer
            .start_request("session/prompt", Some(params), RequestOptions::no_timeout())
            .await
        {
            Ok(response) => Ok(Turn {
                session_id: session_id.to_owned(),
                response,
            }),
            Err(error) => {
                let error = self.call_failed("session/prompt", error);
                self.state.send_if_modified(|s| {
                    std::mem::replace(s, ClientState::Ready) == ClientState::Busy
                });
                Err(error)
            }
        }
    }

    /// Streams the turn's updates to `on_event` until its response, then a
    /// [`TurnEvent::TurnEnd`]; `Busy` → `Ready`. If kiro-cli dies meanwhile the client is `Dead`.
    ///
    /// While `on_event` runs no further update is taken: past [`TURN_UPDATE_LIMIT`] waiting
    /// updates and the peer's queue of notifications, kiro-cli is not read until it returns. Every
    /// started turn must be finished, or kiro-cli's updates stop its connection once they fill
    /// those queues.
    pub async fn finish_turn(
        &self,
        turn: Turn,
        mut on_event: impl FnMut(TurnEvent),
    ) -> Result<String, ClientError> {
        let mut updates = self.updates.lock().await;
        let mut response = turn.response;
        // Updates first: the response is delivered only once the notifications before it were
        // handled, and those handlers wait for room in the channel this loop empties.
        let outcome = loop {
            tokio::select! {
                biased;
                update = updates.recv() => {
                    if let Some(update) = update {
                        on_event(turn_event(&update));
                    }
                }
                outcome = &mut response => break outcome,
            }
        };
        // The turn is over: no later update is handed over, so none can wait for room in the
        // channel once it is drained below (a handler already past this check adds at most one,
        // which the next prompt logs as stale if the drain misses it).
        if let Ok(mut current) = self.turn_session.lock() {
            *current = None;
        }
        // Updates that arrived before the response are in the channel by now (the peer
        // delivers a response after the notifications that preceded it were handled).
        while let Ok(update) = updates.try_recv() {
            on_event(turn_event(&update));
        }
        drop(updates);
        let result = match outcome {
            Ok(result) => result,
            Err(error) => return Err(self.call_failed("session/prompt", error)),
        };
        let stop_reason = result
            .get("stopReason")
            .and_then(Value::as_str)
            .unwrap_or("end_turn")
            .to_owned();
        on_event(TurnEvent::TurnEnd {
            stop_reason: stop_reason.clone(),
        });
        self.transition("session/prompt", ClientState::Busy, ClientState::Ready)?;
        Ok(stop_reason)
    }

    /// Sends the `session/cancel` notification (BR-05.4); allowed in every state but `Dead`
    /// (BR-06.3). No response is expected.
    pub async fn cancel(&self, session_id: &str) -> Result<(), ClientError> {
        let state = self.state();
        if state == ClientState::Dead {
            return Err(ClientError::WrongState {
                operation: "session/cancel",
                state,
                reason: refusal("session/cancel", state),
            });
        }
        self.peer
            .notify("session/cancel", Some(json!({"sessionId": session_id})))
            .await
            .map_err(|source| ClientError::Send {
                method: "session/cancel",
                source,
            })
    }

    /// Kills kiro-cli: SIGTERM to its group, up to the grace period, then SIGKILL; `Dead`.
    pub async fn kill(&self) -> Result<Termination, ClientError> {
        self.state.send_replace(ClientState::Dead);
        let (reply, done) = oneshot::channel();
        self.control
            .send(Control::Kill(reply))
            .map_err(|_| ClientError::Teardown(gone()))?;
        self.peer.close().await;
        done.await
            .map_err(|_| ClientError::Teardown(gone()))?
            .map_err(ClientError::Teardown)
    }

    /// Ends the session cleanly: closes stdin, lets kiro-cli exit by itself for up to the grace
    /// period, then ends its group; `Dead`.
    pub async fn close(&self) -> Result<Termination, ClientError> {
        self.peer.close().await;
        let (reply, done) = oneshot::channel();
        self.control
            .send(Control::Close(self.options.kill_grace, reply))
            .map_err(|_| ClientError::Teardown(gone()))?;
        let termination = done
            .await
            .map_err(|_| ClientError::Teardown(gone()))?
            .map_err(ClientError::Teardown);
        self.state.send_replace(ClientState::Dead);
        termination
    }
}

fn gone() -> ChildError {
    ChildError::SupervisorGone {
        name: "kiro-cli".to_owned(),
    }
}

fn refusal(operation: &'static str, state: ClientState) -> &'static str {
    match (operation, state) {
        (_, ClientState::Dead) => "the client is dead and cannot be reused (BR-06.5)",
        ("initialize", _) => "initialize is sent once, to a new client (BR-06.1)",
        (_, ClientState::New) => "the client must be initialized first (BR-06.1)",
        (_, ClientState::Busy) => "a prompt is already in flight (BR-06.2)",
        _ => "the client is not ready",
    }
}

/// The answer to `session/request_permission`: the option of kind `allow_once`, else the first
/// whose kind contains `allow`, else the first option; cancelled when there is none.
pub fn permission_answer(params: Option<&Value>) -> Value {
    let options = params
        .and_then(|p| p.get("options"))
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let kind = |o: &Value| {
        o.get("kind")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned()
    };
    let chosen = options
        .iter()
        .find(|o| kind(o) == "allow_once")
        .or_else(|| options.iter().find(|o| kind(o).contains("allow")))
        .or_else(|| options.first())
        .and_then(|o| o.get("optionId").cloned());
    match chosen {
        Some(id) => json!({"outcome": {"outcome": "selected", "optionId": id}}),
        None => json!({"outcome": {"outcome": "cancelled"}}),
    }
}

fn turn_event(params: &Value) -> TurnEvent {
    let update = params.get("update").unwrap_or(&Value::Null);
    let kind = update
        .get("sessionUpdate")
        .and_then(Value::as_str)
        .unwrap_or("unknown")
        .to_owned();
    if kind == "agent_message_chunk"
        && let Some(text) = update
            .get("content")
            .and_then(|c| c.get("text"))
            .and_then(Value::as_str)
    {
        return TurnEvent::Chunk {
            text: text.to_owned(),
        };
    }
    tracing::debug!(kind, update = %update, "update logged, not acted on");
    TurnEvent::Update { kind }
}

/// Logs one stderr line of kiro-cli at `level` (BR-08.2), cut at [`MAX_LOGGED_STDERR`] bytes.
pub fn log_stderr(level: LogLevel, line: &str) {
    let shown = if line.len() > MAX_LOGGED_STDERR {
        let mut end = MAX_LOGGED_STDERR;
        while !line.is_char_boundary(end) {
            end -= 1;
        }
        format!("{}… ({} bytes)", &line[..end], line.len())
    } else {
        line.to_owned()
    };
    match level {
        LogLevel::Debug => tracing::debug!(target: "kiro_cli", "stderr: {shown}"),
        LogLevel::Info => tracing::info!(target: "kiro_cli", "stderr: {shown}"),
        LogLevel::Warning => tracing::warn!(target: "kiro_cli", "stderr: {shown}"),
        LogLevel::Error => tracing::error!(target: "kiro_cli", "stderr: {shown}"),
    }
}

/// Owns the process: logs its stderr until it closes, marks the client dead when the process
/// exits (BR-06.4; not when stderr closes, BR-08.3), and ends the group when asked (or when the
/// client is dropped).
async fn supervise(
    mut process: Child,
    mut control: mpsc::UnboundedReceiver<Control>,
    state: watch::Sender<ClientState>,
    level: LogLevel,
) {
    let exited = process.exited();
    tokio::pin!(exited);
    let mut stderr_open = true;
    let mut running = true;
    let command = loop {
        tokio::select! {
            line = process.next_stderr_line(), if stderr_open => match line {
                Some(line) => log_stderr(level, &line),
                None => {
                    stderr_open = false;
                    tracing::debug!("kiro-cli closed its stderr");
                }
            },
            status = &mut exited, if running => {
                running = false;
                tracing::info!(status = ?status.ok(), "kiro-cli exited");
                state.send_replace(ClientState::Dead);
            }
            command = control.recv() => break command,
        }
    };
    let (wait, reply) = match command {
        Some(Control::Kill(reply)) => (Duration::ZERO, Some(reply)),
        Some(Control::Close(wait, reply)) => (wait, Some(reply)),
        None => (Duration::ZERO, None),
    };
    if running && !wait.is_zero() {
        // Stderr keeps being logged while kiro-cli finishes by itself.
        let deadline = tokio::time::sleep(wait);
        tokio::pin!(deadline);
        loop {
            tokio::select! {
                line = process.next_stderr_line(), if stderr_open => match line {
                    Some(line) => log_stderr(level, &line),
                    None => stderr_open = false,
                },
                _ = &mut exited => break,
                () = &mut deadline => break,
            }
        }
    }
    let termination = process.shutdown().await;
    if let Ok(termination) = &termination {
        tracing::debug!(%termination, "kiro-cli ended");
    }
    if let Some(reply) = reply {
        let _ = reply.send(termination);
    }
}
