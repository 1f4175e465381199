//! A scripted ACP client for the agent tests: a JSON-RPC peer that records every
//! `session/update` and every request the agent makes, answers permission requests as told,
//! and serves `fs/*` and `terminal/*` from memory.

use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use ski::acp::agent::{Agent, AgentConnection, ConnectionOptions};
use ski::jsonrpc::{CallError, Peer, PeerBuilder, RequestContext, RpcError, Transport};
use tokio::sync::watch;

/// How long any wait of a test may take before it fails (generous for a loaded machine).
pub const PATIENCE: Duration = Duration::from_secs(20);

/// How the client answers the next permission request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PermissionAnswer {
    /// Select this option id.
    Select(String),
    /// Answer the `cancelled` outcome.
    Cancelled,
    /// Never answer.
    Never,
    /// Answer with an error.
    Error,
}

impl PermissionAnswer {
    pub fn select(option: &str) -> Self {
        PermissionAnswer::Select(option.to_owned())
    }
}

/// Everything the client saw, shared with its handlers.
pub struct ClientState {
    updates: Mutex<Vec<Value>>,
    requests: Mutex<Vec<(String, Value)>>,
    permission: Mutex<VecDeque<PermissionAnswer>>,
    default_permission: Mutex<PermissionAnswer>,
    pub files: Mutex<HashMap<String, String>>,
    pub terminal_hangs: Mutex<bool>,
    changed: watch::Sender<u64>,
}

impl ClientState {
    fn new() -> Arc<Self> {
        Arc::new(Self {
            updates: Mutex::new(Vec::new()),
            requests: Mutex::new(Vec::new()),
            permission: Mutex::new(VecDeque::new()),
            default_permission: Mutex::new(PermissionAnswer::select("allow_once")),
            files: Mutex::new(HashMap::new()),
            terminal_hangs: Mutex::new(false),
            changed: watch::channel(0).0,
        })
    }

    fn bump(&self) {
        self.changed.send_modify(|n| *n += 1);
    }

    fn record_request(&self, method: &str, params: &Value) {
        self.requests
            .lock()
            .unwrap()
            .push((method.to_owned(), params.clone()));
        self.bump();
    }

    fn next_permission(&self) -> PermissionAnswer {
        self.permission
            .lock()
            .unwrap()
            .pop_front()
            .unwrap_or_else(|| self.default_permission.lock().unwrap().clone())
    }
}

/// One test client.
#[derive(Clone)]
pub struct TestClient {
    pub peer: Peer,
    pub state: Arc<ClientState>,
}

fn handlers(state: &Arc<ClientState>) -> PeerBuilder {
    let updates = state.clone();
    let permission = state.clone();
    let fs_read = state.clone();
    let fs_write = state.clone();
    let terminal = state.clone();
    Peer::builder()
        .on_notification("session/update", move |_cx, params: Option<Value>| {
            let state = updates.clone();
            async move {
                state
                    .updates
                    .lock()
                    .unwrap()
                    .push(params.unwrap_or(Value::Null));
                state.bump();
            }
        })
        .on_request(
            "session/request_permission",
            move |_cx: RequestContext, params: Option<Value>| {
                let state = permission.clone();
                async move {
                    let params = params.unwrap_or(Value::Null);
                    state.record_request("session/request_permission", &params);
                    match state.next_permission() {
                        PermissionAnswer::Select(option) => {
                            Ok(json!({"outcome": {"outcome": "selected", "optionId": option}}))
                        }
                        PermissionAnswer::Cancelled => {
                            Ok(json!({"outcome": {"outcome": "cancelled"}}))
                        }
                        PermissionAnswer::Error => Err(RpcError::internal_error("refused to ask")),
                        PermissionAnswer::Never => std::future::pending().await,
                    }
                }
            },
        )
        .on_request(
            "fs/read_text_file",
            move |_cx: RequestContext, params: Option<Value>| {
                let state = fs_read.clone();
                async move {
                    let params = params.unwrap_or(Value::Null);
                    state.record_request("fs/read_text_file", &params);
                    let path = params["path"].as_str().unwrap_or_default().to_owned();
                    match state.files.lock().unwrap().get(&path) {
                        Some(content) => Ok(json!({ "content": content })),
                        None => Err(RpcError::resource_not_found(format!("no file {path}"))),
                    }
                }
            },
        )
        .on_request(
            "fs/write_text_file",
            move |_cx: RequestContext, params: Option<Value>| {
                let state = fs_write.clone();
                async move {
                    let params = params.unwrap_or(Value::Null);
                    state.record_request("fs/write_text_file", &params);
                    let path = params["path"].as_str().unwrap_or_default().to_owned();
                    let content = params["content"].as_str().unwrap_or_default().to_owned();
                    state.files.lock().unwrap().insert(path, content);
                    Ok(json!({}))
                }
            },
        )
        .on_any_request(move |cx: RequestContext, params: Option<Value>| {
            let state = terminal.clone();
            async move {
                let params = params.unwrap_or(Value::Null);
                let method = cx.method().to_owned();
                state.record_request(&method, &params);
                match method.as_str() {
                    "terminal/create" => Ok(json!({"terminalId": "term-1"})),
                    "terminal/wait_for_exit" => {
                        if *state.terminal_hangs.lock().unwrap() {
                            std::future::pending::<()>().await;
                        }
                        Ok(json!({"exitCode": 0, "signal": null}))
                    }
                    "terminal/output" => Ok(json!({
                        "output": "hello\n",
                        "truncated": false,
                        "exitStatus": {"exitCode": 0, "signal": null}
                    })),
                    "terminal/kill" | "terminal/release" => Ok(json!({})),
                    other => Err(RpcError::method_not_found(other)),
                }
            }
        })
}

