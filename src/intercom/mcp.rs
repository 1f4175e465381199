//! MCP mode: the nine intercom tools over rmcp's streamable HTTP transport at `/mcp` on a
//! loopback port, and (with `--mcp-stdio`) one session over the process's stdin and stdout. Each
//! MCP session is one intercom session, created at `initialize` from the `workspace_id` (or
//! legacy `channel_id`) query parameter, or `--workspace` on stdio, with `protocol_mode = 'mcp'`.
//! The tools are named once in `tools` ([`ToolName`]: the listing and the dispatch) and a call's
//! arguments are checked into one typed `args::Call` before anything happens.

use std::borrow::Cow;
use std::convert::Infallible;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http_body_util::{BodyExt, Full, combinators::BoxBody};
use hyper::body::{Bytes, Incoming};
use hyper_util::rt::TokioIo;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, InitializeRequestParams,
    InitializeResult, ListToolsResult, PaginatedRequestParams, ProtocolVersion, ServerCapabilities,
    ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

mod args;
mod tools;

pub use self::tools::ToolName;

use self::args::Call;
use super::blocks;
use super::config::Mode;
use super::hub::Hub;
use super::policy;
use super::store::NewApproval;
use super::vocab::{ApprovalStatus, Clearance, SessionStatus};
use crate::storage::inside_root::Root;

/// The nine tools as `tools/list` gives them: name, description, input schema.
pub fn tools() -> Vec<Tool> {
    ToolName::ALL.into_iter().map(ToolName::tool).collect()
}

/// The browser origins always served: pages on this machine's loopback names, on any port.
/// `[mcp] allowed_origins` adds more; a request with any other `Origin` is refused (403).
pub const LOOPBACK_ORIGINS: &[&str] = &[
    "http://localhost:*",
    "https://localhost:*",
    "http://127.0.0.1:*",
    "https://127.0.0.1:*",
    "http://[::1]:*",
    "https://[::1]:*",
];

/// The live sessions of the HTTP endpoint and their cap (`[mcp] max_sessions`).
pub struct SessionCap {
    live: std::sync::atomic::AtomicUsize,
    max: usize,
}

impl SessionCap {
    /// A cap of `max` live sessions, none taken.
    pub fn new(max: usize) -> SessionCap {
        SessionCap {
            live: std::sync::atomic::AtomicUsize::new(0),
            max,
        }
    }

    /// Takes a place; `false` when every place is taken.
    fn admit(&self) -> bool {
        use std::sync::atomic::Ordering::SeqCst;
        self.live
            .fetch_update(SeqCst, SeqCst, |live| (live < self.max).then_some(live + 1))
            .is_ok()
    }

    fn release(&self) {
        self.live.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
    }
}

/// The session an MCP connection belongs to; ended when the connection goes away.
struct Slot {
    hub: Arc<Hub>,
    session_id: Mutex<Option<String>>,
    /// The cap this connection counts against (HTTP), and whether it took a place.
    cap: Option<Arc<SessionCap>>,
    admitted: std::sync::atomic::AtomicBool,
}

impl Slot {
    fn id(&self) -> Option<String> {
        self.session_id
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        if let Some(cap) = &self.cap
            && self.admitted.load(std::sync::atomic::Ordering::SeqCst)
        {
            cap.release();
        }
        let Some(id) = self.id() else { return };
        let hub = self.hub.clone();
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                hub.end_session(&id, SessionStatus::Terminated, "agent disconnected")
                    .await;
            });
        }
    }
}

/// One MCP session's handler.
#[derive(Clone)]
pub struct IntercomMcp {
    hub: Arc<Hub>,
    slot: Arc<Slot>,
    /// The query a transport without URLs (stdio) stands in for.
    fixed_query: Option<String>,
}

impl IntercomMcp {
    /// A handler for a new connection.
    pub fn new(hub: Arc<Hub>) -> IntercomMcp {
        IntercomMcp::counted(hub, None)
    }

    /// A handler for a new connection whose session takes a place of `cap`.
    pub fn capped(hub: Arc<Hub>, cap: Arc<SessionCap>) -> IntercomMcp {
        IntercomMcp::counted(hub, Some(cap))
    }

    fn counted(hub: Arc<Hub>, cap: Option<Arc<SessionCap>>) -> IntercomMcp {
        IntercomMcp {
            slot: Arc::new(Slot {
                hub: hub.clone(),
                session_id: Mutex::new(None),
                cap,
                admitted: std::sync::atomic::AtomicBool::new(false),
            }),
            hub,
            fixed_query: None,
        }
    }

