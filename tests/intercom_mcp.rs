//! `ski intercom` as a real process against the in-process fake Slack, driven by slash commands
//! and clicks through the fake's control API and by the rmcp client over streamable HTTP.

use crate::intercom_support;

use std::time::Duration;

use intercom_support::*;
use serde_json::{Value, json};
use ski_mocks::slack::{Click, SlashCommand};
use ski_mocks::testing::INTERCOM_TOOLS;

async fn slash(
    slack: &ski_mocks::slack::FakeSlack,
    channel: &str,
    user: &str,
    text: &str,
) -> Option<String> {
    let injected = slack
        .slash_command(SlashCommand {
            command: SLASH.into(),
            text: text.into(),
            channel: channel.into(),
            user: user.into(),
        })
        .expect("inject");
    let ack = injected.ack(WAIT).await.expect("ack");
    ack.payload
        .and_then(|p| p.get("text").and_then(Value::as_str).map(str::to_string))
}

fn session_of(db: &std::path::Path, index: usize) -> Value {
    session_rows(db).get(index).cloned().expect("a session row")
}

#[tokio::test]
async fn startup_errors_exit_1_with_the_matrix_texts_and_usage_errors_exit_2() {
    let slack = fake_slack().await;
    let dir = tempfile::tempdir().expect("tempdir");

    let config = write_config(dir.path(), &slack, "");
    let (code, stderr) = run_to_exit(&config, &["--mode", "acp"], &[]).await;
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains("ACP mode requires host_cli configuration"),
        "{stderr}"
    );

    let config = write_config(dir.path(), &slack, "host_cli = \"/nonexistent/path\"");
    let (code, stderr) = run_to_exit(&config, &["--mode", "acp"], &[]).await;
    assert_eq!(code, Some(1));
    assert!(
        stderr.contains("host_cli binary not found: /nonexistent/path"),
        "{stderr}"
    );

    let (code, stderr) = run_to_exit(&config, &["--mode", "invalid"], &[]).await;
    assert_eq!(code, Some(2));
    assert!(
        stderr.contains("invalid value 'invalid' for '--mode"),
        "{stderr}"
    );

    let config = write_config(
        dir.path(),
        &slack,
        "[[workspace]]\nid = \"myproj\"\nchannel_id = \"C9\"\n",
    );
    let (code, stderr) = run_to_exit(&config, &[], &[]).await;
    assert_eq!(code, Some(1));
    assert!(
        stderr.contains("duplicate workspace id: myproj"),
        "{stderr}"
    );

    let config = write_config(
        dir.path(),
        &slack,
        "[[workspace]]\nid = \"\"\nchannel_id = \"C9\"\n",
    );
    let (code, stderr) = run_to_exit(&config, &[], &[]).await;
    assert_eq!(code, Some(1));
    assert!(
        stderr.contains("workspace id must not be empty"),
        "{stderr}"
    );

    let config = write_config(dir.path(), &slack, "");
    let (code, stderr) = run_to_exit(&config, &[], &[("SLACK_BOT_TOKEN", None)]).await;
    assert_eq!(code, Some(1));
    assert!(stderr.contains("SLACK_BOT_TOKEN is not set"), "{stderr}");
    assert!(
        slack.requests().is_empty(),
        "nothing reached slack before validation passed"
    );
}

