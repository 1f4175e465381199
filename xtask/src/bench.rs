//! `cargo xtask bench`: runs the benchmarks, merges their figures into
//! `target/bench/report.json` and prints them as a table.
//!
//! The contract with a benchmark: `cargo xtask bench` sets `SKI_BENCH_DIR` (the `bench` directory
//! under the target directory) and `CRITERION_HOME` (where criterion writes its estimates), then
//! runs each entry of [`BENCHES`]. A benchmark writes `$SKI_BENCH_DIR/rows/<name>.json` holding
//! `{"rows": [...]}`; each row has `group` and `name` and any of `id`, `baseline` (the `id` of the
//! row in the same group it is compared with), `median_ns`, `bytes`, `messages`, `mb_per_s` and
//! `msgs_per_s`, `ratio` and `ratio_method`, and latency quantiles `p50_ns` and `p99_ns`. The
//! report keeps every row as written; a row with a baseline but no `ratio` gets one: its
//! throughput (messages per second, else MB/s, else inverse median time) over its baseline's.
//!
//! The `roundtrip` benchmark (package `ski-mocks`) measures sequential stdio prompt round trips
//! of `ski acp serve` and `ski-mock-agent` as a fraction of a zero-work canned responder's, with
//! meter and agent pinned to one core and unpinned; `startup` measures spawn to `initialize`
//! response against the `cat` process-start floor.
//!
//! The `teams` benchmark (package `ski`) times the agent-teams claim race (10 `ski teams`
//! processes per task, exactly one winner each round) and task creation plus `next-available`
//! on a 10,000-task ledger.
//!
//! The `acp` benchmark compares ski's ACP client and agent with a pair written on the official
//! Rust SDK. That pair lives in `xtask/bench-peers/official`, a package outside the workspace
//! (its own lock file; the SDK's features must not reach ski's builds): before the benchmark
//! runs, `cargo xtask bench` builds it in release mode into `bench-peers` under the target
//! directory and passes that directory's `release` folder as `SKI_BENCH_OFFICIAL_BIN_DIR`.

use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use clap::Args;
use serde_json::{Value, json};
use xshell::{Shell, cmd};

use crate::ci::{target_dir, workspace_root};

mod other_slack;
mod runner_failing;
mod suite_timing;

/// The benchmarks `cargo xtask bench` runs: (package, bench target).
const BENCHES: &[(&str, &str)] = &[
    ("ski", "ndjson"),
    ("ski", "acp"),
    ("ski", "teams"),
    ("ski-mocks", "startup"),
    ("ski-mocks", "roundtrip"),
    ("ski-mocks", "slack"),
];

/// Measurements run by xtask itself rather than by `cargo bench`, selected by the same names.
const SUITE_TIMING: &str = "conformance";

/// The manifest of the official-SDK benchmark peers, relative to the workspace root.
const OFFICIAL_PEERS: &str = "xtask/bench-peers/official/Cargo.toml";

/// Options of `cargo xtask bench`.
#[derive(Debug, Args)]
pub struct BenchArgs {
    /// Run only these benchmarks (repeatable): a bench target name (ndjson, startup, ...),
    /// `conformance` for the suite timing rows or `runner-failing` for how fast the runner fails
    /// targets that answer nothing; default: all.
    #[arg(long = "bench")]
    pub benches: Vec<String>,
    /// Only merge the rows already written and print the table.
    #[arg(long)]
    pub report_only: bool,
    /// For the `slack` benchmark: install the nearest installable fake Slack (vercel-labs'
    /// `emulate`, pinned, from npm into `peers/slack-emulate` under the target directory), start
    /// it and measure it beside the fake in the same run (another fake can be named instead
    /// with `SKI_BENCH_OTHER_SLACK`).
    #[arg(long)]
    pub with_other_slack: bool,
    /// For `runner-failing`: also time the intercom suite against this profile (a build of
    /// another intercom server, which fails rows) and against the reference, each paced as
    /// `ski-conformance run` paces without `-j`; goal: at most 10 times the reference's time.
    #[arg(long, value_name = "PROFILE")]
    pub foreign_intercom: Option<PathBuf>,
}

