//! Plans: the stable `plan` update (always the complete list) and the unstable plan operations.

use serde::{Deserialize, Serialize};

use super::meta::{Extra, string_enum, tagged_union};

/// The agent's plan (`sessionUpdate: "plan"`). Always the complete list; the client replaces
/// its copy.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Plan {
    /// The entries, in order.
    pub entries: Vec<PlanEntry>,
    /// `_meta` and unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// One step of a plan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PlanEntry {
    /// What the step does.
    pub content: String,
    /// How important it is.
    pub priority: PlanEntryPriority,
    /// How far it got.
    pub status: PlanEntryStatus,
    /// `_meta` and unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

string_enum! {
    /// Importance of a plan entry.
    pub enum PlanEntryPriority {
        /// High.
        High = "high",
        /// Medium.
        Medium = "medium",
        /// Low.
        Low = "low",
    }
}

string_enum! {
    /// Progress of a plan entry.
    pub enum PlanEntryStatus {
        /// Not started.
        Pending = "pending",
        /// Being worked on.
        InProgress = "in_progress",
        /// Done.
        Completed = "completed",
    }
}

/// A plan created or replaced by id (unstable `sessionUpdate: "plan_update"`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PlanUpdate {
    /// The plan in one of its forms.
    pub plan: PlanContent,
    /// `_meta` and unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

tagged_union! {
    /// A plan in one of its forms (unstable), discriminated by `type`.
    pub enum PlanContent: "type" {
        /// A list of entries.
        Items(PlanItems) = "items",
        /// A file holding the plan.
        File(PlanFile) = "file",
        /// Markdown text.
        Markdown(PlanMarkdown) = "markdown",
    }
}

/// `type: "items"`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PlanItems {
    /// The plan id.
    pub plan_id: String,
    /// The entries, in order.
    pub entries: Vec<PlanEntry>,
    /// `_meta` and unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// `type: "file"`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PlanFile {
    /// The plan id.
    pub plan_id: String,
    /// Where the plan file is.
    pub uri: String,
    /// `_meta` and unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// `type: "markdown"`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PlanMarkdown {
    /// The plan id.
    pub plan_id: String,
    /// The Markdown text.
    pub content: String,
    /// `_meta` and unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// A plan removed by id (unstable `sessionUpdate: "plan_removed"`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PlanRemoved {
    /// The plan id.
    pub plan_id: String,
    /// `_meta` and unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}
