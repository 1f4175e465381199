//! The ACP-HTTP rows: what the remote transport RFD asks of a server's `/acp` endpoint, judged
//! over real HTTP/1.1 (and the HTTP/2 preface, and the WebSocket upgrade) on loopback with the
//! raw client of [`super::http`]: status codes, headers, which SSE stream carries which
//! message, DELETE and what follows it, a session resumed on a new connection.

use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::super::agent::{Agent, PLAIN, Transport};
use super::super::exchange::{
    QUIET, bare_capabilities, initialize, initialize_params, new_session_params, text_prompt,
};
use super::http::{self, Answer, Endpoint, Events, Request};
use crate::check::{Check, CheckError, CheckResult, Failure};
use crate::context::Ctx;
use crate::{ensure, ensure_eq, fail};

/// The checks of this module.
pub fn checks() -> Vec<Check> {
    vec![
        Check::new(
            "ACP-HTTP-001",
            "POSTs initialize to /acp without Acp-Connection-Id; the answer must be 200 with \
             Content-Type application/json, an Acp-Connection-Id header and the initialize \
             response (same id, a result) as its body.",
            http_001,
        ),
        Check::new(
            "ACP-HTTP-002",
            "Opens the connection-scoped stream and POSTs session/new; the POST must be answered \
             202 with an empty body and the session/new response arrive on that stream.",
            http_002,
        ),
        Check::new(
            "ACP-HTTP-003",
            "POSTs session/new with Content-Type text/plain on an initialized connection; the \
             answer must be 415.",
            http_003,
        ),
        Check::new(
            "ACP-HTTP-004",
            "GETs /acp with the connection's id and Accept: application/json only; the answer \
             must be 406.",
            http_004,
        ),
        Check::new(
            "ACP-HTTP-005",
            "POSTs session/prompt for an existing session with Acp-Connection-Id but without \
             Acp-Session-Id; the answer must be 400.",
            http_005,
        ),
        Check::new(
            "ACP-HTTP-006",
            "GETs /acp with Accept: text/event-stream and no Acp-Connection-Id; the answer must \
             be 400.",
            http_006,
        ),
        Check::new(
            "ACP-HTTP-007",
            "POSTs session/new and GETs a stream with an Acp-Connection-Id the server never \
             gave; both must be answered 404.",
            http_007,
        ),
        Check::new(
            "ACP-HTTP-008",
            "GETs a session-scoped stream with the connection's id and an Acp-Session-Id no \
             session has; the answer must be 404.",
            http_008,
        ),
        Check::new(
            "ACP-HTTP-009",
            "POSTs session/new without Acp-Connection-Id; the answer must be 400.",
            http_009,
        ),
        Check::new(
            "ACP-HTTP-010",
            "POSTs a JSON-RPC batch (an array of two requests) on an initialized connection; \
             the answer must be 501.",
            http_010,
        ),
        Check::new(
            "ACP-HTTP-011",
            "Creates two sessions on one connection, opens the connection stream and each \
             session's stream, prompts the first; the session/new responses must come on the \
             connection stream, the prompt's updates, requests (a permission request is \
             answered by a POST with both headers, answered 202) and response on the first \
             session's stream, and nothing of that turn on the connection stream or the second \
             session's.",
            http_011,
        ),
        Check::new(
            "ACP-HTTP-012",
            "POSTs a notification (session/cancel of an idle session) with both headers; its \
             POST must be answered 202 with an empty body.",
            http_012,
        ),
        Check::new(
            "ACP-HTTP-013",
            "DELETEs an initialized connection whose stream is open; the answer must be 202, \
             the connection stream must end, and a POST and a GET naming the connection after \
             it must be answered 404.",
            http_013,
        ),
        Check::new(
            "ACP-HTTP-014",
            "DELETEs /acp without Acp-Connection-Id; the answer must be 400.",
            http_014,
        ),
        Check::new(
            "ACP-HTTP-015",
            "Creates a session with a prompt turn on one connection and drops it; on a new \
             connection opens the session's stream before session/load, whose POST must be \
             answered 202, its response come on the new connection stream and the replayed \
             updates on the session stream.",
            http_015,
        ),
        Check::new(
            "ACP-HTTP-016",
            "Opens a TCP connection to the endpoint's port and sends the HTTP/2 connection \
             preface (cleartext, prior knowledge) with an empty SETTINGS frame; the server must \
             answer with an HTTP/2 SETTINGS frame.",
            http_016,
        ),
        Check::new(
            "ACP-HTTP-017",
            "GETs /acp with Upgrade: websocket; the 101 answer must carry an Acp-Connection-Id \
             header and initialize be answered over the WebSocket's text frames.",
            http_017,
        ),
    ]
}

