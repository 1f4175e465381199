//! One signed POST to the app's Request URL as Slack makes it: the body encoded as Slack encodes
//! each kind (events as JSON, slash commands as a form, interactivity as `payload=<json>`),
//! `X-Slack-Request-Timestamp` and `X-Slack-Signature` (`v0=` HMAC-SHA256 of
//! `v0:{timestamp}:{body}`), the retry headers, and a deadline for the whole exchange.

use std::time::{Duration, SystemTime};

use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;
use serde_json::Value;

use crate::slack::envelope::EnvelopeKind;

/// The most of an answer the fake reads (and records).
pub const MAX_ANSWER_BYTES: usize = 64 << 10;

const FORM: &str = "application/x-www-form-urlencoded";
const JSON: &str = "application/json";

/// A request body and its content type.
#[derive(Debug, Clone)]
pub struct Body {
    pub content_type: &'static str,
    pub text: String,
}

impl Body {
    /// What Slack sends for an envelope of `kind` with this payload.
    pub fn of(kind: EnvelopeKind, payload: &Value) -> Body {
        match kind {
            EnvelopeKind::EventsApi => Body::json(payload),
            EnvelopeKind::SlashCommands => {
                let mut form = url::form_urlencoded::Serializer::new(String::new());
                if let Some(fields) = payload.as_object() {
                    for (name, value) in fields {
                        match value {
                            Value::String(text) => form.append_pair(name, text),
                            other => form.append_pair(name, &other.to_string()),
                        };
                    }
                }
                Body {
                    content_type: FORM,
                    text: form.finish(),
                }
            }
            EnvelopeKind::Interactive => Body {
                content_type: FORM,
                text: url::form_urlencoded::Serializer::new(String::new())
                    .append_pair("payload", &payload.to_string())
                    .finish(),
            },
        }
    }

    pub fn json(payload: &Value) -> Body {
        Body {
            content_type: JSON,
            text: payload.to_string(),
        }
    }
}

/// `v0=` and the hex HMAC-SHA256 of `v0:{timestamp}:{body}` keyed by the signing secret.
pub fn signature(secret: &str, timestamp: u64, body: &str) -> String {
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, secret.as_bytes());
    let tag = ring::hmac::sign(&key, format!("v0:{timestamp}:{body}").as_bytes());
    let hex: String = tag
        .as_ref()
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect();
    format!("v0={hex}")
}

/// Where to post and how long to wait.
#[derive(Debug, Clone)]
pub struct Target {
    pub url: url::Url,
    pub signing_secret: String,
    pub timeout: Duration,
}

/// What became of one POST.
#[derive(Debug, Clone)]
pub enum Outcome {
    /// The app answered in time (any status).
    Answered {
        status: u16,
        body: String,
        /// `X-Slack-No-Retry: 1`: no retry of a failed event.
        no_retry: bool,
    },
    /// Failed before an answer: `http_timeout`, `connection_failed` or `unknown_error`.
    Failed(&'static str),
}

impl Outcome {
    /// Slack's retry reason for this outcome, `None` for a 2xx answer.
    pub fn failure(&self) -> Option<&'static str> {
        match self {
            Outcome::Answered { status, .. } if (200..300).contains(status) => None,
            Outcome::Answered { .. } => Some("http_error"),
            Outcome::Failed(reason) => Some(reason),
        }
    }
}

/// Posts `body` to the target once; `retry` is `(X-Slack-Retry-Num, X-Slack-Retry-Reason)`.
pub async fn post(target: &Target, body: &Body, retry: Option<(u32, &str)>) -> Outcome {
    match tokio::time::timeout(target.timeout, exchange(target, body, retry)).await {
        Ok(outcome) => outcome,
        Err(_) => Outcome::Failed("http_timeout"),
    }
}

async fn exchange(target: &Target, body: &Body, retry: Option<(u32, &str)>) -> Outcome {
    let url = &target.url;
    let host = url.host_str().unwrap_or_default();
    let port = url.port_or_known_default().unwrap_or(80);
    let Ok(stream) = tokio::net::TcpStream::connect((host, port)).await else {
        return Outcome::Failed("connection_failed");
    };
    let Ok((mut sender, connection)) =
        hyper::client::conn::http1::handshake(TokioIo::new(stream)).await
    else {
        return Outcome::Failed("connection_failed");
    };
    let timestamp = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |since| since.as_secs());
    let authority = match url.port() {
        Some(port) => format!("{host}:{port}"),
        None => host.to_string(),
    };
    let path = match url.query() {
        Some(query) => format!("{}?{query}", url.path()),
        None => url.path().to_string(),
    };
    let mut request = hyper::Request::post(path)
        .header(hyper::header::HOST, authority)
        .header(hyper::header::CONTENT_TYPE, body.content_type)
        .header(
            hyper::header::USER_AGENT,
            "Slackbot 1.0 (+https://api.slack.com/robots)",
        )
        .header("x-slack-request-timestamp", timestamp.to_string())
        .header(
            "x-slack-signature",
            signature(&target.signing_secret, timestamp, &body.text),
        );
    if let Some((number, reason)) = retry {
        request = request
            .header("x-slack-retry-num", number.to_string())
            .header("x-slack-retry-reason", reason);
    }
    let Ok(request) = request.body(Full::new(Bytes::from(body.text.clone()))) else {
        return Outcome::Failed("unknown_error");
    };
    let answer = async {
        let response = sender.send_request(request).await.ok()?;
        let status = response.status().as_u16();
        let no_retry = response
            .headers()
            .get("x-slack-no-retry")
            .is_some_and(|value| value.as_bytes() == b"1");
        let bytes = Limited::new(response.into_body(), MAX_ANSWER_BYTES)
            .collect()
            .await
            .ok()?
            .to_bytes();
        Some(Outcome::Answered {
            status,
            body: String::from_utf8_lossy(&bytes).into_owned(),
            no_retry,
        })
    };
    let mut answer = std::pin::pin!(answer);
    let answered = tokio::select! {
        biased;
        answered = &mut answer => answered,
        // The connection ended: whatever it delivered is there to read, or nothing came back.
        _ = connection => answer.await,
    };
    answered.unwrap_or(Outcome::Failed("unknown_error"))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_signature_is_v0_hex_hmac_sha256_of_version_timestamp_and_body() {
        // Computed independently (Python's hmac module) for this secret, timestamp and body.
        let body = "token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&command=%2Fweather";
        assert_eq!(
            signature("8f742231b10e8888abcd99yyyzzz85a5", 1_531_420_618, body),
            "v0=6b8b0b4cff7baf56906b6a54056df891b9cc8292bc01770e0e1d6dd9bc623977"
        );
    }

    #[test]
    fn each_kind_is_encoded_as_slack_sends_it() {
        let event = Body::of(EnvelopeKind::EventsApi, &json!({"type": "event_callback"}));
        assert_eq!(event.content_type, "application/json");
        assert_eq!(event.text, r#"{"type":"event_callback"}"#);
        let command = Body::of(
            EnvelopeKind::SlashCommands,
            &json!({"command": "/ski", "text": "a b&c", "n": 1}),
        );
        assert_eq!(command.content_type, "application/x-www-form-urlencoded");
        assert_eq!(command.text, "command=%2Fski&text=a+b%26c&n=1");
        let click = Body::of(EnvelopeKind::Interactive, &json!({"type": "block_actions"}));
        assert_eq!(click.content_type, "application/x-www-form-urlencoded");
        assert_eq!(click.text, "payload=%7B%22type%22%3A%22block_actions%22%7D");
    }
}
