//! The ACP defect corpus (`conformance/defects/acp/`), proving the ACP suite's judge: the runner
//! (`ski-conformance run`, a real process) is pointed at every entry, each a target profile made
//! from `corpus.toml`. Each defect must fail the rows it names, each for its reason, and no row
//! the corpus does not name as a consequence; the conforming agent and client must fail no
//! `must` or `capability` row; every ACP row must be caught by a defect or say why none can.
//! The catch table is written to `<target dir>/conformance/acp-defects.md` (what `cargo xtask
//! conformance --defects` prints).
//!
//! `harness = false` (libtest-mimic): the corpus's own client is this binary started again as
//! `<test> --acp-client ARGS…` (`corpus_client`).

use crate::support;

use crate::binaries;
use crate::corpus;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use corpus::{Corpus, Entry};
use futures::StreamExt;
use libtest_mimic::{Failed, Trial};
use ski_conformance::report::junit::details;
use ski_conformance::runner::ScenarioResult;
use ski_conformance::{Level, Outcome, Scenario, Target};

/// Entries run at once; each run has `JOBS` scenarios at once.
const ENTRIES_AT_ONCE: usize = 8;
/// `--jobs` of each run.
const JOBS: &str = "3";

fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("defects/acp")
}

fn acp_rows() -> Vec<Scenario> {
    let catalogs = ski_conformance::catalog::builtin().expect("the built-in catalogs load");
    catalogs
        .suite("acp")
        .expect("an acp catalog")
        .scenarios
        .clone()
}

/// What one entry's run gave: every result by row and how long the run took, or why the run
/// could not be judged.
type EntryResults = Result<EntryRun, String>;

/// One entry's run.
struct EntryRun {
    /// Every result, by row.
    results: BTreeMap<String, ScenarioResult>,
    /// The run's wall time, in seconds.
    seconds: f64,
}

/// Runs `ski-conformance run` against `entry`'s profile, written into `work`.
async fn run_entry(corpus: &Corpus, entry: &Entry, bin_dir: &Path, work: &Path) -> EntryResults {
    let dir = work.join(&entry.name);
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let profile = dir.join("profile.toml");
    std::fs::write(&profile, corpus.profile(entry)?).map_err(|e| e.to_string())?;
    let out = dir.join("out");
    let (profile, out, bin_dir) = (
        profile.display().to_string(),
        out.display().to_string(),
        bin_dir.display().to_string(),
    );
    let mut args = vec![
        "run",
        "--target",
        &profile,
        "--suite",
        "acp",
        "--bin-dir",
        &bin_dir,
        "--jobs",
        JOBS,
        "--out",
        &out,
        "--quiet",
    ];
    for glob in &entry.rows {
        args.extend(["--id", glob.as_str()]);
    }
    // A defect's failures are expected: re-running them alone would only double their time.
    if !entry.conforming {
        args.push("--no-rerun");
    }
    let started = std::time::Instant::now();
    let run = support::ski_conformance(&args, &dir).await;
    if !matches!(run.code, Some(0 | 1)) {
        return Err(format!(
            "ski-conformance run ended with {:?}:\n{}{}",
            run.code, run.stdout, run.stderr
        ));
    }
    let report = ski_conformance::merge::load_results(&Path::new(&out).join("results.json"))
        .map_err(|e| e.to_string())?;
    let seconds = started.elapsed().as_secs_f64();
    eprintln!("{}: {seconds:.1}s", entry.name);
    Ok(EntryRun {
        results: report
            .results
            .into_iter()
            .map(|r| (r.id.clone(), r))
            .collect(),
        seconds,
    })
}

/// Runs every entry, `ENTRIES_AT_ONCE` at a time; the runs in the corpus's order.
fn run_corpus(corpus: &Corpus) -> Vec<EntryResults> {
    let reference = Target::load("reference").expect("the reference profile loads");
    let started = std::time::Instant::now();
    let bin_dir = binaries::prepare_binaries(&reference).expect("the binaries are built");
    eprintln!("binaries ready in {:.1}s", started.elapsed().as_secs_f64());
    let work = tempfile::tempdir().expect("a temp dir");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    let (bin_dir, work) = (bin_dir.as_path(), work.path());
    let mut runs: Vec<(usize, EntryResults)> = runtime.block_on(async {
        futures::stream::iter(corpus.entries.iter().enumerate())
            .map(|(index, entry)| async move {
                (index, run_entry(corpus, entry, bin_dir, work).await)
            })
            .buffer_unordered(ENTRIES_AT_ONCE)
            .collect()
            .await
    });
    runs.sort_by_key(|(index, _)| *index);
    runs.into_iter().map(|(_, run)| run).collect()
}

