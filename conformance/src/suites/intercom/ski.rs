//! The `intercom-ski` suite: ski's own decisions where `intercom-acp-server-matrix.md` is silent
//! or asks less (E-INT-27). A target declares `intercom-ski-extensions` only when it makes the
//! same decisions; the document's own rows (the `intercom` suite) never require them. The checks
//! drive the target through the same harness as `intercom` (`suites/intercom/`).

use serde_json::json;

use super::agents::{AcpWorld, Dialect, Options, each_dialect};
use super::harness::{ALICE, BOB, CHANNEL_X, World, shows};
use super::lifecycle::{
    SESSION_ENDED, approval_message, approval_status, prompt_method, start_record_env,
};
use super::profile::Stdin;
use super::stall::crash_with_pending_clearance;
use super::stream::{CLEARANCE_WITHOUT_FILE_PATH, oversize_line, session, status_line};
use crate::vocabulary::capability;
use crate::{Check, CheckResult, Ctx, ensure, ensure_eq};

const BOTH: &[Dialect] = &[Dialect::Intercom, Dialect::Acp];
const STREAM: &[Dialect] = &[Dialect::Intercom];

/// The checks of the `intercom-ski` suite.
pub fn checks() -> Vec<Check> {
    vec![
        Check::new(
            "INT-SKI-01",
            "An MCP session in myproj; session-stop in its channel; expects a \"Session ended\" reply (override final) in its thread and the row terminated (E-INT-09, E-INT-12).",
            int_ski_01,
        ),
        Check::new(
            "INT-SKI-02",
            "Two ACP sessions each ask for clearance req-001; expects an approval_request row (session_id, request_id req-001) pending for each, then approved after Accept in one and rejected after Reject in the other (E-INT-08).",
            int_ski_02,
        ),
        Check::new(
            "INT-SKI-03",
            "The agent closes its stdout and keeps running; expects the agent process ended by the time \"stream closed\" is in the thread (E-INT-20).",
            int_ski_03,
        ),
        Check::new(
            "INT-SKI-04",
            "session-stop of an ACP session; expects the agent's session/interrupt to carry reason \"Operator requested termination\" (E-INT-16).",
            int_ski_04,
        ),
        Check::new(
            "INT-SKI-05",
            "Reject with the reason \"wrong file\" in the modal; expects the agent's clearance/response to carry reason \"wrong file\" (E-INT-16).",
            int_ski_05,
        ),
        Check::new(
            "INT-SKI-06",
            "session-start \"build a web server\"; expects no Slack token in the agent's environment and no prompt in its argv (E-INT-18).",
            int_ski_06,
        ),
        Check::new(
            "INT-SKI-07",
            "An unauthorized user types session-start; expects a log line naming the user (E-INT-10).",
            int_ski_07,
        ),
        Check::new(
            "INT-SKI-08",
            "Starts the target in MCP mode with its stdin an open pipe, whatever settings.stdin says, then sends SIGTERM; expects exit code 0.",
            int_ski_08,
        ),
        Check::new(
            "INT-SKI-09",
            "The agent writes clearance/request without file_path, then a status; expects no approval_request row once the status is posted (E-INT-21).",
            int_ski_09,
        ),
        Check::new(
            "INT-SKI-10",
            "The agent crashes while its clearance req-001 is pending; expects the approval_request row (session_id, req-001) expired once the crash is in the thread (E-INT-20).",
            int_ski_10,
        ),
        Check::new(
            "INT-SKI-11",
            "The agent writes a line 1904 bytes over the line limit, then a status; expects \"line exceeded max length\" logged, the status posted and the session row still active (E-INT-21).",
            int_ski_11,
        ),
    ]
}

/// The stop every row relies on, with the stdin a profile may close (`stdin = "closed"`) held
/// open: a build that blocks on reading its stdin fails here, and only here.
async fn int_ski_08(ctx: Ctx) -> CheckResult {
    let world = World::new(&ctx).await?;
    let server = world.start_with_stdin(Some("mcp"), Stdin::Open).await?;
    ensure_eq!(
        Some(0),
        server.stop().await?,
        "exit code after SIGTERM with stdin held open"
    );
    Ok(())
}

