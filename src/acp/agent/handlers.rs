//! The agent's method handlers and the peer they are installed on: each takes the typed params
//! of its method-table row and returns its typed result (admission and decoding: [`install`]).
//!
//! A `cwd` (and every additional directory) must be an absolute path of an existing directory
//! without a NUL byte, else `-32602` with a message that says which and why (it is checked when
//! the request arrives; a directory removed later is not noticed). A connection that owns
//! [`AgentConfig::max_sessions`](super::AgentConfig::max_sessions) live sessions gets `-32603`
//! for `session/new` and `session/fork` until it closes or deletes one, and so does every
//! connection while the agent holds
//! [`AgentConfig::max_total_sessions`](super::AgentConfig::max_total_sessions) in all.

mod install;
mod v2;

use self::install::Installer;

use std::path::Path;
use std::sync::Arc;

use serde_json::{Map, Value, json};

use super::config::Feature;
use super::control::{StopCause, TurnControl, TurnOutcome};
use super::export;
use super::model::PromptDirectives;
use super::registry::ConnectionId;
use super::turn;
use super::{ConnectionOptions, Inner, clock};
use crate::acp::methods::v2::typed as v2typed;
use crate::acp::methods::{Generation, SESSION_CANCEL, SESSION_STOP, SESSION_UPDATE, typed};
use crate::acp::{
    AgentAuthCapabilities, AgentCapabilities, AuthMethod, AuthMethodAgent, AuthenticateRequest,
    AuthenticateResponse, Capability, CloseSessionRequest, CloseSessionResponse,
    ConfigOptionUpdate, ContentBlock, ContentChunk, CurrentModeUpdate, DeleteSessionRequest,
    DeleteSessionResponse, Empty, ExportSessionRequest, ExportSessionResponse, Extra,
    ForkSessionRequest, ForkSessionResponse, Implementation, InitializeRequest, InitializeResponse,
    ListSessionsRequest, ListSessionsResponse, LoadSessionRequest, LoadSessionResponse,
    LogoutRequest, LogoutResponse, NewSessionRequest, NewSessionResponse, Nullable,
    PROTOCOL_VERSION, PromptCapabilities, PromptRequest, PromptResponse, ResumeSessionRequest,
    ResumeSessionResponse, SessionCapabilities, SessionInfo, SessionNotification,
    SessionStateResponse, SessionUpdate, SetSessionConfigOptionRequest,
    SetSessionConfigOptionResponse, SetSessionModeRequest, SetSessionModeResponse,
    SetSessionModelRequest, SetSessionModelResponse, StopReason, StopSessionRequest,
    StopSessionResponse,
};
use crate::jsonrpc::{ErrorCode, PeerBuilder, RequestContext, RpcError};

fn invalid_params(reason: impl Into<String>) -> RpcError {
    RpcError::new(
        ErrorCode::INVALID_PARAMS,
        format!("invalid params: {}", reason.into()),
    )
}

fn unknown_session(session: &str) -> RpcError {
    RpcError::new(
        ErrorCode::RESOURCE_NOT_FOUND,
        format!("session not found: {session}"),
    )
    .with_data(json!({ "sessionId": session }))
}

/// Refuses a `cwd` or additional directory that is relative, contains a NUL byte or is not an
/// existing directory, with `-32602`.
async fn existing_directory(what: &str, path: &str) -> Result<(), RpcError> {
    let refuse = |why: String| Err(invalid_params(format!("{what} {path:?} {why}")));
    if path.contains('\0') {
        return refuse("contains a NUL byte".to_owned());
    }
    if !Path::new(path).is_absolute() {
        return refuse("must be an absolute path".to_owned());
    }
    match tokio::fs::metadata(path).await {
        Ok(metadata) if metadata.is_dir() => Ok(()),
        Ok(_) => refuse("is not a directory".to_owned()),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            refuse("does not exist".to_owned())
        }
        Err(error) => refuse(format!("cannot be read as a directory: {error}")),
    }
}

/// Refuses a `cwd` or an entry of `additionalDirectories` that is not an existing directory.
async fn existing_directories(cwd: &str, additional: Option<&[String]>) -> Result<(), RpcError> {
    existing_directory("cwd", cwd).await?;
    for directory in additional.unwrap_or_default() {
        existing_directory("additionalDirectories entry", directory).await?;
    }
    Ok(())
}