/// The remote endpoint of a started agent.
struct Remote {
    agent: Agent,
    endpoint: Endpoint,
    limit: Duration,
}

async fn start(ctx: &Ctx) -> Result<Remote, CheckError> {
    let agent = Agent::start_on(ctx, Transport::Http, PLAIN).await?;
    let url = agent
        .url()
        .ok_or_else(|| CheckError::Harness("the remote agent has no url".into()))?
        .to_owned();
    let endpoint = Endpoint::for_ctx(ctx, &url)?;
    Ok(Remote {
        agent,
        endpoint,
        limit: ctx.timeouts().scale(Duration::from_secs(10)),
    })
}

fn rpc(id: i64, method: &str, params: Value) -> String {
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string()
}

fn initialize_body() -> String {
    rpc(0, "initialize", initialize_params(bare_capabilities()))
}

impl Remote {
    async fn send(&self, request: &Request) -> Result<Answer, CheckError> {
        http::send(&self.endpoint, request, self.limit)
            .await
            .map_err(|e| {
                Failure::new(
                    "the endpoint answers",
                    format!("an answer to {}", request.line()),
                )
                .actual(e)
                .into()
            })
    }

    /// `initialize`, answered 200 with a connection id: the id.
    async fn connect(&self) -> Result<String, CheckError> {
        let answer = self.send(&Request::post_json(&initialize_body())).await?;
        ensure_eq!(200, answer.head.status, "the status of the initialize POST");
        let id = answer.head.header("acp-connection-id").unwrap_or_default();
        ensure!(
            !id.is_empty(),
            "the initialize answer carries Acp-Connection-Id",
            "{}",
            answer.describe()
        );
        Ok(id.to_owned())
    }

    /// Opens a stream (the connection's, or `session`'s), answered 200; its events read.
    async fn stream(&self, connection: &str, session: Option<&str>) -> Result<Tap, CheckError> {
        let request = Request::get_stream()
            .header("Acp-Connection-Id", connection)
            .header_opt("Acp-Session-Id", session);
        let opened = tokio::time::timeout(self.limit, http::open(&self.endpoint, &request)).await;
        let (head, body) = match opened {
            Ok(Ok(opened)) => opened,
            Ok(Err(e)) => fail!("the stream opens", "{e}"),
            Err(_) => fail!(
                "the stream opens",
                "no answer to {} within {:?}",
                request.line(),
                self.limit
            ),
        };
        ensure_eq!(
            200,
            head.status,
            "the status of the GET of a stream ({})",
            request.line()
        );
        Ok(Tap::new(Events::new(body), self.limit))
    }

    /// POSTs `body` on `connection` (with `session`'s header): the answer.
    async fn post(
        &self,
        connection: &str,
        session: Option<&str>,
        body: &str,
    ) -> Result<Answer, CheckError> {
        self.send(
            &Request::post_json(body)
                .header("Acp-Connection-Id", connection)
                .header("Acp-Protocol-Version", "1")
                .header_opt("Acp-Session-Id", session),
        )
        .await
    }

    /// POSTs `body` and requires 202 with an empty body.
    async fn post_accepted(
        &self,
        connection: &str,
        session: Option<&str>,
        body: &str,
    ) -> CheckResult {
        let answer = self.post(connection, session, body).await?;
        ensure!(
            answer.head.status == 202 && answer.body.is_empty(),
            "a POST other than initialize is answered 202 Accepted with an empty body",
            "{} to {body}",
            answer.describe()
        );
        Ok(())
    }

    /// `session/new` over the connection stream `tap`: the session id.
    async fn new_session(
        &self,
        ctx: &Ctx,
        connection: &str,
        tap: &mut Tap,
        id: i64,
    ) -> Result<String, CheckError> {
        self.post_accepted(
            connection,
            None,
            &rpc(id, "session/new", new_session_params(ctx)),
        )
        .await?;
        let answer = tap
            .answer(id, "the session/new response on the connection stream")
            .await?;
        answer
            .pointer("/result/sessionId")
            .and_then(Value::as_str)
            .map(str::to_owned)
            .ok_or_else(|| {
                Failure::new("session/new succeeds", "a result with a sessionId")
                    .actual(answer.to_string())
                    .into()
            })
    }
}

