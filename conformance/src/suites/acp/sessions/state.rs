//! A session's state: the `modes`, `configOptions` and `models` of session results, and
//! switching them with `session/set_mode`, `session/set_config_option` and `session/set_model`.
//!
//! ACP-CAP-008 and ACP-CAP-009 judge `session/set_mode` and `session/set_config_option` by ACP
//! alone, on any agent whose session offers modes or config options; WS-031 and WS-032 add what
//! the serve document asks beyond ACP (an update for every change, -32602 for an unknown id).

use serde_json::{Value, json};

use super::super::agent::PLAIN;
use super::super::connection::Connection;
use super::super::exchange::{expect_error, expect_result, open, session_id_of};
use super::session_params;
use crate::check::{Check, CheckError, CheckResult};
use crate::context::Ctx;
use crate::vocabulary::capability;
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
            "ACP-CAP-008",
            "Where session/new offers modes: session/set_mode with another of its \
             availableModes (its current one when it offers one) answers a result object; a \
             current_mode_update sent meanwhile names an offered mode.",
            cap_008,
        ),
        Check::new(
            "ACP-CAP-009",
            "Where session/new offers configOptions with a select option: \
             session/set_config_option with another of its values (its current one when it has \
             one) answers {configOptions}, the full set: every option the session had, the one \
             set with the value set.",
            cap_009,
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

async fn cap_008(ctx: Ctx) -> CheckResult {
    let mut opened = open(&ctx, PLAIN).await?;
    let modes = opened.created.get("modes").cloned().unwrap_or(Value::Null);
    let offered: Vec<Value> = modes
        .get("availableModes")
        .and_then(Value::as_array)
        .map(|m| m.iter().filter_map(|m| m.get("id").cloned()).collect())
        .unwrap_or_default();
    let current = modes.get("currentModeId").cloned();
    let Some(mode) = offered
        .iter()
        .find(|id| Some(*id) != current.as_ref())
        .or(offered.first())
        .cloned()
    else {
        return Err(CheckError::Skip(format!(
            "this session/new offers no mode to set (modes {modes})"
        )));
    };
    let from = opened.conn.cursor();
    let reply = opened
        .conn
        .call(
            "session/set_mode",
            json!({"sessionId": opened.session, "modeId": mode}),
        )
        .await?;
    let result = expect_result(
        reply,
        "session/set_mode with an offered modeId answers a result",
    )?;
    ensure!(
        result.is_object(),
        "the session/set_mode result is an object (SetSessionModeResponse)",
        "{result}"
    );
    let foreign: Vec<Value> = opened.conn.frames()[from..]
        .iter()
        .filter(|f| f.is_update_for(&opened.session))
        .filter(|f| f.update_kind() == Some("current_mode_update"))
        .filter_map(|f| f.update().and_then(|u| u.get("currentModeId")).cloned())
        .filter(|id| !offered.contains(id))
        .collect();
    ensure!(
        foreign.is_empty(),
        "a current_mode_update names one of the session's availableModes",
        "currentModeId {foreign:?}, offered {offered:?}"
    );
    Ok(())
}

/// The ids of the options of a `configOptions` list.
fn option_ids(options: &Value) -> Vec<Value> {
    options
        .as_array()
        .map(|o| o.iter().filter_map(|o| o.get("id").cloned()).collect())
        .unwrap_or_default()
}

/// A select config option and a value of it: another than its current one where it has one.
fn some_config_value(options: &Value) -> Option<(Value, Value)> {
    other_config_value(options).or_else(|| {
        let option = options
            .as_array()?
            .iter()
            .find(|o| o.get("type").and_then(Value::as_str) == Some("select"))?;
        Some((
            option.get("id")?.clone(),
            option.get("currentValue")?.clone(),
        ))
    })
}

async fn cap_009(ctx: Ctx) -> CheckResult {
    let mut opened = open(&ctx, PLAIN).await?;
    let options = opened
        .created
        .get("configOptions")
        .cloned()
        .unwrap_or(Value::Null);
    let Some((config, value)) = some_config_value(&options) else {
        return Err(CheckError::Skip(format!(
            "session/new offers no select config option to set (configOptions {options}); a \
             boolean option is set only by a client that advertises session.configOptions.boolean"
        )));
    };
    let reply = opened
        .conn
        .call(
            "session/set_config_option",
            json!({"sessionId": opened.session, "configId": config, "value": value}),
        )
        .await?;
    let result = expect_result(
        reply,
        "session/set_config_option with an offered value answers a result",
    )?;
    let Some(answered) = result.get("configOptions").filter(|o| o.is_array()) else {
        fail!(
            "the session/set_config_option result carries configOptions (required)",
            "{result}"
        );
    };
    let missing: Vec<Value> = option_ids(&options)
        .into_iter()
        .filter(|id| !option_ids(answered).contains(id))
        .collect();
    ensure!(
        missing.is_empty(),
        "the set_config_option result's configOptions is the full set: every option of the session",
        "missing {missing:?} from {answered}"
    );
    ensure_eq!(
        Some(value),
        current_value(answered, &config),
        "the set option's currentValue in the set_config_option result"
    );
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
    if ctx.has(capability::SESSION_FORK) {
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
