//! The intercom rows against profiles that describe other builds, for `cargo test -p
//! ski-conformance --test main intercom_rows::`: a row reaches its texts through the profile's
//! overrides, needs no command its matrix row does not name, and its silent agent says nothing;
//! the `intercom-ski` rows fail against a build that decides otherwise.

use crate::binaries;
use crate::one_row;

use std::path::Path;
use std::time::Duration;

use rstest::rstest;
use ski::transport::child::{ChildSpec, spawn};
use ski_conformance::report::junit::details;
use ski_conformance::suites::intercom::lifecycle::SILENT_AGENT;
use ski_conformance::target::CommandTemplate;
use ski_conformance::{Outcome, Target};

/// A final message no build posts.
const NEVER_POSTED: &str = "a final message no build posts";

/// Runs row `id` against the reference profile changed by `change` (applied to the row's suite
/// section) and answers its outcome and what the report says of it.
fn run(
    id: &str,
    suite: &str,
    change: impl FnOnce(&Path, &mut ski_conformance::target::SuiteTarget),
) -> (Outcome, String) {
    let result = one_row::run_row(id, |bin_dir, mut target: Target| {
        let section = target
            .suites
            .get_mut(suite)
            .ok_or_else(|| format!("the reference profile has no [suites.{suite}]"))?;
        change(bin_dir, section);
        Ok(target)
    })
    .unwrap_or_else(|error| panic!("{id} did not run: {error}"));
    let said = details(&result);
    (result.outcome, said)
}

#[rstest]
#[case::s014("S014")]
#[case::s015("S015")]
#[case::s016("S016")]
#[case::s021("S021")]
#[case::s040("S040")]
fn every_row_that_waits_for_the_final_message_takes_its_final_override(#[case] id: &str) {
    let (outcome, said) = run(id, "intercom", |_, section| {
        section
            .overrides
            .entry(id.to_string())
            .or_default()
            .insert("final".into(), NEVER_POSTED.into());
    });
    assert_eq!(
        Outcome::Fail,
        outcome,
        "{id} with overrides.{id}.final = {NEVER_POSTED:?} must wait for that text and fail:\n{said}"
    );
    assert!(
        said.contains(NEVER_POSTED),
        "{id} fails looking for the overridden text:\n{said}"
    );
}

#[test]
fn s040_ends_its_session_without_a_slash_command() {
    // The fake Slack sends every command as another app's, which the target ignores: a build
    // without the command S040 used to send (the public server has no MCP-mode session-stop).
    let (outcome, said) = run("S040", "intercom", |_, section| {
        section
            .settings
            .insert("slash_command".into(), "/another-app".into());
    });
    assert_eq!(Outcome::Pass, outcome, "{said}");
}

#[test]
fn s045_is_judged_in_acp_mode_where_session_stop_exists() {
    // A build whose MCP mode does not start: S045's session-stop is an ACP-mode command.
    let (outcome, said) = run("S045", "intercom", |_, section| {
        section.commands.insert(
            "server".into(),
            CommandTemplate::Line(
                "{bin_dir}/ski intercom --config {config} --no-mcp-mode-here".into(),
            ),
        );
    });
    assert_eq!(Outcome::Pass, outcome, "{said}");
}

#[test]
fn s025s_silent_agent_answers_no_handshake() {
    let target = Target::load("reference").expect("the reference profile");
    let bin_dir = binaries::prepare_binaries(&target).expect("the binaries");
    let dir = tempfile::tempdir().expect("a temp dir");
    let script = dir.path().join("silent.toml");
    std::fs::write(&script, SILENT_AGENT).expect("write the script");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let written = runtime.block_on(async {
        let spec = ChildSpec::new("silent", bin_dir.join("ski-mock-agent"))
            .arg("--script")
            .arg(&script);
        let mut agent = spawn(spec).expect("start ski-mock-agent");
        for line in [
            r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/","mcpServers":[]}}"#,
            r#"{"method":"prompt/send","params":{"text":"hello"}}"#,
            r#"{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"s","prompt":[{"type":"text","text":"hello"}]}}"#,
        ] {
            agent.send_line(line).await.expect("the agent reads a line");
        }
        agent.close_stdin();
        let mut written = Vec::new();
        let read = async {
            while let Ok(Some(line)) = agent.next_line().await {
                written.push(line);
            }
        };
        let ended = tokio::time::timeout(Duration::from_secs(60), read).await;
        let _ = agent.shutdown().await;
        ended.expect("the agent ends its stdout when its stdin closes");
        written
    });
    assert!(
        written.is_empty(),
        "S025's silent agent wrote on its stdout: {written:?}"
    );
}

#[test]
fn int_ski_01_fails_against_a_build_without_mcp_session_stop() {
    let (outcome, said) = run("INT-SKI-01", "intercom-ski", |_, section| {
        section
            .settings
            .insert("slash_command".into(), "/another-app".into());
    });
    assert_eq!(Outcome::Fail, outcome, "{said}");
}

#[test]
fn int_ski_06_fails_against_a_build_that_hands_the_agent_a_slack_token() {
    let (outcome, said) = run("INT-SKI-06", "intercom-ski", |_, section| {
        let template = section
            .settings
            .get("agent_template")
            .cloned()
            .unwrap_or_default()
            .replace(
                "host_cli = \"{mock_agent}\"\nhost_cli_args = [",
                "host_cli = \"/usr/bin/env\"\nhost_cli_args = [\"SLACK_BOT_TOKEN=xoxb-leaked\", \"{mock_agent}\", ",
            );
        section.settings.insert("agent_template".into(), template);
    });
    assert_eq!(Outcome::Fail, outcome, "{said}");
    assert!(said.contains("SLACK_BOT_TOKEN"), "{said}");
}

#[test]
fn int_ski_07_fails_against_a_build_that_does_not_log_the_attempt() {
    let (outcome, said) = run("INT-SKI-07", "intercom-ski", |_, section| {
        section.env.insert("RUST_LOG".into(), "error".into());
    });
    assert_eq!(Outcome::Fail, outcome, "{said}");
}
