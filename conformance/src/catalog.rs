//! The scenario catalog: one TOML file per suite, loaded and validated into [`Catalog`]s.
//!
//! The format is described in `conformance/catalog/README.md`. Catalogs are compiled into the
//! binary (see [`builtin`]) so that `ski-conformance` runs anywhere; `--catalog-dir` loads them
//! from files instead.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Errors of loading or validating a catalog.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CatalogError {
    /// A catalog file could not be read.
    #[error("cannot read catalog {path}: {cause}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why (shown in the message, so not also a `source`).
        cause: std::io::Error,
    },
    /// A catalog is not valid TOML of the catalog format.
    #[error("catalog {origin} is not valid: {message}")]
    Parse {
        /// The file name or other origin.
        origin: String,
        /// The parser's message, with line and column.
        message: String,
    },
    /// A catalog parsed but breaks a rule of the format.
    #[error("catalog {origin}: {problems}", problems = .problems.join("; "))]
    Invalid {
        /// The file name or other origin.
        origin: String,
        /// Every rule broken, one sentence each.
        problems: Vec<String>,
    },
    /// Two catalogs declare the same suite or the same scenario ID.
    #[error("duplicate {what} {name} in catalogs {first} and {second}")]
    Duplicate {
        /// `suite` or `scenario`.
        what: &'static str,
        /// The duplicated name.
        name: String,
        /// Where it appeared first.
        first: String,
        /// Where it appeared again.
        second: String,
    },
}

/// What a scenario exercises.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Category {
    /// The main path works as specified.
    HappyPath,
    /// Unusual but valid input or sequencing.
    EdgeCase,
    /// Invalid input or a failing peer produces the specified error.
    Error,
    /// Limits: sizes, counts, time thresholds.
    Boundary,
    /// Concurrent requests, connections or sessions.
    Concurrent,
    /// Isolation, authorisation, injection.
    Security,
    /// Requirements on the test infrastructure itself.
    TestInfra,
}

impl Category {
    /// Every category, in report order.
    pub const ALL: [Category; 7] = [
        Category::HappyPath,
        Category::EdgeCase,
        Category::Error,
        Category::Boundary,
        Category::Concurrent,
        Category::Security,
        Category::TestInfra,
    ];

    /// The kebab-case name used in catalogs and on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            Category::HappyPath => "happy-path",
            Category::EdgeCase => "edge-case",
            Category::Error => "error",
            Category::Boundary => "boundary",
            Category::Concurrent => "concurrent",
            Category::Security => "security",
            Category::TestInfra => "test-infra",
        }
    }
}

impl fmt::Display for Category {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Category {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Category::ALL
            .into_iter()
            .find(|c| c.as_str() == s)
            .ok_or_else(|| {
                format!(
                    "unknown category {s:?} (known: {})",
                    Category::ALL.map(Category::as_str).join(", ")
                )
            })
    }
}

/// How binding the checked behaviour is: the row's tier, which decides whether its failure
/// fails the run.
///
/// `must` and `capability` rows decide the verdict; `should` and `interop` rows are warnings
/// ("passed, not strict") unless the run is strict; `info` rows are recorded and never asserted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Level {
    /// Required by the spec.
    Must,
    /// Required by the spec where the target has the optional feature the row needs (it
    /// advertises it, or its profile declares it).
    Capability,
    /// Recommended by the spec.
    Should,
    /// Agreement with public implementations rather than with the spec text.
    Interop,
    /// Recorded for the reader, never asserted.
    Info,
}

impl Level {
    /// Every level, most binding first.
    pub const ALL: [Level; 5] = [
        Level::Must,
        Level::Capability,
        Level::Should,
        Level::Interop,
        Level::Info,
    ];

    /// The name used in catalogs.
    pub fn as_str(self) -> &'static str {
        match self {
            Level::Must => "must",
            Level::Capability => "capability",
            Level::Should => "should",
            Level::Interop => "interop",
            Level::Info => "info",
        }
    }

    /// Whether a failure of a row of this level fails the run: `must` and `capability` always,
    /// `should` and `interop` only in a strict run, `info` never.
    pub fn decides_verdict(self, strict: bool) -> bool {
        match self {
            Level::Must | Level::Capability => true,
            Level::Should | Level::Interop => strict,
            Level::Info => false,
        }
    }

    /// Whether a row of this level that could not be exercised is *not tested* rather than not
    /// applicable: the levels that decide every verdict.
    pub fn is_required(self) -> bool {
        matches!(self, Level::Must | Level::Capability)
    }
}

