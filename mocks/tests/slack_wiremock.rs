//! A test's own wiremock `Mock`s on the fake Slack's `MockServer`: they answer what they match
//! before the fake's state does, their `expect`s are verified (on drop too), and what they do not
//! match reaches the fake unchanged.

use crate::slack_support;

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use ski_mocks::slack::{Config, FakeSlack};
use slack_morphism::errors::SlackClientError;
use slack_morphism::prelude::*;
use slack_support::{api, bot_token, morphism};
use wiremock::matchers::{body_string_contains, method, path};
use wiremock::{Mock, ResponseTemplate};

const GENERAL: &str = "C0000000001";

fn text(content: &str) -> SlackMessageContent {
    SlackMessageContent::new().with_text(content.into())
}

#[tokio::test]
async fn a_mock_fails_one_chat_update_and_the_fake_serves_the_next() {
    let slack = FakeSlack::start(Config::default()).await.expect("start");
    Mock::given(method("POST"))
        .and(path("/api/chat.update"))
        .respond_with(
            ResponseTemplate::new(200).set_body_json(json!({"ok": false, "error": "ratelimited"})),
        )
        .up_to_n_times(1)
        .expect(1)
        .named("the first chat.update is rate limited")
        .mount(slack.mock_server())
        .await;
    let client = morphism(&slack);
    let token = bot_token();
    let session = client.open_session(&token);
    let posted = session
        .chat_post_message(&SlackApiChatPostMessageRequest::new(
            GENERAL.into(),
            text("draft"),
        ))
        .await
        .expect("chat.postMessage");
    let update = SlackApiChatUpdateRequest::new(GENERAL.into(), text("final"), posted.ts.clone());

    let first = session.chat_update(&update).await;
    match first {
        Err(SlackClientError::ApiError(error)) => assert_eq!(error.code, "ratelimited"),
        other => panic!("the mock's answer was not seen: {other:?}"),
    }
    assert_eq!(
        slack.messages(GENERAL, None)[0].text(),
        "draft",
        "a request a mock answered must not reach the fake's state"
    );

    session.chat_update(&update).await.expect("second update");
    assert_eq!(slack.messages(GENERAL, None)[0].text(), "final");
    assert_eq!(
        slack
            .requests()
            .iter()
            .filter(|request| request.method == "chat.update")
            .count(),
        1,
        "the fake records only the update it served"
    );
    slack.mock_server().verify().await;
}

#[tokio::test]
#[should_panic(expected = "the bot posts exactly once")]
async fn an_unmet_expect_fails_when_the_fake_is_dropped() {
    let slack = FakeSlack::start(Config::default()).await.expect("start");
    Mock::given(path("/api/chat.postMessage"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({"ok": true})))
        .expect(1)
        .named("the bot posts exactly once")
        .mount(slack.mock_server())
        .await;
    let answer = api(
        &format!("{}/auth.test", slack.api_base_url()),
        None,
        Some("xoxb-fake-bot"),
        b"",
    )
    .await;
    assert_eq!(
        answer["ok"],
        json!(true),
        "auth.test is not mocked: {answer}"
    );
    drop(slack);
}

#[tokio::test]
async fn a_delayed_answer_and_a_body_matcher_leave_other_calls_to_the_fake() {
    let slack = FakeSlack::start(Config::default()).await.expect("start");
    let delay = Duration::from_millis(300);
    Mock::given(path("/api/users.info"))
        .and(body_string_contains("U0000000003"))
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_json(json!({"ok": false, "error": "user_not_found"}))
                .set_delay(delay),
        )
        .expect(1)
        .mount(slack.mock_server())
        .await;
    let url = format!("{}/users.info", slack.api_base_url());
    let form = Some("application/x-www-form-urlencoded");

    let started = Instant::now();
    let bob = api(&url, form, Some("xoxb-fake-bot"), b"user=U0000000003").await;
    assert!(
        started.elapsed() >= delay,
        "the mock's delay was not applied"
    );
    assert_eq!(bob, json!({"ok": false, "error": "user_not_found"}));

    let alice = api(&url, form, Some("xoxb-fake-bot"), b"user=U0000000002").await;
    assert_eq!(alice["ok"], json!(true), "{alice}");
    assert_eq!(alice["user"]["name"], json!("alice"));
}

#[tokio::test]
async fn reset_mocks_removes_the_tests_mocks_and_keeps_the_fake() {
    let slack = FakeSlack::start(Config::default()).await.expect("start");
    Mock::given(path("/api/auth.test"))
        .respond_with(ResponseTemplate::new(500))
        .mount(slack.mock_server())
        .await;
    let url = format!("{}/auth.test", slack.api_base_url());
    let (status, _) = slack_support::raw("POST", &url, None, Some("xoxb-fake-bot"), b"").await;
    assert_eq!(status, 500);

    slack.reset_mocks().await;
    let answer: Value = api(&url, None, Some("xoxb-fake-bot"), b"").await;
    assert_eq!(answer["user_id"], json!("U0000000001"), "{answer}");
}
