//! `ski-mock-agent`: a scriptable fake agent process, and its interpreter as a library.
//!
//! The agent reads NDJSON from its input and writes NDJSON to its output, behaving as a script
//! says ([`script`]) on top of a built-in personality ([`personality`]): standard ACP v1, a
//! kiro-cli stand-in, or an intercom headless agent. Every line in and out can be recorded in a
//! transcript ([`transcript`]), and a test runner can drive it through a control socket
//! ([`control`]). It can also stand between a client and a real agent and record the session
//! ([`record`]), replay such a recording ([`recording`], [`replay`], [`pool`]) and check it
//! against the live agent ([`diff`]); [`profile`] names real agents' quirks.
//!
//! The same interpreter runs in-process over any byte streams:
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() {
//! use ski_mocks::agent::{Config, Launch, Overrides, Script, run};
//! use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
//!
//! let config = Config::resolve(Script::load("echo").unwrap(), &Overrides::default());
//! let (mut client, agent_stdin) = tokio::io::duplex(4096);
//! let (agent_stdout, from_agent) = tokio::io::duplex(4096);
//! let agent = tokio::spawn(run(
//!     Launch::new(config),
//!     agent_stdin,
//!     agent_stdout,
//!     tokio::io::sink(),
//! ));
//! client
//!     .write_all(b"{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\",\"params\":{\"protocolVersion\":1}}\n")
//!     .await
//!     .unwrap();
//! let mut lines = BufReader::new(from_agent).lines();
//! let reply = lines.next_line().await.unwrap().unwrap();
//! assert!(reply.contains("\"protocolVersion\":1"));
//! drop(client); // end of input: the agent exits 0
//! assert_eq!(agent.await.unwrap().unwrap().code, 0);
//! # }
//! ```

pub mod cli;
pub mod commands;
pub mod config;
pub mod control;
pub mod diff;
pub mod output;
pub mod personality;
pub mod pool;
pub mod profile;
pub mod record;
pub mod recording;
pub mod remote;
pub mod replay;
pub mod runtime;
pub mod script;
pub mod template;
pub mod transcript;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use serde_json::{Map, Value, json};
use ski::jsonrpc::{FrameError, LineReader};
use tokio::io::{AsyncRead, AsyncWrite};

pub use config::{Config, Overrides};
pub use runtime::{Exit, ProcessInfo};
pub use script::{Personality, Script, ScriptError};

use output::{ErrorOutput, Output};
use runtime::Agent;
use transcript::Transcript;

/// Everything needed to start an agent.
#[derive(Debug, Clone)]
pub struct Launch {
    /// What it runs with.
    pub config: Config,
    /// Where to write the transcript.
    pub transcript: Option<PathBuf>,
    /// Where to listen for control commands.
    pub control: Option<PathBuf>,
    /// Where to connect for control commands.
    pub control_connect: Option<PathBuf>,
    /// How the process was started (recorded, and reported by `state`).
    pub process: ProcessInfo,
    /// Whether SIGTERM and SIGINT end the agent with a transcript exit record (binaries only).
    pub handle_signals: bool,
}

impl Launch {
    /// A launch with this configuration and nothing else: no transcript, no control channel,
    /// this process's identity.
    pub fn new(config: Config) -> Self {
        Self {
            config,
            transcript: None,
            control: None,
            control_connect: None,
            process: ProcessInfo::current(Vec::new()),
            handle_signals: false,
        }
    }
}

impl ProcessInfo {
    /// This process: the given argv, the current directory and environment, the pid.
    pub fn current(argv: Vec<String>) -> Self {
        Self {
            argv,
            cwd: std::env::current_dir()
                .map(|p| p.display().to_string())
                .unwrap_or_default(),
            env: std::env::vars_os()
                .map(|(k, v)| {
                    (
                        k.to_string_lossy().into_owned(),
                        v.to_string_lossy().into_owned(),
                    )
                })
                .collect(),
            pid: std::process::id(),
        }
    }
}

/// How the agent ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// The exit code.
    pub code: i32,
    /// Why it ended: `stdin closed`, `script exit`, `control exit`, `signal TERM`, ...
    pub reason: String,
}

