//! Agent teams: a lead and its teammates sharing a SQLite task ledger and JSONL mailboxes
//! (`agent-teams-bdd.md`).
//!
//! A root directory holds one directory per team: `config.json` ([`config`]), `ledger.db`
//! ([`ledger`]: tasks, members, shutdown requests and an activity trail, claimed with one
//! conditional `UPDATE`) and `inbox/<sanitised key>/messages.jsonl` ([`mailbox`]). [`names`]
//! checks every name before it reaches the filesystem, [`xml`] renders the injected
//! `<teammate-message>` block, [`team`] combines them into the operations of `ski teams`
//! ([`cli`]). Time comes from a [`clock::Clock`] so tests can fix it.
//!
//! The decisions taken where the document is ambiguous or contradicts its upstream are recorded
//! as `E-TEAM-*` entries in `conformance/ERRATA.md`.

pub mod cli;
pub mod clock;
pub mod config;
pub mod error;
pub mod ledger;
pub mod mailbox;
pub mod names;
pub mod team;
pub mod xml;
