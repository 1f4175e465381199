//! kiro-cli's sessions on disk: `$HOME/.kiro/sessions/cli/<id>.json` (the session),
//! `<id>.jsonl` (its history, one message per line) and `<id>.lock` (the PID of the process that
//! holds it). A later process finds a session an earlier one created; a lock whose process is
//! gone is stale and taken over, a live one refuses the load as kiro-cli does.

use std::io::Write;
use std::path::PathBuf;

use serde_json::{Value, json};

/// The directory of the session files, under the current `HOME`.
pub fn dir() -> Option<PathBuf> {
    let home = std::env::var_os("HOME").filter(|h| !h.is_empty())?;
    Some(PathBuf::from(home).join(".kiro/sessions/cli"))
}

/// Whether a session id can name files (no separators, no dots leading anywhere).
fn usable(id: &str) -> bool {
    !id.is_empty()
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

fn path(id: &str, extension: &str) -> Option<PathBuf> {
    usable(id).then(|| dir().map(|d| d.join(format!("{id}.{extension}"))))?
}

/// Writes a new session's files and takes its lock.
pub fn create(id: &str, cwd: Option<&str>, agent: &str) -> std::io::Result<()> {
    let (Some(json_path), Some(history)) = (path(id, "json"), path(id, "jsonl")) else {
        return Ok(());
    };
    if let Some(parent) = json_path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    let session = json!({"sessionId": id, "cwd": cwd, "agentName": agent});
    std::fs::write(&json_path, format!("{session}\n"))?;
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(history)?;
    take_lock(id)
}

/// Appends one message (`user` or `agent`) to a session's history file, if the session is on
/// disk.
pub fn append(id: &str, role: &str, text: &str) {
    let Some(history) = path(id, "jsonl") else {
        return;
    };
    if !history.exists() {
        return;
    }
    if let Ok(mut file) = std::fs::OpenOptions::new().append(true).open(&history) {
        let _ = writeln!(file, "{}", json!({"role": role, "text": text}));
    }
}

/// A session read from disk.
#[derive(Debug, Clone, PartialEq)]
pub struct Stored {
    /// Its working directory.
    pub cwd: Option<String>,
    /// Its messages in order: (`user` or `agent`, text).
    pub history: Vec<(String, String)>,
}

/// Reads a session's files; `None` when it was never created.
pub fn read(id: &str) -> Option<Stored> {
    let text = std::fs::read_to_string(path(id, "json")?).ok()?;
    let session: Value = serde_json::from_str(&text).ok()?;
    let history = std::fs::read_to_string(path(id, "jsonl")?)
        .unwrap_or_default()
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter_map(|m| {
            Some((
                m.get("role")?.as_str()?.to_owned(),
                m.get("text")?.as_str()?.to_owned(),
            ))
        })
        .collect();
    Some(Stored {
        cwd: session
            .get("cwd")
            .and_then(Value::as_str)
            .map(str::to_owned),
        history,
    })
}

/// Who holds a session's lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lock {
    /// Nobody, or this process.
    Free,
    /// A process that no longer exists.
    Stale(u32),
    /// Another live process.
    Held(u32),
}

/// The state of a session's lock.
pub fn lock(id: &str) -> Lock {
    let Some(lock) = path(id, "lock") else {
        return Lock::Free;
    };
    let Ok(text) = std::fs::read_to_string(lock) else {
        return Lock::Free;
    };
    let Ok(pid) = text.trim().parse::<u32>() else {
        return Lock::Free;
    };
    if pid == std::process::id() {
        Lock::Free
    } else if alive(pid) {
        Lock::Held(pid)
    } else {
        Lock::Stale(pid)
    }
}

fn alive(pid: u32) -> bool {
    let Ok(raw) = i32::try_from(pid) else {
        return false;
    };
    !matches!(
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(raw), None),
        Err(nix::errno::Errno::ESRCH)
    )
}

/// Writes this process's PID into the session's lock file.
pub fn take_lock(id: &str) -> std::io::Result<()> {
    match path(id, "lock") {
        Some(lock) => std::fs::write(lock, format!("{}\n", std::process::id())),
        None => Ok(()),
    }
}

/// Removes the session's lock file if this process holds it (at a clean exit).
pub fn release(id: &str) {
    if let Some(lock) = path(id, "lock")
        && std::fs::read_to_string(&lock)
            .is_ok_and(|pid| pid.trim() == std::process::id().to_string())
    {
        let _ = std::fs::remove_file(lock);
    }
}

/// The error data kiro-cli gives when another process holds the session.
pub fn active_elsewhere(pid: u32) -> String {
    format!("Failed to start session: Session is active in another process (PID {pid})")
}