    /// A handler placed as if connected with `?workspace_id=ID` (for stdio).
    pub fn with_workspace(hub: Arc<Hub>, workspace_id: Option<&str>) -> IntercomMcp {
        let mut handler = IntercomMcp::new(hub);
        handler.fixed_query = Some(
            workspace_id
                .map(|id| format!("workspace_id={}", percent_encode(id)))
                .unwrap_or_default(),
        );
        handler
    }
}

fn percent_encode(text: &str) -> String {
    text.bytes()
        .map(|byte| match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (byte as char).to_string()
            }
            _ => format!("%{byte:02X}"),
        })
        .collect()
}

fn query_param(query: &str, name: &str) -> Option<String> {
    url_pairs(query)
        .into_iter()
        .find(|(key, _)| key == name)
        .map(|(_, value)| value)
}

fn url_pairs(query: &str) -> Vec<(String, String)> {
    query
        .split('&')
        .filter(|pair| !pair.is_empty())
        .map(|pair| {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            (percent_decode(key), percent_decode(value))
        })
        .collect()
}

fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).unwrap_or("");
                match u8::from_str_radix(hex, 16) {
                    Ok(byte) => {
                        out.push(byte);
                        i += 2;
                    }
                    Err(_) => out.push(b'%'),
                }
            }
            byte => out.push(byte),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn ok(value: Value) -> Result<CallToolResponse, ErrorData> {
    Ok(CallToolResult::success(vec![ContentBlock::text(value.to_string())]).into())
}

fn tool_error(message: impl Into<String>) -> Result<CallToolResponse, ErrorData> {
    Ok(CallToolResult::error(vec![ContentBlock::text(message.into())]).into())
}

/// Writes approved content to `relative` below the workspace `root` (created when missing),
/// resolved by `storage::inside_root`: an absolute path, `..` past the root and a link out of
/// it (dangling or not) are refused; missing directories are created inside; the file must be
/// regular or new, and a final link is not followed.
fn write_inside(root: &Path, relative: &str, content: &[u8]) -> Result<(), String> {
    let path = Path::new(relative);
    std::fs::create_dir_all(root)
        .map_err(|e| format!("cannot create the workspace {}: {e}", root.display()))?;
    let root = Root::new(root).map_err(|e| e.to_string())?;
    root.resolve(path)
        .and_then(|resolved| resolved.create_missing_parents())
        .and_then(|()| root.resolve(path)?.write_file(content))
        .map_err(|e| format!("cannot write {relative}: {e}"))
}

impl IntercomMcp {
    async fn session(&self) -> Result<super::store::Session, String> {
        let id = self
            .slot
            .id()
            .ok_or("no session: the connection did not initialize")?;
        match self.hub.store.session(&id) {
            Ok(Some(session)) if session.status.is_live() => Ok(session),
            Ok(Some(session)) => Err(format!(
                "session {} has ended ({})",
                session.id, session.status
            )),
            Ok(None) => Err(format!("session {id} not found")),
            Err(error) => Err(error.to_string()),
        }
    }

