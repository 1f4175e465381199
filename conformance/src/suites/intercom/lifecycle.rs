//! S010–S026: ACP mode's driver rows judged through their observable equivalents (what the
//! spawned agent receives, what the thread shows, the session row) and the session lifecycle:
//! spawn, status, clearance, stop, exit, crash, the session limit, the startup timeout, an empty
//! prompt. Each row runs in every dialect the target declares where it applies.

use serde_json::{Value, json};

use crate::sqlite;
use crate::{Check, CheckError, CheckResult, Ctx, OrFail, ensure, ensure_eq};

use super::agents::{
    AcpWorld, Dialect, Options, Started, each_dialect, ensure_reply_contains, with_reply,
};
use super::harness::{ALICE, CHANNEL_X, SETTLED, has_button, shows};

const BOTH: &[Dialect] = &[Dialect::Intercom, Dialect::Acp];
const STREAM: &[Dialect] = &[Dialect::Intercom];

/// The final message the rows wait for (override `final`): S040's text, which S014, S015, S016
/// and S021 ("final message posted to thread") look for too.
pub const SESSION_ENDED: &str = "Session ended";

/// The `ski-mock-agent` script of S025's agent, which never sends a first message: it writes
/// nothing at all on its stdout, whatever the server sends (no greeting, no answer to a JSON-RPC
/// handshake, no prompt answered, no error for a line without `jsonrpc`), so no dialect's server
/// can take anything for a first message.
pub const SILENT_AGENT: &str = r#"name = "silent"
description = "writes nothing on stdout, whatever it reads"
personality = "intercom"

[intercom]
greeting = ""
heartbeat_ms = 0

[faults]
hang_on = ["initialize", "authenticate", "session/new", "session/load", "session/prompt", "prompt/send", "nudge", "session/interrupt"]
"#;

/// The checks of this part.
pub fn checks() -> Vec<Check> {
    vec![
        Check::new(
            "S010",
            "Starts an ACP session whose agent asks for clearance, clicks Accept; expects the agent to receive the approval (clearance/response approved, or the allow option in ACP) and the request no longer pending.",
            s010,
        ),
        Check::new(
            "S011",
            "As S010 with Reject and the reason \"wrong file\" in the modal; expects clearance/response rejected (the reject option in ACP).",
            s011,
        ),
        Check::new(
            "S012",
            "Clicks Accept twice on one approval (the second click names a request that is no longer pending); expects the second refused as not found and nothing more written to the agent.",
            s012,
        ),
        Check::new(
            "S013",
            "Steers an active ACP session with \"do X\"; expects the agent to receive it (prompt/send, or session/prompt in ACP).",
            s013,
        ),
        Check::new(
            "S014",
            "The agent closes its stdin, then the operator steers (again once the session is interrupted, for a server that learns of the closed stream from the write); expects the error \"write failed: stream closed\" and, once the final message (override final) is in the thread, the session interrupted.",
            s014,
        ),
        Check::new(
            "S015",
            "Stops an active ACP session; expects the agent to receive one session/interrupt (session/cancel in ACP) by the time the final message (override final) is in the thread.",
            s015,
        ),
        Check::new(
            "S016",
            "Stops a session, then stops it again by id; expects no error, no second final message (override final) and the row still terminated.",
            s016,
        ),
        Check::new(
            "S017",
            "The agent asks two clearances; both Accept buttons are clicked at once; expects each answered on the stream once, both approved.",
            s017,
        ),
        Check::new(
            "S018",
            "session-start \"build a web server\"; expects a spawned agent (it greets the control socket with the session's id from INTERCOM_SESSION_ID), the prompt sent on the stream, a thread root, and an active acp row with that thread_ts.",
            s018,
        ),
        Check::new(
            "S019",
            "The agent reports status; expects it posted as a reply in the session's thread.",
            s019,
        ),
        Check::new(
            "S020",
            "The agent asks for clearance; expects an approval message with Accept and Reject in the thread.",
            s020,
        ),
        Check::new(
            "S021",
            "session-stop; expects a final message (override final) in the thread, the agent process gone and the row terminated.",
            s021,
        ),
        Check::new(
            "S022",
            "The agent exits with code 0; expects the row terminated and \"Task completed\" in the thread.",
            s022,
        ),
        Check::new(
            "S023",
            "The agent exits with code 1; expects the row interrupted and \"Agent crashed (exit code: 1)\" in the thread.",
            s023,
        ),
        Check::new(
            "S024",
            "With max_sessions = 1 and one live session, session-start again; expects \"Maximum concurrent sessions reached\" and no second session or agent.",
            s024,
        ),
        Check::new(
            "S025",
            "An agent that writes nothing at all on its stdout (it answers no handshake either), with a 500 ms startup timeout; expects \"did not respond within startup timeout\" posted (in the thread or the channel), the row terminated and the process killed.",
            s025,
        ),
        Check::new(
            "S026",
            "session-start \"\" (or, for a server that keeps the quotes as part of the prompt, session-start with nothing after it); expects \"prompt must not be empty\" and no session or agent.",
            s026,
        ),
    ]
}

