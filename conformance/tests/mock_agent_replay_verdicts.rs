//! The runner judges a replay as it judges the live agent: every recording of a prompt turn in
//! `golden/recordings/`, replayed by `ski-mock-agent --script FILE --unrecorded nearest`, gets
//! the same verdict on every row of the ACP suite as the recorded agent run live
//! (`ski-conformance run --agent-cmd ...`, discovery included), except the rows about bytes that
//! are not a JSON-RPC request, which no recording holds and which the replay passes. The live agents are the peers of
//! `conformance/targets/peers/` that run offline, installed by their own scripts; when `node`/`npm`
//! or `python3` is missing, or an install cannot reach its registry, the test says plainly which
//! recording it did not judge.

use crate::peer_install;
use crate::support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use peer_install::{install, on_path, workspace};
use serde_json::Value;

use ski_mocks::agent::pool::recordings_in;
use ski_mocks::agent::recording::{Recording, method_of};
use support::ski_conformance;

/// Rows about bytes that are not a JSON-RPC request (a batch array, a malformed line, JSON that
/// is no request object): a recording of a session holds none, so a replay answers them as
/// JSON-RPC asks, whatever the recorded agent does. The live Python SDK fails them; the replay
/// must pass them, and the other rows must match.
const FRAMING_ROWS: &[&str] = &["ACP-CORE-014", "ACP-CORE-016", "ACP-CORE-017"];

fn bin_dir() -> PathBuf {
    Path::new(env!("CARGO_BIN_EXE_ski-conformance"))
        .parent()
        .expect("the binary has a directory")
        .to_owned()
}

fn mock_agent() -> PathBuf {
    let path = bin_dir().join("ski-mock-agent");
    assert!(
        path.is_file(),
        "{} is missing: run `cargo build --workspace --bins`",
        path.display()
    );
    path
}

/// The recordings that hold a prompt turn, with the peer each was recorded from.
fn turn_recordings() -> Vec<(PathBuf, String, Recording)> {
    let dir = workspace().join("golden/recordings");
    let recordings: Vec<(PathBuf, String, Recording)> = recordings_in(&dir)
        .expect("golden/recordings loads")
        .into_iter()
        .filter_map(|(path, recording)| {
            let turn = recording
                .exchanges
                .iter()
                .any(|e| e.client.as_ref().and_then(method_of) == Some("session/prompt"));
            let peer = recording
                .spec
                .command
                .iter()
                .find_map(|word| word.split("peers/").nth(1)?.split('/').next())
                .map(str::to_owned);
            Some((path, peer.filter(|_| turn)?, recording))
        })
        .collect();
    assert!(
        recordings.len() >= 2,
        "the SDK echo recordings are in {}",
        dir.display()
    );
    recordings
}

/// The recorded command with the peer's files where this build installed them.
fn live_command(recording: &Recording, peer: &str, installed: &Path) -> String {
    let words: Vec<String> = recording
        .spec
        .command
        .iter()
        .map(|word| match word.split_once(&format!("peers/{peer}/")) {
            Some((_, rest)) => installed.join(rest).display().to_string(),
            None => word.clone(),
        })
        .collect();
    shell_words::join(words)
}

/// `ski-conformance run --suite acp` against an ad-hoc agent: each row's outcome by id.
async fn verdicts(agent_cmd: &str, out: &Path) -> BTreeMap<String, String> {
    let out_arg = out.display().to_string();
    let run = ski_conformance(
        &[
            "run",
            "--agent-cmd",
            agent_cmd,
            "--suite",
            "acp",
            "--out",
            &out_arg,
            "-j",
            "2",
            "-q",
        ],
        out.parent().expect("a parent"),
    )
    .await;
    assert!(
        matches!(run.code, Some(0 | 1)),
        "ski-conformance run against {agent_cmd}: {:?}\n{}{}",
        run.code,
        run.stdout,
        run.stderr
    );
    let text = std::fs::read_to_string(out.join("results.json"))
        .unwrap_or_else(|e| panic!("no results.json ({e}): {}{}", run.stdout, run.stderr));
    let results: Value = serde_json::from_str(&text).expect("results.json");
    results["results"]
        .as_array()
        .expect("results")
        .iter()
        .map(|row| {
            (
                row["id"].as_str().unwrap_or("?").to_owned(),
                row["outcome"].to_string(),
            )
        })
        .collect()
}

fn runs_here(peer: &str) -> Result<(), String> {
    let needs: &[&str] = if peer.starts_with("py-") {
        &["python3"]
    } else {
        &["node", "npm"]
    };
    match needs.iter().find(|program| !on_path(program)) {
        Some(missing) => Err(format!("{missing} is not on PATH")),
        None => Ok(()),
    }
}

#[tokio::test]
async fn each_replayed_recording_gets_the_live_agents_verdicts() {
    let dir = tempfile::tempdir().expect("a temp dir");
    // The installs one after the other (two recordings may share a peer), then every run at
    // once: each is a whole ACP suite that mostly waits on its agent.
    let mut judged_here = Vec::new();
    for (path, peer, recording) in turn_recordings() {
        if let Err(why) = runs_here(&peer) {
            println!("{}: NOT RUN ({why})", path.display());
            continue;
        }
        let Some(installed) = install(&peer).await else {
            continue;
        };
        let live_cmd = live_command(&recording, &peer, &installed);
        judged_here.push((path, peer, live_cmd));
    }
    let runs = judged_here
        .iter()
        .enumerate()
        .map(|(index, (path, peer, live_cmd))| {
            let dir = dir.path();
            async move {
                let replay_cmd = shell_words::join([
                    mock_agent().display().to_string(),
                    "--script".to_owned(),
                    path.display().to_string(),
                    "--unrecorded".to_owned(),
                    "nearest".to_owned(),
                ]);
                let live_dir = dir.join(format!("{index}-{peer}-live"));
                let replay_dir = dir.join(format!("{index}-{peer}-replay"));
                tokio::join!(
                    verdicts(live_cmd, &live_dir),
                    verdicts(&replay_cmd, &replay_dir)
                )
            }
        });
    let verdicts_of = futures::future::join_all(runs).await;
    for ((path, peer, _), (live, replayed)) in judged_here.iter().zip(verdicts_of) {
        let passed = live.values().filter(|o| o.contains("pass")).count();
        assert!(passed >= 10, "{peer} live: {live:?}");
        for id in FRAMING_ROWS {
            assert_eq!(
                replayed.get(*id).map(String::as_str),
                Some("\"pass\""),
                "{}: {id} replayed",
                path.display()
            );
        }
        let ids: std::collections::BTreeSet<&String> = live.keys().chain(replayed.keys()).collect();
        let differing: Vec<String> = ids
            .into_iter()
            .filter(|id| !FRAMING_ROWS.contains(&id.as_str()))
            .filter(|id| live.get(*id) != replayed.get(*id))
            .map(|id| {
                format!(
                    "{id}: live {:?}, replay {:?}",
                    live.get(id),
                    replayed.get(id)
                )
            })
            .collect();
        assert!(
            differing.is_empty(),
            "{}: the replay's verdicts differ from the live agent's:\n{}",
            path.display(),
            differing.join("\n")
        );
        println!(
            "{}: {} rows, the same verdicts live and replayed ({passed} pass)",
            path.display(),
            live.len()
        );
    }
    println!(
        "{} recording(s) judged live and replayed",
        judged_here.len()
    );
}
