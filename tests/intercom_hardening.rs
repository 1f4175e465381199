//! `ski intercom` under trouble, as a real process: Slack answering 429s and 500s (the post
//! outbox), tokens kept out of logs and argv at trace level, a SIGKILL mid-approval and the
//! restart that recovers, and one MCP session over the process's own stdin and stdout.

use crate::intercom_support;

use intercom_support::*;
use nix::sys::signal::Signal;
use rmcp::ServiceExt;
use rmcp::model::ClientConfig;
use rstest::rstest;
use serde_json::{Value, json};
use ski::transport::child::{self, ChildSpec};
use ski_mocks::slack::{Click, EnvelopeKind, Fault, SlashCommand};

/// The texts of the session thread's replies that start with `prefix`, in thread order.
fn replies_with(slack: &ski_mocks::slack::FakeSlack, thread_ts: &str, prefix: &str) -> Vec<String> {
    slack
        .messages(CHANNEL_X, Some(thread_ts))
        .iter()
        .filter(|m| m.ts() != thread_ts)
        .map(|m| m.text().to_string())
        .filter(|text| text.contains(prefix))
        .collect()
}

fn thread_of_first_session(server: &Server) -> String {
    session_rows(&server.database())[0]["thread_ts"]
        .as_str()
        .expect("thread root recorded")
        .to_string()
}

#[tokio::test]
async fn posts_survive_rate_limits_and_server_errors_exactly_once_and_in_order() {
    let slack = fake_slack().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let config = write_config(dir.path(), &slack, "");
    let server = Server::start(&config, &[]).await;
    let client = mcp_client(&server.mcp_url("workspace_id=myproj")).await;
    let thread_ts = thread_of_first_session(&server);
    let posts_before = slack
        .requests()
        .iter()
        .filter(|r| r.method == "chat.postMessage")
        .count();

    // One after the other, each meeting trouble first: 429s with Retry-After, 500s, a mix.
    let faults = [
        (
            2,
            Fault::RateLimited {
                retry_after: Some(1),
            },
        ),
        (2, Fault::Status { status: 500 }),
        (1, Fault::Status { status: 503 }),
        (1, Fault::RateLimited { retry_after: None }),
    ];
    let mut injected = 0;
    for (index, (count, fault)) in faults.iter().enumerate() {
        slack.fail_next("chat.postMessage", *count, fault.clone());
        injected += count;
        let (answer, error) = call(
            &client,
            "broadcast",
            json!({ "message": format!("ordered-{index}") }),
        )
        .await;
        assert!(!error, "broadcast {index} survives {fault:?}: {answer}");
        assert_eq!(answer["posted"], true, "broadcast {index}: {answer}");
    }
    // Several at once while Slack keeps failing: each still lands exactly once.
    slack.fail_next(
        "chat.postMessage",
        2,
        Fault::RateLimited {
            retry_after: Some(1),
        },
    );
    slack.fail_next("chat.postMessage", 2, Fault::Status { status: 500 });
    injected += 4;
    let concurrent: Vec<_> = (0..4)
        .map(|index| {
            let client: rmcp::Peer<rmcp::RoleClient> = (*client).clone();
            tokio::spawn(async move {
                call(
                    &client,
                    "broadcast",
                    json!({ "message": format!("together-{index}") }),
                )
                .await
            })
        })
        .collect();
    for task in concurrent {
        let (answer, error) = task.await.expect("task");
        assert!(!error, "{answer}");
    }

    let ordered = replies_with(&slack, &thread_ts, "ordered-");
    assert_eq!(
        ordered,
        (0..4)
            .map(|i| format!("ℹ️ ordered-{i}"))
            .collect::<Vec<_>>(),
        "each post exactly once, in order, in the thread"
    );
    let mut together = replies_with(&slack, &thread_ts, "together-");
    together.sort();
    assert_eq!(
        together,
        (0..4)
            .map(|i| format!("ℹ️ together-{i}"))
            .collect::<Vec<_>>(),
        "each concurrent post exactly once"
    );
    let posts_after = slack
        .requests()
        .iter()
        .filter(|r| r.method == "chat.postMessage")
        .count();
    assert_eq!(
        posts_after - posts_before,
        8 + injected,
        "one try per fault plus one that succeeds per message"
    );

    // Slack down for longer than the retries: that post is reported lost, the next one lands.
    slack.fail_next("chat.postMessage", 5, Fault::Status { status: 500 });
    let (answer, error) = call(&client, "broadcast", json!({ "message": "lost" })).await;
    assert!(!error, "{answer}");
    assert_eq!(answer["posted"], false, "{answer}");
    let (answer, _) = call(&client, "broadcast", json!({ "message": "after-outage" })).await;
    assert_eq!(answer["posted"], true, "{answer}");
    assert!(replies_with(&slack, &thread_ts, "lost").is_empty());
    assert_eq!(replies_with(&slack, &thread_ts, "after-outage").len(), 1);
    server.wait_log("cannot post to slack").await;
    drop(client);
    assert_eq!(server.stop().await, Some(0));
}

