//! One raw JSON-RPC connection to the agent under test: every frame in and out is recorded in the
//! wire log, every frame the agent sends is kept in order and checked by the schema
//! [`oracle`](super::oracle), and requests the agent makes of the client are answered by a
//! configurable [`Responder`].
//!
//! The connection never repairs what it reads: a frame that is not JSON, a second response to one
//! id or a response to nothing are all kept, so that checks can judge them.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use futures::stream::{SplitSink, SplitStream};
use futures::{SinkExt, StreamExt};
use serde_json::{Value, json};
use ski::transport::child::Child;
use ski::transport::{Direction, LoggedRead, LoggedWrite, WireLog};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio::process::{ChildStdin, ChildStdout};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_tungstenite::tungstenite::Message as WsMessage;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

use super::oracle::{Oracle, Problem};
use super::remote::http::Endpoint;
use super::remote::streamable::{Item, Refused, Streamable};
use crate::check::{CheckError, Failure, OrFail};
use crate::context::Ctx;

type WsStream = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// How a frame arrived.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameKind {
    /// A newline-terminated line (stdio) or a text frame (WebSocket).
    Text,
    /// A WebSocket binary frame.
    Binary,
    /// The last bytes of stdout, without a line terminator.
    Unterminated,
}

/// One frame the agent sent.
#[derive(Debug, Clone)]
pub struct Frame {
    /// Its position among the frames of this connection, from 0.
    pub seq: usize,
    /// When it was read.
    pub at: Instant,
    /// The text as read (lossy UTF-8), without the line terminator.
    pub text: String,
    /// How it arrived.
    pub kind: FrameKind,
    /// The text parsed as JSON, when it is JSON.
    pub value: Option<Value>,
}

impl Frame {
    fn field(&self, key: &str) -> Option<&Value> {
        self.value.as_ref()?.as_object()?.get(key)
    }

    /// The method of a request or notification.
    pub fn method(&self) -> Option<&str> {
        self.field("method")?.as_str()
    }

    /// The `id` member, as sent.
    pub fn id(&self) -> Option<&Value> {
        self.field("id")
    }

    /// Whether this is a response (an object with `result` or `error` and no `method`).
    pub fn is_response(&self) -> bool {
        self.field("method").is_none()
            && (self.field("result").is_some() || self.field("error").is_some())
    }

    /// Whether this is a response carrying exactly `id`.
    pub fn answers(&self, id: &Value) -> bool {
        self.is_response() && self.id() == Some(id)
    }

    /// Whether this is a request of the agent to the client.
    pub fn is_request(&self) -> bool {
        self.method().is_some() && self.field("id").is_some()
    }

    /// Whether this is a notification.
    pub fn is_notification(&self) -> bool {
        self.method().is_some() && self.field("id").is_none()
    }

    /// The params object.
    pub fn params(&self) -> Option<&Value> {
        self.field("params")
    }

    /// `params.sessionId`.
    pub fn session_id(&self) -> Option<&str> {
        self.params()?.get("sessionId")?.as_str()
    }

    /// The update of a `session/update` notification.
    pub fn update(&self) -> Option<&Value> {
        if self.method() != Some("session/update") {
            return None;
        }
        self.params()?.get("update")
    }

    /// The `sessionUpdate` kind of a `session/update` notification.
    pub fn update_kind(&self) -> Option<&str> {
        self.update()?.get("sessionUpdate")?.as_str()
    }

    /// Whether this is a `session/update` for `session`.
    pub fn is_update_for(&self, session: &str) -> bool {
        self.update().is_some() && self.session_id() == Some(session)
    }

    /// The reply this response carries.
    pub fn reply(&self) -> Option<Reply> {
        if !self.is_response() {
            return None;
        }
        if let Some(error) = self.field("error") {
            return Some(Err(Fault::from_value(error)));
        }
        self.field("result").cloned().map(Ok)
    }

    /// The text, cut to `max` characters for messages.
    pub fn short(&self, max: usize) -> String {
        clip(&self.text, max)
    }
}

/// Cuts `text` to `max` characters, saying so.
pub fn clip(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        text.to_owned()
    } else {
        let cut: String = text.chars().take(max).collect();
        format!("{cut}… ({} bytes)", text.len())
    }
}