/// Runs the benchmarks and writes the report.
pub fn run(args: &BenchArgs) -> Result<()> {
    let sh = Shell::new()?;
    let root = workspace_root();
    sh.change_dir(&root);
    let target = target_dir(&sh, &root)?;
    let bench_dir = target.join("bench");
    let rows_dir = bench_dir.join("rows");
    fs::create_dir_all(&rows_dir)
        .with_context(|| format!("cannot create {}", rows_dir.display()))?;
    if !args.report_only {
        let selected: Vec<_> = BENCHES
            .iter()
            .filter(|(_, name)| args.benches.is_empty() || args.benches.iter().any(|b| b == name))
            .collect();
        let time_suite = args.benches.is_empty() || args.benches.iter().any(|b| b == SUITE_TIMING);
        let time_failing =
            args.benches.is_empty() || args.benches.iter().any(|b| b == runner_failing::NAME);
        if selected.is_empty() && !time_suite && !time_failing {
            bail!("no benchmark matches {:?}", args.benches);
        }
        sh.set_var("SKI_BENCH_DIR", &bench_dir);
        sh.set_var("CRITERION_HOME", bench_dir.join("criterion"));
        if selected.iter().any(|(_, name)| *name == "acp") {
            let peers_target = target.join("bench-peers");
            cmd!(
                sh,
                "cargo build --release --locked --manifest-path {OFFICIAL_PEERS} --target-dir {peers_target}"
            )
            .run()
            .context("building the official-SDK benchmark peers failed")?;
            sh.set_var("SKI_BENCH_OFFICIAL_BIN_DIR", peers_target.join("release"));
        }
        // The benchmarks of ski-mocks start the `ski` program: this tree's, built as a user
        // builds it (`-p ski`), and copied aside, because `cargo bench -p ski` rebuilds
        // `target/release/ski` with the dev-dependencies' features.
        if selected.iter().any(|(package, _)| *package == "ski-mocks") {
            cmd!(sh, "cargo build --release --locked -p ski --bin ski")
                .run()
                .context("building the ski program for the benchmarks failed")?;
            let measured = bench_dir.join("ski");
            fs::copy(target.join("release/ski"), &measured).with_context(|| {
                format!("cannot copy the ski program to {}", measured.display())
            })?;
            sh.set_var("SKI_BIN", &measured);
        }
        let other_slack = if args.with_other_slack {
            if !selected.iter().any(|(_, name)| *name == "slack") {
                bail!("--with-other-slack is for the slack benchmark (--bench slack)");
            }
            Some(other_slack::install(&sh, &target)?)
        } else {
            None
        };
        for (package, name) in selected {
            let stale = rows_dir.join(format!("{name}.json"));
            if stale.exists() {
                fs::remove_file(&stale)
                    .with_context(|| format!("cannot remove {}", stale.display()))?;
            }
            // The bench is built before the other fake starts, so that it waits for no build.
            cmd!(
                sh,
                "cargo bench --locked -p {package} --bench {name} --no-run"
            )
            .run()
            .with_context(|| format!("building benchmark {package}/{name} failed"))?;
            let _other = match (&other_slack, *name) {
                (Some(dir), "slack") => {
                    let other = other_slack::start(dir)?;
                    let version = other_slack::EMULATE_VERSION;
                    println!("emulate {version} (slack) at {}", other.base_url);
                    Some((
                        sh.push_env("SKI_BENCH_OTHER_SLACK", &other.base_url),
                        sh.push_env("SKI_BENCH_OTHER_SLACK_NAME", format!("emulate {version}")),
                        other,
                    ))
                }
                _ => None,
            };
            cmd!(sh, "cargo bench --locked -p {package} --bench {name}")
                .run()
                .with_context(|| format!("benchmark {package}/{name} failed"))?;
        }
        if time_suite {
            suite_timing::run(&sh, &target, &rows_dir)?;
        }
        if time_failing {
            runner_failing::run(
                &sh,
                &root,
                &target,
                &rows_dir,
                args.foreign_intercom.as_deref(),
            )?;
        }
    }
    let rows = collect_rows(&rows_dir)?;
    if rows.is_empty() {
        bail!("no bench rows in {}", rows_dir.display());
    }
    let report = json!({ "rows": rows });
    let report_path = bench_dir.join("report.json");
    fs::write(&report_path, serde_json::to_string_pretty(&report)?)
        .with_context(|| format!("cannot write {}", report_path.display()))?;
    print!("{}", table(&rows));
    println!("report: {}", report_path.display());
    Ok(())
}

/// Reads every rows file, in name order, and adds each row's ratio to its baseline.
fn collect_rows(rows_dir: &Path) -> Result<Vec<Value>> {
    let mut files: Vec<PathBuf> = fs::read_dir(rows_dir)
        .with_context(|| format!("cannot read {}", rows_dir.display()))?
        .filter_map(|entry| entry.ok().map(|entry| entry.path()))
        .filter(|path| path.extension().is_some_and(|ext| ext == "json"))
        .collect();
    files.sort();
    let mut rows = Vec::new();
    for file in files {
        let text =
            fs::read_to_string(&file).with_context(|| format!("cannot read {}", file.display()))?;
        let value: Value = serde_json::from_str(&text)
            .with_context(|| format!("{} is not json", file.display()))?;
        let Some(file_rows) = value["rows"].as_array() else {
            bail!("{} has no \"rows\" array", file.display());
        };
        for row in file_rows {
            if !row.is_object() || !row["group"].is_string() || !row["name"].is_string() {
                bail!(
                    "{}: every row needs \"group\" and \"name\": {row}",
                    file.display()
                );
            }
            rows.push(row.clone());
        }
    }
    Ok(with_ratios(rows))
}