#[tokio::test]
async fn an_mcp_session_threads_its_messages_and_clearances_block_until_a_click() {
    let slack = fake_slack().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let config = write_config(dir.path(), &slack, "");
    let server = Server::start(&config, &[]).await;
    assert_eq!(server.ready["mode"], "mcp");
    assert_eq!(server.ready["slack"], "connected");

    let client = mcp_client(&server.mcp_url("workspace_id=myproj")).await;
    let tools = client.list_tools(None).await.expect("tools/list");
    let mut names: Vec<String> = tools.tools.iter().map(|t| t.name.to_string()).collect();
    names.sort();
    assert_eq!(names, INTERCOM_TOOLS);

    let db = server.database();
    let row = session_of(&db, 0);
    assert_eq!(row["protocol_mode"], "mcp");
    assert_eq!(row["channel_id"], CHANNEL_X);
    let thread_ts = row["thread_ts"]
        .as_str()
        .expect("thread root recorded")
        .to_string();
    let root = &slack.messages(CHANNEL_X, None)[0];
    assert_eq!(
        root.ts(),
        thread_ts,
        "the first post is the root and its ts the thread_ts"
    );
    assert_eq!(root.thread_ts(), None);

    let (answer, error) = call(
        &client,
        "broadcast",
        json!({"message": "compiling", "level": "info"}),
    )
    .await;
    assert!(!error, "{answer}");
    let replies = slack.messages(CHANNEL_X, Some(&thread_ts));
    assert!(
        replies.iter().any(|m| m.text().contains("compiling")),
        "broadcast is a thread reply"
    );

    // Accept.
    let pending = ask_clearance(
        &client,
        json!({"title": "edit main", "diff": "fn main() {}\n", "file_path": "src/main.rs"}),
    );
    let approval = slack
        .wait_for_message(|m| m.text().contains("Approval request `req-001`"), WAIT)
        .await
        .expect("approval posted");
    assert_eq!(
        approval.thread_ts(),
        Some(thread_ts.as_str()),
        "approval is threaded"
    );
    assert!(
        !pending.is_finished(),
        "check_clearance blocks until the click"
    );
    approve(&slack, &approval);
    let (answer, error) = tokio::time::timeout(WAIT, pending)
        .await
        .expect("returns")
        .expect("task");
    assert!(!error);
    assert_eq!(answer["status"], "approved");
    assert_eq!(answer["request_id"], "req-001");
    let note = slack
        .wait_for_message(
            |m| {
                m.text().contains("Approved")
                    && m.thread_ts() == Some(thread_ts.as_str())
                    && !m.text().contains("Approval request")
            },
            WAIT,
        )
        .await
        .expect("decision in the thread");
    assert!(note.text().contains(ALICE));

    // check_diff writes the approved content under the workspace path.
    let (answer, error) = call(&client, "check_diff", json!({"request_id": "req-001"})).await;
    assert!(!error, "{answer}");
    let written =
        std::fs::read_to_string(dir.path().join("ws-myproj/src/main.rs")).expect("written");
    assert_eq!(written, "fn main() {}\n");

    // Reject with a reason through the modal.
    let pending = {
        let client: rmcp::Peer<rmcp::RoleClient> = (*client).clone();
        tokio::spawn(async move {
            call(&client, "check_clearance", json!({"title": "delete tests", "diff": "-", "file_path": "tests/a.rs", "risk_level": "high"})).await
        })
    };
    let approval = slack
        .wait_for_message(|m| m.text().contains("Approval request `req-002`"), WAIT)
        .await
        .expect("second approval");
    slack
        .click(Click {
            channel: CHANNEL_X.into(),
            message_ts: approval.ts().into(),
            action_id: "approve_reject".into(),
            user: ALICE.into(),
        })
        .expect("click");
    let opened = slack
        .wait_for_requests("views.open", 1, WAIT)
        .await
        .expect("modal opened");
    let view_id = opened[0].response["view"]["id"]
        .as_str()
        .expect("view id")
        .to_string();
    slack
        .submit_view(
            &view_id,
            json!({"instruction_block": {"instruction_text": "wrong file"}}),
            ALICE,
        )
        .expect("submit");
    let (answer, _) = tokio::time::timeout(WAIT, pending)
        .await
        .expect("returns")
        .expect("task");
    assert_eq!(answer["status"], "rejected");
    assert_eq!(answer["reason"], "wrong file");

    // The thread cannot be moved.
    let (answer, _) = call(
        &client,
        "broadcast",
        json!({"message": "elsewhere?", "thread_ts": "999.999"}),
    )
    .await;
    assert_eq!(answer["posted"], true);
    let moved = slack
        .wait_for_message(|m| m.text().contains("elsewhere?"), WAIT)
        .await
        .expect("posted");
    assert_eq!(moved.thread_ts(), Some(thread_ts.as_str()));
    assert_eq!(session_of(&db, 0)["thread_ts"], thread_ts.as_str());

    // Steering reaches the agent's next ping, once.
    let reply = slash(&slack, CHANNEL_X, ALICE, "steer use the new parser")
        .await
        .expect("reply");
    assert!(reply.contains("queued"), "{reply}");
    let (answer, _) = call(&client, "ping", json!({"status_message": "working"})).await;
    assert_eq!(answer["pending_steering"], json!(["use the new parser"]));
    let (answer, _) = call(&client, "ping", json!({})).await;
    assert_eq!(answer["pending_steering"], json!([]));

    // Stop from Slack: "Session ended" in the thread, the row terminated.
    let reply = slash(&slack, CHANNEL_X, ALICE, "session-stop")
        .await
        .expect("reply");
    assert!(reply.contains("stopped"), "{reply}");
    slack
        .wait_for_message(
            |m| m.text().contains("Session ended") && m.thread_ts() == Some(thread_ts.as_str()),
            WAIT,
        )
        .await
        .expect("final message threaded");
    assert_eq!(session_of(&db, 0)["status"], "terminated");
    let (answer, error) = call(&client, "ping", json!({})).await;
    assert!(error, "a stopped session refuses tools: {answer}");
    let _ = client.cancel().await;
    assert_eq!(server.stop().await, Some(0));
}

