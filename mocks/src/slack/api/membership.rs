//! Conversations the app changes: joining, leaving, inviting, kicking, creating, archiving,
//! renaming, topics and purposes, and direct messages (`conversations.open`/`close`). Each join
//! and leave queues the `member_joined_channel`/`member_left_channel` event Slack sends.

use serde_json::json;

use super::{Answer, object};
use crate::slack::channel::{Channel, Kind, Text};
use crate::slack::params::Params;
use crate::slack::workspace::Workspace;

use super::chat::channel_id;

/// The most characters in a channel name, and in a topic or purpose.
const MAX_NAME: usize = 80;
const MAX_TOPIC: usize = 250;

/// The channel a call names, for a change: `Err` for a missing or archived one.
fn changeable(workspace: &Workspace, params: &Params) -> Result<String, &'static str> {
    let id = channel_id(workspace, params, "channel")?;
    let channel = workspace.channel(&id).ok_or("channel_not_found")?;
    if channel.archived {
        return Err("is_archived");
    }
    Ok(id)
}

fn member_event(workspace: &mut Workspace, kind: &str, channel: &Channel, user: &str) {
    let event_ts = workspace.next_ts();
    let mut event = json!({
        "type": kind,
        "user": user,
        "channel": channel.id,
        "channel_type": if channel.kind == Kind::Private { "G" } else { "C" },
        "team": workspace.config.team.id,
        "event_ts": event_ts,
    });
    if kind == "member_joined_channel" {
        event["inviter"] = json!(workspace.config.bot.user_id);
    }
    workspace.emit(event);
}

fn channel_answer(workspace: &Workspace, id: &str) -> Answer {
    let channel = workspace.channel(id).ok_or("channel_not_found")?;
    Ok(object(
        json!({ "channel": workspace.channel_json(channel) }),
    ))
}

/// Adds `user` to a channel; `false` when already a member.
fn add_member(workspace: &mut Workspace, id: &str, user: &str) -> bool {
    let Some(channel) = workspace.channel_mut(id) else {
        return false;
    };
    if channel.is_member(user) {
        return false;
    }
    channel.members.push(user.to_string());
    let channel = channel.clone();
    member_event(workspace, "member_joined_channel", &channel, user);
    true
}

/// Removes `user` from a channel; `false` when not a member.
fn remove_member(workspace: &mut Workspace, id: &str, user: &str) -> bool {
    let Some(channel) = workspace.channel_mut(id) else {
        return false;
    };
    if !channel.is_member(user) {
        return false;
    }
    channel.members.retain(|member| member != user);
    let channel = channel.clone();
    member_event(workspace, "member_left_channel", &channel, user);
    true
}

pub(super) fn join(workspace: &mut Workspace, params: &Params) -> Answer {
    let id = changeable(workspace, params)?;
    let kind = workspace.channel(&id).map(|channel| channel.kind);
    if kind != Some(Kind::Public) {
        return Err("method_not_supported_for_channel_type");
    }
    let bot = workspace.config.bot.user_id.clone();
    let joined = add_member(workspace, &id, &bot);
    let mut answer = channel_answer(workspace, &id)?;
    if !joined {
        answer.insert("warning".into(), json!("already_in_channel"));
        answer.insert(
            "response_metadata".into(),
            json!({ "warnings": ["already_in_channel"] }),
        );
    }
    Ok(answer)
}

pub(super) fn leave(workspace: &mut Workspace, params: &Params) -> Answer {
    let id = changeable(workspace, params)?;
    let channel = workspace.channel(&id).ok_or("channel_not_found")?;
    if channel.is_dm() {
        return Err("method_not_supported_for_channel_type");
    }
    if channel.name == "general" {
        return Err("cant_leave_general");
    }
    let bot = workspace.config.bot.user_id.clone();
    if !remove_member(workspace, &id, &bot) {
        return Ok(object(json!({ "not_in_channel": true })));
    }
    Ok(serde_json::Map::new())
}

/// The user ids of a comma-separated parameter.
fn user_list(params: &Params, key: &str) -> Result<Vec<String>, &'static str> {
    let users: Vec<String> = params
        .str(key)
        .ok_or("no_user")?
        .split(',')
        .map(|user| user.trim().to_string())
        .filter(|user| !user.is_empty())
        .collect();
    if users.is_empty() {
        return Err("no_user");
    }
    Ok(users)
}

