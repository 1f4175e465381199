//! Finding out what an ACP agent can do before testing it: the runner starts the agent once,
//! reads what its `initialize` result declares and what `session/new` offers, tries one prompt,
//! and derives the capabilities of the catalog's vocabulary that a profile would declare.
//!
//! Only what the agent shows on the wire is derived. Capabilities that need a special
//! configuration of the agent (`hold`, `permission-mode`, `retry`, ...) are never discovered; a
//! profile declares them for an agent started in that configuration.
//!
//! Discovery is an ordinary client: it allows the permission requests of its probe turn, and it
//! authenticates before `session/new` with the method it is given, or with a method of the
//! agent's own that needs no person (never a `terminal` or browser login) when the key that
//! method reads is in the environment ([`choose_auth`]). An agent that cannot be initialized
//! (it exits, never answers, or answers another id) is still declared an `agent`, so that the
//! initialize rows fail it.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use futures::{SinkExt, StreamExt};
use serde_json::{Value, json};
use ski::transport::child::{Child, ChildSpec, ProcessTracker, spawn};
use tokio_tungstenite::tungstenite::Message as WsMessage;

use crate::suites::acp::connection::{option_of_kind, permission_outcome};
use crate::target::split_words;

/// How long discovery waits for one answer (slow-starting agents take a second or more).
const ANSWER_TIMEOUT: Duration = Duration::from_secs(30);

/// How long discovery waits for the probe turn's answer once it has cancelled a turn that was
/// still running after [`ANSWER_TIMEOUT`].
const CANCELLED_TURN_TIMEOUT: Duration = Duration::from_secs(10);

/// The capability of an agent whose probe turn ran until discovery cancelled it.
pub const CANCEL_TURN: &str = "cancel-turn";

/// How long discovery waits for the probe turn: to end by itself, then to end once cancelled.
#[derive(Debug, Clone, Copy)]
struct TurnWaits {
    turn: Duration,
    cancelled: Duration,
}

/// The waits of every discovery.
const TURN_WAITS: TurnWaits = TurnWaits {
    turn: ANSWER_TIMEOUT,
    cancelled: CANCELLED_TURN_TIMEOUT,
};

/// How many notifications before an answer discovery keeps (the rest are read and dropped).
const KEPT_NOTIFICATIONS: usize = 1024;

/// The text of the discovery prompt; an agent that answers with exactly it echoes.
const PROBE_TEXT: &str = "ski-conformance probe: please answer with this text";

/// How an answer that never came is worded, and known again (`Discovery::initialize_unanswered`).
const NO_ANSWER: &str = "no answer";

/// What discovery found.
#[derive(Debug, Clone, Default)]
pub struct Discovery {
    /// Capabilities of the ACP vocabulary the agent showed.
    pub capabilities: BTreeSet<String>,
    /// What was seen, one sentence each (including what could not be discovered and why).
    pub notes: Vec<String>,
    /// The notes about what kept rows from running (a failed session/new, a turn that did not
    /// end), which a run prints before it starts.
    pub problems: Vec<String>,
    /// The `initialize` result as sent.
    pub initialize: Value,
    /// The agent gave no answer at all to `initialize` within discovery's wait (as opposed to
    /// refusing it, exiting or answering under another id).
    pub initialize_unanswered: bool,
    /// How long the agent takes to be ready for a prompt: the longer of start (or connect) to the
    /// `initialize` answer and the `session/new` round trip (some agents start a whole engine
    /// per session). Timeouts are scaled by it.
    pub startup: Duration,
    /// The auth method discovery chose by itself and authenticated with successfully; the run
    /// authenticates every connection with it.
    pub auth: Option<String>,
    /// The auth method discovery used and why, or why it used none, in one sentence (the
    /// console, `report.md` and `results.json` print it).
    pub auth_choice: Option<String>,
    /// Which protocol versions the agent speaks, in one sentence: what it answered a v1
    /// `initialize` and an `initialize` asking for 2 (a connection of its own); `acp-v2` is derived
    /// from the second.
    pub versions: Option<String>,
}

/// What discovery is told about authentication.
#[derive(Debug, Clone, Default)]
pub struct AuthOptions {
    /// The method to authenticate with (`--auth-method`, the profile's `auth`); when `None`,
    /// discovery chooses one by itself ([`choose_auth`]).
    pub method: Option<String>,
    /// Environment the agent gets besides this process's own (the profile's), where a method's
    /// key may be.
    pub env: BTreeMap<String, String>,
}

impl AuthOptions {
    /// Whether the agent's environment has `name` set to something.
    fn has_env(&self, name: &str) -> bool {
        self.env.get(name).is_some_and(|v| !v.is_empty())
            || std::env::var_os(name).is_some_and(|v| !v.is_empty())
    }
}

impl Discovery {
    /// Notes something that keeps rows from running.
    fn problem(&mut self, note: String) {
        self.notes.push(note.clone());
        self.problems.push(note);
    }
}

/// Errors of discovery: the agent could not be asked at all.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DiscoverError {
    /// The command could not be started or split.
    #[error("cannot start the agent {command:?}: {message}")]
    Start {
        /// The command.
        command: String,
        /// Why.
        message: String,
    },
    /// The WebSocket endpoint could not be reached.
    #[error("cannot connect to {url}: {message}")]
    Connect {
        /// The URL.
        url: String,
        /// Why.
        message: String,
    },
    /// No agent was given.
    #[error("no agent command or URL was given")]
    NoAgent,
}

/// One JSON-RPC exchange channel to the agent.
enum Channel {
    Stdio(Box<Child>, Asked),
    Ws(
        Box<
            tokio_tungstenite::WebSocketStream<
                tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>,
            >,
        >,
        Asked,
    ),
}

/// The permission requests the agent made of discovery, and the answers it got.
type Asked = Vec<String>;

impl Channel {
    fn asked(&mut self) -> &mut Asked {
        match self {
            Channel::Stdio(_, asked) | Channel::Ws(_, asked) => asked,
        }
    }

    async fn send(&mut self, message: &Value) -> Result<(), String> {
        let text = message.to_string();
        match self {
            Channel::Stdio(child, _) => child.send_line(&text).await.map_err(|e| e.to_string()),
            Channel::Ws(ws, _) => ws
                .send(WsMessage::text(text))
                .await
                .map_err(|e| e.to_string()),
        }
    }

