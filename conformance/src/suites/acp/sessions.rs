//! Checks of the session methods (load, list, resume, fork, delete, export, modes, config
//! options, models), capability gating and authentication. Variants: `minimal` advertises no
//! optional capability, `auth` advertises one auth method, `auth_required` refuses work until
//! authenticated, `paged` lists sessions in small pages (`settings.page_size`).

use std::collections::BTreeSet;

use serde_json::{Value, json};

use super::agent::{Agent, PLAIN, Transport};
use super::connection::Connection;
use super::exchange::{
    self, QUIET, expect_error, expect_result, initialize, new_session, open, prompt_ok,
    session_id_of,
};
use crate::check::{Check, CheckError, CheckResult, Failure};
use crate::context::Ctx;
use crate::{ensure, ensure_eq, fail};

/// The checks of this module.
pub fn checks() -> Vec<Check> {
    vec![
        Check::new(
            "WS-024",
            "Starts the minimal variant (which must not advertise loadSession) and requires \
             -32601 for session/load.",
            ws_024,
        ),
        Check::new(
            "WS-030",
            "Starts the auth variant; authMethods must be advertised, authenticate with the first \
             one must succeed and with an unknown methodId answer -32602.",
            ws_030,
        ),
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
            "WS-039",
            "Loads a session (from a second connection on ws) and requires an object result whose \
             modes and configOptions, when present, are well formed.",
            ws_039,
        ),
        Check::new(
            "WS-049",
            "Switches the session to another offered model with session/set_model (a result \
             required) and requires -32602 for an unknown modelId.",
            ws_049,
        ),
        Check::new(
            "WS-050",
            "Creates two sessions and requires session/list to return both with string sessionId \
             and cwd (title and updatedAt strings when present).",
            ws_050,
        ),
        Check::new(
            "WS-051",
            "After a prompt turn, resumes the session (from a second connection on ws); no \
             message chunk of the session may arrive before or after the result, and a prompt \
             afterwards ends end_turn.",
            ws_051,
        ),
        Check::new(
            "WS-052",
            "Sets a non-default mode, config value and model where declared, forks the session, \
             and requires a new sessionId whose state equals the source's.",
            ws_052,
        ),
        Check::new(
            "WS-053",
            "Creates 2P+1 sessions for page size P (settings.page_size, default 50) and follows \
             nextCursor: full pages but the last, every session exactly once, the last page \
             without a cursor.",
            ws_053,
        ),
        Check::new(
            "WS-054",
            "Calls session/list with cursors that do not decode; each must answer -32602 with a \
             message about the cursor.",
            ws_054,
        ),
        Check::new(
            "WS-056",
            "Deletes a session twice and an unknown session (each {}), then requires session/list \
             without it.",
            ws_056,
        ),
        Check::new(
            "WS-057",
            "Starts the minimal variant (which must not advertise sessionCapabilities.delete) and \
             requires -32601 for session/delete.",
            ws_057,
        ),
        Check::new(
            "WS-060",
            "Calls logout (advertised at auth.logout or authCapabilities.logout); it must succeed \
             and end the session: gone from session/list, prompts naming it refused.",
            ws_060,
        ),
        Check::new(
            "WS-063a",
            "After a prompt turn, exports the session as jsonl: application/x-ndjson, a session \
             header line, user and assistant message lines, a final newline; format xml answers \
             -32602.",
            ws_063a,
        ),
        Check::new(
            "WS-064a",
            "Forks a session and requires its session/list entry to carry parentSessionId (in \
             _meta or at the root) equal to the source, and the source's entry none.",
            ws_064a,
        ),
        Check::new(
            "ACP-CORE-005",
            "After a prompt turn, loads the session (from a second connection on ws); the user \
             and agent message chunks must be replayed before the load result and none after.",
            core_005,
        ),
        Check::new(
            "ACP-CORE-024",
            "Starts the auth_required variant; the refused session/new or prompt must answer \
             -32000; after authenticate the agent serves session/new.",
            core_024,
        ),
    ]
}

