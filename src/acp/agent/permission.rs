//! The permission step of a turn: the policy decides locally or asks, and the bridge asks the
//! client with `session/request_permission` and waits for its answer, a timeout, the turn
//! being stopped, or the connection going away.
//!
//! One permission request is made per prompt, for the tool call "Execute session prompt". The
//! client's answer is read by the kind of the option it selected (`allow_*` runs the prompt,
//! `reject_*` or a `cancelled` outcome refuses it). Under the `permissive` mode a bridge
//! failure counts as `allow_once`; under `required` it ends the turn with an error.
//!
//! On a v2 session the question is framed by `state_update`s: `requires_action` before it is
//! asked, `running` again once it is answered (a turn stopped meanwhile ends with its idle
//! state instead).

use std::time::Duration;

use serde_json::Value;

use super::Inner;
use super::config::{PermissionMode, PolicyMode};
use super::control::TurnControl;
use super::policy::Remembered;
use super::registry::RouteError;
use crate::acp::methods::{Generation, SESSION_REQUEST_PERMISSION};
use crate::acp::v2::StateUpdate;
use crate::acp::{
    Extra, Nullable, PermissionOption, PermissionOptionKind, PermissionOutcome,
    RequestPermissionRequest, RequestPermissionResponse, ToolCallUpdate, ToolKind,
};
use crate::jsonrpc::{CallError, RequestOptions, RpcError};

/// The title of the tool call every permission request is about.
pub const PERMISSION_TITLE: &str = "Execute session prompt";

/// What the permission step decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Run the prompt.
    Allow,
    /// Do not run it; the turn ends `cancelled`.
    Deny,
    /// The bridge failed under `required`; the turn ends with this error message.
    Fail(String),
    /// The turn was stopped while waiting.
    Stopped,
}

/// Why the bridge got no usable answer.
#[derive(Debug, thiserror::Error)]
pub enum BridgeError {
    /// No connection could take the request.
    #[error(transparent)]
    NotConnected(#[from] RouteError),
    /// The connection closed before the answer arrived.
    #[error("the connection closed before the client answered")]
    ConnectionLost,
    /// No answer in time.
    #[error("the client did not answer within {0:?}")]
    Timeout(Duration),
    /// The client answered with an error.
    #[error("the client answered with an error: {0}")]
    Client(RpcError),
    /// The client's answer did not fit the request.
    #[error("the client's answer is invalid: {0}")]
    InvalidAnswer(String),
    /// The turn was stopped while waiting.
    #[error("the turn was stopped")]
    Stopped,
}

/// The client's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// It selected an option of this kind.
    Selected(PermissionOptionKind),
    /// It answered with the `cancelled` outcome.
    Cancelled,
}

/// The tool call a permission request is about. Its id is new every time; the fingerprint of
/// the policy memory leaves the id out, so every prompt of a session asks about "the same" call.
pub fn permission_tool_call() -> ToolCallUpdate {
    let mut call = ToolCallUpdate::new(super::tools::new_tool_call_id());
    call.title = Nullable::Value(PERMISSION_TITLE.to_owned());
    call.kind = Nullable::Value(ToolKind::Execute);
    call
}

/// The four options offered, with option ids equal to their kinds.
pub fn options() -> Vec<PermissionOption> {
    [
        (PermissionOptionKind::AllowOnce, "Allow once"),
        (PermissionOptionKind::AllowAlways, "Always allow"),
        (PermissionOptionKind::RejectOnce, "Reject"),
        (PermissionOptionKind::RejectAlways, "Always reject"),
    ]
    .into_iter()
    .map(|(kind, name)| PermissionOption {
        option_id: kind.as_str().to_owned(),
        name: name.to_owned(),
        kind,
        extra: Extra::new(),
    })
    .collect()
}

/// Runs the permission step of a turn.
pub(crate) async fn decide(agent: &Inner, session: &str, control: &TurnControl) -> Decision {
    let config = agent.config.permission;
    if config.mode == PermissionMode::Disabled {
        return Decision::Allow;
    }
    match config.policy {
        PolicyMode::Allow => return Decision::Allow,
        PolicyMode::Deny => return Decision::Deny,
        PolicyMode::Ask => {}
    }
    let tool_call = permission_tool_call();
    match agent.recall(session, &tool_call) {
        Some(Remembered::AllowAlways) => return Decision::Allow,
        Some(Remembered::RejectAlways) => return Decision::Deny,
        None => {}
    }
    let request = RequestPermissionRequest {
        session_id: session.to_owned(),
        tool_call: tool_call.clone(),
        options: options(),
        extra: Extra::new(),
    };
    // Boxed: asking is the rare path, and inline it would make every turn's future larger.
    match Box::pin(ask(agent, &request, config.timeout, control)).await {
        Ok(Answer::Selected(kind)) => {
            agent.remember(session, &tool_call, &kind);
            match kind {
                PermissionOptionKind::AllowOnce | PermissionOptionKind::AllowAlways => {
                    Decision::Allow
                }
                _ => Decision::Deny,
            }
        }
        Ok(Answer::Cancelled) => Decision::Deny,
        Err(BridgeError::Stopped) => Decision::Stopped,
        Err(error) => match config.mode {
            PermissionMode::Required => {
                tracing::warn!(session, %error, "permission request failed; the prompt does not run");
                Decision::Fail(format!("permission request failed: {error}"))
            }
            PermissionMode::Permissive | PermissionMode::Disabled => {
                tracing::warn!(session, %error, "permission request failed; allowing once (permissive mode)");
                Decision::Allow
            }
        },
    }
}

