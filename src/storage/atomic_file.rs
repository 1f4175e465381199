//! Crash-safe file updates: write a temp file in the same directory, fsync it, rename it over the
//! target, fsync the directory. A reader sees the old content or the new, never a mix.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

static COUNTER: AtomicU64 = AtomicU64::new(0);

/// The prefix of temp files; readers skip names starting with it.
pub const TEMP_PREFIX: &str = ".tmp-";

/// Replaces `path` with `bytes` atomically and durably.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let dir = parent_of(path)?;
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "path has no file name"))?;
    let temp = dir.join(format!(
        "{TEMP_PREFIX}{name}.{}.{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    let result = (|| {
        let mut file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&temp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        drop(file);
        fs::rename(&temp, path)?;
        sync_dir(dir)
    })();
    if result.is_err() {
        let _ = fs::remove_file(&temp);
    }
    result
}

/// Renames `from` to `to` and fsyncs both directories.
pub fn rename_durable(from: &Path, to: &Path) -> io::Result<()> {
    fs::rename(from, to)?;
    sync_dir(parent_of(to)?)?;
    let from_dir = parent_of(from)?;
    if from_dir != parent_of(to)? {
        sync_dir(from_dir)?;
    }
    Ok(())
}

/// Creates a directory and its parents, then fsyncs the parent so the entry survives a crash.
pub fn create_dir_durable(path: &Path) -> io::Result<()> {
    if path.is_dir() {
        return Ok(());
    }
    fs::create_dir_all(path)?;
    sync_dir(parent_of(path)?)
}

/// Flushes a directory's entries to disk.
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

fn parent_of(path: &Path) -> io::Result<&Path> {
    match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => Ok(parent),
        Some(_) => Ok(Path::new(".")),
        None => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "path has no parent directory",
        )),
    }
}

/// Whether a file name is one of this module's temp files.
pub fn is_temp_name(name: &str) -> bool {
    name.starts_with(TEMP_PREFIX)
}

/// A temp file's name `.tmp-<target>.<pid>.<suffix>` taken apart: the target, the id of the
/// process that wrote it, and the suffix ([`write_atomic`]'s counter, or a stage name such as
/// AOF's `staged`); `None` for any other name.
fn temp_parts(name: &str) -> Option<(&str, i32, &str)> {
    let rest = name.strip_prefix(TEMP_PREFIX)?;
    let mut parts = rest.rsplitn(3, '.');
    let suffix = parts.next().filter(|suffix| !suffix.is_empty())?;
    let pid = parts.next()?.parse().ok()?;
    let target = parts.next().filter(|target| !target.is_empty())?;
    Some((target, pid, suffix))
}

/// Removes temp files in `dir` left by processes that no longer exist (killed mid-write).
/// Files of live processes, and files whose owner cannot be told, are left alone.
pub fn sweep_stale_temps(dir: &Path) {
    sweep(dir, |_, _| true);
}

/// Removes, like [`sweep_stale_temps`], only the temp files [`write_atomic`] makes for the files
/// named in `targets` (`.tmp-<target>.<pid>.<counter>`): a directory that may hold other files
/// loses nothing else.
pub fn sweep_stale_temps_of(dir: &Path, targets: &[&str]) {
    sweep(dir, |target, suffix| {
        targets.contains(&target) && suffix.bytes().all(|b| b.is_ascii_digit())
    });
}

fn sweep(dir: &Path, wanted: impl Fn(&str, &str) -> bool) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(temp_parts)
            .filter(|(target, pid, suffix)| *pid > 0 && wanted(target, suffix))
            .map(|(_, pid, _)| pid)
        else {
            continue;
        };
        let is_file = entry.file_type().is_ok_and(|kind| kind.is_file());
        let gone = matches!(
            nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None),
            Err(nix::errno::Errno::ESRCH)
        );
        if gone && is_file {
            let _ = fs::remove_file(entry.path());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn temp_names_are_taken_apart_and_other_names_are_not_temps() {
        assert_eq!(
            temp_parts(".tmp-run.json.42.7"),
            Some(("run.json", 42, "7"))
        );
        assert_eq!(
            temp_parts(".tmp-TASK-2026-02-09-001.md.42.staged"),
            Some(("TASK-2026-02-09-001.md", 42, "staged"))
        );
        for other in [
            ".tmp-run.json.x.7",
            ".tmp-.42.7",
            ".tmp-42.7",
            ".tmp-run.json.42.",
            "run.json.42.7",
            ".tmp-notes",
        ] {
            assert_eq!(temp_parts(other), None, "{other}");
        }
    }
}
