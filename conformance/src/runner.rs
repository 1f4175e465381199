//! The runner: plans the selected scenarios, runs their checks with bounded parallelism, cleans
//! up after each, re-runs alone the unexpected failures that load can explain (see
//! [`rerun_decision`]), and judges the results against a baseline.
//!
//! Each check runs in its own tokio task, so a panic becomes the outcome `error` instead of ending
//! the run, and a check that overruns its budget (its timeout class plus one allowance per set-up
//! step, [`Ctx::budget`]) is cancelled (outcome `fail`, marked timed out).
//! Whatever happened, the runner then tears down every process the scenario started (and reports
//! any process group that survives as an `error`, scenario WS-064b) and removes its temp dir.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use ski::transport::WireEntry;
use ski::transport::child::{self, Termination};
use tokio::task::JoinSet;
use tokio::time::Instant;

use crate::baseline::{Baseline, BaselineEntry, Expectation, judge_without_baseline};
use crate::catalog::{CatalogSet, Category, Level, Scenario};
use crate::check::{Check, CheckError, Failure, Outcome};
use crate::context::{Ctx, CtxParts, Timeouts};
use crate::interrupt::Interrupt;
use crate::select::Selection;
use crate::setup::SetupGauge;
use crate::target::Target;

/// How much longer than its timeout class a check may run before the runner cancels it, so that
/// the check's own, more precise timeout failure comes first.
const CANCEL_MARGIN: Duration = Duration::from_secs(2);

/// Errors of building a plan.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PlanError {
    /// Two checks are registered under one ID.
    #[error("two checks are registered for {0}")]
    DuplicateCheck(String),
}

/// One scenario to run and the check that judges it (none if it has no check yet).
#[derive(Debug, Clone)]
pub struct Planned {
    /// The catalog row.
    pub scenario: Scenario,
    /// Its check.
    pub check: Option<Check>,
}

/// The scenarios of a run, in catalog order.
#[derive(Debug, Clone, Default)]
pub struct Plan {
    /// The entries.
    pub entries: Vec<Planned>,
}

impl Plan {
    /// Pairs the selected scenarios with their checks.
    pub fn new(
        catalogs: &CatalogSet,
        checks: Vec<Check>,
        selection: &Selection,
    ) -> Result<Self, PlanError> {
        let mut by_id: BTreeMap<String, Check> = BTreeMap::new();
        for check in checks {
            let id = check.id().to_owned();
            if by_id.insert(id.clone(), check).is_some() {
                return Err(PlanError::DuplicateCheck(id));
            }
        }
        let entries = selection
            .apply(catalogs)
            .into_iter()
            .map(|scenario| Planned {
                scenario: scenario.clone(),
                check: by_id.get(&scenario.id).cloned(),
            })
            .collect();
        Ok(Self { entries })
    }

    /// The number of scenarios.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the plan is empty.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// How to run.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// Scenarios run at once (at least 1); with `paced`, the start.
    pub jobs: usize,
    /// Choose the rows run at once from how they spend their time ([`crate::pace`]), starting at
    /// `jobs`: the default of `ski-conformance run` without `-j`.
    pub paced: bool,
    /// Timeout scaling.
    pub timeouts: Timeouts,
    /// Where the binaries under test are.
    pub bin_dir: PathBuf,
    /// Re-run unexpected failures alone after the parallel phase.
    pub rerun: bool,
    /// Keep each scenario's temp dir (its path goes into the result).
    pub keep_temp: bool,
    /// Where temp dirs are created (default: the system's).
    pub temp_root: Option<PathBuf>,
    /// Raised by SIGINT or SIGTERM (see [`crate::interrupt`]): no more rows start and the rows
    /// in flight are ended.
    pub interrupt: Interrupt,
}

impl Default for RunOptions {
    fn default() -> Self {
        Self {
            jobs: std::thread::available_parallelism().map_or(1, usize::from),
            timeouts: Timeouts::default(),
            bin_dir: PathBuf::from("."),
            rerun: true,
            keep_temp: false,
            temp_root: None,
            interrupt: Interrupt::new(),
            paced: false,
        }
    }
}

/// One wire-log line in a result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WireRecord {
    /// The channel.
    pub channel: String,
    /// `out`, `in` or `note`.
    pub direction: String,
    /// Seconds since the scenario started.
    pub t: f64,
    /// The raw text.
    pub text: String,
}

/// The longest text a report keeps of one wire-log line: one flood of a huge notification must
/// not make a report of many megabytes. The cut says how much it left out.
pub const REPORT_LINE_BYTES: usize = 4096;

/// The most wire-log text a report keeps of a row's first entries.
pub const REPORT_ROW_HEAD_BYTES: usize = 16 * 1024;

/// The most wire-log text a report keeps of a row's last entries (where a failure usually shows);
/// with [`REPORT_ROW_HEAD_BYTES`] this bounds what one row adds to every report.
pub const REPORT_ROW_TAIL_BYTES: usize = 48 * 1024;

