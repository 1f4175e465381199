//! `conversations.*` and `users.*`: reading channels, their histories and threads, and users.

use serde_json::{Value, json};

use std::ops::Bound;

use super::{Answer, cursor, object};
use crate::slack::channel::{Channel, Kind};
use crate::slack::params::Params;
use crate::slack::store::{TsKey, ts_key};
use crate::slack::workspace::Workspace;

use super::chat::channel_id;

/// The most messages one page holds.
const MAX_LIMIT: usize = 1_000;

pub(super) fn info(workspace: &mut Workspace, params: &Params) -> Answer {
    let id = channel_id(workspace, params, "channel")?;
    let channel = workspace.channel(&id).ok_or("channel_not_found")?;
    let mut json = workspace.channel_json(channel);
    if params.flag("include_num_members") || channel.is_dm() {
        json["num_members"] = json!(channel.members.len());
    }
    Ok(object(json!({ "channel": json })))
}

/// The kinds a `types` parameter names (default: public channels only); `Err` is
/// `invalid_types`.
fn kinds(params: &Params) -> Result<Vec<Kind>, &'static str> {
    let Some(types) = params.str("types") else {
        return Ok(vec![Kind::Public]);
    };
    types
        .split(',')
        .map(|name| match name.trim() {
            "public_channel" => Ok(Kind::Public),
            "private_channel" => Ok(Kind::Private),
            "im" => Ok(Kind::Im),
            "mpim" => Ok(Kind::Mpim),
            _ => Err("invalid_types"),
        })
        .collect()
}

/// The channels of these kinds that `user` sees (a private channel or a DM only as a member),
/// sorted by id and paged.
fn channel_page(workspace: &Workspace, params: &Params, user: &str, members_only: bool) -> Answer {
    let kinds = kinds(params)?;
    let exclude_archived = params.flag("exclude_archived");
    let mut channels: Vec<&Channel> = workspace
        .channels
        .iter()
        .filter(|channel| kinds.contains(&channel.kind))
        .filter(|channel| !(exclude_archived && channel.archived))
        .filter(|channel| {
            let private = channel.kind != Kind::Public;
            !(private || members_only) || channel.is_member(user)
        })
        .collect();
    channels.sort_by(|a, b| a.id.cmp(&b.id));
    let (page, next) = cursor::page_by_id(
        channels,
        |channel| &channel.id,
        params.str("cursor").as_deref(),
        params.str("limit").as_deref(),
    )?;
    let channels: Vec<Value> = page
        .into_iter()
        .map(|channel| workspace.channel_json(channel))
        .collect();
    Ok(object(json!({
        "channels": channels,
        "response_metadata": { "next_cursor": next },
    })))
}

/// The page size a call asks for: Slack's default 100 (also for 0), at most [`MAX_LIMIT`].
fn limit(params: &Params) -> Result<usize, &'static str> {
    let limit = match params.str("limit") {
        Some(text) => text.parse::<usize>().map_err(|_| "invalid_limit")?,
        None => 100,
    };
    Ok(if limit == 0 {
        100
    } else {
        limit.min(MAX_LIMIT)
    })
}

/// The `oldest`/`latest` bounds of a call (exclusive unless `inclusive`).
fn bounds(params: &Params) -> Result<(Bound<TsKey>, Bound<TsKey>), &'static str> {
    let inclusive = params.flag("inclusive");
    let bound = |key: &str| -> Result<Bound<TsKey>, &'static str> {
        match params.str(key) {
            None => Ok(Bound::Unbounded),
            Some(text) => {
                let ts = ts_key(&text).ok_or("invalid_ts_oldest")?;
                Ok(if inclusive {
                    Bound::Included(ts)
                } else {
                    Bound::Excluded(ts)
                })
            }
        }
    };
    let oldest = bound("oldest")?;
    let latest = bound("latest").map_err(|_| "invalid_ts_latest")?;
    Ok((oldest, latest))
}

