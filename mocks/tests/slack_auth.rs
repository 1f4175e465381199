//! Who may talk to the fake Slack: the Web API accepts the workspace's own tokens always, any
//! token of the right prefix by default, and no other in strict mode; the control API refuses a
//! browser page that is not on a loopback name.

use crate::slack_support;

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde_json::{Value, json};
use ski_mocks::slack::{Config, FakeSlack};
use slack_support::api;

async fn auth_test(slack: &FakeSlack, token: &str) -> Value {
    let url = format!("{}/auth.test", slack.api_base_url());
    api(&url, Some("application/json"), Some(token), b"{}").await
}

#[tokio::test]
async fn a_strict_workspace_accepts_only_its_own_tokens() {
    let mut config = Config::default();
    config.auth.strict = true;
    let slack = FakeSlack::start(config).await.expect("start");
    let own = slack.config().auth;
    assert_eq!(auth_test(&slack, &own.bot_token).await["ok"], json!(true));
    assert_eq!(auth_test(&slack, &own.user_token).await["ok"], json!(true));
    assert_eq!(
        auth_test(&slack, "xoxb-someone-else").await["error"],
        json!("invalid_auth")
    );
    let url = format!("{}/apps.connections.open", slack.api_base_url());
    let opened = api(&url, None, Some(&own.app_token), b"").await;
    assert_eq!(opened["ok"], json!(true), "{opened}");
    let foreign = api(&url, None, Some("xapp-someone-else"), b"").await;
    assert_eq!(foreign["error"], json!("invalid_auth"), "{foreign}");
}

#[tokio::test]
async fn by_default_any_token_of_the_right_prefix_works() {
    let slack = FakeSlack::start(Config::default()).await.expect("start");
    assert_eq!(auth_test(&slack, "xoxb-anything").await["ok"], json!(true));
    assert_eq!(
        auth_test(&slack, "bogus").await["error"],
        json!("invalid_auth")
    );
}

/// A control operation sent with this `Origin`: the status and the answer.
async fn control_with_origin(slack: &FakeSlack, origin: Option<&str>) -> (u16, Value) {
    let client: Client<HttpConnector, Full<Bytes>> =
        Client::builder(TokioExecutor::new()).build_http();
    let mut request = hyper::Request::builder()
        .method("POST")
        .uri(format!("{}/ephemerals", slack.control_url()))
        .header("content-type", "application/json");
    if let Some(origin) = origin {
        request = request.header("origin", origin);
    }
    let request = request
        .body(Full::new(Bytes::from_static(b"{}")))
        .expect("request");
    let response = client.request(request).await.expect("response");
    let status = response.status().as_u16();
    let body = response
        .into_body()
        .collect()
        .await
        .expect("body")
        .to_bytes();
    (status, serde_json::from_slice(&body).expect("json"))
}

#[tokio::test]
async fn the_control_api_refuses_a_foreign_origin() {
    let slack = FakeSlack::start(Config::default()).await.expect("start");
    let (status, answer) = control_with_origin(&slack, Some("https://evil.example")).await;
    assert_eq!(status, 403, "{answer}");
    assert_eq!(answer["ok"], json!(false));
    for origin in [
        None,
        Some("http://localhost:3000"),
        Some("http://127.0.0.1:9"),
    ] {
        let (status, answer) = control_with_origin(&slack, origin).await;
        assert_eq!(status, 200, "{origin:?}: {answer}");
    }
    let (status, _) = control_with_origin(&slack, Some("null")).await;
    assert_eq!(status, 403, "an opaque origin is not a loopback page");
}
