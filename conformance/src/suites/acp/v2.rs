//! Checks of the ACP v2 (draft) rows, `conformance/catalog/acp-v2.toml` (ACP-V2-*): a connection
//! initialized at protocol version 2 and what the draft and its schema ask of the agent on it
//! (negotiation, the session baseline, the prompt lifecycle of acknowledgement, `state_update`
//! and message ids, `tool_call/cancel`, config options by `configId`, item-based plans, the
//! auth surface and error shapes). Each row needs `acp-v2`; a row whose set-up (initialize at 2,
//! a session) fails is blocked, so one broken step fails only the row that judges it.

use serde_json::{Value, json};

use super::agent::{Agent, HOLD, PLAIN, Variant};
use super::connection::{
    Connection, Fault, Frame, PermissionReply, Reply, describe, option_of_kind, permission_outcome,
};
use super::exchange::{QUIET, expect_error, expect_result, list, new_session_params, since};
use crate::check::{Check, CheckError, CheckResult, Failure};
use crate::context::Ctx;
use crate::vocabulary::capability;
use crate::{ensure, fail};

/// The protocol version of the draft.
const V2: u64 = 2;

/// A version no agent speaks (ACP-V2-002).
const ABOVE_EVERY_VERSION: u64 = 65535;

/// The schema's code for a version below every version the agent speaks.
const UNSUPPORTED_VERSION: i64 = -32022;

/// The variant whose turns run a tool call that waits for `tool_call/cancel`.
const HOLD_TOOL_CALL: Variant = "hold_tool_call";

/// The variant that advertises auth methods.
const AUTH: Variant = "auth";

/// The variant that asks for permission before it runs a prompt.
const PERMISSION: Variant = "permission";

/// The variants whose turns run tool calls, with the capability that declares each.
const TOOL_VARIANTS: &[(Variant, Option<crate::vocabulary::Capability>)] = &[
    (PLAIN, None),
    ("fs", Some(capability::AGENT_FS)),
    ("terminal", Some(capability::AGENT_TERMINAL)),
];

/// The content block types the draft names.
const CONTENT_TYPES: &[&str] = &["text", "image", "audio", "resource_link", "resource"];

/// The stop reasons the draft names (others must begin with `_`).
const STOP_REASONS: &[&str] = &[
    "end_turn",
    "max_tokens",
    "max_turn_requests",
    "refusal",
    "cancelled",
];

/// The update kinds that report messages, each of which must carry a `messageId`.
const MESSAGE_KINDS: &[&str] = &[
    "user_message",
    "user_message_chunk",
    "agent_message",
    "agent_message_chunk",
    "agent_thought",
    "agent_thought_chunk",
];

/// The update kinds that are the agent's output in a turn (after `running`).
const OUTPUT_KINDS: &[&str] = &[
    "agent_message",
    "agent_message_chunk",
    "agent_thought",
    "agent_thought_chunk",
    "tool_call_update",
    "tool_call_content_chunk",
    "plan_update",
];

const TOOL_KINDS: &[&str] = &[
    "read",
    "edit",
    "delete",
    "move",
    "search",
    "execute",
    "think",
    "fetch",
    "switch_mode",
    "other",
];
const TOOL_STATUSES: &[&str] = &[
    "pending",
    "in_progress",
    "paused",
    "completed",
    "failed",
    "cancelled",
];
const PLAN_STATUSES: &[&str] = &["pending", "in_progress", "completed", "cancelled"];
const PLAN_PRIORITIES: &[&str] = &["high", "medium", "low"];

/// The checks of this module.
pub fn checks() -> Vec<Check> {
    vec![
        Check::new(
            "ACP-V2-001",
            "Sends a v2 initialize (protocolVersion 2, capabilities, info) and requires a result \
             with protocolVersion 2, a capabilities object and info with a name and a version.",
            v2_001,
        ),
        Check::new(
            "ACP-V2-002",
            "Sends a v2 initialize asking for protocolVersion 65535 and requires a result whose \
             protocolVersion is an integer from 2 to 65534.",
            v2_002,
        ),
        Check::new(
            "ACP-V2-003",
            "Sends a v2 initialize asking for protocolVersion 0 and requires the error -32022.",
            v2_003,
        ),
        Check::new(
            "ACP-V2-004",
            "Sends a v1 initialize asking for protocolVersion 1 and requires protocolVersion 1 \
             or the error -32022, never 2.",
            v2_004,
        ),
        Check::new(
            "ACP-V2-010",
            "Initializes at 2 and opens two sessions; each answer carries a sessionId string \
             and the two differ.",
            v2_010,
        ),
        Check::new(
            "ACP-V2-011",
            "Initializes at 2, opens a session and calls session/list; sessions must be an \
             array of entries with a sessionId string and a cwd.",
            v2_011,
        ),
        Check::new(
            "ACP-V2-012",
            "Runs one turn at 2, then session/resume without replayFrom; requires a result and \
             no message update of the session between the request and its answer.",
            v2_012,
        ),
        Check::new(
            "ACP-V2-013",
            "Holds a turn running at 2 and calls session/close; requires a result and \
             state_update idle with stopReason cancelled.",
            v2_013,
        ),
        Check::new(
            "ACP-V2-014",
            "Where the v2 initialize advertises capabilities.session.delete, deletes a session \
             that never existed and requires a result.",
            v2_014,
        ),
        Check::new(
            "ACP-V2-015",
            "Runs one turn at 2, then session/resume with replayFrom start; requires the user \
             message and the reply again before the answer, each message update with a messageId.",
            v2_015,
        ),
        Check::new(
            "ACP-V2-016",
            "Opens a session, then session/list filtered by another directory's cwd; requires an \
             empty sessions array.",
            v2_016,
        ),
        Check::new(
            "ACP-V2-017",
            "Calls session/list with a cursor the agent never issued; requires an error.",
            v2_017,
        ),
        Check::new(
            "ACP-V2-018",
            "Calls session/resume with replayFrom of an unknown type; requires -32602.",
            v2_018,
        ),
        Check::new(
            "ACP-V2-020",
            "Sends a v2 session/prompt and requires a result with a non-empty messageId string.",
            v2_020,
        ),
        Check::new(
            "ACP-V2-021",
            "Runs a v2 turn and requires a user_message or user_message_chunk with the \
             acknowledgement's messageId.",
            v2_021,
        ),
        Check::new(
            "ACP-V2-022",
            "Runs a v2 turn and requires state_update running before the turn's first output \
             and before its idle state_update.",
            v2_022,
        ),
        Check::new(
            "ACP-V2-023",
            "Runs a v2 turn and requires a non-empty messageId on every message update and chunk.",
            v2_023,
        ),
        Check::new(
            "ACP-V2-024",
            "Runs a v2 turn and requires state_update idle with stopReason end_turn; every stop \
             reason reported is ACP's or begins with _.",
            v2_024,
        ),
        Check::new(
            "ACP-V2-025",
            "Holds a v2 turn running, sends session/cancel, requires state_update idle with \
             stopReason cancelled, then watches 300 ms (scaled) for updates of the session.",
            v2_025,
        ),
        Check::new(
            "ACP-V2-026",
            "Sends a v2 prompt of a text and a resource_link block; requires a result and the \
             turn's idle state_update.",
            v2_026,
        ),
        Check::new(
            "ACP-V2-027",
            "Prompts the permission variant at 2, allows its permission request, reads the turn \
             to idle; requires_action must be reported, then running after it, before idle.",
            v2_027,
        ),
        Check::new(
            "ACP-V2-028",
            "Answers the permission variant's request with an unknown outcome; requires no reply \
             text and the turn's idle state_update.",
            v2_028,
        ),
        Check::new(
            "ACP-V2-030",
            "Runs a v2 turn of the hold_tool_call variant, calls tool_call/cancel for the tool \
             call that advertises capabilities.cancel, requires a result, then a final status of \
             that tool call, and no idle with stopReason cancelled.",
            v2_030,
        ),
        Check::new(
            "ACP-V2-031",
            "Calls tool_call/cancel for a toolCallId never reported; requires -32602.",
            v2_031,
        ),
        Check::new(
            "ACP-V2-032",
            "Runs a v2 turn; the first tool_call_update of each tool call has a title, and kinds \
             and statuses are ACP's or begin with _.",
            v2_032,
        ),
        Check::new(
            "ACP-V2-033",
            "Runs a turn in the plain, agent-fs and agent-terminal variants (those declared); \
             every location path, diff path and plan file URI must be absolute.",
            v2_033,
        ),
        Check::new(
            "ACP-V2-034",
            "Runs a v2 turn; every content block of message updates and tool call content is of \
             an ACP type or begins with _.",
            v2_034,
        ),
        Check::new(
            "ACP-V2-035",
            "Runs a turn in the plain, agent-fs and agent-terminal variants (those declared) at 2 \
             with no client capability; the agent's only requests are session/request_permission.",
            v2_035,
        ),
        Check::new(
            "ACP-V2-036",
            "Runs a v2 turn; every available command's input carries a type, text or one \
             beginning with _.",
            v2_036,
        ),
        Check::new(
            "ACP-V2-040",
            "Opens a v2 session; every config option has a configId, a type and a non-null \
             currentValue, a select's among its values.",
            v2_040,
        ),
        Check::new(
            "ACP-V2-041",
            "Sets a select config option to another of its values; the answer lists every \
             configId with the new currentValue.",
            v2_041,
        ),
        Check::new(
            "ACP-V2-042",
            "Sets a select config option to a value it lacks and an unknown configId; both \
             -32602, and a later valid change shows the other options unchanged.",
            v2_042,
        ),
        Check::new(
            "ACP-V2-045",
            "Runs a v2 turn; every plan_update has a plan with a planId, an items plan an \
             entries array whose priorities and statuses are ACP's or begin with _.",
            v2_045,
        ),
        Check::new(
            "ACP-V2-050",
            "Initializes the auth variant at 2; with authMethods listed, auth/login of the first \
             and auth/logout must not be -32601, and auth/logout answers a result.",
            v2_050,
        ),
        Check::new(
            "ACP-V2-060",
            "Prompts an unknown session at 2; requires an error with an integer code and a \
             string message.",
            v2_060,
        ),
        Check::new(
            "ACP-V2-061",
            "Prompts an unknown session at 2; requires the error -32002.",
            v2_061,
        ),
        Check::new(
            "ACP-V2-062",
            "Sends an unknown _ request at 2; requires -32601.",
            v2_062,
        ),
        Check::new(
            "ACP-V2-063",
            "Sends an unknown _ notification at 2, then session/list; nothing may answer the \
             notification and session/list must answer a result.",
            v2_063,
        ),
    ]
}

