//! Task files: statuses and their transition table, YAML frontmatter, body and Work Log.
//!
//! A task file is `---\n<YAML>---\n\n<body>\n`. The frontmatter keys follow the original
//! implementation's schema; keys ski does not know are kept and written back unchanged.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

use super::task_id::TaskId;
use super::timestamp::Timestamp;

/// A task's status; the directory under `tasks/` that holds its file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum TaskStatus {
    /// Not ready to be worked on.
    #[serde(rename = "backlog")]
    Backlog,
    /// Ready for an agent.
    #[serde(rename = "ready")]
    Ready,
    /// An agent holds it.
    #[serde(rename = "in-progress")]
    InProgress,
    /// Waiting on something.
    #[serde(rename = "blocked")]
    Blocked,
    /// Waiting for review.
    #[serde(rename = "review")]
    Review,
    /// Finished (terminal).
    #[serde(rename = "done")]
    Done,
}

/// The allowed status values, for error messages.
pub const STATUS_VALUES: &str = "backlog, ready, in-progress, blocked, review, done";

impl TaskStatus {
    /// Every status, in lifecycle order.
    pub const ALL: [TaskStatus; 6] = [
        TaskStatus::Backlog,
        TaskStatus::Ready,
        TaskStatus::InProgress,
        TaskStatus::Blocked,
        TaskStatus::Review,
        TaskStatus::Done,
    ];

    /// The wire and directory name.
    pub fn as_str(self) -> &'static str {
        match self {
            TaskStatus::Backlog => "backlog",
            TaskStatus::Ready => "ready",
            TaskStatus::InProgress => "in-progress",
            TaskStatus::Blocked => "blocked",
            TaskStatus::Review => "review",
            TaskStatus::Done => "done",
        }
    }

    /// Parses a wire name.
    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|status| status.as_str() == text)
    }

    /// The statuses this one may move to.
    pub fn successors(self) -> &'static [TaskStatus] {
        use TaskStatus::*;
        match self {
            Backlog => &[Ready, Blocked],
            Ready => &[InProgress, Blocked],
            InProgress => &[Review, Ready, Blocked],
            Blocked => &[Ready],
            Review => &[Done, InProgress, Blocked],
            Done => &[],
        }
    }
}

impl fmt::Display for TaskStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Whether `from -> to` is in the transition table.
pub fn is_valid_transition(from: TaskStatus, to: TaskStatus) -> bool {
    from.successors().contains(&to)
}

/// A task's priority.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Priority {
    /// Drop everything.
    Critical,
    /// Soon.
    High,
    /// The default.
    #[default]
    Normal,
    /// When idle.
    Low,
}

/// Who should work on a task.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Routing {
    /// A role name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    /// A team name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub team: Option<String>,
    /// A specific agent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// Free tags.
    #[serde(default)]
    pub tags: Vec<String>,
}

/// The agent holding a task and until when.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Lease {
    /// The holder.
    pub agent: String,
    /// When the lease was taken.
    pub acquired_at: Timestamp,
    /// When it lapses.
    pub expires_at: Timestamp,
    /// How often it was renewed.
    #[serde(default)]
    pub renew_count: u32,
}

fn schema_version_one() -> u32 {
    1
}

/// The YAML frontmatter of a task file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Frontmatter {
    /// Always 1.
    #[serde(default = "schema_version_one")]
    pub schema_version: u32,
    /// The task id; the file name without `.md`.
    pub id: TaskId,
    /// The project the task belongs to.
    pub project: String,
    /// A one-line title.
    pub title: String,
    /// The status; equals the directory that holds the file.
    pub status: TaskStatus,
    /// The priority.
    #[serde(default)]
    pub priority: Priority,
    /// Routing hints.
    #[serde(default)]
    pub routing: Routing,
    /// The current lease, if an agent holds the task.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease: Option<Lease>,
    /// Creation time.
    pub created_at: Timestamp,
    /// Last change of any kind.
    pub updated_at: Timestamp,
    /// Last status change.
    pub last_transition_at: Timestamp,
    /// Who created it.
    pub created_by: String,
    /// The parent task, for subtasks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_id: Option<TaskId>,
    /// Tasks this one waits for.
    #[serde(default)]
    pub depends_on: Vec<TaskId>,
    /// The first 16 hex digits of the SHA-256 of the body.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_hash: Option<String>,
    /// Free metadata; the protocols use `reviewRequired` and `delegationDepth`.
    #[serde(default)]
    pub metadata: BTreeMap<String, Value>,
    /// Keys ski does not interpret, kept as they were.
    #[serde(flatten)]
    pub extra: BTreeMap<String, Value>,
}

