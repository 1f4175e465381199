//! ACP v2 (draft) in the standard personality, with ski's v2 types (`ski::acp::v2`):
//! `initialize` settled by ACP's version rule, session set-up with config options (no modes),
//! a prompt acknowledged with its `messageId` and ended by an idle `state_update`, every update
//! in v2's form (chunks with the turn's message id, `tool_call` as a creating
//! `tool_call_update`, every command input with its `type`), a turn that waits on a permission
//! request reported `requires_action` and then `running`, and tool calls held until
//! `tool_call/cancel`.

use std::sync::Arc;

use serde_json::{Value, json};
use ski::acp::agent::v2_updates;
use ski::acp::methods::{self, v2 as rows};
use ski::acp::v2::{
    self, AgentCapabilities, AuthMethod, CancelTerminalRequest, CancelToolCallRequest,
    InitializeRequest, InitializeResponse, Message, NewSessionRequest, NewSessionResponse,
    PromptCapabilities, PromptResponse, ResumeSessionRequest, ResumeSessionResponse,
    SessionCapabilities, SessionConfigOption, SetSessionConfigOptionRequest,
    SetSessionConfigOptionResponse, StateUpdate,
};
use ski::acp::{
    Capability, ConfigValue, ContentBlock, Extra, Implementation, Nullable, SessionUpdate,
};
use ski::jsonrpc::{ErrorCode, RpcError};
use tokio::sync::oneshot;

use super::reply;
use super::standard::{VERBOSITY, config_options, merge};
use crate::agent::runtime::Agent;
use crate::agent::runtime::ctx::Ctx;
use crate::agent::runtime::state::Role;

/// The versions the agent speaks when it offers v2.
const SPOKEN: &[u16] = &[1, v2::PROTOCOL_VERSION];

/// Whether `initialize` with these params settles on v2, by ACP's version rule: a v2 request
/// (one with v2's required `info`) asking for 2 or more gets 2 from an agent offering it; one
/// asking for 0 gets `-32022`; everything else is v1's to answer (a v1 request, whatever
/// version it asks for, as ski's reference answers it).
pub fn negotiate(agent: &Agent, params: Option<&Value>) -> Result<bool, RpcError> {
    if agent.config.agent.max_protocol < v2::PROTOCOL_VERSION {
        return Ok(false);
    }
    let Some(params) = params.filter(|p| p.get("info").is_some()) else {
        return Ok(false);
    };
    let Some(requested) = params
        .get("protocolVersion")
        .and_then(Value::as_u64)
        .and_then(|n| u16::try_from(n).ok())
    else {
        return Ok(false);
    };
    match requested {
        0 => Err(v2::unsupported_protocol_version(0, SPOKEN)),
        1 => Ok(false),
        _ => Ok(true),
    }
}

/// The v2 `initialize` result: the `session` capability (the baseline, `delete` and every
/// prompt content type), `agentInfo` as `info`, and the auth methods as `agent` methods.
pub fn initialize_result(agent: &Agent, ctx: &Ctx) -> Result<Value, RpcError> {
    let params = ctx.trigger.as_ref().and_then(|t| t.params_value()).cloned();
    let request: InitializeRequest = serde_json::from_value(params.unwrap_or(Value::Null))
        .map_err(|error| RpcError::invalid_params(format!("invalid v2 initialize: {error}")))?;
    {
        let mut state = agent.state();
        state.initialized = true;
        state.v2 = true;
        state.client_protocol_version = Some(json!(request.protocol_version));
        state.client_capabilities = serde_json::to_value(&request.capabilities).unwrap_or_default();
    }
    let info = serde_json::from_value::<Implementation>(agent.config.agent.info.clone())
        .unwrap_or_else(|_| Implementation::new("ski-mock-agent", crate::agent::config::VERSION));
    let auth_methods = agent
        .config
        .agent
        .auth_methods
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|method| {
            let id = method.get("id").and_then(Value::as_str)?;
            let name = method.get("name").and_then(Value::as_str).unwrap_or(id);
            Some(AuthMethod::agent(id, name))
        })
        .collect();
    let response = InitializeResponse {
        protocol_version: v2::PROTOCOL_VERSION,
        info,
        capabilities: AgentCapabilities {
            session: Some(SessionCapabilities {
                prompt: Some(PromptCapabilities {
                    image: Some(Capability::default()),
                    audio: Some(Capability::default()),
                    embedded_context: Some(Capability::default()),
                    extra: Extra::new(),
                }),
                mcp: None,
                delete: Some(Capability::default()),
                additional_directories: None,
                extra: Extra::new(),
            }),
            auth: None,
            extra: Extra::new(),
        },
        auth_methods,
        extra: Extra::new(),
    };
    let mut result = encode(&response)?;
    merge(&mut result, agent.config.agent.initialize_extra.as_ref());
    Ok(result)
}