/// The additional roots a session request activates: those it names, none when it names none
/// (an empty list included). Stored roots are never reactivated implicitly.
fn active_roots(requested: Option<Vec<String>>) -> Option<Vec<String>> {
    requested.filter(|roots| !roots.is_empty())
}

/// Refuses `session/load` or `session/resume` naming additional roots with a `cwd` other than
/// the session's, with `-32602`: additional roots may change on load and resume only for the
/// same `cwd`. Without additional roots the `cwd` is not compared (as before they existed).
fn same_cwd(stored: &str, requested: &str, roots: Option<&[String]>) -> Result<(), RpcError> {
    if roots.is_none() || stored == requested {
        Ok(())
    } else {
        Err(invalid_params(format!(
            "cwd {requested:?} is not the session's cwd {stored:?}"
        )))
    }
}

impl Inner {
    /// Refuses a new session (`session/new`, `session/fork`) on a connection that owns the
    /// configured number of live sessions.
    fn room_for_session(&self, connection: ConnectionId) -> Result<(), RpcError> {
        let total = self.config.max_total_sessions;
        if self.store().len() >= total {
            return Err(RpcError::new(
                ErrorCode::INTERNAL_ERROR,
                format!(
                    "session limit reached: the agent has {total} live sessions across all \
                     connections, the most it keeps; end one with session/close or \
                     session/delete first"
                ),
            )
            .with_data(json!({ "maxTotalSessions": total })));
        }
        let limit = self.config.max_sessions;
        if self.registry.owned_sessions(connection) < limit {
            return Ok(());
        }
        Err(RpcError::new(
            ErrorCode::INTERNAL_ERROR,
            format!(
                "session limit reached: this connection has {limit} live sessions, the most it \
                 may have; end one with session/close or session/delete first"
            ),
        )
        .with_data(json!({ "maxSessions": limit })))
    }

    fn exists(&self, session: &str) -> Result<(), RpcError> {
        if self.store().contains(session) {
            Ok(())
        } else {
            Err(unknown_session(session))
        }
    }

    fn state(&self, session: &str) -> Result<SessionStateResponse, RpcError> {
        let store = self.store();
        let session = store.get(session).ok_or_else(|| unknown_session(session))?;
        Ok(SessionStateResponse {
            modes: Some(session.settings.modes()),
            config_options: Some(session.settings.config_options()),
            models: self
                .config
                .features
                .has(Feature::SetModel)
                .then(|| session.settings.models()),
            extra: Extra::new(),
        })
    }

    fn new_session_response(&self, session: &str) -> Result<NewSessionResponse, RpcError> {
        let state = self.state(session)?;
        Ok(NewSessionResponse {
            session_id: session.to_owned(),
            modes: state.modes,
            config_options: state.config_options,
            models: state.models,
            extra: Extra::new(),
        })
    }

    fn capabilities(&self) -> AgentCapabilities {
        let features = &self.config.features;
        let flag = |feature| features.has(feature).then(Capability::default);
        let sessions = SessionCapabilities {
            additional_directories: self.config.additional_directories.then(Capability::default),
            list: flag(Feature::List),
            delete: flag(Feature::Delete),
            resume: flag(Feature::Resume),
            close: flag(Feature::Close),
            fork: flag(Feature::Fork),
            ..SessionCapabilities::default()
        };
        let any_session = [
            Feature::List,
            Feature::Delete,
            Feature::Resume,
            Feature::Close,
            Feature::Fork,
        ]
        .into_iter()
        .any(|f| features.has(f))
            || self.config.additional_directories;
        let mut ski = Map::new();
        if features.has(Feature::Export) {
            ski.insert("sessionExport".into(), json!({}));
        }
        if features.has(Feature::Stop) {
            ski.insert("sessionStop".into(), json!({}));
        }
        if self.config.execution_state {
            ski.insert("executionState".into(), json!({}));
        }
        if self.config.max_retries > 0 {
            ski.insert("promptRetry".into(), json!({}));
        }
        let mut extra = Extra::new();
        if !ski.is_empty() {
            let mut meta = Map::new();
            meta.insert("ski".into(), Value::Object(ski));
            extra.set_meta(meta);
        }
        AgentCapabilities {
            load_session: Some(features.has(Feature::LoadSession)),
            prompt_capabilities: Some(PromptCapabilities {
                image: Some(true),
                audio: Some(true),
                embedded_context: Some(true),
                extra: Extra::new(),
            }),
            mcp_capabilities: None,
            session_capabilities: any_session.then_some(sessions),
            auth: features
                .has(Feature::Logout)
                .then(|| AgentAuthCapabilities {
                    logout: Some(Capability::default()),
                    ..AgentAuthCapabilities::default()
                }),
            auth_capabilities: None,
            providers: None,
            extra,
        }
    }
}

