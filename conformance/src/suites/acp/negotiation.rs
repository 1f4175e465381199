//! Checks of what `initialize` and `session/new` agree on: the protocol version an agent answers
//! to a version it does not support (ACP-CORE-040), and session ids that name one session each
//! (ACP-CORE-041).

use std::collections::BTreeSet;

use serde_json::{Value, json};

use super::agent::{Agent, PLAIN, Transport};
use super::exchange::{expect_result, initialize, initialize_params, new_session};
use crate::check::{Check, CheckResult};
use crate::context::Ctx;
use crate::{ensure, fail};

/// A protocol version no ACP agent supports today: the largest uint16.
const UNSUPPORTED_VERSION: u64 = 65535;

/// How many sessions ACP-CORE-041 opens.
const SESSIONS: usize = 4;

/// The checks of this module.
pub fn checks() -> Vec<Check> {
    vec![
        Check::new(
            "ACP-CORE-040",
            "Sends initialize with protocolVersion 65535 (no agent supports it) and requires a \
             result, not an error, whose protocolVersion is a uint16 integer other than 65535 \
             and at least the version a fresh agent answers to protocolVersion 1.",
            core_040,
        ),
        Check::new(
            "ACP-CORE-041",
            "Opens four sessions with session/new on one connection, and one more on a second \
             connection to the same agent over WebSocket; every sessionId must differ.",
            core_041,
        ),
    ]
}

/// The `protocolVersion` of an `initialize` result as a uint16, if it is one.
fn uint16_version(result: &Value) -> Option<u64> {
    result
        .get("protocolVersion")?
        .as_u64()
        .filter(|v| *v <= u64::from(u16::MAX))
}

/// The params of ACP-CORE-040's `initialize`: an ordinary one but for `protocolVersion`, the
/// largest uint16, which no agent supports and the newest schema accepts (an agent that
/// validates its params strictly must still get to answer the version).
fn unsupported_version_probe() -> Value {
    let mut params = initialize_params(super::exchange::bare_capabilities());
    params["protocolVersion"] = json!(UNSUPPORTED_VERSION);
    params
}

async fn core_040(ctx: Ctx) -> CheckResult {
    let mut agent = Agent::start(&ctx, PLAIN).await?;
    let mut conn = agent.connect().await?;
    let reply = conn.call("initialize", unsupported_version_probe()).await?;
    let result = expect_result(
        reply,
        "initialize with an unsupported protocolVersion answers a result with the agent's \
         latest version, not an error",
    )?;
    let Some(answered) = uint16_version(&result) else {
        fail!(
            "the initialize result's protocolVersion is a uint16 integer",
            "protocolVersion {}",
            result.get("protocolVersion").unwrap_or(&Value::Null)
        );
    };
    ensure!(
        answered != UNSUPPORTED_VERSION,
        "the agent answers its own latest protocol version, not the unsupported one it was sent",
        "protocolVersion {answered}, the value the client sent"
    );
    let mut fresh = Agent::start(&ctx, PLAIN).await?;
    let mut second = fresh.connect().await?;
    let v1 = initialize(&mut second).await?;
    if let Some(for_v1) = uint16_version(&v1) {
        ensure!(
            answered >= for_v1,
            "the version answered to an unsupported request is the latest the agent supports, \
             at least the one it answers to protocolVersion 1",
            "protocolVersion {answered} to 65535, {for_v1} to 1"
        );
    }
    Ok(())
}

async fn core_041(ctx: Ctx) -> CheckResult {
    let mut agent = Agent::start(&ctx, PLAIN).await?;
    let mut conn = agent.connect().await?;
    initialize(&mut conn).await?;
    let mut ids = Vec::new();
    for _ in 0..SESSIONS {
        ids.push(new_session(&ctx, &mut conn).await?);
    }
    if agent.transport() == Transport::Ws {
        let mut other = agent.connect().await?;
        initialize(&mut other).await?;
        ids.push(new_session(&ctx, &mut other).await?);
    }
    let distinct: BTreeSet<&String> = ids.iter().collect();
    ensure!(
        distinct.len() == ids.len(),
        "every session/new returns a sessionId no other session has",
        "sessionIds {ids:?}"
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::super::oracle::{Oracle, Sender};
    use super::*;

    /// The problems the schema oracle finds in `params` sent by a client as `initialize`.
    fn client_problems(params: Value) -> Vec<String> {
        let frame = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params});
        let mut oracle = Oracle::new(Sender::Client);
        oracle.inspect(&frame.to_string(), false, Some(&frame), &HashMap::new());
        oracle.problems().iter().map(|p| p.error.clone()).collect()
    }

    #[test]
    fn every_initialize_probe_is_a_message_the_schema_accepts_in_full() {
        let plain = initialize_params(super::super::exchange::bare_capabilities());
        assert_eq!(client_problems(plain), Vec::<String>::new());
        assert_eq!(
            client_problems(unsupported_version_probe()),
            Vec::<String>::new()
        );
        // The oracle does refuse a version outside uint16, so the probe's is checked.
        let mut beyond = unsupported_version_probe();
        beyond["protocolVersion"] = json!(65536);
        assert!(!client_problems(beyond).is_empty());
    }
}
