//! Durable file primitives shared by the file-backed systems (AOF's task store, the teams'
//! inboxes and configs): atomic replacement and cross-process locks; and paths from outside
//! resolved inside a root directory without following a link out of it; and the audit of a
//! SQLite file against the schema and values its program writes, and the closed sets stored as text.

pub mod atomic_file;
#[cfg(any(feature = "teams", feature = "intercom"))]
pub mod closed_set;
pub mod file_lock;
pub mod inside_root;
#[cfg(any(feature = "teams", feature = "intercom"))]
pub mod sqlite_schema;
