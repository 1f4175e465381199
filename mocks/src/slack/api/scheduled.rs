//! Messages that are not plain posts: `chat.scheduleMessage` and its list and deletion,
//! `chat.meMessage`, `chat.unfurl`, and `views.publish` (App Home).

use serde_json::{Value, json};

use super::{Answer, check_content, object};
use crate::slack::params::Params;
use crate::slack::workspace::Workspace;

use super::chat::{channel_id, postable_channel};

/// Slack schedules at most 120 days ahead.
const MAX_AHEAD_SECONDS: u64 = 120 * 24 * 3600;

pub(super) fn schedule(workspace: &mut Workspace, params: &Params) -> Answer {
    check_content(params)?;
    let channel = postable_channel(workspace, params)?;
    let post_at: u64 = params
        .str("post_at")
        .ok_or("invalid_time")?
        .parse()
        .map_err(|_| "invalid_time")?;
    let ts = workspace.next_ts();
    let now = workspace.now_seconds();
    if post_at <= now {
        return Err("time_in_past");
    }
    if post_at > now + MAX_AHEAD_SECONDS {
        return Err("time_too_far");
    }
    let id = workspace.next_id("Q");
    let text = params.str("text").unwrap_or_default();
    workspace.items.scheduled.push(json!({
        "id": id, "channel_id": channel, "post_at": post_at, "date_created": now, "text": text,
    }));
    let message = json!({ "text": text, "type": "delayed_message", "subtype": "bot_message",
        "bot_id": workspace.config.bot.bot_id, "user": workspace.config.bot.user_id, "ts": ts });
    Ok(object(json!({
        "channel": channel, "scheduled_message_id": id, "post_at": post_at, "message": message,
    })))
}

pub(super) fn scheduled_list(workspace: &mut Workspace, params: &Params) -> Answer {
    let channel = match params.str("channel") {
        Some(_) => Some(channel_id(workspace, params, "channel")?),
        None => None,
    };
    let list: Vec<Value> = workspace
        .items
        .scheduled
        .iter()
        .filter(|item| {
            channel
                .as_ref()
                .is_none_or(|id| item["channel_id"] == json!(id))
        })
        .cloned()
        .collect();
    Ok(object(json!({
        "scheduled_messages": list,
        "response_metadata": { "next_cursor": "" },
    })))
}

pub(super) fn delete_scheduled(workspace: &mut Workspace, params: &Params) -> Answer {
    let channel = channel_id(workspace, params, "channel")?;
    let id = params
        .str("scheduled_message_id")
        .ok_or("invalid_scheduled_message_id")?;
    let before = workspace.items.scheduled.len();
    workspace
        .items
        .scheduled
        .retain(|item| !(item["id"] == json!(id) && item["channel_id"] == json!(channel)));
    if workspace.items.scheduled.len() == before {
        return Err("invalid_scheduled_message_id");
    }
    Ok(serde_json::Map::new())
}

pub(super) fn me_message(workspace: &mut Workspace, params: &Params) -> Answer {
    let channel = postable_channel(workspace, params)?;
    let text = params.str("text").ok_or("no_text")?;
    let ts = workspace.next_ts();
    let mut fields = serde_json::Map::new();
    fields.insert("text".into(), json!(text));
    fields.insert("subtype".into(), json!("me_message"));
    let message = workspace.bot_message(&ts, fields);
    workspace.store(&channel, message);
    Ok(object(json!({ "channel": channel, "ts": ts })))
}

pub(super) fn unfurl(workspace: &mut Workspace, params: &Params) -> Answer {
    let channel = channel_id(workspace, params, "channel")?;
    let ts = params.str("ts").ok_or("cannot_find_message")?;
    let unfurls = params
        .get("unfurls")
        .filter(|unfurls| unfurls.is_object())
        .ok_or("invalid_unfurls_format")?
        .clone();
    workspace
        .messages
        .update(&channel, &ts, |message| message["unfurls"] = unfurls)
        .ok_or("cannot_find_message")?;
    Ok(serde_json::Map::new())
}

pub(super) fn publish_home(workspace: &mut Workspace, params: &Params) -> Answer {
    let user = params.str("user_id").ok_or("invalid_arguments")?;
    if workspace.user(&user).is_none() {
        return Err("user_not_found");
    }
    let view = params
        .get("view")
        .and_then(Value::as_object)
        .ok_or("invalid_arguments")?;
    if view.get("type") != Some(&json!("home")) {
        return Err("invalid_arguments");
    }
    let id = workspace
        .items
        .home_views
        .get(&user)
        .and_then(|view| view["id"].as_str().map(str::to_string))
        .unwrap_or_else(|| workspace.next_id("V"));
    let hash = workspace.next_id("h");
    let mut published = view.clone();
    published.insert("id".into(), json!(id));
    published.insert("team_id".into(), json!(workspace.config.team.id));
    published.insert("app_id".into(), json!(workspace.config.bot.app_id));
    published.insert("bot_id".into(), json!(workspace.config.bot.bot_id));
    published.insert("hash".into(), json!(hash));
    published.insert("state".into(), json!({ "values": {} }));
    let published = Value::Object(published);
    workspace.items.home_views.insert(user, published.clone());
    Ok(object(json!({ "view": published })))
}
