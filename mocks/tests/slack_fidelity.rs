//! The fake behaves as Slack's documentation says where a real bot notices first: live `ts`
//! values, threads, cursors, and a store that stays bounded through a long run.

use crate::slack_support;

use std::time::{Duration, SystemTime};

use futures::StreamExt;
use serde_json::{Value, json};
use ski_mocks::slack::{Config, FakeSlack};
use slack_support::api;

const GENERAL: &str = "C0000000001";
const WAIT: Duration = Duration::from_secs(10);

/// Calls a Web API method with a JSON body and a bot token.
async fn call(slack: &FakeSlack, method: &str, body: Value) -> Value {
    let url = format!("{}/{method}", slack.api_base_url());
    api(
        &url,
        Some("application/json"),
        Some("xoxb-1"),
        body.to_string().as_bytes(),
    )
    .await
}

async fn post(slack: &FakeSlack, text: &str) -> String {
    let posted = call(
        slack,
        "chat.postMessage",
        json!({"channel": GENERAL, "text": text}),
    )
    .await;
    assert_eq!(posted["ok"], true, "{posted}");
    posted["ts"].as_str().expect("ts").to_string()
}

fn unix_seconds() -> u64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .expect("after 1970")
        .as_secs()
}

#[tokio::test]
async fn ts_values_come_from_the_wall_clock() {
    let slack = FakeSlack::start(Config::default()).await.expect("start");
    let before = unix_seconds();
    let first = post(&slack, "now").await;
    let second = post(&slack, "right after").await;
    let after = unix_seconds();
    let seconds: u64 = first
        .split_once('.')
        .and_then(|(seconds, _)| seconds.parse().ok())
        .expect("ts seconds");
    assert!(
        (before..=after).contains(&seconds),
        "ts {first} is not between {before} and {after}"
    );
    assert!(second > first, "ts values increase: {first} then {second}");
    let recent = call(
        &slack,
        "conversations.history",
        json!({"channel": GENERAL, "oldest": (before - 3600).to_string()}),
    )
    .await;
    assert_eq!(
        recent["messages"].as_array().map(Vec::len),
        Some(2),
        "a history query from an hour ago finds what was just posted: {recent}"
    );
}

#[tokio::test]
async fn a_thread_ts_naming_no_message_is_accepted_as_slack_does() {
    let slack = FakeSlack::start(Config::default()).await.expect("start");
    let answer = call(
        &slack,
        "chat.postMessage",
        json!({"channel": GENERAL, "text": "reply", "thread_ts": "1699999999.000000"}),
    )
    .await;
    assert_eq!(answer["ok"], true, "{answer}");
    assert_eq!(answer["message"]["thread_ts"], "1699999999.000000");
    let thread = slack.messages(GENERAL, Some("1699999999.000000"));
    assert_eq!(thread.len(), 1, "the reply is kept in its thread");
    assert!(
        slack.messages(GENERAL, None).is_empty(),
        "a reply is not in the channel's history"
    );
}

#[tokio::test]
async fn cursors_are_opaque_and_stable_across_a_post_between_pages() {
    let slack = FakeSlack::start(Config::default()).await.expect("start");
    for text in ["m0", "m1", "m2", "m3"] {
        post(&slack, text).await;
    }
    let first = call(
        &slack,
        "conversations.history",
        json!({"channel": GENERAL, "limit": 2}),
    )
    .await;
    let texts = |page: &Value| -> Vec<String> {
        page["messages"]
            .as_array()
            .map(|messages| {
                messages
                    .iter()
                    .map(|m| m["text"].as_str().unwrap_or_default().to_string())
                    .collect()
            })
            .unwrap_or_default()
    };
    assert_eq!(texts(&first), ["m3", "m2"]);
    let cursor = first["response_metadata"]["next_cursor"]
        .as_str()
        .expect("cursor")
        .to_string();
    assert!(
        cursor.parse::<u64>().is_err(),
        "the cursor is opaque, not an offset: {cursor}"
    );
    post(&slack, "m4").await;
    let second = call(
        &slack,
        "conversations.history",
        json!({"channel": GENERAL, "limit": 2, "cursor": cursor}),
    )
    .await;
    assert_eq!(
        texts(&second),
        ["m1", "m0"],
        "a post between pages repeats nothing"
    );
    assert_eq!(second["has_more"], false);
    let bad = call(
        &slack,
        "conversations.history",
        json!({"channel": GENERAL, "cursor": "not-a-cursor"}),
    )
    .await;
    assert_eq!(bad["error"], "invalid_cursor");
}

