//! Inboxes: `inbox/<sanitised key>/messages.jsonl`, one JSON message per line.
//!
//! Appends take an exclusive lock (`flock` on `inbox/<key>/.lock`, E-TEAM-10). An append is one
//! `write(2)` of the whole line on a file opened with `O_APPEND`, so a line is whole or absent;
//! one that follows a line a killed writer left unfinished starts on a new line, so no whole
//! message is lost to it. Messages to several inboxes (a broadcast) are appended all or none
//! ([`append_all`]): every inbox is locked, in the order of their paths, and checked before the
//! first write, and a write that fails takes back the ones before it. A drain ([`take`], then [`Taken::remove`]) reads under that lock, hands
//! the messages over, and only once they were delivered removes exactly the lines it read, again
//! under the lock: a message sent meanwhile stays for the next drain, and a reader that dies or
//! cannot deliver (a closed stdout) removes nothing. Drains of one inbox are serialised by a
//! second lock (`inbox/<key>/.read.lock`) that senders never take. A line that does not parse is
//! moved to `messages.jsonl.bad` by the drain that read it and never blocks the inbox. A read that
//! keeps the messages ([`peek`]) writes and creates nothing.

use std::collections::{BTreeMap, HashMap};
use std::fs::{self, DirBuilder, OpenOptions};
use std::io::{ErrorKind, Read, Seek, SeekFrom, Write};
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
/// The lock file that serialises the drains of one inbox.
pub const READER_LOCK_FILE: &str = ".read.lock";
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
    append_all(&[(dir, message)])
}

/// Appends each message to its inbox (created when missing), all or none. Every inbox is locked
/// first, in the order of their paths so that two senders never wait for each other in a circle,
/// then opened and checked against [`MAX_INBOX_BYTES`]; only then is each written, one write per
/// inbox. When a write fails, the inboxes written before it, and the failed one, are cut back to
/// their sizes before the write, under the locks still held, so no reader ever sees a copy of a
/// message that was refused. A sender killed between two writes leaves the copies written so far.
pub fn append_all(deliveries: &[(&Path, &Message)]) -> TeamsResult<()> {
    let mut by_inbox: BTreeMap<&Path, (Vec<u8>, &str)> = BTreeMap::new();
    for (dir, message) in deliveries {
        let line = serde_json::to_vec(message)
            .map_err(|e| TeamsError::InvalidArgument(format!("message cannot be encoded: {e}")))?;
        let (lines, _) = by_inbox.entry(dir).or_insert((Vec::new(), &message.to));
        lines.extend_from_slice(&line);
        lines.push(b'\n');
    }
    let mut ready = Vec::with_capacity(by_inbox.len());
    for (dir, (lines, recipient)) in by_inbox {
        ready.push(Pending::open(dir, lines, recipient)?);
    }
    for written in 0..ready.len() {
        if let Err(error) = ready[written].write() {
            for pending in &ready[..=written] {
                pending.take_back();
            }
            return Err(error);
        }
    }
    Ok(())
}

/// One inbox locked, opened and checked, with the bytes an append will write to it.
struct Pending {
    path: PathBuf,
    file: fs::File,
    size_before: u64,
    bytes: Vec<u8>,
    _guard: FileLock,
}

impl Pending {
    /// Locks the inbox in `dir` (created when missing) and opens its file; refuses `lines` when
    /// they would take it past [`MAX_INBOX_BYTES`].
    fn open(dir: &Path, mut lines: Vec<u8>, recipient: &str) -> TeamsResult<Self> {
        DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|e| TeamsError::storage(format!("creating inbox {}", dir.display()), e))?;
        let guard = lock(dir)?;
        let path = dir.join(MESSAGES_FILE);
        let reading = |e| TeamsError::storage(format!("reading {}", path.display()), e);
        let mut file = OpenOptions::new()
            .create(true)
            .read(true)
            .append(true)
            .mode(0o600)
            .open(&path)
            .map_err(|e| TeamsError::storage(format!("opening {}", path.display()), e))?;
        let size_before = file.metadata().map_err(reading)?.len();
        if size_before + lines.len() as u64 > MAX_INBOX_BYTES {
            return Err(TeamsError::InboxFull(recipient.to_owned()));
        }
        if !ends_a_line(&mut file, size_before).map_err(reading)? {
            lines.insert(0, b'\n');
        }
        Ok(Self {
            path,
            file,
            size_before,
            bytes: lines,
            _guard: guard,
        })
    }

    /// Appends the lines with one write.
    fn write(&mut self) -> TeamsResult<()> {
        self.file
            .write_all(&self.bytes)
            .map_err(|e| TeamsError::storage(format!("appending to {}", self.path.display()), e))
    }

    /// Cuts the file back to its size before [`Pending::write`]; best effort, the write's error
    /// is what the sender reports.
    fn take_back(&self) {
        let _ = self.file.set_len(self.size_before);
    }
}