impl Remote {
    /// Reads `tap` (a session's stream) until the response to `id`, answering the agent's
    /// requests on the way with POSTs that carry the session's header (a permission request:
    /// the first allow option; any other: method not found), each of which must be answered 202.
    async fn answer_on(
        &self,
        tap: &mut Tap,
        connection: &str,
        session: &str,
        id: i64,
        what: &str,
    ) -> Result<Value, CheckError> {
        let deadline = tokio::time::Instant::now() + self.limit;
        loop {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            let message = match tap.next(left).await {
                Ok(Some(message)) => message,
                Ok(None) => fail!(
                    what,
                    "no response with id {id} within {:?}; read {}",
                    self.limit,
                    tap.shown()
                ),
                Err(e) => fail!(what, "{e}; read {}", tap.shown()),
            };
            if message.get("method").is_none() && message.get("id") == Some(&json!(id)) {
                return Ok(message);
            }
            let (Some(method), Some(asked)) = (
                message.get("method").and_then(Value::as_str),
                message.get("id"),
            ) else {
                continue;
            };
            let reply = if method == "session/request_permission" {
                let options = message
                    .pointer("/params/options")
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default();
                let chosen = options
                    .iter()
                    .find(|o| o.get("kind").and_then(Value::as_str) == Some("allow_once"))
                    .or_else(|| options.first())
                    .and_then(|o| o.get("optionId").cloned());
                let outcome = match chosen {
                    Some(option) => json!({"outcome": "selected", "optionId": option}),
                    None => json!({"outcome": "cancelled"}),
                };
                json!({"jsonrpc": "2.0", "id": asked, "result": {"outcome": outcome}})
            } else {
                json!({"jsonrpc": "2.0", "id": asked, "error": {"code": -32601, "message": "Method not found"}})
            };
            self.post_accepted(connection, Some(session), &reply.to_string())
                .await?;
        }
    }
}

/// The messages of one stream, read by a task of their own.
struct Tap {
    rx: mpsc::UnboundedReceiver<Result<Value, String>>,
    reader: JoinHandle<()>,
    limit: Duration,
    seen: Vec<Value>,
}

impl Drop for Tap {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

impl Tap {
    fn new(mut events: Events, limit: Duration) -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        let reader = tokio::spawn(async move {
            loop {
                let item = match events.next().await {
                    Ok(Some(data)) => serde_json::from_str::<Value>(&data)
                        .map_err(|_| format!("an event that is not JSON: {data:?}")),
                    Ok(None) => Err("the stream ended".to_owned()),
                    Err(e) => Err(format!("the stream failed: {e}")),
                };
                let end = item.is_err();
                if tx.send(item).is_err() || end {
                    return;
                }
            }
        });
        Self {
            rx,
            reader,
            limit,
            seen: Vec::new(),
        }
    }

    /// The next message within `within`: `Ok(None)` when none came, `Err` when the stream
    /// ended or sent something that is not JSON.
    async fn next(&mut self, within: Duration) -> Result<Option<Value>, String> {
        match tokio::time::timeout(within, self.rx.recv()).await {
            Err(_) => Ok(None),
            Ok(None) => Err("the stream ended".to_owned()),
            Ok(Some(Ok(value))) => {
                self.seen.push(value.clone());
                Ok(Some(value))
            }
            Ok(Some(Err(e))) => Err(e),
        }
    }

    /// Reads until the response to `id`; fails with `what` when it does not come.
    async fn answer(&mut self, id: i64, what: &str) -> Result<Value, CheckError> {
        let deadline = tokio::time::Instant::now() + self.limit;
        loop {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            match self.next(left).await {
                Ok(Some(value))
                    if value.get("method").is_none() && value.get("id") == Some(&json!(id)) =>
                {
                    return Ok(value);
                }
                Ok(Some(_)) => {}
                Ok(None) => fail!(
                    what,
                    "no response with id {id} within {:?}; read {}",
                    self.limit,
                    self.shown()
                ),
                Err(e) => fail!(what, "{e}; read {}", self.shown()),
            }
        }
    }

    /// Everything that arrives until `period` passes without a message.
    async fn quiet(&mut self, period: Duration) -> Result<(), String> {
        while self.next(period).await?.is_some() {}
        Ok(())
    }

