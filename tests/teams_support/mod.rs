//! Helpers of the `ski teams` tests: a teams root in a temp dir, commands run as real processes,
//! and gated processes whose stderr events are watched from a thread. Every child runs in its own
//! process group and is killed with it when its guard drops.

use std::io::{BufRead, BufReader, Read};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::thread;

use serde_json::Value;

/// The lead's session key in every test.
pub const LEAD: &str = "agent:main:main";

/// A teams root in a temp dir.
pub struct Root {
    pub dir: tempfile::TempDir,
    pub root: PathBuf,
}

impl Root {
    pub fn new() -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let root = dir.path().join("teams");
        Self { dir, root }
    }

    pub fn command(&self, caller: &str, args: &[&str]) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_ski"));
        command
            .arg("teams")
            .arg("--root")
            .arg(&self.root)
            .arg("--as")
            .arg(caller)
            .args(args)
            .env_remove("SKI_TEAMS_NOW_MS")
            .env_remove("SKI_TEAMS_AS")
            .process_group(0);
        command
    }

    /// Runs one command to the end; returns the exit code and stdout as JSON.
    pub fn run(&self, caller: &str, args: &[&str]) -> (i32, Value) {
        let output = self.output(caller, args);
        let code = output.status.code().unwrap_or(-1);
        let value = serde_json::from_slice(&output.stdout).unwrap_or_else(|_| {
            panic!(
                "ski teams {args:?} printed no JSON (exit {code}): {}{}",
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            )
        });
        (code, value)
    }

    pub fn output(&self, caller: &str, args: &[&str]) -> Output {
        self.command(caller, args)
            .stdin(Stdio::null())
            .output()
            .expect("run ski teams")
    }

    /// Runs a command that must succeed.
    pub fn ok(&self, caller: &str, args: &[&str]) -> Value {
        let (code, value) = self.run(caller, args);
        assert_eq!(code, 0, "ski teams {args:?} failed: {value}");
        value
    }

    /// A team `name` led by [`LEAD`] with members joined under `keys`.
    pub fn team_with(&self, name: &str, keys: &[String]) {
        self.ok(LEAD, &["team", "create", name]);
        for (i, key) in keys.iter().enumerate() {
            let member = format!("m{i}");
            self.ok(key, &["member", "join", name, &member]);
        }
    }

    pub fn ledger(&self, team: &str) -> PathBuf {
        self.root.join(team).join("ledger.db")
    }
}

/// A stderr line of a gated process, or its end.
#[derive(Debug)]
pub enum Event {
    Line(usize, String),
    Closed(usize),
}

/// A running child killed with its process group on drop.
pub struct Guarded {
    pub child: Child,
}

impl Drop for Guarded {
    fn drop(&mut self) {
        if let Ok(pid) = i32::try_from(self.child.id()) {
            let _ = nix::sys::signal::killpg(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
        let _ = self.child.wait();
    }
}

/// Starts `command` with piped stdin and stdout, forwarding each stderr line as an event.
pub fn spawn_watched(mut command: Command, index: usize, events: &mpsc::Sender<Event>) -> Guarded {
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn ski teams");
    let stderr = child.stderr.take().expect("stderr");
    let events = events.clone();
    thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if events.send(Event::Line(index, line)).is_err() {
                return;
            }
        }
        let _ = events.send(Event::Closed(index));
    });
    Guarded { child }
}

/// Waits for the child and parses its stdout as JSON.
pub fn finish(mut guarded: Guarded) -> (i32, Value) {
    let mut stdout = String::new();
    if let Some(mut out) = guarded.child.stdout.take() {
        out.read_to_string(&mut stdout).expect("read stdout");
    }
    let status = guarded.child.wait().expect("wait");
    let value = serde_json::from_str(stdout.trim())
        .unwrap_or_else(|_| panic!("no JSON on stdout: {stdout:?}"));
    (status.code().unwrap_or(-1), value)
}

/// Whether a stderr line is the event `name`.
pub fn is_event(line: &str, name: &str) -> bool {
    serde_json::from_str::<Value>(line)
        .ok()
        .is_some_and(|v| v["event"] == name)
}