#[tokio::test]
async fn clicks_and_commands_route_by_channel_and_thread_and_the_guard_ignores_strangers() {
    let slack = fake_slack().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let config = write_config(dir.path(), &slack, "");
    let server = Server::start(&config, &[]).await;
    let db = server.database();
    let a = mcp_client(&server.mcp_url("workspace_id=myproj")).await;
    let b = mcp_client(&server.mcp_url("workspace_id=myproj")).await;
    let c = mcp_client(&server.mcp_url("workspace_id=other")).await;
    let rows = session_rows(&db);
    assert_eq!(rows.len(), 3);
    let (ta, tb) = (
        rows[0]["thread_ts"].as_str().expect("A"),
        rows[1]["thread_ts"].as_str().expect("B"),
    );
    assert_ne!(ta, tb, "two sessions in one channel get two threads");
    let (ida, idb, idc) = (
        rows[0]["id"].as_str().expect("id").to_string(),
        rows[1]["id"].as_str().expect("id").to_string(),
        rows[2]["id"].as_str().expect("id").to_string(),
    );

    // Both A and B ask req-001; the click in A's thread answers A only.
    let ask = |client: &rmcp::Peer<rmcp::RoleClient>, title: &'static str| {
        let client: rmcp::Peer<rmcp::RoleClient> = client.clone();
        tokio::spawn(async move {
            call(
                &client,
                "check_clearance",
                json!({"title": title, "diff": "x", "file_path": "f"}),
            )
            .await
        })
    };
    let pending_a = ask(&a, "from A");
    let posted_a = slack
        .wait_for_message(|m| m.text().contains("from A"), WAIT)
        .await
        .expect("A asked");
    let pending_b = ask(&b, "from B");
    slack
        .wait_for_message(|m| m.text().contains("from B"), WAIT)
        .await
        .expect("B asked");
    assert_eq!(posted_a.thread_ts(), Some(ta));
    approve(&slack, &posted_a);
    let (answer, _) = tokio::time::timeout(WAIT, pending_a)
        .await
        .expect("A answered")
        .expect("task");
    assert_eq!(answer["status"], "approved");
    assert!(!pending_b.is_finished(), "B still waits");

    // The most recently active session answers a bare status; a ping makes A the most recent.
    let reply = slash(&slack, CHANNEL_X, ALICE, "status")
        .await
        .expect("reply");
    assert!(
        reply.contains(&idb),
        "B was created last and asked last: {reply}"
    );
    call(&a, "ping", json!({})).await;
    let reply = slash(&slack, CHANNEL_X, ALICE, "status")
        .await
        .expect("reply");
    assert!(reply.contains(&ida), "{reply}");

    // Steering in channel Y reaches C only.
    slash(&slack, CHANNEL_Y, ALICE, "steer only for C").await;
    let (answer, _) = call(&a, "ping", json!({})).await;
    assert_eq!(answer["pending_steering"], json!([]));
    let (answer, _) = call(&c, "ping", json!({})).await;
    assert_eq!(answer["pending_steering"], json!(["only for C"]));

    // A channel with no session.
    let reply = slash(&slack, CHANNEL_Z, ALICE, "session-stop")
        .await
        .expect("reply");
    assert_eq!(reply, "No active session in this channel");

    // An unauthorized user: no reply, nothing changes, the guard logs it.
    let before = slack.ephemerals().len();
    assert_eq!(
        slash(&slack, CHANNEL_X, BOB, &format!("session-stop {idb}")).await,
        None
    );
    assert_eq!(
        slash(
            &slack,
            CHANNEL_X,
            BOB,
            "session-start \"build a web server\""
        )
        .await,
        None
    );
    server.wait_log("authorization guard").await;
    assert_eq!(slack.ephemerals().len(), before);
    assert_eq!(session_rows(&db).len(), 3);
    assert!(session_rows(&db).iter().all(|r| r["status"] == "active"));
    let _ = idc;

    // Oversize text is answered with an error.
    let reply = slash(&slack, CHANNEL_X, ALICE, &"x".repeat(5000))
        .await
        .expect("reply");
    assert!(reply.starts_with("Error: command text too long"), "{reply}");
    drop(pending_b);
    assert_eq!(server.stop().await, Some(0));
}