/// The peer builder of one connection, with every agent method installed.
pub(super) fn peer_builder(
    agent: &Arc<Inner>,
    connection: ConnectionId,
    options: &ConnectionOptions,
) -> PeerBuilder {
    let builder = crate::jsonrpc::Peer::builder()
        .max_in_flight_sends(options.max_in_flight_sends)
        .max_message_bytes(options.max_message_bytes);
    Installer::new(builder, agent, connection)
        .every_generation(typed::Initialize, initialize_version, initialize)
        .request(typed::Authenticate, authenticate)
        .request(typed::Logout, logout)
        .request(typed::NewSession, new_session)
        .request(typed::LoadSession, load_session)
        .request(typed::ListSessions, list_sessions)
        .request(typed::ResumeSession, resume_session)
        .request(typed::ForkSession, fork_session)
        .request(typed::DeleteSession, delete_session)
        .request(typed::CloseSession, close_session)
        .request(typed::SetSessionMode, set_mode)
        .request(typed::SetSessionConfigOption, set_config_option)
        .request(typed::SetSessionModel, set_model)
        .text_request(typed::Prompt, prompt)
        .request(typed::ExportSession, export_session)
        .request(typed::StopSession, stop_session)
        // The v2 rows: what v2 keeps unchanged is served by the v1 handler.
        .request(v2typed::Login, v2::login)
        .request(v2typed::Logout, logout)
        .request(v2typed::NewSession, v2::new_session)
        .request(v2typed::ListSessions, list_sessions)
        .request(v2typed::ResumeSession, v2::resume_session)
        .request(v2typed::DeleteSession, delete_session)
        .request(v2typed::CloseSession, close_session)
        .request(v2typed::SetSessionConfigOption, v2::set_config_option)
        .text_request(v2typed::Prompt, v2::prompt)
        .request(v2typed::CancelToolCall, v2::cancel_tool_call)
        .request(v2typed::CancelTerminal, v2::cancel_terminal)
        .notification(typed::Cancel, |agent, params| {
            cancel_turn(agent, SESSION_CANCEL, &params.session_id);
        })
        .notification(typed::StopSession, |agent, params| {
            cancel_turn(agent, SESSION_STOP, &params.session_id);
        })
        .finish()
}

/// Stops a session's running turn for a `session/cancel` or `session/stop` notification.
fn cancel_turn(agent: &Inner, method: &str, session: &str) {
    let control = agent
        .store()
        .get(session)
        .and_then(|session| session.turn.clone());
    match control {
        Some(control) => {
            control.stop(StopCause::Cancelled);
            tracing::info!(session = %session, method, "turn cancelled");
        }
        None => {
            tracing::debug!(session = %session, method, "no running turn to cancel");
        }
    }
}

/// [`check_protocol_version`] of `initialize`'s raw params, before they are decoded (so that a
/// version that is missing or no uint16 is refused with its own message).
fn initialize_version(agent: &Inner, params: Option<&Value>) -> Result<(), RpcError> {
    let version = params.and_then(|params| params.get("protocolVersion"));
    check_protocol_version(version, agent.config.strict_version, newest(&agent.config))
}

/// The newest generation the agent speaks: `max_protocol`, but v1 under `strict_version`
/// (WS-023 is a rule of ski's v1 WebSocket spec: the version it allows is 1).
fn newest(config: &super::AgentConfig) -> Generation {
    if config.strict_version {
        Generation::V1
    } else {
        config.max_protocol
    }
}

