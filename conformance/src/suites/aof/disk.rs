//! What the target left in its data dir, read directly from disk: task files with their YAML
//! frontmatter, companion directories, run artifacts and snapshots of the whole task tree.
//!
//! The layout is the adapter contract's: `tasks/<status>/<id>.md`, `tasks/<status>/<id>/…`.
//! Names starting with `.` (temp and lock files) are ignored.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::{CheckError, Failure};

/// The statuses of the document's era (E-AOF-16), also the names of the status directories.
pub const STATUSES: [&str; 6] = [
    "backlog",
    "ready",
    "in-progress",
    "blocked",
    "review",
    "done",
];

/// One task file as found on disk.
#[derive(Debug, Clone)]
pub struct TaskFile {
    /// The status directory it lies in.
    pub dir_status: String,
    /// Its path.
    pub path: PathBuf,
    /// The whole file.
    pub raw: String,
    /// The YAML frontmatter as JSON.
    pub frontmatter: Value,
    /// The Markdown body after the frontmatter.
    pub body: String,
}

impl TaskFile {
    /// The frontmatter's `status`.
    pub fn status(&self) -> Option<&str> {
        self.frontmatter.get("status").and_then(Value::as_str)
    }

    /// A frontmatter value at a dotted path (`metadata.delegationDepth`).
    pub fn field(&self, path: &str) -> Option<&Value> {
        path.split('.')
            .try_fold(&self.frontmatter, |node, key| node.get(key))
    }

    /// The companion directory `tasks/<status>/<id>/` next to the file.
    pub fn companion(&self) -> PathBuf {
        self.path.with_extension("")
    }
}

/// Splits a task file into frontmatter (as JSON) and body, or says why it does not parse.
pub fn parse_task(text: &str) -> Result<(Value, String), String> {
    let rest = text
        .strip_prefix("---\n")
        .ok_or("the file does not start with a \"---\" line")?;
    let mut yaml_len = None;
    let mut offset = 0;
    for line in rest.split_inclusive('\n') {
        if line.trim_end_matches(['\n', '\r']) == "---" {
            yaml_len = Some(offset);
            break;
        }
        offset += line.len();
    }
    let yaml_len = yaml_len.ok_or("the frontmatter has no closing \"---\" line")?;
    let yaml = &rest[..yaml_len];
    let body = rest[yaml_len..]
        .split_once('\n')
        .map_or("", |(_, body)| body);
    let frontmatter: Value =
        serde_norway::from_str(yaml).map_err(|e| format!("the frontmatter is not YAML: {e}"))?;
    if !frontmatter.is_object() {
        return Err("the frontmatter is not a mapping".to_owned());
    }
    Ok((frontmatter, body.to_owned()))
}

/// The task `id` as it lies on disk: in exactly one status directory, parsing, its frontmatter
/// `id` and `status` agreeing with its file name and directory. `None` when no file exists.
pub fn find_task(data_dir: &Path, id: &str) -> Result<Option<TaskFile>, CheckError> {
    let mut found = Vec::new();
    for status in STATUSES {
        let path = data_dir.join("tasks").join(status).join(format!("{id}.md"));
        if path.is_file() {
            found.push((status, path));
        }
    }
    if found.len() > 1 {
        let places: Vec<String> = found.iter().map(|(s, _)| format!("tasks/{s}/")).collect();
        return Err(Failure::new(
            format!("{id} is in one status directory"),
            format!("{id}.md in exactly one status directory"),
        )
        .actual(format!("found in {}", places.join(" and ")))
        .into());
    }
    let Some((status, path)) = found.pop() else {
        return Ok(None);
    };
    let raw = std::fs::read_to_string(&path)
        .map_err(|e| CheckError::Harness(format!("cannot read {}: {e}", path.display())))?;
    let (frontmatter, body) = parse_task(&raw).map_err(|why| {
        CheckError::from(
            Failure::new(
                format!("tasks/{status}/{id}.md parses"),
                "a task file of YAML frontmatter between \"---\" lines, then the body",
            )
            .actual(format!("{why}; file: {raw:?}")),
        )
    })?;
    let file = TaskFile {
        dir_status: status.to_owned(),
        path,
        raw,
        frontmatter,
        body,
    };
    if file.field("id").and_then(Value::as_str) != Some(id) {
        return Err(Failure::new(
            format!("tasks/{status}/{id}.md names its task"),
            format!("frontmatter id: {id}"),
        )
        .actual(format!("frontmatter id: {:?}", file.field("id")))
        .into());
    }
    if file.status() != Some(status) {
        return Err(Failure::new(
            format!("{id} lies in the directory of its status"),
            format!("tasks/{status}/{id}.md has status: {status}"),
        )
        .actual(format!("status: {:?}", file.field("status")))
        .into());
    }
    Ok(Some(file))
}

/// The task `id`, which must exist.
pub fn task(data_dir: &Path, id: &str) -> Result<TaskFile, CheckError> {
    find_task(data_dir, id)?.ok_or_else(|| {
        Failure::new(
            format!("{id} exists"),
            format!("tasks/<status>/{id}.md exists"),
        )
        .actual(format!(
            "no file {id}.md under {}",
            data_dir.join("tasks").display()
        ))
        .into()
    })
}

/// Fails unless task `id` lies in `tasks/<status>/` with `status: <status>`.
pub fn ensure_status(data_dir: &Path, id: &str, status: &str) -> Result<TaskFile, CheckError> {
    let file = task(data_dir, id)?;
    if file.dir_status != status {
        return Err(Failure::new(
            format!("{id} is {status}"),
            format!("tasks/{status}/{id}.md with status: {status}"),
        )
        .actual(format!(
            "tasks/{}/{id}.md with status: {}",
            file.dir_status, file.dir_status
        ))
        .into());
    }
    Ok(file)
}