/// An error response.
#[derive(Debug, Clone, PartialEq)]
pub struct Fault {
    /// `error.code`, when it is an integer.
    pub code: Option<i64>,
    /// `error.message`, when it is a string.
    pub message: String,
    /// The whole error object.
    pub raw: Value,
}

impl Fault {
    fn from_value(error: &Value) -> Self {
        Self {
            code: error.get("code").and_then(Value::as_i64),
            message: error
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned(),
            raw: error.clone(),
        }
    }
}

impl std::fmt::Display for Fault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "error {}", self.raw)
    }
}

/// A response: the result, or the error.
pub type Reply = Result<Value, Fault>;

/// Describes a reply for an Actual line.
pub fn describe(reply: &Reply) -> String {
    match reply {
        Ok(result) => format!("result {}", clip(&result.to_string(), 300)),
        Err(fault) => format!("error {}", clip(&fault.raw.to_string(), 300)),
    }
}

/// How the client side answers `session/request_permission`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PermissionReply {
    /// Allow: select the first `allow_once` option, else the first `allow_always` one; answer
    /// `cancelled` when the agent offers neither (the runner as an ordinary client).
    Allow,
    /// Select the first option of this kind (`allow_once`, `reject_always`, ...); answer
    /// `cancelled` when none is offered.
    Select(String),
    /// Answer `{"outcome": {"outcome": "cancelled"}}`.
    Cancelled,
    /// Never answer.
    Ignore,
}

/// How the harness answers requests the agent makes of the client.
#[derive(Debug, Clone)]
pub struct Responder {
    /// The answer to permission requests.
    pub permission: PermissionReply,
    /// Whether `terminal/*` requests are served by a fake terminal (every command exits 0 at
    /// once with output `ok`); otherwise they, like `fs/*`, answer -32601.
    pub terminals: bool,
    next_terminal: u32,
}

impl Default for Responder {
    fn default() -> Self {
        Self {
            permission: PermissionReply::Allow,
            terminals: false,
            next_terminal: 0,
        }
    }
}

impl Responder {
    /// The answer to one request, or `None` to leave it unanswered.
    fn answer(&mut self, method: &str, params: Option<&Value>) -> Option<Result<Value, Value>> {
        let not_found = || {
            Some(Err(json!({
                "code": -32601,
                "message": format!("method not found: {method}"),
            })))
        };
        match method {
            "session/request_permission" => match &self.permission {
                PermissionReply::Ignore => None,
                PermissionReply::Cancelled => Some(Ok(permission_outcome(None))),
                PermissionReply::Allow => Some(Ok(permission_outcome(
                    option_of_kind(params, "allow_once")
                        .or_else(|| option_of_kind(params, "allow_always")),
                ))),
                PermissionReply::Select(kind) => {
                    Some(Ok(permission_outcome(option_of_kind(params, kind))))
                }
            },
            m if m.starts_with("terminal/") && self.terminals => Some(Ok(match m {
                "terminal/create" => {
                    self.next_terminal += 1;
                    json!({"terminalId": format!("term-{}", self.next_terminal)})
                }
                "terminal/output" => json!({
                    "output": "ok\n",
                    "truncated": false,
                    "exitStatus": {"exitCode": 0, "signal": null},
                }),
                "terminal/wait_for_exit" => json!({"exitCode": 0, "signal": null}),
                _ => json!({}),
            })),
            _ => not_found(),
        }
    }
}

/// The `optionId` of the first option of `kind` a `session/request_permission` offers.
pub fn option_of_kind(params: Option<&Value>, kind: &str) -> Option<Value> {
    params?
        .get("options")?
        .as_array()?
        .iter()
        .find(|o| o.get("kind").and_then(Value::as_str) == Some(kind))?
        .get("optionId")
        .cloned()
}

/// The result of a `session/request_permission`: the option selected, or `cancelled`.
pub fn permission_outcome(option: Option<Value>) -> Value {
    match option {
        Some(id) => json!({"outcome": {"outcome": "selected", "optionId": id}}),
        None => json!({"outcome": {"outcome": "cancelled"}}),
    }
}

