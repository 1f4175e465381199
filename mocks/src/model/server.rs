//! The fake model's HTTP/1.1 server (hyper, keep-alive): routes each request to its API, checks
//! the key, bounds and parses the body, takes the script's turn, answers it whole or as a
//! stream written piece by piece, and records the request and how it ended (a client that goes
//! away mid-stream or during a hang is seen by the closed body channel).

use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, Limited, StreamBody};
use hyper::body::{Bytes, Frame, Incoming};
use hyper::header::HeaderMap;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio::task::JoinSet;

use super::answer::{Answer, input_tokens, last_user_text, offered_tools};
use super::errors::{self, ErrorAnswer, Provider, Refusal};
use super::record::{Api, Outcome, RecordedRequest, RequestLog};
use super::script::{ErrorKind, Reply, Script};
use super::sse::Event;
use super::{chat, messages, responses};

type Body = BoxBody<Bytes, Infallible>;

/// What every connection shares.
pub struct Shared {
    pub script: std::sync::Mutex<ScriptState>,
    pub log: RequestLog,
    pub api_keys: Vec<String>,
    pub models: Vec<String>,
    pub max_body_bytes: usize,
    numbers: AtomicU64,
}

/// The script and which of its turns have answered.
pub struct ScriptState {
    pub script: Script,
    pub used: Vec<bool>,
}

impl ScriptState {
    pub fn new(script: Script) -> ScriptState {
        ScriptState {
            used: vec![false; script.turns.len()],
            script,
        }
    }

    /// The first turn not yet used whose `match` is in `user_text` and whose tools, if it asks
    /// for them, are among `offered`, marked used.
    fn take(&mut self, user_text: &str, offered: &[String]) -> Option<(usize, Reply)> {
        let index = self
            .script
            .turns
            .iter()
            .enumerate()
            .position(|(index, turn)| {
                !self.used[index]
                    && turn
                        .when_user_says
                        .as_deref()
                        .is_none_or(|wanted| user_text.contains(wanted))
                    && (!turn.when_tools_offered || tools_offered(&turn.reply, offered))
            })?;
        self.used[index] = true;
        Some((index, self.script.turns[index].reply.clone()))
    }
}

/// Whether `offered` has every tool `reply` calls, or any tool for a reply that calls none.
fn tools_offered(reply: &Reply, offered: &[String]) -> bool {
    match reply {
        Reply::ToolCalls { calls, .. } => calls.iter().all(|call| offered.contains(&call.name)),
        _ => !offered.is_empty(),
    }
}

impl Shared {
    pub fn new(
        script: Script,
        api_keys: Vec<String>,
        models: Vec<String>,
        max_body_bytes: usize,
        max_log_bytes: usize,
    ) -> Shared {
        Shared {
            script: std::sync::Mutex::new(ScriptState::new(script)),
            log: RequestLog::new(max_log_bytes),
            api_keys,
            models,
            max_body_bytes,
            numbers: AtomicU64::new(1),
        }
    }