#[tokio::test]
async fn tokens_never_reach_stdout_stderr_or_argv_even_at_trace() {
    const BOT: &str = "xoxb-hardening-bot-7d1f0c";
    const APP: &str = "xapp-hardening-app-93be4a";
    let slack = fake_slack().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let config = write_config(dir.path(), &slack, "");
    let server = Server::start_with_env(
        &config,
        &[],
        &[
            ("RUST_LOG", "trace"),
            ("SLACK_BOT_TOKEN", BOT),
            ("SLACK_APP_TOKEN", APP),
        ],
    )
    .await;
    let cmdline = std::fs::read(format!("/proc/{}/cmdline", server.pid)).expect("cmdline");
    let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
    assert!(cmdline.contains("intercom"), "{cmdline}");

    // A slash command, an MCP session with a tool call.
    let ack = slack
        .slash_command(SlashCommand {
            command: SLASH.into(),
            text: "sessions".into(),
            channel: CHANNEL_X.into(),
            user: ALICE.into(),
        })
        .expect("inject")
        .ack(WAIT)
        .await
        .expect("ack");
    assert!(ack.payload.is_some(), "the slash command is answered");
    let client = mcp_client(&server.mcp_url("workspace_id=myproj")).await;
    let (answer, error) = call(&client, "broadcast", json!({ "message": "traced" })).await;
    assert!(!error, "{answer}");
    drop(client);
    server.wait_log("session ended").await;

    let stdout = server.stdout();
    let log = server.log();
    assert_eq!(server.stop().await, Some(0));
    assert!(
        log.iter().filter(|l| l.contains("\"TRACE\"")).count() > 10,
        "trace logging is on"
    );
    for (place, text) in [
        ("argv", cmdline),
        ("stdout", stdout.join("\n")),
        ("stderr", log.join("\n")),
    ] {
        for token in [BOT, APP] {
            assert!(!text.contains(token), "a token in {place}");
            // Not even a long piece of it.
            assert!(!text.contains(&token[5..]), "part of a token in {place}");
        }
    }
}

#[tokio::test]
async fn a_server_killed_during_a_clearance_restarts_with_it_interrupted_and_serves_again() {
    let slack = fake_slack().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let config = write_config(dir.path(), &slack, "");
    let server = Server::start(&config, &[]).await;
    let db = server.database();
    let client = mcp_client(&server.mcp_url("workspace_id=myproj")).await;
    let pending = {
        let client: rmcp::Peer<rmcp::RoleClient> = (*client).clone();
        tokio::spawn(async move {
            client
                .call_tool(
                    rmcp::model::CallToolRequestParams::new("check_clearance").with_arguments(
                        json!({"title": "edit", "diff": "x\n", "file_path": "a.txt"})
                            .as_object()
                            .cloned()
                            .unwrap_or_default(),
                    ),
                )
                .await
        })
    };
    slack
        .wait_for_message(|m| m.text().contains("Approval request `req-001`"), WAIT)
        .await
        .expect("approval posted");
    server.kill().await;
    // The client may keep trying to reach the dead server; the call is abandoned.
    pending.abort();
    drop(client);
    {
        let read = read_db(&db);
        let status: String = read
            .query_row("SELECT status FROM approval_request", [], |r| r.get(0))
            .expect("approval row");
        assert_eq!(status, "pending", "a SIGKILL leaves the approval pending");
    }

    let server = Server::start(&config, &[]).await;
    let line = server.wait_log("recovered an earlier run").await;
    let record: Value = serde_json::from_str(&line).expect("json log");
    assert_eq!(record["fields"]["sessions"], 1, "{line}");
    assert_eq!(record["fields"]["approvals"], 1, "{line}");
    let rows = session_rows(&db);
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0]["status"], "interrupted");
    {
        let read = read_db(&db);
        let (status, reason): (String, Option<String>) = read
            .query_row("SELECT status, reason FROM approval_request", [], |r| {
                Ok((r.get(0)?, r.get(1)?))
            })
            .expect("approval row");
        assert_eq!(status, "interrupted");
        assert_eq!(reason.as_deref(), Some("server restarted"));
    }

    let client = mcp_client(&server.mcp_url("workspace_id=myproj")).await;
    let (answer, error) = call(&client, "broadcast", json!({ "message": "after" })).await;
    assert!(!error, "{answer}");
    let rows = session_rows(&db);
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[1]["status"], "active");
    drop(client);
    assert_eq!(server.stop().await, Some(0));
}

