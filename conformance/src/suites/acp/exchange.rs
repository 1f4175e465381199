//! Typed steps of an ACP exchange on a [`Connection`]: `initialize`, `session/new`, prompt turns
//! with the updates they produced, cancellation, and the judgements many checks share.
//!
//! Steps that set a scenario up fail the check when the agent does not play along (a check of
//! cancellation cannot judge an agent that cannot open a session), with Expected/Actual naming
//! the step.

use std::time::Duration;

use serde_json::{Value, json};

use super::agent::{Agent, Transport, Variant};
use super::connection::{Connection, Fault, Frame, Reply, describe};
use crate::check::{CheckError, Failure};
use crate::context::Ctx;
use crate::vocabulary::capability;

/// How long the harness listens for frames that must not come (late updates, a second answer).
pub const QUIET: Duration = Duration::from_millis(300);

/// Update kinds that carry turn content (E-ACP-20): none may follow a cancel in ski's reading of
/// WS-013, and none may follow the prompt result (ACP-CORE-003).
pub const CONTENT_KINDS: &[&str] = &[
    "user_message_chunk",
    "agent_message_chunk",
    "agent_thought_chunk",
    "tool_call",
    "tool_call_update",
    "plan",
    "available_commands_update",
];

/// Update kinds that carry a turn's own content: [`CONTENT_KINDS`] less
/// `available_commands_update`, which describes the session (its commands), not the turn, and
/// which ACP lets an agent send at any time (E-ACP-61). What ACP's rules on a turn's end judge.
pub const TURN_CONTENT_KINDS: &[&str] = &[
    "user_message_chunk",
    "agent_message_chunk",
    "agent_thought_chunk",
    "tool_call",
    "tool_call_update",
    "plan",
];

/// Client capabilities that advertise nothing: no file system, no terminal.
pub fn bare_capabilities() -> Value {
    json!({"fs": {"readTextFile": false, "writeTextFile": false}, "terminal": false})
}

/// The params of an `initialize` for protocol version 1 with `capabilities`.
pub fn initialize_params(capabilities: Value) -> Value {
    json!({
        "protocolVersion": 1,
        "clientCapabilities": capabilities,
        "clientInfo": {"name": "ski-conformance", "version": env!("CARGO_PKG_VERSION")},
    })
}

/// `initialize` with bare capabilities; the result.
pub async fn initialize(conn: &mut Connection) -> Result<Value, CheckError> {
    initialize_with(conn, bare_capabilities()).await
}

/// `initialize` with `capabilities`, then `authenticate` when the profile names an auth
/// method (`[suites.acp.auth]`, `--auth-method`, or what discovery chose); the `initialize`
/// result. A refused `authenticate` blocks the row: it is the set-up, not what the row judges.
pub async fn initialize_with(
    conn: &mut Connection,
    capabilities: Value,
) -> Result<Value, CheckError> {
    let init = initialize_bare(conn, capabilities).await?;
    authenticate_configured(conn).await?;
    Ok(init)
}

/// `initialize` with `capabilities` and nothing after it (for the rows that judge
/// authentication themselves); the result.
pub async fn initialize_bare(
    conn: &mut Connection,
    capabilities: Value,
) -> Result<Value, CheckError> {
    conn.call_ok("initialize", initialize_params(capabilities))
        .await
}

/// Calls `authenticate` with the profile's auth method, if it names one (a refusal blocks the
/// row); for a row that sends its own `initialize`.
pub async fn authenticate_configured(conn: &mut Connection) -> Result<(), CheckError> {
    let Some(method) = conn.ctx().section().auth.as_ref().map(|a| a.method.clone()) else {
        return Ok(());
    };
    match conn
        .call("authenticate", json!({"methodId": method}))
        .await?
    {
        Ok(_) => Ok(()),
        Err(fault) => Err(CheckError::Blocked(format!(
            "the agent refused authenticate with method {method:?} ({}); the row needs an \
             authenticated connection (check the method and the key it reads)",
            fault.raw
        ))),
    }
}