impl Frontmatter {
    /// Whether a completion with outcome `done` stops in review: anything but `false` means yes.
    pub fn review_required(&self) -> bool {
        self.metadata.get("reviewRequired") != Some(&Value::Bool(false))
    }

    /// The delegation depth; absent or non-numeric means 0.
    pub fn delegation_depth(&self) -> u64 {
        self.metadata
            .get("delegationDepth")
            .and_then(|value| {
                value
                    .as_u64()
                    .or_else(|| value.as_f64().map(|f| f.max(0.0) as u64))
            })
            .unwrap_or(0)
    }
}

/// Why a task file could not be read.
#[derive(Debug, thiserror::Error)]
pub enum TaskFileError {
    /// The first line is not `---`.
    #[error("task file must start with YAML frontmatter (---)")]
    NoFrontmatter,
    /// No closing `---` line.
    #[error("unterminated YAML frontmatter (missing closing ---)")]
    Unterminated,
    /// The YAML does not match the schema.
    #[error("invalid frontmatter")]
    Yaml(#[from] serde_norway::Error),
}

/// A task: frontmatter and Markdown body.
#[derive(Debug, Clone, PartialEq)]
pub struct Task {
    /// The frontmatter.
    pub frontmatter: Frontmatter,
    /// The body, trimmed.
    pub body: String,
}

/// The heading of the Work Log section.
pub const WORK_LOG_HEADING: &str = "## Work Log";

/// The content hash of a body: first 16 hex digits of its SHA-256.
pub fn content_hash(body: &str) -> String {
    let digest = Sha256::digest(body.as_bytes());
    digest
        .iter()
        .take(8)
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

impl Task {
    /// Parses a task file.
    pub fn parse(text: &str) -> Result<Self, TaskFileError> {
        let mut lines = text.split_inclusive('\n');
        let first = lines.next().ok_or(TaskFileError::NoFrontmatter)?;
        if first.trim_end_matches(['\n', '\r']) != "---" {
            return Err(TaskFileError::NoFrontmatter);
        }
        let mut yaml = String::new();
        let mut closed = false;
        let mut body = String::new();
        for line in lines.by_ref() {
            if !closed && line.trim_end_matches(['\n', '\r']) == "---" {
                closed = true;
                continue;
            }
            if closed {
                body.push_str(line);
            } else {
                yaml.push_str(line);
            }
        }
        if !closed {
            return Err(TaskFileError::Unterminated);
        }
        let frontmatter: Frontmatter = serde_norway::from_str(&yaml)?;
        Ok(Self {
            frontmatter,
            body: body.trim().to_owned(),
        })
    }

    /// Renders the file: `---`, YAML, `---`, a blank line, the body and a final newline.
    pub fn render(&self) -> Result<String, serde_norway::Error> {
        let yaml = serde_norway::to_string(&self.frontmatter)?;
        Ok(format!("---\n{yaml}---\n\n{}\n", self.body))
    }

    /// The task id.
    pub fn id(&self) -> &TaskId {
        &self.frontmatter.id
    }

    /// The status.
    pub fn status(&self) -> TaskStatus {
        self.frontmatter.status
    }

    /// Replaces the body and refreshes `contentHash` and `updatedAt`.
    pub fn set_body(&mut self, body: String, now: Timestamp) {
        self.body = body.trim().to_owned();
        self.frontmatter.content_hash = Some(content_hash(&self.body));
        self.frontmatter.updated_at = now;
    }

    /// Appends one line to the `## Work Log` section, creating the section at the end when absent.
    pub fn append_work_log(&mut self, line: &str, now: Timestamp) {
        let body = append_to_section(&self.body, WORK_LOG_HEADING, line);
        self.set_body(body, now);
    }

    /// The lines of the Work Log section (bullets only).
    pub fn work_log(&self) -> Vec<&str> {
        let mut in_section = false;
        let mut out = Vec::new();
        for line in self.body.lines() {
            if line.trim_end() == WORK_LOG_HEADING {
                in_section = true;
            } else if line.starts_with("## ") || line.starts_with("# ") {
                in_section = false;
            } else if in_section && line.starts_with("- ") {
                out.push(line);
            }
        }
        out
    }
}

/// Adds `line` as the last line of the section under `heading`, or appends the section.
fn append_to_section(body: &str, heading: &str, line: &str) -> String {
    let lines: Vec<&str> = body.lines().collect();
    let Some(start) = lines.iter().position(|l| l.trim_end() == heading) else {
        let body = body.trim_end();
        return if body.is_empty() {
            format!("{heading}\n\n{line}")
        } else {
            format!("{body}\n\n{heading}\n\n{line}")
        };
    };
    let end = lines[start + 1..]
        .iter()
        .position(|l| l.starts_with("## ") || l.starts_with("# "))
        .map_or(lines.len(), |offset| start + 1 + offset);
    let mut last_content = end;
    while last_content > start + 1 && lines[last_content - 1].trim().is_empty() {
        last_content -= 1;
    }
    let mut out: Vec<String> = lines[..last_content]
        .iter()
        .map(|l| (*l).to_owned())
        .collect();
    if last_content == start + 1 {
        out.push(String::new());
    }
    out.push(line.to_owned());
    if end < lines.len() {
        out.push(String::new());
        out.extend(lines[end..].iter().map(|l| (*l).to_owned()));
    }
    out.join("\n")
}

/// Formats one Work Log line: `- <time> Progress: … | Notes: … | Blockers: a, b`.
pub fn work_log_line(
    now: Timestamp,
    progress: Option<&str>,
    notes: Option<&str>,
    blockers: &[String],
) -> String {
    let mut parts = Vec::new();
    if let Some(progress) = progress {
        parts.push(format!("Progress: {}", single_line(progress)));
    }
    if let Some(notes) = notes {
        parts.push(format!("Notes: {}", single_line(notes)));
    }
    if !blockers.is_empty() {
        let joined: Vec<String> = blockers.iter().map(|b| single_line(b)).collect();
        parts.push(format!("Blockers: {}", joined.join(", ")));
    }
    format!("- {} {}", now.to_iso(), parts.join(" | "))
}

/// Keeps a Work Log entry on one line so it cannot open a new section.
fn single_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transition_table_matches_the_original() {
        use TaskStatus::*;
        assert!(is_valid_transition(InProgress, Review));
        assert!(is_valid_transition(Review, Done));
        assert!(!is_valid_transition(Done, Review));
        assert!(!is_valid_transition(InProgress, Done));
        assert!(!is_valid_transition(Blocked, InProgress));
    }

    #[test]
    fn work_log_is_created_once_and_appended_in_place() {
        let body = append_to_section("# Task\n\nDo it.", WORK_LOG_HEADING, "- a");
        assert_eq!(body, "# Task\n\nDo it.\n\n## Work Log\n\n- a");
        let body = append_to_section(&body, WORK_LOG_HEADING, "- b");
        assert_eq!(body, "# Task\n\nDo it.\n\n## Work Log\n\n- a\n- b");
        let body = append_to_section(
            "## Work Log\n\n- a\n\n## Notes\n\nx",
            WORK_LOG_HEADING,
            "- b",
        );
        assert_eq!(body, "## Work Log\n\n- a\n- b\n\n## Notes\n\nx");
    }
}
