//! Checks of the agent process on stdio: it exits at end of input with its whole process group,
//! writes only ACP messages to stdout, and releases every terminal it creates.

use std::time::Duration;

use serde_json::{Value, json};
use ski::jsonrpc::{VersionField, classify};
use ski::transport::child::procfs;
use tokio::time::Instant;

use super::agent::{Agent, PLAIN, Transport};
use super::connection::{Connection, FrameKind};
use super::exchange::{self, initialize_with, new_session, prompt_ok};
use crate::check::{Check, CheckError, CheckResult, Failure};
use crate::context::Ctx;
use crate::vocabulary::capability;
use crate::{ensure, fail, skip};

/// The checks of this module.
pub fn checks() -> Vec<Check> {
    vec![
        Check::new(
            "ACP-CORE-008",
            "Starts the agent on stdio, initializes, opens a session, closes stdin and requires \
             the process to exit on its own within the timeout.",
            core_008,
        ),
        Check::new(
            "ACP-CORE-009",
            "Starts the agent on stdio (its own process group), runs a session and a turn, \
             closes stdin; after the agent exits no live process may remain in its group.",
            core_009,
        ),
        Check::new(
            "ACP-CORE-011",
            "Advertises terminal, serves terminal/* with a fake terminal, runs a turn of the \
             terminal variant and closes stdin; every created terminal must be released exactly \
             once before the agent exits and never named after its release.",
            core_011,
        ),
        Check::new(
            "ACP-CORE-018",
            "Runs initialize, session/new (where `session` is declared), a turn (where `prompt` \
             is) and stdin EOF on stdio, reads stdout to its end (or until the agent has not \
             exited in 5 s), and requires every byte to be in newline-terminated lines of one \
             JSON-RPC 2.0 message each; a failed step fails the row after the lines are judged.",
            core_018,
        ),
    ]
}

/// How long an agent whose stdin was closed is given to exit (scaled): an idle agent owes its
/// exit at once, and one that has not exited by then will not, so a row does not wait out its
/// timeout class for it.
const EXIT_WAIT: Duration = Duration::from_secs(5);

/// Waits until the agent's process exits by itself; fails after [`EXIT_WAIT`].
async fn exits(ctx: &Ctx, agent: &Agent) -> CheckResult {
    let child = agent
        .child()
        .ok_or_else(|| CheckError::Harness("the stdio agent has no process".into()))?;
    let status = ctx
        .within_for(
            EXIT_WAIT,
            "the agent exits after its stdin is closed",
            child.wait(),
        )
        .await?;
    ctx.note(format!("the agent exited: {status:?}"));
    Ok(())
}

async fn core_008(ctx: Ctx) -> CheckResult {
    let opened = exchange::open_on(&ctx, Transport::Stdio, PLAIN).await?;
    opened.conn.close().await;
    exits(&ctx, &opened.agent).await
}

/// The members of process group `pgid` that are alive (not zombies), as `pid (name) state`.
fn live_members(pgid: u32) -> Option<Vec<String>> {
    if !procfs::readable() {
        return None;
    }
    let pgid = i32::try_from(pgid).ok()?;
    Some(
        procfs::all()
            .into_iter()
            .filter(|p| p.pgid == pgid && !p.has_exited())
            .map(|p| format!("{} ({}) {}", p.pid, p.name, p.state))
            .collect(),
    )
}

