//! Where inputs come from: seeds read at run time from the repository (the golden fixtures, the
//! shipped mock-agent scripts, the target profiles), the in-tree corpus `fuzz/corpus/<target>/`
//! and the saved findings `fuzz/artifacts/<target>/`.

use std::path::{Path, PathBuf};

use serde_json::Value;

/// The repository root this package was built in.
pub fn repository_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."))
}

/// The in-tree corpus of one target.
pub fn corpus_dir(root: &Path, target: &str) -> PathBuf {
    root.join("fuzz").join("corpus").join(target)
}

/// The saved findings of one target.
pub fn artifacts_dir(root: &Path, target: &str) -> PathBuf {
    root.join("fuzz").join("artifacts").join(target)
}

/// Every file under `dir` (recursively, sorted) whose name ends with `suffix` (any file with
/// `""`), skipping notes (`*.txt`, `*.md`) and hidden files.
pub fn files_under(dir: &Path, suffix: &str) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(next) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&next) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.starts_with('.') {
                continue;
            }
            if path.is_dir() {
                pending.push(path);
            } else if name.ends_with(suffix) && !name.ends_with(".txt") && !name.ends_with(".md") {
                found.push(path);
            }
        }
    }
    found.sort();
    found
}

/// The contents of the files of [`files_under`].
pub fn read_all(dir: &Path, suffix: &str) -> Vec<Vec<u8>> {
    files_under(dir, suffix)
        .into_iter()
        .filter_map(|path| std::fs::read(path).ok())
        .collect()
}

/// The JSON documents under `golden/<sub>`: every `*.json` file and the JSON body of every insta
/// snapshot (`*.snap`), each as one compact line.
pub fn golden_json_lines(root: &Path, sub: &str) -> Vec<Vec<u8>> {
    let dir = root.join("golden").join(sub);
    let mut lines = Vec::new();
    for path in files_under(&dir, "") {
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        let body = if path.extension().is_some_and(|e| e == "snap") {
            snapshot_body(&text)
        } else if path.extension().is_some_and(|e| e == "json") {
            &text
        } else {
            continue;
        };
        if let Ok(value) = serde_json::from_str::<Value>(body)
            && let Ok(line) = serde_json::to_vec(&value)
        {
            lines.push(line);
        }
    }
    lines
}

/// The JSON-RPC lines recorded in the mock agent's recordings (`golden/recordings/*.toml`).
pub fn recorded_lines(root: &Path) -> Vec<Vec<u8>> {
    let mut lines = Vec::new();
    for text in read_all(&root.join("golden").join("recordings"), ".toml") {
        let Ok(text) = String::from_utf8(text) else {
            continue;
        };
        for line in text.lines() {
            let line = line.trim();
            for prefix in ["client = '", "line = '"] {
                if let Some(rest) = line.strip_prefix(prefix)
                    && let Some(json) = rest.strip_suffix('\'')
                {
                    lines.push(json.as_bytes().to_vec());
                }
            }
        }
    }
    lines
}

/// What an insta snapshot holds after its `---` header.
pub fn snapshot_body(text: &str) -> &str {
    if let Some(rest) = text.strip_prefix("---\n")
        && let Some(end) = rest.find("\n---\n")
    {
        return &rest[end + 5..];
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snapshot_headers_are_stripped() {
        assert_eq!(
            snapshot_body("---\nsource: x\n---\n{\"a\":1}\n"),
            "{\"a\":1}\n"
        );
        assert_eq!(snapshot_body("{}"), "{}");
    }

    #[test]
    fn the_golden_fixtures_are_found() {
        let root = repository_root();
        assert!(golden_json_lines(&root, "acp").len() > 50);
        assert!(!recorded_lines(&root).is_empty());
    }
}
