//! ACP-mode worlds: the target spawns `ski-mock-agent` as the profile's `agent_template` says;
//! every agent connects to this scenario's control socket and says hello with its
//! `INTERCOM_SESSION_ID`, so a check drives each agent by session, reads what it received from its
//! transcript, and runs a row once per dialect that applies.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use ski::jsonrpc::LineReader;
use ski::transport::child::procfs;
use ski_mocks::slack::Message;
use tokio::io::AsyncWriteExt;
use tokio::net::UnixListener;
use tokio::net::unix::OwnedWriteHalf;
use tokio::sync::Notify;

use super::harness::{ALICE, Server, SessionRow, World, shows};
use super::profile::{Knobs, seconds, stall_placeholders};
use crate::vocabulary::{Capability, Setting, capability, intercom};
use crate::{CheckError, CheckResult, Ctx, Failure, OrFail};

/// The dialects a spawned agent may speak (`{dialect}` in the profile's `acp_template`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    /// The matrix's stream dialect.
    Intercom,
    /// Standard ACP (the server is the ACP client).
    Acp,
    /// The stream dialect after a JSON-RPC handshake (`initialize`, `initialized`,
    /// `session/new`), with prompts, steering and nudges sent as `session/prompt`, as later
    /// intercom builds speak it; clearance, prompt forwarding, status and interrupts stay the
    /// stream dialect's. A row written for the stream dialect runs in it too.
    IntercomJsonrpc,
}

impl Dialect {
    /// The config value.
    pub fn name(self) -> &'static str {
        match self {
            Dialect::Intercom => "intercom",
            Dialect::Acp => "acp",
            Dialect::IntercomJsonrpc => "intercom-jsonrpc",
        }
    }

    /// The capability a target declares for it.
    fn capability(self) -> Capability {
        match self {
            Dialect::Intercom => capability::DIALECT_INTERCOM,
            Dialect::Acp => capability::DIALECT_ACP,
            Dialect::IntercomJsonrpc => capability::DIALECT_INTERCOM_JSONRPC,
        }
    }

    /// The ready script of `ski-mock-agent` that speaks it.
    pub fn script(self) -> &'static str {
        match self {
            Dialect::Intercom => "intercom",
            Dialect::Acp => "intercom-acp",
            Dialect::IntercomJsonrpc => "intercom-jsonrpc",
        }
    }

    /// The method that carries the first prompt and every steering message to the agent.
    pub fn prompt_method(self) -> &'static str {
        match self {
            Dialect::Intercom => "prompt/send",
            Dialect::Acp | Dialect::IntercomJsonrpc => "session/prompt",
        }
    }

    /// The method a stall nudge arrives as.
    pub fn nudge_method(self) -> &'static str {
        match self {
            Dialect::Intercom => "nudge",
            Dialect::Acp | Dialect::IntercomJsonrpc => "session/prompt",
        }
    }
}

/// Runs `row` once for each of `dialects` the target declares (at least one must be declared);
/// a failure names the dialect. A row for the stream dialect also runs in its JSON-RPC variant.
pub async fn each_dialect<F, Fut>(ctx: &Ctx, dialects: &[Dialect], row: F) -> CheckResult
where
    F: Fn(Ctx, Dialect) -> Fut,
    Fut: std::future::Future<Output = CheckResult>,
{
    ctx.require(capability::ACP_SESSIONS)?;
    let mut applies = dialects.to_vec();
    if applies.contains(&Dialect::Intercom) && !applies.contains(&Dialect::IntercomJsonrpc) {
        applies.push(Dialect::IntercomJsonrpc);
    }
    let declared: Vec<Dialect> = applies
        .iter()
        .copied()
        .filter(|d| ctx.has(d.capability()))
        .collect();
    let Some(first) = dialects.first() else {
        return Err(CheckError::harness("a row names no dialect"));
    };
    if declared.is_empty() {
        return ctx.require(first.capability());
    }
    for dialect in declared {
        ctx.note(format!("dialect {}", dialect.name()));
        row(ctx.clone(), dialect)
            .await
            .map_err(|error| in_dialect(error, dialect))?;
    }
    Ok(())
}