/// The versions an agent whose newest generation is `newest` speaks, oldest first.
fn offered(newest: Generation) -> Vec<u16> {
    Generation::ALL
        .iter()
        .filter(|generation| generation.protocol_version() <= newest.protocol_version())
        .map(|generation| generation.protocol_version())
        .collect()
}

/// The generation `initialize` settles on for a requested version, by ACP's rule: the version
/// asked for when the agent speaks it, else the newest the agent speaks below it (so a client
/// asking for a version above the agent's newest gets the newest). A v2 request (one with v2's
/// required `info`) asking for a version below every one the agent speaks (0) is `-32022`, as
/// the v2 schema (npm-sdk 2.4.0) says; a request without `info` is a v1 `initialize` whatever
/// version it asks for, and is answered in v1, as v1 negotiates (ERRATA E-ACP-66).
fn negotiate(requested: u16, newest: Generation, v2_shaped: bool) -> Result<Generation, RpcError> {
    if !v2_shaped {
        return Ok(Generation::V1);
    }
    Generation::ALL
        .iter()
        .rev()
        .copied()
        .filter(|generation| generation.protocol_version() <= newest.protocol_version())
        .find(|generation| generation.protocol_version() <= requested)
        .ok_or_else(|| crate::acp::v2::unsupported_protocol_version(requested, &offered(newest)))
}

/// Whether `initialize` goes on with the client's `protocolVersion`. As ACP negotiates, any
/// version (a uint16) goes on to [`negotiate`], and the client decides whether it can use the
/// answer; `strict` (`--strict-version`, WS-023) refuses every version the agent does not speak
/// with `-32602`. A value that is no uint16, or none, is invalid params either way.
fn check_protocol_version(
    version: Option<&Value>,
    strict: bool,
    newest: Generation,
) -> Result<(), RpcError> {
    let expected = offered(newest)
        .iter()
        .map(u16::to_string)
        .collect::<Vec<_>>()
        .join(" or ");
    let Some(version) = version else {
        return Err(invalid_params(format!(
            "missing protocolVersion, expected: {expected}"
        )));
    };
    let number = version.as_u64().and_then(|n| u16::try_from(n).ok());
    match number {
        Some(n) if offered(newest).contains(&n) || !strict => Ok(()),
        Some(_) => Err(invalid_params(format!(
            "unsupported protocolVersion: {version}, expected: {expected}"
        ))),
        None => Err(invalid_params(format!(
            "protocolVersion {version} is not an integer from 0 to 65535, expected: {expected}"
        ))),
    }
}

/// `initialize`: settles the connection's generation ([`negotiate`]) and answers in its form.
/// A v2 request is read as v2 (`info`, `capabilities`); one the agent answers with 1 is read as
/// v1.
async fn initialize(
    agent: Arc<Inner>,
    connection: ConnectionId,
    _cx: RequestContext,
    raw: Value,
) -> Result<Value, RpcError> {
    let requested = raw
        .get("protocolVersion")
        .and_then(Value::as_u64)
        .and_then(|n| u16::try_from(n).ok())
        .unwrap_or_default();
    let v2_shaped = raw.get("info").is_some();
    let generation = negotiate(requested, newest(&agent.config), v2_shaped)?;
    let encode = |result: Result<Value, serde_json::Error>| {
        result.map_err(|error| RpcError::internal_error(format!("cannot encode result: {error}")))
    };
    match generation {
        Generation::V2 => {
            let request: crate::acp::v2::InitializeRequest =
                crate::jsonrpc::decode_params(Some(raw))?;
            tracing::info!(connection, client = %request.info.name, version = %request.info.version, protocol = 2, "initialize");
            agent
                .registry
                .set_client(connection, crate::acp::ClientCapabilities::default());
            agent.registry.set_generation(connection, Generation::V2);
            encode(serde_json::to_value(agent.initialize_v2()))
        }
        Generation::V1 => {
            let request: InitializeRequest = crate::jsonrpc::decode_params(Some(raw))?;
            agent.registry.set_generation(connection, Generation::V1);
            encode(serde_json::to_value(initialize_v1(
                &agent, connection, request,
            )))
        }
    }
}

