//! The runner-failing rows of `cargo xtask bench` (`--bench runner-failing`): how long the runner
//! takes to fail a target, against the goals of fast, honest failure on a two-core machine at
//! `--jobs 2`.
//!
//! - the ACP suite against an agent that never answers (the stand-in
//!   `conformance/tests/fixtures/silent-target`), as a newcomer runs it (`--agent-cmd`, with
//!   discovery) and with `agent`, `session` and `prompt` declared by hand: at most 60 s each;
//! - the intercom suite against a server that never gets ready (the reference profile with every
//!   server command replaced by the same stand-in): at most 120 s;
//! - the ACP suite against an agent on stdio that answers every request with a JSON-RPC error
//!   (`ski-conformance fixture acp-errors`), discovered and declared: at most 60 s each;
//! - a real agent's run (Gemini CLI offline, profile `gemini-cli`, when
//!   `conformance/targets/peers` has installed it): its failing rows, re-runs included, take at
//!   most 3 times its passing rows' time;
//! - with `--foreign-intercom PROFILE`, the intercom suite against another intercom server's
//!   build (which fails rows) and against the reference, both paced as a user runs them: at
//!   most 10 times the reference's time.
//!
//! The debug binaries run, as `cargo xtask conformance` runs them. Each row is written to
//! `rows/runner-failing.json` (wall time as `median_ns`, rows run as `messages`, and the goal);
//! a missed goal fails the benchmark after the rows are written.

use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};
use xshell::{Shell, cmd};

/// The name `--bench` selects these rows by.
pub const NAME: &str = "runner-failing";

/// The most the ACP suite may take against an agent that never answers, in seconds.
const ACP_SILENT_GOAL: f64 = 60.0;

/// The most the intercom suite may take against a server that never gets ready, in seconds.
const INTERCOM_SILENT_GOAL: f64 = 120.0;
/// The intercom suite against a ready server that answers every MCP request with HTTP 500, in
/// seconds at `-j 2`: each row fails at the first refusal.
const INTERCOM_ERRORING_GOAL: f64 = 60.0;

/// The ACP suite against an agent on stdio that answers every request with a JSON-RPC error, in
/// seconds at `-j 2`, discovered or declared: each row fails at the first error answer.
const ACP_ERRORING_GOAL: f64 = 60.0;

/// The flags of a run that declares by hand what the rows needing a turn require, instead of
/// discovering it.
const DECLARED_TURN: &[&str] = &[
    "--no-discover",
    "--capability",
    "agent",
    "--capability",
    "session",
    "--capability",
    "prompt",
];

/// The most time a real agent's failing rows may take, as a multiple of its passing rows' time.
const FAILING_SHARE_GOAL: f64 = 3.0;

/// The most a foreign intercom build's run of the suite may take, as a multiple of the
/// reference's run.
const FOREIGN_INTERCOM_GOAL: f64 = 10.0;

/// Rows at once: `-j 2`, or paced (`None`) as `ski-conformance run` is without `-j`.
const TWO_JOBS: Option<&str> = Some("2");

/// One timed run: what it ran and what it found.
struct Timed {
    /// The whole process, discovery included, in seconds.
    wall: f64,
    ran: usize,
    failing: f64,
    passing: f64,
}

