//! `summaryRef` of a completion report (E-AOF-13) through the `ski aof` adapter: a summary that
//! is a symbolic link out of the task's companion directory counts as missing (the warning is
//! logged), as an absolute path or `..` does; a link that stays inside counts as found.

use crate::aof_support;

use std::os::unix::fs::symlink;
use std::path::Path;

use aof_support::{NOW, envelope, run_ski};
use serde_json::{Value, json};

const TASK: &str = "TASK-2026-02-09-001";

fn aof(data: &Path, args: &[&str], stdin: &str) -> Value {
    let data = data.to_string_lossy().into_owned();
    let mut full = vec!["aof"];
    full.extend_from_slice(args);
    full.extend_from_slice(&["--data-dir", &data, "--now", NOW]);
    let output = run_ski(&full, stdin);
    assert!(
        output.status.success(),
        "ski {full:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("json")
}

/// Routes a completion whose summary is `place`d in a fresh task; answers whether
/// `summary_file_not_found` was warned.
fn warned(place: impl FnOnce(&Path, &Path)) -> bool {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    aof(
        &data,
        &[
            "task",
            "create",
            "--title",
            "t",
            "--id",
            TASK,
            "--status",
            "in-progress",
        ],
        "",
    );
    let outputs = data.join("tasks/in-progress").join(TASK).join("outputs");
    place(&outputs, dir.path());
    let payload = json!({
        "outcome": "partial",
        "summaryRef": "outputs/summary.md",
        "tests": { "total": 1, "passed": 1, "failed": 0 },
        "notes": "n",
    });
    aof(
        &data,
        &["route"],
        &envelope("completion.report", TASK, "swe-backend", payload),
    );
    aof(&data, &["events"], "")
        .as_array()
        .expect("events")
        .iter()
        .any(|e| {
            e["type"] == "protocol.message.warning"
                && e.to_string().contains("summary_file_not_found")
        })
}

#[test]
fn a_summary_linked_out_of_the_companion_directory_counts_as_missing() {
    assert!(
        warned(|outputs, base| {
            std::fs::write(base.join("elsewhere.md"), "# outside\n").expect("outside");
            symlink(base.join("elsewhere.md"), outputs.join("summary.md")).expect("link");
        }),
        "a summary linked out of the task directory was taken as found"
    );
    assert!(!warned(|outputs, _| {
        std::fs::write(outputs.join("real.md"), "# inside\n").expect("inside");
        symlink("real.md", outputs.join("summary.md")).expect("link");
    }));
    assert!(!warned(|outputs, _| {
        std::fs::write(outputs.join("summary.md"), "# inside\n").expect("inside");
    }));
}
