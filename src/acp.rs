//! Agent Client Protocol: wire types for ACP v1 and the extensions the ski specs use.
//!
//! Every params and result type of the stable v1 methods, the unstable methods the specs use,
//! the legacy model selection, and the ski extensions. The types keep what they do not know:
//! `_meta` and unknown fields survive a decode and encode (see [`meta`];
//! [`meta::record_unknown_fields`] names the unknown ones), unknown
//! `sessionUpdate` kinds and content block types decode to an `Unknown` variant, and open
//! string enums keep unknown values. [`methods`] is the method table; [`message`] picks the
//! params or result type for a method name.

pub mod agent;
pub mod auth;
pub mod cli;
pub mod client;
pub mod config;
pub mod content;
pub mod elicitation;
pub mod error;
pub mod extensions;
pub mod fs;
pub mod initialize;
pub mod mcp;
pub mod message;
pub mod meta;
pub mod methods;
pub mod permission;
pub mod plan;
pub mod prompt;
pub mod remote;
pub mod session;
pub mod session_update;
pub mod terminal;
pub mod tool_call;
pub mod turn_lines;
pub mod v2;

pub use auth::*;
pub use config::*;
pub use content::*;
pub use elicitation::*;
pub use extensions::*;
pub use fs::*;
pub use initialize::*;
pub use mcp::*;
pub use message::{MethodParams, MethodResult, PayloadError};
pub use meta::{Empty, Extra, Nullable};
pub use permission::*;
pub use plan::*;
pub use prompt::*;
pub use session::*;
pub use session_update::*;
pub use terminal::*;
pub use tool_call::*;