/// Builds the binaries, times the runs and writes `rows/runner-failing.json`.
pub fn run(
    sh: &Shell,
    root: &Path,
    target_dir: &Path,
    rows_dir: &Path,
    foreign_intercom: Option<&Path>,
) -> Result<()> {
    cmd!(sh, "cargo build --workspace --bins")
        .run()
        .context("building the binaries failed")?;
    let runner = target_dir.join("debug").join("ski-conformance");
    let out_root = target_dir.join("bench").join(NAME);
    fs::create_dir_all(&out_root)
        .with_context(|| format!("cannot create {}", out_root.display()))?;
    let silent = root.join("conformance/tests/fixtures/silent-target");
    let silent_arg = silent.display().to_string();
    let mut rows = Vec::new();
    let mut missed = Vec::new();
    let mut goal = |id: &str, name: &str, timed: &Timed, value: f64, limit: f64, unit: &str| {
        let met = value <= limit;
        println!(
            "{name}: {value:.1} {unit} (goal at most {limit} {unit}: {}), wall {:.1} s, {} rows ran",
            if met { "met" } else { "MISSED" },
            timed.wall,
            timed.ran
        );
        if !met {
            missed.push(format!("{name}: {value:.1} {unit} > {limit} {unit}"));
        }
        rows.push(json!({
            "group": NAME,
            "name": name,
            "id": id,
            "median_ns": (timed.wall * 1e9) as u64,
            "messages": timed.ran,
            "value": value,
            "goal": limit,
            "goal_met": met,
        }));
    };

    let timed = time_run(
        sh,
        &runner,
        TWO_JOBS,
        &out_root.join("acp-silent-discovered"),
        &["--agent-cmd", &silent_arg, "--suite", "acp"],
    )?;
    goal(
        "acp-silent-discovered",
        "acp suite, agent that never answers (--agent-cmd, discovered)",
        &timed,
        timed.wall,
        ACP_SILENT_GOAL,
        "s",
    );
    let timed = time_run(
        sh,
        &runner,
        TWO_JOBS,
        &out_root.join("acp-silent-declared"),
        &[
            &["--agent-cmd", &silent_arg, "--suite", "acp"],
            DECLARED_TURN,
        ]
        .concat(),
    )?;
    goal(
        "acp-silent-declared",
        "acp suite, agent that never answers (agent, session, prompt declared)",
        &timed,
        timed.wall,
        ACP_SILENT_GOAL,
        "s",
    );

    let profile = out_root.join("silent-intercom.toml");
    write_silent_intercom_profile(root, &silent, &profile)?;
    let profile_arg = profile.display().to_string();
    let timed = time_run(
        sh,
        &runner,
        TWO_JOBS,
        &out_root.join("intercom-silent"),
        &["--target", &profile_arg, "--suite", "intercom"],
    )?;
    goal(
        "intercom-silent",
        "intercom suite, server that never gets ready",
        &timed,
        timed.wall,
        INTERCOM_SILENT_GOAL,
        "s",
    );

    // A server that gets ready and then answers every MCP request with HTTP 500.
    let erroring = out_root.join("erroring-intercom.toml");
    let reference = fs::read_to_string(root.join("conformance/targets/reference.toml"))
        .context("cannot read the reference profile")?;
    let command = format!("{} fixture http-errors", runner.display());
    fs::write(
        &erroring,
        silent_profile(&reference, &command).replace("silent-intercom", "erroring-intercom"),
    )
    .with_context(|| format!("cannot write {}", erroring.display()))?;
    let erroring_arg = erroring.display().to_string();
    let timed = time_run(
        sh,
        &runner,
        TWO_JOBS,
        &out_root.join("intercom-erroring"),
        &["--target", &erroring_arg, "--suite", "intercom"],
    )?;
    goal(
        "intercom-erroring",
        "intercom suite, server that is ready and answers every MCP request with HTTP 500",
        &timed,
        timed.wall,
        INTERCOM_ERRORING_GOAL,
        "s",
    );

    // An agent that answers every request with -32603 (the hidden fixture
    // `ski-conformance fixture acp-errors`), as a newcomer runs it and with its capabilities
    // declared by hand, so that the rows needing a session meet the error too.
    let erroring_agent = format!("{} fixture acp-errors", runner.display());
    for (id, name, declared) in [
        (
            "acp-erroring-discovered",
            "acp suite, agent that answers every request with an error (--agent-cmd, discovered)",
            false,
        ),
        (
            "acp-erroring-declared",
            "acp suite, agent that answers every request with an error (agent, session, prompt declared)",
            true,
        ),
    ] {
        let mut args = vec!["--agent-cmd", erroring_agent.as_str(), "--suite", "acp"];
        if declared {
            args.extend(DECLARED_TURN);
        }
        let timed = time_run(sh, &runner, TWO_JOBS, &out_root.join(id), &args)?;
        goal(id, name, &timed, timed.wall, ACP_ERRORING_GOAL, "s");
    }

    let timed = time_run(
        sh,
        &runner,
        TWO_JOBS,
        &out_root.join("gemini-cli"),
        &["--target", "gemini-cli", "--suite", "acp"],
    )?;
    if timed.passing > 0.0 {
        goal(
            "real-agent-failing-share",
            "gemini-cli: time of failing rows over passing rows",
            &timed,
            timed.failing / timed.passing,
            FAILING_SHARE_GOAL,
            "x",
        );
    } else {
        println!(
            "gemini-cli: no row passed (is it installed? sh conformance/targets/peers/gemini-cli/install.sh); no failing-share row"
        );
    }

    if let Some(profile) = foreign_intercom {
        let reference = root.join("conformance/targets/reference.toml");
        let mut runs = Vec::new();
        for (id, profile) in [
            ("intercom-reference-paced", reference.as_path()),
            ("intercom-foreign-paced", profile),
        ] {
            let profile = profile.display().to_string();
            let args = ["--target", profile.as_str(), "--suite", "intercom"];
            runs.push(time_run(sh, &runner, None, &out_root.join(id), &args)?);
        }
        let (reference, foreign) = (&runs[0], &runs[1]);
        println!(
            "intercom suite, paced: reference {:.1} s, foreign build {:.1} s",
            reference.wall, foreign.wall
        );
        goal(
            "intercom-foreign-share",
            "intercom suite, a foreign build's failing run over the reference's run (paced)",
            foreign,
            foreign.wall / reference.wall,
            FOREIGN_INTERCOM_GOAL,
            "x",
        );
    }

    let path = rows_dir.join(format!("{NAME}.json"));
    fs::write(
        &path,
        serde_json::to_string_pretty(&json!({ "rows": rows }))?,
    )
    .with_context(|| format!("cannot write {}", path.display()))?;
    if !missed.is_empty() {
        bail!("runner-failing goals missed: {}", missed.join("; "));
    }
    Ok(())
}

