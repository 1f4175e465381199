//! A scripted driver of the client, for conformance runners that judge the client's request
//! bookkeeping from outside: concurrent and sequential requests, close, timeouts, cancelled
//! senders and permission cancellation, with one reported outcome per request.
//!
//! A script is a JSON array of steps, run in order. Requests run in the background unless the
//! step waits for them; every request ends in exactly one outcome line:
//!
//! | outcome | meaning |
//! |---|---|
//! | `success` | a response arrived (an error response too; then `errorCode` is set) |
//! | `eof` | the connection ended (or was closed) while the request was pending |
//! | `not_connected` | the client was closed (or its input had ended) before it was sent |
//! | `request_timeout` | no response within the request timeout |
//! | `cancelled` | a `cancel_waiting` step gave it up while it waited for a send permit |
//! | `send_failed`, `invalid_response` | writing failed; a response with its id was malformed |
//!
//! Steps (`op` and its fields; `"$session"` anywhere in `params` is replaced by the current
//! session id):
//!
//! - `{"op": "initialize"}`; `{"op": "new_session", "cwd"?: "/abs"}` (the session becomes
//!   current); both wait and report their outcome.
//! - `{"op": "request", "method", "params"?, "count"?: 1, "mode"?: "concurrent" |
//!   "sequential", "timeoutMs"?, "wait"?: true}`: `count` requests, sent at once in order (each
//!   waits for a send permit in FIFO order) or one after another.
//! - `{"op": "notify", "method", "params"?, "count"?: 1}`.
//! - `{"op": "prompt", "text", "wait"?: true, "timeoutMs"?}`: `session/prompt` on the current
//!   session; the outcome carries `stopReason`.
//! - `{"op": "cancel"}`: `session/cancel` for the current session, then pending permission
//!   requests are answered `cancelled`. `{"op": "stop"}`: the ski `session/stop` request.
//! - `{"op": "wait_permission", "count"?: 1, "timeoutMs"?: 30000}`: waits until that many
//!   permission requests wait for a decision (with the `hold` permission policy).
//! - `{"op": "cancel_waiting", "count"?: 1}`: gives up the most recently issued requests that
//!   still wait for a send permit (the send gate is full).
//! - `{"op": "await_sent"}`: waits until every request issued so far passed the send gate and
//!   was queued for writing, in order (or ended).
//! - `{"op": "sleep", "ms"}`, `{"op": "await"}` (every background request has ended),
//!   `{"op": "close"}`, `{"op": "stats"}`.
//!
//! When the steps are done the driver waits for every request and reports a summary with the
//! count of each outcome and the final `pending` and `timeouts` counters. Every line is a JSON
//! object with sorted keys.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures::StreamExt;
use futures::future::{AbortHandle, Abortable};
use futures::stream::FuturesUnordered;
use serde::Deserialize;
use serde_json::{Map, Value, json};
use tokio::sync::Notify;
use tokio::task::JoinSet;

use super::Client;
use crate::acp::{NewSessionRequest, PromptRequest, methods};
use crate::jsonrpc::{CallError, Peer, RequestId, RequestOptions, Timeout};

/// How long `wait_permission` waits by default.
const DEFAULT_WAIT: Duration = Duration::from_secs(30);

/// How a `request` step sends its requests.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// All at once, issued in order.
    #[default]
    Concurrent,
    /// One after another.
    Sequential,
}

fn one() -> usize {
    1
}

fn yes() -> bool {
    true
}