fn encode<T: serde::Serialize>(value: &T) -> Result<Value, RpcError> {
    serde_json::to_value(value)
        .map_err(|error| RpcError::internal_error(format!("cannot encode the result: {error}")))
}

fn decode<T: serde::de::DeserializeOwned>(ctx: &Ctx, method: &str) -> Result<T, RpcError> {
    let params = ctx
        .trigger
        .as_ref()
        .and_then(|t| t.params_value())
        .cloned()
        .unwrap_or(Value::Null);
    serde_json::from_value(params)
        .map_err(|error| RpcError::invalid_params(format!("invalid {method} params: {error}")))
}

fn unknown_session(id: &str) -> RpcError {
    RpcError::new(ErrorCode::RESOURCE_NOT_FOUND, "Resource not found")
        .with_data(json!({ "sessionId": id }))
}

/// The session's config options in v2's form (keyed by `configId`).
fn options_v2(verbosity: &str) -> Vec<SessionConfigOption> {
    let v1: Vec<ski::acp::SessionConfigOption> =
        serde_json::from_value(config_options(verbosity)).unwrap_or_default();
    SessionConfigOption::all_from_v1(&v1)
}

fn verbosity_of(agent: &Agent, id: &str) -> Option<String> {
    agent.state().session(id).map(|s| s.verbosity.clone())
}

/// The v2 handling of the methods v2 changes; `false` for the ones it keeps from v1
/// (`session/list`, `session/close`, `session/delete`, `session/prompt`, ...), which the
/// standard handling answers.
pub async fn handle(agent: &Arc<Agent>, ctx: &mut Ctx, method: &str) -> bool {
    let result = match method {
        // v1 methods v2 dropped.
        methods::SESSION_LOAD
        | methods::SESSION_SET_MODE
        | methods::SESSION_SET_MODEL
        | methods::AUTHENTICATE
        | methods::LOGOUT => Err(RpcError::method_not_found(method)),
        rows::AUTH_LOGIN | rows::AUTH_LOGOUT => {
            if agent
                .config
                .agent
                .auth_methods
                .as_array()
                .is_none_or(Vec::is_empty)
            {
                Err(RpcError::method_not_found(method))
            } else {
                agent.state().authenticated = method == rows::AUTH_LOGIN;
                Ok(json!({}))
            }
        }
        rows::SESSION_NEW => new_session(agent, ctx),
        rows::SESSION_RESUME => match resume_session(agent, ctx) {
            Ok((result, replay)) => {
                if let Some(session) = replay {
                    replay_history(agent, &session).await;
                }
                Ok(result)
            }
            Err(error) => Err(error),
        },
        rows::SESSION_SET_CONFIG_OPTION => set_config_option(agent, ctx),
        rows::TOOL_CALL_CANCEL => cancel_tool_call(agent, ctx),
        rows::TERMINAL_CANCEL => decode::<CancelTerminalRequest>(ctx, method).and_then(|r| {
            match agent.state().session(&r.session_id) {
                None => Err(unknown_session(&r.session_id)),
                Some(_) => Err(RpcError::invalid_params(format!(
                    "terminal {:?} is unknown: this agent runs no terminals",
                    r.terminal_id
                ))),
            }
        }),
        _ => return false,
    };
    reply(agent, ctx, result).await;
    true
}

fn new_session(agent: &Agent, ctx: &Ctx) -> Result<Value, RpcError> {
    let _request: NewSessionRequest = decode(ctx, rows::SESSION_NEW)?;
    let response = NewSessionResponse {
        session_id: ctx.session_id(),
        config_options: options_v2("normal"),
        available_commands: Vec::new(),
        extra: Extra::new(),
    };
    let mut result = encode(&response)?;
    merge(&mut result, agent.config.agent.session_extra.as_ref());
    Ok(result)
}

