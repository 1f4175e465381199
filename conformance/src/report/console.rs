//! The console: one line per finished scenario, a progress bar only on an interactive terminal
//! (never in CI or when stderr is redirected), and the summary at the end.

use ski::cli::output;
use std::io::IsTerminal;
use std::sync::Mutex;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::baseline::Expectation;
use crate::catalog::Level;
use crate::check::Outcome;
use crate::runner::{Observer, Phase, RunReport, ScenarioResult};

/// Prints progress to stdout (lines) and stderr (the bar).
#[derive(Debug)]
pub struct Console {
    bar: Mutex<Option<ProgressBar>>,
    use_bar: bool,
    quiet: bool,
    strict: bool,
}

impl Console {
    /// A console reporter; the bar is on only when stderr is a terminal and `CI` is not set.
    pub fn new() -> Self {
        let use_bar = std::io::stderr().is_terminal() && std::env::var_os("CI").is_none();
        Self {
            bar: Mutex::new(None),
            use_bar,
            quiet: false,
            strict: false,
        }
    }

    /// Leaves out the lines of skipped scenarios (the summary still counts them).
    pub fn quiet(mut self, quiet: bool) -> Self {
        self.quiet = quiet;
        self
    }

    /// Marks failures of `should` and `interop` rows as failing the run (`--strict`) instead of
    /// as warnings.
    pub fn strict(mut self, strict: bool) -> Self {
        self.strict = strict;
        self
    }

    fn print(&self, line: &str) {
        let bar = self
            .bar
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        match bar.as_ref() {
            Some(bar) => bar.println(line),
            None => output::line(line),
        }
    }
}

impl Default for Console {
    fn default() -> Self {
        Self::new()
    }
}

impl Observer for Console {
    fn started(&self, total: usize) {
        output::line(format_args!("running {total} scenario(s)"));
        if self.use_bar {
            let bar =
                ProgressBar::with_draw_target(Some(total as u64), ProgressDrawTarget::stderr());
            if let Ok(style) = ProgressStyle::with_template("{bar:40} {pos}/{len} {elapsed} {msg}")
            {
                bar.set_style(style);
            }
            *self
                .bar
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(bar);
        }
    }

    fn finished(&self, result: &ScenarioResult, phase: Phase) {
        if !(self.quiet && result.outcome == Outcome::Skip) {
            self.print(&line(result, phase, self.strict));
        }
        if phase == Phase::Main
            && let Some(bar) = self
                .bar
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .as_ref()
        {
            bar.inc(1);
        }
    }

    fn rerunning(&self, count: usize) {
        self.print(&format!(
            "re-running {count} unexpected failure(s) alone to tell flaky from failing"
        ));
    }

    fn done(&self) {
        if let Some(bar) = self
            .bar
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take()
        {
            bar.finish_and_clear();
        }
    }
}

/// The console line of one result of a run that is `strict` or not.
pub fn line(result: &ScenarioResult, phase: Phase, strict: bool) -> String {
    let label = match result.outcome {
        Outcome::Pass if result.flaky => "FLAKY",
        Outcome::Pass => "PASS",
        Outcome::Fail => "FAIL",
        Outcome::Skip => "SKIP",
        Outcome::Blocked => "BLOCK",
        Outcome::Error => "ERROR",
    };
    let mut line = format!(
        "{label:<5} {:<8} {:<12} {} ({:.2}s)",
        result.suite, result.id, result.title, result.duration
    );
    if phase == Phase::Rerun {
        line.push_str(" [re-run alone]");
    }
    if result.timed_out {
        line.push_str(" [timeout]");
    }
    match result.expectation {
        Expectation::AsExpected if matches!(result.outcome, Outcome::Fail | Outcome::Error) => {
            line.push_str(" [in baseline]");
        }
        Expectation::Stale => line.push_str(" [STALE baseline entry]"),
        _ => {}
    }
    if let Some(note) = tier_note(result, strict) {
        line.push_str(&format!(" [{note}]"));
    }
    if matches!(result.outcome, Outcome::Skip | Outcome::Blocked)
        && let Some(message) = &result.message
    {
        line.push_str(&format!(": {message}"));
    }
    line
}

/// What a result's level makes of it in a run that is `strict` or not, when that is not plain:
/// a warning, an unasserted info row, a required row not tested.
pub fn tier_note(result: &ScenarioResult, strict: bool) -> Option<String> {
    if result.is_warning(strict) {
        Some(format!(
            "warning: a {} row, counted only with --strict",
            result.level
        ))
    } else if result.level == Level::Info
        && matches!(result.outcome, Outcome::Fail | Outcome::Error)
    {
        Some("info: recorded, never asserted".to_owned())
    } else if result.not_tested {
        Some(format!("NOT TESTED: a {} row", result.level))
    } else {
        None
    }
}