/// `ski intercom --mcp-stdio` for workspace `myproj`: the process, its readiness object and the
/// stderr lines read so far.
async fn start_with_stdio_session(config: &std::path::Path) -> (child::Child, Value, Vec<String>) {
    let spec = ChildSpec::new("intercom-stdio", env!("CARGO_BIN_EXE_ski"))
        .arg("intercom")
        .arg("--config")
        .arg(config)
        .args([
            "--mcp-stdio",
            "--workspace",
            "myproj",
            "--log-format",
            "json",
        ])
        .env("SLACK_BOT_TOKEN", "xoxb-fake-bot")
        .env("SLACK_APP_TOKEN", "xapp-fake-app")
        .env("RUST_LOG", "info");
    let mut process = child::spawn(spec).expect("spawn");
    let mut stderr = Vec::new();
    let ready: Value = loop {
        let line = tokio::time::timeout(WAIT, process.next_stderr_line())
            .await
            .expect("readiness in time")
            .unwrap_or_else(|| panic!("stderr closed:\n{}", stderr.join("\n")));
        stderr.push(line.clone());
        if let Ok(value) = serde_json::from_str::<Value>(&line)
            && value["ready"] == true
        {
            break value;
        }
    };
    assert_eq!(ready["mcp_stdio"], true);
    (process, ready, stderr)
}

#[tokio::test]
async fn an_mcp_session_over_stdio_ends_at_stdin_eof_and_the_http_endpoint_keeps_serving() {
    let slack = fake_slack().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let config = write_config(dir.path(), &slack, "");
    let (mut process, ready, mut stderr) = start_with_stdio_session(&config).await;
    let stdin = process.take_stdin().expect("stdin");
    let stdout = process.take_stdout().expect("stdout");
    let database = std::path::PathBuf::from(ready["database"].as_str().expect("database"));

    let client = ClientConfig::default()
        .serve((stdout, stdin))
        .await
        .expect("mcp over stdio initializes");
    let tools = client.list_tools(None).await.expect("tools/list");
    assert_eq!(tools.tools.len(), 9);
    let (answer, error) = call(&client, "broadcast", json!({ "message": "over stdio" })).await;
    assert!(!error, "{answer}");
    let rows = session_rows(&database);
    assert_eq!(rows.len(), 1);
    assert_eq!(
        (
            &rows[0]["protocol_mode"],
            &rows[0]["channel_id"],
            &rows[0]["status"]
        ),
        (&json!("mcp"), &json!(CHANNEL_X), &json!("active")),
        "placed as workspace_id=myproj"
    );
    let thread_ts = rows[0]["thread_ts"].as_str().expect("thread").to_string();
    assert_eq!(replies_with(&slack, &thread_ts, "over stdio").len(), 1);

    // Closing stdin ends the stdio session only.
    client.cancel().await.expect("client ends");
    loop {
        let line = tokio::time::timeout(WAIT, process.next_stderr_line())
            .await
            .expect("log in time")
            .unwrap_or_else(|| panic!("the server exited:\n{}", stderr.join("\n")));
        stderr.push(line.clone());
        if line.contains("session ended") {
            break;
        }
    }
    assert_eq!(session_rows(&database)[0]["status"], "terminated");
    assert!(process.try_status().is_none(), "the server keeps running");

    let url = ready["mcp_url"].as_str().expect("mcp_url");
    let http = mcp_client(&format!("{url}?workspace_id=other")).await;
    let (answer, error) = call(&http, "broadcast", json!({ "message": "over http" })).await;
    assert!(!error, "the HTTP endpoint still serves: {answer}");
    let rows = session_rows(&database);
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[1]["status"], "active");
    drop(http);

    process.signal_group(Signal::SIGTERM).expect("sigterm");
    let status = tokio::time::timeout(WAIT, process.wait())
        .await
        .expect("exits")
        .expect("status");
    assert_eq!(status.code(), Some(0));
}

