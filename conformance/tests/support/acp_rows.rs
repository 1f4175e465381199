//! Running a few ACP rows against an ad-hoc agent, fast, and reading one row's result: what the
//! runner's timing and honest-failure tests share.

use std::path::Path;

use serde_json::Value;

use super::support::ski_conformance;

/// Runs the ACP rows `ids` against the ad-hoc `agent` (declared: agent, session, stdio), one at a
/// time, with every timeout class and allowance at a fifth; results.json.
pub async fn run_against(agent: &Path, ids: &[&str], dir: &Path) -> Value {
    let declared = [
        "--no-discover",
        "--capability",
        "agent",
        "--capability",
        "session",
    ];
    run_with(agent, &declared, ids, dir).await
}

/// [`run_against`] as a newcomer runs it: the capabilities are what discovery finds.
pub async fn run_discovered(agent: &Path, ids: &[&str], dir: &Path) -> Value {
    run_with(agent, &[], ids, dir).await
}

/// [`run_against`] with `options` of `ski-conformance run` in place of the declared
/// capabilities.
pub async fn run_with(agent: &Path, options: &[&str], ids: &[&str], dir: &Path) -> Value {
    let agent = agent.display().to_string();
    let mut args = vec!["run", "--agent-cmd", &agent];
    args.extend(options);
    args.extend([
        "--suite",
        "acp",
        "--jobs",
        "1",
        "--timeout-multiplier",
        "0.2",
        "--out",
        "out",
    ]);
    for id in ids {
        args.extend(["--id", id]);
    }
    let run = ski_conformance(&args, dir).await;
    let text = std::fs::read_to_string(dir.join("out/results.json")).unwrap_or_else(|e| {
        panic!(
            "no results.json ({e}), exit {:?}:\n{}{}",
            run.code, run.stdout, run.stderr
        )
    });
    serde_json::from_str(&text).expect("results.json is JSON")
}

/// The result of row `id`.
pub fn row<'a>(results: &'a Value, id: &str) -> &'a Value {
    results["results"]
        .as_array()
        .expect("results")
        .iter()
        .find(|r| r["id"] == id)
        .unwrap_or_else(|| panic!("no result for {id}"))
}
