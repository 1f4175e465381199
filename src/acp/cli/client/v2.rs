//! `ski acp client connect --protocol 2`: the conversation in ACP v2 (draft). The session is set
//! up with v2's `session/new` (and `--config` set through v2's `session/set_config_option`);
//! each prompt is acknowledged with its `messageId`, and its turn is followed on the session's
//! updates to the idle `state_update`, whose `stopReason` ends it. With `--cancel-tool-calls`
//! every tool call that advertises `capabilities.cancel` is cancelled with `tool_call/cancel`.
//! Every v2 update is printed with `--json` (`config_option_update` and `state_update`
//! `requires_action` included); the human form prints the reply's text and says on stderr when
//! the session waits for the user (`requires_action`).

use std::path::Path;

use anyhow::anyhow;
use serde_json::{Value, json};

use super::{ConnectArgs, call_failure, sorted_line};
use crate::acp::client::Client;
use crate::acp::client::v2::as_v2;
use crate::acp::v2::{
    self, NewSessionRequest, SessionState, SessionUpdate, SetSessionConfigOptionRequest,
};
use crate::acp::{Extra, PromptRequest};
use crate::cli::output;
use crate::exit::{CommandError, CommandResult};

fn write(text: &str) {
    output::blocking_write(|| output::text(text));
}

fn line(value: &Value) {
    write(&format!("{}\n", sorted_line(value)));
}

/// Prints one v2 update: a JSON line, or the reply's text.
fn print_update(json: bool, session_id: &str, update: &SessionUpdate) {
    let text = match update {
        SessionUpdate::AgentMessageChunk(chunk) => chunk.content.as_text(),
        _ => None,
    };
    if json {
        let payload = serde_json::to_value(update).unwrap_or(Value::Null);
        let mut out = json!({
            "type": "session_update",
            "sessionId": session_id,
            "update": update.kind(),
            "payload": payload,
        });
        if let Some(text) = text {
            out["text"] = json!(text);
        }
        line(&out);
    } else if let Some(text) = text {
        write(text);
    } else if let SessionUpdate::StateUpdate(state) = update
        && state.state == SessionState::RequiresAction
    {
        eprintln!("session {session_id} waits for the user (requires_action)");
    }
}

/// The turns of `args` on a connection `initialize` settled at 2.
pub(super) async fn turns(client: &Client, args: &ConnectArgs, cwd: &Path) -> CommandResult {
    let json = args.json;
    let session_id = match &args.session_id {
        Some(id) => id.clone(),
        None => {
            // Non-empty only for an agent that advertised them (checked by the caller).
            let request = NewSessionRequest {
                cwd: cwd.to_string_lossy().into_owned(),
                additional_directories: super::additional_directories(&args.offer, cwd)?
                    .iter()
                    .map(|dir| dir.to_string_lossy().into_owned())
                    .collect(),
                mcp_servers: Vec::new(),
                extra: Extra::new(),
            };
            client
                .new_session_v2(&request)
                .await
                .map_err(call_failure)?
                .session_id
        }
    };
    for setting in &args.config {
        let Some((config_id, value)) = setting.split_once('=') else {
            return Err(CommandError::invalid_input(anyhow!(
                "--config {setting:?} is not ID=VALUE"
            )));
        };
        let request = SetSessionConfigOptionRequest::id(&session_id, config_id, value);
        let response = client
            .set_config_option_v2(&request)
            .await
            .map_err(call_failure)?;
        if json {
            line(&json!({
                "type": "config_options",
                "sessionId": session_id,
                "configOptions": response.config_options,
            }));
        }
    }
    let mut updates = client.follow(&session_id);
    for text in &args.prompt {
        let ack = client
            .prompt_v2(&PromptRequest::text(&session_id, text))
            .await
            .map_err(call_failure)?;
        if json {
            line(&json!({
                "type": "prompt_ack",
                "sessionId": session_id,
                "messageId": ack.message_id,
            }));
        }
        let stop_reason = loop {
            let Some(notification) = updates.next().await else {
                return Err(CommandError::upstream(anyhow!(
                    "the agent closed the connection before the turn's idle state_update"
                )));
            };
            let Some(update) = as_v2(&notification) else {
                tracing::debug!(
                    kind = notification.update.kind(),
                    "skipped an update that is no v2 update"
                );
                continue;
            };
            print_update(json, &session_id, &update);
            match &update {
                SessionUpdate::ToolCallUpdate(call)
                    if args.cancel_tool_calls
                        && call
                            .capabilities
                            .as_ref()
                            .is_some_and(|c| c.cancel.is_some())
                        && !call
                            .status
                            .as_ref()
                            .is_some_and(v2::ToolCallStatus::is_final) =>
                {
                    client
                        .cancel_tool_call(&session_id, &call.tool_call_id)
                        .await
                        .map_err(call_failure)?;
                    if json {
                        line(&json!({
                            "type": "tool_call_cancel",
                            "sessionId": session_id,
                            "toolCallId": call.tool_call_id,
                        }));
                    }
                }
                SessionUpdate::StateUpdate(state) if state.state == SessionState::Idle => {
                    break state.stop_reason.clone();
                }
                _ => {}
            }
        };
        let stop_reason = stop_reason.map_or_else(|| "none".to_owned(), |r| r.as_str().to_owned());
        if json {
            line(&json!({
                "type": "prompt_result",
                "sessionId": session_id,
                "stopReason": stop_reason,
            }));
        } else {
            write(&format!("\nstopReason: {stop_reason}\n"));
        }
    }
    Ok(())
}