#[tokio::test]
async fn sigterm_ends_every_live_session_with_its_final_message_posted() {
    let slack = fake_slack().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let config = write_config(dir.path(), &slack, "");
    let (mut process, ready, _stderr) = start_with_stdio_session(&config).await;
    let stdin = process.take_stdin().expect("stdin");
    let stdout = process.take_stdout().expect("stdout");
    let database = std::path::PathBuf::from(ready["database"].as_str().expect("database"));
    let stdio = ClientConfig::default()
        .serve((stdout, stdin))
        .await
        .expect("mcp over stdio initializes");
    let (answer, error) = call(&stdio, "broadcast", json!({ "message": "over stdio" })).await;
    assert!(!error, "{answer}");
    let url = ready["mcp_url"].as_str().expect("mcp_url");
    let http = mcp_client(&format!("{url}?workspace_id=myproj")).await;
    let (answer, error) = call(&http, "broadcast", json!({ "message": "over http" })).await;
    assert!(!error, "{answer}");
    assert_eq!(session_rows(&database).len(), 2);

    // The stdio session's own end (its transport cancelled at shutdown) must not race the
    // shutdown's: every live session ends as shut down, and its final message reaches Slack
    // before the process exits.
    process.signal_group(Signal::SIGTERM).expect("sigterm");
    let status = tokio::time::timeout(WAIT, process.wait())
        .await
        .expect("exits")
        .expect("status");
    assert_eq!(status.code(), Some(0));
    for row in session_rows(&database) {
        assert_eq!(row["status"], "interrupted", "{row}");
        let thread = row["thread_ts"].as_str().expect("thread root");
        let finals = replies_with(&slack, thread, "Session ended");
        assert_eq!(finals.len(), 1, "one final message in {thread}: {finals:?}");
        assert!(finals[0].contains("server shut down"), "{finals:?}");
    }
    drop(http);
}

/// Writes `text` the way many editors save: a new file beside the config, renamed over it.
fn replace_like_an_editor(config: &std::path::Path, text: &str) {
    let swap = config.with_extension("toml.swp");
    std::fs::write(&swap, text).expect("write the new file");
    std::fs::rename(&swap, config).expect("rename over the config");
}

#[tokio::test]
async fn hot_reload_sees_every_save_of_an_editor_that_replaces_the_file() {
    let slack = fake_slack().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let config = write_config(dir.path(), &slack, "");
    let server = Server::start(&config, &[]).await;
    let db = server.database();
    let original = std::fs::read_to_string(&config).expect("config");
    let moved_to = |channel: &str| {
        original.replacen(
            &format!("channel_id = \"{CHANNEL_X}\""),
            &format!("channel_id = \"{channel}\""),
            1,
        )
    };

    // Two saves, each replacing the file (a watch on the old file would miss the second).
    for (save, channel) in [(1, CHANNEL_Z), (2, CHANNEL_Y)] {
        replace_like_an_editor(&config, &moved_to(channel));
        server
            .wait_log_count("hot-reloaded workspace mappings", save)
            .await;
        let _client = mcp_client(&server.mcp_url("workspace_id=myproj")).await;
        let rows = session_rows(&db);
        assert_eq!(rows[save - 1]["channel_id"], channel, "save {save}");
    }

    // An invalid save keeps the last good mapping and says so.
    replace_like_an_editor(&config, "[[workspace]]\nid = \"x\"\nid = \"y\"\n");
    server.wait_log("keeping previous values").await;
    let _client = mcp_client(&server.mcp_url("workspace_id=myproj")).await;
    assert_eq!(session_rows(&db)[2]["channel_id"], CHANNEL_Y);
    assert_eq!(server.stop().await, Some(0));
}