enum Sink {
    Stdio(LoggedWrite<ChildStdin>),
    Ws(SplitSink<WsStream, WsMessage>),
    Http(Arc<Streamable>),
    Closed,
}

struct Shared {
    sink: tokio::sync::Mutex<Sink>,
    /// The method of every request sent, by the JSON text of its id.
    sent: Mutex<HashMap<String, String>>,
    responder: Mutex<Responder>,
    oracle: Mutex<Oracle>,
    wire: WireLog,
    channel: String,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Shared {
    async fn write_text(&self, text: &str) -> std::io::Result<()> {
        let mut sink = self.sink.lock().await;
        if let Sink::Http(client) = &*sink {
            // POSTs go out concurrently (an answer to the agent need not wait for a slow POST).
            let client = Arc::clone(client);
            drop(sink);
            return client.send(text).await;
        }
        match &mut *sink {
            Sink::Stdio(stdin) => {
                let mut line = Vec::with_capacity(text.len() + 1);
                line.extend_from_slice(text.as_bytes());
                line.push(b'\n');
                stdin.write_all(&line).await?;
                stdin.flush().await
            }
            Sink::Ws(ws) => {
                self.wire.record(&self.channel, Direction::Out, text);
                ws.send(WsMessage::text(text.to_owned()))
                    .await
                    .map_err(std::io::Error::other)
            }
            Sink::Http(_) => Ok(()),
            Sink::Closed => Err(std::io::Error::new(
                std::io::ErrorKind::BrokenPipe,
                "the connection was closed by the harness",
            )),
        }
    }

    fn remember(&self, value: &Value) {
        if let (Some(id), Some(method)) =
            (value.get("id"), value.get("method").and_then(Value::as_str))
        {
            lock(&self.sent).insert(id.to_string(), method.to_owned());
        }
    }
}

enum Inbound {
    Frame(String, FrameKind),
    Closed(String),
}

/// A raw JSON-RPC connection to the agent under test. See the module docs.
pub struct Connection {
    ctx: Ctx,
    shared: Arc<Shared>,
    inbox: mpsc::UnboundedReceiver<Inbound>,
    frames: Vec<Frame>,
    closed: Option<String>,
    next_id: i64,
    headers: Vec<(String, String)>,
    reader: JoinHandle<()>,
    /// No wait goes past the row's budget counted from here (it grows with each set-up step),
    /// so that a check fails with what it waited for before the runner cancels it.
    opened: Instant,
    /// Messages come on several streams (Streamable HTTP).
    unordered: bool,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("channel", &self.shared.channel)
            .field("frames", &self.frames.len())
            .finish_non_exhaustive()
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

impl Connection {
    fn new(
        ctx: &Ctx,
        channel: &str,
        sink: Sink,
        headers: Vec<(String, String)>,
        spawn_reader: impl FnOnce(Arc<Shared>, mpsc::UnboundedSender<Inbound>) -> JoinHandle<()>,
    ) -> Self {
        let shared = Arc::new(Shared {
            sink: tokio::sync::Mutex::new(sink),
            sent: Mutex::new(HashMap::new()),
            responder: Mutex::new(Responder::default()),
            oracle: Mutex::new(Oracle::default()),
            wire: ctx.wire().clone(),
            channel: channel.to_owned(),
        });
        let (tx, inbox) = mpsc::unbounded_channel();
        let reader = spawn_reader(Arc::clone(&shared), tx);
        Self {
            ctx: ctx.clone(),
            shared,
            inbox,
            frames: Vec::new(),
            closed: None,
            next_id: 1,
            headers,
            reader,
            opened: Instant::now(),
            unordered: false,
        }
    }

    /// The agent's stdin and stdout.
    pub fn over_stdio(ctx: &Ctx, child: &mut Child) -> Result<Self, CheckError> {
        let stdin = child.take_stdin().or_error("the agent's stdin")?;
        let stdout = child.take_stdout().or_error("the agent's stdout")?;
        let channel = child.name().to_owned();
        Ok(Self::new(
            ctx,
            &channel,
            Sink::Stdio(stdin),
            Vec::new(),
            |shared, tx| tokio::spawn(read_lines(shared, BufReader::new(stdout), tx)),
        ))
    }