/// Whether a file of `size` bytes is empty or ends with a newline.
fn ends_a_line(file: &mut fs::File, size: u64) -> std::io::Result<bool> {
    if size == 0 {
        return Ok(true);
    }
    file.seek(SeekFrom::Start(size - 1))?;
    let mut last = [0u8; 1];
    file.read_exact(&mut last)?;
    Ok(last[0] == b'\n')
}

/// Reads the inbox in `dir`; with `drain`, removes exactly what it returns (the caller has the
/// messages in hand). A program that prints them uses [`take`] and removes them once printed.
pub fn read(dir: &Path, drain: bool) -> TeamsResult<Vec<Message>> {
    if !drain {
        return peek(dir);
    }
    let taken = take(dir)?;
    let messages = taken.messages.clone();
    taken.remove()?;
    Ok(messages)
}

/// The messages of the inbox in `dir`, changing nothing and creating nothing: under a shared
/// lock when the lock file exists and can be opened, else (a read-only root) without one. Lines
/// that do not parse are skipped.
pub fn peek(dir: &Path) -> TeamsResult<Vec<Message>> {
    if !dir.is_dir() {
        return Ok(Vec::new());
    }
    let lock_path = dir.join(LOCK_FILE);
    let _guard = match FileLock::shared(&lock_path) {
        Ok(guard) => Some(guard),
        Err(e)
            if matches!(
                e.kind(),
                ErrorKind::NotFound | ErrorKind::PermissionDenied | ErrorKind::ReadOnlyFilesystem
            ) =>
        {
            None
        }
        Err(e) => {
            return Err(TeamsError::storage(
                format!("locking inbox {}", dir.display()),
                e,
            ));
        }
    };
    Ok(split(&read_messages_file(dir)?).0)
}

/// What a drain took from an inbox: its messages, and their lines as stored, to be removed with
/// [`Taken::remove`] once the messages were delivered. Until then nothing is removed, and the
/// reader lock it holds keeps a second drain of the same inbox from delivering them again; senders
/// are not held up. Dropped without `remove`, it leaves the inbox as it was.
#[derive(Debug)]
pub struct Taken {
    dir: PathBuf,
    /// The messages, in arrival order.
    pub messages: Vec<Message>,
    /// The lines of the messages and the lines that did not parse, exactly as read.
    lines: Vec<Vec<u8>>,
    _reader: Option<FileLock>,
}

/// Takes the messages of the inbox in `dir` for a drain (see [`Taken`]).
pub fn take(dir: &Path) -> TeamsResult<Taken> {
    if !dir.is_dir() {
        return Ok(Taken {
            dir: dir.to_owned(),
            messages: Vec::new(),
            lines: Vec::new(),
            _reader: None,
        });
    }
    let reader = FileLock::exclusive(&dir.join(READER_LOCK_FILE))
        .map_err(|e| TeamsError::storage(format!("locking inbox {} to read", dir.display()), e))?;
    let bytes = {
        let _guard = lock(dir)?;
        read_messages_file(dir)?
    };
    let (messages, _) = split(&bytes);
    let lines = bytes
        .split(|b| *b == b'\n')
        .filter(|line| !is_blank(line))
        .map(<[u8]>::to_vec)
        .collect();
    Ok(Taken {
        dir: dir.to_owned(),
        messages,
        lines,
        _reader: Some(reader),
    })
}

