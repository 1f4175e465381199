//! A defect corpus as libtest-mimic trials: each defect of a deliberately broken adapter must fail
//! the rows it names, each for the row's own reason, and leave the rows it names passing (a defect
//! the document allows fails none); every row named passes against the reference. The root of the trials program declares
//! it.

use std::collections::BTreeSet;

use libtest_mimic::{Failed, Trial};
use ski_conformance::Outcome;
use ski_conformance::report::junit::details;
use ski_conformance::runner::ScenarioResult;

/// One way an adapter is broken.
pub struct Defect {
    /// How the broken adapter is told to have it.
    pub name: &'static str,
    /// What the adapter then does wrong.
    pub what: &'static str,
    /// The rows that must fail against it, each with words its failure must report (a failure
    /// for another reason does not count).
    pub fails: &'static [(&'static str, &'static str)],
    /// Rows that must still pass against it (the document does not ask what it breaks).
    pub passes: &'static [&'static str],
}

/// Runs row `id` against the adapter with `defect`, or against the reference when `None`.
pub type RunRow = fn(&str, Option<&str>) -> Result<ScenarioResult, String>;

/// The trials of `defects`, after the corpus's own `more` trials.
pub fn trials(defects: &'static [Defect], run: RunRow, more: Vec<Trial>) -> Vec<Trial> {
    let mut trials = more;
    let mut rows = BTreeSet::new();
    for defect in defects {
        for &(id, reason) in defect.fails {
            rows.insert(id);
            trials.push(Trial::test(
                format!("defect_fails::{}::{id}", defect.name),
                move || {
                    let said = expect(run, id, Some(defect), Outcome::Fail)?;
                    if said.contains(reason) {
                        return Ok(());
                    }
                    Err(Failed::from(format!(
                        "{id} failed against an adapter where {} for another reason than \
                         {reason:?}:\n{said}",
                        defect.what
                    )))
                },
            ));
        }
        for &id in defect.passes {
            rows.insert(id);
            trials.push(Trial::test(
                format!("defect_passes::{}::{id}", defect.name),
                move || expect(run, id, Some(defect), Outcome::Pass).map(drop),
            ));
        }
    }
    for id in rows {
        trials.push(Trial::test(format!("reference_passes::{id}"), move || {
            expect(run, id, None, Outcome::Pass).map(drop)
        }));
    }
    trials
}

/// Fails unless row `id` has `outcome` against `defect` (or the reference); returns what the row
/// reported.
fn expect(
    run: RunRow,
    id: &str,
    defect: Option<&Defect>,
    outcome: Outcome,
) -> Result<String, Failed> {
    let result = run(id, defect.map(|d| d.name)).map_err(Failed::from)?;
    let said = details(&result);
    if result.outcome == outcome {
        return Ok(said);
    }
    let against = match defect {
        Some(defect) => format!("an adapter where {}", defect.what),
        None => "the reference".to_owned(),
    };
    Err(Failed::from(format!(
        "{id} against {against}: expected {}, got {}\n{said}",
        outcome.as_str(),
        result.outcome.as_str(),
    )))
}
