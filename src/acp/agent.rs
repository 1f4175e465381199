//! The reference ACP agent: a deterministic echo back end behind the complete ACP v1 agent
//! surface, the unstable and legacy methods the ski specs use, and the ski extensions.
//!
//! # Shape
//!
//! One [`Agent`] holds the sessions and the connections, each with its own authentication state
//! (`authenticate` and `logout` change the connection that sends them, and `logout` ends only
//! the sessions that connection owns). Every
//! connection (stdio, or each WebSocket client) gets its own JSON-RPC [`Peer`] whose handlers
//! call into the shared agent, so:
//!
//! - request ids never mix between connections, every response goes back on the connection that
//!   asked with its own id, and `$/cancel_request` names an id of the sender's own id space;
//! - sessions are shared by all connections of one agent; a session's `session/update`
//!   notifications and the agent's requests to the client (permission, fs, terminal) go to the
//!   session's owner connection (see [`registry`]);
//! - every inbound request runs on its own task (the peer never blocks its read loop), so
//!   `session/cancel`, `$/cancel_request`, `session/stop` and permission answers are handled
//!   while a prompt runs, on stdio and WebSocket alike;
//! - a prompt turn runs on a task of its own ([`turn`]); when its connection closes it runs on
//!   and its updates are dropped with a logged not-connected error.
//!
//! # Wire behaviour in brief
//!
//! `initialize` answers any `protocolVersion` (a uint16) with 1, as ACP negotiates; with
//! [`AgentConfig::strict_version`] it refuses anything but 1 with `-32602`, as the seed document's
//! WS-023 asks. Methods gated by a
//! capability that is not enabled answer `-32601`. A request naming an unknown session answers
//! `-32002`. One prompt runs per session; a second answers `-32602`. A `cwd` must be an absolute
//! path of an existing directory (`-32602`). `session/close` and `session/delete` drop the session; a connection
//! owns at most [`AgentConfig::max_sessions`] live sessions (`-32603` for one more). See the
//! modules for details, and [`AgentConfig`] for every switch.
//!
//! # Bounds
//!
//! Per connection: inbound messages of at most [`ConnectionOptions::max_message_bytes`] (32 MiB;
//! an oversize line is skipped, an oversize WebSocket message closes the socket with 1009, both
//! answered `-32600`), at most [`ConnectionOptions::max_in_flight_sends`] (64) messages queued for
//! writing, while which nothing more is read, and [`AgentConfig::max_sessions`] (1024) live
//! sessions owned. Per agent: [`AgentConfig::max_total_sessions`] (4096) live sessions in all.
//! A WebSocket server caps its connections and holds each to a message deadline and a ping
//! (see [`crate::transport::ws_server`]).

pub mod clock;
pub mod commands;
pub mod config;
pub mod control;
pub mod export;
pub mod listing;
pub mod model;
pub mod permission;
pub mod policy;
pub mod registry;
pub mod store;
pub mod tools;
pub mod turn;
pub mod v2_updates;

mod handlers;

use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, SystemTime};

use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

pub use self::clock::{Clock, ManualClock, SystemClock};
pub use self::config::{
    AgentConfig, AuthMethodSpec, EchoConfig, Feature, Features, PermissionConfig, PermissionMode,
    PolicyMode, ToolCallSpec, TurnUpdates,
};
pub use self::control::StopCause;
pub use self::model::PromptDirectives;
pub use self::registry::{ConnectionId, RouteError};

use self::control::{TurnControl, TurnOutcome};
use self::policy::Remembered;
use self::registry::Registry;
use self::store::{HistoryEntry, Store};
use self::turn::new_message_id;
use crate::acp::methods::{Generation, SESSION_UPDATE};
use crate::acp::{
    ExecutionState, ExecutionStateKind, ExecutionStateUpdate, Extra, Nullable,
    PermissionOptionKind, SessionInfoUpdate, SessionNotification, SessionUpdate, ToolCallUpdate,
};
use crate::jsonrpc::{DEFAULT_MAX_LINE_BYTES, Peer, Transport};
use crate::transport::ws_server::WsServer;

/// How long a stream connection that reached end of input lets running requests answer.
pub const DRAIN_GRACE: Duration = Duration::from_secs(2);

/// How long stopping a turn waits for it to end before giving up on it.
const STOP_WAIT: Duration = Duration::from_secs(10);

