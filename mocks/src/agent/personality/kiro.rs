//! The kiro-cli stand-in: `_kiro.dev/*` notifications before the `session/new` result, a
//! `_kiro.dev/metadata` notification per turn, turn start and end as `session_info_update` with
//! `_meta.kiro`, legacy `models` and `session/set_model`, `_session/terminate`, UUID ids on its
//! own requests, and kiro's quirks behind flags.

use std::sync::Arc;

use serde_json::{Value, json};
use ski::jsonrpc::{ErrorCode, RpcError};

use super::{kiro_sessions, reply, standard};
use crate::agent::runtime::Agent;
use crate::agent::runtime::ctx::Ctx;
use crate::agent::runtime::state::{Role, Session};
use crate::agent::script::Quirk;

/// `_kiro.dev/commands/available`.
pub const COMMANDS_AVAILABLE: &str = "_kiro.dev/commands/available";
/// `_kiro.dev/mcp/server_initialized`.
pub const MCP_SERVER_INITIALIZED: &str = "_kiro.dev/mcp/server_initialized";
/// `_kiro.dev/metadata`.
pub const METADATA: &str = "_kiro.dev/metadata";
/// `_session/terminate`.
pub const SESSION_TERMINATE: &str = "_session/terminate";

fn commands(session: &str) -> Value {
    json!({
        "sessionId": session,
        "commands": [
            {"name": "/model", "description": "Select a model",
             "meta": {"inputType": "selection", "optionsMethod": "_kiro.dev/commands/options"}},
            {"name": "/agent", "description": "Select an agent", "meta": {"inputType": "selection"}},
            {"name": "/clear", "description": "Clear the conversation", "meta": {"inputType": "panel"}}
        ]
    })
}

fn modes(agent: &Agent, current: &str) -> Value {
    let name = &agent.config.kiro.agent;
    let mut available = vec![json!({"id": name, "name": name})];
    if name != "kiro_default" {
        available.push(json!({"id": "kiro_default", "name": "kiro_default"}));
    }
    json!({"currentModeId": current, "availableModes": available})
}

/// The kiro built-in handling; what kiro does not change is handled as standard.
pub async fn handle(agent: &Arc<Agent>, ctx: &mut Ctx) {
    let Some(trigger) = ctx.trigger.clone() else {
        return;
    };
    match trigger.method.as_str() {
        "session/new" => new_session(agent, ctx).await,
        "session/load" => load_session(agent, ctx).await,
        "authenticate" => reply(agent, ctx, Err(RpcError::method_not_found("authenticate"))).await,
        "_kiro.dev/commands/execute" => reply(agent, ctx, Ok(json!({}))).await,
        SESSION_TERMINATE => {
            if let Some(id) = trigger.param_str("sessionId") {
                let mut state = agent.state();
                if let Some(session) = state.session(id) {
                    session.terminated = true;
                }
            }
            agent
                .transcript
                .note(&format!("{SESSION_TERMINATE} received"));
        }
        _ => standard::handle(agent, ctx).await,
    }
}