#[tokio::test]
async fn retention_bounds_the_store_and_the_request_log() {
    let mut config = Config::default();
    config.retention.max_messages = 3;
    config.retention.max_requests = 2;
    let slack = FakeSlack::start(config).await.expect("start");
    for index in 0..5 {
        post(&slack, &format!("m{index}")).await;
    }
    let kept: Vec<String> = slack
        .messages(GENERAL, None)
        .iter()
        .map(|m| m.text().to_string())
        .collect();
    assert_eq!(kept, ["m2", "m3", "m4"], "the oldest are forgotten first");
    assert_eq!(slack.requests().len(), 2, "the request log is bounded");
    let seen = slack
        .wait_for_requests("chat.postMessage", 5, WAIT)
        .await
        .expect("counts stay exact when records are forgotten");
    assert_eq!(seen.len(), 2);
}

#[tokio::test]
async fn a_wait_sees_a_message_edited_after_it_began() {
    let slack = FakeSlack::start(Config::default()).await.expect("start");
    let ts = post(&slack, "draft").await;
    let waiting = slack.wait_for_message(|m| m.text() == "final", WAIT);
    let edit = async {
        let answer = call(
            &slack,
            "chat.update",
            json!({"channel": GENERAL, "ts": ts, "text": "final"}),
        )
        .await;
        assert_eq!(answer["ok"], true, "{answer}");
    };
    let (found, ()) = tokio::join!(waiting, edit);
    assert_eq!(found.expect("the edit is seen").ts(), ts);
}

#[tokio::test]
async fn a_post_to_a_user_id_opens_a_direct_message() {
    let slack = FakeSlack::start(Config::default()).await.expect("start");
    let posted = call(
        &slack,
        "chat.postMessage",
        json!({"channel": "U0000000002", "text": "hello alice"}),
    )
    .await;
    assert_eq!(posted["ok"], true, "{posted}");
    let dm = posted["channel"].as_str().expect("channel").to_string();
    assert!(dm.starts_with('D'), "an IM channel id: {dm}");
    let opened = call(
        &slack,
        "conversations.open",
        json!({"users": "U0000000002", "return_im": true}),
    )
    .await;
    assert_eq!(
        opened["channel"]["id"],
        dm.as_str(),
        "the same IM: {opened}"
    );
    assert_eq!(opened["channel"]["is_im"], true);
    assert_eq!(opened["channel"]["user"], "U0000000002");
    let group = call(
        &slack,
        "conversations.open",
        json!({"users": "U0000000002,U0000000003"}),
    )
    .await;
    let group = group["channel"]["id"]
        .as_str()
        .expect("mpim id")
        .to_string();
    let info = call(&slack, "conversations.info", json!({"channel": group})).await;
    assert_eq!(info["channel"]["is_mpim"], true, "{info}");
    assert_eq!(slack.messages(&dm, None)[0].text(), "hello alice");
    let ims = call(&slack, "users.conversations", json!({"types": "im,mpim"})).await;
    assert_eq!(ims["channels"].as_array().map(Vec::len), Some(2), "{ims}");
}

