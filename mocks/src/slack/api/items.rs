//! Things attached to conversations and people: `pins.*`, `bookmarks.*`, `reactions.get`/
//! `list` and `usergroups.*`.

use serde_json::{Value, json};

use super::{Answer, object};
use crate::slack::params::Params;
use crate::slack::workspace::Workspace;

use super::chat::channel_id;

fn message_item(workspace: &Workspace, channel: &str, ts: &str) -> Result<Value, &'static str> {
    let stored = workspace.find(channel, ts).ok_or("message_not_found")?;
    Ok(json!({ "type": "message", "channel": channel, "message": stored.message }))
}

pub(super) fn pin(workspace: &mut Workspace, params: &Params, add: bool) -> Answer {
    let channel = channel_id(workspace, params, "channel")?;
    let ts = params.str("timestamp").ok_or("no_item_specified")?;
    workspace.find(&channel, &ts).ok_or("message_not_found")?;
    let pins = workspace.items.pins.entry(channel).or_default();
    let pinned = pins.contains(&ts);
    match (add, pinned) {
        (true, true) => Err("already_pinned"),
        (false, false) => Err("no_pin"),
        (true, false) => {
            pins.push(ts);
            Ok(serde_json::Map::new())
        }
        (false, true) => {
            pins.retain(|pin| *pin != ts);
            Ok(serde_json::Map::new())
        }
    }
}

pub(super) fn pins_list(workspace: &mut Workspace, params: &Params) -> Answer {
    let channel = channel_id(workspace, params, "channel")?;
    let pins = workspace
        .items
        .pins
        .get(&channel)
        .cloned()
        .unwrap_or_default();
    let items: Vec<Value> = pins
        .iter()
        .filter_map(|ts| message_item(workspace, &channel, ts).ok())
        .collect();
    Ok(object(json!({ "items": items })))
}

pub(super) fn bookmark_add(workspace: &mut Workspace, params: &Params) -> Answer {
    let channel = channel_id(workspace, params, "channel_id")?;
    let title = params.str("title").ok_or("invalid_title")?;
    let kind = params.str("type").ok_or("invalid_type")?;
    if kind != "link" {
        return Err("invalid_type");
    }
    let link = params.str("link").ok_or("invalid_link")?;
    if url::Url::parse(&link).is_err() {
        return Err("invalid_link");
    }
    let id = workspace.next_id("Bk");
    let now = workspace.now_seconds();
    let bookmark = json!({
        "id": id, "channel_id": channel, "title": title, "link": link, "type": "link",
        "emoji": params.str("emoji"), "icon_url": null, "entity_id": null,
        "date_created": now, "date_updated": 0, "rank": "U", "last_updated_by_user_id": workspace.config.bot.user_id,
        "last_updated_by_team_id": workspace.config.team.id, "shortcut_id": null, "app_id": workspace.config.bot.app_id,
    });
    workspace
        .items
        .bookmarks
        .entry(channel)
        .or_default()
        .push(bookmark.clone());
    Ok(object(json!({ "bookmark": bookmark })))
}

pub(super) fn bookmark_edit(workspace: &mut Workspace, params: &Params) -> Answer {
    let channel = channel_id(workspace, params, "channel_id")?;
    let id = params.str("bookmark_id").ok_or("not_found")?;
    let now = workspace.now_seconds();
    let bookmark = workspace
        .items
        .bookmarks
        .get_mut(&channel)
        .and_then(|list| list.iter_mut().find(|bookmark| bookmark["id"] == json!(id)))
        .ok_or("not_found")?;
    for key in ["title", "link", "emoji"] {
        if let Some(value) = params.str(key) {
            bookmark[key] = json!(value);
        }
    }
    bookmark["date_updated"] = json!(now);
    Ok(object(json!({ "bookmark": bookmark.clone() })))
}

pub(super) fn bookmark_remove(workspace: &mut Workspace, params: &Params) -> Answer {
    let channel = channel_id(workspace, params, "channel_id")?;
    let id = params.str("bookmark_id").ok_or("not_found")?;
    let list = workspace.items.bookmarks.entry(channel).or_default();
    let before = list.len();
    list.retain(|bookmark| bookmark["id"] != json!(id));
    if list.len() == before {
        return Err("not_found");
    }
    Ok(serde_json::Map::new())
}

pub(super) fn bookmarks_list(workspace: &mut Workspace, params: &Params) -> Answer {
    let channel = channel_id(workspace, params, "channel_id")?;
    let list = workspace
        .items
        .bookmarks
        .get(&channel)
        .cloned()
        .unwrap_or_default();
    Ok(object(json!({ "bookmarks": list })))
}

