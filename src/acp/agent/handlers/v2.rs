//! The agent's ACP v2 handlers: what v2 answers differently from v1 (`initialize`'s v2 result,
//! `auth/login`, session set-up with config options, the prompt acknowledged at once with the
//! turn reported through `state_update`, `tool_call/cancel`, `terminal/cancel`). The methods v2
//! keeps unchanged (`session/list`, `session/delete`, `session/close`, `session/cancel`) are
//! v1's handlers, installed under the v2 rows too.

use std::sync::Arc;

use super::super::config::Feature;
use super::super::control::{StopCause, TurnOutcome};
use super::super::model::PromptDirectives;
use super::super::registry::ConnectionId;
use super::super::store::HistoryEntry;
use super::super::{Inner, turn};
use super::{existing_directories, invalid_params, unknown_session};
use crate::acp::v2::{
    self, AgentCapabilities, AuthMethod, CancelTerminalRequest, CancelToolCallRequest,
    InitializeResponse, LoginAuthRequest, Message, NewSessionRequest, NewSessionResponse,
    PromptCapabilities, PromptResponse, ResumeSessionRequest, ResumeSessionResponse,
    SessionCapabilities, SessionConfigOption, SetSessionConfigOptionRequest,
    SetSessionConfigOptionResponse, StateUpdate, StopReason,
};
use crate::acp::{Capability, Empty, Extra, Implementation, Nullable, PromptRequest};
use crate::jsonrpc::{RequestContext, RpcError};

/// A new message id, `msg_<uuid>`.
pub(crate) fn new_message_id() -> String {
    format!("msg_{}", uuid::Uuid::new_v4().simple())
}

impl Inner {
    /// The v2 `initialize` result: the `session` capability (the baseline, plus `delete` when
    /// served and every prompt content type), and the auth methods in v2's form.
    pub(super) fn initialize_v2(&self) -> InitializeResponse {
        let features = &self.config.features;
        let mut info = Implementation::new(&self.config.name, &self.config.version);
        info.title = Some(self.config.title.clone());
        let session = SessionCapabilities {
            prompt: Some(PromptCapabilities {
                image: Some(Capability::default()),
                audio: Some(Capability::default()),
                embedded_context: Some(Capability::default()),
                extra: Extra::new(),
            }),
            mcp: None,
            delete: features.has(Feature::Delete).then(Capability::default),
            additional_directories: Some(Capability::default()),
            extra: Extra::new(),
        };
        InitializeResponse {
            protocol_version: v2::PROTOCOL_VERSION,
            info,
            capabilities: AgentCapabilities {
                session: Some(session),
                auth: None,
                extra: Extra::new(),
            },
            auth_methods: self
                .config
                .auth_methods
                .iter()
                .map(|method| AuthMethod::agent(&method.id, &method.name))
                .collect(),
            extra: Extra::new(),
        }
    }

    /// A session's config options in v2's form.
    fn config_options_v2(&self, session: &str) -> Result<Vec<SessionConfigOption>, RpcError> {
        let store = self.store();
        let entry = store.get(session).ok_or_else(|| unknown_session(session))?;
        Ok(SessionConfigOption::all_from_v1(
            &entry.settings.config_options(),
        ))
    }
}

pub(super) async fn login(
    agent: Arc<Inner>,
    connection: ConnectionId,
    cx: RequestContext,
    request: LoginAuthRequest,
) -> Result<Empty, RpcError> {
    let request = crate::acp::AuthenticateRequest {
        method_id: request.method_id,
        extra: request.extra,
    };
    super::authenticate(agent, connection, cx, request).await
}

pub(super) async fn new_session(
    agent: Arc<Inner>,
    connection: ConnectionId,
    _cx: RequestContext,
    request: NewSessionRequest,
) -> Result<NewSessionResponse, RpcError> {
    let additional =
        (!request.additional_directories.is_empty()).then_some(request.additional_directories);
    existing_directories(&request.cwd, additional.as_deref()).await?;
    agent.room_for_session(connection)?;
    let now = agent.now();
    let session = agent.store().create(request.cwd, additional, now);
    agent.registry.set_owner(&session, connection);
    tracing::info!(%session, connection, "session created (v2)");
    Ok(NewSessionResponse {
        config_options: agent.config_options_v2(&session)?,
        session_id: session,
        available_commands: Vec::new(),
        extra: Extra::new(),
    })
}

pub(super) async fn resume_session(
    agent: Arc<Inner>,
    connection: ConnectionId,
    _cx: RequestContext,
    request: ResumeSessionRequest,
) -> Result<ResumeSessionResponse, RpcError> {
    let replay = match request.extra.get("replayFrom") {
        None | Some(serde_json::Value::Null) => false,
        Some(cursor) if cursor.get("type").and_then(serde_json::Value::as_str) == Some("start") => {
            true
        }
        Some(cursor) => {
            return Err(invalid_params(format!(
                "replayFrom {cursor} is no cursor this agent knows (it replays from \
                 {{\"type\": \"start\"}} only)"
            )));
        }
    };
    let additional =
        (!request.additional_directories.is_empty()).then_some(request.additional_directories);
    existing_directories(&request.cwd, additional.as_deref()).await?;
    let session = request.session_id;
    let now = agent.now();
    let history = {
        let mut store = agent.store();
        let stored = store
            .get_mut(&session)
            .ok_or_else(|| unknown_session(&session))?;
        // As in v1: the roots the request names, none when it names none.
        stored.additional_directories = additional;
        let history = replay.then(|| stored.history.clone());
        store.touch(&session, now);
        history
    };
    agent.registry.set_owner(&session, connection);
    // `replayFrom: {type: start}`: the history again, each message whole with an id, before
    // the answer.
    // Each message keeps the id the history holds for it, the one it was streamed under.
    for entry in history.into_iter().flatten() {
        let message = |message_id, content| Message {
            message_id,
            content: Nullable::Value(content),
            extra: Extra::new(),
        };
        let update = match entry {
            HistoryEntry::User { prompt, message_id } => {
                v2::SessionUpdate::UserMessage(message(message_id, prompt.into_blocks()))
            }
            HistoryEntry::Agent { text, message_id } => v2::SessionUpdate::AgentMessage(message(
                message_id,
                vec![crate::acp::ContentBlock::text(text)],
            )),
            HistoryEntry::Tool(_) => continue,
        };
        agent.update_v2(&session, update).await;
    }
    Ok(ResumeSessionResponse {
        config_options: agent.config_options_v2(&session)?,
        available_commands: Vec::new(),
        extra: Extra::new(),
    })
}