pub(super) fn invite(workspace: &mut Workspace, params: &Params) -> Answer {
    let id = changeable(workspace, params)?;
    let channel = workspace.channel(&id).ok_or("channel_not_found")?.clone();
    let users = user_list(params, "users")?;
    let bot = workspace.config.bot.user_id.clone();
    if channel.is_dm() {
        return Err("method_not_supported_for_channel_type");
    }
    if !channel.is_member(&bot) {
        return Err("not_in_channel");
    }
    for user in &users {
        if *user == bot {
            return Err("cant_invite_self");
        }
        if workspace.user(user).is_none() {
            return Err("user_not_found");
        }
        if channel.is_member(user) && users.len() == 1 {
            return Err("already_in_channel");
        }
    }
    for user in &users {
        add_member(workspace, &id, user);
    }
    channel_answer(workspace, &id)
}

pub(super) fn kick(workspace: &mut Workspace, params: &Params) -> Answer {
    let id = changeable(workspace, params)?;
    let user = params.str("user").ok_or("user_not_found")?;
    let bot = workspace.config.bot.user_id.clone();
    if user == bot {
        return Err("cant_kick_self");
    }
    if workspace.user(&user).is_none() {
        return Err("user_not_found");
    }
    let channel = workspace.channel(&id).ok_or("channel_not_found")?;
    if channel.is_dm() {
        return Err("method_not_supported_for_channel_type");
    }
    if channel.name == "general" {
        return Err("cant_kick_from_general");
    }
    if !channel.is_member(&bot) {
        return Err("not_in_channel");
    }
    if !remove_member(workspace, &id, &user) {
        return Err("not_in_channel");
    }
    Ok(serde_json::Map::new())
}