    pub fn script(&self) -> std::sync::MutexGuard<'_, ScriptState> {
        self.script
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// Serves on `listener` until the task is aborted; the connections end with it.
pub async fn serve(listener: tokio::net::TcpListener, shared: Arc<Shared>) {
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let Ok((stream, _)) = accepted else { continue };
                let _ = stream.set_nodelay(true);
                let shared = shared.clone();
                connections.spawn(async move {
                    let service = service_fn(move |request| handle(shared.clone(), request));
                    let _ = http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
}

fn route(method: &hyper::Method, path: &str) -> Api {
    let path = path.strip_prefix("/v1").unwrap_or(path);
    match (method.as_str(), path) {
        ("POST", "/chat/completions") => Api::ChatCompletions,
        ("POST", "/responses") => Api::Responses,
        ("POST", "/messages") => Api::Messages,
        ("POST", "/messages/count_tokens") => Api::CountTokens,
        ("GET", "/models") => Api::Models,
        ("GET", path) if path.starts_with("/models/") => Api::Models,
        _ => Api::Unknown,
    }
}

fn provider(api: Api, headers: &HeaderMap) -> Provider {
    match api {
        Api::Messages | Api::CountTokens => Provider::Anthropic,
        Api::ChatCompletions | Api::Responses => Provider::OpenAi,
        Api::Models | Api::Unknown => {
            if headers.contains_key("x-api-key") || headers.contains_key("anthropic-version") {
                Provider::Anthropic
            } else {
                Provider::OpenAi
            }
        }
    }
}

/// The key a request carries: `x-api-key`, else `Authorization: Bearer`.
fn presented_key(headers: &HeaderMap) -> Option<&str> {
    headers
        .get("x-api-key")
        .and_then(|value| value.to_str().ok())
        .or_else(|| {
            headers
                .get(hyper::header::AUTHORIZATION)
                .and_then(|value| value.to_str().ok())
                .and_then(|value| value.strip_prefix("Bearer "))
        })
        .map(str::trim)
}

async fn handle(
    shared: Arc<Shared>,
    request: hyper::Request<Incoming>,
) -> Result<hyper::Response<Body>, Infallible> {
    let (parts, body) = request.into_parts();
    let path = parts.uri.path().to_string();
    let api = route(&parts.method, &path);
    let provider = provider(api, &parts.headers);
    let number = shared.numbers.fetch_add(1, Ordering::Relaxed);
    let mut record = RecordedRequest {
        seq: 0,
        method: parts.method.to_string(),
        path: parts.uri.to_string(),
        api,
        body: Value::Null,
        stream: false,
        turn: None,
        status: 200,
        outcome: Outcome::Answered,
    };
    let body = match Limited::new(body, shared.max_body_bytes).collect().await {
        Ok(body) => body.to_bytes(),
        Err(error) => {
            let (refusal, message) = if error.is::<http_body_util::LengthLimitError>() {
                (
                    Refusal::TooLarge,
                    format!("the body is over {} bytes", shared.max_body_bytes),
                )
            } else {
                (
                    Refusal::Scripted(ErrorKind::InvalidRequest),
                    format!("the body could not be read: {error}"),
                )
            };
            let error = errors::answer(provider, refusal, Some(&message), None, number);
            return Ok(refuse(&shared, record, 0, error, provider, number));
        }
    };
    let body_bytes = body.len();
    record.body = serde_json::from_slice(&body)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&body).into_owned()));
    if !shared.api_keys.is_empty()
        && !presented_key(&parts.headers)
            .is_some_and(|key| shared.api_keys.iter().any(|k| k == key))
    {
        let error = errors::answer(
            provider,
            Refusal::Scripted(ErrorKind::Authentication),
            None,
            None,
            number,
        );
        return Ok(refuse(&shared, record, body_bytes, error, provider, number));
    }
    match api {
        Api::Unknown => {
            let message = format!("no such route: {} {path}", parts.method);
            let error = errors::answer(provider, Refusal::NotFound, Some(&message), None, number);
            Ok(refuse(&shared, record, body_bytes, error, provider, number))
        }
        Api::Models => Ok(models(&shared, record, body_bytes, &path, provider, number)),
        Api::CountTokens => match check_body(api, &body) {
            Ok(request) => {
                shared.log.push(record, body_bytes);
                let count = json!({"input_tokens": input_tokens(&request)});
                Ok(json_response(200, &count, provider, number))
            }
            Err(message) => {
                let error = errors::answer(
                    provider,
                    Refusal::Scripted(ErrorKind::InvalidRequest),
                    Some(&message),
                    None,
                    number,
                );
                Ok(refuse(&shared, record, body_bytes, error, provider, number))
            }
        },
        Api::ChatCompletions | Api::Responses | Api::Messages => {
            let request = match check_body(api, &body) {
                Ok(request) => request,
                Err(message) => {
                    let error = errors::answer(
                        provider,
                        Refusal::Scripted(ErrorKind::InvalidRequest),
                        Some(&message),
                        None,
                        number,
                    );
                    return Ok(refuse(&shared, record, body_bytes, error, provider, number));
                }
            };
            record.stream = request.get("stream").and_then(Value::as_bool) == Some(true);
            let taken = shared
                .script()
                .take(&last_user_text(api, &request), &offered_tools(&request));
            record.turn = taken.as_ref().map(|(index, _)| *index);
            let reply = match taken {
                Some((_, reply)) => reply,
                None => Reply::Text {
                    text: shared.script().script.exhausted_text.clone(),
                    stream: Default::default(),
                },
            };
            Ok(answer(
                &shared, record, body_bytes, api, provider, &request, reply, number,
            ))
        }
    }
}

/// The body as a JSON object with the fields the API cannot do without.
fn check_body(api: Api, body: &[u8]) -> Result<Value, String> {
    let request: Value =
        serde_json::from_slice(body).map_err(|error| format!("the body is not JSON: {error}"))?;
    if !request.is_object() {
        return Err("the body is not a JSON object".into());
    }
    if !request.get("model").is_some_and(Value::is_string) {
        return Err("model: a string is required".into());
    }
    let required: &[&str] = match api {
        Api::ChatCompletions => &["messages"],
        Api::Messages => &["messages", "max_tokens"],
        Api::CountTokens => &["messages"],
        _ => &[],
    };
    for field in required {
        if request.get(*field).is_none_or(Value::is_null) {
            return Err(format!("{field}: field required"));
        }
    }
    if let Some(messages) = request.get("messages")
        && !messages.is_array()
    {
        return Err("messages: an array is required".into());
    }
    Ok(request)
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_secs())
}