/// The params of a v2 `initialize` asking for `version`.
pub fn v2_initialize_params(version: u64) -> Value {
    json!({
        "protocolVersion": version,
        "capabilities": {},
        "info": {"name": "ski-conformance", "version": env!("CARGO_PKG_VERSION")},
    })
}

/// An agent with one connection initialized at protocol version 2.
struct Opened {
    // Kept so the agent lives as long as the connection.
    _agent: Agent,
    conn: Connection,
    init: Value,
}

/// Starts `variant` and initializes at 2. An answer other than protocolVersion 2 blocks the
/// row: ACP-V2-001 judges it.
async fn open(ctx: &Ctx, variant: Variant) -> Result<Opened, CheckError> {
    ctx.require(capability::ACP_V2)?;
    let mut agent = Agent::start(ctx, variant).await?;
    let mut conn = agent.connect().await?;
    let reply = conn.call("initialize", v2_initialize_params(V2)).await?;
    let init = match reply {
        Ok(init) if init.get("protocolVersion") == Some(&json!(V2)) => init,
        other => {
            return Err(CheckError::Blocked(format!(
                "initialize asking for 2 was answered {} (ACP-V2-001 judges it); the row needs \
                 a connection at 2",
                describe(&other)
            )));
        }
    };
    if let Some(method) = ctx.section().auth.as_ref().map(|a| a.method.clone())
        && let Err(fault) = conn.call("auth/login", json!({"methodId": method})).await?
    {
        return Err(CheckError::Blocked(format!(
            "the agent refused auth/login with the profile's method {method:?} ({})",
            fault.raw
        )));
    }
    Ok(Opened {
        _agent: agent,
        conn,
        init,
    })
}

/// A session on `conn`; a refusal blocks the row (ACP-V2-010 judges session/new).
async fn session(ctx: &Ctx, conn: &mut Connection) -> Result<(String, Value), CheckError> {
    let reply = conn.call("session/new", new_session_params(ctx)).await?;
    match reply {
        Ok(result) => match result.get("sessionId").and_then(Value::as_str) {
            Some(id) => Ok((id.to_owned(), result)),
            None => Err(CheckError::Blocked(format!(
                "session/new answered no sessionId ({result}); ACP-V2-010 judges it"
            ))),
        },
        Err(fault) => Err(CheckError::Blocked(format!(
            "session/new was refused ({}); the row needs a session",
            fault.raw
        ))),
    }
}

/// An agent with a connection initialized at 2 and one session on it, the set-up most rows
/// share.
struct WithSession {
    // Kept so the agent lives as long as the connection.
    _agent: Agent,
    conn: Connection,
    /// The session's id.
    session: String,
    /// The `session/new` result.
    created: Value,
}

/// Starts `variant`, initializes at 2 and opens a session: blocked where [`open`] or
/// [`session`] block.
async fn open_session(ctx: &Ctx, variant: Variant) -> Result<WithSession, CheckError> {
    let Opened {
        _agent, mut conn, ..
    } = open(ctx, variant).await?;
    let (session, created) = session(ctx, &mut conn).await?;
    Ok(WithSession {
        _agent,
        conn,
        session,
        created,
    })
}

/// One v2 prompt turn: its acknowledgement and the frames from the request to the idle
/// `state_update` that ended it.
struct Turn {
    ack: Reply,
    /// Index of the first frame after the request.
    start: usize,
    /// Index of the idle `state_update` that ended the turn.
    end: usize,
}

/// Whether `frame` is a `state_update` of `session` in `state`.
fn is_state(frame: &Frame, session: &str, state: &str) -> bool {
    frame.is_update_for(session)
        && frame.update_kind() == Some("state_update")
        && frame
            .update()
            .and_then(|u| u.get("state"))
            .and_then(Value::as_str)
            == Some(state)
}

/// Sends `session/prompt` with `prompt`; the request id and the cursor before it.
async fn send_prompt(
    conn: &mut Connection,
    session: &str,
    prompt: Value,
) -> Result<(Value, usize), CheckError> {
    let start = conn.cursor();
    let id = conn
        .request(
            "session/prompt",
            json!({"sessionId": session, "prompt": prompt}),
        )
        .await?;
    Ok((id, start))
}