    /// The next JSON message, or why there is none.
    async fn next(&mut self) -> Result<Value, String> {
        loop {
            let text = match self {
                Channel::Stdio(child, _) => match child.next_line().await {
                    Ok(Some(line)) => line,
                    Ok(None) => return Err("the agent closed its stdout".to_owned()),
                    Err(error) => return Err(error.to_string()),
                },
                Channel::Ws(ws, _) => match ws.next().await {
                    Some(Ok(WsMessage::Text(text))) => text.to_string(),
                    Some(Ok(WsMessage::Close(_))) | None => {
                        return Err("the agent closed the connection".to_owned());
                    }
                    Some(Ok(_)) => continue,
                    Some(Err(error)) => return Err(error.to_string()),
                },
            };
            if text.trim().is_empty() {
                continue;
            }
            // Lines that are not JSON (logs on stdout) are passed over.
            if let Ok(value) = serde_json::from_str::<Value>(&text) {
                return Ok(value);
            }
        }
    }

    /// Sends request `id` and waits for its answer (see [`Channel::answer`]) within
    /// [`ANSWER_TIMEOUT`].
    async fn call(
        &mut self,
        id: u64,
        method: &str,
        params: Value,
    ) -> Result<(Value, Vec<Value>), String> {
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await?;
        self.answer(id, method, ANSWER_TIMEOUT, None).await
    }

    /// Waits `wait` for the answer to request `id`, answering the agent's own requests
    /// meanwhile: a permission request is allowed (its first `allow_once` option, else
    /// `allow_always`), anything else gets "method not found". Returns the answer and the
    /// notifications that came before it. A response to an id discovery never sent (while it
    /// waits for `id`, the only one outstanding) is an error, unless `strays` keeps it (the
    /// answer an agent wrongly gives a notification).
    async fn answer(
        &mut self,
        id: u64,
        method: &str,
        wait: Duration,
        mut strays: Option<&mut Vec<Value>>,
    ) -> Result<(Value, Vec<Value>), String> {
        let mut notifications = Vec::new();
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            let message = tokio::time::timeout_at(deadline, self.next())
                .await
                .map_err(|_| format!("{NO_ANSWER} to {method} within {wait:?}"))??;
            let is_response = message.get("method").is_none()
                && (message.get("result").is_some() || message.get("error").is_some());
            if is_response {
                let answered = message.get("id").cloned().unwrap_or(Value::Null);
                if answered == json!(id) {
                    return Ok((message, notifications));
                }
                if let Some(strays) = strays.as_deref_mut() {
                    strays.push(message);
                    continue;
                }
                return Err(format!(
                    "it answered {method} (id {id}) with id {answered}: {}",
                    clip(&message.to_string())
                ));
            }
            match (
                message.get("id"),
                message.get("method").and_then(Value::as_str),
            ) {
                (Some(request_id), Some(request)) => {
                    let answer = if request == "session/request_permission" {
                        let params = message.get("params");
                        let option = option_of_kind(params, "allow_once")
                            .or_else(|| option_of_kind(params, "allow_always"));
                        self.asked().push(match &option {
                            Some(option) => format!("allowed with option {option}"),
                            None => "offered no allow option: answered cancelled".to_owned(),
                        });
                        json!({"jsonrpc": "2.0", "id": request_id, "result": permission_outcome(option)})
                    } else {
                        json!({"jsonrpc": "2.0", "id": request_id, "error": {"code": -32601, "message": "Method not found"}})
                    };
                    self.send(&answer).await?;
                }
                // A flood of notifications must not grow discovery without end; the first ones
                // are those a turn's echo is read from.
                (None, Some(_)) if notifications.len() < KEPT_NOTIFICATIONS => {
                    notifications.push(message);
                }
                _ => {}
            }
        }
    }

    async fn close(self) {
        match self {
            Channel::Stdio(child, _) => {
                let mut child = *child;
                child.close_stdin();
                let _ = child.shutdown().await;
            }
            Channel::Ws(mut ws, _) => {
                let _ = SinkExt::close(&mut ws).await;
            }
        }
    }
}

/// Discovers an agent started as `command` (split like a profile command) over stdio.
///
/// The agent runs in a temp dir of its own, removed afterwards, and with `own_home` with its HOME
/// there too, so that what discovery leaves (its session, caches) is seen by no row.
pub async fn stdio(
    command: &str,
    own_home: bool,
    auth: &AuthOptions,
) -> Result<Discovery, DiscoverError> {
    let start_error = |message: String| DiscoverError::Start {
        command: command.to_owned(),
        message,
    };
    let words = split_words(command).map_err(start_error)?;
    let mut spec = ChildSpec::from_argv("agent", &words)
        .ok_or_else(|| start_error("the command is empty".to_owned()))?;
    let place = tempfile::Builder::new()
        .prefix("ski-conformance-discovery-")
        .tempdir()
        .map_err(|e| start_error(format!("cannot create a temp dir for discovery: {e}")))?;
    spec = spec.cwd(place.path());
    if own_home {
        let home = place.path().join("home");
        std::fs::create_dir(&home)
            .map_err(|e| start_error(format!("cannot create {}: {e}", home.display())))?;
        spec = spec.env("HOME", home);
    }
    let found = stdio_spec(spec, auth).await;
    // The agent is shut down by now; what it left goes with the directory.
    drop(place);
    found
}

/// Discovers an agent started as `spec` (a profile's rendered `agent` command) over stdio.
pub async fn stdio_spec(spec: ChildSpec, auth: &AuthOptions) -> Result<Discovery, DiscoverError> {
    let command = spec.display_command();
    let start_error = |message: String| DiscoverError::Start {
        command: command.clone(),
        message,
    };
    let started = Instant::now();
    // The tracker also ends what the agent started and left its group (a `setsid` daemon).
    let tracker = ProcessTracker::new();
    let spec = spec.grace(Duration::from_secs(2)).tracker(tracker.clone());
    let child = spawn(spec.clone()).map_err(|e| start_error(e.to_string()))?;
    let mut discovery = Discovery::default();
    discovery.capabilities.insert("stdio".to_owned());
    let mut found = run(
        Channel::Stdio(Box::new(child), Asked::new()),
        started,
        discovery,
        auth,
        TURN_WAITS,
    )
    .await;
    // The version probe needs a connection of its own: `initialize` settles a connection's
    // version once.
    if let Ok(found) = &mut found
        && !found.initialize_unanswered
    {
        match spawn(spec) {
            Ok(child) => {
                let mut channel = Channel::Stdio(Box::new(child), Asked::new());
                probe_versions(&mut channel, found).await;
                channel.close().await;
            }
            Err(e) => note_versions(
                found,
                format!("the version probe could not start the agent again: {e}"),
            ),
        }
    }
    tracker.shutdown_all().await;
    found
}

