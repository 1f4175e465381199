//! `ski intercom`'s workspace files through its MCP tools, against a workspace that holds
//! symbolic links out of it and FIFOs: an approved harmless-looking relative path (`notes.md`,
//! `docs/readme.md`) that leads outside through a link, dangling or not, is refused by
//! `check_diff` and nothing outside changes; `auto_check` reads no policy through a link out of
//! the workspace and does not block on a FIFO in its place.

use crate::intercom_support;

use std::os::unix::fs::symlink;
use std::path::Path;

use nix::sys::stat::Mode;

use intercom_support::*;
use rmcp::RoleClient;
use rmcp::model::ClientConfig;
use rmcp::service::RunningService;
use serde_json::{Value, json};
use ski_mocks::slack::FakeSlack;

/// Asks clearance for `file_path` and approves it with a click; it becomes `request_id`.
async fn approved(
    client: &RunningService<RoleClient, ClientConfig>,
    slack: &FakeSlack,
    file_path: &str,
    request_id: &str,
) {
    let pending = ask_clearance(
        client,
        json!({"title": "edit", "diff": "changed\n", "file_path": file_path}),
    );
    let approval = slack
        .wait_for_message(
            |m| {
                m.text()
                    .contains(&format!("Approval request `{request_id}`"))
            },
            WAIT,
        )
        .await
        .expect("approval posted");
    approve(slack, &approval);
    let (answer, error) = tokio::time::timeout(WAIT, pending)
        .await
        .expect("returns")
        .expect("task");
    assert!(!error, "{answer}");
    assert_eq!(answer["status"], "approved");
    assert_eq!(answer["request_id"], request_id);
}

async fn check_diff(client: &rmcp::Peer<RoleClient>, request_id: &str) -> (Value, bool) {
    call(client, "check_diff", json!({"request_id": request_id})).await
}

fn text(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[tokio::test]
async fn approved_paths_that_leave_the_workspace_through_links_are_not_written() {
    let slack = fake_slack().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let base = dir.path().canonicalize().expect("canonical");
    let workspace = base.join("ws-myproj");
    let outside = base.join("outside");
    std::fs::create_dir_all(&workspace).expect("workspace");
    std::fs::create_dir_all(&outside).expect("outside");
    std::fs::write(outside.join("notes.md"), "outside notes\n").expect("notes");
    symlink(outside.join("notes.md"), workspace.join("notes.md")).expect("file link");
    symlink(&outside, workspace.join("docs")).expect("dir link");
    symlink(outside.join("later.md"), workspace.join("later.md")).expect("dangling link");
    let config = write_config(&base, &slack, "");
    let server = Server::start(&config, &[]).await;
    let client = mcp_client(&server.mcp_url("workspace_id=myproj")).await;

    let cases = [
        ("notes.md", "req-001", "notes.md -> "),
        ("docs/readme.md", "req-002", "docs -> "),
        ("later.md", "req-003", "later.md -> "),
    ];
    for (file_path, request_id, link) in cases {
        approved(&client, &slack, file_path, request_id).await;
        let (answer, error) = check_diff(&client, request_id).await;
        assert!(error, "{file_path} was written: {answer}");
        let message = answer.as_str().unwrap_or_default();
        assert!(
            message.contains("leaves the root through the link") && message.contains(link),
            "{file_path}: {answer}"
        );
    }
    assert_eq!(text(&outside.join("notes.md")), "outside notes\n");
    assert!(!outside.join("readme.md").exists());
    assert!(!outside.join("later.md").exists());

    // A plain path in a new directory is still written.
    approved(&client, &slack, "src/ok.rs", "req-004").await;
    let (answer, error) = check_diff(&client, "req-004").await;
    assert!(!error, "{answer}");
    assert_eq!(answer["files_written"], json!(["src/ok.rs"]));
    assert_eq!(text(&workspace.join("src/ok.rs")), "changed\n");
    server.stop().await;
}

#[tokio::test]
async fn the_auto_approve_policy_is_read_only_inside_the_workspace_and_never_blocks() {
    let slack = fake_slack().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let base = dir.path().canonicalize().expect("canonical");
    let policy_dir = base.join("ws-myproj/.intercom");
    std::fs::create_dir_all(&policy_dir).expect("workspace");
    let config = write_config(&base, &slack, "");
    let server = Server::start(&config, &[]).await;
    let client = mcp_client(&server.mcp_url("workspace_id=myproj")).await;
    let auto_check = || async {
        // A guard for a read that blocks (the defect), not a timing assertion.
        let (answer, error) = tokio::time::timeout(
            WAIT,
            call(&client, "auto_check", json!({"tool_name": "read_file"})),
        )
        .await
        .expect("auto_check answers");
        assert!(!error, "{answer}");
        answer["auto_approved"].clone()
    };

    // A policy that approves everything, outside the workspace, linked in.
    std::fs::write(
        base.join("everything.json"),
        r#"{"auto_approve": {"tools": ["*"]}}"#,
    )
    .expect("outside policy");
    symlink(
        base.join("everything.json"),
        policy_dir.join("settings.json"),
    )
    .expect("link");
    assert_eq!(
        auto_check().await,
        json!(false),
        "a policy linked in from outside"
    );

    std::fs::remove_file(policy_dir.join("settings.json")).expect("unlink");
    nix::unistd::mkfifo(
        &policy_dir.join("settings.json"),
        Mode::from_bits_truncate(0o600),
    )
    .expect("mkfifo");
    assert_eq!(auto_check().await, json!(false), "a FIFO as the policy");
    server.wait_log("auto-approve policy unusable").await;
    server.stop().await;
}