fn in_dialect(error: CheckError, dialect: Dialect) -> CheckError {
    match error {
        CheckError::Fail(mut failure) => {
            failure.actual = format!("{} [in the {} dialect]", failure.actual, dialect.name());
            CheckError::Fail(failure)
        }
        other => other,
    }
}

/// Fails unless the reply `text` contains `needle`; `what` names the assertion.
pub fn ensure_reply_contains(what: &str, text: &str, needle: &str) -> CheckResult {
    if text.contains(needle) {
        return Ok(());
    }
    Err(Failure::new(what, format!("{needle:?} in the reply"))
        .actual(format!("{text:?}"))
        .into())
}

/// How the target's `[acp]` and `[stall]` are set for a scenario.
#[derive(Debug, Clone)]
pub struct Options {
    pub dialect: Dialect,
    pub max_sessions: u32,
    pub startup_timeout_ms: u64,
    /// Inactivity and escalation thresholds (ms) and retries; `None` disables the detector.
    pub stall: Option<(u64, u64, u32)>,
    /// The line limit rendered as `{max_line_length}` (a profile's fixed `max_line_length`
    /// wins).
    pub max_line_length: usize,
    /// A ready script other than the dialect's own.
    pub script: Option<String>,
}

impl Options {
    /// Defaults for `dialect`: 5 sessions, 20 s to start, no stall detection, 1 MiB lines.
    pub fn new(dialect: Dialect) -> Options {
        Options {
            dialect,
            max_sessions: 5,
            startup_timeout_ms: 20_000,
            stall: None,
            max_line_length: 1024 * 1024,
            script: None,
        }
    }
}

/// One ACP-mode scenario: the fake Slack, the running target, the agents' control socket.
pub struct AcpWorld {
    pub world: World,
    pub server: Server,
    pub agents: Agents,
}

/// A session started from Slack whose agent is not awaited.
pub struct Quiet {
    pub session_id: String,
    pub root: Message,
}

/// A session started from Slack, with its agent.
pub struct Started {
    pub row: SessionRow,
    pub root: Message,
    pub agent: AgentConn,
}

impl AcpWorld {
    /// Writes the config (default workspaces, the agent part from the profile) and starts the
    /// target in ACP mode.
    pub async fn start(ctx: &Ctx, options: Options) -> Result<AcpWorld, CheckError> {
        let mut world = World::new(ctx).await?;
        world.acp_mode = true;
        world.stall = options.stall;
        // Each dialect's run of a row has its own config and database.
        let name = options.dialect.name();
        world.config = ctx.temp_dir().join(format!("intercom-{name}.toml"));
        world.database = ctx
            .temp_dir()
            .join(format!("data-{name}"))
            .join("intercom.db");
        let agents = Agents::listen(ctx, name)?;
        world.write_config(
            super::harness::WORKSPACES,
            &agent_part(ctx, &options, &agents.path)?,
        )?;
        let server = world.start(Some("acp")).await?;
        Ok(AcpWorld {
            world,
            server,
            agents,
        })
    }

    /// `session-start PROMPT` in `channel`; answers the session, its thread root and its agent
    /// once the agent said hello.
    pub async fn start_session(&self, channel: &str, prompt: &str) -> Result<Started, CheckError> {
        let before = self.agents.count();
        let reply = self
            .world
            .slash_command(channel, ALICE, &format!("session-start {prompt}"))
            .await?;
        let agent = self
            .agents
            .nth(before)
            .await
            .map_err(|e| with_reply(e, reply.as_deref()))?;
        let session_id = agent.session_id.clone();
        let root = self.root(channel, &session_id).await?;
        let row = self
            .world
            .sessions()
            .await?
            .into_iter()
            .find(|row| row.id == session_id)
            .or_fail(format!("a session row {session_id}"))?;
        Ok(Started { row, root, agent })
    }