    /// A new WebSocket client connection to `url` (`wss://`: trusting the profile's
    /// `settings.http_ca`).
    pub async fn over_ws(ctx: &Ctx, channel: &str, url: &str) -> Result<Self, CheckError> {
        ctx.wire().note(channel, &format!("connecting to {url}"));
        let connector = super::remote::http::ws_connector(ctx, url)?;
        let (socket, response) = Box::pin(tokio_tungstenite::connect_async_tls_with_config(
            url, None, false, connector,
        ))
        .await
        .or_fail(format!("a WebSocket connection to {url}"))?;
        let headers = response
            .headers()
            .iter()
            .map(|(k, v)| {
                (
                    k.as_str().to_owned(),
                    String::from_utf8_lossy(v.as_bytes()).into_owned(),
                )
            })
            .collect::<Vec<_>>();
        ctx.wire().note(
            channel,
            &format!("upgraded: {} {:?}", response.status(), headers),
        );
        let (sink, stream) = socket.split();
        Ok(Self::new(
            ctx,
            channel,
            Sink::Ws(sink),
            headers,
            |shared, tx| tokio::spawn(read_ws(shared, stream, tx)),
        ))
    }

    /// A new Streamable HTTP client connection to the remote endpoint `url` (`http://…/acp`):
    /// nothing is sent until `initialize` ([`Streamable`]).
    pub fn over_streamable(ctx: &Ctx, channel: &str, url: &str) -> Result<Self, CheckError> {
        let endpoint = Endpoint::for_ctx(ctx, url)?;
        ctx.wire()
            .note(channel, &format!("Streamable HTTP client of {url}"));
        let limit = ctx.timeouts().scale(Duration::from_secs(10));
        let (client, items) = Streamable::new(endpoint, ctx.wire().clone(), channel, limit);
        let mut conn = Self::new(
            ctx,
            channel,
            Sink::Http(client),
            Vec::new(),
            |shared, tx| tokio::spawn(read_streamable(shared, items, tx)),
        );
        conn.unordered = true;
        Ok(conn)
    }

    /// The scenario's context.
    pub fn ctx(&self) -> &Ctx {
        &self.ctx
    }

    /// The wire-log channel name.
    pub fn channel(&self) -> &str {
        &self.shared.channel
    }

    /// The headers of the WebSocket upgrade response (empty on stdio).
    pub fn headers(&self) -> &[(String, String)] {
        &self.headers
    }

    /// Every frame read so far, in order.
    pub fn frames(&self) -> &[Frame] {
        &self.frames
    }

    /// How many frames were read so far (a cursor for later reads).
    pub fn cursor(&self) -> usize {
        self.frames.len()
    }

    /// Why the connection ended, once it did.
    pub fn closed(&self) -> Option<&str> {
        self.closed.as_deref()
    }

    /// Every schema problem the oracle found in a frame of the agent so far.
    pub fn problems(&self) -> Vec<Problem> {
        lock(&self.shared.oracle)
            .problems()
            .iter()
            .map(|p| Problem {
                channel: self.shared.channel.clone(),
                ..p.clone()
            })
            .collect()
    }

    /// The method of the request this connection sent with `id`.
    pub fn sent_method(&self, id: &Value) -> Option<String> {
        lock(&self.shared.sent).get(&id.to_string()).cloned()
    }

    /// Sets how the agent's requests to the client are answered from now on.
    pub fn set_responder(&self, update: impl FnOnce(&mut Responder)) {
        update(&mut lock(&self.shared.responder));
    }

    /// Sends one JSON value as one line or text frame.
    pub async fn send(&self, value: &Value) -> Result<(), CheckError> {
        self.shared.remember(value);
        self.send_text(&value.to_string()).await
    }

    /// Sends a text as one line or text frame, as it is.
    pub async fn send_text(&self, text: &str) -> Result<(), CheckError> {
        match self.shared.write_text(text).await {
            Err(error)
                if error
                    .get_ref()
                    .and_then(|e| e.downcast_ref::<Refused>())
                    .is_some_and(Refused::is_http_level_answer) =>
            {
                Err(CheckError::NotApplicable(format!(
                    "over Streamable HTTP the endpoint answers this message at the HTTP level, \
                     which the ACP-HTTP rows judge; its JSON-RPC answer cannot be judged over this \
                     profile (E-ACP-64): {error}"
                )))
            }
            written => written.or_fail("the agent accepts input"),
        }
    }