impl fmt::Display for Level {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The timeout class of a scenario; the runner scales it by `--timeout-multiplier`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum TimeoutClass {
    /// A quick exchange: 5 s.
    Short,
    /// The default: 20 s.
    #[default]
    Normal,
    /// Several processes, restarts or deliberate waits: 60 s.
    Long,
}

impl TimeoutClass {
    /// The unscaled duration of this class.
    pub fn base(self) -> Duration {
        match self {
            TimeoutClass::Short => Duration::from_secs(5),
            TimeoutClass::Normal => Duration::from_secs(20),
            TimeoutClass::Long => Duration::from_secs(60),
        }
    }

    /// The name used in catalogs.
    pub fn as_str(self) -> &'static str {
        match self {
            TimeoutClass::Short => "short",
            TimeoutClass::Normal => "normal",
            TimeoutClass::Long => "long",
        }
    }
}

/// One scenario: a catalog row.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// The stable ID (the scheme is in `conformance/catalog/README.md`).
    pub id: String,
    /// A short English title.
    pub title: String,
    /// What the scenario exercises.
    pub category: Category,
    /// How binding the behaviour is.
    pub level: Level,
    /// The spec's precondition, verbatim.
    pub given: String,
    /// The spec's action, verbatim.
    pub when: String,
    /// The spec's expected outcome, verbatim.
    pub then: String,
    /// The document and scenario number or heading.
    pub source: String,
    /// The text of the protocol the row enforces: a section of its documentation or a schema
    /// field (for a row of a seed document, the protocol text behind it, or that it goes beyond).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cites: Option<String>,
    /// The document's own words for `then` when they are not English (`then` is then an English
    /// rendering).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub then_original: Option<String>,
    /// Capabilities the target must declare; otherwise the outcome is skip.
    #[serde(default)]
    pub requires: Vec<String>,
    /// Errata entries that apply.
    #[serde(default)]
    pub errata: Vec<String>,
    /// The timeout class.
    #[serde(default)]
    pub timeout: TimeoutClass,
    /// The suite this row belongs to (set from the file header, never written in a row).
    #[serde(skip_deserializing, default)]
    pub suite: String,
    /// The catalog's `not_tested_without` (set from the file header, never written in a row).
    #[serde(skip)]
    pub not_tested_without: Vec<String>,
}

impl Scenario {
    /// Whether this row, skipped because the target lacks `undeclared` (empty: the check skipped
    /// itself, blocked), went *not tested*: it decides every verdict, and it is not a row the
    /// target has no part in (a role, transport or optional feature it lacks), only one the run
    /// could not reach.
    pub fn not_tested_without(&self, undeclared: &[String]) -> bool {
        self.level.is_required()
            && undeclared
                .iter()
                .all(|capability| self.not_tested_without.contains(capability))
    }
}

/// The raw shape of one catalog file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CatalogFile {
    suite: String,
    #[serde(default)]
    part: Option<String>,
    document: String,
    #[serde(default)]
    not_tested_without: Vec<String>,
    #[serde(default)]
    capabilities: BTreeMap<String, String>,
    #[serde(default)]
    scenario: Vec<Scenario>,
}

/// One suite's scenarios, validated.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Catalog {
    /// The suite name (`--suite`).
    pub suite: String,
    /// The spec document the rows come from.
    pub document: String,
    /// The name of this file's part of its suite (`v2` for `acp-v2.toml`), or `None` for the
    /// suite's own file. A part's rows and capabilities join its suite's catalog when the set is
    /// built ([`CatalogSet::new`]), so that rows of another document generation (ACP's v2
    /// draft) keep a file of their own and run with the suite's checks and target sections.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub part: Option<String>,
    /// Where the catalog came from (a file name), for messages.
    pub origin: String,
    /// Capabilities that say what a run could make the target do rather than what the target
    /// offers: a `must` or `capability` row skipped only for lack of these is *not tested*, not
    /// inapplicable.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub not_tested_without: Vec<String>,
    /// The capabilities this catalog declares (its `[capabilities]` table): name, then what a
    /// target that declares it offers. A row may require these and those of its family
    /// ([`family`]: `aof` and `aof-ski` share theirs).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub capabilities: BTreeMap<String, String>,
    /// The rows, in file order.
    pub scenarios: Vec<Scenario>,
}

