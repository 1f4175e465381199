//! `session/request_permission`: the agent asks the user before a tool call runs.

use serde::{Deserialize, Serialize};

use super::meta::{Extra, string_enum, tagged_union};
use super::tool_call::ToolCallUpdate;

/// Params of `session/request_permission` (agent to client request).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RequestPermissionRequest {
    /// The session.
    pub session_id: String,
    /// The tool call that needs permission.
    pub tool_call: ToolCallUpdate,
    /// The choices to offer.
    pub options: Vec<PermissionOption>,
    /// `_meta` and unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// One choice offered to the user.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PermissionOption {
    /// Returned in the outcome when chosen.
    pub option_id: String,
    /// A display label.
    pub name: String,
    /// What choosing it means.
    pub kind: PermissionOptionKind,
    /// `_meta` and unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

string_enum! {
    /// What choosing a permission option means.
    pub enum PermissionOptionKind {
        /// Allow this once.
        AllowOnce = "allow_once",
        /// Allow from now on.
        AllowAlways = "allow_always",
        /// Reject this once.
        RejectOnce = "reject_once",
        /// Reject from now on.
        RejectAlways = "reject_always",
    }
}

/// Result of `session/request_permission`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RequestPermissionResponse {
    /// What the user decided.
    pub outcome: PermissionOutcome,
    /// `_meta` and unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

impl RequestPermissionResponse {
    /// The user chose `option_id`.
    pub fn selected(option_id: impl Into<String>) -> Self {
        Self {
            outcome: PermissionOutcome::Selected(SelectedOutcome {
                option_id: option_id.into(),
                extra: Extra::new(),
            }),
            extra: Extra::new(),
        }
    }

    /// The turn was cancelled before the user chose.
    pub fn cancelled() -> Self {
        Self {
            outcome: PermissionOutcome::Cancelled(CancelledOutcome::default()),
            extra: Extra::new(),
        }
    }
}

tagged_union! {
    /// The user's decision, discriminated by `outcome`. After `session/cancel` the client
    /// answers every pending request with `cancelled`.
    pub enum PermissionOutcome: "outcome" {
        /// The turn was cancelled.
        Cancelled(CancelledOutcome) = "cancelled",
        /// The user chose an option.
        Selected(SelectedOutcome) = "selected",
    }
}

/// `outcome: "cancelled"`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CancelledOutcome {
    /// `_meta` and unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// `outcome: "selected"`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SelectedOutcome {
    /// The chosen option.
    pub option_id: String,
    /// `_meta` and unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}
