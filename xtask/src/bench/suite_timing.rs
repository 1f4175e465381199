//! The conformance suite timing rows of `cargo xtask bench`: wall time of the whole ACP suite
//! against the reference build, over stdio and over WebSocket, of the AOF, teams, kiro and intercom
//! suites (the intercom target is reached over the fake Slack),
//! and the per-scenario median.
//!
//! The suite runs with the debug binaries that `cargo xtask conformance` uses, so the figures are
//! those of the main job. Each transport runs [`RUNS`] times; the rows hold the median wall time
//! and the median of every scenario's duration across those runs (skipped scenarios excluded).

use std::fs;
use std::path::Path;

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};
use xshell::{Shell, cmd};

/// Runs of the suite per transport.
const RUNS: usize = 3;

/// The suites that are timed: (suite, transport, target profile).
const TIMED: &[(&str, &str, &str)] = &[
    ("acp", "stdio", "reference"),
    ("acp", "ws", "reference-ws"),
    ("aof", "stdio", "reference"),
    ("teams", "stdio", "reference"),
    ("kiro", "stdio", "reference"),
    ("intercom", "slack", "reference"),
];

/// Builds the binaries, times the suite and writes `rows/conformance.json`.
pub fn run(sh: &Shell, target_dir: &Path, rows_dir: &Path) -> Result<()> {
    cmd!(sh, "cargo build --workspace --bins")
        .run()
        .context("building the binaries failed")?;
    let runner = target_dir.join("debug").join("ski-conformance");
    let mut rows = Vec::new();
    for &(suite, transport, profile) in TIMED {
        let mut walls = Vec::new();
        let mut scenario_durations = Vec::new();
        let mut scenarios = 0;
        for run in 0..RUNS {
            let out = target_dir
                .join("bench")
                .join("conformance")
                .join(format!("{suite}-{transport}-{run}"));
            let status = std::process::Command::from(cmd!(
                sh,
                "{runner} run --suite {suite} --target {profile} --out {out}"
            ))
            .stdout(std::process::Stdio::null())
            .status()
            .with_context(|| format!("cannot start {}", runner.display()))?;
            let results = read_results(&out.join("results.json"))?;
            if !status.success() {
                bail!(
                    "the {suite} suite over {transport} did not pass against the reference; \
                     see {}",
                    out.join("report.md").display()
                );
            }
            walls.push(
                results["duration"]
                    .as_f64()
                    .context("results.json has no duration")?,
            );
            let ran: Vec<f64> = results["results"]
                .as_array()
                .context("results.json has no results")?
                .iter()
                .filter(|result| result["outcome"] != "skip")
                .filter_map(|result| result["duration"].as_f64())
                .collect();
            scenarios = ran.len();
            scenario_durations.extend(ran);
        }
        let wall = median(&mut walls);
        let per_scenario = median(&mut scenario_durations);
        println!(
            "{suite} suite over {transport}: {scenarios} scenarios, wall {wall:.2} s (median of \
             {RUNS}), per-scenario median {:.1} ms",
            per_scenario * 1e3
        );
        rows.push(json!({
            "group": "conformance",
            "name": format!("{suite} suite against the reference, whole run ({transport})"),
            "id": format!("{suite}-{transport}-wall"),
            "median_ns": (wall * 1e9) as u64,
            "messages": scenarios,
        }));
        rows.push(json!({
            "group": "conformance",
            "name": format!("{suite} suite against the reference, per scenario ({transport})"),
            "id": format!("{suite}-{transport}-scenario"),
            "median_ns": (per_scenario * 1e9) as u64,
            "messages": scenarios,
        }));
    }
    let path = rows_dir.join("conformance.json");
    fs::write(
        &path,
        serde_json::to_string_pretty(&json!({ "rows": rows }))?,
    )
    .with_context(|| format!("cannot write {}", path.display()))
}

fn read_results(path: &Path) -> Result<Value> {
    let text = fs::read_to_string(path)
        .with_context(|| format!("the suite wrote no results at {}", path.display()))?;
    serde_json::from_str(&text).with_context(|| format!("{} is not json", path.display()))
}

/// The median of `values` (0 for none); sorts them in place.
fn median(values: &mut [f64]) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    values.sort_by(f64::total_cmp);
    let middle = values.len() / 2;
    if values.len() % 2 == 1 {
        values[middle]
    } else {
        (values[middle - 1] + values[middle]) / 2.0
    }
}

#[cfg(test)]
mod tests {
    use super::median;

    #[test]
    fn median_of_odd_even_and_empty_lists() {
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&mut [4.0, 1.0, 2.0, 3.0]), 2.5);
        assert_eq!(median(&mut []), 0.0);
    }
}
