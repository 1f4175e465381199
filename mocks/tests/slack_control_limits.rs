//! The fake Slack's control API bounds what a caller can make it hold: a body larger than
//! `MAX_BODY_BYTES` is answered 413 without being read to its end, and a waiting operation with a
//! `timeout_ms` above `MAX_WAIT_MS` is refused with 400 instead of waiting (almost) forever.

use crate::slack_support;

use std::time::Duration;

use serde_json::{Value, json};
use ski_mocks::slack::control::{MAX_BODY_BYTES, MAX_WAIT_MS};
use ski_mocks::slack::{Config, FakeSlack};
use slack_support::{api, raw};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// How long a test waits for an answer before it counts as none.
const WAIT: Duration = Duration::from_secs(20);

/// One control operation: the status and the JSON answer.
async fn control(slack: &FakeSlack, operation: &str, body: &[u8]) -> (u16, Value) {
    let url = format!("{}/{operation}", slack.control_url());
    let (status, text) = tokio::time::timeout(
        WAIT,
        raw("POST", &url, Some("application/json"), None, body),
    )
    .await
    .unwrap_or_else(|_| panic!("no answer to {operation}"));
    let answer = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"));
    (status, answer)
}

/// Writes `head` (and no more) to the control server and reads one response: its status line
/// and body. The server must answer without the rest of the announced body.
async fn answer_to_head(slack: &FakeSlack, head: &[u8]) -> (String, Value) {
    let address = slack.control_url().trim_start_matches("http://").to_owned();
    let mut stream = TcpStream::connect(&address).await.expect("connect");
    stream.write_all(head).await.expect("write");
    let mut received = Vec::new();
    let read = async {
        let mut chunk = [0u8; 4096];
        loop {
            if let Some(end) = received.windows(4).position(|w| w == b"\r\n\r\n") {
                let head = String::from_utf8_lossy(&received[..end]).to_ascii_lowercase();
                let length: usize = head
                    .lines()
                    .find_map(|line| line.strip_prefix("content-length:"))
                    .and_then(|value| value.trim().parse().ok())
                    .expect("a content-length");
                if received.len() >= end + 4 + length {
                    break;
                }
            }
            let n = stream.read(&mut chunk).await.expect("read");
            assert!(n > 0, "the server closed without an answer");
            received.extend_from_slice(&chunk[..n]);
        }
    };
    tokio::time::timeout(WAIT, read)
        .await
        .expect("an answer without the rest of the body");
    let text = String::from_utf8_lossy(&received).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").expect("head and body");
    let status = head.lines().next().unwrap_or_default().to_owned();
    (status, serde_json::from_str(body).expect("a json body"))
}

#[tokio::test]
async fn a_body_past_the_cap_is_refused_with_413_unread() {
    let slack = FakeSlack::start(Config::default()).await.expect("fake");
    // 300 MiB announced, none sent: refused from the header alone.
    let announced = format!(
        "POST /messages HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
        300 << 20
    );
    let (status, answer) = answer_to_head(&slack, announced.as_bytes()).await;
    assert!(status.contains(" 413 "), "{status}");
    assert_eq!(answer["ok"], false);
    let error = answer["error"].as_str().unwrap_or_default();
    assert!(error.contains(&MAX_BODY_BYTES.to_string()), "{error}");

    // Chunked, no length announced: refused once one byte more than the cap has come.
    let mut chunked = format!(
        "POST /messages HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n{:x}\r\n",
        MAX_BODY_BYTES + 1
    )
    .into_bytes();
    // Nothing after the chunk's data, so the server has read all that was sent when it answers.
    chunked.extend(std::iter::repeat_n(b' ', MAX_BODY_BYTES + 1));
    let (status, answer) = answer_to_head(&slack, &chunked).await;
    assert!(status.contains(" 413 "), "{status}");
    assert_eq!(answer["ok"], false);

    // A body of exactly the cap is read, and the fake goes on answering.
    let mut at_cap = br#"{"channel":"general"}"#.to_vec();
    at_cap.resize(MAX_BODY_BYTES, b' ');
    let (status, answer) = control(&slack, "messages", &at_cap).await;
    assert_eq!((status, &answer["ok"]), (200, &json!(true)), "{answer}");
}

#[tokio::test]
async fn a_wait_past_the_cap_is_refused_with_400_and_the_cap_itself_waits() {
    let slack = FakeSlack::start(Config::default()).await.expect("fake");
    let general = slack.config().channels[0].id.clone();
    let posted = api(
        &format!("{}/chat.postMessage", slack.api_base_url()),
        Some("application/json"),
        Some("xoxb-fake-bot"),
        json!({"channel": general, "text": "already there"})
            .to_string()
            .as_bytes(),
    )
    .await;
    assert_eq!(posted["ok"], true, "{posted}");
    let injected = slack
        .slash_command(ski_mocks::slack::SlashCommand {
            command: "/x".into(),
            text: String::new(),
            channel: general.clone(),
            user: slack.config().users[0].id.clone(),
        })
        .expect("a slash command");
    let too_long = MAX_WAIT_MS + 1;
    for (operation, body) in [
        (
            "wait_for_message",
            json!({"channel": general, "text_contains": "never posted", "timeout_ms": u64::MAX}),
        ),
        (
            "wait_for_message",
            json!({"channel": general, "text_contains": "already", "timeout_ms": too_long}),
        ),
        (
            "wait_for_connections",
            json!({"count": 99, "timeout_ms": u64::MAX}),
        ),
        (
            "ack",
            json!({"envelope_id": injected.envelope_id, "timeout_ms": u64::MAX}),
        ),
    ] {
        let (status, answer) = control(&slack, operation, body.to_string().as_bytes()).await;
        assert_eq!(status, 400, "{operation}: {answer}");
        let error = answer["error"].as_str().unwrap_or_default();
        assert!(
            error.contains(&MAX_WAIT_MS.to_string()),
            "{operation}: {error}"
        );
    }
    // The cap itself is a valid wait: it answers as soon as the message is there.
    let (status, answer) = control(
        &slack,
        "wait_for_message",
        json!({"channel": general, "text_contains": "already", "timeout_ms": MAX_WAIT_MS})
            .to_string()
            .as_bytes(),
    )
    .await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(
        answer["message"]["message"]["text"], "already there",
        "{answer}"
    );
}
