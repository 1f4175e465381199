//! Interrupting a run: the first SIGINT or SIGTERM asks the runner to start no more rows and to
//! end the rows in flight (their processes torn down as every row's are, the report written and
//! marked interrupted); a second one kills every process group the run still has, puts back the
//! files rows placed outside their temp dirs ([`crate::placed`]) and exits at once.

use std::sync::{Arc, Mutex, PoisonError};

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use ski::transport::child::ProcessTracker;
use tokio::sync::watch;

/// The exit code of a run stopped by `signal`: 128 plus the signal's number, as a shell reports
/// a process ended by it (130 for SIGINT, 143 for SIGTERM).
pub fn exit_code(signal: Signal) -> u8 {
    u8::try_from(128 + signal as i32).unwrap_or(u8::MAX)
}

/// A signal within this time of the first is the same stop delivered twice (to the process and
/// to its group), not a second signal.
pub const REPEAT_IS_SAME: std::time::Duration = std::time::Duration::from_millis(300);

/// Whether, and by which signal, a run was asked to stop; shared by the runner, its rows and the
/// signal listener. The default is never raised unless [`Interrupt::raise`] is called.
#[derive(Debug, Clone)]
pub struct Interrupt {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    raised: watch::Sender<Option<Signal>>,
    /// The trackers of the rows in flight, for a second signal that cannot wait for teardowns.
    live: Mutex<Vec<ProcessTracker>>,
}

impl Default for Interrupt {
    fn default() -> Self {
        Self {
            inner: Arc::new(Inner {
                raised: watch::channel(None).0,
                live: Mutex::new(Vec::new()),
            }),
        }
    }
}

/// Keeps a row's tracker on the list a second signal kills; dropping it takes it off.
#[derive(Debug)]
pub struct Tracked {
    interrupt: Interrupt,
    mark: String,
}

impl Drop for Tracked {
    fn drop(&mut self) {
        self.interrupt
            .live()
            .retain(|tracker| tracker.mark() != self.mark);
    }
}

impl Interrupt {
    /// A run not interrupted yet.
    pub fn new() -> Self {
        Self::default()
    }

    fn live(&self) -> std::sync::MutexGuard<'_, Vec<ProcessTracker>> {
        self.inner
            .live
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// The signal that stopped the run, if one did.
    pub fn raised(&self) -> Option<Signal> {
        *self.inner.raised.borrow()
    }

    /// Marks the run stopped by `signal` (the first signal wins).
    pub fn raise(&self, signal: Signal) {
        self.inner.raised.send_if_modified(|raised| {
            if raised.is_some() {
                return false;
            }
            *raised = Some(signal);
            true
        });
    }

    /// Resolves once the run is stopped.
    pub async fn stopped(&self) -> Signal {
        let mut receiver = self.inner.raised.subscribe();
        loop {
            if let Some(signal) = *receiver.borrow_and_update() {
                return signal;
            }
            if receiver.changed().await.is_err() {
                // The sender lives as long as `self`: this does not happen.
                std::future::pending::<()>().await;
            }
        }
    }

    /// Puts a row's tracker on the list that a second signal kills, until the guard is dropped.
    pub fn track(&self, tracker: &ProcessTracker) -> Tracked {
        self.live().push(tracker.clone());
        Tracked {
            interrupt: self.clone(),
            mark: tracker.mark().to_owned(),
        }
    }

    /// Sends SIGKILL to every process group of the rows in flight, without waiting.
    pub fn kill_live_groups(&self) -> usize {
        let mut killed = 0;
        for tracker in self.live().iter() {
            for pid in tracker.pids() {
                if let Ok(pgid) = i32::try_from(pid)
                    && killpg(Pid::from_raw(pgid), Signal::SIGKILL).is_ok()
                {
                    killed += 1;
                }
            }
        }
        killed
    }

    /// Listens for SIGINT and SIGTERM on the current runtime: the first raises the interrupt, a
    /// second kills every live process group and exits with [`exit_code`] of the first.
    pub fn listen(&self) -> std::io::Result<tokio::task::JoinHandle<()>> {
        use tokio::signal::unix::{SignalKind, signal};
        let mut interrupt_signal = signal(SignalKind::interrupt())?;
        let mut terminate_signal = signal(SignalKind::terminate())?;
        let interrupt = self.clone();
        Ok(tokio::spawn(async move {
            let mut first_at = None;
            loop {
                let signal = tokio::select! {
                    _ = interrupt_signal.recv() => Signal::SIGINT,
                    _ = terminate_signal.recv() => Signal::SIGTERM,
                };
                match interrupt.raised() {
                    // `timeout` and CI runners signal the process and then its group: the same
                    // stop delivered twice within moments is one signal, not a second one.
                    Some(_)
                        if first_at.is_some_and(|at: std::time::Instant| {
                            at.elapsed() < REPEAT_IS_SAME
                        }) => {}
                    None => {
                        first_at = Some(std::time::Instant::now());
                        eprintln!(
                            "ski-conformance: {signal} received: no more rows start, the rows in flight are ended and the report is written (a second signal ends the run at once)"
                        );
                        interrupt.raise(signal);
                    }
                    Some(first) => {
                        let killed = interrupt.kill_live_groups();
                        let restored = crate::placed::restore_all_now();
                        eprintln!(
                            "ski-conformance: {signal} received again: {killed} process group(s) killed, {restored} placed file(s) put back, no report written"
                        );
                        std::process::exit(i32::from(exit_code(first)));
                    }
                }
            }
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_first_signal_is_kept_and_wakes_every_waiter() {
        let interrupt = Interrupt::new();
        assert_eq!(interrupt.raised(), None);
        let waiter = tokio::spawn({
            let interrupt = interrupt.clone();
            async move { interrupt.stopped().await }
        });
        interrupt.raise(Signal::SIGTERM);
        interrupt.raise(Signal::SIGINT);
        assert_eq!(waiter.await.unwrap(), Signal::SIGTERM);
        assert_eq!(interrupt.raised(), Some(Signal::SIGTERM));
        assert_eq!(exit_code(Signal::SIGTERM), 143);
        assert_eq!(exit_code(Signal::SIGINT), 130);
    }

    #[test]
    fn a_tracker_leaves_the_live_list_with_its_guard() {
        let interrupt = Interrupt::new();
        let first = ProcessTracker::new();
        let second = ProcessTracker::new();
        let kept = interrupt.track(&first);
        {
            let _gone = interrupt.track(&second);
            assert_eq!(interrupt.live().len(), 2);
        }
        assert_eq!(interrupt.live().len(), 1);
        assert_eq!(interrupt.live()[0].mark(), first.mark());
        drop(kept);
        assert!(interrupt.live().is_empty());
    }
}
