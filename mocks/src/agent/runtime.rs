//! The running agent: shared state, the write path with its faults, sessions, cancels and the
//! context each sequence runs in. The dispatch of inbound lines is in [`dispatch`].

pub mod ctx;
pub mod dispatch;
pub mod inbound;
mod inline;
pub mod params;
mod prompt;
pub mod sequence;
pub mod state;

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use serde_json::{Value, json};
use ski::acp::turn_lines;
use ski::jsonrpc::{ErrorCode, Message, RequestId, Response, RpcError, VersionField, encode_into};
use tokio::sync::{Notify, oneshot, watch};
use tokio::task::AbortHandle;

use super::config::Config;
use super::output::{ErrorOutput, Gates, Output, Written};
use super::script::step::{FragmentPlan, Fragments};
use super::script::{IdStyle, Personality, Trigger};
use super::template::{AgentNames, Vars};
use super::transcript::Transcript;
use ctx::{Ctx, TurnGuard};
pub use inbound::Inbound;
use prompt::prompt_session_and_text;
pub use prompt::prompt_text;
use state::{Pending, Reply, Role, Running, Seen, SeenLog, SessionId, State, id_key};

/// How the agent process was started, as the transcript and the state report show it.
#[derive(Debug, Clone, Default)]
pub struct ProcessInfo {
    /// The command line, program first.
    pub argv: Vec<String>,
    /// The working directory.
    pub cwd: String,
    /// The environment.
    pub env: Vec<(String, String)>,
    /// The process id.
    pub pid: u32,
}

/// Why and with which code the agent ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exit {
    /// The exit code.
    pub code: i32,
    /// Why.
    pub reason: String,
}

/// The version field of a line written with (`true`) or without `"jsonrpc"`.
fn version_field(jsonrpc: bool) -> VersionField {
    if jsonrpc {
        VersionField::Required
    } else {
        VersionField::Optional
    }
}

/// The intercom stream dialect's own methods, written without `"jsonrpc"`.
pub fn is_intercom_bespoke(method: &str) -> bool {
    matches!(
        method,
        "clearance/request"
            | "clearance/response"
            | "status/update"
            | "prompt/forward"
            | "prompt/response"
            | "prompt/send"
            | "heartbeat"
            | "session/interrupt"
            | "nudge"
    )
}

/// The running agent.
pub struct Agent {
    /// What it runs with.
    pub config: Config,
    /// How it was started.
    pub process: ProcessInfo,
    /// The names templates read (kiro agent and model, `INTERCOM_SESSION_ID`), shared by every
    /// sequence.
    pub names: Arc<AgentNames>,
    /// The transcript.
    pub transcript: Transcript,
    /// Gates released by the control channel.
    pub gates: Gates,
    /// The control socket path, if any.
    pub control_path: Option<String>,
    out: tokio::sync::Mutex<Output>,
    fragments_under_way: Arc<AtomicBool>,
    reader_flushes: Arc<AtomicBool>,
    flush_wanted: Arc<Notify>,
    err: tokio::sync::Mutex<ErrorOutput>,
    state: Mutex<State>,
    seen: Notify,
    /// Whether a control channel can ask for the agent's state or wait on what it saw.
    controlled: bool,
    exit: watch::Sender<Option<Exit>>,
    stdin_closed: watch::Sender<bool>,
    close_stdin: watch::Sender<bool>,
    tasks: Mutex<Vec<AbortHandle>>,
    line_buffer: Mutex<Vec<u8>>,
}

/// What a line of a prompt turn is: a response is written twice under `duplicate_responses`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum LineKind {
    Notification,
    Response,
}

impl std::fmt::Debug for Agent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Agent")
            .field("personality", &self.config.personality)
            .finish_non_exhaustive()
    }
}

