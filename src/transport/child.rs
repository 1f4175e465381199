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
//! - A process that leaves its group (`setsid`, `setpgid`) escapes the group signal. A
//!   [`ProcessTracker`] still finds it: every child spawned with one carries the tracker's mark in
//!   its environment ([`TRACKER_MARK_VAR`]), inherited by its descendants, and the tracker's
//!   teardown kills every process that carries it. A descendant that clears its environment and
//!   leaves the group is the limit.
//!
//! The parts: [`ChildSpec`] (what to start, `spec`), [`spawn`] (starting it, `spawn`),
//! [`ProcessTracker`] and the group probes (which groups are alive, `tracker`), the one reader
//! of `/proc` ([`procfs`]), the supervisor task (waiting, the group's teardown, reaping,
//! `supervisor`), [`Watched`] (a child whose output is collected in the background, `watch`);
//! this module holds the [`Child`] handle itself and its errors.

pub mod procfs;
mod spawn;
mod spec;
mod supervisor;
mod tracker;
mod watch;

use std::fmt;
use std::io;
use std::process::ExitStatus;
use std::sync::Arc;
use std::time::Duration;

use nix::sys::signal::Signal;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

pub(crate) use spawn::StderrLines;
use tokio::process::{ChildStdin, ChildStdout};

pub use spawn::spawn;
pub use spec::ChildSpec;
pub use tracker::{
    ProcessTracker, TRACKER_MARK_VAR, adopt_orphans, group_alive, group_exists, process_exists,
    reap_adopted_orphans,
};
pub use watch::Watched;

use super::{Direction, LoggedRead, LoggedWrite, WireLog};
use supervisor::send_group;
use tracker::Group;

/// The longest line of a child's stdout or stderr that [`Child`] hands out; the rest of a longer
/// line is dropped (the same limit as `jsonrpc::framing`'s default).
pub const MAX_LINE_BYTES: usize = crate::jsonrpc::framing::DEFAULT_MAX_LINE_BYTES;

/// The most stderr text that waits for a reader of [`Child::next_stderr_line`]; lines past it
/// are only in the wire log (a note says how many), so a child flooding stderr that nobody reads
/// costs this much at most.
pub const MAX_STDERR_QUEUE_BYTES: usize = 8 * 1024 * 1024;

/// How long a group gets between SIGTERM and SIGKILL unless the spec says otherwise.
pub const DEFAULT_GRACE: Duration = Duration::from_secs(3);

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
    /// How many bytes of the line in `stdout_partial` were dropped over [`MAX_LINE_BYTES`].
    stdout_cut: usize,
    stderr: Option<StderrLines>,
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

/// Reads the rest of one line into `buf`, keeping at most [`MAX_LINE_BYTES`] of it and counting
/// what it drops in `cut`. Answers `false` at end of stream with nothing read. Cancel-safe: what
/// was read stays in `buf` and `cut` for the next call.
async fn read_line_capped<R: tokio::io::AsyncBufRead + Unpin>(
    reader: &mut R,
    buf: &mut Vec<u8>,
    cut: &mut usize,
) -> io::Result<bool> {
    loop {
        let available = reader.fill_buf().await?;
        if available.is_empty() {
            return Ok(!buf.is_empty() || *cut > 0);
        }
        let (part, done) = match memchr::memchr(b'\n', available) {
            Some(newline) => (&available[..=newline], true),
            None => (available, false),
        };
        let room = MAX_LINE_BYTES.saturating_sub(buf.len());
        let keep = part.len().min(room);
        buf.extend_from_slice(&part[..keep]);
        // The terminator of a cut line is not counted as dropped text.
        *cut += part.len() - keep - usize::from(done && keep < part.len());
        let used = part.len();
        reader.consume(used);
        if done {
            return Ok(true);
        }
    }
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
    /// A line longer than [`MAX_LINE_BYTES`] is cut there (the wire log says how much was
    /// dropped), so a child that never ends its line cannot grow this process without end;
    /// invalid UTF-8 is replaced.
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
        let read = read_line_capped(stdout, &mut self.stdout_partial, &mut self.stdout_cut)
            .await
            .map_err(|source| ChildError::Io {
                name: self.name.clone(),
                source,
            })?;
        if !read {
            if let Some(log) = &self.wire {
                log.note(&self.name, "stdout closed");
            }
            return Ok(None);
        }
        Ok(Some(self.take_stdout_line()))
    }

    /// The stdout line [`read_line_capped`] completed, recorded in the wire log (with a note when
    /// it was cut).
    fn take_stdout_line(&mut self) -> String {
        let line = trim_line(&std::mem::take(&mut self.stdout_partial));
        let cut = std::mem::take(&mut self.stdout_cut);
        if let Some(log) = &self.wire {
            log.record(&self.name, Direction::In, &line);
            if cut > 0 {
                log.note(
                    &self.name,
                    &format!("the line above was cut: {cut} more bytes over the {MAX_LINE_BYTES}-byte limit were dropped"),
                );
            }
        }
        line
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
            let cut = &mut self.stdout_cut;
            let stdout = self.stdout.as_mut();
            let stderr = self.stderr.as_mut();
            tokio::select! {
                read = async { read_line_capped(stdout?, buf, cut).await.ok() }, if stdout_open => {
                    match read {
                        Some(true) => {
                            return Some((OutputStream::Stdout, self.take_stdout_line()));
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

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::time::Instant;

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
    async fn a_line_over_the_limit_is_cut_and_the_next_line_is_whole() {
        let log = WireLog::new();
        let over = MAX_LINE_BYTES + 4096;
        let script = format!("head -c {over} /dev/zero | tr '\\0' x; echo; echo next");
        let mut child = spawn(sh(&script).wire_log(log.clone())).unwrap();
        let line = child.next_line().await.unwrap().expect("the long line");
        assert_eq!(line.len(), MAX_LINE_BYTES);
        assert_eq!(child.next_line().await.unwrap().as_deref(), Some("next"));
        let rendered = log.render();
        assert!(
            rendered.contains("4096 more bytes over the"),
            "{}",
            rendered
                .lines()
                .filter(|l| l.len() < 400)
                .collect::<Vec<_>>()
                .join("\n")
        );
        child.shutdown().await.unwrap();
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