    /// Whether messages arrive on more than one stream (Streamable HTTP: the connection's and
    /// each session's), so that the order between streams is not the order the agent sent.
    pub fn streams_unordered(&self) -> bool {
        self.unordered
    }

    /// Writes raw bytes to the agent's stdin, without adding a terminator (stdio only).
    pub async fn send_bytes(&self, bytes: &[u8]) -> Result<(), CheckError> {
        let mut sink = self.shared.sink.lock().await;
        match &mut *sink {
            Sink::Stdio(stdin) => {
                stdin
                    .write_all(bytes)
                    .await
                    .or_fail("the agent accepts input")?;
                stdin.flush().await.or_fail("the agent accepts input")
            }
            _ => Err(CheckError::Harness(
                "raw bytes need a stdio connection".into(),
            )),
        }
    }

    /// Sends a binary WebSocket frame (WebSocket only).
    pub async fn send_binary(&self, bytes: Vec<u8>) -> Result<(), CheckError> {
        let mut sink = self.shared.sink.lock().await;
        match &mut *sink {
            Sink::Ws(ws) => {
                self.shared.wire.record(
                    &self.shared.channel,
                    Direction::Out,
                    &format!("<binary frame of {} bytes>", bytes.len()),
                );
                ws.send(WsMessage::binary(bytes))
                    .await
                    .or_fail("the agent accepts a binary frame")
            }
            _ => Err(CheckError::Harness("binary frames need a WebSocket".into())),
        }
    }

    /// The next integer request id of this connection.
    pub fn next_id(&mut self) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        json!(id)
    }

    /// Sends a request with the next integer id and returns the id.
    pub async fn request(&mut self, method: &str, params: Value) -> Result<Value, CheckError> {
        let id = self.next_id();
        self.request_with_id(id.clone(), method, params).await?;
        Ok(id)
    }

    /// Sends a request with the given id.
    pub async fn request_with_id(
        &self,
        id: Value,
        method: &str,
        params: Value,
    ) -> Result<(), CheckError> {
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await
    }

    /// Sends a notification.
    pub async fn notify(&self, method: &str, params: Value) -> Result<(), CheckError> {
        self.send(&json!({"jsonrpc": "2.0", "method": method, "params": params}))
            .await
    }

    /// Sends a request and waits for its response. `initialize` and `session/new` are set-up
    /// steps ([`Ctx::setup_step`]): each adds an allowance to the row's budget and waits only
    /// that long for its answer.
    pub async fn call(&mut self, method: &str, params: Value) -> Result<Reply, CheckError> {
        let id = self.request(method, params).await?;
        self.reply(&id, method).await
    }

    /// Sends a request and requires a result (an error response fails the check).
    pub async fn call_ok(&mut self, method: &str, params: Value) -> Result<Value, CheckError> {
        match self.call(method, params).await? {
            Ok(result) => Ok(result),
            Err(fault) => Err(Failure::new(
                format!("{method} succeeds"),
                format!("a result for {method}"),
            )
            .actual(format!("error {}", fault.raw))
            .into()),
        }
    }

    /// Waits for the response to `id` (a request of `method`), looking at every frame so far.
    /// An `initialize` or `session/new`, however it was sent (whole, in pieces, several in one
    /// write), is a set-up step: it adds an allowance to the row's budget and is waited for that
    /// long, so a slow start fails no row whose timeout class is shorter than the start.
    pub async fn reply(&mut self, id: &Value, method: &str) -> Result<Reply, CheckError> {
        let what = format!("a response to {method} (id {id})");
        let index = self
            .wait_for_answer(&what, method, |f| f.answers(id))
            .await?;
        self.frames[index]
            .reply()
            .or_error("a response frame without a reply")
    }

