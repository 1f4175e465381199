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

/// The id of the process that wrote a temp file, from its name `.tmp-<name>.<pid>.<n>`.
fn temp_owner(name: &str) -> Option<i32> {
    let rest = name.strip_prefix(TEMP_PREFIX)?;
    let mut parts = rest.rsplitn(3, '.');
    let _counter = parts.next()?;
    parts.next()?.parse().ok()
}

/// Removes temp files in `dir` left by processes that no longer exist (killed mid-write).
/// Files of live processes, and files whose owner cannot be told, are left alone.
pub fn sweep_stale_temps(dir: &Path) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .filter(|n| is_temp_name(n))
            .and_then(temp_owner)
        else {
            continue;
        };
        let gone = matches!(
            nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None),
            Err(nix::errno::Errno::ESRCH)
        );
        if gone && pid != 0 {
            let _ = fs::remove_file(entry.path());
        }
    }
}
