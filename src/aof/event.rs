//! The append-only event log: one JSON object per line in `events/YYYY-MM-DD.jsonl` (UTC day of the
//! event), with `events/events.jsonl` a relative symlink to the newest day's file.
//!
//! `eventId` increases across processes and restarts (E-AOF-17): an append takes the log's lock,
//! reads the highest id already written and writes the next one with a single `write` call. A line
//! left torn by a crash is skipped by readers and closed by the next append.

use std::fs::{self, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::{Map, Value, json};

use super::task_id::TaskId;
use super::timestamp::Timestamp;
use crate::storage::atomic_file::{create_dir_durable, is_temp_name};
use crate::storage::file_lock::FileLock;

/// Event type names used by ski.
pub mod kind {
    /// A message was accepted for handling.
    pub const MESSAGE_RECEIVED: &str = "protocol.message.received";
    /// A message was refused; the payload's `reason` says why.
    pub const MESSAGE_REJECTED: &str = "protocol.message.rejected";
    /// A message had a type without a handler.
    pub const MESSAGE_UNKNOWN: &str = "protocol.message.unknown";
    /// A message was handled with a warning (missing summary file).
    pub const MESSAGE_WARNING: &str = "protocol.message.warning";
    /// A handler failed (I/O); the router went on.
    pub const MESSAGE_ERROR: &str = "protocol.message.error";
    /// A task was created.
    pub const TASK_CREATED: &str = "task.created";
    /// A task changed status.
    pub const TASK_TRANSITIONED: &str = "task.transitioned";
    /// A completion report was processed.
    pub const TASK_COMPLETED: &str = "task.completed";
    /// A status update was recorded without a transition.
    pub const TASK_UPDATED: &str = "task.updated";
    /// A handoff was written for a child task.
    pub const DELEGATION_REQUESTED: &str = "delegation.requested";
    /// A child accepted a handoff.
    pub const DELEGATION_ACCEPTED: &str = "delegation.accepted";
    /// A handoff was refused or rejected.
    pub const DELEGATION_REJECTED: &str = "delegation.rejected";
    /// The scheduler polled.
    pub const SCHEDULER_POLL: &str = "scheduler.poll";
    /// A run artifact was marked expired.
    pub const RUN_EXPIRED: &str = "run.expired";
}

/// One logged event.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Event {
    /// Increasing id, unique within a data dir.
    pub event_id: u64,
    /// The event type, e.g. `task.transitioned`.
    #[serde(rename = "type")]
    pub kind: String,
    /// When it happened (the injected clock).
    pub timestamp: Timestamp,
    /// Who caused it.
    pub actor: String,
    /// The task concerned.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub task_id: Option<TaskId>,
    /// Details.
    pub payload: Map<String, Value>,
}

impl Event {
    /// Reads one logged line; `None` for a line that is not an event.
    pub fn from_value(value: &Value) -> Option<Self> {
        let object = value.as_object()?;
        Some(Self {
            event_id: object.get("eventId")?.as_u64().filter(|id| *id > 0)?,
            kind: object.get("type")?.as_str()?.to_owned(),
            timestamp: Timestamp::parse(object.get("timestamp")?.as_str()?).ok()?,
            actor: object.get("actor")?.as_str()?.to_owned(),
            task_id: match object.get("taskId") {
                Some(id) => Some(TaskId::parse(id.as_str()?).ok()?),
                None => None,
            },
            payload: object
                .get("payload")
                .and_then(Value::as_object)
                .cloned()
                .unwrap_or_default(),
        })
    }

    /// The encoded line content.
    pub fn to_value(&self) -> Value {
        serde_json::to_value(self).unwrap_or_else(|_| json!({}))
    }
}

/// The event log of one data dir.
#[derive(Debug, Clone)]
pub struct EventLog {
    dir: PathBuf,
}

/// The name of the symlink to the newest day file.
pub const CURRENT_LINK: &str = "events.jsonl";
const LOCK_FILE: &str = ".lock";

impl EventLog {
    /// The log kept in `dir` (created on first append).
    pub fn new(dir: PathBuf) -> Self {
        Self { dir }
    }

    /// The directory of the log.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Appends one event and returns it with its id.
    pub fn append(
        &self,
        kind: &str,
        actor: &str,
        task_id: Option<&TaskId>,
        payload: Map<String, Value>,
        now: Timestamp,
    ) -> io::Result<Event> {
        create_dir_durable(&self.dir)?;
        let _lock = FileLock::exclusive(&self.dir.join(LOCK_FILE))?;
        let event = Event {
            event_id: self.highest_id()? + 1,
            kind: kind.to_owned(),
            timestamp: now,
            actor: actor.to_owned(),
            task_id: task_id.cloned(),
            payload,
        };
        let file_name = format!("{}.jsonl", now.date_string());
        let path = self.dir.join(&file_name);
        let mut file = OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .open(&path)?;
        let mut line = String::new();
        if !ends_with_newline(&mut file)? {
            line.push('\n');
        }
        line.push_str(&event.to_value().to_string());
        line.push('\n');
        file.write_all(line.as_bytes())?;
        file.sync_data()?;
        self.point_current_link(&file_name);
        Ok(event)
    }

