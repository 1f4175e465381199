//! The agent's session updates in ACP v2: a turn reports its updates once, in v1's types, and a
//! session whose owner speaks v2 gets them in v2's form ([`to_v2`]): chunks with the turn's
//! message id, `tool_call` as a creating `tool_call_update` (with `capabilities.cancel` while
//! the call can be cancelled), the plan as an item-based `plan_update`, config options keyed by
//! `configId`, `session_info_update` as it is. Kinds v2 has no place for (`current_mode_update`
//! and the ski extensions `execution_state_update`, `retry_update`, `audit_update`) are not
//! sent, nor are the compaction updates, which v2's client capabilities cannot ask for.

use crate::acp::plan::{PlanContent, PlanItems, PlanUpdate};
use crate::acp::tool_call::{ToolCall, ToolCallStatus as V1Status, ToolCallUpdate as V1Update};
use crate::acp::v2::{
    self, ConfigOptionUpdate, MessageChunk, SessionConfigOption, ToolCallCapabilities,
    ToolCallStatus, ToolCallUpdate,
};
use crate::acp::{Capability, Extra, Nullable, SessionUpdate};

/// The id of the one plan a reference agent session has.
pub const PLAN_ID: &str = "plan";

/// A v1 tool call status in v2 (`cancelled` and `paused` arrive as v1's unknown values).
fn status(status: &V1Status) -> ToolCallStatus {
    match status {
        V1Status::Pending => ToolCallStatus::Pending,
        V1Status::InProgress => ToolCallStatus::InProgress,
        V1Status::Completed => ToolCallStatus::Completed,
        V1Status::Failed => ToolCallStatus::Failed,
        V1Status::Unknown(other) => match other.as_str() {
            "cancelled" => ToolCallStatus::Cancelled,
            "paused" => ToolCallStatus::Paused,
            _ => ToolCallStatus::Unknown(other.clone()),
        },
    }
}

fn cancel_capability(cancellable: bool) -> Option<ToolCallCapabilities> {
    cancellable.then(|| ToolCallCapabilities {
        cancel: Some(Capability::default()),
        extra: Extra::new(),
    })
}

fn created(call: ToolCall, cancellable: bool) -> ToolCallUpdate {
    ToolCallUpdate {
        tool_call_id: call.tool_call_id,
        title: Some(call.title),
        kind: call.kind,
        status: call.status.as_ref().map(status),
        content: call.content,
        locations: call.locations,
        raw_input: call.raw_input,
        raw_output: call.raw_output,
        capabilities: cancel_capability(cancellable),
        extra: call.extra,
    }
}

/// A v1 patch field as v2's optional one (v2 has no `null` for these).
fn value<T>(field: Nullable<T>) -> Option<T> {
    match field {
        Nullable::Value(value) => Some(value),
        _ => None,
    }
}

fn changed(update: V1Update, cancellable: bool) -> ToolCallUpdate {
    let status = value(update.status).map(|s: V1Status| status(&s));
    let final_status = status.as_ref().is_some_and(ToolCallStatus::is_final);
    ToolCallUpdate {
        tool_call_id: update.tool_call_id,
        title: value(update.title),
        kind: value(update.kind),
        status,
        content: value(update.content),
        locations: value(update.locations),
        raw_input: value(update.raw_input),
        raw_output: value(update.raw_output),
        capabilities: cancel_capability(cancellable && !final_status),
        extra: update.extra,
    }
}

/// The v2 form of a v1 update for a turn whose agent message is `message_id`; `cancellable`
/// says whether a tool call id can be cancelled now. `None` for a kind v2 does not carry.
pub fn to_v2(
    update: SessionUpdate,
    message_id: &str,
    cancellable: impl Fn(&str) -> bool,
) -> Option<v2::SessionUpdate> {
    Some(match update {
        SessionUpdate::AgentMessageChunk(chunk) => {
            v2::SessionUpdate::AgentMessageChunk(MessageChunk::new(
                chunk.message_id.unwrap_or_else(|| message_id.to_owned()),
                chunk.content,
            ))
        }
        SessionUpdate::AgentThoughtChunk(chunk) => {
            v2::SessionUpdate::AgentThoughtChunk(MessageChunk::new(
                chunk
                    .message_id
                    .unwrap_or_else(|| format!("{message_id}_thought")),
                chunk.content,
            ))
        }
        SessionUpdate::ToolCall(call) => {
            let can = cancellable(&call.tool_call_id);
            v2::SessionUpdate::ToolCallUpdate(created(call, can))
        }
        SessionUpdate::ToolCallUpdate(update) => {
            let can = cancellable(&update.tool_call_id);
            v2::SessionUpdate::ToolCallUpdate(changed(update, can))
        }
        SessionUpdate::Plan(plan) => v2::SessionUpdate::PlanUpdate(PlanUpdate {
            plan: PlanContent::Items(PlanItems {
                plan_id: PLAN_ID.to_owned(),
                entries: plan.entries,
                extra: Extra::new(),
            }),
            extra: plan.extra,
        }),
        SessionUpdate::PlanUpdate(update) => v2::SessionUpdate::PlanUpdate(update),
        SessionUpdate::AvailableCommandsUpdate(mut update) => {
            // v2 names the input's type: the reference's commands take free text.
            for input in update
                .available_commands
                .iter_mut()
                .filter_map(|c| c.input.as_mut())
            {
                input.extra.insert("type", serde_json::json!("text"));
            }
            v2::SessionUpdate::AvailableCommandsUpdate(update)
        }
        SessionUpdate::ConfigOptionUpdate(update) => {
            v2::SessionUpdate::ConfigOptionUpdate(ConfigOptionUpdate {
                config_options: SessionConfigOption::all_from_v1(&update.config_options),
                extra: update.extra,
            })
        }
        SessionUpdate::UsageUpdate(update) => v2::SessionUpdate::UsageUpdate(update),
        SessionUpdate::SessionInfoUpdate(update) => v2::SessionUpdate::SessionInfoUpdate(update),
        SessionUpdate::Notice(notice) => v2::SessionUpdate::Notice(notice),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::acp::ContentBlock;

    #[test]
    fn chunks_get_the_message_id_and_tool_calls_become_updates() {
        let chunk = to_v2(
            SessionUpdate::agent_message(ContentBlock::text("hi")),
            "msg_1",
            |_| false,
        );
        let Some(v2::SessionUpdate::AgentMessageChunk(chunk)) = chunk else {
            panic!("{chunk:?}");
        };
        assert_eq!(chunk.message_id, "msg_1");

        let mut call = ToolCall::new("call_1", "Wait");
        call.status = Some(V1Status::InProgress);
        let Some(v2::SessionUpdate::ToolCallUpdate(update)) =
            to_v2(SessionUpdate::ToolCall(call), "msg_1", |id| id == "call_1")
        else {
            panic!("no tool_call_update");
        };
        assert_eq!(update.title.as_deref(), Some("Wait"));
        assert!(update.capabilities.is_some_and(|c| c.cancel.is_some()));

        let mut end = V1Update::new("call_1");
        end.status = Nullable::Value(V1Status::Unknown("cancelled".into()));
        let Some(v2::SessionUpdate::ToolCallUpdate(update)) =
            to_v2(SessionUpdate::ToolCallUpdate(end), "msg_1", |_| true)
        else {
            panic!("no tool_call_update");
        };
        assert_eq!(update.status, Some(ToolCallStatus::Cancelled));
        assert!(
            update.capabilities.is_none(),
            "a final call is not cancellable"
        );
    }
}