/// `session/resume`: the answer, and the session whose history is replayed before it
/// (`replayFrom: {type: start}`, the one cursor the mock knows; any other is refused -32602, as
/// the schema's `ReplayFrom` asks, rather than resumed without replay).
fn resume_session(agent: &Agent, ctx: &Ctx) -> Result<(Value, Option<String>), RpcError> {
    let request: ResumeSessionRequest = decode(ctx, rows::SESSION_RESUME)?;
    let replay = match request.extra.0.get("replayFrom") {
        None | Some(Value::Null) => false,
        Some(cursor) if cursor.get("type").and_then(Value::as_str) == Some("start") => true,
        Some(cursor) => {
            return Err(RpcError::invalid_params(format!(
                "replayFrom {cursor} is no cursor this agent knows (it replays from \
                 {{\"type\": \"start\"}} only)"
            )));
        }
    };
    let verbosity = verbosity_of(agent, &request.session_id)
        .ok_or_else(|| unknown_session(&request.session_id))?;
    agent.state().last_session = Some(request.session_id.as_str().into());
    let result = encode(&ResumeSessionResponse {
        config_options: options_v2(&verbosity),
        available_commands: Vec::new(),
        extra: Extra::new(),
    })?;
    Ok((result, replay.then_some(request.session_id)))
}

/// A session's history again, each message whole (`user_message`, `agent_message`) with a
/// new message id.
async fn replay_history(agent: &Agent, session: &str) {
    let history = agent
        .state()
        .session(session)
        .map(|s| s.history.clone())
        .unwrap_or_default();
    for (role, text) in history {
        let message = Message {
            message_id: new_message_id(),
            content: Nullable::Value(vec![ContentBlock::text(text.to_string())]),
            extra: Extra::new(),
        };
        let update = if role == Role::User {
            v2::SessionUpdate::UserMessage(message)
        } else {
            v2::SessionUpdate::AgentMessage(message)
        };
        send(agent, session, &update).await;
    }
}

fn set_config_option(agent: &Agent, ctx: &Ctx) -> Result<Value, RpcError> {
    let request: SetSessionConfigOptionRequest = decode(ctx, rows::SESSION_SET_CONFIG_OPTION)?;
    if !request.type_fits_value() {
        return Err(RpcError::invalid_params(format!(
            "type {:?} does not fit the value of config option {:?}",
            request.value_type, request.config_id
        )));
    }
    let value = match &request.value {
        ConfigValue::Id(value) => value.clone(),
        _ => String::new(),
    };
    if request.config_id != "verbosity" || !VERBOSITY.iter().any(|(v, _)| *v == value) {
        return Err(RpcError::invalid_params(format!(
            "unknown config option {:?} or value {value:?}",
            request.config_id
        )));
    }
    match agent.state().session(&request.session_id) {
        Some(session) => session.verbosity.clone_from(&value),
        None => return Err(unknown_session(&request.session_id)),
    }
    encode(&SetSessionConfigOptionResponse {
        config_options: options_v2(&value),
        extra: Extra::new(),
    })
}

fn cancel_tool_call(agent: &Agent, ctx: &Ctx) -> Result<Value, RpcError> {
    let request: CancelToolCallRequest = decode(ctx, rows::TOOL_CALL_CANCEL)?;
    let mut state = agent.state();
    let Some(session) = state.session(&request.session_id) else {
        return Err(unknown_session(&request.session_id));
    };
    match session.held_tool_calls.remove(&request.tool_call_id) {
        Some(cancel) => {
            let _ = cancel.send(());
            Ok(json!({}))
        }
        None => Err(RpcError::invalid_params(format!(
            "tool call {:?} of session {:?} is unknown, already final or not cancellable",
            request.tool_call_id, request.session_id
        ))),
    }
}

/// A new message id, `msg_<uuid>`.
fn new_message_id() -> String {
    format!("msg_{}", uuid::Uuid::new_v4().simple())
}