impl Catalog {
    /// Parses and validates one catalog from TOML text; `origin` names it in errors.
    pub fn parse(origin: &str, text: &str) -> Result<Self, CatalogError> {
        let file: CatalogFile = toml::from_str(text).map_err(|e| CatalogError::Parse {
            origin: origin.to_owned(),
            message: ski::exit::parse_error_line(e.message(), e.span(), text),
        })?;
        let mut catalog = Catalog {
            suite: file.suite,
            document: file.document,
            part: file.part,
            origin: origin.to_owned(),
            not_tested_without: file.not_tested_without,
            capabilities: file.capabilities,
            scenarios: file.scenario,
        };
        for scenario in &mut catalog.scenarios {
            scenario.suite.clone_from(&catalog.suite);
            scenario
                .not_tested_without
                .clone_from(&catalog.not_tested_without);
        }
        let problems = catalog.problems();
        if problems.is_empty() {
            Ok(catalog)
        } else {
            Err(CatalogError::Invalid {
                origin: origin.to_owned(),
                problems,
            })
        }
    }

    /// Reads and validates one catalog file.
    pub fn load(path: &Path) -> Result<Self, CatalogError> {
        let text = std::fs::read_to_string(path).map_err(|cause| CatalogError::Read {
            path: path.to_owned(),
            cause,
        })?;
        let origin = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| path.display().to_string());
        Self::parse(&origin, &text)
    }

    /// Every rule of the format this catalog breaks.
    fn problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        if !is_name(&self.suite) {
            problems.push(format!(
                "suite {:?} must be lower-case letters, digits and dashes",
                self.suite
            ));
        }
        let expected = match &self.part {
            Some(part) => format!("{}-{part}", self.suite),
            None => self.suite.clone(),
        };
        if let Some(part) = &self.part
            && !is_name(part)
        {
            problems.push(format!(
                "part {part:?} must be lower-case letters, digits and dashes"
            ));
        }
        if let Some(stem) = self.origin.strip_suffix(".toml")
            && stem != expected
        {
            problems.push(format!(
                "suite {:?}{} must match the file name {:?}",
                self.suite,
                self.part
                    .as_ref()
                    .map(|p| format!(" part {p:?}"))
                    .unwrap_or_default(),
                self.origin
            ));
        }
        if self.document.trim().is_empty() {
            problems.push("document must not be empty".to_owned());
        }
        for (capability, about) in &self.capabilities {
            if !is_name(capability) {
                problems.push(format!(
                    "capabilities: {capability:?} must be lower-case letters, digits and dashes"
                ));
            }
            if about.trim().is_empty() {
                problems.push(format!(
                    "capabilities: {capability:?} must say what it means"
                ));
            }
        }
        for capability in &self.not_tested_without {
            if !is_name(capability) {
                problems.push(format!(
                    "not_tested_without: capability {capability:?} must be lower-case letters, digits and dashes"
                ));
            }
        }
        let mut seen = BTreeSet::new();
        for (index, row) in self.scenarios.iter().enumerate() {
            let at = if row.id.is_empty() {
                format!("row {}", index + 1)
            } else {
                row.id.clone()
            };
            if !is_id(&row.id) {
                problems.push(format!(
                    "{at}: id {:?} must be letters, digits, '.', '_' or '-'",
                    row.id
                ));
            }
            if !row.id.is_empty() && !seen.insert(row.id.as_str()) {
                problems.push(format!("{at}: duplicate id"));
            }
            for (field, value) in [
                ("title", &row.title),
                ("given", &row.given),
                ("when", &row.when),
                ("then", &row.then),
                ("source", &row.source),
            ] {
                if value.trim().is_empty() {
                    problems.push(format!("{at}: {field} must not be empty"));
                }
            }
            for (field, value) in [("cites", &row.cites), ("then_original", &row.then_original)] {
                if value.as_ref().is_some_and(|v| v.trim().is_empty()) {
                    problems.push(format!("{at}: {field} must not be empty when present"));
                }
            }
            for capability in &row.requires {
                if !is_name(capability) {
                    problems.push(format!(
                        "{at}: capability {capability:?} must be lower-case letters, digits and dashes"
                    ));
                }
            }
            for erratum in &row.errata {
                if !erratum.starts_with("E-") || !is_id(erratum) {
                    problems.push(format!(
                        "{at}: errata entry {erratum:?} must look like E-ACP-01"
                    ));
                }
            }
        }
        problems
    }

    /// The row with this ID.
    pub fn get(&self, id: &str) -> Option<&Scenario> {
        self.scenarios.iter().find(|s| s.id == id)
    }
}