    async fn dispatch(
        &self,
        name: &str,
        args: serde_json::Map<String, Value>,
        cancel: CancellationToken,
    ) -> Result<Value, String> {
        let session = self.session().await?;
        let hub = &self.hub;
        let _ = hub.store.touch(&session.id, Some(name));
        let tool = ToolName::from_name(name).ok_or_else(|| format!("unknown tool: {name}"))?;
        match Call::parse(tool, args)? {
            Call::CheckClearance {
                title,
                description,
                diff,
                file_path,
                risk_level,
            } => {
                let request_id = hub
                    .store
                    .next_request_id(&session.id)
                    .map_err(|e| e.to_string())?;
                let approval = NewApproval {
                    session_id: &session.id,
                    request_id: &request_id,
                    title: &title,
                    description: description.as_deref(),
                    diff: &diff,
                    file_path: &file_path,
                    risk_level,
                };
                hub.store
                    .insert_approval(&approval)
                    .map_err(|e| e.to_string())?;
                let answer = hub.mcp.await_clearance(&session.id, &request_id);
                let (text, blocks) = blocks::approval_request(&approval);
                match hub.post_in_session(&session.id, &text, Some(&blocks)).await {
                    Some((channel, ts)) => {
                        let _ =
                            hub.store
                                .set_approval_message(&session.id, &request_id, &channel, &ts);
                    }
                    None => {
                        hub.mcp.forget(&session.id, &request_id);
                        let _ = hub.store.decide_approval(
                            &session.id,
                            &request_id,
                            Clearance::Interrupted,
                            Some("no slack channel to ask in"),
                        );
                        return Err(
                            "cannot ask the operator: the session has no Slack channel".into()
                        );
                    }
                }
                tokio::select! {
                    decision = answer => match decision {
                        Ok(decision) => Ok(json!({
                            "status": decision.status,
                            "request_id": request_id,
                            "reason": decision.reason,
                        })),
                        Err(_) => Err("the request was dropped".into()),
                    },
                    () = cancel.cancelled() => {
                        hub.mcp.forget(&session.id, &request_id);
                        Err("cancelled".into())
                    }
                }
            }
            Call::CheckDiff { request_id } => {
                let approval = hub
                    .store
                    .approval(&session.id, &request_id)
                    .map_err(|e| e.to_string())?
                    .ok_or_else(|| format!("not found: request {request_id}"))?;
                if approval.status != ApprovalStatus::Approved {
                    return Err(format!(
                        "request {request_id} is {}, not approved",
                        approval.status
                    ));
                }
                let root = hub
                    .config()
                    .workspaces
                    .iter()
                    .find(|w| Some(&w.id) == session.workspace_id.as_ref())
                    .and_then(|w| w.path.clone())
                    .ok_or("the session's workspace has no path to write under")?;
                write_inside(&root, &approval.file_path, approval.diff_content.as_bytes())?;
                hub.store
                    .consume_approval(&session.id, &request_id)
                    .map_err(|e| e.to_string())?;
                Ok(json!({ "status": "applied", "files_written": [approval.file_path] }))
            }
            Call::AutoCheck { tool_name, context } => {
                let root = hub
                    .config()
                    .workspaces
                    .iter()
                    .find(|w| Some(&w.id) == session.workspace_id.as_ref())
                    .and_then(|w| w.path.clone());
                let policy = match root.as_deref().map(policy::load) {
                    Some(Ok(policy)) => policy,
                    Some(Err(error)) => {
                        tracing::warn!(%error, session_id = %session.id, "auto-approve policy unusable; approving nothing");
                        policy::AutoApprove::default()
                    }
                    None => policy::AutoApprove::default(),
                };
                let context = context.map(Value::Object);
                let verdict = policy.check(&tool_name, context.as_ref());
                Ok(json!({
                    "auto_approved": verdict.auto_approved,
                    "tool_name": tool_name,
                    "matched_rule": verdict.matched_rule,
                }))
            }
            Call::Transmit {
                prompt_text,
                prompt_type,
            } => {
                let prompt_id = format!("prompt-{}", &uuid::Uuid::new_v4().to_string()[..8]);
                let answer = hub.mcp.await_prompt(&session.id, &prompt_id);
                let (text, blocks) = blocks::prompt_message(&prompt_id, &prompt_type, &prompt_text);
                if hub
                    .post_in_session(&session.id, &text, Some(&blocks))
                    .await
                    .is_none()
                {
                    hub.mcp.forget(&session.id, &prompt_id);
                    return Err("cannot ask the operator: the session has no Slack channel".into());
                }
                tokio::select! {
                    decision = answer => decision
                        .map(|d| json!({ "decision": d.decision, "instruction": d.instruction }))
                        .map_err(|_| "the prompt was dropped".to_string()),
                    () = cancel.cancelled() => {
                        hub.mcp.forget(&session.id, &prompt_id);
                        Err("cancelled".into())
                    }
                }
            }
            Call::Broadcast {
                message,
                level,
                thread_ts,
            } => {
                if let Some(requested) = thread_ts {
                    // The session's thread is fixed once set; a different one is not honoured.
                    if session.thread_ts.as_deref() != Some(requested.as_str()) {
                        tracing::warn!(session_id = %session.id, requested, "broadcast thread_ts ignored: a session's thread never changes");
                    }
                }
                let icon = level.icon();
                match hub
                    .post_in_session(
                        &session.id,
                        &format!("{icon} {}", blocks::escape(&message)),
                        None,
                    )
                    .await
                {
                    Some((_, ts)) => Ok(json!({ "posted": true, "ts": ts })),
                    None => Ok(json!({ "posted": false, "ts": null })),
                }
            }
            Call::Reboot { session_id } => {
                let id = session_id.unwrap_or(session.id.clone());
                let target = hub
                    .store
                    .session(&id)
                    .map_err(|e| e.to_string())?
                    .ok_or_else(|| format!("not found: session {id}"))?;
                let pending = hub
                    .store
                    .pending_approvals(&id)
                    .map_err(|e| e.to_string())?;
                Ok(json!({
                    "status": "recovered",
                    "session_id": target.id,
                    "session_status": target.status,
                    "channel_id": target.channel_id,
                    "thread_ts": target.thread_ts,
                    "pending_requests": pending,
                }))
            }
            Call::SwitchFreq { mode } => {
                let previous = hub
                    .store
                    .set_mode(&session.id, mode)
                    .map_err(|e| e.to_string())?;
                Ok(json!({ "previous_mode": previous, "current_mode": mode }))
            }
            Call::Standby {
                message,
                timeout_seconds: timeout,
            } => {
                let message =
                    message.unwrap_or_else(|| "The agent waits for your instruction.".into());
                let answer = hub.mcp.await_wait(&session.id);
                let (text, blocks) = blocks::standby_message(&session.id, &message);
                if hub
                    .post_in_session(&session.id, &text, Some(&blocks))
                    .await
                    .is_none()
                {
                    return Err("cannot ask the operator: the session has no Slack channel".into());
                }
                let wait = async {
                    answer
                        .await
                        .map(|d| json!({ "status": d.status, "instruction": d.instruction }))
                        .map_err(|_| "the standby was dropped".to_string())
                };
                tokio::select! {
                    result = wait => result,
                    () = async {
                        if timeout == 0 { std::future::pending::<()>().await }
                        tokio::time::sleep(Duration::from_secs(timeout)).await
                    } => Ok(json!({ "status": "timeout", "instruction": null })),
                    () = cancel.cancelled() => Err("cancelled".into()),
                }
            }
            Call::Ping { progress_snapshot } => {
                if let Some(snapshot) = progress_snapshot {
                    let _ = hub.store.set_progress(&session.id, &snapshot.to_string());
                }
                let steering = hub
                    .store
                    .take_steering(&session.id)
                    .map_err(|e| e.to_string())?;
                Ok(json!({ "acknowledged": true, "pending_steering": steering }))
            }
        }
    }
}