impl Taken {
    /// Removes the taken lines, and only them, under the inbox lock: messages that arrived since
    /// stay, and the lines that did not parse go to the quarantine file.
    pub fn remove(self) -> TeamsResult<()> {
        if self.lines.is_empty() {
            return Ok(());
        }
        let _guard = lock(&self.dir)?;
        let bytes = read_messages_file(&self.dir)?;
        let mut taken: HashMap<&[u8], usize> = HashMap::new();
        for line in &self.lines {
            *taken.entry(line.as_slice()).or_default() += 1;
        }
        let mut kept = Vec::new();
        let mut bad = Vec::new();
        for line in bytes.split(|b| *b == b'\n').filter(|line| !is_blank(line)) {
            match taken.get_mut(line) {
                Some(count) if *count > 0 => {
                    *count -= 1;
                    if serde_json::from_slice::<Message>(line).is_err() {
                        bad.extend_from_slice(line);
                        bad.push(b'\n');
                    }
                }
                _ => {
                    kept.extend_from_slice(line);
                    kept.push(b'\n');
                }
            }
        }
        quarantine(&self.dir, &bad)?;
        rewrite(&self.dir, &kept)
    }
}

fn is_blank(line: &[u8]) -> bool {
    line.iter().all(u8::is_ascii_whitespace)
}

/// The messages of an inbox file's bytes, and its lines that do not parse.
fn split(bytes: &[u8]) -> (Vec<Message>, Vec<u8>) {
    let mut messages = Vec::new();
    let mut bad = Vec::new();
    for line in bytes.split(|b| *b == b'\n').filter(|line| !is_blank(line)) {
        match serde_json::from_slice::<Message>(line) {
            Ok(message) => messages.push(message),
            Err(_) => {
                bad.extend_from_slice(line);
                bad.push(b'\n');
            }
        }
    }
    (messages, bad)
}

/// The bytes of the inbox's messages file; nothing when it does not exist.
fn read_messages_file(dir: &Path) -> TeamsResult<Vec<u8>> {
    let path = dir.join(MESSAGES_FILE);
    match fs::read(&path) {
        Ok(bytes) => Ok(bytes),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(TeamsError::storage(
            format!("reading {}", path.display()),
            e,
        )),
    }
}

/// Appends lines that do not parse to the quarantine file.
fn quarantine(dir: &Path, bad: &[u8]) -> TeamsResult<()> {
    if bad.is_empty() {
        return Ok(());
    }
    let path = dir.join(QUARANTINE_FILE);
    OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(&path)
        .and_then(|mut f| f.write_all(bad))
        .map_err(|e| TeamsError::storage(format!("writing {}", path.display()), e))
}

/// Replaces the messages file with `kept` (removes it when nothing is kept); call under the lock.
/// Appenders open the file by name only while holding the lock, so replacing it is safe.
fn rewrite(dir: &Path, kept: &[u8]) -> TeamsResult<()> {
    let path = dir.join(MESSAGES_FILE);
    let result = if kept.is_empty() {
        match fs::remove_file(&path) {
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(()),
            other => other,
        }
    } else {
        crate::storage::atomic_file::write_atomic(&path, kept)
    };
    result.map_err(|e| TeamsError::storage(format!("rewriting {}", path.display()), e))
}

/// Removes the messages of the inbox in `dir` stamped before `cutoff_ms`, under the lock; lines
/// that do not parse go to the quarantine file. Returns how many messages were removed.
pub fn prune(dir: &Path, cutoff_ms: i64) -> TeamsResult<usize> {
    if !dir.is_dir() {
        return Ok(0);
    }
    let _guard = lock(dir)?;
    if !dir.join(MESSAGES_FILE).exists() {
        return Ok(0);
    }
    let bytes = read_messages_file(dir)?;
    let mut kept = Vec::new();
    let mut removed = 0;
    for line in bytes.split(|b| *b == b'\n').filter(|line| !is_blank(line)) {
        match serde_json::from_slice::<Message>(line) {
            Ok(message) if message.timestamp < cutoff_ms => removed += 1,
            Ok(_) => {
                kept.extend_from_slice(line);
                kept.push(b'\n');
            }
            Err(_) => {}
        }
    }
    quarantine(dir, &split(&bytes).1)?;
    rewrite(dir, &kept)?;
    Ok(removed)
}
