//! The Events API over HTTP: with a Request URL set, the envelopes the fake would send over
//! Socket Mode (events, slash commands, interactivity, view submissions) are POSTed there as Slack
//! does, signed; the app's 2xx answer is the envelope's ack. Events that fail (a non-2xx answer,
//! no answer within the timeout, no connection) are retried with `X-Slack-Retry-Num` and
//! `X-Slack-Retry-Reason` after the configured delays, unless the app answers
//! `X-Slack-No-Retry: 1`; commands and interactions are not retried (Slack shows the user an
//! error). Setting the URL through [`Shared::set_request_url`] sends the `url_verification`
//! challenge first, and the URL is kept only when the app echoes it.

mod wire;

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use super::FakeSlackError;
use super::config::{EventsHttpConfig, parse_request_url};
use super::envelope::EnvelopeKind;
use super::record::{AfterTry, RecordedDelivery};
use super::shared::{Ack, Shared};
use super::socket::EnvelopeState;
use wire::{Body, Outcome, Target};

fn target(url: &str, settings: &EventsHttpConfig) -> Result<Target, String> {
    Ok(Target {
        url: parse_request_url(url)?,
        signing_secret: settings.signing_secret.clone(),
        timeout: Duration::from_millis(settings.timeout_ms),
    })
}

/// The app's answer as an ack payload: a JSON object as it is (`None` when empty), plain text as
/// the message text of a slash command's reply, or as a string otherwise.
fn answer_payload(kind: EnvelopeKind, answer: &str) -> Option<Value> {
    let answer = answer.trim();
    if answer.is_empty() {
        return None;
    }
    match serde_json::from_str::<Value>(answer) {
        Ok(Value::Object(fields)) if fields.is_empty() => None,
        Ok(object @ Value::Object(_)) => Some(object),
        _ if kind == EnvelopeKind::SlashCommands => Some(json!({ "text": answer })),
        _ => Some(json!(answer)),
    }
}

/// Whether the app's answer to `url_verification` holds the challenge: as plain text, as JSON
/// `{"challenge": ...}` or as the form `challenge=...`, the three ways Slack accepts.
/// What follows one try, as Slack does it: only a failed event is sent again, while retries are
/// left and the app did not answer `X-Slack-No-Retry: 1`.
fn after_try(kind: EnvelopeKind, outcome: &Outcome, retries_left: bool) -> AfterTry {
    if outcome.failure().is_none() {
        AfterTry::Answered
    } else if matches!(outcome, Outcome::Answered { no_retry: true, .. }) {
        AfterTry::NoRetryAsked
    } else if kind != EnvelopeKind::EventsApi {
        AfterTry::NotRetried
    } else if retries_left {
        AfterTry::Retry
    } else {
        AfterTry::GivenUp
    }
}

/// One try of a delivery, for the record: which envelope, its kind, its retry headers and what
/// follows it.
struct Delivery<'a> {
    envelope_id: Option<&'a str>,
    kind: &'a str,
    retry: Option<(u32, &'static str)>,
    then: AfterTry,
}

fn echoes(answer: &str, challenge: &str) -> bool {
    let answer = answer.trim();
    answer == challenge
        || serde_json::from_str::<Value>(answer)
            .is_ok_and(|value| value["challenge"].as_str() == Some(challenge))
        || url::form_urlencoded::parse(answer.as_bytes())
            .any(|(name, value)| name == "challenge" && value == challenge)
}

impl Shared {
    /// Sends an envelope the way the app takes them: POSTed to its Request URL when one is set,
    /// over Socket Mode otherwise.
    pub fn dispatch_envelope(
        self: &Arc<Self>,
        id: &str,
        kind: EnvelopeKind,
        payload: Value,
        accepts: bool,
    ) {
        let (settings, max) = {
            let workspace = self.workspace();
            (
                workspace.config.events_http.clone(),
                workspace.config.retention.max_frames,
            )
        };
        let Some(url) = settings.request_url.clone() else {
            self.send_envelope(id, kind, payload, accepts);
            return;
        };
        let now = self.log().now_ms();
        self.hub().keep(
            id,
            EnvelopeState {
                kind,
                accepts,
                payload: payload.clone(),
                attempt: 0,
                sent_at_ms: Some(now),
                ack: None,
            },
            max,
        );
        let shared = self.clone();
        let id = id.to_string();
        self.runtime.spawn(async move {
            shared
                .post_envelope(&url, &settings, &id, kind, &payload)
                .await;
        });
    }