fn initialize_v1(
    agent: &Inner,
    connection: ConnectionId,
    request: InitializeRequest,
) -> InitializeResponse {
    if let Some(client) = &request.client_info {
        tracing::info!(connection, client = %client.name, version = %client.version, "initialize");
    }
    agent
        .registry
        .set_client(connection, request.client_capabilities.unwrap_or_default());
    let mut info = Implementation::new(&agent.config.name, &agent.config.version);
    info.title = Some(agent.config.title.clone());
    InitializeResponse {
        protocol_version: PROTOCOL_VERSION,
        agent_capabilities: Some(agent.capabilities()),
        auth_methods: Some(
            agent
                .config
                .auth_methods
                .iter()
                .map(|method| {
                    AuthMethod::Agent(AuthMethodAgent {
                        id: method.id.clone(),
                        name: method.name.clone(),
                        description: None,
                        extra: Extra::new(),
                    })
                })
                .collect(),
        ),
        agent_info: Some(info),
        extra: Extra::new(),
    }
}

async fn authenticate(
    agent: Arc<Inner>,
    connection: ConnectionId,
    _cx: RequestContext,
    request: AuthenticateRequest,
) -> Result<AuthenticateResponse, RpcError> {
    if !agent
        .config
        .auth_methods
        .iter()
        .any(|method| method.id == request.method_id)
    {
        let ids: Vec<&str> = agent
            .config
            .auth_methods
            .iter()
            .map(|m| m.id.as_str())
            .collect();
        return Err(invalid_params(format!(
            "unknown methodId {:?}; advertised: {}",
            request.method_id,
            ids.join(", ")
        )));
    }
    agent.registry.set_authenticated(connection, true);
    tracing::info!(method = %request.method_id, connection, "authenticated");
    Ok(Empty::default())
}

/// `logout` ends the authenticated state of the connection that sends it (ACP returns *the
/// connection* to an unauthenticated state) and every session it owns, with their running turns
/// and permission memory; the sessions and authentication of the agent's other connections are
/// untouched.
async fn logout(
    agent: Arc<Inner>,
    connection: ConnectionId,
    _cx: RequestContext,
    _request: LogoutRequest,
) -> Result<LogoutResponse, RpcError> {
    let sessions = agent.registry.sessions_of(connection);
    agent.stop_turns(&sessions).await;
    let removed = agent.remove_sessions(&sessions);
    agent.registry.set_authenticated(connection, false);
    tracing::info!(
        connection,
        sessions = removed,
        "logged out; the connection's sessions ended"
    );
    Ok(Empty::default())
}

async fn new_session(
    agent: Arc<Inner>,
    connection: ConnectionId,
    _cx: RequestContext,
    request: NewSessionRequest,
) -> Result<NewSessionResponse, RpcError> {
    existing_directories(&request.cwd, request.additional_directories.as_deref()).await?;
    agent.room_for_session(connection)?;
    let now = agent.now();
    let session = agent.store().create(
        request.cwd,
        active_roots(request.additional_directories),
        now,
    );
    agent.registry.set_owner(&session, connection);
    tracing::info!(%session, connection, "session created");
    agent.new_session_response(&session)
}

async fn load_session(
    agent: Arc<Inner>,
    connection: ConnectionId,
    cx: RequestContext,
    request: LoadSessionRequest,
) -> Result<LoadSessionResponse, RpcError> {
    existing_directories(&request.cwd, request.additional_directories.as_deref()).await?;
    let session = request.session_id;
    let history = {
        let now = agent.now();
        let mut store = agent.store();
        let stored = store
            .get_mut(&session)
            .ok_or_else(|| unknown_session(&session))?;
        let roots = active_roots(request.additional_directories);
        same_cwd(&stored.cwd, &request.cwd, roots.as_deref())?;
        stored.additional_directories = roots;
        let history = stored.history.clone();
        store.touch(&session, now);
        history
    };
    agent.registry.set_owner(&session, connection);
    // Each message is replayed under the id it was kept with: every chunk of one message
    // carries the same `messageId`, as in the live turn.
    let chunk = |block, message_id: &str| ContentChunk {
        message_id: Some(message_id.to_owned()),
        ..ContentChunk::new(block)
    };
    for entry in history {
        let updates: Vec<SessionUpdate> = match entry {
            super::store::HistoryEntry::User { prompt, message_id } => prompt
                .into_blocks()
                .into_iter()
                .map(|block| SessionUpdate::UserMessageChunk(chunk(block, &message_id)))
                .collect(),
            super::store::HistoryEntry::Agent { text, message_id } => {
                vec![SessionUpdate::AgentMessageChunk(chunk(
                    ContentBlock::text(text),
                    &message_id,
                ))]
            }
            super::store::HistoryEntry::Tool(_) => Vec::new(),
        };
        for update in updates {
            let notification = serde_json::to_value(SessionNotification::new(&session, update))
                .map_err(|error| {
                    RpcError::internal_error(format!("cannot encode result: {error}"))
                })?;
            cx.peer()
                .notify(SESSION_UPDATE, Some(notification))
                .await
                .map_err(|error| RpcError::internal_error(error.to_string()))?;
        }
    }
    agent.state(&session)
}