impl Agent {
    /// A new agent writing to the given outputs; `controlled` when a control channel can run
    /// steps in it.
    pub fn new(
        config: Config,
        process: ProcessInfo,
        transcript: Transcript,
        out: Output,
        err: ErrorOutput,
        control_path: Option<String>,
        controlled: bool,
    ) -> Arc<Self> {
        let identity = process
            .env
            .iter()
            .find(|(name, _)| name == "INTERCOM_SESSION_ID")
            .map(|(_, value)| value.clone());
        let names = Arc::new(AgentNames {
            agent: config.kiro.agent.clone(),
            model: config.kiro.model.clone(),
            identity,
        });
        // Only a `wait_for` step searches the inbound log: one in the script, or one a control
        // channel runs.
        let keep_seen_log = controlled || config.script.waits_for_messages();
        Arc::new(Self {
            config,
            process,
            names,
            transcript,
            gates: Gates::default(),
            control_path,
            fragments_under_way: out.fragments_under_way(),
            reader_flushes: out.reader_flushes(),
            flush_wanted: out.flush_wanted(),
            out: tokio::sync::Mutex::new(out),
            err: tokio::sync::Mutex::new(err),
            state: Mutex::new(State {
                seen: SeenLog::new(keep_seen_log),
                ..State::default()
            }),
            seen: Notify::new(),
            controlled,
            exit: watch::channel(None).0,
            stdin_closed: watch::channel(false).0,
            close_stdin: watch::channel(false).0,
            tasks: Mutex::new(Vec::new()),
            line_buffer: Mutex::new(Vec::new()),
        })
    }

    /// The state, locked. Never hold the guard across an await.
    pub fn state(&self) -> MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Spawns a task that ends with the agent.
    pub fn spawn<F>(self: &Arc<Self>, future: F) -> AbortHandle
    where
        F: Future<Output = ()> + Send + 'static,
    {
        let handle = tokio::spawn(future).abort_handle();
        let mut tasks = self
            .tasks
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        tasks.retain(|task| !task.is_finished());
        tasks.push(handle.clone());
        handle
    }

    /// Stops every task the agent spawned.
    pub fn abort_tasks(&self) {
        let tasks = std::mem::take(
            &mut *self
                .tasks
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        );
        for task in tasks {
            task.abort();
        }
    }

    /// Asks the agent to exit; the first request wins.
    pub fn request_exit(&self, code: i32, reason: &str) {
        self.exit.send_if_modified(|current| {
            if current.is_some() {
                return false;
            }
            *current = Some(Exit {
                code,
                reason: reason.to_owned(),
            });
            true
        });
    }

    /// Waits until an exit was requested.
    pub async fn exit_requested(&self) -> Exit {
        let mut receiver = self.exit.subscribe();
        match receiver.wait_for(Option::is_some).await {
            Ok(exit) => exit.clone().unwrap_or_else(|| Exit {
                code: 0,
                reason: "exit".to_owned(),
            }),
            Err(_) => Exit {
                code: 0,
                reason: "exit".to_owned(),
            },
        }
    }

    /// Asks the stdin reader to close stdin (the process keeps running).
    pub fn request_close_stdin(&self) {
        self.close_stdin.send_replace(true);
    }

    /// Waits until closing stdin was asked for.
    pub async fn close_stdin_requested(&self) {
        let mut receiver = self.close_stdin.subscribe();
        let _ = receiver.wait_for(|asked| *asked).await;
    }

    /// Records that stdin reached its end.
    pub fn mark_stdin_closed(&self) {
        self.stdin_closed.send_replace(true);
    }

    /// Waits until stdin reached its end.
    pub async fn stdin_closed(&self) {
        let mut receiver = self.stdin_closed.subscribe();
        let _ = receiver.wait_for(|closed| *closed).await;
    }

    /// Whether stdout is still open.
    pub async fn stdout_open(&self) -> bool {
        self.out.lock().await.is_open()
    }

    /// Lines written so far.
    pub async fn lines_out(&self) -> u64 {
        self.out.lock().await.lines()
    }

    // ---- writing -------------------------------------------------------------------------

    fn plan(&self, step: Option<&FragmentPlan>) -> FragmentPlan {
        match step {
            Some(plan) if plan.fragments.is_some() => plan.clone(),
            _ => match self.config.faults.fragment_lines {
                Some(count) => FragmentPlan {
                    fragments: Some(Fragments::Count(count)),
                    delay: self.config.faults.fragment_delay,
                    gate: None,
                },
                None => FragmentPlan::default(),
            },
        }
    }

    /// Writes bytes to stdout, with the global delay and the given (or global) fragments.
    pub async fn write_bytes(
        &self,
        bytes: &[u8],
        newline: bool,
        plan: Option<&FragmentPlan>,
    ) -> Written {
        if let Some(delay) = self.config.faults.delay {
            // Boxed: every line's write holds this future, which only the fault needs.
            Box::pin(tokio::time::sleep(delay)).await;
        }
        let plan = self.plan(plan);
        let mut out = self.stdout().await;
        out.write(bytes, newline, &plan, &self.gates, &self.transcript)
            .await
    }

