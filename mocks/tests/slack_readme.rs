//! The Rust example of the README's `ski-fake-slack` section, kept as a test: `agent_readme.rs`
//! requires the README's block to be this file's text after this comment.

use std::time::Duration;

use ski_mocks::slack::{Config, FakeSlack, Fault};
use slack_morphism::errors::SlackClientError;
use slack_morphism::prelude::*;

/// The code under test: posts a notice with slack-morphism pointed at `api_base_url`.
async fn notify(api_base_url: &str, text: &str) -> Result<SlackTs, SlackClientError> {
    let https = hyper_rustls::HttpsConnectorBuilder::new()
        .with_provider_and_native_roots(tokio_rustls::rustls::crypto::ring::default_provider())
        .expect("the platform roots")
        .https_or_http()
        .enable_http1()
        .build();
    let connector =
        SlackClientHyperConnector::with_connector(https).with_slack_api_url(api_base_url);
    let client = SlackClient::new(connector);
    let token = SlackApiToken::new("xoxb-test".into());
    let request = SlackApiChatPostMessageRequest::new(
        "C0000000001".into(),
        SlackMessageContent::new().with_text(text.into()),
    );
    Ok(client
        .open_session(&token)
        .chat_post_message(&request)
        .await?
        .ts)
}

#[tokio::test]
async fn posts_the_notice_and_surfaces_rate_limits() {
    let slack = FakeSlack::start(Config::default()).await.unwrap();
    let ts = notify(&slack.api_base_url(), "deploy done").await.unwrap();

    let posted = slack
        .wait_for_message(|m| m.text().contains("deploy"), Duration::from_secs(5))
        .await
        .unwrap();
    assert_eq!(posted.ts(), ts.to_string());
    assert_eq!(posted.message["user"], "U0000000001");
    let request = &slack.requests()[0];
    assert_eq!(request.method, "chat.postMessage");
    assert_eq!(request.params["text"], "deploy done");

    slack.fail_next(
        "chat.postMessage",
        1,
        Fault::RateLimited {
            retry_after: Some(1),
        },
    );
    let error = notify(&slack.api_base_url(), "again").await.unwrap_err();
    assert!(
        matches!(error, SlackClientError::RateLimitError(_)),
        "{error:?}"
    );
}