/// One step of a driver script.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(
    tag = "op",
    rename_all = "snake_case",
    rename_all_fields = "camelCase",
    deny_unknown_fields
)]
pub enum Step {
    /// `initialize`.
    Initialize {},
    /// `session/new`; the new session becomes current.
    NewSession {
        /// The session's working directory (default: the driver's).
        #[serde(default)]
        cwd: Option<String>,
    },
    /// Raw requests.
    Request {
        /// The method.
        method: String,
        /// The params (`"$session"` is replaced by the current session id).
        #[serde(default)]
        params: Option<Value>,
        /// How many.
        #[serde(default = "one")]
        count: usize,
        /// At once or one after another.
        #[serde(default)]
        mode: Mode,
        /// A timeout of their own.
        #[serde(default)]
        timeout_ms: Option<u64>,
        /// Whether the step waits for them to end.
        #[serde(default = "yes")]
        wait: bool,
    },
    /// Raw notifications.
    Notify {
        /// The method.
        method: String,
        /// The params.
        #[serde(default)]
        params: Option<Value>,
        /// How many.
        #[serde(default = "one")]
        count: usize,
    },
    /// `session/prompt` with one text block on the current session.
    Prompt {
        /// The text.
        text: String,
        /// Whether the step waits for the result.
        #[serde(default = "yes")]
        wait: bool,
        /// A timeout of its own.
        #[serde(default)]
        timeout_ms: Option<u64>,
    },
    /// `session/cancel` on the current session, answering pending permissions `cancelled`.
    Cancel {},
    /// The ski `session/stop` on the current session.
    Stop {},
    /// Waits until `count` permission requests wait for a decision.
    WaitPermission {
        /// How many.
        #[serde(default = "one")]
        count: usize,
        /// How long to wait.
        #[serde(default)]
        timeout_ms: Option<u64>,
    },
    /// Gives up requests that still wait for a send permit, most recent first.
    CancelWaiting {
        /// How many.
        #[serde(default = "one")]
        count: usize,
    },
    /// Pauses the script.
    Sleep {
        /// Milliseconds.
        ms: u64,
    },
    /// Waits until every background request has ended.
    Await {},
    /// Waits until every request issued so far was written (or has ended).
    AwaitSent {},
    /// Closes the client.
    Close {},
    /// Reports the counters.
    Stats {},
}

/// Why a script could not run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DriverError {
    /// The script is not a JSON array of steps.
    #[error("invalid driver script: {0}")]
    Script(String),
    /// A step needs a session and none was created.
    #[error("step {step} ({op}) needs a session; run new_session first")]
    NoSession {
        /// The step's index.
        step: usize,
        /// Its op.
        op: &'static str,
    },
    /// A control step failed.
    #[error("step {step} ({op}) failed: {reason}")]
    Step {
        /// The step's index.
        step: usize,
        /// Its op.
        op: &'static str,
        /// Why.
        reason: String,
    },
}

/// Parses a script: a JSON array of steps.
pub fn parse_script(text: &str) -> Result<Vec<Step>, DriverError> {
    let steps: Vec<Value> =
        serde_json::from_str(text).map_err(|e| DriverError::Script(e.to_string()))?;
    steps
        .into_iter()
        .enumerate()
        .map(|(index, step)| {
            serde_json::from_value(step)
                .map_err(|e| DriverError::Script(format!("step {index}: {e}")))
        })
        .collect()
}

/// Re-encodes a JSON value with the keys of every object sorted.
pub fn sorted(value: &Value) -> Value {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            let mut out = Map::new();
            for key in keys {
                out.insert(key.clone(), sorted(&map[key]));
            }
            Value::Object(out)
        }
        Value::Array(items) => Value::Array(items.iter().map(sorted).collect()),
        other => other.clone(),
    }
}

/// One JSON line with sorted keys.
pub fn sorted_line(value: &Value) -> String {
    sorted(value).to_string()
}

/// Where the driver's report lines go.
pub type Emit = Arc<dyn Fn(Value) + Send + Sync>;

/// The outcome of one request.
#[derive(Debug, Clone, PartialEq)]
struct Outcome {
    name: &'static str,
    id: Option<RequestId>,
    result: Option<Value>,
    error_code: Option<i64>,
}

impl Outcome {
    fn of(id: Option<RequestId>, result: Result<Value, CallError>) -> Self {
        let (name, result, error_code) = match result {
            Ok(value) => ("success", Some(value), None),
            Err(CallError::Rpc(error)) => ("success", None, Some(error.code.0)),
            Err(CallError::Eof) => ("eof", None, None),
            Err(CallError::NotConnected) => ("not_connected", None, None),
            Err(CallError::Timeout { .. }) => ("request_timeout", None, None),
            Err(CallError::InvalidResponse(_) | CallError::Decode(_)) => {
                ("invalid_response", None, None)
            }
            Err(CallError::Params(_) | CallError::Send(_)) => ("send_failed", None, None),
        };
        Self {
            name,
            id,
            result,
            error_code,
        }
    }

