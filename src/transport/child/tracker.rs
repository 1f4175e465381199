//! Which children and process groups are alive: the state one child's group shares between its
//! [`Child`](super::Child), its supervisor and any [`ProcessTracker`], the tracker that tears
//! every group it has seen down, and the probes of whether a group or process still exists.

use std::process::ExitStatus;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use nix::errno::Errno;
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use tokio::sync::{mpsc, watch};

use super::procfs::{self, ProcessInfo};
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

/// The environment variable that carries a tracker's mark into every child spawned with it, and
/// from there into their descendants, so that those that leave the child's process group
/// (`setsid`, `setpgid`) are still found and ended by [`ProcessTracker::shutdown_all`].
pub const TRACKER_MARK_VAR: &str = "SKI_TRACKER_MARK";

/// Tells the marks of this process's trackers apart.
static NEXT_MARK: AtomicU64 = AtomicU64::new(1);

/// Keeps track of every child spawned with it, to tear them all down and prove they are gone.
///
/// Cloning gives another handle to the same set.
#[derive(Debug, Clone)]
pub struct ProcessTracker {
    groups: Arc<Mutex<Vec<Arc<Group>>>>,
    mark: Arc<str>,
}

impl Default for ProcessTracker {
    fn default() -> Self {
        Self {
            groups: Arc::default(),
            mark: format!(
                "{}-{}",
                std::process::id(),
                NEXT_MARK.fetch_add(1, Ordering::Relaxed)
            )
            .into(),
        }
    }
}

impl ProcessTracker {
    /// An empty tracker with a mark of its own.
    pub fn new() -> Self {
        Self::default()
    }

    /// The value of [`TRACKER_MARK_VAR`] in the environment of the children spawned with it.
    pub fn mark(&self) -> &str {
        &self.mark
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
        report.extend(end_marked(&self.mark).await);
        report
    }
}

/// How long [`end_marked`] waits for the processes it killed to be gone.
const ESCAPED_WAIT: Duration = Duration::from_secs(5);

/// Ends every process that still carries `mark` in its environment (descendants of a torn-down
/// group that left it) with SIGKILL and waits until each is gone or a zombie; one
/// [`Termination`] each, `group_gone` false for a survivor.
async fn end_marked(mark: &str) -> Vec<Termination> {
    let me = std::process::id() as i32;
    let marked: Vec<ProcessInfo> = procfs::all()
        .into_iter()
        .filter(|p| p.pid != me && !p.has_exited() && carries(p.pid, mark))
        .collect();
    for process in &marked {
        let _ = nix::sys::signal::kill(Pid::from_raw(process.pid), Signal::SIGKILL);
    }
    let deadline = tokio::time::Instant::now() + ESCAPED_WAIT;
    // Gone, or a zombie of another parent (its reaping is that parent's business); a zombie this
    // process adopted as a child subreaper is reaped here, as it is no child tokio waits for.
    let alive = |pid: i32| {
        procfs::all().iter().any(|p| {
            if p.pid != pid {
                return false;
            }
            if p.has_exited() {
                if p.ppid == me {
                    let _ = nix::sys::wait::waitpid(
                        Pid::from_raw(pid),
                        Some(nix::sys::wait::WaitPidFlag::WNOHANG),
                    );
                }
                return false;
            }
            true
        })
    };
    while marked.iter().any(|p| alive(p.pid)) && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    marked
        .iter()
        .map(|p| Termination {
            name: format!("a descendant that left its group ({})", command_name(p.pid)),
            pid: p.pid as u32,
            status: None,
            exited_before_teardown: false,
            sent_term: false,
            sent_kill: true,
            group_gone: !alive(p.pid),
        })
        .collect()
}

/// Whether process `pid`'s environment holds `TRACKER_MARK_VAR=mark`.
fn carries(pid: i32, mark: &str) -> bool {
    procfs::environ_holds(pid, &format!("{TRACKER_MARK_VAR}={mark}"))
}

/// The command name of process `pid`, as `/proc` gives it.
fn command_name(pid: i32) -> String {
    procfs::process(pid).map_or_else(|| format!("pid {pid}"), |p| p.name)
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

/// Whether a process group with this id has a member that is not a zombie (state `Z` or `X`).
///
/// Unlike [`group_exists`], a group whose members have all exited but are not yet reaped counts
/// as gone: their reaping is their parent's business, not the group's. Where `/proc` cannot be
/// read this falls back to [`group_exists`].
pub fn group_alive(pgid: u32) -> bool {
    let Ok(raw) = i32::try_from(pgid) else {
        return false;
    };
    if raw <= 1 {
        return false;
    }
    if !procfs::readable() {
        return group_exists(pgid);
    }
    procfs::all()
        .iter()
        .any(|p| p.pgid == raw && !p.has_exited())
}

/// Reaps the zombie children of this process that are orphans it adopted as a child subreaper
/// ([`adopt_orphans`]): those that are not the leader of their own process group. Every child
/// this process spawns through [`spawn`](super::spawn) leads its own group, and tokio keeps its
/// exit status, so those are left alone. Returns how many were reaped.
pub fn reap_adopted_orphans() -> usize {
    reap_adopted_orphans_where(|_| true)
}

/// [`reap_adopted_orphans`], limited to the orphans `include` accepts.
fn reap_adopted_orphans_where(include: impl Fn(&ProcessInfo) -> bool) -> usize {
    let me = std::process::id() as i32;
    let mut reaped = 0;
    for orphan in procfs::all()
        .into_iter()
        .filter(|p| p.ppid == me && p.state == 'Z' && p.pgid != p.pid && include(p))
    {
        let flags = Some(nix::sys::wait::WaitPidFlag::WNOHANG);
        if let Ok(status) = nix::sys::wait::waitpid(Pid::from_raw(orphan.pid), flags)
            && status != nix::sys::wait::WaitStatus::StillAlive
        {
            reaped += 1;
        }
    }
    reaped
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A group whose only members are zombies exists for `kill(0)` but is not alive; reaping the
    /// adopted orphan ends it, and the group's leader (spawned here) is left to its own wait.
    #[test]
    fn a_group_of_zombies_is_not_alive_and_adopted_orphans_are_reaped() {
        use std::os::unix::process::CommandExt;
        assert!(adopt_orphans(), "this test needs a child subreaper");
        // The leader starts a member in its group and exits; the member becomes our orphan.
        let mut leader = std::process::Command::new("sh")
            .args(["-c", "true & exit 0"])
            .process_group(0)
            .spawn()
            .expect("sh starts");
        let pgid = leader.id();
        leader.wait().expect("the leader is reaped");
        let me = std::process::id() as i32;
        // Waits (without a deadline: the member's exit is certain) until the orphan is ours and
        // has exited.
        while !procfs::all()
            .iter()
            .any(|p| p.pgid == pgid as i32 && p.ppid == me && p.state == 'Z')
        {
            std::thread::yield_now();
        }
        assert!(group_exists(pgid), "a zombie still counts for kill(0)");
        assert!(!group_alive(pgid), "a group of zombies is not alive");
        // Only this group's orphans: other tests of this binary wait for their own children.
        assert!(reap_adopted_orphans_where(|p| p.pgid == pgid as i32) >= 1);
        assert!(!group_exists(pgid), "the adopted orphan was reaped");
    }
}