    /// Whether the stream ends within `within`.
    async fn ends(&mut self, within: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            match self.next(left).await {
                Ok(Some(_)) => {}
                Ok(None) => return false,
                Err(_) => return true,
            }
        }
    }

    fn shown(&self) -> String {
        let all: Vec<String> = self.seen.iter().map(|v| short(&v.to_string())).collect();
        format!("[{}]", all.join(", "))
    }
}

fn short(text: &str) -> String {
    if text.chars().count() <= 200 {
        text.to_owned()
    } else {
        format!("{}…", text.chars().take(200).collect::<String>())
    }
}

async fn http_001(ctx: Ctx) -> CheckResult {
    let remote = start(&ctx).await?;
    let answer = remote.send(&Request::post_json(&initialize_body())).await?;
    ensure_eq!(200, answer.head.status, "the status of the initialize POST");
    let content_type = answer.head.header("content-type").unwrap_or_default();
    ensure!(
        content_type
            .to_ascii_lowercase()
            .starts_with("application/json"),
        "the initialize answer has Content-Type application/json",
        "{}",
        answer.describe()
    );
    ensure!(
        answer
            .head
            .header("acp-connection-id")
            .is_some_and(|v| !v.is_empty()),
        "the initialize answer carries an Acp-Connection-Id header",
        "{}",
        answer.describe()
    );
    let body: Value = serde_json::from_slice(&answer.body).unwrap_or(Value::Null);
    ensure!(
        body.get("id") == Some(&json!(0)) && body.get("result").is_some_and(Value::is_object),
        "the initialize answer's body is the initialize response (id 0, a result)",
        "{}",
        answer.describe()
    );
    drop(remote.agent);
    Ok(())
}

async fn http_002(ctx: Ctx) -> CheckResult {
    let remote = start(&ctx).await?;
    let connection = remote.connect().await?;
    let mut tap = remote.stream(&connection, None).await?;
    remote.new_session(&ctx, &connection, &mut tap, 1).await?;
    Ok(())
}

async fn http_003(ctx: Ctx) -> CheckResult {
    let remote = start(&ctx).await?;
    let connection = remote.connect().await?;
    let request = Request::new("POST")
        .header("Content-Type", "text/plain")
        .header("Acp-Connection-Id", &connection)
        .body(&rpc(1, "session/new", new_session_params(&ctx)));
    let answer = remote.send(&request).await?;
    ensure_eq!(
        415,
        answer.head.status,
        "the status of a POST with Content-Type text/plain"
    );
    Ok(())
}

async fn http_004(ctx: Ctx) -> CheckResult {
    let remote = start(&ctx).await?;
    let connection = remote.connect().await?;
    let request = Request::new("GET")
        .header("Accept", "application/json")
        .header("Acp-Connection-Id", &connection);
    let answer = remote.send(&request).await?;
    ensure_eq!(
        406,
        answer.head.status,
        "the status of a GET whose Accept lacks text/event-stream"
    );
    Ok(())
}

async fn http_005(ctx: Ctx) -> CheckResult {
    let remote = start(&ctx).await?;
    let connection = remote.connect().await?;
    let mut tap = remote.stream(&connection, None).await?;
    let session = remote.new_session(&ctx, &connection, &mut tap, 1).await?;
    let body = rpc(
        2,
        "session/prompt",
        json!({"sessionId": session, "prompt": text_prompt("hello")}),
    );
    let answer = remote.post(&connection, None, &body).await?;
    ensure_eq!(
        400,
        answer.head.status,
        "the status of a session's POST without Acp-Session-Id"
    );
    Ok(())
}

async fn http_006(ctx: Ctx) -> CheckResult {
    let remote = start(&ctx).await?;
    remote.connect().await?;
    let answer = remote.send(&Request::get_stream()).await?;
    ensure_eq!(
        400,
        answer.head.status,
        "the status of a GET without Acp-Connection-Id"
    );
    Ok(())
}

/// An id no server gave.
const UNKNOWN: &str = "ski-conformance-unknown-connection";

async fn http_007(ctx: Ctx) -> CheckResult {
    let remote = start(&ctx).await?;
    remote.connect().await?;
    let post = remote
        .post(
            UNKNOWN,
            None,
            &rpc(1, "session/new", new_session_params(&ctx)),
        )
        .await?;
    ensure_eq!(
        404,
        post.head.status,
        "the status of a POST naming an unknown connection"
    );
    let get = remote
        .send(&Request::get_stream().header("Acp-Connection-Id", UNKNOWN))
        .await?;
    ensure_eq!(
        404,
        get.head.status,
        "the status of a GET naming an unknown connection"
    );
    Ok(())
}