/// Settings of one connection.
#[derive(Debug, Clone)]
pub struct ConnectionOptions {
    /// A name for logs (for a WebSocket, its `Acp-Connection-Id`).
    pub label: String,
    /// The bound of the connection's send gate.
    pub max_in_flight_sends: usize,
    /// The largest inbound message.
    pub max_message_bytes: usize,
}

impl Default for ConnectionOptions {
    fn default() -> Self {
        Self {
            label: "stdio".to_owned(),
            max_in_flight_sends: crate::jsonrpc::peer::DEFAULT_MAX_IN_FLIGHT_SENDS,
            max_message_bytes: DEFAULT_MAX_LINE_BYTES,
        }
    }
}

/// The reference ACP agent; clones share it.
#[derive(Clone)]
pub struct Agent {
    inner: Arc<Inner>,
}

impl fmt::Debug for Agent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Agent")
            .field("sessions", &self.session_count())
            .field("connections", &self.connection_count())
            .finish_non_exhaustive()
    }
}

impl Agent {
    /// An agent with the system clock.
    pub fn new(config: AgentConfig) -> Self {
        Self::with_clock(config, Arc::new(SystemClock))
    }

    /// An agent that reads time from `clock` (session ages, `updatedAt`, list snapshots).
    pub fn with_clock(config: AgentConfig, clock: Arc<dyn Clock>) -> Self {
        Self {
            inner: Arc::new(Inner {
                config,
                clock,
                store: Mutex::new(Store::default()),
                registry: Registry::default(),
                v2_messages: Mutex::default(),
                cancellable_tools: Mutex::default(),
            }),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &AgentConfig {
        &self.inner.config
    }

    /// Starts serving one connection over `transport` and returns its handle.
    ///
    /// # Panics
    ///
    /// Panics when called outside a tokio runtime.
    pub fn connect(&self, transport: Transport, options: &ConnectionOptions) -> AgentConnection {
        let id = self.inner.registry.open(&options.label);
        let peer = handlers::peer_builder(&self.inner, id, options).spawn(transport);
        self.inner.registry.attach(id, &peer);
        tracing::debug!(connection = id, label = %options.label, "connection opened");
        AgentConnection {
            id,
            peer,
            agent: self.inner.clone(),
        }
    }

    /// Serves one stream connection (stdio) until its input ends or `shutdown` fires; then
    /// stops every running turn, lets running requests answer (for up to [`DRAIN_GRACE`]) and
    /// closes the connection.
    pub async fn serve_stream(
        &self,
        transport: Transport,
        options: &ConnectionOptions,
        shutdown: &CancellationToken,
    ) {
        let connection = self.connect(transport, options);
        tokio::select! {
            () = connection.input_closed() => {
                tracing::debug!("input ended");
            }
            () = shutdown.cancelled() => {
                tracing::debug!("shutdown requested");
            }
        }
        self.stop_turns().await;
        if tokio::time::timeout(DRAIN_GRACE, connection.peer.handlers_idle())
            .await
            .is_err()
        {
            tracing::warn!("requests still running after the drain grace; closing anyway");
        }
        connection.close().await;
    }

    /// Serves every connection of a WebSocket server until `shutdown` fires. A connection that
    /// closes leaves its sessions (and their running turns) in place for other connections.
    pub async fn serve_websocket(
        &self,
        mut server: WsServer,
        options: &ConnectionOptions,
        shutdown: &CancellationToken,
    ) {
        let mut connections = JoinSet::new();
        loop {
            let accepted = tokio::select! {
                () = shutdown.cancelled() => break,
                accepted = server.accept() => accepted,
                Some(_) = connections.join_next(), if !connections.is_empty() => continue,
            };
            let Some(ws) = accepted else { break };
            let agent = self.clone();
            let options = ConnectionOptions {
                label: ws.id.clone(),
                ..options.clone()
            };
            let shutdown = shutdown.clone();
            tracing::info!(connection = %ws.id, remote = %ws.remote, path = %ws.path, "client connected");
            connections.spawn(async move {
                let connection = agent.connect(ws.into_transport(), &options);
                tokio::select! {
                    () = connection.input_closed() => {}
                    () = shutdown.cancelled() => {}
                }
                tracing::info!(connection = %options.label, "client disconnected");
                connection.close().await;
            });
        }
        drop(server);
        self.stop_turns().await;
        while connections.join_next().await.is_some() {}
    }

    /// Stops every running turn (as `session/cancel` would) and waits for them to end.
    pub async fn stop_turns(&self) {
        self.inner.stop_all_turns().await;
    }

    /// Resolves once every turn running at the time of the call has ended.
    pub async fn turns_finished(&self) {
        let turns = self.inner.store().running_turns();
        for turn in turns {
            turn.finished().await;
        }
    }

    /// How many turns are running.
    pub fn running_turns(&self) -> usize {
        self.inner.store().running_turns().len()
    }

    /// How many sessions exist.
    pub fn session_count(&self) -> usize {
        self.inner.store().len()
    }

    /// Whether a session exists (the remote transport checks `Acp-Session-Id` with it).
    pub fn has_session(&self, id: &str) -> bool {
        self.inner.store().contains(id)
    }

    /// How many connections are open.
    pub fn connection_count(&self) -> usize {
        self.inner.registry.open_connections()
    }

    /// Removes the sessions idle for longer than the configured TTL now (this also happens at
    /// the start of every request).
    pub fn prune_sessions(&self) {
        self.inner.prune();
    }
}

/// One connection of an agent.
pub struct AgentConnection {
    id: ConnectionId,
    peer: Peer,
    agent: Arc<Inner>,
}

impl fmt::Debug for AgentConnection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AgentConnection")
            .field("id", &self.id)
            .field("peer", &self.peer)
            .finish_non_exhaustive()
    }
}

