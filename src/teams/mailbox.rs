//! Inboxes: `inbox/<sanitised key>/messages.jsonl`, one JSON message per line.
//!
//! Appends and drains take the same exclusive lock (`flock` on `inbox/<key>/.lock`, E-TEAM-10).
//! An append is one `write(2)` of the whole line on a file opened with `O_APPEND`, so a line is
//! whole or absent; a drain reads and unlinks under the lock, so a message sent during a drain
//! waits for the next one and none is lost. A line that does not parse (a writer killed mid-write)
//! is moved to `messages.jsonl.bad` and never blocks the inbox.

use std::fs::{self, DirBuilder, OpenOptions};
use std::io::{ErrorKind, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::error::{TeamsError, TeamsResult};
use crate::storage::file_lock::FileLock;

/// The file of an inbox's messages.
pub const MESSAGES_FILE: &str = "messages.jsonl";
/// Where lines that do not parse are kept.
pub const QUARANTINE_FILE: &str = "messages.jsonl.bad";
/// The lock file shared by appends and drains.
pub const LOCK_FILE: &str = ".lock";
/// The size bound of one inbox file; a send past it is refused (`inbox_full`).
pub const MAX_INBOX_BYTES: u64 = 64 * 1024 * 1024;

/// The kind of a message (the document's `MessageType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MessageKind {
    /// A direct message.
    Message,
    /// One copy per member except the sender.
    Broadcast,
    /// The lead asks a member to stop.
    ShutdownRequest,
    /// A member's answer to a shutdown request.
    ShutdownResponse,
    /// A status update.
    Idle,
}

impl MessageKind {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Message => "message",
            Self::Broadcast => "broadcast",
            Self::ShutdownRequest => "shutdown_request",
            Self::ShutdownResponse => "shutdown_response",
            Self::Idle => "idle",
        }
    }

    /// Parses a wire name.
    pub fn parse(text: &str) -> Option<Self> {
        [
            Self::Message,
            Self::Broadcast,
            Self::ShutdownRequest,
            Self::ShutdownResponse,
            Self::Idle,
        ]
        .into_iter()
        .find(|kind| kind.as_str() == text)
    }
}

/// One message line (E-TEAM-07).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Message {
    /// A random UUID.
    pub id: String,
    /// The message kind.
    #[serde(rename = "type")]
    pub kind: MessageKind,
    /// The sender's session key.
    pub from: String,
    /// The recipient's session key.
    pub to: String,
    /// The text.
    pub content: String,
    /// A short summary.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
    /// Epoch milliseconds.
    pub timestamp: i64,
    /// The shutdown request this message belongs to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
    /// A shutdown response's answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approve: Option<bool>,
    /// A shutdown response's reason.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// The inbox directory of one sanitised key under a team directory.
pub fn inbox_dir(team_dir: &Path, inbox_key: &str) -> PathBuf {
    team_dir.join("inbox").join(inbox_key)
}

fn lock(dir: &Path) -> TeamsResult<FileLock> {
    FileLock::exclusive(&dir.join(LOCK_FILE))
        .map_err(|e| TeamsError::storage(format!("locking inbox {}", dir.display()), e))
}

/// Appends one message to the inbox in `dir` (created when missing) as one write of one line.
pub fn append(dir: &Path, message: &Message) -> TeamsResult<()> {
    let mut line = serde_json::to_vec(message)
        .map_err(|e| TeamsError::InvalidArgument(format!("message cannot be encoded: {e}")))?;
    line.push(b'\n');
    DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|e| TeamsError::storage(format!("creating inbox {}", dir.display()), e))?;
    let _guard = lock(dir)?;
    let path = dir.join(MESSAGES_FILE);
    let size = match fs::metadata(&path) {
        Ok(meta) => meta.len(),
        Err(e) if e.kind() == ErrorKind::NotFound => 0,
        Err(e) => {
            return Err(TeamsError::storage(
                format!("reading {}", path.display()),
                e,
            ));
        }
    };
    if size + line.len() as u64 > MAX_INBOX_BYTES {
        return Err(TeamsError::InboxFull(message.to.clone()));
    }
    let mut file = OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(&path)
        .map_err(|e| TeamsError::storage(format!("opening {}", path.display()), e))?;
    file.write_all(&line)
        .map_err(|e| TeamsError::storage(format!("appending to {}", path.display()), e))
}

/// Reads the inbox in `dir`; with `drain`, removes exactly what it returns, under the lock.
pub fn read(dir: &Path, drain: bool) -> TeamsResult<Vec<Message>> {
    if !dir.is_dir() {
        return Ok(Vec::new());
    }
    let _guard = lock(dir)?;
    let path = dir.join(MESSAGES_FILE);
    let bytes = match fs::read(&path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => {
            return Err(TeamsError::storage(
                format!("reading {}", path.display()),
                e,
            ));
        }
    };
    let mut messages = Vec::new();
    let mut bad = Vec::new();
    for line in bytes.split(|b| *b == b'\n') {
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        match serde_json::from_slice::<Message>(line) {
            Ok(message) => messages.push(message),
            Err(_) => {
                bad.extend_from_slice(line);
                bad.push(b'\n');
            }
        }
    }
    if drain {
        if !bad.is_empty() {
            let quarantine = dir.join(QUARANTINE_FILE);
            OpenOptions::new()
                .create(true)
                .append(true)
                .mode(0o600)
                .open(&quarantine)
                .and_then(|mut f| f.write_all(&bad))
                .map_err(|e| TeamsError::storage(format!("writing {}", quarantine.display()), e))?;
        }
        fs::remove_file(&path)
            .map_err(|e| TeamsError::storage(format!("removing {}", path.display()), e))?;
    }
    Ok(messages)
}

/// Removes the messages of the inbox in `dir` stamped before `cutoff_ms`, under the lock; lines
/// that do not parse go to the quarantine file. Returns how many messages were removed.
pub fn prune(dir: &Path, cutoff_ms: i64) -> TeamsResult<usize> {
    if !dir.is_dir() {
        return Ok(0);
    }
    let _guard = lock(dir)?;
    let path = dir.join(MESSAGES_FILE);
    let bytes = match fs::read(&path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(0),
        Err(e) => {
            return Err(TeamsError::storage(
                format!("reading {}", path.display()),
                e,
            ));
        }
    };
    let mut kept = Vec::new();
    let mut bad = Vec::new();
    let mut removed = 0;
    for line in bytes.split(|b| *b == b'\n') {
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        match serde_json::from_slice::<Message>(line) {
            Ok(message) if message.timestamp < cutoff_ms => removed += 1,
            Ok(_) => {
                kept.extend_from_slice(line);
                kept.push(b'\n');
            }
            Err(_) => {
                bad.extend_from_slice(line);
                bad.push(b'\n');
            }
        }
    }
    if !bad.is_empty() {
        let quarantine = dir.join(QUARANTINE_FILE);
        OpenOptions::new()
            .create(true)
            .append(true)
            .mode(0o600)
            .open(&quarantine)
            .and_then(|mut f| f.write_all(&bad))
            .map_err(|e| TeamsError::storage(format!("writing {}", quarantine.display()), e))?;
    }
    // Appenders open the file by name only while holding the lock, so replacing it here is safe.
    let result = if kept.is_empty() {
        fs::remove_file(&path)
    } else {
        crate::storage::atomic_file::write_atomic(&path, &kept)
    };
    result.map_err(|e| TeamsError::storage(format!("rewriting {}", path.display()), e))?;
    Ok(removed)
}
