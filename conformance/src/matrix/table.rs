//! The comparison itself: one row per scenario, one column per target, each cell the verdict of
//! that target's own `results.json` for that row, with what explains it (the failure, the reason
//! of a skip or block, the wire log of a failing row).

use std::collections::{BTreeMap, BTreeSet, HashMap};

use super::redact::Redactor;
use crate::catalog::{CatalogSet, Category, Level};
use crate::check::Failure;
use crate::runner::{AgentInfo, Counts, RunReport, ScenarioResult, WireRecord};

/// What a target did with a row, as the matrix shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Verdict {
    /// The target behaved as the row says (a flaky pass included).
    Pass,
    /// The target misbehaved.
    Fail,
    /// The harness failed; says nothing about the target.
    Error,
    /// The target refused a step the row needs first.
    Blocked,
    /// A required row the run could not exercise.
    NotTested,
    /// The target does not declare what the row requires.
    Skip,
    /// The target's run has no result for the row (not selected for it, or the run failed).
    NotRun,
}

impl Verdict {
    /// Every verdict, in the order the matrix lists them.
    pub const ALL: [Verdict; 7] = [
        Verdict::Pass,
        Verdict::Fail,
        Verdict::Error,
        Verdict::Blocked,
        Verdict::NotTested,
        Verdict::Skip,
        Verdict::NotRun,
    ];

    /// The verdict of one result of a run.
    pub fn of(result: &ScenarioResult) -> Self {
        match result.outcome.as_str() {
            "pass" => Verdict::Pass,
            "fail" => Verdict::Fail,
            "blocked" => Verdict::Blocked,
            "skip" if result.not_tested => Verdict::NotTested,
            "skip" => Verdict::Skip,
            _ => Verdict::Error,
        }
    }

    /// Its name in markup and filters (one word).
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Pass => "pass",
            Verdict::Fail => "fail",
            Verdict::Error => "error",
            Verdict::Blocked => "blocked",
            Verdict::NotTested => "not-tested",
            Verdict::Skip => "skip",
            Verdict::NotRun => "not-run",
        }
    }

    /// Its name for a reader.
    pub fn label(self) -> &'static str {
        match self {
            Verdict::NotTested => "not tested",
            Verdict::NotRun => "not run",
            other => other.as_str(),
        }
    }

    /// Whether the matrix explains a cell of this verdict in a section of its own (the reason
    /// of a skip is only a tooltip: most runs have many; the untested cells of a target share
    /// one section per reason, see [`Column::untested`]).
    pub fn has_details(self) -> bool {
        matches!(self, Verdict::Fail | Verdict::Error | Verdict::Blocked)
    }

    /// What the verdict means, one sentence (the legend).
    pub fn meaning(self) -> &'static str {
        match self {
            Verdict::Pass => "the target behaved as the row says",
            Verdict::Fail => {
                "the target did something the row forbids (Expected and Actual in its section)"
            }
            Verdict::Error => "the harness failed; it says nothing about the target",
            Verdict::Blocked => {
                "the target refused a step the row needs first (a session, a login)"
            }
            Verdict::NotTested => {
                "a must or capability row the run could not exercise: not passed, not failed"
            }
            Verdict::Skip => "the target does not declare what the row requires",
            Verdict::NotRun => {
                "the target's run has no result for the row (not selected, or no results)"
            }
        }
    }
}

/// What qualifies a cell's verdict, as [`Cell::text`] writes it, and what it means (the legend).
pub const QUALIFIERS: [(&str, &str); 4] = [
    (
        "flaky",
        "failed first and passed only when re-run alone; a must row counts it against the verdict unless a baseline says flaky",
    ),
    ("excused", "a failure the target's baseline expects"),
    (
        "warning",
        "a failure of a should or interop row, which does not fail the run unless --strict",
    ),
    ("timed out", "cancelled at its timeout"),
];

/// One target's verdict on one row.
#[derive(Debug, Clone)]
pub struct Cell {
    /// The verdict.
    pub verdict: Verdict,
    /// A pass that failed first and passed when re-run alone.
    pub flaky: bool,
    /// A failure the target's baseline excuses.
    pub excused: bool,
    /// A failure of a `should` or `interop` row that did not fail the target's run.
    pub warning: bool,
    /// Cancelled at its timeout.
    pub timed_out: bool,
    /// Expected/Actual of a failure.
    pub failure: Option<Failure>,
    /// The reason of a skip or block, or the harness error.
    pub reason: Option<String>,
    /// The wire log the target's `results.json` kept (failing rows only), less stderr.
    pub wire: Vec<WireRecord>,
    /// What the processes wrote on stderr, from the same wire log (shown only behind a link).
    pub stderr: Vec<WireRecord>,
}