/// Discovers the agent at a WebSocket `url`.
pub async fn websocket(url: &str, auth: &AuthOptions) -> Result<Discovery, DiscoverError> {
    let started = Instant::now();
    let (ws, _) = tokio::time::timeout(
        ANSWER_TIMEOUT,
        Box::pin(tokio_tungstenite::connect_async(url)),
    )
    .await
    .map_err(|_| DiscoverError::Connect {
        url: url.to_owned(),
        message: format!("no connection within {ANSWER_TIMEOUT:?}"),
    })?
    .map_err(|e| DiscoverError::Connect {
        url: url.to_owned(),
        message: e.to_string(),
    })?;
    let mut discovery = Discovery::default();
    discovery.capabilities.insert("ws".to_owned());
    let mut found = run(
        Channel::Ws(Box::new(ws), Asked::new()),
        started,
        discovery,
        auth,
        TURN_WAITS,
    )
    .await;
    if let Ok(found) = &mut found
        && !found.initialize_unanswered
    {
        match tokio::time::timeout(
            ANSWER_TIMEOUT,
            Box::pin(tokio_tungstenite::connect_async(url)),
        )
        .await
        {
            Ok(Ok((ws, _))) => {
                let mut channel = Channel::Ws(Box::new(ws), Asked::new());
                probe_versions(&mut channel, found).await;
                channel.close().await;
            }
            Ok(Err(e)) => note_versions(
                found,
                format!("the version probe could not connect again: {e}"),
            ),
            Err(_) => note_versions(
                found,
                format!("the version probe could not connect again within {ANSWER_TIMEOUT:?}"),
            ),
        }
    }
    found
}

/// The version the discovery's v1 `initialize` was answered, when it was.
fn v1_answer(discovery: &Discovery) -> Option<u64> {
    discovery
        .initialize
        .get("protocolVersion")
        .and_then(Value::as_u64)
}

/// Records what the version probe found.
fn note_versions(discovery: &mut Discovery, sentence: String) {
    discovery
        .notes
        .push(format!("protocol versions: {sentence}"));
    discovery.versions = Some(sentence);
}

/// Asks the agent, on a fresh `channel`, for protocol version 2 with v2's `initialize`
/// (`info`, `capabilities`), and derives `acp-v2` when it answers 2. An answer of 1, `-32022`
/// (unsupported protocol version), another error or none at all means the agent does not speak
/// 2: the v2 rows are then not applicable, never failed.
async fn probe_versions(channel: &mut Channel, discovery: &mut Discovery) {
    let v1 = match v1_answer(discovery) {
        Some(version) => format!("a v1 initialize was answered {version}"),
        None => "a v1 initialize got no version".to_owned(),
    };
    let params = json!({
        "protocolVersion": 2,
        "capabilities": {},
        "info": {"name": "ski-conformance", "version": env!("CARGO_PKG_VERSION")},
    });
    let sentence = match channel.call(0, "initialize", params).await {
        Ok((answer, _)) => match (answer.get("result"), answer.get("error")) {
            (Some(result), _) => match result.get("protocolVersion").and_then(Value::as_u64) {
                Some(2) => {
                    discovery.capabilities.insert("acp-v2".to_owned());
                    format!(
                        "{v1}, an initialize asking for 2 was answered 2: the agent speaks 2 (acp-v2)"
                    )
                }
                Some(other) => format!(
                    "{v1}, an initialize asking for 2 was answered {other}: the agent does not speak 2, the v2 rows are not applicable"
                ),
                None => format!(
                    "{v1}, an initialize asking for 2 was answered without a version ({}): the v2 rows are not applicable",
                    clip(&result.to_string())
                ),
            },
            (None, Some(error)) if error.get("code") == Some(&json!(-32022)) => format!(
                "{v1}, an initialize asking for 2 was refused with -32022 (unsupported protocol version): the agent does not speak 2, the v2 rows are not applicable"
            ),
            _ => format!(
                "{v1}, an initialize asking for 2 was refused ({}): the v2 rows are not applicable",
                clip(&answer.to_string())
            ),
        },
        Err(message) => format!(
            "{v1}, an initialize asking for 2 failed ({message}): the v2 rows are not applicable"
        ),
    };
    note_versions(discovery, sentence);
}

/// Discovers the agent at ACP's remote endpoint `url` (`http://…/acp`): which profiles it
/// answers (the WebSocket upgrade of the same URL: `acp-http-ws`; an `initialize` POST answered
/// `200` with `Acp-Connection-Id`: `acp-http-streamable`), then the rest over the WebSocket
/// profile when it answers it. Over Streamable HTTP alone only the profile is discovered.
pub async fn remote(url: &str, auth: &AuthOptions) -> Result<Discovery, DiscoverError> {
    use crate::suites::acp::remote::http::{self, Endpoint, Request};
    let connect_error = |message: String| DiscoverError::Connect {
        url: url.to_owned(),
        message,
    };
    let endpoint = Endpoint::parse(url).map_err(connect_error)?;
    let initialize = json!({
        "jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": 1, "clientCapabilities": {}, "clientInfo": {"name": "ski-conformance", "version": env!("CARGO_PKG_VERSION")}},
    });
    let streamable = match http::send(
        &endpoint,
        &Request::post_json(&initialize.to_string()),
        ANSWER_TIMEOUT,
    )
    .await
    {
        Ok(answer) => match answer.head.header("acp-connection-id") {
            Some(id) if answer.head.status == 200 => {
                let id = id.to_owned();
                let _ = http::send(
                    &endpoint,
                    &Request::new("DELETE").header("Acp-Connection-Id", &id),
                    ANSWER_TIMEOUT,
                )
                .await;
                Ok(())
            }
            _ => Err(format!(
                "an initialize POST was answered {}",
                answer.head.describe()
            )),
        },
        Err(e) => Err(e),
    };
    let mut discovery = match websocket(&endpoint.ws_url(), auth).await {
        Ok(mut found) => {
            found.capabilities.remove("ws");
            found.capabilities.insert("acp-http-ws".to_owned());
            found.notes.push(format!(
                "the WebSocket upgrade of {} answers",
                endpoint.url()
            ));
            found
        }
        Err(e) => {
            if let Err(streamable) = &streamable {
                return Err(connect_error(format!(
                    "neither profile of the remote endpoint answers: the WebSocket upgrade: {e}; Streamable HTTP: {streamable}"
                )));
            }
            let mut found = Discovery::default();
            found.notes.push(format!(
                "the WebSocket upgrade does not answer ({e}); the rest of discovery speaks WebSocket, so only the Streamable HTTP profile is known: declare the other capabilities by hand"
            ));
            found
        }
    };
    discovery.capabilities.insert("acp-http".to_owned());
    match streamable {
        Ok(()) => {
            discovery
                .capabilities
                .insert("acp-http-streamable".to_owned());
            discovery.notes.push(
                "Streamable HTTP answers: an initialize POST got 200 with Acp-Connection-Id"
                    .to_owned(),
            );
        }
        Err(e) => discovery
            .notes
            .push(format!("Streamable HTTP does not answer: {e}")),
    }
    Ok(discovery)
}