/// Every catalog, checked together: suites and scenario IDs are unique across files.
#[derive(Debug, Clone, Default, Serialize)]
pub struct CatalogSet {
    /// The catalogs in suite-name order.
    pub catalogs: Vec<Catalog>,
}

impl CatalogSet {
    /// Builds a set from catalogs, rejecting duplicate suites and duplicate IDs across suites;
    /// a part (`part = "v2"`) joins its suite's catalog, after its IDs are checked.
    pub fn new(catalogs: Vec<Catalog>) -> Result<Self, CatalogError> {
        let mut owners: BTreeMap<&str, &str> = Default::default();
        for catalog in &catalogs {
            for row in &catalog.scenarios {
                if let Some(first) = owners.insert(&row.id, &catalog.origin) {
                    return Err(CatalogError::Duplicate {
                        what: "scenario",
                        name: row.id.clone(),
                        first: first.to_owned(),
                        second: catalog.origin.clone(),
                    });
                }
            }
        }
        let (parts, mut catalogs): (Vec<Catalog>, Vec<Catalog>) =
            catalogs.into_iter().partition(|c| c.part.is_some());
        for part in parts {
            let Some(whole) = catalogs.iter_mut().find(|c| c.suite == part.suite) else {
                return Err(CatalogError::Invalid {
                    origin: part.origin.clone(),
                    problems: vec![format!(
                        "part of suite {:?}, which has no catalog",
                        part.suite
                    )],
                });
            };
            for (name, about) in part.capabilities {
                if whole.capabilities.contains_key(&name) {
                    return Err(CatalogError::Duplicate {
                        what: "capability",
                        name,
                        first: whole.origin.clone(),
                        second: part.origin.clone(),
                    });
                }
                whole.capabilities.insert(name, about);
            }
            whole.scenarios.extend(part.scenarios);
        }
        catalogs.sort_by(|a, b| a.suite.cmp(&b.suite));
        for pair in catalogs.windows(2) {
            if pair[0].suite == pair[1].suite {
                return Err(CatalogError::Duplicate {
                    what: "suite",
                    name: pair[0].suite.clone(),
                    first: pair[0].origin.clone(),
                    second: pair[1].origin.clone(),
                });
            }
        }
        let set = Self { catalogs };
        for catalog in &set.catalogs {
            let vocabulary = set.capabilities(&catalog.suite);
            let undeclared = |name: &String| !vocabulary.contains(name);
            let mut problems: Vec<String> = catalog
                .not_tested_without
                .iter()
                .filter(|name| undeclared(name))
                .map(|name| {
                    format!(
                        "not_tested_without: {}",
                        unknown_capability(name, &vocabulary)
                    )
                })
                .collect();
            for row in &catalog.scenarios {
                for name in row.requires.iter().filter(|name| undeclared(name)) {
                    problems.push(format!(
                        "{}: {}",
                        row.id,
                        unknown_capability(name, &vocabulary)
                    ));
                }
            }
            if !problems.is_empty() {
                return Err(CatalogError::Invalid {
                    origin: catalog.origin.clone(),
                    problems,
                });
            }
        }
        Ok(set)
    }

    /// Parses catalogs from `(file name, text)` pairs.
    pub fn parse_all<'a>(
        files: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Result<Self, CatalogError> {
        let catalogs = files
            .into_iter()
            .map(|(origin, text)| Catalog::parse(origin, text))
            .collect::<Result<Vec<_>, _>>()?;
        Self::new(catalogs)
    }

    /// Loads every `*.toml` file of a directory.
    pub fn load_dir(dir: &Path) -> Result<Self, CatalogError> {
        let read_err = |cause| CatalogError::Read {
            path: dir.to_owned(),
            cause,
        };
        let mut paths = Vec::new();
        for entry in std::fs::read_dir(dir).map_err(read_err)? {
            let path = entry.map_err(read_err)?.path();
            if path.extension().is_some_and(|e| e == "toml") {
                paths.push(path);
            }
        }
        paths.sort();
        let catalogs = paths
            .iter()
            .map(|p| Catalog::load(p))
            .collect::<Result<Vec<_>, _>>()?;
        Self::new(catalogs)
    }

    /// The catalog of one suite.
    pub fn suite(&self, name: &str) -> Option<&Catalog> {
        self.catalogs.iter().find(|c| c.suite == name)
    }

    /// Every scenario of every suite, in suite order then file order.
    pub fn scenarios(&self) -> impl Iterator<Item = &Scenario> {
        self.catalogs.iter().flat_map(|c| c.scenarios.iter())
    }