/// Waits for the acknowledgement of prompt `id`.
async fn ack_of(conn: &mut Connection, id: &Value, start: usize) -> Result<Reply, CheckError> {
    let what = format!("the acknowledgement of session/prompt (id {id})");
    let index = conn.wait_for_turn(&what, start, |f| f.answers(id)).await?;
    conn.frames()[index]
        .reply()
        .ok_or_else(|| CheckError::Harness("a response without a reply".into()))
}

/// Waits for the idle `state_update` of `session` at or after `start`.
async fn idle_of(conn: &mut Connection, session: &str, start: usize) -> Result<usize, CheckError> {
    conn.wait_for_turn(
        "state_update idle for the session (the end of the turn)",
        start,
        |f| is_state(f, session, "idle"),
    )
    .await
}

/// A whole v2 turn of `prompt`: acknowledged by a result (else blocked, ACP-V2-020 judges it)
/// and ended by an idle `state_update`.
async fn turn(conn: &mut Connection, session: &str, prompt: Value) -> Result<Turn, CheckError> {
    let (id, start) = send_prompt(conn, session, prompt).await?;
    let ack = ack_of(conn, &id, start).await?;
    if let Err(fault) = &ack {
        return Err(CheckError::Blocked(format!(
            "session/prompt was refused ({}); ACP-V2-020 judges the acknowledgement",
            fault.raw
        )));
    }
    let end = idle_of(conn, session, start).await?;
    Ok(Turn { ack, start, end })
}

/// A text prompt.
fn text(text: &str) -> Value {
    json!([{"type": "text", "text": text}])
}

/// The session's updates among `frames`.
fn updates_of<'a>(frames: &[&'a Frame], session: &str) -> Vec<&'a Frame> {
    frames
        .iter()
        .copied()
        .filter(|f| f.is_update_for(session))
        .collect()
}

/// A frame's update field as a string.
fn field<'a>(frame: &'a Frame, name: &str) -> Option<&'a str> {
    frame.update()?.get(name)?.as_str()
}

/// Whether `value` is one of `known` or a custom value (begins with `_`).
fn known_or_custom(value: &str, known: &[&str]) -> bool {
    known.contains(&value) || value.starts_with('_')
}

/// The frames of a turn, up to and including its idle `state_update`.
fn turn_frames<'a>(conn: &'a Connection, turn: &Turn) -> Vec<&'a Frame> {
    conn.frames()[turn.start..=turn.end].iter().collect()
}

async fn v2_001(ctx: Ctx) -> CheckResult {
    ctx.require(capability::ACP_V2)?;
    let mut agent = Agent::start(&ctx, PLAIN).await?;
    let mut conn = agent.connect().await?;
    let reply = conn.call("initialize", v2_initialize_params(V2)).await?;
    let init = expect_result(reply, "initialize asking for 2 answers a result")?;
    ensure!(
        init.get("protocolVersion") == Some(&json!(V2)),
        "an agent that speaks 2 answers protocolVersion 2 to a client asking for 2",
        "protocolVersion {}",
        init.get("protocolVersion").unwrap_or(&Value::Null)
    );
    ensure!(
        init.get("capabilities").is_some_and(Value::is_object),
        "the v2 initialize result carries the agent's capabilities (an object)",
        "{}",
        init
    );
    let info = init.get("info");
    ensure!(
        info.and_then(|i| i.get("name"))
            .is_some_and(Value::is_string)
            && info
                .and_then(|i| i.get("version"))
                .is_some_and(Value::is_string),
        "the v2 initialize result carries info with a name and a version",
        "{}",
        init
    );
    Ok(())
}

async fn v2_002(ctx: Ctx) -> CheckResult {
    ctx.require(capability::ACP_V2)?;
    let mut agent = Agent::start(&ctx, PLAIN).await?;
    let mut conn = agent.connect().await?;
    let reply = conn
        .call("initialize", v2_initialize_params(ABOVE_EVERY_VERSION))
        .await?;
    let init = expect_result(
        reply,
        "a v2 initialize asking for a version above every one the agent speaks answers its latest",
    )?;
    let answered = init.get("protocolVersion").and_then(Value::as_u64);
    ensure!(
        answered.is_some_and(|v| (V2..ABOVE_EVERY_VERSION).contains(&v)),
        "the agent answers the latest version it speaks (at least 2, below the 65535 asked)",
        "protocolVersion {}",
        init.get("protocolVersion").unwrap_or(&Value::Null)
    );
    Ok(())
}

async fn v2_003(ctx: Ctx) -> CheckResult {
    ctx.require(capability::ACP_V2)?;
    let mut agent = Agent::start(&ctx, PLAIN).await?;
    let mut conn = agent.connect().await?;
    let reply = conn.call("initialize", v2_initialize_params(0)).await?;
    expect_error(
        &reply,
        &[UNSUPPORTED_VERSION],
        "a v2 initialize asking for 0, below every version the agent speaks, is refused -32022",
    )?;
    Ok(())
}

async fn v2_004(ctx: Ctx) -> CheckResult {
    ctx.require(capability::ACP_V2)?;
    let mut agent = Agent::start(&ctx, PLAIN).await?;
    let mut conn = agent.connect().await?;
    let params = super::exchange::initialize_params(super::exchange::bare_capabilities());
    match conn.call("initialize", params).await? {
        Err(fault) if fault.code == Some(UNSUPPORTED_VERSION) => Ok(()),
        Ok(init) if init.get("protocolVersion") == Some(&json!(1)) => {
            ensure!(
                init.get("agentCapabilities").is_none_or(Value::is_object)
                    && init.get("capabilities").is_none(),
                "an answer at 1 is in v1's form (agentCapabilities, not v2's capabilities)",
                "{}",
                init
            );
            Ok(())
        }
        other => fail!(
            "a client asking for 1 gets 1, or -32022 from an agent that speaks no version at or below 1",
            "{}",
            describe(&other)
        ),
    }
}

async fn v2_010(ctx: Ctx) -> CheckResult {
    let mut opened = open(&ctx, PLAIN).await?;
    let mut ids = Vec::new();
    for _ in 0..2 {
        let reply = opened
            .conn
            .call("session/new", new_session_params(&ctx))
            .await?;
        let result = expect_result(reply, "session/new at 2 answers a result")?;
        let Some(id) = result.get("sessionId").and_then(Value::as_str) else {
            fail!("session/new answers a sessionId string", "{}", result);
        };
        ids.push(id.to_owned());
    }
    ensure!(
        ids[0] != ids[1],
        "every session/new answers a sessionId of its own",
        "sessionIds {ids:?}"
    );
    Ok(())
}

async fn v2_011(ctx: Ctx) -> CheckResult {
    let mut opened = open_session(&ctx, PLAIN).await?;
    let reply = opened.conn.call("session/list", json!({})).await?;
    let result = expect_result(reply, "session/list at 2 answers a result")?;
    let Some(sessions) = result.get("sessions").and_then(Value::as_array) else {
        fail!("session/list answers a sessions array", "{}", result);
    };
    for entry in sessions {
        ensure!(
            entry.get("sessionId").is_some_and(Value::is_string)
                && entry.get("cwd").is_some_and(Value::is_string),
            "every listed session names a sessionId string and a cwd",
            "{}",
            entry
        );
    }
    Ok(())
}

