//! Run artifacts of a task: `run.json` (the run), `run_heartbeat.json` (liveness) and
//! `run_result.json` (the agent's result), kept in `<data dir>/runs/<taskId>/` (E-AOF-02).

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::{Map, Value};

use super::envelope::{
    MAX_BLOCKERS, MAX_DELIVERABLES, MAX_ITEM, MAX_NAME, OUTCOME_VALUES, Outcome, TestReport,
};
use super::task_id::TaskId;
use super::timestamp::Timestamp;
use super::validation::{Fields, Issue, IssueKind};
use crate::storage::atomic_file::{create_dir_durable, sweep_stale_temps_of, write_atomic};

/// File name of the run result.
pub const RUN_RESULT_FILE: &str = "run_result.json";
/// File name of the run artifact.
pub const RUN_FILE: &str = "run.json";
/// File name of the heartbeat.
pub const HEARTBEAT_FILE: &str = "run_heartbeat.json";
/// Every artifact file of a run directory: only their temp files are ever swept there.
const ARTIFACT_FILES: &[&str] = &[RUN_FILE, HEARTBEAT_FILE, RUN_RESULT_FILE];
/// The `handoffRef` every run result carries (E-AOF-19).
pub const HANDOFF_REF: &str = "outputs/handoff.md";

/// Errors of the run artifact store.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// Reading or writing failed.
    #[error("run artifact i/o failed for {path}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: io::Error,
    },
    /// A run result names another task than the one it is written for.
    #[error("run result is for {found}, not {expected}")]
    TaskMismatch {
        /// The task written for.
        expected: TaskId,
        /// The task in the result.
        found: TaskId,
    },
}

/// The result an agent leaves for a task (`run_result.json`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RunResult {
    /// The task.
    pub task_id: TaskId,
    /// The agent that reported it.
    pub agent_id: String,
    /// When it was reported.
    pub completed_at: Timestamp,
    /// The outcome.
    pub outcome: Outcome,
    /// Where the summary is.
    pub summary_ref: String,
    /// Where the handoff notes are.
    pub handoff_ref: String,
    /// Files produced.
    pub deliverables: Vec<String>,
    /// Test counts.
    pub tests: TestReport,
    /// What blocks the task.
    pub blockers: Vec<String>,
    /// Free notes.
    pub notes: String,
}

impl RunResult {
    /// Validates a run result.
    pub fn from_value(value: &Value) -> Result<Self, Vec<Issue>> {
        let mut issues = Vec::new();
        let mut fields = Fields::new(value, "", &mut issues);
        let task_id = fields.req_task_id("taskId");
        let agent_id = fields.req_str("agentId", Some(MAX_NAME));
        let completed_at = fields.req_datetime("completedAt");
        let outcome = fields.req_enum("outcome", Outcome::parse, OUTCOME_VALUES);
        let summary_ref = fields.req_str("summaryRef", None);
        let handoff_ref = fields.req_str("handoffRef", None);
        let deliverables = fields.str_array_or_empty("deliverables", MAX_DELIVERABLES, MAX_ITEM);
        let tests = fields.nested("tests", true, TestReport::read);
        let blockers = fields.str_array_or_empty("blockers", MAX_BLOCKERS, MAX_ITEM);
        let notes = fields.req_str("notes", None);
        let result = (|| {
            Some(Self {
                task_id: task_id?,
                agent_id: agent_id?,
                completed_at: completed_at?,
                outcome: outcome?,
                summary_ref: summary_ref?,
                handoff_ref: handoff_ref?,
                deliverables,
                tests: tests?,
                blockers,
                notes: notes?,
            })
        })();
        finish(result, issues)
    }
}

/// The state of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum RunStatus {
    /// The agent is working.
    Running,
    /// It finished.
    Completed,
    /// It failed or expired.
    Failed,
    /// It was given up.
    Abandoned,
}

impl RunStatus {
    /// Parses a wire name.
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "running" => Some(Self::Running),
            "completed" => Some(Self::Completed),
            "failed" => Some(Self::Failed),
            "abandoned" => Some(Self::Abandoned),
            _ => None,
        }
    }
}

/// Where a run keeps its files, relative to the task directory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ArtifactPaths {
    /// Inputs.
    pub inputs: String,
    /// Scratch work.
    pub work: String,
    /// Outputs.
    pub output: String,
}

impl Default for ArtifactPaths {
    fn default() -> Self {
        Self {
            inputs: "inputs/".into(),
            work: "work/".into(),
            output: "outputs/".into(),
        }
    }
}

/// A run of an agent on a task (`run.json`).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RunArtifact {
    /// The task.
    pub task_id: TaskId,
    /// The agent.
    pub agent_id: String,
    /// When the run started.
    pub started_at: Timestamp,
    /// Its state.
    pub status: RunStatus,
    /// Its directories.
    pub artifact_paths: ArtifactPaths,
    /// Free metadata; expiry adds `expiredAt` and `expiredReason`.
    pub metadata: Map<String, Value>,
}

