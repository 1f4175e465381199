//! `session/update` in ACP v2: message updates and chunks that always carry a `messageId`,
//! `state_update` (how a prompt turn's end is reported), tool calls reported by
//! `tool_call_update` alone with v2's statuses, and the kinds v2 keeps from v1.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::acp::content::ContentBlock;
use crate::acp::initialize::Capability;
use crate::acp::meta::{Extra, Nullable, string_enum, tagged_union};
use crate::acp::plan::PlanUpdate;
use crate::acp::session_update::{AvailableCommandsUpdate, Notice, UsageUpdate};
use crate::acp::tool_call::{ToolCallContent, ToolCallLocation, ToolKind};

use super::session::SessionConfigOption;

/// Params of `session/update` (v2).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionNotification {
    /// The session the update belongs to.
    pub session_id: String,
    /// The update.
    pub update: SessionUpdate,
    /// `_meta` and unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

impl SessionNotification {
    /// An update for `session_id`.
    pub fn new(session_id: impl Into<String>, update: SessionUpdate) -> Self {
        Self {
            session_id: session_id.into(),
            update,
            extra: Extra::new(),
        }
    }
}

tagged_union! {
    /// One v2 session update, discriminated by `sessionUpdate`.
    pub enum SessionUpdate: "sessionUpdate" {
        /// Part of the user message a prompt became.
        UserMessageChunk(MessageChunk) = "user_message_chunk",
        /// The user message a prompt became, whole (an upsert by `messageId`).
        UserMessage(Message) = "user_message",
        /// Part of the agent's reply.
        AgentMessageChunk(MessageChunk) = "agent_message_chunk",
        /// The agent's reply, whole (an upsert by `messageId`).
        AgentMessage(Message) = "agent_message",
        /// Part of the agent's reasoning.
        AgentThoughtChunk(MessageChunk) = "agent_thought_chunk",
        /// The agent's reasoning, whole (an upsert by `messageId`).
        AgentThought(Message) = "agent_thought",
        /// Where the session's foreground work is: `running`, `idle` or `requires_action`.
        StateUpdate(StateUpdate) = "state_update",
        /// A content item appended to a tool call.
        ToolCallContentChunk(ToolCallContentChunk) = "tool_call_content_chunk",
        /// A tool call created or changed (v2 has no separate `tool_call`).
        ToolCallUpdate(ToolCallUpdate) = "tool_call_update",
        /// A plan created or replaced by id (the item-based plan).
        PlanUpdate(PlanUpdate) = "plan_update",
        /// The commands the agent offers.
        AvailableCommandsUpdate(AvailableCommandsUpdate) = "available_commands_update",
        /// The complete list of config options.
        ConfigOptionUpdate(ConfigOptionUpdate) = "config_option_update",
        /// Session metadata changed (v1's shape: `title`, `updatedAt`, each nullable).
        SessionInfoUpdate(crate::acp::SessionInfoUpdate) = "session_info_update",
        /// Context window use.
        UsageUpdate(UsageUpdate) = "usage_update",
        /// A notice to show the user.
        Notice(Notice) = "notice",
    }
}

/// A chunk of a message: `messageId` is required in v2.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MessageChunk {
    /// The message the chunk belongs to.
    pub message_id: String,
    /// The content appended.
    pub content: ContentBlock,
    /// `_meta` and unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

impl MessageChunk {
    /// A chunk of message `message_id` holding `content`.
    pub fn new(message_id: impl Into<String>, content: ContentBlock) -> Self {
        Self {
            message_id: message_id.into(),
            content,
            extra: Extra::new(),
        }
    }
}

/// A whole message: absent `content` leaves it, `null` clears it, an array replaces it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Message {
    /// The message.
    pub message_id: String,
    /// Its content.
    #[serde(default, skip_serializing_if = "Nullable::is_absent")]
    pub content: Nullable<Vec<ContentBlock>>,
    /// `_meta` and unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

string_enum! {
    /// Where a session's foreground work is.
    pub enum SessionState {
        /// Foreground work is in progress.
        Running = "running",
        /// The agent is ready for a new prompt.
        Idle = "idle",
        /// Foreground work waits for the user (a permission request).
        RequiresAction = "requires_action",
    }
}