/// The position a cursor points after, as a `ts`.
fn cursor_ts(params: &Params) -> Result<Option<TsKey>, &'static str> {
    params
        .str("cursor")
        .map(|cursor| {
            cursor::read("ts", &cursor).and_then(|ts| ts_key(&ts).ok_or("invalid_cursor"))
        })
        .transpose()
}

/// A page's answer with Slack's cursor fields; the cursor names the page's last message.
fn page(messages: Vec<Value>, has_more: bool) -> serde_json::Map<String, Value> {
    let next = match messages.last().and_then(|last| last["ts"].as_str()) {
        Some(ts) if has_more => cursor::next("ts", ts),
        _ => String::new(),
    };
    object(json!({
        "messages": messages,
        "has_more": has_more,
        "response_metadata": { "next_cursor": next },
    }))
}

pub(super) fn history(workspace: &mut Workspace, params: &Params) -> Answer {
    let channel = channel_id(workspace, params, "channel")?;
    let (oldest, mut latest) = bounds(params)?;
    let limit = limit(params)?;
    // Newest first: the next page lies below the last message of this one.
    if let Some(after) = cursor_ts(params)? {
        latest = Bound::Excluded(after);
    }
    let (messages, has_more) = workspace.messages.history(&channel, oldest, latest, limit);
    Ok(page(messages, has_more))
}

pub(super) fn replies(workspace: &mut Workspace, params: &Params) -> Answer {
    let channel = channel_id(workspace, params, "channel")?;
    let ts = params.str("ts").ok_or("thread_not_found")?;
    let root = match workspace.find(&channel, &ts) {
        Some(stored) => stored.thread_ts().unwrap_or(&ts).to_string(),
        None if workspace.messages.has_thread(&channel, &ts) => ts,
        None => return Err("thread_not_found"),
    };
    let root = ts_key(&root).ok_or("thread_not_found")?;
    let (mut oldest, latest) = bounds(params)?;
    let limit = limit(params)?;
    // Oldest first: the next page lies above the last message of this one.
    if let Some(after) = cursor_ts(params)? {
        oldest = Bound::Excluded(after);
    }
    let (messages, has_more) = workspace
        .messages
        .thread(&channel, root, oldest, latest, limit);
    Ok(page(messages, has_more))
}

pub(super) fn list(workspace: &mut Workspace, params: &Params) -> Answer {
    let bot = workspace.config.bot.user_id.clone();
    channel_page(workspace, params, &bot, false)
}

pub(super) fn users_conversations(workspace: &mut Workspace, params: &Params) -> Answer {
    let user = params
        .str("user")
        .unwrap_or_else(|| workspace.config.bot.user_id.clone());
    if workspace.user(&user).is_none() {
        return Err("user_not_found");
    }
    channel_page(workspace, params, &user, true)
}

pub(super) fn members(workspace: &mut Workspace, params: &Params) -> Answer {
    let id = channel_id(workspace, params, "channel")?;
    let channel = workspace.channel(&id).ok_or("channel_not_found")?;
    let mut members = channel.members.clone();
    members.sort();
    let (members, next) = cursor::page_by_id(
        members,
        String::as_str,
        params.str("cursor").as_deref(),
        params.str("limit").as_deref(),
    )?;
    Ok(object(json!({
        "members": members,
        "response_metadata": { "next_cursor": next },
    })))
}

pub(super) fn user_info(workspace: &mut Workspace, params: &Params) -> Answer {
    let id = params.str("user").ok_or("user_not_found")?;
    let user = workspace.user(&id).ok_or("user_not_found")?;
    Ok(object(json!({ "user": user })))
}

pub(super) fn users_list(workspace: &mut Workspace) -> Answer {
    let members: Vec<Value> = workspace
        .user_ids()
        .iter()
        .filter_map(|id| workspace.user(id))
        .collect();
    Ok(object(json!({
        "members": members,
        "cache_ts": 1_700_000_000,
        "response_metadata": { "next_cursor": "" },
    })))
}