#[tokio::test]
async fn auto_check_follows_the_workspace_policy_file_and_its_edits() {
    let slack = fake_slack().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let config = write_config(dir.path(), &slack, "");
    let policy_dir = dir.path().join("ws-myproj/.intercom");
    std::fs::create_dir_all(&policy_dir).expect("mkdir");
    let policy = policy_dir.join("settings.json");
    std::fs::write(
        &policy,
        r#"{"auto_approve": {"tools": ["read_*"], "commands": ["cargo test*"]}}"#,
    )
    .expect("policy");
    let server = Server::start(&config, &[]).await;
    let client = mcp_client(&server.mcp_url("workspace_id=myproj")).await;
    let check = |tool: &'static str, context: Value| {
        let client: rmcp::Peer<rmcp::RoleClient> = (*client).clone();
        async move {
            let (answer, error) = call(
                &client,
                "auto_check",
                json!({ "tool_name": tool, "context": context }),
            )
            .await;
            assert!(!error, "{answer}");
            (
                answer["auto_approved"].clone(),
                answer["matched_rule"].clone(),
            )
        }
    };
    assert_eq!(
        check("read_file", json!({})).await,
        (json!(true), json!("tools:read_*"))
    );
    assert_eq!(
        check("run_command", json!({ "command": "cargo test -p ski" })).await,
        (json!(true), json!("commands:cargo test*"))
    );
    assert_eq!(
        check("run_command", json!({ "command": "cargo test; rm -rf ~" })).await,
        (json!(false), Value::Null)
    );
    assert_eq!(
        check("write_file", json!({})).await,
        (json!(false), Value::Null)
    );
    let (answer, error) = call(
        &client,
        "auto_check",
        json!({ "tool_name": "read_file", "context": "not an object" }),
    )
    .await;
    assert!(error, "a context of the wrong type is an error: {answer}");

    // Edits apply at the next check; a broken file approves nothing.
    std::fs::write(&policy, r#"{"auto_approve": {"tools": ["write_file"]}}"#).expect("edit");
    assert_eq!(
        check("write_file", json!({})).await,
        (json!(true), json!("tools:write_file"))
    );
    assert_eq!(check("read_file", json!({})).await.0, json!(false));
    std::fs::write(&policy, "{ not json").expect("break");
    assert_eq!(check("write_file", json!({})).await.0, json!(false));
    server.wait_log("auto-approve policy unusable").await;

    // A session without a workspace path has no policy.
    let other = mcp_client(&server.mcp_url("workspace_id=other")).await;
    let (answer, _) = call(&other, "auto_check", json!({ "tool_name": "write_file" })).await;
    assert_eq!(answer["auto_approved"], false);
    drop((client, other));
    assert_eq!(server.stop().await, Some(0));
}

/// Starts an MCP session with a pending clearance; answers the client, the call's task, and
/// the approval message's `ts`.
async fn pending_clearance(
    server: &Server,
    slack: &ski_mocks::slack::FakeSlack,
) -> (
    rmcp::service::RunningService<rmcp::RoleClient, ClientConfig>,
    tokio::task::JoinHandle<(Value, bool)>,
    String,
) {
    let client = mcp_client(&server.mcp_url("workspace_id=myproj")).await;
    let pending = ask_clearance(
        &client,
        json!({"title": "edit", "diff": "x\n", "file_path": "a.txt"}),
    );
    let approval = slack
        .wait_for_message(|m| m.text().contains("Approval request `req-001`"), WAIT)
        .await
        .expect("approval posted");
    (client, pending, approval.ts().to_string())
}

fn approval_status(server: &Server) -> String {
    read_db(&server.database())
        .query_row("SELECT status FROM approval_request", [], |r| r.get(0))
        .expect("approval row")
}

