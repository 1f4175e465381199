//! The Web API front: an HTTP/1.1 server (keep-alive) that puts each request to the tests'
//! wiremock mocks first ([`super::overrides`]) and serves what none of them took from the fake's
//! state: `/api/<method>` for any verb, the upload URLs of files v2 and the `response_url`s. It
//! records every call, applies injected faults, and keeps nothing of a request beyond what the
//! log's retention allows.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use http_body_util::{BodyExt, Full, Limited};
use hyper::body::{Bytes, Incoming};
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use serde_json::{Map, Value, json};

use super::api;
use super::fault::Fault;
use super::limits::{Gate, after_accept_error, http1_builder};
use super::overrides::{Router, Upstream, Verdict};
use super::params::{Params, Request, TokenKind};
use super::shared::Shared;
use super::workspace::Stored;

const JSON: &str = "application/json; charset=utf-8";

/// The largest request body the Web API reads (uploads included); a larger one is answered 413.
pub const MAX_BODY_BYTES: usize = 64 << 20;

/// What the front answers.
pub struct ResponseTemplate {
    status: u16,
    body: Vec<u8>,
    content_type: &'static str,
    retry_after: Option<String>,
    delay: Option<Duration>,
}

impl ResponseTemplate {
    fn new(status: u16) -> ResponseTemplate {
        ResponseTemplate {
            status,
            body: Vec::new(),
            content_type: "text/plain",
            retry_after: None,
            delay: None,
        }
    }

    fn set_body_raw(mut self, body: Vec<u8>, content_type: &'static str) -> ResponseTemplate {
        self.body = body;
        self.content_type = content_type;
        self
    }

    fn insert_header(mut self, _name: &str, value: &str) -> ResponseTemplate {
        self.retry_after = Some(value.to_string());
        self
    }

    fn set_delay(mut self, delay: Duration) -> ResponseTemplate {
        self.delay = Some(delay);
        self
    }
}

