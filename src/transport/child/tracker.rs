//! Which children and process groups are alive: the state one child's group shares between its
//! [`Child`](super::Child), its supervisor and any [`ProcessTracker`], the tracker that tears
//! every group it has seen down, and the probes of whether a group or process still exists.

use std::process::ExitStatus;
use std::sync::{Arc, Mutex};

use nix::errno::Errno;
use nix::sys::signal::killpg;
use nix::unistd::Pid;
use tokio::sync::{mpsc, watch};

use super::{ChildError, Termination};

/// The shared state of one child's process group.
#[derive(Debug)]
pub(super) struct Group {
    pub(super) name: String,
    pub(super) pid: u32,
    pub(super) status: watch::Receiver<Option<ExitStatus>>,
    pub(super) done: watch::Receiver<Option<Termination>>,
    pub(super) teardown: mpsc::UnboundedSender<()>,
}

impl Group {
    pub(super) fn request_teardown(&self) {
        // A closed channel means the supervisor already finished; nothing is left to do.
        let _ = self.teardown.send(());
    }

    pub(super) async fn finished(&self) -> Result<Termination, ChildError> {
        let mut done = self.done.clone();
        let result = done.wait_for(Option::is_some).await;
        match result {
            Ok(termination) => termination.clone().ok_or_else(|| self.gone()),
            Err(_) => Err(self.gone()),
        }
    }

    pub(super) fn gone(&self) -> ChildError {
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

    pub(super) fn add(&self, group: Arc<Group>) {
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
