//! The runner against targets that misbehave as processes: a descendant that leaves the target's
//! process group and session (`setsid`) is ended with its scenario, a target that floods its
//! output leaves reports of a few megabytes, and a reader that closes the runner's stdout early
//! (`| head -1`) only ends the console output.

use crate::support;

use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use support::ski_conformance;

/// The directory of the workspace's binaries (`ski-mock-agent`), beside `ski-conformance`.
fn bin_dir() -> PathBuf {
    Path::new(env!("CARGO_BIN_EXE_ski-conformance"))
        .parent()
        .expect("the binary has a directory")
        .to_owned()
}

fn mock_agent() -> String {
    let path = bin_dir().join("ski-mock-agent");
    assert!(
        path.is_file(),
        "{} is missing: run `cargo build --workspace --bins`",
        path.display()
    );
    path.display().to_string()
}

/// Writes an executable shell script.
fn script(dir: &Path, name: &str, body: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join(name);
    std::fs::write(&path, format!("#!/bin/sh\n{body}")).expect("the script is written");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    path
}

/// Runs WS-002 once (no re-run) against `agent`, strictly (the row is `interop`, so only a
/// strict run fails on it), with the reports in `dir/out`.
async fn run_ws002(agent: &Path, dir: &Path) -> support::Output {
    ski_conformance(
        &[
            "run",
            "--agent-cmd",
            &agent.display().to_string(),
            "--no-discover",
            "--capability",
            "agent",
            "--capability",
            "prompt",
            "--suite",
            "acp",
            "--id",
            "WS-002",
            "--no-rerun",
            "--strict",
            "--out",
            "out",
        ],
        dir,
    )
    .await
}

/// Whether `pid` is a live (not zombie) process running `sleep 4242` (so a reused pid is not
/// mistaken for the grandchild).
fn grandchild_alive(pid: u32) -> bool {
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    if !String::from_utf8_lossy(&cmdline).contains("4242") {
        return false;
    }
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let state = stat
        .rsplit_once(')')
        .and_then(|(_, rest)| rest.split_whitespace().next())
        .unwrap_or("X");
    !matches!(state, "Z" | "X")
}

/// A target whose agent starts a `setsid` grandchild in its own session: once directly (the
/// grandchild stays the agent's child) and once through a shell that exits at once (the
/// grandchild is orphaned before teardown). Both must be gone after the run.
#[tokio::test]
async fn a_setsid_grandchild_of_the_target_is_ended_with_its_scenario() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let pids = dir.path().join("pids");
    let agent = script(
        dir.path(),
        "agent.sh",
        &format!(
            "setsid sleep 4242 </dev/null >/dev/null 2>&1 &\n\
             echo $! >> {pids}\n\
             sh -c 'setsid sleep 4242 </dev/null >/dev/null 2>&1 & echo $! >> {pids}'\n\
             exec {mock}\n",
            pids = pids.display(),
            mock = mock_agent()
        ),
    );
    let run = run_ws002(&agent, dir.path()).await;
    let started: Vec<u32> = std::fs::read_to_string(&pids)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect();
    // Waits on a deadline (a kill is not instant), then ends any survivor itself.
    let deadline = Instant::now() + Duration::from_secs(10);
    while started.iter().any(|p| grandchild_alive(*p)) && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let survivors: Vec<u32> = started
        .iter()
        .copied()
        .filter(|p| grandchild_alive(*p))
        .collect();
    for pid in &survivors {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(*pid as i32),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
    assert_eq!(started.len(), 2, "{}{}", run.stdout, run.stderr);
    assert!(
        survivors.is_empty(),
        "setsid grandchildren {survivors:?} outlived the run:\n{}",
        run.stdout
    );
}

/// An agent that prints 400,000 notifications (about 60 MB) before it behaves: the row's wire log
/// in the reports is cut to its first and last part with a note, and no report file grows past a
/// few megabytes.
#[tokio::test]
async fn a_flooding_target_leaves_reports_of_a_few_megabytes() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let line = r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"flood","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"flood flood flood"}}}}"#;
    let agent = script(
        dir.path(),
        "flood.sh",
        &format!(
            "yes '{line}' | head -n 400000\nexec {mock}\n",
            mock = mock_agent()
        ),
    );
    let run = run_ws002(&agent, dir.path()).await;
    assert_eq!(run.code, Some(1), "{}{}", run.stdout, run.stderr);
    for file in ["results.json", "junit.xml", "report.md"] {
        let size = std::fs::metadata(dir.path().join("out").join(file))
            .map(|m| m.len())
            .unwrap_or(u64::MAX);
        assert!(size < 2_000_000, "{file} has {size} bytes");
    }
    let results = std::fs::read_to_string(dir.path().join("out/results.json")).expect("results");
    assert!(
        results.contains("left out of the report here"),
        "the cut is not said"
    );
}

/// `ski-conformance run … | head -1`: the reader goes away after the first line; the run goes on
/// to its end, writes its reports and exits with its verdict, without a panic.
#[tokio::test]
async fn a_run_whose_reader_goes_away_early_finishes_quietly() {
    use std::io::{BufRead, BufReader};
    use std::process::{Command, Stdio};
    let dir = tempfile::tempdir().expect("a temp dir");
    let mut child = Command::new(env!("CARGO_BIN_EXE_ski-conformance"))
        .args([
            "run",
            "--agent-cmd",
            &mock_agent(),
            "--suite",
            "acp",
            "--id",
            "WS-00*",
            "--out",
            "out",
        ])
        .env_remove("CI")
        .current_dir(dir.path())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .expect("ski-conformance starts");
    let mut first = String::new();
    {
        let mut stdout = BufReader::new(child.stdout.take().expect("stdout"));
        stdout.read_line(&mut first).expect("a first line");
    }
    // The read end is closed now, as `head -1` closes it.
    let output = child.wait_with_output().expect("ski-conformance ends");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!first.is_empty());
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(
        matches!(output.status.code(), Some(0 | 1)),
        "{:?}: {stderr}",
        output.status
    );
    assert!(dir.path().join("out/results.json").is_file(), "{stderr}");
}
