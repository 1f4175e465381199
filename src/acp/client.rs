//! The ACP client runtime: the side that talks to an agent.
//!
//! A [`Client`] runs on a [`Peer`] over any transport: a spawned agent's stdio, an in-memory
//! pipe, or a WebSocket opened through a [`ConnectionFactory`] (then a lost connection is
//! replaced by the reconnect policy, `initialize` is sent again and the failed request retried;
//! see [`link`](self#reconnect)).
//!
//! What it does for the agent:
//! - answers `session/request_permission` by its [`PermissionPolicy`] with ACP's `outcome`
//!   structure, and answers every pending request `cancelled` once [`Client::cancel`] was sent;
//! - serves `fs/read_text_file` and `fs/write_text_file` inside the [`FsConfig`] roots, for
//!   its own sessions only (created, forked, loaded, resumed or prompted by it; another
//!   `sessionId` answers `-32602`), and `terminal/*` by [`TerminalConfig`], only when
//!   configured (and then advertised in `initialize`); otherwise those methods answer
//!   `-32601`, as do unknown requests (`_` extensions included);
//! - routes `session/update` per session ([`Client::follow`]): updates that arrive before the
//!   `session/new` result, or for other sessions, are buffered and never mixed up; a follower
//!   that falls [`UPDATE_BUFFER_LIMIT`] updates behind stops the reading of the connection
//!   instead of a queue growing without bound; updates that do not decode (a kind missing a
//!   required field) are dropped and logged; unknown kinds are kept as
//!   `SessionUpdate::Unknown`; unknown notifications are ignored;
//! - answers the agent's requests through a queue of [`ANSWER_QUEUE_BYTES`] apart from its own
//!   sends, and keeps reading the agent while its own requests wait for the send gate: an agent
//!   that writes before it reads never waits on the client for full pipes (past that many bytes
//!   of unread answers the client stops reading too).
//!
//! What the peer underneath guarantees: responses are matched by id only (out-of-order,
//! duplicate and unknown-id responses are harmless), string and integer ids are echoed as they
//! came, a response is delivered after the notifications that arrived before it, and
//! [`Client::close`] fails pending requests with EOF; later requests fail with not-connected.
//!
//! # Reconnect
//!
//! With [`Client::connect`], a request whose connection is lost (send failure, input ended) is
//! retried on a new connection up to `ReconnectPolicy::attempts` times; the n-th connection
//! attempt waits `base·2^(n−1)`, capped at 3 s. Sessions live in the agent, so the session ids
//! stay valid.

pub mod driver;
mod fs;
mod known_sessions;
mod link;
pub mod messages;
mod permission;
mod terminal;
mod updates;
pub mod v2;

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use serde::de::DeserializeOwned;

pub use self::fs::FsConfig;
pub use self::permission::{PermissionCounters, PermissionHandler, PermissionPolicy, choose};
pub use self::terminal::{DEFAULT_OUTPUT_LIMIT, TerminalConfig};
pub use self::updates::{
    BUFFERED_SESSION_LIMIT, SessionUpdates, UPDATE_BUFFER_LIMIT, UpdateCounters,
};

use self::fs::FsService;
use self::known_sessions::KnownSessions;
use self::link::{Link, PeerMaker};
use self::permission::PermissionBroker;
use self::terminal::Terminals;
use self::updates::SessionRouter;
use crate::acp::{
    AuthenticateRequest, CancelNotification, Capability, ClientCapabilities,
    ClientSessionCapabilities, CreateTerminalRequest, Empty, ExportSessionRequest,
    ExportSessionResponse, FileSystemCapabilities, ForkSessionRequest, Implementation,
    InitializeRequest, InitializeResponse, ListSessionsRequest, ListSessionsResponse,
    LoadSessionRequest, NewSessionRequest, NewSessionResponse, PROTOCOL_VERSION, PromptRequest,
    PromptResponse, ReadTextFileRequest, RequestPermissionRequest, RequestPermissionResponse,
    ResumeSessionRequest, SessionIdRequest, SessionStateResponse, SetSessionConfigOptionRequest,
    SetSessionConfigOptionResponse, SetSessionModeRequest, SetSessionModelRequest, TerminalRequest,
    WriteTextFileRequest, methods,
};
use crate::jsonrpc::{
    CallError, ErrorCode, Peer, PeerStats, RequestOptions, RpcError, Transport, WireEvent,
    WireObserver,
};
use crate::transport::ws_client::{
    ConnectError, ConnectionFactory, ReconnectPolicy, connect_with_backoff,
};

