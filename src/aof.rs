//! AOF/1: the agent task protocol, its filesystem task store, event log, run artifacts and scheduler.
//!
//! Messages arrive as envelopes ([`envelope`]) in one of three wire forms ([`message`]); the
//! [`router`] validates them, serialises work per task with a cross-process lock and dispatches them
//! to the handlers for completion reports, status updates, handoff requests and acknowledgements.
//! Tasks live as Markdown files with YAML frontmatter under `tasks/<status>/` ([`task`], [`store`]),
//! every state change is appended to a JSONL event log ([`event`]), and agents' runs leave artifacts
//! under `runs/<taskId>/` ([`run`]). The [`scheduler`] reclaims or completes tasks whose heartbeat
//! went stale. Time always comes from a [`clock::Clock`], so every threshold is testable.
//!
//! The decisions taken where the specification contradicts itself or its original implementation
//! are recorded as `E-AOF-*` entries in `conformance/ERRATA.md`.

pub mod cli;
pub mod clock;
pub mod completion;
pub mod data_dir;
pub mod envelope;
pub mod error;
pub mod event;
pub mod handoff;
pub mod message;
pub mod router;
pub mod run;
pub mod scheduler;
pub mod store;
pub mod task;
pub mod task_id;
pub mod timestamp;
pub mod validation;