    fn cancelled() -> Self {
        Self {
            name: "cancelled",
            id: None,
            result: None,
            error_code: None,
        }
    }
}

/// How far one request has come.
#[derive(Default)]
struct Progress {
    /// Its future ran once: it waits for a send permit or holds one.
    polled: AtomicBool,
    /// It was written.
    sent: AtomicBool,
    /// Its outcome is known.
    finished: AtomicBool,
}

impl Progress {
    fn mark(&self, flag: &AtomicBool, changed: &Notify) {
        flag.store(true, Ordering::SeqCst);
        changed.notify_waiters();
    }
}

/// A request issued by the driver, as far as `cancel_waiting` and `await_sent` need to know it.
struct Issued {
    progress: Arc<Progress>,
    abort: AbortHandle,
}

struct State {
    client: Client,
    emit: Emit,
    cwd: String,
    session: Option<String>,
    background: JoinSet<()>,
    issued: Vec<Issued>,
    changed: Arc<Notify>,
    counts: Arc<Mutex<BTreeMap<&'static str, u64>>>,
}

impl State {
    fn emit(&self, value: Value) {
        (self.emit)(value);
    }

    fn record(counts: &Mutex<BTreeMap<&'static str, u64>>, name: &'static str) {
        *counts
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(name)
            .or_default() += 1;
    }

    fn session(&self, step: usize, op: &'static str) -> Result<String, DriverError> {
        self.session
            .clone()
            .ok_or(DriverError::NoSession { step, op })
    }

    fn stats_line(&self) -> Value {
        let stats = self.client.stats();
        json!({
            "type": "stats",
            "pending": stats.peer.pending_requests,
            "timeouts": stats.peer.pending_timeouts,
            "inboundRequests": stats.peer.inbound_requests,
            "sendPermitsAvailable": stats.peer.available_send_permits,
            "maxInFlightSends": self.client.config().max_in_flight_sends,
            "ignoredResponses": stats.peer.ignored_responses,
            "pendingPermissions": stats.pending_permissions,
            "permissionRequests": stats.permissions.requests,
            "updates": stats.updates.accepted,
            "invalidUpdates": stats.updates.invalid,
            "reconnects": stats.reconnects,
        })
    }

    /// Issues `count` requests as one batch; returns once they are issued (and, with `wait`,
    /// ended).
    async fn issue(&mut self, step: usize, batch: Batch, wait: bool) {
        let peer = self.client.peer();
        let mut requests = Vec::with_capacity(batch.count);
        let mut batch_progress = Vec::with_capacity(batch.count);
        for index in 0..batch.count {
            let progress = Arc::new(Progress::default());
            let (abort, registration) = AbortHandle::new_pair();
            self.issued.push(Issued {
                progress: progress.clone(),
                abort,
            });
            batch_progress.push(progress.clone());
            requests.push((index, progress, registration));
        }
        let changed = self.changed.clone();
        let emit = self.emit.clone();
        let counts = self.counts.clone();
        let run = async move {
            let report = |index: usize, outcome: Outcome| {
                State::record(&counts, outcome.name);
                let mut line = json!({
                    "type": "outcome",
                    "step": step,
                    "index": index,
                    "method": batch.method,
                    "outcome": outcome.name,
                    "id": outcome.id,
                });
                if let Some(code) = outcome.error_code {
                    line["errorCode"] = json!(code);
                }
                if let Some(extract) = batch.extract
                    && let Some(result) = &outcome.result
                {
                    extract(result, &mut line);
                }
                emit(line);
            };
            let call = |(index, progress, registration): (usize, Arc<Progress>, _)| {
                let peer = peer.clone();
                let method = batch.method.clone();
                let params = batch.params.clone();
                let changed = changed.clone();
                async move {
                    progress.mark(&progress.polled, &changed);
                    let call = send(peer, method, params, batch.options, &progress, &changed);
                    let outcome = Abortable::new(call, registration)
                        .await
                        .unwrap_or_else(|_| Outcome::cancelled());
                    progress.mark(&progress.finished, &changed);
                    (index, outcome)
                }
            };
            match batch.mode {
                Mode::Concurrent => {
                    let mut running: FuturesUnordered<_> = requests.into_iter().map(call).collect();
                    while let Some((index, outcome)) = running.next().await {
                        report(index, outcome);
                    }
                }
                Mode::Sequential => {
                    for request in requests {
                        let (index, outcome) = call(request).await;
                        report(index, outcome);
                    }
                }
            }
        };
        if wait {
            run.await;
        } else {
            self.background.spawn(run);
            // Every request of the batch waits at the send gate before the script goes on.
            self.wait_until(&batch_progress, |p| {
                p.polled.load(Ordering::SeqCst) || p.finished.load(Ordering::SeqCst)
            })
            .await;
            tokio::task::yield_now().await;
        }
    }