/// Acknowledges a v2 prompt: the `{messageId}` result, the `user_message` it became and the
/// `running` state; a prompt for a session the agent does not have is refused `-32002` instead
/// (v2 acknowledges only a prompt it accepts) and `false` is returned: its turn must not run.
/// Nothing for anything but a v2 `session/prompt`, or one already acknowledged.
pub async fn acknowledge(agent: &Arc<Agent>, ctx: &mut Ctx) -> bool {
    let Some(trigger) = ctx.trigger.clone() else {
        return true;
    };
    if ctx.v2_prompt || trigger.method != methods::SESSION_PROMPT || !agent.state().v2 {
        return true;
    }
    let session = ctx.session_id();
    let user = new_message_id();
    let known = match agent.state().session(&session) {
        Some(entry) => {
            entry.message_id = Some(new_message_id());
            true
        }
        None => false,
    };
    if !known {
        reply(agent, ctx, Err(unknown_session(&session))).await;
        return false;
    }
    let ack = encode(&PromptResponse {
        message_id: user.clone(),
        extra: Extra::new(),
    });
    agent.respond(&trigger, ack, None).await;
    ctx.v2_prompt = true;
    let content = trigger
        .param("prompt")
        .and_then(|p| serde_json::from_value::<Vec<ContentBlock>>(p.clone()).ok())
        .map_or(Nullable::Absent, Nullable::Value);
    let user_message = v2::SessionUpdate::UserMessage(Message {
        message_id: user,
        content,
        extra: Extra::new(),
    });
    send(agent, &session, &user_message).await;
    send(
        agent,
        &session,
        &v2::SessionUpdate::StateUpdate(StateUpdate::running()),
    )
    .await;
    true
}

/// Ends an acknowledged v2 prompt's turn: the idle `state_update` with `stop_reason`.
pub async fn end_turn(agent: &Arc<Agent>, ctx: &mut Ctx, stop_reason: &str) {
    ctx.turn.take();
    ctx.v2_prompt = false;
    ctx.answered = true;
    let reason = serde_json::from_value(json!(stop_reason)).unwrap_or(v2::StopReason::EndTurn);
    let session = ctx.session_id();
    send(
        agent,
        &session,
        &v2::SessionUpdate::StateUpdate(StateUpdate::idle(reason)),
    )
    .await;
}

/// The stop reason a scripted answer to an acknowledged v2 prompt stands for: a result's
/// `stopReason` (`end_turn` if it has none), `error` for an error.
pub fn stop_reason_of(result: &Result<Value, RpcError>) -> String {
    match result {
        Ok(value) => value
            .get("stopReason")
            .and_then(Value::as_str)
            .unwrap_or("end_turn")
            .to_owned(),
        Err(_) => "error".to_owned(),
    }
}

async fn send(agent: &Agent, session: &str, update: &v2::SessionUpdate) {
    match serde_json::to_value(update) {
        Ok(update) => {
            agent
                .notify(
                    methods::SESSION_UPDATE,
                    Some(json!({"sessionId": session, "update": update})),
                )
                .await;
        }
        Err(error) => {
            agent
                .transcript
                .note(&format!("cannot encode a v2 update: {error}"));
        }
    }
}

/// A scripted or built-in update (v1's form, or already v2's) in v2's form for `session`:
/// chunks get the turn's message id, `tool_call` becomes a creating `tool_call_update` (with
/// `capabilities.cancel` while it is held), `plan` becomes `plan_update`. An update v2 has no
/// place for (`current_mode_update`, `session_info_update`) is an error saying so.
pub fn v2_form(agent: &Agent, session: &str, update: Value) -> Result<Value, String> {
    let mut update = update;
    typed_command_inputs(&mut update);
    if serde_json::from_value::<v2::SessionUpdate>(update.clone()).is_ok_and(|u| u.is_known()) {
        return Ok(update);
    }
    let v1: SessionUpdate = serde_json::from_value(update)
        .map_err(|error| format!("the update is no ACP session update: {error}"))?;
    let kind = v1.kind().to_owned();
    let (message_id, held): (String, Vec<String>) = {
        let mut state = agent.state();
        match state.session(session) {
            Some(entry) => (
                entry.message_id.get_or_insert_with(new_message_id).clone(),
                entry.held_tool_calls.keys().cloned().collect(),
            ),
            None => (new_message_id(), Vec::new()),
        }
    };
    v2_updates::to_v2(v1, &message_id, |id| held.iter().any(|h| h == id))
        .ok_or_else(|| format!("{kind} has no place in ACP v2 (draft); not sent"))
        .and_then(|update| serde_json::to_value(update).map_err(|e| e.to_string()))
}

/// Gives every command input of an `available_commands_update` that names no `type` v2's
/// `type: "text"` (v1's input is free text; v2 requires the type). Any other update is left
/// as it is.
fn typed_command_inputs(update: &mut Value) {
    if update.get("sessionUpdate").and_then(Value::as_str) != Some("available_commands_update") {
        return;
    }
    let Some(commands) = update
        .get_mut("availableCommands")
        .and_then(Value::as_array_mut)
    else {
        return;
    };
    for input in commands
        .iter_mut()
        .filter_map(|command| command.get_mut("input"))
        .filter_map(Value::as_object_mut)
    {
        input
            .entry("type")
            .or_insert_with(|| Value::String("text".to_owned()));
    }
}

