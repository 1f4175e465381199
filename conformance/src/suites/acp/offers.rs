//! The agent offers and calls only what the client advertised (ACP-CORE-046): against a client
//! that advertises no optional capability, no `terminal` auth method, no boolean config option,
//! and no client method beyond the baseline (`session/update`, `session/request_permission`).

use serde_json::Value;

use super::agent::PLAIN;
use super::connection::Frame;
use super::exchange::{self, open, prompt};
use crate::check::{Check, CheckResult};
use crate::context::Ctx;
use crate::ensure;
use crate::vocabulary::capability;

/// What an agent may send to any client: the baseline methods, and `$/cancel_request`.
const BASELINE: &[&str] = &[
    "session/update",
    "session/request_permission",
    "$/cancel_request",
];

/// The checks of this module.
pub fn checks() -> Vec<Check> {
    vec![Check::new(
        "ACP-CORE-046",
        "Initializes with clientCapabilities that advertise nothing (no fs, terminal, auth, \
         elicitation or session extensions), opens a session and runs a turn where declared; \
         authMethods must hold no terminal method, configOptions no boolean option, and the \
         agent must send no request or notification beyond session/update, \
         session/request_permission, $/cancel_request and _-prefixed extensions.",
        core_046,
    )]
}

/// The entries of the array at `key` in `value` whose `type` is `kind`.
fn typed<'a>(value: &'a Value, key: &str, kind: &str) -> Vec<&'a Value> {
    value
        .get(key)
        .and_then(Value::as_array)
        .map(|entries| {
            entries
                .iter()
                .filter(|e| e.get("type").and_then(Value::as_str) == Some(kind))
                .collect()
        })
        .unwrap_or_default()
}

/// Whether `frame` is a call the client did not advertise.
fn unadvertised_call(frame: &Frame) -> bool {
    frame
        .method()
        .is_some_and(|m| !BASELINE.contains(&m) && !m.starts_with('_'))
}

async fn core_046(ctx: Ctx) -> CheckResult {
    let mut opened = open(&ctx, PLAIN).await?;
    let terminal_auth = typed(&opened.init, "authMethods", "terminal");
    ensure!(
        terminal_auth.is_empty(),
        "no authMethods entry of type terminal for a client whose auth.terminal is not true",
        "{terminal_auth:?}"
    );
    let boolean_options = typed(&opened.created, "configOptions", "boolean");
    ensure!(
        boolean_options.is_empty(),
        "no configOptions entry of type boolean for a client that did not advertise \
         session.configOptions.boolean",
        "{boolean_options:?}"
    );
    if ctx.has(capability::PROMPT) {
        prompt(
            &mut opened.conn,
            &opened.session,
            "read a file and run a command",
        )
        .await?;
    }
    let calls: Vec<&Frame> = opened
        .conn
        .frames()
        .iter()
        .filter(|f| unadvertised_call(f))
        .collect();
    ensure!(
        calls.is_empty(),
        "the agent calls no client method the client did not advertise (fs/*, terminal/*, \
         elicitation/*, ...)",
        "{}",
        exchange::list(&calls)
    );
    Ok(())
}