async fn http_008(ctx: Ctx) -> CheckResult {
    let remote = start(&ctx).await?;
    let connection = remote.connect().await?;
    let request = Request::get_stream()
        .header("Acp-Connection-Id", &connection)
        .header("Acp-Session-Id", "ski-conformance-unknown-session");
    let answer = remote.send(&request).await?;
    ensure_eq!(
        404,
        answer.head.status,
        "the status of a GET naming an unknown session"
    );
    Ok(())
}

async fn http_009(ctx: Ctx) -> CheckResult {
    let remote = start(&ctx).await?;
    remote.connect().await?;
    let request = Request::post_json(&rpc(1, "session/new", new_session_params(&ctx)));
    let answer = remote.send(&request).await?;
    ensure_eq!(
        400,
        answer.head.status,
        "the status of a POST other than initialize without Acp-Connection-Id"
    );
    Ok(())
}

async fn http_010(ctx: Ctx) -> CheckResult {
    let remote = start(&ctx).await?;
    let connection = remote.connect().await?;
    let batch = format!(
        "[{},{}]",
        rpc(1, "session/new", new_session_params(&ctx)),
        rpc(2, "session/new", new_session_params(&ctx))
    );
    let answer = remote.post(&connection, None, &batch).await?;
    ensure_eq!(501, answer.head.status, "the status of a batch POST");
    Ok(())
}

/// Whether `message` belongs to the turn of `session` answered by `id`: its updates, its
/// requests, its response.
fn of_turn(message: &Value, session: &str, id: i64) -> bool {
    let names = message.pointer("/params/sessionId").and_then(Value::as_str) == Some(session);
    let answers = message.get("method").is_none() && message.get("id") == Some(&json!(id));
    names || answers
}

async fn http_011(ctx: Ctx) -> CheckResult {
    let remote = start(&ctx).await?;
    let connection = remote.connect().await?;
    let mut main = remote.stream(&connection, None).await?;
    let first = remote.new_session(&ctx, &connection, &mut main, 1).await?;
    let second = remote.new_session(&ctx, &connection, &mut main, 2).await?;
    let mut first_tap = remote.stream(&connection, Some(&first)).await?;
    let mut second_tap = remote.stream(&connection, Some(&second)).await?;
    let body = rpc(
        3,
        "session/prompt",
        json!({"sessionId": first, "prompt": text_prompt("routed")}),
    );
    remote
        .post_accepted(&connection, Some(&first), &body)
        .await?;
    let answer = remote
        .answer_on(
            &mut first_tap,
            &connection,
            &first,
            3,
            "the session/prompt response on the session's stream",
        )
        .await?;
    ensure!(
        answer.get("result").is_some(),
        "the prompt succeeds",
        "{answer}"
    );
    let updates = first_tap
        .seen
        .iter()
        .filter(|m| m.get("method").and_then(Value::as_str) == Some("session/update"))
        .count();
    ensure!(
        updates > 0,
        "the prompt's session/update notifications come on the session's stream",
        "read {}",
        first_tap.shown()
    );
    let quiet = ctx.timeouts().scale(QUIET);
    let (a, b) = (main.quiet(quiet).await, second_tap.quiet(quiet).await);
    if let Err(e) = a.and(b) {
        fail!("the other streams stay open", "{e}");
    }
    let strays: Vec<String> = main
        .seen
        .iter()
        .chain(&second_tap.seen)
        .filter(|m| of_turn(m, &first, 3))
        .map(|m| short(&m.to_string()))
        .collect();
    ensure!(
        strays.is_empty(),
        "nothing of the first session's turn comes on the connection stream or the second session's stream",
        "{strays:?}"
    );
    Ok(())
}