    /// Repoints `events.jsonl` at `file_name`; best effort, the day files are the record.
    fn point_current_link(&self, file_name: &str) {
        let link = self.dir.join(CURRENT_LINK);
        if fs::read_link(&link).is_ok_and(|target| target == Path::new(file_name)) {
            return;
        }
        let temp = self.dir.join(format!(".tmp-link.{}", std::process::id()));
        let _ = fs::remove_file(&temp);
        #[cfg(unix)]
        {
            if std::os::unix::fs::symlink(file_name, &temp).is_ok()
                && fs::rename(&temp, &link).is_err()
            {
                let _ = fs::remove_file(&temp);
            }
        }
    }

    /// The day files, oldest first.
    fn day_files(&self) -> io::Result<Vec<PathBuf>> {
        let mut files = Vec::new();
        let entries = match fs::read_dir(&self.dir) {
            Ok(entries) => entries,
            Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(files),
            Err(error) => return Err(error),
        };
        for entry in entries {
            let entry = entry?;
            let name = entry.file_name();
            let Some(name) = name.to_str() else { continue };
            if name.ends_with(".jsonl")
                && name != CURRENT_LINK
                && !is_temp_name(name)
                && entry.file_type()?.is_file()
            {
                files.push(entry.path());
            }
        }
        files.sort();
        Ok(files)
    }

    fn highest_id(&self) -> io::Result<u64> {
        let mut highest = 0;
        for path in self.day_files()? {
            if let Some(id) = last_event_id(&path)? {
                highest = highest.max(id);
            }
        }
        Ok(highest)
    }

    /// Every readable event, ordered by `eventId`; torn or foreign lines are skipped.
    pub fn read_all(&self) -> io::Result<Vec<Event>> {
        let mut events = Vec::new();
        for path in self.day_files()? {
            let text = fs::read_to_string(&path)?;
            events.extend(
                text.lines()
                    .filter_map(|line| serde_json::from_str::<Value>(line).ok())
                    .filter_map(|value| Event::from_value(&value)),
            );
        }
        events.sort_by_key(|event| event.event_id);
        Ok(events)
    }
}

fn ends_with_newline(file: &mut fs::File) -> io::Result<bool> {
    let length = file.metadata()?.len();
    if length == 0 {
        return Ok(true);
    }
    file.seek(SeekFrom::Start(length - 1))?;
    let mut byte = [0u8; 1];
    file.read_exact(&mut byte)?;
    Ok(byte[0] == b'\n')
}

/// The id on the last readable line of a day file, reading only its tail.
fn last_event_id(path: &Path) -> io::Result<Option<u64>> {
    let mut file = fs::File::open(path)?;
    let length = file.metadata()?.len();
    let mut window = 4096u64;
    loop {
        let start = length.saturating_sub(window);
        file.seek(SeekFrom::Start(start))?;
        let mut tail = Vec::new();
        file.read_to_end(&mut tail)?;
        let text = String::from_utf8_lossy(&tail);
        let mut lines: Vec<&str> = text.lines().collect();
        if start > 0 && !lines.is_empty() {
            lines.remove(0);
        }
        let id = lines
            .iter()
            .rev()
            .filter_map(|line| serde_json::from_str::<Value>(line).ok())
            .find_map(|value| value.get("eventId").and_then(Value::as_u64));
        if id.is_some() || start == 0 {
            return Ok(id);
        }
        window = window.saturating_mul(4);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_continue_across_logs_and_torn_lines_are_closed() {
        let dir = tempfile::tempdir().expect("temp dir");
        let day1 = Timestamp::parse("2026-02-09T21:00:00.000Z").expect("valid");
        let day2 = Timestamp::parse("2026-02-10T01:00:00.000Z").expect("valid");
        let log = EventLog::new(dir.path().join("events"));
        log.append("a", "x", None, Map::new(), day2)
            .expect("append");
        log.append("b", "x", None, Map::new(), day1)
            .expect("append");
        let path = dir.path().join("events/2026-02-09.jsonl");
        let mut file = OpenOptions::new().append(true).open(&path).expect("open");
        file.write_all(b"{\"eventId\": 9, \"ty")
            .expect("torn write");
        let again = EventLog::new(dir.path().join("events"));
        let event = again
            .append("c", "x", None, Map::new(), day1)
            .expect("append");
        assert_eq!(event.event_id, 3);
        let ids: Vec<u64> = again
            .read_all()
            .expect("read")
            .iter()
            .map(|e| e.event_id)
            .collect();
        assert_eq!(ids, [1, 2, 3]);
        let link = fs::read_link(dir.path().join("events").join(CURRENT_LINK)).expect("link");
        assert_eq!(link, Path::new("2026-02-09.jsonl"));
    }
}
