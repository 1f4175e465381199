//! The Web API methods the fake serves, with how fully and the error codes each models: the
//! table behind dispatch (a method not listed answers `unknown_method`), the rate-limit tiers,
//! and the coverage matrix `ski-fake-slack methods --markdown` prints.

/// How fully a method is modelled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Support {
    /// Slack's documented arguments, fields and errors for what the fake keeps.
    Supported,
    /// Answers in Slack's shape, with state the fake does not keep or use (noted).
    Partial(&'static str),
}

/// One method: its name, Slack's rate-limit tier (1 to 4; 0 for special limits) and the error
/// codes it answers besides the token errors every method shares.
#[derive(Debug, Clone, Copy)]
pub struct Method {
    pub name: &'static str,
    pub support: Support,
    pub tier: u8,
    pub errors: &'static [&'static str],
}

const fn full(name: &'static str, tier: u8, errors: &'static [&'static str]) -> Method {
    Method {
        name,
        support: Support::Supported,
        tier,
        errors,
    }
}

const fn partial(
    name: &'static str,
    tier: u8,
    note: &'static str,
    errors: &'static [&'static str],
) -> Method {
    Method {
        name,
        support: Support::Partial(note),
        tier,
        errors,
    }
}

/// Every method, by family.
pub const METHODS: &[Method] = &[
    full("api.test", 4, &[]),
    full("auth.test", 4, &[]),
    full("auth.revoke", 3, &[]),
    full("apps.connections.open", 1, &["not_allowed_token_type"]),
    full(
        "chat.postMessage",
        0,
        &[
            "channel_not_found",
            "not_in_channel",
            "is_archived",
            "msg_too_long",
            "no_text",
            "invalid_blocks",
            "user_not_found",
            "too_many_users",
        ],
    ),
    full(
        "chat.update",
        3,
        &[
            "channel_not_found",
            "message_not_found",
            "cant_update_message",
            "msg_too_long",
            "invalid_blocks",
        ],
    ),
    full(
        "chat.delete",
        3,
        &[
            "channel_not_found",
            "message_not_found",
            "cant_delete_message",
        ],
    ),
    full(
        "chat.postEphemeral",
        4,
        &[
            "channel_not_found",
            "user_not_found",
            "user_not_in_channel",
            "msg_too_long",
            "no_text",
            "invalid_blocks",
        ],
    ),
    full(
        "chat.getPermalink",
        4,
        &["channel_not_found", "message_not_found"],
    ),
    full(
        "chat.meMessage",
        3,
        &[
            "channel_not_found",
            "not_in_channel",
            "is_archived",
            "no_text",
        ],
    ),
    partial(
        "chat.scheduleMessage",
        3,
        "kept and listed, never sent",
        &[
            "channel_not_found",
            "not_in_channel",
            "is_archived",
            "invalid_time",
            "time_in_past",
            "time_too_far",
            "msg_too_long",
            "invalid_blocks",
        ],
    ),
    full("chat.scheduledMessages.list", 3, &["channel_not_found"]),
    full(
        "chat.deleteScheduledMessage",
        3,
        &["channel_not_found", "invalid_scheduled_message_id"],
    ),
    full(
        "chat.unfurl",
        3,
        &[
            "channel_not_found",
            "cannot_find_message",
            "invalid_unfurls_format",
        ],
    ),
    full(
        "chat.startStream",
        0,
        &[
            "channel_not_found",
            "not_in_channel",
            "is_archived",
            "invalid_arguments",
        ],
    ),
    full(
        "chat.appendStream",
        0,
        &[
            "channel_not_found",
            "message_not_found",
            "message_not_in_streaming_state",
            "invalid_arguments",
        ],
    ),
    full(
        "chat.stopStream",
        0,
        &[
            "channel_not_found",
            "message_not_found",
            "message_not_in_streaming_state",
        ],
    ),
    partial(
        "assistant.threads.setStatus",
        3,
        "accepted, not shown",
        &["channel_not_found", "invalid_arguments"],
    ),
    partial(
        "assistant.threads.setSuggestedPrompts",
        3,
        "accepted, not shown",
        &["channel_not_found", "invalid_arguments"],
    ),
    partial(
        "assistant.threads.setTitle",
        3,
        "accepted, not shown",
        &["channel_not_found", "invalid_arguments"],
    ),
    full(
        "reactions.add",
        3,
        &[
            "channel_not_found",
            "message_not_found",
            "invalid_name",
            "already_reacted",
        ],
    ),
    full(
        "reactions.remove",
        3,
        &[
            "channel_not_found",
            "message_not_found",
            "invalid_name",
            "no_reaction",
        ],
    ),
    full(
        "reactions.get",
        3,
        &[
            "channel_not_found",
            "message_not_found",
            "no_item_specified",
        ],
    ),
    full("reactions.list", 2, &["user_not_found"]),
    full(
        "pins.add",
        2,
        &[
            "channel_not_found",
            "message_not_found",
            "no_item_specified",
            "already_pinned",
        ],
    ),
    full(
        "pins.remove",
        2,
        &[
            "channel_not_found",
            "message_not_found",
            "no_item_specified",
            "no_pin",
        ],
    ),
    full("pins.list", 2, &["channel_not_found"]),
    full(
        "bookmarks.add",
        2,
        &[
            "channel_not_found",
            "invalid_title",
            "invalid_type",
            "invalid_link",
        ],
    ),
    full("bookmarks.edit", 2, &["channel_not_found", "not_found"]),
    full("bookmarks.remove", 2, &["channel_not_found", "not_found"]),
    full("bookmarks.list", 3, &["channel_not_found"]),
    full("conversations.info", 3, &["channel_not_found"]),
    full(
        "conversations.history",
        3,
        &[
            "channel_not_found",
            "invalid_limit",
            "invalid_cursor",
            "invalid_ts_oldest",
            "invalid_ts_latest",
        ],
    ),
    full(
        "conversations.replies",
        3,
        &[
            "channel_not_found",
            "thread_not_found",
            "invalid_limit",
            "invalid_cursor",
            "invalid_ts_oldest",
            "invalid_ts_latest",
        ],
    ),
    full(
        "conversations.list",
        2,
        &["invalid_types", "invalid_limit", "invalid_cursor"],
    ),
    full(
        "conversations.members",
        4,
        &["channel_not_found", "invalid_limit", "invalid_cursor"],
    ),
    full(
        "conversations.join",
        3,
        &[
            "channel_not_found",
            "is_archived",
            "method_not_supported_for_channel_type",
        ],
    ),
    full(
        "conversations.leave",
        3,
        &[
            "channel_not_found",
            "is_archived",
            "cant_leave_general",
            "method_not_supported_for_channel_type",
        ],
    ),
    full(
        "conversations.invite",
        3,
        &[
            "channel_not_found",
            "is_archived",
            "no_user",
            "user_not_found",
            "cant_invite_self",
            "already_in_channel",
            "not_in_channel",
            "method_not_supported_for_channel_type",
        ],
    ),
    full(
        "conversations.kick",
        3,
        &[
            "channel_not_found",
            "is_archived",
            "user_not_found",
            "cant_kick_self",
            "cant_kick_from_general",
            "not_in_channel",
            "method_not_supported_for_channel_type",
        ],
    ),
    full(
        "conversations.create",
        2,
        &[
            "invalid_name_required",
            "invalid_name_maxlength",
            "invalid_name_specials",
            "name_taken",
        ],
    ),
    full(
        "conversations.archive",
        2,
        &[
            "channel_not_found",
            "already_archived",
            "cant_archive_general",
            "method_not_supported_for_channel_type",
        ],
    ),
    full(
        "conversations.unarchive",
        2,
        &[
            "channel_not_found",
            "not_archived",
            "method_not_supported_for_channel_type",
        ],
    ),
    full(
        "conversations.rename",
        2,
        &[
            "channel_not_found",
            "is_archived",
            "invalid_name_required",
            "invalid_name_maxlength",
            "invalid_name_specials",
            "name_taken",
            "method_not_supported_for_channel_type",
        ],
    ),
    full(
        "conversations.setTopic",
        3,
        &[
            "channel_not_found",
            "is_archived",
            "not_in_channel",
            "too_long",
        ],
    ),
    full(
        "conversations.setPurpose",
        3,
        &[
            "channel_not_found",
            "is_archived",
            "not_in_channel",
            "too_long",
        ],
    ),
    full(
        "conversations.open",
        3,
        &[
            "channel_not_found",
            "users_list_not_supplied",
            "user_not_found",
            "too_many_users",
            "method_not_supported_for_channel_type",
        ],
    ),
    full(
        "conversations.close",
        2,
        &["channel_not_found", "method_not_supported_for_channel_type"],
    ),
    partial(
        "conversations.mark",
        3,
        "accepted, read state not kept",
        &["channel_not_found", "invalid_timestamp", "not_in_channel"],
    ),
    full("users.info", 4, &["user_not_found"]),
    full("users.list", 2, &[]),
    full(
        "users.conversations",
        3,
        &[
            "user_not_found",
            "invalid_types",
            "invalid_limit",
            "invalid_cursor",
        ],
    ),
    full(
        "users.lookupByEmail",
        3,
        &["users_not_found", "invalid_arguments"],
    ),
    partial("users.getPresence", 3, "always active", &["user_not_found"]),
    partial(
        "users.setPresence",
        2,
        "accepted, not kept",
        &["invalid_presence"],
    ),
    full("users.profile.get", 4, &["user_not_found"]),
    full(
        "users.identity",
        4,
        &["not_allowed_token_type", "user_not_found"],
    ),
    full("team.info", 3, &["team_not_found"]),
    partial("team.profile.get", 3, "no custom fields", &[]),
    full("bots.info", 3, &["bot_not_found"]),
    partial("emoji.list", 2, "a fixed set", &[]),
    partial(
        "dnd.info",
        3,
        "never in do-not-disturb",
        &["user_not_found"],
    ),
    partial(
        "dnd.teamInfo",
        3,
        "never in do-not-disturb",
        &["invalid_arguments", "user_not_found"],
    ),
    full(
        "search.messages",
        2,
        &["not_allowed_token_type", "no_query"],
    ),
    full(
        "usergroups.create",
        2,
        &[
            "invalid_arguments",
            "name_already_exists",
            "handle_already_exists",
        ],
    ),
    full("usergroups.list", 2, &[]),
    full("usergroups.update", 2, &["no_such_subteam"]),
    full(
        "usergroups.enable",
        2,
        &["no_such_subteam", "already_enabled"],
    ),
    full(
        "usergroups.disable",
        2,
        &["no_such_subteam", "already_disabled"],
    ),
    full("usergroups.users.list", 2, &["no_such_subteam"]),
    full(
        "usergroups.users.update",
        2,
        &["no_such_subteam", "no_users_provided", "invalid_users"],
    ),
    full(
        "views.open",
        4,
        &[
            "invalid_arguments",
            "invalid_blocks",
            "invalid_trigger_id",
            "exchanged_trigger_id",
            "expired_trigger_id",
        ],
    ),
    full(
        "views.push",
        4,
        &[
            "invalid_arguments",
            "invalid_blocks",
            "invalid_trigger_id",
            "exchanged_trigger_id",
            "expired_trigger_id",
        ],
    ),
    full(
        "views.update",
        4,
        &[
            "invalid_arguments",
            "invalid_blocks",
            "not_found",
            "hash_conflict",
        ],
    ),
    full("views.publish", 4, &["invalid_arguments", "user_not_found"]),
    full("files.getUploadURLExternal", 4, &["invalid_arguments"]),
    full(
        "files.completeUploadExternal",
        4,
        &[
            "invalid_arguments",
            "channel_not_found",
            "thread_not_found",
            "file_not_found",
            "file_upload_not_complete",
        ],
    ),
    full("files.info", 4, &["file_not_found"]),
    full("files.list", 3, &[]),
    full("files.delete", 3, &["file_not_found"]),
    full("files.upload", 2, &["method_deprecated"]),
    full(
        "files.sharedPublicURL",
        3,
        &["not_allowed_token_type", "file_not_found"],
    ),
    full(
        "files.revokePublicURL",
        3,
        &["not_allowed_token_type", "file_not_found"],
    ),
    partial(
        "users.profile.set",
        3,
        "the fields are kept and read back by users.profile.get",
        &[
            "not_allowed_token_type",
            "invalid_profile",
            "invalid_arguments",
        ],
    ),
    full(
        "stars.add",
        2,
        &[
            "not_allowed_token_type",
            "already_starred",
            "channel_not_found",
            "message_not_found",
            "file_not_found",
        ],
    ),
    full(
        "stars.remove",
        2,
        &[
            "not_allowed_token_type",
            "not_starred",
            "channel_not_found",
            "message_not_found",
            "file_not_found",
        ],
    ),
    partial("stars.list", 3, "one page", &["not_allowed_token_type"]),
    full(
        "dnd.setSnooze",
        2,
        &["not_allowed_token_type", "invalid_arguments"],
    ),
    full(
        "dnd.endSnooze",
        2,
        &["not_allowed_token_type", "snooze_not_active"],
    ),
    partial(
        "reminders.add",
        2,
        "times as Unix seconds, seconds from now or `in N minutes/hours/days`; never fired",
        &[
            "not_allowed_token_type",
            "no_text",
            "cannot_parse",
            "user_not_found",
        ],
    ),
    full("reminders.list", 2, &["not_allowed_token_type"]),
    full(
        "reminders.delete",
        2,
        &["not_allowed_token_type", "not_found"],
    ),
];