/// A second initialized connection on WebSocket; `None` on stdio (the same connection serves).
async fn second(agent: &mut Agent) -> Result<Option<Connection>, CheckError> {
    if agent.transport() == Transport::Stdio {
        return Ok(None);
    }
    let mut conn = agent.connect().await?;
    initialize(&mut conn).await?;
    Ok(Some(conn))
}

fn session_params(ctx: &Ctx, session: &str) -> Value {
    json!({
        "sessionId": session,
        "cwd": ctx.temp_dir().display().to_string(),
        "mcpServers": [],
    })
}

/// The agent capability at any of `pointers`.
fn advertised(init: &Value, pointers: &[&str]) -> bool {
    pointers.iter().any(|p| {
        init.pointer(p)
            .is_some_and(|v| !v.is_null() && v != &json!(false))
    })
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

async fn ws_030(ctx: Ctx) -> CheckResult {
    let mut agent = Agent::start(&ctx, "auth").await?;
    let mut conn = agent.connect().await?;
    let init = initialize(&mut conn).await?;
    let Some(method) = init
        .get("authMethods")
        .and_then(Value::as_array)
        .and_then(|m| m.first())
        .and_then(|m| m.get("id"))
        .cloned()
    else {
        fail!(
            "the initialize result advertises authMethods",
            "authMethods {}",
            init.get("authMethods").cloned().unwrap_or(Value::Null)
        );
    };
    let reply = conn
        .call("authenticate", json!({"methodId": method}))
        .await?;
    expect_result(reply, "authenticate with an advertised methodId succeeds")?;
    let reply = conn
        .call(
            "authenticate",
            json!({"methodId": "ski-conformance-no-such-method"}),
        )
        .await?;
    expect_error(
        &reply,
        &[-32602],
        "authenticate with an unknown methodId answers -32602",
    )?;
    Ok(())
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
fn other_config_value(options: &Value) -> Option<(Value, Value)> {
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
fn state_problems(result: &Value) -> Vec<String> {
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

async fn ws_039(ctx: Ctx) -> CheckResult {
    let mut opened = open(&ctx, PLAIN).await?;
    if ctx.has("prompt") {
        prompt_ok(&mut opened.conn, &opened.session, "load me later").await?;
    }
    let mut other = second(&mut opened.agent).await?;
    let conn = other.as_mut().unwrap_or(&mut opened.conn);
    let reply = conn
        .call("session/load", session_params(&ctx, &opened.session))
        .await?;
    let result = expect_result(reply, "session/load of an existing session succeeds")?;
    ensure!(
        result.is_object(),
        "the session/load result is an object (possibly empty)",
        "{result}"
    );
    let problems = state_problems(&result);
    ensure!(
        problems.is_empty(),
        "modes and configOptions of session/load, when present, are well formed",
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

/// Every page of `session/list` from a first call without a cursor.
async fn list_all(conn: &mut Connection) -> Result<Vec<Value>, CheckError> {
    let mut pages = Vec::new();
    let mut cursor: Option<Value> = None;
    for _ in 0..1000 {
        let params = match &cursor {
            Some(c) => json!({"cursor": c}),
            None => json!({}),
        };
        let page = conn.call_ok("session/list", params).await?;
        cursor = page.get("nextCursor").filter(|c| !c.is_null()).cloned();
        pages.push(page);
        if cursor.is_none() {
            return Ok(pages);
        }
    }
    fail!("session/list ends its pages", "more than 1000 pages");
}

fn entries(page: &Value) -> Vec<Value> {
    page.get("sessions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
}

fn ids_of(entries: &[Value]) -> Vec<String> {
    entries
        .iter()
        .filter_map(|e| {
            e.get("sessionId")
                .and_then(Value::as_str)
                .map(str::to_owned)
        })
        .collect()
}

async fn ws_050(ctx: Ctx) -> CheckResult {
    let mut opened = open(&ctx, PLAIN).await?;
    let other = new_session(&ctx, &mut opened.conn).await?;
    let listed: Vec<Value> = list_all(&mut opened.conn)
        .await?
        .iter()
        .flat_map(entries)
        .collect();
    let ids = ids_of(&listed);
    for session in [&opened.session, &other] {
        ensure!(
            ids.contains(session),
            "session/list returns every session created",
            "{session} missing from {ids:?}"
        );
    }
    for entry in &listed {
        ensure!(
            entry.get("sessionId").is_some_and(Value::is_string)
                && entry.get("cwd").is_some_and(Value::is_string),
            "every session/list entry has a string sessionId and cwd",
            "{entry}"
        );
        for key in ["title", "updatedAt"] {
            ensure!(
                entry.get(key).is_none_or(|v| v.is_string() || v.is_null()),
                format!("{key} of a session/list entry is a string when present"),
                "{entry}"
            );
        }
    }
    Ok(())
}

async fn ws_051(ctx: Ctx) -> CheckResult {
    let mut opened = open(&ctx, PLAIN).await?;
    prompt_ok(&mut opened.conn, &opened.session, "resume me").await?;
    opened.conn.quiet(QUIET).await;
    let session = opened.session.clone();
    let mut other = second(&mut opened.agent).await?;
    let conn = other.as_mut().unwrap_or(&mut opened.conn);
    let from = conn.cursor();
    let reply = conn
        .call("session/resume", session_params(&ctx, &session))
        .await?;
    let result = expect_result(reply, "session/resume succeeds")?;
    ensure!(
        result.is_object(),
        "the session/resume result is an object",
        "{result}"
    );
    conn.quiet(QUIET).await;
    let replayed: Vec<_> = exchange::since(conn, from)
        .into_iter()
        .filter(|f| {
            f.is_update_for(&session)
                && f.update_kind()
                    .is_some_and(|k| k.ends_with("_message_chunk"))
        })
        .collect();
    ensure!(
        replayed.is_empty(),
        "session/resume replays no history",
        "{}",
        exchange::list(&replayed)
    );
    let problems = state_problems(&result);
    ensure!(
        problems.is_empty(),
        "modes and configOptions of session/resume, when present, are well formed",
        "{}",
        problems.join("; ")
    );
    prompt_ok(conn, &session, "after the resume").await?;
    Ok(())
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
    if ctx.has("set-mode")
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
    if ctx.has("config-options")
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
    if ctx.has("set-model")
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

async fn ws_053(ctx: Ctx) -> CheckResult {
    let size: usize = match ctx.setting("page_size")? {
        Some(text) => text.trim().parse().map_err(|_| {
            CheckError::Harness(format!("settings.page_size {text:?} is not a whole number"))
        })?,
        None => 50,
    };
    let mut opened = open(&ctx, "paged").await?;
    let mut created = BTreeSet::from([opened.session.clone()]);
    while created.len() < 2 * size + 1 {
        created.insert(new_session(&ctx, &mut opened.conn).await?);
    }
    let pages = list_all(&mut opened.conn).await?;
    let sizes: Vec<usize> = pages.iter().map(|p| entries(p).len()).collect();
    let (last, full) = sizes.split_last().unwrap_or((&0, &[]));
    ensure!(
        pages.len() >= 3 && full.iter().all(|n| *n == size) && *last <= size,
        format!("pages of exactly {size} sessions but the last (2×{size}+1 sessions)"),
        "page sizes {sizes:?}"
    );
    let listed: Vec<String> = pages.iter().flat_map(|p| ids_of(&entries(p))).collect();
    let unique: BTreeSet<String> = listed.iter().cloned().collect();
    ensure_eq!(
        listed.len(),
        unique.len(),
        "entries listed (each session once)"
    );
    ensure!(
        created.is_subset(&unique),
        "the pages together hold every session created",
        "missing {:?}",
        created.difference(&unique).collect::<Vec<_>>()
    );
    Ok(())
}

async fn ws_054(ctx: Ctx) -> CheckResult {
    let mut opened = open(&ctx, PLAIN).await?;
    let word = ctx.text("cursor_word", "cursor");
    for cursor in ["ski-conformance: not a cursor", "%%%"] {
        let reply = opened
            .conn
            .call("session/list", json!({"cursor": cursor}))
            .await?;
        let fault = expect_error(
            &reply,
            &[-32602],
            "an invalid session/list cursor answers -32602",
        )?;
        ensure!(
            fault.message.to_lowercase().contains(&word),
            format!("the error message says the cursor is unusable (contains {word:?})"),
            "message {:?}",
            fault.message
        );
    }
    Ok(())
}

async fn ws_056(ctx: Ctx) -> CheckResult {
    let mut opened = open(&ctx, PLAIN).await?;
    let session = opened.session.clone();
    for (target, what) in [
        (session.as_str(), "session/delete of a session succeeds"),
        (
            session.as_str(),
            "session/delete of a deleted session succeeds",
        ),
        (
            "sess_ski_conformance_unknown",
            "session/delete of an unknown session succeeds",
        ),
    ] {
        let reply = opened
            .conn
            .call("session/delete", json!({"sessionId": target}))
            .await?;
        expect_result(reply, what)?;
    }
    let listed: Vec<Value> = list_all(&mut opened.conn)
        .await?
        .iter()
        .flat_map(entries)
        .collect();
    ensure!(
        !ids_of(&listed).contains(&session),
        "session/list no longer returns a deleted session",
        "{listed:?}"
    );
    Ok(())
}

async fn ws_060(ctx: Ctx) -> CheckResult {
    let mut opened = open(&ctx, PLAIN).await?;
    if !advertised(
        &opened.init,
        &[
            "/agentCapabilities/auth/logout",
            "/agentCapabilities/authCapabilities/logout",
        ],
    ) {
        fail!(
            "the agent advertises logout (auth.logout or authCapabilities.logout)",
            "agentCapabilities {}",
            opened
                .init
                .get("agentCapabilities")
                .cloned()
                .unwrap_or(Value::Null)
        );
    }
    let reply = opened.conn.call("logout", json!({})).await?;
    expect_result(reply, "logout succeeds")?;
    if ctx.has("session-list") {
        let listed: Vec<Value> = list_all(&mut opened.conn)
            .await?
            .iter()
            .flat_map(entries)
            .collect();
        ensure!(
            !ids_of(&listed).contains(&opened.session),
            "after logout session/list no longer returns the session",
            "{listed:?}"
        );
    }
    if ctx.has("prompt") {
        let turn = exchange::prompt(&mut opened.conn, &opened.session, "still mine?").await?;
        expect_error(
            &turn.reply,
            &[-32002, -32602],
            "after logout a prompt naming the session is refused as unknown",
        )?;
    }
    Ok(())
}

async fn ws_063a(ctx: Ctx) -> CheckResult {
    let mut opened = open(&ctx, PLAIN).await?;
    let text = "export this conversation";
    prompt_ok(&mut opened.conn, &opened.session, text).await?;
    let result = opened
        .conn
        .call_ok(
            "session/export",
            json!({"sessionId": opened.session, "format": "jsonl"}),
        )
        .await?;
    ensure_eq!(
        Some(json!("application/x-ndjson")),
        result.get("mimeType").cloned(),
        "the export's mimeType"
    );
    let content = result
        .get("content")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    ensure!(
        content.ends_with('\n'),
        "the JSONL content ends with a newline",
        "{}",
        super::connection::clip(&content, 300)
    );
    let mut lines = Vec::new();
    for line in content.lines() {
        match serde_json::from_str::<Value>(line) {
            Ok(value) if value.is_object() => lines.push(value),
            _ => fail!("every JSONL line is a JSON object", "line {line:?}"),
        }
    }
    let Some(header) = lines.first() else {
        fail!("a header line", "empty content");
    };
    ensure_eq!(
        Some(json!("session")),
        header.get("type").cloned(),
        "the header's type"
    );
    ensure_eq!(
        Some(json!(1)),
        header.get("version").cloned(),
        "the header's version"
    );
    ensure_eq!(
        Some(json!(opened.session)),
        header.get("id").cloned(),
        "the header's id"
    );
    ensure_eq!(
        Some(json!(ctx.temp_dir().display().to_string())),
        header.get("cwd").cloned(),
        "the header's cwd"
    );
    ensure!(
        header.get("timestamp").is_some_and(Value::is_string),
        "the header has a string timestamp",
        "{header}"
    );
    let role = |r: &'static str| {
        lines
            .iter()
            .skip(1)
            .filter(move |l| l.pointer("/message/role") == Some(&json!(r)))
    };
    ensure!(
        role("user").any(|l| l
            .pointer("/message/content")
            .is_some_and(|c| c.to_string().contains(text))),
        "a user message line containing the prompt",
        "{}",
        super::connection::clip(&content, 400)
    );
    ensure!(
        role("assistant").next().is_some(),
        "an assistant message line",
        "{}",
        super::connection::clip(&content, 400)
    );
    let reply = opened
        .conn
        .call(
            "session/export",
            json!({"sessionId": opened.session, "format": "xml"}),
        )
        .await?;
    expect_error(
        &reply,
        &[-32602],
        "an export format other than jsonl answers -32602",
    )?;
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

async fn core_005(ctx: Ctx) -> CheckResult {
    let mut opened = open(&ctx, PLAIN).await?;
    let text = "replay this prompt";
    prompt_ok(&mut opened.conn, &opened.session, text).await?;
    opened.conn.quiet(QUIET).await;
    let session = opened.session.clone();
    let mut other = second(&mut opened.agent).await?;
    let conn = other.as_mut().unwrap_or(&mut opened.conn);
    let from = conn.cursor();
    let id = conn
        .request("session/load", session_params(&ctx, &session))
        .await?;
    let reply = conn.reply(&id, "session/load").await?;
    expect_result(reply, "session/load succeeds")?;
    conn.quiet(QUIET).await;
    let answer = conn
        .frames()
        .iter()
        .position(|f| f.answers(&id))
        .unwrap_or_default();
    let before: Vec<_> = conn.frames()[from..answer]
        .iter()
        .filter(|f| f.is_update_for(&session))
        .collect();
    let user = before.iter().any(|f| {
        f.update_kind() == Some("user_message_chunk")
            && f.update()
                .and_then(|u| u.pointer("/content/text"))
                .and_then(Value::as_str)
                .is_some_and(|t| t.contains(text))
    });
    let agent = before
        .iter()
        .any(|f| f.update_kind() == Some("agent_message_chunk"));
    ensure!(
        user && agent,
        "the history (a user_message_chunk with the prompt and an agent_message_chunk) is replayed before the session/load result",
        "before the result: {:?}",
        exchange::kinds(&before)
    );
    let after: Vec<_> = exchange::since(conn, answer + 1)
        .into_iter()
        .filter(|f| f.is_update_for(&session))
        .collect();
    ensure!(
        after.is_empty(),
        "no replayed update after the session/load result",
        "{}",
        exchange::list(&after)
    );
    Ok(())
}

async fn core_024(ctx: Ctx) -> CheckResult {
    let mut agent = Agent::start(&ctx, "auth_required").await?;
    let mut conn = agent.connect().await?;
    let init = initialize(&mut conn).await?;
    let reply = conn
        .call("session/new", exchange::new_session_params(&ctx))
        .await?;
    let refused = match reply {
        Err(fault) => Err(fault),
        Ok(result) => {
            let session = session_id_of(&result, "session/new")?;
            let turn = exchange::prompt(&mut conn, &session, "without credentials").await?;
            turn.reply.map(|_| ())
        }
    };
    match refused {
        Err(fault) if fault.code == Some(-32000) => {}
        Err(fault) => fail!(
            "work refused for lack of authentication answers -32000",
            "error {}",
            fault.raw
        ),
        Ok(()) => {
            return Err(Failure::new(
                "work refused for lack of authentication answers -32000",
                "session/new or session/prompt refused with -32000 before authenticate",
            )
            .actual("both succeeded without authentication")
            .into());
        }
    }
    if let Some(method) = init
        .get("authMethods")
        .and_then(Value::as_array)
        .and_then(|m| m.first())
        .and_then(|m| m.get("id"))
        .cloned()
    {
        conn.call_ok("authenticate", json!({"methodId": method}))
            .await?;
    }
    let reply = conn
        .call("session/new", exchange::new_session_params(&ctx))
        .await?;
    expect_result(
        reply,
        "the agent keeps serving: session/new after authenticate succeeds",
    )?;
    Ok(())
}
