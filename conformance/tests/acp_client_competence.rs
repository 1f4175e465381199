//! The ACP runner as an ordinary client, against ad-hoc agents (`--agent-cmd`): an agent that asks
//! for permission before it acts keeps its prompt rows; cancellation is judged by holding a turn
//! at its unanswered permission request (a correct agent passes, one that ignores the cancel
//! fails); an agent that needs `authenticate` gets its session rows with a key and has them
//! blocked, not failed, without one, while its framing rows still pass; and an agent that cannot
//! be initialized fails the initialize rows (exit 1) instead of ending the run with nothing
//! judged (exit 2).

use crate::support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use rstest::rstest;
use support::{Output, ski_conformance, ski_conformance_with_env};

/// A workspace binary beside `ski-conformance`.
fn binary(name: &str) -> PathBuf {
    let path = Path::new(env!("CARGO_BIN_EXE_ski-conformance"))
        .parent()
        .expect("the binary has a directory")
        .join(name);
    assert!(
        path.is_file(),
        "{} is missing: run `cargo build --workspace --bins`",
        path.display()
    );
    path
}

/// A mock agent that asks for permission before every turn, then echoes the prompt.
const ASKS: &str = r#"
name = "asks"
description = "Asks for permission before every turn, then echoes the prompt."
personality = "standard"

[[on]]
prompt = "*"
do = [
  { request = "session/request_permission", params = { sessionId = "${session}", toolCall = { toolCallId = "call-${turn}", title = "Answer the prompt", kind = "execute", status = "pending" }, options = [ { optionId = "allow", name = "Allow", kind = "allow_once" }, { optionId = "reject", name = "Reject", kind = "reject_once" } ] } },
  { turn = "${prompt}" },
]
"#;

/// A mock agent that refuses session work until `authenticate`, with a browser login and a
/// method that reads a key from the environment.
const AUTH_GATED: &str = r#"
name = "auth-gated"
description = "session/* answers -32000 until authenticate."
personality = "standard"

[agent]
auth_required = true
auth_methods = [
  { id = "browser-login", name = "Log in with your browser" },
  { id = "fake-key", name = "Use SKI_FAKE_API_KEY", description = "Requires setting the `SKI_FAKE_API_KEY` environment variable" },
]
"#;

/// A mock agent whose turns end with a stopReason the schema does not have, so discovery
/// declares no completed turn (`prompt`).
const STOP_REASON_INVALID: &str = r#"
name = "stop-reason-invalid"
personality = "standard"
[prompt]
stop_reason = "completed"
"#;

/// A mock agent that answers `initialize` pretty-printed, one message over several lines, so no
/// answer of it can be read and discovery declares no `session`.
const PRETTY: &str = r#"
name = "pretty"
personality = "standard"
[[on]]
method = "initialize"
do = [{ raw = "{\n  \"jsonrpc\": \"2.0\",\n  \"id\": ${id},\n  \"result\": {\"protocolVersion\": 1}\n}" }]
"#;

/// A mock agent that answers `initialize` with an id the client never sent.
const WRONG_ID: &str = r#"
name = "wrong-id"
personality = "standard"

[[on]]
method = "initialize"
do = [{ respond = { protocolVersion = 1, agentCapabilities = {} }, id = 999999 }]
"#;

/// The command of the mock agent running `script` (written into `dir`), with `extra` words.
fn mock(dir: &Path, name: &str, script: &str, extra: &str) -> String {
    let path = dir.join(format!("{name}.toml"));
    std::fs::write(&path, script).expect("the script is written");
    format!(
        "{} --script {} {extra}",
        binary("ski-mock-agent").display(),
        path.display()
    )
}

/// How one ad-hoc run ended: its output and each row's outcome.
struct Run {
    output: Output,
    outcomes: BTreeMap<String, String>,
    messages: BTreeMap<String, String>,
}

impl Run {
    fn outcome(&self, id: &str) -> &str {
        self.outcomes.get(id).map_or("missing", String::as_str)
    }

    /// Everything the run printed, for assertion messages.
    fn said(&self) -> String {
        format!(
            "exit {:?}\nstdout:\n{}\nstderr:\n{}",
            self.output.code, self.output.stdout, self.output.stderr
        )
    }
}

/// Runs the rows `ids` of the ACP suite against the ad-hoc agent `command` (discovered first),
/// with `env` added to the runner's environment.
async fn run(dir: &Path, command: &str, ids: &[&str], env: &[(&str, &str)]) -> Run {
    run_with(dir, command, &[], ids, env).await
}