async fn int_ski_01(ctx: Ctx) -> CheckResult {
    ctx.require(capability::INTERCOM_SKI_EXTENSIONS)?;
    let world = World::new(&ctx).await?;
    let server = world.start(None).await?;
    let client = server.connect("workspace_id=myproj").await?;
    let root = world
        .message("the session's first post", |m| m.channel == CHANNEL_X)
        .await?;
    world
        .slash_command(CHANNEL_X, ALICE, "session-stop")
        .await?;
    let ended = ctx.text("final", SESSION_ENDED);
    let last = world
        .message("the final message", |m| shows(m, &ended))
        .await?;
    ensure_eq!(
        Some(root.ts()),
        last.thread_ts(),
        "the final message's thread_ts"
    );
    ensure_eq!(
        "terminated",
        world.session(0).await?.status,
        "the session's status"
    );
    let _ = client.cancel().await;
    server.stop().await?;
    Ok(())
}

async fn int_ski_02(ctx: Ctx) -> CheckResult {
    ctx.require(capability::INTERCOM_SKI_EXTENSIONS)?;
    each_dialect(&ctx, BOTH, |ctx, dialect| async move {
        let world = AcpWorld::start(&ctx, Options::new(dialect)).await?;
        let accepted = world.start_session_asking_clearance(CHANNEL_X).await?;
        let rejected = world.start_session_asking_clearance(CHANNEL_X).await?;
        let accept = approval_message(&world, &accepted).await?;
        let reject = approval_message(&world, &rejected).await?;
        for started in [&accepted, &rejected] {
            ensure_eq!(
                "pending".to_string(),
                approval_status(&world, &started.row.id, "req-001").await?,
                "the waiting approval row of session {}",
                started.row.short()
            );
        }
        world.world.click(&accept, "approve_accept", ALICE)?;
        world
            .world
            .reject_with_reason(&reject, "wrong file")
            .await?;
        // The agent reports the decision it read: the row was written before it was sent.
        for (started, status, option) in [
            (&accepted, "approved", "allow"),
            (&rejected, "rejected", "reject"),
        ] {
            let report = match dialect {
                Dialect::Intercom | Dialect::IntercomJsonrpc => {
                    format!("clearance req-001: {status}")
                }
                Dialect::Acp => format!("clearance: selected {option}"),
            };
            world.reply_with(&started.root, &report).await?;
            ensure_eq!(
                status.to_string(),
                approval_status(&world, &started.row.id, "req-001").await?,
                "the approval row of session {}",
                started.row.short()
            );
        }
        world.server.stop().await?;
        Ok(())
    })
    .await
}

async fn int_ski_03(ctx: Ctx) -> CheckResult {
    ctx.require(capability::INTERCOM_SKI_EXTENSIONS)?;
    each_dialect(&ctx, BOTH, |ctx, dialect| async move {
        let world = AcpWorld::start(&ctx, Options::new(dialect)).await?;
        let started = world.start_session(CHANNEL_X, "hello there").await?;
        started.agent.wait_method(prompt_method(dialect), 1).await?;
        let pid = started
            .agent
            .pid()
            .ok_or_else(|| crate::CheckError::harness("the agent's pid"))?;
        started.agent.run(json!([{ "close_stdout": true }])).await?;
        world
            .final_reply(
                &started.root,
                &started.row.id,
                &ctx.text("final", "stream closed"),
            )
            .await?;
        ensure!(
            !ski::transport::child::process_exists(pid),
            "an agent that closed its stdout but kept running was ended"
        );
        world.server.stop().await?;
        Ok(())
    })
    .await
}

async fn int_ski_04(ctx: Ctx) -> CheckResult {
    ctx.require(capability::INTERCOM_SKI_EXTENSIONS)?;
    each_dialect(&ctx, STREAM, |ctx, dialect| async move {
        let world = AcpWorld::start(&ctx, Options::new(dialect)).await?;
        let started = world.start_session(CHANNEL_X, "hello there").await?;
        started.agent.wait_method(prompt_method(dialect), 1).await?;
        world
            .world
            .slash_command(CHANNEL_X, ALICE, "session-stop")
            .await?;
        // The agent exits on the interrupt: the final message says it is over, the transcript
        // what it read.
        world
            .final_reply(
                &started.root,
                &started.row.id,
                &ctx.text("final", SESSION_ENDED),
            )
            .await?;
        let interrupts = started.agent.received_method("session/interrupt")?;
        ensure!(!interrupts.is_empty(), "the agent read session/interrupt");
        ensure_eq!(
            json!(ctx.text("reason", "Operator requested termination")),
            interrupts[0]["params"]["reason"],
            "the interrupt's reason"
        );
        world.server.stop().await?;
        Ok(())
    })
    .await
}

