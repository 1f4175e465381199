//! Forking a session: `session/fork` gives a new session with the source's state, listed with
//! its parent.

use serde_json::{Value, json};

use super::super::agent::PLAIN;
use super::super::exchange::{open, session_id_of};
use super::list::{entries, list_all};
use super::session_params;
use super::state::other_config_value;
use crate::check::{Check, CheckResult};
use crate::context::Ctx;
use crate::vocabulary::capability;
use crate::{ensure, ensure_eq, fail};

/// The checks of this module.
pub(super) fn checks() -> Vec<Check> {
    vec![
        Check::new(
            "WS-052",
            "Sets a non-default mode, config value and model where declared, forks the session, \
             and requires a new sessionId whose state equals the source's.",
            ws_052,
        ),
        Check::new(
            "WS-064a",
            "Forks a session and requires its session/list entry to carry parentSessionId (in \
             _meta or at the root) equal to the source, and the source's entry none.",
            ws_064a,
        ),
    ]
}

/// The `key` of the first entry of the list at `pointer` in `value` that differs from `current`
/// (another mode or model to switch to).
fn another_id(value: &Value, pointer: &str, key: &str, current: Option<&Value>) -> Option<Value> {
    value
        .pointer(pointer)?
        .as_array()?
        .iter()
        .filter_map(|entry| entry.get(key))
        .find(|id| Some(*id) != current)
        .cloned()
}

async fn ws_052(ctx: Ctx) -> CheckResult {
    let mut opened = open(&ctx, PLAIN).await?;
    let created = opened.created.clone();
    let session = opened.session.clone();
    let conn = &mut opened.conn;
    let mut mode = created.pointer("/modes/currentModeId").cloned();
    if ctx.has(capability::SET_MODE)
        && let Some(other) = another_id(&created, "/modes/availableModes", "id", mode.as_ref())
    {
        conn.call_ok(
            "session/set_mode",
            json!({"sessionId": session, "modeId": other}),
        )
        .await?;
        mode = Some(other);
    }
    let mut options = created.get("configOptions").cloned();
    if ctx.has(capability::CONFIG_OPTIONS)
        && let Some((config, value)) = other_config_value(options.as_ref().unwrap_or(&Value::Null))
    {
        let result = conn
            .call_ok(
                "session/set_config_option",
                json!({"sessionId": session, "configId": config, "value": value}),
            )
            .await?;
        options = result.get("configOptions").cloned();
    }
    let mut model = created.pointer("/models/currentModelId").cloned();
    if ctx.has(capability::SET_MODEL)
        && let Some(other) = another_id(
            &created,
            "/models/availableModels",
            "modelId",
            model.as_ref(),
        )
    {
        conn.call_ok(
            "session/set_model",
            json!({"sessionId": session, "modelId": other}),
        )
        .await?;
        model = Some(other);
    }
    let fork = conn
        .call_ok("session/fork", session_params(&ctx, &session))
        .await?;
    let forked = session_id_of(&fork, "session/fork")?;
    ensure!(
        forked != session,
        "session/fork returns a new sessionId",
        "the fork has the source's id {forked}"
    );
    if let Some(fork_mode) = fork.pointer("/modes/currentModeId") {
        ensure_eq!(
            mode,
            Some(fork_mode.clone()),
            "the fork's current mode (the source's)"
        );
    }
    if let Some(fork_model) = fork.pointer("/models/currentModelId") {
        ensure_eq!(
            model,
            Some(fork_model.clone()),
            "the fork's current model (the source's)"
        );
    }
    if let (Some(source), Some(fork_options)) = (options.as_ref(), fork.get("configOptions")) {
        let values = |o: &Value| -> Vec<(Value, Value)> {
            o.as_array()
                .map(|a| {
                    a.iter()
                        .filter(|o| o.pointer("/category") != Some(&json!("model")))
                        .filter_map(|o| {
                            Some((o.get("id")?.clone(), o.get("currentValue")?.clone()))
                        })
                        .collect()
                })
                .unwrap_or_default()
        };
        ensure_eq!(
            values(source),
            values(fork_options),
            "the fork's config values (the source's, model options aside)"
        );
    }
    Ok(())
}

fn parent_of(entry: &Value) -> Option<Value> {
    entry
        .pointer("/_meta/parentSessionId")
        .or_else(|| entry.get("parentSessionId"))
        .filter(|v| !v.is_null())
        .cloned()
}

async fn ws_064a(ctx: Ctx) -> CheckResult {
    let mut opened = open(&ctx, PLAIN).await?;
    let fork = opened
        .conn
        .call_ok("session/fork", session_params(&ctx, &opened.session))
        .await?;
    let forked = session_id_of(&fork, "session/fork")?;
    let listed: Vec<Value> = list_all(&mut opened.conn)
        .await?
        .iter()
        .flat_map(entries)
        .collect();
    let find = |id: &str| {
        listed
            .iter()
            .find(|e| e.get("sessionId").and_then(Value::as_str) == Some(id))
            .cloned()
    };
    let Some(entry) = find(&forked) else {
        fail!("the fork is in session/list", "{listed:?}");
    };
    ensure_eq!(
        Some(json!(opened.session)),
        parent_of(&entry),
        "the fork's parentSessionId in session/list"
    );
    if let Some(source) = find(&opened.session) {
        ensure_eq!(
            None,
            parent_of(&source),
            "the parentSessionId of a session not forked"
        );
    }
    Ok(())
}