    /// Waits, looking at every frame so far, for the frame that `matches` as the answer to a
    /// request of `method`: a set-up step for `initialize` and `session/new` (see
    /// [`Connection::reply`]), else within the row's timeout.
    pub async fn wait_for_answer(
        &mut self,
        what: &str,
        method: &str,
        matches: impl Fn(&Frame) -> bool,
    ) -> Result<usize, CheckError> {
        if !SETUP_METHODS.contains(&method) {
            return self.wait_for(what, 0, matches).await;
        }
        let allowance = self.ctx.setup_step();
        let what = format!("{what}, a set-up step");
        let answered = self.wait_until(&what, 0, allowance, matches).await;
        self.ctx
            .setup_ended(answered.is_ok() || self.closed.is_some());
        answered
    }

    /// Waits until a frame at or after `from` satisfies `matches` and returns its index. Fails
    /// naming `what` when the scenario's time runs out or the connection ends first.
    pub async fn wait_for(
        &mut self,
        what: &str,
        from: usize,
        matches: impl Fn(&Frame) -> bool,
    ) -> Result<usize, CheckError> {
        let limit = self.ctx.timeout();
        self.wait_until(what, from, limit, matches).await
    }

    /// [`Connection::wait_for`] for the end of a prompt turn: at least the `normal` class (the
    /// catalog's class of a prompt turn), also in a row of the `short` class, since a real
    /// agent's turn asks its model (E-ACP-61).
    pub async fn wait_for_turn(
        &mut self,
        what: &str,
        from: usize,
        matches: impl Fn(&Frame) -> bool,
    ) -> Result<usize, CheckError> {
        let limit = self
            .ctx
            .timeout()
            .max(self.ctx.timeouts().of(crate::catalog::TimeoutClass::Normal));
        self.wait_until(what, from, limit, matches).await
    }

    /// [`Connection::wait_for`] with its own limit (scaled by the timeout multiplier).
    pub async fn wait_for_within(
        &mut self,
        what: &str,
        from: usize,
        limit: Duration,
        matches: impl Fn(&Frame) -> bool,
    ) -> Result<usize, CheckError> {
        let limit = self.ctx.timeouts().scale(limit);
        self.wait_until(what, from, limit, matches).await
    }

    async fn wait_until(
        &mut self,
        what: &str,
        from: usize,
        limit: Duration,
        matches: impl Fn(&Frame) -> bool,
    ) -> Result<usize, CheckError> {
        if let Some(i) = self.frames.iter().skip(from).position(&matches) {
            return Ok(from + i);
        }
        let deadline = self.opened + self.ctx.budget();
        let limit = limit.min(deadline.saturating_duration_since(Instant::now()));
        let deadline = Instant::now() + limit;
        loop {
            let remaining = deadline.saturating_duration_since(Instant::now());
            match self.next_within(remaining).await {
                Some(index) => {
                    if matches(&self.frames[index]) {
                        return Ok(index);
                    }
                }
                None => {
                    let failure = Failure::new(what, format!("{what} within {limit:?}"));
                    let failure = match &self.closed {
                        Some(reason) => {
                            failure.actual(format!("the connection ended first ({reason})"))
                        }
                        None => failure
                            .actual(format!("nothing matching within {limit:?}"))
                            .at_deadline(),
                    };
                    let actual = format!("{}; {}", failure.actual, self.tail(4));
                    return Err(failure.actual(actual).into());
                }
            }
        }
    }

    /// Reads frames for `period` (scaled by the timeout multiplier) and returns the index of the
    /// first frame read in that time; the frames are in [`Connection::frames`] from there.
    pub async fn quiet(&mut self, period: Duration) -> usize {
        let start = self.frames.len();
        let deadline = Instant::now() + self.ctx.timeouts().scale(period);
        loop {
            let remaining = deadline.saturating_duration_since(Instant::now());
            if remaining.is_zero() || self.next_within(remaining).await.is_none() {
                return start;
            }
        }
    }

    /// Reads until the connection ends or `limit` (unscaled) passes; whether it ended.
    pub async fn wait_closed(&mut self, limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        while self.closed.is_none() {
            let remaining = deadline.saturating_duration_since(Instant::now());
            if remaining.is_zero() {
                return false;
            }
            self.next_within(remaining).await;
        }
        true
    }

