//! How the runner spends time on failures, read from `results.json` (never from the clock): a
//! mismatch (an observation of the target) is run once, a wait that ran out is re-run alone, a
//! target that answers nothing is not re-run, and each set-up step (`initialize`, `session/new`)
//! adds an allowance to its row's budget.

use crate::acp_rows;
use crate::support;

use std::path::{Path, PathBuf};

use acp_rows::{row, run_against};
use serde_json::Value;
use support::ski_conformance;

/// The stand-in that reads its stdin and never answers.
fn silent_target() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/silent-target")
}

/// Writes an executable shell script.
fn script(dir: &Path, name: &str, body: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join(name);
    std::fs::write(&path, format!("#!/bin/sh\n{body}")).expect("the script is written");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    path
}

/// An agent that answers `initialize` with `version` as its protocolVersion and nothing else,
/// ever (its stdout stays open).
fn initialize_only_agent(dir: &Path, version: &str) -> PathBuf {
    script(
        dir,
        "agent.sh",
        &format!(
            r#"while read -r line; do
  case "$line" in
    *'"method":"initialize"'*)
      id=$(printf '%s' "$line" | sed -n 's/^{{"jsonrpc":"2.0","id":\([0-9]*\),.*/\1/p')
      printf '{{"jsonrpc":"2.0","id":%s,"result":{{"protocolVersion":{version},"agentCapabilities":{{}},"authMethods":[]}}}}\n' "$id"
      ;;
  esac
done
"#
        ),
    )
}

fn text(value: &Value) -> &str {
    value.as_str().unwrap_or_default()
}

#[tokio::test]
async fn a_definite_mismatch_is_run_once() {
    let dir = tempfile::tempdir().expect("a temp dir");
    // protocolVersion "1" is a string: ACP-CORE-012 fails at once, whatever the load.
    let agent = initialize_only_agent(dir.path(), r#""1""#);
    let results = run_against(&agent, &["ACP-CORE-012"], dir.path()).await;
    let result = row(&results, "ACP-CORE-012");
    assert_eq!(result["outcome"], "fail", "{result:#}");
    assert_eq!(result["attempts"], 1, "{result:#}");
    assert!(result.get("first_attempt").is_none(), "{result:#}");
    assert!(
        text(&result["rerun"]).starts_with("not re-run: it observed the target"),
        "{result:#}"
    );
    let report = std::fs::read_to_string(dir.path().join("out/report.md")).expect("report.md");
    assert!(
        report.contains("- **Attempts**: 1 (not re-run: it observed the target"),
        "{report}"
    );
}

#[tokio::test]
async fn a_wait_that_ran_out_is_re_run_alone() {
    let dir = tempfile::tempdir().expect("a temp dir");
    // initialize is answered, session/new never: WS-038's set-up step runs out its allowance.
    let agent = initialize_only_agent(dir.path(), "1");
    let results = run_against(&agent, &["WS-038"], dir.path()).await;
    let result = row(&results, "WS-038");
    assert_eq!(result["outcome"], "fail", "{result:#}");
    assert_eq!(result["failure"]["deadline_passed"], true, "{result:#}");
    assert_eq!(result["attempts"], 2, "{result:#}");
    assert_eq!(result["first_attempt"]["outcome"], "fail", "{result:#}");
    assert!(
        text(&result["rerun"]).starts_with("re-run alone: a wait ran out its deadline"),
        "{result:#}"
    );
}

#[tokio::test]
async fn a_target_that_answers_nothing_is_not_re_run() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let results = run_against(&silent_target(), &["ACP-CORE-012", "WS-038"], dir.path()).await;
    for id in ["ACP-CORE-012", "WS-038"] {
        let result = row(&results, id);
        assert_eq!(result["outcome"], "fail", "{result:#}");
        assert_eq!(result["attempts"], 1, "{result:#}");
        assert!(
            text(&result["rerun"]).contains("the target answered no set-up step in this run"),
            "{result:#}"
        );
    }
    // Once the first row's set-up step ran out, the next one waits only the short allowance
    // (1 s at a fifth) instead of the whole one (10 s at a fifth): both are class short (1 s).
    let mut budgets: Vec<f64> = ["ACP-CORE-012", "WS-038"]
        .iter()
        .map(|id| row(&results, id)["budget"].as_f64().expect("a budget"))
        .collect();
    budgets.sort_by(f64::total_cmp);
    assert!((budgets[0] - (1.0 + 0.2)).abs() < 1e-6, "{budgets:?}");
    assert!((budgets[1] - (1.0 + 2.0)).abs() < 1e-6, "{budgets:?}");
}

#[tokio::test]
async fn each_set_up_step_adds_an_allowance_to_the_budget() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let run = ski_conformance(
        &[
            "run",
            "--suite",
            "acp",
            "--id",
            "ACP-CORE-012",
            "--id",
            "ACP-CORE-041",
            "--jobs",
            "1",
            "--out",
            "out",
        ],
        dir.path(),
    )
    .await;
    let text = std::fs::read_to_string(dir.path().join("out/results.json"))
        .unwrap_or_else(|e| panic!("no results.json ({e}):\n{}{}", run.stdout, run.stderr));
    let results: Value = serde_json::from_str(&text).expect("results.json is JSON");
    assert_eq!(run.code, Some(0), "{}{}", run.stdout, run.stderr);
    let single = row(&results, "ACP-CORE-012");
    let multiple = row(&results, "ACP-CORE-041");
    assert_eq!(single["outcome"], "pass", "{single:#}");
    assert_eq!(multiple["outcome"], "pass", "{multiple:#}");
    // Both rows are of class short (5 s): 012 initializes once, 041 initializes and opens four
    // sessions on stdio (and one connection more over WebSocket when the target has it).
    assert_eq!(single["setup_steps"], 1, "{single:#}");
    let steps = multiple["setup_steps"].as_u64().expect("setup_steps");
    assert!(steps >= 5, "{multiple:#}");
    let budget = |r: &Value| r["budget"].as_f64().expect("a budget");
    assert!((budget(single) - (5.0 + 10.0)).abs() < 1e-6, "{single:#}");
    assert!(
        (budget(multiple) - (5.0 + 10.0 * steps as f64)).abs() < 1e-6,
        "{multiple:#}"
    );
}

#[tokio::test]
async fn a_session_new_sent_with_an_id_of_the_rows_own_is_a_set_up_step() {
    let dir = tempfile::tempdir().expect("a temp dir");
    // ACP-CORE-015 (class short) judges the ids of four session/new; an agent that starts an
    // engine per session (codex-acp 2.x: 9 s) answers them later than the class, as a set-up
    // step may. Never answered here: the first one runs out the set-up allowance.
    let agent = initialize_only_agent(dir.path(), "1");
    let results = run_against(&agent, &["ACP-CORE-015"], dir.path()).await;
    let result = row(&results, "ACP-CORE-015");
    assert_eq!(result["outcome"], "fail", "{result:#}");
    assert_eq!(result["setup_steps"], 2, "{result:#}");
    assert!(
        text(&result["failure"]["expected"]).contains("a set-up step within 2s"),
        "{result:#}"
    );
}
