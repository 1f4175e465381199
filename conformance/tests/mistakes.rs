//! Plausible user mistakes, one per case, against the real programs: each ends with one clear
//! `error:` line on stderr (the mock agent names itself instead, as it speaks inside other
//! programs' logs), the documented exit code, no panic and no debug dump.

use crate::binaries;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

use rstest::rstest;
use ski_conformance::Target;

/// The workspace's programs, built when missing or stale (looked up once for every case).
fn bin_dir() -> &'static Path {
    static BIN_DIR: OnceLock<PathBuf> = OnceLock::new();
    BIN_DIR.get_or_init(|| {
        let reference = Target::load("reference").expect("the reference profile");
        binaries::prepare_binaries(&reference).expect("the workspace's programs")
    })
}

/// What the case's working directory holds: a file with broken TOML and one with broken JSON.
fn workspace() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("bad.toml"), "a = 1\n[team\n").expect("write");
    std::fs::write(dir.path().join("bad.json"), "{not json").expect("write");
    dir
}

fn run(program: &Path, args: &[&str], cwd: &Path) -> (Option<i32>, String) {
    let output = Command::new(program)
        .args(args)
        .current_dir(cwd)
        .env_remove("RUST_LOG")
        .env_remove("SLACK_BOT_TOKEN")
        .env_remove("SLACK_APP_TOKEN")
        .env_remove("BOT_TOKEN")
        .env_remove("KIRO_AGENT_NAME")
        .env("HOME", cwd)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .expect("the program starts");
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[rstest]
#[case::unclosed_quote_in_the_agent_command(
    "ski", &["acp", "client", "connect", "--agent-cmd", "ski 'acp serve", "--prompt", "hi"],
    2, "error: cannot split --agent-cmd"
)]
#[case::an_agent_that_does_not_exist(
    "ski", &["acp", "client", "connect", "--agent-cmd", "/nonexistent/agent", "--prompt", "hi"],
    4, "error: cannot start \"/nonexistent/agent\""
)]
#[case::a_listen_address_without_a_port(
    "ski", &["acp", "serve", "--transport", "ws", "--listen", "nothost"],
    2, "error: invalid --listen value \"nothost\""
)]
#[case::a_target_profile_that_does_not_exist(
    "ski-conformance", &["run", "--target", "none.toml"],
    2, "error: cannot read target profile none.toml: No such file"
)]
#[case::a_target_profile_with_broken_toml(
    "ski-conformance", &["run", "--target", "bad.toml"],
    2, "error: target profile bad.toml is not valid: line 2, column 6:"
)]
#[case::a_suite_that_does_not_exist(
    "ski-conformance", &["run", "--suite", "nosuchsuite"],
    2, "error: unknown suite(s) nosuchsuite"
)]
#[case::an_intercom_config_that_does_not_exist(
    "ski", &["intercom", "--config", "none.toml"],
    1, "error: cannot read config file none.toml"
)]
#[case::an_intercom_config_with_broken_toml(
    "ski", &["intercom", "--config", "bad.toml"],
    1, "error: invalid config bad.toml: line 2, column 6:"
)]
#[case::a_team_that_does_not_exist(
    "ski", &["teams", "--root", "teams", "--as", "agent:main:main", "task", "claim", "nosuchteam", "1"],
    2, "error: team \"nosuchteam\" does not exist"
)]
#[case::an_envelope_that_is_not_json(
    "ski", &["aof", "validate", "bad.json"],
    2, "error: invalid envelope: invalid JSON"
)]
#[case::a_task_id_that_is_a_path(
    "ski", &["aof", "task", "show", "--data-dir", "aof", "../../etc/passwd"],
    2, "error: taskId must match"
)]
#[case::a_kiro_bot_without_its_settings(
    "ski", &["kiro", "check"],
    3, "error: BOT_TOKEN is required"
)]
#[case::a_mock_script_that_does_not_exist(
    "ski-mock-agent", &["--script", "none.toml"],
    3, "ski-mock-agent: cannot read script none.toml"
)]
#[case::a_mock_script_with_broken_toml(
    "ski-mock-agent", &["--script", "bad.toml"],
    3, "ski-mock-agent: invalid script bad.toml: line 2, column 6:"
)]
#[case::a_fake_slack_workspace_with_broken_toml(
    "ski-fake-slack", &["serve", "--config", "bad.toml"],
    3, "error: bad workspace config: line 2, column 6:"
)]
fn a_mistake_gets_one_clear_line_and_its_exit_code(
    #[case] program: &str,
    #[case] args: &[&str],
    #[case] code: i32,
    #[case] starts: &str,
) {
    let dir = workspace();
    let (status, stderr) = run(&bin_dir().join(program), args, dir.path());
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 1, "one line, got:\n{stderr}");
    assert!(lines[0].starts_with(starts), "{stderr}");
    for dump in ["panicked", "Some(", "Os {", "kind:", " { "] {
        assert!(!stderr.contains(dump), "{dump:?} in:\n{stderr}");
    }
    assert_eq!(status, Some(code), "{stderr}");
}
