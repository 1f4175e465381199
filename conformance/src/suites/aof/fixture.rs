//! The Given of a scenario, arranged through the adapter: tasks created with `task create` in the
//! status the scenario names (E-AOF-30), run artifacts written with `run …`.
//!
//! Every task is routed to the agent that sends the scenario's messages, and an in-progress task
//! also holds that agent's lease for [`LEASE_TTL_MS`], so that an implementation whose sender
//! check cannot be turned off is judged on the scenario, not refused as `unassigned_task`
//! (E-AOF-34).

use serde_json::Value;

use super::adapter::{Adapter, EXIT_OK};
use super::message::{CREATED_AT, FROM_AGENT};
use crate::{CheckError, Failure};

/// The TTL of the lease of an in-progress Given task: two days from [`CREATED_AT`], longer than
/// any `--now` of the suite, so that no lease expires during a scenario.
pub const LEASE_TTL_MS: u64 = 2 * 24 * 60 * 60 * 1000;

/// A task to create.
#[derive(Debug, Clone)]
pub struct TaskSpec {
    id: String,
    status: String,
    title: String,
    metadata: Option<Value>,
    body: Option<String>,
    parent: Option<String>,
}

impl TaskSpec {
    /// Task `id` in `status`, titled after its id.
    pub fn new(id: &str, status: &str) -> Self {
        Self {
            id: id.to_owned(),
            status: status.to_owned(),
            title: format!("Task {id}"),
            metadata: None,
            body: None,
            parent: None,
        }
    }

    /// With frontmatter `metadata` (an object, e.g. `{"reviewRequired": false}`).
    pub fn metadata(mut self, metadata: Value) -> Self {
        self.metadata = Some(metadata);
        self
    }

    /// With a Markdown body.
    pub fn body(mut self, body: &str) -> Self {
        self.body = Some(body.to_owned());
        self
    }

    /// With a parent task.
    pub fn parent(mut self, parent: &str) -> Self {
        self.parent = Some(parent.to_owned());
        self
    }

    /// Creates the task at [`CREATED_AT`]; the target's fault when the adapter refuses.
    pub async fn create(&self, adapter: &Adapter) -> Result<(), CheckError> {
        let metadata = self.metadata.as_ref().map(Value::to_string);
        let lease_ttl = LEASE_TTL_MS.to_string();
        let mut args = vec![
            "task",
            "create",
            "--id",
            self.id.as_str(),
            "--status",
            self.status.as_str(),
            "--title",
            self.title.as_str(),
            "--routing-agent",
            FROM_AGENT,
        ];
        if self.status == "in-progress" {
            args.extend([
                "--lease-agent",
                FROM_AGENT,
                "--lease-ttl-ms",
                lease_ttl.as_str(),
            ]);
        }
        if let Some(metadata) = &metadata {
            args.extend(["--metadata", metadata.as_str()]);
        }
        if let Some(body) = &self.body {
            args.extend(["--body", body.as_str()]);
        }
        if let Some(parent) = &self.parent {
            args.extend(["--parent-id", parent.as_str()]);
        }
        let output = adapter.run_data(&args, Some(CREATED_AT), None).await?;
        if output.code != Some(EXIT_OK) {
            return Err(Failure::new(
                "the Given task is created",
                format!("`task create` makes {} in {}", self.id, self.status),
            )
            .actual(format!(
                "exit {}; stderr: {}",
                output.exit(),
                output.stderr.trim()
            ))
            .into());
        }
        Ok(())
    }
}

/// Creates task `id` in `status` with no metadata.
pub async fn task(adapter: &Adapter, id: &str, status: &str) -> Result<(), CheckError> {
    TaskSpec::new(id, status).create(adapter).await
}

/// Writes `result` as the run result of `task` through `run result`; the target's fault when
/// it refuses a valid run result.
pub async fn run_result(adapter: &Adapter, task: &str, result: &Value) -> Result<(), CheckError> {
    let output = adapter.run_result(task, result).await?;
    if output.code != Some(EXIT_OK) {
        return Err(Failure::new(
            "the Given run_result.json is written",
            format!("`run result --task {task}` accepts {result}"),
        )
        .actual(format!(
            "exit {}; stderr: {}",
            output.exit(),
            output.stderr.trim()
        ))
        .into());
    }
    Ok(())
}