    /// Starts a session in `channel` whose agent asks for clearance once the session is active:
    /// the first turn ("hello there") is answered in the thread, then the operator steers
    /// "please clearance", on which the agent sends its request. The matrix's clearance rows
    /// start from an active session; an agent asking while the session is still being set up
    /// (before its thread root exists) is a different case, which no row names.
    pub async fn start_session_asking_clearance(
        &self,
        channel: &str,
    ) -> Result<Started, CheckError> {
        let started = self.start_session(channel, "hello there").await?;
        self.reply_with(&started.root, "hello there").await?;
        self.slash(channel, "steer please clearance").await?;
        Ok(started)
    }

    /// `session-start PROMPT` in `channel` for an agent that may end before it greets the
    /// control socket: answers the newest session row and its thread root.
    pub async fn start_session_quiet(
        &self,
        channel: &str,
        prompt: &str,
    ) -> Result<Quiet, CheckError> {
        let before = self.world.sessions().await?.len();
        self.world
            .slash_command(channel, ALICE, &format!("session-start {prompt}"))
            .await?;
        let session_id = self
            .world
            .sessions()
            .await?
            .get(before)
            .or_fail("a new session row once session-start is acknowledged")?
            .id
            .clone();
        let root = self.root(channel, &session_id).await?;
        Ok(Quiet { session_id, root })
    }

    /// The thread root of a session: a top-level post in `channel` naming the session's short id.
    async fn root(&self, channel: &str, session_id: &str) -> Result<Message, CheckError> {
        let short = session_id.get(..8).unwrap_or(session_id).to_string();
        self.world
            .message("the session's thread root", |m| {
                // A root that has replies carries its own ts as thread_ts.
                m.channel == channel
                    && m.thread_ts().is_none_or(|t| t == m.ts())
                    && shows(m, &short)
            })
            .await
    }

    /// Types `/intercom TEXT` as the authorized user in `channel`; answers the visible reply
    /// (empty when there is none).
    pub async fn slash(&self, channel: &str, text: &str) -> Result<String, CheckError> {
        Ok(self
            .world
            .slash_command(channel, ALICE, text)
            .await?
            .unwrap_or_default())
    }

    /// Fails unless the session's row has `status`.
    pub async fn ensure_status(&self, session_id: &str, status: &str) -> CheckResult {
        let actual = self.row(session_id).await?.status;
        if actual != status {
            return Err(Failure::new("the session's status", format!("{status:?}"))
                .actual(format!("{actual:?}"))
                .into());
        }
        Ok(())
    }

    /// Waits for a reply in the thread of `root` whose text contains `needle`.
    pub async fn reply_with(&self, root: &Message, needle: &str) -> Result<Message, CheckError> {
        self.world
            .message(
                &format!("a reply in the thread containing {needle:?}"),
                reply_in(root, needle),
            )
            .await
    }

    /// Waits for a notice about the session of `root` whose shown text contains `needle`: a
    /// reply in its thread, or a top-level post in its channel (a session that failed before
    /// its thread existed has its notice at the top, and may have it as its only post).
    pub async fn notice_with(&self, root: &Message, needle: &str) -> Result<Message, CheckError> {
        let thread = root.ts().to_string();
        let channel = root.channel.clone();
        let needle_owned = needle.to_string();
        self.world
            .message(
                &format!("a post in the thread or the channel containing {needle:?}"),
                move |m| {
                    m.channel == channel
                        && m.thread_ts().is_none_or(|t| t == thread || t == m.ts())
                        && shows(m, &needle_owned)
                },
            )
            .await
    }

    /// The replies in a thread so far (the root excluded).
    pub fn replies(&self, root: &Message) -> Vec<Message> {
        self.world
            .slack
            .messages(&root.channel, Some(root.ts()))
            .into_iter()
            .filter(|m| m.ts() != root.ts())
            .collect()
    }

    /// Waits for the notice a build posts as the session ends, a reply in the thread of `root`
    /// containing `needle` ([`World::message_as_session_ends`]).
    pub async fn final_reply(
        &self,
        root: &Message,
        session_id: &str,
        needle: &str,
    ) -> Result<Message, CheckError> {
        self.world
            .message_as_session_ends(
                &format!("a reply in the thread containing {needle:?}"),
                |row| row.id == session_id,
                reply_in(root, needle),
            )
            .await
    }