/// [`run`] with the runner's own `flags` too.
async fn run_with(
    dir: &Path,
    command: &str,
    flags: &[&str],
    ids: &[&str],
    env: &[(&str, &str)],
) -> Run {
    let mut args = vec!["run", "--agent-cmd", command];
    args.extend(flags);
    args.extend(["--suite", "acp", "--no-rerun", "-j", "1", "--out", "out"]);
    for id in ids {
        args.extend(["--id", id]);
    }
    let output = if env.is_empty() {
        ski_conformance(&args, dir).await
    } else {
        ski_conformance_with_env(&args, dir, env).await
    };
    let mut outcomes = BTreeMap::new();
    let mut messages = BTreeMap::new();
    if let Ok(text) = std::fs::read_to_string(dir.join("out/results.json")) {
        let results: serde_json::Value = serde_json::from_str(&text).expect("results.json is JSON");
        for result in results["results"].as_array().into_iter().flatten() {
            let id = result["id"].as_str().unwrap_or_default().to_owned();
            outcomes.insert(
                id.clone(),
                result["outcome"].as_str().unwrap_or_default().to_owned(),
            );
            messages.insert(
                id,
                result["message"].as_str().unwrap_or_default().to_owned(),
            );
        }
    }
    Run {
        output,
        outcomes,
        messages,
    }
}

fn temp() -> tempfile::TempDir {
    tempfile::tempdir().expect("a temp dir")
}

/// `ski acp serve`, which asks for permission before every turn and ends the turn `cancelled`
/// when the client does not allow it.
fn ski_acp_serve() -> String {
    format!("{} acp serve", binary("ski").display())
}

#[tokio::test]
async fn an_agent_that_asks_permission_keeps_its_prompt_rows() {
    let dir = temp();
    let run = run(dir.path(), &ski_acp_serve(), &["ACP-CORE-003"], &[]).await;
    let discovered = run
        .output
        .stdout
        .lines()
        .find(|l| l.starts_with("discovered:"))
        .unwrap_or_default();
    assert!(
        discovered.split([' ', ',']).any(|c| c == "prompt"),
        "discovery keeps prompt for an agent that asks first: {}",
        run.said()
    );
    assert_eq!(run.outcome("ACP-CORE-003"), "pass", "{}", run.said());
    assert_eq!(run.output.code, Some(0), "{}", run.said());
}

#[rstest]
#[case::ski_acp_serve(None, &["WS-013", "ACP-CORE-001", "ACP-CORE-002"])]
#[case::a_mock_that_asks(Some(""), &["ACP-CORE-001", "ACP-CORE-002"])]
#[tokio::test]
async fn cancellation_held_at_a_permission_request_passes_a_correct_agent(
    #[case] mock_extra: Option<&str>,
    #[case] ids: &[&str],
) {
    let dir = temp();
    let agent = match mock_extra {
        Some(extra) => mock(dir.path(), "asks", ASKS, extra),
        None => ski_acp_serve(),
    };
    let run = run(dir.path(), &agent, ids, &[]).await;
    for id in ids {
        assert_eq!(run.outcome(id), "pass", "{id}: {}", run.said());
    }
    assert_eq!(run.output.code, Some(0), "{}", run.said());
}

#[tokio::test]
async fn cancellation_held_at_a_permission_request_fails_an_agent_that_ignores_cancel() {
    let dir = temp();
    let agent = mock(dir.path(), "asks", ASKS, "--fault ignore-cancel");
    let run = run(dir.path(), &agent, &["ACP-CORE-001"], &[]).await;
    assert_eq!(run.outcome("ACP-CORE-001"), "fail", "{}", run.said());
    assert!(
        run.output
            .stdout
            .contains("a turn cancelled with session/cancel ends with stopReason cancelled"),
        "the failure names the cancelled stop reason: {}",
        run.said()
    );
    assert_eq!(run.output.code, Some(1), "{}", run.said());
}

