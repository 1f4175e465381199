//! Capability gating: the `minimal` variant advertises no optional capability, and the methods
//! it does not advertise must answer -32601.

use serde_json::{Value, json};

use super::super::exchange::{expect_error, open};
use super::{advertised, session_params};
use crate::check::{Check, CheckError, CheckResult};
use crate::context::Ctx;

/// The checks of this module.
pub(super) fn checks() -> Vec<Check> {
    vec![
        Check::new(
            "WS-024",
            "Starts the minimal variant (which must not advertise loadSession) and requires \
             -32601 for session/load.",
            ws_024,
        ),
        Check::new(
            "WS-057",
            "Starts the minimal variant (which must not advertise sessionCapabilities.delete) and \
             requires -32601 for session/delete.",
            ws_057,
        ),
    ]
}

fn harness_if_advertised(init: &Value, pointers: &[&str], what: &str) -> CheckResult {
    if advertised(init, pointers) {
        return Err(CheckError::Harness(format!(
            "the minimal variant still advertises {what}; the profile's agent_minimal must turn \
             it off"
        )));
    }
    Ok(())
}

async fn ws_024(ctx: Ctx) -> CheckResult {
    let mut opened = open(&ctx, "minimal").await?;
    harness_if_advertised(
        &opened.init,
        &["/agentCapabilities/loadSession"],
        "loadSession",
    )?;
    let params = session_params(&ctx, &opened.session);
    let reply = opened.conn.call("session/load", params).await?;
    expect_error(
        &reply,
        &[-32601],
        "session/load without the loadSession capability answers -32601",
    )?;
    Ok(())
}

async fn ws_057(ctx: Ctx) -> CheckResult {
    let mut opened = open(&ctx, "minimal").await?;
    harness_if_advertised(
        &opened.init,
        &["/agentCapabilities/sessionCapabilities/delete"],
        "sessionCapabilities.delete",
    )?;
    let reply = opened
        .conn
        .call("session/delete", json!({"sessionId": opened.session}))
        .await?;
    expect_error(
        &reply,
        &[-32601],
        "session/delete without the delete capability answers -32601",
    )?;
    Ok(())
}
