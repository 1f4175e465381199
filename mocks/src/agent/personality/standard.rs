//! Standard ACP v1: every client-to-agent method answered as the specification says, with
//! in-memory sessions that `session/load` replays.

use std::sync::Arc;

use serde_json::{Value, json};
use ski::acp::methods;
use ski::jsonrpc::{ErrorCode, RpcError};

use super::{prompt_turn, reply};
use crate::agent::runtime::Agent;
use crate::agent::runtime::ctx::Ctx;
use crate::agent::runtime::state::Role;
use crate::agent::script::Quirk;

/// Modes every session offers.
pub const MODES: &[(&str, &str)] = &[("default", "Default"), ("plan", "Plan")];

/// Values of the `verbosity` config option.
pub const VERBOSITY: &[(&str, &str)] = &[
    ("brief", "Brief"),
    ("normal", "Normal"),
    ("verbose", "Verbose"),
];

/// The `initialize` result.
pub fn initialize_result(agent: &Agent, ctx: &Ctx) -> Result<Value, RpcError> {
    let trigger = ctx.trigger.as_ref();
    if super::v2::negotiate(agent, trigger.and_then(|t| t.params_value()))? {
        return super::v2::initialize_result(agent, ctx);
    }
    let requested = trigger.and_then(|t| t.param("protocolVersion")).cloned();
    let version = match (&agent.config.agent.protocol_version, &requested) {
        (Some(forced), _) => json!(forced),
        (None, Some(Value::Number(n))) if n.as_u64() == Some(1) => json!(1),
        (None, Some(Value::Number(_))) => json!(1),
        (None, _) => {
            return Err(RpcError::invalid_params(
                "protocolVersion must be an integer",
            ));
        }
    };
    {
        let mut state = agent.state();
        state.initialized = true;
        state.v2 = false;
        state.client_protocol_version = requested;
        state.client_capabilities = trigger
            .and_then(|t| t.param("clientCapabilities"))
            .cloned()
            .unwrap_or(Value::Null);
    }
    let mut result = json!({
        "protocolVersion": version,
        "agentCapabilities": agent.config.agent.capabilities,
        "authMethods": agent.config.agent.auth_methods,
        "agentInfo": agent.config.agent.info,
    });
    merge(&mut result, agent.config.agent.initialize_extra.as_ref());
    Ok(result)
}

/// Merges the members of `extra` into `target` (both objects).
pub fn merge(target: &mut Value, extra: Option<&Value>) {
    if let (Some(target), Some(Value::Object(extra))) = (target.as_object_mut(), extra) {
        for (key, value) in extra {
            target.insert(key.clone(), value.clone());
        }
    }
}

/// The `modes` member for a session in `mode`.
pub fn modes(current: &str) -> Value {
    json!({
        "currentModeId": current,
        "availableModes": MODES.iter().map(|(id, name)| json!({"id": id, "name": name})).collect::<Vec<_>>(),
    })
}

/// The `configOptions` member.
pub fn config_options(verbosity: &str) -> Value {
    json!([{
        "type": "select",
        "id": "verbosity",
        "name": "Verbosity",
        "currentValue": verbosity,
        "options": VERBOSITY.iter().map(|(value, name)| json!({"value": value, "name": name})).collect::<Vec<_>>(),
    }])
}

/// The legacy `models` member.
pub fn models(current: &str) -> Value {
    json!({
        "currentModelId": current,
        "availableModels": [
            {"modelId": "auto", "name": "Auto"},
            {"modelId": "mock-small", "name": "Mock small"},
            {"modelId": "mock-large", "name": "Mock large"}
        ],
    })
}

/// Checks `session/new` params: `cwd` (string) and `mcpServers` (array) are required.
pub fn check_new_session(ctx: &Ctx) -> Result<(), RpcError> {
    let trigger = ctx.trigger.as_ref();
    if trigger.and_then(|t| t.param_str("cwd")).is_none() {
        return Err(RpcError::invalid_params("missing cwd"));
    }
    if !trigger
        .and_then(|t| t.param("mcpServers"))
        .is_some_and(Value::is_array)
    {
        return Err(RpcError::invalid_params("missing mcpServers"));
    }
    Ok(())
}