/// Waits for `fut` or fails the test after [`PATIENCE`].
pub async fn within<T>(what: &str, fut: impl Future<Output = T>) -> T {
    match tokio::time::timeout(PATIENCE, fut).await {
        Ok(value) => value,
        Err(_) => panic!("timed out waiting for {what}"),
    }
}

/// A client on an in-memory pipe to a new connection of `agent` (the stdio shape).
pub fn duplex_client(agent: &Agent) -> (TestClient, AgentConnection) {
    let (ours, theirs) = tokio::io::duplex(1 << 22);
    let (read, write) = tokio::io::split(theirs);
    let connection = agent.connect(Transport::bytes(read, write), &ConnectionOptions::default());
    let state = ClientState::new();
    let (read, write) = tokio::io::split(ours);
    let peer = handlers(&state).spawn(Transport::bytes(read, write));
    (TestClient { peer, state }, connection)
}

/// A client over a real WebSocket to `url`; also returns the upgrade response's headers.
pub async fn ws_client(url: &str) -> (TestClient, tokio_tungstenite::tungstenite::http::HeaderMap) {
    let (socket, response) = within(
        "the websocket handshake",
        Box::pin(tokio_tungstenite::connect_async(url)),
    )
    .await
    .expect("websocket connect");
    let state = ClientState::new();
    let peer = handlers(&state).spawn(Transport::websocket(socket));
    (TestClient { peer, state }, response.headers().clone())
}

impl TestClient {
    /// Sets how the next permission requests are answered, in order.
    pub fn answer_permissions(&self, answers: impl IntoIterator<Item = PermissionAnswer>) {
        self.state.permission.lock().unwrap().extend(answers);
    }

    /// Sets the answer used when no scripted answer is left.
    pub fn default_permission(&self, answer: PermissionAnswer) {
        *self.state.default_permission.lock().unwrap() = answer;
    }

    /// `initialize` with these client capabilities.
    pub async fn initialize_with(&self, capabilities: Value) -> Value {
        self.call(
            "initialize",
            json!({"protocolVersion": 1, "clientCapabilities": capabilities,
                   "clientInfo": {"name": "test-client", "version": "1"}}),
        )
        .await
        .expect("initialize")
    }

    /// `initialize` without capabilities.
    pub async fn initialize(&self) -> Value {
        self.initialize_with(json!({})).await
    }

    /// `session/new` in `/` and its session id.
    pub async fn new_session(&self) -> String {
        self.new_session_in("/").await
    }

    /// `session/new` in `cwd` and its session id.
    pub async fn new_session_in(&self, cwd: &str) -> String {
        let result = self
            .call("session/new", json!({"cwd": cwd, "mcpServers": []}))
            .await
            .expect("session/new");
        result["sessionId"].as_str().expect("sessionId").to_owned()
    }

    /// Any request, waiting at most [`PATIENCE`].
    pub async fn call(&self, method: &str, params: Value) -> Result<Value, CallError> {
        within(method, self.peer.request(method, Some(params))).await
    }