impl IntercomMcp {
    /// Takes this connection's place under the session cap, or refuses the `initialize` (before
    /// anything is created or posted).
    fn admit(&self) -> Result<(), ErrorData> {
        use std::sync::atomic::Ordering::SeqCst;
        let Some(cap) = &self.slot.cap else {
            return Ok(());
        };
        if self.slot.admitted.load(SeqCst) {
            return Ok(());
        }
        if !cap.admit() {
            tracing::warn!(
                max_sessions = cap.max,
                "mcp initialize refused: as many sessions are live as [mcp] max_sessions allows"
            );
            return Err(ErrorData::invalid_request(
                format!(
                    "too many MCP sessions: {} are live, the [mcp] max_sessions limit; end one and connect again",
                    cap.max
                ),
                None,
            ));
        }
        self.slot.admitted.store(true, SeqCst);
        Ok(())
    }
}

impl ServerHandler for IntercomMcp {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build()).with_instructions(
            "ski intercom: ask the operator in Slack for approvals and instructions",
        )
    }

    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        // Versions with sessions: one MCP session is one intercom session.
        Cow::Owned(vec![
            ProtocolVersion::V_2025_11_25,
            ProtocolVersion::V_2025_06_18,
            ProtocolVersion::V_2025_03_26,
        ])
    }

    async fn initialize(
        &self,
        request: InitializeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, ErrorData> {
        context.peer.set_peer_info(request.clone());
        let result = self.negotiate_initialize(&request)?;
        if self.slot.id().is_none() {
            self.admit()?;
            let query = self
                .fixed_query
                .clone()
                .or_else(|| {
                    context
                        .extensions
                        .get::<hyper::http::request::Parts>()
                        .and_then(|parts| parts.uri.query().map(str::to_string))
                })
                .unwrap_or_default();
            let workspace_id = query_param(&query, "workspace_id");
            let channel_id = query_param(&query, "channel_id");
            let placement = self
                .hub
                .place(workspace_id.as_deref(), channel_id.as_deref());
            let session = self
                .hub
                .start_session(
                    Mode::Mcp,
                    "agent:local",
                    &placement,
                    Some("Direct agent connection"),
                )
                .await
                .map_err(|error| ErrorData::internal_error(error.to_string(), None))?;
            *self
                .slot
                .session_id
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(session.id);
        }
        Ok(result)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(tools()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let args = request.arguments.clone().unwrap_or_default();
        match self.dispatch(&request.name, args, context.ct.clone()).await {
            Ok(value) => ok(value),
            Err(message) => tool_error(message),
        }
    }
}

type Response = hyper::Response<BoxBody<Bytes, Infallible>>;

fn plain(status: u16, text: &'static str) -> Response {
    let mut response = hyper::Response::new(Full::new(Bytes::from_static(text.as_bytes())).boxed());
    *response.status_mut() = hyper::StatusCode::from_u16(status).unwrap_or(hyper::StatusCode::OK);
    response
}

/// The answer to an `/mcp` request without the bearer token.
fn unauthorized() -> Response {
    let mut response = plain(
        401,
        "unauthorized: this endpoint needs Authorization: Bearer <token>",
    );
    response.headers_mut().insert(
        hyper::header::WWW_AUTHENTICATE,
        hyper::header::HeaderValue::from_static("Bearer"),
    );
    response
}

/// Whether `request` carries `Authorization: Bearer <token>` (always true when no token is set).
fn authorized(request: &hyper::Request<Incoming>, token: Option<&str>) -> bool {
    let Some(token) = token else {
        return true;
    };
    let presented = request
        .headers()
        .get(hyper::header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.split_once(' '))
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
        .map(|(_, presented)| presented.trim());
    presented.is_some_and(|presented| same_bytes(presented.as_bytes(), token.as_bytes()))
}

/// Equal bytes, compared in a time that does not depend on where they first differ.
fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |diff, (x, y)| diff | (x ^ y)) == 0
}

