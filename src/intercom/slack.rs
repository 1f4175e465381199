//! The Slack Web API through slack-morphism, pointed at `[slack] api_base_url`: posts (thread
//! roots and replies) through the ordered [`Outbox`], updates and modals, with 429s honoured and
//! transient failures retried a bounded number of times.

use std::sync::Arc;
use std::time::Duration;

use hyper_util::client::legacy::connect::HttpConnector;
use serde_json::{Value, json};
use slack_morphism::errors::SlackClientError;
use slack_morphism::prelude::*;

use super::outbox::{self, Attempt, Outbox, OutboxError};

/// The connector: rustls with native roots, `http` allowed for a configured base URL.
pub type Connector = SlackClientHyperConnector<hyper_rustls::HttpsConnector<HttpConnector>>;
/// The slack-morphism client the server uses.
pub type Client = SlackClient<Connector>;

/// How often a failed Web API call is tried in all.
const ATTEMPTS: u32 = 5;
/// The longest wait between tries (and the cap on a 429's `Retry-After`).
const MAX_BACKOFF: Duration = Duration::from_secs(30);

/// A Web API failure that survived the retries.
#[derive(Debug, thiserror::Error)]
pub enum SlackError {
    #[error("slack: {method}: {message}")]
    Api {
        method: &'static str,
        message: String,
    },
    /// The request did not get an answer (connection refused, DNS, TLS, reset).
    #[error("slack: {method}: cannot reach Slack: {cause}")]
    Unreachable { method: &'static str, cause: String },
    #[error("slack: cannot build the client: {0}")]
    Connector(String),
}

/// A Web API failure in one line: the causes of a connection failure joined (slack-morphism's
/// own text for it is a debug dump), an API error by its code, no response bodies.
pub fn describe(error: &SlackClientError) -> String {
    match error {
        SlackClientError::HttpProtocolError(error) => match error.cause.as_deref() {
            Some(cause) => causes(cause),
            None => "no answer".to_owned(),
        },
        SlackClientError::SystemError(error) => {
            let mut text = error.message.clone().unwrap_or_default();
            if let Some(cause) = error.cause.as_deref() {
                if !text.is_empty() {
                    text.push_str(": ");
                }
                text.push_str(&causes(cause));
            }
            text
        }
        SlackClientError::ApiError(error) => format!("Slack API error: {}", error.code),
        SlackClientError::HttpError(error) => format!("HTTP status {}", error.status_code),
        SlackClientError::RateLimitError(_) => "rate limited".to_owned(),
        other => other.to_string().replace('\n', " "),
    }
}

/// `error` and its sources, joined with `: `, a source whose text its parent already holds left
/// out.
fn causes(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let more = cause.to_string();
        if !text.contains(&more) {
            text.push_str(": ");
            text.push_str(&more);
        }
        source = cause.source();
    }
    text.replace('\n', " ")
}

/// Makes rustls's ring provider the process default, for every TLS connection of the server
/// (the Web API client, Socket Mode's WebSocket): a build where another crate also turns on
/// rustls's aws-lc-rs has no default, and a connection that takes it would panic. A default
/// already installed stays.
pub fn use_ring_for_tls() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// Builds the slack-morphism client for `api_base_url`.
pub fn client(api_base_url: &str) -> Result<Arc<Client>, SlackError> {
    // The ring provider named, not the process default: a build where rustls has two providers
    // (another crate turns on aws-lc-rs) has no default and would panic here.
    let https = hyper_rustls::HttpsConnectorBuilder::new()
        .with_provider_and_native_roots(rustls::crypto::ring::default_provider())
        .map_err(|error| SlackError::Connector(error.to_string()))?
        .https_or_http()
        .enable_http1()
        .build();
    let base = if api_base_url.ends_with('/') {
        api_base_url.to_string()
    } else {
        format!("{api_base_url}/")
    };
    let connector = SlackClientHyperConnector::with_connector(https).with_slack_api_url(&base);
    Ok(Arc::new(SlackClient::new(connector)))
}

/// Posts, updates and opens views with the bot token.
#[derive(Clone)]
pub struct Poster {
    client: Arc<Client>,
    token: SlackApiToken,
    outbox: Outbox<Arc<SlackApiChatPostMessageRequest>>,
}

/// One `chat.postMessage` try, classified for the outbox.
async fn post_once(
    client: Arc<Client>,
    token: SlackApiToken,
    request: Arc<SlackApiChatPostMessageRequest>,
) -> Attempt {
    let session = client.open_session(&token);
    match session.chat_post_message(&request).await {
        Ok(answer) => Attempt::Posted(answer.ts.to_string()),
        Err(SlackClientError::RateLimitError(limit)) => Attempt::RateLimited(limit.retry_after),
        Err(error) => match retry_delay(&error, 1) {
            Some(_) => Attempt::Transient(describe(&error)),
            None => Attempt::Fatal(describe(&error)),
        },
    }
}