    /// Stdout, once no other writer holds it: taken at once when free (the usual case, which
    /// costs a tenth of queueing for it), else in turn.
    async fn stdout(&self) -> tokio::sync::MutexGuard<'_, Output> {
        match self.out.try_lock() {
            Ok(out) => out,
            Err(_) => self.out.lock().await,
        }
    }

    /// Writes one message as a line; a response is written twice under `duplicate_responses`.
    pub async fn write_message(
        &self,
        message: &Message,
        jsonrpc: bool,
        plan: Option<&FragmentPlan>,
    ) -> Written {
        let mut line = Vec::with_capacity(256);
        if let Err(error) = encode_into(message, version_field(jsonrpc), &mut line) {
            self.transcript
                .note(&format!("cannot encode a message: {error}"));
            return Written::Failed;
        }
        if matches!(message, Message::Response(_)) {
            self.write_response(&line, plan).await
        } else {
            self.write_bytes(&line, true, plan).await
        }
    }

    /// Writes an encoded response: twice under the `duplicate_responses` fault.
    async fn write_response(&self, line: &[u8], plan: Option<&FragmentPlan>) -> Written {
        let times = if self.config.faults.duplicate_responses {
            2
        } else {
            1
        };
        let mut written = Written::Ok;
        for _ in 0..times {
            written = self.write_bytes(line, true, plan).await;
        }
        written
    }

    /// Writes stderr bytes.
    pub async fn write_stderr(&self, bytes: &[u8]) {
        // Stdout lines queued before this go out first, so the two streams keep their order.
        self.flush_output().await;
        self.err.lock().await.write(bytes, &self.transcript).await;
    }

    /// Writes a diagnostic line to stderr.
    pub async fn log(&self, text: &str) {
        self.write_stderr(format!("ski-mock-agent: {text}\n").as_bytes())
            .await;
    }

    /// Starts the task that writes queued stdout lines whenever a task that queued them waits.
    pub async fn start_flusher(self: &Arc<Self>) {
        let wanted = Arc::clone(&self.flush_wanted);
        let agent = Arc::downgrade(self);
        self.spawn(async move {
            loop {
                wanted.notified().await;
                let Some(agent) = agent.upgrade() else { return };
                agent.stdout().await.flush_queued(&agent.transcript).await;
            }
        });
    }

    /// Writes every queued stdout line now, and waits for a flush another task has begun (the
    /// flusher's write to a file or a terminal goes through tokio's blocking pool, so it holds
    /// stdout until that thread is done). A line being written in fragments is not waited for:
    /// it holds stdout between fragments (it may wait on a gate the caller is about to release)
    /// and wrote everything queued before its first fragment, so nothing queued is ahead of it.
    pub async fn flush_output(&self) {
        let mut out = match self.out.try_lock() {
            Ok(out) => out,
            Err(_) if self.fragments_under_way.load(Ordering::Acquire) => {
                return;
            }
            Err(_) => self.out.lock().await,
        };
        out.flush_queued(&self.transcript).await;
    }

    /// Closes stdout and keeps running.
    pub async fn close_stdout(&self) {
        self.out.lock().await.close(&self.transcript).await;
    }

    /// Whether a message with this method is written with `"jsonrpc"` by default.
    pub fn jsonrpc_for(&self, method: Option<&str>, trigger: Option<&Inbound>) -> bool {
        if self.config.personality != Personality::Intercom {
            return true;
        }
        match method {
            Some(method) => !is_intercom_bespoke(method),
            None => trigger.is_none_or(|t| t.jsonrpc),
        }
    }

    /// Answers a request.
    pub async fn respond(
        &self,
        trigger: &Inbound,
        result: Result<Value, RpcError>,
        plan: Option<&FragmentPlan>,
    ) -> Written {
        let Some(id) = self.answerable(trigger).cloned() else {
            return Written::Ok;
        };
        let jsonrpc = self.jsonrpc_for(None, Some(trigger));
        let message = Message::Response(Response { id, result });
        self.write_message(&message, jsonrpc, plan).await
    }

    /// Sends a notification.
    pub async fn notify(&self, method: &str, params: Option<Value>) -> Written {
        let jsonrpc = self.jsonrpc_for(Some(method), None);
        self.write_message(&Message::notification(method, params), jsonrpc, None)
            .await
    }

    /// Sends a `session/update`.
    pub async fn update(&self, session: &str, update: Value) -> Written {
        let Some(update) = self.in_protocol(session, update).await else {
            return Written::Ok;
        };
        self.record_agent_text(session, &update);
        self.notify(
            "session/update",
            Some(json!({"sessionId": session, "update": update})),
        )
        .await
    }

    /// An update in the form of the protocol `initialize` settled on: as given in v1, in v2's
    /// form in v2 ([`v2_form`](crate::agent::personality::v2::v2_form)); `None` (noted and
    /// logged) for one v2 has no place for.
    pub async fn in_protocol(&self, session: &str, update: Value) -> Option<Value> {
        if !self.state().v2 {
            return Some(update);
        }
        match crate::agent::personality::v2::v2_form(self, session, update) {
            Ok(update) => Some(update),
            Err(why) => {
                self.transcript.note(&format!("ACP v2: {why}"));
                self.log(&format!("ACP v2: {why}")).await;
                None
            }
        }
    }

    /// Sends the `session/update` of an `agent_message_chunk` with `text`, the update every
    /// turn streams: the same line as [`Agent::update`] with its value form, written straight
    /// from borrowed text.
    pub async fn message_chunk(&self, session: &str, text: &Arc<str>) -> Written {
        if self.state().v2 {
            // v2's chunk carries the turn's message id: the general path adds it.
            return self
                .update(
                    session,
                    json!({"sessionUpdate": "agent_message_chunk",
                           "content": {"type": "text", "text": &**text}}),
                )
                .await;
        }
        self.record_history(session, Arc::clone(text));
        let jsonrpc = self.jsonrpc_for(Some("session/update"), None);
        self.write_turn_line(LineKind::Notification, |line| {
            turn_lines::message_chunk(session, text, jsonrpc, line)
        })
        .await
    }

    /// Writes a line of a prompt turn that `encode` appends to a buffer, the one kept between
    /// turns when no other turn holds it (so the lines of a turn allocate nothing).
    async fn write_turn_line(
        &self,
        kind: LineKind,
        encode: impl FnOnce(&mut Vec<u8>) -> serde_json::Result<()>,
    ) -> Written {
        let mut line = std::mem::take(&mut *self.line_buffer());
        line.clear();
        let written = match encode(&mut line) {
            Err(error) => {
                self.transcript
                    .note(&format!("cannot encode a message: {error}"));
                Written::Failed
            }
            Ok(()) if kind == LineKind::Response => self.write_response(&line, None).await,
            Ok(()) => self.write_bytes(&line, true, None).await,
        };
        *self.line_buffer() = line;
        written
    }

    fn line_buffer(&self) -> MutexGuard<'_, Vec<u8>> {
        self.line_buffer
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The id to answer `trigger` with; a notification has none, which the transcript notes.
    fn answerable<'t>(&self, trigger: &'t Inbound) -> Option<&'t RequestId> {
        if trigger.id.is_none() {
            self.transcript.note(&format!(
                "no response: {} was a notification",
                trigger.method
            ));
        }
        trigger.id.as_ref()
    }

    /// Answers the prompt `trigger` with `stop_reason`: the line [`Agent::respond`] would
    /// write for `{"stopReason": stop_reason}`.
    pub async fn respond_prompt_result(&self, trigger: &Inbound, stop_reason: &str) -> Written {
        let Some(id) = self.answerable(trigger) else {
            return Written::Ok;
        };
        let jsonrpc = self.jsonrpc_for(None, Some(trigger));
        self.write_turn_line(LineKind::Response, |line| {
            turn_lines::prompt_result(id, stop_reason, jsonrpc, line)
        })
        .await
    }

    /// Keeps agent text of an update in the session's history, for `session/load`.
    pub fn record_agent_text(&self, session: &str, update: &Value) {
        if update.get("sessionUpdate").and_then(Value::as_str) == Some("agent_message_chunk")
            && let Some(text) = update
                .get("content")
                .and_then(|content| content.get("text"))
                .and_then(Value::as_str)
        {
            self.record_history(session, text.into());
        }
    }

    fn record_history(&self, session: &str, text: Arc<str>) {
        if let Some(entry) = self.state().session(session) {
            if self.config.kiro.sessions_on_disk {
                crate::agent::personality::kiro_sessions::append(session, "agent", &text);
            }
            entry.history.push((Role::Agent, text));
        }
    }

    /// The next id for a request of the agent's own.
    pub fn next_request_id(&self) -> RequestId {
        let mut state = self.state();
        let n = state.next_request;
        state.next_request += 1;
        match self.config.agent.request_ids {
            IdStyle::Number => RequestId::Number(n as i64),
            IdStyle::Uuid => RequestId::String(uuid::Uuid::new_v4().to_string()),
            IdStyle::String => RequestId::String(format!("s2c-{n}")),
        }
    }

    /// Registers a wait for the reply to `id`.
    pub fn expect_reply(
        &self,
        id: &RequestId,
        reply_method: Option<String>,
    ) -> oneshot::Receiver<Reply> {
        let (sender, receiver) = oneshot::channel();
        self.state().pending.insert(
            id_key(id),
            Pending {
                reply: sender,
                reply_method,
            },
        );
        receiver
    }

    /// Sends a request of the agent's own and, if `wait`, waits for the reply up to
    /// `timeout`. `None` when not waiting, or on time-out. `jsonrpc` overrides whether the
    /// message carries `"jsonrpc"`.
    #[allow(clippy::too_many_arguments)]
    pub async fn request(
        &self,
        method: &str,
        params: Option<Value>,
        id: Option<RequestId>,
        reply_method: Option<String>,
        wait: Option<Duration>,
        plan: Option<&FragmentPlan>,
        jsonrpc: Option<bool>,
    ) -> Option<Reply> {
        let id = id.unwrap_or_else(|| self.next_request_id());
        let reply_method = reply_method.or_else(|| match method {
            "clearance/request" => Some("clearance/response".to_owned()),
            "prompt/forward" => Some("prompt/response".to_owned()),
            _ => None,
        });
        // Registered even when not waiting, so that the reply is taken quietly when it comes.
        let receiver = self.expect_reply(&id, reply_method);
        let jsonrpc = jsonrpc.unwrap_or_else(|| self.jsonrpc_for(Some(method), None));
        let message = Message::request(id.clone(), method, params);
        self.write_message(&message, jsonrpc, plan).await;
        let timeout = wait?;
        match tokio::time::timeout(timeout, receiver).await {
            Ok(Ok(reply)) => Some(reply),
            _ => {
                self.state().pending.remove(&id_key(&id));
                self.transcript.note(&format!(
                    "no reply to {method} (id {id}) within {} ms",
                    timeout.as_millis()
                ));
                None
            }
        }
    }

    // ---- reading -------------------------------------------------------------------------

    /// Waits for an inbound message with `method` (and `id`) at or after `*cursor`; moves the
    /// cursor past it and returns it.
    pub async fn wait_for(&self, method: &str, id: Option<&RequestId>, cursor: &mut usize) -> Seen {
        loop {
            let notified = self.seen.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            {
                let state = self.state();
                if let Some((position, seen)) = state.seen.find_from(*cursor, |seen| {
                    seen.method == method && id.is_none_or(|id| seen.id.as_ref() == Some(id))
                }) {
                    *cursor = position + 1;
                    return Arc::clone(seen);
                }
                *cursor = state.seen.len();
            }
            notified.await;
        }
    }

    /// Waits until `count` messages with `method` arrived; returns how many did.
    pub async fn wait_count(&self, method: &str, count: u64) -> u64 {
        loop {
            let notified = self.seen.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let seen = self.state().method_counts.get(method).copied().unwrap_or(0);
            if seen >= count {
                return seen;
            }
            notified.await;
        }
    }

    /// Answers an input line longer than the limit as ski's reference does: -32600 with a null
    /// id (the intercom personality, which speaks no JSON-RPC errors, only logs it).
    pub async fn oversize_input(&self, length: u64, limit: usize) {
        self.transcript.note(&format!(
            "input line of {length} bytes dropped (limit {limit})"
        ));
        let what = format!("message of {length} bytes exceeds the limit of {limit} bytes");
        if self.config.personality == Personality::Intercom {
            self.log(&format!("skipping an oversize line: {what}"))
                .await;
            return;
        }
        let response = Response::error(RequestId::Null, RpcError::invalid_request(what));
        self.write_message(&Message::Response(response), true, None)
            .await;
    }

    async fn on_response(&self, response: Response) {
        let pending = self.state().pending.remove(&id_key(&response.id));
        match pending {
            Some(pending) => {
                let result = response
                    .result
                    .map_err(|error| serde_json::to_value(error).unwrap_or(Value::Null));
                let _ = pending.reply.send(Reply { result });
            }
            None => {
                self.log(&format!(
                    "got a response to unknown request id {}",
                    response.id
                ))
                .await;
            }
        }
    }

    fn track_running(&self, id: Option<&RequestId>, task: AbortHandle) {
        if let Some(id) = id
            && !task.is_finished()
        {
            self.state().running.insert(id_key(id), Running { task });
        }
    }

    fn finish_running(&self, trigger: Option<&Inbound>) {
        if let Some(id) = trigger.and_then(|t| t.id.as_ref()) {
            let mut state = self.state();
            if !state.running.is_empty() {
                state.running.remove(&id_key(id));
            }
        }
    }

    fn rule_matches(&self, inbound: &Inbound) -> bool {
        let mut ctx = Ctx::detached(Vars::default(), None, 0);
        self.matching_rule(inbound, &mut ctx).is_some()
    }

    /// The index of the first rule that fires for `inbound` (and whether it is `once`); prompt
    /// captures go into the context.
    fn matching_rule(&self, inbound: &Inbound, ctx: &mut Ctx) -> Option<(usize, bool)> {
        let rules = &self.config.script.rules;
        if rules.is_empty() {
            return None;
        }
        let state = self.state();
        // The prompt's text only if a prompt rule asks for it.
        let mut text: Option<Option<String>> = None;
        for (index, rule) in rules.iter().enumerate() {
            if rule.once && state.fired.contains(&index) {
                continue;
            }
            match &rule.trigger {
                Trigger::Method(method) if *method == inbound.method => {
                    return Some((index, rule.once));
                }
                Trigger::Prompt { matcher, glob } => {
                    let Some(text) = text.get_or_insert_with(|| prompt_text(inbound)) else {
                        continue;
                    };
                    let subject = if *glob { text.trim() } else { text.as_str() };
                    if let Some(captures) = matcher.captures(subject) {
                        ctx.vars.captures = captures;
                        return Some((index, rule.once));
                    }
                }
                _ => {}
            }
        }
        None
    }

    /// The context a sequence for `inbound` runs in: variables, the session (a `session/new`
    /// reserves and registers the new one), and the turn of a prompt.
    fn context_for(self: &Arc<Self>, inbound: &Arc<Inbound>) -> Ctx {
        let mut vars = Vars {
            trigger: Some(Arc::clone(inbound)),
            names: Some(Arc::clone(&self.names)),
            ..Vars::default()
        };
        let mut state = self.state();
        let mut turn = None;
        let mut cancel = None;
        let session = match inbound.method.as_str() {
            "session/new" => {
                state.next_session += 1;
                let id = match &self.config.agent.session_ids {
                    super::config::SessionIds::Uuid => uuid::Uuid::new_v4().to_string(),
                    super::config::SessionIds::Prefix(prefix) => {
                        format!("{prefix}{}", state.next_session)
                    }
                };
                let cwd = inbound.param_str("cwd").map(str::to_owned);
                let mode = if self.config.personality == Personality::Kiro {
                    self.config.kiro.agent.clone()
                } else {
                    "default".to_owned()
                };
                let shared = SessionId::from(id.as_str());
                state.sessions.push(state::Session::new(id, cwd, &mode));
                state.last_session = Some(Arc::clone(&shared));
                Some(shared)
            }
            "session/prompt" | "prompt/send" => {
                state.prompts += 1;
                vars.turn = state.prompts;
                let (named, text) = prompt_session_and_text(inbound);
                vars.prompt = Some(Arc::clone(&text));
                let id = named.or_else(|| state.last_session.clone());
                if let Some(id) = &id {
                    if let Some(session) = state.session(id) {
                        vars.previous_prompt = session
                            .history
                            .iter()
                            .rev()
                            .find(|(role, _)| *role == Role::User)
                            .map(|(_, text)| Arc::clone(text));
                        vars.first_prompt = session
                            .history
                            .iter()
                            .find(|(role, _)| *role == Role::User)
                            .map(|(_, text)| Arc::clone(text));
                        if self.config.kiro.sessions_on_disk {
                            crate::agent::personality::kiro_sessions::append(id, "user", &text);
                        }
                        session.history.push((Role::User, text));
                        cancel = Some(session.cancel.subscribe());
                        turn = Some(TurnGuard::new(session));
                    }
                    state.last_session = Some(Arc::clone(id));
                }
                id
            }
            _ => inbound
                .param_str("sessionId")
                .map(SessionId::from)
                .or_else(|| state.last_session.clone()),
        };
        vars.turn = state.prompts;
        vars.session = session.clone();
        let cursor = state.seen.len();
        drop(state);
        let mut ctx = Ctx::detached(vars, session, cursor);
        ctx.trigger = Some(Arc::clone(inbound));
        ctx.cancel = cancel;
        ctx.turn = turn;
        ctx
    }

    /// `session/cancel` and `$/cancel_request`.
    async fn cancel(&self, inbound: &Inbound) {
        if self.config.faults.ignore_cancel {
            self.transcript
                .note(&format!("fault: ignoring {}", inbound.method));
            return;
        }
        if inbound.method == "session/cancel" {
            let Some(id) = inbound.param_str("sessionId") else {
                return;
            };
            let mut state = self.state();
            if let Some(session) = state.session(id) {
                if session.running_prompts() == 0 {
                    session.pending_cancel = true;
                }
                session.cancel.send_modify(|generation| *generation += 1);
            }
            return;
        }
        // `$/cancel_request {requestId}`: stop working on it and answer -32800.
        let Some(raw) = inbound.param("requestId") else {
            return;
        };
        let Ok(id) = serde_json::from_value::<RequestId>(raw.clone()) else {
            return;
        };
        let running = self.state().running.remove(&id_key(&id));
        if let Some(running) = running {
            running.task.abort();
            let trigger = Inbound {
                method: "$/cancel_request".to_owned(),
                id: Some(id),
                params: None,
                jsonrpc: true,
            };
            self.respond(
                &trigger,
                Err(RpcError::from_code(ErrorCode::REQUEST_CANCELLED)),
                None,
            )
            .await;
        }
    }

    /// A context with no trigger: the last session, the current counters.
    pub fn detached_context(&self) -> Ctx {
        let state = self.state();
        let vars = Vars {
            session: state.last_session.clone(),
            turn: state.prompts,
            names: Some(Arc::clone(&self.names)),
            ..Vars::default()
        };
        Ctx::detached(vars, state.last_session.clone(), state.seen.len())
    }

    /// The state report of the control channel.
    pub async fn report(&self) -> Value {
        let stdout_open = self.stdout_open().await;
        let lines_out = self.lines_out().await;
        let state = self.state();
        let sessions: Vec<Value> = state
            .sessions
            .iter()
            .map(|s| {
                json!({
                    "sessionId": s.id,
                    "cwd": s.cwd,
                    "mode": s.mode,
                    "model": s.model,
                    "activePrompts": s.running_prompts(),
                    "cancelled": *s.cancel.borrow(),
                    "closed": s.closed,
                    "terminated": s.terminated,
                    "messages": s.history.len(),
                })
            })
            .collect();
        let pending: Vec<String> = state.pending.keys().cloned().collect();
        json!({
            "pid": self.process.pid,
            "identity": {"INTERCOM_SESSION_ID": self.names.identity},
            "personality": self.config.personality.name(),
            "script": if self.config.script.origin.is_empty() { Value::Null } else { json!(self.config.script.origin) },
            "argv": self.process.argv,
            "cwd": self.process.cwd,
            "control": self.control_path,
            "transcript": self.transcript.path().map(|p| p.display().to_string()),
            "uptimeSeconds": self.transcript.elapsed(),
            "initialized": state.initialized,
            "authenticated": state.authenticated,
            "sessions": sessions,
            "prompts": state.prompts,
            "linesIn": state.lines_in,
            "linesOut": lines_out,
            "stdoutOpen": stdout_open,
            "stdinOpen": !*self.stdin_closed.borrow(),
            "methods": state.method_counts,
            "pendingRequests": pending,
            "lastMethod": state.seen.last().map(|s| s.method.clone()),
            "replay": self.config.script.recording.as_ref().map(|_| state.replay.report()),
            "kiro": {
                "agent": self.config.kiro.agent,
                "model": self.config.kiro.model,
                "trustAllTools": self.config.kiro.trust_all_tools,
                "trustTools": self.config.kiro.trust_tools,
                "agentEngine": self.config.kiro.engine,
            },
        })
    }
}