/// The wire log of a row as reports keep it: each line cut at [`REPORT_LINE_BYTES`], the first
/// [`REPORT_ROW_HEAD_BYTES`] and the last [`REPORT_ROW_TAIL_BYTES`] of it, and between them one
/// note saying how many entries were left out.
pub fn report_wire(entries: Vec<WireEntry>) -> Vec<WireRecord> {
    let records: Vec<WireRecord> = entries.into_iter().map(WireRecord::from).collect();
    let size = |r: &WireRecord| r.text.len() + r.channel.len() + 16;
    if records.iter().map(size).sum::<usize>() <= REPORT_ROW_HEAD_BYTES + REPORT_ROW_TAIL_BYTES {
        return records;
    }
    let mut head_end = 0;
    let mut used = 0;
    while head_end < records.len() && used + size(&records[head_end]) <= REPORT_ROW_HEAD_BYTES {
        used += size(&records[head_end]);
        head_end += 1;
    }
    let mut tail_start = records.len();
    used = 0;
    while tail_start > head_end && used + size(&records[tail_start - 1]) <= REPORT_ROW_TAIL_BYTES {
        tail_start -= 1;
        used += size(&records[tail_start]);
    }
    let left_out = &records[head_end..tail_start];
    let gap = WireRecord {
        channel: "report".to_owned(),
        direction: "note".to_owned(),
        t: left_out.first().map_or(0.0, |r| r.t),
        text: format!(
            "{} entries ({} bytes) left out of the report here: it keeps a row's first {} KiB and last {} KiB of wire log",
            left_out.len(),
            left_out.iter().map(|r| r.text.len()).sum::<usize>(),
            REPORT_ROW_HEAD_BYTES / 1024,
            REPORT_ROW_TAIL_BYTES / 1024
        ),
    };
    let mut kept = records[..head_end].to_vec();
    kept.push(gap);
    kept.extend_from_slice(&records[tail_start..]);
    kept
}

impl From<WireEntry> for WireRecord {
    fn from(entry: WireEntry) -> Self {
        Self {
            channel: entry.channel,
            direction: entry.direction.as_str().to_owned(),
            t: (entry.at.as_secs_f64() * 1e6).round() / 1e6,
            text: cut_line(entry.text),
        }
    }
}

fn cut_line(text: String) -> String {
    if text.len() <= REPORT_LINE_BYTES {
        return text;
    }
    let mut end = REPORT_LINE_BYTES;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!(
        "{}… ({} more bytes not kept in the report)",
        &text[..end],
        text.len() - end
    )
}

/// How one process of a scenario ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessRecord {
    /// The name it was started under.
    pub name: String,
    /// Its pid (and process-group id).
    pub pid: u32,
    /// Its exit status, as text.
    pub status: Option<String>,
    /// Whether it needed SIGKILL.
    pub killed: bool,
    /// Whether its process group is gone.
    pub gone: bool,
}

impl From<&Termination> for ProcessRecord {
    fn from(t: &Termination) -> Self {
        Self {
            name: t.name.clone(),
            pid: t.pid,
            status: t.status.map(|s| s.to_string()),
            killed: t.sent_kill,
            gone: t.group_gone,
        }
    }
}

/// An earlier attempt of a scenario that was re-run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Attempt {
    /// Its outcome.
    pub outcome: Outcome,
    /// Whether it was cancelled at its timeout.
    pub timed_out: bool,
    /// Its failure.
    pub failure: Option<Failure>,
    /// Its message.
    pub message: Option<String>,
    /// How long it took, in seconds.
    pub duration: f64,
    /// Its wire log.
    pub wire: Vec<WireRecord>,
}

/// The result of one scenario.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ScenarioResult {
    /// The suite.
    pub suite: String,
    /// The scenario ID.
    pub id: String,
    /// Its title.
    pub title: String,
    /// Its category.
    pub category: Category,
    /// Its level.
    pub level: Level,
    /// Where the spec says it.
    pub source: String,
    /// The spec's expected outcome.
    pub then: String,
    /// The outcome.
    pub outcome: Outcome,
    /// Failed first, passed when re-run alone (counts as a pass).
    pub flaky: bool,
    /// Cancelled at its timeout.
    pub timed_out: bool,
    /// How it stands against the baseline.
    pub expectation: Expectation,
    /// How long it took, in seconds.
    pub duration: f64,
    /// Expected/Actual, for a failure.
    pub failure: Option<Failure>,
    /// The skip reason or harness error.
    pub message: Option<String>,
    /// For a skip: the capabilities the target does not declare.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub undeclared: Vec<String>,
    /// A skipped `must` or `capability` row the run could not exercise (the target lacks what
    /// the runner needs to reach it, or the check skipped itself): *not tested*, never passed.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub not_tested: bool,
    /// Files outside its temp dir the row wrote where the target reads them (the profile names
    /// fixed paths): it could not be isolated there, so what was at each path was moved aside
    /// for it and put back after it, and rows writing the same path ran one at a time.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub placed: Vec<String>,
    /// Every process started and how it ended.
    pub processes: Vec<ProcessRecord>,
    /// How many wire-log entries the row recorded.
    #[serde(default)]
    pub wire_lines: usize,
    /// The wire log of every channel, for a failure or error only (see [`report_wire`]); a row
    /// that passed or was skipped keeps only [`ScenarioResult::wire_lines`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub wire: Vec<WireRecord>,
    /// The kept temp dir, with `--keep-temp`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temp_dir: Option<String>,
    /// The first attempt, when the scenario was re-run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_attempt: Option<Box<Attempt>>,
    /// How many times its check ran: 0 when skipped before it started, 2 when re-run alone.
    #[serde(default)]
    pub attempts: usize,
    /// For an unexpected failure or error: whether it was re-run alone and why, or why not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rerun: Option<String>,
    /// The time the check was given, in seconds: its timeout class (scaled) plus one allowance
    /// for each set-up step it took.
    #[serde(default)]
    pub budget: f64,
    /// How many set-up steps the check took (the target becoming ready, `initialize`,
    /// `session/new`), each of which added an allowance to its budget.
    #[serde(default)]
    pub setup_steps: usize,
}