/// Slack's `conversations.open` opens a conversation once; opening it again (by its users or its
/// id) resumes it and says so with `no_op` and `already_open`.
#[tokio::test]
async fn opening_an_open_direct_message_again_says_already_open() {
    let slack = FakeSlack::start(Config::default()).await.expect("start");
    let first = call(
        &slack,
        "conversations.open",
        json!({"users": "U0000000002"}),
    )
    .await;
    assert_eq!(first["ok"], true, "{first}");
    assert_eq!(first.get("already_open"), None, "a new DM: {first}");
    let dm = first["channel"]["id"].as_str().expect("the DM").to_string();
    for again in [json!({"users": "U0000000002"}), json!({"channel": dm})] {
        let resumed = call(&slack, "conversations.open", again).await;
        assert_eq!(resumed["channel"]["id"], dm.as_str(), "{resumed}");
        assert_eq!(resumed["no_op"], true, "{resumed}");
        assert_eq!(resumed["already_open"], true, "{resumed}");
    }
    // Closed, it opens anew.
    call(&slack, "conversations.close", json!({"channel": dm})).await;
    let reopened = call(
        &slack,
        "conversations.open",
        json!({"users": "U0000000002"}),
    )
    .await;
    assert_eq!(reopened["channel"]["id"], dm.as_str(), "{reopened}");
    assert_eq!(reopened.get("already_open"), None, "{reopened}");
}

#[tokio::test]
async fn membership_is_enforced_and_changes_send_their_events() {
    let slack = FakeSlack::start(Config::default()).await.expect("start");
    let url = format!("{}?ticket=t", slack.socket_mode_url());
    let (mut socket, _) = tokio_tungstenite::connect_async(url.as_str())
        .await
        .expect("socket mode");
    slack.wait_for_connections(1, WAIT).await.expect("hello");
    let created = call(&slack, "conversations.create", json!({"name": "ops"})).await;
    let ops = created["channel"]["id"].as_str().expect("id").to_string();
    assert_eq!(created["channel"]["is_member"], true, "{created}");
    let taken = call(&slack, "conversations.create", json!({"name": "ops"})).await;
    assert_eq!(taken["error"], "name_taken");
    let left = call(&slack, "conversations.leave", json!({"channel": ops})).await;
    assert_eq!(left["ok"], true, "{left}");
    let refused = call(
        &slack,
        "chat.postMessage",
        json!({"channel": ops, "text": "not a member"}),
    )
    .await;
    assert_eq!(refused["error"], "not_in_channel");
    let info = call(&slack, "conversations.info", json!({"channel": ops})).await;
    assert_eq!(info["channel"]["is_member"], false);
    let joined = call(&slack, "conversations.join", json!({"channel": ops})).await;
    assert_eq!(joined["channel"]["is_member"], true, "{joined}");
    let invited = call(
        &slack,
        "conversations.invite",
        json!({"channel": ops, "users": "U0000000002"}),
    )
    .await;
    assert_eq!(invited["ok"], true, "{invited}");
    let again = call(
        &slack,
        "conversations.invite",
        json!({"channel": ops, "users": "U0000000002"}),
    )
    .await;
    assert_eq!(again["error"], "already_in_channel");
    let outsider = call(
        &slack,
        "chat.postEphemeral",
        json!({"channel": ops, "user": "U0000000003", "text": "psst"}),
    )
    .await;
    assert_eq!(outsider["error"], "user_not_in_channel");
    let archived = call(&slack, "conversations.archive", json!({"channel": ops})).await;
    assert_eq!(archived["ok"], true, "{archived}");
    let closed = call(
        &slack,
        "chat.postMessage",
        json!({"channel": ops, "text": "archived"}),
    )
    .await;
    assert_eq!(closed["error"], "is_archived");
    let mut wanted = vec![
        "channel_created",
        "member_left_channel",
        "member_joined_channel",
        "channel_archive",
    ];
    while !wanted.is_empty() {
        let frame = tokio::time::timeout(WAIT, socket.next())
            .await
            .unwrap_or_else(|_| panic!("these events are never sent: {wanted:?}"))
            .expect("the socket stays open")
            .expect("a frame");
        let Ok(text) = frame.into_text() else {
            continue;
        };
        let frame: Value = serde_json::from_str(text.as_str()).unwrap_or_default();
        let kind = frame["payload"]["event"]["type"]
            .as_str()
            .unwrap_or_default();
        wanted.retain(|wanted| *wanted != kind);
    }
}