async fn v2_012(ctx: Ctx) -> CheckResult {
    let WithSession {
        _agent,
        mut conn,
        session,
        ..
    } = open_session(&ctx, PLAIN).await?;
    let conn = &mut conn;
    turn(conn, &session, text("before the resume")).await?;
    let mut params = new_session_params(&ctx);
    params["sessionId"] = json!(session);
    let start = conn.cursor();
    let reply = conn.call("session/resume", params).await?;
    expect_result(reply, "session/resume at 2 answers a result")?;
    let replayed: Vec<&Frame> = updates_of(&since(conn, start), &session)
        .into_iter()
        .filter(|f| f.update_kind().is_some_and(|k| MESSAGE_KINDS.contains(&k)))
        .collect();
    ensure!(
        replayed.is_empty(),
        "session/resume without replayFrom replays no history",
        "{}",
        list(&replayed)
    );
    Ok(())
}

async fn v2_013(ctx: Ctx) -> CheckResult {
    let WithSession {
        _agent,
        mut conn,
        session,
        ..
    } = open_session(&ctx, HOLD).await?;
    let conn = &mut conn;
    let (id, start) = send_prompt(conn, &session, text("hold this turn")).await?;
    conn.wait_for_turn("state_update running of the held turn", start, |f| {
        is_state(f, &session, "running")
    })
    .await?;
    let closing = conn.cursor();
    let reply = conn
        .call("session/close", json!({"sessionId": session}))
        .await?;
    expect_result(reply, "session/close answers a result")?;
    let _ = id;
    let end = idle_of(conn, &session, closing).await?;
    let stop = field(&conn.frames()[end], "stopReason");
    ensure!(
        stop == Some("cancelled"),
        "session/close cancels the running turn as session/cancel would: idle with stopReason cancelled",
        "{}",
        conn.frames()[end].short(300)
    );
    Ok(())
}

async fn v2_014(ctx: Ctx) -> CheckResult {
    let mut opened = open(&ctx, PLAIN).await?;
    if opened
        .init
        .pointer("/capabilities/session/delete")
        .is_none_or(Value::is_null)
    {
        return Err(CheckError::Skip(
            "the v2 initialize result does not advertise capabilities.session.delete".into(),
        ));
    }
    let reply = opened
        .conn
        .call(
            "session/delete",
            json!({"sessionId": "sess_ski_conformance_never_issued"}),
        )
        .await?;
    expect_result(
        reply,
        "deleting a session that never existed succeeds silently",
    )?;
    Ok(())
}

async fn v2_020(ctx: Ctx) -> CheckResult {
    let WithSession {
        _agent,
        mut conn,
        session,
        ..
    } = open_session(&ctx, PLAIN).await?;
    let conn = &mut conn;
    let (id, start) = send_prompt(conn, &session, text("acknowledge me")).await?;
    let ack = ack_of(conn, &id, start).await?;
    let result = expect_result(ack, "session/prompt at 2 is acknowledged with a result")?;
    ensure!(
        result
            .get("messageId")
            .and_then(Value::as_str)
            .is_some_and(|m| !m.is_empty()),
        "the acknowledgement carries the user message's messageId (the schema requires it)",
        "{}",
        result
    );
    Ok(())
}

async fn v2_021(ctx: Ctx) -> CheckResult {
    let WithSession {
        _agent,
        mut conn,
        session,
        ..
    } = open_session(&ctx, PLAIN).await?;
    let conn = &mut conn;
    let turn = turn(conn, &session, text("where is my message")).await?;
    let acked = turn
        .ack
        .as_ref()
        .ok()
        .and_then(|r| r.get("messageId"))
        .and_then(Value::as_str)
        .map(str::to_owned);
    let frames = turn_frames(conn, &turn);
    let users: Vec<&Frame> = updates_of(&frames, &session)
        .into_iter()
        .filter(|f| matches!(f.update_kind(), Some("user_message" | "user_message_chunk")))
        .collect();
    ensure!(
        !users.is_empty(),
        "the agent reports the user message (user_message or user_message_chunk)",
        "no user message update in the turn: {}",
        list(&frames)
    );
    if let Some(acked) = acked {
        ensure!(
            users
                .iter()
                .any(|f| field(f, "messageId") == Some(acked.as_str())),
            "the user message update carries the messageId of the prompt's acknowledgement",
            "acknowledged {acked}; {}",
            list(&users)
        );
    }
    Ok(())
}

async fn v2_022(ctx: Ctx) -> CheckResult {
    let WithSession {
        _agent,
        mut conn,
        session,
        ..
    } = open_session(&ctx, PLAIN).await?;
    let conn = &mut conn;
    let turn = turn(conn, &session, text("start running")).await?;
    let frames = turn_frames(conn, &turn);
    let updates = updates_of(&frames, &session);
    let running = updates
        .iter()
        .position(|f| is_state(f, &session, "running"));
    let output = updates
        .iter()
        .position(|f| f.update_kind().is_some_and(|k| OUTPUT_KINDS.contains(&k)));
    let Some(running) = running else {
        fail!(
            "foreground work starts with state_update running",
            "no running state in the turn: {}",
            list(&updates)
        );
    };
    if let Some(output) = output {
        ensure!(
            running < output,
            "state_update running comes before the turn's first output",
            "{}",
            list(&updates)
        );
    }
    Ok(())
}

async fn v2_023(ctx: Ctx) -> CheckResult {
    let WithSession {
        _agent,
        mut conn,
        session,
        ..
    } = open_session(&ctx, PLAIN).await?;
    let conn = &mut conn;
    let turn = turn(conn, &session, text("every message has an id")).await?;
    let frames = turn_frames(conn, &turn);
    let messages: Vec<&Frame> = updates_of(&frames, &session)
        .into_iter()
        .filter(|f| f.update_kind().is_some_and(|k| MESSAGE_KINDS.contains(&k)))
        .collect();
    let without = without_message_id(&messages);
    ensure!(
        without.is_empty(),
        "every message update and chunk carries a non-empty messageId",
        "without one: {}",
        list(&without)
    );
    Ok(())
}

async fn v2_024(ctx: Ctx) -> CheckResult {
    let WithSession {
        _agent,
        mut conn,
        session,
        ..
    } = open_session(&ctx, PLAIN).await?;
    let conn = &mut conn;
    let turn = turn(conn, &session, text("end this turn")).await?;
    let frames = turn_frames(conn, &turn);
    for state in updates_of(&frames, &session)
        .into_iter()
        .filter(|f| f.update_kind() == Some("state_update"))
    {
        if let Some(stop) = field(state, "stopReason") {
            ensure!(
                known_or_custom(stop, STOP_REASONS),
                "every stop reason is one ACP names or begins with _",
                "{}",
                state.short(300)
            );
        }
    }
    let idle = &conn.frames()[turn.end];
    ensure!(
        field(idle, "stopReason") == Some("end_turn"),
        "the idle state_update that ends a completed turn carries stopReason end_turn",
        "{}",
        idle.short(300)
    );
    Ok(())
}

async fn v2_025(ctx: Ctx) -> CheckResult {
    let WithSession {
        _agent,
        mut conn,
        session,
        ..
    } = open_session(&ctx, HOLD).await?;
    let conn = &mut conn;
    let (_, start) = send_prompt(conn, &session, text("hold this turn")).await?;
    conn.wait_for_turn("state_update running of the held turn", start, |f| {
        is_state(f, &session, "running")
    })
    .await?;
    let cancelling = conn.cursor();
    super::exchange::cancel(conn, &session).await?;
    let end = idle_of(conn, &session, cancelling).await?;
    let idle = &conn.frames()[end];
    ensure!(
        field(idle, "stopReason") == Some("cancelled"),
        "a cancelled turn ends idle with stopReason cancelled",
        "{}",
        idle.short(300)
    );
    conn.quiet(super::exchange::QUIET).await;
    let late: Vec<&Frame> = updates_of(&since(conn, end + 1), &session);
    ensure!(
        late.is_empty(),
        "no update of the cancelled turn follows its idle state_update",
        "{}",
        list(&late)
    );
    Ok(())
}