async fn run(
    mut channel: Channel,
    started: Instant,
    mut discovery: Discovery,
    auth: &AuthOptions,
    waits: TurnWaits,
) -> Result<Discovery, DiscoverError> {
    explore(&mut channel, started, &mut discovery, auth, waits).await;
    channel.close().await;
    Ok(discovery)
}

/// An agent's text in a note, cut to a readable length.
fn clip(text: &str) -> String {
    const MAX: usize = 300;
    if text.chars().count() <= MAX {
        text.to_owned()
    } else {
        let cut: String = text.chars().take(MAX).collect();
        format!("{cut}…")
    }
}

async fn explore(
    channel: &mut Channel,
    started: Instant,
    discovery: &mut Discovery,
    auth: &AuthOptions,
    waits: TurnWaits,
) {
    // Whatever happens next, the agent is an ACP agent to be judged: an agent that cannot be
    // initialized fails the initialize rows instead of ending the run with nothing judged.
    discovery.capabilities.insert("agent".to_owned());
    let client_capabilities =
        json!({"fs": {"readTextFile": false, "writeTextFile": false}, "terminal": false});
    let answered = channel
        .call(
            0,
            "initialize",
            json!({"protocolVersion": 1, "clientCapabilities": client_capabilities}),
        )
        .await;
    let init = match answered {
        Ok((answer, _)) => match answer.get("result") {
            Some(init) => init.clone(),
            None => {
                discovery.problem(format!(
                    "initialize was refused ({}): only the rows that need nothing but an agent run, and the initialize rows judge it",
                    clip(&answer.to_string())
                ));
                return;
            }
        },
        Err(message) => {
            discovery.initialize_unanswered = message.starts_with(NO_ANSWER);
            discovery.problem(format!(
                "initialize failed: {message}; only the rows that need nothing but an agent run, and the initialize rows judge it"
            ));
            return;
        }
    };
    discovery.startup = started.elapsed();
    discovery.initialize = init.clone();
    discovery.notes.push(format!(
        "initialize answered after {:.0} ms",
        discovery.startup.as_secs_f64() * 1000.0
    ));
    derive_from_initialize(&init, discovery);
    let authenticated = authenticate(channel, &init, discovery, auth).await;

    let cwd = std::env::temp_dir().display().to_string();
    let asked = Instant::now();
    let answered = channel
        .call(2, "session/new", json!({"cwd": cwd, "mcpServers": []}))
        .await;
    let session_setup = asked.elapsed();
    if session_setup > discovery.startup {
        discovery.startup = session_setup;
        discovery.notes.push(format!(
            "session/new answered after {:.0} ms, longer than initialize: timeouts scale with it",
            session_setup.as_secs_f64() * 1000.0
        ));
    }
    let (answer, _) = match answered {
        Ok(answer) => answer,
        Err(message) => {
            discovery.problem(format!("session/new: {message}"));
            return;
        }
    };
    let Some(session) = answer.get("result").cloned() else {
        let error = answer.get("error").cloned().unwrap_or(Value::Null);
        if error.get("code") == Some(&json!(-32000)) {
            // The rows run and say that they are blocked, and why, instead of vanishing.
            discovery.capabilities.insert("session".to_owned());
            discovery.capabilities.insert("prompt".to_owned());
            let how = if authenticated {
                "although discovery authenticated"
            } else {
                "and discovery had no auth method it could use (--auth-method ID, with the key the method reads)"
            };
            discovery.problem(format!(
                "session/new was refused with -32000, authentication required ({}), {how}: rows that need a session are blocked",
                clip(&error.to_string())
            ));
        } else {
            discovery.problem(format!(
                "session/new failed ({}): rows that need a session cannot run without set-up",
                clip(&error.to_string())
            ));
        }
        return;
    };
    discovery.capabilities.insert("session".to_owned());
    discovery
        .notes
        .push("session/new succeeded without set-up: session".to_owned());
    for (field, capability) in [
        ("modes", "set-mode"),
        ("configOptions", "config-options"),
        ("models", "set-model"),
    ] {
        if session.get(field).is_some_and(|v| !v.is_null()) {
            discovery.capabilities.insert(capability.to_owned());
            discovery
                .notes
                .push(format!("session/new returned {field}: {capability}"));
        }
    }
    let Some(session_id) = session.get("sessionId").and_then(Value::as_str) else {
        discovery
            .notes
            .push("session/new returned no sessionId".to_owned());
        return;
    };
    let prompt = json!({"sessionId": session_id, "prompt": [{"type": "text", "text": PROBE_TEXT}]});
    let answered = match channel
        .send(&json!({"jsonrpc": "2.0", "id": 3, "method": "session/prompt", "params": prompt}))
        .await
    {
        Ok(()) => channel.answer(3, "session/prompt", waits.turn, None).await,
        Err(message) => Err(message),
    };
    for asked in channel.asked().drain(..) {
        discovery.notes.push(format!(
            "the probe turn asked for permission (session/request_permission): {asked}"
        ));
    }
    match answered {
        Ok((answer, notifications)) => judge_probe_turn(&answer, &notifications, discovery),
        Err(message) if message.starts_with(NO_ANSWER) => {
            cancel_probe_turn(channel, session_id, discovery, waits).await;
        }
        Err(message) => discovery.problem(format!(
            "the probe prompt: {message}; rows that need a completed turn (prompt) are skipped"
        )),
    }
}

