//! The control API over HTTP, for tests in any language: `POST <control_url>/<operation>` with a
//! JSON body, answered `{"ok":true,...}` or `{"ok":false,"error":...}`. Waiting operations take
//! `timeout_ms` and answer when the thing happened (no polling). Bounded: a body larger than
//! [`MAX_BODY_BYTES`] is answered 413 without being read further, a `timeout_ms` above
//! [`MAX_WAIT_MS`] is refused with 400, and a request from a browser page that is not on a
//! loopback name (its `Origin`) is refused with 403.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use http_body_util::{BodyExt, Full, LengthLimitError, Limited};
use hyper::body::{Bytes, Incoming};
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use tokio::net::TcpListener;

use super::fault::Fault;
use super::limits::{Gate, after_accept_error, http1_builder};
use super::shared::Shared;
use super::socket::DisconnectReason;
use super::{Click, SlashCommand, UserMessage};

/// The largest request body the control API reads; a larger one is answered 413.
pub const MAX_BODY_BYTES: usize = 1 << 20;

/// The longest `timeout_ms` a waiting operation accepts (5 minutes); a longer one is answered 400.
pub const MAX_WAIT_MS: u64 = 300_000;

/// Serves the control API until the task is aborted.
pub async fn serve(listener: TcpListener, shared: Arc<Shared>) {
    let limits = shared.config().limits;
    let gate = Gate::new(limits.max_connections);
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            after_accept_error().await;
            continue;
        };
        let Some(permit) = gate.admit() else {
            gate.refuse(stream, "control");
            continue;
        };
        let shared = shared.clone();
        let builder = http1_builder(&limits);
        tokio::spawn(async move {
            let _permit = permit;
            let service = service_fn(move |request| handle(shared.clone(), request));
            let _ = builder
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

/// Whether `origin` is a page on this machine's loopback names (any port), as the intercom
/// MCP endpoint allows: `http(s)://localhost`, `127.0.0.1` or `[::1]`.
pub fn is_loopback_origin(origin: &str) -> bool {
    let Ok(url) = url::Url::parse(origin) else {
        return false;
    };
    matches!(url.scheme(), "http" | "https")
        && matches!(url.host_str(), Some("localhost" | "127.0.0.1" | "[::1]"))
}

async fn handle(
    shared: Arc<Shared>,
    request: hyper::Request<Incoming>,
) -> Result<hyper::Response<Full<Bytes>>, Infallible> {
    // A browser page elsewhere must not drive the fake (a request without `Origin` is not from
    // a page, and passes).
    if let Some(origin) = request.headers().get(hyper::header::ORIGIN) {
        let origin = String::from_utf8_lossy(origin.as_bytes()).into_owned();
        if !is_loopback_origin(&origin) {
            return Ok(reply(
                403,
                &json!({ "ok": false, "error": format!("origin {origin} is not allowed") }),
            ));
        }
    }
    let operation = request.uri().path().trim_start_matches('/').to_string();
    let too_large = || {
        reply(
            413,
            &json!({ "ok": false, "error": format!("the body is larger than {MAX_BODY_BYTES} bytes") }),
        )
    };
    let announced = request
        .headers()
        .get(hyper::header::CONTENT_LENGTH)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.parse::<u64>().ok());
    if announced.is_some_and(|length| length > MAX_BODY_BYTES as u64) {
        return Ok(too_large());
    }
    let body = match Limited::new(request.into_body(), MAX_BODY_BYTES)
        .collect()
        .await
    {
        Ok(body) => body.to_bytes(),
        Err(error) if error.is::<LengthLimitError>() => return Ok(too_large()),
        Err(error) => {
            return Ok(reply(
                400,
                &json!({ "ok": false, "error": format!("cannot read the body: {error}") }),
            ));
        }
    };
    let body: Value = if body.iter().all(u8::is_ascii_whitespace) {
        json!({})
    } else {
        match serde_json::from_slice(&body) {
            Ok(body) => body,
            Err(error) => {
                return Ok(reply(
                    400,
                    &json!({ "ok": false, "error": format!("malformed json: {error}") }),
                ));
            }
        }
    };
    Ok(match run(&shared, &operation, body).await {
        Ok(mut answer) => {
            answer["ok"] = json!(true);
            reply(200, &answer)
        }
        Err(error) => reply(400, &json!({ "ok": false, "error": error })),
    })
}

fn reply(status: u16, body: &Value) -> hyper::Response<Full<Bytes>> {
    let mut response = hyper::Response::new(Full::new(Bytes::from(body.to_string())));
    *response.status_mut() =
        hyper::StatusCode::from_u16(status).unwrap_or(hyper::StatusCode::BAD_REQUEST);
    response.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/json"),
    );
    response
}