#[tokio::test]
async fn a_bot_token_deletes_only_the_bots_own_messages() {
    let slack = FakeSlack::start(Config::default()).await.expect("start");
    let human = slack
        .user_message(ski_mocks::slack::UserMessage {
            channel: GENERAL.into(),
            thread_ts: None,
            text: "mine".into(),
            user: "U0000000002".into(),
        })
        .expect("user message");
    let ts = human.ts.expect("ts");
    let refused = call(&slack, "chat.delete", json!({"channel": GENERAL, "ts": ts})).await;
    assert_eq!(refused["error"], "cant_delete_message");
    assert_eq!(slack.messages(GENERAL, None).len(), 1, "nothing deleted");
    let own = post(&slack, "bot's own").await;
    let deleted = call(
        &slack,
        "chat.delete",
        json!({"channel": GENERAL, "ts": own}),
    )
    .await;
    assert_eq!(deleted["ok"], true, "{deleted}");
}

#[tokio::test]
async fn configured_tokens_are_checked_and_revocation_works() {
    let mut config = Config::default();
    config.auth.tokens = vec!["xoxb-known".into()];
    let slack = FakeSlack::start(config).await.expect("start");
    let auth = |token: &'static str| {
        let url = format!("{}/auth.test", slack.api_base_url());
        async move { api(&url, Some("application/json"), Some(token), b"{}").await }
    };
    assert_eq!(auth("xoxb-known").await["ok"], true);
    assert_eq!(auth("xoxb-stranger").await["error"], "invalid_auth");
    let control = format!("{}/revoke_token", slack.control_url());
    let revoked = api(
        &control,
        Some("application/json"),
        None,
        json!({"token": "xoxb-known"}).to_string().as_bytes(),
    )
    .await;
    assert_eq!(revoked["ok"], true, "{revoked}");
    assert_eq!(auth("xoxb-known").await["error"], "token_revoked");

    let permissive = FakeSlack::start(Config::default()).await.expect("start");
    let url = format!("{}/auth.test", permissive.api_base_url());
    let any = api(&url, Some("application/json"), Some("xoxb-anything"), b"{}").await;
    assert_eq!(
        any["ok"], true,
        "with no tokens configured any bot token works"
    );
}

#[tokio::test]
async fn rate_limits_answer_429_with_retry_after_when_enabled() {
    let mut config = Config::default();
    config.rate_limits.enabled = true;
    let slack = FakeSlack::start(config).await.expect("start");
    let url = format!("{}/apps.connections.open", slack.api_base_url());
    let first = api(&url, Some("application/json"), Some("xapp-1"), b"{}").await;
    assert_eq!(
        first["ok"], true,
        "Tier 1 allows one call a minute: {first}"
    );
    let (status, body) = slack_support::raw(
        "POST",
        &url,
        Some("application/json"),
        Some("xapp-1"),
        b"{}",
    )
    .await;
    assert_eq!(status, 429, "{body}");
    assert!(body.contains("ratelimited"), "{body}");
    let requests = slack.requests();
    assert_eq!(requests.last().map(|r| r.status), Some(429));
    let other = call(&slack, "auth.test", json!({})).await;
    assert_eq!(other["ok"], true, "limits count per method");
}