/// The `session/new` result for the context's session.
pub fn new_session_result(agent: &Agent, ctx: &Ctx) -> Value {
    let session = ctx.session_id();
    let mut result = json!({
        "sessionId": session,
        "modes": modes("default"),
        "configOptions": config_options("normal"),
    });
    if agent.config.agent.legacy_models {
        result["models"] = models("auto");
    }
    merge(&mut result, agent.config.agent.session_extra.as_ref());
    result
}

fn auth_gate(agent: &Agent, method: &str) -> Result<(), RpcError> {
    if agent.config.agent.auth_required
        && method.starts_with("session/")
        && !agent.state().authenticated
    {
        return Err(RpcError::from_code(ErrorCode::AUTH_REQUIRED));
    }
    Ok(())
}

fn session_param(ctx: &Ctx) -> Option<String> {
    ctx.trigger
        .as_ref()
        .and_then(|t| t.param_str("sessionId"))
        .map(str::to_owned)
}

fn unknown_session(id: &str) -> RpcError {
    RpcError::new(ErrorCode::RESOURCE_NOT_FOUND, "Resource not found")
        .with_data(json!({ "sessionId": id }))
}

/// Replays a session's history as `user_message_chunk` and `agent_message_chunk` updates.
pub async fn replay(agent: &Arc<Agent>, session: &str) {
    let history = agent
        .state()
        .session(session)
        .map(|s| s.history.clone())
        .unwrap_or_default();
    for (role, text) in history {
        let kind = if role == Role::User {
            "user_message_chunk"
        } else {
            "agent_message_chunk"
        };
        agent
            .notify(
                methods::SESSION_UPDATE,
                Some(
                    json!({"sessionId": session, "update": {"sessionUpdate": kind,
                    "content": {"type": "text", "text": text}}}),
                ),
            )
            .await;
    }
}

