//! S001–S007: startup in each mode, configuration errors and their exit codes, the nine tools.

use rmcp::ServiceExt;
use rmcp::model::ClientConfig;
use serde_json::Value;
use ski_mocks::testing::INTERCOM_TOOLS;

use crate::{Check, CheckResult, Ctx, Failure, OrFail, ensure, ensure_eq};

use super::harness::{CHANNEL_X, World, connect_url};
use super::profile::Readiness;
use crate::vocabulary::capability;
use ski::transport::child::OutputStream;

/// The checks of this part.
pub fn checks() -> Vec<Check> {
    vec![
        Check::new(
            "S001",
            "Starts the target without --mode; expects the readiness line, a Socket Mode connection to the fake Slack and an MCP endpoint that completes initialize and tools/list. With capability mcp-stdio, also starts it with `server_stdio`: an MCP session over its stdin/stdout (placed in workspace myproj), readiness on stderr; closing stdin ends that session (it leaves 'active', a note lands in its thread) while the HTTP endpoint keeps serving.",
            s001,
        ),
        Check::new(
            "S002",
            "Starts the target with --mode mcp; expects the same as S001: readiness, Socket Mode connected, MCP initialize and tools/list.",
            s002,
        ),
        Check::new(
            "S003",
            "Starts the target with --mode acp and host_cli naming an existing executable; expects readiness with Slack connected and no MCP endpoint in the readiness line.",
            s003,
        ),
        Check::new(
            "S004",
            "Starts the target with --mode acp and no host_cli; expects exit 1 and the matrix's message on stderr, and no Slack traffic.",
            s004,
        ),
        Check::new(
            "S005",
            "Starts the target with --mode acp and host_cli = /nonexistent/path; expects exit 1 and \"host_cli binary not found: /nonexistent/path\".",
            s005,
        ),
        Check::new(
            "S006",
            "Starts the target with --mode invalid; expects exit 2 and clap's \"invalid value 'invalid' for '--mode\".",
            s006,
        ),
        Check::new(
            "S007",
            "Connects an MCP client; expects tools/list to name exactly the nine tools.",
            s007,
        ),
    ]
}

async fn mcp_starts(ctx: &Ctx, mode: Option<&str>) -> CheckResult {
    let world = World::new(ctx).await?;
    let server = world.start(mode).await?;
    world.socket_mode().await?;
    let client = server.connect("").await?;
    let tools = client
        .list_tools(None)
        .await
        .map_err(|e| crate::Failure::expected("tools/list answers").actual(e.to_string()))?;
    ensure!(!tools.tools.is_empty(), "tools/list names the tools");
    let _ = client.cancel().await;
    ensure_eq!(Some(0), server.stop().await?, "exit code after SIGTERM");
    Ok(())
}

async fn s001(ctx: Ctx) -> CheckResult {
    mcp_starts(&ctx, None).await?;
    if ctx.has(capability::MCP_STDIO) {
        stdio_session_leaves_http_running(&ctx).await?;
    }
    Ok(())
}

/// E-INT-03: the stdio transport serves one session; its end (stdin closed) is not the server's.
async fn stdio_session_leaves_http_running(ctx: &Ctx) -> CheckResult {
    let world = World::new(ctx).await?;
    let config = world.config.display().to_string();
    let spec = world.command(
        "server_stdio",
        &[("config", config.as_str()), ("workspace_id", "myproj")],
    )?;
    let mut child = ctx.spawn(spec)?;
    let stdin = child.take_stdin().or_error("the target's stdin")?;
    let stdout = child.take_stdout().or_error("the target's stdout")?;
    let mut stderr = Vec::new();
    let ready = ctx
        .within("the readiness line on stderr", async {
            while let Some(line) = child.next_stderr_line().await {
                let value = serde_json::from_str::<Value>(&line).ok();
                stderr.push(line);
                if let Some(value) = value.filter(|v| v.get("mcp_url").is_some()) {
                    return Some(value);
                }
            }
            None
        })
        .await?
        .ok_or_else(|| {
            Failure::expected("a JSON readiness line with mcp_url on stderr").actual(format!(
                "the target ended first; stderr: {}",
                stderr.join("\n")
            ))
        })?;
    let client = ctx
        .within(
            "the MCP handshake over stdio",
            Box::pin(ClientConfig::default().serve((stdout, stdin))),
        )
        .await?
        .or_fail("an MCP session over the target's stdin/stdout")?;
    let tools = client
        .list_tools(None)
        .await
        .map_err(|e| Failure::expected("tools/list over stdio").actual(e.to_string()))?;
    ensure_eq!(9, tools.tools.len(), "tools over stdio");
    // The newest row: the HTTP part of S001 used the same database before.
    async fn newest(world: &World) -> Result<super::harness::SessionRow, crate::CheckError> {
        world
            .sessions()
            .await?
            .pop()
            .or_fail("a session row for the stdio session")
    }
    let session = newest(&world).await?;
    ensure_eq!(
        Some(CHANNEL_X),
        session.channel_id.as_deref(),
        "the stdio session's channel (workspace myproj)"
    );
    let root = session
        .thread_ts
        .clone()
        .or_fail("the stdio session's thread root")?;
    let before: std::collections::HashSet<String> = world
        .slack
        .messages(CHANNEL_X, Some(&root))
        .iter()
        .map(|m| m.ts().to_string())
        .collect();
    // Closing the client closes the target's stdin.
    let _ = client.cancel().await;
    world
        .message(
            "a note in the stdio session's thread after stdin closed",
            |m| m.thread_ts() == Some(root.as_str()) && !before.contains(m.ts()),
        )
        .await?;
    let status = newest(&world).await?.status;
    ensure!(
        status != "active",
        "the stdio session ends with stdin (status {status})"
    );
    ensure!(
        child.try_status().is_none(),
        "the target keeps running after stdin closed"
    );
    let url = ready["mcp_url"].as_str().or_fail("mcp_url")?;
    let http = connect_url(ctx, &world.reachable(url).await?).await?;
    let tools = http.list_tools(None).await.map_err(|e| {
        Failure::expected("tools/list over HTTP after stdin closed").actual(e.to_string())
    })?;
    ensure!(!tools.tools.is_empty(), "the HTTP endpoint still serves");
    let _ = http.cancel().await;
    child
        .signal_group(nix::sys::signal::Signal::SIGTERM)
        .or_error("SIGTERM the target")?;
    let status = ctx
        .within("the exit after SIGTERM", child.wait())
        .await?
        .or_error("wait for the target")?;
    ensure_eq!(Some(0), status.code(), "exit code after SIGTERM");
    Ok(())
}