pub(super) fn reactions_get(workspace: &mut Workspace, params: &Params) -> Answer {
    let channel = channel_id(workspace, params, "channel")?;
    let ts = params.str("timestamp").ok_or("no_item_specified")?;
    let mut item = message_item(workspace, &channel, &ts)?;
    if let Some(item) = item.as_object_mut() {
        item.remove("type");
        item.insert("type".into(), json!("message"));
    }
    Ok(object(item))
}

pub(super) fn reactions_list(workspace: &mut Workspace, params: &Params) -> Answer {
    let user = params
        .str("user")
        .unwrap_or_else(|| workspace.config.bot.user_id.clone());
    if workspace.user(&user).is_none() {
        return Err("user_not_found");
    }
    let items: Vec<Value> = workspace
        .messages
        .all()
        .into_iter()
        .filter(|stored| {
            stored.message["reactions"].as_array().is_some_and(|reactions| {
                reactions
                    .iter()
                    .any(|reaction| reaction["users"].as_array().is_some_and(|users| users.contains(&json!(user))))
            })
        })
        .take(100)
        .map(|stored| json!({ "type": "message", "channel": stored.channel, "message": stored.message }))
        .collect();
    Ok(object(
        json!({ "items": items, "response_metadata": { "next_cursor": "" } }),
    ))
}

fn usergroup_mut<'a>(
    workspace: &'a mut Workspace,
    params: &Params,
) -> Result<&'a mut Value, &'static str> {
    let id = params.str("usergroup").ok_or("no_such_subteam")?;
    workspace
        .items
        .usergroups
        .iter_mut()
        .find(|group| group["id"] == json!(id))
        .ok_or("no_such_subteam")
}

pub(super) fn usergroup_create(workspace: &mut Workspace, params: &Params) -> Answer {
    let name = params.str("name").ok_or("invalid_arguments")?;
    let handle = params
        .str("handle")
        .unwrap_or_else(|| name.to_lowercase().replace(' ', "-"));
    if workspace
        .items
        .usergroups
        .iter()
        .any(|group| group["name"] == json!(name))
    {
        return Err("name_already_exists");
    }
    if workspace
        .items
        .usergroups
        .iter()
        .any(|group| group["handle"] == json!(handle))
    {
        return Err("handle_already_exists");
    }
    let id = workspace.next_id("S");
    let now = workspace.now_seconds();
    let group = json!({
        "id": id, "team_id": workspace.config.team.id, "is_usergroup": true, "name": name,
        "description": params.str("description").unwrap_or_default(), "handle": handle,
        "is_external": false, "date_create": now, "date_update": now, "date_delete": 0,
        "auto_type": null, "created_by": workspace.config.bot.user_id, "updated_by": workspace.config.bot.user_id,
        "deleted_by": null, "prefs": { "channels": [], "groups": [] }, "users": [], "user_count": 0,
    });
    workspace.items.usergroups.push(group.clone());
    Ok(object(json!({ "usergroup": group })))
}

pub(super) fn usergroups_list(workspace: &mut Workspace, params: &Params) -> Answer {
    let include_disabled = params.flag("include_disabled");
    let groups: Vec<Value> = workspace
        .items
        .usergroups
        .iter()
        .filter(|group| include_disabled || group["date_delete"] == json!(0))
        .cloned()
        .collect();
    Ok(object(json!({ "usergroups": groups })))
}

pub(super) fn usergroup_update(workspace: &mut Workspace, params: &Params) -> Answer {
    let group = usergroup_mut(workspace, params)?;
    for key in ["name", "handle", "description"] {
        if let Some(value) = params.str(key) {
            group[key] = json!(value);
        }
    }
    Ok(object(json!({ "usergroup": group.clone() })))
}

pub(super) fn usergroup_enable(workspace: &mut Workspace, params: &Params, enable: bool) -> Answer {
    let now = workspace.now_seconds();
    let group = usergroup_mut(workspace, params)?;
    let enabled = group["date_delete"] == json!(0);
    match (enable, enabled) {
        (true, true) => return Err("already_enabled"),
        (false, false) => return Err("already_disabled"),
        _ => {}
    }
    group["date_delete"] = json!(if enable { 0 } else { now });
    Ok(object(json!({ "usergroup": group.clone() })))
}

pub(super) fn usergroup_users(workspace: &mut Workspace, params: &Params) -> Answer {
    let group = usergroup_mut(workspace, params)?;
    Ok(object(json!({ "users": group["users"].clone() })))
}

pub(super) fn usergroup_set_users(workspace: &mut Workspace, params: &Params) -> Answer {
    let users: Vec<String> = params
        .str("users")
        .ok_or("no_users_provided")?
        .split(',')
        .map(|user| user.trim().to_string())
        .collect();
    if users.iter().any(|user| workspace.user(user).is_none()) {
        return Err("invalid_users");
    }
    let group = usergroup_mut(workspace, params)?;
    group["user_count"] = json!(users.len());
    group["users"] = json!(users);
    Ok(object(json!({ "usergroup": group.clone() })))
}