/// How many clients past the connection cap are answered 503 at a time; beyond, a client's
/// connection is closed unanswered.
const MAX_REFUSALS_AT_ONCE: usize = 32;

/// The answer to a client past `[mcp] max_connections`.
fn over_capacity(limit: usize) -> Response {
    let mut response = hyper::Response::new(
        Full::new(Bytes::from(format!(
            "service unavailable: the endpoint has its limit of {limit} open connections \
             ([mcp] max_connections); try again later\n"
        )))
        .boxed(),
    );
    *response.status_mut() = hyper::StatusCode::SERVICE_UNAVAILABLE;
    let headers = response.headers_mut();
    headers.insert(
        hyper::header::CONNECTION,
        hyper::header::HeaderValue::from_static("close"),
    );
    headers.insert(
        hyper::header::RETRY_AFTER,
        hyper::header::HeaderValue::from_static("1"),
    );
    response
}

/// An HTTP/1 connection builder with the endpoint's header timeout, which also bounds how long
/// an idle keep-alive connection may wait for its next request.
fn http1(header_timeout: Duration) -> hyper::server::conn::http1::Builder {
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(header_timeout);
    builder
}

/// Serves `/mcp` (and `GET /health`) on `listener` until `shutdown` is cancelled. Requests with
/// a `Host` or an `Origin` that is neither loopback nor configured are refused (403, rmcp's
/// checks), with `token` set `/mcp` requests without it too (401; `/health` answers without
/// it), and an `initialize` beyond `[mcp] max_sessions` live sessions is answered with an error.
/// At most `[mcp] max_connections` connections are open at once (one more is answered 503), and
/// a request's headers, like an idle keep-alive connection's next request, must come within
/// `[mcp] header_timeout_ms`.
pub async fn serve(
    listener: TcpListener,
    hub: Arc<Hub>,
    token: Option<String>,
    shutdown: CancellationToken,
) {
    let settings = hub.config().mcp.clone();
    let origins = LOOPBACK_ORIGINS
        .iter()
        .map(|origin| (*origin).to_owned())
        .chain(settings.allowed_origins.iter().cloned());
    let mut config = StreamableHttpServerConfig::default().with_allowed_origins(origins);
    config.cancellation_token = shutdown.child_token();
    let cap = Arc::new(SessionCap::new(
        usize::try_from(settings.max_sessions).unwrap_or(usize::MAX),
    ));
    let factory_hub = hub.clone();
    let service: StreamableHttpService<IntercomMcp, LocalSessionManager> =
        StreamableHttpService::new(
            move || Ok(IntercomMcp::capped(factory_hub.clone(), cap.clone())),
            Arc::new(LocalSessionManager::default()),
            config,
        );
    let token: Option<Arc<str>> = token.map(Arc::from);
    let max_connections = usize::try_from(settings.max_connections)
        .unwrap_or(usize::MAX)
        .max(1);
    let header_timeout = Duration::from_millis(settings.header_timeout_ms.max(1));
    let places = Arc::new(tokio::sync::Semaphore::new(max_connections));
    let refusals = Arc::new(tokio::sync::Semaphore::new(MAX_REFUSALS_AT_ONCE));
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            () = shutdown.cancelled() => return,
        };
        let (stream, remote) = match accepted {
            Ok(accepted) => accepted,
            Err(error) => {
                // Errors such as too many open files pass; keep accepting after a pause.
                tracing::warn!(%error, "mcp: accepting a connection failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let Ok(place) = places.clone().try_acquire_owned() else {
            let Ok(refusal) = refusals.clone().try_acquire_owned() else {
                tracing::info!(%remote, "mcp: connection cap and refusal queue full; closed unanswered");
                continue;
            };
            tracing::info!(%remote, max_connections, "mcp: connection refused (503): at the cap");
            let shutdown = shutdown.clone();
            tokio::spawn(async move {
                let handler =
                    hyper::service::service_fn(move |_: hyper::Request<Incoming>| async move {
                        Ok::<_, Infallible>(over_capacity(max_connections))
                    });
                let connection = http1(header_timeout)
                    .keep_alive(false)
                    .serve_connection(TokioIo::new(stream), handler);
                tokio::select! {
                    _ = connection => {}
                    () = shutdown.cancelled() => {}
                }
                drop(refusal);
            });
            continue;
        };
        let service = service.clone();
        let shutdown = shutdown.clone();
        let token = token.clone();
        tokio::spawn(async move {
            let handler = hyper::service::service_fn(move |request: hyper::Request<Incoming>| {
                let mut service = service.clone();
                let token = token.clone();
                async move {
                    match request.uri().path() {
                        "/mcp" if !authorized(&request, token.as_deref()) => Ok(unauthorized()),
                        "/mcp" => tower_service::Service::call(&mut service, request).await,
                        "/health" => Ok(plain(200, "ok")),
                        _ => Ok(plain(404, "not found")),
                    }
                }
            });
            let connection = http1(header_timeout).serve_connection(TokioIo::new(stream), handler);
            tokio::pin!(connection);
            tokio::select! {
                _ = connection.as_mut() => {}
                () = shutdown.cancelled() => connection.as_mut().graceful_shutdown(),
            }
            drop(place);
        });
    }
}