impl Cell {
    fn not_run() -> Self {
        Self {
            verdict: Verdict::NotRun,
            flaky: false,
            excused: false,
            warning: false,
            timed_out: false,
            failure: None,
            reason: None,
            wire: Vec::new(),
            stderr: Vec::new(),
        }
    }

    fn of(result: &ScenarioResult, strict: bool, redact: &Redactor) -> Self {
        let verdict = Verdict::of(result);
        let mut reason = result.message.clone();
        if verdict == Verdict::Error && !matches!(result.outcome.as_str(), "error") {
            reason = Some(format!(
                "outcome {:?} is unknown to this build",
                result.outcome.as_str()
            ));
        }
        let (stderr, wire): (Vec<WireRecord>, Vec<WireRecord>) = result
            .wire
            .iter()
            .map(|w| WireRecord {
                text: redact.apply(&w.text),
                ..w.clone()
            })
            .partition(|w| is_stderr(&w.channel));
        Self {
            verdict,
            flaky: result.flaky,
            excused: matches!(verdict, Verdict::Fail | Verdict::Error)
                && result.expectation == crate::baseline::Expectation::AsExpected,
            warning: result.is_warning(strict),
            timed_out: result.timed_out,
            failure: result.failure.as_ref().map(|f| Failure {
                check: redact.apply(&f.check),
                expected: redact.apply(&f.expected),
                actual: redact.apply(&f.actual),
                location: f.location.as_deref().map(|l| redact.apply(l)),
                ..f.clone()
            }),
            reason: reason.map(|r| redact.apply(&r)),
            wire,
            stderr,
        }
    }

    /// The cell's text: the verdict, and what qualifies it.
    pub fn text(&self) -> String {
        let mut text = self.verdict.label().to_owned();
        let notes: Vec<&str> = [
            (self.flaky, "flaky"),
            (self.excused, "excused"),
            (self.warning, "warning"),
            (self.timed_out, "timed out"),
        ]
        .into_iter()
        .filter_map(|(on, note)| on.then_some(note))
        .collect();
        if !notes.is_empty() {
            text.push_str(&format!(" ({})", notes.join(", ")));
        }
        text
    }

    /// One line saying why: the failed check and what happened, or the reason.
    pub fn summary(&self) -> Option<String> {
        match (&self.failure, &self.reason) {
            (Some(failure), _) if failure.check == failure.expected => Some(format!(
                "expected {}; got {}",
                first_line(&failure.expected),
                first_line(&failure.actual)
            )),
            (Some(failure), _) => Some(format!(
                "{}: expected {}; got {}",
                failure.check,
                first_line(&failure.expected),
                first_line(&failure.actual)
            )),
            (None, Some(reason)) => Some(first_line(reason)),
            (None, None) => None,
        }
    }
}

/// A column's counts in the words and order of a run's own summary: passed, failed, errors,
/// blocked, skipped (of which not tested), and the rows its run has no result for.
pub fn counts_text(column: &Column) -> String {
    let mut parts = vec![
        format!("{} passed", column.count(Verdict::Pass)),
        format!("{} failed", column.count(Verdict::Fail)),
    ];
    for (n, what) in [
        (column.count(Verdict::Error), "errors"),
        (column.count(Verdict::Blocked), "blocked"),
    ] {
        if n > 0 {
            parts.push(format!("{n} {what}"));
        }
    }
    let untested = column.count(Verdict::NotTested);
    parts.push(if untested > 0 {
        format!("{} skipped ({untested} not tested)", column.skipped())
    } else {
        format!("{} skipped", column.skipped())
    });
    let not_run = column.count(Verdict::NotRun);
    if not_run > 0 {
        parts.push(format!("{not_run} not run"));
    }
    parts.join(", ")
}

/// Whether a wire-log channel is a process's stderr (`NAME/stderr`).
pub fn is_stderr(channel: &str) -> bool {
    channel == "stderr" || channel.ends_with("/stderr")
}

/// The first line of `text`, at most 300 characters.
pub fn first_line(text: &str) -> String {
    let line = text.lines().next().unwrap_or_default().trim();
    match line.char_indices().nth(300) {
        Some((cut, _)) => format!("{}…", &line[..cut]),
        None => line.to_owned(),
    }
}

/// One scenario across every target.
#[derive(Debug, Clone)]
pub struct Row {
    /// The suite.
    pub suite: String,
    /// The scenario ID.
    pub id: String,
    /// Its title.
    pub title: String,
    /// Its tier.
    pub level: Level,
    /// Its category.
    pub category: Category,
    /// One cell per column, in column order.
    pub cells: Vec<Cell>,
}

impl Row {
    /// Whether the targets that ran the row disagree on it.
    pub fn differs(&self) -> bool {
        let seen: BTreeSet<Verdict> = self
            .cells
            .iter()
            .map(|c| c.verdict)
            .filter(|v| *v != Verdict::NotRun)
            .collect();
        seen.len() > 1
    }

