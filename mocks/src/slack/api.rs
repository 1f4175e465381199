//! The Web API methods: one function per method over the workspace, answering Slack's fields and
//! Slack's error codes.

mod assistant;
mod chat;
mod conversations;
mod cursor;
mod directory;
mod emoji;
mod files;
mod items;
mod membership;
pub mod methods;
mod personal;
mod scheduled;
mod views;

use serde_json::{Map, Value, json};

use super::params::{Params, TokenKind};
use super::workspace::Workspace;

/// Slack's longest message text, in characters.
pub const MAX_TEXT_CHARS: usize = 40_000;
/// Slack's most blocks in a message.
pub const MAX_BLOCKS: usize = 50;

/// What a method call needs besides the workspace: where the fake lives.
#[derive(Debug, Clone)]
pub struct Site {
    /// `http://127.0.0.1:PORT` (no trailing slash).
    pub origin: String,
    /// `ws://127.0.0.1:PORT/link`.
    pub socket_url: String,
}

/// A Slack error code, answered as `{"ok":false,"error":code}`.
pub type Answer = Result<Map<String, Value>, &'static str>;

/// Runs one method; the answer has `ok:true` added by the caller.
pub fn call(workspace: &mut Workspace, site: &Site, method: &str, params: &Params) -> Answer {
    if methods::find(method).is_none() {
        return Err("unknown_method");
    }
    check_token(method, params.token_kind())?;
    check_known_token(workspace, method, params.token.as_deref())?;
    match method {
        "auth.revoke" => auth_revoke(workspace, params),
        "api.test" => Ok(params.map.clone()),
        "auth.test" => auth_test(workspace, params),
        "apps.connections.open" => {
            let ticket = workspace.next_envelope_id();
            let url = format!(
                "{}/?ticket={ticket}&app_id={}",
                site.socket_url, workspace.config.bot.app_id
            );
            Ok(object(json!({ "url": url })))
        }
        "chat.postMessage" => chat::post_message(workspace, params),
        "chat.update" => chat::update(workspace, params),
        "chat.delete" => chat::delete(workspace, params),
        "chat.postEphemeral" => chat::post_ephemeral(workspace, params),
        "chat.getPermalink" => chat::permalink(workspace, params),
        "reactions.add" => chat::react(workspace, params, true),
        "reactions.remove" => chat::react(workspace, params, false),
        "conversations.info" => conversations::info(workspace, params),
        "conversations.history" => conversations::history(workspace, params),
        "conversations.replies" => conversations::replies(workspace, params),
        "conversations.list" => conversations::list(workspace, params),
        "users.conversations" => conversations::users_conversations(workspace, params),
        "conversations.join" => membership::join(workspace, params),
        "conversations.leave" => membership::leave(workspace, params),
        "conversations.invite" => membership::invite(workspace, params),
        "conversations.kick" => membership::kick(workspace, params),
        "conversations.create" => membership::create(workspace, params),
        "conversations.archive" => membership::archive(workspace, params, true),
        "conversations.unarchive" => membership::archive(workspace, params, false),
        "conversations.rename" => membership::rename(workspace, params),
        "conversations.setTopic" => membership::set_text(workspace, params, false),
        "conversations.setPurpose" => membership::set_text(workspace, params, true),
        "conversations.open" => membership::open(workspace, params),
        "conversations.close" => membership::close(workspace, params),
        "conversations.mark" => membership::mark(workspace, params),
        "conversations.members" => conversations::members(workspace, params),
        "users.info" => conversations::user_info(workspace, params),
        "users.list" => conversations::users_list(workspace),
        "views.open" => views::open(workspace, params, false),
        "views.push" => views::open(workspace, params, true),
        "views.update" => views::update(workspace, params),
        "files.getUploadURLExternal" => files::upload_url(workspace, site, params),
        "files.completeUploadExternal" => files::complete(workspace, site, params),
        "files.info" => files::info(workspace, params),
        "files.list" => files::list(workspace, params),
        "files.delete" => files::delete(workspace, params),
        "files.upload" => Err("method_deprecated"),
        "chat.meMessage" => scheduled::me_message(workspace, params),
        "chat.scheduleMessage" => scheduled::schedule(workspace, params),
        "chat.scheduledMessages.list" => scheduled::scheduled_list(workspace, params),
        "chat.deleteScheduledMessage" => scheduled::delete_scheduled(workspace, params),
        "chat.unfurl" => scheduled::unfurl(workspace, params),
        "views.publish" => scheduled::publish_home(workspace, params),
        "chat.startStream" => assistant::start_stream(workspace, params),
        "chat.appendStream" => assistant::append_stream(workspace, params, false),
        "chat.stopStream" => assistant::append_stream(workspace, params, true),
        "assistant.threads.setStatus" => assistant::set_status(workspace, params),
        "assistant.threads.setSuggestedPrompts" => {
            assistant::set_suggested_prompts(workspace, params)
        }
        "assistant.threads.setTitle" => assistant::set_title(workspace, params),
        "reactions.get" => items::reactions_get(workspace, params),
        "reactions.list" => items::reactions_list(workspace, params),
        "pins.add" => items::pin(workspace, params, true),
        "pins.remove" => items::pin(workspace, params, false),
        "pins.list" => items::pins_list(workspace, params),
        "bookmarks.add" => items::bookmark_add(workspace, params),
        "bookmarks.edit" => items::bookmark_edit(workspace, params),
        "bookmarks.remove" => items::bookmark_remove(workspace, params),
        "bookmarks.list" => items::bookmarks_list(workspace, params),
        "usergroups.create" => items::usergroup_create(workspace, params),
        "usergroups.list" => items::usergroups_list(workspace, params),
        "usergroups.update" => items::usergroup_update(workspace, params),
        "usergroups.enable" => items::usergroup_enable(workspace, params, true),
        "usergroups.disable" => items::usergroup_enable(workspace, params, false),
        "usergroups.users.list" => items::usergroup_users(workspace, params),
        "usergroups.users.update" => items::usergroup_set_users(workspace, params),
        "team.info" => directory::team_info(workspace, params),
        "team.profile.get" => directory::team_profile(workspace, params),
        "bots.info" => directory::bots_info(workspace, params),
        "emoji.list" => directory::emoji_list(workspace, params),
        "users.lookupByEmail" => directory::lookup_by_email(workspace, params),
        "users.getPresence" => directory::get_presence(workspace, params),
        "users.setPresence" => directory::set_presence(workspace, params),
        "users.profile.get" => directory::profile_get(workspace, params),
        "users.identity" => directory::identity(workspace, params),
        "dnd.info" => directory::dnd_info(workspace, params),
        "dnd.teamInfo" => directory::dnd_team_info(workspace, params),
        "search.messages" => directory::search_messages(workspace, params),
        "users.profile.set" => personal::profile_set(workspace, params),
        "stars.add" => personal::star(workspace, params, true),
        "stars.remove" => personal::star(workspace, params, false),
        "stars.list" => personal::stars_list(workspace, params),
        "files.sharedPublicURL" => personal::public_url(workspace, params, true),
        "files.revokePublicURL" => personal::public_url(workspace, params, false),
        "dnd.setSnooze" => personal::set_snooze(workspace, params),
        "dnd.endSnooze" => personal::end_snooze(workspace, params),
        "reminders.add" => personal::reminder_add(workspace, params),
        "reminders.list" => personal::reminders_list(workspace, params),
        "reminders.delete" => personal::reminder_delete(workspace, params),
        _ => Err("unknown_method"),
    }
}

