//! Socket Mode envelopes: the frames the fake sends for slash commands, button clicks, modal
//! submissions and closes, and Events API events, with the field sets every client accepts.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::workspace::Workspace;

/// The envelope kinds Slack sends over Socket Mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EnvelopeKind {
    SlashCommands,
    Interactive,
    EventsApi,
}

impl EnvelopeKind {
    pub fn as_str(self) -> &'static str {
        match self {
            EnvelopeKind::SlashCommands => "slash_commands",
            EnvelopeKind::Interactive => "interactive",
            EnvelopeKind::EventsApi => "events_api",
        }
    }
}

/// Wraps a payload: `envelope_id`, `type`, `payload`, `accepts_response_payload`, and for
/// `events_api` the retry fields.
pub fn wrap(
    envelope_id: &str,
    kind: EnvelopeKind,
    payload: Value,
    accepts: bool,
    attempt: u32,
) -> Value {
    let mut envelope = json!({
        "envelope_id": envelope_id,
        "type": kind.as_str(),
        "payload": payload,
        "accepts_response_payload": accepts,
    });
    if kind == EnvelopeKind::EventsApi {
        envelope["retry_attempt"] = json!(attempt);
        envelope["retry_reason"] = json!(if attempt == 0 { "" } else { "timeout" });
    }
    envelope
}

fn user_name(workspace: &Workspace, user: &str) -> String {
    workspace
        .user(user)
        .and_then(|user| user["name"].as_str().map(str::to_string))
        .unwrap_or_else(|| user.to_string())
}

fn channel_name(workspace: &Workspace, channel: &str) -> String {
    workspace
        .channel(channel)
        .map(|channel| channel.name.clone())
        .unwrap_or_else(|| channel.to_string())
}

/// A `slash_commands` payload: every field a string, as Slack form-decodes them.
pub fn slash_command(
    workspace: &Workspace,
    command: &str,
    text: &str,
    channel: &str,
    user: &str,
    response_url: &str,
    trigger: &str,
) -> Value {
    let config = &workspace.config;
    json!({
        "token": "fake-verification-token",
        "team_id": config.team.id,
        "team_domain": config.team.domain,
        "channel_id": channel,
        "channel_name": channel_name(workspace, channel),
        "user_id": user,
        "user_name": user_name(workspace, user),
        "command": command,
        "text": text,
        "api_app_id": config.bot.app_id,
        "is_enterprise_install": "false",
        "response_url": response_url,
        "trigger_id": trigger,
    })
}

fn team(workspace: &Workspace) -> Value {
    json!({ "id": workspace.config.team.id, "domain": workspace.config.team.domain })
}

fn user(workspace: &Workspace, user: &str) -> Value {
    let name = user_name(workspace, user);
    json!({ "id": user, "username": name, "name": name, "team_id": workspace.config.team.id })
}

/// A `block_actions` payload for a click on `action` (an element of the stored `message`).
#[allow(clippy::too_many_arguments)]
pub fn block_actions(
    workspace: &Workspace,
    channel: &str,
    message: &Value,
    block_id: &str,
    element: &Value,
    clicker: &str,
    response_url: &str,
    trigger: &str,
    action_ts: &str,
) -> Value {
    let mut action = json!({
        "type": element["type"].as_str().unwrap_or("button"),
        "action_id": element["action_id"],
        "block_id": block_id,
        "text": element.get("text").cloned().unwrap_or_else(|| json!({"type": "plain_text", "text": "", "emoji": true})),
        "value": element.get("value").cloned().unwrap_or(json!("")),
        "action_ts": action_ts,
    });
    if let Some(style) = element.get("style") {
        action["style"] = style.clone();
    }
    json!({
        "type": "block_actions",
        "user": user(workspace, clicker),
        "api_app_id": workspace.config.bot.app_id,
        "token": "fake-verification-token",
        "container": {
            "type": "message",
            "message_ts": message["ts"],
            "channel_id": channel,
            "is_ephemeral": false,
        },
        "trigger_id": trigger,
        "team": team(workspace),
        "enterprise": null,
        "is_enterprise_install": false,
        "channel": { "id": channel, "name": channel_name(workspace, channel) },
        "message": message,
        "state": { "values": {} },
        "response_url": response_url,
        "actions": [action],
    })
}

/// A `view_submission` (or, with `closed`, `view_closed`) payload for a stored view, with the
/// given input values (`{block_id: {action_id: value}}`, strings become `plain_text_input`).
pub fn view_payload(
    workspace: &Workspace,
    view: &Value,
    values: &Value,
    submitter: &str,
    trigger: &str,
    closed: bool,
) -> Value {
    let mut state = serde_json::Map::new();
    if let Some(blocks) = values.as_object() {
        for (block_id, actions) in blocks {
            let mut inner = serde_json::Map::new();
            if let Some(actions) = actions.as_object() {
                for (action_id, value) in actions {
                    let entry = if value.is_object() {
                        value.clone()
                    } else {
                        json!({ "type": "plain_text_input", "value": value })
                    };
                    inner.insert(action_id.clone(), entry);
                }
            }
            state.insert(block_id.clone(), serde_json::Value::Object(inner));
        }
    }
    let mut view = view.clone();
    view["state"] = json!({ "values": state });
    let mut payload = json!({
        "type": if closed { "view_closed" } else { "view_submission" },
        "team": team(workspace),
        "user": user(workspace, submitter),
        "api_app_id": workspace.config.bot.app_id,
        "token": "fake-verification-token",
        "trigger_id": trigger,
        "view": view,
        "is_enterprise_install": false,
        "enterprise": null,
    });
    if closed {
        payload["is_cleared"] = json!(false);
    } else {
        payload["response_urls"] = json!([]);
    }
    payload
}

/// An `event_callback` payload around `event`.
pub fn event_callback(
    workspace: &Workspace,
    event: Value,
    event_id: &str,
    event_time: u64,
) -> Value {
    let config = &workspace.config;
    json!({
        "token": "fake-verification-token",
        "team_id": config.team.id,
        "api_app_id": config.bot.app_id,
        "event": event,
        "type": "event_callback",
        "event_id": event_id,
        "event_time": event_time,
        "authorizations": [{
            "enterprise_id": null,
            "team_id": config.team.id,
            "user_id": config.bot.user_id,
            "is_bot": true,
            "is_enterprise_install": false,
        }],
        "is_ext_shared_channel": false,
        "event_context": format!("4-fake-{event_id}"),
    })
}
