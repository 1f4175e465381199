//! One spawned agent session from start to end: the process, its stream (a reader task, a
//! writer task, one loop that handles every line in order), the startup timeout, the stall
//! detector, the offline queue, stop and restart, and how the end is reported.

use std::collections::HashMap;
use std::process::ExitStatus;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;
use tokio::process::{ChildStdin, ChildStdout};
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

use super::lane::Lane;
use super::spawn;
use super::stall::{Recovery, StallAction, StallDetector};
use super::warnings::WarningLimiter;
use super::wire::{self, Inbound, LineError, PermissionOption, out};
use crate::intercom::blocks;
use crate::intercom::config::Dialect;
use crate::intercom::driver::{DriverError, SessionStart};
use crate::intercom::hub::Hub;
use crate::intercom::store::{NewApproval, StoreError};
use crate::intercom::vocab::{Connectivity, RiskLevel, SessionStatus};
use crate::jsonrpc::{FrameError, LineReader};
use crate::transport::child::{self, Child};
use crate::transport::{LoggedRead, LoggedWrite};

/// How long a write waits for the agent to take the line.
const WRITE_TIMEOUT: Duration = Duration::from_secs(10);
/// Lines read ahead of the handling loop (the agent blocks beyond that: back-pressure).
const READ_AHEAD: usize = 256;
/// Lines waiting to be written to the agent.
const WRITE_QUEUE: usize = 256;
/// The longest agent text kept for one turn's reply (Slack's message limit is near it).
const MAX_TURN_TEXT: usize = 38_000;

/// How often a busy agent's activity is written to its session row.
const TOUCH_EVERY: Duration = Duration::from_millis(500);

/// The write failure the matrix names.
pub const STREAM_CLOSED: &str = "write failed: stream closed";

/// A request of the agent that waits for the operator.
#[derive(Debug, Clone)]
pub enum Pending {
    /// `clearance/request`, or a `session/request_permission` with its options.
    Clearance {
        raw_id: Value,
        options: Option<Vec<PermissionOption>>,
    },
    /// `prompt/forward`.
    Prompt { raw_id: Value },
}

/// What the driver asks of the session's loop.
pub enum Control {
    /// Interrupt, grace, kill the group; answer once the process is gone.
    Stop(oneshot::Sender<()>),
    /// Kill and start a new process with the original prompt; answer once it runs.
    Restart(oneshot::Sender<()>),
    /// The operator answered a pending request.
    Answered,
    /// A write found the agent's stdin closed.
    StreamClosed,
    /// Steering was queued (ACP): send it now unless a turn runs.
    Deliver,
}

struct WriteJob {
    line: String,
    done: Option<oneshot::Sender<Result<(), String>>>,
}

