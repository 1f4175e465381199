//! Benchmark `teams`: the agent-teams ledger under contention and at size.
//!
//! - Claim race: per round a new task and 10 `ski teams task claim` processes (the lead and nine
//!   teammates) started together; exactly one must win each round (the bench fails otherwise).
//!   Figures: won claims per second and the median round.
//! - A 10,000-task ledger: tasks created through the library, one transaction each (a chain, so
//!   that all but the last are blocked and `next-available` has to look past them), then
//!   `task next-available` timed as a `ski teams` process and as a library call.
//!
//! Rows go to `$SKI_BENCH_DIR/rows/teams.json` in the `cargo xtask bench` row format.
//! `SKI_BENCH_TEAMS_TASKS` (default 10,000) and `SKI_BENCH_TEAMS_ROUNDS` (default 50) shrink it
//! for a quick run.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};
use ski::teams::clock::Clock;
use ski::teams::ledger::{BusyPolicy, NewTask, TaskFilter};
use ski::teams::team::Teams;

const LEAD: &str = "agent:main:main";
const CLAIMANTS: usize = 10;

fn setting(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn teams(root: &Path) -> Teams {
    Teams::new(
        root,
        BusyPolicy {
            budget: Duration::from_secs(60),
            trace: false,
        },
        Clock::system(),
    )
}

fn median(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times.get(times.len() / 2).copied().unwrap_or_default()
}

fn ski_teams(root: &Path, caller: &str, args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_ski"));
    command
        .arg("teams")
        .arg("--root")
        .arg(root)
        .arg("--as")
        .arg(caller)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    command
}

fn claim_race(root: &Path, rounds: usize) -> Result<Vec<Value>> {
    let teams = teams(root);
    teams.create("race", LEAD, "", "general-purpose")?;
    let mut team = teams.open("race")?;
    let mut keys: Vec<String> = (1..CLAIMANTS).map(|i| format!("agent:w{i}:main")).collect();
    for (i, key) in keys.iter().enumerate() {
        team.join(key, &format!("w{i}"))?;
    }
    keys.push(LEAD.to_owned());
    let mut times = Vec::new();
    let started = Instant::now();
    for round in 0..rounds {
        let created = team.create_task(
            LEAD,
            &NewTask {
                subject: format!("round {round}"),
                ..NewTask::default()
            },
        )?;
        let id = created["task"]["id"]
            .as_str()
            .context("task id")?
            .to_owned();
        let round_started = Instant::now();
        let mut children = Vec::new();
        for key in &keys {
            children.push(ski_teams(root, key, &["task", "claim", "race", &id]).spawn()?);
        }
        let mut winners = 0;
        for mut child in children {
            if child.wait()?.success() {
                winners += 1;
            }
        }
        times.push(round_started.elapsed());
        if winners != 1 {
            bail!("round {round}: {winners} claims succeeded, expected exactly one");
        }
    }
    let elapsed = started.elapsed().as_secs_f64();
    Ok(vec![json!({
        "group": "teams",
        "name": format!("claim race, {CLAIMANTS} processes per task ({rounds} rounds)"),
        "median_ns": median(times).as_nanos() as u64,
        "messages": rounds,
        "msgs_per_s": rounds as f64 / elapsed,
    })])
}

fn big_ledger(root: &Path, tasks: usize) -> Result<Vec<Value>> {
    let teams = teams(root);
    teams.create("big", LEAD, "", "general-purpose")?;
    let mut team = teams.open("big")?;
    let started = Instant::now();
    let mut previous: Option<String> = None;
    for n in 0..tasks {
        let depends_on = match (&previous, n + 1 == tasks) {
            (Some(prev), false) => vec![prev.clone()],
            _ => Vec::new(),
        };
        let created = team.create_task(
            LEAD,
            &NewTask {
                subject: format!("task {n}"),
                description: "a task of the big ledger".to_owned(),
                depends_on,
                ..NewTask::default()
            },
        )?;
        previous = created["task"]["id"].as_str().map(str::to_owned);
    }
    let create_elapsed = started.elapsed();
    team.claim(LEAD, "1")?;
    let expected = tasks.to_string();
    let mut process_times = Vec::new();
    for _ in 0..20 {
        let run_started = Instant::now();
        let output = ski_teams(root, LEAD, &["task", "next-available", "big"])
            .stdout(Stdio::piped())
            .output()?;
        process_times.push(run_started.elapsed());
        let value: Value = serde_json::from_slice(&output.stdout)?;
        if value["task"]["id"] != expected.as_str() {
            bail!("next-available returned {value}, expected task {expected}");
        }
    }
    let mut library_times = Vec::new();
    for _ in 0..200 {
        let call_started = Instant::now();
        let found = team.ledger().list(&TaskFilter {
            available: true,
            limit: Some(1),
            ..TaskFilter::default()
        })?;
        library_times.push(call_started.elapsed());
        if found.first().map(|t| t.id.as_str()) != Some(expected.as_str()) {
            bail!("the library's next available task is not task {expected}");
        }
    }
    Ok(vec![
        json!({
            "group": "teams",
            "name": format!("task create through the library ({tasks} tasks, one transaction each)"),
            "median_ns": (create_elapsed.as_nanos() / tasks.max(1) as u128) as u64,
            "messages": tasks,
            "msgs_per_s": tasks as f64 / create_elapsed.as_secs_f64(),
        }),
        json!({
            "group": "teams",
            "name": format!("next-available over {tasks} tasks, `ski teams` process"),
            "median_ns": median(process_times).as_nanos() as u64,
        }),
        json!({
            "group": "teams",
            "name": format!("next-available over {tasks} tasks, library call"),
            "median_ns": median(library_times).as_nanos() as u64,
        }),
    ])
}

fn main() -> Result<()> {
    // `cargo bench` passes `--bench`; `cargo test --benches` passes nothing: both run the same.
    let tasks = setting("SKI_BENCH_TEAMS_TASKS", 10_000);
    let rounds = setting("SKI_BENCH_TEAMS_ROUNDS", 50);
    let dir = tempfile::tempdir()?;
    let mut rows = claim_race(&dir.path().join("race"), rounds)?;
    rows.extend(big_ledger(&dir.path().join("big"), tasks)?);
    for row in &rows {
        println!(
            "{:<70} median {:>12} ns  {:>10.1}/s",
            row["name"].as_str().unwrap_or(""),
            row["median_ns"].as_u64().unwrap_or(0),
            row["msgs_per_s"].as_f64().unwrap_or(0.0)
        );
    }
    if let Some(bench_dir) = std::env::var_os("SKI_BENCH_DIR").map(PathBuf::from) {
        let rows_dir = bench_dir.join("rows");
        std::fs::create_dir_all(&rows_dir)?;
        std::fs::write(
            rows_dir.join("teams.json"),
            serde_json::to_string_pretty(&json!({ "rows": rows }))?,
        )?;
    }
    Ok(())
}
