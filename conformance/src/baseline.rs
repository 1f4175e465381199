//! Strict baselines: the failures a target is known to have (`conformance/baselines/*.toml`).
//!
//! Policy: a failure (or error) that no entry excuses fails the run; an entry whose scenario now
//! passes fails the run as stale, so the baseline only ever shrinks. An entry may name one
//! assertion (`check`, the name a [`Failure`] carries): then only a failure of that
//! assertion is excused, and any other failure of the scenario is unexpected. A skipped scenario
//! neither uses nor invalidates its entry.
//!
//! A row that passes only when re-run alone is flaky, and a flaky pass counts against the
//! verdict like a failure unless an entry with `flaky = true` lists the row: that entry excuses
//! a flaky pass only (never a failure), and a row that passes at once does not make it stale.
//!
//! ```toml
//! [[failure]]
//! id = "WS-012"                 # the scenario
//! check = "the error code"      # optional: only this assertion
//! reason = "answers -32603 instead of -32602; upstream issue 12"
//! ```

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::catalog::CatalogSet;
use crate::check::{Failure, Outcome};

/// Errors of loading a baseline.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BaselineError {
    /// The file could not be read.
    #[error("cannot read baseline {path}: {cause}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why (shown in the message, so not also a `source`).
        cause: std::io::Error,
    },
    /// Not valid TOML of the baseline format.
    #[error("baseline {origin} is not valid: {message}")]
    Parse {
        /// The file.
        origin: String,
        /// The parser's message.
        message: String,
    },
    /// Valid TOML that breaks a rule.
    #[error("baseline {origin}: {problems}", problems = .problems.join("; "))]
    Invalid {
        /// The file.
        origin: String,
        /// Every rule broken.
        problems: Vec<String>,
    },
}

/// One known failure.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BaselineEntry {
    /// The scenario ID.
    pub id: String,
    /// Only this assertion of the scenario, when set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub check: Option<String>,
    /// Why the target fails it (an issue link, a decision).
    pub reason: String,
    /// The row is known to pass only sometimes at the first attempt: a pass on its re-run is
    /// excused, a failure is not.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub flaky: bool,
}

impl BaselineEntry {
    /// `ID` or `ID:check`.
    pub fn key(&self) -> String {
        match &self.check {
            Some(check) => format!("{}:{check}", self.id),
            None => self.id.clone(),
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct BaselineFile {
    #[serde(default)]
    failure: Vec<BaselineEntry>,
}

/// A parsed, validated baseline.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Baseline {
    /// Where it came from.
    pub origin: String,
    /// Its entries.
    pub entries: Vec<BaselineEntry>,
}

/// How a result stands against the baseline.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Expectation {
    /// Passed, skipped, or failed as the baseline says: fine.
    AsExpected,
    /// A failure or error that the baseline does not excuse: the run fails.
    Unexpected,
    /// Passed although the baseline lists it: the run fails until the entry is removed.
    Stale,
}

impl Baseline {
    /// Parses a baseline; `origin` names it in errors.
    pub fn parse(origin: &str, text: &str) -> Result<Self, BaselineError> {
        let file: BaselineFile = toml::from_str(text).map_err(|e| BaselineError::Parse {
            origin: origin.to_owned(),
            message: ski::exit::parse_error_line(e.message(), e.span(), text),
        })?;
        let baseline = Baseline {
            origin: origin.to_owned(),
            entries: file.failure,
        };
        let mut problems = Vec::new();
        let mut keys = BTreeSet::new();
        let mut whole: BTreeSet<&str> = BTreeSet::new();
        let mut scoped: BTreeSet<&str> = BTreeSet::new();
        for entry in &baseline.entries {
            if entry.id.trim().is_empty() {
                problems.push("an entry has an empty id".to_owned());
            }
            if entry.reason.trim().is_empty() {
                problems.push(format!("{}: reason must not be empty", entry.key()));
            }
            if !keys.insert(entry.key()) {
                problems.push(format!("{}: listed twice", entry.key()));
            }
            if entry.flaky {
                if entry.check.is_some() {
                    problems.push(format!(
                        "{}: a flaky entry excuses a pass on re-run and names no check",
                        entry.key()
                    ));
                }
                continue;
            }
            match entry.check {
                Some(_) => scoped.insert(&entry.id),
                None => whole.insert(&entry.id),
            };
        }
        for id in whole.intersection(&scoped) {
            problems.push(format!(
                "{id}: listed both as a whole and for single checks; keep one form"
            ));
        }
        if problems.is_empty() {
            Ok(baseline)
        } else {
            Err(BaselineError::Invalid {
                origin: origin.to_owned(),
                problems,
            })
        }
    }

    /// Reads a baseline file.
    pub fn load(path: &Path) -> Result<Self, BaselineError> {
        let text = std::fs::read_to_string(path).map_err(|cause| BaselineError::Read {
            path: path.to_owned(),
            cause,
        })?;
        Self::parse(&path.display().to_string(), &text)
    }

    /// Entries whose scenario is in no catalog.
    pub fn unknown_ids(&self, catalogs: &CatalogSet) -> Vec<String> {
        self.entries
            .iter()
            .filter(|e| catalogs.find(&e.id).is_none())
            .map(|e| e.id.clone())
            .collect()
    }

    /// The entries of `id` that excuse failures (not the `flaky` ones).
    fn entries_for(&self, id: &str) -> impl Iterator<Item = &BaselineEntry> {
        self.entries.iter().filter(move |e| e.id == id && !e.flaky)
    }

