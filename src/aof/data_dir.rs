//! One AOF data dir: its task store, event log and run artifacts, opened together.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use super::error::AofError;
use super::event::{Event, EventLog};
use super::run::RunStore;
use super::store::TaskStore;
use super::task_id::TaskId;
use super::timestamp::Timestamp;

/// The default directory of run artifacts, relative to the data dir (E-AOF-02).
pub const DEFAULT_RUNS_DIR: &str = "runs";

/// The parts of a data dir.
#[derive(Debug, Clone)]
pub struct DataDir {
    /// The root.
    pub root: PathBuf,
    /// `tasks/`.
    pub store: TaskStore,
    /// `events/`.
    pub events: EventLog,
    /// `runs/` (or the configured run directory).
    pub runs: RunStore,
}

impl DataDir {
    /// Opens `root`, creating the layout; `runs_dir` is relative to `root` unless absolute. The
    /// temp files of writers killed mid-write are swept, in the task store and the run
    /// directories alike.
    pub fn open(root: &Path, runs_dir: &Path) -> Result<Self, AofError> {
        let store = TaskStore::open(root)?;
        let runs = RunStore::new(root.join(runs_dir));
        runs.sweep_stale();
        Ok(Self {
            root: root.to_owned(),
            store,
            events: EventLog::new(root.join("events")),
            runs,
        })
    }
}

/// Records the events one operation logs, so callers can report them.
pub struct Journal<'a> {
    log: &'a EventLog,
    now: Timestamp,
    /// The events logged so far, in order.
    pub recorded: Vec<Event>,
}

impl<'a> Journal<'a> {
    /// A journal writing to `log` with timestamp `now`.
    pub fn new(log: &'a EventLog, now: Timestamp) -> Self {
        Self {
            log,
            now,
            recorded: Vec::new(),
        }
    }

    /// Appends an event with an object payload.
    pub fn emit(
        &mut self,
        kind: &str,
        actor: &str,
        task_id: Option<&TaskId>,
        payload: Value,
    ) -> Result<(), AofError> {
        let payload = match payload {
            Value::Object(map) => map,
            Value::Null => Map::new(),
            other => {
                let mut map = Map::new();
                map.insert("value".into(), other);
                map
            }
        };
        let event = self
            .log
            .append(kind, actor, task_id, payload, self.now)
            .map_err(AofError::Events)?;
        self.recorded.push(event);
        Ok(())
    }
}
