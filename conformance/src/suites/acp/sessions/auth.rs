//! Authentication: `authenticate` with an advertised and an unknown method (variant `auth`),
//! work refused until authenticated (variant `auth_required`), and `logout`.

use serde_json::{Value, json};

use super::super::agent::{Agent, PLAIN};
use super::super::exchange::{
    self, bare_capabilities, expect_error, expect_result, initialize_bare, open, session_id_of,
};
use super::advertised;
use super::list::{entries, ids_of, list_all};
use crate::check::{Check, CheckResult, Failure};
use crate::context::Ctx;
use crate::vocabulary::capability;
use crate::{ensure, fail};

/// The checks of this module.
pub(super) fn checks() -> Vec<Check> {
    vec![
        Check::new(
            "WS-030",
            "Starts the auth variant; authMethods must be advertised, authenticate with the first \
             one must succeed and with an unknown methodId answer -32602.",
            ws_030,
        ),
        Check::new(
            "WS-060",
            "Calls logout (advertised at auth.logout or authCapabilities.logout); it must succeed \
             and end the session: gone from session/list, prompts naming it refused.",
            ws_060,
        ),
        Check::new(
            "ACP-CORE-024",
            "Starts the auth_required variant; the refused session/new or prompt must answer \
             -32000; after authenticate the agent serves session/new.",
            core_024,
        ),
    ]
}

async fn ws_030(ctx: Ctx) -> CheckResult {
    let mut agent = Agent::start(&ctx, "auth").await?;
    let mut conn = agent.connect().await?;
    // The row authenticates itself: not with the profile's method first.
    let init = initialize_bare(&mut conn, bare_capabilities()).await?;
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
    if ctx.has(capability::SESSION_LIST) {
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
    if ctx.has(capability::PROMPT) {
        let turn = exchange::prompt(&mut opened.conn, &opened.session, "still mine?").await?;
        expect_error(
            &turn.reply,
            &[-32002, -32602],
            "after logout a prompt naming the session is refused as unknown",
        )?;
    }
    Ok(())
}

async fn core_024(ctx: Ctx) -> CheckResult {
    let mut agent = Agent::start(&ctx, "auth_required").await?;
    let mut conn = agent.connect().await?;
    // Unauthenticated on purpose: the profile's auth method would hide the refusal.
    let init = initialize_bare(&mut conn, bare_capabilities()).await?;
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
