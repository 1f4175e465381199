//! Checks of framing and the JSON-RPC rules every agent must keep: ids, errors for bad input,
//! extension methods, batches, fragmented writes, tolerated additions, protocol version.

use std::time::Duration;

use serde_json::{Value, json};

use super::agent::{Agent, PLAIN, Transport};
use super::connection::{Connection, Frame, describe};
use super::exchange::{
    self, QUIET, bare_capabilities, expect_error, expect_result, initialize, initialize_params,
    new_session_params,
};
use crate::check::{Check, CheckResult, Failure};
use crate::context::Ctx;
use crate::vocabulary::capability;
use crate::{ensure, ensure_eq, fail};

/// The checks of this module.
pub fn checks() -> Vec<Check> {
    vec![
        Check::new(
            "ACP-CORE-006",
            "Initializes, sends the request _ski.conformance/unknown and requires error -32601 for \
             its id, then requires an answer (any) to a next request.",
            core_006,
        ),
        Check::new(
            "ACP-CORE-007",
            "Initializes, sends the notification _ski.conformance/notice, then a request; it \
             must be answered (result or error), and no other response may arrive, during a quiet \
             period too.",
            core_007,
        ),
        Check::new(
            "ACP-CORE-012",
            "Sends initialize with protocolVersion 1 and requires the result's protocolVersion \
             to be the JSON integer 1.",
            core_012,
        ),
        Check::new(
            "ACP-CORE-014",
            "Sends a JSON array of two session/new requests as one message, then a request; \
             requires an answer (any) to that request, and takes either answer to the batch: \
             one error -32600 with id null (the SDKs') or JSON-RPC 2.0's (a response per entry, \
             an array or single lines); never two null-id errors or an entry answered twice.",
            core_014,
        ),
        Check::new(
            "ACP-CORE-015",
            "Sends session/new with ids \"req-1\", a UUID string, 0 and 2147483648; each \
             response must carry the same JSON id.",
            core_015,
        ),
        Check::new(
            "ACP-CORE-016",
            "Sends the text {\"jsonrpc\":\"2.0\", as a message, then a request; requires error \
             -32700 with id null (before that request's answer) and an answer (any) to a next \
             request.",
            core_016,
        ),
        Check::new(
            "ACP-CORE-017",
            "Sends 42, then {\"jsonrpc\":\"2.0\",\"method\":7,\"id\":3}, each followed by a \
             request; requires -32600 with id null, -32600 with id 3 or null (each before the \
             answer to the request after it), and an answer (any) to a next request.",
            core_017,
        ),
        Check::new(
            "ACP-CORE-019",
            "Over stdio, writes initialize in three pieces (split inside a string and inside a \
             UTF-8 character) with pauses, then two session/new requests in one write; all three \
             must be answered as the requests they are (a session/new refused until the client \
             authenticates was read whole too).",
            core_019,
        ),
        Check::new(
            "ACP-CORE-020",
            "Sends initialize, session/new and (with prompt) a prompt carrying _meta and an \
             unknown optional field; every request must succeed.",
            core_020,
        ),
        Check::new(
            "ACP-CORE-021",
            "Sends session/new without mcpServers (error -32602 required), then a valid one \
             (result required) and checks the agent still runs.",
            core_021,
        ),
        Check::new(
            "WS-023",
            "Initializes with protocolVersion 2, 99 and the string \"1\"; each must be refused \
             with -32602 whose message names the version; version 1 then succeeds.",
            ws_023,
        ),
    ]
}

/// A started agent with one initialized connection.
async fn initialized(ctx: &Ctx) -> Result<(Agent, Connection), crate::CheckError> {
    let mut agent = Agent::start(ctx, PLAIN).await?;
    let mut conn = agent.connect().await?;
    initialize(&mut conn).await?;
    Ok((agent, conn))
}