async fn http_012(ctx: Ctx) -> CheckResult {
    let remote = start(&ctx).await?;
    let connection = remote.connect().await?;
    let mut tap = remote.stream(&connection, None).await?;
    let session = remote.new_session(&ctx, &connection, &mut tap, 1).await?;
    let _session_tap = remote.stream(&connection, Some(&session)).await?;
    let cancel =
        json!({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": session}});
    remote
        .post_accepted(&connection, Some(&session), &cancel.to_string())
        .await
}

async fn http_013(ctx: Ctx) -> CheckResult {
    let remote = start(&ctx).await?;
    let connection = remote.connect().await?;
    let mut tap = remote.stream(&connection, None).await?;
    let answer = remote
        .send(&Request::new("DELETE").header("Acp-Connection-Id", &connection))
        .await?;
    ensure_eq!(202, answer.head.status, "the status of DELETE");
    // Within a short row's budget: the stream's end follows DELETE at once.
    let within = ctx.timeouts().scale(Duration::from_secs(3));
    ensure!(
        tap.ends(within).await,
        "the connection stream ends after DELETE",
        "it stayed open for {within:?}; read {}",
        tap.shown()
    );
    let post = remote
        .post(
            &connection,
            None,
            &rpc(1, "session/new", new_session_params(&ctx)),
        )
        .await?;
    ensure_eq!(
        404,
        post.head.status,
        "the status of a POST naming the deleted connection"
    );
    let get = remote
        .send(&Request::get_stream().header("Acp-Connection-Id", &connection))
        .await?;
    ensure_eq!(
        404,
        get.head.status,
        "the status of a GET naming the deleted connection"
    );
    Ok(())
}

async fn http_014(ctx: Ctx) -> CheckResult {
    let remote = start(&ctx).await?;
    remote.connect().await?;
    let answer = remote.send(&Request::new("DELETE")).await?;
    ensure_eq!(
        400,
        answer.head.status,
        "the status of DELETE without Acp-Connection-Id"
    );
    Ok(())
}

async fn http_015(ctx: Ctx) -> CheckResult {
    let remote = start(&ctx).await?;
    let session = {
        let connection = remote.connect().await?;
        let mut main = remote.stream(&connection, None).await?;
        let session = remote.new_session(&ctx, &connection, &mut main, 1).await?;
        let mut session_tap = remote.stream(&connection, Some(&session)).await?;
        let body = rpc(
            2,
            "session/prompt",
            json!({"sessionId": session, "prompt": text_prompt("remember me")}),
        );
        remote
            .post_accepted(&connection, Some(&session), &body)
            .await?;
        remote
            .answer_on(
                &mut session_tap,
                &connection,
                &session,
                2,
                "the first connection's prompt response",
            )
            .await?;
        session
    };
    // The first connection's streams are dropped (the client went away without DELETE).
    let connection = remote.connect().await?;
    let mut main = remote.stream(&connection, None).await?;
    let mut session_tap = remote.stream(&connection, Some(&session)).await?;
    let load = rpc(
        3,
        "session/load",
        json!({"sessionId": session, "cwd": ctx.temp_dir().display().to_string(), "mcpServers": []}),
    );
    remote
        .post_accepted(&connection, Some(&session), &load)
        .await?;
    let answer = main
        .answer(3, "the session/load response on the new connection stream")
        .await?;
    ensure!(
        answer.get("result").is_some(),
        "session/load of the dropped connection's session succeeds",
        "{answer}"
    );
    if let Err(e) = session_tap.quiet(ctx.timeouts().scale(QUIET)).await {
        fail!("the session stream stays open", "{e}");
    }
    let replayed = session_tap
        .seen
        .iter()
        .filter(|m| m.get("method").and_then(Value::as_str) == Some("session/update"))
        .count();
    ensure!(
        replayed > 0,
        "the session's history is replayed on its session stream",
        "the session stream read {}; the connection stream read {}",
        session_tap.shown(),
        main.shown()
    );
    Ok(())
}

async fn http_016(ctx: Ctx) -> CheckResult {
    let remote = start(&ctx).await?;
    match http::h2_preface(&remote.endpoint, remote.limit).await {
        Ok(4) => Ok(()),
        Ok(kind) => fail!(
            "the server answers the HTTP/2 preface with a SETTINGS frame",
            "a frame of type {kind}"
        ),
        Err(e) => fail!(
            "the server answers the HTTP/2 preface with a SETTINGS frame",
            "{e}"
        ),
    }
}

async fn http_017(ctx: Ctx) -> CheckResult {
    let mut remote = start(&ctx).await?;
    let mut conn = remote
        .agent
        .connect_path(&remote.endpoint.path.clone())
        .await?;
    let id = conn
        .headers()
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case("acp-connection-id"))
        .map(|(_, v)| v.clone());
    ensure!(
        id.as_deref().is_some_and(|v| !v.is_empty()),
        "the 101 answer of the WebSocket upgrade carries an Acp-Connection-Id header",
        "headers {:?}",
        conn.headers()
    );
    initialize(&mut conn).await?;
    Ok(())
}