/// What a probe turn that ended by itself shows: `prompt` when it ended `end_turn`, `echo` when
/// its reply repeated the prompt.
fn judge_probe_turn(answer: &Value, notifications: &[Value], discovery: &mut Discovery) {
    let stop = answer
        .pointer("/result/stopReason")
        .and_then(Value::as_str)
        .map(str::to_owned);
    if stop.as_deref() != Some("end_turn") {
        discovery.problem(format!(
            "the probe prompt did not end with end_turn ({answer}): rows that need a completed turn (prompt) are skipped"
        ));
        return;
    }
    discovery.capabilities.insert("prompt".to_owned());
    discovery
        .notes
        .push("a prompt turn ended with end_turn: prompt".to_owned());
    let text: String = notifications
        .iter()
        .filter(|n| {
            n.pointer("/params/update/sessionUpdate")
                .and_then(Value::as_str)
                == Some("agent_message_chunk")
        })
        .filter_map(|n| {
            n.pointer("/params/update/content/text")
                .and_then(Value::as_str)
        })
        .collect();
    if text == PROBE_TEXT {
        discovery.capabilities.insert("echo".to_owned());
        discovery
            .notes
            .push("the reply repeated the prompt exactly: echo".to_owned());
    } else {
        discovery.notes.push(
            "the reply was not the prompt's text: rows that judge a model's answer (echo) are skipped; every protocol row still runs".to_owned(),
        );
    }
}