string_enum! {
    /// Why foreground work stopped (v2 adds `error`; `_`-prefixed values are custom).
    pub enum StopReason {
        /// The model finished without asking for more tools.
        EndTurn = "end_turn",
        /// The token limit was reached.
        MaxTokens = "max_tokens",
        /// The request limit of the work was reached.
        MaxTurnRequests = "max_turn_requests",
        /// The agent refused to go on.
        Refusal = "refusal",
        /// The client cancelled the work.
        Cancelled = "cancelled",
        /// The work failed.
        Error = "error",
    }
}

/// `state_update`: a change of the session's foreground state; `idle` that ends work carries a
/// `stopReason`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StateUpdate {
    /// The new state.
    pub state: SessionState,
    /// Why work stopped (an `idle` that ends foreground work).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_reason: Option<StopReason>,
    /// `_meta`, `background` and unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

impl StateUpdate {
    /// `running`.
    pub fn running() -> Self {
        Self {
            state: SessionState::Running,
            stop_reason: None,
            extra: Extra::new(),
        }
    }

    /// `requires_action`.
    pub fn requires_action() -> Self {
        Self {
            state: SessionState::RequiresAction,
            stop_reason: None,
            extra: Extra::new(),
        }
    }

    /// `idle` with `stop_reason`.
    pub fn idle(stop_reason: StopReason) -> Self {
        Self {
            state: SessionState::Idle,
            stop_reason: Some(stop_reason),
            extra: Extra::new(),
        }
    }
}

string_enum! {
    /// Where a tool call is in its lifecycle (v2 adds `paused` and `cancelled`).
    pub enum ToolCallStatus {
        /// Not started, e.g. waiting for permission.
        Pending = "pending",
        /// Running.
        InProgress = "in_progress",
        /// Paused.
        Paused = "paused",
        /// Finished.
        Completed = "completed",
        /// Failed.
        Failed = "failed",
        /// Cancelled (`tool_call/cancel` or `session/cancel`).
        Cancelled = "cancelled",
    }
}

impl ToolCallStatus {
    /// Whether the status is final.
    pub fn is_final(&self) -> bool {
        matches!(self, Self::Completed | Self::Failed | Self::Cancelled)
    }
}

/// What can be done to a tool call while it runs.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolCallCapabilities {
    /// `tool_call/cancel` is accepted for it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cancel: Option<Capability>,
    /// `_meta` and unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// `tool_call_update` (v2): creates the tool call the first time its id is seen, patches it
/// after.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolCallUpdate {
    /// The tool call.
    pub tool_call_id: String,
    /// What the tool call does, for display.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// The kind of tool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<ToolKind>,
    /// Where the call is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<ToolCallStatus>,
    /// Content; replaces what was accumulated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<Vec<ToolCallContent>>,
    /// Files the call touches.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub locations: Option<Vec<ToolCallLocation>>,
    /// The raw input sent to the tool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw_input: Option<Value>,
    /// The raw output of the tool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw_output: Option<Value>,
    /// What the client may do to it (`cancel`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capabilities: Option<ToolCallCapabilities>,
    /// `_meta` and unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

impl ToolCallUpdate {
    /// An update of `tool_call_id` with nothing else set.
    pub fn new(tool_call_id: impl Into<String>) -> Self {
        Self {
            tool_call_id: tool_call_id.into(),
            title: None,
            kind: None,
            status: None,
            content: None,
            locations: None,
            raw_input: None,
            raw_output: None,
            capabilities: None,
            extra: Extra::new(),
        }
    }
}

/// `tool_call_content_chunk`: one content item appended to a tool call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolCallContentChunk {
    /// The tool call.
    pub tool_call_id: String,
    /// The item appended.
    pub content: ToolCallContent,
    /// `_meta` and unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// `config_option_update` (v2): every option, keyed by `configId`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConfigOptionUpdate {
    /// Every option.
    pub config_options: Vec<SessionConfigOption>,
    /// `_meta` and unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}
