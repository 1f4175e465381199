//! Handoff artifacts written into a child task's `inputs/`: `handoff.json` (the payload) and
//! `handoff.md` (the same for people).

use std::path::{Path, PathBuf};

use super::envelope::HandoffRequestPayload;
use super::error::AofError;
use crate::storage::atomic_file::{create_dir_durable, sweep_stale_temps, write_atomic};

/// The delegation depth a child may reach: a root task may delegate, a delegated task may not.
pub const MAX_DELEGATION_DEPTH: u64 = 1;

/// Renders `handoff.md`.
pub fn render_markdown(payload: &HandoffRequestPayload) -> String {
    let mut out = String::from("# Handoff Request\n\n");
    out.push_str(&format!("**Task:** {}\n", payload.task_id));
    out.push_str(&format!("**Parent Task:** {}\n", payload.parent_task_id));
    out.push_str(&format!("**From:** {}\n", payload.from_agent));
    out.push_str(&format!("**To:** {}\n", payload.to_agent));
    out.push_str(&format!("**Due By:** {}\n", payload.due_by));
    for (title, items) in [
        ("Acceptance Criteria", &payload.acceptance_criteria),
        ("Expected Outputs", &payload.expected_outputs),
        ("Context References", &payload.context_refs),
        ("Constraints", &payload.constraints),
    ] {
        out.push_str(&format!("\n## {title}\n\n"));
        if items.is_empty() {
            out.push_str("None\n");
        }
        for item in items {
            out.push_str(&format!("- {}\n", item.replace('\n', " ")));
        }
    }
    out
}

/// Writes both artifacts into `<companion>/inputs/` and returns their paths.
pub fn write_artifacts(
    companion_dir: &Path,
    payload: &HandoffRequestPayload,
) -> Result<(PathBuf, PathBuf), AofError> {
    let inputs = companion_dir.join("inputs");
    let wrap = |path: &Path| {
        let path = path.to_owned();
        move |source| AofError::Handoff { path, source }
    };
    create_dir_durable(&inputs).map_err(wrap(&inputs))?;
    sweep_stale_temps(&inputs);
    let json_path = inputs.join("handoff.json");
    let mut json = serde_json::to_string_pretty(payload).map_err(|error| AofError::Handoff {
        path: json_path.clone(),
        source: std::io::Error::other(error),
    })?;
    json.push('\n');
    write_atomic(&json_path, json.as_bytes()).map_err(wrap(&json_path))?;
    let md_path = inputs.join("handoff.md");
    write_atomic(&md_path, render_markdown(payload).as_bytes()).map_err(wrap(&md_path))?;
    Ok((json_path, md_path))
}
