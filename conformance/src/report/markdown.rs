//! `report.md`: the run as living documentation. A summary table of counts per suite and
//! category, then every scenario in a matrix grouped by suite and category (ID, title, level,
//! outcome, time; a warning, an info row and a row not tested say so), then the details of every
//! failure (Expected, Actual, the spec's `then`, and the wire log).

use std::fmt::Write as _;

use crate::baseline::Expectation;
use crate::catalog::Category;
use crate::check::Outcome;
use crate::runner::{Counts, RunReport, ScenarioResult};

/// How many wire-log lines a failure shows here; `results.json` has them all.
const WIRE_LINES: usize = 200;

/// The Markdown report of a run.
pub fn render(report: &RunReport) -> String {
    let mut md = String::new();
    let _ = writeln!(md, "# Conformance report: {}\n", cell(&report.target));
    if !report.target_description.is_empty() {
        let _ = writeln!(md, "{}\n", report.target_description);
    }
    let counts = report.counts();
    let _ = writeln!(
        md,
        "Started {}; took {:.1} s; selection: {}; {} job(s); timeout multiplier {}; baseline: {}.\n",
        report.started,
        report.duration,
        if report.selection.is_empty() {
            "everything"
        } else {
            &report.selection
        },
        report.jobs,
        report.timeout_multiplier,
        report.baseline.as_deref().unwrap_or("none"),
    );
    if let Some(signal) = &report.interrupted {
        let _ = writeln!(
            md,
            "**Interrupted by {signal}**: the rows in flight were ended and count as errors; {} selected row(s) never started and are not in this report.\n",
            report.not_started
        );
    }
    setup_lines(&mut md, report);
    let unexpected = report.unexpected().count();
    let coverage = report.coverage();
    let warnings = counts.warnings;
    let verdict = if report.exit_code() == 0 && warnings > 0 {
        format!(
            "**passed, not strict**: {warnings} should/interop row(s) failed (warnings; `--strict` fails on them)"
        )
    } else if report.exit_code() == 0 {
        "**as expected**".to_owned()
    } else if report.below_min_coverage() {
        format!(
            "**not as expected**: {unexpected} unexpected failure(s), {} stale baseline entr(y/ies), coverage {:.1}% below the required {:.1}%",
            report.stale.len(),
            coverage.percent(),
            report.min_coverage.unwrap_or_default()
        )
    } else {
        format!(
            "**not as expected**: {unexpected} unexpected failure(s), {} stale baseline entr(y/ies)",
            report.stale.len()
        )
    };
    let _ = writeln!(
        md,
        "Verdict: {verdict}. {} scenario(s): {} pass ({} flaky), {} fail, {} skip, {}{} error; {} excused by the baseline; {} warning(s); {} not tested.{}\n",
        counts.total(),
        counts.pass,
        counts.flaky,
        counts.fail,
        counts.skip,
        crate::report::console::blocked_text(&counts),
        counts.error,
        counts.expected_failures,
        counts.warnings,
        counts.not_tested,
        if report.strict {
            " Strict run: should and interop rows decide the verdict too."
        } else {
            ""
        }
    );
    let not_tested: Vec<&str> = report.not_tested().map(|r| r.id.as_str()).collect();
    if !not_tested.is_empty() {
        let _ = writeln!(
            md,
            "> **Not tested: {} must/capability row(s)** the run could not exercise (see each row's reason): {}.\n",
            not_tested.len(),
            not_tested.join(", ")
        );
    }
    let _ = writeln!(md, "Coverage: {}.\n", coverage.sentence());
    if let Some(warning) = coverage.warning() {
        let _ = writeln!(md, "> **{warning}**\n");
    }

    let _ = writeln!(md, "## Summary\n");
    let _ = writeln!(
        md,
        "| Suite | Category | Pass | Fail | Skip | Error | Flaky | Warnings | Not tested | Total |"
    );
    let _ = writeln!(md, "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    for ((suite, category), c) in report.counts_by_category() {
        summary_row(&mut md, &suite, category.as_str(), &c);
    }
    summary_row(&mut md, "**all**", "", &counts);
    md.push('\n');

    if !report.stale.is_empty() {
        let _ = writeln!(md, "## Stale baseline entries\n");
        let _ = writeln!(
            md,
            "These scenarios pass now; remove their entries from the baseline.\n"
        );
        for entry in &report.stale {
            let _ = writeln!(md, "- `{}`: {}", entry.key(), entry.reason);
        }
        md.push('\n');
    }

    let mut suites: Vec<&str> = report.results.iter().map(|r| r.suite.as_str()).collect();
    suites.dedup();
    for suite in suites {
        let _ = writeln!(md, "## Suite `{suite}`\n");
        for category in Category::ALL {
            let rows: Vec<&ScenarioResult> = report
                .results
                .iter()
                .filter(|r| r.suite == suite && r.category == category)
                .collect();
            if rows.is_empty() {
                continue;
            }
            let _ = writeln!(md, "### {category}\n");
            let _ = writeln!(md, "| ID | Title | Level | Outcome | Time |");
            let _ = writeln!(md, "|---|---|---|---|---:|");
            for r in rows {
                let _ = writeln!(
                    md,
                    "| {} | {} | {} | {} | {:.2} s |",
                    anchor_link(r),
                    cell(&r.title),
                    r.level,
                    outcome_text(r, report.strict),
                    r.duration
                );
            }
            md.push('\n');
        }
    }

    let failed: Vec<&ScenarioResult> = report
        .results
        .iter()
        .filter(|r| matches!(r.outcome, Outcome::Fail | Outcome::Error) || r.flaky)
        .collect();
    if !failed.is_empty() {
        let _ = writeln!(md, "## Failures\n");
        for r in failed {
            failure_section(&mut md, r, report.strict);
        }
    }
    md
}