impl ScenarioResult {
    fn new(scenario: &Scenario, outcome: Outcome) -> Self {
        Self {
            suite: scenario.suite.clone(),
            id: scenario.id.clone(),
            title: scenario.title.clone(),
            category: scenario.category,
            level: scenario.level,
            source: scenario.source.clone(),
            then: scenario.then.clone(),
            outcome,
            flaky: false,
            timed_out: false,
            expectation: Expectation::AsExpected,
            duration: 0.0,
            failure: None,
            message: None,
            undeclared: Vec::new(),
            not_tested: false,
            placed: Vec::new(),
            processes: Vec::new(),
            wire_lines: 0,
            wire: Vec::new(),
            temp_dir: None,
            first_attempt: None,
            attempts: 0,
            rerun: None,
            budget: 0.0,
            setup_steps: 0,
        }
    }

    fn as_attempt(&self) -> Attempt {
        Attempt {
            outcome: self.outcome,
            timed_out: self.timed_out,
            failure: self.failure.clone(),
            message: self.message.clone(),
            duration: self.duration,
            wire: self.wire.clone(),
        }
    }

    /// The wire log as text, one entry per line.
    pub fn wire_text(&self) -> String {
        render_wire(&self.wire)
    }

    /// Whether this result fails a run that is `strict` or not: an unexpected failure or error
    /// of a row whose level decides the verdict.
    pub fn fails_run(&self, strict: bool) -> bool {
        self.expectation == Expectation::Unexpected && self.level.decides_verdict(strict)
    }

    /// Whether this result is a warning of a run that is `strict` or not: an unexpected
    /// failure or error of a `should` or `interop` row that does not fail it ("passed, not
    /// strict"). An `info` row is never one.
    pub fn is_warning(&self, strict: bool) -> bool {
        self.expectation == Expectation::Unexpected
            && !self.level.decides_verdict(strict)
            && self.level.decides_verdict(true)
    }
}

/// Wire records as text: `+0.001234s agent in {...}`.
pub fn render_wire(wire: &[WireRecord]) -> String {
    wire.iter()
        .map(|w| format!("+{:.6}s {} {} {}\n", w.t, w.channel, w.direction, w.text))
        .collect()
}

/// Which phase a finished scenario belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// The parallel run.
    Main,
    /// The solo re-run of unexpected failures.
    Rerun,
}

/// Receives progress while a run goes on (the console reporter implements it).
pub trait Observer: Send + Sync {
    /// The run starts with `total` scenarios.
    fn started(&self, _total: usize) {}
    /// A scenario finished.
    fn finished(&self, _result: &ScenarioResult, _phase: Phase) {}
    /// `count` unexpected failures are re-run alone.
    fn rerunning(&self, _count: usize) {}
    /// The run is over.
    fn done(&self) {}
}

/// An observer that does nothing.
#[derive(Debug, Default)]
pub struct Silent;

impl Observer for Silent {}

/// Everything a run produced.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunReport {
    /// The target profile's name.
    pub target: String,
    /// Its description.
    pub target_description: String,
    /// When the run started (RFC 3339, UTC).
    pub started: String,
    /// How long it took, in seconds.
    pub duration: f64,
    /// The selection, described.
    pub selection: String,
    /// The timeout multiplier.
    pub timeout_multiplier: f64,
    /// Scenarios run at once (the most a paced run reached).
    pub jobs: usize,
    /// Whether the runner chose `jobs` from how the rows spent their time (no `-j`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub paced: bool,
    /// The baseline used, if any.
    pub baseline: Option<String>,
    /// Every result, in catalog order.
    pub results: Vec<ScenarioResult>,
    /// Baseline entries whose scenario passed.
    pub stale: Vec<BaselineEntry>,
    /// `--min-coverage`: the least percentage of the selected rows that must run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_coverage: Option<f64>,
    /// What was found and decided before the first row ran.
    #[serde(default)]
    pub setup: RunSetup,
    /// `--strict`: `should` and `interop` failures fail the run too.
    #[serde(default)]
    pub strict: bool,
    /// The signal that interrupted the run (`SIGINT`, `SIGTERM`); its results are then only the
    /// rows that started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interrupted: Option<String>,
    /// Selected rows that never started because the run was interrupted.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub not_started: usize,
    /// The version of ski-conformance that ran (empty in results of older builds).
    #[serde(default)]
    pub ski_version: String,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// What a run found and decided before its first row: what discovery saw of the agent and how
