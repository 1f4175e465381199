//! The one way ski starts another process: its own process group, piped stdio, a wire log, and a
//! teardown that ends the whole group (SIGTERM, a grace period, SIGKILL, reap) so no process or
//! zombie outlives its owner.
//!
//! # Design constraints
//!
//! - Every child is the leader of a new process group, so a signal to the group also reaches the
//!   processes it started itself (a shell's children, an agent's tools).
//! - A background supervisor task owns the operating-system handle. Dropping a [`Child`] asks the
//!   supervisor to tear the group down; [`Child::shutdown`] does the same and waits for the result.
//!   A [`ProcessTracker`] given in the [`ChildSpec`] can tear down every child it has seen, even
//!   after the owner of a [`Child`] panicked.
//! - Orphaned grandchildren are reaped by this process only when it is a child subreaper (see
//!   [`adopt_orphans`]); otherwise the system's init reaps them.
//! - A process that leaves its group (`setsid`, `setpgid`) escapes the group signal. That is the
//!   documented limit of group teardown.

use std::ffi::{OsStr, OsString};
use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use nix::errno::Errno;
use nix::sys::signal::{Signal, killpg};
use nix::sys::wait::{WaitPidFlag, waitpid};
use nix::unistd::Pid;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{ChildStderr, ChildStdin, ChildStdout};
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

use super::{Direction, LoggedRead, LoggedWrite, WireLog};

/// How long a group gets between SIGTERM and SIGKILL unless the spec says otherwise.
pub const DEFAULT_GRACE: Duration = Duration::from_secs(3);

/// How long teardown waits, after SIGKILL, for the group to disappear before reporting it.
const KILL_DEADLINE: Duration = Duration::from_secs(10);

/// How often teardown looks whether the group is gone.
const POLL_INTERVAL: Duration = Duration::from_millis(5);

/// Errors of starting or talking to a child process.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ChildError {
    /// The program could not be started.
    #[error("cannot start {program:?}: {source}")]
    Spawn {
        /// The program that was to be started.
        program: String,
        /// Why starting failed.
        #[source]
        source: io::Error,
    },
    /// The child's pid does not fit a process-group id.
    #[error("child {name} has no usable process id")]
    NoPid {
        /// The child's name.
        name: String,
    },
    /// A stdio stream was already taken or closed.
    #[error("the {stream} of child {name} is not available (taken or closed)")]
    StreamUnavailable {
        /// The child's name.
        name: String,
        /// `stdin`, `stdout` or `stderr`.
        stream: &'static str,
    },
    /// Reading from or writing to the child failed.
    #[error("i/o with child {name} failed: {source}")]
    Io {
        /// The child's name.
        name: String,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// The supervisor stopped without reporting (its runtime shut down).
    #[error("the supervisor of child {name} stopped before reporting")]
    SupervisorGone {
        /// The child's name.
        name: String,
    },
}

/// What to start and how: program, arguments, environment, working directory, grace period,
/// and where to record and track it.
#[derive(Debug, Clone)]
pub struct ChildSpec {
    name: String,
    program: OsString,
    args: Vec<OsString>,
    env: Vec<(OsString, Option<OsString>)>,
    env_clear: bool,
    cwd: Option<PathBuf>,
    grace: Duration,
    wire: Option<WireLog>,
    tracker: Option<ProcessTracker>,
    die_with_parent: bool,
}

impl ChildSpec {
    /// A spec for `program`, named `name` in wire logs and reports.
    pub fn new(name: impl Into<String>, program: impl AsRef<OsStr>) -> Self {
        Self {
            name: name.into(),
            program: program.as_ref().to_owned(),
            args: Vec::new(),
            env: Vec::new(),
            env_clear: false,
            cwd: None,
            grace: DEFAULT_GRACE,
            wire: None,
            tracker: None,
            die_with_parent: false,
        }
    }

    /// A spec from an argv list whose first element is the program.
    ///
    /// Returns `None` for an empty list.
    pub fn from_argv<S: AsRef<OsStr>>(name: impl Into<String>, argv: &[S]) -> Option<Self> {
        let (program, args) = argv.split_first()?;
        Some(Self::new(name, program).args(args))
    }

