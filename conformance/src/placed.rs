//! Files a row must place where the target reads them, outside the row's own temp dir (a `.env`
//! at a fixed path next to an implementation's sources): the runner claims each one before the
//! row starts (one row at a time per path), moves what was there aside so the row starts without
//! it, and puts it back afterwards, even when the row failed or the run was interrupted.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock, Mutex, PoisonError};

use tokio::sync::OwnedMutexGuard;

/// Errors of claiming or restoring a placed file.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PlacedError {
    /// What was at the path could not be read or moved aside.
    #[error("cannot save {path} before the row: {source}")]
    Save {
        /// The path.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// What was at the path could not be put back.
    #[error("cannot restore {path} after the row: {source}")]
    Restore {
        /// The path.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

/// The settings, per suite, that name a file the suite's rows write where the target reads it.
const PLACED_SETTINGS: &[(&str, &crate::vocabulary::Setting)] = &[
    ("kiro", &crate::vocabulary::kiro::ENV_FILE),
    ("kiro-ski", &crate::vocabulary::kiro::ENV_FILE),
];

/// The files outside the row's temp dir that rows of `suite` write for this profile: the
/// [`PLACED_SETTINGS`] whose value is an absolute path (a relative one is inside the row's world).
pub fn paths_of(suite: &str, section: &crate::target::SuiteTarget) -> Vec<PathBuf> {
    let mut paths: Vec<PathBuf> = PLACED_SETTINGS
        .iter()
        .filter(|(s, _)| *s == suite)
        .filter_map(|(_, setting)| section.settings.get(setting.name))
        .map(PathBuf::from)
        .filter(|path| path.is_absolute())
        .collect();
    paths.sort();
    paths.dedup();
    paths
}

/// One lock per path, shared by every row of the process.
static LOCKS: LazyLock<Mutex<BTreeMap<PathBuf, Arc<tokio::sync::Mutex<()>>>>> =
    LazyLock::new(Mutex::default);

/// What each claimed path held before its row (`None`: nothing), for [`restore_all_now`].
static SAVED: LazyLock<Mutex<BTreeMap<PathBuf, Option<Vec<u8>>>>> = LazyLock::new(Mutex::default);

fn saved() -> std::sync::MutexGuard<'static, BTreeMap<PathBuf, Option<Vec<u8>>>> {
    SAVED.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A path a row holds: it alone may write there until [`Claim::restore`].
#[derive(Debug)]
pub struct Claim {
    path: PathBuf,
    restored: bool,
    _turn: OwnedMutexGuard<()>,
}

/// Waits for the row's turn at `path`, saves what is there and removes it: the row starts as it
/// would in a fresh directory.
pub async fn claim(path: &Path) -> Result<Claim, PlacedError> {
    let lock = {
        let mut locks = LOCKS.lock().unwrap_or_else(PoisonError::into_inner);
        Arc::clone(locks.entry(path.to_owned()).or_default())
    };
    let turn = lock.lock_owned().await;
    let before = match std::fs::read(path) {
        Ok(bytes) => Some(bytes),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(source) => {
            return Err(PlacedError::Save {
                path: path.to_owned(),
                source,
            });
        }
    };
    saved().insert(path.to_owned(), before.clone());
    let claim = Claim {
        path: path.to_owned(),
        restored: false,
        _turn: turn,
    };
    if before.is_some() {
        std::fs::remove_file(path).map_err(|source| PlacedError::Save {
            path: path.to_owned(),
            source,
        })?;
    }
    Ok(claim)
}

/// Puts `before` back at `path`: its bytes, or no file at all.
fn put_back(path: &Path, before: Option<&[u8]>) -> std::io::Result<()> {
    match before {
        Some(bytes) => std::fs::write(path, bytes),
        None => match std::fs::remove_file(path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        },
    }
}

impl Claim {
    /// The path held.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Puts back what was at the path before the row, and lets the next row have it.
    pub fn restore(mut self) -> Result<(), PlacedError> {
        self.restored = true;
        let before = saved().remove(&self.path);
        put_back(&self.path, before.flatten().as_deref()).map_err(|source| PlacedError::Restore {
            path: self.path.clone(),
            source,
        })
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        if !self.restored
            && let Some(before) = saved().remove(&self.path)
        {
            let _ = put_back(&self.path, before.as_deref());
        }
    }
}

/// Puts back every claimed path at once (a second signal ends the run without the rows'
/// teardowns); answers how many.
pub fn restore_all_now() -> usize {
    let all = std::mem::take(&mut *saved());
    all.iter()
        .filter(|(path, before)| put_back(path, before.as_deref()).is_ok())
        .count()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_claimed_file_is_moved_aside_for_the_row_and_put_back_after_it() {
        let dir = tempfile::tempdir().unwrap();
        let kept = dir.path().join(".env");
        std::fs::write(&kept, "ORIGINAL=1\n").unwrap();
        let claim = claim(&kept).await.unwrap();
        assert!(!kept.exists(), "the row starts without the file");
        std::fs::write(&kept, "ROW=1\n").unwrap();
        claim.restore().unwrap();
        assert_eq!(std::fs::read_to_string(&kept).unwrap(), "ORIGINAL=1\n");

        let absent = dir.path().join("absent.env");
        let claim = super::claim(&absent).await.unwrap();
        std::fs::write(&absent, "ROW=1\n").unwrap();
        drop(claim);
        assert!(
            !absent.exists(),
            "a file the row made is removed, even on drop"
        );
    }

    #[tokio::test]
    async fn a_second_row_waits_for_the_first_to_restore() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(".env");
        let first = claim(&path).await.unwrap();
        let second = tokio::spawn({
            let path = path.clone();
            async move {
                let claim = claim(&path).await.unwrap();
                let seen = path.exists();
                claim.restore().unwrap();
                seen
            }
        });
        std::fs::write(&path, "FIRST=1\n").unwrap();
        tokio::task::yield_now().await;
        assert!(!second.is_finished(), "the second row waits its turn");
        first.restore().unwrap();
        assert!(
            !second.await.unwrap(),
            "the second row saw no file of the first"
        );
    }
}