/// The default bound of the send gate.
pub const DEFAULT_MAX_IN_FLIGHT_SENDS: usize = 64;

/// How a [`Client`] behaves.
#[derive(Clone)]
pub struct ClientConfig {
    /// `clientInfo` sent in `initialize`.
    pub client_info: Implementation,
    /// File system access offered to the agent; `None` advertises and serves none.
    pub fs: Option<FsConfig>,
    /// Terminals offered to the agent; `None` advertises and serves none.
    pub terminal: Option<TerminalConfig>,
    /// How permission requests are answered.
    pub permission: PermissionPolicy,
    /// The timeout of every request (`None`: wait forever).
    pub request_timeout: Option<Duration>,
    /// The bound of the send gate: messages queued or being written at once.
    pub max_in_flight_sends: usize,
    /// How a lost connection opened by [`Client::connect`] is replaced.
    pub reconnect: ReconnectPolicy,
    /// Observers of every raw message in and out, on every connection.
    pub observers: Vec<Arc<dyn WireObserver>>,
    /// Advertise `session.notices`: the client presents `notice` updates.
    pub notices: bool,
    /// Advertise `session.compaction`: the client takes compaction updates.
    pub compaction: bool,
}

impl Default for ClientConfig {
    fn default() -> Self {
        let mut client_info = Implementation::new("ski", env!("CARGO_PKG_VERSION"));
        client_info.title = Some("SKI ACP Client".to_owned());
        Self {
            client_info,
            fs: None,
            terminal: None,
            permission: PermissionPolicy::Allow,
            request_timeout: None,
            max_in_flight_sends: DEFAULT_MAX_IN_FLIGHT_SENDS,
            reconnect: ReconnectPolicy::default(),
            observers: Vec::new(),
            notices: false,
            compaction: false,
        }
    }
}

impl fmt::Debug for ClientConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientConfig")
            .field("client_info", &self.client_info.name)
            .field("fs", &self.fs)
            .field("terminal", &self.terminal)
            .field("permission", &self.permission)
            .field("request_timeout", &self.request_timeout)
            .field("max_in_flight_sends", &self.max_in_flight_sends)
            .field("reconnect", &self.reconnect)
            .field("observers", &self.observers.len())
            .finish()
    }
}

impl ClientConfig {
    /// The capabilities this configuration advertises in `initialize`.
    pub fn capabilities(&self) -> ClientCapabilities {
        let (read, write) = self
            .fs
            .as_ref()
            .map_or((false, false), |fs| (fs.read, fs.write));
        ClientCapabilities {
            fs: Some(FileSystemCapabilities {
                read_text_file: Some(read),
                write_text_file: Some(write),
                extra: Default::default(),
            }),
            terminal: Some(self.terminal.is_some()),
            session: (self.notices || self.compaction).then(|| ClientSessionCapabilities {
                notices: self.notices.then(Capability::default),
                compaction: self.compaction.then(Capability::default),
                ..ClientSessionCapabilities::default()
            }),
            ..ClientCapabilities::default()
        }
    }
}

/// Why a client operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ClientError {
    /// A request failed: the agent answered an error, the connection ended, it timed out, ...
    #[error("{method} failed: {source}")]
    Call {
        /// The method.
        method: String,
        /// Why.
        #[source]
        source: CallError,
    },
    /// The first connection could not be opened.
    #[error(transparent)]
    Connect(#[from] ConnectError),
    /// A lost connection could not be replaced.
    #[error("the connection was lost and {attempts} reconnect attempts failed: {reason}")]
    Reconnect {
        /// How many attempts were made.
        attempts: u32,
        /// The last failure.
        reason: String,
    },
}

