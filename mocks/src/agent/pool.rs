//! A pool of recordings: every recording in a directory replayed as one, so that a prompt is
//! answered by the recording that holds its text; `--pool-tag` keeps only the recordings with a
//! tag, `--pool-seed` picks which one answers the messages every recording holds (initialize,
//! session/new).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{Value, json};

use super::recording::{Exchange, Recording};
use super::script::{Script, ScriptError};

/// How recordings are chosen from a pool.
#[derive(Debug, Clone, Default)]
pub struct Selection {
    /// Only recordings with this tag.
    pub tag: Option<String>,
    /// The recording that answers first: the seed modulo the number chosen (default 0, the first
    /// by file name).
    pub seed: Option<u64>,
}

/// Every recording in `dir` (its `*.toml` files that hold a `[recording]`), by file name.
pub fn recordings_in(dir: &Path) -> Result<Vec<(PathBuf, Recording)>, ScriptError> {
    let entries = std::fs::read_dir(dir).map_err(|source| ScriptError::Read {
        path: dir.to_owned(),
        source,
    })?;
    let mut paths: Vec<PathBuf> = entries
        .filter_map(|entry| Some(entry.ok()?.path()))
        .filter(|path| path.extension().is_some_and(|e| e == "toml"))
        .collect();
    paths.sort();
    let mut recordings = Vec::new();
    for path in paths {
        let script = Script::load(&path.display().to_string())?;
        if let Some(recording) = script.recording {
            recordings.push((path, (*recording).clone()));
        }
    }
    Ok(recordings)
}

/// Loads every recording (`*.toml` with `[[exchange]]`) in `dir` as one script.
pub fn load(dir: &Path, selection: &Selection) -> Result<Script, ScriptError> {
    let origin = dir.display().to_string();
    let invalid = |message: String| ScriptError::Invalid {
        origin: origin.clone(),
        at: "pool".to_owned(),
        message,
    };
    let mut recordings: Vec<Recording> = recordings_in(dir)?
        .into_iter()
        .map(|(_, recording)| recording)
        .filter(|recording| {
            selection
                .tag
                .as_ref()
                .is_none_or(|tag| recording.spec.tags.contains(tag))
        })
        .collect();
    if recordings.is_empty() {
        return Err(invalid(match &selection.tag {
            Some(tag) => format!("no recording tagged {tag:?}"),
            None => "no recording in the directory".to_owned(),
        }));
    }
    let first =
        usize::try_from(selection.seed.unwrap_or(0) % recordings.len() as u64).unwrap_or_default();
    recordings.rotate_left(first);
    let mut pooled = recordings[0].clone();
    for (index, recording) in recordings.iter().enumerate().skip(1) {
        pooled.exchanges.extend(
            recording
                .exchanges
                .iter()
                .filter(|e| e.client.is_some())
                .map(|e| own_ids(e, index)),
        );
    }
    Ok(Script {
        origin,
        recording: Some(Arc::new(pooled)),
        ..Script::empty()
    })
}

/// The exchange with its recorded ids made the pool member's own, so that two recordings'
/// `id: 3` stay apart (replay answers with live ids whatever the recorded ones were).
fn own_ids(exchange: &Exchange, member: usize) -> Exchange {
    let mark = |message: &mut Value| {
        if let Some(id) = message.get("id").filter(|id| !id.is_null()) {
            message["id"] = json!(format!("pool{member}:{id}"));
        }
    };
    let mut exchange = exchange.clone();
    if let Some(client) = exchange.client.as_mut() {
        mark(client);
    }
    for line in &mut exchange.agent {
        if let Some(message) = line.message.as_mut() {
            mark(message);
        }
    }
    exchange
}

/// Whether `name` names a pool (a directory) rather than a script.
pub fn is_pool(name: &str) -> bool {
    Path::new(name).is_dir()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_of_a_member_are_its_own() {
        let exchange = Exchange {
            client: Some(json!({"id": 3, "method": "session/prompt"})),
            ..Exchange::default()
        };
        assert_eq!(
            own_ids(&exchange, 2).client,
            Some(json!({"id": "pool2:3", "method": "session/prompt"}))
        );
    }
}
