//! The command line: help, script checks, ready scripts, and clear errors for bad input.

use crate::agent_support;

use agent_support::Agent;
use rstest::rstest;

/// Runs the binary with stdin closed; returns its exit code, stdout and stderr.
async fn run(args: &[&str]) -> (i32, String, String) {
    let mut agent = Agent::spawn(args);
    agent.close_stdin();
    let out = String::from_utf8_lossy(&agent.rest().await).into_owned();
    let err = agent.stderr_until(|_| false).await;
    (agent.code().await, out, err)
}

#[tokio::test]
async fn help_names_scripts_faults_quirks_and_the_kiro_form() {
    let (code, out, _) = run(&["--help"]).await;
    assert_eq!(code, 0);
    for needle in [
        "--script",
        "--transcript",
        "--control",
        "--control-connect",
        "SKI_MOCK_AGENT_SCRIPT",
        "Ready scripts",
        "update-before-session-result",
        "exit-on-missing-mcp-servers",
        "acp",
        "{env:NAME}",
    ] {
        assert!(out.contains(needle), "--help lacks {needle}:\n{out}");
    }
    let (code, out, _) = run(&["acp", "--help"]).await;
    assert_eq!(code, 0);
    assert!(
        out.contains("--trust-all-tools") && out.contains("--agent"),
        "{out}"
    );
}

#[rstest]
#[case::echo("echo")]
#[case::testy("testy")]
#[case::faults("faults")]
#[case::kiro("kiro")]
#[case::intercom("intercom")]
#[case::intercom_jsonrpc("intercom-jsonrpc")]
#[case::intercom_acp("intercom-acp")]
#[tokio::test]
async fn every_ready_script_checks_and_matches_its_file(#[case] name: &str) {
    let (code, out, err) = run(&["--script", name, "--check"]).await;
    assert_eq!(code, 0, "{name}: {err}");
    assert!(
        out.starts_with(&format!("script: builtin:{name}: ok")),
        "{out}"
    );
    let file = agent_support::scripts_dir().join(format!("{name}.toml"));
    let (code, printed, _) = run(&["--print-script", name]).await;
    assert_eq!(code, 0);
    assert_eq!(
        printed,
        std::fs::read_to_string(&file).expect("the script file")
    );
    let (code, _, err) = run(&["--script", &file.display().to_string(), "--check"]).await;
    assert_eq!(code, 0, "{}: {err}", file.display());
}

#[rstest]
#[case::two_actions(
    "[[on]]\nprompt = \"x\"\ndo = [{ respond = {}, exit = 1 }]\n",
    "on[0].do[0]: a step has one action, this one has respond, exit"
)]
#[case::no_trigger("[[on]]\ndo = [{ hang = true }]\n", "on[0]: a rule needs one trigger")]
#[case::bad_regex("[[on]]\nprompt_regex = \"(\"\ndo = [{ hang = true }]\n", "bad regex")]
#[case::unknown_placeholder(
    "[[on]]\nmethod = \"x\"\ndo = [{ notify = \"m\", params = { a = \"${nope}\" } }]\n",
    "unknown placeholder ${nope}"
)]
#[case::unknown_field("[agent]\nnme = \"typo\"\n", "unknown field `nme`")]
#[case::unknown_scenario(
    "[[on]]\nmethod = \"x\"\ndo = [{ scenario = \"dance\" }]\n",
    "unknown scenario \"dance\""
)]
#[tokio::test]
async fn a_bad_script_fails_with_a_clear_message(#[case] text: &str, #[case] expected: &str) {
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join("bad.toml");
    std::fs::write(&path, text).expect("write");
    let (code, _, err) = run(&["--script", &path.display().to_string(), "--check"]).await;
    // A script is the agent's configuration: ski::exit's code 3.
    assert_eq!(code, 3, "{text}");
    assert!(err.contains(expected), "expected {expected:?} in {err:?}");
    assert!(err.starts_with("ski-mock-agent: invalid script"), "{err}");
}

#[rstest]
#[case::missing_script(
    &["--script", "/nonexistent/script.toml"],
    "cannot read script /nonexistent/script.toml",
    3
)]
#[case::unknown_fault(&["--fault", "explode"], "unknown fault \"explode\"", 2)]
#[case::fault_value_not_a_number(&["--fault", "delay-ms=soon"], "\"soon\" is not a number", 2)]
#[case::unknown_quirk(&["--quirk", "sneeze"], "unknown quirk \"sneeze\"", 2)]
#[case::unknown_ready_script(&["--print-script", "nope"], "no ready script \"nope\"", 2)]
#[tokio::test]
async fn a_bad_argument_fails_with_a_clear_message(
    #[case] args: &[&str],
    #[case] expected: &str,
    #[case] exit_code: i32,
) {
    let (code, _, err) = run(args).await;
    assert_eq!(code, exit_code, "{args:?}");
    assert!(err.contains(expected), "expected {expected:?} in {err:?}");
}
