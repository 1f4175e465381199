//! The client's terminals: commands the agent runs through `terminal/create`, `output`,
//! `wait_for_exit`, `kill` and `release`.
//!
//! Every command runs through [`crate::transport::child`], in its own process group. Its
//! standard output is kept byte for byte, its standard error line by line, in one buffer. With
//! `outputByteLimit` the oldest output is dropped first, at a character boundary, and
//! `truncated` is set. `kill` ends the command (SIGKILL to its group) and the terminal stays
//! valid: its output and exit status can be read until `release`, which ends the command if
//! it still runs and frees the id; a released or unknown id is `-32002`. Closing the client
//! releases every terminal.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use tokio::io::AsyncReadExt;
use tokio::sync::{mpsc, oneshot, watch};

use crate::acp::{
    CreateTerminalRequest, CreateTerminalResponse, Nullable, TerminalExitStatus,
    TerminalOutputResponse, TerminalRequest,
};
use crate::jsonrpc::RpcError;
use crate::transport::child::{self, Child, ChildSpec};

/// The output kept when the agent gives no `outputByteLimit`.
pub const DEFAULT_OUTPUT_LIMIT: usize = 16 * 1024 * 1024;

/// How long, after a command exits, its output pipes may stay open (held by a process it left
/// behind) before its exit is reported anyway.
const OUTPUT_DRAIN: Duration = Duration::from_secs(1);

/// How the client runs terminal commands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TerminalConfig {
    /// The working directory of a command whose request names none.
    pub default_cwd: Option<PathBuf>,
    /// The output kept when the request gives no `outputByteLimit`.
    pub default_output_limit: usize,
    /// Time between SIGTERM and SIGKILL when a released command's group is torn down.
    pub grace: Duration,
}

impl Default for TerminalConfig {
    fn default() -> Self {
        Self {
            default_cwd: None,
            default_output_limit: DEFAULT_OUTPUT_LIMIT,
            grace: Duration::from_secs(1),
        }
    }
}

/// The output of one terminal, bounded from the front.
#[derive(Debug, Default)]
struct OutputBuffer {
    bytes: Vec<u8>,
    limit: usize,
    truncated: bool,
}

impl OutputBuffer {
    fn new(limit: usize) -> Self {
        Self {
            bytes: Vec::new(),
            limit,
            truncated: false,
        }
    }

    fn push(&mut self, data: &[u8]) {
        self.bytes.extend_from_slice(data);
        if self.bytes.len() <= self.limit {
            return;
        }
        let mut cut = self.bytes.len() - self.limit;
        // Never start in the middle of a UTF-8 sequence: skip its continuation bytes.
        while cut < self.bytes.len() && (self.bytes[cut] & 0b1100_0000) == 0b1000_0000 {
            cut += 1;
        }
        self.bytes.drain(..cut);
        self.truncated = true;
    }

    fn text(&self) -> String {
        String::from_utf8_lossy(&self.bytes).into_owned()
    }
}

/// How a command ended.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Exit {
    code: Option<u32>,
    signal: Option<String>,
}

impl Exit {
    fn from_status(status: ExitStatus) -> Self {
        use std::os::unix::process::ExitStatusExt;
        Self {
            code: status.code().and_then(|code| u32::try_from(code).ok()),
            signal: status.signal().map(signal_name),
        }
    }

    fn unknown() -> Self {
        Self {
            code: None,
            signal: None,
        }
    }

    fn to_wire(&self) -> TerminalExitStatus {
        TerminalExitStatus {
            exit_code: self.code.map_or(Nullable::Null, Nullable::Value),
            signal: self.signal.clone().map_or(Nullable::Null, Nullable::Value),
            extra: Default::default(),
        }
    }
}

fn signal_name(number: i32) -> String {
    Signal::try_from(number).map_or_else(
        |_| format!("SIG{number}"),
        |signal| signal.as_str().to_owned(),
    )
}

enum Command {
    Kill,
    Release(oneshot::Sender<()>),
}

struct Terminal {
    output: Arc<Mutex<OutputBuffer>>,
    exit: watch::Receiver<Option<Exit>>,
    commands: mpsc::UnboundedSender<Command>,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Every terminal of a client, shared by its connections.
pub(crate) struct Terminals {
    config: TerminalConfig,
    next: AtomicU64,
    map: Mutex<HashMap<String, Arc<Terminal>>>,
}

impl Terminals {
    pub(crate) fn new(config: TerminalConfig) -> Self {
        Self {
            config,
            next: AtomicU64::new(1),
            map: Mutex::new(HashMap::new()),
        }
    }

