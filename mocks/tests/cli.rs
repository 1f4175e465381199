//! The command line: help, script checks, ready scripts, and clear errors for bad input.

mod support;

use support::Agent;

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

#[tokio::test]
async fn every_ready_script_checks_and_matches_its_file() {
    for name in [
        "echo",
        "testy",
        "faults",
        "kiro",
        "intercom",
        "intercom-jsonrpc",
        "intercom-acp",
    ] {
        let (code, out, err) = run(&["--script", name, "--check"]).await;
        assert_eq!(code, 0, "{name}: {err}");
        assert!(
            out.starts_with(&format!("script: builtin:{name}: ok")),
            "{out}"
        );
        let file = support::scripts_dir().join(format!("{name}.toml"));
        let (code, printed, _) = run(&["--print-script", name]).await;
        assert_eq!(code, 0);
        assert_eq!(
            printed,
            std::fs::read_to_string(&file).expect("the script file")
        );
        let (code, _, err) = run(&["--script", &file.display().to_string(), "--check"]).await;
        assert_eq!(code, 0, "{}: {err}", file.display());
    }
}

#[tokio::test]
async fn bad_scripts_fail_with_a_clear_message() {
    let dir = tempfile::tempdir().expect("dir");
    let cases = [
        (
            "[[on]]\nprompt = \"x\"\ndo = [{ respond = {}, exit = 1 }]\n",
            "on[0].do[0]: a step has one action, this one has respond, exit",
        ),
        (
            "[[on]]\ndo = [{ hang = true }]\n",
            "on[0]: a rule needs one trigger",
        ),
        (
            "[[on]]\nprompt_regex = \"(\"\ndo = [{ hang = true }]\n",
            "bad regex",
        ),
        (
            "[[on]]\nmethod = \"x\"\ndo = [{ notify = \"m\", params = { a = \"${nope}\" } }]\n",
            "unknown placeholder ${nope}",
        ),
        ("[agent]\nnme = \"typo\"\n", "unknown field `nme`"),
        (
            "[[on]]\nmethod = \"x\"\ndo = [{ scenario = \"dance\" }]\n",
            "unknown scenario \"dance\"",
        ),
    ];
    for (index, (text, expected)) in cases.iter().enumerate() {
        let path = dir.path().join(format!("bad{index}.toml"));
        std::fs::write(&path, text).expect("write");
        let (code, _, err) = run(&["--script", &path.display().to_string(), "--check"]).await;
        assert_eq!(code, 2, "{text}");
        assert!(err.contains(expected), "expected {expected:?} in {err:?}");
        assert!(err.starts_with("ski-mock-agent: invalid script"), "{err}");
    }
    let (code, _, err) = run(&["--script", "/nonexistent/script.toml"]).await;
    assert_eq!(code, 2);
    assert!(
        err.contains("cannot read script /nonexistent/script.toml"),
        "{err}"
    );
    let (code, _, err) = run(&["--fault", "explode"]).await;
    assert_eq!(code, 2);
    assert!(err.contains("unknown fault \"explode\""), "{err}");
    let (code, _, err) = run(&["--fault", "delay-ms=soon"]).await;
    assert_eq!(code, 2);
    assert!(err.contains("is not a number"), "{err}");
    let (code, _, err) = run(&["--quirk", "sneeze"]).await;
    assert_eq!(code, 2);
    assert!(err.contains("unknown quirk \"sneeze\""), "{err}");
}