async fn v2_026(ctx: Ctx) -> CheckResult {
    let WithSession {
        _agent,
        mut conn,
        session,
        ..
    } = open_session(&ctx, PLAIN).await?;
    let conn = &mut conn;
    let link = ctx.temp_dir().join("notes.txt");
    let prompt = json!([
        {"type": "text", "text": "read the linked file"},
        {"type": "resource_link", "uri": format!("file://{}", link.display()), "name": "notes.txt"},
    ]);
    let (id, start) = send_prompt(conn, &session, prompt).await?;
    let ack = ack_of(conn, &id, start).await?;
    expect_result(
        ack,
        "a prompt of a text and a resource_link block is accepted (the session baseline)",
    )?;
    idle_of(conn, &session, start).await?;
    Ok(())
}

/// The first `tool_call_update` among `frames` that advertises `capabilities.cancel`.
fn cancellable<'a>(frames: &[&'a Frame], session: &str) -> Option<&'a Frame> {
    updates_of(frames, session).into_iter().find(|f| {
        f.update_kind() == Some("tool_call_update")
            && f.update()
                .and_then(|u| u.pointer("/capabilities/cancel"))
                .is_some_and(|c| !c.is_null())
    })
}

async fn v2_030(ctx: Ctx) -> CheckResult {
    ctx.require(capability::V2_TOOL_CANCEL)?;
    let WithSession {
        _agent,
        mut conn,
        session,
        ..
    } = open_session(&ctx, HOLD_TOOL_CALL).await?;
    let conn = &mut conn;
    let (_, start) = send_prompt(conn, &session, text("run a tool call to cancel")).await?;
    let index = conn
        .wait_for_turn(
            "a tool_call_update that advertises capabilities.cancel",
            start,
            |f| cancellable(&[f], &session).is_some(),
        )
        .await?;
    let Some(call) = field(&conn.frames()[index], "toolCallId").map(str::to_owned) else {
        fail!(
            "a cancellable tool call names its toolCallId",
            "{}",
            conn.frames()[index].short(300)
        );
    };
    let cancelling = conn.cursor();
    let reply = conn
        .call(
            "tool_call/cancel",
            json!({"sessionId": session, "toolCallId": call}),
        )
        .await?;
    expect_result(
        reply,
        "tool_call/cancel of a cancellable tool call answers a result",
    )?;
    let ended = conn
        .wait_for_turn(
            "a final status of the cancelled tool call",
            cancelling,
            |f| {
                f.is_update_for(&session)
                    && f.update_kind() == Some("tool_call_update")
                    && field(f, "toolCallId") == Some(call.as_str())
                    && matches!(
                        field(f, "status"),
                        Some("cancelled" | "completed" | "failed")
                    )
            },
        )
        .await?;
    let _ = ended;
    let stopped: Vec<&Frame> = updates_of(&since(conn, cancelling), &session)
        .into_iter()
        .filter(|f| is_state(f, &session, "idle") && field(f, "stopReason") == Some("cancelled"))
        .collect();
    ensure!(
        stopped.is_empty(),
        "cancelling one tool call does not by itself end the turn cancelled",
        "{}",
        list(&stopped)
    );
    Ok(())
}

async fn v2_031(ctx: Ctx) -> CheckResult {
    ctx.require(capability::V2_TOOL_CANCEL)?;
    let WithSession {
        _agent,
        mut conn,
        session,
        ..
    } = open_session(&ctx, PLAIN).await?;
    let conn = &mut conn;
    let reply = conn
        .call(
            "tool_call/cancel",
            json!({"sessionId": session, "toolCallId": "call_ski_conformance_never_reported"}),
        )
        .await?;
    expect_error(
        &reply,
        &[-32602],
        "tool_call/cancel of an unknown tool call is -32602",
    )?;
    Ok(())
}

async fn v2_032(ctx: Ctx) -> CheckResult {
    let WithSession {
        _agent,
        mut conn,
        session,
        ..
    } = open_session(&ctx, PLAIN).await?;
    let conn = &mut conn;
    let turn = turn(conn, &session, text("run your tool calls")).await?;
    let frames = turn_frames(conn, &turn);
    let calls: Vec<&Frame> = updates_of(&frames, &session)
        .into_iter()
        .filter(|f| f.update_kind() == Some("tool_call_update"))
        .collect();
    if calls.is_empty() {
        return Err(CheckError::Skip(
            "the turn reported no tool call (turn-sequence promised one)".into(),
        ));
    }
    let mut seen = std::collections::BTreeSet::new();
    for call in &calls {
        let id = field(call, "toolCallId").unwrap_or_default().to_owned();
        if seen.insert(id) {
            ensure!(
                field(call, "title").is_some_and(|t| !t.trim().is_empty()),
                "the first update of a tool call carries a title",
                "{}",
                call.short(300)
            );
        }
        if let Some(kind) = field(call, "kind") {
            ensure!(
                known_or_custom(kind, TOOL_KINDS),
                "a tool kind is one ACP names or begins with _",
                "{}",
                call.short(300)
            );
        }
        if let Some(status) = field(call, "status") {
            ensure!(
                known_or_custom(status, TOOL_STATUSES),
                "a tool call status is one ACP names or begins with _",
                "{}",
                call.short(300)
            );
        }
    }
    Ok(())
}

/// The config options of a result, or a failure naming `method`.
fn options_of(result: &Value, method: &str) -> Result<Vec<Value>, CheckError> {
    match result.get("configOptions").and_then(Value::as_array) {
        Some(options) => Ok(options.clone()),
        None => Err(Failure::new(
            format!("{method} answers configOptions"),
            "a configOptions array",
        )
        .actual(result.to_string())
        .into()),
    }
}

/// The values of a select option.
fn select_values(option: &Value) -> Vec<String> {
    let mut values = Vec::new();
    let mut collect = |list: &Value| {
        for entry in list.as_array().into_iter().flatten() {
            if let Some(value) = entry.get("value").and_then(Value::as_str) {
                values.push(value.to_owned());
            }
            // Grouped options carry their values one level down.
            if let Some(inner) = entry.get("options") {
                for item in inner.as_array().into_iter().flatten() {
                    if let Some(value) = item.get("value").and_then(Value::as_str) {
                        values.push(value.to_owned());
                    }
                }
            }
        }
    };
    if let Some(list) = option.get("options") {
        collect(list);
    }
    values
}

/// A select option with at least two values, among `options`; else the row is skipped.
fn two_valued_select(options: &[Value]) -> Result<(String, Vec<String>, String), CheckError> {
    options
        .iter()
        .filter(|o| o.get("type").and_then(Value::as_str) == Some("select"))
        .find_map(|o| {
            let values = select_values(o);
            let id = o.get("configId")?.as_str()?.to_owned();
            let current = o.get("currentValue")?.as_str()?.to_owned();
            (values.len() >= 2).then_some((id, values, current))
        })
        .ok_or_else(|| {
            CheckError::Skip("session/new offers no select option with two values".into())
        })
}

