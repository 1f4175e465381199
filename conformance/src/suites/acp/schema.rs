//! Checks of the wire against the ACP schema: every frame of a scripted session validates
//! (ACP-CORE-013), no object carries properties its type does not define (ACP-CORE-023), and
//! the agent implements exactly the allowed method set (WS-062).

use std::collections::BTreeSet;

use serde_json::{Value, json};
use ski::acp::methods::{METHODS, Side, Stability};

use super::agent::{Agent, PLAIN};
use super::connection::Connection;
use super::exchange::{self, initialize, open, prompt};
use super::oracle::{Problem, ProblemKind};
use crate::check::{Check, CheckError, CheckResult};
use crate::context::Ctx;
use crate::ensure;
use crate::vocabulary::capability;

/// The checks of this module.
pub fn checks() -> Vec<Check> {
    vec![
        Check::new(
            "ACP-CORE-013",
            "Runs initialize, session/new, a turn and one call of each declared session method \
             (plus turns of the execution_state and retry variants when declared); every frame \
             the agent sends must decode with the official schema crate by method (ski \
             extension kinds with ski's shapes, and only when advertised).",
            core_013,
        ),
        Check::new(
            "ACP-CORE-023",
            "Runs the session of ACP-CORE-013 and requires that encoding every payload again \
             with the official types loses no property (custom data belongs under _meta; the \
             legacy models is allowed).",
            core_023,
        ),
        Check::new(
            "WS-062",
            "On an agent of its own, calls every request method of the ACP v1 stable and \
             unstable schema, the v2-only, client-side and proxy names and the three ski names \
             with empty params; implemented methods (not -32601) must be allowed ones, the others \
             must answer -32601, and every advertised capability's method must be implemented.",
            ws_062,
        ),
    ]
}

/// One call of each session method the target declares, on `session`.
async fn exercise(ctx: &Ctx, conn: &mut Connection, session: &str) -> Result<(), CheckError> {
    let cwd = ctx.temp_dir().display().to_string();
    let with_cwd = json!({"sessionId": session, "cwd": cwd, "mcpServers": []});
    let mut calls: Vec<(&str, Value)> = Vec::new();
    if ctx.has(capability::SET_MODE) {
        calls.push((
            "session/set_mode",
            json!({"sessionId": session, "modeId": "ski-conformance-mode"}),
        ));
    }
    if ctx.has(capability::CONFIG_OPTIONS) {
        calls.push((
            "session/set_config_option",
            json!({"sessionId": session, "configId": "ski-conformance", "value": "x"}),
        ));
    }
    if ctx.has(capability::SET_MODEL) {
        calls.push((
            "session/set_model",
            json!({"sessionId": session, "modelId": "ski-conformance"}),
        ));
    }
    if ctx.has(capability::SESSION_LIST) {
        calls.push(("session/list", json!({})));
    }
    if ctx.has(capability::SESSION_FORK) {
        calls.push(("session/fork", with_cwd.clone()));
    }
    if ctx.has(capability::SESSION_RESUME) {
        calls.push(("session/resume", with_cwd.clone()));
    }
    if ctx.has(capability::LOAD_SESSION) {
        calls.push(("session/load", with_cwd.clone()));
    }
    if ctx.has(capability::SESSION_EXPORT) {
        calls.push((
            "session/export",
            json!({"sessionId": session, "format": "jsonl"}),
        ));
    }
    if ctx.has(capability::SESSION_DELETE) {
        calls.push(("session/delete", json!({"sessionId": session})));
    }
    for (method, params) in calls {
        // Errors are answers too: they are validated like results.
        let _answer = conn.call(method, params).await?;
    }
    conn.quiet(exchange::QUIET).await;
    Ok(())
}

/// The problems of the scripted session of ACP-CORE-013 and ACP-CORE-023.
async fn scripted(ctx: &Ctx) -> Result<Vec<Problem>, CheckError> {
    let mut opened = open(ctx, PLAIN).await?;
    let session = opened.session.clone();
    if ctx.has(capability::PROMPT) {
        prompt(&mut opened.conn, &session, "validate everything").await?;
    }
    exercise(ctx, &mut opened.conn, &session).await?;
    let mut problems = opened.conn.problems();
    let mut variants = Vec::new();
    if ctx.has(capability::PROMPT) && ctx.has(capability::EXECUTION_STATE) {
        variants.push("execution_state");
    }
    if ctx.has(capability::PROMPT) && ctx.has(capability::RETRY) {
        variants.push("retry");
    }
    for variant in variants {
        let mut other = open(ctx, variant).await?;
        let session = other.session.clone();
        prompt(&mut other.conn, &session, "validate the extensions").await?;
        other.conn.quiet(exchange::QUIET).await;
        problems.extend(other.conn.problems());
    }
    Ok(problems)
}

fn listed(problems: &[&Problem]) -> String {
    problems
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("\n")
}