async fn list_sessions(
    agent: Arc<Inner>,
    _connection: ConnectionId,
    _cx: RequestContext,
    request: ListSessionsRequest,
) -> Result<ListSessionsResponse, RpcError> {
    let now = agent.now();
    let page_size = agent.config.page_size;
    let mut store = agent.store();
    let cwd = request.cwd.as_deref();
    let page = match &request.cursor {
        None => {
            let ordered = store.ordered(cwd);
            store.listings.first_page(ordered, cwd, page_size, now)
        }
        Some(cursor) => {
            let existing: std::collections::HashSet<String> =
                store.ordered(cwd).into_iter().collect();
            store
                .listings
                .page_at(cursor, cwd, page_size, now, |id| existing.contains(id))
                .map_err(|error| invalid_params(error.to_string()))?
        }
    };
    let sessions = page
        .ids
        .iter()
        .filter_map(|id| store.get(id))
        .map(|session| {
            let mut extra = Extra::new();
            if let Some(parent) = &session.parent {
                let mut meta = Map::new();
                meta.insert("parentSessionId".into(), json!(parent));
                extra.set_meta(meta);
            }
            SessionInfo {
                session_id: session.id.clone(),
                cwd: session.cwd.clone(),
                additional_directories: session.additional_directories.clone(),
                title: session.title.clone(),
                updated_at: Some(clock::rfc3339(session.updated)),
                archived: None,
                parent_session_id: None,
                message_count: None,
                extra,
            }
        })
        .collect();
    Ok(ListSessionsResponse {
        sessions,
        next_cursor: match page.next_cursor {
            Some(cursor) => Nullable::Value(cursor),
            None => Nullable::Null,
        },
        extra: Extra::new(),
    })
}

async fn resume_session(
    agent: Arc<Inner>,
    connection: ConnectionId,
    _cx: RequestContext,
    request: ResumeSessionRequest,
) -> Result<ResumeSessionResponse, RpcError> {
    existing_directories(&request.cwd, request.additional_directories.as_deref()).await?;
    let session = request.session_id;
    let now = agent.now();
    {
        let mut store = agent.store();
        let stored = store
            .get_mut(&session)
            .ok_or_else(|| unknown_session(&session))?;
        let roots = active_roots(request.additional_directories);
        same_cwd(&stored.cwd, &request.cwd, roots.as_deref())?;
        stored.additional_directories = roots;
        store.touch(&session, now);
    }
    agent.registry.set_owner(&session, connection);
    agent.state(&session)
}

async fn fork_session(
    agent: Arc<Inner>,
    connection: ConnectionId,
    _cx: RequestContext,
    request: ForkSessionRequest,
) -> Result<ForkSessionResponse, RpcError> {
    existing_directories(&request.cwd, request.additional_directories.as_deref()).await?;
    agent.room_for_session(connection)?;
    let now = agent.now();
    let fork = agent
        .store()
        .fork(
            &request.session_id,
            request.cwd,
            active_roots(request.additional_directories),
            now,
        )
        .ok_or_else(|| unknown_session(&request.session_id))?;
    agent.registry.set_owner(&fork, connection);
    tracing::info!(source = %request.session_id, %fork, "session forked");
    agent.new_session_response(&fork)
}

