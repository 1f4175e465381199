//! The fake behaves as Slack's documentation says where a real bot notices first: live `ts`
//! values, threads, cursors, and a store that stays bounded through a long run.

mod slack_support;

use std::time::{Duration, SystemTime};

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
