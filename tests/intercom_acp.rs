//! `ski intercom --mode acp` as a real process with real agents: `ski acp serve` run from Slack in
//! the standard ACP dialect, and shell agents that misbehave (ignore SIGTERM, fork, flood their
//! stdout) or outlive a killed server.

use crate::intercom_support;

use std::path::Path;
use std::time::Duration;

use intercom_support::*;
use serde_json::Value;
use ski::transport::child::process_exists;
use ski_mocks::slack::{Click, FakeSlack, Message, SlashCommand};

async fn slash(slack: &FakeSlack, channel: &str, text: &str) -> Option<String> {
    let injected = slack
        .slash_command(SlashCommand {
            command: SLASH.into(),
            text: text.into(),
            channel: channel.into(),
            user: ALICE.into(),
        })
        .expect("inject");
    let ack = injected.ack(WAIT).await.expect("ack");
    ack.payload
        .and_then(|p| p.get("text").and_then(Value::as_str).map(str::to_string))
}

async fn message(slack: &FakeSlack, what: &str, predicate: impl Fn(&Message) -> bool) -> Message {
    slack
        .wait_for_message(predicate, WAIT)
        .await
        .unwrap_or_else(|error| panic!("{what}: {error}"))
}

/// The TOML of an ACP-mode config's agent part.
fn acp_part(host_cli: &str, args: &[&str], acp: &str) -> String {
    let args: Vec<String> = args.iter().map(|a| format!("{a:?}")).collect();
    format!(
        "host_cli = {host_cli:?}\nhost_cli_args = [{}]\n[acp]\nstop_grace_ms = 300\n{acp}\n",
        args.join(", ")
    )
}

/// Polls until `pid` is gone; a killed process disappears once it is reaped by whoever owns it.
async fn gone(pid: u32) -> bool {
    let deadline = tokio::time::Instant::now() + WAIT;
    while process_exists(pid) {
        if tokio::time::Instant::now() > deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    true
}

fn read_pid(dir: &Path, name: &str) -> u32 {
    std::fs::read_to_string(dir.join(name))
        .unwrap_or_else(|e| panic!("{name}: {e}"))
        .trim()
        .parse()
        .expect("a pid")
}

#[tokio::test]
async fn ski_acp_serve_runs_from_slack_with_approvals_steering_and_stop() {
    let dir = tempfile::tempdir().expect("tempdir");
    let slack = fake_slack().await;
    let ski = env!("CARGO_BIN_EXE_ski");
    let config = write_config(
        dir.path(),
        &slack,
        &acp_part(
            ski,
            &[
                "acp",
                "serve",
                "--permission-mode",
                "required",
                "--turn-updates",
                "message",
            ],
            "dialect = \"acp\"",
        ),
    );
    std::fs::create_dir_all(dir.path().join("ws-myproj")).expect("workspace dir");
    let server = Server::start(&config, &["--mode", "acp"]).await;
    let reply = slash(&slack, CHANNEL_X, "session-start build a web server")
        .await
        .unwrap_or_default();
    assert!(reply.contains("Starting session"), "{reply}");
    let mut answered = 0;
    for (turn, text) in ["build a web server", "add tests"].iter().enumerate() {
        if turn == 1 {
            let reply = slash(&slack, CHANNEL_X, "steer add tests")
                .await
                .unwrap_or_default();
            assert!(
                reply.contains("queued") || reply.contains("delivered"),
                "{reply}"
            );
        }
        let approval = message(&slack, "an approval for the turn", |m| {
            m.message["blocks"].to_string().contains("approve_accept")
                && m.text().contains(&format!("req-00{}", turn + 1))
        })
        .await;
        slack
            .click(Click {
                channel: approval.channel.clone(),
                message_ts: approval.ts().into(),
                action_id: "approve_accept".into(),
                user: ALICE.into(),
            })
            .expect("click");
        message(&slack, "the agent's answer in the thread", |m| {
            m.thread_ts().is_some() && m.text() == *text
        })
        .await;
        answered += 1;
    }
    assert_eq!(answered, 2);
    slash(&slack, CHANNEL_X, "session-stop").await;
    message(&slack, "the final message", |m| {
        m.text().contains("Session ended")
    })
    .await;
    let rows = session_rows(&server.database());
    assert_eq!(rows[0]["status"], "terminated");
    assert_eq!(rows[0]["protocol_mode"], "acp");
    assert_eq!(server.stop().await, Some(0));
}

/// A shell agent: records its pid and a forked child's pid in its directory, says `ready`, and
/// then waits ignoring SIGTERM (so does the child).
const STUBBORN: &str = r#"trap '' TERM
sleep 1000 &
echo $! > child.pid
echo $$ > agent.pid
echo '{"method":"status/update","params":{"message":"ready"}}'
while :; do sleep 1; done"#;

/// A server in ACP mode with one session of the [`STUBBORN`] agent, ready.
struct Stubborn {
    _dir: tempfile::TempDir,
    slack: FakeSlack,
    config: std::path::PathBuf,
    server: Server,
    agent: u32,
    child: u32,
}

async fn stubborn_session() -> Stubborn {
    let dir = tempfile::tempdir().expect("tempdir");
    let slack = fake_slack().await;
    let config = write_config(
        dir.path(),
        &slack,
        &acp_part("/bin/sh", &["-c", STUBBORN], ""),
    );
    let workspace = dir.path().join("ws-myproj");
    std::fs::create_dir_all(&workspace).expect("workspace dir");
    let server = Server::start(&config, &["--mode", "acp"]).await;
    slash(&slack, CHANNEL_X, "session-start hold on").await;
    message(&slack, "the agent's ready", |m| m.text() == "ready").await;
    let agent = read_pid(&workspace, "agent.pid");
    let child = read_pid(&workspace, "child.pid");
    Stubborn {
        _dir: dir,
        slack,
        config,
        server,
        agent,
        child,
    }
}

#[tokio::test]
async fn stop_ends_an_agent_that_ignores_sigterm_together_with_what_it_forked() {
    let Stubborn {
        _dir: _keep_dir,
        slack,
        server,
        agent,
        child,
        ..
    } = stubborn_session().await;
    assert!(process_exists(agent) && process_exists(child));
    slash(&slack, CHANNEL_X, "session-stop").await;
    message(&slack, "the final message", |m| {
        m.text().contains("Session ended")
    })
    .await;
    assert!(
        !process_exists(agent),
        "the agent is gone when the final message is posted"
    );
    assert!(
        gone(child).await,
        "the forked child was ended with its group"
    );
    assert_eq!(server.stop().await, Some(0));
}

#[tokio::test]
async fn a_killed_server_takes_its_agents_along_and_the_next_start_recovers() {
    let Stubborn {
        _dir: _keep_dir,
        slack,
        config,
        server,
        agent,
        child,
        ..
    } = stubborn_session().await;
    let database = server.database();
    let server_pid = ready_pid(&server);
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(i32::try_from(server_pid).expect("pid")),
        nix::sys::signal::Signal::SIGKILL,
    )
    .expect("SIGKILL the server");
    assert!(
        gone(agent).await,
        "the agent dies with the server (parent-death signal)"
    );
    assert!(
        process_exists(child),
        "the agent's own child outlives a killed server until the next start"
    );
    assert_eq!(session_rows(&database)[0]["status"], "active");
    drop(server);
    let again = Server::start(&config, &["--mode", "acp"]).await;
    again
        .wait_log("agent processes of an earlier run ended")
        .await;
    assert!(gone(child).await, "the next start ends the leftover child");
    let rows = session_rows(&database);
    assert!(
        rows.iter().all(|row| row["status"] != "active"),
        "no session is left active: {rows:?}"
    );
    slash(&slack, CHANNEL_X, "session-start again").await;
    let readies = slack
        .all_messages()
        .iter()
        .filter(|m| m.text() == "ready")
        .count();
    message(&slack, "a new agent's ready", |_| {
        slack
            .all_messages()
            .iter()
            .filter(|m| m.text() == "ready")
            .count()
            > readies
    })
    .await;
    assert_eq!(again.stop().await, Some(0));
}