/// How the timeouts were scaled and what discovery saw of the agent.
fn setup_lines(md: &mut String, report: &RunReport) {
    let setup = &report.setup;
    let mut said = Vec::new();
    if let Some(command) = &setup.command {
        said.push(format!("command `{}`", command.replace('`', "'")));
    }
    if let Some(url) = &setup.url {
        said.push(format!("URL `{}`", url.replace('`', "'")));
    }
    if let Some(agent) = &setup.agent {
        said.push(format!(
            "the agent declares itself {} {}",
            cell(&agent.name),
            cell(&agent.version)
        ));
    }
    if let Some(auth) = &setup.auth {
        said.push(format!("auth: {}", cell(auth)));
    }
    if !report.ski_version.is_empty() {
        said.push(format!("ski-conformance {}", report.ski_version));
    }
    if !said.is_empty() {
        let _ = writeln!(md, "Target: {}.\n", said.join("; "));
    }
    if let (Some(asked), Some(scale)) = (setup.timeout_multiplier_asked, setup.startup_scale) {
        let startup = setup
            .startup_seconds
            .map(|s| format!("; the agent took {s:.2} s to get ready"))
            .unwrap_or_default();
        let allowance = crate::setup::SETUP_ALLOWANCE.as_secs_f64() * asked * scale;
        let _ = writeln!(
            md,
            "Timeouts: multiplier {} (--timeout-multiplier {asked}); each set-up step may take {allowance:.1} s (start-up scale {scale:.1}{startup}).\n",
            report.timeout_multiplier
        );
    } else if let Some(seconds) = setup.startup_seconds {
        let _ = writeln!(md, "The agent took {seconds:.2} s to get ready.\n");
    }
    for note in &setup.profile_notes {
        let _ = writeln!(md, "Note on the profile: {}\n", cell(note));
    }
    if !setup.discovered.is_empty() || !setup.discovery_notes.is_empty() {
        let _ = writeln!(
            md,
            "Discovery found: {}.\n",
            if setup.discovered.is_empty() {
                "nothing".to_owned()
            } else {
                setup.discovered.join(", ")
            }
        );
        for note in &setup.discovery_notes {
            let _ = writeln!(md, "- {}", cell(note));
        }
        if !setup.discovery_notes.is_empty() {
            md.push('\n');
        }
    }
}

fn summary_row(md: &mut String, suite: &str, category: &str, c: &Counts) {
    let _ = writeln!(
        md,
        "| {suite} | {category} | {} | {} | {} | {} | {} | {} | {} | {} |",
        c.pass,
        c.fail,
        c.skip,
        c.error,
        c.flaky,
        c.warnings,
        c.not_tested,
        c.total()
    );
}

fn anchor(id: &str) -> String {
    format!(
        "failure-{}",
        id.to_ascii_lowercase()
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
            .collect::<String>()
    )
}

fn anchor_link(r: &ScenarioResult) -> String {
    if matches!(r.outcome, Outcome::Fail | Outcome::Error) || r.flaky {
        format!("[{}](#{})", cell(&r.id), anchor(&r.id))
    } else {
        cell(&r.id)
    }
}