async fn s002(ctx: Ctx) -> CheckResult {
    mcp_starts(&ctx, Some("mcp")).await
}

async fn s003(ctx: Ctx) -> CheckResult {
    ctx.require(capability::ACP_MODE)?;
    let world = World::new(&ctx).await?;
    let host_cli = ctx.bin("ski-mock-agent").display().to_string();
    world.write_config(
        super::harness::WORKSPACES,
        &format!("host_cli = \"{host_cli}\""),
    )?;
    let server = world.start(Some("acp")).await?;
    world.socket_mode().await?;
    ensure!(
        !server.serves_mcp().await,
        "no MCP transport in ACP mode",
        "readiness line {}, MCP port {}",
        server.ready,
        world.mcp_port
    );
    ensure_eq!(Some(0), server.stop().await?, "exit code after SIGTERM");
    Ok(())
}

async fn config_error(
    ctx: &Ctx,
    world: &World,
    mode: Option<&str>,
    default_text: &str,
    code: i32,
) -> CheckResult {
    let exit = world.run_to_exit(mode).await?;
    let expected = ctx.text("stderr", default_text);
    ensure_eq!(
        Some(code),
        exit.code,
        "exit code (stderr: {})",
        exit.stderr.trim()
    );
    ensure!(
        exit.stderr.contains(&expected),
        format!("stderr names the error: {expected:?}"),
        "stderr {:?}",
        exit.stderr
    );
    // A build that logs on stdout may log there before it fails; the readiness never shows.
    let said_ready = match (&world.knobs.ready, world.knobs.log_stream) {
        (Readiness::Line(text), _) => exit.stdout.contains(text) || exit.stderr.contains(text),
        (_, OutputStream::Stdout) => false,
        (_, OutputStream::Stderr) => !exit.stdout.trim().is_empty(),
    };
    ensure!(!said_ready, "no readiness line", "stdout {:?}", exit.stdout);
    Ok(())
}

async fn s004(ctx: Ctx) -> CheckResult {
    let world = World::new(&ctx).await?;
    // No agent settings, even where MCP-mode configs carry them (agent_in_mcp_mode).
    world.write_config_exactly(super::harness::WORKSPACES, "")?;
    config_error(
        &ctx,
        &world,
        Some("acp"),
        "ACP mode requires host_cli configuration",
        1,
    )
    .await?;
    ensure!(
        world.slack.requests().is_empty(),
        "nothing reaches Slack before the config is valid"
    );
    Ok(())
}

async fn s005(ctx: Ctx) -> CheckResult {
    let world = World::new(&ctx).await?;
    world.write_config(
        super::harness::WORKSPACES,
        "host_cli = \"/nonexistent/path\"",
    )?;
    config_error(
        &ctx,
        &world,
        Some("acp"),
        "host_cli binary not found: /nonexistent/path",
        1,
    )
    .await
}

async fn s006(ctx: Ctx) -> CheckResult {
    let world = World::new(&ctx).await?;
    config_error(
        &ctx,
        &world,
        Some("invalid"),
        "invalid value 'invalid' for '--mode",
        2,
    )
    .await
}

async fn s007(ctx: Ctx) -> CheckResult {
    let world = World::new(&ctx).await?;
    let server = world.start(None).await?;
    let client = server.connect("workspace_id=myproj").await?;
    let tools = client
        .list_tools(None)
        .await
        .map_err(|e| crate::Failure::expected("tools/list answers").actual(e.to_string()))?;
    let mut names: Vec<String> = tools.tools.iter().map(|t| t.name.to_string()).collect();
    names.sort();
    ensure_eq!(INTERCOM_TOOLS.to_vec(), names, "the tools tools/list names");
    let _ = client.cancel().await;
    server.stop().await?;
    Ok(())
}