    /// Appends one argument.
    pub fn arg(mut self, arg: impl AsRef<OsStr>) -> Self {
        self.args.push(arg.as_ref().to_owned());
        self
    }

    /// Appends arguments.
    pub fn args<S: AsRef<OsStr>>(mut self, args: impl IntoIterator<Item = S>) -> Self {
        self.args
            .extend(args.into_iter().map(|a| a.as_ref().to_owned()));
        self
    }

    /// Sets one environment variable.
    pub fn env(mut self, key: impl AsRef<OsStr>, value: impl AsRef<OsStr>) -> Self {
        self.env
            .push((key.as_ref().to_owned(), Some(value.as_ref().to_owned())));
        self
    }

    /// Sets environment variables.
    pub fn envs<K: AsRef<OsStr>, V: AsRef<OsStr>>(
        mut self,
        vars: impl IntoIterator<Item = (K, V)>,
    ) -> Self {
        for (key, value) in vars {
            self = self.env(key, value);
        }
        self
    }

    /// Removes one inherited environment variable.
    pub fn env_remove(mut self, key: impl AsRef<OsStr>) -> Self {
        self.env.push((key.as_ref().to_owned(), None));
        self
    }

    /// Starts from an empty environment instead of inheriting this process's.
    pub fn env_clear(mut self) -> Self {
        self.env_clear = true;
        self
    }

    /// Sets the working directory.
    pub fn cwd(mut self, dir: impl AsRef<Path>) -> Self {
        self.cwd = Some(dir.as_ref().to_owned());
        self
    }

    /// Sets the time between SIGTERM and SIGKILL at teardown.
    pub fn grace(mut self, grace: Duration) -> Self {
        self.grace = grace;
        self
    }

    /// Records stdin, stdout, stderr and process events into `log`.
    pub fn wire_log(mut self, log: WireLog) -> Self {
        self.wire = Some(log);
        self
    }

    /// Registers the child with `tracker`, which can tear it down and verify it is gone.
    pub fn tracker(mut self, tracker: ProcessTracker) -> Self {
        self.tracker = Some(tracker);
        self
    }

    /// Asks the system to SIGKILL the child when this process dies, even by SIGKILL (Linux
    /// `PR_SET_PDEATHSIG`; elsewhere nothing). The signal follows the death of the spawning
    /// thread, so spawn from a runtime's worker thread, never from a short-lived one. Only the
    /// child itself is signalled: what it started needs its owner's recovery.
    pub fn die_with_parent(mut self) -> Self {
        self.die_with_parent = true;
        self
    }

    /// The name used in wire logs.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The program.
    pub fn program(&self) -> &OsStr {
        &self.program
    }

    /// The arguments.
    pub fn get_args(&self) -> &[OsString] {
        &self.args
    }

    /// The working directory, if one was set.
    pub fn get_cwd(&self) -> Option<&Path> {
        self.cwd.as_deref()
    }

    /// The environment changes, in order (`None` removes a variable).
    pub fn get_env(&self) -> &[(OsString, Option<OsString>)] {
        &self.env
    }

    /// The command line as one display string (lossy, for logs).
    pub fn display_command(&self) -> String {
        let mut parts = vec![self.program.to_string_lossy().into_owned()];
        parts.extend(self.args.iter().map(|a| a.to_string_lossy().into_owned()));
        parts.join(" ")
    }
}

/// Which output stream a line came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutputStream {
    /// Standard output.
    Stdout,
    /// Standard error.
    Stderr,
}

/// How a child's process group ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Termination {
    /// The child's name.
    pub name: String,
    /// The leader's pid, which is also the process-group id.
    pub pid: u32,
    /// The leader's exit status, when it was reaped.
    pub status: Option<ExitStatus>,
    /// Whether the leader had already exited by itself before teardown started.
    pub exited_before_teardown: bool,
    /// Whether SIGTERM was sent to the group.
    pub sent_term: bool,
    /// Whether SIGKILL was needed.
    pub sent_kill: bool,
    /// Whether the process group no longer exists.
    pub group_gone: bool,
}