fn args<T: DeserializeOwned>(body: Value) -> Result<T, String> {
    serde_json::from_value(body).map_err(|error| format!("bad arguments: {error}"))
}

#[derive(Deserialize)]
struct Timeout {
    #[serde(default = "default_timeout")]
    timeout_ms: u64,
}

fn default_timeout() -> u64 {
    10_000
}

/// A waiting operation's `timeout_ms` as a duration, refused above [`MAX_WAIT_MS`].
fn wait_time(timeout_ms: u64) -> Result<Duration, String> {
    if timeout_ms > MAX_WAIT_MS {
        return Err(format!(
            "timeout_ms {timeout_ms} is above the limit of {MAX_WAIT_MS}"
        ));
    }
    Ok(Duration::from_millis(timeout_ms))
}

#[derive(Deserialize)]
struct ViewArgs {
    view_id: String,
    #[serde(default)]
    values: Value,
    user: String,
}

#[derive(Deserialize)]
struct MessageQuery {
    channel: Option<String>,
    thread_ts: Option<String>,
    text_contains: Option<String>,
    #[serde(default = "default_timeout")]
    timeout_ms: u64,
}

#[derive(Deserialize)]
struct FailNext {
    method: String,
    #[serde(default = "one")]
    count: usize,
    fault: Fault,
}

fn one() -> usize {
    1
}