impl RunArtifact {
    /// Validates a run artifact.
    pub fn from_value(value: &Value) -> Result<Self, Vec<Issue>> {
        let mut issues = Vec::new();
        let mut fields = Fields::new(value, "", &mut issues);
        let task_id = fields.req_task_id("taskId");
        let agent_id = fields.req_str("agentId", Some(MAX_NAME));
        let started_at = fields.req_datetime("startedAt");
        let status = fields
            .opt_enum(
                "status",
                RunStatus::parse,
                "running, completed, failed, abandoned",
            )
            .or_else(|| fields.raw("status").is_none().then_some(RunStatus::Running));
        let artifact_paths = fields
            .nested("artifactPaths", false, |value, path, issues| {
                let mut inner = Fields::new(value, path, issues);
                let defaults = ArtifactPaths::default();
                Some(ArtifactPaths {
                    inputs: inner.opt_str("inputs", None).unwrap_or(defaults.inputs),
                    work: inner.opt_str("work", None).unwrap_or(defaults.work),
                    output: inner.opt_str("output", None).unwrap_or(defaults.output),
                })
            })
            .unwrap_or_default();
        let metadata = match fields.raw("metadata") {
            None => Some(Map::new()),
            Some(Value::Object(map)) => Some(map.clone()),
            Some(_) => {
                fields.push(Issue::new(
                    "metadata",
                    IssueKind::InvalidType,
                    "metadata must be an object",
                ));
                None
            }
        };
        let result = (|| {
            Some(Self {
                task_id: task_id?,
                agent_id: agent_id?,
                started_at: started_at?,
                status: status?,
                artifact_paths,
                metadata: metadata?,
            })
        })();
        finish(result, issues)
    }
}

/// An agent's liveness signal (`run_heartbeat.json`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RunHeartbeat {
    /// The task.
    pub task_id: TaskId,
    /// The agent.
    pub agent_id: String,
    /// The last beat.
    pub last_heartbeat: Timestamp,
    /// Beats after the first.
    pub beat_count: u64,
    /// When the heartbeat goes stale.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<Timestamp>,
}

impl RunHeartbeat {
    /// Validates a heartbeat.
    pub fn from_value(value: &Value) -> Result<Self, Vec<Issue>> {
        let mut issues = Vec::new();
        let mut fields = Fields::new(value, "", &mut issues);
        let task_id = fields.req_task_id("taskId");
        let agent_id = fields.req_str("agentId", Some(MAX_NAME));
        let last_heartbeat = fields.req_datetime("lastHeartbeat");
        let beat_count = fields.opt_count("beatCount");
        let beat_count_ok = beat_count.is_some() || fields.raw("beatCount").is_none();
        let expires_at = fields.opt_datetime("expiresAt");
        let expires_ok = expires_at.is_some() || fields.raw("expiresAt").is_none();
        let result = (|| {
            if !(beat_count_ok && expires_ok) {
                return None;
            }
            Some(Self {
                task_id: task_id?,
                agent_id: agent_id?,
                last_heartbeat: last_heartbeat?,
                beat_count: beat_count.unwrap_or(0),
                expires_at,
            })
        })();
        finish(result, issues)
    }

    /// Whether the heartbeat is stale at `now`: `expiresAt <= now`, or without `expiresAt`,
    /// `lastHeartbeat + ttl <= now` (E-AOF-14).
    pub fn is_stale(&self, now: Timestamp, ttl_ms: i64) -> bool {
        let expiry = self
            .expires_at
            .unwrap_or_else(|| self.last_heartbeat.plus_ms(ttl_ms));
        expiry <= now
    }
}

fn finish<T>(result: Option<T>, mut issues: Vec<Issue>) -> Result<T, Vec<Issue>> {
    match result {
        Some(value) if issues.is_empty() => Ok(value),
        _ => {
            if issues.is_empty() {
                issues.push(Issue::new("", IssueKind::InvalidType, "invalid artifact"));
            }
            Err(issues)
        }
    }
}

/// The run artifacts of one data dir.
#[derive(Debug, Clone)]
pub struct RunStore {
    root: PathBuf,
}

impl RunStore {
    /// Artifacts kept under `root` (`<data dir>/runs` by default).
    pub fn new(root: PathBuf) -> Self {
        Self { root }
    }

    /// Removes the temp files that writers killed mid-write left in the run directories
    /// (`<taskId>/.tmp-<artifact>.<pid>.<n>` of a process that is gone). Only directories named
    /// by a task id (not links) and only the temp names of the artifact files are touched, so a
    /// file of anyone else stays.
    pub fn sweep_stale(&self) {
        let Ok(entries) = fs::read_dir(&self.root) else {
            return;
        };
        for entry in entries.flatten() {
            let is_dir = entry.file_type().is_ok_and(|kind| kind.is_dir());
            let is_task = entry
                .file_name()
                .to_str()
                .is_some_and(|name| TaskId::parse(name).is_ok());
            if is_dir && is_task {
                sweep_stale_temps_of(&entry.path(), ARTIFACT_FILES);
            }
        }
    }