fn decides(level: Level) -> bool {
    matches!(level, Level::Must | Level::Capability)
}

fn failed(result: &ScenarioResult) -> bool {
    matches!(result.outcome, Outcome::Fail | Outcome::Error)
}

/// What is wrong with `entry`'s results, one line each.
fn judge(entry: &Entry, results: &BTreeMap<String, ScenarioResult>) -> Vec<String> {
    let mut problems = Vec::new();
    let name = &entry.name;
    for result in results.values().filter(|r| r.outcome == Outcome::Error) {
        problems.push(format!(
            "{name}: {} ended in a harness error:\n{}",
            result.id,
            details(result)
        ));
    }
    if entry.conforming {
        for result in results
            .values()
            .filter(|r| r.outcome == Outcome::Fail && decides(r.level))
        {
            problems.push(format!(
                "{name} (conforming) fails the {} row {}:\n{}",
                result.level.as_str(),
                result.id,
                details(result)
            ));
        }
        return problems;
    }
    for (id, words) in &entry.fails {
        match results.get(id) {
            None => problems.push(format!("{name}: row {id} did not run (is it selected?)")),
            Some(result) if result.outcome != Outcome::Fail => problems.push(format!(
                "{name} ({}): {id} should fail, it ended {}:\n{}",
                entry.what,
                result.outcome.as_str(),
                details(result)
            )),
            Some(result) if !words.seen_in(&details(result)) => problems.push(format!(
                "{name}: {id} failed for another reason than {:?}:\n{}",
                words.words(),
                details(result)
            )),
            Some(_) => {}
        }
    }
    for result in results.values().filter(|r| r.outcome == Outcome::Fail) {
        let named = entry.fails.contains_key(&result.id) || entry.also.contains_key(&result.id);
        if !named {
            problems.push(format!(
                "{name} ({}) also fails {}, which the corpus does not name as a consequence:\n{}",
                entry.what,
                result.id,
                details(result)
            ));
        }
    }
    problems
}

/// The rows each entry's run failed (only defects count as catching).
fn catches<'a>(corpus: &'a Corpus, runs: &'a [EntryResults]) -> BTreeMap<&'a str, Vec<&'a Entry>> {
    let mut caught: BTreeMap<&str, Vec<&Entry>> = BTreeMap::new();
    for (entry, run) in corpus.entries.iter().zip(runs) {
        if entry.conforming {
            continue;
        }
        for result in run
            .iter()
            .flat_map(|r| r.results.values())
            .filter(|r| failed(r))
        {
            caught.entry(result.id.as_str()).or_default().push(entry);
        }
    }
    caught
}

/// The catch table, as Markdown.
fn catch_table(corpus: &Corpus, runs: &[EntryResults], rows: &[Scenario]) -> String {
    let mut text = String::from("# ACP defect corpus: catch table\n\n");
    text.push_str("| entry | role | breaks | rows that caught it | run |\n|---|---|---|---|---|\n");
    for (entry, run) in corpus.entries.iter().zip(runs) {
        let role = entry.role.as_str();
        let caught = match run {
            Err(error) => format!("run failed: {}", error.lines().next().unwrap_or_default()),
            Ok(run) => {
                let ids: Vec<String> = run
                    .results
                    .values()
                    .filter(|r| failed(r))
                    .map(|r| {
                        let named = if entry.fails.contains_key(&r.id) {
                            ""
                        } else {
                            ", also"
                        };
                        format!("{} ({}{named})", r.id, r.level.as_str())
                    })
                    .collect();
                if ids.is_empty() {
                    match &entry.uncaught {
                        Some(why) => format!("none: {why}"),
                        None => "none".to_owned(),
                    }
                } else {
                    ids.join(", ")
                }
            }
        };
        let what = if entry.conforming {
            "nothing (conforming)"
        } else {
            entry.what.as_str()
        };
        let seconds = run.as_ref().map_or(0.0, |r| r.seconds);
        text.push_str(&format!(
            "| {} | {role} | {what} | {caught} | {seconds:.1}s |\n",
            entry.name
        ));
    }
    let caught = catches(corpus, runs);
    text.push_str("\n| row | level | caught by |\n|---|---|---|\n");
    let mut unexercised = 0;
    for row in rows {
        let by = match (caught.get(row.id.as_str()), corpus.uncovered.get(&row.id)) {
            (Some(entries), _) => entries
                .iter()
                .map(|e| e.name.as_str())
                .collect::<Vec<_>>()
                .join(", "),
            (None, Some(why)) => format!("no defect: {why}"),
            (None, None) => "**no defect, and the corpus does not say why**".to_owned(),
        };
        if !caught.contains_key(row.id.as_str()) {
            unexercised += 1;
        }
        text.push_str(&format!("| {} | {} | {by} |\n", row.id, row.level.as_str()));
    }
    text.push_str(&format!(
        "\n{} entries; {} of {} ACP rows caught by a defect, {unexercised} exercised by none.\n",
        corpus.entries.len(),
        rows.len() - unexercised,
        rows.len()
    ));
    text
}