/// The probe turn was still running after `waits.turn` (no model answers offline, or the agent
/// ends turns only when cancelled): discovery cancels it with `session/cancel`, as ACP lets any
/// client, and waits `waits.cancelled` for the answer. The agent is alive with a running turn,
/// so it is declared `cancel-turn` whatever the cancel brings: how it ends a cancelled turn (the
/// stop reason, an answer to the notification, updates after the answer) is what the cancel rows
/// judge, not discovery.
async fn cancel_probe_turn(
    channel: &mut Channel,
    session_id: &str,
    discovery: &mut Discovery,
    waits: TurnWaits,
) {
    let cancel =
        json!({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": session_id}});
    if let Err(message) = channel.send(&cancel).await {
        discovery.problem(format!(
            "the probe prompt was not answered within {:?}, and session/cancel could not be sent ({message}); rows that need a completed turn (prompt) are skipped",
            waits.turn
        ));
        return;
    }
    let mut strays = Vec::new();
    let answered = channel
        .answer(3, "session/prompt", waits.cancelled, Some(&mut strays))
        .await;
    let ended = match &answered {
        Ok((answer, _)) => match answer.pointer("/result/stopReason") {
            Some(reason) => format!("session/cancel ended it with stopReason {reason}"),
            None => format!("session/cancel ended it with {}", clip(&answer.to_string())),
        },
        Err(message) if message.starts_with(NO_ANSWER) => format!(
            "it was still unanswered {:?} after session/cancel",
            waits.cancelled
        ),
        Err(message) => {
            discovery.problem(format!(
                "the probe prompt was not answered within {:?}, and after session/cancel: {message}; rows that need a completed turn (prompt) are skipped",
                waits.turn
            ));
            return;
        }
    };
    discovery.capabilities.insert(CANCEL_TURN.to_owned());
    let mut note = format!(
        "the probe turn ran until cancelled (no answer to session/prompt within {:?}); {ended}: {CANCEL_TURN}, the cancel rows judge its cancelled turns; rows that need a turn to end by itself (prompt) are not tested",
        waits.turn
    );
    if !strays.is_empty() {
        let listed: Vec<String> = strays.iter().map(|s| clip(&s.to_string())).collect();
        note.push_str(&format!(
            " (it also sent responses discovery never asked for: {})",
            listed.join("; ")
        ));
    }
    discovery.problem(note);
}

/// Authenticates after `initialize` with the method given, or one [`choose_auth`] picks;
/// whether the agent accepted one.
async fn authenticate(
    channel: &mut Channel,
    init: &Value,
    discovery: &mut Discovery,
    auth: &AuthOptions,
) -> bool {
    let methods = init
        .get("authMethods")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let (method, chosen) = match &auth.method {
        Some(method) => {
            discovery.auth_choice = Some(format!(
                "method {method:?}, as the profile or --auth-method names it"
            ));
            (method.clone(), false)
        }
        None => match choose_auth(&methods, |name| auth.has_env(name)) {
            Ok((method, why)) => {
                discovery.auth_choice = Some(format!("chose method {method:?}: {why}"));
                (method, true)
            }
            Err(why) => {
                let choice = format!("no method chosen: {why}");
                discovery.notes.push(format!("auth: {choice}"));
                discovery.auth_choice = Some(choice);
                return false;
            }
        },
    };
    let outcome = match channel
        .call(1, "authenticate", json!({"methodId": method}))
        .await
    {
        Ok((answer, _)) if answer.get("result").is_some() => {
            discovery
                .notes
                .push(format!("authenticate with method {method:?} succeeded"));
            if chosen {
                discovery.auth = Some(method.clone());
            }
            Ok(())
        }
        Ok((answer, _)) => Err(format!(
            "authenticate with method {method:?} was refused: {}",
            clip(&answer.to_string())
        )),
        Err(message) => Err(format!("authenticate with method {method:?}: {message}")),
    };
    let accepted = outcome.is_ok();
    if let Some(choice) = discovery.auth_choice.as_mut() {
        choice.push_str(if accepted {
            "; the agent accepted it"
        } else {
            "; the agent did not accept it"
        });
        // The notes reach report.md and results.json (the run's discovery notes).
        discovery.notes.push(format!("auth: {choice}"));
    }
    if let Err(problem) = outcome {
        discovery.problem(problem);
    }
    accepted
}

/// Picks an auth method that needs no person: not a `terminal` method (ACP: the client runs the
/// agent interactively for it) nor one whose words speak of a browser or a login, but one
/// whose key the environment has: an `env_var` method's variable (`varName`, or every
/// `vars[].name`; the form of earlier unstable schemas), or an agent method whose id, name or
/// description names an environment variable (`Use OPENAI_API_KEY`, "Requires setting the
/// `GEMINI_API_KEY` environment variable") or, naming none, the provider of the API key it takes
/// ([`provider_keys`]). Returns the method id and why, or why none.
pub fn choose_auth(
    methods: &[Value],
    has_env: impl Fn(&str) -> bool,
) -> Result<(String, String), String> {
    if methods.is_empty() {
        return Err("the agent advertises no authMethods".to_owned());
    }
    let mut passed = Vec::new();
    for method in methods {
        let Some(id) = method.get("id").and_then(Value::as_str) else {
            continue;
        };
        let kind = method
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or("agent");
        let words = ["id", "name", "description"]
            .iter()
            .filter_map(|field| method.get(*field).and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join(" ");
        if kind == "terminal" {
            passed.push(format!("{id}: a terminal login needs a person"));
            continue;
        }
        let variables: Vec<String> = if kind == "env_var" {
            let named = method
                .get("varName")
                .and_then(Value::as_str)
                .map(str::to_owned);
            let listed = method
                .get("vars")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|v| v.get("name").and_then(Value::as_str).map(str::to_owned));
            named.into_iter().chain(listed).collect()
        } else {
            let named = env_names(&words);
            if named.is_empty() {
                // Any one of the provider's variables will do: the first that is set.
                let keys = provider_keys(method);
                match keys.iter().find(|name| has_env(name)) {
                    Some(set) => vec![set.clone()],
                    None if keys.len() > 1 => {
                        passed.push(format!("{id}: none of {} is set", keys.join(", ")));
                        continue;
                    }
                    None => keys,
                }
            } else {
                named
            }
        };
        if variables.is_empty() {
            let interactive = [
                "browser",
                "login",
                "log in",
                "sign in",
                "oauth",
                "device code",
            ]
            .iter()
            .any(|w| words.to_lowercase().contains(w));
            passed.push(if interactive {
                format!("{id}: an interactive login needs a person")
            } else {
                format!("{id}: names no environment variable to read a key from")
            });
            continue;
        }
        let missing: Vec<&String> = variables.iter().filter(|v| !has_env(v)).collect();
        if missing.is_empty() {
            let mut why = format!("it needs no person and {} is set", variables.join(", "));
            if !passed.is_empty() {
                why.push_str(&format!("; passed over {}", passed.join("; ")));
            }
            return Ok((id.to_owned(), why));
        }
        passed.push(format!(
            "{id}: {} is not set",
            missing
                .iter()
                .map(|v| v.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    Err(passed.join("; "))
}

/// The key variables an agent method that names no variable but the provider whose API key it
/// takes (`"_meta": {"api-key": {"provider": "openai"}}`, codex-acp 2.x) may read, the one the
/// provider's own tools read first: `google` and `gemini` read `GEMINI_API_KEY` (Gemini CLI,
/// Google's SDKs) and then `GOOGLE_API_KEY`; `anthropic` `ANTHROPIC_API_KEY`; `openai`
/// `OPENAI_API_KEY`; any other provider `<PROVIDER>_API_KEY`.
fn provider_keys(method: &Value) -> Vec<String> {
    let Some(provider) = method
        .pointer("/_meta/api-key/provider")
        .and_then(Value::as_str)
    else {
        return Vec::new();
    };
    let plausible = !provider.is_empty()
        && provider
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if !plausible {
        return Vec::new();
    }
    let known: &[&str] = match provider.to_ascii_lowercase().as_str() {
        "google" | "gemini" | "google-genai" | "google_genai" => {
            &["GEMINI_API_KEY", "GOOGLE_API_KEY"]
        }
        "anthropic" | "claude" => &["ANTHROPIC_API_KEY"],
        "openai" | "codex" => &["OPENAI_API_KEY"],
        _ => &[],
    };
    if known.is_empty() {
        vec![format!(
            "{}_API_KEY",
            provider.to_ascii_uppercase().replace('-', "_")
        )]
    } else {
        known.iter().map(|name| (*name).to_owned()).collect()
    }
}

/// The environment variable names in `text`: upper-case words of letters, digits and
/// underscores with at least one underscore (`OPENAI_API_KEY`), quoted or not.
fn env_names(text: &str) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for word in text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')) {
        let plausible = word.contains('_')
            && word.len() > 3
            && word.starts_with(|c: char| c.is_ascii_uppercase())
            && word
                .chars()
                .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_');
        if plausible && !names.iter().any(|n| n == word) {
            names.push(word.to_owned());
        }
    }
    names
}

/// The capabilities an `initialize` result declares.
fn derive_from_initialize(init: &Value, discovery: &mut Discovery) {
    let agent = init
        .get("agentCapabilities")
        .cloned()
        .unwrap_or(Value::Null);
    let mut found = |capability: &str, why: String| {
        discovery.capabilities.insert(capability.to_owned());
        discovery.notes.push(format!("{why}: {capability}"));
    };
    if agent.get("loadSession") == Some(&Value::Bool(true)) {
        found("load-session", "agentCapabilities.loadSession".to_owned());
    }
    if let Some(session) = agent.get("sessionCapabilities").and_then(Value::as_object) {
        for (field, capability) in [
            ("list", "session-list"),
            ("resume", "session-resume"),
            ("fork", "session-fork"),
            ("delete", "session-delete"),
        ] {
            if session.get(field).is_some_and(|v| !v.is_null()) {
                found(
                    capability,
                    format!("agentCapabilities.sessionCapabilities.{field}"),
                );
            }
        }
    }
    if init
        .get("authMethods")
        .and_then(Value::as_array)
        .is_some_and(|methods| !methods.is_empty())
    {
        found("auth", "authMethods".to_owned());
    }
    let logout = agent.pointer("/auth/logout").is_some_and(|v| !v.is_null());
    if logout {
        found("logout", "agentCapabilities.auth.logout".to_owned());
    }
    if agent
        .pointer("/_meta/ski/sessionExport")
        .is_some_and(|v| !v.is_null())
    {
        found(
            "session-export",
            "agentCapabilities._meta.ski.sessionExport".to_owned(),
        );
    }
}

/// Whether `url` names ACP's remote endpoint (`http://` or `https://`) rather than a
/// WebSocket (`ws://`, `wss://`).
pub fn is_remote_url(url: &str) -> bool {
    url.starts_with("http://") || url.starts_with("https://")
}

/// A target profile (TOML) that declares what was discovered, to save and edit.
pub fn profile_toml(
    name: &str,
    agent_cmd: Option<&str>,
    agent_url: Option<&str>,
    discovery: &Discovery,
) -> String {
    let quote = |text: &str| toml::Value::String(text.to_owned()).to_string();
    let mut text = String::new();
    text.push_str(
        "# Discovered by `ski-conformance probe`; declare more capabilities only for an agent\n",
    );
    text.push_str("# started in the configuration they need (conformance/targets/README.md).\n");
    for note in &discovery.notes {
        text.push_str(&format!("#   {note}\n"));
    }
    text.push_str(&format!("name = {}\n", quote(name)));
    let from = agent_cmd.or(agent_url).unwrap_or_default();
    text.push_str(&format!(
        "description = {}\n\n[suites.acp]\n",
        quote(&format!("discovered from {from}"))
    ));
    let listed: Vec<String> = discovery.capabilities.iter().map(|c| quote(c)).collect();
    text.push_str(&format!("capabilities = [{}]\n", listed.join(", ")));
    if let Some(cmd) = agent_cmd {
        text.push_str(&format!(
            "\n# Each scenario's agent gets a HOME of its own; remove this to use yours.\n[suites.acp.env]\nHOME = {}\n",
            quote(crate::target::AD_HOC_HOME)
        ));
        text.push_str(&format!(
            "\n[suites.acp.commands]\nagent = {}\n",
            quote(cmd)
        ));
    }
    if let Some(url) = agent_url {
        let key = if is_remote_url(url) { "http" } else { "ws" };
        text.push_str(&format!("\n[suites.acp.urls]\n{key} = {}\n", quote(url)));
    }
    if let Some(method) = &discovery.auth {
        text.push_str(&format!(
            "\n# Every connection authenticates with this method; put the key it reads in env.\n[suites.acp.auth]\nmethod = {}\n",
            quote(method)
        ));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn methods() -> Vec<Value> {
        vec![
            json!({"id": "terminal-login", "name": "Log in", "type": "terminal", "args": ["--login"]}),
            json!({"id": "oauth-personal", "name": "Log in with Google", "description": "Opens a browser"}),
            json!({"id": "gemini-api-key", "name": "Use Gemini API key", "description": "Requires setting the `GEMINI_API_KEY` environment variable"}),
            json!({"id": "vertex", "type": "env_var", "name": "Vertex", "varName": "VERTEX_KEY"}),
        ]
    }

    #[test]
    fn a_method_whose_key_is_set_is_chosen_and_interactive_ones_never() {
        let (id, why) = choose_auth(&methods(), |name| name == "GEMINI_API_KEY")
            .expect("the API-key method is chosen");
        assert_eq!(id, "gemini-api-key");
        assert!(why.contains("GEMINI_API_KEY is set"), "{why}");
        assert!(why.contains("terminal-login: a terminal login"), "{why}");
        assert!(
            why.contains("oauth-personal: an interactive login"),
            "{why}"
        );
        let (id, _) = choose_auth(&methods(), |name| name == "VERTEX_KEY")
            .expect("the env_var method is chosen");
        assert_eq!(id, "vertex");
    }

    #[test]
    fn without_a_key_nothing_is_chosen_and_the_reason_names_each_method() {
        let why = choose_auth(&methods(), |_| false).expect_err("nothing to choose");
        for part in [
            "terminal-login: a terminal login needs a person",
            "oauth-personal: an interactive login needs a person",
            "gemini-api-key: GEMINI_API_KEY is not set",
            "vertex: VERTEX_KEY is not set",
        ] {
            assert!(why.contains(part), "{part} in {why}");
        }
        assert!(choose_auth(&[], |_| true).is_err());
    }

    #[test]
    fn an_api_key_method_that_names_its_provider_reads_the_provider_key() {
        // codex-acp 2.x: the method names no variable, only the provider whose key it reads.
        let methods = vec![
            json!({"id": "api-key", "name": "API Key", "description": "Use an API key to authenticate", "_meta": {"api-key": {"provider": "openai"}}}),
            json!({"id": "chat-gpt", "name": "ChatGPT", "description": "Use ChatGPT to authenticate"}),
        ];
        let (id, why) = choose_auth(&methods, |name| name == "OPENAI_API_KEY")
            .expect("the API-key method is chosen");
        assert_eq!(id, "api-key");
        assert!(why.contains("OPENAI_API_KEY is set"), "{why}");
        let why = choose_auth(&methods, |_| false).expect_err("no key, no method");
        assert!(why.contains("api-key: OPENAI_API_KEY is not set"), "{why}");
    }

    #[test]
    fn a_google_key_method_reads_gemini_api_key_first_then_google_api_key() {
        let methods = vec![
            json!({"id": "gemini-api-key", "name": "API key", "_meta": {"api-key": {"provider": "google"}}}),
        ];
        let (_, why) = choose_auth(&methods, |name| {
            name == "GEMINI_API_KEY" || name == "GOOGLE_API_KEY"
        })
        .expect("the API-key method is chosen");
        assert!(why.contains("GEMINI_API_KEY is set"), "{why}");
        let (_, why) = choose_auth(&methods, |name| name == "GOOGLE_API_KEY")
            .expect("GOOGLE_API_KEY is read when GEMINI_API_KEY is not set");
        assert!(why.contains("GOOGLE_API_KEY is set"), "{why}");
        let why = choose_auth(&methods, |_| false).expect_err("no key, no method");
        assert!(
            why.contains("gemini-api-key: none of GEMINI_API_KEY, GOOGLE_API_KEY is set"),
            "{why}"
        );
        for (provider, key) in [
            ("anthropic", "ANTHROPIC_API_KEY"),
            ("openai", "OPENAI_API_KEY"),
            ("open-router", "OPEN_ROUTER_API_KEY"),
        ] {
            let methods = vec![json!({"id": "k", "_meta": {"api-key": {"provider": provider}}})];
            let (_, why) = choose_auth(&methods, |name| name == key)
                .unwrap_or_else(|e| panic!("{provider}: {e}"));
            assert!(why.contains(&format!("{key} is set")), "{provider}: {why}");
        }
    }

    /// An agent in `sh` that answers `initialize` and `session/new`, and the prompt only when it
    /// is cancelled, with `stop_reason` (and, with `answer_cancel`, an error answer to the
    /// `session/cancel` notification too).
    fn turn_until_cancel_agent(
        dir: &std::path::Path,
        stop_reason: &str,
        answer_cancel: bool,
    ) -> ChildSpec {
        let answer = if answer_cancel {
            r#"printf '{"jsonrpc":"2.0","id":null,"error":{"code":-32601,"message":"no"}}\n'"#
        } else {
            ":"
        };
        let script = format!(
            r#"while IFS= read -r line; do
  id=$(printf '%s' "$line" | sed -n 's/.*"id":\([0-9]*\).*/\1/p')
  case "$line" in
    *'"method":"initialize"'*) printf '{{"jsonrpc":"2.0","id":%s,"result":{{"protocolVersion":1,"agentCapabilities":{{}},"authMethods":[]}}}}\n' "$id" ;;
    *'"method":"session/new"'*) printf '{{"jsonrpc":"2.0","id":%s,"result":{{"sessionId":"s-1"}}}}\n' "$id" ;;
    *'"method":"session/prompt"'*) prompt=$id ;;
    *'"method":"session/cancel"'*) {answer}; printf '{{"jsonrpc":"2.0","id":%s,"result":{{"stopReason":"{stop_reason}"}}}}\n' "$prompt" ;;
  esac
done
"#
        );
        let path = dir.join("agent.sh");
        std::fs::write(&path, script).expect("the script is written");
        ChildSpec::from_argv("agent", &["sh".to_owned(), path.display().to_string()])
            .expect("a command")
    }

    /// An agent in `sh` that answers every `initialize` with `answer` (a JSON-RPC result or
    /// error member) under the request's id.
    fn initialize_agent(dir: &std::path::Path, answer: &str) -> ChildSpec {
        let script = format!(
            r#"while IFS= read -r line; do
  id=$(printf '%s' "$line" | sed -n 's/.*"id":\([0-9]*\).*/\1/p')
  printf '{{"jsonrpc":"2.0","id":%s,{answer}}}\n' "$id"
done
"#
        );
        let path = dir.join("agent.sh");
        std::fs::write(&path, script).expect("the script is written");
        ChildSpec::from_argv("agent", &["sh".to_owned(), path.display().to_string()])
            .expect("a command")
    }

    #[tokio::test]
    async fn the_version_probe_declares_acp_v2_only_for_an_answer_of_2() {
        for (answer, speaks, said) in [
            (
                r#""result":{"protocolVersion":2,"capabilities":{},"info":{"name":"a","version":"1"}}"#,
                true,
                "answered 2",
            ),
            (
                r#""result":{"protocolVersion":1,"agentCapabilities":{}}"#,
                false,
                "answered 1",
            ),
            (
                r#""error":{"code":-32022,"message":"unsupported"}"#,
                false,
                "-32022",
            ),
            (
                r#""error":{"code":-32602,"message":"invalid"}"#,
                false,
                "refused",
            ),
        ] {
            let dir = tempfile::tempdir().expect("a temp dir");
            let child = spawn(initialize_agent(dir.path(), answer).grace(Duration::from_secs(2)))
                .expect("the agent starts");
            let mut channel = Channel::Stdio(Box::new(child), Asked::new());
            let mut found = Discovery {
                initialize: json!({"protocolVersion": 1}),
                ..Discovery::default()
            };
            probe_versions(&mut channel, &mut found).await;
            channel.close().await;
            assert_eq!(found.capabilities.contains("acp-v2"), speaks, "{answer}");
            let sentence = found.versions.clone().unwrap_or_default();
            assert!(sentence.contains(said), "{answer}: {sentence}");
            assert!(
                sentence.starts_with("a v1 initialize was answered 1"),
                "{sentence}"
            );
            assert!(
                found.notes.iter().any(|n| n.contains(&sentence)),
                "{:?}",
                found.notes
            );
        }
    }

    async fn discover_with_short_turn_wait(spec: ChildSpec) -> Discovery {
        let child = spawn(spec.grace(Duration::from_secs(2))).expect("the agent starts");
        let waits = TurnWaits {
            turn: Duration::from_millis(300),
            cancelled: Duration::from_secs(20),
        };
        run(
            Channel::Stdio(Box::new(child), Asked::new()),
            Instant::now(),
            Discovery::default(),
            &AuthOptions::default(),
            waits,
        )
        .await
        .expect("discovery runs")
    }

    #[tokio::test]
    async fn a_turn_that_runs_until_cancelled_is_declared_cancel_turn_not_prompt() {
        let dir = tempfile::tempdir().expect("a temp dir");
        let found =
            discover_with_short_turn_wait(turn_until_cancel_agent(dir.path(), "cancelled", false))
                .await;
        assert!(found.capabilities.contains(CANCEL_TURN), "{found:#?}");
        assert!(!found.capabilities.contains("prompt"), "{found:#?}");
        let note = found
            .problems
            .iter()
            .find(|p| p.contains("ran until cancelled"))
            .unwrap_or_else(|| panic!("a problem says so: {found:#?}"));
        assert!(note.contains("stopReason \"cancelled\""), "{note}");
        let choice = "no method chosen: the agent advertises no authMethods";
        assert_eq!(found.auth_choice.as_deref(), Some(choice));
        assert!(
            found.notes.iter().any(|n| *n == format!("auth: {choice}")),
            "{found:#?}"
        );
    }

    #[tokio::test]
    async fn a_cancelled_turn_that_ends_wrongly_is_still_left_to_the_cancel_rows() {
        // What the agent does wrong with the cancel is for the rows to judge: discovery only
        // says that a turn runs and can be cancelled.
        let dir = tempfile::tempdir().expect("a temp dir");
        let found =
            discover_with_short_turn_wait(turn_until_cancel_agent(dir.path(), "end_turn", true))
                .await;
        assert!(found.capabilities.contains(CANCEL_TURN), "{found:#?}");
        let note = found
            .problems
            .iter()
            .find(|p| p.contains("ran until cancelled"))
            .unwrap_or_else(|| panic!("a problem says so: {found:#?}"));
        assert!(note.contains("stopReason \"end_turn\""), "{note}");
        assert!(
            note.contains("responses discovery never asked for"),
            "{note}"
        );
    }

    #[test]
    fn environment_variable_names_are_read_from_words() {
        assert_eq!(
            env_names("Use `OPENAI_API_KEY` or ANTHROPIC_API_KEY, not API or Key_Name"),
            vec!["OPENAI_API_KEY", "ANTHROPIC_API_KEY"]
        );
    }
}