/// Reads a JSON file; `None` when it does not exist, a failure when it is not JSON.
pub fn read_json(path: &Path) -> Result<Option<Value>, CheckError> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => {
            return Err(CheckError::Harness(format!(
                "cannot read {}: {e}",
                path.display()
            )));
        }
    };
    serde_json::from_str(&text).map(Some).map_err(|e| {
        Failure::new(
            format!("{} is JSON", path.display()),
            format!("{} holds valid JSON", path.display()),
        )
        .actual(format!("{e}; file: {text:?}"))
        .into()
    })
}

/// Every file and directory under `root` (relative paths, names starting with `.` left out),
/// with the contents of the files; directories map to `None`.
pub fn snapshot(root: &Path) -> Result<BTreeMap<String, Option<Vec<u8>>>, CheckError> {
    let mut entries = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let listing = match std::fs::read_dir(&dir) {
            Ok(listing) => listing,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => {
                return Err(CheckError::Harness(format!(
                    "cannot list {}: {e}",
                    dir.display()
                )));
            }
        };
        for entry in listing {
            let entry = entry.map_err(CheckError::harness)?;
            if entry.file_name().to_string_lossy().starts_with('.') {
                continue;
            }
            let path = entry.path();
            let relative = path
                .strip_prefix(root)
                .unwrap_or(&path)
                .display()
                .to_string();
            if path.is_dir() {
                entries.insert(relative, None);
                stack.push(path);
            } else {
                let bytes = std::fs::read(&path).map_err(|e| {
                    CheckError::Harness(format!("cannot read {}: {e}", path.display()))
                })?;
                entries.insert(relative, Some(bytes));
            }
        }
    }
    Ok(entries)
}

/// The task tree `tasks/` of the data dir.
pub fn tasks_snapshot(data_dir: &Path) -> Result<BTreeMap<String, Option<Vec<u8>>>, CheckError> {
    snapshot(&data_dir.join("tasks"))
}

/// Fails unless the task tree is exactly as it was in `before`; `what` names the action.
pub fn ensure_tasks_unchanged(
    data_dir: &Path,
    before: &BTreeMap<String, Option<Vec<u8>>>,
    what: &str,
) -> Result<(), CheckError> {
    let after = tasks_snapshot(data_dir)?;
    if &after == before {
        return Ok(());
    }
    let mut changes = Vec::new();
    for (path, content) in &after {
        match before.get(path) {
            None => changes.push(format!("added tasks/{path}")),
            Some(old) if old != content => changes.push(format!("changed tasks/{path}")),
            Some(_) => {}
        }
    }
    for path in before.keys() {
        if !after.contains_key(path) {
            changes.push(format!("removed tasks/{path}"));
        }
    }
    Err(Failure::new(
        format!("{what} changes no task"),
        format!("every file under tasks/ unchanged by {what}"),
    )
    .actual(changes.join("; "))
    .into())
}

/// Every file named `name` under `root`, relative to `root`.
pub fn files_named(root: &Path, name: &str) -> Result<Vec<String>, CheckError> {
    Ok(snapshot(root)?
        .into_iter()
        .filter(|(path, content)| {
            content.is_some() && Path::new(path).file_name().is_some_and(|n| n == name)
        })
        .map(|(path, _)| path)
        .collect())
}

/// Fails when a handoff artifact (`handoff.json`, `handoff.md`) exists anywhere under `tasks/`.
pub fn ensure_no_handoff_artifacts(data_dir: &Path) -> Result<(), CheckError> {
    let root = data_dir.join("tasks");
    let mut found = files_named(&root, "handoff.json")?;
    found.extend(files_named(&root, "handoff.md")?);
    if found.is_empty() {
        return Ok(());
    }
    Err(Failure::new(
        "no handoff artifacts are created",
        "no handoff.json or handoff.md under tasks/",
    )
    .actual(
        found
            .iter()
            .map(|p| format!("tasks/{p}"))
            .collect::<Vec<_>>()
            .join(", "),
    )
    .into())
}

/// The `## Work Log` headings of a task body.
pub fn work_log_headings(body: &str) -> usize {
    body.lines()
        .filter(|l| l.trim_end() == "## Work Log")
        .count()
}

/// The entries (`- …` lines) under the `## Work Log` headings of a task body, in order.
pub fn work_log(body: &str) -> Vec<String> {
    let mut entries = Vec::new();
    let mut inside = false;
    for line in body.lines() {
        if line.starts_with('#') {
            inside = line.trim_end() == "## Work Log";
            continue;
        }
        if inside && line.starts_with("- ") {
            entries.push(line.to_owned());
        }
    }
    entries
}

/// The Work Log entries of task `id` on disk; a failure when there is none containing every one
/// of `needles`. Returns the matching entry.
pub fn ensure_work_log_entry(
    data_dir: &Path,
    id: &str,
    needles: &[&str],
) -> Result<String, CheckError> {
    let file = task(data_dir, id)?;
    let entries = work_log(&file.body);
    entries
        .iter()
        .find(|entry| needles.iter().all(|n| entry.contains(n)))
        .cloned()
        .ok_or_else(|| {
            Failure::new(
                format!("a Work Log entry of {id} names {}", needles.join(", ")),
                format!(
                    "a \"- …\" line under \"## Work Log\" in the body of {id} containing {}",
                    needles
                        .iter()
                        .map(|n| format!("{n:?}"))
                        .collect::<Vec<_>>()
                        .join(" and ")
                ),
            )
            .actual(format!("body: {:?}", file.body))
            .into()
        })
}
