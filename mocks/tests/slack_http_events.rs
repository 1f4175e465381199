//! The Events API over HTTP against a small real HTTP receiver on loopback: the
//! `url_verification` challenge, request signing, the content type of each kind (events as
//! JSON, slash commands as a form, interactivity as `payload=<json>`), the ack an answer makes,
//! retries with their headers after an error and after no answer (a receiver the test holds, a
//! short configured timeout), and `response_url`.

use crate::slack_support;

use std::time::Duration;

use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::header::HeaderMap;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use ski::transport::child::{ChildSpec, spawn};
use ski_mocks::slack::{AfterTry, Click, Config, FakeSlack, Injected, SlashCommand, UserMessage};
use slack_support::{api, raw};
use tokio::sync::{mpsc, oneshot};

const GENERAL: &str = "C0000000001";
const ALICE: &str = "U0000000002";
const WAIT: Duration = Duration::from_secs(10);
const SECRET: &str = "test-signing-secret";

/// What the receiver answers: a status, headers and a body.
struct Reply {
    status: u16,
    headers: Vec<(&'static str, &'static str)>,
    body: String,
}

fn ok(body: &str) -> Reply {
    Reply {
        status: 200,
        headers: Vec::new(),
        body: body.to_string(),
    }
}

/// One request the receiver got; it is answered when `reply` is used, never if it is dropped.
struct Received {
    path: String,
    headers: HeaderMap,
    body: String,
    reply: oneshot::Sender<Reply>,
}

impl Received {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|value| value.to_str().ok())
    }

    fn form(&self) -> Vec<(String, String)> {
        url::form_urlencoded::parse(self.body.as_bytes())
            .into_owned()
            .collect()
    }

    fn form_field(&self, name: &str) -> Option<String> {
        self.form()
            .into_iter()
            .find(|(field, _)| field == name)
            .map(|(_, value)| value)
    }

    fn json(&self) -> Value {
        serde_json::from_str(&self.body).expect("a JSON body")
    }

    /// The `payload` form field of an interactivity request, decoded.
    fn payload(&self) -> Value {
        serde_json::from_str(&self.form_field("payload").expect("a payload field"))
            .expect("a JSON payload")
    }

    fn answer(self, reply: Reply) {
        let _ = self.reply.send(reply);
    }
}