async fn run(shared: &Arc<Shared>, operation: &str, body: Value) -> Result<Value, String> {
    let text = |error: super::FakeSlackError| error.to_string();
    match operation {
        "slash_command" => {
            let command: SlashCommand = args(body)?;
            Ok(json!({ "envelope_id": shared.slash_command(&command).map_err(text)? }))
        }
        "click" => {
            let click: Click = args(body)?;
            Ok(json!({ "envelope_id": shared.click(&click).map_err(text)? }))
        }
        "submit_view" | "close_view" => {
            let view: ViewArgs = args(body)?;
            let id = shared
                .view_event(
                    &view.view_id,
                    &view.values,
                    &view.user,
                    operation == "close_view",
                )
                .map_err(text)?;
            Ok(json!({ "envelope_id": id }))
        }
        "raw_envelope" => {
            #[derive(Deserialize)]
            struct RawArgs {
                #[serde(rename = "type")]
                kind: super::envelope::EnvelopeKind,
                payload: Value,
            }
            let raw: RawArgs = args(body)?;
            Ok(json!({ "envelope_id": shared.raw_envelope(raw.kind, raw.payload) }))
        }
        "user_message" => {
            let message: UserMessage = args(body)?;
            let (id, ts, mention) = shared.user_message(&message).map_err(text)?;
            Ok(json!({ "envelope_id": id, "ts": ts, "mention_envelope_id": mention }))
        }
        "ack" => {
            #[derive(Deserialize)]
            struct AckArgs {
                envelope_id: String,
                timeout_ms: Option<u64>,
            }
            let ack: AckArgs = args(body)?;
            let found = match ack.timeout_ms {
                Some(ms) => Some(
                    shared
                        .await_ack(&ack.envelope_id, wait_time(ms)?)
                        .await
                        .map_err(text)?,
                ),
                None => shared.ack(&ack.envelope_id),
            };
            Ok(json!({ "ack": found }))
        }
        "messages" => {
            let query: MessageQuery = args(body)?;
            let channel = query.channel.ok_or("channel is required")?;
            Ok(json!({ "messages": shared.messages(&channel, query.thread_ts.as_deref()) }))
        }
        "ephemerals" => Ok(json!({ "messages": shared.ephemerals() })),
        "user_reaction" | "user_edit" | "user_delete" | "user_join" | "user_leave"
        | "app_home_opened" => {
            #[derive(Deserialize)]
            struct UserAction {
                user: String,
                #[serde(default)]
                channel: String,
                #[serde(default)]
                ts: String,
                #[serde(default)]
                text: String,
                #[serde(default)]
                name: String,
            }
            let action: UserAction = args(body)?;
            let (user, channel, ts) = (&action.user, &action.channel, &action.ts);
            let envelope = match operation {
                "user_reaction" => Some(
                    shared
                        .user_reaction(user, channel, ts, &action.name)
                        .map_err(text)?,
                ),
                "user_edit" => shared
                    .user_edit(user, channel, ts, &action.text)
                    .map(|()| None)
                    .map_err(text)?,
                "user_delete" => shared
                    .user_delete(user, channel, ts)
                    .map(|()| None)
                    .map_err(text)?,
                "app_home_opened" => shared.app_home_opened(user).map(|()| None).map_err(text)?,
                join_or_leave => shared
                    .user_membership(user, channel, join_or_leave == "user_join")
                    .map(|()| None)
                    .map_err(text)?,
            };
            Ok(json!({ "envelope_id": envelope }))
        }
        "revoke_token" => {
            #[derive(Deserialize)]
            struct RevokeArgs {
                token: String,
            }
            let revoke: RevokeArgs = args(body)?;
            shared.workspace().revoked.insert(revoke.token);
            Ok(json!({}))
        }
        "requests" => {
            let method = body
                .get("method")
                .and_then(Value::as_str)
                .map(str::to_string);
            let requests: Vec<_> = shared
                .log()
                .requests
                .iter()
                .filter(|request| method.as_ref().is_none_or(|m| *m == request.method))
                .cloned()
                .collect();
            Ok(json!({ "requests": requests }))
        }
        "frames" => Ok(json!({ "frames": shared.log().frames })),
        "deliveries" => Ok(json!({ "deliveries": shared.log().deliveries })),
        "set_request_url" => {
            #[derive(Deserialize)]
            struct RequestUrl {
                url: Option<String>,
            }
            let target: RequestUrl = args(body)?;
            shared
                .set_request_url(target.url.as_deref())
                .await
                .map_err(text)?;
            Ok(json!({}))
        }
        "notes" => Ok(json!({ "notes": shared.log().notes })),
        "view" => {
            let id = body
                .get("view_id")
                .and_then(Value::as_str)
                .ok_or("view_id is required")?;
            Ok(json!({ "view": shared.view(id) }))
        }
        "wait_for_message" => {
            let query: MessageQuery = args(body)?;
            let timeout = wait_time(query.timeout_ms)?;
            let message = shared
                .wait_for_message(
                    |message| {
                        query.channel.as_ref().is_none_or(|c| *c == message.channel)
                            && query
                                .thread_ts
                                .as_ref()
                                .is_none_or(|t| Some(t.as_str()) == message.thread_ts())
                            && query
                                .text_contains
                                .as_ref()
                                .is_none_or(|t| message.text().contains(t.as_str()))
                    },
                    timeout,
                )
                .await
                .map_err(text)?;
            Ok(json!({ "message": message }))
        }
        "wait_for_connections" => {
            let count = body.get("count").and_then(Value::as_u64).unwrap_or(1);
            let timeout: Timeout = args(body)?;
            shared
                .wait_for_connections(
                    usize::try_from(count).unwrap_or(usize::MAX),
                    wait_time(timeout.timeout_ms)?,
                )
                .await
                .map_err(text)?;
            Ok(json!({}))
        }
        "fail_next" => {
            let fail: FailNext = args(body)?;
            shared.faults().add(&fail.method, fail.count, fail.fault);
            Ok(json!({}))
        }
        "disconnect" => {
            let reason: DisconnectReason = match body.get("reason") {
                Some(reason) => args(reason.clone())?,
                None => DisconnectReason::RefreshRequested,
            };
            shared.disconnect(reason);
            Ok(json!({}))
        }
        "drop_connections" => {
            shared.close_connections();
            Ok(json!({}))
        }
        "reset" => {
            shared.reset();
            Ok(json!({}))
        }
        _ => Err(format!("unknown operation {operation:?}")),
    }
}