/// Requires the agent to keep serving: the next request gets an answer, a result or an error
/// (ski-conformance sends an unknown method, `-32601` being the usual answer). Any answer
/// proves liveness; a `session/new` the agent refuses until authenticated, or is slow to open,
/// would not.
async fn still_serves(conn: &mut Connection) -> CheckResult {
    still_serves_as(conn, "an answer (result or error) to the next request").await
}

/// [`still_serves`], failing as `check`.
pub(super) async fn still_serves_as(conn: &mut Connection, check: &str) -> CheckResult {
    let id = probe(conn).await?;
    let what = format!("{check} (id {id})");
    conn.wait_for(&what, 0, |f| f.answers(&id)).await?;
    Ok(())
}

/// The method of the requests that prove an agent still reads and answers.
const ALIVE: &str = "_ski.conformance/alive";

/// The prefix of a probe's id, which tells its answer from the answers a row judges.
const PROBE_ID: &str = "ski-alive-";

/// Sends a request of [`ALIVE`] with an id of its own; the id.
async fn probe(conn: &mut Connection) -> Result<Value, crate::CheckError> {
    let id = json!(format!("{PROBE_ID}{}", conn.cursor()));
    conn.request_with_id(id.clone(), ALIVE, json!({"probe": true}))
        .await?;
    Ok(id)
}

/// Whether `frame` answers a [`probe`].
fn answers_probe(frame: &Frame) -> bool {
    frame
        .id()
        .and_then(Value::as_str)
        .is_some_and(|id| id.starts_with(PROBE_ID))
}

/// Waits for the error the agent owes the message it was just sent, one that has no id to be
/// answered by (a batch, a malformed line, a JSON value that is no request), looking at frames
/// from `from`; the index of the first response that answers no probe.
///
/// A probe request follows the message at once. An agent reads its input in order, so once it
/// has answered the probe and a quiet period passed without the error, the error is not coming:
/// the row fails then with that definite answer, which load does not explain, instead of waiting
/// out its timeout and being re-run. An agent that answers neither fails at the timeout.
async fn owed_error(
    conn: &mut Connection,
    what: &str,
    from: usize,
) -> Result<usize, crate::CheckError> {
    let probe_id = probe(conn).await?;
    let owed = |f: &Frame| f.is_response() && !answers_probe(f);
    let index = conn
        .wait_for(what, from, |f| owed(f) || f.answers(&probe_id))
        .await?;
    if !conn.frames()[index].answers(&probe_id) {
        return Ok(index);
    }
    conn.quiet(QUIET).await;
    if let Some(i) = conn.frames().iter().skip(from).position(owed) {
        return Ok(from + i);
    }
    Err(Failure::new(
        what,
        format!("{what}, before the answer to the request sent after it"),
    )
    .actual(format!(
        "none: the agent answered the request sent after it (id {probe_id}) and nothing else \
         within {QUIET:?} more; {}",
        conn.tail(4)
    ))
    .into())
}

async fn core_006(ctx: Ctx) -> CheckResult {
    let (_agent, mut conn) = initialized(&ctx).await?;
    let reply = conn
        .call("_ski.conformance/unknown", json!({"probe": true}))
        .await?;
    expect_error(
        &reply,
        &[-32601],
        "an unknown extension request answers -32601",
    )?;
    still_serves(&mut conn).await
}

async fn core_007(ctx: Ctx) -> CheckResult {
    let (_agent, mut conn) = initialized(&ctx).await?;
    let from = conn.cursor();
    conn.notify("_ski.conformance/notice", json!({"probe": true}))
        .await?;
    // Any answer to the next request shows the agent read past the notification; a session/new
    // the agent refuses until the client authenticates would show it as well.
    let id = probe(&mut conn).await?;
    let what = format!("an answer (result or error) to the next request (id {id})");
    conn.wait_for(&what, from, |f| f.answers(&id)).await?;
    conn.quiet(QUIET).await;
    let stray: Vec<_> = exchange::since(&conn, from)
        .into_iter()
        .filter(|f| f.is_response() && !f.answers(&id))
        .collect();
    ensure!(
        stray.is_empty(),
        "no frame answers the unknown notification",
        "{}",
        exchange::list(&stray)
    );
    Ok(())
}

