//! Button clicks and modal submissions: the thread a click came from names the session (channel
//! and `thread_ts`), the button's value names the request within it.

use std::sync::Arc;

use serde_json::{Value, json};

use super::blocks::{self, INSTRUCTION_ACTION, INSTRUCTION_BLOCK, action};
use super::driver::{ClearanceDecision, PromptDecision, WaitDecision};
use super::hub::Hub;
use super::store::Session;
use super::vocab::{Clearance, PromptAnswer, SessionStatus, WaitAnswer};

/// Modal callback ids.
const REJECT_CALLBACK: &str = "approval_reject";
const REFINE_CALLBACK: &str = "prompt_refine";

fn text(value: &Value, pointer: &str) -> Option<String> {
    value
        .pointer(pointer)
        .and_then(Value::as_str)
        .map(str::to_string)
}

/// The session whose thread holds the clicked message.
fn session_of_click(hub: &Hub, event: &Value) -> Option<Session> {
    let channel = text(event, "/channel/id").or_else(|| text(event, "/container/channel_id"))?;
    let message_ts = text(event, "/message/ts").or_else(|| text(event, "/container/message_ts"))?;
    let thread_ts = text(event, "/message/thread_ts")
        .or_else(|| text(event, "/container/thread_ts"))
        .unwrap_or(message_ts);
    match hub.store.active_in_thread(&channel, &thread_ts) {
        Ok(found) => found,
        Err(error) => {
            tracing::error!(%error, "cannot look up the session of a click");
            None
        }
    }
}

/// Handles a `block_actions` payload (as JSON).
pub async fn block_actions(hub: Arc<Hub>, event: Value) {
    let user = text(&event, "/user/id").unwrap_or_default();
    if !hub.is_authorized(&user) {
        tracing::warn!(user, "ignored a click from an unauthorized user");
        return;
    }
    let Some(clicked) = event.pointer("/actions/0") else {
        tracing::warn!("block_actions without an action");
        return;
    };
    let action_id = text(clicked, "/action_id").unwrap_or_default();
    let value = text(clicked, "/value").unwrap_or_default();
    let Some(session) = session_of_click(&hub, &event) else {
        tracing::warn!(
            action_id,
            value,
            "a click outside any active session's thread"
        );
        return;
    };
    let channel = session.channel_id.clone().unwrap_or_default();
    let message_ts = text(&event, "/message/ts")
        .or_else(|| text(&event, "/container/message_ts"))
        .unwrap_or_default();
    let trigger_id = text(&event, "/trigger_id").unwrap_or_default();
    tracing::info!(session_id = %session.id, action_id, value, user, "button clicked");
    match action_id.as_str() {
        action::APPROVE_ACCEPT => {
            decide_clearance(&hub, &session, &value, &channel, &message_ts, &user, None).await;
        }
        action::APPROVE_REJECT => {
            let metadata = json!({
                "session_id": session.id, "request_id": value,
                "channel": channel, "message_ts": message_ts,
            })
            .to_string();
            let view = blocks::reason_modal(REJECT_CALLBACK, "Reject", "Why reject?", &metadata);
            if let Err(error) = hub.poster.open_view(&trigger_id, &view).await {
                tracing::warn!(%error, "cannot open the reject modal; rejecting without a reason");
                decide_clearance(
                    &hub,
                    &session,
                    &value,
                    &channel,
                    &message_ts,
                    &user,
                    Some(None),
                )
                .await;
            }
        }
        action::PROMPT_CONTINUE | action::PROMPT_STOP => {
            let decision = if action_id == action::PROMPT_CONTINUE {
                PromptAnswer::Continue
            } else {
                PromptAnswer::Stop
            };
            decide_prompt(
                &hub,
                &session,
                &value,
                &channel,
                &message_ts,
                &user,
                decision,
                None,
            )
            .await;
        }
        action::PROMPT_REFINE => {
            let metadata = json!({
                "session_id": session.id, "request_id": value,
                "channel": channel, "message_ts": message_ts,
            })
            .to_string();
            let view = blocks::reason_modal(REFINE_CALLBACK, "Refine", "Instruction", &metadata);
            if let Err(error) = hub.poster.open_view(&trigger_id, &view).await {
                tracing::warn!(%error, "cannot open the refine modal");
            }
        }
        action::WAIT_RESUME | action::WAIT_STOP => {
            let status = if action_id == action::WAIT_RESUME {
                WaitAnswer::Resumed
            } else {
                WaitAnswer::Stopped
            };
            let decision = WaitDecision {
                status,
                instruction: None,
            };
            match hub.driver.resolve_wait(&session.id, decision).await {
                Ok(()) => {
                    let note = format!("⏯️ Standby {status} by <@{user}>");
                    let _ = hub
                        .poster
                        .update(&channel, &message_ts, &note, &blocks::decided(&note))
                        .await;
                    hub.post_in_session(&session.id, &note, None).await;
                }
                Err(error) => tracing::warn!(%error, "standby already answered"),
            }
        }
        action::STALL_TERMINATE => {
            let note = format!("🛑 Terminated by <@{user}>");
            let _ = hub
                .poster
                .update(&channel, &message_ts, &note, &blocks::decided(&note))
                .await;
            hub.end_session(
                &session.id,
                SessionStatus::Terminated,
                "terminated by operator",
            )
            .await;
        }
        action::STALL_RESTART => {
            let note = format!("🔄 Restart requested by <@{user}>");
            let _ = hub
                .poster
                .update(&channel, &message_ts, &note, &blocks::decided(&note))
                .await;
            if let Err(error) = hub.driver.restart(&session.id).await {
                tracing::warn!(%error, session_id = %session.id, "restart failed");
                hub.post_in_session(&session.id, &format!("❌ Restart failed: {error}"), None)
                    .await;
            }
        }
        other => tracing::warn!(action_id = other, "unknown action"),
    }
}