/// Where the catch table is written: `<target dir>/conformance/acp-defects.md`.
fn table_path() -> PathBuf {
    let profile = binaries::profile_dir().expect("the target dir");
    profile
        .parent()
        .unwrap_or(&profile)
        .join("conformance")
        .join("acp-defects.md")
}

/// This module's trials (the root runs them with every other module's).
pub fn trials() -> Vec<Trial> {
    vec![
        Trial::test(
            "the_corpus_names_only_acp_rows",
            the_corpus_names_only_acp_rows,
        ),
        Trial::test(
            "every_defect_fails_its_rows_and_the_conforming_entries_none",
            every_defect_fails_its_rows_and_the_conforming_entries_none,
        ),
    ]
}

fn the_corpus_names_only_acp_rows() -> Result<(), Failed> {
    let corpus = Corpus::load(&corpus_dir())?;
    let ids: BTreeSet<String> = acp_rows().into_iter().map(|r| r.id).collect();
    let mut unknown = Vec::new();
    for entry in &corpus.entries {
        for id in entry.fails.keys().chain(entry.also.keys()) {
            if !ids.contains(id) {
                unknown.push(format!("{}: {id}", entry.name));
            }
        }
        corpus.profile(entry)?;
    }
    unknown.extend(
        corpus
            .uncovered
            .keys()
            .filter(|id| !ids.contains(*id))
            .map(|id| format!("[uncovered]: {id}")),
    );
    if !unknown.is_empty() {
        return Err(format!("rows not in the ACP catalog: {unknown:?}").into());
    }
    Ok(())
}

fn every_defect_fails_its_rows_and_the_conforming_entries_none() -> Result<(), Failed> {
    let corpus = Corpus::load(&corpus_dir())?;
    let rows = acp_rows();
    let started = std::time::Instant::now();
    let runs = run_corpus(&corpus);
    eprintln!("the corpus ran in {:.1}s", started.elapsed().as_secs_f64());
    let table = catch_table(&corpus, &runs, &rows);
    let path = table_path();
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).expect("the report dir");
    }
    std::fs::write(&path, &table).expect("the catch table is written");
    println!("{table}");
    let mut problems = Vec::new();
    for (entry, run) in corpus.entries.iter().zip(&runs) {
        match run {
            Ok(run) => problems.extend(judge(entry, &run.results)),
            Err(error) => problems.push(format!("{}: {error}", entry.name)),
        }
    }
    let caught = catches(&corpus, &runs);
    for row in &rows {
        let by = caught.get(row.id.as_str());
        match (by, corpus.uncovered.get(&row.id)) {
            (None, None) => problems.push(format!(
                "{} ({}): no defect exercises it and [uncovered] does not say why",
                row.id,
                row.level.as_str()
            )),
            (Some(entries), Some(_)) => problems.push(format!(
                "{} is listed under [uncovered] but {} catches it",
                row.id, entries[0].name
            )),
            _ => {}
        }
    }
    if problems.is_empty() {
        return Ok(());
    }
    Err(format!(
        "{} problem(s) with the ACP defect corpus (catch table in {}):\n\n{}",
        problems.len(),
        path.display(),
        problems.join("\n\n")
    )
    .into())
}
