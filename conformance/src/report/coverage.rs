//! How much of a selection actually ran: the rows that ran (pass, fail or error) against those
//! selected, and why the others were skipped, so that a run which tested little says so.

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
    /// Skipped rows for another reason (no suite section, a check's own skip).
    pub other_skips: usize,
}

impl Coverage {
    /// The coverage of these results.
    pub fn of(results: &[ScenarioResult]) -> Self {
        let mut coverage = Coverage {
            selected: results.len(),
            ..Coverage::default()
        };
        for result in results {
            if result.outcome != Outcome::Skip {
                coverage.ran += 1;
                continue;
            }
            coverage.skipped += 1;
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

    /// Whether most of the selection did not run: such a run says little about the target.
    pub fn mostly_skipped(&self) -> bool {
        self.skipped * 2 > self.selected
    }

    /// For example `27 of 114 rows ran (23.7%); 87 skipped: 80 for undeclared capabilities
    /// (agent 80, prompt 12), 7 for other reasons`.
    pub fn sentence(&self) -> String {
        let mut text = format!(
            "{} of {} rows ran ({:.1}%)",
            self.ran,
            self.selected,
            self.percent()
        );
        if self.skipped == 0 {
            return text;
        }
        text.push_str(&format!("; {} skipped", self.skipped));
        let for_capabilities = self.skipped - self.other_skips;
        let mut reasons = Vec::new();
        if for_capabilities > 0 {
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
            reasons.push(format!(
                "{for_capabilities} for undeclared capabilities ({})",
                listed.join(", ")
            ));
        }
        if self.other_skips > 0 {
            reasons.push(format!("{} for other reasons", self.other_skips));
        }
        text.push_str(&format!(": {}", reasons.join(", ")));
        text
    }

    /// The warning a mostly skipped run gets, if it is one.
    pub fn warning(&self) -> Option<String> {
        self.mostly_skipped().then(|| {
            format!(
                "WARNING: most rows did not run ({} of {} skipped), so this result says little about the target; declare what it supports (--capability, or capabilities in its profile) or select fewer rows",
                self.skipped, self.selected
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
        }
    }

    #[test]
    fn the_sentence_says_how_much_ran_and_why_the_rest_did_not() {
        let c = coverage(27, &[("agent", 80), ("prompt", 12)], 7);
        assert_eq!(
            c.sentence(),
            "27 of 114 rows ran (23.7%); 87 skipped: 80 for undeclared capabilities (agent 80, prompt 12), 7 for other reasons"
        );
        assert!(c.mostly_skipped());
        assert!(c.warning().is_some());
        let all = coverage(10, &[], 0);
        assert_eq!(all.sentence(), "10 of 10 rows ran (100.0%)");
        assert!(all.warning().is_none());
        assert_eq!(Coverage::default().percent(), 100.0);
    }
}