/// Waits for the approval message of a session.
pub async fn approval_message(
    world: &AcpWorld,
    started: &Started,
) -> Result<ski_mocks::slack::Message, CheckError> {
    let thread = started.root.ts().to_string();
    world
        .world
        .approval(
            "an approval message with Accept in the thread",
            |m| m.thread_ts() == Some(thread.as_str()),
            "approve_accept",
        )
        .await
}

/// The status of one approval row.
pub async fn approval_status(
    world: &AcpWorld,
    session_id: &str,
    request_id: &str,
) -> Result<String, CheckError> {
    let expected = format!("an approval row {request_id}");
    let rows = world
        .world
        .read(
            "SELECT status FROM approval_request WHERE session_id = ?1 AND request_id = ?2",
            &[json!(session_id), json!(request_id)],
        )
        .await?
        .or_fail(expected.clone())?;
    let row = rows.first().or_fail(expected)?;
    sqlite::text(row.first(), "status").or_fail("an approval row's status")
}

async fn decide(ctx: Ctx, dialect: Dialect, reject: bool) -> CheckResult {
    let world = AcpWorld::start(&ctx, Options::new(dialect)).await?;
    let started = world.start_session_asking_clearance(CHANNEL_X).await?;
    let message = approval_message(&world, &started).await?;
    if reject {
        world
            .world
            .reject_with_reason(&message, "wrong file")
            .await?;
    } else {
        world.world.click(&message, "approve_accept", ALICE)?;
    }
    match dialect {
        Dialect::Intercom | Dialect::IntercomJsonrpc => {
            started.agent.wait_method("clearance/response", 1).await?;
            let responses = started.agent.received_method("clearance/response")?;
            ensure_eq!(1, responses.len(), "clearance/response lines");
            ensure_eq!(json!("req-001"), responses[0]["id"], "the response's id");
            let expected = if reject { "rejected" } else { "approved" };
            ensure_eq!(
                json!(expected),
                responses[0]["params"]["status"],
                "params.status"
            );
            world
                .reply_with(&started.root, &format!("clearance req-001: {expected}"))
                .await?;
        }
        Dialect::Acp => {
            let option = if reject { "reject" } else { "allow" };
            world
                .reply_with(&started.root, &format!("clearance: selected {option}"))
                .await?;
        }
    }
    world.server.stop().await?;
    Ok(())
}

async fn s010(ctx: Ctx) -> CheckResult {
    each_dialect(&ctx, BOTH, |ctx, dialect| decide(ctx, dialect, false)).await
}

async fn s011(ctx: Ctx) -> CheckResult {
    each_dialect(&ctx, BOTH, |ctx, dialect| decide(ctx, dialect, true)).await
}

async fn s012(ctx: Ctx) -> CheckResult {
    each_dialect(&ctx, STREAM, |ctx, dialect| async move {
        let world = AcpWorld::start(&ctx, Options::new(dialect)).await?;
        let started = world.start_session_asking_clearance(CHANNEL_X).await?;
        let message = approval_message(&world, &started).await?;
        // Two clicks on the same buttons, injected before the server can replace them: the
        // second names a request the first one already resolved.
        world.world.click(&message, "approve_accept", ALICE)?;
        world.world.click(&message, "approve_accept", ALICE)?;
        started.agent.wait_method("clearance/response", 1).await?;
        world
            .reply_with(&started.root, "clearance req-001: approved")
            .await?;
        world
            .server
            .wait_log(&ctx.text("log", "no pending request"))
            .await?;
        // The stream is ordered: once the agent has this steering line, anything the second
        // click wrote would be there before it.
        world
            .world
            .slash_command(CHANNEL_X, ALICE, "steer after the second click")
            .await?;
        started.agent.wait_method(prompt_method(dialect), 2).await?;
        ensure_eq!(
            1,
            started.agent.received_method("clearance/response")?.len(),
            "clearance/response lines after two clicks"
        );
        world.server.stop().await?;
        Ok(())
    })
    .await
}

