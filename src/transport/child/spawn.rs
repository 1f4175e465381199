//! Starting a child: the operating-system command built from a [`ChildSpec`] (own process
//! group, piped stdio, environment, working directory, parent-death signal), the task that
//! drains its stderr, and the supervisor that owns it from then on.

use std::io;
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use nix::sys::signal::Signal;
use tokio::io::BufReader;
use tokio::process::ChildStderr;
use tokio::sync::{mpsc, watch};

use super::supervisor::Supervisor;
use super::tracker::Group;
use super::{
    Child, ChildError, ChildSpec, MAX_LINE_BYTES, MAX_STDERR_QUEUE_BYTES, read_line_capped,
    trim_line,
};
use crate::transport::{Direction, WireLog};

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
    if let Some(tracker) = &spec.tracker {
        command.env(super::TRACKER_MARK_VAR, tracker.mark());
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
        stdout_cut: 0,
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

/// The stderr lines of a child that wait for [`Child::next_stderr_line`](super::Child), at most
/// [`MAX_STDERR_QUEUE_BYTES`] of them.
#[derive(Debug)]
pub(crate) struct StderrLines {
    lines: mpsc::UnboundedReceiver<String>,
    queued: Arc<AtomicUsize>,
}

impl StderrLines {
    /// The next line; `None` once stderr is closed and drained. Cancel-safe.
    pub(crate) async fn recv(&mut self) -> Option<String> {
        let line = self.lines.recv().await?;
        self.queued.fetch_sub(line.len(), Ordering::Relaxed);
        Some(line)
    }
}

fn drain_stderr(stream: ChildStderr, wire: Option<WireLog>, name: &str) -> StderrLines {
    let (tx, rx) = mpsc::unbounded_channel();
    let queued = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&queued);
    let channel = format!("{name}/stderr");
    tokio::spawn(async move {
        let mut reader = BufReader::new(stream);
        let mut buf = Vec::new();
        let mut dropped = false;
        loop {
            buf.clear();
            let mut cut = 0;
            match read_line_capped(&mut reader, &mut buf, &mut cut).await {
                Ok(false) | Err(_) => break,
                Ok(true) => {
                    let line = trim_line(&buf);
                    if let Some(log) = &wire {
                        log.record(&channel, Direction::In, &line);
                        if cut > 0 {
                            log.note(&channel, &format!("the line above was cut: {cut} more bytes over the {MAX_LINE_BYTES}-byte limit were dropped"));
                        }
                    }
                    if counter.load(Ordering::Relaxed) + line.len() > MAX_STDERR_QUEUE_BYTES {
                        if !dropped && let Some(log) = &wire {
                            log.note(&channel, &format!("nobody reads these lines and {MAX_STDERR_QUEUE_BYTES} bytes wait already: from here on they are only in this log"));
                        }
                        dropped = true;
                        continue;
                    }
                    counter.fetch_add(line.len(), Ordering::Relaxed);
                    // The receiver may be gone when nobody reads stderr; the log still has it.
                    let _ = tx.send(line);
                }
            }
        }
    });
    StderrLines { lines: rx, queued }
}