async fn core_012(ctx: Ctx) -> CheckResult {
    let mut agent = Agent::start(&ctx, PLAIN).await?;
    let mut conn = agent.connect().await?;
    let result = initialize(&mut conn).await?;
    let version = result.get("protocolVersion").cloned();
    ensure!(
        version.as_ref().is_some_and(|v| v.as_u64() == Some(1)),
        "the initialize result's protocolVersion is the JSON integer 1",
        "protocolVersion is {}",
        version.map_or_else(|| "absent".to_owned(), |v| v.to_string())
    );
    Ok(())
}

/// ACP v1 has no batches and JSON-RPC 2.0 answers one with an array of responses, so the row
/// judges only what real peers need: the agent keeps serving, and whichever way it answers, the
/// answer is one of the two known forms (E-ACP-53).
async fn core_014(ctx: Ctx) -> CheckResult {
    let (_agent, mut conn) = initialized(&ctx).await?;
    let params = new_session_params(&ctx);
    let batch = json!([
        {"jsonrpc": "2.0", "id": "batch-1", "method": "session/new", "params": params},
        {"jsonrpc": "2.0", "id": "batch-2", "method": "session/new", "params": params},
    ]);
    let from = conn.cursor();
    conn.send_text(&batch.to_string()).await?;
    still_serves(&mut conn).await?;
    conn.quiet(QUIET).await;
    let frames = exchange::since(&conn, from);
    let null_errors: Vec<&Frame> = frames
        .iter()
        .copied()
        .filter(|f| f.is_response() && f.id() == Some(&Value::Null))
        .collect();
    ensure!(
        null_errors.len() <= 1,
        "the batch is answered once: at most one error response with id null",
        "{}",
        exchange::list(&null_errors)
    );
    if let Some(error) = null_errors.first() {
        let reply = error.reply().unwrap_or(Ok(Value::Null));
        expect_error(
            &reply,
            &[-32600],
            "a batch refused as a whole answers -32600",
        )?;
    }
    // A JSON-RPC 2.0 peer answers each entry, in an array or as lines of their own.
    let in_arrays: Vec<Value> = frames
        .iter()
        .filter_map(|f| f.value.as_ref().and_then(Value::as_array))
        .flatten()
        .filter_map(|r| r.get("id").cloned())
        .collect();
    for entry in [json!("batch-1"), json!("batch-2")] {
        let answers = frames.iter().filter(|f| f.answers(&entry)).count()
            + in_arrays.iter().filter(|id| **id == entry).count();
        ensure!(
            answers <= 1,
            format!("the batch entry {entry} is answered at most once"),
            "{answers} answers"
        );
    }
    let form = if !null_errors.is_empty() {
        "one error -32600 with id null, as the SDKs answer"
    } else if !in_arrays.is_empty() {
        "an array of responses, as JSON-RPC 2.0 answers"
    } else if frames
        .iter()
        .any(|f| f.answers(&json!("batch-1")) || f.answers(&json!("batch-2")))
    {
        "a response per entry, each on a line of its own"
    } else {
        "no answer at all (ACP v1 has no batches)"
    };
    ctx.note(format!("the batch was answered with {form}"));
    Ok(())
}

async fn core_015(ctx: Ctx) -> CheckResult {
    let (_agent, mut conn) = initialized(&ctx).await?;
    let ids = [
        json!("req-1"),
        json!("1b4e28ba-2fa1-41d2-883f-0016d3cca427"),
        json!(0),
        json!(2_147_483_648_u64),
    ];
    for id in &ids {
        conn.request_with_id(id.clone(), "session/new", new_session_params(&ctx))
            .await?;
        let what = format!("a response carrying the id {id}");
        let index = conn
            .wait_for_answer(&what, "session/new", |f| {
                f.is_response() && f.id().is_some_and(|got| same_id(got, id))
            })
            .await?;
        let got = conn.frames()[index].id().cloned().unwrap_or(Value::Null);
        ensure!(
            got == *id,
            "a response id keeps the JSON type and value of its request id",
            "request id {id} was answered with id {got}"
        );
    }
    Ok(())
}