/// Sends `session/request_permission` to the session's owner and waits for the answer; on a v2
/// session the session requires action meanwhile.
pub(crate) async fn ask(
    agent: &Inner,
    request: &RequestPermissionRequest,
    timeout: Duration,
    control: &TurnControl,
) -> Result<Answer, BridgeError> {
    let session = request.session_id.as_str();
    let v2 = agent.registry.session_generation(session) == Generation::V2;
    let state = |update: StateUpdate| crate::acp::v2::SessionUpdate::StateUpdate(update);
    if v2 {
        agent
            .update_v2(session, state(StateUpdate::requires_action()))
            .await;
    }
    let answer = ask_client(agent, request, timeout, control).await;
    if v2 && !matches!(answer, Err(BridgeError::Stopped)) {
        agent
            .update_v2(session, state(StateUpdate::running()))
            .await;
    }
    answer
}

async fn ask_client(
    agent: &Inner,
    request: &RequestPermissionRequest,
    timeout: Duration,
    control: &TurnControl,
) -> Result<Answer, BridgeError> {
    let (_, peer, _) = agent.registry.owner_peer(&request.session_id)?;
    let params = serde_json::to_value(request)
        .map_err(|error| BridgeError::InvalidAnswer(format!("cannot encode request: {error}")))?;
    let start = peer.start_request(
        SESSION_REQUEST_PERMISSION,
        Some(params),
        RequestOptions::timeout(timeout),
    );
    let pending = tokio::select! {
        biased;
        () = control.token().cancelled() => return Err(BridgeError::Stopped),
        pending = start => pending.map_err(call_error)?,
    };
    let id = pending.id().clone();
    let result = tokio::select! {
        biased;
        result = pending => result,
        () = control.token().cancelled() => {
            // The answer no longer matters; tell the client so it can close its prompt.
            if let Err(error) = peer.cancel_request(&id).await {
                tracing::debug!(%error, "could not cancel the permission request");
            }
            return Err(BridgeError::Stopped);
        }
    };
    read_answer(result.map_err(call_error)?, &request.options)
}

fn call_error(error: CallError) -> BridgeError {
    match error {
        CallError::Rpc(error) => BridgeError::Client(error),
        CallError::Eof | CallError::Send(_) | CallError::NotConnected => {
            BridgeError::ConnectionLost
        }
        CallError::Timeout { timeout, .. } => BridgeError::Timeout(timeout),
        CallError::InvalidResponse(reason) => BridgeError::InvalidAnswer(reason),
        CallError::Decode(error) | CallError::Params(error) => {
            BridgeError::InvalidAnswer(error.to_string())
        }
    }
}

fn read_answer(result: Value, offered: &[PermissionOption]) -> Result<Answer, BridgeError> {
    let response: RequestPermissionResponse = serde_json::from_value(result)
        .map_err(|error| BridgeError::InvalidAnswer(error.to_string()))?;
    match response.outcome {
        PermissionOutcome::Cancelled(_) => Ok(Answer::Cancelled),
        PermissionOutcome::Selected(selected) => offered
            .iter()
            .find(|option| option.option_id == selected.option_id)
            .map(|option| Answer::Selected(option.kind.clone()))
            .ok_or_else(|| {
                BridgeError::InvalidAnswer(format!(
                    "optionId {:?} was not offered",
                    selected.option_id
                ))
            }),
        PermissionOutcome::Unknown(value) => Err(BridgeError::InvalidAnswer(format!(
            "unknown outcome {value}"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn answers_are_read_by_the_kind_of_the_selected_option() {
        let offered = options();
        assert_eq!(
            read_answer(
                json!({"outcome": {"outcome": "selected", "optionId": "reject_always"}}),
                &offered
            )
            .unwrap(),
            Answer::Selected(PermissionOptionKind::RejectAlways)
        );
        assert_eq!(
            read_answer(json!({"outcome": {"outcome": "cancelled"}}), &offered).unwrap(),
            Answer::Cancelled
        );
        for bad in [
            json!({"outcome": {"outcome": "selected", "optionId": "maybe"}}),
            json!({"outcome": "allow_once"}),
            json!({"allow": true}),
            json!({"outcome": {"outcome": "granted"}}),
        ] {
            assert!(
                matches!(
                    read_answer(bad.clone(), &offered),
                    Err(BridgeError::InvalidAnswer(_))
                ),
                "{bad}"
            );
        }
    }
}