/// `session/new` in the scenario's temp dir; the result. A refusal the row cannot get past
/// blocks it instead of failing it ([`expect_session`]).
pub async fn create_session(ctx: &Ctx, conn: &mut Connection) -> Result<Value, CheckError> {
    let reply = conn.call("session/new", new_session_params(ctx)).await?;
    expect_session(ctx, reply, "session/new succeeds")
}

/// Requires `reply`, the answer to a `session/new`, to be a result (else the failure `check`).
/// A row that needs the session cannot judge anything without it, so it is blocked instead when
/// the refusal is -32000 (authentication required), or, whatever its code, when the target does
/// not declare `session`: discovery could not open a session either, and the row only needs one
/// to judge something else.
pub fn expect_session(ctx: &Ctx, reply: Reply, check: &str) -> Result<Value, CheckError> {
    unless_auth_required(ctx, &reply)?;
    match reply {
        Err(fault) if !ctx.has(capability::SESSION) => Err(CheckError::Blocked(format!(
            "the agent refused session/new ({}) and the target does not declare `session` (a \
             session without set-up; discovery could not open one either, its notes in the \
             report say why); the row needs a session",
            fault.raw
        ))),
        other => expect_result(other, check),
    }
}

/// Blocks the row when `reply` refuses with -32000 (authentication required): what the row
/// judges lies behind it.
pub fn unless_auth_required(ctx: &Ctx, reply: &Reply) -> Result<(), CheckError> {
    match reply {
        Err(fault) if fault.code == Some(AUTH_REQUIRED) => Err(CheckError::Blocked(
            blocked_by_auth(fault, ctx.section().auth.is_some()),
        )),
        _ => Ok(()),
    }
}

/// ACP's error code for work refused until the client authenticates.
pub const AUTH_REQUIRED: i64 = -32000;

/// Why a row is blocked when `session/new` answered -32000.
pub fn blocked_by_auth(fault: &Fault, authenticated: bool) -> String {
    if authenticated {
        format!(
            "the agent refused session/new with -32000 (authentication required) although the \
             connection authenticated with the profile's method: {}",
            fault.raw
        )
    } else {
        format!(
            "the agent refused session/new with -32000 (authentication required): {}; \
             authenticate with --auth-method ID (and the key its method reads) or the \
             profile's [suites.acp.auth]",
            fault.raw
        )
    }
}

/// The params of a `session/new` in the scenario's temp dir.
pub fn new_session_params(ctx: &Ctx) -> Value {
    json!({"cwd": ctx.temp_dir().display().to_string(), "mcpServers": []})
}

/// `session/new` in the scenario's temp dir; the session id.
pub async fn new_session(ctx: &Ctx, conn: &mut Connection) -> Result<String, CheckError> {
    let result = create_session(ctx, conn).await?;
    session_id_of(&result, "session/new")
}

/// The `sessionId` of a result.
pub fn session_id_of(result: &Value, method: &str) -> Result<String, CheckError> {
    result
        .get("sessionId")
        .and_then(Value::as_str)
        .map(str::to_owned)
        .ok_or_else(|| {
            Failure::new(
                format!("{method} returns a sessionId"),
                format!("a {method} result with a string sessionId"),
            )
            .actual(result.to_string())
            .into()
        })
}

/// An agent with one initialized connection and one session.
#[derive(Debug)]
pub struct Opened {
    /// The agent.
    pub agent: Agent,
    /// The connection.
    pub conn: Connection,
    /// The `initialize` result.
    pub init: Value,
    /// The session id.
    pub session: String,
    /// The `session/new` result.
    pub created: Value,
}

/// Starts `variant` over the row's transport, initializes and opens a session.
pub async fn open(ctx: &Ctx, variant: Variant) -> Result<Opened, CheckError> {
    let transport = super::agent::pick(ctx)?;
    open_on(ctx, transport, variant).await
}

