//! Reports of a run: console lines and progress, JUnit XML, `results.json` and `report.md`; and
//! `report.html`, the page of a cross-target matrix (`html`).
//!
//! [`write_all`] writes the three files into one directory (by default `target/conformance`).

pub mod console;
pub mod coverage;
pub mod html;
pub mod json;
pub mod junit;
pub mod markdown;

use std::path::{Path, PathBuf};

use crate::runner::RunReport;

/// The files written by [`write_all`].
#[derive(Debug, Clone)]
pub struct Written {
    /// `report.md`.
    pub markdown: PathBuf,
    /// `junit.xml`.
    pub junit: PathBuf,
    /// `results.json`.
    pub json: PathBuf,
}

/// Errors of writing reports.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReportError {
    /// A file could not be written.
    #[error("cannot write {path}: {cause}")]
    Write {
        /// The file.
        path: PathBuf,
        /// Why (shown in the message, so not also a `source`).
        cause: std::io::Error,
    },
    /// A report could not be encoded.
    #[error("cannot encode the {what} report: {message}")]
    Encode {
        /// Which report.
        what: &'static str,
        /// Why.
        message: String,
    },
}

/// Writes `report.md`, `junit.xml` and `results.json` into `dir` (created if missing).
pub fn write_all(report: &RunReport, dir: &Path) -> Result<Written, ReportError> {
    std::fs::create_dir_all(dir).map_err(|cause| ReportError::Write {
        path: dir.to_owned(),
        cause,
    })?;
    let written = Written {
        markdown: dir.join("report.md"),
        junit: dir.join("junit.xml"),
        json: dir.join("results.json"),
    };
    write(&written.markdown, &markdown::render(report))?;
    write(&written.junit, &junit::render(report)?)?;
    write(&written.json, &json::render(report)?)?;
    Ok(written)
}

fn write(path: &Path, text: &str) -> Result<(), ReportError> {
    std::fs::write(path, text).map_err(|cause| ReportError::Write {
        path: path.to_owned(),
        cause,
    })
}
