//! Client rows on session update codecs (E-ACP-27, E-ACP-29), judged through
//! `client-echo-updates`: the mock sends updates (the project's golden fixtures among them) and
//! the client's printed re-encoding of each must equal what was sent, while updates missing a
//! required field must not be printed at all.

use serde_json::{Value, json};

use super::mock::{ClientRun, Mock, end_turn_step, on_prompt, raw_update, run_client};
use crate::check::{Check, CheckError, CheckResult};
use crate::context::Ctx;
use crate::{ensure, ensure_eq};

/// The checks of this module.
pub fn checks() -> Vec<Check> {
    vec![
        Check::new(
            "WS-044",
            "The mock sends the golden full tool_call (kind, status, locations, content, rawInput, \
             rawOutput) and a tool_call_update holding only toolCallId and status; the client's \
             printed payloads must equal them, the update with only those two fields.",
            ws_044,
        ),
        Check::new(
            "WS-046",
            "The mock sends a tool_call without title, a plan without entries, a \
             current_mode_update without currentModeId and an agent_message_chunk without \
             content, then a valid chunk; the client must print only the valid chunk and end the \
             turn end_turn.",
            ws_046,
        ),
        Check::new(
            "WS-047",
            "The mock sends the golden tool_call_update and agent_message_chunk fixtures; each \
             printed payload must equal its fixture's update as JSON.",
            ws_047,
        ),
        Check::new(
            "WS-055",
            "The mock sends the golden available_commands_update and current_mode_update \
             fixtures; each printed payload must equal its fixture's update as JSON.",
            ws_055,
        ),
    ]
}

/// Golden `session/update` fixtures: (name, file text).
const TOOL_CALL_FULL: (&str, &str) = (
    "tool_call--full",
    include_str!("../../../../../golden/acp/session-update/tool_call--full.json"),
);
const TOOL_CALL_UPDATE: (&str, &str) = (
    "tool_call_update",
    include_str!("../../../../../golden/acp/session-update/tool_call_update.json"),
);
const TOOL_CALL_UPDATE_FULL: (&str, &str) = (
    "tool_call_update--full",
    include_str!("../../../../../golden/acp/session-update/tool_call_update--full.json"),
);
const AGENT_MESSAGE_CHUNK: (&str, &str) = (
    "agent_message_chunk",
    include_str!("../../../../../golden/acp/session-update/agent_message_chunk.json"),
);
const AGENT_MESSAGE_CHUNK_ID: (&str, &str) = (
    "agent_message_chunk--message-id",
    include_str!("../../../../../golden/acp/session-update/agent_message_chunk--message-id.json"),
);
const AGENT_MESSAGE_CHUNK_LINK: (&str, &str) = (
    "agent_message_chunk--resource-link",
    include_str!(
        "../../../../../golden/acp/session-update/agent_message_chunk--resource-link.json"
    ),
);
const AVAILABLE_COMMANDS: (&str, &str) = (
    "available_commands_update",
    include_str!("../../../../../golden/acp/session-update/available_commands_update.json"),
);
const CURRENT_MODE: (&str, &str) = (
    "current_mode_update",
    include_str!("../../../../../golden/acp/session-update/current_mode_update.json"),
);

/// The `params.update` of a fixture.
fn update_of(fixture: (&str, &str)) -> Result<Value, CheckError> {
    let value: Value = serde_json::from_str(fixture.1)
        .map_err(|e| CheckError::Harness(format!("golden fixture {}: {e}", fixture.0)))?;
    value
        .pointer("/params/update")
        .cloned()
        .ok_or_else(|| CheckError::Harness(format!("golden fixture {} has no update", fixture.0)))
}

/// Sends `updates` in one turn; the run.
async fn echo(ctx: &Ctx, updates: &[Value]) -> Result<ClientRun, CheckError> {
    let mut steps: Vec<String> = updates.iter().map(raw_update).collect();
    steps.push(end_turn_step("end_turn"));
    let refs: Vec<&str> = steps.iter().map(String::as_str).collect();
    let mock = Mock::new(ctx, "mock", &on_prompt(&refs), &[])?;
    let run = run_client(ctx, "client", &mock, &[("prompt", "updates")]).await?;
    run.expect_turns(&["end_turn"], "the client completes the turn")?;
    Ok(run)
}

/// Sends each fixture and expects the printed payloads to equal them, in order.
async fn round_trip(ctx: &Ctx, fixtures: &[(&str, &str)]) -> CheckResult {
    let updates = fixtures
        .iter()
        .map(|f| update_of(*f))
        .collect::<Result<Vec<_>, _>>()?;
    let run = echo(ctx, &updates).await?;
    let printed: Vec<Value> = run.updates().into_iter().cloned().collect();
    ensure_eq!(
        updates.len(),
        printed.len(),
        "the number of updates the client printed ({})",
        run.describe()
    );
    for ((name, _), (sent, printed)) in fixtures.iter().zip(updates.iter().zip(&printed)) {
        ensure_eq!(
            *sent,
            *printed,
            "the client's re-encoding of the golden fixture {name}"
        );
    }
    Ok(())
}

async fn ws_044(ctx: Ctx) -> CheckResult {
    let full = update_of(TOOL_CALL_FULL)?;
    for field in [
        "kind",
        "status",
        "locations",
        "content",
        "rawInput",
        "rawOutput",
    ] {
        ensure!(
            full.get(field).is_some(),
            "the full tool_call fixture carries every standard field",
            "it lacks {field}"
        );
    }
    let partial = update_of(TOOL_CALL_UPDATE)?;
    let keys: Vec<&String> = partial
        .as_object()
        .map(|o| o.keys().collect())
        .unwrap_or_default();
    ensure_eq!(
        3,
        keys.len(),
        "members of the partial tool_call_update fixture (sessionUpdate, toolCallId, status)"
    );
    round_trip(&ctx, &[TOOL_CALL_FULL, TOOL_CALL_UPDATE]).await
}

async fn ws_046(ctx: Ctx) -> CheckResult {
    let valid = json!({"sessionUpdate": "agent_message_chunk",
        "content": {"type": "text", "text": "valid after the invalid ones"}});
    let invalid = [
        json!({"sessionUpdate": "tool_call", "toolCallId": "call-no-title", "status": "pending"}),
        json!({"sessionUpdate": "plan"}),
        json!({"sessionUpdate": "current_mode_update"}),
        json!({"sessionUpdate": "agent_message_chunk"}),
    ];
    let mut updates = invalid.to_vec();
    updates.push(valid.clone());
    let run = echo(&ctx, &updates).await?;
    let printed: Vec<Value> = run.updates().into_iter().cloned().collect();
    ensure_eq!(
        vec![valid],
        printed,
        "the updates the client printed (updates missing a required field are dropped)"
    );
    Ok(())
}

async fn ws_047(ctx: Ctx) -> CheckResult {
    round_trip(
        &ctx,
        &[
            TOOL_CALL_UPDATE,
            TOOL_CALL_UPDATE_FULL,
            AGENT_MESSAGE_CHUNK,
            AGENT_MESSAGE_CHUNK_ID,
            AGENT_MESSAGE_CHUNK_LINK,
        ],
    )
    .await
}

async fn ws_055(ctx: Ctx) -> CheckResult {
    round_trip(&ctx, &[AVAILABLE_COMMANDS, CURRENT_MODE]).await
}
