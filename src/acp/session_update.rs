//! `session/update`: the notification agents stream during a session, and every
//! `sessionUpdate` kind (stable v1, the unstable ones, and the ski extensions).

use serde::{Deserialize, Serialize};
use serde_json::Number;

use super::config::SessionConfigOption;
use super::content::ContentBlock;
use super::extensions::{AuditUpdate, ExecutionStateUpdate, RetryUpdate};
use super::meta::{Extra, Nullable, string_enum, tagged_union};
use super::plan::{Plan, PlanRemoved, PlanUpdate};
use super::prompt::{StopReason, Usage};
use super::tool_call::{ToolCall, ToolCallUpdate};

/// Params of `session/update` (agent to client notification).
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
    /// One session update, discriminated by `sessionUpdate`. The payload fields sit directly on
    /// the update object.
    pub enum SessionUpdate: "sessionUpdate" {
        /// Part of a user message (history replay).
        UserMessageChunk(ContentChunk) = "user_message_chunk",
        /// Part of the agent's reply.
        AgentMessageChunk(ContentChunk) = "agent_message_chunk",
        /// Part of the agent's reasoning.
        AgentThoughtChunk(ContentChunk) = "agent_thought_chunk",
        /// A new tool call.
        ToolCall(ToolCall) = "tool_call",
        /// A change to a tool call.
        ToolCallUpdate(ToolCallUpdate) = "tool_call_update",
        /// The complete plan.
        Plan(Plan) = "plan",
        /// The commands the agent offers.
        AvailableCommandsUpdate(AvailableCommandsUpdate) = "available_commands_update",
        /// The current mode changed.
        CurrentModeUpdate(CurrentModeUpdate) = "current_mode_update",
        /// The complete list of config options.
        ConfigOptionUpdate(ConfigOptionUpdate) = "config_option_update",
        /// Session metadata changed.
        SessionInfoUpdate(SessionInfoUpdate) = "session_info_update",
        /// Context window use.
        UsageUpdate(UsageUpdate) = "usage_update",
        /// A notice to show the user.
        Notice(Notice) = "notice",
        /// Context compaction progress.
        CompactionUpdate(CompactionUpdate) = "compaction_update",
        /// Part of a compaction summary.
        CompactionSummaryChunk(CompactionSummaryChunk) = "compaction_summary_chunk",
        /// Unstable: a plan created or replaced by id.
        PlanUpdate(PlanUpdate) = "plan_update",
        /// Unstable: a plan removed by id.
        PlanRemoved(PlanRemoved) = "plan_removed",
        /// Unstable: a subagent session changed.
        SubagentUpdate(SubagentUpdate) = "subagent_update",
        /// Unstable: a message between sessions.
        SessionMessage(SessionMessage) = "session_message",
        /// Unstable: part of a message between sessions.
        SessionMessageChunk(SessionMessageChunk) = "session_message_chunk",
        /// ski extension: where a prompt is in its execution.
        ExecutionStateUpdate(ExecutionStateUpdate) = "execution_state_update",
        /// ski extension: a prompt is being retried.
        RetryUpdate(RetryUpdate) = "retry_update",
        /// ski extension: a permission policy decision.
        AuditUpdate(AuditUpdate) = "audit_update",
    }
}

/// How a `sessionUpdate` kind is specified.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum UpdateStability {
    /// In the stable v1 schema.
    Stable,
    /// Only in the unstable v1 schema.
    Unstable,
    /// A ski extension, in no ACP schema.
    ExtensionSki,
}

impl SessionUpdate {
    /// An `agent_message_chunk` holding `content`.
    pub fn agent_message(content: ContentBlock) -> Self {
        SessionUpdate::AgentMessageChunk(ContentChunk::new(content))
    }

    /// An `agent_thought_chunk` holding `content`.
    pub fn agent_thought(content: ContentBlock) -> Self {
        SessionUpdate::AgentThoughtChunk(ContentChunk::new(content))
    }

    /// A `user_message_chunk` holding `content` (history replay in `session/load`).
    pub fn user_message(content: ContentBlock) -> Self {
        SessionUpdate::UserMessageChunk(ContentChunk::new(content))
    }

    /// How the `sessionUpdate` kind `kind` is specified; `None` if ski does not know it.
    pub fn stability_of(kind: &str) -> Option<UpdateStability> {
        match kind {
            "user_message_chunk"
            | "agent_message_chunk"
            | "agent_thought_chunk"
            | "tool_call"
            | "tool_call_update"
            | "plan"
            | "available_commands_update"
            | "current_mode_update"
            | "config_option_update"
            | "session_info_update"
            | "usage_update"
            | "notice"
            | "compaction_update"
            | "compaction_summary_chunk" => Some(UpdateStability::Stable),
            "plan_update"
            | "plan_removed"
            | "subagent_update"
            | "session_message"
            | "session_message_chunk" => Some(UpdateStability::Unstable),
            "execution_state_update" | "retry_update" | "audit_update" => {
                Some(UpdateStability::ExtensionSki)
            }
            _ => None,
        }
    }
}