async fn int_ski_05(ctx: Ctx) -> CheckResult {
    ctx.require(capability::INTERCOM_SKI_EXTENSIONS)?;
    each_dialect(&ctx, STREAM, |ctx, dialect| async move {
        let world = AcpWorld::start(&ctx, Options::new(dialect)).await?;
        let started = world.start_session_asking_clearance(CHANNEL_X).await?;
        let message = approval_message(&world, &started).await?;
        world
            .world
            .reject_with_reason(&message, "wrong file")
            .await?;
        started.agent.wait_method("clearance/response", 1).await?;
        let responses = started.agent.received_method("clearance/response")?;
        ensure_eq!(
            json!("wrong file"),
            responses[0]["params"]["reason"],
            "params.reason"
        );
        world.server.stop().await?;
        Ok(())
    })
    .await
}

async fn int_ski_06(ctx: Ctx) -> CheckResult {
    ctx.require(capability::INTERCOM_SKI_EXTENSIONS)?;
    each_dialect(&ctx, BOTH, |ctx, dialect| async move {
        let world = AcpWorld::start(&ctx, Options::new(dialect)).await?;
        let started = world
            .start_session(CHANNEL_X, "\"build a web server\"")
            .await?;
        let argv = started.agent.hello["argv"].to_string();
        ensure!(
            !argv.contains("web server"),
            "the prompt is not in argv",
            "{argv}"
        );
        let environment = start_record_env(&started)?;
        for secret in ["SLACK_BOT_TOKEN", "SLACK_APP_TOKEN"] {
            ensure!(
                !environment.iter().any(|name| name == secret),
                format!("no {secret} in the agent's environment"),
                "{environment:?}"
            );
        }
        world.server.stop().await?;
        Ok(())
    })
    .await
}

async fn int_ski_07(ctx: Ctx) -> CheckResult {
    ctx.require(capability::INTERCOM_SKI_EXTENSIONS)?;
    let world = World::new(&ctx).await?;
    let server = world.start(None).await?;
    world
        .slash_command(CHANNEL_X, BOB, "session-start \"build a web server\"")
        .await?;
    server.wait_log(BOB).await?;
    server.stop().await?;
    Ok(())
}

async fn int_ski_09(ctx: Ctx) -> CheckResult {
    ctx.require(capability::INTERCOM_SKI_EXTENSIONS)?;
    each_dialect(&ctx, STREAM, |ctx, dialect| async move {
        let (world, started) = session(&ctx, Options::new(dialect)).await?;
        started.agent.send_line(CLEARANCE_WITHOUT_FILE_PATH).await?;
        started
            .agent
            .send_line(&status_line("after missing"))
            .await?;
        world.reply_with(&started.root, "after missing").await?;
        let counted = world
            .world
            .read("SELECT COUNT(*) FROM approval_request", &[])
            .await?
            .and_then(|rows| {
                crate::sqlite::integer(rows.first().and_then(|r| r.first()), "COUNT(*)")
            })
            .map_err(|e| crate::CheckError::harness(format!("approval rows: {e}")))?;
        let approvals: i64 = counted;
        ensure_eq!(
            0,
            approvals,
            "approval rows after a request without file_path"
        );
        world.server.stop().await?;
        Ok(())
    })
    .await
}

async fn int_ski_10(ctx: Ctx) -> CheckResult {
    ctx.require(capability::INTERCOM_SKI_EXTENSIONS)?;
    each_dialect(&ctx, BOTH, |ctx, dialect| async move {
        let (world, started) = crash_with_pending_clearance(&ctx, dialect).await?;
        ensure_eq!(
            "expired".to_string(),
            approval_status(&world, &started.row.id, "req-001").await?,
            "the approval row's status"
        );
        world.server.stop().await?;
        Ok(())
    })
    .await
}

async fn int_ski_11(ctx: Ctx) -> CheckResult {
    ctx.require(capability::INTERCOM_SKI_EXTENSIONS)?;
    each_dialect(&ctx, BOTH, |ctx, dialect| async move {
        let (world, started) = oversize_line(&ctx, dialect).await?;
        started
            .agent
            .send_line(&status_line("after oversize"))
            .await?;
        world.reply_with(&started.root, "after oversize").await?;
        world.ensure_status(&started.row.id, "active").await?;
        world.server.stop().await?;
        Ok(())
    })
    .await
}
