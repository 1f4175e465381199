//! Coverage of the catalog by checks: every row has exactly one check in its own suite, every
//! check has a row, and every registered suite has a catalog.

use std::collections::{BTreeMap, BTreeSet};

use crate::catalog::CatalogSet;
use crate::check::Check;
use crate::suites::Suite;

/// The checks of one suite.
#[derive(Debug, Clone)]
pub struct SuiteChecks {
    /// The suite's name.
    pub name: String,
    /// Its checks.
    pub checks: Vec<Check>,
}

/// The checks of every registered suite.
pub fn registered(suites: &[Suite]) -> Vec<SuiteChecks> {
    suites
        .iter()
        .map(|suite| SuiteChecks {
            name: suite.name.to_owned(),
            checks: (suite.checks)(),
        })
        .collect()
}

/// Every coverage problem, one sentence each; empty when the catalog and the checks agree.
pub fn problems(catalogs: &CatalogSet, suites: &[SuiteChecks]) -> Vec<String> {
    let mut problems = Vec::new();
    let mut registered: BTreeMap<&str, &SuiteChecks> = BTreeMap::new();
    for suite in suites {
        if registered.insert(suite.name.as_str(), suite).is_some() {
            problems.push(format!("suite {} is registered twice", suite.name));
        }
    }
    let mut seen_ids: BTreeMap<&str, &str> = BTreeMap::new();
    for suite in suites {
        for check in &suite.checks {
            if let Some(other) = seen_ids.insert(check.id(), suite.name.as_str()) {
                problems.push(format!(
                    "check {} is registered twice (suites {other} and {})",
                    check.id(),
                    suite.name
                ));
            }
            if check.how().trim().is_empty() {
                problems.push(format!(
                    "check {} has no `how` text (say how it checks the scenario)",
                    check.id()
                ));
            }
        }
    }
    let names: BTreeSet<&str> = catalogs
        .catalogs
        .iter()
        .map(|c| c.suite.as_str())
        .chain(registered.keys().copied())
        .collect();
    for name in names {
        let catalog = catalogs.suite(name);
        let suite = registered.get(name);
        match (catalog, suite) {
            (None, Some(_)) => problems.push(format!(
                "suite {name} has checks but no catalog file conformance/catalog/{name}.toml"
            )),
            (Some(_), None) => problems.push(format!(
                "suite {name} has a catalog but no module: declare `pub mod {name};` and register it in `all()` in conformance/src/suites.rs"
            )),
            _ => {}
        }
        let rows: BTreeSet<&str> = catalog
            .map(|c| c.scenarios.iter().map(|s| s.id.as_str()).collect())
            .unwrap_or_default();
        let checks: BTreeSet<&str> = suite
            .map(|s| s.checks.iter().map(Check::id).collect())
            .unwrap_or_default();
        for id in rows.difference(&checks) {
            let elsewhere = seen_ids.get(id).filter(|owner| **owner != name);
            problems.push(match elsewhere {
                Some(owner) => format!(
                    "{name}: row {id} has its check in suite {owner}; register it in suite {name}"
                ),
                None => format!("{name}: row {id} has no check"),
            });
        }
        for id in checks.difference(&rows) {
            problems.push(format!(
                "{name}: check {id} has no row in conformance/catalog/{name}.toml"
            ));
        }
    }
    problems
}

/// Errata IDs cited by catalog rows that `errata_text` (the text of `ERRATA.md`) never mentions.
pub fn missing_errata(catalogs: &CatalogSet, errata_text: &str) -> Vec<String> {
    let mut missing = BTreeSet::new();
    for scenario in catalogs.scenarios() {
        for erratum in &scenario.errata {
            if !mentions(errata_text, erratum) {
                missing.insert(format!("{} cites {erratum}", scenario.id));
            }
        }
    }
    missing.into_iter().collect()
}

/// Whether `text` contains `id` as a whole word (so `E-ACP-1` does not match `E-ACP-10`).
fn mentions(text: &str, id: &str) -> bool {
    text.match_indices(id).any(|(at, _)| {
        let after = text[at + id.len()..].chars().next();
        let before = text[..at].chars().next_back();
        let boundary = |c: Option<char>| {
            c.is_none_or(|c| !(c.is_ascii_alphanumeric() || c == '-' || c == '_'))
        };
        boundary(before) && boundary(after)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errata_are_matched_as_whole_words() {
        assert!(mentions("### E-ACP-01: text", "E-ACP-01"));
        assert!(!mentions("### E-ACP-010: text", "E-ACP-01"));
        assert!(!mentions("XE-ACP-01", "E-ACP-01"));
    }
}