async fn s013(ctx: Ctx) -> CheckResult {
    each_dialect(&ctx, BOTH, |ctx, dialect| async move {
        let world = AcpWorld::start(&ctx, Options::new(dialect)).await?;
        let started = world.start_session(CHANNEL_X, "hello there").await?;
        let method = prompt_method(dialect);
        started.agent.wait_method(method, 1).await?;
        world.reply_with(&started.root, "hello there").await?;
        world
            .world
            .slash_command(CHANNEL_X, ALICE, "steer do X")
            .await?;
        started.agent.wait_method(method, 2).await?;
        let prompts = started.agent.received_method(method)?;
        ensure_eq!(
            "do X".to_string(),
            prompt_text(&prompts[1]),
            "the steering text the agent received"
        );
        world.server.stop().await?;
        Ok(())
    })
    .await
}

/// The method that carries prompts in a dialect.
pub fn prompt_method(dialect: Dialect) -> &'static str {
    dialect.prompt_method()
}

/// The text of a `prompt/send` or `session/prompt`.
pub fn prompt_text(message: &Value) -> String {
    message["params"]["text"]
        .as_str()
        .or_else(|| message["params"]["prompt"][0]["text"].as_str())
        .unwrap_or_default()
        .to_string()
}

async fn s014(ctx: Ctx) -> CheckResult {
    each_dialect(&ctx, STREAM, |ctx, dialect| async move {
        let world = AcpWorld::start(&ctx, Options::new(dialect)).await?;
        let started = world.start_session(CHANNEL_X, "hello there").await?;
        started.agent.wait_method(prompt_method(dialect), 1).await?;
        started.agent.run(json!([{ "close_stdin": true }])).await?;
        started
            .agent
            .command(json!({"cmd": "wait", "stdin": "closed"}))
            .await?;
        let expected = ctx.text("error", "write failed: stream closed");
        let mut reply = world.slash(CHANNEL_X, "steer do X").await?;
        if !reply.contains(&expected) {
            // A server that writes to the agent after answering learns of the closed stream
            // only from that write. Once the row shows it knows (the session interrupted), the
            // stream is closed as the row's Given has it, and the next steer must say so.
            world
                .world
                .session_when(0, "is interrupted", |row| row.status == "interrupted")
                .await?;
            reply = world.slash(CHANNEL_X, "steer do X").await?;
        }
        ensure_reply_contains("the steer reply names the closed stream", &reply, &expected)?;
        world
            .final_reply(
                &started.root,
                &started.row.id,
                &ctx.text("final", SESSION_ENDED),
            )
            .await?;
        world.ensure_status(&started.row.id, "interrupted").await?;
        world.server.stop().await?;
        Ok(())
    })
    .await
}