    /// A session's row now.
    pub async fn row(&self, session_id: &str) -> Result<SessionRow, CheckError> {
        self.world
            .sessions()
            .await?
            .into_iter()
            .find(|row| row.id == session_id)
            .or_fail("the session row")
    }
}

/// Whether a message is a reply in the thread of `root` whose shown text contains `needle`.
fn reply_in(root: &Message, needle: &str) -> impl Fn(&Message) -> bool + use<> {
    let thread = root.ts().to_string();
    let channel = root.channel.clone();
    let needle = needle.to_string();
    move |m| {
        m.channel == channel
            && m.thread_ts() == Some(thread.as_str())
            && m.ts() != thread
            && shows(m, &needle)
    }
}

pub(super) fn with_reply(error: CheckError, reply: Option<&str>) -> CheckError {
    match (error, reply) {
        (CheckError::Fail(mut failure), Some(reply)) => {
            failure.actual = format!("{}; the slash command answered {reply:?}", failure.actual);
            CheckError::Fail(failure)
        }
        (error, _) => error,
    }
}

fn setting(ctx: &Ctx, setting: &Setting) -> Result<String, CheckError> {
    ctx.section()
        .settings
        .get(setting.name)
        .cloned()
        .ok_or_else(|| CheckError::harness(format!("the profile has no settings.{}", setting.name)))
}

/// The profile's `agent_template` rendered with this script and control socket.
fn agent_lines(ctx: &Ctx, script: &str, control: &std::path::Path) -> Result<String, CheckError> {
    let transcripts = ctx.temp_dir().join("transcripts");
    std::fs::create_dir_all(&transcripts).or_error("create the transcripts directory")?;
    let mock = ctx.bin("ski-mock-agent").display().to_string();
    let control = control.display().to_string();
    let transcripts = transcripts.display().to_string();
    ctx.render(
        &setting(ctx, &intercom::AGENT_TEMPLATE)?,
        &[
            ("mock_agent", &mock),
            ("script", script),
            ("control", &control),
            ("transcripts", &transcripts),
        ],
    )
}

/// The agent part of an MCP-mode config (`agent_in_mcp_mode`): no agent is started there, so
/// the control socket is a path nobody listens on, and the options are the defaults of the
/// first dialect the target declares.
pub fn mcp_mode_agent_part(ctx: &Ctx) -> Result<String, CheckError> {
    let dialect = [Dialect::Intercom, Dialect::IntercomJsonrpc, Dialect::Acp]
        .into_iter()
        .find(|d| ctx.has(d.capability()))
        .unwrap_or(Dialect::Intercom);
    let control = ctx.temp_dir().join("agents-mcp-mode.sock");
    agent_part(ctx, &Options::new(dialect), &control)
}

/// The config's agent part: `agent_template` and `acp_template` from the profile, the agents
/// greeting the control socket at `control`.
fn agent_part(
    ctx: &Ctx,
    options: &Options,
    control: &std::path::Path,
) -> Result<String, CheckError> {
    let script = options
        .script
        .clone()
        .unwrap_or_else(|| options.dialect.script().to_string());
    let agent = agent_lines(ctx, &script, control)?;
    let max_line_length = Knobs::read(ctx)?
        .max_line_length
        .unwrap_or(options.max_line_length);
    let fixed = [
        ("dialect", options.dialect.name().to_string()),
        ("max_sessions", options.max_sessions.to_string()),
        ("startup_timeout_ms", options.startup_timeout_ms.to_string()),
        (
            "startup_timeout_s",
            seconds(options.startup_timeout_ms).to_string(),
        ),
        ("max_line_length", max_line_length.to_string()),
    ];
    let values: Vec<(&str, String)> = fixed
        .into_iter()
        .chain(stall_placeholders(options.stall))
        .collect();
    let pairs: Vec<(&str, &str)> = values.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let acp = ctx.render(&setting(ctx, &intercom::ACP_TEMPLATE)?, &pairs)?;
    Ok(format!("{agent}\n{acp}\n"))
}

type Replies = Arc<Mutex<HashMap<u64, Value>>>;