/// Whether `got` could be meant as `id` (same value, possibly another JSON type), so that a
/// type change is reported instead of a timeout.
fn same_id(got: &Value, id: &Value) -> bool {
    let text = |v: &Value| match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    got == id || text(got) == text(id) || (id.as_u64().is_some() && got.as_f64() == id.as_f64())
}

async fn core_016(ctx: Ctx) -> CheckResult {
    let (_agent, mut conn) = initialized(&ctx).await?;
    let from = conn.cursor();
    conn.send_text(r#"{"jsonrpc":"2.0","#).await?;
    let index = owed_error(
        &mut conn,
        "an error response to the malformed message",
        from,
    )
    .await?;
    let frame = conn.frames()[index].clone();
    let reply = frame.reply().unwrap_or(Ok(Value::Null));
    expect_error(&reply, &[-32700], "a malformed message answers -32700")?;
    ensure_eq!(
        Some(json!(null)),
        frame.id().cloned(),
        "the id of the parse error"
    );
    still_serves(&mut conn).await
}

async fn core_017(ctx: Ctx) -> CheckResult {
    let (_agent, mut conn) = initialized(&ctx).await?;
    let from = conn.cursor();
    conn.send_text("42").await?;
    let first = owed_error(&mut conn, "an error response to the message 42", from).await?;
    let frame = conn.frames()[first].clone();
    expect_error(
        &frame.reply().unwrap_or(Ok(Value::Null)),
        &[-32600],
        "a JSON value that is not an object answers -32600",
    )?;
    ensure_eq!(
        Some(json!(null)),
        frame.id().cloned(),
        "the id of the error for 42"
    );
    conn.send_text(r#"{"jsonrpc":"2.0","method":7,"id":3}"#)
        .await?;
    let second = owed_error(
        &mut conn,
        "an error response to the request with method 7",
        first + 1,
    )
    .await?;
    let frame = conn.frames()[second].clone();
    expect_error(
        &frame.reply().unwrap_or(Ok(Value::Null)),
        &[-32600],
        "a request whose method is not a string answers -32600",
    )?;
    let id = frame.id().cloned().unwrap_or(Value::Null);
    ensure!(
        id == json!(3) || id.is_null(),
        "the error for the bad request carries id 3 or null",
        "id {id}"
    );
    still_serves(&mut conn).await
}

async fn core_019(ctx: Ctx) -> CheckResult {
    let mut agent = Agent::start_on(&ctx, Transport::Stdio, PLAIN).await?;
    let mut conn = agent.connect().await?;
    let mut params = initialize_params(bare_capabilities());
    params["clientInfo"]["title"] = json!("ski conformance · 日本");
    let line = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params})
        .to_string()
        + "\n";
    let bytes = line.as_bytes();
    // One cut inside the string "ski-conformance", one inside the three bytes of 日.
    let in_string = line
        .find("ski-conformance")
        .map(|i| i + 4)
        .unwrap_or(bytes.len() / 3);
    let in_char = line.find('日').map(|i| i + 1).unwrap_or(bytes.len() / 2);
    let (a, rest) = bytes.split_at(in_string);
    let (b, c) = rest.split_at(in_char - in_string);
    for piece in [a, b, c] {
        conn.send_bytes(piece).await?;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let reply = conn.reply(&json!(1), "initialize").await?;
    let result = expect_result(reply, "the fragmented initialize is answered normally")?;
    ensure_eq!(
        Some(json!(1)),
        result.get("protocolVersion").cloned(),
        "the protocolVersion of the fragmented initialize"
    );
    let session = new_session_params(&ctx);
    let two = format!(
        "{}\n{}\n",
        json!({"jsonrpc": "2.0", "id": 2, "method": "session/new", "params": session}),
        json!({"jsonrpc": "2.0", "id": 3, "method": "session/new", "params": session}),
    );
    conn.send_bytes(two.as_bytes()).await?;
    for id in [2, 3] {
        // A result, or a refusal until the client authenticates: either answers the request
        // read whole; a parse or invalid-request error would not.
        match conn.reply(&json!(id), "session/new").await? {
            Ok(result) => {
                exchange::session_id_of(&result, "session/new")?;
            }
            Err(fault) if fault.code == Some(exchange::AUTH_REQUIRED) => {}
            other => fail!(
                "both requests of one write are answered normally",
                "request {id}: {}",
                describe(&other)
            ),
        }
    }
    Ok(())
}

async fn core_020(ctx: Ctx) -> CheckResult {
    let mut agent = Agent::start(&ctx, PLAIN).await?;
    let mut conn = agent.connect().await?;
    let mut params = initialize_params(bare_capabilities());
    params["_meta"] = json!({"ski.conformance/trace": "abc"});
    params["clientCapabilities"]["_meta"] = json!({"ski.conformance": {"probe": true}});
    params["clientCapabilities"]["futureCapability"] = json!({"enabled": false});
    let reply = conn.call("initialize", params).await?;
    expect_result(
        reply,
        "initialize with _meta and an unknown optional field succeeds",
    )?;
    exchange::authenticate_configured(&mut conn).await?;
    let mut session = new_session_params(&ctx);
    session["_meta"] = json!({"ski.conformance/trace": "def"});
    let reply = conn.call("session/new", session).await?;
    let result = exchange::expect_session(&ctx, reply, "session/new with _meta succeeds")?;
    let id = exchange::session_id_of(&result, "session/new")?;
    if ctx.has(capability::PROMPT) {
        let prompt = json!([{"type": "text", "text": "hello", "_meta": {"ski.conformance": 1}}]);
        let (rid, start) = exchange::start_prompt(&mut conn, &id, prompt).await?;
        let turn = exchange::finish_prompt(&mut conn, &id, rid, start).await?;
        turn.expect_stop(
            "end_turn",
            "a prompt whose text block carries _meta ends end_turn",
        )?;
    }
    Ok(())
}

async fn core_021(ctx: Ctx) -> CheckResult {
    let (agent, mut conn) = initialized(&ctx).await?;
    let cwd = ctx.temp_dir().display().to_string();
    let reply = conn.call("session/new", json!({"cwd": cwd})).await?;
    // An agent that asks for authentication before it looks at the params shows nothing of how
    // it answers them.
    exchange::unless_auth_required(&ctx, &reply)?;
    expect_error(
        &reply,
        &[-32602],
        "session/new without mcpServers answers -32602",
    )?;
    still_serves(&mut conn).await?;
    ensure!(agent.is_running(), "the agent keeps running");
    Ok(())
}

async fn ws_023(ctx: Ctx) -> CheckResult {
    // The profile's agent_strict_version (the reference: `--strict-version`), else its agent.
    let mut agent = Agent::start(&ctx, "strict_version").await?;
    let mut conn = agent.connect().await?;
    for version in [json!(2), json!(99), json!("1")] {
        let mut params = initialize_params(bare_capabilities());
        params["protocolVersion"] = version.clone();
        let reply = conn.call("initialize", params).await?;
        let fault = match &reply {
            Err(fault) if fault.code == Some(-32602) => fault.clone(),
            other => fail!(
                format!("initialize with protocolVersion {version} answers -32602"),
                "{}",
                describe(other)
            ),
        };
        let named = match &version {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        ensure!(
            fault.message.contains(&named),
            "the error message names the received protocolVersion",
            "message {:?} for protocolVersion {version}",
            fault.message
        );
    }
    initialize(&mut conn).await?;
    Ok(())
}