/// A chunk of a message (`user_message_chunk`, `agent_message_chunk`, `agent_thought_chunk`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContentChunk {
    /// The content.
    pub content: ContentBlock,
    /// Chunks with the same id belong to the same message.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message_id: Option<String>,
    /// `_meta` and unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

impl ContentChunk {
    /// A chunk holding `content`.
    pub fn new(content: ContentBlock) -> Self {
        Self {
            content,
            message_id: None,
            extra: Extra::new(),
        }
    }
}

/// `available_commands_update`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AvailableCommandsUpdate {
    /// The complete list.
    pub available_commands: Vec<AvailableCommand>,
    /// `_meta` and unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// A slash command the agent offers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AvailableCommand {
    /// The command name, without the slash.
    pub name: String,
    /// What it does.
    pub description: String,
    /// How it takes input.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub input: Option<AvailableCommandInput>,
    /// `_meta` and unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// Free-form input to a command.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AvailableCommandInput {
    /// A hint shown when the input is empty.
    pub hint: String,
    /// `_meta` and unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// `current_mode_update`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CurrentModeUpdate {
    /// The mode now in effect.
    pub current_mode_id: String,
    /// `_meta` and unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// `config_option_update`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConfigOptionUpdate {
    /// The complete list of options.
    pub config_options: Vec<SessionConfigOption>,
    /// `_meta` and unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// `session_info_update`: session metadata. `null` clears a field, absent leaves it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionInfoUpdate {
    /// The session title.
    #[serde(default, skip_serializing_if = "Nullable::is_absent")]
    pub title: Nullable<String>,
    /// When the session last changed (ISO 8601).
    #[serde(default, skip_serializing_if = "Nullable::is_absent")]
    pub updated_at: Nullable<String>,
    /// `_meta` and unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// `usage_update`: context window use in tokens.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UsageUpdate {
    /// Tokens in use.
    pub used: u64,
    /// Size of the context window.
    pub size: u64,
    /// Cumulative cost.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cost: Option<Cost>,
    /// `_meta` and unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// A cost in a currency.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Cost {
    /// The amount, kept as the number the peer wrote.
    pub amount: Number,
    /// ISO 4217 currency code.
    pub currency: String,
    /// `_meta` and unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// `notice`: a message for the user.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Notice {
    /// How serious it is.
    pub severity: NoticeSeverity,
    /// A short title.
    pub title: String,
    /// More detail.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// `_meta` and unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

string_enum! {
    /// Severity of a notice (open: other strings are allowed).
    pub enum NoticeSeverity {
        /// Information.
        Info = "info",
        /// A warning.
        Warning = "warning",
        /// An error.
        Error = "error",
    }
}

/// `compaction_update`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CompactionUpdate {
    /// The compaction this is about.
    pub compaction_id: String,
    /// Its progress.
    pub status: CompactionStatus,
    /// The summary, when done.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub summary: Option<Vec<ContentBlock>>,
    /// What went wrong, when failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// `_meta` and unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

string_enum! {
    /// Progress of a compaction (open: other strings are allowed).
    pub enum CompactionStatus {
        /// Running.
        InProgress = "in_progress",
        /// Done.
        Completed = "completed",
        /// Failed.
        Failed = "failed",
        /// Cancelled.
        Cancelled = "cancelled",
    }
}

/// `compaction_summary_chunk`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CompactionSummaryChunk {
    /// The compaction this is about.
    pub compaction_id: String,
    /// Part of the summary.
    pub content: ContentBlock,
    /// `_meta` and unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// Unstable `subagent_update`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SubagentUpdate {
    /// The subagent's session.
    pub session_id: String,
    /// Its title.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// What it does.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// What the client may do with it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub capabilities: Option<SubagentSessionCapabilities>,
    /// Its run state.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state: Option<StateUpdate>,
    /// Its working directory.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// Extra directories it may use.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub additional_directories: Option<Vec<String>>,
    /// `_meta` and unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// What a client may do with a subagent session.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SubagentSessionCapabilities {
    /// The client may cancel it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cancel: Option<super::initialize::Capability>,
    /// `_meta` and unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

tagged_union! {
    /// Run state of a session (unstable), discriminated by `state`.
    pub enum StateUpdate: "state" {
        /// Working.
        Running(RunState) = "running",
        /// Done with a turn.
        Idle(IdleState) = "idle",
        /// Waiting for the user.
        RequiresAction(RunState) = "requires_action",
        /// Not known.
        UnknownState(RunState) = "unknown",
    }
}