async fn new_session(agent: &Arc<Agent>, ctx: &mut Ctx) {
    let trigger = ctx.trigger.clone();
    let mcp_servers = trigger
        .as_ref()
        .and_then(|t| t.param("mcpServers"))
        .cloned();
    if mcp_servers.is_none() && agent.config.kiro.has(Quirk::ExitOnMissingMcpServers) {
        super::exit_on_missing_mcp_servers(agent, ctx).await;
    }
    if let Err(error) = standard::check_new_session(ctx) {
        reply(agent, ctx, Err(error)).await;
        return;
    }
    let session = ctx.session_id();
    if agent.config.kiro.sessions_on_disk {
        let cwd = trigger.as_ref().and_then(|t| t.param_str("cwd"));
        if let Err(error) = kiro_sessions::create(&session, cwd, &agent.config.kiro.agent) {
            agent
                .log(&format!(
                    "cannot write the session files of {session}: {error}"
                ))
                .await;
        }
    }
    for server in mcp_servers
        .as_ref()
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let name = server
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or("server");
        agent
            .notify(
                MCP_SERVER_INITIALIZED,
                Some(json!({"sessionId": session, "serverName": name})),
            )
            .await;
    }
    agent
        .notify(COMMANDS_AVAILABLE, Some(commands(&session)))
        .await;
    if agent.config.faults.update_before_session_result {
        agent
            .update(
                &session,
                json!({"sessionUpdate": "agent_message_chunk",
                       "content": {"type": "text", "text": "update before the session/new result"}}),
            )
            .await;
    }
    if agent.config.kiro.metadata {
        agent
            .notify(
                METADATA,
                Some(json!({"sessionId": session, "contextUsagePercentage": 0.0})),
            )
            .await;
    }
    let current = agent.config.kiro.agent.clone();
    let mut result = json!({
        "sessionId": session,
        "modes": modes(agent, &current),
    });
    if agent.config.agent.legacy_models {
        result["models"] = standard::models(&agent.config.kiro.model);
    }
    standard::merge(&mut result, agent.config.agent.session_extra.as_ref());
    reply(agent, ctx, Ok(result)).await;
}

async fn load_session(agent: &Arc<Agent>, ctx: &mut Ctx) {
    let Some(trigger) = ctx.trigger.clone() else {
        return;
    };
    let malformed = trigger.param_str("cwd").is_none()
        || !trigger.param("mcpServers").is_some_and(Value::is_array)
        || trigger.param_str("sessionId").is_none();
    if malformed && agent.config.kiro.has(Quirk::SilentMalformedLoad) {
        agent
            .log("failed to parse session/load params: missing field (no response will be sent)")
            .await;
        agent
            .transcript
            .note("quirk: no response to a malformed session/load");
        return;
    }
    let id = trigger
        .param_str("sessionId")
        .unwrap_or_default()
        .to_owned();
    let mut known = agent.state().session(&id).is_some();
    if !known && !malformed && agent.config.kiro.sessions_on_disk {
        match from_disk(agent, &id) {
            Ok(found) => known = found,
            Err(pid) => {
                let data = kiro_sessions::active_elsewhere(pid);
                agent.log(&data).await;
                let error = RpcError::new(ErrorCode::INTERNAL_ERROR, "Internal error")
                    .with_data(json!(data));
                reply(agent, ctx, Err(error)).await;
                return;
            }
        }
    }
    if !known && agent.config.kiro.has(Quirk::ExitOnUnknownLoad) {
        super::exit_on_unknown_load(agent, ctx).await;
    }
    if malformed {
        reply(
            agent,
            ctx,
            Err(RpcError::invalid_params("missing cwd or mcpServers")),
        )
        .await;
        return;
    }
    if !known {
        standard::handle(agent, ctx).await;
        return;
    }
    if !agent.config.kiro.replay_after_result {
        standard::replay(agent, &id).await;
    }
    let mode = agent
        .state()
        .session(&id)
        .map(|s| s.mode.clone())
        .unwrap_or_default();
    let mut result = json!({ "modes": modes(agent, &mode) });
    if agent.config.agent.legacy_models {
        result["models"] = standard::models(&agent.config.kiro.model);
    }
    agent.state().last_session = Some(id.as_str().into());
    reply(agent, ctx, Ok(result)).await;
    if agent.config.kiro.replay_after_result {
        standard::replay(agent, &id).await;
    }
}

