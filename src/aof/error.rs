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
    #[error("event log failed: {0}")]
    Events(#[source] io::Error),
    /// A handoff artifact could not be written.
    #[error("handoff artifact {path} could not be written: {source}")]
    Handoff {
        /// The file.
        path: std::path::PathBuf,
        /// The cause.
        source: io::Error,
    },
}