    /// Reads one more frame if one comes within `limit`; its index.
    async fn next_within(&mut self, limit: Duration) -> Option<usize> {
        if self.closed.is_some() {
            return None;
        }
        match tokio::time::timeout(limit, self.inbox.recv()).await {
            Ok(Some(Inbound::Frame(text, kind))) => {
                let seq = self.frames.len();
                let value = serde_json::from_str(&text).ok();
                self.frames.push(Frame {
                    seq,
                    at: Instant::now(),
                    text,
                    kind,
                    value,
                });
                Some(seq)
            }
            Ok(Some(Inbound::Closed(reason))) => {
                self.closed = Some(reason);
                None
            }
            Ok(None) => {
                self.closed = Some("the reader stopped".to_owned());
                None
            }
            Err(_) => None,
        }
    }

    /// The last `n` frames, for Actual lines.
    pub fn tail(&self, n: usize) -> String {
        if self.frames.is_empty() {
            return "no frame received".to_owned();
        }
        let start = self.frames.len().saturating_sub(n);
        let lines: Vec<String> = self.frames[start..]
            .iter()
            .map(|f| format!("#{} {}", f.seq, f.short(200)))
            .collect();
        format!("last frames: {}", lines.join(" | "))
    }

    /// Ends the client side: closes the agent's stdin, or sends a WebSocket close frame.
    pub async fn close(&self) {
        let mut sink = self.shared.sink.lock().await;
        match std::mem::replace(&mut *sink, Sink::Closed) {
            Sink::Stdio(mut stdin) => {
                let _ = stdin.shutdown().await;
                self.shared.wire.note(&self.shared.channel, "stdin closed");
            }
            Sink::Ws(mut ws) => {
                let _ = ws.send(WsMessage::Close(None)).await;
                let _ = ws.close().await;
                self.shared
                    .wire
                    .note(&self.shared.channel, "closed by the harness");
            }
            Sink::Http(client) => {
                client.close().await;
                self.shared
                    .wire
                    .note(&self.shared.channel, "deleted by the harness");
            }
            Sink::Closed => {}
        }
    }
}

/// Handles one frame in the reader task: schema oracle, then the responder for the agent's
/// requests, then hands it to the check.
async fn accept(
    shared: &Shared,
    tx: &mpsc::UnboundedSender<Inbound>,
    text: String,
    kind: FrameKind,
) {
    let value: Option<Value> = serde_json::from_str(&text).ok();
    {
        let sent = lock(&shared.sent).clone();
        lock(&shared.oracle).inspect(&text, kind == FrameKind::Binary, value.as_ref(), &sent);
    }
    let answer = value.as_ref().and_then(|v| {
        let method = v.get("method")?.as_str()?;
        let id = v.get("id")?.clone();
        let answer = lock(&shared.responder).answer(method, v.get("params"))?;
        Some(match answer {
            Ok(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}),
            Err(error) => json!({"jsonrpc": "2.0", "id": id, "error": error}),
        })
    });
    let _ = tx.send(Inbound::Frame(text, kind));
    if let Some(answer) = answer
        && let Err(error) = shared.write_text(&answer.to_string()).await
    {
        shared.wire.note(
            &shared.channel,
            &format!("could not answer the agent's request: {error}"),
        );
    }
}

/// The requests that set a row up rather than judge it: [`Connection::call`] gives each the
/// set-up allowance instead of the row's whole timeout.
const SETUP_METHODS: &[&str] = &["initialize", "session/new"];

/// The most a connection reads from the agent: past it the reader stops (the agent's next write
/// blocks until teardown) and the check sees the connection end with [`OVER_BUDGET`], so an agent
/// that floods its output costs the runner a bounded amount of memory.
const READ_BUDGET_BYTES: u64 = 16 * 1024 * 1024;

/// The most frames a connection reads from the agent (each is kept with its parsed JSON).
const READ_BUDGET_FRAMES: usize = 20_000;

/// Why a connection whose agent sent more than the budget ended.
const OVER_BUDGET: &str = "the agent sent more than 16 MiB or 20000 frames on this connection; the runner stopped reading it there (what a check buffers is capped)";

