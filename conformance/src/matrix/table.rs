//! The comparison itself: one row per scenario, one column per target, each cell the verdict of
//! that target's own `results.json` for that row, with what explains it (the failure, the reason
//! of a skip or block, the wire log of a failing row).

use std::collections::{BTreeMap, BTreeSet, HashMap};

use crate::catalog::{CatalogSet, Category, Level};
use crate::check::Failure;
use crate::runner::{RunReport, ScenarioResult, WireRecord};

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
    /// of a skip is only a tooltip: most runs have many).
    pub fn has_details(self) -> bool {
        matches!(
            self,
            Verdict::Fail | Verdict::Error | Verdict::Blocked | Verdict::NotTested
        )
    }
}

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
    /// The wire log the target's `results.json` kept (failing rows only).
    pub wire: Vec<WireRecord>,
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
        }
    }

    fn of(result: &ScenarioResult, strict: bool) -> Self {
        let verdict = Verdict::of(result);
        let mut reason = result.message.clone();
        if verdict == Verdict::Error && !matches!(result.outcome.as_str(), "error") {
            reason = Some(format!(
                "outcome {:?} is unknown to this build",
                result.outcome.as_str()
            ));
        }
        Self {
            verdict,
            flaky: result.flaky,
            excused: matches!(verdict, Verdict::Fail | Verdict::Error)
                && result.expectation == crate::baseline::Expectation::AsExpected,
            warning: result.is_warning(strict),
            timed_out: result.timed_out,
            failure: result.failure.clone(),
            reason,
            wire: result.wire.clone(),
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
    /// Cells per verdict.
    pub counts: BTreeMap<Verdict, usize>,
}

/// Rows × targets.
#[derive(Debug, Clone)]
pub struct Matrix {
    /// The selection, described.
    pub selection: String,
    /// The targets, in column order.
    pub columns: Vec<Column>,
    /// The rows, in catalog order.
    pub rows: Vec<Row>,
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
    pub fn build(selection: String, inputs: Vec<ColumnInput>, catalogs: &CatalogSet) -> Self {
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
                rows[row].cells[column] = Cell::of(result, report.strict);
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
            .map(|(n, input)| column(n, input, &rows))
            .collect();
        Self {
            selection,
            columns,
            rows,
        }
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
            .filter(|v| self.rows.iter().any(|r| r.verdicts().contains(v)))
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

fn column(n: usize, input: ColumnInput, rows: &[Row]) -> Column {
    let mut counts = BTreeMap::new();
    for row in rows {
        *counts.entry(row.cells[n].verdict).or_insert(0) += 1;
    }
    let mut column = Column {
        label: input.label,
        results: input.results,
        target: String::new(),
        description: String::new(),
        selection: String::new(),
        started: String::new(),
        duration: 0.0,
        exit_code: None,
        problem: None,
        counts,
    };
    match input.report {
        Ok(report) => {
            column.exit_code = Some(report.exit_code());
            column.target = report.target;
            column.description = report.target_description;
            column.selection = report.selection;
            column.started = report.started;
            column.duration = report.duration;
        }
        Err(problem) => column.problem = Some(problem),
    }
    column
}