fn request_id_header(provider: Provider) -> &'static str {
    match provider {
        Provider::OpenAi => "x-request-id",
        Provider::Anthropic => "request-id",
    }
}

fn json_response(
    status: u16,
    body: &Value,
    provider: Provider,
    number: u64,
) -> hyper::Response<Body> {
    let mut response = hyper::Response::new(Full::new(Bytes::from(body.to_string())).boxed());
    *response.status_mut() =
        hyper::StatusCode::from_u16(status).unwrap_or(hyper::StatusCode::INTERNAL_SERVER_ERROR);
    let headers = response.headers_mut();
    headers.insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/json"),
    );
    if let Ok(id) = format!("req_ski{number:08}").parse() {
        headers.insert(request_id_header(provider), id);
    }
    response
}

fn refuse(
    shared: &Shared,
    mut record: RecordedRequest,
    body_bytes: usize,
    error: ErrorAnswer,
    provider: Provider,
    number: u64,
) -> hyper::Response<Body> {
    record.status = error.status;
    shared.log.push(record, body_bytes);
    let mut response = json_response(error.status, &error.body, provider, number);
    if let Some(seconds) = error.retry_after {
        response
            .headers_mut()
            .insert(hyper::header::RETRY_AFTER, seconds.into());
    }
    response
}

fn models(
    shared: &Shared,
    record: RecordedRequest,
    body_bytes: usize,
    path: &str,
    provider: Provider,
    number: u64,
) -> hyper::Response<Body> {
    let describe = |id: &str| match provider {
        Provider::OpenAi => json!({"id": id, "object": "model", "created": 0, "owned_by": "ski"}),
        Provider::Anthropic => json!({"type": "model", "id": id, "display_name": id,
                                      "created_at": "1970-01-01T00:00:00Z"}),
    };
    let asked = path
        .strip_prefix("/v1")
        .unwrap_or(path)
        .strip_prefix("/models/");
    let body = match asked {
        Some(id) if shared.models.iter().any(|model| model == id) => describe(id),
        Some(id) => {
            let message = format!("the model {id} does not exist");
            let error = errors::answer(provider, Refusal::NotFound, Some(&message), None, number);
            return refuse(shared, record, body_bytes, error, provider, number);
        }
        None => {
            let data: Vec<Value> = shared.models.iter().map(|id| describe(id)).collect();
            match provider {
                Provider::OpenAi => json!({"object": "list", "data": data}),
                Provider::Anthropic => json!({
                    "data": data,
                    "has_more": false,
                    "first_id": shared.models.first(),
                    "last_id": shared.models.last()
                }),
            }
        }
    };
    shared.log.push(record, body_bytes);
    json_response(200, &body, provider, number)
}

#[allow(clippy::too_many_arguments)]
fn answer(
    shared: &Arc<Shared>,
    mut record: RecordedRequest,
    body_bytes: usize,
    api: Api,
    provider: Provider,
    request: &Value,
    reply: Reply,
    number: u64,
) -> hyper::Response<Body> {
    let stream = record.stream;
    if let Reply::Error(error) = &reply
        && error.in_stream
        && stream
    {
        // The stream's opening (an empty answer's first events), then the error as an event.
        let opening = Reply::Text {
            text: String::new(),
            stream: Default::default(),
        };
        let mut events = Answer::plan(&opening, request, number, now())
            .map(|empty| match api {
                Api::ChatCompletions => chat::stream(&empty, false),
                Api::Responses => responses::stream(&empty, request),
                _ => messages::stream(&empty),
            })
            .unwrap_or_default();
        let kept = match api {
            Api::Responses => 2,
            _ => 1,
        };
        events.truncate(kept);
        events.push(errors::stream_error(
            api,
            error.kind,
            error.message.as_deref(),
            kept,
        ));
        return stream_events(
            shared,
            record,
            body_bytes,
            events,
            Duration::ZERO,
            provider,
            number,
        );
    }
    if let Reply::Error(error) = &reply {
        let error = errors::answer(
            provider,
            Refusal::Scripted(error.kind),
            error.message.as_deref(),
            error.retry_after,
            number,
        );
        return refuse(shared, record, body_bytes, error, provider, number);
    }
    let Some(answer) = Answer::plan(&reply, request, number, now()) else {
        // A hang: headers now, then nothing until the client goes away.
        record.outcome = Outcome::InProgress;
        let seq = shared.log.push(record, body_bytes);
        let (sender, body) = channel_body();
        let shared = shared.clone();
        tokio::spawn(async move {
            sender.closed().await;
            shared.log.set_outcome(seq, Outcome::Cancelled);
        });
        return with_stream_headers(body, stream, provider, number);
    };
    if !stream {
        let body = match api {
            Api::ChatCompletions => chat::completion(&answer),
            Api::Responses => responses::complete(&answer, request),
            _ => messages::complete(&answer),
        };
        shared.log.push(record, body_bytes);
        return json_response(200, &body, provider, number);
    }
    let events = match api {
        Api::ChatCompletions => {
            let include_usage = request
                .pointer("/stream_options/include_usage")
                .and_then(Value::as_bool)
                == Some(true);
            chat::stream(&answer, include_usage)
        }
        Api::Responses => responses::stream(&answer, request),
        _ => messages::stream(&answer),
    };
    stream_events(
        shared,
        record,
        body_bytes,
        events,
        answer.delay,
        provider,
        number,
    )
}