pub(super) async fn set_config_option(
    agent: Arc<Inner>,
    _connection: ConnectionId,
    _cx: RequestContext,
    request: SetSessionConfigOptionRequest,
) -> Result<SetSessionConfigOptionResponse, RpcError> {
    if !request.type_fits_value() {
        return Err(invalid_params(format!(
            "type {:?} does not fit the value of config option {:?}: `id` takes a string, \
             `boolean` a boolean",
            request.value_type, request.config_id
        )));
    }
    let session = request.session_id;
    let options = super::change_settings(&agent, &session, |settings| {
        settings.set_config(&request.config_id, &request.value)
    })?;
    let options = SessionConfigOption::all_from_v1(&options);
    agent
        .update_v2(
            &session,
            v2::SessionUpdate::ConfigOptionUpdate(v2::ConfigOptionUpdate {
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

/// The v2 prompt: accepted at once (`{messageId}`), then the turn runs on its own task and
/// reports `user_message`, `running`, its content and an idle `state_update` with the stop
/// reason.
pub(super) async fn prompt(
    agent: Arc<Inner>,
    connection: ConnectionId,
    _cx: RequestContext,
    request: PromptRequest,
) -> Result<PromptResponse, RpcError> {
    let plan = PromptDirectives::from_meta(request.extra.meta())
        .and_then(|directives| directives.apply(&agent.config.echo))
        .map_err(invalid_params)?;
    let session = request.session_id;
    // As in v1, nothing awaits before the turn is registered: a `session/cancel` right behind
    // this prompt finds it.
    let control = agent.begin_turn(&session, connection)?;
    let user_message = new_message_id();
    agent.set_v2_message(&session, user_message.clone(), new_message_id());
    let prompt = request.prompt;
    let user = v2::SessionUpdate::UserMessage(Message {
        message_id: user_message.clone(),
        content: Nullable::Value(prompt.clone()),
        extra: Extra::new(),
    });
    tokio::spawn(async move {
        agent.update_v2(&session, user).await;
        agent
            .update_v2(
                &session,
                v2::SessionUpdate::StateUpdate(StateUpdate::running()),
            )
            .await;
        let outcome = turn::run(agent.clone(), session.clone(), prompt, control, plan).await;
        tracing::info!(%session, ?outcome, "turn ended (v2)");
        let reason = match outcome {
            TurnOutcome::EndTurn => StopReason::EndTurn,
            TurnOutcome::Denied
            | TurnOutcome::Stopped(StopCause::Cancelled | StopCause::RequestCancelled) => {
                StopReason::Cancelled
            }
            TurnOutcome::Stopped(StopCause::TimedOut) | TurnOutcome::Failed(_) => StopReason::Error,
        };
        agent
            .update_v2(
                &session,
                v2::SessionUpdate::StateUpdate(StateUpdate::idle(reason)),
            )
            .await;
    });
    Ok(PromptResponse {
        message_id: user_message,
        extra: Extra::new(),
    })
}

/// `tool_call/cancel`: accepted for a running tool call that advertised `cancel`; the tool call
/// itself reports `cancelled`. Unknown, finished or uncancellable calls are `-32602`.
pub(super) async fn cancel_tool_call(
    agent: Arc<Inner>,
    _connection: ConnectionId,
    _cx: RequestContext,
    request: CancelToolCallRequest,
) -> Result<Empty, RpcError> {
    agent.exists(&request.session_id)?;
    if agent.cancel_tool(&request.session_id, &request.tool_call_id) {
        tracing::info!(session = %request.session_id, tool_call = %request.tool_call_id, "tool call cancelled");
        Ok(Empty::default())
    } else {
        Err(invalid_params(format!(
            "tool call {:?} of session {:?} is unknown, already final or not cancellable",
            request.tool_call_id, request.session_id
        )))
    }
}

/// `terminal/cancel`: the reference agent runs no agent-side terminals in v2, so every terminal
/// id is unknown (`-32602`, as the schema says for an unknown terminal).
pub(super) async fn cancel_terminal(
    agent: Arc<Inner>,
    _connection: ConnectionId,
    _cx: RequestContext,
    request: CancelTerminalRequest,
) -> Result<Empty, RpcError> {
    agent.exists(&request.session_id)?;
    Err(invalid_params(format!(
        "terminal {:?} of session {:?} is unknown",
        request.terminal_id, request.session_id
    )))
}
