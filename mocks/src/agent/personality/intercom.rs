//! The intercom stream dialect: NDJSON `{method, id?, params}` without `"jsonrpc"`. The agent
//! sends `status/update`, `heartbeat`, `clearance/request` and `prompt/forward`, and receives
//! `prompt/send`, `clearance/response`, `prompt/response`, `session/interrupt` and `nudge`. With
//! the JSON-RPC handshake of later intercom builds it also answers `initialize`, `session/new`
//! and `session/prompt` as JSON-RPC.

use std::sync::Arc;

use serde_json::json;
use ski::jsonrpc::RpcError;

use super::{reply, standard};
use crate::agent::runtime::Agent;
use crate::agent::runtime::ctx::Ctx;
use crate::agent::script::InterruptAction;

/// What the agent sends once it started (the greeting) and then periodically (heartbeats).
pub fn start(agent: &Arc<Agent>) {
    if let Some(greeting) = agent.config.intercom.greeting.clone() {
        let clone = Arc::clone(agent);
        agent.spawn(async move {
            clone
                .notify("status/update", Some(json!({ "message": greeting })))
                .await;
        });
    }
    if let Some(period) = agent.config.intercom.heartbeat {
        let clone = Arc::clone(agent);
        agent.spawn(async move {
            loop {
                tokio::time::sleep(period).await;
                clone
                    .notify("heartbeat", Some(heartbeat_params(&clone)))
                    .await;
            }
        });
    }
}

fn heartbeat_params(agent: &Agent) -> serde_json::Value {
    let prompts = agent.state().prompts;
    json!({"progress": [
        {"label": "receive prompt", "status": if prompts > 0 { "done" } else { "pending" }},
        {"label": "mock work", "status": "in_progress"}
    ]})
}

/// A prompt turn answering with `text`: a `status/update`, and for a JSON-RPC `session/prompt`
/// also an `agent_message_chunk` and the result.
pub async fn text_turn(agent: &Arc<Agent>, ctx: &mut Ctx, text: &str) {
    let jsonrpc_prompt = ctx
        .trigger
        .as_ref()
        .is_some_and(|t| t.method == "session/prompt");
    if jsonrpc_prompt {
        agent
            .update(
                &ctx.session_id(),
                json!({"sessionUpdate": "agent_message_chunk",
                       "content": {"type": "text", "text": text}}),
            )
            .await;
    }
    agent
        .notify("status/update", Some(json!({ "message": text })))
        .await;
    if jsonrpc_prompt {
        let reason = super::stop_reason(agent, ctx);
        reply(agent, ctx, Ok(json!({ "stopReason": reason }))).await;
    }
}

/// The intercom built-in handling.
pub async fn handle(agent: &Arc<Agent>, ctx: &mut Ctx) {
    let Some(trigger) = ctx.trigger.clone() else {
        return;
    };
    match trigger.method.as_str() {
        "initialize" => {
            agent.state().initialized = true;
            reply(
                agent,
                ctx,
                Ok(json!({
                    "protocolVersion": 1,
                    "agentCapabilities": agent.config.agent.capabilities,
                    "authMethods": agent.config.agent.auth_methods,
                    "agentInfo": agent.config.agent.info,
                })),
            )
            .await;
        }
        "initialized" => {}
        "session/new" => {
            let mut result = json!({ "sessionId": ctx.session_id() });
            standard::merge(&mut result, agent.config.agent.session_extra.as_ref());
            reply(agent, ctx, Ok(result)).await;
        }
        "session/prompt" | "prompt/send" => {
            let text = format!("received: {}", ctx.vars.prompt.clone().unwrap_or_default());
            text_turn(agent, ctx, &text).await;
        }
        "session/interrupt" => {
            let reason = trigger.param_str("reason").unwrap_or("").to_owned();
            match agent.config.intercom.on_interrupt {
                InterruptAction::Exit => {
                    agent
                        .notify(
                            "status/update",
                            Some(json!({ "message": format!("interrupted: {reason}") })),
                        )
                        .await;
                    agent.request_exit(0, "session/interrupt");
                }
                InterruptAction::Ignore => {
                    agent.transcript.note("session/interrupt ignored");
                }
            }
        }
        "nudge" => {
            agent
                .notify(
                    "status/update",
                    Some(json!({ "message": "resuming after nudge" })),
                )
                .await;
            agent
                .notify("heartbeat", Some(heartbeat_params(agent)))
                .await;
        }
        "clearance/response" | "prompt/response" => {
            agent
                .log(&format!(
                    "{} for unknown request id {}",
                    trigger.method,
                    trigger
                        .id
                        .as_ref()
                        .map_or("none".to_owned(), ToString::to_string)
                ))
                .await;
        }
        method => {
            // Unknown bespoke methods are skipped, as the intercom reader does; unknown
            // JSON-RPC requests get -32601.
            if trigger.jsonrpc && trigger.id.is_some() {
                reply(agent, ctx, Err(RpcError::method_not_found(method))).await;
            } else {
                agent
                    .transcript
                    .note(&format!("skipping unknown method {method}"));
            }
        }
    }
}