async fn s015(ctx: Ctx) -> CheckResult {
    each_dialect(&ctx, BOTH, |ctx, dialect| async move {
        let world = AcpWorld::start(&ctx, Options::new(dialect)).await?;
        let started = world.start_session(CHANNEL_X, "hello there").await?;
        started.agent.wait_method(prompt_method(dialect), 1).await?;
        world.reply_with(&started.root, "hello there").await?;
        world
            .world
            .slash_command(CHANNEL_X, ALICE, "session-stop")
            .await?;
        world
            .final_reply(
                &started.root,
                &started.row.id,
                &ctx.text("final", SESSION_ENDED),
            )
            .await?;
        // The stop may reach the agent a moment after the thread says the session ended (and
        // the agent may be gone by then): read its transcript until the stop is there, for at
        // most SETTLED more, then count.
        let stop = match dialect {
            Dialect::Intercom | Dialect::IntercomJsonrpc => "session/interrupt",
            Dialect::Acp => "session/cancel",
        };
        let since = tokio::time::Instant::now();
        while started.agent.received_method(stop)?.is_empty()
            && since.elapsed() < ctx.scaled(SETTLED)
        {
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        match dialect {
            Dialect::Intercom | Dialect::IntercomJsonrpc => {
                let interrupts = started.agent.received_method("session/interrupt")?;
                ensure_eq!(1, interrupts.len(), "session/interrupt lines");
            }
            Dialect::Acp => {
                let cancels = started.agent.received_method("session/cancel")?;
                ensure_eq!(1, cancels.len(), "session/cancel lines");
                ensure!(
                    cancels[0]["params"]["sessionId"].is_string(),
                    "session/cancel names the agent's session"
                );
            }
        }
        world.server.stop().await?;
        Ok(())
    })
    .await
}

async fn s016(ctx: Ctx) -> CheckResult {
    each_dialect(&ctx, STREAM, |ctx, dialect| async move {
        let world = AcpWorld::start(&ctx, Options::new(dialect)).await?;
        let started = world.start_session(CHANNEL_X, "hello there").await?;
        world
            .world
            .slash_command(CHANNEL_X, ALICE, "session-stop")
            .await?;
        let ended = ctx.text("final", SESSION_ENDED);
        world
            .final_reply(&started.root, &started.row.id, &ended)
            .await?;
        let again = world
            .world
            .slash_command(
                CHANNEL_X,
                ALICE,
                &format!("session-stop {}", started.row.id),
            )
            .await?
            .unwrap_or_default();
        ensure!(
            !again.to_lowercase().starts_with("error"),
            format!(
                "{}: {}",
                "a second stop is not an error", "a reply without an error"
            ),
            "{}",
            again
        );
        let finals = world
            .replies(&started.root)
            .iter()
            .filter(|m| shows(m, &ended))
            .count();
        ensure_eq!(1, finals, "final messages in the thread");
        world.ensure_status(&started.row.id, "terminated").await?;
        world.server.stop().await?;
        Ok(())
    })
    .await
}

async fn s017(ctx: Ctx) -> CheckResult {
    each_dialect(&ctx, STREAM, |ctx, dialect| async move {
        let world = AcpWorld::start(&ctx, Options::new(dialect)).await?;
        let started = world.start_session(CHANNEL_X, "hello there").await?;
        // After a JSON-RPC handshake, a server may skip what comes before its end; and the
        // row's clearances are asked in an active session: its first turn answered in the thread.
        started.agent.wait_method(prompt_method(dialect), 1).await?;
        world.reply_with(&started.root, "hello there").await?;
        for id in ["req-001", "req-002"] {
            started
                .agent
                .send(json!({"method": "clearance/request", "id": id, "params": {
                    "title": format!("change {id}"), "file_path": format!("src/{id}.rs"),
                    "risk_level": "low", "diff": "+x\n"}}))
                .await?;
        }
        let thread = started.root.ts().to_string();
        let first = approval_message(&world, &started).await?;
        let first_ts = first.ts().to_string();
        let second = world
            .world
            .approval(
                "a second approval message",
                |m| m.thread_ts() == Some(thread.as_str()) && m.ts() != first_ts,
                "approve_accept",
            )
            .await?;
        world.world.click(&first, "approve_accept", ALICE)?;
        world.world.click(&second, "approve_accept", ALICE)?;
        started.agent.wait_method("clearance/response", 2).await?;
        let mut ids: Vec<String> = started
            .agent
            .received_method("clearance/response")?
            .iter()
            .map(|r| r["id"].as_str().unwrap_or_default().to_string())
            .collect();
        ids.sort();
        ensure_eq!(
            vec!["req-001".to_string(), "req-002".to_string()],
            ids,
            "the answered ids"
        );
        for response in started.agent.received_method("clearance/response")? {
            ensure_eq!(
                json!("approved"),
                response["params"]["status"],
                "the status of {}",
                response["id"]
            );
        }
        world.server.stop().await?;
        Ok(())
    })
    .await
}

async fn s018(ctx: Ctx) -> CheckResult {
    each_dialect(&ctx, BOTH, |ctx, dialect| async move {
        let world = AcpWorld::start(&ctx, Options::new(dialect)).await?;
        let prompt = "build a web server";
        let started = world
            .start_session(CHANNEL_X, &format!("\"{prompt}\""))
            .await?;
        let method = prompt_method(dialect);
        started.agent.wait_method(method, 1).await?;
        let first = started.agent.received_method(method)?;
        // The matrix types the prompt in quotes and does not say whether they are the command's
        // syntax or part of the prompt: either form is the prompt sent (E-INT-27).
        let sent = prompt_text(&first[0]);
        let unquoted = sent
            .strip_prefix('"')
            .and_then(|rest| rest.strip_suffix('"'))
            .unwrap_or(&sent);
        ensure_eq!(
            prompt.to_string(),
            unquoted.to_string(),
            "the first prompt on the stream (without the quotes it was typed in)"
        );
        world.reply_with(&started.root, prompt).await?;
        let row = world.row(&started.row.id).await?;
        ensure_eq!("acp".to_string(), row.protocol_mode, "protocol_mode");
        ensure_eq!("active".to_string(), row.status, "status");
        ensure_eq!(
            Some(started.root.ts().to_string()),
            row.thread_ts,
            "thread_ts"
        );
        world.server.stop().await?;
        Ok(())
    })
    .await
}

/// The environment variable names the agent started with (its transcript's start record).
pub fn start_record_env(started: &Started) -> Result<Vec<String>, CheckError> {
    let path = started.agent.hello["transcript"]
        .as_str()
        .or_fail("the agent reports its transcript")?;
    let text = std::fs::read_to_string(path).or_fail("the agent's transcript")?;
    let start: Value = text
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|r| r["kind"] == "start")
        .or_fail("a start record in the transcript")?;
    Ok(start["env"]
        .as_object()
        .map(|env| env.keys().cloned().collect())
        .unwrap_or_default())
}