#[tokio::test]
async fn an_auth_gated_agent_with_its_key_set_gets_its_session_rows() {
    let dir = temp();
    let agent = mock(dir.path(), "auth", AUTH_GATED, "");
    let run = run(
        dir.path(),
        &agent,
        &["ACP-CORE-041", "ACP-CORE-003"],
        &[("SKI_FAKE_API_KEY", "sk-fake-for-tests")],
    )
    .await;
    assert!(
        run.output
            .stdout
            .contains("auth: every connection authenticates with method \"fake-key\""),
        "the run says which method discovery chose: {}",
        run.said()
    );
    let report = std::fs::read_to_string(dir.path().join("out/report.md")).unwrap_or_default();
    assert!(
        report.contains("chose method \"fake-key\"") && report.contains("browser-login"),
        "report.md says why (and why not the browser login): {report}"
    );
    assert_eq!(run.outcome("ACP-CORE-041"), "pass", "{}", run.said());
    assert_eq!(run.outcome("ACP-CORE-003"), "pass", "{}", run.said());
    assert_eq!(run.output.code, Some(0), "{}", run.said());
    let probe = ski_conformance_with_env(
        &["probe", "--agent-cmd", &agent],
        dir.path(),
        &[("SKI_FAKE_API_KEY", "sk-fake-for-tests")],
    )
    .await;
    let profile: toml::Value = toml::from_str(&probe.stdout).expect("the probe prints TOML");
    assert_eq!(
        profile["suites"]["acp"]["auth"]["method"].as_str(),
        Some("fake-key"),
        "the probed profile names the method: {}",
        probe.stdout
    );
}

#[tokio::test]
async fn an_auth_gated_agent_without_its_key_has_session_rows_blocked_and_framing_rows_judged() {
    let dir = temp();
    let agent = mock(dir.path(), "auth", AUTH_GATED, "");
    let run = run(dir.path(), &agent, &["ACP-CORE-041", "ACP-CORE-016"], &[]).await;
    assert_eq!(run.outcome("ACP-CORE-041"), "blocked", "{}", run.said());
    assert!(
        run.messages["ACP-CORE-041"].contains("-32000"),
        "the block says why: {}",
        run.said()
    );
    assert_eq!(run.outcome("ACP-CORE-016"), "pass", "{}", run.said());
    // A blocked must row is not tested: a finding of the verdict, not "as expected".
    assert_eq!(run.output.code, Some(1), "{}", run.said());
    assert!(
        run.output
            .stdout
            .contains("not tested: 1 must/capability row(s)"),
        "{}",
        run.said()
    );
}

#[tokio::test]
async fn an_explicit_auth_method_authenticates_every_connection() {
    let dir = temp();
    let agent = mock(dir.path(), "auth", AUTH_GATED, "");
    let flags = ["--auth-method", "fake-key"];
    let run = run_with(dir.path(), &agent, &flags, &["ACP-CORE-041"], &[]).await;
    assert_eq!(run.outcome("ACP-CORE-041"), "pass", "{}", run.said());
    assert_eq!(run.output.code, Some(0), "{}", run.said());
}

#[rstest]
#[case::exits_at_once(None)]
#[case::answers_another_id(Some(WRONG_ID))]
#[tokio::test]
async fn an_agent_that_cannot_be_initialized_fails_the_initialize_rows(
    #[case] script: Option<&str>,
) {
    let dir = temp();
    let agent = match script {
        Some(script) => mock(dir.path(), "broken", script, ""),
        None => "true".to_owned(),
    };
    let run = run(dir.path(), &agent, &["ACP-CORE-012", "ACP-CORE-018"], &[]).await;
    assert_eq!(run.outcome("ACP-CORE-012"), "fail", "{}", run.said());
    // Its stdout holds nothing but JSON-RPC lines: the stdout row is not tested, not failed.
    assert_eq!(run.outcome("ACP-CORE-018"), "skip", "{}", run.said());
    assert_eq!(run.output.code, Some(1), "{}", run.said());
}

#[tokio::test]
async fn a_stop_reason_outside_the_schema_fails_its_row_though_discovery_declares_no_prompt() {
    let dir = temp();
    let agent = mock(dir.path(), "stop", STOP_REASON_INVALID, "");
    let run = run(dir.path(), &agent, &["ACP-CORE-045"], &[]).await;
    assert_eq!(run.outcome("ACP-CORE-045"), "fail", "{}", run.said());
    assert!(
        run.output.stdout.contains("stopReason \"completed\""),
        "the failure names the stop reason: {}",
        run.said()
    );
    assert_eq!(run.output.code, Some(1), "{}", run.said());
}

#[tokio::test]
async fn a_message_over_several_lines_fails_the_stdout_row_though_discovery_declares_no_session() {
    let dir = temp();
    let agent = mock(dir.path(), "pretty", PRETTY, "");
    let run = run(dir.path(), &agent, &["ACP-CORE-018"], &[]).await;
    assert_eq!(run.outcome("ACP-CORE-018"), "fail", "{}", run.said());
    assert!(
        run.output
            .stdout
            .contains("a line that is not one JSON-RPC 2.0 message"),
        "the failure names the line: {}",
        run.said()
    );
    assert_eq!(run.output.code, Some(1), "{}", run.said());
}
