//! The foundation unit of a chat bot that drives `kiro-cli acp --agent NAME`
//! (`kiro-unit1-business-rules.md`): configuration, startup prerequisites, the prefix-scoped
//! provisioner of the kiro home, and an ACP client with its states, streaming and stderr handling.
//!
//! - [`config`]: the configuration from the environment and an optional `.env` file (BR-01),
//!   validated as a whole, immutable once loaded, printed with its secret redacted.
//! - [`prerequisites`]: what must hold before the bot starts (BR-02).
//! - [`provision`]: the delete-then-copy of `agents/`, `steering/` and `skills/` entries that
//!   start with the agent name, with the safety cap, the empty-template refusal and the post-check
//!   (BR-03, BR-04).
//! - [`client`]: the ACP client over `kiro-cli acp` on [`crate::jsonrpc::Peer`] and
//!   [`crate::transport::child`]: NEW → READY → BUSY → READY, DEAD terminal (BR-05 … BR-08).
//! - [`cli`]: `ski kiro check|provision|echo`, the adapter of `conformance/targets/kiro-adapter.md`.
//!
//! Decisions taken where the document and kiro-cli disagree are the `E-KIRO-*` entries of
//! `conformance/ERRATA.md`.

pub mod agent_name;
pub mod cli;
pub mod client;
pub mod config;
pub mod prerequisites;
pub mod provision;
