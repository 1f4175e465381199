//! `chat.*` and `reactions.*`: posting, threading, editing, deleting and reacting to messages.

use serde_json::{Map, Value, json};

use super::{Answer, check_content, object};
use crate::slack::params::{Params, TokenKind};
use crate::slack::workspace::{Stored, Workspace};

/// Resolves the `channel` parameter to a channel id.
pub(super) fn channel_id(
    workspace: &Workspace,
    params: &Params,
    key: &str,
) -> Result<String, &'static str> {
    let key = params.str(key).ok_or("channel_not_found")?;
    workspace
        .channel(&key)
        .map(|channel| channel.id.clone())
        .ok_or("channel_not_found")
}

/// The channel a post goes to: a channel by id or name, or a user id (the DM with that user,
/// opened now if need be). `Err` when the bot may not post there (`not_in_channel`,
/// `is_archived`).
pub(super) fn postable_channel(
    workspace: &mut Workspace,
    params: &Params,
) -> Result<String, &'static str> {
    let key = params.str("channel").ok_or("channel_not_found")?;
    if workspace.channel(&key).is_none() && workspace.user(&key).is_some() {
        return Ok(workspace.open_dm(&[key])?.0);
    }
    let channel = workspace.channel(&key).ok_or("channel_not_found")?;
    if channel.archived {
        return Err("is_archived");
    }
    if !channel.is_member(&workspace.config.bot.user_id) {
        return Err("not_in_channel");
    }
    Ok(channel.id.clone())
}

/// The content fields a post or an update carries, as given.
fn content(params: &Params) -> Map<String, Value> {
    let mut fields = Map::new();
    fields.insert("text".into(), json!(params.str("text").unwrap_or_default()));
    for key in ["blocks", "attachments", "metadata"] {
        if let Some(value) = params.get(key) {
            fields.insert(key.into(), value.clone());
        }
    }
    fields
}

fn has_content(params: &Params) -> bool {
    params.str("text").is_some()
        || params
            .get("blocks")
            .is_some_and(|b| b.as_array().is_some_and(|b| !b.is_empty()))
        || params.get("attachments").is_some()
}

pub(super) fn post_message(workspace: &mut Workspace, params: &Params) -> Answer {
    check_content(params)?;
    let channel = postable_channel(workspace, params)?;
    if !has_content(params) {
        return Err("no_text");
    }
    let mut fields = content(params);
    if let Some(thread) = params.str("thread_ts") {
        // A reply to a reply joins the parent's thread; a `thread_ts` naming no message is
        // accepted as it is, as Slack does.
        let root = workspace
            .find(&channel, &thread)
            .and_then(|parent| parent.thread_ts().map(str::to_string))
            .unwrap_or(thread);
        fields.insert("thread_ts".into(), json!(root));
        if params.flag("reply_broadcast") {
            fields.insert("subtype".into(), json!("thread_broadcast"));
        }
    }
    let ts = workspace.next_ts();
    let message = workspace.bot_message(&ts, fields);
    workspace.store(&channel, message.clone());
    Ok(object(
        json!({ "channel": channel, "ts": ts, "message": message }),
    ))
}

pub(super) fn update(workspace: &mut Workspace, params: &Params) -> Answer {
    let channel = channel_id(workspace, params, "channel")?;
    let ts = params.str("ts").ok_or("message_not_found")?;
    check_content(params)?;
    let bot = workspace.config.bot.user_id.clone();
    let edited_ts = workspace.next_ts();
    let stored = workspace.find(&channel, &ts).ok_or("message_not_found")?;
    if stored.message["user"] != json!(bot) {
        return Err("cant_update_message");
    }
    let message = workspace
        .messages
        .update(&channel, &ts, |message| {
            if let Some(text) = params.str("text") {
                message["text"] = json!(text);
            }
            for key in ["blocks", "attachments", "metadata"] {
                if let Some(value) = params.get(key) {
                    message[key] = value.clone();
                }
            }
            message["edited"] = json!({ "user": bot, "ts": edited_ts });
            message.clone()
        })
        .ok_or("message_not_found")?;
    Ok(object(json!({
        "channel": channel,
        "ts": ts,
        "text": message["text"],
        "message": message,
    })))
}