/// The table entry of a method.
pub fn find(name: &str) -> Option<&'static Method> {
    METHODS.iter().find(|method| method.name == name)
}

/// The coverage matrix as Markdown: one row per method.
pub fn markdown() -> String {
    let supported = METHODS
        .iter()
        .filter(|method| method.support == Support::Supported)
        .count();
    let mut text = format!(
        "# ski-fake-slack Web API coverage\n\nGenerated by `ski-fake-slack methods --markdown`; \
         `mocks/tests/slack_methods.rs` fails when this file is not current. {} methods: {} \
         supported, {} partial. Every method also answers `not_authed`, `invalid_auth`, \
         `token_revoked` and `not_allowed_token_type` as its token requires, and `ratelimited` \
         (429 with `Retry-After`) when rate limits are on. Any other method answers \
         `unknown_method`.\n\n| Method | Support | Tier | Errors modelled |\n|---|---|---|---|\n",
        METHODS.len(),
        supported,
        METHODS.len() - supported
    );
    for method in METHODS {
        let support = match method.support {
            Support::Supported => "supported".to_string(),
            Support::Partial(note) => format!("partial: {note}"),
        };
        let tier = match method.tier {
            0 => "special".to_string(),
            tier => tier.to_string(),
        };
        let errors = if method.errors.is_empty() {
            "-".to_string()
        } else {
            method
                .errors
                .iter()
                .map(|error| format!("`{error}`"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        text.push_str(&format!(
            "| `{}` | {support} | {tier} | {errors} |\n",
            method.name
        ));
    }
    text
}