async fn v2_040(ctx: Ctx) -> CheckResult {
    let opened = open_session(&ctx, PLAIN).await?;
    let options = options_of(&opened.created, "session/new")?;
    for option in &options {
        ensure!(
            option.get("configId").is_some_and(Value::is_string)
                && option.get("type").is_some_and(Value::is_string),
            "every config option names a configId and a type",
            "{}",
            option
        );
        let current = option.get("currentValue").unwrap_or(&Value::Null);
        ensure!(
            !current.is_null(),
            "every config option has a current (default) value",
            "{}",
            option
        );
        if option.get("type").and_then(Value::as_str) == Some("select") {
            let values = select_values(option);
            ensure!(
                current
                    .as_str()
                    .is_some_and(|c| values.iter().any(|v| v == c)),
                "a select option's current value is one of its values",
                "{}",
                option
            );
        }
    }
    Ok(())
}

/// `session/set_config_option` of a select option to `value`.
async fn set_option(
    conn: &mut Connection,
    session: &str,
    config: &str,
    value: &str,
) -> Result<Reply, CheckError> {
    conn.call(
        "session/set_config_option",
        json!({"sessionId": session, "configId": config, "type": "id", "value": value}),
    )
    .await
}

async fn v2_041(ctx: Ctx) -> CheckResult {
    let WithSession {
        _agent,
        mut conn,
        session,
        created: result,
    } = open_session(&ctx, PLAIN).await?;
    let conn = &mut conn;
    let before = options_of(&result, "session/new")?;
    let (config, values, current) = two_valued_select(&before)?;
    let Some(other) = values.iter().find(|v| **v != current) else {
        return Err(CheckError::Skip("no other value to set".into()));
    };
    let reply = set_option(conn, &session, &config, other).await?;
    let answer = expect_result(reply, "session/set_config_option answers a result")?;
    let after = options_of(&answer, "session/set_config_option")?;
    let ids = |options: &[Value]| -> std::collections::BTreeSet<String> {
        options
            .iter()
            .filter_map(|o| o.get("configId")?.as_str().map(str::to_owned))
            .collect()
    };
    ensure!(
        ids(&before).is_subset(&ids(&after)),
        "the answer is the complete list of config options",
        "session/new offered {:?}, the answer lists {:?}",
        ids(&before),
        ids(&after)
    );
    let changed = after
        .iter()
        .find(|o| o.get("configId").and_then(Value::as_str) == Some(config.as_str()));
    ensure!(
        changed.and_then(|o| o.get("currentValue")) == Some(&json!(other)),
        "the changed option reports its new value",
        "{}",
        changed.map(Value::to_string).unwrap_or_default()
    );
    Ok(())
}

async fn v2_042(ctx: Ctx) -> CheckResult {
    let WithSession {
        _agent,
        mut conn,
        session,
        created: result,
    } = open_session(&ctx, PLAIN).await?;
    let conn = &mut conn;
    let before = options_of(&result, "session/new")?;
    let (config, values, current) = two_valued_select(&before)?;
    let reply = set_option(conn, &session, &config, "ski-conformance-no-such-value").await?;
    expect_error(
        &reply,
        &[-32602],
        "a value none of the option's values is refused -32602",
    )?;
    let reply = set_option(conn, &session, "ski-conformance-no-such-option", &current).await?;
    expect_error(&reply, &[-32602], "an unknown configId is refused -32602")?;
    let Some(other) = values.iter().find(|v| **v != current) else {
        return Err(CheckError::Skip("no other value to set".into()));
    };
    let reply = set_option(conn, &session, &config, other).await?;
    let answer = expect_result(
        reply,
        "a valid change after the refused ones answers a result",
    )?;
    let after = options_of(&answer, "session/set_config_option")?;
    for option in &before {
        let id = option.get("configId").and_then(Value::as_str);
        if id == Some(config.as_str()) {
            continue;
        }
        let now = after
            .iter()
            .find(|o| o.get("configId").and_then(Value::as_str) == id);
        ensure!(
            now.and_then(|o| o.get("currentValue")) == option.get("currentValue"),
            "refused changes leave the configuration unchanged",
            "before {option}, after {}",
            now.map(Value::to_string).unwrap_or_default()
        );
    }
    Ok(())
}

async fn v2_045(ctx: Ctx) -> CheckResult {
    let WithSession {
        _agent,
        mut conn,
        session,
        ..
    } = open_session(&ctx, PLAIN).await?;
    let conn = &mut conn;
    let turn = turn(conn, &session, text("make a plan")).await?;
    let frames = turn_frames(conn, &turn);
    let plans: Vec<&Frame> = updates_of(&frames, &session)
        .into_iter()
        .filter(|f| f.update_kind() == Some("plan_update"))
        .collect();
    if plans.is_empty() {
        return Err(CheckError::Skip("the turn reported no plan_update".into()));
    }
    for frame in plans {
        let plan = frame.update().and_then(|u| u.get("plan"));
        ensure!(
            plan.and_then(|p| p.get("planId"))
                .is_some_and(Value::is_string),
            "every plan_update carries a plan with a planId",
            "{}",
            frame.short(300)
        );
        if plan.and_then(|p| p.get("type")).and_then(Value::as_str) == Some("items") {
            let Some(entries) = plan
                .and_then(|p| p.get("entries"))
                .and_then(Value::as_array)
            else {
                fail!(
                    "an items plan carries its complete entries array",
                    "{}",
                    frame.short(300)
                );
            };
            for entry in entries {
                let word = |name: &str| entry.get(name).and_then(Value::as_str);
                ensure!(
                    entry.get("content").is_some()
                        && word("priority").is_some_and(|p| known_or_custom(p, PLAN_PRIORITIES))
                        && word("status").is_some_and(|s| known_or_custom(s, PLAN_STATUSES)),
                    "each plan entry has content, and a priority and status ACP names or that begin with _",
                    "{}",
                    entry
                );
            }
        }
    }
    Ok(())
}

async fn v2_050(ctx: Ctx) -> CheckResult {
    ctx.require(capability::AUTH)?;
    let mut opened = open(&ctx, AUTH).await?;
    let Some(method) = opened
        .init
        .get("authMethods")
        .and_then(Value::as_array)
        .and_then(|m| m.first())
        .and_then(|m| m.get("methodId"))
        .and_then(Value::as_str)
        .map(str::to_owned)
    else {
        return Err(CheckError::Skip(
            "the v2 initialize result lists no authMethods".into(),
        ));
    };
    let conn = &mut opened.conn;
    let login = conn.call("auth/login", json!({"methodId": method})).await?;
    not_missing(&login, "auth/login")?;
    let logout = conn.call("auth/logout", json!({})).await?;
    not_missing(&logout, "auth/logout")?;
    expect_result(logout, "auth/logout answers a result")?;
    Ok(())
}

/// Fails when `reply` is -32601: the method is not implemented.
fn not_missing(reply: &Reply, method: &str) -> Result<(), CheckError> {
    if let Err(Fault {
        code: Some(-32601),
        raw,
        ..
    }) = reply
    {
        fail!(
            format!("an agent that lists authMethods implements {method}"),
            "error {raw}"
        );
    }
    Ok(())
}

/// `session/prompt` for a session the agent never issued.
async fn prompt_unknown(ctx: &Ctx) -> Result<Reply, CheckError> {
    let mut opened = open(ctx, PLAIN).await?;
    opened
        .conn
        .call(
            "session/prompt",
            json!({"sessionId": "sess_ski_conformance_never_issued", "prompt": text("hello")}),
        )
        .await
}

