//! Running a list of steps: what each action does.

use std::sync::Arc;

use serde_json::{Value, json};
use ski::jsonrpc::{ErrorCode, Message, RequestId, RpcError};

use super::Agent;
pub use super::ctx::{Ctx, TurnGuard};
use crate::agent::commands;
use crate::agent::personality;
use crate::agent::script::step::{Action, RawBytes, Step};

/// Turns a JSON value into a request id, if it is one.
pub fn request_id(value: &Value) -> Option<RequestId> {
    serde_json::from_value(value.clone()).ok()
}

/// Runs steps in order. Returns when the last step is done; `exit` and `hang` never return.
pub async fn run_steps(agent: &Arc<Agent>, steps: &[Step], ctx: &mut Ctx) {
    for step in steps {
        if let Some(delay) = step.delay {
            ctx.park();
            tokio::time::sleep(delay).await;
        }
        if step.fragments.delay.is_some() || step.fragments.gate.is_some() {
            ctx.park();
        }
        for _ in 0..step.repeat {
            run_action(agent, step, ctx).await;
        }
    }
}

async fn run_action(agent: &Arc<Agent>, step: &Step, ctx: &mut Ctx) {
    let plan = Some(&step.fragments);
    match &step.action {
        Action::Respond { result, id } => {
            let result = ctx.vars.expand(result);
            respond(agent, step, ctx, id.as_ref(), Ok(result)).await;
        }
        Action::Error { error, id } => {
            let code = ErrorCode(error.code);
            let message = error.message.as_ref().map_or_else(
                || code.default_message().unwrap_or("Error").to_owned(),
                |m| ctx.vars.expand_str(m),
            );
            let mut rpc = RpcError::new(code, message);
            if let Some(data) = &error.data {
                rpc = rpc.with_data(ctx.vars.expand(data));
            }
            respond(agent, step, ctx, id.as_ref(), Err(rpc)).await;
        }
        Action::Notify { method, params } => {
            let method = ctx.vars.expand_str(method);
            let params = params.as_ref().map(|p| ctx.vars.expand(p));
            let jsonrpc = step
                .jsonrpc
                .unwrap_or_else(|| agent.jsonrpc_for(Some(&method), None));
            agent
                .write_message(&Message::notification(method, params), jsonrpc, plan)
                .await;
        }
        Action::Update { update, session } => {
            let session = session
                .as_ref()
                .map(|s| ctx.vars.expand_str(s))
                .unwrap_or_else(|| ctx.session_id());
            let update = ctx.vars.expand(update);
            let Some(update) = agent.in_protocol(&session, update).await else {
                return;
            };
            agent.record_agent_text(&session, &update);
            let params = json!({"sessionId": session, "update": update});
            let jsonrpc = step
                .jsonrpc
                .unwrap_or_else(|| agent.jsonrpc_for(Some("session/update"), None));
            agent
                .write_message(
                    &Message::notification("session/update", Some(params)),
                    jsonrpc,
                    plan,
                )
                .await;
        }
        Action::Request {
            method,
            params,
            id,
            wait,
            timeout,
            reply_method,
        } => {
            let method = ctx.vars.expand_str(method);
            let params = params.as_ref().map(|p| ctx.vars.expand(p));
            let id = id.as_ref().and_then(|v| request_id(&ctx.vars.expand(v)));
            if *wait {
                ctx.park();
                crate::agent::personality::v2::permission_wait(agent, ctx, &method, true).await;
            }
            let reply = agent
                .request(
                    &method,
                    params,
                    id,
                    reply_method.clone(),
                    wait.then_some(*timeout),
                    plan,
                    step.jsonrpc,
                )
                .await;
            if *wait {
                crate::agent::personality::v2::permission_wait(agent, ctx, &method, false).await;
            }
            ctx.vars.reply = reply.map(|r| r.as_value());
        }
        Action::Send(value) => {
            let value = ctx.vars.expand(value);
            let line = value.to_string();
            agent.write_bytes(line.as_bytes(), true, plan).await;
        }
        Action::Raw { bytes, newline } => {
            let bytes = match bytes {
                RawBytes::Text(text) => ctx.vars.expand_str(text).into_bytes(),
                RawBytes::Bytes(bytes) => bytes.clone(),
            };
            agent.write_bytes(&bytes, *newline, plan).await;
        }
        Action::Oversize(size) => {
            let line = oversize_line(agent, &ctx.session_id(), *size);
            agent.write_bytes(&line, true, plan).await;
        }
        Action::Stderr(text) => {
            let mut text = ctx.vars.expand_str(text);
            text.push('\n');
            agent.write_stderr(text.as_bytes()).await;
        }
        Action::StderrBytes(count) => {
            agent.write_stderr(&stderr_filler(*count)).await;
        }
        Action::Sleep(duration) => {
            ctx.park();
            tokio::time::sleep(*duration).await;
        }
        Action::WaitFor {
            method,
            id,
            timeout,
        } => {
            let id = id.as_ref().and_then(|v| request_id(&ctx.vars.expand(v)));
            ctx.park();
            let mut cursor = ctx.cursor;
            let wait = agent.wait_for(method, id.as_ref(), &mut cursor);
            let seen = match timeout {
                Some(limit) => tokio::time::timeout(*limit, wait).await.ok(),
                None => Some(wait.await),
            };
            match seen {
                Some(seen) => {
                    ctx.cursor = cursor;
                    ctx.vars.reply = seen.params_value().cloned();
                }
                None => {
                    agent
                        .transcript
                        .note(&format!("wait_for {method}: timed out"));
                    ctx.vars.reply = None;
                }
            }
        }
        Action::Gate(name) => {
            ctx.park();
            agent.gates.wait(name).await;
        }
        Action::Exit(code) => {
            agent
                .transcript
                .note(&format!("script: exit with code {code}"));
            agent.request_exit(*code, "script exit");
            ctx.park();
            std::future::pending::<()>().await;
        }
        Action::Hang => {
            agent.transcript.note("script: hang");
            ctx.park();
            std::future::pending::<()>().await;
        }
        Action::CloseStdout => agent.close_stdout().await,
        Action::CloseStdin => agent.request_close_stdin(),
        Action::Default => personality::builtin(agent, ctx).await,
        Action::Scenario(scenario) => commands::run_scenario_turn(agent, ctx, *scenario).await,
        Action::Turn(text) => {
            let text = ctx.vars.expand_str(text).into();
            personality::text_turn(agent, ctx, &text).await;
        }
        Action::HoldToolCall(title) => {
            let title = ctx.vars.expand_str(title);
            personality::v2::hold_tool_call(agent, ctx, &title).await;
        }
        Action::PermittedTurn(text) => {
            let text = ctx.vars.expand_str(text).into();
            personality::v2::permitted_turn(agent, ctx, &text).await;
        }
    }
}