/// Starts `variant` over `transport`, initializes and opens a session.
pub async fn open_on(
    ctx: &Ctx,
    transport: Transport,
    variant: Variant,
) -> Result<Opened, CheckError> {
    let mut agent = Agent::start_on(ctx, transport, variant).await?;
    let mut conn = agent.connect().await?;
    let init = initialize(&mut conn).await?;
    let created = create_session(ctx, &mut conn).await?;
    let session = session_id_of(&created, "session/new")?;
    Ok(Opened {
        agent,
        conn,
        init,
        session,
        created,
    })
}

/// A prompt of one text block.
pub fn text_prompt(text: &str) -> Value {
    json!([{"type": "text", "text": text}])
}

/// One prompt turn: its request, where its frames start and end, and its answer.
#[derive(Debug, Clone)]
pub struct Turn {
    /// The session.
    pub session: String,
    /// The id of the `session/prompt` request.
    pub id: Value,
    /// The index of the first frame read after the request was sent.
    pub start: usize,
    /// The index of the response frame.
    pub end: usize,
    /// The answer.
    pub reply: Reply,
}

impl Turn {
    /// The `stopReason` of a result.
    pub fn stop_reason(&self) -> Option<&str> {
        self.reply.as_ref().ok()?.get("stopReason")?.as_str()
    }

    /// The error of an error answer.
    pub fn fault(&self) -> Option<&Fault> {
        self.reply.as_ref().err()
    }

    /// The session's updates read between the request and the response.
    pub fn updates<'a>(&self, conn: &'a Connection) -> Vec<&'a Frame> {
        conn.frames()[self.start..self.end]
            .iter()
            .filter(|f| f.is_update_for(&self.session))
            .collect()
    }

    /// The `sessionUpdate` kinds of [`Turn::updates`], in order.
    pub fn kinds(&self, conn: &Connection) -> Vec<String> {
        kinds(&self.updates(conn))
    }

    /// The answer, described for Actual lines.
    pub fn describe(&self) -> String {
        describe(&self.reply)
    }

    /// Fails unless the turn ended with a result whose stopReason is `reason`.
    pub fn expect_stop(&self, reason: &str, check: &str) -> Result<(), CheckError> {
        if self.stop_reason() == Some(reason) {
            Ok(())
        } else {
            Err(Failure::new(
                check,
                format!("the session/prompt result {{\"stopReason\": \"{reason}\"}}"),
            )
            .actual(self.describe())
            .into())
        }
    }
}

/// The `sessionUpdate` kinds of `frames`, in order.
pub fn kinds(frames: &[&Frame]) -> Vec<String> {
    frames
        .iter()
        .filter_map(|f| f.update_kind().map(str::to_owned))
        .collect()
}

