//! `slack = "slack-hosts"` against the reference intercom server configured with
//! `api_base_url = "https://slack.com/api"` (`conformance/targets/reference-slack-hosts.toml`):
//! rows of each kind pass through the namespace (MCP mode with Socket Mode slash commands and
//! clicks, an MCP tool, ACP mode with mock agents, the stdio transport), the same profile without
//! the setting cannot reach Slack, a Slack URL at a name of `slack_extra_hosts` resolves only with
//! that setting, and a machine that refuses the namespace reports an error.

use crate::binaries;
use crate::one_row;

use std::time::Duration;

use ski::transport::child::{ChildSpec, spawn};
use ski_conformance::report::junit::details;
use ski_conformance::runner::ScenarioResult;
use ski_conformance::{Outcome, Target};

/// The profile under test.
const PROFILE: &str = "reference-slack-hosts";
/// The line that turns the mode on.
const SETTING: &str = "slack = \"slack-hosts\"\n";

fn profile_text() -> String {
    let file = format!("{PROFILE}.toml");
    ski_conformance::target::BUILTIN
        .iter()
        .find(|(origin, _)| *origin == file)
        .map(|(_, text)| (*text).to_owned())
        .unwrap_or_else(|| panic!("no built-in profile {file}"))
}

fn run(id: &str, text: String) -> ScenarioResult {
    one_row::run_row(id, |_, _| {
        Target::parse(PROFILE, &text).map_err(|e| e.to_string())
    })
    .unwrap_or_else(|e| panic!("cannot run {id}: {e}"))
}

fn assert_outcome(result: &ScenarioResult, outcome: Outcome) {
    assert_eq!(
        outcome,
        result.outcome,
        "{} against {PROFILE}:\n{}",
        result.id,
        details(result)
    );
}

/// S044: MCP mode, steering typed as a slash command (Socket Mode over WSS) routed by channel.
#[test]
fn mcp_slash_command_row_passes_through_the_namespace() {
    assert_outcome(&run("S044", profile_text()), Outcome::Pass);
}

/// S008: the check_clearance tool over the relayed MCP endpoint, approved by a click.
#[test]
fn mcp_tool_row_passes_through_the_namespace() {
    assert_outcome(&run("S008", profile_text()), Outcome::Pass);
}

/// S018: ACP mode; the mock agents the target spawns run inside too and reach the harness's
/// control socket and transcripts.
#[test]
fn acp_row_with_mock_agents_passes_through_the_namespace() {
    assert_outcome(&run("S018", profile_text()), Outcome::Pass);
}

/// S001: HTTP and, with mcp-stdio, a second server on stdio, both inside.
#[test]
fn startup_row_with_stdio_passes_through_the_namespace() {
    assert_outcome(&run("S001", profile_text()), Outcome::Pass);
}

/// A build that prints no readiness object: readiness is a connection to `{mcp_port}` inside
/// the namespace, and the checks reach `mcp_url` through the relay (S002, S007). Probing the
/// host's loopback instead finds nothing there.
#[test]
fn readiness_by_port_looks_inside_the_namespace() {
    let text = profile_text()
        .replacen(SETTING, &format!("{SETTING}{READY_BY_PORT}"), 1)
        .replacen("port = 0\n", "port = {mcp_port}\n", 1);
    for id in ["S002", "S007"] {
        assert_outcome(&run(id, text.clone()), Outcome::Pass);
    }
}

/// The knobs of a build whose readiness is its MCP port.
const READY_BY_PORT: &str = "ready = \"port\"\nmcp_url = \"http://127.0.0.1:{mcp_port}/mcp\"\n";

/// Without the mode the same config names https://slack.com/api, which the target cannot
/// reach: the mode is what makes the rows pass.
#[test]
fn without_the_mode_the_target_cannot_reach_slack() {
    let text = profile_text();
    assert!(text.contains(SETTING), "{PROFILE} sets {SETTING:?}");
    let result = run("S002", text.replacen(SETTING, "", 1));
    assert_outcome(&result, Outcome::Fail);
    assert!(
        details(&result).contains("slack.com"),
        "the failure names the unreachable Slack:\n{}",
        details(&result)
    );
}

/// Where no user namespace can be made (here: a user namespace whose limit of nested user
/// namespaces is 0), a row in the mode is an error that says so, not a failure of the target.
#[test]
fn a_refused_namespace_is_an_error_not_a_failure() {
    let bin_dir = binaries::profile_dir().expect("the cargo target dir");
    let out = tempfile::tempdir().expect("a report dir");
    let runner = bin_dir.join("ski-conformance");
    let script = "echo 0 > /proc/sys/user/max_user_namespaces && exec \"$@\"";
    let spec = ChildSpec::new("refused", "unshare")
        .args(["--user", "--map-root-user", "sh", "-c", script, "sh"])
        .arg(&runner)
        .args([
            "run", "--target", PROFILE, "--suite", "intercom", "--id", "S002",
        ])
        .arg("--bin-dir")
        .arg(&bin_dir)
        .arg("--out")
        .arg(out.path());
    let runtime = tokio::runtime::Runtime::new().expect("a runtime");
    let status = runtime.block_on(async {
        let child = spawn(spec).expect("start the runner in a restricted user namespace");
        let status = tokio::time::timeout(Duration::from_secs(120), child.wait()).await;
        // Ends the runner's process group whatever happened.
        let _ = child.shutdown().await;
        status
    });
    let status = status
        .expect("the runner ends")
        .expect("the runner's status");
    let results = std::fs::read_to_string(out.path().join("results.json"))
        .unwrap_or_else(|e| panic!("results.json after {status}: {e}"));
    let results: serde_json::Value = serde_json::from_str(&results).expect("results.json");
    let row = &results["results"][0];
    assert_eq!("error", row["outcome"], "S002's outcome: {row}");
    let message = row["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("refuses an unprivileged user, mount and network namespace"),
        "the error says the namespace was refused: {message}"
    );
}

/// A Slack name the mode does not resolve by itself, which the fake's certificate covers
/// (`*.slack.com`).
const EXTRA_HOST: &str = "edge-intercom.slack.com";

/// The profile with its config naming `https://EXTRA_HOST/api`, with `slack_extra_hosts` set to
/// `extra` (or not at all).
fn extra_host_profile(extra: Option<&str>) -> String {
    let mut text = profile_text().replace(
        "api_base_url = \"https://slack.com/api\"",
        &format!("api_base_url = \"https://{EXTRA_HOST}/api\""),
    );
    if let Some(extra) = extra {
        text = text.replace(
            SETTING,
            &format!("{SETTING}slack_extra_hosts = \"{extra}\"\n"),
        );
    }
    text
}

/// `slack_extra_hosts`: a build whose Slack URL names a host beyond Slack's own reaches the fake
/// at that name too.
#[test]
fn an_extra_slack_host_resolves_inside_the_namespace() {
    let result = run("S002", extra_host_profile(Some(EXTRA_HOST)));
    assert_outcome(&result, Outcome::Pass);
}

/// Without `slack_extra_hosts` the same name does not resolve: the setting is what makes the row
/// pass.
#[test]
fn without_the_extra_host_its_name_does_not_resolve() {
    let result = run("S002", extra_host_profile(None));
    assert_outcome(&result, Outcome::Fail);
    assert!(
        details(&result).contains(EXTRA_HOST),
        "the failure names the unresolved host:\n{}",
        details(&result)
    );
}