/// Serves one MCP session over the process's stdin and stdout until stdin ends (the session is
/// then terminated) or `shutdown` is cancelled. The rest of the server keeps running either way.
pub async fn serve_stdio(hub: Arc<Hub>, workspace_id: Option<String>, shutdown: CancellationToken) {
    use rmcp::ServiceExt;
    let handler = IntercomMcp::with_workspace(hub, workspace_id.as_deref());
    let service = match handler
        .serve_with_ct(rmcp::transport::stdio(), shutdown.child_token())
        .await
    {
        Ok(service) => service,
        Err(error) => {
            tracing::warn!(%error, "mcp stdio: no session (stdin closed or initialize failed); the HTTP endpoint keeps running");
            return;
        }
    };
    let reason = service.waiting().await;
    tracing::info!(
        ?reason,
        "mcp stdio: session over; the server and its HTTP endpoint keep running"
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nine_tools_with_object_schemas() {
        let tools = tools();
        assert_eq!(tools.len(), 9);
        assert!(
            tools
                .iter()
                .all(|t| t.input_schema.get("type") == Some(&json!("object")))
        );
    }

    #[test]
    fn query_parameters_are_decoded() {
        assert_eq!(
            query_param("workspace_id=my%2Dproj&channel_id=C1", "workspace_id"),
            Some("my-proj".into())
        );
        assert_eq!(query_param("channel_id=C1", "workspace_id"), None);
        assert_eq!(query_param("a=%zz", "a"), Some("%zz".into()));
    }

    #[test]
    fn writes_stay_inside_the_workspace() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path().join("w");
        assert!(write_inside(&root, "../escaped", b"x").is_err());
        assert!(write_inside(&root, "/etc/passwd", b"x").is_err());
        assert!(!dir.path().join("escaped").exists());
        write_inside(&root, "src/a.rs", b"fn a() {}\n").expect("inside");
        assert_eq!(
            std::fs::read_to_string(root.join("src/a.rs")).expect("written"),
            "fn a() {}\n"
        );
    }
}