impl AgentConnection {
    /// The connection's id within its agent.
    pub fn id(&self) -> ConnectionId {
        self.id
    }

    /// The connection's peer.
    pub fn peer(&self) -> &Peer {
        &self.peer
    }

    /// Resolves once the client's side has ended (end of input, or a read failure).
    pub async fn input_closed(&self) {
        self.peer.input_closed().await;
    }

    /// Forgets the connection and closes its peer; running turns of its sessions go on.
    pub async fn close(self) {
        self.agent.registry.close(self.id);
        self.peer.close().await;
        tracing::debug!(connection = self.id, "connection closed");
    }
}

/// The message ids of one turn: its user message and its reply.
#[derive(Debug, Clone)]
pub(crate) struct TurnMessages {
    pub(crate) user: String,
    pub(crate) agent: String,
}

/// The state shared by every connection of an agent.
pub(crate) struct Inner {
    pub(crate) config: AgentConfig,
    clock: Arc<dyn Clock>,
    store: Mutex<Store>,
    pub(crate) registry: Registry,
    /// The message ids of each session's current v2 turn.
    v2_messages: Mutex<std::collections::HashMap<String, TurnMessages>>,
    /// The tool calls `tool_call/cancel` can cancel now: tool call id to (session, token).
    cancellable_tools: Mutex<std::collections::HashMap<String, (String, CancellationToken)>>,
}

impl Inner {
    fn store(&self) -> MutexGuard<'_, Store> {
        self.store.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn now(&self) -> SystemTime {
        self.clock.now()
    }

    /// Removes sessions idle for longer than the TTL.
    fn prune(&self) {
        let Some(ttl) = self.config.session_ttl else {
            return;
        };
        let now = self.now();
        let removed = self.store().prune(ttl, now);
        for session in removed {
            tracing::info!(session = %session.id, "session expired");
            self.registry.forget_session(&session.id);
        }
    }

    /// Sets the user and agent message ids of a session's current v2 turn.
    pub(crate) fn set_v2_message(&self, session: &str, user: String, agent: String) {
        self.v2_messages
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(session.to_owned(), TurnMessages { user, agent });
    }

    /// The message ids of a session's current turn, the ids its history keeps: in v2 the ones
    /// the v2 prompt set, in v1 a new id for the user message (v1 streams none of it) and one
    /// for the reply, which every chunk of the reply carries.
    pub(crate) fn turn_messages(&self, session: &str) -> TurnMessages {
        if self.registry.session_generation(session) == Generation::V2
            && let Some(ids) = self
                .v2_messages
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .get(session)
        {
            return ids.clone();
        }
        TurnMessages {
            user: new_message_id(),
            agent: new_message_id(),
        }
    }

    /// Makes a running tool call cancellable by `tool_call/cancel` until [`Inner::release_tool`].
    pub(crate) fn hold_tool(&self, session: &str, tool_call: &str, token: CancellationToken) {
        self.cancellable_tools
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(tool_call.to_owned(), (session.to_owned(), token));
    }

    /// Ends what [`Inner::hold_tool`] started.
    pub(crate) fn release_tool(&self, tool_call: &str) {
        self.cancellable_tools
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(tool_call);
    }