impl fmt::Display for Termination {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} (pid {})", self.name, self.pid)?;
        match &self.status {
            Some(status) => write!(f, " ended with {status}")?,
            None => write!(f, " has no exit status")?,
        }
        if self.sent_kill {
            write!(f, ", killed")?;
        } else if self.sent_term && !self.exited_before_teardown {
            write!(f, ", terminated")?;
        }
        if !self.group_gone {
            write!(f, ", and its process group SURVIVED")?;
        }
        Ok(())
    }
}

/// The shared state of one child's process group.
#[derive(Debug)]
struct Group {
    name: String,
    pid: u32,
    status: watch::Receiver<Option<ExitStatus>>,
    done: watch::Receiver<Option<Termination>>,
    teardown: mpsc::UnboundedSender<()>,
}

impl Group {
    fn request_teardown(&self) {
        // A closed channel means the supervisor already finished; nothing is left to do.
        let _ = self.teardown.send(());
    }

    async fn finished(&self) -> Result<Termination, ChildError> {
        let mut done = self.done.clone();
        let result = done.wait_for(Option::is_some).await;
        match result {
            Ok(termination) => termination.clone().ok_or_else(|| self.gone()),
            Err(_) => Err(self.gone()),
        }
    }

    fn gone(&self) -> ChildError {
        ChildError::SupervisorGone {
            name: self.name.clone(),
        }
    }
}

/// Keeps track of every child spawned with it, to tear them all down and prove they are gone.
///
/// Cloning gives another handle to the same set.
#[derive(Debug, Clone, Default)]
pub struct ProcessTracker {
    groups: Arc<Mutex<Vec<Arc<Group>>>>,
}

impl ProcessTracker {
    /// An empty tracker.
    pub fn new() -> Self {
        Self::default()
    }