    /// Whether an entry with `flaky = true` excuses a pass of `id` that came only on its re-run.
    pub fn excuses_flaky(&self, id: &str) -> bool {
        self.entries.iter().any(|e| e.id == id && e.flaky)
    }

    /// Whether the baseline excuses this outcome of scenario `id`.
    pub fn excuses(&self, id: &str, outcome: Outcome, failure: Option<&Failure>) -> bool {
        if !matches!(outcome, Outcome::Fail | Outcome::Error) {
            return false;
        }
        self.entries_for(id).any(|entry| match &entry.check {
            None => true,
            Some(check) => failure.is_some_and(|f| &f.check == check),
        })
    }

    /// How one result stands against the baseline.
    pub fn judge(&self, id: &str, outcome: Outcome, failure: Option<&Failure>) -> Expectation {
        let listed = self.entries_for(id).next().is_some();
        match outcome {
            Outcome::Pass if listed => Expectation::Stale,
            Outcome::Pass | Outcome::Skip | Outcome::Blocked => Expectation::AsExpected,
            Outcome::Fail | Outcome::Error => {
                if self.excuses(id, outcome, failure) {
                    Expectation::AsExpected
                } else {
                    Expectation::Unexpected
                }
            }
        }
    }

    /// The entries of each listed scenario, for reports.
    pub fn by_id(&self) -> BTreeMap<&str, Vec<&BaselineEntry>> {
        let mut map: BTreeMap<&str, Vec<&BaselineEntry>> = BTreeMap::new();
        for entry in &self.entries {
            map.entry(entry.id.as_str()).or_default().push(entry);
        }
        map
    }
}

/// Judges a result when no baseline is given: every failure and error is unexpected.
pub fn judge_without_baseline(outcome: Outcome) -> Expectation {
    match outcome {
        Outcome::Fail | Outcome::Error => Expectation::Unexpected,
        Outcome::Pass | Outcome::Skip | Outcome::Blocked => Expectation::AsExpected,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flaky_entry_excuses_only_a_pass_on_re_run_and_is_never_stale() {
        let baseline = Baseline::parse(
            "b",
            "[[failure]]\nid = \"A-1\"\nflaky = true\nreason = \"races under load\"\n",
        )
        .expect("valid");
        assert!(baseline.excuses_flaky("A-1"));
        assert!(!baseline.excuses_flaky("A-2"));
        assert_eq!(
            baseline.judge("A-1", Outcome::Pass, None),
            Expectation::AsExpected
        );
        assert_eq!(
            baseline.judge("A-1", Outcome::Fail, Some(&failure("x"))),
            Expectation::Unexpected
        );
        let scoped = Baseline::parse(
            "b",
            "[[failure]]\nid = \"A-1\"\ncheck = \"x\"\nflaky = true\nreason = \"r\"\n",
        );
        assert!(scoped.is_err());
    }

    fn failure(check: &str) -> Failure {
        Failure::new(check, "x").actual("y")
    }

    const TEXT: &str = r#"
# Strict baseline.
[[failure]]
id = "A-1"
reason = "known"

[[failure]]
id = "A-2"
check = "the code"
reason = "known, one assertion"
"#;

    #[test]
    fn whole_and_scoped_entries_excuse_what_they_name() {
        let baseline = Baseline::parse("b.toml", TEXT).unwrap();
        let other = failure("another");
        let code = failure("the code");
        assert_eq!(
            baseline.judge("A-1", Outcome::Fail, Some(&other)),
            Expectation::AsExpected
        );
        assert_eq!(
            baseline.judge("A-1", Outcome::Error, None),
            Expectation::AsExpected
        );
        assert_eq!(
            baseline.judge("A-2", Outcome::Fail, Some(&code)),
            Expectation::AsExpected
        );
        assert_eq!(
            baseline.judge("A-2", Outcome::Fail, Some(&other)),
            Expectation::Unexpected
        );
        assert_eq!(
            baseline.judge("A-2", Outcome::Error, None),
            Expectation::Unexpected
        );
        assert_eq!(
            baseline.judge("A-3", Outcome::Fail, Some(&code)),
            Expectation::Unexpected
        );
    }

    #[test]
    fn a_listed_pass_is_stale_and_a_listed_skip_is_not() {
        let baseline = Baseline::parse("b.toml", TEXT).unwrap();
        assert_eq!(
            baseline.judge("A-1", Outcome::Pass, None),
            Expectation::Stale
        );
        assert_eq!(
            baseline.judge("A-2", Outcome::Pass, None),
            Expectation::Stale
        );
        assert_eq!(
            baseline.judge("A-1", Outcome::Skip, None),
            Expectation::AsExpected
        );
        assert_eq!(
            baseline.judge("A-3", Outcome::Pass, None),
            Expectation::AsExpected
        );
    }

    #[test]
    fn malformed_baselines_are_rejected() {
        let mixed = format!("{TEXT}\n[[failure]]\nid = \"A-2\"\nreason = \"all\"\n");
        let err = Baseline::parse("b.toml", &mixed).unwrap_err().to_string();
        assert!(
            err.contains("both as a whole and for single checks"),
            "{err}"
        );
        let twice = format!("{TEXT}\n[[failure]]\nid = \"A-1\"\nreason = \"again\"\n");
        assert!(
            Baseline::parse("b.toml", &twice)
                .unwrap_err()
                .to_string()
                .contains("listed twice")
        );
        let empty = "[[failure]]\nid = \"A-1\"\nreason = \"\"\n";
        assert!(Baseline::parse("b.toml", empty).is_err());
        assert!(Baseline::parse("b.toml", "[[failure]]\nid = \"A\"\n").is_err());
    }
}