async fn v2_060(ctx: Ctx) -> CheckResult {
    let reply = prompt_unknown(&ctx).await?;
    match reply {
        Err(fault) => {
            ensure!(
                fault.raw.get("code").is_some_and(Value::is_i64)
                    && fault.raw.get("message").is_some_and(Value::is_string),
                "the error object has an integer code and a string message",
                "{}",
                fault.raw
            );
            Ok(())
        }
        Ok(result) => fail!(
            "a prompt for an unknown session is an error",
            "result {}",
            result
        ),
    }
}

async fn v2_061(ctx: Ctx) -> CheckResult {
    let reply = prompt_unknown(&ctx).await?;
    expect_error(&reply, &[-32002], "an unknown session is -32002")?;
    Ok(())
}

async fn v2_062(ctx: Ctx) -> CheckResult {
    let mut opened = open(&ctx, PLAIN).await?;
    let reply = opened
        .conn
        .call("_ski_conformance/no_such_method", json!({}))
        .await?;
    expect_error(&reply, &[-32601], "an unknown extension request is -32601")?;
    Ok(())
}

async fn v2_015(ctx: Ctx) -> CheckResult {
    let WithSession {
        _agent,
        mut conn,
        session,
        ..
    } = open_session(&ctx, PLAIN).await?;
    let conn = &mut conn;
    let said = "replay me";
    turn(conn, &session, text(said)).await?;
    let mut params = new_session_params(&ctx);
    params["sessionId"] = json!(session);
    params["replayFrom"] = json!({"type": "start"});
    let start = conn.cursor();
    let id = conn.request("session/resume", params).await?;
    let reply = conn.reply(&id, "session/resume").await?;
    expect_result(reply, "session/resume from the start answers a result")?;
    let mut answer = conn
        .frames()
        .iter()
        .position(|f| f.answers(&id))
        .unwrap_or(conn.frames().len());
    if conn.streams_unordered() {
        // Over Streamable HTTP the replay comes on the session's stream and the answer on the
        // connection's: their order as read is not the order sent (E-ACP-64).
        ctx.note(
            "the replay and the session/resume answer came on different streams: their order is \
             not judged",
        );
        conn.quiet(QUIET).await;
        answer = conn.frames().len();
    }
    let before: Vec<&Frame> = conn.frames()[start.min(answer)..answer].iter().collect();
    let messages: Vec<&Frame> = updates_of(&before, &session)
        .into_iter()
        .filter(|f| f.update_kind().is_some_and(|k| MESSAGE_KINDS.contains(&k)))
        .collect();
    let kinds = |prefix: &str| {
        messages
            .iter()
            .any(|f| f.update_kind().is_some_and(|k| k.starts_with(prefix)))
    };
    ensure!(
        kinds("user_message") && kinds("agent_message"),
        "the earlier user message and the agent's reply are replayed before the answer",
        "replayed before the answer: {}",
        list(&messages)
    );
    let without = without_message_id(&messages);
    ensure!(
        without.is_empty(),
        "every replayed message carries a messageId",
        "without one: {}",
        list(&without)
    );
    Ok(())
}

async fn v2_016(ctx: Ctx) -> CheckResult {
    let mut opened = open_session(&ctx, PLAIN).await?;
    let elsewhere = ctx.temp_dir().join("no-session-here");
    std::fs::create_dir_all(&elsewhere)
        .map_err(|e| CheckError::Harness(format!("cannot create {}: {e}", elsewhere.display())))?;
    let reply = opened
        .conn
        .call(
            "session/list",
            json!({"cwd": elsewhere.display().to_string()}),
        )
        .await?;
    let result = expect_result(reply, "session/list with a cwd filter answers a result")?;
    ensure!(
        result.get("sessions") == Some(&json!([])),
        "no session matches: sessions is an empty array",
        "{}",
        result
    );
    Ok(())
}

async fn v2_017(ctx: Ctx) -> CheckResult {
    let mut opened = open(&ctx, PLAIN).await?;
    let reply = opened
        .conn
        .call(
            "session/list",
            json!({"cursor": "ski-conformance-never-issued"}),
        )
        .await?;
    if let Ok(result) = reply {
        fail!(
            "a cursor the agent never issued is refused",
            "result {}",
            result
        );
    }
    Ok(())
}

async fn v2_018(ctx: Ctx) -> CheckResult {
    let WithSession {
        _agent,
        mut conn,
        session,
        ..
    } = open_session(&ctx, PLAIN).await?;
    let conn = &mut conn;
    let mut params = new_session_params(&ctx);
    params["sessionId"] = json!(session);
    params["replayFrom"] = json!({"type": "_ski_conformance_unknown_cursor"});
    let reply = conn.call("session/resume", params).await?;
    expect_error(
        &reply,
        &[-32602],
        "an unknown replayFrom cursor is refused -32602, not resumed without replay",
    )?;
    Ok(())
}

/// The first `session/request_permission` request at or after `from`.
async fn permission_request(
    conn: &mut Connection,
    from: usize,
) -> Result<(Value, Option<Value>), CheckError> {
    let index = conn
        .wait_for_turn("session/request_permission", from, |f| {
            f.is_request() && f.method() == Some("session/request_permission")
        })
        .await?;
    let frame = &conn.frames()[index];
    let id = frame
        .id()
        .cloned()
        .ok_or_else(|| CheckError::Harness("a request without an id".into()))?;
    Ok((id, frame.params().cloned()))
}

async fn v2_027(ctx: Ctx) -> CheckResult {
    ctx.require(capability::PERMISSION)?;
    let WithSession {
        _agent,
        mut conn,
        session,
        ..
    } = open_session(&ctx, PERMISSION).await?;
    let conn = &mut conn;
    conn.set_responder(|r| r.permission = PermissionReply::Ignore);
    let (_, start) = send_prompt(conn, &session, text("ask me first")).await?;
    let (request, params) = permission_request(conn, start).await?;
    let option = option_of_kind(params.as_ref(), "allow_once")
        .or_else(|| option_of_kind(params.as_ref(), "allow_always"));
    conn.send(&json!({"jsonrpc": "2.0", "id": request, "result": permission_outcome(option)}))
        .await?;
    let end = idle_of(conn, &session, start).await?;
    let frames: Vec<&Frame> = conn.frames()[start..=end].iter().collect();
    let updates = updates_of(&frames, &session);
    let Some(blocked) = updates
        .iter()
        .position(|f| is_state(f, &session, "requires_action"))
    else {
        fail!(
            "the session reports state_update requires_action while the permission request waits",
            "{}",
            list(&updates)
        );
    };
    ensure!(
        updates[blocked..]
            .iter()
            .any(|f| is_state(f, &session, "running")),
        "the session reports running again once the permission is answered, before idle",
        "{}",
        list(&updates)
    );
    Ok(())
}

