//! The task that owns the operating-system child: it waits for the leader's exit, ends the
//! whole process group at teardown (SIGTERM, the grace period, SIGKILL), reaps the leader and
//! any adopted member, and reports the [`Termination`].

use std::process::ExitStatus;
use std::time::Duration;

use nix::errno::Errno;
use nix::sys::signal::{Signal, killpg};
use nix::sys::wait::{WaitPidFlag, waitpid};
use nix::unistd::Pid;
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

use super::{Termination, group_alive, group_exists};
use crate::transport::WireLog;

/// How long teardown waits, after SIGKILL, for the group to disappear before reporting it.
const KILL_DEADLINE: Duration = Duration::from_secs(10);

/// How often teardown looks whether the group is gone.
const POLL_INTERVAL: Duration = Duration::from_millis(5);

pub(super) fn send_group(pid: u32, signal: Signal) -> Result<(), Errno> {
    let raw = i32::try_from(pid).map_err(|_| Errno::EINVAL)?;
    match killpg(Pid::from_raw(raw), signal) {
        Ok(()) | Err(Errno::ESRCH) => Ok(()),
        Err(errno) => Err(errno),
    }
}

/// Sends SIGKILL to a group when dropped while armed: the last resort if the supervisor task is
/// dropped before it finished (its runtime shut down).
struct KillGuard {
    pub(super) pid: u32,
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
pub(super) struct Supervisor {
    pub(super) name: String,
    pub(super) pid: u32,
    pub(super) grace: Duration,
    pub(super) wire: Option<WireLog>,
    pub(super) status: watch::Sender<Option<ExitStatus>>,
    pub(super) done: watch::Sender<Option<Termination>>,
}

impl Supervisor {
    fn note(&self, text: &str) {
        if let Some(log) = &self.wire {
            log.note(&self.name, text);
        }
    }

    pub(super) async fn run(
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
                // Zombies left at the deadline belong to parents outside the group (whose
                // reaping is theirs): a group with no live member is gone, not "survived".
                return status.is_some() && !group_alive(self.pid);
            }
            tokio::time::sleep(POLL_INTERVAL).await;
        }
    }
}

/// Reaps every exited member of group `pgid` that is a child of this process (members adopted
/// through [`adopt_orphans`](super::adopt_orphans)).
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