impl ClientError {
    /// The failure of the request, if this is one.
    pub fn call_error(&self) -> Option<&CallError> {
        match self {
            ClientError::Call { source, .. } => Some(source),
            _ => None,
        }
    }

    /// The JSON-RPC error the agent answered, if it did.
    pub fn rpc_error(&self) -> Option<&RpcError> {
        match self.call_error()? {
            CallError::Rpc(error) => Some(error),
            _ => None,
        }
    }

    /// Whether the agent answered with this error code.
    pub fn is_rpc(&self, code: ErrorCode) -> bool {
        self.rpc_error().is_some_and(|error| error.code == code)
    }
}

/// What a client has seen, for diagnostics and drivers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ClientStats {
    /// The current connection's peer.
    pub peer: PeerStats,
    /// Session updates.
    pub updates: UpdateCounters,
    /// Permission requests.
    pub permissions: PermissionCounters,
    /// Permission requests waiting for a decision.
    pub pending_permissions: usize,
    /// Terminals created and not released.
    pub terminals: usize,
    /// How many times the connection was replaced.
    pub reconnects: u64,
}

/// What the handlers of every connection share.
struct Services {
    router: Arc<SessionRouter>,
    permissions: Arc<PermissionBroker>,
    sessions: Arc<KnownSessions>,
    fs: Option<(FsConfig, FsService)>,
    terminals: Option<Arc<Terminals>>,
}

/// A connection to an ACP agent; clones share it.
#[derive(Clone)]
pub struct Client {
    inner: Arc<Inner>,
}

struct Inner {
    config: ClientConfig,
    services: Arc<Services>,
    link: Link,
    agent: std::sync::Mutex<Option<InitializeResponse>>,
}

impl fmt::Debug for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Client")
            .field("config", &self.inner.config)
            .field("closed", &self.is_closed())
            .finish_non_exhaustive()
    }
}

impl Client {
    /// A client over a connection that is not replaced when it fails (stdio, a pipe).
    ///
    /// # Panics
    ///
    /// Panics when called outside a tokio runtime.
    pub fn over(transport: Transport, config: ClientConfig) -> Client {
        let services = Self::services(&config);
        let make_peer = Self::peer_maker(&config, &services);
        let link = Link::fixed(transport, make_peer);
        Self::assemble(config, services, link)
    }

    /// A client over connections from `factory`: the first is opened now (retried by
    /// `config.reconnect`), later ones when a connection is lost.
    pub async fn connect(
        factory: Arc<dyn ConnectionFactory>,
        config: ClientConfig,
    ) -> Result<Client, ClientError> {
        let transport = connect_with_backoff(factory.as_ref(), &config.reconnect).await?;
        let services = Self::services(&config);
        let make_peer = Self::peer_maker(&config, &services);
        let link = Link::reconnecting(transport, factory, config.reconnect, make_peer);
        Ok(Self::assemble(config, services, link))
    }

    fn assemble(config: ClientConfig, services: Arc<Services>, link: Link) -> Client {
        Client {
            inner: Arc::new(Inner {
                config,
                services,
                link,
                agent: std::sync::Mutex::new(None),
            }),
        }
    }

    fn services(config: &ClientConfig) -> Arc<Services> {
        Arc::new(Services {
            router: Arc::new(SessionRouter::default()),
            permissions: Arc::new(PermissionBroker::new(config.permission.clone())),
            sessions: Arc::default(),
            fs: config
                .fs
                .as_ref()
                .map(|fs| (fs.clone(), FsService::new(fs))),
            terminals: config
                .terminal
                .as_ref()
                .map(|terminal| Arc::new(Terminals::new(terminal.clone()))),
        })
    }

    fn peer_maker(config: &ClientConfig, services: &Arc<Services>) -> PeerMaker {
        let config = config.clone();
        let services = services.clone();
        Arc::new(move |transport| build_peer(&config, &services, transport))
    }

    /// The configuration.
    pub fn config(&self) -> &ClientConfig {
        &self.inner.config
    }

    /// The current connection's peer, for raw requests (no reconnect, no typing).
    pub fn peer(&self) -> Peer {
        self.inner.link.peer()
    }