/// Whether another try may succeed, and how long to wait first.
fn retry_delay(error: &SlackClientError, attempt: u32) -> Option<Duration> {
    let backoff = Duration::from_millis(200 * 2u64.pow(attempt.min(7))).min(MAX_BACKOFF);
    match error {
        SlackClientError::RateLimitError(limit) => {
            Some(limit.retry_after.unwrap_or(backoff).min(MAX_BACKOFF))
        }
        SlackClientError::HttpError(error) => {
            (error.status_code.is_server_error()).then_some(backoff)
        }
        SlackClientError::HttpProtocolError(_) | SlackClientError::EndOfStream(_) => Some(backoff),
        SlackClientError::ApiError(error) => matches!(
            error.code.as_str(),
            "internal_error" | "fatal_error" | "service_unavailable" | "request_timeout"
        )
        .then_some(backoff),
        _ => None,
    }
}

/// Runs one Web API call with the bot token, retrying 429s (after `Retry-After`) and transient
/// failures up to [`ATTEMPTS`] times in all.
macro_rules! retrying {
    ($poster:expr, $method:literal, |$session:ident| $call:expr) => {{
        let mut attempt = 0;
        loop {
            let $session = $poster.client.open_session(&$poster.token);
            match $call.await {
                Ok(answer) => break Ok(answer),
                Err(error) => {
                    attempt += 1;
                    match retry_delay(&error, attempt) {
                        Some(delay) if attempt < ATTEMPTS => {
                            tracing::warn!(method = $method, attempt, ?delay, error = %describe(&error), "slack call failed, retrying");
                            tokio::time::sleep(delay).await;
                        }
                        _ => {
                            break Err(match &error {
                                SlackClientError::HttpProtocolError(_) => SlackError::Unreachable {
                                    method: $method,
                                    cause: describe(&error),
                                },
                                _ => SlackError::Api {
                                    method: $method,
                                    message: describe(&error),
                                },
                            });
                        }
                    }
                }
            }
        }
    }};
}

impl Poster {
    /// A poster using `client` with the bot token; starts the post outbox's worker, so it must
    /// be called inside a Tokio runtime.
    pub fn new(client: Arc<Client>, bot_token: &str) -> Poster {
        let token = SlackApiToken::new(bot_token.to_string().into());
        let (send_client, send_token) = (client.clone(), token.clone());
        let send: outbox::SendFn<Arc<SlackApiChatPostMessageRequest>> = Arc::new(move |request| {
            Box::pin(post_once(send_client.clone(), send_token.clone(), request))
        });
        Poster {
            client,
            token,
            outbox: Outbox::start(outbox::CAPACITY, send),
        }
    }

    /// The client (for the Socket Mode listener).
    pub fn client(&self) -> Arc<Client> {
        self.client.clone()
    }

    /// `auth.test`: checks the bot token and the base URL; answers the bot's user id.
    pub async fn auth_test(&self) -> Result<String, SlackError> {
        let answer = retrying!(self, "auth.test", |session| session.auth_test())?;
        Ok(answer.user_id.to_string())
    }

    /// `chat.postMessage` at the top level (`thread_ts` `None`) or in a thread, queued behind
    /// earlier posts in the outbox; answers the `ts`.
    pub async fn post(
        &self,
        channel: &str,
        thread_ts: Option<&str>,
        text: &str,
        blocks: Option<&Value>,
    ) -> Result<String, SlackError> {
        let mut body = json!({ "channel": channel, "text": text });
        if let Some(thread_ts) = thread_ts {
            body["thread_ts"] = json!(thread_ts);
        }
        if let Some(blocks) = blocks {
            body["blocks"] = blocks.clone();
        }
        let request: SlackApiChatPostMessageRequest =
            serde_json::from_value(body).map_err(|error| SlackError::Api {
                method: "chat.postMessage",
                message: format!("bad blocks: {error}"),
            })?;
        self.outbox
            .post(Arc::new(request))
            .await
            .map_err(|error: OutboxError| SlackError::Api {
                method: "chat.postMessage",
                message: error.to_string(),
            })
    }

    /// `chat.update`: replaces a message's text and blocks.
    pub async fn update(
        &self,
        channel: &str,
        ts: &str,
        text: &str,
        blocks: &Value,
    ) -> Result<(), SlackError> {
        let request: SlackApiChatUpdateRequest = serde_json::from_value(
            json!({ "channel": channel, "ts": ts, "text": text, "blocks": blocks }),
        )
        .map_err(|error| SlackError::Api {
            method: "chat.update",
            message: format!("bad blocks: {error}"),
        })?;
        retrying!(self, "chat.update", |session| session.chat_update(&request))?;
        Ok(())
    }

    /// `views.open` with a modal.
    pub async fn open_view(&self, trigger_id: &str, view: &Value) -> Result<(), SlackError> {
        let request: SlackApiViewsOpenRequest = serde_json::from_value(
            json!({ "trigger_id": trigger_id, "view": view }),
        )
        .map_err(|error| SlackError::Api {
            method: "views.open",
            message: format!("bad view: {error}"),
        })?;
        retrying!(self, "views.open", |session| session.views_open(&request))?;
        Ok(())
    }
}
