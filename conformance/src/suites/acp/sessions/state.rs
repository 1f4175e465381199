//! A session's state: the `modes`, `configOptions` and `models` of session results, and
//! switching them with `session/set_mode`, `session/set_config_option` and `session/set_model`.

use serde_json::{Value, json};

use super::super::agent::PLAIN;
use super::super::connection::Connection;
use super::super::exchange::{expect_error, expect_result, open, session_id_of};
use super::session_params;
use crate::check::{Check, CheckError, CheckResult};
use crate::context::Ctx;
use crate::{ensure, ensure_eq, fail};

/// The checks of this module.
pub(super) fn checks() -> Vec<Check> {
    vec![
        Check::new(
            "WS-031",
            "Sets another mode of the session's modes; session/set_mode must succeed and a \
             current_mode_update with that modeId arrive; an unknown modeId answers -32602.",
            ws_031,
        ),
        Check::new(
            "WS-032",
            "Sets another value of a select config option; the result's configOptions must show \
             it and a config_option_update arrive; an unknown configId answers -32602.",
            ws_032,
        ),
        Check::new(
            "WS-038",
            "Checks the session/new result: a string sessionId; modes and configOptions, when \
             present, well formed with current values among the offered ones.",
            ws_038,
        ),
        Check::new(
            "WS-049",
            "Switches the session to another offered model with session/set_model (a result \
             required) and requires -32602 for an unknown modelId.",
            ws_049,
        ),
    ]
}

/// Waits until a `session/update` of `kind` for `session` arrives at or after `from`.
async fn update_of(
    conn: &mut Connection,
    session: &str,
    kind: &str,
    from: usize,
) -> Result<Value, CheckError> {
    let what = format!("a session/update {kind} for the session");
    let index = conn
        .wait_for_within(&what, from, conn_short(), |f| {
            f.is_update_for(session) && f.update_kind() == Some(kind)
        })
        .await?;
    Ok(conn.frames()[index]
        .update()
        .cloned()
        .unwrap_or(Value::Null))
}

fn conn_short() -> std::time::Duration {
    crate::catalog::TimeoutClass::Short.base()
}

async fn ws_031(ctx: Ctx) -> CheckResult {
    let mut opened = open(&ctx, PLAIN).await?;
    let result = opened.created.clone();
    let current = result.pointer("/modes/currentModeId").cloned();
    let other = result
        .pointer("/modes/availableModes")
        .and_then(Value::as_array)
        .and_then(|modes| {
            modes
                .iter()
                .filter_map(|m| m.get("id"))
                .find(|id| Some(*id) != current.as_ref())
                .cloned()
        });
    let Some(mode) = other else {
        fail!(
            "session/new offers at least two modes",
            "modes {}",
            result.get("modes").cloned().unwrap_or(Value::Null)
        );
    };
    let from = opened.conn.cursor();
    let reply = opened
        .conn
        .call(
            "session/set_mode",
            json!({"sessionId": opened.session, "modeId": mode}),
        )
        .await?;
    expect_result(reply, "session/set_mode succeeds")?;
    let update = update_of(
        &mut opened.conn,
        &opened.session,
        "current_mode_update",
        from,
    )
    .await?;
    ensure_eq!(
        Some(mode),
        update.get("currentModeId").cloned(),
        "the currentModeId of current_mode_update"
    );
    let reply = opened
        .conn
        .call(
            "session/set_mode",
            json!({"sessionId": opened.session, "modeId": "ski-conformance-no-such-mode"}),
        )
        .await?;
    expect_error(&reply, &[-32602], "an unknown modeId answers -32602")?;
    Ok(())
}

/// A select config option and a value other than its current one.
pub(super) fn other_config_value(options: &Value) -> Option<(Value, Value)> {
    options.as_array()?.iter().find_map(|option| {
        if option.get("type")? != "select" {
            return None;
        }
        let current = option.get("currentValue")?;
        let value = option
            .get("options")?
            .as_array()?
            .iter()
            .flat_map(|o| match o.get("options").and_then(Value::as_array) {
                Some(group) => group.clone(),
                None => vec![o.clone()],
            })
            .filter_map(|o| o.get("value").cloned())
            .find(|v| v != current)?;
        Some((option.get("id")?.clone(), value))
    })
}

fn current_value(options: &Value, id: &Value) -> Option<Value> {
    options
        .as_array()?
        .iter()
        .find(|o| o.get("id") == Some(id))?
        .get("currentValue")
        .cloned()
}

