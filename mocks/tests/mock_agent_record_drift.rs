//! The drift check against real releases of a recorded agent: `ski-mock-agent diff` of
//! `golden/recordings/claude-code-acp-initialize.toml` (recorded from the Claude Code ACP adapter
//! 0.16.2) reports nothing against 0.16.2 and exits 0, and against 0.14.0 reports exactly what
//! that release answers differently and exits 1. Both releases are installed from npm by their
//! peer scripts (`conformance/targets/peers/claude-code-acp*`); when `node`/`npm` is missing, or
//! an install cannot reach its registry, the test says plainly that it did not run.

use crate::agent_support;
use crate::peer_support;

use std::path::{Path, PathBuf};

use agent_support::{PATIENCE, binary};
use peer_support::{install, on_path, run_to_end};
use ski::transport::child::ChildSpec;

const RECORDING: &str = "golden/recordings/claude-code-acp-initialize.toml";

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the workspace")
        .to_owned()
}

/// `ski-mock-agent diff RECORDING -- ADAPTER` for the adapter installed in `peer`, with a home of
/// its own: (exit code, output).
async fn diff_against(peer: &Path, home: &Path) -> (Option<i32>, String) {
    let adapter = peer.join("node_modules/.bin/claude-code-acp");
    let spec = ChildSpec::new("diff", binary())
        .arg("diff")
        .arg(RECORDING)
        .arg("--")
        .arg("env")
        .arg(format!("HOME={}", home.display()))
        .arg(adapter)
        .cwd(workspace());
    tokio::time::timeout(PATIENCE * 3, run_to_end(spec))
        .await
        .expect("diff ends")
}

#[tokio::test]
async fn the_recorded_release_shows_no_drift_an_older_one_shows_its_differences() {
    if !on_path("node") || !on_path("npm") {
        println!("claude-code-acp drift: NOT RUN (node or npm is not on PATH)");
        return;
    }
    let (Some(recorded), Some(older)) = (
        install("claude-code-acp").await,
        install("claude-code-acp-0.14.0").await,
    ) else {
        return;
    };
    let home = tempfile::tempdir().expect("a home");

    let (code, out) = diff_against(&recorded, home.path()).await;
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("no structural drift: 1 exchanges"), "{out}");

    let (code, out) = diff_against(&older, home.path()).await;
    assert_eq!(code, Some(1), "{out}");
    let report: Vec<&str> = out
        .lines()
        .filter(|line| line.starts_with("exchange ") || line.starts_with("drift: "))
        .collect();
    assert_eq!(
        report,
        [
            "exchange 0 initialize: result: missing field result.agentCapabilities.loadSession (bool)",
            "exchange 0 initialize: result: field result.agentInfo.version changed: 0.16.2 -> 0.14.0",
            "drift: 2 difference(s) in 1 exchanges",
        ],
        "{out}"
    );
}