/// The driver's handle on a live agent session.
pub struct Link {
    pub session_id: String,
    pub dialect: Dialect,
    writer: Mutex<Option<mpsc::Sender<WriteJob>>>,
    pending: Mutex<HashMap<String, Pending>>,
    control: mpsc::UnboundedSender<Control>,
    offline: AtomicBool,
    turn_active: AtomicBool,
    agent_session: Mutex<Option<String>>,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Link {
    /// A link and the receiver of its controls.
    pub fn new(
        session_id: String,
        dialect: Dialect,
    ) -> (Arc<Link>, mpsc::UnboundedReceiver<Control>) {
        let (control, receiver) = mpsc::unbounded_channel();
        let link = Arc::new(Link {
            session_id,
            dialect,
            writer: Mutex::new(None),
            pending: Mutex::new(HashMap::new()),
            control,
            offline: AtomicBool::new(false),
            turn_active: AtomicBool::new(false),
            agent_session: Mutex::new(None),
        });
        (link, receiver)
    }

    /// Sends a control to the loop; false when the loop is gone.
    pub fn send(&self, control: Control) -> bool {
        self.control.send(control).is_ok()
    }

    /// Whether the agent is offline (stalled past its nudges).
    pub fn is_offline(&self) -> bool {
        self.offline.load(Ordering::SeqCst)
    }

    /// Whether an ACP prompt turn is running.
    pub fn turn_active(&self) -> bool {
        self.turn_active.load(Ordering::SeqCst)
    }

    /// Removes a pending request.
    pub fn take_pending(&self, request_id: &str) -> Option<Pending> {
        lock(&self.pending).remove(request_id)
    }

    /// The agent's ACP session id, once `session/new` answered.
    pub fn agent_session(&self) -> Option<String> {
        lock(&self.agent_session).clone()
    }

    /// Writes one line and waits until the agent's stdin took it.
    pub async fn write(&self, line: String) -> Result<(), DriverError> {
        let writer = lock(&self.writer).clone();
        let Some(writer) = writer else {
            return Err(DriverError::Acp(STREAM_CLOSED.into()));
        };
        let (done, answer) = oneshot::channel();
        writer
            .try_send(WriteJob {
                line,
                done: Some(done),
            })
            .map_err(|error| match error {
                mpsc::error::TrySendError::Full(_) => {
                    DriverError::Acp("write failed: the agent does not read its stdin".into())
                }
                mpsc::error::TrySendError::Closed(_) => DriverError::Acp(STREAM_CLOSED.into()),
            })?;
        match tokio::time::timeout(WRITE_TIMEOUT, answer).await {
            Ok(Ok(Ok(()))) => Ok(()),
            Ok(Ok(Err(error))) => Err(DriverError::Acp(error)),
            Ok(Err(_)) => Err(DriverError::Acp(STREAM_CLOSED.into())),
            Err(_) => Err(DriverError::Acp(
                "write failed: the agent does not read its stdin".into(),
            )),
        }
    }

    /// Queues one line without waiting (the loop's own writes).
    fn write_nowait(&self, line: String) {
        let writer = lock(&self.writer).clone();
        let Some(writer) = writer else {
            return;
        };
        if let Err(error) = writer.try_send(WriteJob { line, done: None }) {
            tracing::error!(session_id = %self.session_id, %error, "cannot queue a line for the agent");
        }
    }

    /// The prompt line of this dialect (steering, the first prompt, a nudge in ACP).
    fn prompt_line(&self, text: &str, request_id: &str) -> String {
        match self.dialect {
            Dialect::Intercom => out::prompt_send(text),
            Dialect::Acp => out::request(
                request_id,
                "session/prompt",
                json!({
                    "sessionId": self.agent_session().unwrap_or_default(),
                    "prompt": out::prompt_blocks(text),
                }),
            ),
        }
    }
}

/// What one process run ended with.
enum End {
    /// The session is over: status, reason.
    Finished(SessionStatus, String),
    /// Stopped on request; the caller answers once cleaned up.
    Stopped(oneshot::Sender<()>),
    /// Start another process.
    Restart(oneshot::Sender<()>),
}

/// Live agents by session id.
pub type Registry = Mutex<HashMap<String, Arc<Link>>>;

/// Runs a session's agent until the session ends; removes its link from `registry` at the end.
pub async fn run(
    hub: Arc<Hub>,
    registry: Arc<Registry>,
    link: Arc<Link>,
    start: SessionStart,
    mut control: mpsc::UnboundedReceiver<Control>,
) {
    let id = start.session_id.clone();
    let lane = Lane::start(hub.clone(), id.clone());
    let mut restarted: Option<oneshot::Sender<()>> = None;
    let mut restarts = 0u32;
    let end = loop {
        let is_restart = restarted.is_some();
        let run = Run::spawn(&hub, &link, &lane, &start, is_restart).await;
        if let Some(done) = restarted.take() {
            let _ = done.send(());
        }
        let mut run = match run {
            Ok(run) => run,
            Err(reason) => break End::Finished(SessionStatus::Interrupted, reason),
        };
        let end = run.serve(&mut control).await;
        run.report_suppressed();
        match end {
            End::Restart(done) => {
                restarts += 1;
                tracing::info!(session_id = %id, restarts, "restarting the agent");
                restarted = Some(done);
            }
            other => break other,
        }
    };
    lock(&registry).remove(&id);
    let _ = hub.store.set_agent_pid(&id, None, false);
    lane.drain().await;
    match end {
        End::Finished(status, reason) => {
            let _ = hub.store.set_end_reason(&id, &reason);
            hub.end_session(&id, status, &reason).await;
        }
        End::Stopped(done) | End::Restart(done) => {
            let _ = done.send(());
        }
    }
}

enum ReadEvent {
    Line(Vec<u8>),
    Oversize { length: u64, limit: usize },
    Failed(String),
}

async fn read_loop(stdout: LoggedRead<ChildStdout>, limit: usize, lines: mpsc::Sender<ReadEvent>) {
    let mut reader = LineReader::with_max_line_bytes(stdout, limit);
    loop {
        let event = match reader.next_line().await {
            Some(Ok(line)) => ReadEvent::Line(line.to_vec()),
            Some(Err(FrameError::Oversize { length, limit })) => {
                ReadEvent::Oversize { length, limit }
            }
            Some(Err(error)) => {
                let _ = lines.send(ReadEvent::Failed(error.to_string())).await;
                return;
            }
            None => return,
        };
        if lines.send(event).await.is_err() {
            return;
        }
    }
}

async fn write_loop(
    mut stdin: LoggedWrite<ChildStdin>,
    mut jobs: mpsc::Receiver<WriteJob>,
    control: mpsc::UnboundedSender<Control>,
) {
    while let Some(job) = jobs.recv().await {
        let written = async {
            stdin.write_all(job.line.as_bytes()).await?;
            stdin.flush().await
        }
        .await;
        match written {
            Ok(()) => {
                if let Some(done) = job.done {
                    let _ = done.send(Ok(()));
                }
            }
            Err(error) => {
                tracing::warn!(%error, "the agent's stdin is closed");
                if let Some(done) = job.done {
                    let _ = done.send(Err(STREAM_CLOSED.into()));
                }
                jobs.close();
                while let Some(job) = jobs.recv().await {
                    if let Some(done) = job.done {
                        let _ = done.send(Err(STREAM_CLOSED.into()));
                    }
                }
                let _ = control.send(Control::StreamClosed);
                return;
            }
        }
    }
}

async fn next_stderr(child: &mut Option<Child>) -> Option<String> {
    match child {
        Some(child) => child.next_stderr_line().await,
        None => None,
    }
}

/// What an ACP request of the server was for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Purpose {
    Initialize,
    NewSession,
    Prompt,
}

