//! `junit.xml`: one test suite per conformance suite, one test case per scenario; failures carry
//! Expected/Actual and the spec's `then`, system-out carries the wire log of a failing row (of a
//! passing one, how many entries it had), and a flaky pass keeps its failed first attempt as
//! `flakyFailure`. A failure that does not fail the run (a `should` or `interop` row of a run
//! that is not strict, an `info` row) is a passed case whose system-err says why; a required row
//! that was not tested is a skipped case that says so; each suite's properties count both.

use std::collections::BTreeMap;
use std::time::Duration;

use quick_junit::{NonSuccessKind, Report, TestCase, TestCaseStatus, TestRerun, TestSuite};

use super::ReportError;
use crate::check::Outcome;
use crate::runner::{Attempt, RunReport, ScenarioResult, render_wire};

/// The JUnit XML of a run.
pub fn render(report: &RunReport) -> Result<String, ReportError> {
    let mut junit = Report::new(format!("ski-conformance: {}", report.target));
    junit.set_time(seconds(report.duration));
    let mut suites: BTreeMap<&str, (TestSuite, usize, usize)> = BTreeMap::new();
    for result in &report.results {
        let (suite, warnings, not_tested) = suites
            .entry(result.suite.as_str())
            .or_insert_with(|| (TestSuite::new(result.suite.as_str()), 0, 0));
        *warnings += usize::from(result.is_warning(report.strict));
        *not_tested += usize::from(result.not_tested);
        suite.add_test_case(case(result, report.strict));
    }
    junit.add_test_suites(
        suites
            .into_values()
            .map(|(mut suite, warnings, not_tested)| {
                suite.add_property(("warnings", warnings.to_string().as_str()));
                suite.add_property(("not-tested", not_tested.to_string().as_str()));
                suite.add_property(("strict", if report.strict { "true" } else { "false" }));
                suite
            }),
    );
    junit.to_string().map_err(|e| ReportError::Encode {
        what: "junit",
        message: e.to_string(),
    })
}

fn case(result: &ScenarioResult, strict: bool) -> TestCase {
    let note = crate::report::console::tier_note(result, strict);
    let counted = result.level.decides_verdict(strict);
    let status = match result.outcome {
        Outcome::Fail | Outcome::Error if !counted => TestCaseStatus::success(),
        Outcome::Pass => {
            let mut status = TestCaseStatus::success();
            if let Some(first) = &result.first_attempt {
                status.add_rerun(rerun(first, result));
            }
            status
        }
        Outcome::Skip | Outcome::Blocked => {
            let mut status = TestCaseStatus::skipped();
            let message = result.message.as_deref().unwrap_or(result.outcome.as_str());
            match &note {
                Some(note) => status.set_message(format!("{note}: {message}")),
                None => status.set_message(message),
            };
            status
        }
        Outcome::Fail | Outcome::Error => {
            let kind = if result.outcome == Outcome::Fail {
                NonSuccessKind::Failure
            } else {
                NonSuccessKind::Error
            };
            let mut status = TestCaseStatus::non_success(kind);
            status.set_message(headline(
                result.failure.as_ref().map(|f| f.check.as_str()),
                result.message.as_deref(),
            ));
            status.set_type(if result.timed_out {
                "timeout"
            } else {
                result.outcome.as_str()
            });
            status.set_description(details(result));
            if let Some(first) = &result.first_attempt {
                status.add_rerun(rerun(first, result));
            }
            status
        }
    };
    let mut case = TestCase::new(format!("{} {}", result.id, result.title), status);
    case.set_classname(format!("{}.{}", result.suite, result.category));
    case.set_time(seconds(result.duration));
    if matches!(result.outcome, Outcome::Fail | Outcome::Error)
        && !counted
        && let Some(note) = &note
    {
        case.set_system_err(format!(
            "{}: {note}\n{}",
            result.outcome.as_str().to_uppercase(),
            details(result)
        ));
    }
    if !result.wire.is_empty() {
        case.set_system_out(result.wire_text());
    } else if result.wire_lines > 0 {
        case.set_system_out(format!(
            "{} wire-log entries (reports keep the wire log of failing rows only)\n",
            result.wire_lines
        ));
    }
    case
}

fn rerun(first: &Attempt, result: &ScenarioResult) -> TestRerun {
    let kind = if first.outcome == Outcome::Error {
        NonSuccessKind::Error
    } else {
        NonSuccessKind::Failure
    };
    let mut rerun = TestRerun::new(kind);
    rerun.set_time(seconds(first.duration));
    rerun.set_message(headline(
        first.failure.as_ref().map(|f| f.check.as_str()),
        first.message.as_deref(),
    ));
    let mut text = String::new();
    if let Some(failure) = &first.failure {
        text.push_str(&format!(
            "Expected: {}\nActual: {}\n",
            failure.expected, failure.actual
        ));
    }
    text.push_str(&format!("Then: {}\n", result.then));
    rerun.set_description(text);
    rerun.set_system_out(render_wire(&first.wire));
    rerun
}

fn headline(check: Option<&str>, message: Option<&str>) -> String {
    check.or(message).unwrap_or("no detail").to_owned()
}

/// Expected, Actual, the scenario's `then` and its source, as plain text.
pub fn details(result: &ScenarioResult) -> String {
    let mut text = String::new();
    if let Some(failure) = &result.failure {
        text.push_str(&format!("Check: {}\n", failure.check));
        text.push_str(&format!("Expected: {}\n", failure.expected));
        text.push_str(&format!("Actual: {}\n", failure.actual));
        if let Some(location) = &failure.location {
            text.push_str(&format!("At: {location}\n"));
        }
    }
    if let Some(message) = &result.message {
        text.push_str(&format!("Message: {message}\n"));
    }
    text.push_str(&format!("Then: {}\n", result.then));
    text.push_str(&format!("Source: {}\n", result.source));
    text
}

fn seconds(value: f64) -> Duration {
    Duration::try_from_secs_f64(value).unwrap_or_default()
}