    /// The capability vocabulary of a suite: what its family's catalogs declare.
    pub fn capabilities(&self, suite: &str) -> BTreeSet<String> {
        self.family_catalogs(suite)
            .flat_map(|catalog| catalog.capabilities.keys().cloned())
            .collect()
    }

    /// The catalogs of a suite's family (the suite and its ski-only twin).
    fn family_catalogs(&self, suite: &str) -> impl Iterator<Item = &Catalog> {
        let family = family(suite).to_owned();
        self.catalogs
            .iter()
            .filter(move |catalog| crate::catalog::family(&catalog.suite) == family)
    }

    /// The scenario with this ID, in any suite.
    pub fn find(&self, id: &str) -> Option<&Scenario> {
        self.scenarios().find(|s| s.id == id)
    }
}

/// The family of a suite: its name without the `-ski` of ski's own decisions, so that `aof`
/// and `aof-ski` share one capability vocabulary.
pub fn family(suite: &str) -> &str {
    suite.strip_suffix("-ski").unwrap_or(suite)
}

/// "unknown capability X", with the nearest name the vocabulary knows when one is close.
pub fn unknown_capability(name: &str, vocabulary: &BTreeSet<String>) -> String {
    match crate::vocabulary::nearest(name, vocabulary.iter().map(String::as_str)) {
        Some(near) => format!("unknown capability {name:?} (did you mean {near:?}?)"),
        None => format!("unknown capability {name:?}"),
    }
}

/// The catalogs compiled into this build from `conformance/catalog/*.toml`.
pub fn builtin() -> Result<CatalogSet, CatalogError> {
    CatalogSet::parse_all(BUILTIN.iter().copied())
}

/// `(file name, text)` of every catalog file present when this crate was built.
pub const BUILTIN: &[(&str, &str)] = include!(concat!(env!("OUT_DIR"), "/catalogs.rs"));

fn is_name(s: &str) -> bool {
    !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !s.starts_with('-')
}

