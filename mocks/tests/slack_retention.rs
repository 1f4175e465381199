//! The fake Slack's log is bounded by bytes: a large answer is recorded shrunk (its large fields
//! replaced by a note of their size), and beyond `max_log_bytes` the oldest records are
//! forgotten while per-method counts stay exact.

use crate::slack_support;

use std::time::Duration;

use serde_json::{Value, json};
use ski_mocks::slack::{Config, FakeSlack};
use slack_support::api;

const GENERAL: &str = "C0000000001";
const WAIT: Duration = Duration::from_secs(10);

async fn call(slack: &FakeSlack, method: &str, body: Value) -> Value {
    let answer = api(
        &format!("{}/{method}", slack.api_base_url()),
        Some("application/json"),
        Some("xoxb-fake-bot"),
        body.to_string().as_bytes(),
    )
    .await;
    assert_eq!(answer["ok"], json!(true), "{method}: {answer}");
    answer
}

fn logged_bytes(slack: &FakeSlack) -> usize {
    slack
        .requests()
        .iter()
        .map(|request| serde_json::to_string(request).expect("encode").len())
        .sum()
}

#[tokio::test]
async fn a_large_answer_is_recorded_shrunk_to_the_record_budget() {
    let mut config = Config::default();
    config.retention.max_record_bytes = 8_192;
    let slack = FakeSlack::start(config).await.expect("start");
    let text = "x".repeat(1_000);
    for _ in 0..20 {
        call(
            &slack,
            "chat.postMessage",
            json!({"channel": GENERAL, "text": text}),
        )
        .await;
    }
    let history = call(&slack, "conversations.history", json!({"channel": GENERAL})).await;
    assert_eq!(
        history["messages"].as_array().map(Vec::len),
        Some(20),
        "the client gets it all"
    );

    let recorded = slack
        .wait_for_requests("conversations.history", 1, WAIT)
        .await
        .expect("recorded");
    let response = &recorded[0].response;
    assert_eq!(response["ok"], json!(true), "small fields stay: {response}");
    let note = response["messages"]
        .as_str()
        .expect("the messages are a note");
    assert!(note.ends_with("bytes not kept]"), "{note}");
    let size = serde_json::to_string(&recorded[0]).expect("encode").len();
    assert!(size <= 8_192 + 512, "a record of {size} bytes");
}

#[tokio::test]
async fn the_request_log_forgets_the_oldest_beyond_its_bytes() {
    let mut config = Config::default();
    config.retention.max_log_bytes = 20_000;
    let slack = FakeSlack::start(config).await.expect("start");
    let text = "y".repeat(1_000);
    for _ in 0..100 {
        call(
            &slack,
            "chat.postMessage",
            json!({"channel": GENERAL, "text": text}),
        )
        .await;
    }
    let kept = slack.requests();
    assert!(
        !kept.is_empty() && kept.len() < 40,
        "{} records kept of 100",
        kept.len()
    );
    assert!(
        logged_bytes(&slack) <= 20_000 * 2,
        "{} bytes",
        logged_bytes(&slack)
    );
    assert_eq!(
        kept.last().map(|request| request.seq),
        Some(100),
        "the newest stay"
    );
    slack
        .wait_for_requests("chat.postMessage", 100, WAIT)
        .await
        .expect("counts stay exact when records are forgotten");
}