    /// Whether every target that has a result for the row skipped it (folded away by default).
    pub fn skipped_by_all(&self) -> bool {
        self.cells.iter().any(|c| c.verdict == Verdict::Skip)
            && self
                .cells
                .iter()
                .all(|c| matches!(c.verdict, Verdict::Skip | Verdict::NotRun))
    }

    /// The distinct verdicts of the row.
    pub fn verdicts(&self) -> BTreeSet<Verdict> {
        self.cells.iter().map(|c| c.verdict).collect()
    }
}

/// One target: where its results come from and how its run went.
#[derive(Debug, Clone)]
pub struct Column {
    /// The label given on the command line.
    pub label: String,
    /// Where its `results.json` is (or was to be).
    pub results: String,
    /// The target profile's name, once its results are read.
    pub target: String,
    /// Its description.
    pub description: String,
    /// The selection its run made.
    pub selection: String,
    /// When its run started.
    pub started: String,
    /// How long its run took, in seconds.
    pub duration: f64,
    /// Its run's exit code (0 as expected, 1 not as expected).
    pub exit_code: Option<u8>,
    /// What went wrong when the run left no results to read.
    pub problem: Option<String>,
    /// Cells per verdict, over every row (folded ones included).
    pub counts: BTreeMap<Verdict, usize>,
    /// The run's own counts of the rows the matrix shows, as its `results.json` and console
    /// give them (a skip there includes the untested rows).
    pub run_counts: Option<Counts>,
    /// The agent's command as the run was given it (local paths as placeholders).
    pub command: Option<String>,
    /// The agent's URL.
    pub url: Option<String>,
    /// What the agent declared of itself in `initialize`.
    pub agent: Option<AgentInfo>,
    /// The version of ski-conformance that ran.
    pub ski_version: String,
    /// How the run authenticated.
    pub auth: Option<String>,
    /// The capabilities discovery found.
    pub discovered: Vec<String>,
    /// What discovery saw.
    pub discovery_notes: Vec<String>,
    /// The untested cells grouped by their reason, in row order of each reason's first row:
    /// `(reason, row indices)`.
    pub untested: Vec<(String, Vec<usize>)>,
}

impl Column {
    /// Skipped cells as the run counts them: skips and untested rows together.
    pub fn skipped(&self) -> usize {
        self.count(Verdict::Skip) + self.count(Verdict::NotTested)
    }

    /// The cells of one verdict.
    pub fn count(&self, verdict: Verdict) -> usize {
        self.counts.get(&verdict).copied().unwrap_or(0)
    }

    /// Which of [`Column::untested`] explains row `row`.
    pub fn untested_group(&self, row: usize) -> Option<usize> {
        self.untested
            .iter()
            .position(|(_, rows)| rows.contains(&row))
    }

    /// The agent as it names itself: `name version`, or `name title version` when the title
    /// differs from the name.
    pub fn agent_text(&self) -> Option<String> {
        let agent = self.agent.as_ref()?;
        let mut words = vec![agent.name.as_str()];
        if let Some(title) = agent.title.as_deref().filter(|t| *t != agent.name) {
            words.push(title);
        }
        if !agent.version.is_empty() {
            words.push(&agent.version);
        }
        Some(words.join(" "))
    }
}

/// Rows × targets.
#[derive(Debug, Clone)]
pub struct Matrix {
    /// The selection, described.
    pub selection: String,
    /// The targets, in column order.
    pub columns: Vec<Column>,
    /// The rows, in catalog order (those skipped by every target too).
    pub rows: Vec<Row>,
    /// Whether the pages show the rows every target skipped (`--show-skipped`); by default
    /// they are folded into one line.
    pub show_skipped: bool,
}

/// What one column is made of: its label, where its results are, and the report read from them
/// or why there is none.
pub struct ColumnInput {
    /// The label.
    pub label: String,
    /// Where its `results.json` is.
    pub results: String,
    /// The report, or what went wrong.
    pub report: Result<RunReport, String>,
}

