//! A reader that went away is no panic: `ski-mock-agent` and `ski-fake-slack` run with stdout a
//! pipe whose read end is closed before they write (as under `| head -0` or `| true`) end with
//! their own exit code and no panic message.

use std::process::{Command, Stdio};

use ski_mocks::testing::run_with_closed_stdout;

/// Runs `program ARGS` with stdout a pipe closed before it writes and `stdin` on stdin; returns
/// the exit code and stderr.
fn run_closed(program: &str, args: &[&str], stdin: &str) -> (Option<i32>, String) {
    let run = run_with_closed_stdout(Command::new(program).args(args), stdin);
    (run.code, run.stderr)
}

fn assert_quiet((code, stderr): (Option<i32>, String), expected: i32, what: &str) {
    assert!(
        !stderr.contains("panicked"),
        "{what} panicked on a closed stdout:\n{stderr}"
    );
    assert_ne!(code, Some(101), "{what}: {stderr}");
    assert_eq!(code, Some(expected), "{what}: {stderr}");
}

#[test]
fn ski_mock_agent_ends_quietly() {
    let agent = env!("CARGO_BIN_EXE_ski-mock-agent");
    assert_quiet(
        run_closed(agent, &["--print-script", "echo"], ""),
        0,
        "ski-mock-agent --print-script",
    );
    assert_quiet(
        run_closed(agent, &["--script", "echo", "--check"], ""),
        0,
        "ski-mock-agent --check",
    );
    assert_quiet(
        run_closed(agent, &["--help"], ""),
        0,
        "ski-mock-agent --help",
    );
    // `control` prints the agent's reply.
    let dir = tempfile::tempdir().expect("temp dir");
    let socket = dir.path().join("agent.sock");
    let socket = socket.to_str().expect("utf-8 path");
    let mut running = Command::new(agent)
        .args(["--script", "echo", "--control", socket])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .expect("spawn the agent");
    assert_quiet(
        run_closed(agent, &["control", socket, r#"{"cmd":"state"}"#], ""),
        0,
        "ski-mock-agent control",
    );
    drop(running.stdin.take());
    let status = running.wait().expect("wait for the agent");
    assert!(status.success(), "the agent ended with {status}");
}

#[test]
fn ski_fake_slack_ends_quietly() {
    let slack = env!("CARGO_BIN_EXE_ski-fake-slack");
    // The readiness line meets the closed pipe; the fake serves on until stdin closes.
    assert_quiet(run_closed(slack, &["serve"], ""), 0, "ski-fake-slack serve");
    assert_quiet(
        run_closed(slack, &["--help"], ""),
        0,
        "ski-fake-slack --help",
    );
}