/// the timeouts were scaled for it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RunSetup {
    /// The multiplier asked for (`--timeout-multiplier`), the run's `timeout_multiplier`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_multiplier_asked: Option<f64>,
    /// How much the agent's start-up, measured once before the first row, scaled each set-up
    /// step's allowance (1 when it did not); the timeout classes do not grow with it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub startup_scale: Option<f64>,
    /// How long the agent took to get ready when discovered (initialize, or session/new when
    /// slower), in seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub startup_seconds: Option<f64>,
    /// The capabilities discovery found.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub discovered: Vec<String>,
    /// What discovery saw, one sentence each.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub discovery_notes: Vec<String>,
    /// What the profile's review found short of a problem: a setting whose default changed
    /// that the profile does not set ([`crate::vocabulary::review`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub profile_notes: Vec<String>,
    /// The agent's command as given (`--agent-cmd`, or the profile's `agent` template).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// The agent's WebSocket URL as given (`--agent-url`, or the profile's `ws` URL).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// What the agent declared of itself in `initialize` (`agentInfo`), as discovery read it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<AgentInfo>,
    /// How the run's connections authenticate, in one sentence (the method and why, or why
    /// none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth: Option<String>,
}

/// An agent's `agentInfo`: the name, title and version it declares in `initialize`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AgentInfo {
    /// `name`.
    #[serde(default)]
    pub name: String,
    /// `title`, when it gives one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// `version`.
    #[serde(default)]
    pub version: String,
}

impl AgentInfo {
    /// The `agentInfo` of an `initialize` result, when it has one with a name or a version.
    pub fn of_initialize(result: &serde_json::Value) -> Option<Self> {
        let info = result.get("agentInfo")?;
        let text = |key: &str| {
            info.get(key)
                .and_then(serde_json::Value::as_str)
                .map(str::to_owned)
        };
        let found = Self {
            name: text("name").unwrap_or_default(),
            title: text("title"),
            version: text("version").unwrap_or_default(),
        };
        (!found.name.is_empty() || !found.version.is_empty()).then_some(found)
    }
}

/// Counts of outcomes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Counts {
    /// Passed (flaky included).
    pub pass: usize,
    /// Failed.
    pub fail: usize,
    /// Skipped.
    pub skip: usize,
    /// Harness errors.
    pub error: usize,
    /// Passed only when re-run.
    pub flaky: usize,
    /// Failures and errors the baseline excuses.
    pub expected_failures: usize,
    /// Unexpected failures and errors of `should` and `interop` rows that did not fail the run
    /// (it was not strict).
    pub warnings: usize,
    /// Skipped `must` and `capability` rows that the run could not exercise.
    pub not_tested: usize,
    /// Rows the target blocked (it refused a step they need first).
    pub blocked: usize,
}

impl Counts {
    /// Adds one result of a run that is `strict` or not.
    pub fn add(&mut self, result: &ScenarioResult, strict: bool) {
        if result.is_warning(strict) {
            self.warnings += 1;
        }
        if result.not_tested {
            self.not_tested += 1;
        }
        match result.outcome {
            Outcome::Pass => self.pass += 1,
            Outcome::Fail => self.fail += 1,
            Outcome::Skip => self.skip += 1,
            Outcome::Blocked => self.blocked += 1,
            Outcome::Error => self.error += 1,
        }
        if result.flaky {
            self.flaky += 1;
        }
        if matches!(result.outcome, Outcome::Fail | Outcome::Error)
            && result.expectation == Expectation::AsExpected
        {
            self.expected_failures += 1;
        }
    }

    /// All results counted.
    pub fn total(&self) -> usize {
        self.pass + self.fail + self.skip + self.blocked + self.error
    }
}

impl RunReport {
    /// Counts over every result.
    pub fn counts(&self) -> Counts {
        let mut counts = Counts::default();
        self.results.iter().for_each(|r| counts.add(r, self.strict));
        counts
    }

    /// Counts per suite and category, in report order.
    pub fn counts_by_category(&self) -> BTreeMap<(String, Category), Counts> {
        let mut map: BTreeMap<(String, Category), Counts> = BTreeMap::new();
        for result in &self.results {
            map.entry((result.suite.clone(), result.category))
                .or_default()
                .add(result, self.strict);
        }
        map
    }

    /// Failures and errors the baseline does not excuse, of rows whose level decides this run's
    /// verdict.
    pub fn unexpected(&self) -> impl Iterator<Item = &ScenarioResult> {
        self.results.iter().filter(|r| r.fails_run(self.strict))
    }

    /// Failures and errors of `should` and `interop` rows that do not fail this run (it is not
    /// strict).
    pub fn warnings(&self) -> impl Iterator<Item = &ScenarioResult> {
        self.results.iter().filter(|r| r.is_warning(self.strict))
    }

    /// Skipped `must` and `capability` rows that the run could not exercise.
    pub fn not_tested(&self) -> impl Iterator<Item = &ScenarioResult> {
        self.results.iter().filter(|r| r.not_tested)
    }

    /// How much of the selection actually ran.
    pub fn coverage(&self) -> crate::report::coverage::Coverage {
        crate::report::coverage::Coverage::of(&self.results)
    }