/// Answers `events` as a stream, recording the request in progress and then how it ended.
fn stream_events(
    shared: &Arc<Shared>,
    mut record: RecordedRequest,
    body_bytes: usize,
    events: Vec<Event>,
    delay: Duration,
    provider: Provider,
    number: u64,
) -> hyper::Response<Body> {
    record.outcome = Outcome::InProgress;
    let seq = shared.log.push(record, body_bytes);
    let (sender, body) = channel_body();
    let shared = shared.clone();
    tokio::spawn(async move {
        let outcome = write_events(&sender, events, delay).await;
        shared.log.set_outcome(seq, outcome);
    });
    with_stream_headers(body, true, provider, number)
}

/// Writes `events` in order, waiting `delay` before each paced one; `Cancelled` as soon as the
/// body is dropped (the client went away).
async fn write_events(
    sender: &mpsc::Sender<Bytes>,
    events: Vec<Event>,
    delay: Duration,
) -> Outcome {
    for event in events {
        if event.paced && !delay.is_zero() {
            tokio::select! {
                () = tokio::time::sleep(delay) => {}
                () = sender.closed() => return Outcome::Cancelled,
            }
        }
        if sender.send(Bytes::from(event.to_bytes())).await.is_err() {
            return Outcome::Cancelled;
        }
    }
    Outcome::Answered
}

/// A body fed by a channel of one chunk: the sender learns the body was dropped by `closed()`.
fn channel_body() -> (mpsc::Sender<Bytes>, Body) {
    let (sender, receiver) = mpsc::channel::<Bytes>(1);
    let frames = futures::stream::unfold(receiver, |mut receiver| async move {
        let bytes = receiver.recv().await?;
        Some((Ok::<_, Infallible>(Frame::data(bytes)), receiver))
    });
    (sender, BodyExt::boxed(StreamBody::new(frames)))
}

fn with_stream_headers(
    body: Body,
    event_stream: bool,
    provider: Provider,
    number: u64,
) -> hyper::Response<Body> {
    let mut response = hyper::Response::new(body);
    let headers = response.headers_mut();
    let kind = if event_stream {
        "text/event-stream; charset=utf-8"
    } else {
        "application/json"
    };
    headers.insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static(kind),
    );
    headers.insert(
        hyper::header::CACHE_CONTROL,
        hyper::header::HeaderValue::from_static("no-cache"),
    );
    if let Ok(id) = format!("req_ski{number:08}").parse() {
        headers.insert(request_id_header(provider), id);
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::script::Turn;

    #[test]
    fn a_turn_that_wants_its_tools_offered_waits_for_a_request_that_offers_them() {
        let call = Turn::tool_call("read", serde_json::json!({})).when_tools_offered();
        let mut state = ScriptState::new(Script::new(vec![call, Turn::text("plain")]));
        // A side request (a title) offers no tools: it takes the next turn instead.
        let (index, _) = state.take("hi", &[]).expect("a turn");
        assert_eq!(index, 1);
        assert!(state.take("hi", &["write".to_owned()]).is_none());
        let (index, reply) = state.take("hi", &["read".to_owned()]).expect("the call");
        assert_eq!(index, 0);
        assert!(matches!(reply, Reply::ToolCalls { .. }));
    }
}
