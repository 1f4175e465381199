//! A child whose output is collected in the background: its stdout and stderr lines kept in
//! order, waiters woken on every new line, the first line that says "ready" handed over once,
//! and one signal that ends it (the group's teardown, then the exit code).

use std::sync::{Arc, Mutex, PoisonError};

use nix::sys::signal::Signal;
use tokio::sync::{Notify, oneshot};
use tokio::task::JoinHandle;

use super::{Child, OutputStream};

/// A running child whose output a background task collects.
///
/// Dropping it sends SIGTERM to the child's group; [`Watched::end`] sends any signal and waits
/// for the exit code.
pub struct Watched {
    pid: u32,
    output: Arc<Output>,
    stop: Option<oneshot::Sender<Signal>>,
    done: Option<JoinHandle<Option<i32>>>,
}

/// The lines seen so far, and the wake-up for those who wait on them.
#[derive(Default)]
struct Output {
    stdout: Mutex<Vec<String>>,
    stderr: Mutex<Vec<String>>,
    changed: Notify,
}

impl Output {
    fn push(&self, stream: OutputStream, line: String) {
        let lines = match stream {
            OutputStream::Stdout => &self.stdout,
            OutputStream::Stderr => &self.stderr,
        };
        lines
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(line);
        self.changed.notify_waiters();
    }
}

impl Watched {
    /// Starts collecting `child`'s output. The receiver gets the first stdout line for which
    /// `is_ready` holds; it is dropped unanswered when the child ends without one.
    pub fn start(
        mut child: Child,
        is_ready: impl Fn(&str) -> bool + Send + 'static,
    ) -> (Watched, oneshot::Receiver<String>) {
        let pid = child.pid();
        let output = Arc::new(Output::default());
        let (ready_tx, ready_rx) = oneshot::channel();
        let (stop_tx, mut stop_rx) = oneshot::channel::<Signal>();
        let collected = output.clone();
        let done = tokio::spawn(async move {
            let mut ready_tx = Some(ready_tx);
            let mut stopping = false;
            loop {
                tokio::select! {
                    line = child.next_output_line() => match line {
                        Some((stream, line)) => {
                            if stream == OutputStream::Stdout
                                && ready_tx.is_some()
                                && is_ready(&line)
                                && let Some(tx) = ready_tx.take()
                            {
                                let _ = tx.send(line.clone());
                            }
                            collected.push(stream, line);
                        }
                        None => break,
                    },
                    signal = &mut stop_rx, if !stopping => {
                        stopping = true;
                        let _ = child.signal_group(signal.unwrap_or(Signal::SIGTERM));
                    }
                }
            }
            child.wait().await.ok().and_then(|status| status.code())
        });
        let watched = Watched {
            pid,
            output,
            stop: Some(stop_tx),
            done: Some(done),
        };
        (watched, ready_rx)
    }

    /// The child's process id (it leads its own process group).
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// Every line of `stream` so far.
    pub fn lines(&self, stream: OutputStream) -> Vec<String> {
        let lines = match stream {
            OutputStream::Stdout => &self.output.stdout,
            OutputStream::Stderr => &self.output.stderr,
        };
        lines.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// Every stdout line so far.
    pub fn stdout(&self) -> Vec<String> {
        self.lines(OutputStream::Stdout)
    }

    /// Every stderr line so far.
    pub fn stderr(&self) -> Vec<String> {
        self.lines(OutputStream::Stderr)
    }

    /// Waits until `find` answers something for the lines of `stream` seen so far (it is asked
    /// again after every new line). It waits without end: callers bound it with their own
    /// timeout.
    pub async fn until<T>(
        &self,
        stream: OutputStream,
        mut find: impl FnMut(&[String]) -> Option<T>,
    ) -> T {
        loop {
            let changed = self.output.changed.notified();
            if let Some(found) = find(&self.lines(stream)) {
                return found;
            }
            changed.await;
        }
    }

    /// [`Watched::until`] on stderr.
    pub async fn until_stderr<T>(&self, find: impl FnMut(&[String]) -> Option<T>) -> T {
        self.until(OutputStream::Stderr, find).await
    }

    /// Sends `signal` to the child's group and waits until the child has ended and its output
    /// is read; answers the exit code (`None` when a signal ended it). Callers bound the wait.
    pub async fn end(mut self, signal: Signal) -> Option<i32> {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(signal);
        }
        match self.done.take() {
            Some(done) => done.await.ok().flatten(),
            None => None,
        }
    }
}

impl Drop for Watched {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(Signal::SIGTERM);
        }
    }
}