    /// Whether fewer rows ran than `--min-coverage` asks for.
    pub fn below_min_coverage(&self) -> bool {
        self.min_coverage
            .is_some_and(|min| self.coverage().percent() < min)
    }

    /// 128 plus the signal's number when a signal interrupted the run (130 SIGINT, 143
    /// SIGTERM); 0 when everything is as expected; 1 on an unexpected failure of a row whose level decides
    /// the verdict (`must`, `capability`; `should` and `interop` too when strict), a stale
    /// baseline entry or a coverage below `--min-coverage`.
    pub fn exit_code(&self) -> u8 {
        if let Some(signal) = self
            .interrupted
            .as_deref()
            .and_then(|name| name.parse::<nix::sys::signal::Signal>().ok())
        {
            return crate::interrupt::exit_code(signal);
        }
        if self.unexpected().next().is_some() || !self.stale.is_empty() || self.below_min_coverage()
        {
            1
        } else {
            0
        }
    }
}

/// Reaps the orphans the runner adopted (not the children it spawned, whose statuses tokio
/// keeps) on start and each time a child of the runner ends; runs until aborted.
async fn reap_orphans_as_they_exit() {
    let Ok(mut child_ended) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::child())
    else {
        return;
    };
    loop {
        child::reap_adopted_orphans();
        if child_ended.recv().await.is_none() {
            return;
        }
    }
}

/// Runs a plan against a target.
pub async fn run(
    plan: Plan,
    target: Arc<Target>,
    options: &RunOptions,
    baseline: Option<&Baseline>,
    observer: &dyn Observer,
) -> RunReport {
    run_with(plan, target, options, baseline, observer, SetupGauge::new()).await
}

/// [`run`] with what the run already knows of its target's set-up steps (discovery's).
pub async fn run_with(
    plan: Plan,
    target: Arc<Target>,
    options: &RunOptions,
    baseline: Option<&Baseline>,
    observer: &dyn Observer,
    gauge: SetupGauge,
) -> RunReport {
    // Grandchildren of killed targets are reparented here: the teardown reaps those of the groups
    // it started, and the orphan reaper every other one as soon as it exits, so a group of
    // zombies never outlives its processes (BR-06.6 with an adapter that does not reap them).
    child::adopt_orphans();
    let orphan_reaper = tokio::spawn(reap_orphans_as_they_exit());
    let started_wall = time::OffsetDateTime::now_utc();
    let started = Instant::now();
    observer.started(plan.len());
    let entries: Arc<Vec<Planned>> = Arc::new(plan.entries);
    let mut slots: Vec<Option<ScenarioResult>> = vec![None; entries.len()];

    let mut jobs = options.jobs.max(1);
    let mut pace = options.paced.then(|| crate::pace::Pace::new(jobs));
    let mut most_jobs = jobs;
    let mut set = JoinSet::new();
    let mut next = 0;
    let mut in_flight = 0;
    let interrupt = &options.interrupt;
    while (next < entries.len() && interrupt.raised().is_none()) || in_flight > 0 {
        while in_flight < jobs && next < entries.len() && interrupt.raised().is_none() {
            let entries = Arc::clone(&entries);
            let target = Arc::clone(&target);
            let options = options.clone();
            let gauge = gauge.clone();
            let index = next;
            set.spawn(async move {
                let result = run_in(&entries[index], target, &options, &gauge).await;
                (index, result)
            });
            next += 1;
            in_flight += 1;
        }
        if let Some(joined) = set.join_next().await {
            in_flight -= 1;
            // `run_one` catches the check's panics itself; a panic here is a runner bug, and the
            // slot stays empty and is reported as an error below.
            if let Ok((index, mut result)) = joined {
                if let Some(pace) = pace.as_mut()
                    && result.attempts > 0
                {
                    jobs = pace.row_finished(Duration::from_secs_f64(result.duration));
                    most_jobs = most_jobs.max(jobs);
                }
                result.expectation = judge(baseline, &result);
                observer.finished(&result, Phase::Main);
                slots[index] = Some(result);
            }
        }
    }
    let not_started = entries.len() - next;
    let mut results: Vec<ScenarioResult> = slots
        .into_iter()
        .enumerate()
        .take(next)
        .map(|(index, slot)| {
            slot.unwrap_or_else(|| {
                let mut result = ScenarioResult::new(&entries[index].scenario, Outcome::Error);
                result.message = Some("the runner lost this scenario's task".to_owned());
                result.expectation = judge(baseline, &result);
                result
            })
        })
        .collect();

    let mut again = Vec::new();
    for (index, result) in results.iter_mut().enumerate() {
        if result.expectation != Expectation::Unexpected {
            continue;
        }
        let decision = if let Some(signal) = interrupt.raised() {
            Err(format!("the run was interrupted by {signal}"))
        } else if options.rerun {
            rerun_decision(result, &gauge)
        } else {
            Err("the run was asked not to re-run (--no-rerun)".to_owned())
        };
        match decision {
            Ok(why) => again.push((index, why)),
            Err(why) => result.rerun = Some(format!("not re-run: {why}")),
        }
    }
    if !again.is_empty() {
        observer.rerunning(again.len());
    }
    for (index, why) in again {
        if interrupt.raised().is_some() {
            results[index].rerun = Some("not re-run: the run was interrupted".to_owned());
            continue;
        }
        let first = results[index].as_attempt();
        let mut second = run_in(&entries[index], Arc::clone(&target), options, &gauge).await;
        if second.outcome == Outcome::Pass {
            second.flaky = true;
        }
        second.first_attempt = Some(Box::new(first));
        second.attempts += results[index].attempts;
        second.rerun = Some(format!("re-run alone: {why}"));
        second.expectation = judge(baseline, &second);
        if second.flaky && !baseline.is_some_and(|b| b.excuses_flaky(&second.id)) {
            // A pass that came only on the re-run does not erase the first attempt's failure.
            second.expectation = Expectation::Unexpected;
            second.message = Some(
                "passed only when re-run alone: the first attempt failed (shown with this row), and a flaky pass counts against the verdict unless the baseline lists the row with flaky = true".to_owned(),
            );
        }
        observer.finished(&second, Phase::Rerun);
        results[index] = second;
    }

    let stale = match baseline {
        Some(baseline) => baseline
            .entries
            .iter()
            .filter(|entry| {
                !entry.flaky
                    && results
                        .iter()
                        .any(|r| r.id == entry.id && r.expectation == Expectation::Stale)
            })
            .cloned()
            .collect(),
        None => Vec::new(),
    };
    observer.done();
    orphan_reaper.abort();
    RunReport {
        target: target.name.clone(),
        target_description: target.description.clone(),
        started: started_wall
            .format(&time::format_description::well_known::Rfc3339)
            .unwrap_or_default(),
        duration: started.elapsed().as_secs_f64(),
        selection: String::new(),
        timeout_multiplier: options.timeouts.multiplier(),
        jobs: most_jobs,
        paced: options.paced,
        baseline: baseline.map(|b| b.origin.clone()),
        results,
        stale,
        min_coverage: None,
        setup: RunSetup::default(),
        strict: false,
        interrupted: interrupt.raised().map(|signal| signal.as_str().to_owned()),
        not_started,
        ski_version: env!("CARGO_PKG_VERSION").to_owned(),
    }
}