async fn v2_028(ctx: Ctx) -> CheckResult {
    ctx.require(capability::PERMISSION)?;
    let WithSession {
        _agent,
        mut conn,
        session,
        ..
    } = open_session(&ctx, PERMISSION).await?;
    let conn = &mut conn;
    conn.set_responder(|r| r.permission = PermissionReply::Ignore);
    let said = "do not run me unapproved";
    let (_, start) = send_prompt(conn, &session, text(said)).await?;
    let (request, _) = permission_request(conn, start).await?;
    conn.send(&json!({
        "jsonrpc": "2.0",
        "id": request,
        "result": {"outcome": {"outcome": "_ski_conformance_unknown_outcome"}},
    }))
    .await?;
    let end = idle_of(conn, &session, start).await?;
    let frames: Vec<&Frame> = conn.frames()[start..=end].iter().collect();
    let replies: Vec<&Frame> = updates_of(&frames, &session)
        .into_iter()
        .filter(|f| {
            matches!(
                f.update_kind(),
                Some("agent_message" | "agent_message_chunk")
            )
        })
        .collect();
    ensure!(
        replies.is_empty(),
        "an outcome the agent does not know is not an approval: the prompt does not run",
        "{}",
        list(&replies)
    );
    Ok(())
}

/// Runs one turn in each variant of [`TOOL_VARIANTS`] the target declares and passes every
/// frame of each (from the initialize on) to `judge`.
async fn each_tool_variant(
    ctx: &Ctx,
    judge: impl Fn(&[&Frame], &str) -> CheckResult,
) -> CheckResult {
    for (variant, needs) in TOOL_VARIANTS {
        if needs.is_some_and(|c| !ctx.has(c)) {
            continue;
        }
        let mut opened = open(ctx, variant).await?;
        let conn = &mut opened.conn;
        let (session, _) = session(ctx, conn).await?;
        turn(conn, &session, text("run your tools")).await?;
        let frames: Vec<&Frame> = conn.frames().iter().collect();
        judge(&frames, &session)?;
    }
    Ok(())
}

/// Whether `path` is absolute (a Unix or a Windows path).
fn absolute(path: &str) -> bool {
    let bytes = path.as_bytes();
    path.starts_with('/')
        || (bytes.len() > 2
            && bytes[0].is_ascii_alphabetic()
            && bytes[1] == b':'
            && matches!(bytes[2], b'/' | b'\\'))
}

/// The paths a tool call or plan update reports: location paths, diff paths, plan file URIs.
fn reported_paths(update: &Value) -> Vec<String> {
    let mut paths = Vec::new();
    for location in update
        .get("locations")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        if let Some(path) = location.get("path").and_then(Value::as_str) {
            paths.push(path.to_owned());
        }
    }
    for item in update
        .get("content")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        if item.get("type").and_then(Value::as_str) == Some("diff") {
            if let Some(path) = item.get("path").and_then(Value::as_str) {
                paths.push(path.to_owned());
            }
            for change in item
                .get("changes")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                if let Some(path) = change.get("path").and_then(Value::as_str) {
                    paths.push(path.to_owned());
                }
            }
        }
    }
    if let Some(uri) = update.pointer("/plan/uri").and_then(Value::as_str) {
        paths.push(uri.strip_prefix("file://").unwrap_or(uri).to_owned());
    }
    paths
}

async fn v2_033(ctx: Ctx) -> CheckResult {
    each_tool_variant(&ctx, |frames, session| {
        for frame in updates_of(frames, session) {
            let Some(update) = frame.update() else {
                continue;
            };
            for path in reported_paths(update) {
                ensure!(
                    absolute(&path),
                    "every file path the agent reports is absolute",
                    "{path:?} in {}",
                    frame.short(300)
                );
            }
        }
        Ok(())
    })
    .await
}

/// The content blocks of a message update or chunk, or of a tool call's content items.
fn content_blocks(update: &Value) -> Vec<&Value> {
    let kind = update.get("sessionUpdate").and_then(Value::as_str);
    let content = update.get("content");
    match kind {
        Some(k) if MESSAGE_KINDS.contains(&k) => match content {
            Some(Value::Array(blocks)) => blocks.iter().collect(),
            Some(block @ Value::Object(_)) => vec![block],
            _ => Vec::new(),
        },
        Some("tool_call_update" | "tool_call_content_chunk") => content
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter(|item| item.get("type").and_then(Value::as_str) == Some("content"))
            .filter_map(|item| item.get("content"))
            .collect(),
        _ => Vec::new(),
    }
}

async fn v2_034(ctx: Ctx) -> CheckResult {
    let WithSession {
        _agent,
        mut conn,
        session,
        ..
    } = open_session(&ctx, PLAIN).await?;
    let conn = &mut conn;
    let turn = turn(conn, &session, text("what content do you send")).await?;
    for frame in updates_of(&turn_frames(conn, &turn), &session) {
        let Some(update) = frame.update() else {
            continue;
        };
        for block in content_blocks(update) {
            let kind = block.get("type").and_then(Value::as_str);
            ensure!(
                kind.is_some_and(|k| known_or_custom(k, CONTENT_TYPES)),
                "every content block is of a type ACP names or begins with _",
                "{}",
                frame.short(300)
            );
        }
    }
    Ok(())
}

async fn v2_035(ctx: Ctx) -> CheckResult {
    each_tool_variant(&ctx, |frames, _| {
        let asked: Vec<&Frame> = frames
            .iter()
            .copied()
            .filter(|f| f.is_request() && f.method() != Some("session/request_permission"))
            .collect();
        ensure!(
            asked.is_empty(),
            "the agent makes no request beyond session/request_permission of a v2 client that advertised nothing",
            "{}",
            list(&asked)
        );
        Ok(())
    })
    .await
}

async fn v2_036(ctx: Ctx) -> CheckResult {
    let WithSession {
        _agent,
        mut conn,
        session,
        ..
    } = open_session(&ctx, PLAIN).await?;
    let conn = &mut conn;
    let turn = turn(conn, &session, text("which commands do you offer")).await?;
    let frames = turn_frames(conn, &turn);
    let announced: Vec<&Frame> = updates_of(&frames, &session)
        .into_iter()
        .filter(|f| f.update_kind() == Some("available_commands_update"))
        .collect();
    if announced.is_empty() {
        return Err(CheckError::Skip(
            "the turn reported no available_commands_update".into(),
        ));
    }
    for frame in announced {
        let commands = frame
            .update()
            .and_then(|u| u.get("availableCommands"))
            .and_then(Value::as_array);
        for command in commands.into_iter().flatten() {
            let Some(input) = command.get("input").filter(|i| !i.is_null()) else {
                continue;
            };
            ensure!(
                input
                    .get("type")
                    .and_then(Value::as_str)
                    .is_some_and(|t| t == "text" || t.starts_with('_')),
                "an available command's input carries its type (text, or one beginning with _)",
                "{}",
                command
            );
        }
    }
    Ok(())
}

async fn v2_063(ctx: Ctx) -> CheckResult {
    let mut opened = open(&ctx, PLAIN).await?;
    let conn = &mut opened.conn;
    let start = conn.cursor();
    conn.notify("_ski_conformance/unknown_notification", json!({}))
        .await?;
    let reply = conn.call("session/list", json!({})).await?;
    expect_result(
        reply,
        "session/list after an unknown notification answers a result",
    )?;
    let answered: Vec<&Frame> = since(conn, start)
        .into_iter()
        .filter(|f| f.is_response() && f.id().is_none_or(Value::is_null))
        .collect();
    ensure!(
        answered.is_empty(),
        "nothing answers a notification",
        "{}",
        list(&answered)
    );
    Ok(())
}

/// The frames among `messages` without a non-empty `messageId`.
fn without_message_id<'a>(messages: &[&'a Frame]) -> Vec<&'a Frame> {
    messages
        .iter()
        .copied()
        .filter(|f| field(f, "messageId").is_none_or(str::is_empty))
        .collect()
}