#[tokio::test]
async fn a_stranger_can_neither_click_nor_submit_a_modal_on_a_session() {
    let slack = fake_slack().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let config = write_config(dir.path(), &slack, "");
    let server = Server::start(&config, &[]).await;
    let (client, pending, approval_ts) = pending_clearance(&server, &slack).await;
    let click = |action: &str, user: &str| Click {
        channel: CHANNEL_X.into(),
        message_ts: approval_ts.clone(),
        action_id: action.into(),
        user: user.into(),
    };

    // Bob clicks Accept: ignored, logged, nothing changes.
    slack.click(click("approve_accept", BOB)).expect("click");
    server
        .wait_log("ignored a click from an unauthorized user")
        .await;
    assert_eq!(approval_status(&server), "pending");
    assert!(slack.requests().iter().all(|r| r.method != "chat.update"));

    // Alice opens the reject modal; Bob submits it: ignored.
    slack.click(click("approve_reject", ALICE)).expect("click");
    let opened = slack
        .wait_for_requests("views.open", 1, WAIT)
        .await
        .expect("modal opened");
    let view_id = opened[0].response["view"]["id"]
        .as_str()
        .expect("view id")
        .to_string();
    let reason = json!({"instruction_block": {"instruction_text": "not yours"}});
    slack.submit_view(&view_id, reason, BOB).expect("submit");
    server
        .wait_log("ignored a modal from an unauthorized user")
        .await;
    assert_eq!(approval_status(&server), "pending");

    // Alice accepts: hers is the only decision, and nothing anywhere speaks of Bob deciding.
    slack.click(click("approve_accept", ALICE)).expect("click");
    let (answer, _) = tokio::time::timeout(WAIT, pending)
        .await
        .expect("returns")
        .expect("task");
    assert_eq!(answer["status"], "approved", "{answer}");
    assert_eq!(approval_status(&server), "approved");
    let bob = format!("<@{BOB}>");
    let updates: Vec<String> = slack
        .requests()
        .iter()
        .filter(|r| r.method == "chat.update")
        .map(|r| serde_json::to_string(&r.params).unwrap_or_default())
        .collect();
    assert!(updates.iter().all(|u| !u.contains(&bob)), "{updates:?}");
    assert!(
        slack
            .all_messages()
            .iter()
            .all(|m| !m.text().contains(&bob)),
        "a decision by Bob was posted"
    );
    drop(client);
    assert_eq!(server.stop().await, Some(0));
}

/// `value` wrapped in `depth` one-element arrays.
fn nested(depth: usize) -> Value {
    (0..depth).fold(json!("bottom"), |inner, _| Value::Array(vec![inner]))
}

