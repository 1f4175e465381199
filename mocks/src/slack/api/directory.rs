//! Who and what the workspace is: `team.*`, `bots.info`, `emoji.list`, `users.*` beyond
//! `info`/`list`, `dnd.*` and `search.messages`.

use serde_json::{Value, json};

use super::{Answer, object};
use crate::slack::params::{Params, TokenKind};
use crate::slack::workspace::Workspace;

pub(super) fn team_info(workspace: &mut Workspace, params: &Params) -> Answer {
    let team = &workspace.config.team;
    if params.str("team").is_some_and(|id| id != team.id) {
        return Err("team_not_found");
    }
    Ok(object(json!({ "team": {
        "id": team.id,
        "name": team.name,
        "domain": team.domain,
        "email_domain": "example.com",
        "url": format!("https://{}.slack.com/", team.domain),
        "is_verified": false,
        "icon": { "image_default": true },
    }})))
}

pub(super) fn team_profile(_workspace: &mut Workspace, _params: &Params) -> Answer {
    Ok(object(
        json!({ "profile": { "fields": [], "sections": [] } }),
    ))
}

pub(super) fn bots_info(workspace: &mut Workspace, params: &Params) -> Answer {
    let bot = &workspace.config.bot;
    let asked = params.str("bot").unwrap_or_else(|| bot.bot_id.clone());
    if asked != bot.bot_id {
        return Err("bot_not_found");
    }
    Ok(object(json!({ "bot": {
        "id": bot.bot_id,
        "deleted": false,
        "name": bot.name,
        "updated": 1_700_000_000,
        "app_id": bot.app_id,
        "user_id": bot.user_id,
        "icons": {},
    }})))
}

pub(super) fn emoji_list(_workspace: &mut Workspace, _params: &Params) -> Answer {
    let emoji: serde_json::Map<String, Value> = super::emoji::CUSTOM
        .iter()
        .map(|(name, image)| ((*name).to_string(), json!(image)))
        .collect();
    Ok(object(json!({
        "emoji": emoji,
        "cache_ts": "1700000000.000000",
    })))
}

fn user_of(workspace: &Workspace, params: &Params) -> Result<Value, &'static str> {
    let id = params
        .str("user")
        .unwrap_or_else(|| workspace.config.bot.user_id.clone());
    workspace.user(&id).ok_or("user_not_found")
}

pub(super) fn lookup_by_email(workspace: &mut Workspace, params: &Params) -> Answer {
    let email = params.str("email").ok_or("invalid_arguments")?;
    let user = workspace
        .user_ids()
        .iter()
        .filter_map(|id| workspace.user(id))
        .find(|user| user["profile"]["email"] == json!(email))
        .ok_or("users_not_found")?;
    Ok(object(json!({ "user": user })))
}

pub(super) fn get_presence(workspace: &mut Workspace, params: &Params) -> Answer {
    user_of(workspace, params)?;
    Ok(object(
        json!({ "presence": "active", "online": true, "auto_away": false,
        "manual_away": false, "connection_count": 1 }),
    ))
}

pub(super) fn set_presence(_workspace: &mut Workspace, params: &Params) -> Answer {
    match params.str("presence").as_deref() {
        Some("auto" | "away") => Ok(serde_json::Map::new()),
        _ => Err("invalid_presence"),
    }
}

pub(super) fn profile_get(workspace: &mut Workspace, params: &Params) -> Answer {
    let user = match (params.str("user"), params.token_kind()) {
        (None, TokenKind::User) => {
            let owner = super::personal::token_owner(workspace)?;
            workspace.user(&owner).ok_or("user_not_found")?
        }
        _ => user_of(workspace, params)?,
    };
    let id = user["id"].as_str().unwrap_or_default().to_string();
    Ok(object(
        json!({ "profile": super::personal::profile_of(workspace, &id, user["profile"].clone()) }),
    ))
}

pub(super) fn identity(workspace: &mut Workspace, params: &Params) -> Answer {
    if params.token_kind() != TokenKind::User {
        return Err("not_allowed_token_type");
    }
    let team = &workspace.config.team;
    let user = workspace.config.users.first().ok_or("user_not_found")?;
    Ok(object(json!({
        "user": { "name": user.name, "id": user.id },
        "team": { "id": team.id, "name": team.name },
    })))
}

pub(super) fn dnd_info(workspace: &mut Workspace, params: &Params) -> Answer {
    user_of(workspace, params)?;
    let mut answer = object(json!({ "dnd_enabled": false, "next_dnd_start_ts": 1,
        "next_dnd_end_ts": 1, "snooze_enabled": false }));
    if params.token_kind() == TokenKind::User
        && params.str("user").is_none()
        && let Some(until) = workspace.items.snooze_until
    {
        answer.insert("snooze_enabled".into(), json!(true));
        answer.insert("snooze_endtime".into(), json!(until));
    }
    Ok(answer)
}

pub(super) fn dnd_team_info(workspace: &mut Workspace, params: &Params) -> Answer {
    let users = params.str("users").ok_or("invalid_arguments")?;
    let mut found = serde_json::Map::new();
    for id in users.split(',').map(str::trim) {
        if workspace.user(id).is_none() {
            return Err("user_not_found");
        }
        found.insert(
            id.to_string(),
            json!({ "dnd_enabled": false, "next_dnd_start_ts": 1, "next_dnd_end_ts": 1 }),
        );
    }
    Ok(object(json!({ "users": found })))
}

/// `search.messages`: user tokens only, as in Slack; matches text case-insensitively.
pub(super) fn search_messages(workspace: &mut Workspace, params: &Params) -> Answer {
    if params.token_kind() != TokenKind::User {
        return Err("not_allowed_token_type");
    }
    let query = params.str("query").ok_or("no_query")?.to_lowercase();
    let matches: Vec<Value> = workspace
        .messages
        .all()
        .into_iter()
        .filter(|stored| {
            stored.message["text"]
                .as_str()
                .is_some_and(|text| text.to_lowercase().contains(&query))
        })
        .take(100)
        .map(|stored| {
            let mut found = stored.message;
            found["channel"] = json!({ "id": stored.channel });
            found
        })
        .collect();
    Ok(object(json!({
        "query": query,
        "messages": { "total": matches.len(), "matches": matches,
            "pagination": { "page": 1, "page_count": 1 } },
    })))
}