async fn s019(ctx: Ctx) -> CheckResult {
    each_dialect(&ctx, BOTH, |ctx, dialect| async move {
        let world = AcpWorld::start(&ctx, Options::new(dialect)).await?;
        let started = world.start_session(CHANNEL_X, "status check").await?;
        match dialect {
            Dialect::Intercom | Dialect::IntercomJsonrpc => {
                // After a JSON-RPC handshake, a server may skip what comes before its end.
                started.agent.wait_method(prompt_method(dialect), 1).await?;
                started
                    .agent
                    .send(json!({"method": "status/update", "params": {"message": "compiling step 3"}}))
                    .await?;
                world.reply_with(&started.root, "compiling step 3").await?;
            }
            // In ACP the agent's message chunks are its status; the echo agent says the prompt.
            Dialect::Acp => {
                world.reply_with(&started.root, "status check").await?;
            }
        }
        world.server.stop().await?;
        Ok(())
    })
    .await
}

async fn s020(ctx: Ctx) -> CheckResult {
    each_dialect(&ctx, BOTH, |ctx, dialect| async move {
        let world = AcpWorld::start(&ctx, Options::new(dialect)).await?;
        let started = world.start_session_asking_clearance(CHANNEL_X).await?;
        let message = approval_message(&world, &started).await?;
        ensure!(
            has_button(&message, "approve_reject"),
            "the approval has Reject too"
        );
        ensure_eq!(
            Some(started.root.ts()),
            message.thread_ts(),
            "the approval's thread"
        );
        world.server.stop().await?;
        Ok(())
    })
    .await
}

async fn s021(ctx: Ctx) -> CheckResult {
    each_dialect(&ctx, BOTH, |ctx, dialect| async move {
        let world = AcpWorld::start(&ctx, Options::new(dialect)).await?;
        let started = world.start_session(CHANNEL_X, "hello there").await?;
        let pid = started.agent.pid().or_fail("the agent's pid")?;
        world.reply_with(&started.root, "hello there").await?;
        world
            .world
            .slash_command(CHANNEL_X, ALICE, "session-stop")
            .await?;
        world
            .final_reply(
                &started.root,
                &started.row.id,
                &ctx.text("final", SESSION_ENDED),
            )
            .await?;
        ensure!(
            !ski::transport::child::process_exists(pid),
            "the agent process is gone once the final message is posted"
        );
        world.ensure_status(&started.row.id, "terminated").await?;
        world.server.stop().await?;
        Ok(())
    })
    .await
}

