//! What an ad-hoc run leaves and reports: each scenario's agent and discovery's agent get a HOME of
//! their own, passing rows keep a count of wire-log entries instead of the log, and `report.md`
//! says what discovery found, how the timeouts were scaled and why each skipped row was skipped.

use crate::support;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use support::ski_conformance;

fn mock_agent() -> PathBuf {
    let path = Path::new(env!("CARGO_BIN_EXE_ski-conformance"))
        .parent()
        .expect("the binary has a directory")
        .join("ski-mock-agent");
    assert!(
        path.is_file(),
        "{} is missing: run `cargo build --workspace --bins`",
        path.display()
    );
    path
}

/// An agent that appends its HOME to `homes`, then is the mock agent.
fn recording_agent(dir: &Path, homes: &Path) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join("agent.sh");
    std::fs::write(
        &path,
        format!(
            "#!/bin/sh\necho \"$HOME\" >> {}\nexec {}\n",
            homes.display(),
            mock_agent().display()
        ),
    )
    .expect("the script is written");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    path
}

async fn ad_hoc_run(dir: &Path, extra: &[&str]) -> (support::Output, Vec<String>) {
    let homes = dir.join("homes");
    let _ = std::fs::remove_file(&homes);
    let agent = recording_agent(dir, &homes).display().to_string();
    let mut args = vec![
        "run",
        "--agent-cmd",
        &agent,
        "--suite",
        "acp",
        "--id",
        "WS-00*",
        "--id",
        "WS-03[2-9]",
        "-j",
        "1",
        "--out",
        "out",
    ];
    args.extend_from_slice(extra);
    let run = ski_conformance(&args, dir).await;
    let seen = std::fs::read_to_string(&homes)
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect();
    (run, seen)
}

#[tokio::test]
async fn each_scenario_and_discovery_get_a_home_of_their_own() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let (run, homes) = ad_hoc_run(dir.path(), &[]).await;
    assert!(homes.len() >= 3, "{homes:?}\n{}{}", run.stdout, run.stderr);
    let mine = std::env::var("HOME").unwrap_or_default();
    // Discovery starts the agent more than once (its version probe is a second connection),
    // always in its one home; each row's agent has a home of its own.
    let (discovery, rows): (Vec<&String>, Vec<&String>) = homes
        .iter()
        .partition(|home| home.contains("ski-conformance-discovery-"));
    let discovery_homes: BTreeSet<&&String> = discovery.iter().collect();
    assert_eq!(discovery_homes.len(), 1, "discovery's homes: {homes:?}");
    let distinct: BTreeSet<&&String> = rows.iter().collect();
    assert_eq!(distinct.len(), rows.len(), "a HOME was shared: {homes:?}");
    for home in &homes {
        assert_ne!(home, &mine, "an agent ran with the user's HOME");
        assert!(home.ends_with("/home"), "{home}");
    }

    let (run, homes) = ad_hoc_run(dir.path(), &["--shared-home"]).await;
    // Opted out: discovery and every row's agent run with the user's HOME.
    assert!(homes.len() >= 3, "{homes:?}\n{}{}", run.stdout, run.stderr);
    assert!(homes.iter().all(|h| *h == mine), "{homes:?}");
}

#[tokio::test]
async fn reports_keep_wire_logs_of_failing_rows_only_and_explain_the_run() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let (run, _) = ad_hoc_run(dir.path(), &[]).await;
    assert!(
        matches!(run.code, Some(0 | 1)),
        "{}{}",
        run.stdout,
        run.stderr
    );
    let text = std::fs::read_to_string(dir.path().join("out/results.json")).expect("results");
    let results: serde_json::Value = serde_json::from_str(&text).expect("json");
    let rows = results["results"].as_array().expect("rows");
    let passed: Vec<&serde_json::Value> = rows.iter().filter(|r| r["outcome"] == "pass").collect();
    assert!(!passed.is_empty(), "{}", run.stdout);
    for row in &passed {
        assert!(
            row.get("wire").is_none(),
            "{} keeps its wire log",
            row["id"]
        );
        assert!(row["wire_lines"].as_u64().unwrap_or(0) > 0, "{}", row["id"]);
    }
    let setup = &results["setup"];
    assert!(
        setup["discovered"]
            .as_array()
            .is_some_and(|c| c.iter().any(|c| c == "agent")),
        "{setup}"
    );
    assert!(setup["startup_seconds"].is_number(), "{setup}");
    assert_eq!(setup["timeout_multiplier_asked"], 1.0, "{setup}");

    let junit = std::fs::read_to_string(dir.path().join("out/junit.xml")).expect("junit");
    assert!(
        junit.contains("wire-log entries (reports keep the wire log of failing rows only)"),
        "{junit}"
    );
    assert!(!junit.contains("\"method\":\"initialize\""), "{junit}");

    let report = std::fs::read_to_string(dir.path().join("out/report.md")).expect("report");
    assert!(report.contains("Discovery found: "), "{report}");
    assert!(report.contains("Timeouts: multiplier "), "{report}");
    assert!(report.contains("applicable rows ran"), "{report}");
    for row in rows.iter().filter(|r| r["outcome"] == "skip") {
        let reason = row["message"].as_str().expect("a skip has a reason");
        assert!(
            report.contains(&format!("skip: {reason}")),
            "{} has no reason in report.md",
            row["id"]
        );
    }
}
