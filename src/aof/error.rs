//! The error of an AOF/1 operation: the store, the run artifacts or the event log failed.

use std::io;

use super::run::RunError;
use super::store::StoreError;

/// Why an operation on a data dir failed.
#[derive(Debug, thiserror::Error)]
pub enum AofError {
    /// The task store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The run artifacts failed.
    #[error(transparent)]
    Run(#[from] RunError),
    /// The event log failed.
    #[error("event log failed")]
    Events(#[source] io::Error),
    /// A handoff artifact could not be written.
    #[error("handoff artifact {path} could not be written")]
    Handoff {
        /// The file.
        path: std::path::PathBuf,
        /// The cause.
        source: io::Error,
    },
}

/// An error and its causes on one line, `outer: cause: root`.
pub fn describe(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}