/// Sends `session/prompt`; the request id and the cursor before it.
pub async fn start_prompt(
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

/// Waits for the answer of a prompt started with [`start_prompt`].
pub async fn finish_prompt(
    conn: &mut Connection,
    session: &str,
    id: Value,
    start: usize,
) -> Result<Turn, CheckError> {
    let what = format!("the answer to session/prompt (id {id})");
    let end = conn.wait_for_turn(&what, start, |f| f.answers(&id)).await?;
    let reply = conn.frames()[end]
        .reply()
        .ok_or_else(|| CheckError::Harness("a response without a reply".into()))?;
    Ok(Turn {
        session: session.to_owned(),
        id,
        start,
        end,
        reply,
    })
}

/// One whole prompt turn with a text prompt.
pub async fn prompt(conn: &mut Connection, session: &str, text: &str) -> Result<Turn, CheckError> {
    let (id, start) = start_prompt(conn, session, text_prompt(text)).await?;
    finish_prompt(conn, session, id, start).await
}

/// A whole prompt turn that must end `end_turn`.
pub async fn prompt_ok(
    conn: &mut Connection,
    session: &str,
    text: &str,
) -> Result<Turn, CheckError> {
    let turn = prompt(conn, session, text).await?;
    turn.expect_stop("end_turn", "the prompt turn ends end_turn")?;
    Ok(turn)
}

/// Sends `session/cancel` for `session`.
pub async fn cancel(conn: &Connection, session: &str) -> Result<(), CheckError> {
    conn.notify("session/cancel", json!({"sessionId": session}))
        .await
}

/// Whether the agent advertised ski's `execution_state_update` (E-ACP-31).
pub fn reports_execution_state(init: &Value) -> bool {
    init.pointer("/agentCapabilities/_meta/ski/executionState")
        .is_some()
}

/// Waits until a turn of `session` started at `from` is observably running: the agent's
/// `execution_state_update` `running` when it advertises execution state; otherwise the turn is
/// taken to run once its request was sent (agents read their input in order).
pub async fn wait_running(
    conn: &mut Connection,
    init: &Value,
    session: &str,
    from: usize,
) -> Result<(), CheckError> {
    if !reports_execution_state(init) {
        return Ok(());
    }
    let what = format!("execution_state_update running for {session}");
    conn.wait_for(&what, from, |f| {
        f.is_update_for(session) && execution_state(f) == Some("running")
    })
    .await?;
    Ok(())
}

/// The state of an `execution_state_update` frame.
pub fn execution_state(frame: &Frame) -> Option<&str> {
    if frame.update_kind() != Some("execution_state_update") {
        return None;
    }
    frame.update()?.pointer("/executionState/state")?.as_str()
}

/// The text of every `agent_message_chunk` among `frames`, joined.
pub fn agent_text(frames: &[&Frame]) -> String {
    frames
        .iter()
        .filter(|f| f.update_kind() == Some("agent_message_chunk"))
        .filter_map(|f| f.update()?.pointer("/content/text")?.as_str())
        .collect()
}

/// Content updates (E-ACP-20) of `session` among `frames`.
pub fn content_updates<'a>(frames: &[&'a Frame], session: &str) -> Vec<&'a Frame> {
    frames
        .iter()
        .copied()
        .filter(|f| {
            f.is_update_for(session) && f.update_kind().is_some_and(|k| CONTENT_KINDS.contains(&k))
        })
        .collect()
}

/// Turn content updates ([`TURN_CONTENT_KINDS`]) of `session` among `frames`.
pub fn turn_content_updates<'a>(frames: &[&'a Frame], session: &str) -> Vec<&'a Frame> {
    frames
        .iter()
        .copied()
        .filter(|f| {
            f.is_update_for(session)
                && f.update_kind()
                    .is_some_and(|k| TURN_CONTENT_KINDS.contains(&k))
        })
        .collect()
}

/// The frames of `conn` from `from` on.
pub fn since(conn: &Connection, from: usize) -> Vec<&Frame> {
    conn.frames()[from.min(conn.frames().len())..]
        .iter()
        .collect()
}

/// Lists frames for an Actual line.
pub fn list(frames: &[&Frame]) -> String {
    if frames.is_empty() {
        return "none".to_owned();
    }
    frames
        .iter()
        .map(|f| format!("#{} {}", f.seq, f.short(160)))
        .collect::<Vec<_>>()
        .join(" | ")
}

/// Fails unless `reply` is an error with one of `codes`.
pub fn expect_error(reply: &Reply, codes: &[i64], check: &str) -> Result<Fault, CheckError> {
    match reply {
        Err(fault) if fault.code.is_some_and(|c| codes.contains(&c)) => Ok(fault.clone()),
        other => {
            let wanted = codes
                .iter()
                .map(i64::to_string)
                .collect::<Vec<_>>()
                .join(" or ");
            Err(
                Failure::new(check, format!("an error response with code {wanted}"))
                    .actual(describe(other))
                    .into(),
            )
        }
    }
}

/// Fails unless `reply` is a result; returns it.
pub fn expect_result(reply: Reply, check: &str) -> Result<Value, CheckError> {
    match reply {
        Ok(result) => Ok(result),
        Err(fault) => Err(Failure::new(check, "a result")
            .actual(format!("error {}", fault.raw))
            .into()),
    }
}
