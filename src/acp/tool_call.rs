//! Tool calls: the `tool_call` and `tool_call_update` payloads, their content and locations.
//!
//! ACP puts every tool call field directly on the update object (`toolCallId`, `title`, ...);
//! they are not nested under a `toolCall` key.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::content::ContentBlock;
use super::meta::{Extra, Nullable, string_enum, tagged_union};

/// A new tool call (`sessionUpdate: "tool_call"`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolCall {
    /// Unique within the session.
    pub tool_call_id: String,
    /// What the tool call does, for display.
    pub title: String,
    /// The kind of tool.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kind: Option<ToolKind>,
    /// Where the call is in its lifecycle.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<ToolCallStatus>,
    /// The tool's own name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Content produced so far.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub content: Option<Vec<ToolCallContent>>,
    /// Files the call touches.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub locations: Option<Vec<ToolCallLocation>>,
    /// The raw input sent to the tool.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub raw_input: Option<Value>,
    /// The raw output of the tool.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub raw_output: Option<Value>,
    /// `_meta` and unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

impl ToolCall {
    /// A tool call with only its id and title.
    pub fn new(tool_call_id: impl Into<String>, title: impl Into<String>) -> Self {
        Self {
            tool_call_id: tool_call_id.into(),
            title: title.into(),
            kind: None,
            status: None,
            name: None,
            content: None,
            locations: None,
            raw_input: None,
            raw_output: None,
            extra: Extra::new(),
        }
    }
}

/// A change to a tool call (`sessionUpdate: "tool_call_update"`, and the `toolCall` of a
/// permission request). Only the fields present change; `null` is kept apart from absent.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolCallUpdate {
    /// The tool call being changed.
    pub tool_call_id: String,
    /// New title.
    #[serde(default, skip_serializing_if = "Nullable::is_absent")]
    pub title: Nullable<String>,
    /// New kind.
    #[serde(default, skip_serializing_if = "Nullable::is_absent")]
    pub kind: Nullable<ToolKind>,
    /// New status.
    #[serde(default, skip_serializing_if = "Nullable::is_absent")]
    pub status: Nullable<ToolCallStatus>,
    /// New tool name.
    #[serde(default, skip_serializing_if = "Nullable::is_absent")]
    pub name: Nullable<String>,
    /// Replacement content.
    #[serde(default, skip_serializing_if = "Nullable::is_absent")]
    pub content: Nullable<Vec<ToolCallContent>>,
    /// Replacement locations.
    #[serde(default, skip_serializing_if = "Nullable::is_absent")]
    pub locations: Nullable<Vec<ToolCallLocation>>,
    /// New raw input.
    #[serde(default, skip_serializing_if = "Nullable::is_absent")]
    pub raw_input: Nullable<Value>,
    /// New raw output.
    #[serde(default, skip_serializing_if = "Nullable::is_absent")]
    pub raw_output: Nullable<Value>,
    /// `_meta` and unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

impl ToolCallUpdate {
    /// An update that changes nothing yet.
    pub fn new(tool_call_id: impl Into<String>) -> Self {
        Self {
            tool_call_id: tool_call_id.into(),
            ..Self::default()
        }
    }
}

string_enum! {
    /// The kind of tool a call uses; clients pick icons by it.
    pub enum ToolKind {
        /// Reading files or data.
        Read = "read",
        /// Changing files.
        Edit = "edit",
        /// Removing files.
        Delete = "delete",
        /// Moving or renaming files.
        Move = "move",
        /// Searching.
        Search = "search",
        /// Running commands.
        Execute = "execute",
        /// Internal reasoning.
        Think = "think",
        /// Fetching from the network.
        Fetch = "fetch",
        /// Switching session mode.
        SwitchMode = "switch_mode",
        /// Anything else.
        Other = "other",
    }
}

string_enum! {
    /// Where a tool call is in its lifecycle.
    pub enum ToolCallStatus {
        /// Not started, e.g. waiting for permission.
        Pending = "pending",
        /// Running.
        InProgress = "in_progress",
        /// Finished.
        Completed = "completed",
        /// Failed.
        Failed = "failed",
    }
}

tagged_union! {
    /// Content a tool call produced, discriminated by `type`.
    pub enum ToolCallContent: "type" {
        /// A content block.
        Content(ToolCallContentBlock) = "content",
        /// A file change.
        Diff(Diff) = "diff",
        /// A terminal the client renders live.
        Terminal(ToolCallTerminal) = "terminal",
    }
}

/// `type: "content"`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolCallContentBlock {
    /// The content.
    pub content: ContentBlock,
    /// `_meta` and unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// `type: "diff"`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Diff {
    /// Absolute path of the file.
    pub path: String,
    /// The text before; absent for a new file.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub old_text: Option<String>,
    /// The text after.
    pub new_text: String,
    /// `_meta` and unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// `type: "terminal"`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolCallTerminal {
    /// A terminal created with `terminal/create`.
    pub terminal_id: String,
    /// `_meta` and unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// A file a tool call touches.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolCallLocation {
    /// Absolute path.
    pub path: String,
    /// 1-based line number.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<u32>,
    /// `_meta` and unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}
