//! The methods Slack serves only to a user token (a bot token gets `not_allowed_token_type`):
//! `users.profile.set`, `stars.*`, `files.sharedPublicURL`/`revokePublicURL`, `dnd.setSnooze`/
//! `endSnooze` and `reminders.*`. The user token stands for the workspace's first user.

use serde_json::{Map, Value, json};

use super::chat::channel_id;
use super::{Answer, object};
use crate::slack::params::Params;
use crate::slack::workspace::Workspace;

/// The methods only a user token may call.
pub const USER_ONLY: &[&str] = &[
    "users.profile.set",
    "stars.add",
    "stars.remove",
    "stars.list",
    "files.sharedPublicURL",
    "files.revokePublicURL",
    "dnd.setSnooze",
    "dnd.endSnooze",
    "reminders.add",
    "reminders.list",
    "reminders.delete",
];

/// The user a user token stands for.
pub fn token_owner(workspace: &Workspace) -> Result<String, &'static str> {
    workspace
        .config
        .users
        .first()
        .map(|user| user.id.clone())
        .ok_or("user_not_found")
}

/// Profile fields a user set, merged over the profile the workspace gives them.
pub fn profile_of(workspace: &Workspace, user: &str, mut profile: Value) -> Value {
    if let (Some(profile), Some(set)) =
        (profile.as_object_mut(), workspace.items.profiles.get(user))
    {
        profile.extend(set.clone());
    }
    profile
}

pub(super) fn profile_set(workspace: &mut Workspace, params: &Params) -> Answer {
    let owner = token_owner(workspace)?;
    let mut fields = Map::new();
    match params.get("profile") {
        Some(Value::Object(profile)) => fields.extend(profile.clone()),
        Some(Value::String(text)) => match serde_json::from_str::<Value>(text) {
            Ok(Value::Object(profile)) => fields.extend(profile),
            _ => return Err("invalid_profile"),
        },
        Some(_) => return Err("invalid_profile"),
        None => {
            let name = params.str("name").ok_or("invalid_arguments")?;
            fields.insert(name, json!(params.str("value").unwrap_or_default()));
        }
    }
    workspace
        .items
        .profiles
        .entry(owner.clone())
        .or_default()
        .extend(fields);
    let base = workspace.user(&owner).ok_or("user_not_found")?;
    Ok(object(
        json!({ "profile": profile_of(workspace, &owner, base["profile"].clone()) }),
    ))
}

/// The item a `stars.*` call names: a message (`channel` and `timestamp`), a file or a channel.
fn star_item(workspace: &Workspace, params: &Params) -> Result<Value, &'static str> {
    if let Some(file) = params.str("file") {
        let file = workspace.items.files.get(&file).ok_or("file_not_found")?;
        return Ok(json!({ "type": "file", "file": file }));
    }
    let channel = channel_id(workspace, params, "channel")?;
    match params.str("timestamp") {
        Some(ts) => {
            let message = workspace.find(&channel, &ts).ok_or("message_not_found")?;
            Ok(json!({ "type": "message", "channel": channel, "message": message.message }))
        }
        None => Ok(json!({ "type": "channel", "channel": channel })),
    }
}

/// What tells two starred items apart.
fn star_key(item: &Value) -> Value {
    json!([
        item["type"],
        item["channel"],
        item["message"]["ts"],
        item["file"]["id"]
    ])
}

pub(super) fn star(workspace: &mut Workspace, params: &Params, add: bool) -> Answer {
    let item = star_item(workspace, params)?;
    let key = star_key(&item);
    let stars = &mut workspace.items.stars;
    let position = stars.iter().position(|starred| star_key(starred) == key);
    match (add, position) {
        (true, Some(_)) => Err("already_starred"),
        (true, None) => {
            stars.push(item);
            Ok(Map::new())
        }
        (false, Some(index)) => {
            stars.remove(index);
            Ok(Map::new())
        }
        (false, None) => Err("not_starred"),
    }
}

pub(super) fn stars_list(workspace: &mut Workspace, _params: &Params) -> Answer {
    let items: Vec<Value> = workspace.items.stars.iter().rev().cloned().collect();
    let total = items.len();
    Ok(object(json!({
        "items": items,
        "paging": { "count": 100, "total": total, "page": 1, "pages": 1 },
    })))
}