/// A receiver on a port-0 loopback address: each request is handed to the test, which answers
/// it (or holds it). Ends with the test's runtime.
async fn receiver() -> (String, mpsc::UnboundedReceiver<Received>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let url = format!(
        "http://{}/slack/events",
        listener.local_addr().expect("address")
    );
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            let tx = tx.clone();
            tokio::spawn(async move {
                let service = service_fn(move |request: hyper::Request<Incoming>| {
                    let tx = tx.clone();
                    async move {
                        let path = request.uri().path().to_string();
                        let (parts, body) = request.into_parts();
                        let body = body.collect().await.expect("body").to_bytes();
                        let (reply, answered) = oneshot::channel();
                        let _ = tx.send(Received {
                            path,
                            headers: parts.headers,
                            body: String::from_utf8_lossy(&body).into_owned(),
                            reply,
                        });
                        let reply = answered.await.unwrap_or(Reply {
                            status: 500,
                            headers: Vec::new(),
                            body: String::new(),
                        });
                        let mut response = hyper::Response::new(Full::new(Bytes::from(reply.body)));
                        *response.status_mut() =
                            hyper::StatusCode::from_u16(reply.status).expect("status");
                        for (name, value) in reply.headers {
                            response
                                .headers_mut()
                                .insert(name, hyper::header::HeaderValue::from_static(value));
                        }
                        Ok::<_, std::convert::Infallible>(response)
                    }
                });
                let _ = http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    (url, rx)
}

async fn next(requests: &mut mpsc::UnboundedReceiver<Received>) -> Received {
    tokio::time::timeout(WAIT, requests.recv())
        .await
        .expect("a request within the wait")
        .expect("the receiver runs")
}

/// Checks `X-Slack-Signature` against the body and timestamp, computed here with HMAC-SHA256.
fn assert_signed(request: &Received) {
    let timestamp = request
        .header("x-slack-request-timestamp")
        .expect("a timestamp");
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, SECRET.as_bytes());
    let expected = ring::hmac::sign(&key, format!("v0:{timestamp}:{}", request.body).as_bytes());
    let hex: String = expected
        .as_ref()
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect();
    assert_eq!(
        request.header("x-slack-signature"),
        Some(format!("v0={hex}").as_str())
    );
}

fn config(timeout_ms: u64) -> Config {
    let mut config = Config::default();
    config.events_http.signing_secret = SECRET.into();
    config.events_http.timeout_ms = timeout_ms;
    config.events_http.retry_delays_ms = vec![0, 0, 0];
    config
}

/// A fake whose Request URL is the receiver's, set through the challenge.
async fn verified(config: Config) -> (FakeSlack, mpsc::UnboundedReceiver<Received>) {
    let slack = FakeSlack::start(config).await.expect("start");
    let (url, mut requests) = receiver().await;
    let setting = slack.set_request_url(Some(&url));
    let answering = async {
        let challenge = next(&mut requests).await;
        let challenge_text = challenge.json()["challenge"]
            .as_str()
            .expect("a challenge")
            .to_string();
        challenge.answer(ok(&json!({ "challenge": challenge_text }).to_string()));
    };
    let (set, ()) = tokio::join!(setting, answering);
    set.expect("the Request URL is verified");
    (slack, requests)
}

fn hello(slack: &FakeSlack) -> String {
    slack
        .user_message(UserMessage {
            channel: GENERAL.into(),
            thread_ts: None,
            text: "hello".into(),
            user: ALICE.into(),
        })
        .expect("user message")
        .envelope_id
}

/// Posts a message with an `approve_accept` button to #general; its `ts`.
async fn post_with_button(slack: &FakeSlack) -> String {
    let web = format!("{}/chat.postMessage", slack.api_base_url());
    let blocks = json!([{
        "type": "actions", "block_id": "approval_1",
        "elements": [{"type": "button", "action_id": "approve_accept",
                      "text": {"type": "plain_text", "text": "Accept"}, "value": "1"}],
    }]);
    let posted = api(
        &web,
        Some("application/json"),
        Some("xoxb-test"),
        json!({ "channel": GENERAL, "text": "approve?", "blocks": blocks })
            .to_string()
            .as_bytes(),
    )
    .await;
    posted["ts"].as_str().expect("ts").to_string()
}

/// Alice clicks the `approve_accept` button of the message at `ts`.
fn click_accept(slack: &FakeSlack, ts: &str) -> Injected {
    slack
        .click(Click {
            channel: GENERAL.into(),
            message_ts: ts.into(),
            action_id: "approve_accept".into(),
            user: ALICE.into(),
        })
        .expect("click")
}

fn server_error(headers: Vec<(&'static str, &'static str)>) -> Reply {
    Reply {
        status: 500,
        headers,
        body: "boom".into(),
    }
}

/// Every try of `envelope` the fake recorded, once its last one is in: `(X-Slack-Retry-Num,
/// failure, what followed)`.
async fn tries(slack: &FakeSlack, envelope: &str) -> Vec<(u32, Option<String>, AfterTry)> {
    let last = slack
        .await_delivery(
            |d| d.envelope_id.as_deref() == Some(envelope) && d.then != AfterTry::Retry,
            WAIT,
        )
        .await
        .expect("the delivery ends");
    slack
        .deliveries()
        .into_iter()
        .filter(|d| d.envelope_id.as_deref() == Some(envelope) && d.seq <= last.seq)
        .map(|d| (d.retry_num, d.failure, d.then))
        .collect()
}

#[tokio::test]
async fn the_request_url_is_set_only_when_the_app_echoes_the_challenge() {
    let slack = FakeSlack::start(config(10_000)).await.expect("start");
    let (url, mut requests) = receiver().await;
    let setting = slack.set_request_url(Some(&url));
    let answering = async {
        let challenge = next(&mut requests).await;
        assert_eq!(challenge.path, "/slack/events");
        assert_eq!(challenge.header("content-type"), Some("application/json"));
        assert_signed(&challenge);
        let body = challenge.json();
        assert_eq!(body["type"], "url_verification");
        assert!(body["challenge"].as_str().is_some_and(|c| !c.is_empty()));
        challenge.answer(ok("not the challenge"));
    };
    let (set, ()) = tokio::join!(setting, answering);
    let error = set
        .expect_err("an answer without the challenge")
        .to_string();
    assert!(error.contains("without the challenge"), "{error}");
    assert_eq!(slack.config().events_http.request_url, None);

    // Plain text is one of the three ways Slack takes the echo.
    let setting = slack.set_request_url(Some(&url));
    let answering = async {
        let challenge = next(&mut requests).await;
        let text = challenge.json()["challenge"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        challenge.answer(ok(&text));
    };
    let (set, ()) = tokio::join!(setting, answering);
    set.expect("a plain-text echo verifies");
    assert_eq!(slack.config().events_http.request_url, Some(url));
    let kinds: Vec<String> = slack.deliveries().into_iter().map(|d| d.kind).collect();
    assert_eq!(kinds, ["url_verification", "url_verification"]);
}

#[tokio::test]
async fn an_event_is_signed_json_and_a_2xx_answer_is_its_ack() {
    let (slack, mut requests) = verified(config(10_000)).await;
    let envelope = hello(&slack);
    let event = next(&mut requests).await;
    assert_eq!(event.header("content-type"), Some("application/json"));
    assert_signed(&event);
    assert_eq!(event.header("x-slack-retry-num"), None);
    let body = event.json();
    assert_eq!(body["type"], "event_callback");
    assert_eq!(body["event"]["type"], "message");
    assert_eq!(body["event"]["text"], "hello");
    assert_eq!(body["team_id"], "T0000000001");
    event.answer(ok(""));
    let ack = slack.await_ack(&envelope, WAIT).await.expect("acked");
    assert_eq!(ack.payload, None);
    assert!(slack.frames().is_empty(), "nothing went over Socket Mode");
}

#[tokio::test]
async fn a_failed_event_is_retried_with_http_error_and_the_retry_headers() {
    let (slack, mut requests) = verified(config(60_000)).await;
    let envelope = hello(&slack);
    let first = next(&mut requests).await;
    let event_id = first.json()["event_id"].clone();
    first.answer(Reply {
        status: 500,
        headers: Vec::new(),
        body: "boom".into(),
    });
    let retry = next(&mut requests).await;
    assert_eq!(retry.header("x-slack-retry-num"), Some("1"));
    assert_eq!(retry.header("x-slack-retry-reason"), Some("http_error"));
    assert_signed(&retry);
    assert_eq!(retry.json()["event_id"], event_id, "the same event again");
    retry.answer(ok(""));
    slack
        .await_ack(&envelope, WAIT)
        .await
        .expect("acked by the retry");
    let tries: Vec<(u32, Option<String>, Option<u16>)> = slack
        .deliveries()
        .into_iter()
        .filter(|d| d.envelope_id.as_deref() == Some(envelope.as_str()))
        .map(|d| (d.retry_num, d.failure, d.status))
        .collect();
    assert_eq!(
        tries,
        [
            (0, Some("http_error".into()), Some(500)),
            (1, None, Some(200))
        ]
    );
}

#[tokio::test]
async fn an_event_not_answered_in_time_is_retried_with_http_timeout() {
    // The URL from the config (taken as verified, as with --request-url), a short timeout, and a
    // first request the test holds unanswered: it can only time out.
    let (url, mut requests) = receiver().await;
    let mut config = config(300);
    config.events_http.request_url = Some(url);
    let slack = FakeSlack::start(config).await.expect("start");
    let envelope = hello(&slack);
    let held = next(&mut requests).await;
    assert_eq!(held.header("x-slack-retry-num"), None);
    let retry = next(&mut requests).await;
    assert_eq!(retry.header("x-slack-retry-num"), Some("1"));
    assert_eq!(retry.header("x-slack-retry-reason"), Some("http_timeout"));
    assert_signed(&retry);
    assert_eq!(retry.body, held.body, "the same event again");
    let first = slack
        .deliveries()
        .into_iter()
        .find(|d| d.envelope_id.as_deref() == Some(envelope.as_str()))
        .expect("the first try is recorded");
    assert_eq!(first.retry_num, 0);
    assert_eq!(first.failure.as_deref(), Some("http_timeout"));
    assert_eq!(first.status, None);
    drop(held);
}

#[tokio::test]
async fn a_slash_command_is_a_signed_form_and_its_answer_the_reply() {
    let (slack, mut requests) = verified(config(60_000)).await;
    let injected = slack
        .slash_command(SlashCommand {
            command: "/ski".into(),
            text: "status now".into(),
            channel: GENERAL.into(),
            user: ALICE.into(),
        })
        .expect("command");
    let command = next(&mut requests).await;
    assert_eq!(
        command.header("content-type"),
        Some("application/x-www-form-urlencoded")
    );
    assert_signed(&command);
    assert_eq!(command.form_field("command").as_deref(), Some("/ski"));
    assert_eq!(command.form_field("text").as_deref(), Some("status now"));
    assert_eq!(command.form_field("channel_id").as_deref(), Some(GENERAL));
    assert_eq!(command.form_field("user_id").as_deref(), Some(ALICE));
    let response_url = command.form_field("response_url").expect("a response_url");
    command.answer(ok(&json!({ "text": "working on it" }).to_string()));
    let ack = injected.ack(WAIT).await.expect("acked");
    assert_eq!(ack.payload, Some(json!({ "text": "working on it" })));
    let ephemeral = slack.ephemerals();
    assert_eq!(ephemeral.len(), 1, "{ephemeral:?}");
    assert_eq!(ephemeral[0].text(), "working on it");

    // The response_url posts to the channel later, as Slack's does.
    let answer = raw(
        "POST",
        &response_url,
        Some("application/json"),
        None,
        json!({ "response_type": "in_channel", "text": "done" })
            .to_string()
            .as_bytes(),
    )
    .await;
    assert_eq!(answer, (200, "ok".to_string()));
    let posted = slack.messages(GENERAL, None);
    assert_eq!(posted.last().map(|m| m.text()), Some("done"));
}

#[tokio::test]
async fn a_click_and_a_view_submission_are_payload_forms() {
    let (slack, mut requests) = verified(config(60_000)).await;
    let ts = post_with_button(&slack).await;
    let click = click_accept(&slack, &ts);
    let action = next(&mut requests).await;
    assert_eq!(
        action.header("content-type"),
        Some("application/x-www-form-urlencoded")
    );
    assert_signed(&action);
    let form = action.form();
    assert_eq!(form.len(), 1, "only payload: {form:?}");
    let payload = action.payload();
    assert_eq!(payload["type"], "block_actions");
    assert_eq!(payload["actions"][0]["action_id"], "approve_accept");
    let trigger = payload["trigger_id"].as_str().expect("trigger").to_string();
    let response_url = payload["response_url"]
        .as_str()
        .expect("response_url")
        .to_string();
    action.answer(ok(""));
    assert_eq!(click.ack(WAIT).await.expect("acked").payload, None);

    // The click's response_url replaces the message it came from.
    let answer = raw(
        "POST",
        &response_url,
        Some("application/json"),
        None,
        json!({ "replace_original": true, "text": "approved" })
            .to_string()
            .as_bytes(),
    )
    .await;
    assert_eq!(answer, (200, "ok".to_string()));
    let replaced = slack.messages(GENERAL, None);
    assert_eq!(
        replaced.last().map(|m| (m.ts(), m.text())),
        Some((ts.as_str(), "approved"))
    );

    let opened = api(
        &format!("{}/views.open", slack.api_base_url()),
        Some("application/json"),
        Some("xoxb-test"),
        json!({ "trigger_id": trigger, "view": {
            "type": "modal", "callback_id": "why",
            "title": {"type": "plain_text", "text": "Why"},
            "blocks": [{"type": "input", "block_id": "reason",
                        "element": {"type": "plain_text_input", "action_id": "text"},
                        "label": {"type": "plain_text", "text": "Reason"}}],
        }})
        .to_string()
        .as_bytes(),
    )
    .await;
    let view_id = opened["view"]["id"]
        .as_str()
        .expect("a view id")
        .to_string();
    let submitted = slack
        .submit_view(&view_id, json!({ "reason": { "text": "because" } }), ALICE)
        .expect("submit");
    let submission = next(&mut requests).await;
    assert_signed(&submission);
    let payload = submission.payload();
    assert_eq!(payload["type"], "view_submission");
    assert_eq!(
        payload["view"]["state"]["values"]["reason"]["text"]["value"],
        "because"
    );
    let errors = json!({ "response_action": "errors", "errors": { "reason": "too short" } });
    submission.answer(ok(&errors.to_string()));
    assert_eq!(
        submitted.ack(WAIT).await.expect("acked").payload,
        Some(errors)
    );
}

#[tokio::test]
async fn serve_takes_the_request_url_and_signing_secret_and_names_them() {
    let mut fake = spawn(
        ChildSpec::new("ski-fake-slack", env!("CARGO_BIN_EXE_ski-fake-slack"))
            .args([
                "serve",
                "--request-url",
                "http://127.0.0.1:9/slack/events",
                "--signing-secret",
                SECRET,
            ])
            .grace(Duration::from_millis(500)),
    )
    .expect("spawn the fake");
    let ready = fake.next_line().await.expect("read").expect("readiness");
    let ready: Value = serde_json::from_str(&ready).expect("json");
    assert_eq!(ready["signing_secret"], SECRET);
    assert_eq!(ready["request_url"], "http://127.0.0.1:9/slack/events");
    fake.shutdown().await.expect("stop");

    let refused = spawn(
        ChildSpec::new("ski-fake-slack", env!("CARGO_BIN_EXE_ski-fake-slack"))
            .args(["serve", "--request-url", "https://example.test/events"])
            .grace(Duration::from_millis(500)),
    )
    .expect("spawn the fake");
    let status = refused.wait().await.expect("exit");
    assert_eq!(status.code(), Some(2));
}

/// Slack's retry rules: a failed event is sent again after each delay, then given up; an app
/// that answers `X-Slack-No-Retry: 1` stops the retries; a slash command or an interaction that
/// fails (an error, or no answer in time) is never sent again, the user just sees an error.
#[tokio::test]
async fn a_failed_event_is_retried_three_times_then_given_up() {
    let (slack, mut requests) = verified(config(60_000)).await;
    let envelope = hello(&slack);
    for expected_retry in [None, Some("1"), Some("2"), Some("3")] {
        let request = next(&mut requests).await;
        assert_eq!(request.header("x-slack-retry-num"), expected_retry);
        request.answer(server_error(Vec::new()));
    }
    let http_error = || Some("http_error".to_string());
    assert_eq!(
        tries(&slack, &envelope).await,
        [
            (0, http_error(), AfterTry::Retry),
            (1, http_error(), AfterTry::Retry),
            (2, http_error(), AfterTry::Retry),
            (3, http_error(), AfterTry::GivenUp),
        ]
    );
    assert!(slack.ack(&envelope).is_none());
}

#[tokio::test]
async fn an_event_answered_with_x_slack_no_retry_is_not_sent_again() {
    let (slack, mut requests) = verified(config(60_000)).await;
    let envelope = hello(&slack);
    next(&mut requests)
        .await
        .answer(server_error(vec![("x-slack-no-retry", "1")]));
    assert_eq!(
        tries(&slack, &envelope).await,
        [(0, Some("http_error".into()), AfterTry::NoRetryAsked)]
    );
    // The next request the app gets is the next event, not this one again.
    let later = hello(&slack);
    let request = next(&mut requests).await;
    assert_eq!(request.header("x-slack-retry-num"), None);
    request.answer(ok(""));
    slack.await_ack(&later, WAIT).await.expect("the next event");
    assert!(slack.ack(&envelope).is_none());
}

#[tokio::test]
async fn a_failed_slash_command_is_not_retried() {
    let (slack, mut requests) = verified(config(60_000)).await;
    let injected = slack
        .slash_command(SlashCommand {
            command: "/ski".into(),
            text: "status".into(),
            channel: GENERAL.into(),
            user: ALICE.into(),
        })
        .expect("command");
    next(&mut requests).await.answer(server_error(Vec::new()));
    assert_eq!(
        tries(&slack, &injected.envelope_id).await,
        [(0, Some("http_error".into()), AfterTry::NotRetried)]
    );
}

#[tokio::test]
async fn an_interaction_not_answered_in_time_is_not_retried() {
    // A short timeout and a click the test holds unanswered: it can only time out.
    let (slack, mut requests) = verified(config(300)).await;
    let ts = post_with_button(&slack).await;
    let click = click_accept(&slack, &ts);
    let held = next(&mut requests).await;
    assert_eq!(
        tries(&slack, &click.envelope_id).await,
        [(0, Some("http_timeout".into()), AfterTry::NotRetried)]
    );
    drop(held);
}