/// One process of a session.
struct Run<'a> {
    hub: &'a Arc<Hub>,
    link: &'a Arc<Link>,
    lane: &'a Lane,
    start: &'a SessionStart,
    /// `None` once the group was ended.
    child: Option<Child>,
    lines: mpsc::Receiver<ReadEvent>,
    exited: std::pin::Pin<Box<dyn std::future::Future<Output = Option<ExitStatus>> + Send>>,
    stall: StallDetector,
    responded: bool,
    startup_deadline: Instant,
    requests: HashMap<String, Purpose>,
    next_request: u64,
    turn_text: String,
    last_touch: Option<Instant>,
    warnings: WarningLimiter,
}

fn id_text(id: &Value) -> String {
    match id {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

fn exit_reason(status: ExitStatus) -> (SessionStatus, String) {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(0), _) => (SessionStatus::Terminated, "Task completed".into()),
        (Some(code), _) => (
            SessionStatus::Interrupted,
            format!("Agent crashed (exit code: {code})"),
        ),
        (None, Some(signal)) => (
            SessionStatus::Interrupted,
            format!("Agent crashed (signal {signal})"),
        ),
        (None, None) => (SessionStatus::Interrupted, "Agent crashed".into()),
    }
}

impl<'a> Run<'a> {
    async fn spawn(
        hub: &'a Arc<Hub>,
        link: &'a Arc<Link>,
        lane: &'a Lane,
        start: &'a SessionStart,
        restarted: bool,
    ) -> Result<Run<'a>, String> {
        let config = hub.config();
        let host_cli = config.host_cli.clone().unwrap_or_default();
        let spec = spawn::agent_spec(
            &start.session_id,
            &host_cli,
            &config.host_cli_args,
            start.workspace_path.as_deref(),
        )
        .grace(config.acp.stop_grace());
        let mut child = match child::spawn(spec) {
            Ok(child) => child,
            Err(error) => {
                tracing::error!(session_id = %start.session_id, %error, "cannot spawn the agent");
                return Err(format!("Agent failed to start: {error}"));
            }
        };
        tracing::info!(session_id = %start.session_id, pid = child.pid(), restarted, "agent spawned");
        let _ = hub
            .store
            .set_agent_pid(&start.session_id, Some(child.pid()), restarted);
        let _ = hub
            .store
            .set_connectivity(&start.session_id, Connectivity::Online);
        let _ = hub.store.set_stall(&start.session_id, 0, false);
        link.offline.store(false, Ordering::SeqCst);
        link.turn_active.store(false, Ordering::SeqCst);
        lock(&link.pending).clear();
        let (stdin, stdout) = match (child.take_stdin(), child.take_stdout()) {
            (Ok(stdin), Ok(stdout)) => (stdin, stdout),
            _ => return Err("Agent failed to start: no stdio".into()),
        };
        let (line_tx, lines) = mpsc::channel(READ_AHEAD);
        tokio::spawn(read_loop(stdout, config.acp.max_line_length, line_tx));
        let (write_tx, write_rx) = mpsc::channel(WRITE_QUEUE);
        tokio::spawn(write_loop(stdin, write_rx, link.control.clone()));
        *lock(&link.writer) = Some(write_tx);
        let exited = child.exited();
        let now = Instant::now();
        let pid = child.pid();
        let mut run = Run {
            hub,
            link,
            lane,
            start,
            child: Some(child),
            lines,
            exited: Box::pin(async move { exited.await.ok() }),
            stall: StallDetector::new(
                config.stall.enabled,
                config.stall.inactivity(),
                config.stall.escalation(),
                config.stall.max_retries,
                now,
            ),
            responded: false,
            startup_deadline: now + config.acp.startup_timeout(),
            requests: HashMap::new(),
            next_request: 0,
            turn_text: String::new(),
            last_touch: None,
            warnings: WarningLimiter::default(),
        };
        if restarted {
            lane.post(
                format!("🔄 Agent restarted with the original prompt (pid {pid})"),
                None,
                None,
            );
        }
        match link.dialect {
            Dialect::Intercom => {
                link.write_nowait(out::prompt_send(&start.prompt));
                // Steering queued while the old process was offline follows the prompt.
                if restarted {
                    for (row, text) in hub
                        .store
                        .pending_steering(&start.session_id)
                        .unwrap_or_default()
                    {
                        link.write_nowait(out::prompt_send(&text));
                        let _ = hub.store.mark_steering_consumed(row);
                    }
                }
            }
            Dialect::Acp => {
                let params = json!({
                    "protocolVersion": 1,
                    "clientCapabilities": {
                        "fs": { "readTextFile": false, "writeTextFile": false },
                        "terminal": false,
                    },
                    "clientInfo": { "name": "ski-intercom", "version": env!("CARGO_PKG_VERSION") },
                });
                run.request(Purpose::Initialize, "initialize", params);
            }
        }
        Ok(run)
    }

    fn session_id(&self) -> &str {
        &self.start.session_id
    }

    fn request(&mut self, purpose: Purpose, method: &str, params: Value) -> String {
        self.next_request += 1;
        let id = format!("intercom-{method}-{}", self.next_request).replace('/', "-");
        self.requests.insert(id.clone(), purpose);
        self.link.write_nowait(out::request(&id, method, params));
        id
    }

    fn send_prompt_turn(&mut self, text: &str) {
        self.next_request += 1;
        let id = format!("intercom-prompt-{}", self.next_request);
        self.requests.insert(id.clone(), Purpose::Prompt);
        self.link.turn_active.store(true, Ordering::SeqCst);
        self.link.write_nowait(self.link.prompt_line(text, &id));
    }

    fn paused(&self) -> bool {
        !lock(&self.link.pending).is_empty()
    }

    async fn serve(&mut self, control: &mut mpsc::UnboundedReceiver<Control>) -> End {
        let mut stderr_open = true;
        let grace = self.hub.config().acp.stop_grace();
        loop {
            let stall_deadline = if self.responded {
                self.stall.deadline()
            } else {
                None
            };
            tokio::select! {
                event = self.lines.recv() => match event {
                    Some(ReadEvent::Line(line)) => {
                        if let Some(end) = self.handle_line(&line) {
                            return self.kill(end).await;
                        }
                    }
                    Some(ReadEvent::Oversize { length, limit }) => {
                        if self.warning_logged("oversize_line") {
                            tracing::error!(
                                session_id = %self.session_id(), length, limit,
                                "line exceeded max length; line skipped, the session goes on"
                            );
                        }
                    }
                    Some(ReadEvent::Failed(error)) => {
                        tracing::warn!(session_id = %self.session_id(), %error, "reading the agent failed");
                        return self.after_eof(grace).await;
                    }
                    None => return self.after_eof(grace).await,
                },
                status = &mut self.exited => {
                    return self.after_exit(status, grace).await;
                }
                line = next_stderr(&mut self.child), if stderr_open => match line {
                    Some(line) => tracing::debug!(session_id = %self.session_id(), stderr = %line, "agent stderr"),
                    None => stderr_open = false,
                },
                command = control.recv() => match command {
                    Some(Control::Answered) => {
                        let paused = self.paused();
                        self.stall.set_paused(paused, Instant::now());
                        let _ = self.hub.store.set_stall(self.session_id(), self.stall.nudges(), paused);
                    }
                    Some(Control::Deliver) => self.deliver_one_queued(),
                    Some(Control::Stop(done)) => {
                        self.interrupt(grace).await;
                        return End::Stopped(done);
                    }
                    Some(Control::Restart(done)) => {
                        self.interrupt(grace).await;
                        return End::Restart(done);
                    }
                    Some(Control::StreamClosed) => {
                        match tokio::time::timeout(grace, &mut self.exited).await {
                            Ok(status) => return self.after_exit(status, grace).await,
                            Err(_) => {
                                return self
                                    .kill(End::Finished(SessionStatus::Interrupted, STREAM_CLOSED.into()))
                                    .await;
                            }
                        }
                    }
                    None => {
                        self.interrupt(grace).await;
                        return End::Finished(SessionStatus::Interrupted, "server shut down".into());
                    }
                },
                () = tokio::time::sleep_until(self.startup_deadline), if !self.responded => {
                    tracing::warn!(session_id = %self.session_id(), "agent did not respond within startup timeout");
                    let timeout = self.hub.config().acp.startup_timeout();
                    return self
                        .kill(End::Finished(
                            SessionStatus::Terminated,
                            format!("failed: Agent did not respond within startup timeout ({} ms)", timeout.as_millis()),
                        ))
                        .await;
                }
                () = async {
                    match stall_deadline {
                        Some(deadline) => tokio::time::sleep_until(deadline).await,
                        None => std::future::pending().await,
                    }
                } => self.stall_fired(),
            }
        }
    }

    /// Whether a warning of `kind` about the agent's output is logged whole now (else it is only
    /// counted); first logs how many of its kind the interval before suppressed.
    fn warning_logged(&mut self, kind: &'static str) -> bool {
        let verdict = self.warnings.check(kind, Instant::now());
        if verdict.report_suppressed > 0 {
            let suppressed = verdict.report_suppressed;
            tracing::warn!(session_id = %self.session_id(), kind, suppressed, "suppressed {suppressed} similar warnings");
        }
        verdict.log
    }

    /// Logs the warnings counted but not reported yet, one line per kind (at the end of a run).
    fn report_suppressed(&mut self) {
        for (kind, suppressed) in self.warnings.drain() {
            tracing::warn!(session_id = %self.session_id(), kind, suppressed, "suppressed {suppressed} similar warnings");
        }
    }

    /// Handles one line; answers an end when the line ends the session.
    fn handle_line(&mut self, line: &[u8]) -> Option<End> {
        let session_id = self.session_id().to_string();
        let message = match wire::parse(line) {
            Ok(message) => message,
            Err(error @ LineError::Malformed(_)) => {
                if self.warning_logged("malformed_json") {
                    let raw = String::from_utf8_lossy(&line[..line.len().min(512)]).into_owned();
                    tracing::warn!(session_id, raw_line = %raw, error = %error, "received malformed JSON; line skipped");
                }
                return None;
            }
            Err(LineError::UnknownMethod(method)) => {
                tracing::debug!(session_id, method, "unknown method: {method}; skipped");
                return None;
            }
            Err(error @ LineError::MissingField { .. }) => {
                if self.warning_logged("missing_field") {
                    tracing::warn!(session_id, error = %error, "missing required field; message skipped");
                }
                return None;
            }
        };
        self.responded = true;
        self.activity();
        let hub = self.hub;
        match message {
            Inbound::Status { message } => self.lane.status(blocks::escape(&message).into_owned()),
            Inbound::Heartbeat { progress } => {
                if let Some(progress) = progress {
                    let _ = hub.store.set_progress(&session_id, &progress.to_string());
                }
            }
            Inbound::Clearance(request) => {
                let request_id = id_text(&request.id);
                let approval = NewApproval {
                    session_id: &session_id,
                    request_id: &request_id,
                    title: &request.title,
                    description: request.description.as_deref(),
                    diff: request.diff.as_deref().unwrap_or_default(),
                    file_path: &request.file_path,
                    risk_level: request.risk_level,
                };
                let pending = Pending::Clearance {
                    raw_id: request.id.clone(),
                    options: None,
                };
                if let Err(error) = self.ask_operator(&approval, pending) {
                    tracing::warn!(session_id, request_id, %error, "clearance request refused (an id used twice?)");
                    return None;
                }
            }
            Inbound::Permission {
                id,
                title,
                file_path,
                options,
            } => {
                let request_id = match hub.store.next_request_id(&session_id) {
                    Ok(request_id) => request_id,
                    Err(error) => {
                        tracing::error!(%error, "cannot number the permission request");
                        return None;
                    }
                };
                // A permission request carries no diff or description; it is always high risk.
                let approval = NewApproval {
                    session_id: &session_id,
                    request_id: &request_id,
                    title: &title,
                    description: None,
                    diff: "",
                    file_path: &file_path,
                    risk_level: RiskLevel::High,
                };
                let pending = Pending::Clearance {
                    raw_id: id,
                    options: Some(options),
                };
                if let Err(error) = self.ask_operator(&approval, pending) {
                    tracing::error!(%error, "cannot record the permission request");
                    return None;
                }
            }
            Inbound::PromptForward { id, text, kind } => {
                let prompt_id = id_text(&id);
                lock(&self.link.pending).insert(prompt_id.clone(), Pending::Prompt { raw_id: id });
                self.wait_for_operator();
                let (text, blocks) = blocks::prompt_message(&prompt_id, &kind, &text);
                self.lane.post(text, Some(blocks), None);
            }
            Inbound::Update { text } => {
                if let Some(text) = text
                    && self.turn_text.len() < MAX_TURN_TEXT
                {
                    self.turn_text.push_str(&text);
                }
            }
            Inbound::Response { id, outcome } => return self.response(&id, outcome),
            Inbound::UnsupportedRequest { id, method } => {
                tracing::debug!(
                    session_id,
                    method,
                    "unknown method: {method}; answered -32601"
                );
                self.link.write_nowait(out::method_not_found(&id, &method));
            }
            Inbound::Ignored { .. } => {}
        }
        None
    }

    /// The one path of an approval (a clearance request, or a permission request): records it,
    /// keeps the agent's request until the operator answers, pauses the stall detector and posts
    /// the approval message in the session's lane. Fails, with nothing else done, when the
    /// approval cannot be recorded.
    fn ask_operator(
        &mut self,
        approval: &NewApproval<'_>,
        pending: Pending,
    ) -> Result<(), StoreError> {
        self.hub.store.insert_approval(approval)?;
        lock(&self.link.pending).insert(approval.request_id.to_owned(), pending);
        self.wait_for_operator();
        let (text, blocks) = blocks::approval_request(approval);
        self.lane
            .post(text, Some(blocks), Some(approval.request_id.to_owned()));
        Ok(())
    }

    fn wait_for_operator(&mut self) {
        self.stall.set_paused(true, Instant::now());
        let _ = self
            .hub
            .store
            .set_stall(self.session_id(), self.stall.nudges(), true);
    }

    fn response(&mut self, id: &Value, outcome: Result<Value, Value>) -> Option<End> {
        let Some(purpose) = self.requests.remove(&id_text(id)) else {
            tracing::debug!(session_id = %self.session_id(), %id, "a response to no request of ours; skipped");
            return None;
        };
        let message = |error: &Value| {
            error["message"]
                .as_str()
                .map_or_else(|| error.to_string(), str::to_string)
        };
        match (purpose, outcome) {
            (Purpose::Initialize, Ok(_)) => {
                let cwd = self
                    .start
                    .workspace_path
                    .clone()
                    .or_else(|| std::env::current_dir().ok())
                    .unwrap_or_default();
                self.request(
                    Purpose::NewSession,
                    "session/new",
                    json!({ "cwd": cwd.display().to_string(), "mcpServers": [] }),
                );
            }
            (Purpose::NewSession, Ok(result)) => {
                let Some(agent_session) = result["sessionId"].as_str() else {
                    return Some(End::Finished(
                        SessionStatus::Interrupted,
                        "session/new answered without a sessionId".into(),
                    ));
                };
                *lock(&self.link.agent_session) = Some(agent_session.to_string());
                let prompt = self.start.prompt.clone();
                self.send_prompt_turn(&prompt);
            }
            (Purpose::Prompt, outcome) => {
                self.link.turn_active.store(false, Ordering::SeqCst);
                let text = std::mem::take(&mut self.turn_text);
                match outcome {
                    Ok(result) => {
                        let stop = result["stopReason"].as_str().unwrap_or("end_turn");
                        let shown = if text.trim().is_empty() {
                            format!("Turn ended ({})", blocks::escape(stop))
                        } else {
                            blocks::escape(&text).into_owned()
                        };
                        self.lane.status(shown);
                    }
                    Err(error) => self.lane.post(
                        format!("⚠️ The prompt failed: {}", blocks::escape(&message(&error))),
                        None,
                        None,
                    ),
                }
                self.deliver_one_queued();
            }
            (Purpose::Initialize, Err(error)) => {
                return Some(End::Finished(
                    SessionStatus::Interrupted,
                    format!("initialize rejected: {}", blocks::escape(&message(&error))),
                ));
            }
            (Purpose::NewSession, Err(error)) => {
                return Some(End::Finished(
                    SessionStatus::Interrupted,
                    format!("session/new rejected: {}", blocks::escape(&message(&error))),
                ));
            }
        }
        None
    }

    /// In ACP, the steering queued while a turn ran goes out as the next turn.
    fn deliver_one_queued(&mut self) {
        if self.link.is_offline() || self.link.turn_active() {
            return;
        }
        let Ok(queued) = self.hub.store.pending_steering(self.session_id()) else {
            return;
        };
        if let Some((row, text)) = queued.into_iter().next() {
            self.send_prompt_turn(&text);
            let _ = self.hub.store.mark_steering_consumed(row);
        }
    }

    /// Any message from the agent: the stall timer restarts; an offline agent is back.
    fn activity(&mut self) {
        let session_id = self.session_id().to_string();
        let now = Instant::now();
        // The row's last activity is written at most this often: a flooding agent must not
        // turn every line into a database write.
        if self
            .last_touch
            .is_none_or(|last| now.duration_since(last) >= TOUCH_EVERY)
        {
            self.last_touch = Some(now);
            let _ = self.hub.store.touch(&session_id, None);
        }
        match self.stall.activity(now) {
            Recovery::None => {}
            Recovery::Nudged(count) => {
                let _ = self
                    .hub
                    .store
                    .set_stall(&session_id, 0, self.stall.paused());
                tracing::info!(session_id, nudges = count, "agent resumed after nudges");
                self.lane.post(
                    format!("✅ Agent resumed after {count} nudge(s)"),
                    None,
                    None,
                );
            }
            Recovery::BackOnline => {
                self.link.offline.store(false, Ordering::SeqCst);
                let _ = self
                    .hub
                    .store
                    .set_connectivity(&session_id, Connectivity::Online);
                let _ = self
                    .hub
                    .store
                    .set_stall(&session_id, 0, self.stall.paused());
                let queued = self
                    .hub
                    .store
                    .pending_steering(&session_id)
                    .unwrap_or_default();
                tracing::info!(session_id, queued = queued.len(), "agent back online");
                self.lane.post(
                    format!(
                        "🟢 Agent back online — delivering {} queued messages",
                        queued.len()
                    ),
                    None,
                    None,
                );
                match self.link.dialect {
                    Dialect::Intercom => {
                        for (row, text) in queued {
                            self.link.write_nowait(out::prompt_send(&text));
                            let _ = self.hub.store.mark_steering_consumed(row);
                        }
                    }
                    Dialect::Acp => self.deliver_one_queued(),
                }
            }
        }
    }

    fn stall_fired(&mut self) {
        let session_id = self.session_id().to_string();
        let Some(action) = self.stall.fire(Instant::now()) else {
            return;
        };
        let message = self.hub.config().stall.nudge_message.clone();
        match action {
            StallAction::Nudge(count) => {
                tracing::info!(session_id, count, "agent silent: nudge sent");
                let line = match self.link.dialect {
                    Dialect::Intercom => out::nudge(&message, count),
                    Dialect::Acp => {
                        self.next_request += 1;
                        let id = format!("intercom-nudge-{}", self.next_request);
                        self.requests.insert(id.clone(), Purpose::Prompt);
                        self.link
                            .prompt_line(&format!("{message} (auto-nudge #{count})"), &id)
                    }
                };
                self.link.write_nowait(line);
                let _ = self.hub.store.set_stall(&session_id, count, false);
                self.lane.post(
                    format!("🔔 Auto-nudge #{count} sent to the agent"),
                    None,
                    None,
                );
            }
            StallAction::Escalate(count) => {
                tracing::warn!(session_id, count, "agent unresponsive: queue mode");
                self.link.offline.store(true, Ordering::SeqCst);
                let _ = self
                    .hub
                    .store
                    .set_connectivity(&session_id, Connectivity::Stalled);
                let text = format!(
                    "⚠️ Agent unresponsive after {count} nudge attempts — switching to queue mode. \
                     Steering is queued until it speaks again."
                );
                self.lane.post(
                    text.clone(),
                    Some(blocks::stalled(&session_id, &text)),
                    None,
                );
            }
        }
    }

    /// The interrupt of the dialect, stdin closed, the grace, then the group killed.
    async fn interrupt(&mut self, grace: Duration) {
        let line = match self.link.dialect {
            Dialect::Intercom => Some(out::interrupt()),
            Dialect::Acp => self.link.agent_session().map(|session| {
                out::notification("session/cancel", json!({ "sessionId": session }))
            }),
        };
        if let Some(line) = line {
            let _ = self.link.write(line).await;
        }
        lock(&self.link.writer).take();
        if tokio::time::timeout(grace, &mut self.exited).await.is_err() {
            tracing::info!(session_id = %self.session_id(), "agent still running after the grace; ending its process group");
        }
        self.reap().await;
    }

    /// Ends the whole group and waits for it.
    async fn reap(&mut self) {
        lock(&self.link.writer).take();
        if let Some(child) = self.child.take()
            && let Err(error) = child.shutdown().await
        {
            tracing::warn!(session_id = %self.session_id(), %error, "ending the agent's group");
        }
    }

    async fn kill(&mut self, end: End) -> End {
        self.reap().await;
        end
    }

    /// Stdout ended: the exit code decides, if the process exits within the grace.
    async fn after_eof(&mut self, grace: Duration) -> End {
        match tokio::time::timeout(grace, &mut self.exited).await {
            Ok(status) => self.after_exit(status, grace).await,
            Err(_) => {
                tracing::warn!(session_id = %self.session_id(), "agent closed its stdout but kept running; ending it");
                self.kill(End::Finished(
                    SessionStatus::Interrupted,
                    "stream closed".into(),
                ))
                .await
            }
        }
    }

    /// The process exited: read what it still wrote (within the grace), end its group, and
    /// report by exit code; a crash expires pending approvals.
    async fn after_exit(&mut self, status: Option<ExitStatus>, grace: Duration) -> End {
        let deadline = Instant::now() + grace;
        while let Ok(Some(event)) = tokio::time::timeout_at(deadline, self.lines.recv()).await {
            if let ReadEvent::Line(line) = event {
                let _ = self.handle_line(&line);
            }
        }
        self.reap().await;
        let (state, reason) = match status {
            Some(status) => exit_reason(status),
            None => (SessionStatus::Interrupted, "Agent crashed".to_string()),
        };
        tracing::info!(session_id = %self.session_id(), state = state.as_str(), reason, "agent exited");
        if state != SessionStatus::Terminated {
            self.expire_pending("the agent crashed before an answer")
                .await;
        }
        End::Finished(state, reason)
    }

    async fn expire_pending(&mut self, reason: &str) {
        lock(&self.link.pending).clear();
        let expired = match self.hub.store.expire_approvals(self.session_id(), reason) {
            Ok(expired) => expired,
            Err(error) => {
                tracing::error!(%error, "cannot expire the pending approvals");
                return;
            }
        };
        for (request_id, channel, ts) in expired {
            let note = format!(
                "⌛ Approval `{}` expired: {reason}",
                blocks::escape(&request_id)
            );
            if let (Some(channel), Some(ts)) = (channel, ts)
                && let Err(error) = self
                    .hub
                    .poster
                    .update(&channel, &ts, &note, &blocks::decided(&note))
                    .await
            {
                tracing::warn!(%error, "cannot replace the expired approval's buttons");
            }
            self.lane.post(note, None, None);
        }
    }
}