/// Brings a session another process created into memory, taking its lock: `Ok(false)` when
/// there is no such session on disk, `Err(pid)` when a live process holds it.
fn from_disk(agent: &Arc<Agent>, id: &str) -> Result<bool, u32> {
    let Some(stored) = kiro_sessions::read(id) else {
        return Ok(false);
    };
    match kiro_sessions::lock(id) {
        kiro_sessions::Lock::Held(pid) => return Err(pid),
        kiro_sessions::Lock::Stale(pid) => agent
            .transcript
            .note(&format!("stale lock of {id} (PID {pid}) taken over")),
        kiro_sessions::Lock::Free => {}
    }
    if kiro_sessions::take_lock(id).is_err() {
        agent
            .transcript
            .note(&format!("cannot write the lock of {id}"));
    }
    let mut session = Session::new(id.to_owned(), stored.cwd, &agent.config.kiro.agent);
    session.history = stored
        .history
        .into_iter()
        .map(|(role, text)| (Role::from_name(&role), text.into()))
        .collect();
    agent.state().sessions.push(session);
    Ok(true)
}

/// Looks `--agent NAME` up as kiro-cli does: `.kiro/agents/NAME.json` in the working directory
/// wins over `$HOME/.kiro/agents/NAME.json` (with a warning when both exist); the built-in
/// `kiro_default` needs no file. `Ok(Some(warning))` when found with a warning, `Err(message)`
/// when missing.
pub fn find_agent(name: &str) -> Result<Option<String>, String> {
    if name == "kiro_default" {
        return Ok(None);
    }
    let usable = !name.is_empty() && !name.starts_with('.') && !name.contains(['/', '\\']);
    let file = format!("{name}.json");
    let workspace = std::path::Path::new(".kiro/agents").join(&file);
    let global = std::env::var_os("HOME").map(|home| {
        std::path::PathBuf::from(home)
            .join(".kiro/agents")
            .join(&file)
    });
    let in_workspace = usable && workspace.is_file();
    let in_home = usable && global.as_ref().is_some_and(|p| p.is_file());
    match (in_workspace, in_home) {
        (true, true) => Ok(Some("Agent conflict. Using workspace version.".to_owned())),
        (true, false) | (false, true) => Ok(None),
        (false, false) => Err(format!(
            "error: agent '{name}' not found (looked for .kiro/agents/{file} and ~/.kiro/agents/{file})"
        )),
    }
}

fn marker(kind: &str, extra: Value) -> Value {
    let mut kiro = json!({ "kind": kind });
    standard::merge(&mut kiro, Some(&extra));
    json!({"sessionUpdate": "session_info_update", "_meta": {"kiro": kiro}})
}

/// The `turn_start` marker.
pub async fn turn_start(agent: &Arc<Agent>, ctx: &Ctx) {
    if agent.config.kiro.turn_markers {
        agent
            .update(&ctx.session_id(), marker("turn_start", json!({})))
            .await;
    }
}

/// `_kiro.dev/metadata` and the `turn_end` marker, before the prompt result.
pub async fn turn_end(agent: &Arc<Agent>, ctx: &Ctx, stop_reason: &str) {
    let session = ctx.session_id();
    if agent.config.kiro.turn_markers {
        agent
            .update(
                &session,
                marker(
                    "turn_end",
                    json!({"stopReason": stop_reason, "turnEnd": {"stopReason": stop_reason}}),
                ),
            )
            .await;
    }
    if agent.config.kiro.metadata {
        // Fixed values keep the output deterministic.
        agent
            .notify(
                METADATA,
                Some(json!({
                    "sessionId": session,
                    "contextUsagePercentage": 1.5,
                    "meteringUsage": [{"value": 0.01, "unit": "credit", "unitPlural": "credits"}],
                    "turnDurationMs": 0,
                })),
            )
            .await;
    }
}

/// What kiro sends after the prompt result (the `context_usage` quirk).
pub async fn after_turn(agent: &Arc<Agent>, ctx: &Ctx) {
    if agent.config.kiro.has(Quirk::ContextUsageAfterResult) {
        // Boxed: every turn's future holds this one's, which runs only under the quirk.
        Box::pin(agent.update(
            &ctx.session_id(),
            marker(
                "context_usage",
                json!({"usagePercentage": 1.5, "breakdown": {}}),
            ),
        ))
        .await;
    }
}