/// `N blocked, ` when the target blocked rows, else nothing (most runs block none).
pub fn blocked_text(counts: &crate::runner::Counts) -> String {
    if counts.blocked == 0 {
        String::new()
    } else {
        format!("{} blocked, ", counts.blocked)
    }
}

/// The summary printed at the end of a run.
pub fn summary(report: &RunReport) -> String {
    let counts = report.counts();
    let mut out = String::new();
    for result in report.unexpected() {
        out.push_str(&format!(
            "\n{} {} — {}\n",
            result.outcome.as_str().to_uppercase(),
            result.id,
            result.title
        ));
        out.push_str(&indent(&crate::report::junit::details(result)));
        if !result.wire.is_empty() {
            let tail: Vec<_> = result.wire.iter().rev().take(20).rev().cloned().collect();
            out.push_str(&format!(
                "  Wire log (last {} of {} entries):\n",
                tail.len(),
                result.wire.len()
            ));
            out.push_str(&indent(&crate::runner::render_wire(&tail)));
        }
    }
    let warnings: Vec<&ScenarioResult> = report.warnings().collect();
    if !warnings.is_empty() {
        out.push_str(&format!(
            "\nwarnings: {} should/interop row(s) failed; they do not fail the run unless --strict:\n",
            warnings.len()
        ));
        for result in warnings {
            out.push_str(&format!(
                "  {} {} ({}) — {}\n",
                result.outcome.as_str().to_uppercase(),
                result.id,
                result.level,
                result.title
            ));
        }
    }
    let not_tested: Vec<&str> = report.not_tested().map(|r| r.id.as_str()).collect();
    if !not_tested.is_empty() {
        out.push_str(&format!(
            "\nnot tested: {} must/capability row(s) the run could not exercise (each row says why): {}\n",
            not_tested.len(),
            not_tested.join(", ")
        ));
    }
    if !report.stale.is_empty() {
        out.push_str("\nstale baseline entries (these scenarios pass now; remove the entries):\n");
        for entry in &report.stale {
            out.push_str(&format!("  {}: {}\n", entry.key(), entry.reason));
        }
    }
    let flaky: Vec<&str> = report
        .results
        .iter()
        .filter(|r| r.flaky)
        .map(|r| r.id.as_str())
        .collect();
    if !flaky.is_empty() {
        out.push_str(&format!(
            "\nflaky (passed only when re-run alone): {}\n",
            flaky.join(", ")
        ));
    }
    if let Some(signal) = &report.interrupted {
        out.push_str(&format!(
            "\nINTERRUPTED by {signal}: the rows in flight were ended, {} selected row(s) never started; the counts below are of the rows that started\n",
            report.not_started
        ));
    }
    out.push_str(&format!(
        "\n{} passed, {} failed, {} skipped, {}{} errors ({} flaky, {} excused by the baseline, {} warning(s), {} not tested) in {:.1}s against {}\n",
        counts.pass,
        counts.fail,
        counts.skip,
        blocked_text(&counts),
        counts.error,
        counts.flaky,
        counts.expected_failures,
        counts.warnings,
        counts.not_tested,
        report.duration,
        report.target
    ));
    let coverage = report.coverage();
    out.push_str(&format!("coverage: {}\n", coverage.sentence()));
    if let Some(warning) = coverage.warning() {
        out.push_str(&format!("{warning}\n"));
    }
    if let Some(min) = report.min_coverage
        && report.below_min_coverage()
    {
        out.push_str(&format!(
            "coverage {:.1}% is below --min-coverage {min}\n",
            coverage.percent()
        ));
    }
    out.push_str(&format!("result: {}\n", verdict(report)));
    out
}

/// The run's verdict in a few words: `as expected`, `passed, not strict (2 warnings)` or
/// `NOT as expected`.
pub fn verdict(report: &RunReport) -> String {
    let warnings = report.warnings().count();
    if report.exit_code() != 0 {
        "NOT as expected".to_owned()
    } else if warnings > 0 {
        format!("passed, not strict ({warnings} should/interop warning(s); --strict fails on them)")
    } else {
        "as expected".to_owned()
    }
}

fn indent(text: &str) -> String {
    text.lines().map(|l| format!("  {l}\n")).collect()
}