/// The standard built-in handling.
pub async fn handle(agent: &Arc<Agent>, ctx: &mut Ctx) {
    let Some(trigger) = ctx.trigger.clone() else {
        return;
    };
    let method = trigger.method.as_str();
    if trigger.id.is_some()
        && let Err(error) = auth_gate(agent, method)
    {
        reply(agent, ctx, Err(error)).await;
        return;
    }
    if method != methods::INITIALIZE
        && agent.state().v2
        && super::v2::handle(agent, ctx, method).await
    {
        return;
    }
    match method {
        methods::INITIALIZE => {
            let result = initialize_result(agent, ctx);
            reply(agent, ctx, result).await;
        }
        methods::AUTHENTICATE => {
            agent.state().authenticated = true;
            reply(agent, ctx, Ok(json!({}))).await;
        }
        methods::LOGOUT => {
            agent.state().authenticated = false;
            reply(agent, ctx, Ok(json!({}))).await;
        }
        methods::SESSION_NEW => {
            if trigger.param("mcpServers").is_none()
                && agent.config.kiro.has(Quirk::ExitOnMissingMcpServers)
            {
                super::exit_on_missing_mcp_servers(agent, ctx).await;
            }
            if let Err(error) = check_new_session(ctx) {
                reply(agent, ctx, Err(error)).await;
                return;
            }
            if agent.config.faults.update_before_session_result {
                agent
                    .update(
                        &ctx.session_id(),
                        json!({"sessionUpdate": "agent_message_chunk",
                               "content": {"type": "text", "text": "update before the session/new result"}}),
                    )
                    .await;
            }
            let result = new_session_result(agent, ctx);
            reply(agent, ctx, Ok(result)).await;
        }
        methods::SESSION_LOAD | methods::SESSION_RESUME => {
            let Some(id) = session_param(ctx) else {
                reply(
                    agent,
                    ctx,
                    Err(RpcError::invalid_params("missing sessionId")),
                )
                .await;
                return;
            };
            let found = agent
                .state()
                .session(&id)
                .map(|s| (s.mode.clone(), s.verbosity.clone()));
            let Some((mode, verbosity)) = found else {
                if method == methods::SESSION_LOAD
                    && agent.config.kiro.has(Quirk::ExitOnUnknownLoad)
                {
                    super::exit_on_unknown_load(agent, ctx).await;
                }
                reply(agent, ctx, Err(unknown_session(&id))).await;
                return;
            };
            if method == methods::SESSION_LOAD {
                replay(agent, &id).await;
            }
            agent.state().last_session = Some(id.into());
            reply(
                agent,
                ctx,
                Ok(json!({"modes": modes(&mode), "configOptions": config_options(&verbosity)})),
            )
            .await;
        }
        methods::SESSION_LIST => {
            // One page holds every session, so the mock issues no cursor: any cursor is
            // refused rather than taken for the first page.
            if let Some(cursor) = trigger.param("cursor").filter(|c| !c.is_null()) {
                let error = RpcError::invalid_params(format!(
                    "cursor {cursor} was never issued: this agent lists every session in one page"
                ));
                reply(agent, ctx, Err(error)).await;
                return;
            }
            let cwd = trigger.param_str("cwd").map(str::to_owned);
            let sessions: Vec<Value> = agent
                .state()
                .sessions
                .iter()
                .filter(|s| !s.closed && cwd.as_ref().is_none_or(|c| s.cwd.as_ref() == Some(c)))
                .map(|s| json!({"sessionId": s.id, "cwd": s.cwd}))
                .collect();
            reply(agent, ctx, Ok(json!({ "sessions": sessions }))).await;
        }
        methods::SESSION_CLOSE | methods::SESSION_DELETE => {
            if let Some(id) = session_param(ctx)
                && let Some(session) = agent.state().session(&id)
            {
                session.closed = true;
                session.cancel.send_modify(|generation| *generation += 1);
            }
            reply(agent, ctx, Ok(json!({}))).await;
        }
        methods::SESSION_SET_MODE => {
            let id = session_param(ctx).unwrap_or_default();
            let mode = trigger.param_str("modeId").unwrap_or_default().to_owned();
            if !MODES.iter().any(|(m, _)| *m == mode)
                && agent.config.personality != crate::agent::script::Personality::Kiro
            {
                reply(
                    agent,
                    ctx,
                    Err(RpcError::invalid_params(format!("unknown mode {mode:?}"))),
                )
                .await;
                return;
            }
            let known = match agent.state().session(&id) {
                Some(session) => {
                    session.mode.clone_from(&mode);
                    true
                }
                None => false,
            };
            if !known {
                reply(agent, ctx, Err(unknown_session(&id))).await;
                return;
            }
            reply(agent, ctx, Ok(json!({}))).await;
            agent
                .update(
                    &id,
                    json!({"sessionUpdate": "current_mode_update", "currentModeId": mode}),
                )
                .await;
        }
        methods::SESSION_SET_CONFIG_OPTION => {
            let id = session_param(ctx).unwrap_or_default();
            let config = trigger.param_str("configId").unwrap_or_default();
            let value = match trigger.param("value") {
                Some(Value::String(value)) => value.clone(),
                Some(Value::Object(map)) => map
                    .get("value")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned(),
                _ => String::new(),
            };
            if config != "verbosity" || !VERBOSITY.iter().any(|(v, _)| *v == value) {
                reply(
                    agent,
                    ctx,
                    Err(RpcError::invalid_params(format!(
                        "unknown config option {config:?} or value {value:?}"
                    ))),
                )
                .await;
                return;
            }
            let known = match agent.state().session(&id) {
                Some(session) => {
                    session.verbosity.clone_from(&value);
                    true
                }
                None => false,
            };
            if !known {
                reply(agent, ctx, Err(unknown_session(&id))).await;
                return;
            }
            reply(
                agent,
                ctx,
                Ok(json!({ "configOptions": config_options(&value) })),
            )
            .await;
        }
        methods::SESSION_SET_MODEL if agent.config.agent.legacy_models => {
            let id = session_param(ctx).unwrap_or_default();
            let model = trigger
                .param_str("modelId")
                .or_else(|| trigger.param_str("model"))
                .map(str::to_owned);
            let known = match agent.state().session(&id) {
                Some(session) => {
                    session.model = model;
                    true
                }
                None => false,
            };
            if known {
                reply(agent, ctx, Ok(json!({}))).await;
            } else {
                reply(agent, ctx, Err(unknown_session(&id))).await;
            }
        }
        methods::SESSION_PROMPT => prompt_turn(agent, ctx).await,
        _ => {
            if trigger.id.is_some() {
                reply(agent, ctx, Err(RpcError::method_not_found(method))).await;
            }
        }
    }
}