async fn ends_by_itself(
    ctx: Ctx,
    dialect: Dialect,
    prompt: &str,
    text_key: &str,
    text: &str,
    status: &str,
) -> CheckResult {
    let world = AcpWorld::start(&ctx, Options::new(dialect)).await?;
    // The agent may end before it greets the control socket: only the thread is awaited.
    let started = world.start_session_quiet(CHANNEL_X, prompt).await?;
    let expected = ctx.text(text_key, text);
    world
        .final_reply(&started.root, &started.session_id, &expected)
        .await?;
    ensure_eq!(
        status.to_string(),
        world.row(&started.session_id).await?.status,
        "the session's status"
    );
    world.server.stop().await?;
    Ok(())
}

async fn s022(ctx: Ctx) -> CheckResult {
    each_dialect(&ctx, BOTH, |ctx, dialect| {
        ends_by_itself(
            ctx,
            dialect,
            "all done",
            "final",
            "Task completed",
            "terminated",
        )
    })
    .await
}

async fn s023(ctx: Ctx) -> CheckResult {
    each_dialect(&ctx, BOTH, |ctx, dialect| {
        ends_by_itself(
            ctx,
            dialect,
            "crash now",
            "final",
            "Agent crashed (exit code: 1)",
            "interrupted",
        )
    })
    .await
}

async fn s024(ctx: Ctx) -> CheckResult {
    each_dialect(&ctx, BOTH, |ctx, dialect| async move {
        let mut options = Options::new(dialect);
        options.max_sessions = 1;
        let world = AcpWorld::start(&ctx, options).await?;
        world.start_session(CHANNEL_X, "first one").await?;
        let reply = world.slash(CHANNEL_X, "session-start second one").await?;
        let expected = ctx.text("error", "Maximum concurrent sessions reached");
        ensure_reply_contains("the second start is refused", &reply, &expected)?;
        ensure_eq!(1, world.world.sessions().await?.len(), "session rows");
        ensure_eq!(1, world.agents.count(), "agents started");
        world.server.stop().await?;
        Ok(())
    })
    .await
}

async fn s025(ctx: Ctx) -> CheckResult {
    each_dialect(&ctx, BOTH, |ctx, dialect| async move {
        let script = ctx
            .temp_dir()
            .join(format!("silent-{}.toml", dialect.name()));
        std::fs::write(&script, SILENT_AGENT).or_error("write the silent script")?;
        let mut options = Options::new(dialect);
        options.startup_timeout_ms = 500;
        options.script = Some(script.display().to_string());
        let world = AcpWorld::start(&ctx, options).await?;
        let started = world.start_session(CHANNEL_X, "hello there").await?;
        let pid = started.agent.pid().or_fail("the agent's pid")?;
        let expected = ctx.text("final", "did not respond within startup timeout");
        world.notice_with(&started.root, &expected).await?;
        world.ensure_status(&started.row.id, "terminated").await?;
        ensure!(
            !ski::transport::child::process_exists(pid),
            "the silent agent was killed"
        );
        world.server.stop().await?;
        Ok(())
    })
    .await
}

async fn s026(ctx: Ctx) -> CheckResult {
    each_dialect(&ctx, STREAM, |ctx, dialect| async move {
        let world = AcpWorld::start(&ctx, Options::new(dialect)).await?;
        let expected = ctx.text("error", "prompt must not be empty");
        let reply = world.slash(CHANNEL_X, "session-start \"\"").await?;
        let (sessions, agents) = if reply.contains(&expected) {
            (0, 0)
        } else {
            // The matrix types the prompt in quotes without saying whether they belong to it
            // (S018). A server that keeps them took `""` for a two-character prompt: that is
            // not the empty prompt, so only the prompt it sent may excuse the start, and the
            // empty prompt is then the command with nothing after it.
            let agent = world
                .agents
                .nth(0)
                .await
                .map_err(|e| with_reply(e, Some(&reply)))?;
            agent.wait_method(prompt_method(dialect), 1).await?;
            let sent = prompt_text(&agent.received_method(prompt_method(dialect))?[0]);
            ensure_eq!(
                "\"\"",
                sent.as_str(),
                "the prompt sent for session-start \"\" (the quotes kept, or the start refused with {expected:?}; reply {reply:?})"
            );
            let reply = world.slash(CHANNEL_X, "session-start").await?;
            ensure_reply_contains("an empty prompt is refused", &reply, &expected)?;
            (1, 1)
        };
        ensure_eq!(sessions, world.world.sessions().await?.len(), "session rows");
        ensure_eq!(agents, world.agents.count(), "agents started");
        world.server.stop().await?;
        Ok(())
    })
    .await
}