/// One agent's control connection.
#[derive(Clone)]
pub struct AgentConn {
    pub session_id: String,
    pub hello: Value,
    writer: Arc<tokio::sync::Mutex<OwnedWriteHalf>>,
    replies: Replies,
    notify: Arc<Notify>,
    closed: Arc<AtomicBool>,
    next_id: Arc<AtomicU64>,
    ctx: Ctx,
}

impl AgentConn {
    /// The agent's pid.
    pub fn pid(&self) -> Option<u32> {
        self.hello["pid"]
            .as_u64()
            .and_then(|p| u32::try_from(p).ok())
    }

    /// Sends a control command and waits for its reply (`ok` must be true).
    pub async fn command(&self, mut command: Value) -> Result<Value, CheckError> {
        let id = self.next_id.fetch_add(1, Ordering::SeqCst);
        command["id"] = json!(id);
        let mut line = command.to_string();
        line.push('\n');
        self.writer
            .lock()
            .await
            .write_all(line.as_bytes())
            .await
            .or_fail("the agent's control socket takes a command")?;
        let wait = async {
            loop {
                let notified = self.notify.notified();
                if let Some(reply) = self
                    .replies
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .remove(&id)
                {
                    return Some(reply);
                }
                if self.closed.load(Ordering::SeqCst) {
                    return None;
                }
                notified.await;
            }
        };
        let reply = self
            .ctx
            .within(&format!("the agent's reply to {command}"), wait)
            .await?
            .or_fail("a control reply (the agent's control connection closed first)")?;
        if reply["ok"] != json!(true) {
            return Err(Failure::expected(format!("the agent runs {command}"))
                .actual(reply.to_string())
                .into());
        }
        Ok(reply)
    }

    /// Sends a control command without waiting for a reply (for commands that end the agent).
    pub async fn fire(&self, command: Value) -> Result<(), CheckError> {
        let mut line = command.to_string();
        line.push('\n');
        self.writer
            .lock()
            .await
            .write_all(line.as_bytes())
            .await
            .or_fail("the agent's control socket takes a command")
    }

    /// Waits until the agent received `count` messages of `method`.
    pub async fn wait_method(&self, method: &str, count: u64) -> Result<(), CheckError> {
        self.command(json!({"cmd": "wait", "method": method, "count": count}))
            .await
            .map(|_| ())
    }

    /// The agent writes `line` on its stdout as given.
    pub async fn send_line(&self, line: &str) -> Result<(), CheckError> {
        self.command(json!({"cmd": "send", "line": line}))
            .await
            .map(|_| ())
    }

    /// The agent sends `message` (JSON) as one line.
    pub async fn send(&self, message: Value) -> Result<(), CheckError> {
        self.command(json!({"cmd": "send", "message": message}))
            .await
            .map(|_| ())
    }

    /// Runs script steps in the agent.
    pub async fn run(&self, steps: Value) -> Result<(), CheckError> {
        self.command(json!({"cmd": "run", "steps": steps}))
            .await
            .map(|_| ())
    }

    /// The agent's state report.
    pub async fn state(&self) -> Result<Value, CheckError> {
        Ok(self.command(json!({"cmd": "state"})).await?["state"].clone())
    }

    /// Every line the agent read on stdin, from its transcript, as text.
    pub fn received(&self) -> Result<Vec<String>, CheckError> {
        let path = self.hello["transcript"]
            .as_str()
            .or_fail("the agent reports its transcript")?;
        let text = std::fs::read_to_string(path).or_fail("the agent's transcript")?;
        Ok(text
            .lines()
            .filter_map(|line| serde_json::from_str::<Value>(line).ok())
            .filter(|record| record["kind"] == "in")
            .filter_map(|record| record["text"].as_str().map(str::to_string))
            .collect())
    }

    /// The received lines parsed as JSON whose `method` is `method`.
    pub fn received_method(&self, method: &str) -> Result<Vec<Value>, CheckError> {
        Ok(self
            .received()?
            .iter()
            .filter_map(|line| serde_json::from_str::<Value>(line).ok())
            .filter(|message| message["method"] == method)
            .collect())
    }
}