/// The outcome as shown in the matrix, in a run that is `strict` or not.
pub fn outcome_text(r: &ScenarioResult, strict: bool) -> String {
    let mut text = match r.outcome {
        Outcome::Pass if r.flaky => "pass (flaky)".to_owned(),
        Outcome::Pass => "pass".to_owned(),
        Outcome::Fail if r.timed_out => "**FAIL** (timeout)".to_owned(),
        Outcome::Fail => "**FAIL**".to_owned(),
        Outcome::Skip => match &r.message {
            Some(reason) => format!("skip: {}", cell(reason)),
            None => "skip".to_owned(),
        },
        Outcome::Blocked => match &r.message {
            Some(reason) => format!("blocked: {}", cell(reason)),
            None => "blocked".to_owned(),
        },
        Outcome::Error => "**ERROR**".to_owned(),
    };
    match r.expectation {
        Expectation::AsExpected if matches!(r.outcome, Outcome::Fail | Outcome::Error) => {
            text.push_str(" (baseline)");
        }
        Expectation::Stale => text.push_str(" (stale baseline entry)"),
        _ => {}
    }
    if let Some(note) = crate::report::console::tier_note(r, strict) {
        text.push_str(&format!(" ({})", cell(&note)));
    }
    text
}

fn failure_section(md: &mut String, r: &ScenarioResult, strict: bool) {
    let _ = writeln!(
        md,
        "<a id=\"{}\"></a>\n### {} — {} ({})\n",
        anchor(&r.id),
        r.id,
        r.title,
        outcome_text(r, strict).replace("**", "")
    );
    let (failure, message, wire) = match (&r.first_attempt, r.flaky) {
        // A flaky pass shows why its first attempt failed.
        (Some(first), true) => (
            first.failure.as_ref(),
            first.message.as_deref(),
            &first.wire,
        ),
        _ => (r.failure.as_ref(), r.message.as_deref(), &r.wire),
    };
    if r.flaky {
        let _ = writeln!(
            md,
            "Failed on the first attempt, passed when re-run alone.\n"
        );
    }
    if let Some(f) = failure {
        let _ = writeln!(md, "- **Check**: {}", inline(&f.check));
        let _ = writeln!(md, "- **Expected**: {}", inline(&f.expected));
        let _ = writeln!(md, "- **Actual**: {}", inline(&f.actual));
        if let Some(location) = &f.location {
            let _ = writeln!(md, "- **At**: `{location}`");
        }
    }
    if let Some(message) = message {
        let _ = writeln!(md, "- **Message**: {}", inline(message));
    }
    let _ = writeln!(md, "- **Then** (spec): {}", inline(&r.then));
    if let Some(rerun) = &r.rerun {
        let _ = writeln!(
            md,
            "- **Attempts**: {} ({}; budget {:.1} s with {} set-up step(s))",
            r.attempts,
            inline(rerun),
            r.budget,
            r.setup_steps
        );
    }
    let _ = writeln!(md, "- **Level**: {}", r.level);
    let _ = writeln!(md, "- **Source**: {}", inline(&r.source));
    if !r.processes.is_empty() {
        let list: Vec<String> = r
            .processes
            .iter()
            .map(|p| {
                format!(
                    "{} (pid {}, {}{})",
                    p.name,
                    p.pid,
                    p.status.as_deref().unwrap_or("no status"),
                    if p.gone { "" } else { ", SURVIVED" }
                )
            })
            .collect();
        let _ = writeln!(md, "- **Processes**: {}", list.join("; "));
    }
    if wire.is_empty() {
        md.push_str("\nNo wire traffic was recorded.\n\n");
        return;
    }
    let skipped = wire.len().saturating_sub(WIRE_LINES);
    let _ = writeln!(
        md,
        "\n<details><summary>Wire log ({} entries{})</summary>\n\n```text",
        wire.len(),
        if skipped > 0 {
            format!(", the first {skipped} left out; see results.json")
        } else {
            String::new()
        }
    );
    for w in &wire[skipped..] {
        let _ = writeln!(
            md,
            "+{:.6}s {} {} {}",
            w.t,
            w.channel,
            w.direction,
            w.text.replace("```", "`‌``")
        );
    }
    let _ = writeln!(md, "```\n\n</details>\n");
}

/// Text safe inside a table cell.
fn cell(text: &str) -> String {
    text.replace('|', "\\|").replace('\n', " ")
}

/// Text on one line; multi-line values go into a code span block.
fn inline(text: &str) -> String {
    if text.contains('\n') {
        format!("\n\n  ```text\n  {}\n  ```\n", text.replace('\n', "\n  "))
    } else {
        text.to_owned()
    }
}