    /// Posts one envelope, retrying a failed event after each configured delay.
    async fn post_envelope(
        self: &Arc<Self>,
        url: &str,
        settings: &EventsHttpConfig,
        id: &str,
        kind: EnvelopeKind,
        payload: &Value,
    ) {
        let target = match target(url, settings) {
            Ok(target) => target,
            Err(error) => {
                self.log()
                    .note(format!("envelope {id} not delivered: {error}"));
                return;
            }
        };
        let body = Body::of(kind, payload);
        let delays: &[u64] = if kind == EnvelopeKind::EventsApi {
            &settings.retry_delays_ms
        } else {
            &[]
        };
        let mut retry: Option<(u32, &'static str)> = None;
        for attempt in 0..=delays.len() {
            if let Some(delay) = attempt.checked_sub(1).and_then(|index| delays.get(index)) {
                tokio::time::sleep(Duration::from_millis(*delay)).await;
                let now = self.log().now_ms();
                match self.hub().envelopes.get_mut(id) {
                    Some(state) => {
                        state.attempt = u32::try_from(attempt).unwrap_or(u32::MAX);
                        state.sent_at_ms = Some(now);
                    }
                    // Forgotten (a reset, or beyond the retention limit): nobody waits for it.
                    None => return,
                }
            }
            let outcome = wire::post(&target, &body, retry).await;
            let then = after_try(kind, &outcome, attempt < delays.len());
            let delivery = Delivery {
                envelope_id: Some(id),
                kind: kind.as_str(),
                retry,
                then,
            };
            self.record_delivery(delivery, &target, &body, &outcome);
            let reason = outcome.failure().unwrap_or_default();
            match then {
                AfterTry::Answered => {
                    if let Outcome::Answered { body, .. } = &outcome {
                        self.http_ack(id, kind, body);
                    }
                    return;
                }
                AfterTry::Retry => {
                    retry = Some((u32::try_from(attempt + 1).unwrap_or(u32::MAX), reason));
                }
                AfterTry::NoRetryAsked => {
                    self.log().note(format!(
                        "envelope {id} failed ({reason}) and the app asked for no retry"
                    ));
                    return;
                }
                AfterTry::NotRetried => {
                    self.log().note(format!(
                        "{} envelope {id} failed ({reason}): Slack shows the user an error and does not retry",
                        kind.as_str()
                    ));
                    return;
                }
                AfterTry::GivenUp => {
                    self.log().note(format!(
                        "envelope {id} failed ({reason}) after {} retries: given up",
                        delays.len()
                    ));
                    return;
                }
            }
        }
    }

    fn record_delivery(
        &self,
        delivery: Delivery<'_>,
        target: &Target,
        body: &Body,
        outcome: &Outcome,
    ) {
        let (status, response) = match outcome {
            Outcome::Answered { status, body, .. } => (Some(*status), Some(body.clone())),
            Outcome::Failed(_) => (None, None),
        };
        let Delivery {
            envelope_id,
            kind,
            retry,
            then,
        } = delivery;
        self.log().delivery(RecordedDelivery {
            seq: 0,
            at_ms: 0,
            envelope_id: envelope_id.map(str::to_string),
            kind: kind.to_string(),
            url: target.url.to_string(),
            content_type: body.content_type.to_string(),
            body: body.text.clone(),
            retry_num: retry.map_or(0, |(number, _)| number),
            retry_reason: retry.map(|(_, reason)| reason.to_string()),
            status,
            response,
            failure: outcome.failure().map(str::to_string),
            then,
        });
        self.bump();
    }

    /// The app's 2xx answer acks the envelope; a slash command's answer is the reply it shows.
    fn http_ack(&self, id: &str, kind: EnvelopeKind, answer: &str) {
        let payload = answer_payload(kind, answer);
        let command = {
            let mut hub = self.hub();
            let Some(state) = hub.envelopes.get_mut(id) else {
                return;
            };
            if state.ack.is_some() {
                return;
            }
            let now = self.log().now_ms();
            state.ack = Some(Ack {
                envelope_id: id.to_string(),
                payload: payload.clone(),
                connection: 0,
                latency_ms: now.saturating_sub(state.sent_at_ms.unwrap_or(now)),
            });
            (state.kind == EnvelopeKind::SlashCommands).then(|| state.payload.clone())
        };
        if let (Some(command), Some(reply)) = (command, payload) {
            self.slash_reply(&command, &reply);
        }
        self.bump();
    }

    /// Sets the Request URL after the `url_verification` challenge: the app must answer 2xx with
    /// the challenge. `None` goes back to Socket Mode.
    pub async fn set_request_url(
        self: &Arc<Self>,
        url: Option<&str>,
    ) -> Result<(), FakeSlackError> {
        let Some(url) = url else {
            self.workspace().config.events_http.request_url = None;
            return Ok(());
        };
        let settings = self.workspace().config.events_http.clone();
        let target = target(url, &settings).map_err(FakeSlackError::RequestUrl)?;
        let challenge = uuid::Uuid::new_v4().simple().to_string();
        let body = Body::json(&json!({
            "token": "fake-verification-token",
            "challenge": challenge,
            "type": "url_verification",
        }));
        let outcome = wire::post(&target, &body, None).await;
        let delivery = Delivery {
            envelope_id: None,
            kind: "url_verification",
            retry: None,
            then: after_try(EnvelopeKind::SlashCommands, &outcome, false),
        };
        self.record_delivery(delivery, &target, &body, &outcome);
        if let Some(reason) = outcome.failure() {
            return Err(FakeSlackError::RequestUrl(format!(
                "{url} failed url_verification ({reason})"
            )));
        }
        match &outcome {
            Outcome::Answered { body, .. } if echoes(body, &challenge) => {
                self.workspace().config.events_http.request_url = Some(url.to_string());
                Ok(())
            }
            _ => Err(FakeSlackError::RequestUrl(format!(
                "{url} answered url_verification without the challenge"
            ))),
        }
    }
}