#[tokio::test]
async fn the_control_api_drives_a_users_edits_deletes_joins_and_home_tab() {
    let slack = FakeSlack::start(Config::default()).await.expect("start");
    let url = format!("{}?ticket=t", slack.socket_mode_url());
    let (mut socket, _) = tokio_tungstenite::connect_async(url.as_str())
        .await
        .expect("socket mode");
    slack.wait_for_connections(1, WAIT).await.expect("hello");
    let control = |operation: &'static str, body: Value| {
        let url = format!("{}/{operation}", slack.control_url());
        async move {
            api(
                &url,
                Some("application/json"),
                None,
                body.to_string().as_bytes(),
            )
            .await
        }
    };
    let alice = "U0000000002";
    let written = control(
        "user_message",
        json!({"user": alice, "channel": GENERAL, "text": "first"}),
    )
    .await;
    let ts = written["ts"].as_str().expect("ts").to_string();
    let edited = control(
        "user_edit",
        json!({"user": alice, "channel": GENERAL, "ts": ts, "text": "second"}),
    )
    .await;
    assert_eq!(edited["ok"], true, "{edited}");
    assert_eq!(slack.messages(GENERAL, None)[0].text(), "second");
    let reacted = control(
        "user_reaction",
        json!({"user": alice, "channel": GENERAL, "ts": ts, "name": "eyes"}),
    )
    .await;
    assert_eq!(reacted["ok"], true, "{reacted}");
    let deleted = control(
        "user_delete",
        json!({"user": alice, "channel": GENERAL, "ts": ts}),
    )
    .await;
    assert_eq!(deleted["ok"], true, "{deleted}");
    assert!(slack.messages(GENERAL, None).is_empty());
    for operation in ["user_leave", "user_join"] {
        let answer = control(operation, json!({"user": alice, "channel": GENERAL})).await;
        assert_eq!(answer["ok"], true, "{operation}: {answer}");
    }
    let home = control("app_home_opened", json!({"user": alice})).await;
    assert_eq!(home["ok"], true, "{home}");
    let mut wanted = vec![
        "message_changed",
        "reaction_added",
        "message_deleted",
        "member_left_channel",
        "member_joined_channel",
        "app_home_opened",
    ];
    while !wanted.is_empty() {
        let frame = tokio::time::timeout(WAIT, socket.next())
            .await
            .unwrap_or_else(|_| panic!("these events are never sent: {wanted:?}"))
            .expect("the socket stays open")
            .expect("a frame");
        let Ok(text) = frame.into_text() else {
            continue;
        };
        let frame: Value = serde_json::from_str(text.as_str()).unwrap_or_default();
        let event = &frame["payload"]["event"];
        let kind = event["subtype"]
            .as_str()
            .or_else(|| event["type"].as_str())
            .unwrap_or_default();
        wanted.retain(|wanted| *wanted != kind);
    }
}

#[tokio::test]
async fn retention_bounds_the_envelopes_kept_for_their_acks() {
    let mut config = Config::default();
    config.retention.max_frames = 2;
    let slack = FakeSlack::start(config).await.expect("start");
    let sent: Vec<String> = (0..3)
        .map(|index| {
            slack
                .raw_envelope(
                    ski_mocks::slack::EnvelopeKind::EventsApi,
                    json!({ "n": index }),
                )
                .envelope_id
        })
        .collect();
    let forgotten = slack.await_ack(&sent[0], Duration::from_millis(1)).await;
    assert!(
        matches!(
            forgotten,
            Err(ski_mocks::slack::FakeSlackError::UnknownEnvelope(_))
        ),
        "the oldest envelope is forgotten: {forgotten:?}"
    );
    assert!(
        slack.ack(&sent[2]).is_none(),
        "the newest is kept, not acked"
    );
    let kept = slack.await_ack(&sent[2], Duration::from_millis(1)).await;
    assert!(
        matches!(kept, Err(ski_mocks::slack::FakeSlackError::Timeout(..))),
        "the newest is still awaited: {kept:?}"
    );
}