/// Deletes a message: a bot token only the bot's own, as Slack enforces (`cant_delete_message`);
/// a user token any (the fake's user tokens act as a workspace admin).
pub(super) fn delete(workspace: &mut Workspace, params: &Params) -> Answer {
    let channel = channel_id(workspace, params, "channel")?;
    let ts = params.str("ts").ok_or("message_not_found")?;
    let stored = workspace.find(&channel, &ts).ok_or("message_not_found")?;
    if params.token_kind() == TokenKind::Bot
        && stored.message["user"] != json!(workspace.config.bot.user_id)
    {
        return Err("cant_delete_message");
    }
    workspace
        .messages
        .remove(&channel, &ts)
        .ok_or("message_not_found")?;
    Ok(object(json!({ "channel": channel, "ts": ts })))
}

pub(super) fn post_ephemeral(workspace: &mut Workspace, params: &Params) -> Answer {
    let channel_key = params.str("channel").ok_or("channel_not_found")?;
    let channel = workspace
        .channel(&channel_key)
        .ok_or("channel_not_found")?
        .clone();
    let user = params.str("user").ok_or("user_not_found")?;
    // Slack answers an id it does not know as it answers a stranger to the channel.
    if workspace.user(&user).is_none() || !channel.is_member(&user) {
        return Err("user_not_in_channel");
    }
    check_content(params)?;
    if !has_content(params) {
        return Err("no_text");
    }
    let mut fields = content(params);
    fields.insert("ephemeral_to".into(), json!(user));
    if let Some(thread) = params.str("thread_ts") {
        fields.insert("thread_ts".into(), json!(thread));
    }
    let ts = workspace.next_ts();
    let message = workspace.bot_message(&ts, fields);
    workspace.store_ephemeral(Stored {
        channel: channel.id,
        message,
    });
    Ok(object(json!({ "message_ts": ts })))
}

pub(super) fn permalink(workspace: &mut Workspace, params: &Params) -> Answer {
    let channel = channel_id(workspace, params, "channel")?;
    let ts = params.str("message_ts").ok_or("message_not_found")?;
    let stored = workspace.find(&channel, &ts).ok_or("message_not_found")?;
    let mut permalink = format!(
        "https://{}.slack.com/archives/{channel}/p{}",
        workspace.config.team.domain,
        ts.replace('.', "")
    );
    if let Some(thread) = stored.thread_ts().filter(|thread| *thread != ts) {
        permalink.push_str(&format!("?thread_ts={thread}&cid={channel}"));
    }
    Ok(object(
        json!({ "channel": channel, "permalink": permalink }),
    ))
}

pub(super) fn react(workspace: &mut Workspace, params: &Params, add: bool) -> Answer {
    let channel = channel_id(workspace, params, "channel")?;
    let ts = params.str("timestamp").ok_or("message_not_found")?;
    let name = params.str("name").ok_or("invalid_name")?;
    if add && !super::emoji::exists(&name) {
        return Err("invalid_name");
    }
    let user = workspace.config.bot.user_id.clone();
    workspace
        .messages
        .update(&channel, &ts, |message| {
            toggle_reaction(message, &name, &user, add)
        })
        .ok_or("message_not_found")?
}

/// Adds or removes `user`'s reaction `name` on a message, as `reactions.add`/`remove` do.
fn toggle_reaction(message: &mut Value, name: &str, user: &str, add: bool) -> Answer {
    let message = message.as_object_mut().ok_or("message_not_found")?;
    let reactions = message.entry("reactions").or_insert_with(|| json!([]));
    let list = reactions.as_array_mut().ok_or("message_not_found")?;
    let position = list
        .iter()
        .position(|reaction| reaction["name"] == json!(name));
    let has_mine = position.is_some_and(|index| {
        list[index]["users"]
            .as_array()
            .is_some_and(|users| users.contains(&json!(user)))
    });
    match (add, position) {
        (true, Some(_)) if has_mine => return Err("already_reacted"),
        (true, Some(index)) => {
            let reaction = &mut list[index];
            if let Some(users) = reaction["users"].as_array_mut() {
                users.push(json!(user));
            }
            let count = reaction["count"].as_u64().unwrap_or(0);
            reaction["count"] = json!(count + 1);
        }
        (true, None) => list.push(json!({ "name": name, "users": [user], "count": 1 })),
        (false, Some(index)) if has_mine => {
            let reaction = &mut list[index];
            if let Some(users) = reaction["users"].as_array_mut() {
                users.retain(|entry| *entry != json!(user));
            }
            let count = reaction["count"].as_u64().unwrap_or(1);
            reaction["count"] = json!(count.saturating_sub(1));
            if count <= 1 {
                list.remove(index);
            }
        }
        (false, _) => return Err("no_reaction"),
    }
    if list.is_empty() {
        message.remove("reactions");
    }
    Ok(Map::new())
}
