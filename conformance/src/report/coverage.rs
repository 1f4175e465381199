//! How much of a selection actually ran: the rows that ran (pass, fail or error) against those
//! selected, and why the others were skipped, so that a run which tested little says so. A
//! required row the run could not exercise (*not tested*) is applicable: it counts against the
//! coverage, never as a row the target has no part in.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::check::Outcome;
use crate::runner::ScenarioResult;

/// How many undeclared capabilities the sentence names (the most skipped first).
const LISTED_CAPABILITIES: usize = 8;

/// The coverage of one run.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Coverage {
    /// Rows selected.
    pub selected: usize,
    /// Rows that ran.
    pub ran: usize,
    /// Rows skipped.
    pub skipped: usize,
    /// Skipped rows per capability the target does not declare (a row that lacks two counts
    /// under both).
    pub undeclared: BTreeMap<String, usize>,
    /// Skipped rows for another reason (no suite section, a check's own skip), less those not
    /// tested.
    pub other_skips: usize,
    /// Skipped `must` and `capability` rows that the run could not exercise.
    pub not_tested: usize,
}

impl Coverage {
    /// The coverage of these results.
    pub fn of(results: &[ScenarioResult]) -> Self {
        let mut coverage = Coverage {
            selected: results.len(),
            ..Coverage::default()
        };
        for result in results {
            if !matches!(result.outcome, Outcome::Skip | Outcome::Blocked) {
                coverage.ran += 1;
                continue;
            }
            coverage.skipped += 1;
            if result.not_tested {
                coverage.not_tested += 1;
                continue;
            }
            if result.undeclared.is_empty() {
                coverage.other_skips += 1;
            }
            for capability in &result.undeclared {
                *coverage.undeclared.entry(capability.clone()).or_default() += 1;
            }
        }
        coverage
    }

    /// The percentage of the selected rows that ran (100 for an empty selection).
    pub fn percent(&self) -> f64 {
        if self.selected == 0 {
            100.0
        } else {
            self.ran as f64 * 100.0 / self.selected as f64
        }
    }

    /// Rows the target could run: the selected rows less those that need a capability it does
    /// not declare.
    pub fn applicable(&self) -> usize {
        self.selected - self.not_applicable()
    }

    /// Rows skipped because they need a capability the target does not declare (a row not
    /// tested is applicable).
    pub fn not_applicable(&self) -> usize {
        self.skipped - self.other_skips - self.not_tested
    }

    /// The percentage of the applicable rows that ran (100 when none is applicable).
    pub fn applicable_percent(&self) -> f64 {
        if self.applicable() == 0 {
            100.0
        } else {
            self.ran as f64 * 100.0 / self.applicable() as f64
        }
    }

    /// The capabilities the target lacks, the most needed first: `agent 80, prompt 12`.
    fn lacking(&self) -> String {
        let mut by_count: Vec<(&String, &usize)> = self.undeclared.iter().collect();
        by_count.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
        let mut listed: Vec<String> = by_count
            .iter()
            .take(LISTED_CAPABILITIES)
            .map(|(capability, count)| format!("{capability} {count}"))
            .collect();
        if by_count.len() > LISTED_CAPABILITIES {
            listed.push(format!(
                "{} more in results.json",
                by_count.len() - LISTED_CAPABILITIES
            ));
        }
        listed.join(", ")
    }

    /// For example `27 of 28 applicable rows ran (96.4%); of 114 selected rows, 86 need
    /// capabilities the target does not declare (agent 80, prompt 12); 1 skipped for another
    /// reason`.
    pub fn sentence(&self) -> String {
        let mut text = format!(
            "{} of {} applicable rows ran ({:.1}%)",
            self.ran,
            self.applicable(),
            self.applicable_percent()
        );
        if self.not_applicable() > 0 {
            text.push_str(&format!(
                "; of {} selected rows, {} need capabilities the target does not declare ({})",
                self.selected,
                self.not_applicable(),
                self.lacking()
            ));
        }
        if self.not_tested > 0 {
            text.push_str(&format!(
                "; {} required row(s) not tested (the run could not exercise them, see each row)",
                self.not_tested
            ));
        }
        if self.other_skips > 0 {
            text.push_str(&format!(
                "; {} skipped for other reasons (see each row)",
                self.other_skips
            ));
        }
        text
    }

    /// The warning of a run that judged little: most selected rows need what the target does not
    /// declare (named, so that the reader knows what the verdict leaves out; a capability is
    /// declared only when the target has it), or most applicable rows skipped themselves.
    pub fn warning(&self) -> Option<String> {
        if self.not_applicable() * 2 > self.selected {
            return Some(format!(
                "WARNING: most selected rows did not run: {} of {} need capabilities the target does not declare ({}); the verdict covers only the {} row(s) that ran",
                self.not_applicable(),
                self.selected,
                self.lacking(),
                self.ran
            ));
        }
        let unrun = self.other_skips + self.not_tested;
        (unrun * 2 > self.applicable()).then(|| {
            format!(
                "WARNING: most applicable rows did not run ({unrun} of {} not tested or skipped for other reasons, see each row); the verdict covers only the {} row(s) that ran",
                self.applicable(),
                self.ran
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn coverage(ran: usize, undeclared: &[(&str, usize)], other: usize) -> Coverage {
        let skipped = undeclared
            .iter()
            .map(|(_, n)| n)
            .max()
            .copied()
            .unwrap_or(0)
            + other;
        Coverage {
            selected: ran + skipped,
            ran,
            skipped,
            undeclared: undeclared
                .iter()
                .map(|(c, n)| ((*c).to_owned(), *n))
                .collect(),
            other_skips: other,
            not_tested: 0,
        }
    }

    #[test]
    fn the_sentence_counts_applicable_rows_and_names_what_the_target_lacks() {
        let c = coverage(27, &[("agent", 80), ("prompt", 12)], 7);
        assert_eq!(
            c.sentence(),
            "27 of 34 applicable rows ran (79.4%); of 114 selected rows, 80 need capabilities the target does not declare (agent 80, prompt 12); 7 skipped for other reasons (see each row)"
        );
        let warning = c.warning().expect("most rows are not applicable");
        assert!(
            warning.contains(
                "80 of 114 need capabilities the target does not declare (agent 80, prompt 12)"
            ),
            "{warning}"
        );
        assert!(!warning.contains("--capability"), "{warning}");
        let all = coverage(10, &[], 0);
        assert_eq!(all.sentence(), "10 of 10 applicable rows ran (100.0%)");
        assert!(all.warning().is_none());
        assert_eq!(Coverage::default().percent(), 100.0);
        let self_skipped = coverage(2, &[], 8);
        assert!(
            self_skipped
                .warning()
                .is_some_and(|w| w.contains("8 of 10 not tested or skipped for other reasons"))
        );
    }

    #[test]
    fn a_row_not_tested_is_applicable_and_counts_against_the_coverage() {
        let mut c = coverage(1, &[("ws", 1)], 0);
        c.selected += 3;
        c.skipped += 3;
        c.not_tested = 3;
        assert_eq!(c.applicable(), 4);
        assert_eq!(
            c.sentence(),
            "1 of 4 applicable rows ran (25.0%); of 5 selected rows, 1 need capabilities the target does not declare (ws 1); 3 required row(s) not tested (the run could not exercise them, see each row)"
        );
        assert!(
            c.warning()
                .is_some_and(|w| w.contains("3 of 4 not tested or skipped for other reasons")),
            "{:?}",
            c.warning()
        );
    }
}