    fn add(&self, group: Arc<Group>) {
        self.lock().push(group);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Arc<Group>>> {
        self.groups
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The pids (process-group ids) of every child spawned with this tracker.
    pub fn pids(&self) -> Vec<u32> {
        self.lock().iter().map(|g| g.pid).collect()
    }

    /// How many children were spawned with this tracker.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether no child was spawned with this tracker.
    pub fn is_empty(&self) -> bool {
        self.lock().is_empty()
    }

    /// Tears down every tracked group (those already torn down report again) and waits for all.
    ///
    /// The result lists every group; [`Termination::group_gone`] is false for any survivor.
    pub async fn shutdown_all(&self) -> Vec<Termination> {
        let groups: Vec<Arc<Group>> = self.lock().clone();
        for group in &groups {
            group.request_teardown();
        }
        let mut report = Vec::with_capacity(groups.len());
        for group in groups {
            let termination = match group.finished().await {
                Ok(termination) => termination,
                // The supervisor's runtime went away; its guard sent SIGKILL. Look at the group.
                Err(_) => Termination {
                    name: group.name.clone(),
                    pid: group.pid,
                    status: None,
                    exited_before_teardown: false,
                    sent_term: false,
                    sent_kill: true,
                    group_gone: !group_exists(group.pid),
                },
            };
            report.push(termination);
        }
        report
    }
}

/// A running child process: its stdio, its pid, and the supervisor that ends its group.
///
/// Dropping a `Child` tears its process group down in the background; call [`Child::shutdown`]
/// to wait for that and see how it ended.
pub struct Child {
    name: String,
    pid: u32,
    wire: Option<WireLog>,
    stdin: Option<ChildStdin>,
    stdout: Option<BufReader<ChildStdout>>,
    /// The part of a stdout line read before a `next_output_line` select picked stderr; kept so
    /// that the read, which the select cancels, loses nothing.
    stdout_partial: Vec<u8>,
    stderr: Option<mpsc::UnboundedReceiver<String>>,
    group: Arc<Group>,
}

impl fmt::Debug for Child {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Child")
            .field("name", &self.name)
            .field("pid", &self.pid)
            .finish_non_exhaustive()
    }
}

/// Makes this process the reaper of orphaned descendants (Linux `PR_SET_CHILD_SUBREAPER`).
///
/// With it, grandchildren of a killed child are reparented to this process and teardown reaps
/// them, so none is left as a zombie even where the system's init does not reap. Returns whether
/// the attribute is now set; on other systems it does nothing and returns `false`.
pub fn adopt_orphans() -> bool {
    #[cfg(target_os = "linux")]
    {
        nix::sys::prctl::set_child_subreaper(true).is_ok()
    }
    #[cfg(not(target_os = "linux"))]
    {
        false
    }
}

/// Whether a process group with this id still has any member (a zombie counts as a member).
pub fn group_exists(pgid: u32) -> bool {
    let Ok(raw) = i32::try_from(pgid) else {
        return false;
    };
    if raw <= 1 {
        return false;
    }
    match killpg(Pid::from_raw(raw), None) {
        Ok(()) => true,
        Err(Errno::ESRCH) => false,
        // EPERM: the group exists but belongs to someone else.
        Err(_) => true,
    }
}

/// Whether a process with this pid exists (a zombie counts).
pub fn process_exists(pid: u32) -> bool {
    let Ok(raw) = i32::try_from(pid) else {
        return false;
    };
    if raw <= 0 {
        return false;
    }
    !matches!(
        nix::sys::signal::kill(Pid::from_raw(raw), None),
        Err(Errno::ESRCH)
    )
}

/// Starts a child process as described by `spec`.
///
/// The child gets a new process group, piped stdin, stdout and stderr, the spec's environment and
/// working directory. Stderr is read continuously (so the child never blocks on a full pipe) into
/// the wire log and into [`Child::next_stderr_line`]. Must be called inside a tokio runtime.
pub fn spawn(spec: ChildSpec) -> Result<Child, ChildError> {
    let mut command = tokio::process::Command::new(&spec.program);
    command
        .args(&spec.args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        // The supervisor normally reaps the child; this only matters if its runtime shuts down.
        .kill_on_drop(true);
    if spec.env_clear {
        command.env_clear();
    }
    for (key, value) in &spec.env {
        match value {
            Some(value) => command.env(key, value),
            None => command.env_remove(key),
        };
    }
    if let Some(dir) = &spec.cwd {
        command.current_dir(dir);
    }
    if spec.die_with_parent {
        kill_when_parent_dies(&mut command);
    }
    let mut os_child = command.spawn().map_err(|source| ChildError::Spawn {
        program: spec.program.to_string_lossy().into_owned(),
        source,
    })?;
    let Some(pid) = os_child.id() else {
        return Err(ChildError::NoPid { name: spec.name });
    };
    if i32::try_from(pid).is_err() {
        return Err(ChildError::NoPid { name: spec.name });
    }
    if let Some(log) = &spec.wire {
        log.note(
            &spec.name,
            &format!("spawned pid {pid}: {}", spec.display_command()),
        );
    }
    let stdin = os_child.stdin.take();
    let stdout = os_child.stdout.take().map(BufReader::new);
    let stderr = os_child
        .stderr
        .take()
        .map(|stream| drain_stderr(stream, spec.wire.clone(), &spec.name));

    let (status_tx, status_rx) = watch::channel(None);
    let (done_tx, done_rx) = watch::channel(None);
    let (teardown_tx, teardown_rx) = mpsc::unbounded_channel();
    let group = Arc::new(Group {
        name: spec.name.clone(),
        pid,
        status: status_rx,
        done: done_rx,
        teardown: teardown_tx,
    });
    let supervisor = Supervisor {
        name: spec.name.clone(),
        pid,
        grace: spec.grace,
        wire: spec.wire.clone(),
        status: status_tx,
        done: done_tx,
    };
    tokio::spawn(supervisor.run(os_child, teardown_rx));
    if let Some(tracker) = &spec.tracker {
        tracker.add(Arc::clone(&group));
    }
    Ok(Child {
        name: spec.name,
        pid,
        wire: spec.wire,
        stdin,
        stdout,
        stdout_partial: Vec::new(),
        stderr,
        group,
    })
}

#[cfg(target_os = "linux")]
#[allow(unsafe_code)]
fn kill_when_parent_dies(command: &mut tokio::process::Command) {
    // SAFETY: the closure runs in the forked child before exec and calls only prctl(2), which
    // is async-signal-safe; it allocates nothing and touches no lock.
    unsafe {
        command
            .pre_exec(|| nix::sys::prctl::set_pdeathsig(Signal::SIGKILL).map_err(io::Error::from));
    }
}

#[cfg(not(target_os = "linux"))]
fn kill_when_parent_dies(_command: &mut tokio::process::Command) {}

fn drain_stderr(
    stream: ChildStderr,
    wire: Option<WireLog>,
    name: &str,
) -> mpsc::UnboundedReceiver<String> {
    let (tx, rx) = mpsc::unbounded_channel();
    let channel = format!("{name}/stderr");
    tokio::spawn(async move {
        let mut reader = BufReader::new(stream);
        let mut buf = Vec::new();
        loop {
            buf.clear();
            match reader.read_until(b'\n', &mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(_) => {
                    let line = trim_line(&buf);
                    if let Some(log) = &wire {
                        log.record(&channel, Direction::In, &line);
                    }
                    // The receiver may be gone when nobody reads stderr; the log still has it.
                    let _ = tx.send(line);
                }
            }
        }
    });
    rx
}

fn trim_line(buf: &[u8]) -> String {
    let mut end = buf.len();
    if end > 0 && buf[end - 1] == b'\n' {
        end -= 1;
    }
    if end > 0 && buf[end - 1] == b'\r' {
        end -= 1;
    }
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

impl Child {
    /// The name given in the spec.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The leader's pid, which is also the process-group id.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// Writes `line` and a newline to the child's stdin and flushes (recorded as `out`).
    pub async fn send_line(&mut self, line: &str) -> Result<(), ChildError> {
        let name = self.name.clone();
        let stdin = self
            .stdin
            .as_mut()
            .ok_or_else(|| ChildError::StreamUnavailable {
                name: name.clone(),
                stream: "stdin",
            })?;
        if let Some(log) = &self.wire {
            log.record(&name, Direction::Out, line.trim_end_matches(['\r', '\n']));
        }
        let io = async {
            stdin.write_all(line.as_bytes()).await?;
            if !line.ends_with('\n') {
                stdin.write_all(b"\n").await?;
            }
            stdin.flush().await
        };
        io.await.map_err(|source| ChildError::Io { name, source })
    }

    /// Reads the next line of the child's stdout (recorded as `in`); `None` at end of stream.
    ///
    /// Lines have no length limit; invalid UTF-8 is replaced.
    pub async fn next_line(&mut self) -> Result<Option<String>, ChildError> {
        let stdout = self
            .stdout
            .as_mut()
            .ok_or_else(|| ChildError::StreamUnavailable {
                name: self.name.clone(),
                stream: "stdout",
            })?;
        // The same buffer as `next_output_line`: a read cancelled by a caller's timeout or select
        // leaves its part of the line there for the next call.
        let read = stdout
            .read_until(b'\n', &mut self.stdout_partial)
            .await
            .map_err(|source| ChildError::Io {
                name: self.name.clone(),
                source,
            })?;
        if read == 0 {
            if let Some(log) = &self.wire {
                log.note(&self.name, "stdout closed");
            }
            return Ok(None);
        }
        let line = trim_line(&std::mem::take(&mut self.stdout_partial));
        if let Some(log) = &self.wire {
            log.record(&self.name, Direction::In, &line);
        }
        Ok(Some(line))
    }

    /// The next line from stdout or stderr, whichever comes first (both recorded in the wire
    /// log); `None` once both are closed.
    pub async fn next_output_line(&mut self) -> Option<(OutputStream, String)> {
        loop {
            let stdout_open = self.stdout.is_some();
            let stderr_open = self.stderr.is_some();
            if !stdout_open && !stderr_open {
                return None;
            }
            // `read_until` appends what it read to the buffer even when the select cancels it,
            // so the buffer lives in `self` and the next call goes on where this one stopped.
            let buf = &mut self.stdout_partial;
            let stdout = self.stdout.as_mut();
            let stderr = self.stderr.as_mut();
            tokio::select! {
                read = async { stdout?.read_until(b'\n', buf).await.ok() }, if stdout_open => {
                    match read {
                        Some(n) if n > 0 => {
                            let line = trim_line(&std::mem::take(&mut self.stdout_partial));
                            if let Some(log) = &self.wire {
                                log.record(&self.name, Direction::In, &line);
                            }
                            return Some((OutputStream::Stdout, line));
                        }
                        _ => {
                            if let Some(log) = &self.wire {
                                log.note(&self.name, "stdout closed");
                            }
                            self.stdout = None;
                        }
                    }
                }
                line = async { stderr?.recv().await }, if stderr_open => {
                    match line {
                        Some(line) => return Some((OutputStream::Stderr, line)),
                        None => self.stderr = None,
                    }
                }
            }
        }
    }

    /// The next line the child wrote to stderr; `None` once stderr is closed and drained.
    pub async fn next_stderr_line(&mut self) -> Option<String> {
        self.stderr.as_mut()?.recv().await
    }

    /// Takes stdin as a writer that records every line into the wire log.
    pub fn take_stdin(&mut self) -> Result<LoggedWrite<ChildStdin>, ChildError> {
        let stdin = self
            .stdin
            .take()
            .ok_or_else(|| ChildError::StreamUnavailable {
                name: self.name.clone(),
                stream: "stdin",
            })?;
        Ok(match &self.wire {
            Some(log) => LoggedWrite::new(stdin, log.clone(), &self.name),
            None => LoggedWrite::unlogged(stdin),
        })
    }

    /// Takes stdout as a reader that records every line into the wire log.
    ///
    /// Bytes already buffered by [`Child::next_line`] are lost, so take stdout before reading.
    pub fn take_stdout(&mut self) -> Result<LoggedRead<ChildStdout>, ChildError> {
        let stdout = self
            .stdout
            .take()
            .ok_or_else(|| ChildError::StreamUnavailable {
                name: self.name.clone(),
                stream: "stdout",
            })?;
        let stdout = stdout.into_inner();
        Ok(match &self.wire {
            Some(log) => LoggedRead::new(stdout, log.clone(), &self.name),
            None => LoggedRead::unlogged(stdout),
        })
    }

    /// Closes stdin so the child sees end of input.
    pub fn close_stdin(&mut self) {
        if self.stdin.take().is_some()
            && let Some(log) = &self.wire
        {
            log.note(&self.name, "stdin closed");
        }
    }

    /// The leader's exit status if it has exited.
    pub fn try_status(&self) -> Option<ExitStatus> {
        *self.group.status.borrow()
    }

    /// Waits until the leader exits by itself and returns its status.
    pub async fn wait(&self) -> Result<ExitStatus, ChildError> {
        self.exited().await
    }

    /// The same wait as [`Child::wait`] as a future that borrows nothing, so that it can run
    /// beside the readers of the child's output (which borrow the child mutably).
    pub fn exited(&self) -> impl Future<Output = Result<ExitStatus, ChildError>> + Send + 'static {
        let group = self.group.clone();
        async move {
            let mut status = group.status.clone();
            let result = status.wait_for(Option::is_some).await.map(|value| *value);
            match result {
                Ok(Some(status)) => Ok(status),
                Ok(None) | Err(_) => Err(group.gone()),
            }
        }
    }

    /// Sends `signal` to the whole process group.
    pub fn signal_group(&self, signal: Signal) -> Result<(), ChildError> {
        send_group(self.pid, signal).map_err(|errno| ChildError::Io {
            name: self.name.clone(),
            source: io::Error::from(errno),
        })
    }

    /// Ends the process group (SIGTERM, the grace period, SIGKILL if needed), reaps it, and
    /// reports how it ended.
    pub async fn shutdown(mut self) -> Result<Termination, ChildError> {
        self.stdin = None;
        self.group.request_teardown();
        self.group.finished().await
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        self.group.request_teardown();
    }
}

fn send_group(pid: u32, signal: Signal) -> Result<(), Errno> {
    let raw = i32::try_from(pid).map_err(|_| Errno::EINVAL)?;
    match killpg(Pid::from_raw(raw), signal) {
        Ok(()) | Err(Errno::ESRCH) => Ok(()),
        Err(errno) => Err(errno),
    }
}

/// Sends SIGKILL to a group when dropped while armed: the last resort if the supervisor task is
/// dropped before it finished (its runtime shut down).
struct KillGuard {
    pid: u32,
    armed: bool,
}

impl Drop for KillGuard {
    fn drop(&mut self) {
        if self.armed {
            let _ = send_group(self.pid, Signal::SIGKILL);
        }
    }
}

/// The task that owns the operating-system child: it reports the exit and runs the teardown.
struct Supervisor {
    name: String,
    pid: u32,
    grace: Duration,
    wire: Option<WireLog>,
    status: watch::Sender<Option<ExitStatus>>,
    done: watch::Sender<Option<Termination>>,
}

impl Supervisor {
    fn note(&self, text: &str) {
        if let Some(log) = &self.wire {
            log.note(&self.name, text);
        }
    }

    async fn run(
        self,
        mut child: tokio::process::Child,
        mut teardown: mpsc::UnboundedReceiver<()>,
    ) {
        let mut guard = KillGuard {
            pid: self.pid,
            armed: true,
        };
        let mut status = None;
        tokio::select! {
            result = child.wait() => {
                if let Ok(exit) = result {
                    self.note(&format!("exited by itself: {exit}"));
                    status = Some(exit);
                    let _ = self.status.send(Some(exit));
                }
            }
            // A closed channel (every handle dropped) is a teardown request too.
            _ = teardown.recv() => {}
        }
        let exited_before_teardown = status.is_some();
        if exited_before_teardown {
            let _ = teardown.recv().await;
        }
        let termination = self.teardown(&mut child, status).await;
        let termination = Termination {
            exited_before_teardown,
            ..termination
        };
        if !termination.group_gone {
            self.note("process group still exists after SIGKILL");
        }
        guard.armed = false;
        let _ = self.done.send(Some(termination));
        // Later teardown requests (from a tracker after a drop) find `done` already set.
        drop(teardown);
    }

    async fn teardown(
        &self,
        child: &mut tokio::process::Child,
        mut status: Option<ExitStatus>,
    ) -> Termination {
        let mut sent_term = false;
        let mut sent_kill = false;
        if group_exists(self.pid) {
            self.note("teardown: SIGTERM to the process group");
            let _ = send_group(self.pid, Signal::SIGTERM);
            sent_term = true;
        }
        let mut gone = self
            .reap_until_gone(child, &mut status, Instant::now() + self.grace)
            .await;
        if !gone {
            self.note(&format!(
                "teardown: still running after {:?}, SIGKILL to the process group",
                self.grace
            ));
            let _ = send_group(self.pid, Signal::SIGKILL);
            sent_kill = true;
            gone = self
                .reap_until_gone(child, &mut status, Instant::now() + KILL_DEADLINE)
                .await;
        }
        if let Some(exit) = status {
            let _ = self.status.send(Some(exit));
        }
        self.note(&match status {
            Some(exit) => format!("teardown done: {exit}"),
            None => "teardown done: no exit status".to_owned(),
        });
        Termination {
            name: self.name.clone(),
            pid: self.pid,
            status,
            exited_before_teardown: false,
            sent_term,
            sent_kill,
            group_gone: gone,
        }
    }

    /// Reaps the leader (through tokio, which owns it) and then any adopted group member, until
    /// the group is gone or the deadline passes. Returns whether the group is gone.
    async fn reap_until_gone(
        &self,
        child: &mut tokio::process::Child,
        status: &mut Option<ExitStatus>,
        deadline: Instant,
    ) -> bool {
        loop {
            if status.is_none()
                && let Ok(Some(exit)) = child.try_wait()
            {
                *status = Some(exit);
            }
            // Members other than the leader are only reaped after the leader was, so that tokio
            // keeps the leader's exit status.
            if status.is_some() {
                reap_adopted(self.pid);
            }
            if status.is_some() && !group_exists(self.pid) {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(POLL_INTERVAL).await;
        }
    }
}

/// Reaps every exited member of group `pgid` that is a child of this process (members adopted
/// through [`adopt_orphans`]).
fn reap_adopted(pgid: u32) {
    let Ok(raw) = i32::try_from(pgid) else {
        return;
    };
    loop {
        match waitpid(Pid::from_raw(-raw), Some(WaitPidFlag::WNOHANG)) {
            Ok(nix::sys::wait::WaitStatus::StillAlive) | Err(_) => return,
            Ok(_) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(script: &str) -> ChildSpec {
        ChildSpec::new("sh", "/bin/sh").arg("-c").arg(script)
    }

    #[tokio::test]
    async fn lines_round_trip_through_a_child_and_are_logged() {
        let log = WireLog::new();
        let mut child =
            spawn(sh("read line; echo \"got $line\"; echo oops >&2").wire_log(log.clone()))
                .unwrap();
        child.send_line("hello").await.unwrap();
        assert_eq!(
            child.next_line().await.unwrap().as_deref(),
            Some("got hello")
        );
        assert_eq!(child.next_stderr_line().await.as_deref(), Some("oops"));
        assert_eq!(child.next_line().await.unwrap(), None);
        let status = child.wait().await.unwrap();
        assert!(status.success());
        let termination = child.shutdown().await.unwrap();
        assert!(termination.exited_before_teardown);
        assert!(termination.group_gone);
        let rendered = log.render();
        assert!(rendered.contains("sh out hello"), "{rendered}");
        assert!(rendered.contains("sh in got hello"), "{rendered}");
        assert!(rendered.contains("sh/stderr in oops"), "{rendered}");
    }

    #[tokio::test]
    async fn shutdown_kills_a_group_that_ignores_sigterm() {
        adopt_orphans();
        let mut child = spawn(
            sh("trap '' TERM; (trap '' TERM; sleep 600) & echo ready; wait")
                .grace(Duration::from_millis(200)),
        )
        .unwrap();
        assert_eq!(child.next_line().await.unwrap().as_deref(), Some("ready"));
        let pid = child.pid();
        assert!(group_exists(pid));
        let termination = child.shutdown().await.unwrap();
        assert!(termination.sent_term);
        assert!(termination.sent_kill);
        assert!(termination.group_gone, "{termination}");
        assert!(!group_exists(pid));
    }

    #[tokio::test]
    async fn tracker_tears_down_children_whose_owner_dropped_them() {
        adopt_orphans();
        let tracker = ProcessTracker::new();
        let mut child = spawn(sh("sleep 600 & echo ready; wait").tracker(tracker.clone())).unwrap();
        assert_eq!(child.next_line().await.unwrap().as_deref(), Some("ready"));
        let pid = child.pid();
        drop(child);
        let report = tracker.shutdown_all().await;
        assert_eq!(report.len(), 1);
        assert!(report[0].group_gone, "{}", report[0]);
        assert!(!group_exists(pid));
        assert!(!process_exists(pid));
    }

    #[tokio::test]
    async fn dropping_a_child_ends_its_group_in_the_background() {
        adopt_orphans();
        let mut child = spawn(sh("sleep 600 & echo ready; wait")).unwrap();
        assert_eq!(child.next_line().await.unwrap().as_deref(), Some("ready"));
        let pid = child.pid();
        drop(child);
        let deadline = Instant::now() + Duration::from_secs(10);
        while group_exists(pid) && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert!(!group_exists(pid), "the group of a dropped child survived");
    }

    #[tokio::test]
    async fn a_missing_program_is_a_spawn_error() {
        let err = spawn(ChildSpec::new("x", "/nonexistent/ski-no-such-program")).unwrap_err();
        assert!(matches!(err, ChildError::Spawn { .. }), "{err}");
        assert!(err.to_string().starts_with("cannot start"));
    }
}