/// Whether an unexpected failure or error is re-run alone after the parallel phase: `Ok` with
/// the harness-side cause it names, or `Err` with why not.
///
/// A row is re-run only for a cause on the harness's side that contention between rows can
/// produce: a harness error, its own budget running out (the check cancelled), or one of its
/// waits running out its deadline. A row that observed the target answering what the document
/// forbids (a wrong value, a lost message) keeps that failure however late in its budget it came:
/// a re-run could only hide the observation. Nothing is re-run when the target answered no
/// set-up step of the run at all: alone it would not either.
pub fn rerun_decision(result: &ScenarioResult, gauge: &SetupGauge) -> Result<String, String> {
    if result.outcome == Outcome::Error {
        return Ok("a harness error, which contention between scenarios can cause".to_owned());
    }
    if gauge.silent() {
        return Err(
            "the target answered no set-up step in this run, so alone it would not either"
                .to_owned(),
        );
    }
    if gauge.refused() {
        return Err(
            "the target refused requests in this run (its MCP endpoint answered with errors), so alone it would too"
                .to_owned(),
        );
    }
    if result.timed_out {
        return Ok(format!(
            "it was cancelled at its budget ({:.1} s), which contention between scenarios can cause",
            result.budget
        ));
    }
    let Some(failure) = &result.failure else {
        return Err("it failed without naming a harness-side cause".to_owned());
    };
    if failure.deadline_passed {
        return Ok(format!(
            "a wait ran out its deadline ({}), which contention between scenarios can cause",
            failure.check
        ));
    }
    Err(format!(
        "it observed the target ({}) after {:.1} of {:.1} s: an observation is kept, not re-run",
        failure.check, result.duration, result.budget
    ))
}

fn judge(baseline: Option<&Baseline>, result: &ScenarioResult) -> Expectation {
    // A required row the run could not exercise is a finding of the verdict, unless the
    // baseline names it (its reason says why the target cannot be made to show it).
    if result.not_tested {
        let listed = baseline.is_some_and(|b| b.by_id().contains_key(result.id.as_str()));
        return if listed {
            Expectation::AsExpected
        } else {
            Expectation::Unexpected
        };
    }
    match baseline {
        Some(baseline) => baseline.judge(&result.id, result.outcome, result.failure.as_ref()),
        None => judge_without_baseline(result.outcome),
    }
}

/// Runs one scenario: checks what the target declares, runs the check in its own task with its
/// timeout, then tears everything down.
pub async fn run_one(entry: &Planned, target: Arc<Target>, options: &RunOptions) -> ScenarioResult {
    run_in(entry, target, options, &SetupGauge::new()).await
}