#[tokio::test]
async fn hostile_payloads_are_refused_without_harm_and_the_server_keeps_serving() {
    let slack = fake_slack().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let config = write_config(dir.path(), &slack, "");
    let server = Server::start(&config, &[]).await;
    let (client, pending, approval_ts) = pending_clearance(&server, &slack).await;
    let huge = "x".repeat(2 * 1024 * 1024);
    let interactive = [
        json!({"type": "block_actions", "user": {"id": ALICE}, "actions": [nested(1000)]}),
        json!({"type": "block_actions", "user": {"id": ALICE}, "trigger_id": huge,
               "actions": [{"action_id": "approve_accept", "value": huge, "block_id": huge}],
               "channel": {"id": CHANNEL_X}, "message": {"ts": approval_ts}}),
        json!({"type": "block_actions", "user": 5, "actions": "x"}),
        json!({"type": "block_actions", "user": {"id": ALICE},
               "actions": [{"action_id": 7, "value": {}}], "container": [], "message": "m"}),
        json!({"type": "block_actions", "user": {"id": ALICE},
               "actions": [{"type": "button", "action_id": "approve_accept", "value": "req-001",
                            "block_id": "approval_req-001", "action_ts": "1.1"}],
               "channel": {"id": CHANNEL_X, "name": "x"}, "message": {"ts": 12, "thread_ts": []},
               "team": {"id": "T1"}, "api_app_id": "A1", "token": "t"}),
        json!({"type": "view_submission", "user": {"id": ALICE},
               "view": {"callback_id": 5, "private_metadata": "{not json", "state": {"values": []}}}),
        json!({"type": "view_submission", "user": {"id": ALICE}, "team": {"id": "T1"},
               "view": {"id": "V1", "type": "modal", "callback_id": "approval_reject",
                        "private_metadata": "{\"session_id\": 5, \"request_id\": []}",
                        "state": {"values": {"instruction_block": {"instruction_text": {"value": huge}}}}}}),
        json!({"type": "view_submission", "user": {"id": ALICE}, "view": nested(1000)}),
        json!("just a string"),
        json!(null),
    ];
    for payload in interactive {
        slack.raw_envelope(EnvelopeKind::Interactive, payload);
    }
    for payload in [
        json!({"command": SLASH, "text": 12345, "user_id": ALICE, "channel_id": CHANNEL_X}),
        json!({"command": SLASH}),
        json!([1, 2, 3]),
    ] {
        slack.raw_envelope(EnvelopeKind::SlashCommands, payload);
    }
    // Every one of them fails to parse in the Socket Mode listener and is logged, briefly.
    server
        .wait_log_count("socket mode listener error", 13)
        .await;
    let longest = server.log().iter().map(String::len).max().unwrap_or(0);
    assert!(longest < 8 * 1024, "a log line of {longest} bytes");

    // Oversize slash text that parses is answered with an error.
    let oversize = slack
        .raw_envelope(
            EnvelopeKind::SlashCommands,
            json!({"command": SLASH, "text": huge, "user_id": ALICE, "channel_id": CHANNEL_X,
                   "team_id": "T1", "user_name": "alice", "channel_name": "x", "trigger_id": "t",
                   "response_url": "http://127.0.0.1:9/never", "api_app_id": "A1"}),
        )
        .ack(WAIT)
        .await
        .expect("ack");
    let reply = oversize
        .payload
        .as_ref()
        .and_then(|p| p["text"].as_str())
        .unwrap_or_default()
        .to_string();
    assert!(reply.starts_with("Error: command text too long"), "{reply}");

    // The server still answers a normal command, the approval is untouched, nothing panicked.
    let ack = slack
        .slash_command(SlashCommand {
            command: SLASH.into(),
            text: "sessions".into(),
            channel: CHANNEL_X.into(),
            user: ALICE.into(),
        })
        .expect("inject")
        .ack(WAIT)
        .await
        .expect("ack");
    let text = ack
        .payload
        .as_ref()
        .and_then(|p| p["text"].as_str())
        .unwrap_or_default()
        .to_string();
    assert!(!text.is_empty(), "{ack:?}");
    assert_eq!(approval_status(&server), "pending");
    let log = server.log().join("\n");
    assert!(!log.contains("panicked"), "{log}");
    pending.abort();
    drop(client);
    assert_eq!(
        server.stop().await,
        Some(0),
        "a clean exit after hostile input"
    );
}

#[rstest]
#[case::relative("ws/../../etc")]
#[case::absolute("/tmp/../etc")]
#[tokio::test]
async fn workspace_paths_with_parent_components_are_refused_at_startup(#[case] path: &str) {
    let slack = fake_slack().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let extra = format!("[[workspace]]\nid = \"escape\"\nchannel_id = \"C9\"\npath = \"{path}\"\n");
    let config = write_config(dir.path(), &slack, &extra);
    let (code, stderr) = run_to_exit(&config, &[], &[]).await;
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!("path must not contain '..': {path}")),
        "{stderr}"
    );
}

#[tokio::test]
async fn a_database_path_with_parent_components_is_refused_at_startup() {
    let slack = fake_slack().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let config = write_config(dir.path(), &slack, "");
    let text = std::fs::read_to_string(&config).expect("config").replace(
        "path = \"data/intercom.db\"",
        "path = \"data/../../intercom.db\"",
    );
    std::fs::write(&config, text).expect("write");
    let (code, stderr) = run_to_exit(&config, &[], &[]).await;
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("path must not contain '..'"), "{stderr}");
}

#[tokio::test]
async fn stdio_flags_are_usage_errors_outside_mcp_mode_or_alone() {
    let slack = fake_slack().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let config = write_config(dir.path(), &slack, "host_cli = \"/bin/sh\"");
    let (code, stderr) = run_to_exit(&config, &["--mode", "acp", "--mcp-stdio"], &[]).await;
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("--mcp-stdio needs --mode mcp"), "{stderr}");
    let (code, stderr) = run_to_exit(&config, &["--workspace", "myproj"], &[]).await;
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("--mcp-stdio"), "{stderr}");
}