/// Runs `ski-conformance run ARGS` with `--jobs JOBS` (paced without) into `out` (whatever its
/// verdict: these targets fail) and reads its results.
fn time_run(
    sh: &Shell,
    runner: &Path,
    jobs: Option<&str>,
    out: &Path,
    args: &[&str],
) -> Result<Timed> {
    let jobs: Vec<&str> = jobs.map(|jobs| vec!["--jobs", jobs]).unwrap_or_default();
    let started = std::time::Instant::now();
    let status = std::process::Command::from(cmd!(
        sh,
        "{runner} run {args...} {jobs...} --quiet --out {out}"
    ))
    .stdout(std::process::Stdio::null())
    .status()
    .with_context(|| format!("cannot start {}", runner.display()))?;
    let wall = started.elapsed().as_secs_f64();
    if status.code().is_none_or(|code| code > 1) {
        bail!("ski-conformance run {} ended with {status}", args.join(" "));
    }
    let path = out.join("results.json");
    let text = fs::read_to_string(&path)
        .with_context(|| format!("the run wrote no results at {}", path.display()))?;
    let results: Value =
        serde_json::from_str(&text).with_context(|| format!("{} is not json", path.display()))?;
    let rows = results["results"]
        .as_array()
        .context("results.json has no results")?;
    let duration = |r: &Value| r["duration"].as_f64().unwrap_or(0.0);
    let first = |r: &Value| r["first_attempt"]["duration"].as_f64().unwrap_or(0.0);
    let outcome = |r: &Value, o: &str| r["outcome"] == o;
    Ok(Timed {
        wall,
        ran: rows.iter().filter(|r| !outcome(r, "skip")).count(),
        failing: rows
            .iter()
            .filter(|r| outcome(r, "fail") || outcome(r, "error"))
            .map(|r| duration(r) + first(r))
            .sum(),
        passing: rows
            .iter()
            .filter(|r| outcome(r, "pass"))
            .map(|r| duration(r) + first(r))
            .sum(),
    })
}

/// The reference profile with every intercom server command replaced by `silent`.
fn write_silent_intercom_profile(root: &Path, silent: &Path, out: &Path) -> Result<()> {
    let reference: PathBuf = root.join("conformance/targets/reference.toml");
    let text = fs::read_to_string(&reference)
        .with_context(|| format!("cannot read {}", reference.display()))?;
    let profile = silent_profile(&text, &silent.display().to_string());
    fs::write(out, profile).with_context(|| format!("cannot write {}", out.display()))
}

/// `profile` with its name `silent-intercom` and each `server…` command `silent`.
fn silent_profile(profile: &str, silent: &str) -> String {
    let mut named = false;
    profile
        .lines()
        .map(|line| {
            let key = line.split('=').next().unwrap_or_default().trim();
            if !named && line.starts_with("name = ") {
                named = true;
                "name = \"silent-intercom\"".to_owned()
            } else if key.starts_with("server") && line.contains("ski intercom") {
                format!("{key} = {silent:?}")
            } else {
                line.to_owned()
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::silent_profile;

    #[test]
    fn the_silent_profile_replaces_every_server_command() {
        let profile = "name = \"reference\"\n[suites.intercom.commands]\nserver = \"{bin_dir}/ski intercom --config {config}\"\nserver_mode = \"{bin_dir}/ski intercom --mode {mode}\"\nother = \"x\"";
        let silent = silent_profile(profile, "/s");
        assert_eq!(
            silent,
            "name = \"silent-intercom\"\n[suites.intercom.commands]\nserver = \"/s\"\nserver_mode = \"/s\"\nother = \"x\""
        );
    }
}