/// Why an agent could not start.
#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    /// The transcript file could not be created.
    #[error("cannot create transcript {path}: {source}")]
    Transcript {
        /// The path.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The control socket could not be bound or reached.
    #[error("cannot use control socket {path}: {source}")]
    Control {
        /// The path.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
}

/// Expands `{pid}` and `{env:NAME}` in a path given on the command line, so that every agent a
/// program spawns with the same arguments gets its own transcript and control socket.
pub fn expand_path(text: &str, pid: u32) -> PathBuf {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find('{') {
        out.push_str(&rest[..start]);
        let after = &rest[start + 1..];
        match after.find('}') {
            Some(end) => {
                let name = &after[..end];
                if name == "pid" {
                    out.push_str(&pid.to_string());
                } else if let Some(var) = name.strip_prefix("env:") {
                    out.push_str(&std::env::var(var).unwrap_or_default());
                } else {
                    out.push('{');
                    out.push_str(name);
                    out.push('}');
                }
                rest = &after[end + 1..];
            }
            None => {
                out.push_str(&rest[start..]);
                rest = "";
            }
        }
    }
    out.push_str(rest);
    PathBuf::from(out)
}

fn start_record(agent: &Agent, launch: &Launch) -> Map<String, Value> {
    let mut record = Map::new();
    record.insert("version".into(), json!(config::VERSION));
    record.insert("pid".into(), json!(launch.process.pid));
    record.insert("argv".into(), json!(launch.process.argv));
    record.insert("cwd".into(), json!(launch.process.cwd));
    record.insert("personality".into(), json!(agent.config.personality.name()));
    record.insert(
        "script".into(),
        if agent.config.script.origin.is_empty() {
            Value::Null
        } else {
            json!(agent.config.script.origin)
        },
    );
    record.insert(
        "identity".into(),
        json!({ "INTERCOM_SESSION_ID": agent.names.identity }),
    );
    record.insert(
        "env".into(),
        transcript::environment_record(&launch.process.env),
    );
    record.insert(
        "control".into(),
        json!(launch.control.as_ref().map(|p| p.display().to_string())),
    );
    record
}

/// How long the agent, once its input ended, goes on answering the requests it is working on.
pub const EOF_GRACE: std::time::Duration = std::time::Duration::from_secs(1);

/// After the input ended: waits until no request is being worked on (at most [`EOF_GRACE`]),
/// so that `printf ... | ski-mock-agent` gets its answers. Returns an exit requested meanwhile.
async fn finish_running(agent: &Arc<Agent>) -> Option<Exit> {
    let deadline = tokio::time::Instant::now() + EOF_GRACE;
    loop {
        let busy = {
            let mut state = agent.state();
            state
                .running
                .retain(|_, running| !running.task.is_finished());
            !state.running.is_empty()
        };
        if !busy || tokio::time::Instant::now() >= deadline {
            break;
        }
        tokio::select! {
            exit = agent.exit_requested() => return Some(exit),
            () = tokio::time::sleep(std::time::Duration::from_millis(2)) => {}
        }
    }
    None
}

#[cfg(unix)]
pub(crate) async fn next_signal(
    term: &mut Option<tokio::signal::unix::Signal>,
    int: &mut Option<tokio::signal::unix::Signal>,
) -> (i32, &'static str) {
    let term_fut = async {
        match term {
            Some(signal) => {
                signal.recv().await;
            }
            None => std::future::pending::<()>().await,
        }
    };
    let int_fut = async {
        match int {
            Some(signal) => {
                signal.recv().await;
            }
            None => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        () = term_fut => (143, "signal TERM"),
        () = int_fut => (130, "signal INT"),
    }
}

/// Runs an agent on the given streams until it exits; returns how it ended.
pub async fn run<R, W, E>(
    launch: Launch,
    stdin: R,
    stdout: W,
    stderr: E,
) -> Result<Outcome, LaunchError>
where
    R: AsyncRead + Send + Unpin + 'static,
    W: AsyncWrite + Send + Unpin + 'static,
    E: AsyncWrite + Send + Unpin + 'static,
{
    let origin = Instant::now();
    let transcript = match &launch.transcript {
        Some(path) => {
            Transcript::create(path, origin).map_err(|source| LaunchError::Transcript {
                path: path.clone(),
                source,
            })?
        }
        None => Transcript::disabled(origin),
    };
    let listener = match &launch.control {
        Some(path) => Some(
            control::bind(path)
                .await
                .map_err(|source| LaunchError::Control {
                    path: path.clone(),
                    source,
                })?,
        ),
        None => None,
    };
    let agent = Agent::new(
        launch.config.clone(),
        launch.process.clone(),
        transcript,
        Output::new(Box::new(stdout)),
        ErrorOutput::new(Box::new(stderr)),
        launch.control.as_ref().map(|p| p.display().to_string()),
        launch.control.is_some() || launch.control_connect.is_some(),
    );
    agent.transcript.start(start_record(&agent, &launch));
    agent.start_flusher().await;
    if let Some(listener) = listener {
        agent.spawn(control::serve(Arc::clone(&agent), listener));
    }
    if let Some(path) = &launch.control_connect
        && let Err(source) = control::connect(Arc::clone(&agent), path).await
    {
        agent.abort_tasks();
        return Err(LaunchError::Control {
            path: path.clone(),
            source,
        });
    }
    let outcome = serve(&agent, &launch, stdin).await;
    // Everything answered reaches stdout before the process ends, unless its reader stopped
    // reading (a full pipe): then the agent ends after the grace anyway.
    let _ = tokio::time::timeout(EOF_GRACE, agent.flush_output()).await;
    if agent.config.kiro.sessions_on_disk {
        // A process that ends by itself lets go of its sessions; a killed one leaves stale locks.
        let ids: Vec<String> = agent
            .state()
            .sessions
            .iter()
            .map(|s| s.id.clone())
            .collect();
        for id in ids {
            personality::kiro_sessions::release(&id);
        }
    }
    agent.abort_tasks();
    agent.transcript.exit(outcome.code, &outcome.reason);
    if let Some(path) = &launch.control {
        let _ = std::fs::remove_file(path);
    }
    Ok(outcome)
}

async fn serve<R>(agent: &Arc<Agent>, launch: &Launch, stdin: R) -> Outcome
where
    R: AsyncRead + Send + Unpin + 'static,
{
    let stderr_bytes = agent.config.faults.startup_stderr_bytes;
    if stderr_bytes > 0 {
        agent
            .write_stderr(&runtime::sequence::stderr_filler(stderr_bytes))
            .await;
    }
    if agent.config.personality == Personality::Intercom {
        personality::intercom::start(agent);
    }
    if agent.config.personality == Personality::Kiro && agent.config.kiro.require_agent {
        match personality::kiro::find_agent(&agent.config.kiro.agent) {
            Ok(None) => {}
            Ok(Some(warning)) => {
                agent.write_stderr(format!("{warning}\n").as_bytes()).await;
            }
            Err(error) => {
                agent.write_stderr(format!("{error}\n").as_bytes()).await;
                return Outcome {
                    code: 1,
                    reason: "agent not found".to_owned(),
                };
            }
        }
    }
    agent.start_timers();
    if let Some(recording) = &agent.config.script.recording {
        replay::start(agent, recording);
    }

    #[cfg(unix)]
    let (mut term, mut int) = if launch.handle_signals {
        use tokio::signal::unix::{SignalKind, signal};
        (
            signal(SignalKind::terminate()).ok(),
            signal(SignalKind::interrupt()).ok(),
        )
    } else {
        (None, None)
    };

    let reader_agent = Arc::clone(agent);
    let max = agent.config.agent.max_line_bytes;
    // Answers true when stdin was closed on purpose (a `close_stdin` step): the agent goes on.
    let reader = async move {
        let mut lines = LineReader::with_max_line_bytes(stdin, max);
        // One wait for a `close_stdin` step for the whole read loop, not one per line.
        let close_requested = reader_agent.close_stdin_requested();
        tokio::pin!(close_requested);
        loop {
            let next = tokio::select! {
                // A close request goes first; the order is fixed, so no random pick per line.
                biased;
                () = &mut close_requested => {
                    drop(lines);
                    if let Err(error) = ski::transport::stdio::close_stdin() {
                        reader_agent.transcript.note(&format!("closing stdin failed: {error}"));
                    }
                    return true;
                }
                next = lines.next_line() => next,
            };
            match next {
                Some(Ok(line)) => {
                    reader_agent.handle_line(line).await;
                    // What the message's sequence queued goes out before the reader waits for
                    // input; lines already buffered are handled first, so a batch is one write.
                    if !lines.has_buffered_line() {
                        reader_agent.flush_output().await;
                    }
                }
                Some(Err(FrameError::Oversize { length, limit })) => {
                    reader_agent.oversize_input(length, limit).await;
                }
                Some(Err(FrameError::Io(error))) => {
                    reader_agent
                        .transcript
                        .note(&format!("reading stdin failed: {error}"));
                    return false;
                }
                None => return false,
            }
        }
    };
    // The reader is a task of its own, so that a line arriving wakes only the reader and not
    // the waits for an exit request and for signals below (polling those on every line was a
    // tenth of the agent's work per prompt round trip).
    let mut reader = tokio::spawn(reader);
    let _stop_reader = AbortOnDrop(reader.abort_handle());
    let mut reading = true;
    loop {
        tokio::select! {
            ended = &mut reader, if reading => {
                reading = false;
                let on_purpose = match ended {
                    Ok(on_purpose) => on_purpose,
                    Err(error) if error.is_panic() => std::panic::resume_unwind(error.into_panic()),
                    Err(_) => false,
                };
                agent.transcript.note(if on_purpose { "stdin closed by the script" } else { "stdin closed" });
                agent.mark_stdin_closed();
                if !on_purpose && !agent.config.faults.ignore_eof {
                    if let Some(exit) = finish_running(agent).await {
                        return Outcome { code: exit.code, reason: exit.reason };
                    }
                    return Outcome { code: 0, reason: "stdin closed".to_owned() };
                }
                agent.transcript.note("fault: staying after stdin closed");
            }
            exit = agent.exit_requested() => {
                return Outcome { code: exit.code, reason: exit.reason };
            }
            (code, reason) = next_signal(&mut term, &mut int) => {
                return Outcome { code, reason: reason.to_owned() };
            }
        }
    }
}

/// Aborts a task when dropped (the stdin reader, when serving ends another way).
struct AbortOnDrop(tokio::task::AbortHandle);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_expand_pid_and_environment() {
        // An unset variable would expand to nothing, which the expected text allows for.
        let home = std::env::var("HOME").unwrap_or_default();
        assert_eq!(
            expand_path("/tmp/a-{pid}-{env:HOME}-{other}.sock", 42),
            PathBuf::from(format!("/tmp/a-42-{home}-{{other}}.sock"))
        );
        assert_eq!(expand_path("plain{", 1), PathBuf::from("plain{"));
    }
}