    /// Waits until `done` holds for every request in `among`.
    async fn wait_until(&self, among: &[Arc<Progress>], done: impl Fn(&Progress) -> bool) {
        loop {
            let notified = self.changed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if among.iter().all(|progress| done(progress)) {
                return;
            }
            notified.await;
        }
    }

    async fn await_background(&mut self) {
        while self.background.join_next().await.is_some() {}
    }
}

/// What to send in one batch.
struct Batch {
    method: String,
    params: Option<Value>,
    count: usize,
    mode: Mode,
    options: RequestOptions,
    extract: Option<fn(&Value, &mut Value)>,
}

async fn send(
    peer: Peer,
    method: String,
    params: Option<Value>,
    options: RequestOptions,
    progress: &Progress,
    changed: &Notify,
) -> Outcome {
    match peer.start_request(method, params, options).await {
        Err(error) => Outcome::of(None, Err(error)),
        Ok(response) => {
            progress.mark(&progress.sent, changed);
            let id = response.id().clone();
            Outcome::of(Some(id), response.await)
        }
    }
}

fn options(timeout_ms: Option<u64>) -> RequestOptions {
    RequestOptions {
        timeout: timeout_ms.map_or(Timeout::Default, |ms| {
            Timeout::After(Duration::from_millis(ms))
        }),
    }
}

fn substitute(value: &Value, session: Option<&str>) -> Value {
    match value {
        Value::String(text) if text == "$session" => {
            session.map_or_else(|| value.clone(), |id| Value::String(id.to_owned()))
        }
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(key, value)| (key.clone(), substitute(value, session)))
                .collect(),
        ),
        Value::Array(items) => {
            Value::Array(items.iter().map(|item| substitute(item, session)).collect())
        }
        other => other.clone(),
    }
}

fn op_name(step: &Step) -> &'static str {
    match step {
        Step::Initialize {} => "initialize",
        Step::NewSession { .. } => "new_session",
        Step::Request { .. } => "request",
        Step::Notify { .. } => "notify",
        Step::Prompt { .. } => "prompt",
        Step::Cancel {} => "cancel",
        Step::Stop {} => "stop",
        Step::WaitPermission { .. } => "wait_permission",
        Step::CancelWaiting { .. } => "cancel_waiting",
        Step::Sleep { .. } => "sleep",
        Step::Await {} => "await",
        Step::AwaitSent {} => "await_sent",
        Step::Close {} => "close",
        Step::Stats {} => "stats",
    }
}

/// Runs `steps` on `client`, reporting every line through `emit`; `cwd` is the default working
/// directory of new sessions. Returns the outcome counts of the summary.
pub async fn run(
    client: &Client,
    steps: &[Step],
    cwd: &str,
    emit: Emit,
) -> Result<BTreeMap<&'static str, u64>, DriverError> {
    let mut state = State {
        client: client.clone(),
        emit,
        cwd: cwd.to_owned(),
        session: None,
        background: JoinSet::new(),
        issued: Vec::new(),
        changed: Arc::new(Notify::new()),
        counts: Arc::new(Mutex::new(BTreeMap::new())),
    };
    let result = run_steps(&mut state, steps).await;
    state.await_background().await;
    let counts = state
        .counts
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone();
    let total: u64 = counts.values().sum();
    let stats = client.stats();
    state.emit(json!({
        "type": "summary",
        "requests": total,
        "outcomes": counts,
        "pending": stats.peer.pending_requests,
        "timeouts": stats.peer.pending_timeouts,
        "error": result.as_ref().err().map(ToString::to_string),
    }));
    result.map(|()| counts)
}

