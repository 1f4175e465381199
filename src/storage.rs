//! Durable file primitives shared by the file-backed systems (AOF's task store, the teams'
//! inboxes and configs): atomic replacement and cross-process locks.

pub mod atomic_file;
pub mod file_lock;