/// A run state with no fields of its own.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RunState {
    /// `_meta` and unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// `state: "idle"`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct IdleState {
    /// Why the turn ended (`error` is also possible here).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stop_reason: Option<StopReason>,
    /// Token use of the turn.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    /// `_meta`, the `error` of an `error` stop, and unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// Unstable `session_message`: a message between sessions.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionMessage {
    /// The message id.
    pub message_id: String,
    /// Who sent it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sender_session_id: Option<String>,
    /// Who receives it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub recipient_session_id: Option<String>,
    /// The sender's id for it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sender_message_id: Option<String>,
    /// The recipient's id for it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub recipient_message_id: Option<String>,
    /// The whole content, if sent at once.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub content: Option<Vec<ContentBlock>>,
    /// `_meta` and unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// Unstable `session_message_chunk`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionMessageChunk {
    /// The message id.
    pub message_id: String,
    /// Part of the content.
    pub content: ContentBlock,
    /// `_meta` and unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    fn round_trip(input: Value) -> SessionUpdate {
        let update: SessionUpdate = serde_json::from_value(input.clone()).unwrap();
        assert_eq!(serde_json::to_value(&update).unwrap(), input);
        update
    }

    #[test]
    fn constructors_encode_the_acp_shape() {
        let notification =
            SessionNotification::new("s", SessionUpdate::agent_message(ContentBlock::text("hi")));
        assert_eq!(
            serde_json::to_value(&notification).unwrap(),
            json!({"sessionId": "s", "update": {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "hi"}}})
        );
    }

    #[test]
    fn unknown_kind_is_kept_whole() {
        let update = round_trip(json!({"sessionUpdate": "turn_end", "stopReason": "end_turn"}));
        assert!(!update.is_known());
        assert_eq!(update.kind(), "turn_end");
    }

    #[test]
    fn known_kind_with_a_bad_payload_is_an_error() {
        let error = serde_json::from_value::<SessionUpdate>(
            json!({"sessionUpdate": "agent_message_chunk"}),
        )
        .unwrap_err()
        .to_string();
        assert!(
            error.contains("agent_message_chunk") && error.contains("content"),
            "{error}"
        );
        let error = serde_json::from_value::<SessionUpdate>(
            json!({"content": {"type": "text", "text": "x"}}),
        )
        .unwrap_err()
        .to_string();
        assert!(error.contains("sessionUpdate"), "{error}");
        assert!(serde_json::from_value::<SessionUpdate>(json!({"sessionUpdate": 7})).is_err());
    }

    #[test]
    fn meta_and_unknown_fields_survive_at_every_level() {
        let update = round_trip(json!({
            "sessionUpdate": "tool_call",
            "toolCallId": "call_1",
            "title": "Read file",
            "x-vendor": 1,
            "_meta": {"traceparent": "00-abc-def-01", "nested": null},
            "content": [{"type": "content", "content": {"type": "text", "text": "hi", "_meta": {"k": [1, 2]}}, "extraInner": true}]
        }));
        let SessionUpdate::ToolCall(call) = update else {
            panic!("expected tool_call")
        };
        assert_eq!(
            call.extra.unknown_keys().collect::<Vec<_>>(),
            vec!["x-vendor"]
        );
        assert!(call.extra.meta().is_some());
    }

    #[test]
    fn null_and_absent_stay_apart() {
        let update = round_trip(json!({"sessionUpdate": "session_info_update", "title": null}));
        let SessionUpdate::SessionInfoUpdate(info) = update else {
            panic!("expected session_info_update")
        };
        assert!(info.title.is_null());
        assert!(info.updated_at.is_absent());
        round_trip(
            json!({"sessionUpdate": "tool_call_update", "toolCallId": "c", "status": null, "rawOutput": {"ok": true}}),
        );
    }

    #[test]
    fn nested_tool_call_and_plan_shapes_are_rejected() {
        // The upstream ski agent nests these; ACP puts the fields on the update (E-WIRE-11).
        for nested in [
            json!({"sessionUpdate": "tool_call", "toolCall": {"toolCallId": "c", "title": "t"}}),
            json!({"sessionUpdate": "tool_call_update", "toolCall": {"toolCallId": "c", "status": "completed"}}),
            json!({"sessionUpdate": "plan", "plan": {"entries": []}}),
        ] {
            assert!(
                serde_json::from_value::<SessionUpdate>(nested.clone()).is_err(),
                "{nested}"
            );
        }
    }

    #[test]
    fn unknown_enum_values_and_block_types_are_kept() {
        let update = round_trip(json!({
            "sessionUpdate": "tool_call",
            "toolCallId": "c",
            "title": "t",
            "kind": "shell",
            "status": "running",
            "content": [{"type": "content", "content": {"type": "video", "url": "x"}}]
        }));
        let SessionUpdate::ToolCall(call) = update else {
            panic!("expected tool_call")
        };
        assert_eq!(
            call.kind,
            Some(crate::acp::ToolKind::Unknown("shell".into()))
        );
    }
}
