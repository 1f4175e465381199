//! Answers an outside probe found unlike Slack's: an unknown emoji name, a text file's type, an
//! ephemeral message to a user outside the channel, a file's shares, and the methods Slack
//! answers a bot token with `not_allowed_token_type` and a user token with their result.

use crate::slack_support;

use serde_json::{Value, json};
use ski_mocks::slack::{Config, FakeSlack};
use slack_support::{api, raw};

const GENERAL: &str = "C0000000001";
const BOT: &str = "xoxb-fake-bot";
const USER: &str = "xoxp-fake-user";

async fn call_as(slack: &FakeSlack, token: &str, method: &str, body: Value) -> Value {
    api(
        &format!("{}/{method}", slack.api_base_url()),
        Some("application/json"),
        Some(token),
        body.to_string().as_bytes(),
    )
    .await
}

async fn call(slack: &FakeSlack, method: &str, body: Value) -> Value {
    call_as(slack, BOT, method, body).await
}

async fn post(slack: &FakeSlack) -> String {
    let posted = call(
        slack,
        "chat.postMessage",
        json!({"channel": GENERAL, "text": "hi"}),
    )
    .await;
    posted["ts"].as_str().expect("ts").to_string()
}

#[tokio::test]
async fn an_unknown_emoji_name_is_invalid_name_and_a_known_one_works() {
    let slack = FakeSlack::start(Config::default()).await.expect("start");
    let ts = post(&slack).await;
    let unknown = call(
        &slack,
        "reactions.add",
        json!({"channel": GENERAL, "timestamp": ts, "name": "no_such_emoji_xyz"}),
    )
    .await;
    assert_eq!(unknown["error"], json!("invalid_name"), "{unknown}");
    for name in [
        "eyes",
        "white_check_mark",
        "+1",
        "thumbsup::skin-tone-2",
        "ski",
    ] {
        let known = call(
            &slack,
            "reactions.add",
            json!({"channel": GENERAL, "timestamp": ts, "name": name}),
        )
        .await;
        assert_eq!(known["ok"], json!(true), "{name}: {known}");
    }
}

/// Uploads `name` with `content` through files v2, shared to #general; answers the file id.
async fn upload(slack: &FakeSlack, name: &str, content: &[u8]) -> String {
    let url = call(
        slack,
        "files.getUploadURLExternal",
        json!({"filename": name, "length": content.len()}),
    )
    .await;
    let upload_url = url["upload_url"].as_str().expect("upload_url");
    let (status, _) = raw("POST", upload_url, None, None, content).await;
    assert_eq!(status, 200);
    let id = url["file_id"].as_str().expect("file_id").to_string();
    let done = call(
        slack,
        "files.completeUploadExternal",
        json!({"files": [{"id": id}], "channel_id": GENERAL}),
    )
    .await;
    assert_eq!(done["ok"], json!(true), "{done}");
    id
}

#[tokio::test]
async fn a_file_takes_its_type_from_its_name_and_lists_its_shares() {
    let slack = FakeSlack::start(Config::default()).await.expect("start");
    let id = upload(&slack, "notes.txt", b"remember").await;
    let info = call(&slack, "files.info", json!({"file": id})).await;
    let file = &info["file"];
    assert_eq!(file["mimetype"], json!("text/plain"), "{file}");
    assert_eq!(file["filetype"], json!("text"), "{file}");
    let shares = &file["shares"]["public"][GENERAL];
    let posted = slack.messages(GENERAL, None);
    assert_eq!(shares[0]["ts"], json!(posted[0].ts()), "{file}");
    assert_eq!(file["channels"], json!([GENERAL]), "{file}");

    let image = upload(&slack, "chart.png", b"\x89PNG").await;
    let info = call(&slack, "files.info", json!({"file": image})).await;
    assert_eq!(info["file"]["mimetype"], json!("image/png"));
    assert_eq!(info["file"]["filetype"], json!("png"));
}