/// Slack's token rules: app tokens only for `apps.connections.open`, which takes nothing else;
/// user tokens only for the methods of [`personal::USER_ONLY`].
fn check_token(method: &str, kind: TokenKind) -> Result<(), &'static str> {
    match (method, kind) {
        ("api.test", _) => Ok(()),
        (_, TokenKind::Missing) => Err("not_authed"),
        (_, TokenKind::Other) => Err("invalid_auth"),
        ("apps.connections.open", TokenKind::App) => Ok(()),
        ("apps.connections.open", _) | (_, TokenKind::App) => Err("not_allowed_token_type"),
        (method, TokenKind::Bot) if personal::USER_ONLY.contains(&method) => {
            Err("not_allowed_token_type")
        }
        _ => Ok(()),
    }
}

/// Configured and revoked tokens: `token_revoked` for a revoked one, `invalid_auth` for one the
/// workspace does not accept ([`super::config::AuthConfig::accepts`]).
fn check_known_token(
    workspace: &Workspace,
    method: &str,
    token: Option<&str>,
) -> Result<(), &'static str> {
    let Some(token) = token.filter(|_| method != "api.test") else {
        return Ok(());
    };
    if workspace.revoked.contains(token) {
        return Err("token_revoked");
    }
    if workspace.config.auth.accepts(token) {
        Ok(())
    } else {
        Err("invalid_auth")
    }
}

/// `auth.revoke`: the calling token stops working (not with `test=true`).
fn auth_revoke(workspace: &mut Workspace, params: &Params) -> Answer {
    if !params.flag("test")
        && let Some(token) = &params.token
    {
        workspace.revoked.insert(token.clone());
    }
    Ok(object(json!({ "revoked": !params.flag("test") })))
}

fn auth_test(workspace: &Workspace, params: &Params) -> Answer {
    let config = &workspace.config;
    let mut answer = object(json!({
        "url": format!("https://{}.slack.com/", config.team.domain),
        "team": config.team.name,
        "user": config.bot.name,
        "team_id": config.team.id,
        "user_id": config.bot.user_id,
        "is_enterprise_install": false,
    }));
    if params.token_kind() == TokenKind::Bot {
        answer.insert("bot_id".into(), json!(config.bot.bot_id));
    }
    Ok(answer)
}

/// The members of a JSON object literal.
pub(crate) fn object(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        _ => Map::new(),
    }
}

/// Checks `text` and `blocks` against Slack's limits and shapes.
fn check_content(params: &Params) -> Result<(), &'static str> {
    if params
        .str("text")
        .is_some_and(|text| text.chars().count() > MAX_TEXT_CHARS)
    {
        return Err("msg_too_long");
    }
    if let Some(blocks) = params.get("blocks") {
        let blocks = blocks.as_array().ok_or("invalid_blocks")?;
        if blocks.len() > MAX_BLOCKS
            || blocks
                .iter()
                .any(|block| !block.get("type").is_some_and(Value::is_string))
        {
            return Err("invalid_blocks");
        }
    }
    Ok(())
}