async fn delete_session(
    agent: Arc<Inner>,
    _connection: ConnectionId,
    _cx: RequestContext,
    request: DeleteSessionRequest,
) -> Result<DeleteSessionResponse, RpcError> {
    let session = request.session_id;
    if agent.end_session(&session).await {
        tracing::info!(%session, "session deleted");
    }
    Ok(Empty::default())
}

/// Cancels the session's running turn and drops the session: its history, settings and
/// permission memory are freed, and requests naming it get `-32002` afterwards, as after
/// `session/delete`. Unlike `session/delete`, an unknown session is `-32002`.
async fn close_session(
    agent: Arc<Inner>,
    _connection: ConnectionId,
    _cx: RequestContext,
    request: CloseSessionRequest,
) -> Result<CloseSessionResponse, RpcError> {
    let session = request.session_id;
    agent.exists(&session)?;
    if agent.end_session(&session).await {
        tracing::info!(%session, "session closed");
    }
    Ok(Empty::default())
}

/// Changes one session's settings (mode, model or a config option) and marks the session touched;
/// returns the complete config option list after the change. An unknown session or a refused value
/// is -32602.
fn change_settings(
    agent: &Inner,
    session: &str,
    change: impl FnOnce(&mut super::store::Settings) -> Result<(), String>,
) -> Result<Vec<crate::acp::config::SessionConfigOption>, RpcError> {
    let now = agent.now();
    let mut store = agent.store();
    let entry = store
        .get_mut(session)
        .ok_or_else(|| unknown_session(session))?;
    change(&mut entry.settings).map_err(invalid_params)?;
    let options = entry.settings.config_options();
    store.touch(session, now);
    Ok(options)
}

async fn set_mode(
    agent: Arc<Inner>,
    _connection: ConnectionId,
    _cx: RequestContext,
    request: SetSessionModeRequest,
) -> Result<SetSessionModeResponse, RpcError> {
    let session = request.session_id;
    change_settings(&agent, &session, |settings| {
        settings.set_mode(&request.mode_id)
    })?;
    agent
        .update(
            &session,
            SessionUpdate::CurrentModeUpdate(CurrentModeUpdate {
                current_mode_id: request.mode_id,
                extra: Extra::new(),
            }),
        )
        .await;
    Ok(Empty::default())
}

async fn set_config_option(
    agent: Arc<Inner>,
    _connection: ConnectionId,
    _cx: RequestContext,
    request: SetSessionConfigOptionRequest,
) -> Result<SetSessionConfigOptionResponse, RpcError> {
    let session = request.session_id;
    let options = change_settings(&agent, &session, |settings| {
        settings.set_config(&request.config_id, &request.value)
    })?;
    agent
        .update(
            &session,
            SessionUpdate::ConfigOptionUpdate(ConfigOptionUpdate {
                config_options: options.clone(),
                extra: Extra::new(),
            }),
        )
        .await;
    Ok(SetSessionConfigOptionResponse {
        config_options: options,
        extra: Extra::new(),
    })
}

async fn set_model(
    agent: Arc<Inner>,
    _connection: ConnectionId,
    _cx: RequestContext,
    request: SetSessionModelRequest,
) -> Result<SetSessionModelResponse, RpcError> {
    let session = request.session_id;
    let options = change_settings(&agent, &session, |settings| {
        settings.set_model(&request.model_id)
    })?;
    agent
        .update(
            &session,
            SessionUpdate::ConfigOptionUpdate(ConfigOptionUpdate {
                config_options: options,
                extra: Extra::new(),
            }),
        )
        .await;
    Ok(Empty::default())
}

async fn export_session(
    agent: Arc<Inner>,
    _connection: ConnectionId,
    _cx: RequestContext,
    request: ExportSessionRequest,
) -> Result<ExportSessionResponse, RpcError> {
    let format = request
        .format
        .unwrap_or_else(|| export::FORMAT_JSONL.to_owned());
    if format != export::FORMAT_JSONL {
        return Err(invalid_params(format!(
            "unsupported export format {format:?}; supported: {}",
            export::FORMAT_JSONL
        )));
    }
    let store = agent.store();
    let session = store
        .get(&request.session_id)
        .ok_or_else(|| unknown_session(&request.session_id))?;
    Ok(ExportSessionResponse {
        session_id: session.id.clone(),
        format,
        mime_type: export::MIME_TYPE.to_owned(),
        content: export::jsonl(session),
        extra: Extra::new(),
    })
}