async fn respond(
    agent: &Arc<Agent>,
    step: &Step,
    ctx: &mut Ctx,
    id: Option<&Value>,
    result: Result<Value, RpcError>,
) {
    let plan = Some(&step.fragments);
    let id = match id {
        Some(value) => {
            let value = ctx.vars.expand(value);
            match request_id(&value) {
                Some(id) => Some(id),
                None => {
                    // An id no JSON-RPC message can carry (an object, a boolean): written as
                    // given, which is the point of such a step.
                    let mut message = json!({"id": value});
                    let key = if result.is_ok() { "result" } else { "error" };
                    message[key] = match result {
                        Ok(v) => v,
                        Err(e) => serde_json::to_value(e).unwrap_or(Value::Null),
                    };
                    if step
                        .jsonrpc
                        .unwrap_or_else(|| agent.jsonrpc_for(None, ctx.trigger.as_deref()))
                    {
                        message["jsonrpc"] = json!("2.0");
                    }
                    agent
                        .write_bytes(message.to_string().as_bytes(), true, plan)
                        .await;
                    return;
                }
            }
        }
        None => ctx.trigger.as_ref().and_then(|t| t.id.clone()),
    };
    let Some(id) = id else {
        agent
            .transcript
            .note("respond: the trigger is not a request and no id was given");
        return;
    };
    let jsonrpc = step
        .jsonrpc
        .unwrap_or_else(|| agent.jsonrpc_for(None, ctx.trigger.as_deref()));
    if ctx.trigger.as_ref().and_then(|t| t.id.as_ref()) == Some(&id) {
        if ctx.v2_prompt {
            // An acknowledged v2 prompt: the answer stands for the turn's end.
            personality::v2::end_turn(agent, ctx, &personality::v2::stop_reason_of(&result)).await;
            return;
        }
        // Answering the trigger ends its turn before the client can see the answer.
        ctx.turn.take();
    }
    let message = Message::Response(ski::jsonrpc::Response { id, result });
    agent.write_message(&message, jsonrpc, plan).await;
    ctx.answered = true;
}

/// A line of exactly `size` bytes (newline excluded): a valid notification whose text is padded
/// with `x`, or only `x` when `size` is too small for one.
pub fn oversize_line(agent: &Agent, session: &str, size: u64) -> Vec<u8> {
    let size = usize::try_from(size).unwrap_or(usize::MAX);
    let template = if agent.config.personality == crate::agent::script::Personality::Intercom {
        json!({"method": "status/update", "params": {"message": ""}}).to_string()
    } else {
        json!({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": session,
            "update": {"sessionUpdate": "agent_message_chunk",
                       "content": {"type": "text", "text": ""}}}})
        .to_string()
    };
    if size < template.len() {
        return vec![b'x'; size];
    }
    let padding = "x".repeat(size - template.len());
    // The empty string is the only `""` in the template.
    template
        .replacen("\"\"", &format!("\"{padding}\""), 1)
        .into_bytes()
}

/// `count` bytes of stderr: lines of 79 `x` and a newline; the last line may be shorter and
/// ends with a newline when there is room.
pub fn stderr_filler(count: u64) -> Vec<u8> {
    let count = usize::try_from(count).unwrap_or(usize::MAX);
    let mut bytes = Vec::with_capacity(count);
    while bytes.len() < count {
        let remaining = count - bytes.len();
        if remaining <= 80 {
            bytes.extend(std::iter::repeat_n(b'x', remaining.saturating_sub(1)));
            bytes.push(b'\n');
        } else {
            bytes.extend(std::iter::repeat_n(b'x', 79));
            bytes.push(b'\n');
        }
    }
    bytes
}