/// [`run_one`] as one row of a run whose target's set-up steps `gauge` keeps.
async fn run_in(
    entry: &Planned,
    target: Arc<Target>,
    options: &RunOptions,
    gauge: &SetupGauge,
) -> ScenarioResult {
    let scenario = &entry.scenario;
    let Some(section) = target.suite(&scenario.suite) else {
        let mut result = ScenarioResult::new(scenario, Outcome::Skip);
        result.message = Some(format!(
            "target {} has no [suites.{}] section",
            target.name, scenario.suite
        ));
        return result;
    };
    let missing: Vec<&str> = scenario
        .requires
        .iter()
        .filter(|c| !section.capabilities.contains(*c))
        .map(String::as_str)
        .collect();
    if !missing.is_empty() {
        let mut result = ScenarioResult::new(scenario, Outcome::Skip);
        result.message = Some(format!(
            "target {} does not declare {}",
            target.name,
            missing.join(", ")
        ));
        result.undeclared = missing.iter().map(|c| (*c).to_owned()).collect();
        result.not_tested = scenario.not_tested_without(&result.undeclared);
        return result;
    }
    let Some(check) = &entry.check else {
        let mut result = ScenarioResult::new(scenario, Outcome::Error);
        result.message = Some("no check is registered for this scenario".to_owned());
        return result;
    };

    // Files the row writes where the target reads them, outside its temp dir: one row at a time,
    // what was there moved aside and put back after the row (before its clock starts).
    let mut claims = Vec::new();
    for path in crate::placed::paths_of(&scenario.suite, section) {
        match crate::placed::claim(&path).await {
            Ok(claim) => claims.push(claim),
            Err(e) => {
                let mut result = ScenarioResult::new(scenario, Outcome::Error);
                result.message = Some(e.to_string());
                return result;
            }
        }
    }
    let placed: Vec<String> = claims
        .iter()
        .map(|c| c.path().display().to_string())
        .collect();
    let started = Instant::now();
    let temp = {
        let mut builder = tempfile::Builder::new();
        let prefix = format!("ski-conformance-{}-", sanitize(&scenario.id));
        builder.prefix(&prefix);
        match &options.temp_root {
            Some(root) => builder.tempdir_in(root),
            None => builder.tempdir(),
        }
    };
    let temp = match temp {
        Ok(temp) => temp,
        Err(e) => {
            let mut result = ScenarioResult::new(scenario, Outcome::Error);
            result.message = Some(format!("cannot create a temp dir: {e}"));
            return result;
        }
    };
    let ctx = Ctx::new(CtxParts {
        scenario: scenario.clone(),
        target,
        temp_dir: temp.path().to_owned(),
        bin_dir: options.bin_dir.clone(),
        timeouts: options.timeouts,
        setup: gauge.clone(),
    });
    let margin = options.timeouts.scale(CANCEL_MARGIN);
    let _tracked = options.interrupt.track(ctx.tracker());
    let mut handle = tokio::spawn(check.start(ctx.clone()));
    // The budget grows while the check takes set-up steps: wait again until the deadline stops
    // moving.
    let mut interrupted = None;
    let joined = loop {
        tokio::select! {
            waited = tokio::time::timeout_at(ctx.deadline() + margin, &mut handle) => match waited {
                Ok(joined) => break Some(joined),
                Err(_) if Instant::now() < ctx.deadline() + margin => {}
                Err(_) => break None,
            },
            signal = options.interrupt.stopped() => {
                interrupted = Some(signal);
                break None;
            }
        }
    };
    let mut undeclared = Vec::new();
    let mut applicable = true;
    let (outcome, failure, message, timed_out) = match joined {
        Some(Ok(Ok(()))) => (Outcome::Pass, None, None, false),
        Some(Ok(Err(error))) => {
            let outcome = error.outcome();
            match error {
                CheckError::Fail(failure) => (outcome, Some(*failure), None, false),
                CheckError::Skip(reason)
                | CheckError::Blocked(reason)
                | CheckError::Harness(reason) => (outcome, None, Some(reason), false),
                CheckError::NotApplicable(reason) => {
                    applicable = false;
                    (outcome, None, Some(reason), false)
                }
                CheckError::Undeclared { target, capability } => {
                    undeclared.push(capability.clone());
                    (
                        outcome,
                        None,
                        Some(crate::check::undeclared_text(&target, &capability)),
                        false,
                    )
                }
            }
        }
        Some(Err(join_error)) => {
            let text = if join_error.is_panic() {
                format!(
                    "the check panicked: {}",
                    panic_text(join_error.into_panic())
                )
            } else {
                "the check's task was cancelled".to_owned()
            };
            (Outcome::Error, None, Some(text), false)
        }
        None if interrupted.is_some() => {
            handle.abort();
            let _ = handle.await;
            let signal = interrupted.map_or("a signal", |s| s.as_str());
            (
                Outcome::Error,
                None,
                Some(format!(
                    "interrupted: the run was stopped by {signal} while this row ran; its processes were ended"
                )),
                false,
            )
        }
        None => {
            handle.abort();
            // Wait for the cancelled task to be dropped, which drops its processes too.
            let _ = handle.await;
            let class = scenario.timeout.as_str();
            let limit = ctx.budget() + margin;
            let failure = Failure::new(
                    "completes in time",
                    format!(
                        "the scenario completes within {limit:?} (timeout class {class} × {}, plus {} set-up allowance(s))",
                        options.timeouts.multiplier(),
                        ctx.granted().steps
                    ),
                )
                .actual(format!(
                    "still running after {limit:?}; it was cancelled (the wire log shows how far it got)"
                ))
                .at_deadline();
            (Outcome::Fail, Some(failure), None, true)
        }
    };

    let terminations = ctx.teardown().await;
    let restore_errors: Vec<String> = claims
        .into_iter()
        .filter_map(|claim| claim.restore().err().map(|e| e.to_string()))
        .collect();
    let survivors: Vec<String> = terminations
        .iter()
        .filter(|t| !t.group_gone)
        .map(ToString::to_string)
        .collect();
    let mut result = ScenarioResult::new(scenario, outcome);
    result.failure = failure;
    result.message = message;
    result.not_tested = match outcome {
        Outcome::Skip => applicable && scenario.not_tested_without(&undeclared),
        Outcome::Blocked => scenario.level.is_required(),
        _ => false,
    };
    result.undeclared = undeclared;
    result.timed_out = timed_out;
    if !survivors.is_empty() {
        let text = format!("teardown left processes behind: {}", survivors.join("; "));
        if matches!(
            result.outcome,
            Outcome::Pass | Outcome::Skip | Outcome::Blocked
        ) {
            result.outcome = Outcome::Error;
            result.not_tested = false;
        }
        result.message = Some(match result.message.take() {
            Some(previous) => format!("{previous}; {text}"),
            None => text,
        });
    }
    if !restore_errors.is_empty() {
        if result.outcome == Outcome::Pass {
            result.outcome = Outcome::Error;
        }
        let text = restore_errors.join("; ");
        result.message = Some(match result.message.take() {
            Some(previous) => format!("{previous}; {text}"),
            None => text,
        });
    }
    result.placed = placed;
    result.processes = terminations.iter().map(ProcessRecord::from).collect();
    result.attempts = 1;
    result.budget = (ctx.budget().as_secs_f64() * 1000.0).round() / 1000.0;
    result.setup_steps = ctx.granted().steps;
    let entries = ctx.wire().entries();
    result.wire_lines = entries.len();
    drop(ctx);
    if options.keep_temp {
        result.temp_dir = Some(temp.keep().display().to_string());
    } else if let Err(e) = temp.close() {
        let text = format!("cannot remove the temp dir: {e}");
        if result.outcome == Outcome::Pass {
            result.outcome = Outcome::Error;
        }
        result.message = Some(match result.message.take() {
            Some(previous) => format!("{previous}; {text}"),
            None => text,
        });
    }
    result.duration = started.elapsed().as_secs_f64();
    if matches!(result.outcome, Outcome::Fail | Outcome::Error) {
        result.wire = report_wire(entries);
    }
    result
}