async fn stop_session(
    agent: Arc<Inner>,
    _connection: ConnectionId,
    _cx: RequestContext,
    request: StopSessionRequest,
) -> Result<StopSessionResponse, RpcError> {
    let control = {
        let store = agent.store();
        let session = store
            .get(&request.session_id)
            .ok_or_else(|| unknown_session(&request.session_id))?;
        session.turn.clone()
    };
    if let Some(control) = control {
        control.stop(StopCause::Cancelled);
        tracing::info!(session = %request.session_id, "turn stopped by session/stop");
    }
    Ok(Empty::default())
}

impl Inner {
    /// Cancels a session's running turn and removes the session with everything it holds;
    /// `false` when there was no such session.
    async fn end_session(&self, session: &str) -> bool {
        self.stop_turn(session, StopCause::Cancelled).await;
        let removed = self.store().remove(session).is_some();
        if removed {
            self.registry.forget_session(session);
            self.v2_messages
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .remove(session);
        }
        removed
    }

    /// Registers a new turn for a session: it must exist and have no running turn.
    fn begin_turn(
        &self,
        session: &str,
        connection: ConnectionId,
    ) -> Result<Arc<TurnControl>, RpcError> {
        let now = self.now();
        let control = {
            let mut store = self.store();
            let entry = store
                .get_mut(session)
                .ok_or_else(|| unknown_session(session))?;
            if entry.turn.is_some() {
                return Err(invalid_params(format!(
                    "prompt already running for session: {session}"
                )));
            }
            let control = Arc::new(TurnControl::new());
            entry.turn = Some(control.clone());
            store.touch(session, now);
            control
        };
        self.registry.set_owner(session, connection);
        Ok(control)
    }
}

async fn prompt(
    agent: Arc<Inner>,
    connection: ConnectionId,
    cx: RequestContext,
    request: PromptRequest,
) -> Result<PromptResponse, RpcError> {
    // The turn ends itself on `$/cancel_request`, so that it can answer after cleaning up.
    cx.handle_cancellation();
    let plan = PromptDirectives::from_meta(request.extra.meta())
        .and_then(|directives| directives.apply(&agent.config.echo))
        .map_err(invalid_params)?;
    if cx.is_cancelled() {
        return Err(RpcError::request_cancelled());
    }
    let session = request.session_id;
    // Nothing awaits before the turn is registered: the peer polls a handler once before it
    // reads the next message, so a `session/cancel` or `session/stop` written right behind this
    // prompt finds the turn running. Nothing awaits between registering the turn and spawning
    // it either, so a handler dropped with its connection cannot leave the session running: the
    // turn then goes on on its own task.
    let control = agent.begin_turn(&session, connection)?;
    let mut running = turn::Detached::new(turn::run(
        agent.clone(),
        session.clone(),
        request.prompt,
        control.clone(),
        plan,
    ));
    let outcome = tokio::select! {
        biased;
        outcome = &mut running => outcome,
        () = cx.cancellation().cancelled() => {
            if cx.peer().is_closed() {
                // The connection is gone; the turn runs on and nobody reads the answer.
                return Err(RpcError::request_cancelled());
            }
            control.stop(StopCause::RequestCancelled);
            running.await
        }
    };
    tracing::info!(%session, ?outcome, "turn ended");
    match outcome {
        TurnOutcome::EndTurn => Ok(PromptResponse::new(StopReason::EndTurn)),
        TurnOutcome::Denied | TurnOutcome::Stopped(StopCause::Cancelled) => {
            Ok(PromptResponse::new(StopReason::Cancelled))
        }
        TurnOutcome::Stopped(StopCause::RequestCancelled) => Err(RpcError::request_cancelled()),
        TurnOutcome::Stopped(StopCause::TimedOut) => {
            let limit = agent.config.prompt_timeout.unwrap_or_default();
            Err(RpcError::new(
                ErrorCode::INTERNAL_ERROR,
                format!("prompt timed out after {} ms", limit.as_millis()),
            ))
        }
        TurnOutcome::Failed(message) => Err(RpcError::new(ErrorCode::INTERNAL_ERROR, message)),
    }
}