pub(super) fn public_url(workspace: &mut Workspace, params: &Params, share: bool) -> Answer {
    let id = params.str("file").ok_or("file_not_found")?;
    let team = workspace.config.team.id.clone();
    let file = workspace.items.files.get_mut(&id).ok_or("file_not_found")?;
    let fields = file.as_object_mut().ok_or("file_not_found")?;
    fields.insert("public_url_shared".into(), json!(share));
    if share {
        let name = fields["name"].as_str().unwrap_or("file").to_string();
        fields.insert(
            "permalink_public".into(),
            json!(format!("https://slack-files.com/{team}-{id}-{name}")),
        );
    } else {
        fields.remove("permalink_public");
    }
    Ok(object(json!({ "file": file })))
}

pub(super) fn set_snooze(workspace: &mut Workspace, params: &Params) -> Answer {
    let minutes = params
        .str("num_minutes")
        .ok_or("invalid_arguments")?
        .parse::<u64>()
        .map_err(|_| "invalid_arguments")?;
    let until = workspace.now_seconds() + minutes * 60;
    workspace.items.snooze_until = Some(until);
    Ok(object(json!({
        "snooze_enabled": true,
        "snooze_endtime": until,
        "snooze_remaining": minutes * 60,
        "snooze_is_indefinite": false,
    })))
}

pub(super) fn end_snooze(workspace: &mut Workspace, _params: &Params) -> Answer {
    if workspace.items.snooze_until.take().is_none() {
        return Err("snooze_not_active");
    }
    Ok(object(json!({
        "dnd_enabled": false,
        "next_dnd_start_ts": 1,
        "next_dnd_end_ts": 1,
        "snooze_enabled": false,
    })))
}

/// `time` as Slack takes it: a Unix time, seconds from now (below a year), or `in N minutes`,
/// `in N hours`, `in N days`.
fn reminder_time(workspace: &Workspace, time: &str) -> Result<u64, &'static str> {
    let now = workspace.now_seconds();
    if let Ok(number) = time.trim().parse::<u64>() {
        return Ok(if number < 365 * 24 * 3600 {
            now + number
        } else {
            number
        });
    }
    let words: Vec<&str> = time.split_whitespace().collect();
    if let ["in", count, unit] = words.as_slice()
        && let Ok(count) = count.parse::<u64>()
    {
        let seconds = match unit.trim_end_matches('s') {
            "second" => 1,
            "minute" => 60,
            "hour" => 3_600,
            "day" => 86_400,
            _ => return Err("cannot_parse"),
        };
        return Ok(now + count * seconds);
    }
    Err("cannot_parse")
}

pub(super) fn reminder_add(workspace: &mut Workspace, params: &Params) -> Answer {
    let text = params.str("text").ok_or("no_text")?;
    let time = reminder_time(workspace, &params.str("time").ok_or("cannot_parse")?)?;
    let owner = token_owner(workspace)?;
    let user = params.str("user").unwrap_or_else(|| owner.clone());
    if workspace.user(&user).is_none() {
        return Err("user_not_found");
    }
    let id = workspace.next_id("Rm");
    let reminder = json!({
        "id": id,
        "creator": owner,
        "user": user,
        "text": text,
        "recurring": false,
        "time": time,
        "complete_ts": 0,
    });
    workspace.items.reminders.push(reminder.clone());
    Ok(object(json!({ "reminder": reminder })))
}

pub(super) fn reminders_list(workspace: &mut Workspace, _params: &Params) -> Answer {
    Ok(object(json!({ "reminders": workspace.items.reminders })))
}

pub(super) fn reminder_delete(workspace: &mut Workspace, params: &Params) -> Answer {
    let id = params.str("reminder").ok_or("not_found")?;
    let reminders = &mut workspace.items.reminders;
    let index = reminders
        .iter()
        .position(|reminder| reminder["id"] == json!(id))
        .ok_or("not_found")?;
    reminders.remove(index);
    Ok(Map::new())
}
