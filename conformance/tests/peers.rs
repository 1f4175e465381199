//! Discovery against the foreign agents of `conformance/targets/peers/`, installed by their own
//! scripts into the target directory: the official SDKs' echo agents (Python, TypeScript) and two
//! real agents from npm run offline (the Claude Code ACP adapter, Gemini CLI). Each is probed as a
//! newcomer would (`ski-conformance probe --agent-cmd ...`), and the real agents' profiles are run
//! on two rows through their `discover = true` sections. When `python3` or `node`/`npm` is missing,
//! or an install cannot reach its registry, the test says plainly that the peer did not run.

use crate::peer_install;
use crate::support;

use std::path::Path;

use peer_install::{install, on_path, workspace};

use support::ski_conformance;

/// The capabilities a probe's profile declares.
fn declared(probe: &str) -> Vec<String> {
    let profile: toml::Value = toml::from_str(probe).expect("the probe prints TOML");
    profile["suites"]["acp"]["capabilities"]
        .as_array()
        .expect("capabilities")
        .iter()
        .filter_map(toml::Value::as_str)
        .map(str::to_owned)
        .collect()
}

async fn probe(command: &str, dir: &Path) -> String {
    let probe = ski_conformance(&["probe", "--agent-cmd", command], dir).await;
    assert_eq!(probe.code, Some(0), "{}{}", probe.stdout, probe.stderr);
    probe.stdout
}

/// Probes the echo agent `command` of the peer `name`: a newcomer's run gets the session, prompt
/// and echo rows.
async fn probe_echo_agent(name: &str, command: &str, dir: &Path) {
    let profile = probe(command, dir).await;
    let found = declared(&profile);
    for capability in ["agent", "stdio", "session", "prompt", "echo"] {
        assert!(found.iter().any(|c| c == capability), "{name}: {profile}");
    }
    println!("{name} peer: probed, {}", found.join(", "));
}

#[tokio::test]
async fn sdk_echo_agents_are_discovered_with_prompt_echo_and_session() {
    let dir = tempfile::tempdir().expect("a temp dir");
    if !on_path("python3") {
        println!("py-sdk-echo peer: NOT RUN (python3 is not on PATH)");
    } else if let Some(peer) = install("py-sdk-echo").await {
        let python = peer.join("venv/bin/python");
        let command = format!(
            "{} {}",
            python.display(),
            peer.join("echo_agent.py").display()
        );
        probe_echo_agent("py-sdk-echo", &command, dir.path()).await;
    }
    if !on_path("node") || !on_path("npm") {
        println!("ts-sdk-echo peer: NOT RUN (node or npm is not on PATH)");
    } else if let Some(peer) = install("ts-sdk-echo").await {
        let command = format!("node {}", peer.join("echo-agent.mjs").display());
        probe_echo_agent("ts-sdk-echo", &command, dir.path()).await;
    }
}

/// A temp dir with an empty home for a real agent run offline, when node and npm are here.
fn offline_home(peer: &str) -> Option<(tempfile::TempDir, std::path::PathBuf)> {
    if !on_path("node") || !on_path("npm") {
        println!("{peer} peer: NOT RUN (node or npm is not on PATH)");
        return None;
    }
    let dir = tempfile::tempdir().expect("a temp dir");
    let home = dir.path().join("home");
    std::fs::create_dir_all(&home).expect("a home");
    Some((dir, home))
}

#[tokio::test]
async fn claude_code_acp_from_npm_is_discovered_and_judged_without_credentials() {
    let Some((dir, home)) = offline_home("claude-code-acp") else {
        return;
    };
    if let Some(peer) = install("claude-code-acp").await {
        let script = peer.join("node_modules/@zed-industries/claude-code-acp/dist/index.js");
        let command = format!(
            "env HOME={} IS_SANDBOX=1 node {}",
            home.display(),
            script.display()
        );
        let profile = probe(&command, dir.path()).await;
        let found = declared(&profile);
        for capability in [
            "agent",
            "session",
            "set-mode",
            "session-list",
            "load-session",
        ] {
            assert!(found.iter().any(|c| c == capability), "{profile}");
        }
        assert!(
            !found.iter().any(|c| c == "prompt"),
            "no turn ends offline: {profile}"
        );
        assert!(profile.contains("Authentication required"), "{profile}");
        judge_profile("claude-code-acp", dir.path()).await;
    }
}

#[tokio::test]
async fn gemini_cli_from_npm_is_discovered_and_judged_without_credentials() {
    let Some((dir, home)) = offline_home("gemini-cli") else {
        return;
    };
    if let Some(peer) = install("gemini-cli").await {
        let script = peer.join("node_modules/@google/gemini-cli/bundle/gemini.js");
        let command = format!(
            "env HOME={} node {} --acp",
            home.display(),
            script.display()
        );
        let profile = probe(&command, dir.path()).await;
        let found = declared(&profile);
        assert!(found.iter().any(|c| c == "agent"), "{profile}");
        // session/new needs a key discovery has no method for: the session rows are declared
        // and run blocked, saying why (E-ACP-60), never failed.
        assert!(found.iter().any(|c| c == "session"), "{profile}");
        assert!(profile.contains("API key is missing"), "{profile}");
        assert!(
            profile.contains("rows that need a session are blocked"),
            "{profile}"
        );
        judge_profile("gemini-cli", dir.path()).await;
    }
}

/// Runs the profile's discovery, two rows every ACP agent must pass or skip honestly and one its
/// baseline excuses (ACP-CORE-016: no answer to a malformed line), with its baseline: exit 0, which a
/// stale entry would turn into 1.
async fn judge_profile(name: &str, dir: &Path) {
    let baseline = workspace().join(format!("conformance/baselines/{name}.toml"));
    let out = dir.join(format!("{name}-report"));
    let run = ski_conformance(
        &[
            "run",
            "--target",
            name,
            "--id",
            "ACP-CORE-012",
            "--id",
            "WS-038",
            "--id",
            "ACP-CORE-016",
            "--baseline",
            baseline.to_str().expect("a path"),
            "--out",
            out.to_str().expect("a path"),
        ],
        dir,
    )
    .await;
    assert_eq!(run.code, Some(0), "{}{}", run.stdout, run.stderr);
    assert!(run.stdout.contains("discovered: agent"), "{}", run.stdout);
    println!("{name} peer: probed and judged on 3 rows");
}