impl Matrix {
    /// Every row any target has a result for, in catalog order (rows no catalog knows last, by
    /// ID), with one cell per column.
    pub fn build(
        selection: String,
        inputs: Vec<ColumnInput>,
        catalogs: &CatalogSet,
        redact: &Redactor,
    ) -> Self {
        let position: HashMap<(&str, &str), usize> = catalogs
            .scenarios()
            .enumerate()
            .map(|(index, s)| ((s.suite.as_str(), s.id.as_str()), index))
            .collect();
        let mut rows: Vec<Row> = Vec::new();
        let mut index: HashMap<(String, String), usize> = HashMap::new();
        for (column, input) in inputs.iter().enumerate() {
            let Ok(report) = &input.report else { continue };
            for result in &report.results {
                let key = (result.suite.clone(), result.id.clone());
                let row = *index.entry(key).or_insert_with(|| {
                    rows.push(Row {
                        suite: result.suite.clone(),
                        id: result.id.clone(),
                        title: result.title.clone(),
                        level: result.level,
                        category: result.category,
                        cells: vec![Cell::not_run(); inputs.len()],
                    });
                    rows.len() - 1
                });
                rows[row].cells[column] = Cell::of(result, report.strict, redact);
            }
        }
        rows.sort_by(|a, b| {
            let key = |r: &Row| {
                position
                    .get(&(r.suite.as_str(), r.id.as_str()))
                    .copied()
                    .unwrap_or(usize::MAX)
            };
            key(a).cmp(&key(b)).then_with(|| a.id.cmp(&b.id))
        });
        let columns = inputs
            .into_iter()
            .enumerate()
            .map(|(n, input)| column(n, input, &rows, redact))
            .collect();
        Self {
            selection: redact.apply(&selection),
            columns,
            rows,
            show_skipped: false,
        }
    }

    /// The rows the pages show in the table, with their index in [`Matrix::rows`].
    pub fn shown_rows(&self) -> impl Iterator<Item = (usize, &Row)> {
        self.rows
            .iter()
            .enumerate()
            .filter(|(_, r)| self.show_skipped || !r.skipped_by_all())
    }

    /// The rows folded away: skipped by every target, while `--show-skipped` is off.
    pub fn folded(&self) -> Vec<&Row> {
        if self.show_skipped {
            return Vec::new();
        }
        self.rows.iter().filter(|r| r.skipped_by_all()).collect()
    }

    /// The suites of the rows, in row order.
    pub fn suites(&self) -> Vec<&str> {
        let mut suites: Vec<&str> = Vec::new();
        for row in &self.rows {
            if !suites.contains(&row.suite.as_str()) {
                suites.push(&row.suite);
            }
        }
        suites
    }

    /// The tiers of the rows, most binding first.
    pub fn levels(&self) -> Vec<Level> {
        Level::ALL
            .into_iter()
            .filter(|l| self.rows.iter().any(|r| r.level == *l))
            .collect()
    }

    /// The verdicts of any cell.
    pub fn verdicts(&self) -> Vec<Verdict> {
        Verdict::ALL
            .into_iter()
            .filter(|v| self.shown_rows().any(|(_, r)| r.verdicts().contains(v)))
            .collect()
    }

    /// The matrix's exit code: 2 when a target's run left no results, 1 when a target's run was
    /// not as expected, else 0.
    pub fn exit_code(&self) -> u8 {
        if self.columns.iter().any(|c| c.problem.is_some()) {
            2
        } else if self.columns.iter().any(|c| c.exit_code != Some(0)) {
            1
        } else {
            0
        }
    }
}

fn column(n: usize, input: ColumnInput, rows: &[Row], redact: &Redactor) -> Column {
    let mut counts = BTreeMap::new();
    let mut untested: Vec<(String, Vec<usize>)> = Vec::new();
    for (r, row) in rows.iter().enumerate() {
        let cell = &row.cells[n];
        *counts.entry(cell.verdict).or_insert(0) += 1;
        if cell.verdict == Verdict::NotTested {
            let reason = cell
                .reason
                .clone()
                .unwrap_or_else(|| "no reason given".to_owned());
            match untested.iter_mut().find(|(known, _)| *known == reason) {
                Some((_, rows)) => rows.push(r),
                None => untested.push((reason, vec![r])),
            }
        }
    }
    let mut column = Column {
        label: input.label,
        results: redact.apply(&input.results),
        target: String::new(),
        description: String::new(),
        selection: String::new(),
        started: String::new(),
        duration: 0.0,
        exit_code: None,
        problem: None,
        counts,
        run_counts: None,
        command: None,
        url: None,
        agent: None,
        ski_version: String::new(),
        auth: None,
        discovered: Vec::new(),
        discovery_notes: Vec::new(),
        untested,
    };
    match input.report {
        Ok(report) => {
            column.exit_code = Some(report.exit_code());
            column.run_counts = Some(report.counts());
            column.target = report.target;
            column.description = redact.apply(&report.target_description);
            column.selection = redact.apply(&report.selection);
            column.started = report.started;
            column.duration = report.duration;
            column.ski_version = report.ski_version;
            let setup = report.setup;
            column.command = setup.command.map(|c| redact.apply(&c));
            column.url = setup.url.map(|u| redact.apply(&u));
            column.agent = setup.agent;
            column.auth = setup.auth.map(|a| redact.apply(&a));
            column.discovered = setup.discovered;
            column.discovery_notes = setup
                .discovery_notes
                .iter()
                .map(|note| redact.apply(note))
                .collect();
        }
        Err(problem) => column.problem = Some(redact.apply(&problem)),
    }
    column
}