#[tokio::test]
async fn an_ephemeral_to_a_user_outside_the_channel_is_user_not_in_channel() {
    let slack = FakeSlack::start(Config::default()).await.expect("start");
    let answer = call(
        &slack,
        "chat.postEphemeral",
        json!({"channel": GENERAL, "user": "U0NOTHERE1", "text": "psst"}),
    )
    .await;
    assert_eq!(answer["error"], json!("user_not_in_channel"), "{answer}");
}

#[tokio::test]
async fn user_token_methods_refuse_a_bot_token_and_serve_a_user_token() {
    let slack = FakeSlack::start(Config::default()).await.expect("start");
    let ts = post(&slack).await;
    let calls = [
        (
            "users.profile.set",
            json!({"profile": {"status_text": "away"}}),
        ),
        ("stars.add", json!({"channel": GENERAL, "timestamp": ts})),
        ("stars.list", json!({})),
        ("stars.remove", json!({"channel": GENERAL, "timestamp": ts})),
        ("dnd.setSnooze", json!({"num_minutes": 10})),
        ("dnd.endSnooze", json!({})),
        (
            "reminders.add",
            json!({"text": "stand up", "time": "in 5 minutes"}),
        ),
        ("reminders.list", json!({})),
    ];
    for (method, body) in &calls {
        let refused = call(&slack, method, body.clone()).await;
        assert_eq!(
            refused["error"],
            json!("not_allowed_token_type"),
            "{method}: {refused}"
        );
    }
    for (method, body) in &calls {
        let served = call_as(&slack, USER, method, body.clone()).await;
        assert_eq!(served["ok"], json!(true), "{method}: {served}");
    }
    let profile = call_as(&slack, USER, "users.profile.get", json!({})).await;
    assert_eq!(
        profile["profile"]["status_text"],
        json!("away"),
        "{profile}"
    );
    let snooze = call_as(&slack, USER, "dnd.info", json!({})).await;
    assert_eq!(snooze["snooze_enabled"], json!(false), "ended: {snooze}");

    let added = call_as(
        &slack,
        USER,
        "reminders.add",
        json!({"text": "lunch", "time": "1900000000"}),
    )
    .await;
    let reminder = added["reminder"]["id"]
        .as_str()
        .expect("reminder id")
        .to_string();
    let listed = call_as(&slack, USER, "reminders.list", json!({})).await;
    assert!(
        listed["reminders"]
            .as_array()
            .is_some_and(|all| all.iter().any(|r| r["id"] == json!(reminder))),
        "{listed}"
    );
    let deleted = call_as(
        &slack,
        USER,
        "reminders.delete",
        json!({"reminder": reminder}),
    )
    .await;
    assert_eq!(deleted["ok"], json!(true), "{deleted}");
    let again = call_as(
        &slack,
        USER,
        "reminders.delete",
        json!({"reminder": reminder}),
    )
    .await;
    assert_eq!(again["error"], json!("not_found"), "{again}");
    let refused = call(&slack, "reminders.delete", json!({"reminder": "Rm1"})).await;
    assert_eq!(refused["error"], json!("not_allowed_token_type"));

    let id = upload(&slack, "public.txt", b"share me").await;
    let shared = call_as(&slack, USER, "files.sharedPublicURL", json!({"file": id})).await;
    assert_eq!(shared["file"]["public_url_shared"], json!(true), "{shared}");
    assert!(shared["file"]["permalink_public"].is_string(), "{shared}");
    let revoked = call_as(&slack, USER, "files.revokePublicURL", json!({"file": id})).await;
    assert_eq!(
        revoked["file"]["public_url_shared"],
        json!(false),
        "{revoked}"
    );
    for method in ["files.sharedPublicURL", "files.revokePublicURL"] {
        let refused = call(&slack, method, json!({"file": id})).await;
        assert_eq!(
            refused["error"],
            json!("not_allowed_token_type"),
            "{method}"
        );
    }
}
