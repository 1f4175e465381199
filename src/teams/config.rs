//! `<team>/config.json`: the team's identity and status, in the shape the upstream `team_create`
//! writes (E-TEAM-25), replaced atomically (temp file, fsync, rename) under `<team>/.config.lock`.

use std::io::Read;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::error::{TeamsError, TeamsResult};
use crate::storage::atomic_file::write_atomic;
use crate::storage::file_lock::FileLock;

/// The config file's name.
pub const CONFIG_FILE: &str = "config.json";
/// The largest config.json read (ski writes well under a kilobyte).
pub const MAX_CONFIG_BYTES: u64 = 1024 * 1024;
const CONFIG_LOCK: &str = ".config.lock";

/// The team is working.
pub const STATUS_ACTIVE: &str = "active";
/// The lead asked members to stop and waits for their answers.
pub const STATUS_SHUTTING_DOWN: &str = "shutting_down";
/// Every member stopped.
pub const STATUS_SHUTDOWN: &str = "shutdown";

/// Times and status.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Metadata {
    /// Epoch ms.
    pub created_at: i64,
    /// Epoch ms.
    pub updated_at: i64,
    /// `active`, `shutting_down` or `shutdown`.
    pub status: String,
}

/// The content of config.json.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TeamConfig {
    /// The team name.
    pub team_name: String,
    /// A random UUID.
    pub id: String,
    /// Free text.
    pub description: String,
    /// The default agent type of spawned teammates.
    pub agent_type: String,
    /// The lead's session key.
    pub lead: String,
    /// Times and status.
    pub metadata: Metadata,
}

impl TeamConfig {
    /// Reads `<dir>/config.json`; `None` when it does not exist. Anything but a regular file of
    /// at most [`MAX_CONFIG_BYTES`] holding a config is an error (a FIFO is never opened, so
    /// reading cannot block).
    pub fn read(dir: &Path) -> TeamsResult<Option<Self>> {
        let path = dir.join(CONFIG_FILE);
        let failure =
            |e: std::io::Error| TeamsError::storage(format!("reading {}", path.display()), e);
        let invalid =
            |what: String| failure(std::io::Error::new(std::io::ErrorKind::InvalidData, what));
        let meta = match std::fs::metadata(&path) {
            Ok(meta) => meta,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(failure(e)),
        };
        if !meta.is_file() {
            return Err(invalid("not a regular file".to_owned()));
        }
        if meta.len() > MAX_CONFIG_BYTES {
            return Err(invalid(format!(
                "{} bytes, more than the {MAX_CONFIG_BYTES} a config may have",
                meta.len()
            )));
        }
        let file = std::fs::File::open(&path).map_err(failure)?;
        let mut bytes = Vec::new();
        file.take(MAX_CONFIG_BYTES + 1)
            .read_to_end(&mut bytes)
            .map_err(failure)?;
        serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|e| invalid(e.to_string()))
    }

    /// Writes `<dir>/config.json` atomically.
    pub fn write(&self, dir: &Path) -> TeamsResult<()> {
        let path = dir.join(CONFIG_FILE);
        let mut bytes = serde_json::to_vec_pretty(self)
            .map_err(|e| TeamsError::storage("encoding config.json", std::io::Error::other(e)))?;
        bytes.push(b'\n');
        write_atomic(&path, &bytes)
            .map_err(|e| TeamsError::storage(format!("writing {}", path.display()), e))
    }

    /// Changes the status under the config lock; returns the new config.
    pub fn set_status(dir: &Path, status: &str, now: i64) -> TeamsResult<Self> {
        let _guard = FileLock::exclusive(&dir.join(CONFIG_LOCK))
            .map_err(|e| TeamsError::storage("locking config.json", e))?;
        let mut config = Self::read(dir)?.ok_or_else(|| {
            TeamsError::TeamNotFound(
                dir.file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default(),
            )
        })?;
        config.metadata.status = status.to_owned();
        config.metadata.updated_at = now;
        config.write(dir)?;
        Ok(config)
    }
}