    /// The directory of one task's artifacts.
    pub fn dir_of(&self, task_id: &TaskId) -> PathBuf {
        self.root.join(task_id.as_str())
    }

    fn path(&self, task_id: &TaskId, file: &str) -> PathBuf {
        self.dir_of(task_id).join(file)
    }

    fn write_json(
        &self,
        task_id: &TaskId,
        file: &str,
        value: &impl Serialize,
    ) -> Result<PathBuf, RunError> {
        let path = self.path(task_id, file);
        let io_error = |source| RunError::Io {
            path: path.clone(),
            source,
        };
        create_dir_durable(&self.dir_of(task_id)).map_err(io_error)?;
        sweep_stale_temps_of(&self.dir_of(task_id), ARTIFACT_FILES);
        let mut text = serde_json::to_string_pretty(value)
            .map_err(|error| io_error(io::Error::other(error)))?;
        text.push('\n');
        write_atomic(&path, text.as_bytes()).map_err(io_error)?;
        Ok(path)
    }

    fn read_json(&self, task_id: &TaskId, file: &str) -> Result<Option<Value>, RunError> {
        let path = self.path(task_id, file);
        match fs::read_to_string(&path) {
            Ok(text) => Ok(serde_json::from_str(&text).ok()),
            Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(source) => Err(RunError::Io { path, source }),
        }
    }

    /// Writes `run_result.json` for `task_id`; refuses a result for another task.
    pub fn write_result(&self, task_id: &TaskId, result: &RunResult) -> Result<PathBuf, RunError> {
        if &result.task_id != task_id {
            return Err(RunError::TaskMismatch {
                expected: task_id.clone(),
                found: result.task_id.clone(),
            });
        }
        self.write_json(task_id, RUN_RESULT_FILE, result)
    }

    /// Reads `run_result.json`; `None` when it is missing or unreadable.
    pub fn read_result(&self, task_id: &TaskId) -> Result<Option<RunResult>, RunError> {
        Ok(self
            .read_json(task_id, RUN_RESULT_FILE)?
            .and_then(|value| RunResult::from_value(&value).ok()))
    }

    /// Writes `run.json`.
    pub fn write_run(&self, run: &RunArtifact) -> Result<PathBuf, RunError> {
        self.write_json(&run.task_id, RUN_FILE, run)
    }

    /// Reads `run.json`; `None` when missing or unreadable.
    pub fn read_run(&self, task_id: &TaskId) -> Result<Option<RunArtifact>, RunError> {
        Ok(self
            .read_json(task_id, RUN_FILE)?
            .and_then(|value| RunArtifact::from_value(&value).ok()))
    }

    /// Marks `run.json` failed with `metadata.expiredAt` and `metadata.expiredReason`; returns
    /// `false` when there is no run artifact.
    pub fn mark_expired(
        &self,
        task_id: &TaskId,
        reason: &str,
        now: Timestamp,
    ) -> Result<bool, RunError> {
        let Some(mut run) = self.read_run(task_id)? else {
            return Ok(false);
        };
        run.status = RunStatus::Failed;
        run.metadata
            .insert("expiredAt".into(), Value::String(now.to_iso()));
        run.metadata
            .insert("expiredReason".into(), Value::String(reason.to_owned()));
        self.write_run(&run)?;
        Ok(true)
    }

    /// Writes a heartbeat: `beatCount` 0 on the first beat, +1 after; `expiresAt = now + ttl`.
    pub fn write_heartbeat(
        &self,
        task_id: &TaskId,
        agent_id: &str,
        ttl_ms: i64,
        now: Timestamp,
    ) -> Result<RunHeartbeat, RunError> {
        let beat_count = self
            .read_heartbeat(task_id)?
            .map_or(0, |previous| previous.beat_count + 1);
        let heartbeat = RunHeartbeat {
            task_id: task_id.clone(),
            agent_id: agent_id.to_owned(),
            last_heartbeat: now,
            beat_count,
            expires_at: Some(now.plus_ms(ttl_ms)),
        };
        self.write_json(task_id, HEARTBEAT_FILE, &heartbeat)?;
        Ok(heartbeat)
    }

    /// Writes a heartbeat exactly as given.
    pub fn put_heartbeat(&self, heartbeat: &RunHeartbeat) -> Result<PathBuf, RunError> {
        self.write_json(&heartbeat.task_id, HEARTBEAT_FILE, heartbeat)
    }

    /// Reads the heartbeat; `None` when missing or unreadable.
    pub fn read_heartbeat(&self, task_id: &TaskId) -> Result<Option<RunHeartbeat>, RunError> {
        Ok(self
            .read_json(task_id, HEARTBEAT_FILE)?
            .and_then(|value| RunHeartbeat::from_value(&value).ok()))
    }

    /// The root directory.
    pub fn root(&self) -> &Path {
        &self.root
    }
}