/// The control socket every spawned agent connects to.
pub struct Agents {
    path: PathBuf,
    hellos: Arc<Mutex<Vec<AgentConn>>>,
    notify: Arc<Notify>,
    ctx: Ctx,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Agents {
    /// Ends every agent that said hello and still runs: a target's teardown may miss one (an
    /// agent in a group of its own, a respawned one), and the harness ends what it caused to be
    /// started. An agent is known by its pid and, against pid reuse, by this socket's path in its
    /// command line.
    fn drop(&mut self) {
        self.task.abort();
        let path = self.path.display().to_string();
        let hellos = self
            .hellos
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        for pid in hellos.iter().filter_map(AgentConn::pid) {
            let Ok(pid) = i32::try_from(pid) else {
                continue;
            };
            if procfs::command_line_contains(pid, &path) {
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(pid),
                    nix::sys::signal::Signal::SIGKILL,
                );
            }
        }
    }
}

impl Agents {
    /// Listens on `{temp_dir}/agents-NAME.sock`.
    pub fn listen(ctx: &Ctx, name: &str) -> Result<Agents, CheckError> {
        let path = ctx.temp_dir().join(format!("agents-{name}.sock"));
        let listener = UnixListener::bind(&path).or_error("bind the agents' control socket")?;
        let hellos: Arc<Mutex<Vec<AgentConn>>> = Arc::new(Mutex::new(Vec::new()));
        let notify = Arc::new(Notify::new());
        let (task_hellos, task_notify, task_ctx) = (hellos.clone(), notify.clone(), ctx.clone());
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let (read, write) = stream.into_split();
                let replies: Replies = Arc::new(Mutex::new(HashMap::new()));
                let conn_notify = Arc::new(Notify::new());
                let closed = Arc::new(AtomicBool::new(false));
                let writer = Arc::new(tokio::sync::Mutex::new(write));
                let (hellos, notify, ctx) =
                    (task_hellos.clone(), task_notify.clone(), task_ctx.clone());
                tokio::spawn(async move {
                    let mut reader = LineReader::with_max_line_bytes(read, 64 * 1024 * 1024);
                    while let Some(Ok(line)) = reader.next_line().await {
                        let Ok(value) = serde_json::from_slice::<Value>(line) else {
                            continue;
                        };
                        if let Some(hello) = value.get("hello") {
                            let session_id = hello["identity"]["INTERCOM_SESSION_ID"]
                                .as_str()
                                .unwrap_or_default()
                                .to_string();
                            hellos
                                .lock()
                                .unwrap_or_else(std::sync::PoisonError::into_inner)
                                .push(AgentConn {
                                    session_id,
                                    hello: hello.clone(),
                                    writer: writer.clone(),
                                    replies: replies.clone(),
                                    notify: conn_notify.clone(),
                                    closed: closed.clone(),
                                    next_id: Arc::new(AtomicU64::new(1)),
                                    ctx: ctx.clone(),
                                });
                            notify.notify_waiters();
                        } else if let Some(id) = value.get("id").and_then(Value::as_u64) {
                            replies
                                .lock()
                                .unwrap_or_else(std::sync::PoisonError::into_inner)
                                .insert(id, value);
                            conn_notify.notify_waiters();
                        }
                    }
                    closed.store(true, Ordering::SeqCst);
                    conn_notify.notify_waiters();
                });
            }
        });
        Ok(Agents {
            path,
            hellos,
            notify,
            ctx: ctx.clone(),
            task,
        })
    }

    /// How many agents said hello.
    pub fn count(&self) -> usize {
        self.hellos
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .len()
    }

    /// The `index`th agent to say hello (0-based), once it did.
    pub async fn nth(&self, index: usize) -> Result<AgentConn, CheckError> {
        let wait = async {
            loop {
                let notified = self.notify.notified();
                if let Some(conn) = self
                    .hellos
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .get(index)
                    .cloned()
                {
                    return conn;
                }
                notified.await;
            }
        };
        self.ctx
            .within(
                &format!("agent #{} to start and say hello", index + 1),
                wait,
            )
            .await
    }
}