#[tokio::test]
async fn a_flood_of_status_lines_coalesces_and_does_not_hold_up_another_session() {
    let dir = tempfile::tempdir().expect("tempdir");
    let slack = fake_slack().await;
    let flood = r#"yes '{"method":"status/update","params":{"message":"flood"}}' | head -n 100000
echo '{"method":"status/update","params":{"message":"flood finished"}}'
read line"#;
    let config = write_config(dir.path(), &slack, &acp_part("/bin/sh", &["-c", flood], ""));
    std::fs::create_dir_all(dir.path().join("ws-myproj")).expect("workspace dir");
    let server = Server::start(&config, &["--mode", "acp"]).await;
    slash(&slack, CHANNEL_X, "session-start flood").await;
    message(&slack, "the first flood status", |m| m.text() == "flood").await;
    slash(&slack, CHANNEL_Y, "session-start flood too").await;
    message(&slack, "the other session's status", |m| {
        m.channel == CHANNEL_Y && m.thread_ts().is_some() && m.text().starts_with("flood")
    })
    .await;
    let finished = message(&slack, "the end of the flood", |m| {
        m.channel == CHANNEL_X && m.text().starts_with("flood finished")
    })
    .await;
    let posted = slack
        .messages(CHANNEL_X, finished.thread_ts())
        .into_iter()
        .filter(|m| m.text().starts_with("flood"))
        .count();
    assert!(
        posted < 100_000,
        "statuses coalesce under pressure ({posted} posts for 100,001 lines)"
    );
    let rss_kib = rss_kib(ready_pid(&server));
    eprintln!("flood: 100,001 status lines became {posted} posts; server RSS {rss_kib} KiB");
    assert!(
        rss_kib < 200 * 1024,
        "the server's memory stays bounded: {rss_kib} KiB"
    );
    assert_eq!(server.stop().await, Some(0));
}

fn ready_pid(server: &Server) -> u32 {
    server.ready["pid"]
        .as_u64()
        .and_then(|pid| u32::try_from(pid).ok())
        .expect("the readiness line names the pid")
}

fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|n| n.parse().ok())
        })
        .unwrap_or(0)
}