/// Serves the Web API on `listener` until the task is aborted.
pub async fn serve(listener: std::net::TcpListener, shared: Arc<Shared>, overrides: Arc<Router>) {
    let listener = match listener
        .set_nonblocking(true)
        .and_then(|()| tokio::net::TcpListener::from_std(listener))
    {
        Ok(listener) => listener,
        Err(error) => {
            shared
                .log()
                .note(format!("the Web API cannot listen: {error}"));
            return;
        }
    };
    let limits = shared.config().limits;
    let gate = Gate::new(limits.max_connections);
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            after_accept_error().await;
            continue;
        };
        let Some(permit) = gate.admit() else {
            gate.refuse(stream, "web_api");
            continue;
        };
        let _ = stream.set_nodelay(true);
        let builder = http1_builder(&limits);
        let front = Arc::new(Front {
            shared: shared.clone(),
            origin: shared.site.origin.clone(),
            overrides: overrides.clone(),
            upstream: tokio::sync::Mutex::new(Upstream::default()),
        });
        tokio::spawn(async move {
            let _permit = permit;
            let service = service_fn(move |request| handle(front.clone(), request));
            let _ = builder
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

async fn handle(
    front: Arc<Front>,
    request: hyper::Request<Incoming>,
) -> Result<hyper::Response<Full<Bytes>>, Infallible> {
    let (parts, body) = request.into_parts();
    let body = match Limited::new(body, MAX_BODY_BYTES).collect().await {
        Ok(body) => body.to_bytes(),
        Err(_) => {
            return Ok(to_hyper(
                ResponseTemplate::new(413)
                    .set_body_raw(b"request too large".to_vec(), "text/plain"),
            ));
        }
    };
    let verdict = if front.overrides.engaged() {
        let mut upstream = front.upstream.lock().await;
        front.overrides.ask(&mut upstream, &parts, &body).await
    } else {
        Verdict::FallThrough
    };
    if let Verdict::Answered(response) = verdict {
        return Ok(response);
    }
    let path_and_query = parts.uri.path_and_query().map_or("/", |path| path.as_str());
    let Ok(url) = url::Url::parse(&format!("{}{path_and_query}", front.origin)) else {
        return Ok(to_hyper(
            ResponseTemplate::new(400).set_body_raw(b"bad request target".to_vec(), "text/plain"),
        ));
    };
    let request = Request {
        method: parts.method.to_string(),
        url,
        headers: parts.headers,
        body,
    };
    let response = front.respond(&request);
    if let Some(delay) = response.delay {
        tokio::time::sleep(delay).await;
    }
    Ok(to_hyper(response))
}

fn to_hyper(template: ResponseTemplate) -> hyper::Response<Full<Bytes>> {
    let mut response = hyper::Response::new(Full::new(Bytes::from(template.body)));
    *response.status_mut() = hyper::StatusCode::from_u16(template.status)
        .unwrap_or(hyper::StatusCode::INTERNAL_SERVER_ERROR);
    let headers = response.headers_mut();
    headers.insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static(template.content_type),
    );
    if let Some(value) = template
        .retry_after
        .and_then(|value| hyper::header::HeaderValue::from_str(&value).ok())
    {
        headers.insert(hyper::header::RETRY_AFTER, value);
    }
    response
}

/// One connection's view of the fake: its state, and its own connection to the mock server.
struct Front {
    shared: Arc<Shared>,
    origin: String,
    overrides: Arc<Router>,
    upstream: tokio::sync::Mutex<Upstream>,
}

/// The method a path names: `/api/<m>`, `/api//<m>` or `/<m>` (bases given without `/api`).
fn method_of(path: &str) -> Option<&str> {
    let rest = path.strip_prefix("/api/").map_or(path, |rest| rest);
    let method = rest.trim_start_matches('/');
    (method.contains('.') && !method.contains('/')).then_some(method)
}

fn json_response(status: u16, body: &Value) -> ResponseTemplate {
    ResponseTemplate::new(status).set_body_raw(serde_json::to_vec(body).unwrap_or_default(), JSON)
}

impl Front {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let path = request.url.path().to_string();
        if let Some(file) = path.strip_prefix("/upload/") {
            return self.upload(request, file);
        }
        if let Some(id) = path.strip_prefix("/response/") {
            return self.response_url(request, id);
        }
        let Some(method) = method_of(&path) else {
            return ResponseTemplate::new(404)
                .set_body_raw(b"not a slack api path".to_vec(), "text/plain");
        };
        let http_method = request.method.clone();
        let params = match Params::from_request(request) {
            Ok(params) => params,
            Err(code) => {
                let body = json!({ "ok": false, "error": code });
                self.shared.log().request(
                    &http_method,
                    method,
                    Map::new(),
                    TokenKind::of(None),
                    200,
                    body.clone(),
                );
                self.shared.bump();
                return json_response(200, &body);
            }
        };
        let fault = match self.shared.rate_limited(method) {
            Some(seconds) => Some(Fault::RateLimited {
                retry_after: Some(seconds),
            }),
            None => self.shared.faults().take(method),
        };
        let (status, body, retry_after, delay) = match fault {
            Some(Fault::Error { error }) => {
                (200, json!({ "ok": false, "error": error }), None, None)
            }
            Some(Fault::RateLimited { retry_after }) => (
                429,
                json!({ "ok": false, "error": "ratelimited" }),
                retry_after,
                None,
            ),
            Some(Fault::Status { status }) => (
                status,
                json!({ "ok": false, "error": "fake_http_error" }),
                None,
                None,
            ),
            Some(Fault::Delay { ms }) => (
                200,
                self.answer(method, &params),
                None,
                Some(Duration::from_millis(ms)),
            ),
            None => (200, self.answer(method, &params), None, None),
        };
        // The answer is encoded before the log takes it and the parameters: no copy of either.
        let mut response = json_response(status, &body);
        let token_kind = params.token_kind();
        self.shared
            .log()
            .request(&http_method, method, params.map, token_kind, status, body);
        self.shared.bump();
        if let Some(seconds) = retry_after {
            response = response.insert_header("retry-after", seconds.to_string().as_str());
        }
        if let Some(delay) = delay {
            response = response.set_delay(delay);
        }
        response
    }
}

impl Front {
    fn answer(&self, method: &str, params: &Params) -> Value {
        let answer = api::call(
            &mut self.shared.workspace(),
            &self.shared.site,
            method,
            params,
        );
        self.shared.deliver_queued_events();
        match answer {
            Ok(fields) => {
                let mut body = Map::new();
                body.insert("ok".into(), json!(true));
                body.extend(fields);
                Value::Object(body)
            }
            Err(code) => json!({ "ok": false, "error": code }),
        }
    }