fn is_id(s: &str) -> bool {
    !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
suite = "demo"
document = "demo.md"

[[scenario]]
id = "D-01"
title = "works"
category = "happy-path"
level = "must"
given = "g"
when = "w"
then = "t"
source = "demo.md, 1"
requires = ["stdio"]
timeout = "short"
"#;

    #[test]
    fn a_valid_catalog_parses_with_defaults() {
        let catalog = Catalog::parse("demo.toml", GOOD).unwrap();
        assert_eq!(catalog.scenarios.len(), 1);
        let row = &catalog.scenarios[0];
        assert_eq!(row.suite, "demo");
        assert_eq!(row.timeout, TimeoutClass::Short);
        assert!(row.errata.is_empty());
    }

    #[test]
    fn every_broken_rule_is_reported() {
        let text = GOOD.replace("suite = \"demo\"", "suite = \"other\"")
            + r#"
[[scenario]]
id = "D-01"
title = ""
category = "happy-path"
level = "must"
given = "g"
when = "w"
then = " "
source = "s"
errata = ["ACP-1"]
"#;
        let err = Catalog::parse("demo.toml", &text).unwrap_err().to_string();
        assert!(err.contains("must match the file name"), "{err}");
        assert!(err.contains("D-01: duplicate id"), "{err}");
        assert!(err.contains("D-01: title must not be empty"), "{err}");
        assert!(err.contains("D-01: then must not be empty"), "{err}");
        assert!(err.contains("errata entry \"ACP-1\""), "{err}");
    }

    #[test]
    fn unknown_categories_levels_timeouts_and_fields_are_rejected() {
        for (from, to) in [
            ("\"happy-path\"", "\"happy\""),
            ("level = \"must\"", "level = \"may\""),
            ("\"short\"", "\"brief\""),
            ("source =", "sauce = \"x\"\nsource ="),
        ] {
            let text = GOOD.replace(from, to);
            let err = Catalog::parse("demo.toml", &text).unwrap_err();
            assert!(matches!(err, CatalogError::Parse { .. }), "{from}: {err}");
        }
    }

    #[test]
    fn ids_are_unique_across_suites() {
        let other = GOOD.replace("\"demo\"", "\"other\"");
        let err = CatalogSet::parse_all([("demo.toml", GOOD), ("other.toml", other.as_str())])
            .unwrap_err();
        assert!(err.to_string().contains("duplicate scenario D-01"), "{err}");
    }

    #[test]
    fn a_part_joins_its_suite_with_its_rows_capabilities_and_not_tested_without() {
        let whole = GOOD.replace(
            "document = \"demo.md\"",
            "document = \"demo.md\"\n[capabilities]\nstdio = \"s\"",
        );
        let part = GOOD
            .replace(
                "document = \"demo.md\"",
                "document = \"demo.md\"\npart = \"v2\"\nnot_tested_without = [\"v2\"]\n[capabilities]\nv2 = \"speaks 2\"",
            )
            .replace("D-01", "D-V2-01")
            .replace("[\"stdio\"]", "[\"stdio\", \"v2\"]");
        let set = CatalogSet::parse_all([
            ("demo.toml", whole.as_str()),
            ("demo-v2.toml", part.as_str()),
        ])
        .unwrap();
        assert_eq!(set.catalogs.len(), 1);
        let demo = set.suite("demo").unwrap();
        assert_eq!(demo.scenarios.len(), 2);
        assert!(demo.capabilities.contains_key("v2"));
        let row = set.find("D-V2-01").unwrap();
        assert_eq!(row.suite, "demo");
        assert_eq!(row.not_tested_without, ["v2"]);
        // A part must be named <suite>-<part>, and needs its suite's own file.
        let err = CatalogSet::parse_all([
            ("demo.toml", whole.as_str()),
            ("demo-v3.toml", part.as_str()),
        ])
        .unwrap_err();
        assert!(
            err.to_string().contains("must match the file name"),
            "{err}"
        );
        let err = CatalogSet::parse_all([("demo-v2.toml", part.as_str())]).unwrap_err();
        assert!(err.to_string().contains("which has no catalog"), "{err}");
        let again = part.replace("D-V2-01", "D-01");
        let err = CatalogSet::parse_all([
            ("demo.toml", whole.as_str()),
            ("demo-v2.toml", again.as_str()),
        ])
        .unwrap_err();
        assert!(err.to_string().contains("duplicate scenario D-01"), "{err}");
    }

    #[test]
    fn builtin_catalogs_are_valid() {
        builtin().unwrap();
    }

    #[test]
    fn only_must_and_capability_rows_decide_every_verdict() {
        let decides: Vec<(Level, bool, bool)> = Level::ALL
            .into_iter()
            .map(|l| (l, l.decides_verdict(false), l.decides_verdict(true)))
            .collect();
        assert_eq!(
            decides,
            [
                (Level::Must, true, true),
                (Level::Capability, true, true),
                (Level::Should, false, true),
                (Level::Interop, false, true),
                (Level::Info, false, false),
            ]
        );
    }

    #[test]
    fn a_required_row_skipped_for_what_the_run_could_not_reach_is_not_tested() {
        let text = GOOD.replace(
            "document = \"demo.md\"",
            "document = \"demo.md\"\nnot_tested_without = [\"prompt\"]",
        );
        let catalog = Catalog::parse("demo.toml", &text).unwrap();
        let mut row = catalog.scenarios[0].clone();
        let lacks = |names: &[&str]| names.iter().map(|n| (*n).to_owned()).collect::<Vec<_>>();
        assert!(row.not_tested_without(&lacks(&["prompt"])));
        assert!(row.not_tested_without(&[]), "a check that skipped itself");
        assert!(!row.not_tested_without(&lacks(&["prompt", "ws"])));
        row.level = Level::Capability;
        assert!(row.not_tested_without(&lacks(&["prompt"])));
        for level in [Level::Should, Level::Interop, Level::Info] {
            row.level = level;
            assert!(!row.not_tested_without(&lacks(&["prompt"])), "{level}");
        }
    }

    #[test]
    fn every_acp_row_cites_the_protocol_and_reads_in_english() {
        let catalogs = builtin().unwrap();
        let acp = catalogs.suite("acp").unwrap();
        for capability in ["session", "prompt", "hold"] {
            assert!(
                acp.not_tested_without.iter().any(|c| c == capability),
                "{capability}"
            );
        }
        for row in &acp.scenarios {
            assert!(row.cites.is_some(), "{} cites nothing", row.id);
            let foreign = |t: &str| {
                t.chars().any(|c| {
                    ('\u{3000}'..='\u{9fff}').contains(&c) || ('\u{ff00}'..='\u{ffef}').contains(&c)
                })
            };
            assert!(
                !foreign(&row.then),
                "{}: then is not English: {}",
                row.id,
                row.then
            );
            if let Some(original) = &row.then_original {
                assert!(
                    foreign(original),
                    "{}: then_original is the document's words",
                    row.id
                );
            }
        }
    }
}