/// Frames a permission request the agent sends on a v2 session during an acknowledged v2
/// prompt: `requires_action` before it (`waiting`), `running` once it is answered. Nothing
/// for any other request, a v1 session or outside a v2 turn.
pub async fn permission_wait(agent: &Agent, ctx: &Ctx, method: &str, waiting: bool) {
    if method != methods::SESSION_REQUEST_PERMISSION || !ctx.v2_prompt || !agent.state().v2 {
        return;
    }
    let state = if waiting {
        StateUpdate::requires_action()
    } else {
        StateUpdate::running()
    };
    send(
        agent,
        &ctx.session_id(),
        &v2::SessionUpdate::StateUpdate(state),
    )
    .await;
}

/// How long a permitted turn waits for the answer to its permission request.
const PERMISSION_WAIT: std::time::Duration = std::time::Duration::from_secs(30);

/// A prompt turn that asks first: `session/request_permission` for a pending tool call with an
/// allow and a reject option, framed by [`permission_wait`] in v2; the turn replies with `text`
/// only when the answer selects the allow option. Any other answer (the reject option, a
/// `cancelled` or unknown outcome, an error, none in time, or the turn cancelled meanwhile) is
/// no approval: the turn ends `cancelled` with no reply, as the reference's denied turn does.
pub async fn permitted_turn(agent: &Arc<Agent>, ctx: &mut Ctx, text: &Arc<str>) {
    let session = ctx.session_id();
    let tool = format!("call_{}", agent.state().next_item());
    let params = json!({"sessionId": session,
        "toolCall": {"toolCallId": tool, "title": "Run the prompt", "kind": "other",
                     "status": "pending"},
        "options": [{"optionId": "allow", "name": "Allow", "kind": "allow_once"},
                    {"optionId": "reject", "name": "Reject", "kind": "reject_once"}]});
    ctx.park();
    permission_wait(agent, ctx, methods::SESSION_REQUEST_PERMISSION, true).await;
    let reply = tokio::select! {
        reply = agent.request(
            methods::SESSION_REQUEST_PERMISSION,
            Some(params),
            None,
            None,
            Some(PERMISSION_WAIT),
            None,
            None,
        ) => reply,
        () = ctx.wait_cancelled() => None,
    };
    permission_wait(agent, ctx, methods::SESSION_REQUEST_PERMISSION, false).await;
    let allowed = reply.and_then(|r| r.result.ok()).is_some_and(|result| {
        result.pointer("/outcome/outcome") == Some(&json!("selected"))
            && result.pointer("/outcome/optionId") == Some(&json!("allow"))
    });
    if allowed && !ctx.cancelled() {
        super::text_turn(agent, ctx, text).await;
    } else {
        super::begin_turn(agent, ctx).await;
        super::finish_turn(agent, ctx, "cancelled").await;
    }
}

/// A tool call titled `title` that runs until it is cancelled: `tool_call/cancel` of its id
/// (v2, which sees `capabilities.cancel` on it) or `session/cancel` of the turn. It then
/// reports `cancelled` (v1, which has no such status: `failed`).
pub async fn hold_tool_call(agent: &Arc<Agent>, ctx: &mut Ctx, title: &str) {
    let session = ctx.session_id();
    let id = format!("call_{}", agent.state().next_item());
    let (cancel, cancelled) = oneshot::channel();
    let registered = match agent.state().session(&session) {
        Some(entry) => {
            entry.held_tool_calls.insert(id.clone(), cancel);
            true
        }
        None => false,
    };
    if !registered {
        agent
            .transcript
            .note(&format!("hold_tool_call: no session {session:?}"));
        return;
    }
    agent
        .update(
            &session,
            json!({"sessionUpdate": "tool_call", "toolCallId": id, "title": title,
                   "kind": "other", "status": "in_progress"}),
        )
        .await;
    ctx.park();
    tokio::select! {
        _ = cancelled => {}
        () = ctx.wait_cancelled() => {}
    }
    if let Some(entry) = agent.state().session(&session) {
        entry.held_tool_calls.remove(&id);
    }
    let status = if agent.state().v2 {
        "cancelled"
    } else {
        "failed"
    };
    agent
        .update(
            &session,
            json!({"sessionUpdate": "tool_call_update", "toolCallId": id, "status": status}),
        )
        .await;
}