    /// Whether a tool call can be cancelled now.
    fn is_cancellable(&self, tool_call: &str) -> bool {
        self.cancellable_tools
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .contains_key(tool_call)
    }

    /// Cancels a cancellable tool call of `session`; `false` when there is none by that id.
    pub(crate) fn cancel_tool(&self, session: &str, tool_call: &str) -> bool {
        let tools = self
            .cancellable_tools
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        match tools.get(tool_call) {
            Some((owner, token)) if owner == session => {
                token.cancel();
                true
            }
            _ => false,
        }
    }

    /// Sends a v2 `session/update` to the session's owner; a failure is logged, not returned.
    pub(crate) async fn update_v2(&self, session: &str, update: crate::acp::v2::SessionUpdate) {
        let params = crate::acp::v2::SessionNotification::new(session, update);
        if let Err(error) = self
            .registry
            .notify(Some(session), SESSION_UPDATE, &params)
            .await
        {
            let kind = params.update.kind();
            tracing::warn!(session, kind, %error, "session/update not delivered");
        }
    }

    /// Sends a `session/update` to the session's owner, in v2's form when the owner speaks v2
    /// ([`v2_updates`]); a failure is logged, not returned.
    pub(crate) async fn update(&self, session: &str, update: SessionUpdate) {
        if self.registry.session_generation(session) == Generation::V2 {
            let message_id = self
                .v2_messages
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .get(session)
                .map(|ids| ids.agent.clone())
                .unwrap_or_default();
            if let Some(update) =
                v2_updates::to_v2(update, &message_id, |id| self.is_cancellable(id))
            {
                self.update_v2(session, update).await;
            }
            return;
        }
        let params = SessionNotification::new(session, update);
        if let Err(error) = self
            .registry
            .notify(Some(session), SESSION_UPDATE, &params)
            .await
        {
            let kind = params.update.kind();
            tracing::warn!(session, kind, %error, "session/update not delivered");
        }
    }

    /// Sends a content update unless the turn was stopped.
    pub(crate) async fn content(
        &self,
        session: &str,
        control: &TurnControl,
        update: SessionUpdate,
    ) -> Result<(), TurnOutcome> {
        if control.is_stopped() {
            return Err(TurnOutcome::stopped(control));
        }
        self.update(session, update).await;
        Ok(())
    }

    /// Sends the `agent_message_chunk` of `text` in the message `message_id`, the update every
    /// turn streams: the line [`Inner::update`] writes for it, assembled from fixed text
    /// (`acp::turn_lines`). In v2 the chunk carries the v2 turn's message id instead.
    pub(crate) async fn message_chunk(&self, session: &str, text: &str, message_id: &str) {
        if self.registry.session_generation(session) == Generation::V2 {
            let chunk = SessionUpdate::agent_message(crate::acp::ContentBlock::text(text));
            return self.update(session, chunk).await;
        }
        let encode = |jsonrpc: bool, out: &mut Vec<u8>| {
            crate::acp::turn_lines::message_chunk_with_id(
                session,
                text,
                Some(message_id),
                jsonrpc,
                out,
            )
        };
        if let Err(error) = self.registry.notify_encoded(session, encode).await {
            let kind = "agent_message_chunk";
            tracing::warn!(session, kind, %error, "session/update not delivered");
        }
    }

    /// Sends an `execution_state_update` when execution state is enabled.
    pub(crate) async fn execution_state(
        &self,
        session: &str,
        state: ExecutionStateKind,
        attempt: Option<u32>,
        message: Option<String>,
    ) {
        if !self.config.execution_state {
            return;
        }
        let update = SessionUpdate::ExecutionStateUpdate(ExecutionStateUpdate {
            execution_state: ExecutionState {
                state,
                attempt,
                message,
                extra: Extra::new(),
            },
            extra: Extra::new(),
        });
        self.update(session, update).await;
    }

    /// Appends to a session's history.
    pub(crate) fn record(&self, session: &str, entry: HistoryEntry) {
        let words = commands::words(&entry);
        if let Some(session) = self.store().get_mut(session) {
            session.history.push(entry);
            session.context_words = session.context_words.saturating_add(words);
        }
    }

    pub(crate) fn recall(&self, session: &str, tool_call: &ToolCallUpdate) -> Option<Remembered> {
        self.store()
            .get(session)
            .and_then(|session| session.memory.recall(tool_call))
    }

    pub(crate) fn remember(
        &self,
        session: &str,
        tool_call: &ToolCallUpdate,
        kind: &PermissionOptionKind,
    ) {
        if let Some(session) = self.store().get_mut(session) {
            session.memory.remember(tool_call, kind);
        }
    }