/// Adds `ratio` to every row that has a baseline with a comparable figure and no ratio of its
/// own (a bench may measure its ratio better, for example by interleaving both sides).
fn with_ratios(mut rows: Vec<Value>) -> Vec<Value> {
    let ratios: Vec<Option<f64>> = rows
        .iter()
        .map(|row| row["ratio"].as_f64().or_else(|| ratio(row, &rows)))
        .collect();
    for (row, ratio) in rows.iter_mut().zip(ratios) {
        if let (Some(object), Some(ratio)) = (row.as_object_mut(), ratio) {
            object.insert("ratio".to_owned(), json!(ratio));
        }
    }
    rows
}

/// The row's throughput relative to its baseline row.
fn ratio(row: &Value, rows: &[Value]) -> Option<f64> {
    let baseline_id = row["baseline"].as_str()?;
    let baseline = rows.iter().find(|other| {
        other["group"] == row["group"] && other["id"].as_str() == Some(baseline_id)
    })?;
    for key in ["msgs_per_s", "mb_per_s"] {
        if let (Some(ours), Some(theirs)) = (row[key].as_f64(), baseline[key].as_f64()) {
            return (theirs > 0.0).then(|| ours / theirs);
        }
    }
    let (ours, theirs) = (row["median_ns"].as_f64()?, baseline["median_ns"].as_f64()?);
    (ours > 0.0).then(|| theirs / ours)
}

/// The rows as an aligned text table.
fn table(rows: &[Value]) -> String {
    let header = [
        "group", "name", "MB/s", "msgs/s", "median", "p50", "p99", "ratio",
    ];
    let mut lines: Vec<[String; 8]> = vec![header.map(str::to_owned)];
    for row in rows {
        let number = |key: &str, digits: usize| {
            row[key]
                .as_f64()
                .map_or_else(|| "-".to_owned(), |v| format!("{v:.digits$}"))
        };
        let duration = |key: &str| {
            row[key].as_f64().map_or_else(
                || "-".to_owned(),
                |ns| {
                    if ns >= 1e6 {
                        format!("{:.2} ms", ns / 1e6)
                    } else {
                        format!("{:.2} µs", ns / 1e3)
                    }
                },
            )
        };
        let ratio = match (row["ratio"].as_f64(), row["baseline"].as_str()) {
            (Some(ratio), Some(baseline)) => format!("{ratio:.2} × {baseline}"),
            _ => "-".to_owned(),
        };
        lines.push([
            text(row, "group"),
            text(row, "name"),
            number("mb_per_s", 1),
            number("msgs_per_s", 0),
            duration("median_ns"),
            duration("p50_ns"),
            duration("p99_ns"),
            ratio,
        ]);
    }
    let widths: Vec<usize> = (0..header.len())
        .map(|i| {
            lines
                .iter()
                .map(|l| l[i].chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for (n, line) in lines.iter().enumerate() {
        let cells: Vec<String> = line
            .iter()
            .zip(&widths)
            .enumerate()
            .map(|(i, (cell, width))| {
                let pad = width - cell.chars().count();
                if (2..7).contains(&i) {
                    format!("{}{cell}", " ".repeat(pad))
                } else {
                    format!("{cell}{}", " ".repeat(pad))
                }
            })
            .collect();
        out.push_str(cells.join("  ").trim_end());
        out.push('\n');
        if n == 0 {
            let rule: Vec<String> = widths.iter().map(|w| "-".repeat(*w)).collect();
            out.push_str(&rule.join("  "));
            out.push('\n');
        }
    }
    out
}

fn text(row: &Value, key: &str) -> String {
    row[key].as_str().unwrap_or("-").to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ratios_compare_with_the_baseline_of_the_same_group() {
        let rows = vec![
            json!({"group": "g", "name": "ours", "id": "a", "baseline": "b", "msgs_per_s": 80.0}),
            json!({"group": "g", "name": "theirs", "id": "b", "msgs_per_s": 100.0}),
            json!({"group": "h", "name": "other", "id": "b", "msgs_per_s": 1.0}),
            json!({"group": "h", "name": "timed", "id": "t", "baseline": "u", "median_ns": 200.0}),
            json!({"group": "h", "name": "base", "id": "u", "median_ns": 100.0, "p99_ns": 2500.0}),
        ];
        let rows = with_ratios(rows);
        let ratios: Vec<_> = rows.iter().map(|row| row["ratio"].as_f64()).collect();
        assert_eq!(ratios, vec![Some(0.8), None, None, Some(0.5), None]);
        let rendered = table(&rows);
        assert!(rendered.contains("0.80 × b"), "{rendered}");
        assert!(rendered.contains("2.50 µs"), "{rendered}");
        assert!(
            rendered.lines().next().is_some_and(|h| h.contains("p99")),
            "{rendered}"
        );
    }
}