fn panic_text(payload: Box<dyn std::any::Any + Send>) -> String {
    if let Some(text) = payload.downcast_ref::<&str>() {
        (*text).to_owned()
    } else if let Some(text) = payload.downcast_ref::<String>() {
        text.clone()
    } else {
        "a non-text panic payload".to_owned()
    }
}

fn sanitize(id: &str) -> String {
    id.chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failed_row(duration: f64, failure: Failure) -> ScenarioResult {
        let scenario: Scenario = serde_json::from_value(serde_json::json!({
            "id": "TEAM-CC-03", "title": "t", "category": "concurrent",
            "level": "must", "source": "s", "given": "g", "when": "w", "then": "t",
            "timeout": "normal",
        }))
        .expect("a scenario");
        let mut result = ScenarioResult::new(&scenario, Outcome::Fail);
        result.failure = Some(failure);
        result.duration = duration;
        result.budget = 20.0;
        result
    }

    #[test]
    fn an_observation_late_in_the_budget_is_kept_and_a_wait_that_ran_out_is_re_run() {
        let gauge = SetupGauge::new();
        // 99 of 100 messages, seen at 19 of 20 s: what the target did, not a harness cause.
        let lost = failed_row(
            19.0,
            Failure::new("messages injected plus left", "100").actual("99"),
        );
        let why = rerun_decision(&lost, &gauge).expect_err("an observation is not re-run");
        assert!(why.contains("observed the target"), "{why}");
        let waited = failed_row(
            19.0,
            Failure::new("a ready event", "within 20 s")
                .actual("nothing")
                .at_deadline(),
        );
        let why = rerun_decision(&waited, &gauge).expect("a wait that ran out is re-run");
        assert!(why.contains("ran out its deadline"), "{why}");
        let mut cancelled = failed_row(22.0, Failure::new("completes in time", "x"));
        cancelled.timed_out = true;
        assert!(rerun_decision(&cancelled, &gauge).is_ok());
    }

    #[test]
    fn a_long_wire_line_is_cut_in_reports_and_says_so() {
        let short = "x".repeat(REPORT_LINE_BYTES);
        assert_eq!(cut_line(short.clone()), short);
        let long = "é".repeat(REPORT_LINE_BYTES);
        let cut = cut_line(long.clone());
        assert!(cut.len() < REPORT_LINE_BYTES + 64, "{}", cut.len());
        assert!(cut.ends_with(&format!(
            "… ({} more bytes not kept in the report)",
            long.len() - REPORT_LINE_BYTES
        )));
    }
}