    /// Replaces a session's history by the summary of what it held; returns the summary.
    pub(crate) fn compact(&self, session: &str) -> String {
        let mut store = self.store();
        let Some(session) = store.get_mut(session) else {
            return commands::summary(0);
        };
        let summary = commands::summary(session.history.len());
        session.history = vec![HistoryEntry::agent(summary.clone(), new_message_id())];
        session.context_words = session.history.iter().map(commands::words).sum();
        summary
    }

    /// The `usage_update` of a session's context now.
    pub(crate) fn usage(&self, session: &str) -> Option<crate::acp::UsageUpdate> {
        self.store()
            .get(session)
            .map(|session| commands::usage(session.context_words))
    }

    /// A session's roots: its `cwd` first, then its additional directories.
    pub(crate) fn session_roots(&self, session: &str) -> Option<Vec<String>> {
        self.store().get(session).map(|session| {
            let mut roots = vec![session.cwd.clone()];
            roots.extend(session.additional_directories.iter().flatten().cloned());
            roots
        })
    }

    /// Gives an untitled session a title derived from the prompt; returns the update to send.
    pub(crate) fn title_session(
        &self,
        session: &str,
        prompt: &[crate::acp::ContentBlock],
    ) -> Option<SessionInfoUpdate> {
        let now = self.now();
        let mut store = self.store();
        store.touch(session, now);
        let session = store.get_mut(session)?;
        if session.title.is_some() {
            return None;
        }
        let title = model::title(prompt);
        session.title = Some(title.clone());
        Some(session_info(&title, clock::rfc3339(session.updated)))
    }

    /// Clears a session's running turn if it is still `control`.
    pub(crate) fn finish_turn(&self, session: &str, control: &Arc<TurnControl>) {
        let now = self.now();
        let mut store = self.store();
        let finished = store.get_mut(session).is_some_and(|s| {
            let same = s.turn.as_ref().is_some_and(|t| Arc::ptr_eq(t, control));
            if same {
                s.turn = None;
            }
            same
        });
        if finished {
            if control.reported_update() {
                // Keep the `updatedAt` the turn reported, so `session/list` shows the same.
                store.reorder(session);
            } else {
                store.touch(session, now);
            }
        }
    }

    /// Stops every running turn and waits for them to end (each for at most `STOP_WAIT`).
    async fn stop_all_turns(&self) {
        let turns = self.store().running_turns();
        Self::stop_and_wait(turns).await;
    }

    /// Stops the running turns of `sessions` and waits for them to end, as
    /// [`Inner::stop_all_turns`].
    async fn stop_turns(&self, sessions: &[String]) {
        let turns: Vec<Arc<TurnControl>> = {
            let store = self.store();
            sessions
                .iter()
                .filter_map(|id| store.get(id)?.turn.clone())
                .collect()
        };
        Self::stop_and_wait(turns).await;
    }

    /// Removes `sessions` from the store and the registry; how many there were.
    fn remove_sessions(&self, sessions: &[String]) -> usize {
        let removed = {
            let mut store = self.store();
            sessions
                .iter()
                .filter(|id| store.remove(id).is_some())
                .count()
        };
        for session in sessions {
            self.registry.forget_session(session);
        }
        removed
    }

    async fn stop_and_wait(turns: Vec<Arc<TurnControl>>) {
        for turn in &turns {
            turn.stop(StopCause::Cancelled);
        }
        for turn in turns {
            if tokio::time::timeout(STOP_WAIT, turn.finished())
                .await
                .is_err()
            {
                tracing::warn!("a stopped turn did not end in time");
            }
        }
    }

    /// Stops a session's running turn and waits for it to end.
    async fn stop_turn(&self, session: &str, cause: StopCause) {
        let control = self
            .store()
            .get(session)
            .and_then(|session| session.turn.clone());
        if let Some(control) = control {
            control.stop(cause);
            if tokio::time::timeout(STOP_WAIT, control.finished())
                .await
                .is_err()
            {
                tracing::warn!(session, "a stopped turn did not end in time");
            }
        }
    }
}

/// The `session_info_update` of a title change.
fn session_info(title: &str, updated_at: String) -> SessionInfoUpdate {
    SessionInfoUpdate {
        title: Nullable::Value(title.to_owned()),
        updated_at: Nullable::Value(updated_at),
        extra: Extra::new(),
    }
}