async fn ws_032(ctx: Ctx) -> CheckResult {
    let mut opened = open(&ctx, PLAIN).await?;
    let result = opened.created.clone();
    let options = result.get("configOptions").cloned().unwrap_or(Value::Null);
    let Some((config, value)) = other_config_value(&options) else {
        fail!(
            "session/new offers a select config option with two values",
            "configOptions {options}"
        );
    };
    let from = opened.conn.cursor();
    let reply = opened
        .conn
        .call(
            "session/set_config_option",
            json!({"sessionId": opened.session, "configId": config, "value": value}),
        )
        .await?;
    let result = expect_result(reply, "session/set_config_option succeeds")?;
    ensure_eq!(
        Some(value.clone()),
        current_value(result.get("configOptions").unwrap_or(&Value::Null), &config),
        "the option's currentValue in the set_config_option result"
    );
    let update = update_of(
        &mut opened.conn,
        &opened.session,
        "config_option_update",
        from,
    )
    .await?;
    ensure_eq!(
        Some(value),
        current_value(update.get("configOptions").unwrap_or(&Value::Null), &config),
        "the option's currentValue in config_option_update"
    );
    let reply = opened
        .conn
        .call(
            "session/set_config_option",
            json!({"sessionId": opened.session, "configId": "ski-conformance-no-such-option", "value": "x"}),
        )
        .await?;
    expect_error(&reply, &[-32602], "an unknown configId answers -32602")?;
    Ok(())
}

/// Problems with the `modes` and `configOptions` of a session result.
pub(super) fn state_problems(result: &Value) -> Vec<String> {
    let mut problems = Vec::new();
    if let Some(modes) = result.get("modes").filter(|m| !m.is_null()) {
        let ids: Vec<&Value> = modes
            .get("availableModes")
            .and_then(Value::as_array)
            .map(|m| m.iter().filter_map(|m| m.get("id")).collect())
            .unwrap_or_default();
        match modes.get("currentModeId") {
            Some(current) if current.is_string() && ids.contains(&current) => {}
            other => problems.push(format!(
                "modes.currentModeId {other:?} is not one of availableModes {ids:?}"
            )),
        }
    }
    if let Some(options) = result.get("configOptions").filter(|o| !o.is_null()) {
        match options.as_array() {
            None => problems.push(format!("configOptions is not an array: {options}")),
            Some(options) => {
                for option in options {
                    for key in ["id", "name", "type"] {
                        if !option.get(key).is_some_and(Value::is_string) {
                            problems
                                .push(format!("config option without a string {key}: {option}"));
                        }
                    }
                    if option.get("currentValue").is_none_or(Value::is_null) {
                        problems.push(format!("config option without a currentValue: {option}"));
                    }
                }
            }
        }
    }
    problems
}

async fn ws_038(ctx: Ctx) -> CheckResult {
    let opened = open(&ctx, PLAIN).await?;
    let result = opened.created.clone();
    session_id_of(&result, "session/new")?;
    let problems = state_problems(&result);
    ensure!(
        problems.is_empty(),
        "modes and configOptions of session/new, when present, are well formed",
        "{}",
        problems.join("; ")
    );
    Ok(())
}

async fn ws_049(ctx: Ctx) -> CheckResult {
    let mut opened = open(&ctx, PLAIN).await?;
    let result = opened.created.clone();
    let current = result.pointer("/models/currentModelId").cloned();
    let Some(model) = result
        .pointer("/models/availableModels")
        .and_then(Value::as_array)
        .and_then(|m| {
            m.iter()
                .filter_map(|m| m.get("modelId"))
                .find(|id| Some(*id) != current.as_ref())
                .cloned()
        })
    else {
        fail!(
            "session/new offers models with at least two availableModels",
            "models {}",
            result.get("models").cloned().unwrap_or(Value::Null)
        );
    };
    let reply = opened
        .conn
        .call(
            "session/set_model",
            json!({"sessionId": opened.session, "modelId": model}),
        )
        .await?;
    expect_result(reply, "session/set_model with an offered modelId succeeds")?;
    if ctx.has("session-fork") {
        let fork = opened
            .conn
            .call_ok("session/fork", session_params(&ctx, &opened.session))
            .await?;
        ensure_eq!(
            Some(model.clone()),
            fork.pointer("/models/currentModelId").cloned(),
            "the current model after set_model (as a fork inherits it)"
        );
    }
    let reply = opened
        .conn
        .call(
            "session/set_model",
            json!({"sessionId": opened.session, "modelId": "ski-conformance-no-such-model"}),
        )
        .await?;
    expect_error(&reply, &[-32602], "an unknown modelId answers -32602")?;
    Ok(())
}