async fn core_009(ctx: Ctx) -> CheckResult {
    let mut opened = exchange::open_on(&ctx, Transport::Stdio, PLAIN).await?;
    if ctx.has(capability::PROMPT) {
        prompt_ok(&mut opened.conn, &opened.session, "before the end").await?;
    }
    opened.conn.close().await;
    // What outlives the agent shows only once it exits; not exiting is ACP-CORE-008's to judge.
    if let Err(CheckError::Fail(failure)) = exits(&ctx, &opened.agent).await {
        return Err(CheckError::Blocked(format!(
            "the agent did not exit after its stdin was closed ({}), so what outlives it cannot \
             be seen; ACP-CORE-008 judges the exit",
            failure.actual
        )));
    }
    let pgid = opened
        .agent
        .child()
        .map(ski::transport::child::Child::pid)
        .ok_or_else(|| CheckError::Harness("the stdio agent has no process".into()))?;
    let deadline = Instant::now() + ctx.timeout();
    loop {
        let members = match live_members(pgid) {
            Some(members) => members,
            // Without /proc, any member, a zombie included, counts.
            None if ski::transport::child::group_exists(pgid) => {
                vec![format!("a member of group {pgid}")]
            }
            None => Vec::new(),
        };
        if members.is_empty() {
            return Ok(());
        }
        if Instant::now() >= deadline {
            fail!(
                "no process of the agent's process group outlives the agent",
                "still alive in group {pgid} {:?} after the agent exited: {}",
                ctx.timeout(),
                members.join(", ")
            );
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn core_011(ctx: Ctx) -> CheckResult {
    let mut agent = Agent::start_on(&ctx, Transport::Stdio, "terminal").await?;
    let mut conn = agent.connect().await?;
    conn.set_responder(|r| r.terminals = true);
    let mut caps = exchange::bare_capabilities();
    caps["terminal"] = json!(true);
    initialize_with(&mut conn, caps).await?;
    let session = new_session(&ctx, &mut conn).await?;
    let turn = exchange::prompt(&mut conn, &session, "run the command").await?;
    conn.close().await;
    exits(&ctx, &agent).await?;
    conn.wait_closed(ctx.timeouts().scale(Duration::from_secs(2)))
        .await;
    let requests: Vec<(String, Option<String>, usize)> = conn
        .frames()
        .iter()
        .filter(|f| f.is_request() && f.method().is_some_and(|m| m.starts_with("terminal/")))
        .map(|f| {
            (
                f.method().unwrap_or_default().to_owned(),
                f.params()
                    .and_then(|p| p.get("terminalId"))
                    .and_then(Value::as_str)
                    .map(str::to_owned),
                f.seq,
            )
        })
        .collect();
    let created = requests
        .iter()
        .filter(|(m, _, _)| m == "terminal/create")
        .count();
    ensure!(
        created > 0,
        "the terminal variant creates a terminal through terminal/create",
        "no terminal/create; {}",
        turn.describe()
    );
    for n in 1..=created {
        let id = format!("term-{n}");
        let releases: Vec<usize> = requests
            .iter()
            .filter(|(m, t, _)| m == "terminal/release" && t.as_deref() == Some(id.as_str()))
            .map(|(_, _, seq)| *seq)
            .collect();
        if releases.len() != 1 {
            return Err(Failure::new(
                "every terminal is released exactly once",
                format!("one terminal/release of {id} before the agent exits"),
            )
            .actual(format!(
                "{} release(s); terminal requests {requests:?}",
                releases.len()
            ))
            .into());
        }
        let after: Vec<_> = requests
            .iter()
            .filter(|(_, t, seq)| t.as_deref() == Some(id.as_str()) && *seq > releases[0])
            .collect();
        ensure!(
            after.is_empty(),
            "no terminal/* request names a terminal after its release",
            "{after:?}"
        );
    }
    Ok(())
}

/// How long `ACP-CORE-018` waits for the agent to exit after its stdin is closed (scaled).
const STDOUT_END: Duration = Duration::from_secs(5);

/// Runs the agent through what `ctx` declares (initialize; a session; a turn); the first step
/// that fails ends it.
async fn speak_on_stdout(ctx: &Ctx, conn: &mut Connection) -> CheckResult {
    exchange::initialize(conn).await?;
    if ctx.has(capability::SESSION) {
        let created = exchange::create_session(ctx, conn).await?;
        let session = exchange::session_id_of(&created, "session/new")?;
        if ctx.has(capability::PROMPT) {
            prompt_ok(conn, &session, "only messages on stdout").await?;
        }
    }
    Ok(())
}

/// Needs only an agent on stdio: an agent whose messages span several lines never gets an answer
/// of `initialize` read, so discovery declares no `session`, and the row that judges its stdout
/// must still run. Every line is judged before a failed step is reported (as *not tested* where
/// `session` is not declared: the initialize rows judge that step); an agent that does not
/// exit once stdin is closed is judged on what it wrote until the runner stopped waiting
/// (exiting is `ACP-CORE-008`'s to judge).
async fn core_018(ctx: Ctx) -> CheckResult {
    let mut agent = Agent::start_on(&ctx, Transport::Stdio, PLAIN).await?;
    let mut conn = agent.connect().await?;
    let spoken = speak_on_stdout(&ctx, &mut conn).await;
    conn.close().await;
    let child = agent
        .child()
        .ok_or_else(|| CheckError::Harness("the stdio agent has no process".into()))?;
    let waited = ctx
        .within_for(
            STDOUT_END,
            "the agent exits after its stdin is closed",
            child.wait(),
        )
        .await;
    match waited {
        Ok(status) => ctx.note(format!("the agent exited: {status:?}")),
        Err(CheckError::Fail(_)) => ctx.note(
            "the agent had not exited after its stdin was closed: judged what it wrote until then",
        ),
        Err(other) => return Err(other),
    }
    conn.wait_closed(ctx.timeouts().scale(Duration::from_secs(2)))
        .await;
    for frame in conn.frames() {
        let valid = frame.kind == FrameKind::Text
            && frame
                .value
                .clone()
                .is_some_and(|v| v.is_object() && classify(v, VersionField::Required).is_ok());
        if !valid {
            let why = match frame.kind {
                FrameKind::Unterminated => "a last line without a newline",
                _ if frame.text.trim().is_empty() => "a blank line",
                _ => "a line that is not one JSON-RPC 2.0 message",
            };
            fail!(
                "every byte on stdout is in a newline-terminated line of one JSON-RPC message",
                "{why}: #{} {:?}",
                frame.seq,
                frame.short(200)
            );
        }
    }
    match spoken {
        // Discovery could not run the agent as far as a session: its stdout is clean as far as
        // it went, and what stopped it is for the initialize rows to judge.
        Err(CheckError::Fail(failure)) if !ctx.has(capability::SESSION) => skip!(
            "every line the agent wrote is one JSON-RPC message, but the run stopped at a step: {}",
            failure.actual
        ),
        other => other,
    }
}