#[tokio::test]
async fn workspace_and_legacy_channel_parameters_place_sessions_and_hot_reload_affects_new_ones() {
    let slack = fake_slack().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let config = write_config(dir.path(), &slack, "");
    let server = Server::start(&config, &[]).await;
    let db = server.database();

    let _unknown = mcp_client(&server.mcp_url("workspace_id=unknown")).await;
    server.wait_log("workspace_id not found").await;
    let _legacy = mcp_client(&server.mcp_url(&format!("channel_id={CHANNEL_Y}"))).await;
    let _both =
        mcp_client(&server.mcp_url(&format!("workspace_id=myproj&channel_id={CHANNEL_Y}"))).await;
    let _none = mcp_client(&server.mcp_url("")).await;
    let rows = session_rows(&db);
    let channels: Vec<Value> = rows.iter().map(|r| r["channel_id"].clone()).collect();
    assert_eq!(
        channels,
        [Value::Null, json!(CHANNEL_Y), json!(CHANNEL_X), Value::Null]
    );
    assert!(
        server
            .log()
            .iter()
            .filter(|l| l.contains("deprecated"))
            .count()
            >= 2
    );

    // Hot reload: myproj moves to Z; the live session keeps X, a new one gets Z.
    let text = std::fs::read_to_string(&config).expect("config");
    std::fs::write(
        &config,
        text.replacen(
            &format!("channel_id = \"{CHANNEL_X}\""),
            &format!("channel_id = \"{CHANNEL_Z}\""),
            1,
        ),
    )
    .expect("edit");
    server.wait_log("hot-reloaded workspace mappings").await;
    let _after = mcp_client(&server.mcp_url("workspace_id=myproj")).await;
    let rows = session_rows(&db);
    assert_eq!(rows[2]["channel_id"], CHANNEL_X);
    assert_eq!(rows[4]["channel_id"], CHANNEL_Z);

    // An invalid edit keeps the last good mapping.
    std::fs::write(&config, "[[workspace]]\nid = \"\"\nchannel_id = \"C1\"\n").expect("break");
    server.wait_log("keeping previous values").await;
    let _again = mcp_client(&server.mcp_url("workspace_id=myproj")).await;
    assert_eq!(session_rows(&db)[5]["channel_id"], CHANNEL_Z);
    assert_eq!(server.stop().await, Some(0));
}