    /// A request expected to fail with an RPC error; returns `(code, message)`.
    pub async fn call_err(&self, method: &str, params: Value) -> (i64, String) {
        match self.call(method, params).await {
            Err(CallError::Rpc(error)) => (error.code.0, error.message),
            other => panic!("{method}: expected an rpc error, got {other:?}"),
        }
    }

    /// `session/prompt` with one text block.
    pub async fn prompt(&self, session: &str, text: &str) -> Result<Value, CallError> {
        self.call(
            "session/prompt",
            json!({"sessionId": session, "prompt": [{"type": "text", "text": text}]}),
        )
        .await
    }

    /// Starts `session/prompt` and returns the sent request's id and its eventual outcome.
    pub async fn start_prompt(
        &self,
        session: &str,
        text: &str,
    ) -> (
        ski::jsonrpc::RequestId,
        tokio::task::JoinHandle<Result<Value, CallError>>,
    ) {
        let pending = self
            .peer
            .start_request(
                "session/prompt",
                Some(json!({"sessionId": session, "prompt": [{"type": "text", "text": text}]})),
                Default::default(),
            )
            .await
            .expect("prompt sent");
        let id = pending.id().clone();
        (id, tokio::spawn(pending))
    }

    /// Every update object received for `session`, in order.
    pub fn updates(&self, session: &str) -> Vec<Value> {
        self.state
            .updates
            .lock()
            .unwrap()
            .iter()
            .filter(|n| n["sessionId"] == session)
            .map(|n| n["update"].clone())
            .collect()
    }

    /// Every update received, for any session, as full notification params.
    pub fn all_updates(&self) -> Vec<Value> {
        self.state.updates.lock().unwrap().clone()
    }

    /// The `sessionUpdate` kinds received for `session`.
    pub fn kinds(&self, session: &str) -> Vec<String> {
        self.updates(session)
            .iter()
            .map(|u| u["sessionUpdate"].as_str().unwrap_or_default().to_owned())
            .collect()
    }

    /// The kinds received for `session`, without execution state and retry updates.
    pub fn content_kinds(&self, session: &str) -> Vec<String> {
        self.kinds(session)
            .into_iter()
            .filter(|k| k != "execution_state_update" && k != "retry_update")
            .collect()
    }

    /// The execution states received for `session`.
    pub fn states(&self, session: &str) -> Vec<String> {
        self.updates(session)
            .iter()
            .filter(|u| u["sessionUpdate"] == "execution_state_update")
            .map(|u| {
                u["executionState"]["state"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned()
            })
            .collect()
    }

    /// The params of every request of `method` the agent made.
    pub fn requests(&self, method: &str) -> Vec<Value> {
        self.state
            .requests
            .lock()
            .unwrap()
            .iter()
            .filter(|(m, _)| m == method)
            .map(|(_, p)| p.clone())
            .collect()
    }

    /// The methods of every request the agent made, in order.
    pub fn request_methods(&self) -> Vec<String> {
        self.state
            .requests
            .lock()
            .unwrap()
            .iter()
            .map(|(m, _)| m.clone())
            .collect()
    }

    /// Waits until `ready` holds for what the client has seen.
    pub async fn wait_for(&self, what: &str, ready: impl Fn(&TestClient) -> bool) {
        let mut changed = self.state.changed.subscribe();
        within(what, async {
            loop {
                if ready(self) {
                    return;
                }
                if changed.changed().await.is_err() {
                    panic!("client state dropped while waiting for {what}");
                }
            }
        })
        .await;
    }

    /// Waits until `session` reached execution state `state`.
    pub async fn wait_for_state(&self, session: &str, state: &str) {
        self.wait_for(&format!("execution state {state}"), |c| {
            c.states(session).iter().any(|s| s == state)
        })
        .await;
    }
}

/// The text of the first `agent_message_chunk` of `updates`.
pub fn reply_text(updates: &[Value]) -> Option<String> {
    updates
        .iter()
        .find(|u| u["sessionUpdate"] == "agent_message_chunk")
        .and_then(|u| u["content"]["text"].as_str())
        .map(str::to_owned)
}

/// The kinds that must not follow a cancellation (E-ACP-20).
pub const CONTENT_KINDS: [&str; 7] = [
    "user_message_chunk",
    "agent_message_chunk",
    "agent_thought_chunk",
    "tool_call",
    "tool_call_update",
    "plan",
    "available_commands_update",
];