    fn get(&self, id: &str) -> Result<Arc<Terminal>, RpcError> {
        lock(&self.map)
            .get(id)
            .cloned()
            .ok_or_else(|| RpcError::resource_not_found(format!("no terminal {id:?}")))
    }

    /// How many terminals exist (created and not released).
    pub(crate) fn len(&self) -> usize {
        lock(&self.map).len()
    }

    /// `terminal/create`.
    pub(crate) fn create(
        &self,
        request: CreateTerminalRequest,
    ) -> Result<CreateTerminalResponse, RpcError> {
        if request.command.is_empty() {
            return Err(RpcError::invalid_params("command must not be empty"));
        }
        let cwd = match &request.cwd {
            Some(cwd) if !Path::new(cwd).is_absolute() => {
                return Err(RpcError::invalid_params(format!(
                    "cwd must be absolute, got {cwd:?}"
                )));
            }
            Some(cwd) => Some(PathBuf::from(cwd)),
            None => self.config.default_cwd.clone(),
        };
        let id = format!("term-{}", self.next.fetch_add(1, Ordering::Relaxed));
        let mut spec = ChildSpec::new(format!("terminal {id}"), &request.command)
            .args(request.args.iter().flatten())
            .grace(self.config.grace);
        for variable in request.env.iter().flatten() {
            spec = spec.env(&variable.name, &variable.value);
        }
        if let Some(cwd) = &cwd {
            spec = spec.cwd(cwd);
        }
        let child = child::spawn(spec).map_err(|error| {
            RpcError::internal_error(format!("cannot run {:?}: {error}", request.command))
        })?;
        let limit = request
            .output_byte_limit
            .map_or(self.config.default_output_limit, |limit| {
                usize::try_from(limit).unwrap_or(usize::MAX)
            });
        let output = Arc::new(Mutex::new(OutputBuffer::new(limit)));
        let (exit_tx, exit) = watch::channel(None);
        let (commands, command_rx) = mpsc::unbounded_channel();
        tokio::spawn(supervise(child, output.clone(), command_rx, exit_tx));
        lock(&self.map).insert(
            id.clone(),
            Arc::new(Terminal {
                output,
                exit,
                commands,
            }),
        );
        tracing::debug!(terminal = %id, command = %request.command, "terminal created");
        Ok(CreateTerminalResponse {
            terminal_id: id,
            extra: Default::default(),
        })
    }

    /// `terminal/output`.
    pub(crate) fn output(
        &self,
        request: &TerminalRequest,
    ) -> Result<TerminalOutputResponse, RpcError> {
        let terminal = self.get(&request.terminal_id)?;
        let exit = terminal.exit.borrow().clone();
        let output = lock(&terminal.output);
        Ok(TerminalOutputResponse {
            output: output.text(),
            truncated: output.truncated,
            exit_status: exit.map_or(Nullable::Absent, |exit| Nullable::Value(exit.to_wire())),
            extra: Default::default(),
        })
    }

    /// `terminal/wait_for_exit`.
    pub(crate) async fn wait_for_exit(
        &self,
        request: &TerminalRequest,
    ) -> Result<TerminalExitStatus, RpcError> {
        let terminal = self.get(&request.terminal_id)?;
        let mut exit = terminal.exit.clone();
        let result = exit.wait_for(Option::is_some).await;
        let exit = match result {
            Ok(exit) => exit.clone().unwrap_or_else(Exit::unknown),
            Err(_) => Exit::unknown(),
        };
        Ok(exit.to_wire())
    }

    /// `terminal/kill`: the command ends, the terminal stays.
    pub(crate) fn kill(&self, request: &TerminalRequest) -> Result<(), RpcError> {
        let terminal = self.get(&request.terminal_id)?;
        // A closed channel means the supervisor is done; the command has ended already.
        let _ = terminal.commands.send(Command::Kill);
        Ok(())
    }

    /// `terminal/release`: the command ends if it runs, and the id is no longer valid.
    pub(crate) async fn release(&self, request: &TerminalRequest) -> Result<(), RpcError> {
        let terminal = lock(&self.map)
            .remove(&request.terminal_id)
            .ok_or_else(|| {
                RpcError::resource_not_found(format!("no terminal {:?}", request.terminal_id))
            })?;
        release(&terminal).await;
        Ok(())
    }

