//! `results.json`: every result with its Expected/Actual, processes and wire log, and the IDs
//! that fail the run, that are warnings and that were not tested.

use serde::Serialize;

use super::ReportError;
use crate::runner::{Counts, RunReport};

#[derive(Serialize)]
struct Document<'a> {
    format: &'static str,
    exit_code: u8,
    counts: Counts,
    unexpected: Vec<&'a str>,
    warnings: Vec<&'a str>,
    not_tested: Vec<&'a str>,
    #[serde(flatten)]
    report: &'a RunReport,
}

/// The JSON document of a run.
pub fn render(report: &RunReport) -> Result<String, ReportError> {
    let document = Document {
        format: "ski-conformance-results/1",
        exit_code: report.exit_code(),
        counts: report.counts(),
        unexpected: report.unexpected().map(|r| r.id.as_str()).collect(),
        warnings: report.warnings().map(|r| r.id.as_str()).collect(),
        not_tested: report.not_tested().map(|r| r.id.as_str()).collect(),
        report,
    };
    serde_json::to_string_pretty(&document).map_err(|e| ReportError::Encode {
        what: "json",
        message: e.to_string(),
    })
}
