//! Golden fixtures of `ski teams`, pinned by insta snapshots in `golden/teams/snapshots/`: the
//! JSON output of each command of one scripted session, config.json, a message line and the
//! injected `<teammate-message>` block. Time is fixed with `--now-ms`; random UUIDs are replaced
//! by `[uuid]` and the temp root by `[root]`.
//!
//! After an intended change: `cargo insta review` (CI never writes snapshots).

use crate::teams_support;

use std::path::Path;

use serde_json::Value;
use teams_support::{LEAD, Root};

const SNAPSHOTS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/golden/teams/snapshots");

/// Replaces every lowercase hyphenated UUID in `text` with `[uuid]`.
fn redact_uuids(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < bytes.len() {
        let candidate = bytes.get(i..i + 36);
        let is_uuid = candidate.is_some_and(|c| {
            c.iter().enumerate().all(|(k, b)| {
                if [8, 13, 18, 23].contains(&k) {
                    *b == b'-'
                } else {
                    b.is_ascii_digit() || (b'a'..=b'f').contains(b)
                }
            })
        });
        if is_uuid {
            out.push_str("[uuid]");
            i += 36;
        } else {
            let c = text[i..].chars().next().unwrap_or('?');
            out.push(c);
            i += c.len_utf8();
        }
    }
    out
}

fn redact(value: &Value, root: &Path) -> Value {
    let text = serde_json::to_string(value).unwrap_or_default();
    let text = redact_uuids(&text).replace(&root.display().to_string(), "[root]");
    serde_json::from_str(&text).unwrap_or(Value::Null)
}

#[test]
fn a_scripted_session_prints_the_pinned_documents() {
    let root = Root::new();
    let at = |ms: &str, caller: &str, args: &[&str]| -> Value {
        let mut all = vec!["--now-ms", ms];
        all.extend_from_slice(args);
        root.run(caller, &all).1
    };
    let redacted = |value: &Value| redact(value, &root.root);
    let researcher = "agent:researcher:main";
    insta::with_settings!({ snapshot_path => SNAPSHOTS, prepend_module_to_snapshot => false, omit_expression => true }, {
        insta::assert_json_snapshot!(
            "team-create",
            redacted(&at(
                "1000",
                LEAD,
                &["team", "create", "alpha-squad", "--description", "demo"]
            ))
        );
        let config: Value = serde_json::from_slice(
            &std::fs::read(root.root.join("alpha-squad/config.json")).expect("config"),
        )
        .expect("json");
        insta::assert_json_snapshot!("config-json", redacted(&config));
        insta::assert_json_snapshot!(
            "member-spawn",
            redacted(&at(
                "1100",
                LEAD,
                &[
                    "member",
                    "spawn",
                    "alpha-squad",
                    "tester",
                    "--agent-id",
                    "qa"
                ]
            ))
        );
        insta::assert_json_snapshot!(
            "member-join",
            redacted(&at(
                "1200",
                researcher,
                &["member", "join", "alpha-squad", "researcher"]
            ))
        );
        insta::assert_json_snapshot!(
            "task-create",
            redacted(&at(
                "2000",
                LEAD,
                &[
                    "task",
                    "create",
                    "alpha-squad",
                    "--subject",
                    "Parse",
                    "--description",
                    "the parser"
                ]
            ))
        );
        insta::assert_json_snapshot!(
            "task-create-dependent",
            redacted(&at(
                "2100",
                LEAD,
                &[
                    "task",
                    "create",
                    "alpha-squad",
                    "--subject",
                    "Test",
                    "--depends-on",
                    "1"
                ]
            ))
        );
        insta::assert_json_snapshot!(
            "task-claim-blocked",
            redacted(&at(
                "2200",
                researcher,
                &["task", "claim", "alpha-squad", "2"]
            ))
        );
        insta::assert_json_snapshot!(
            "task-claim",
            redacted(&at(
                "3000",
                researcher,
                &["task", "claim", "alpha-squad", "1"]
            ))
        );
        insta::assert_json_snapshot!(
            "task-claim-already-claimed",
            redacted(&at("3100", LEAD, &["task", "claim", "alpha-squad", "1"]))
        );
        insta::assert_json_snapshot!(
            "task-complete",
            redacted(&at(
                "4000",
                researcher,
                &["task", "complete", "alpha-squad", "1", "--summary", "done"]
            ))
        );
        insta::assert_json_snapshot!(
            "task-create-third",
            redacted(&at(
                "4050",
                LEAD,
                &[
                    "task",
                    "create",
                    "alpha-squad",
                    "--subject",
                    "Ship",
                    "--depends-on",
                    "2"
                ]
            ))
        );
        insta::assert_json_snapshot!(
            "task-depend-cycle",
            redacted(&at(
                "4100",
                LEAD,
                &["task", "depend", "alpha-squad", "2", "--on", "3"]
            ))
        );
        insta::assert_json_snapshot!(
            "task-list-available",
            redacted(&at(
                "4200",
                LEAD,
                &["task", "list", "alpha-squad", "--available"]
            ))
        );
        insta::assert_json_snapshot!(
            "message-send",
            redacted(&at(
                "5000",
                LEAD,
                &[
                    "message",
                    "send",
                    "alpha-squad",
                    "--to",
                    researcher,
                    "--content",
                    "Found a <critical> bug & more",
                    "--summary",
                    "auth \"bug\""
                ]
            ))
        );
        let line = std::fs::read_to_string(
            root.root
                .join("alpha-squad/inbox/agent_researcher_main/messages.jsonl"),
        )
        .expect("inbox");
        let line: Value = serde_json::from_str(line.trim()).expect("one line");
        insta::assert_json_snapshot!("message-line", redacted(&line));
        insta::assert_json_snapshot!(
            "message-broadcast",
            redacted(&at(
                "5100",
                researcher,
                &[
                    "message",
                    "send",
                    "alpha-squad",
                    "--broadcast",
                    "--content",
                    "standup"
                ]
            ))
        );
        let injected = at(
            "6000",
            researcher,
            &[
                "context",
                "inject",
                "alpha-squad",
                "--system-prompt",
                "You are the researcher.",
            ],
        );
        insta::assert_snapshot!(
            "context-inject-block",
            redact_uuids(injected["block"].as_str().expect("block"))
        );
        insta::assert_json_snapshot!("context-inject", redacted(&injected));
        insta::assert_json_snapshot!(
            "team-show",
            redacted(&at("7000", LEAD, &["team", "show", "alpha-squad"]))
        );
        insta::assert_json_snapshot!("limits", redacted(&at("7000", LEAD, &["limits"])));
        insta::assert_json_snapshot!(
            "team-create-invalid",
            redacted(&at("7000", LEAD, &["team", "create", "invalid name!"]))
        );
        insta::assert_json_snapshot!(
            "message-too-large",
            redacted(&at(
                "7000",
                LEAD,
                &[
                    "message",
                    "send",
                    "alpha-squad",
                    "--to",
                    researcher,
                    "--content",
                    &"x".repeat(100_001)
                ]
            ))
        );
    });
}