async fn core_013(ctx: Ctx) -> CheckResult {
    let problems = scripted(&ctx).await?;
    let invalid: Vec<&Problem> = problems
        .iter()
        .filter(|p| p.kind == ProblemKind::Invalid)
        .collect();
    ensure!(
        invalid.is_empty(),
        "every frame the agent sends validates against the ACP schema",
        "{} invalid frame(s):\n{}",
        invalid.len(),
        listed(&invalid)
    );
    Ok(())
}

async fn core_023(ctx: Ctx) -> CheckResult {
    let problems = scripted(&ctx).await?;
    let unknown: Vec<&Problem> = problems
        .iter()
        .filter(|p| p.kind == ProblemKind::UnknownField)
        .collect();
    ensure!(
        unknown.is_empty(),
        "no object carries a property its schema type does not define",
        "{} propert(y/ies) outside the schema:\n{}",
        unknown.len(),
        listed(&unknown)
    );
    Ok(())
}

/// The ski names outside the ACP meta that an agent may implement (E-ACP-18).
const SKI_NAMES: &[&str] = &["session/export", "session/stop", "session/set_model"];

/// Names that only the ACP v2 draft defines.
const V2_ONLY: &[&str] = &["auth/login", "auth/logout"];

/// Methods and the capability pointers that advertise them.
const GATED: &[(&str, &[&str])] = &[
    ("session/load", &["/agentCapabilities/loadSession"]),
    (
        "session/list",
        &["/agentCapabilities/sessionCapabilities/list"],
    ),
    (
        "session/delete",
        &["/agentCapabilities/sessionCapabilities/delete"],
    ),
    (
        "session/resume",
        &["/agentCapabilities/sessionCapabilities/resume"],
    ),
    (
        "session/close",
        &["/agentCapabilities/sessionCapabilities/close"],
    ),
    (
        "session/fork",
        &["/agentCapabilities/sessionCapabilities/fork"],
    ),
    (
        "logout",
        &[
            "/agentCapabilities/auth/logout",
            "/agentCapabilities/authCapabilities/logout",
        ],
    ),
    (
        "session/export",
        &[
            "/agentCapabilities/_meta/ski/sessionExport",
            "/agentCapabilities/sessionCapabilities/export",
        ],
    ),
    (
        "session/stop",
        &["/agentCapabilities/_meta/ski/sessionStop"],
    ),
];

async fn ws_062(ctx: Ctx) -> CheckResult {
    let mut agent = Agent::start(&ctx, PLAIN).await?;
    let mut conn = agent.connect().await?;
    let init = initialize(&mut conn).await?;
    let is_request = |m: &&ski::acp::methods::Method| {
        matches!(
            m.kind,
            ski::acp::methods::Kind::Request | ski::acp::methods::Kind::RequestOrNotification
        )
    };
    let allowed: BTreeSet<&str> = METHODS
        .iter()
        .filter(is_request)
        .filter(|m| matches!(m.side, Side::Agent | Side::Both))
        .filter(|m| matches!(m.stability, Stability::Stable | Stability::Unstable))
        .map(|m| m.name)
        .chain(SKI_NAMES.iter().copied())
        .collect();
    let foreign: BTreeSet<&str> = METHODS
        .iter()
        .filter(is_request)
        .filter(|m| matches!(m.side, Side::Client | Side::Proxy))
        .map(|m| m.name)
        .chain(V2_ONLY.iter().copied())
        .collect();
    let mut pending = Vec::new();
    for name in allowed.iter().chain(foreign.iter()) {
        // initialize was already answered; every other method gets empty params.
        if *name == "initialize" {
            continue;
        }
        let id = conn.request(name, json!({})).await?;
        pending.push((*name, id));
    }
    let mut implemented = BTreeSet::new();
    for (name, id) in &pending {
        let reply = conn.reply(id, name).await?;
        let not_found = matches!(&reply, Err(fault) if fault.code == Some(-32601));
        if !not_found {
            implemented.insert(*name);
        }
    }
    implemented.insert("initialize");
    let outside: Vec<&&str> = implemented
        .iter()
        .filter(|m| !allowed.contains(**m))
        .collect();
    ensure!(
        outside.is_empty(),
        "the agent implements only methods of the ACP v1 meta and the ski names session/export, session/stop, session/set_model",
        "also implements {outside:?}"
    );
    let missing: Vec<&str> = GATED
        .iter()
        .filter(|(_, pointers)| {
            pointers.iter().any(|p| {
                init.pointer(p)
                    .is_some_and(|v| !v.is_null() && v != &json!(false))
            })
        })
        .map(|(method, _)| *method)
        .filter(|method| !implemented.contains(method))
        .collect();
    ensure!(
        missing.is_empty(),
        "every method whose capability the agent advertises is implemented",
        "advertised but answering -32601: {missing:?}"
    );
    Ok(())
}
