//! `conversations.*` and `users.*`: reading channels, their histories and threads, and users.

use serde_json::{Value, json};

use super::{Answer, object};
use crate::slack::params::Params;
use crate::slack::workspace::Workspace;

use super::chat::channel_id;

/// The most messages one page holds.
const MAX_LIMIT: usize = 1_000;

pub(super) fn info(workspace: &mut Workspace, params: &Params) -> Answer {
    let id = channel_id(workspace, params, "channel")?;
    let channel = workspace.channel(&id).ok_or("channel_not_found")?;
    Ok(object(
        json!({ "channel": workspace.channel_json(channel) }),
    ))
}

/// One page of `messages`, with Slack's cursor fields (the cursor is an offset).
fn page(
    messages: Vec<Value>,
    params: &Params,
) -> Result<serde_json::Map<String, Value>, &'static str> {
    let limit = match params.str("limit") {
        Some(text) => text.parse::<usize>().map_err(|_| "invalid_limit")?,
        None => 100,
    };
    let limit = if limit == 0 {
        100
    } else {
        limit.min(MAX_LIMIT)
    };
    let start = match params.str("cursor") {
        Some(cursor) => cursor.parse::<usize>().map_err(|_| "invalid_cursor")?,
        None => 0,
    };
    let end = (start + limit).min(messages.len());
    let has_more = end < messages.len();
    let next = if has_more {
        end.to_string()
    } else {
        String::new()
    };
    let messages = messages
        .get(start.min(end)..end)
        .unwrap_or_default()
        .to_vec();
    Ok(object(json!({
        "messages": messages,
        "has_more": has_more,
        "response_metadata": { "next_cursor": next },
    })))
}

/// Keeps messages within `oldest`/`latest` (exclusive unless `inclusive`).
fn window(messages: Vec<Value>, params: &Params) -> Vec<Value> {
    let number = |key: &str| params.str(key).and_then(|text| text.parse::<f64>().ok());
    let (oldest, latest, inclusive) =
        (number("oldest"), number("latest"), params.flag("inclusive"));
    messages
        .into_iter()
        .filter(|message| {
            let ts = message["ts"]
                .as_str()
                .and_then(|ts| ts.parse::<f64>().ok())
                .unwrap_or(0.0);
            let above =
                oldest.is_none_or(|oldest| if inclusive { ts >= oldest } else { ts > oldest });
            let below =
                latest.is_none_or(|latest| if inclusive { ts <= latest } else { ts < latest });
            above && below
        })
        .collect()
}

pub(super) fn history(workspace: &mut Workspace, params: &Params) -> Answer {
    let channel = channel_id(workspace, params, "channel")?;
    let mut messages = window(workspace.listing(&channel, None), params);
    messages.reverse();
    page(messages, params)
}

pub(super) fn replies(workspace: &mut Workspace, params: &Params) -> Answer {
    let channel = channel_id(workspace, params, "channel")?;
    let ts = params.str("ts").ok_or("thread_not_found")?;
    let stored = workspace.find(&channel, &ts).ok_or("thread_not_found")?;
    let root = stored.thread_ts().unwrap_or(&ts).to_string();
    page(
        window(workspace.listing(&channel, Some(&root)), params),
        params,
    )
}

pub(super) fn list(workspace: &mut Workspace) -> Answer {
    let channels: Vec<Value> = workspace
        .config
        .channels
        .iter()
        .map(|channel| workspace.channel_json(channel))
        .collect();
    Ok(object(json!({
        "channels": channels,
        "response_metadata": { "next_cursor": "" },
    })))
}

pub(super) fn members(workspace: &mut Workspace, params: &Params) -> Answer {
    let id = channel_id(workspace, params, "channel")?;
    let channel = workspace.channel(&id).ok_or("channel_not_found")?;
    Ok(object(json!({
        "members": workspace.members(channel),
        "response_metadata": { "next_cursor": "" },
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