async fn read_lines(
    shared: Arc<Shared>,
    mut stdout: BufReader<LoggedRead<ChildStdout>>,
    tx: mpsc::UnboundedSender<Inbound>,
) {
    let mut buf = Vec::new();
    let mut read = 0u64;
    for _ in 0..READ_BUDGET_FRAMES {
        buf.clear();
        let left = READ_BUDGET_BYTES.saturating_sub(read);
        if left == 0 {
            break;
        }
        match (&mut stdout).take(left).read_until(b'\n', &mut buf).await {
            Ok(0) => {
                let _ = tx.send(Inbound::Closed("the agent closed its stdout".to_owned()));
                return;
            }
            Ok(_) => {
                let terminated = buf.last() == Some(&b'\n');
                if terminated {
                    buf.pop();
                    if buf.last() == Some(&b'\r') {
                        buf.pop();
                    }
                }
                read += buf.len() as u64 + u64::from(terminated);
                if !terminated && read >= READ_BUDGET_BYTES {
                    break;
                }
                let text = String::from_utf8_lossy(&buf).into_owned();
                let kind = if terminated {
                    FrameKind::Text
                } else {
                    FrameKind::Unterminated
                };
                accept(&shared, &tx, text, kind).await;
            }
            Err(error) => {
                let _ = tx.send(Inbound::Closed(format!("reading stdout failed: {error}")));
                return;
            }
        }
    }
    shared.wire.note(&shared.channel, OVER_BUDGET);
    let _ = tx.send(Inbound::Closed(OVER_BUDGET.to_owned()));
}

async fn read_ws(
    shared: Arc<Shared>,
    mut stream: SplitStream<WsStream>,
    tx: mpsc::UnboundedSender<Inbound>,
) {
    let mut read = 0usize;
    for _ in 0..READ_BUDGET_FRAMES {
        if read as u64 >= READ_BUDGET_BYTES {
            break;
        }
        match stream.next().await {
            Some(Ok(WsMessage::Text(text))) => {
                read += text.len();
                let text = text.as_str().to_owned();
                shared.wire.record(&shared.channel, Direction::In, &text);
                accept(&shared, &tx, text, FrameKind::Text).await;
            }
            Some(Ok(WsMessage::Binary(bytes))) => {
                read += bytes.len();
                let text = String::from_utf8_lossy(&bytes).into_owned();
                shared.wire.record(
                    &shared.channel,
                    Direction::In,
                    &format!("<binary frame> {text}"),
                );
                accept(&shared, &tx, text, FrameKind::Binary).await;
            }
            Some(Ok(WsMessage::Close(frame))) => {
                let reason = format!("the agent closed the WebSocket ({frame:?})");
                shared.wire.note(&shared.channel, &reason);
                let _ = tx.send(Inbound::Closed(reason));
                return;
            }
            Some(Ok(_)) => {}
            Some(Err(error)) => {
                let reason = format!("the WebSocket failed: {error}");
                shared.wire.note(&shared.channel, &reason);
                let _ = tx.send(Inbound::Closed(reason));
                return;
            }
            None => {
                let _ = tx.send(Inbound::Closed("the WebSocket ended".to_owned()));
                return;
            }
        }
    }
    shared.wire.note(&shared.channel, OVER_BUDGET);
    let _ = tx.send(Inbound::Closed(OVER_BUDGET.to_owned()));
}

async fn read_streamable(
    shared: Arc<Shared>,
    mut items: mpsc::UnboundedReceiver<Item>,
    tx: mpsc::UnboundedSender<Inbound>,
) {
    let mut read = 0usize;
    for _ in 0..READ_BUDGET_FRAMES {
        if read as u64 >= READ_BUDGET_BYTES {
            break;
        }
        match items.recv().await {
            Some(Item::Message(text)) => {
                read += text.len();
                accept(&shared, &tx, text, FrameKind::Text).await;
            }
            Some(Item::Ended(reason)) => {
                let _ = tx.send(Inbound::Closed(reason));
                return;
            }
            None => {
                let _ = tx.send(Inbound::Closed(
                    "the Streamable HTTP client ended".to_owned(),
                ));
                return;
            }
        }
    }
    shared.wire.note(&shared.channel, OVER_BUDGET);
    let _ = tx.send(Inbound::Closed(OVER_BUDGET.to_owned()));
}