/// Slack's channel name rules: lower case letters, digits, `-` and `_`, at most 80.
fn valid_name(name: &str) -> Result<(), &'static str> {
    if name.is_empty() {
        return Err("invalid_name_required");
    }
    if name.chars().count() > MAX_NAME {
        return Err("invalid_name_maxlength");
    }
    if name
        .chars()
        .any(|c| !(c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_'))
    {
        return Err("invalid_name_specials");
    }
    Ok(())
}

fn name_taken(workspace: &Workspace, name: &str) -> bool {
    workspace
        .channels
        .iter()
        .any(|channel| !channel.is_dm() && channel.name == name)
}

pub(super) fn create(workspace: &mut Workspace, params: &Params) -> Answer {
    let name = params.str("name").ok_or("invalid_name_required")?;
    valid_name(&name)?;
    if name_taken(workspace, &name) {
        return Err("name_taken");
    }
    let private = params.flag("is_private");
    // A letter after the prefix keeps created ids apart from configured ones.
    let id = workspace.next_id(if private { "GP" } else { "CN" });
    let bot = workspace.config.bot.user_id.clone();
    let ts = workspace.next_ts();
    let created = ts
        .split_once('.')
        .and_then(|(seconds, _)| seconds.parse().ok())
        .unwrap_or(0);
    let channel = Channel {
        id: id.clone(),
        name: name.clone(),
        kind: if private { Kind::Private } else { Kind::Public },
        members: vec![bot.clone()],
        topic: Text::default(),
        purpose: Text::default(),
        archived: false,
        created,
        creator: bot.clone(),
        open: true,
    };
    workspace.channels.push(channel);
    if !private {
        workspace.emit(json!({
            "type": "channel_created",
            "channel": { "id": id, "name": name, "created": created, "creator": bot },
            "event_ts": ts,
        }));
    }
    channel_answer(workspace, &id)
}

pub(super) fn archive(workspace: &mut Workspace, params: &Params, archive: bool) -> Answer {
    let id = channel_id(workspace, params, "channel")?;
    let channel = workspace.channel(&id).ok_or("channel_not_found")?;
    if channel.is_dm() {
        return Err("method_not_supported_for_channel_type");
    }
    match (archive, channel.archived) {
        (true, true) => return Err("already_archived"),
        (false, false) => return Err("not_archived"),
        _ => {}
    }
    if archive && channel.name == "general" {
        return Err("cant_archive_general");
    }
    let bot = workspace.config.bot.user_id.clone();
    if let Some(channel) = workspace.channel_mut(&id) {
        channel.archived = archive;
    }
    let event_ts = workspace.next_ts();
    workspace.emit(json!({
        "type": if archive { "channel_archive" } else { "channel_unarchive" },
        "channel": id,
        "user": bot,
        "event_ts": event_ts,
    }));
    Ok(serde_json::Map::new())
}

pub(super) fn rename(workspace: &mut Workspace, params: &Params) -> Answer {
    let id = changeable(workspace, params)?;
    let name = params.str("name").ok_or("invalid_name_required")?;
    valid_name(&name)?;
    if name_taken(workspace, &name) {
        return Err("name_taken");
    }
    let channel = workspace.channel_mut(&id).ok_or("channel_not_found")?;
    if channel.is_dm() {
        return Err("method_not_supported_for_channel_type");
    }
    channel.name = name;
    channel_answer(workspace, &id)
}

/// `conversations.setTopic` (`purpose` false) and `conversations.setPurpose`.
pub(super) fn set_text(workspace: &mut Workspace, params: &Params, purpose: bool) -> Answer {
    let id = changeable(workspace, params)?;
    let key = if purpose { "purpose" } else { "topic" };
    let value = params.str(key).unwrap_or_default();
    if value.chars().count() > MAX_TOPIC {
        return Err("too_long");
    }
    let bot = workspace.config.bot.user_id.clone();
    let now = workspace.now_seconds();
    let channel = workspace.channel_mut(&id).ok_or("channel_not_found")?;
    if !channel.is_member(&bot) {
        return Err("not_in_channel");
    }
    let text = Text {
        value,
        creator: bot,
        last_set: now,
    };
    if purpose {
        channel.purpose = text;
    } else {
        channel.topic = text;
    }
    channel_answer(workspace, &id)
}

/// Opens or resumes a DM or MPIM; resuming one already open answers `no_op` and `already_open`,
/// as Slack does.
pub(super) fn open(workspace: &mut Workspace, params: &Params) -> Answer {
    let (id, was_open) = match (params.str("channel"), params.str("users")) {
        (Some(_), _) => {
            let id = channel_id(workspace, params, "channel")?;
            let channel = workspace.channel_mut(&id).ok_or("channel_not_found")?;
            if !channel.is_dm() {
                return Err("method_not_supported_for_channel_type");
            }
            let was_open = channel.open;
            channel.open = true;
            (id, was_open)
        }
        (None, Some(_)) => {
            let users = user_list(params, "users").map_err(|_| "users_list_not_supplied")?;
            workspace.open_dm(&users)?
        }
        (None, None) => return Err("users_list_not_supplied"),
    };
    let channel = workspace.channel(&id).ok_or("channel_not_found")?;
    let json = if params.flag("return_im") {
        workspace.channel_json(channel)
    } else {
        json!({ "id": id })
    };
    let mut answer = object(json!({ "channel": json }));
    if was_open {
        answer.insert("no_op".into(), json!(true));
        answer.insert("already_open".into(), json!(true));
    }
    Ok(answer)
}

pub(super) fn close(workspace: &mut Workspace, params: &Params) -> Answer {
    let id = channel_id(workspace, params, "channel")?;
    let channel = workspace.channel_mut(&id).ok_or("channel_not_found")?;
    if !channel.is_dm() {
        return Err("method_not_supported_for_channel_type");
    }
    if !channel.open {
        return Ok(object(json!({ "no_op": true, "already_closed": true })));
    }
    channel.open = false;
    Ok(serde_json::Map::new())
}

pub(super) fn mark(workspace: &mut Workspace, params: &Params) -> Answer {
    let id = channel_id(workspace, params, "channel")?;
    let ts = params.str("ts").ok_or("invalid_timestamp")?;
    if crate::slack::store::ts_key(&ts).is_none() {
        return Err("invalid_timestamp");
    }
    let bot = workspace.config.bot.user_id.clone();
    let channel = workspace.channel(&id).ok_or("channel_not_found")?;
    if !channel.is_member(&bot) {
        return Err("not_in_channel");
    }
    Ok(serde_json::Map::new())
}