/// Handles a `view_submission` payload (as JSON).
pub async fn view_submission(hub: Arc<Hub>, event: Value) {
    let user = text(&event, "/user/id").unwrap_or_default();
    if !hub.is_authorized(&user) {
        tracing::warn!(user, "ignored a modal from an unauthorized user");
        return;
    }
    let callback = text(&event, "/view/callback_id").unwrap_or_default();
    let metadata: Value = text(&event, "/view/private_metadata")
        .and_then(|m| serde_json::from_str(&m).ok())
        .unwrap_or(Value::Null);
    let reason = event
        .pointer(&format!(
            "/view/state/values/{INSTRUCTION_BLOCK}/{INSTRUCTION_ACTION}/value"
        ))
        .and_then(Value::as_str)
        .map(str::to_string)
        .filter(|r| !r.trim().is_empty());
    let (Some(session_id), Some(request_id), Some(channel), Some(message_ts)) = (
        text(&metadata, "/session_id"),
        text(&metadata, "/request_id"),
        text(&metadata, "/channel"),
        text(&metadata, "/message_ts"),
    ) else {
        tracing::warn!(callback, "a modal without its metadata");
        return;
    };
    let Ok(Some(session)) = hub.store.session(&session_id) else {
        tracing::warn!(session_id, "a modal for an unknown session");
        return;
    };
    match callback.as_str() {
        REJECT_CALLBACK => {
            decide_clearance(
                &hub,
                &session,
                &request_id,
                &channel,
                &message_ts,
                &user,
                Some(reason),
            )
            .await;
        }
        REFINE_CALLBACK => {
            decide_prompt(
                &hub,
                &session,
                &request_id,
                &channel,
                &message_ts,
                &user,
                PromptAnswer::Refine,
                reason,
            )
            .await;
        }
        other => tracing::warn!(callback = other, "unknown modal"),
    }
}

/// Approves (`rejection` `None`) or rejects (`Some(reason)`) a pending request of `session`.
async fn decide_clearance(
    hub: &Hub,
    session: &Session,
    request_id: &str,
    channel: &str,
    message_ts: &str,
    user: &str,
    rejection: Option<Option<String>>,
) {
    let (status, reason) = match &rejection {
        None => (Clearance::Approved, None),
        Some(reason) => (Clearance::Rejected, reason.clone()),
    };
    match hub
        .store
        .decide_approval(&session.id, request_id, status, reason.as_deref())
    {
        Ok(true) => {}
        Ok(false) => {
            tracing::warn!(session_id = %session.id, request_id, "no pending request with that id");
            return;
        }
        Err(error) => {
            tracing::error!(%error, "cannot record the decision");
            return;
        }
    }
    let decision = ClearanceDecision {
        status,
        reason: reason.clone(),
    };
    if let Err(error) = hub
        .driver
        .resolve_clearance(&session.id, request_id, decision)
        .await
    {
        tracing::warn!(%error, session_id = %session.id, request_id, "the agent no longer waits");
    }
    // The request id may be an agent's and the reason is typed text: both are escaped, while
    // the operator's mention stays live.
    let shown_id = blocks::escape(request_id);
    let note = match (&rejection, &reason) {
        (None, _) => format!("✅ *Approved* `{shown_id}` by <@{user}>"),
        (Some(_), Some(reason)) => format!(
            "❌ *Rejected* `{shown_id}` by <@{user}>: {}",
            blocks::escape(reason)
        ),
        (Some(_), None) => format!("❌ *Rejected* `{shown_id}` by <@{user}>"),
    };
    if let Err(error) = hub
        .poster
        .update(channel, message_ts, &note, &blocks::decided(&note))
        .await
    {
        tracing::warn!(%error, "cannot replace the buttons");
    }
    hub.post_in_session(&session.id, &note, None).await;
}

#[allow(clippy::too_many_arguments)]
async fn decide_prompt(
    hub: &Hub,
    session: &Session,
    prompt_id: &str,
    channel: &str,
    message_ts: &str,
    user: &str,
    decision: PromptAnswer,
    instruction: Option<String>,
) {
    let answer = PromptDecision {
        decision,
        instruction: instruction.clone(),
    };
    match hub
        .driver
        .resolve_prompt(&session.id, prompt_id, answer)
        .await
    {
        Ok(()) => {
            let note = match instruction {
                Some(instruction) => format!("↪️ *{decision}* by <@{user}>: {instruction}"),
                None => format!("↪️ *{decision}* by <@{user}>"),
            };
            let _ = hub
                .poster
                .update(channel, message_ts, &note, &blocks::decided(&note))
                .await;
            hub.post_in_session(&session.id, &note, None).await;
        }
        Err(error) => tracing::warn!(%error, prompt_id, "the prompt was already answered"),
    }
}