    /// Releases every terminal and waits until their commands are gone.
    pub(crate) async fn release_all(&self) {
        let terminals: Vec<Arc<Terminal>> = lock(&self.map).drain().map(|(_, t)| t).collect();
        futures::future::join_all(terminals.iter().map(|terminal| release(terminal))).await;
    }
}

async fn release(terminal: &Terminal) {
    let (ack, done) = oneshot::channel();
    if terminal.commands.send(Command::Release(ack)).is_ok() {
        // An error means the supervisor ended without acknowledging: the group is gone too.
        let _ = done.await;
    }
}

fn kill_group(pid: u32) {
    let Ok(raw) = i32::try_from(pid) else {
        return;
    };
    if let Err(error) = killpg(Pid::from_raw(raw), Signal::SIGKILL)
        && error != nix::errno::Errno::ESRCH
    {
        tracing::warn!(%error, pid, "cannot kill a terminal's process group");
    }
}

/// Owns one command: collects its output, notices its exit, and ends its group on kill,
/// release, or when the client drops the terminal.
async fn supervise(
    mut child: Child,
    output: Arc<Mutex<OutputBuffer>>,
    mut commands: mpsc::UnboundedReceiver<Command>,
    exit_tx: watch::Sender<Option<Exit>>,
) {
    let pid = child.pid();
    let stdout = child.take_stdout().ok().map(|mut stdout| {
        let output = output.clone();
        tokio::spawn(async move {
            let mut chunk = vec![0u8; 16 * 1024];
            loop {
                match stdout.read(&mut chunk).await {
                    Ok(0) | Err(_) => break,
                    Ok(read) => lock(&output).push(&chunk[..read]),
                }
            }
        })
    });
    let mut stderr_open = true;
    let mut released = None;
    let mut abandoned = false;
    let exited = child.exited();
    tokio::pin!(exited);
    let status = loop {
        tokio::select! {
            biased;
            command = commands.recv(), if released.is_none() && !abandoned => match command {
                Some(Command::Kill) => kill_group(pid),
                Some(Command::Release(ack)) => {
                    kill_group(pid);
                    released = Some(ack);
                }
                None => {
                    kill_group(pid);
                    abandoned = true;
                }
            },
            line = child.next_stderr_line(), if stderr_open => match line {
                Some(line) => {
                    let mut output = lock(&output);
                    output.push(line.as_bytes());
                    output.push(b"\n");
                }
                None => stderr_open = false,
            },
            status = &mut exited => break status,
        }
    };
    // Collect what the command wrote before it ended, unless a process it left behind keeps
    // the pipes open.
    let drain = async {
        while stderr_open {
            match child.next_stderr_line().await {
                Some(line) => {
                    let mut output = lock(&output);
                    output.push(line.as_bytes());
                    output.push(b"\n");
                }
                None => stderr_open = false,
            }
        }
        if let Some(stdout) = stdout {
            let _ = stdout.await;
        }
    };
    let _ = tokio::time::timeout(OUTPUT_DRAIN, drain).await;
    let exit = match status {
        Ok(status) => Exit::from_status(status),
        Err(error) => {
            tracing::warn!(%error, "a terminal's exit status is unknown");
            Exit::unknown()
        }
    };
    exit_tx.send_replace(Some(exit));
    while released.is_none() && !abandoned {
        match commands.recv().await {
            Some(Command::Kill) => {}
            Some(Command::Release(ack)) => released = Some(ack),
            None => abandoned = true,
        }
    }
    if let Err(error) = child.shutdown().await {
        tracing::warn!(%error, "terminal teardown failed");
    }
    if let Some(ack) = released {
        let _ = ack.send(());
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::jsonrpc::ErrorCode;

    #[test]
    fn truncation_keeps_the_tail_on_a_char_boundary() {
        let mut buffer = OutputBuffer::new(5);
        buffer.push(b"abc");
        assert!(!buffer.truncated);
        buffer.push("dé€f".as_bytes());
        // "abcdé€f" is 10 bytes; the last 5 start inside 'é', so the cut moves on to '€'.
        assert_eq!(buffer.text(), "€f");
        assert!(buffer.truncated);
        let mut buffer = OutputBuffer::new(4);
        buffer.push("xx€".as_bytes());
        assert_eq!(buffer.text(), "x€");
        let mut buffer = OutputBuffer::new(2);
        buffer.push("xx€".as_bytes());
        assert_eq!((buffer.text().as_str(), buffer.truncated), ("", true));
        let mut zero = OutputBuffer::new(0);
        zero.push(b"a");
        assert_eq!((zero.text().as_str(), zero.truncated), ("", true));
    }

    fn create(command: &str, args: &[&str], limit: Option<u64>) -> CreateTerminalRequest {
        let mut params = json!({"sessionId": "s", "command": command, "args": args});
        if let Some(limit) = limit {
            params["outputByteLimit"] = json!(limit);
        }
        serde_json::from_value(params).unwrap()
    }

    fn id(terminal_id: &str) -> TerminalRequest {
        serde_json::from_value(json!({"sessionId": "s", "terminalId": terminal_id})).unwrap()
    }

    #[tokio::test]
    async fn lifecycle_create_output_wait_release() {
        let terminals = Terminals::new(TerminalConfig::default());
        let created = terminals
            .create(create(
                "/bin/sh",
                &["-c", "echo out; echo err >&2; exit 3"],
                None,
            ))
            .unwrap();
        let request = id(&created.terminal_id);
        let exit = terminals.wait_for_exit(&request).await.unwrap();
        assert_eq!(
            serde_json::to_value(&exit).unwrap(),
            json!({"exitCode": 3, "signal": null})
        );
        let output = terminals.output(&request).unwrap();
        assert!(output.output.contains("out\n"), "{:?}", output.output);
        assert!(output.output.contains("err\n"), "{:?}", output.output);
        assert!(!output.truncated);
        assert_eq!(
            serde_json::to_value(&output.exit_status).unwrap(),
            json!({"exitCode": 3, "signal": null})
        );
        terminals.release(&request).await.unwrap();
        assert_eq!(
            terminals.output(&request).unwrap_err().code,
            ErrorCode::RESOURCE_NOT_FOUND
        );
        assert_eq!(terminals.len(), 0);
    }

    #[tokio::test]
    async fn kill_keeps_output_and_status_until_release() {
        let terminals = Terminals::new(TerminalConfig::default());
        let created = terminals
            .create(create(
                "/bin/sh",
                &["-c", "echo started; exec sleep 600"],
                None,
            ))
            .unwrap();
        let request = id(&created.terminal_id);
        // The command runs: no exit status yet.
        let running = loop {
            let output = terminals.output(&request).unwrap();
            if output.output.contains("started") {
                break output;
            }
            tokio::task::yield_now().await;
            tokio::time::sleep(Duration::from_millis(5)).await;
        };
        assert!(running.exit_status.is_absent());
        terminals.kill(&request).unwrap();
        let exit = terminals.wait_for_exit(&request).await.unwrap();
        assert_eq!(
            serde_json::to_value(&exit).unwrap(),
            json!({"exitCode": null, "signal": "SIGKILL"})
        );
        let after = terminals.output(&request).unwrap();
        assert_eq!(after.output, "started\n");
        assert!(after.exit_status.value().is_some());
        terminals.release(&request).await.unwrap();
        let gone = terminals.wait_for_exit(&request).await.unwrap_err();
        assert_eq!(gone.code, ErrorCode::RESOURCE_NOT_FOUND);
        assert_eq!(
            terminals.kill(&request).unwrap_err().code,
            ErrorCode::RESOURCE_NOT_FOUND
        );
    }

    #[tokio::test]
    async fn output_limit_truncates_from_the_start() {
        let terminals = Terminals::new(TerminalConfig::default());
        let created = terminals
            .create(create("/bin/sh", &["-c", "printf 0123456789"], Some(4)))
            .unwrap();
        let request = id(&created.terminal_id);
        terminals.wait_for_exit(&request).await.unwrap();
        let output = terminals.output(&request).unwrap();
        assert_eq!((output.output.as_str(), output.truncated), ("6789", true));
        terminals.release_all().await;
    }

    #[tokio::test]
    async fn release_all_ends_running_commands() {
        let terminals = Terminals::new(TerminalConfig::default());
        let created = terminals
            .create(create("/bin/sh", &["-c", "sleep 600 & wait"], None))
            .unwrap();
        let request = id(&created.terminal_id);
        let exit = terminals.exit_receiver(&request);
        terminals.release_all().await;
        assert_eq!(terminals.len(), 0);
        let exit = exit
            .borrow()
            .clone()
            .expect("the command ended before release returned");
        assert_eq!(exit.signal.as_deref(), Some("SIGKILL"));
    }

    #[tokio::test]
    async fn bad_requests_are_rejected() {
        let terminals = Terminals::new(TerminalConfig::default());
        let mut relative = create("/bin/true", &[], None);
        relative.cwd = Some("relative/dir".into());
        assert_eq!(
            terminals.create(relative).unwrap_err().code,
            ErrorCode::INVALID_PARAMS
        );
        let missing = create("/nonexistent/ski-no-such-program", &[], None);
        assert_eq!(
            terminals.create(missing).unwrap_err().code,
            ErrorCode::INTERNAL_ERROR
        );
        assert_eq!(
            terminals.output(&id("term-404")).unwrap_err().code,
            ErrorCode::RESOURCE_NOT_FOUND
        );
    }

    impl Terminals {
        fn exit_receiver(&self, request: &TerminalRequest) -> watch::Receiver<Option<Exit>> {
            self.get(&request.terminal_id).unwrap().exit.clone()
        }
    }
}
