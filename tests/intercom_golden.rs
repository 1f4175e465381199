//! golden/intercom: the nine MCP tool schemas, the Block Kit the server posts and the ACP stream
//! lines it writes are pinned by insta snapshots in `golden/intercom/snapshots/`, and the example
//! config and auto-approve policy (`golden/intercom/config/`) parse and validate.
//!
//! After an intended change: `cargo insta review` (CI never writes snapshots).

use std::path::{Path, PathBuf};

use serde_json::Value;
use ski::intercom::blocks;
use ski::intercom::config::{Config, Mode};
use ski::intercom::mcp::tools;

const SNAPSHOTS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/golden/intercom/snapshots");

fn golden(relative: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("golden/intercom")
        .join(relative)
}

/// Pins `actual` as `golden/intercom/snapshots/<name>.snap`.
fn pin(name: &str, actual: &Value) {
    insta::with_settings!({ snapshot_path => SNAPSHOTS, prepend_module_to_snapshot => false, omit_expression => true }, {
        insta::assert_json_snapshot!(name, actual);
    });
}

#[test]
fn the_nine_tool_schemas_are_pinned() {
    let tools = serde_json::to_value(tools()).expect("tools json");
    assert_eq!(tools.as_array().map(Vec::len), Some(9));
    pin("mcp__tools", &tools);
}

#[test]
fn the_posted_blocks_are_pinned() {
    pin(
        "slack__approval",
        &blocks::approval(
            "req-001",
            "edit main",
            "src/main.rs",
            "high",
            Some("rename the entry point"),
            "fn main() {}\n",
        ),
    );
    pin(
        "slack__prompt",
        &blocks::prompt("prompt-0001", "clarification", "Which parser?"),
    );
    pin(
        "slack__standby",
        &blocks::standby("00000000-0000-0000-0000-000000000001", "Waiting for review"),
    );
    pin(
        "slack__decided",
        &blocks::decided("✅ *Approved* `req-001` by <@U0000000002>"),
    );
    pin(
        "slack__reject_modal",
        &blocks::reason_modal("approval_reject", "Reject", "Why reject?", "{}"),
    );
}

#[test]
fn the_example_config_parses_and_validates() {
    let path = golden("config/example.toml");
    let text = std::fs::read_to_string(&path).expect("example");
    let config = Config::parse(&text, &path).expect("parses");
    config.validate(Mode::Mcp).expect("valid for mcp");
    assert_eq!(config.workspaces.len(), 2);
    assert_eq!(config.slack.slash_command, "/intercom");
}

#[test]
fn the_stall_escalation_and_the_acp_stream_lines_are_pinned() {
    use ski::intercom::acp::wire::out;
    pin(
        "slack__stalled",
        &blocks::stalled(
            "00000000-0000-0000-0000-000000000001",
            "⚠️ Agent unresponsive after 3 nudge attempts — switching to queue mode.",
        ),
    );
    let id = serde_json::json!("req-001");
    let lines = [
        out::clearance_response(&id, "approved", None),
        out::clearance_response(&id, "rejected", Some("wrong file")),
        out::prompt_response(&serde_json::json!("fwd-001"), "continue", None),
        out::prompt_send("do X"),
        out::interrupt(),
        out::nudge("Continue working on the current task.", 1),
    ];
    let parsed: Vec<Value> = lines
        .iter()
        .map(|line| {
            assert!(line.ends_with('\n') && !line[..line.len() - 1].contains('\n'));
            serde_json::from_str(line).expect("each line is one JSON object")
        })
        .collect();
    pin("acp__stream-lines", &Value::Array(parsed));
}

#[test]
fn the_example_auto_approve_policy_loads_and_approves_what_it_names() {
    use ski::intercom::policy;
    let dir = tempfile::tempdir().expect("tempdir");
    let target = policy::policy_path(dir.path());
    std::fs::create_dir_all(target.parent().expect("parent")).expect("mkdir");
    std::fs::copy(golden("config/settings.json"), &target).expect("copy");
    let policy = policy::load(dir.path()).expect("loads");
    assert!(policy.check("list_dir", None).auto_approved);
    let command = |c: &str| serde_json::json!({ "command": c });
    assert_eq!(
        policy
            .check("run_command", Some(&command("git diff --stat")))
            .matched_rule
            .as_deref(),
        Some("commands:git diff*")
    );
    assert!(!policy.check("write_file", None).auto_approved);
    assert!(
        !policy
            .check("run_command", Some(&command("git push")))
            .auto_approved
    );
}
