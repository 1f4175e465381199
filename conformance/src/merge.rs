//! What runs leave behind, read back: `results.json` files of the shards of one run combined
//! into one report (`ski-conformance merge`), and a strict baseline drafted from a run's
//! failures (`ski-conformance baseline --from`).

use std::collections::{BTreeSet, HashMap};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use crate::catalog::CatalogSet;
use crate::check::Outcome;
use crate::runner::{RunReport, ScenarioResult};

/// The `format` of a `results.json` this build reads.
pub const RESULTS_FORMAT: &str = "ski-conformance-results/1";

/// Errors of reading and combining results.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MergeError {
    /// A file could not be read.
    #[error("cannot read {path}: {cause}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why (shown in the message, so not also a `source`).
        cause: std::io::Error,
    },
    /// A file is not a results file of this format.
    #[error("{path} is not a ski-conformance results file: {reason}")]
    Format {
        /// The file.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// The files do not belong to one run.
    #[error("{0}")]
    Mismatch(String),
}

/// Reads one `results.json`.
pub fn load_results(path: &Path) -> Result<RunReport, MergeError> {
    let text = std::fs::read_to_string(path).map_err(|cause| MergeError::Read {
        path: path.to_owned(),
        cause,
    })?;
    let format_error = |reason: String| MergeError::Format {
        path: path.to_owned(),
        reason,
    };
    let value: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| format_error(e.to_string()))?;
    match value.get("format").and_then(serde_json::Value::as_str) {
        Some(RESULTS_FORMAT) => {}
        Some(other) => {
            return Err(format_error(format!(
                "format {other:?}, this build reads {RESULTS_FORMAT:?}"
            )));
        }
        None => return Err(format_error("no \"format\" field".to_owned())),
    }
    serde_json::from_value(value).map_err(|e| format_error(e.to_string()))
}

/// Combines the reports of the shards of one run: the same target, the same baseline, no
/// scenario twice. Results come in catalog order (as an unsharded run lists them); stale
/// baseline entries are the union of the shards'.
pub fn merge(
    reports: Vec<(PathBuf, RunReport)>,
    catalogs: &CatalogSet,
) -> Result<RunReport, MergeError> {
    let mut reports = reports.into_iter();
    let Some((first_path, mut merged)) = reports.next() else {
        return Err(MergeError::Mismatch("no results to merge".to_owned()));
    };
    let mut origin: HashMap<String, PathBuf> = merged
        .results
        .iter()
        .map(|r| (r.id.clone(), first_path.clone()))
        .collect();
    let mut selections = vec![merged.selection.clone()];
    for (path, report) in reports {
        if report.target != merged.target {
            return Err(MergeError::Mismatch(format!(
                "{} ran against target {}, {} against {}: merge only the shards of one run",
                first_path.display(),
                merged.target,
                path.display(),
                report.target
            )));
        }
        if report.baseline != merged.baseline {
            return Err(MergeError::Mismatch(format!(
                "{} used baseline {}, {} used {}: merge only the shards of one run",
                first_path.display(),
                merged.baseline.as_deref().unwrap_or("none"),
                path.display(),
                report.baseline.as_deref().unwrap_or("none")
            )));
        }
        if report.strict != merged.strict {
            return Err(MergeError::Mismatch(format!(
                "{} ran {}, {} {}: merge only the shards of one run",
                first_path.display(),
                if merged.strict {
                    "with --strict"
                } else {
                    "without --strict"
                },
                path.display(),
                if report.strict {
                    "with it"
                } else {
                    "without it"
                }
            )));
        }
        for result in &report.results {
            if let Some(earlier) = origin.insert(result.id.clone(), path.clone()) {
                return Err(MergeError::Mismatch(format!(
                    "scenario {} is in both {} and {}: the shards overlap",
                    result.id,
                    earlier.display(),
                    path.display()
                )));
            }
        }
        if report.started < merged.started {
            merged.started = report.started.clone();
        }
        merged.duration = merged.duration.max(report.duration);
        merged.jobs = merged.jobs.max(report.jobs);
        merged.results.extend(report.results);
        let known: BTreeSet<String> = merged.stale.iter().map(|e| e.key()).collect();
        merged.stale.extend(
            report
                .stale
                .into_iter()
                .filter(|e| !known.contains(&e.key())),
        );
        selections.push(report.selection);
    }
    let position: HashMap<&str, usize> = catalogs
        .scenarios()
        .enumerate()
        .map(|(index, scenario)| (scenario.id.as_str(), index))
        .collect();
    merged.results.sort_by(|a, b| {
        let key = |r: &ScenarioResult| position.get(r.id.as_str()).copied().unwrap_or(usize::MAX);
        key(a).cmp(&key(b)).then_with(|| a.id.cmp(&b.id))
    });
    merged.selection = format!(
        "merged from {} results ({})",
        selections.len(),
        selections.join("; ")
    );
    Ok(merged)
}

/// A strict baseline listing every scenario that failed or errored in `report`, as TOML, with
/// what the run saw as each reason; the reasons are to be reviewed and replaced by why.
pub fn draft_baseline(report: &RunReport, from: &str) -> String {
    let mut text = String::new();
    let _ = writeln!(
        text,
        "# Strict baseline for {}, drafted from {from} (run of {}).",
        report.target, report.started
    );
    let _ = writeln!(
        text,
        "# Policy: an unlisted failure fails the run; a listed scenario that passes fails it as stale"
    );
    let _ = writeln!(
        text,
        "# until its entry is removed. Each reason below says what the run saw: replace it with why"
    );
    let _ = writeln!(
        text,
        "# the target behaves so (its own behaviour against the specification, an issue link)."
    );
    let failing: Vec<&ScenarioResult> = report
        .results
        .iter()
        .filter(|r| matches!(r.outcome, Outcome::Fail | Outcome::Error))
        .collect();
    if failing.is_empty() {
        let _ = writeln!(text, "# The run had no failure: nothing to excuse.");
    }
    for result in failing {
        let reason = match (&result.failure, &result.message) {
            (Some(failure), _) => format!(
                "{}: expected {}; got {}",
                failure.check,
                one_line(&failure.expected),
                one_line(&failure.actual)
            ),
            (None, Some(message)) => format!("harness error: {}", one_line(message)),
            (None, None) => format!("{} without a message", result.outcome.as_str()),
        };
        let _ = writeln!(text, "\n[[failure]]");
        let _ = writeln!(text, "id = {}", toml::Value::String(result.id.clone()));
        let _ = writeln!(text, "reason = {}", toml::Value::String(reason));
    }
    text
}

/// The first line of `text`, at most 300 characters.
fn one_line(text: &str) -> String {
    let line = text.lines().next().unwrap_or_default().trim();
    match line.char_indices().nth(300) {
        Some((cut, _)) => format!("{}…", &line[..cut]),
        None => line.to_owned(),
    }
}