#[tokio::test]
async fn an_older_database_is_migrated_in_place_and_a_restart_interrupts_leftovers() {
    let slack = fake_slack().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let config = write_config(dir.path(), &slack, "");
    std::fs::create_dir_all(dir.path().join("data")).expect("data dir");
    {
        let db = rusqlite::Connection::open(dir.path().join("data/intercom.db")).expect("db");
        db.execute_batch(
            "CREATE TABLE session (id TEXT PRIMARY KEY, owner_user_id TEXT NOT NULL, workspace_root TEXT,
                status TEXT NOT NULL, prompt TEXT, mode TEXT NOT NULL DEFAULT 'remote',
                created_at TEXT NOT NULL, updated_at TEXT NOT NULL, terminated_at TEXT, last_tool TEXT,
                nudge_count INTEGER NOT NULL DEFAULT 0, stall_paused INTEGER NOT NULL DEFAULT 0,
                progress_snapshot TEXT);
             INSERT INTO session (id, owner_user_id, status, created_at, updated_at)
             VALUES ('legacy-1', 'U1', 'active', 't', 't');",
        )
        .expect("legacy");
    }
    let server = Server::start(&config, &[]).await;
    let db = read_db(&server.database());
    let columns: Vec<String> = db
        .prepare("SELECT name FROM pragma_table_info('session')")
        .expect("prepare")
        .query_map([], |r| r.get(0))
        .expect("query")
        .collect::<Result<_, _>>()
        .expect("columns");
    for column in ["protocol_mode", "channel_id", "thread_ts"] {
        assert!(
            columns.iter().any(|c| c == column),
            "{column} added: {columns:?}"
        );
    }
    let (mode, status): (String, String) = db
        .query_row(
            "SELECT protocol_mode, status FROM session WHERE id = 'legacy-1'",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .expect("row kept");
    assert_eq!((mode.as_str(), status.as_str()), ("mcp", "interrupted"));
    let journal: String = db
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .expect("journal");
    assert_eq!(journal, "wal");
    assert_eq!(server.stop().await, Some(0));
    tokio::time::sleep(Duration::from_millis(0)).await;
}

#[tokio::test]
async fn wrong_arguments_and_unknown_tools_are_answered_with_tool_errors_naming_them() {
    let slack = fake_slack().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let config = write_config(dir.path(), &slack, "");
    let server = Server::start(&config, &[]).await;
    let client = mcp_client(&server.mcp_url("workspace_id=myproj")).await;
    let listed: Vec<String> = client
        .list_tools(None)
        .await
        .expect("tools/list")
        .tools
        .iter()
        .map(|t| t.name.to_string())
        .collect();
    let named: Vec<&str> = ski::intercom::mcp::ToolName::ALL
        .iter()
        .map(|tool| tool.as_str())
        .collect();
    assert_eq!(listed, named, "tools/list gives the one list, in its order");
    for (tool, args, expected) in [
        (
            "check_clearance",
            json!({"title": 5, "diff": "-", "file_path": "a"}),
            "invalid arguments: title must be a string",
        ),
        (
            "check_clearance",
            json!({"title": "t", "diff": "-"}),
            "invalid arguments: missing field file_path",
        ),
        (
            "check_clearance",
            json!({"title": "t", "diff": "-", "file_path": "a", "risk_level": "severe"}),
            "invalid arguments: risk_level \"severe\"",
        ),
        (
            "switch_freq",
            json!({"mode": "away"}),
            "invalid arguments: mode \"away\"",
        ),
        (
            "auto_check",
            json!({"tool_name": "x", "context": []}),
            "invalid arguments: context must be an object",
        ),
        ("teleport", json!({}), "unknown tool: teleport"),
    ] {
        let (answer, error) = call(&client, tool, args).await;
        assert!(error, "{tool}: {answer}");
        assert_eq!(answer, json!(expected), "{tool}");
    }
    let (answer, error) = call(&client, "switch_freq", json!({"mode": "hybrid"})).await;
    assert!(!error, "{answer}");
    assert_eq!(
        answer,
        json!({"previous_mode": "remote", "current_mode": "hybrid"})
    );
    let (answer, _) = call(&client, "reboot", json!({})).await;
    assert_eq!(answer["session_status"], "active");
    let mode: String = read_db(&server.database())
        .query_row("SELECT mode FROM session", [], |row| row.get(0))
        .expect("the session's mode");
    assert_eq!(mode, "hybrid");
    let _ = client.cancel().await;
    assert_eq!(server.stop().await, Some(0));
}