    /// The agent's answer to `initialize`, once it came.
    pub fn agent(&self) -> Option<InitializeResponse> {
        self.inner
            .agent
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Sends a request with typed params and result, retrying after a reconnect.
    pub async fn request<R: DeserializeOwned>(
        &self,
        method: &str,
        params: &impl Serialize,
    ) -> Result<R, ClientError> {
        self.request_with(method, params, RequestOptions::default())
            .await
    }

    /// [`Client::request`] with options (a timeout of its own).
    pub async fn request_with<R: DeserializeOwned>(
        &self,
        method: &str,
        params: &impl Serialize,
        options: RequestOptions,
    ) -> Result<R, ClientError> {
        let failed = |source| ClientError::Call {
            method: method.to_owned(),
            source,
        };
        let params = serde_json::to_value(params).map_err(|e| failed(CallError::Params(e)))?;
        let result = self
            .inner
            .link
            .request(method, Some(params), options)
            .await?;
        serde_json::from_value(result).map_err(|e| failed(CallError::Decode(e)))
    }

    /// Sends a notification on the current connection.
    pub async fn notify(&self, method: &str, params: &impl Serialize) -> Result<(), ClientError> {
        let params = serde_json::to_value(params).map_err(|e| ClientError::Call {
            method: method.to_owned(),
            source: CallError::Params(e),
        })?;
        self.inner.link.notify(method, Some(params)).await
    }

    /// `initialize` with protocol version 1, this client's info and capabilities.
    pub async fn initialize(&self) -> Result<InitializeResponse, ClientError> {
        let request = InitializeRequest {
            protocol_version: PROTOCOL_VERSION,
            client_capabilities: Some(self.inner.config.capabilities()),
            client_info: Some(self.inner.config.client_info.clone()),
            extra: Default::default(),
        };
        let response: InitializeResponse = self.request(methods::INITIALIZE, &request).await?;
        *self
            .inner
            .agent
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(response.clone());
        Ok(response)
    }

    /// `authenticate` with one of the advertised method ids.
    pub async fn authenticate(&self, method_id: &str) -> Result<Empty, ClientError> {
        let request = AuthenticateRequest {
            method_id: method_id.to_owned(),
            extra: Default::default(),
        };
        self.request(methods::AUTHENTICATE, &request).await
    }

    /// `logout`.
    pub async fn logout(&self) -> Result<Empty, ClientError> {
        self.request(methods::LOGOUT, &Empty::default()).await
    }

    /// `session/new`.
    pub async fn new_session(
        &self,
        request: &NewSessionRequest,
    ) -> Result<NewSessionResponse, ClientError> {
        let response: NewSessionResponse = self.request(methods::SESSION_NEW, request).await?;
        self.adopt_session(&response.session_id);
        Ok(response)
    }

    /// `session/load`; the replayed history arrives as updates of the session.
    pub async fn load_session(
        &self,
        request: &LoadSessionRequest,
    ) -> Result<SessionStateResponse, ClientError> {
        self.adopt_session(&request.session_id);
        self.request(methods::SESSION_LOAD, request).await
    }

    /// `session/resume`.
    pub async fn resume_session(
        &self,
        request: &ResumeSessionRequest,
    ) -> Result<SessionStateResponse, ClientError> {
        self.adopt_session(&request.session_id);
        self.request(methods::SESSION_RESUME, request).await
    }

    /// The unstable `session/fork`.
    pub async fn fork_session(
        &self,
        request: &ForkSessionRequest,
    ) -> Result<NewSessionResponse, ClientError> {
        let response: NewSessionResponse = self.request(methods::SESSION_FORK, request).await?;
        self.adopt_session(&response.session_id);
        Ok(response)
    }

    /// `session/list`.
    pub async fn list_sessions(
        &self,
        request: &ListSessionsRequest,
    ) -> Result<ListSessionsResponse, ClientError> {
        self.request(methods::SESSION_LIST, request).await
    }

    /// `session/delete`.
    pub async fn delete_session(&self, session_id: &str) -> Result<Empty, ClientError> {
        let result = self
            .request(methods::SESSION_DELETE, &SessionIdRequest::new(session_id))
            .await;
        self.inner.services.router.forget(session_id);
        result
    }

    /// `session/close`.
    pub async fn close_session(&self, session_id: &str) -> Result<Empty, ClientError> {
        self.request(methods::SESSION_CLOSE, &SessionIdRequest::new(session_id))
            .await
    }

    /// `session/set_mode`.
    pub async fn set_mode(&self, request: &SetSessionModeRequest) -> Result<Empty, ClientError> {
        self.request(methods::SESSION_SET_MODE, request).await
    }

    /// `session/set_config_option`.
    pub async fn set_config_option(
        &self,
        request: &SetSessionConfigOptionRequest,
    ) -> Result<SetSessionConfigOptionResponse, ClientError> {
        self.request(methods::SESSION_SET_CONFIG_OPTION, request)
            .await
    }

    /// The legacy `session/set_model`.
    pub async fn set_model(&self, request: &SetSessionModelRequest) -> Result<Empty, ClientError> {
        self.request(methods::SESSION_SET_MODEL, request).await
    }

    /// `session/prompt`: one turn. Its updates arrive through [`Client::follow`], all of them
    /// before this returns.
    pub async fn prompt(&self, request: &PromptRequest) -> Result<PromptResponse, ClientError> {
        self.adopt_session(&request.session_id);
        self.resume_permissions(&request.session_id);
        self.request(methods::SESSION_PROMPT, request).await
    }

    /// `session/cancel`, then every pending permission request of the session is answered
    /// `cancelled` (as are those that arrive before the next prompt). Returns how many were
    /// pending.
    pub async fn cancel(&self, session_id: &str) -> Result<usize, ClientError> {
        let notification = CancelNotification {
            session_id: session_id.to_owned(),
            extra: Default::default(),
        };
        let sent = self.notify(methods::SESSION_CANCEL, &notification).await;
        let answered = self.inner.services.permissions.cancel_session(session_id);
        sent.map(|()| answered)
    }

    /// The ski `session/stop`: ends the session's running prompt.
    pub async fn stop(&self, session_id: &str) -> Result<Empty, ClientError> {
        self.request(methods::SESSION_STOP, &SessionIdRequest::new(session_id))
            .await
    }

    /// The ski `session/export`.
    pub async fn export(
        &self,
        request: &ExportSessionRequest,
    ) -> Result<ExportSessionResponse, ClientError> {
        self.request(methods::SESSION_EXPORT, request).await
    }

    /// Records a session of this client: the agent's file-system requests may name it.
    pub(crate) fn adopt_session(&self, session_id: &str) {
        self.inner.services.sessions.adopt(session_id);
    }

    /// A new turn starts on the session: permission requests are decided again.
    pub(crate) fn resume_permissions(&self, session_id: &str) {
        self.inner.services.permissions.resume_session(session_id);
    }

    /// Follows a session's updates; updates that arrived earlier come first. Take them while a
    /// prompt runs: once [`UPDATE_BUFFER_LIMIT`] wait for the follower, the connection stops
    /// reading the agent (backpressure) until it takes some, and the prompt's result waits too.
    pub fn follow(&self, session_id: &str) -> SessionUpdates {
        self.inner.services.router.follow(session_id)
    }

    /// Stops following a session and forgets its buffered updates.
    pub fn forget(&self, session_id: &str) {
        self.inner.services.router.forget(session_id);
    }

    /// Waits until at least `count` permission requests wait for a decision.
    pub async fn wait_pending_permissions(&self, count: usize) {
        self.inner.services.permissions.wait_pending(count).await;
    }

    /// Counters of the client and its current connection.
    pub fn stats(&self) -> ClientStats {
        let services = &self.inner.services;
        ClientStats {
            peer: self.peer().stats(),
            updates: services.router.counters(),
            permissions: services.permissions.counters(),
            pending_permissions: services.permissions.pending(),
            terminals: services.terminals.as_ref().map_or(0, |t| t.len()),
            reconnects: self.inner.link.reconnects(),
        }
    }

    /// Closes the client: pending requests fail with EOF, later ones with not-connected, every
    /// terminal is released (its command ended). Idempotent.
    pub async fn close(&self) {
        self.inner.link.close().await;
        if let Some(terminals) = &self.inner.services.terminals {
            terminals.release_all().await;
        }
    }

    /// Whether [`Client::close`] was called.
    pub fn is_closed(&self) -> bool {
        self.inner.link.is_closed()
    }
}

/// The most bytes of answers to the agent's requests that wait unwritten while the client reads
/// on (16 MiB).
pub const ANSWER_QUEUE_BYTES: usize = 16 * 1024 * 1024;

/// Builds one connection's peer with the client's handlers.
fn build_peer(config: &ClientConfig, services: &Arc<Services>, transport: Transport) -> Peer {
    let mut builder = Peer::builder()
        .first_id(1)
        .request_timeout(config.request_timeout)
        .max_in_flight_sends(config.max_in_flight_sends)
        .read_while_answers_wait(ANSWER_QUEUE_BYTES);
    for observer in &config.observers {
        let observer = observer.clone();
        builder = builder.observer(move |event: &WireEvent<'_>| observer.observe(event));
    }
    let router = services.router.clone();
    // Pending only while the session's follower has no room: the peer then stops reading.
    builder = builder.on_notification(methods::SESSION_UPDATE, move |_cx, params| {
        let router = router.clone();
        async move { router.receive(params).await }
    });
    let permissions = services.permissions.clone();
    builder =
        builder.on_typed_request(
            methods::SESSION_REQUEST_PERMISSION,
            move |_cx, request: RequestPermissionRequest| {
                let permissions = permissions.clone();
                async move {
                    Ok::<RequestPermissionResponse, RpcError>(permissions.answer(request).await)
                }
            },
        );
    if let Some((fs, service)) = &services.fs {
        if fs.read {
            let service = service.clone();
            let sessions = services.sessions.clone();
            builder = builder.on_typed_request(
                methods::FS_READ_TEXT_FILE,
                move |_cx, request: ReadTextFileRequest| {
                    let checked = sessions.check(&request.session_id);
                    let service = service.clone();
                    async move {
                        checked?;
                        service.read(request).await
                    }
                },
            );
        }
        if fs.write {
            let service = service.clone();
            let sessions = services.sessions.clone();
            builder = builder.on_typed_request(
                methods::FS_WRITE_TEXT_FILE,
                move |_cx, request: WriteTextFileRequest| {
                    let checked = sessions.check(&request.session_id);
                    let service = service.clone();
                    async move {
                        checked?;
                        service.write(request).await.map(|()| Empty::default())
                    }
                },
            );
        }
    }
    if let Some(terminals) = &services.terminals {
        builder = add_terminal_handlers(builder, terminals);
    }
    builder.spawn(transport)
}

fn add_terminal_handlers(
    builder: crate::jsonrpc::PeerBuilder,
    terminals: &Arc<Terminals>,
) -> crate::jsonrpc::PeerBuilder {
    let create = terminals.clone();
    let output = terminals.clone();
    let wait = terminals.clone();
    let kill = terminals.clone();
    let release = terminals.clone();
    builder
        .on_typed_request(
            methods::TERMINAL_CREATE,
            move |_cx, request: CreateTerminalRequest| std::future::ready(create.create(request)),
        )
        .on_typed_request(
            methods::TERMINAL_OUTPUT,
            move |_cx, request: TerminalRequest| std::future::ready(output.output(&request)),
        )
        .on_typed_request(
            methods::TERMINAL_WAIT_FOR_EXIT,
            move |_cx, request: TerminalRequest| {
                let wait = wait.clone();
                async move { wait.wait_for_exit(&request).await }
            },
        )
        .on_typed_request(
            methods::TERMINAL_KILL,
            move |_cx, request: TerminalRequest| {
                std::future::ready(kill.kill(&request).map(|()| Empty::default()))
            },
        )
        .on_typed_request(
            methods::TERMINAL_RELEASE,
            move |_cx, request: TerminalRequest| {
                let release = release.clone();
                async move { release.release(&request).await.map(|()| Empty::default()) }
            },
        )
}
