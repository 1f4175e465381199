//! What to start: the program, its arguments, environment and working directory, the grace
//! period of its teardown, and where it is recorded ([`WireLog`]) and tracked
//! ([`ProcessTracker`]).

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::{DEFAULT_GRACE, ProcessTracker};
use crate::transport::WireLog;

/// What to start and how: program, arguments, environment, working directory, grace period,
/// and where to record and track it.
#[derive(Debug, Clone)]
pub struct ChildSpec {
    pub(super) name: String,
    pub(super) program: OsString,
    pub(super) args: Vec<OsString>,
    pub(super) env: Vec<(OsString, Option<OsString>)>,
    pub(super) env_clear: bool,
    pub(super) cwd: Option<PathBuf>,
    pub(super) grace: Duration,
    pub(super) wire: Option<WireLog>,
    pub(super) tracker: Option<ProcessTracker>,
    pub(super) die_with_parent: bool,
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