async fn run_steps(state: &mut State, steps: &[Step]) -> Result<(), DriverError> {
    for (index, step) in steps.iter().enumerate() {
        let op = op_name(step);
        match step {
            Step::Initialize {} => {
                let capabilities = state.client.config().capabilities();
                let params = json!({
                    "protocolVersion": crate::acp::PROTOCOL_VERSION,
                    "clientCapabilities": capabilities,
                    "clientInfo": state.client.config().client_info,
                });
                let batch = Batch {
                    method: methods::INITIALIZE.to_owned(),
                    params: Some(params),
                    count: 1,
                    mode: Mode::Sequential,
                    options: RequestOptions::default(),
                    extract: None,
                };
                state.issue(index, batch, true).await;
            }
            Step::NewSession { cwd } => {
                let request =
                    NewSessionRequest::new(cwd.clone().unwrap_or_else(|| state.cwd.clone()));
                let result = state
                    .client
                    .peer()
                    .request(methods::SESSION_NEW, serde_json::to_value(&request).ok())
                    .await;
                let outcome = Outcome::of(None, result);
                State::record(&state.counts, outcome.name);
                let session = outcome
                    .result
                    .as_ref()
                    .and_then(|result| result.get("sessionId"))
                    .and_then(Value::as_str)
                    .map(str::to_owned);
                state.emit(json!({
                    "type": "outcome",
                    "step": index,
                    "index": 0,
                    "method": methods::SESSION_NEW,
                    "outcome": outcome.name,
                    "errorCode": outcome.error_code,
                    "sessionId": session,
                }));
                if let Some(session) = &session {
                    state.client.adopt_session(session);
                }
                if session.is_some() {
                    state.session = session;
                }
            }
            Step::Request {
                method,
                params,
                count,
                mode,
                timeout_ms,
                wait,
            } => {
                let params = params
                    .as_ref()
                    .map(|params| substitute(params, state.session.as_deref()));
                let batch = Batch {
                    method: method.clone(),
                    params,
                    count: *count,
                    mode: *mode,
                    options: options(*timeout_ms),
                    extract: None,
                };
                state.issue(index, batch, *wait).await;
            }
            Step::Notify {
                method,
                params,
                count,
            } => {
                let params = params
                    .as_ref()
                    .map(|params| substitute(params, state.session.as_deref()));
                let peer = state.client.peer();
                let mut failed = 0;
                for _ in 0..*count {
                    if peer.notify(method.clone(), params.clone()).await.is_err() {
                        failed += 1;
                    }
                }
                state.emit(json!({"type": "notified", "step": index, "method": method, "count": count, "failed": failed}));
            }
            Step::Prompt {
                text,
                wait,
                timeout_ms,
            } => {
                let session = state.session(index, op)?;
                state.client.adopt_session(&session);
                state.client.resume_permissions(&session);
                let params = serde_json::to_value(PromptRequest::text(&session, text)).ok();
                let batch = Batch {
                    method: methods::SESSION_PROMPT.to_owned(),
                    params,
                    count: 1,
                    mode: Mode::Sequential,
                    options: options(*timeout_ms),
                    extract: Some(|result, line| {
                        if let Some(reason) = result.get("stopReason") {
                            line["stopReason"] = reason.clone();
                        }
                    }),
                };
                state.issue(index, batch, *wait).await;
            }
            Step::Cancel {} => {
                let session = state.session(index, op)?;
                let answered = state.client.cancel(&session).await;
                state.emit(json!({
                    "type": "cancelled",
                    "step": index,
                    "sessionId": session,
                    "permissionsAnswered": answered.as_ref().ok(),
                    "error": answered.as_ref().err().map(ToString::to_string),
                }));
            }
            Step::Stop {} => {
                let session = state.session(index, op)?;
                let params = json!({ "sessionId": session });
                let batch = Batch {
                    method: methods::SESSION_STOP.to_owned(),
                    params: Some(params),
                    count: 1,
                    mode: Mode::Sequential,
                    options: RequestOptions::default(),
                    extract: None,
                };
                state.issue(index, batch, true).await;
            }
            Step::WaitPermission { count, timeout_ms } => {
                let wait = timeout_ms.map_or(DEFAULT_WAIT, Duration::from_millis);
                tokio::time::timeout(wait, state.client.wait_pending_permissions(*count))
                    .await
                    .map_err(|_| DriverError::Step {
                        step: index,
                        op,
                        reason: format!(
                            "fewer than {count} permission requests arrived in {wait:?}"
                        ),
                    })?;
                state.emit(json!({"type": "permission_pending", "step": index, "count": state.client.stats().pending_permissions}));
            }
            Step::CancelWaiting { count } => {
                let mut cancelled = 0;
                for issued in state.issued.iter().rev() {
                    if cancelled == *count {
                        break;
                    }
                    let progress = &issued.progress;
                    if !progress.sent.load(Ordering::SeqCst)
                        && !progress.finished.load(Ordering::SeqCst)
                    {
                        issued.abort.abort();
                        cancelled += 1;
                    }
                }
                state
                    .emit(json!({"type": "cancel_waiting", "step": index, "cancelled": cancelled}));
            }
            Step::Sleep { ms } => tokio::time::sleep(Duration::from_millis(*ms)).await,
            Step::Await {} => state.await_background().await,
            Step::AwaitSent {} => {
                let all: Vec<Arc<Progress>> = state
                    .issued
                    .iter()
                    .map(|issued| issued.progress.clone())
                    .collect();
                state
                    .wait_until(&all, |p| {
                        p.sent.load(Ordering::SeqCst) || p.finished.load(Ordering::SeqCst)
                    })
                    .await;
            }
            Step::Close {} => {
                state.client.close().await;
                state.emit(json!({"type": "closed", "step": index}));
            }
            Step::Stats {} => {
                let mut line = state.stats_line();
                line["step"] = json!(index);
                state.emit(line);
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scripts_parse_with_defaults_and_reject_unknown_fields() {
        let steps = parse_script(
            r#"[{"op":"initialize"},
                {"op":"request","method":"session/new","params":{"cwd":"/"},"count":3,"timeoutMs":5},
                {"op":"prompt","text":"hi","wait":false},
                {"op":"cancel_waiting"},{"op":"sleep","ms":1},{"op":"close"},{"op":"stats"}]"#,
        )
        .unwrap();
        assert_eq!(steps.len(), 7);
        assert_eq!(
            steps[1],
            Step::Request {
                method: "session/new".into(),
                params: Some(json!({"cwd": "/"})),
                count: 3,
                mode: Mode::Concurrent,
                timeout_ms: Some(5),
                wait: true,
            }
        );
        assert!(parse_script(r#"[{"op":"close","extra":1}]"#).is_err());
        assert!(parse_script(r#"[{"op":"fly"}]"#).is_err());
        assert!(parse_script(r#"{"op":"close"}"#).is_err());
    }

    #[test]
    fn session_placeholders_are_replaced_everywhere() {
        let params = json!({"sessionId": "$session", "list": ["$session", "x"], "n": 1});
        assert_eq!(
            substitute(&params, Some("s-1")),
            json!({"sessionId": "s-1", "list": ["s-1", "x"], "n": 1})
        );
    }

    #[test]
    fn sorted_lines_sort_nested_keys() {
        let value = json!({"b": 1, "a": {"d": [ {"z": 1, "y": 2} ], "c": null}});
        assert_eq!(
            sorted_line(&value),
            r#"{"a":{"c":null,"d":[{"y":2,"z":1}]},"b":1}"#
        );
    }
}
