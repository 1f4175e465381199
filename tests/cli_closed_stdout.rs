//! A reader that went away is no panic: `ski teams`, `ski aof` and `ski kiro` run with stdout a
//! pipe whose read end is closed before they write (as under `| head -0`) end with their own exit
//! code and no panic message, and still do their work.

use std::path::Path;
use std::process::Command;

use ski_mocks::testing::{ClosedRun as Closed, run_with_closed_stdout};

const SKI: &str = env!("CARGO_BIN_EXE_ski");

/// Runs `ski ARGS` with stdout a pipe closed before the program writes, `stdin` on stdin and the
/// environment cleared but for `env`.
fn run_closed(args: &[&str], stdin: &str, env: &[(&str, &str)], dir: &Path) -> Closed {
    run_with_closed_stdout(
        Command::new(SKI)
            .args(args)
            .env_clear()
            .envs(env.iter().copied())
            .current_dir(dir),
        stdin,
    )
}

fn assert_quiet(closed: &Closed, expected: i32, what: &str) {
    assert!(
        !closed.stderr.contains("panicked"),
        "{what} panicked on a closed stdout:\n{}",
        closed.stderr
    );
    assert_ne!(closed.code, Some(101), "{what}: {}", closed.stderr);
    assert_eq!(closed.code, Some(expected), "{what}: {}", closed.stderr);
    assert!(
        !closed.stderr.contains("Broken pipe"),
        "{what} reported the closed pipe as an error:\n{}",
        closed.stderr
    );
}

#[test]
fn ski_teams_ends_quietly_with_its_own_code() {
    let dir = tempfile::tempdir().expect("temp dir");
    let root = dir.path().join("teams");
    let root = root.to_str().expect("utf-8 path");
    let lead = ["teams", "--root", root, "--as", "agent:main:main"];
    let create = [&lead[..], &["team", "create", "alpha-squad"]].concat();
    let closed = run_closed(&create, "", &[], dir.path());
    assert_quiet(&closed, 0, "ski teams team create");
    assert!(
        dir.path().join("teams/alpha-squad/config.json").exists(),
        "the team was not created: the command did not run to its output"
    );
    // A refusal prints its JSON on stdout too, then `error: …` on stderr and exit 2.
    let again = run_closed(&create, "", &[], dir.path());
    assert!(again.stderr.starts_with("error: "), "{}", again.stderr);
    assert_quiet(&again, 2, "a refused ski teams team create");
    let board = [&lead[..], &["team", "board", "alpha-squad"]].concat();
    assert_quiet(
        &run_closed(&board, "", &[], dir.path()),
        0,
        "ski teams team board (text)",
    );
}

#[test]
fn ski_aof_ends_quietly_with_its_own_code() {
    let dir = tempfile::tempdir().expect("temp dir");
    let resolve = [
        "aof",
        "resolve",
        "--status",
        "in-progress",
        "--outcome",
        "done",
    ];
    assert_quiet(
        &run_closed(&resolve, "", &[], dir.path()),
        0,
        "ski aof resolve",
    );
    let data = dir.path().join("data");
    let data = data.to_str().expect("utf-8 path");
    let create = [
        "aof",
        "task",
        "create",
        "--data-dir",
        data,
        "--id",
        "TASK-2026-02-09-001",
        "--title",
        "Parser",
    ];
    assert_quiet(
        &run_closed(&create, "", &[], dir.path()),
        0,
        "ski aof task create",
    );
    assert!(
        dir.path()
            .join("data/tasks/backlog/TASK-2026-02-09-001.md")
            .exists(),
        "the task was not created"
    );
    // An invalid input prints its report, then exits 2.
    let invalid = run_closed(&["aof", "validate"], "{}", &[], dir.path());
    assert_quiet(&invalid, 2, "ski aof validate of an invalid envelope");
    let batch = format!(
        "{}\n{}\n",
        r#"{"args": ["resolve", "--status", "in-progress", "--outcome", "done"]}"#,
        r#"{"args": ["task", "list", "--data-dir", "DATA"]}"#.replace("DATA", data)
    );
    assert_quiet(
        &run_closed(&["aof", "batch"], &batch, &[], dir.path()),
        0,
        "ski aof batch",
    );
}

#[test]
fn ski_kiro_ends_quietly_with_its_own_code() {
    let dir = tempfile::tempdir().expect("temp dir");
    // No configuration at all: the violations are printed as JSON, and the exit code is 3.
    let home = dir.path().to_str().expect("utf-8 path");
    let closed = run_closed(&["kiro", "check"], "", &[("HOME", home)], dir.path());
    assert_quiet(&closed, 3, "ski kiro check without configuration");
}