    /// The upload POST of files v2: raw bytes or one multipart file part.
    fn upload(&self, request: &Request, file: &str) -> ResponseTemplate {
        let size = multipart_file_len(request).unwrap_or(request.body.len());
        let known = {
            let mut workspace = self.shared.workspace();
            match workspace.uploads.get_mut(file) {
                Some(upload) => {
                    upload.received = Some(size);
                    true
                }
                None => false,
            }
        };
        let status = if known { 200 } else { 404 };
        let text = if known {
            format!("OK - {size}")
        } else {
            "file not found".into()
        };
        self.shared.log().request(
            &request.method,
            "upload",
            Map::from_iter([
                ("file_id".to_string(), json!(file)),
                ("bytes".to_string(), json!(size)),
            ]),
            TokenKind::of(bearer(request)),
            status,
            json!(text),
        );
        self.shared.bump();
        ResponseTemplate::new(status).set_body_raw(text.into_bytes(), "text/plain; charset=utf-8")
    }

    /// A post to a `response_url`: a reply (ephemeral unless `in_channel`), or a replacement or
    /// deletion of the message the interaction came from.
    fn response_url(&self, request: &Request, id: &str) -> ResponseTemplate {
        let body: Value = match serde_json::from_slice(&request.body) {
            Ok(body) => body,
            Err(_) => {
                self.shared.log().request(
                    "POST",
                    "response_url",
                    Map::new(),
                    TokenKind::of(None),
                    400,
                    json!("invalid_payload"),
                );
                return ResponseTemplate::new(400)
                    .set_body_raw(b"invalid_payload".to_vec(), "text/plain");
            }
        };
        let outcome = {
            let mut workspace = self.shared.workspace();
            match workspace.response_urls.get(id).cloned() {
                None => None,
                Some(target) => {
                    let ts = workspace.next_ts();
                    let mut fields = Map::new();
                    fields.insert(
                        "text".into(),
                        body.get("text").cloned().unwrap_or(json!("")),
                    );
                    if let Some(blocks) = body.get("blocks") {
                        fields.insert("blocks".into(), blocks.clone());
                    }
                    let original = target.message_ts.clone();
                    if body["delete_original"] == json!(true) {
                        if let Some(original) = original {
                            workspace.messages.remove(&target.channel, &original);
                        }
                    } else if body["replace_original"] == json!(true) && original.is_some() {
                        let original = original.unwrap_or_default();
                        workspace
                            .messages
                            .update(&target.channel, &original, |message| {
                                if let Some(message) = message.as_object_mut() {
                                    message.extend(fields);
                                }
                            });
                    } else {
                        if let Some(thread) = body.get("thread_ts").and_then(Value::as_str) {
                            fields.insert("thread_ts".into(), json!(thread));
                        }
                        let mut message = workspace.bot_message(&ts, fields);
                        if body["response_type"] == json!("in_channel") {
                            workspace.store(&target.channel, message);
                        } else {
                            message["ephemeral_to"] = json!(target.user);
                            workspace.store_ephemeral(Stored {
                                channel: target.channel.clone(),
                                message,
                            });
                        }
                    }
                    Some(())
                }
            }
        };
        let params = body.as_object().cloned().unwrap_or_default();
        let status = if outcome.is_some() { 200 } else { 404 };
        let text = if outcome.is_some() {
            "ok"
        } else {
            "no_active_hooks"
        };
        self.shared.log().request(
            "POST",
            "response_url",
            params,
            TokenKind::of(None),
            status,
            json!(text),
        );
        self.shared.bump();
        ResponseTemplate::new(status)
            .set_body_raw(text.as_bytes().to_vec(), "text/plain; charset=utf-8")
    }
}

fn bearer(request: &Request) -> Option<&str> {
    request
        .headers
        .get("authorization")
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.strip_prefix("Bearer "))
}

/// The length of the first part of a `multipart/form-data` body.
fn multipart_file_len(request: &Request) -> Option<usize> {
    let content_type = request.headers.get("content-type")?.to_str().ok()?;
    let boundary = content_type.split("boundary=").nth(1)?.trim_matches('"');
    let delimiter = format!("--{boundary}");
    let body = &request.body;
    let start = find(body, delimiter.as_bytes())?;
    let headers_end = find(&body[start..], b"\r\n\r\n")? + start + 4;
    let end = find(&body[headers_end..], format!("\r\n{delimiter}").as_bytes())? + headers_end;
    Some(end - headers_end)
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack
        .windows(needle.len())
        .position(|window| window == needle)
}
