//! The catalog and the checks agree: every row of every `conformance/catalog/*.toml` has a check
//! registered in its suite, every registered check has a row, and every cited erratum exists.

use ski_conformance::coverage::{self, SuiteChecks};
use ski_conformance::{CatalogSet, Check, CheckResult, Ctx, catalog, suites};

#[test]
fn every_catalog_row_has_a_check_and_every_check_a_row() {
    let catalogs = catalog::builtin().expect("the built-in catalogs are valid");
    let on_disk =
        CatalogSet::load_dir(&std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("catalog"))
            .expect("the catalog files are valid");
    assert!(
        on_disk.catalogs == catalogs.catalogs,
        "the built-in catalogs differ from conformance/catalog: rebuild"
    );
    let registry = coverage::registered(&suites::all());
    let problems = coverage::problems(&catalogs, &registry);
    assert!(
        problems.is_empty(),
        "the catalog and the checks disagree:\n  {}",
        problems.join("\n  ")
    );
}

#[test]
fn every_cited_erratum_is_in_errata_md() {
    let catalogs = catalog::builtin().expect("the built-in catalogs are valid");
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("ERRATA.md");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    let missing = coverage::missing_errata(&catalogs, &text);
    assert!(
        missing.is_empty(),
        "rows cite errata that ERRATA.md does not define:\n  {}",
        missing.join("\n  ")
    );
}

const DEMO: &str = r#"
suite = "demo"
document = "demo.md"

[[scenario]]
id = "D-1"
title = "t"
category = "happy-path"
level = "must"
given = "g"
when = "w"
then = "t"
source = "s"

[[scenario]]
id = "D-2"
title = "t"
category = "happy-path"
level = "must"
given = "g"
when = "w"
then = "t"
source = "s"
"#;

async fn ok(_ctx: Ctx) -> CheckResult {
    Ok(())
}

fn suite(name: &str, ids: &[&str]) -> SuiteChecks {
    SuiteChecks {
        name: name.to_owned(),
        checks: ids
            .iter()
            .map(|id| Check::new(*id, "checks it", ok))
            .collect(),
    }
}

#[test]
fn coverage_names_every_kind_of_gap() {
    let catalogs = CatalogSet::parse_all([("demo.toml", DEMO)]).unwrap();
    assert!(coverage::problems(&catalogs, &[suite("demo", &["D-1", "D-2"])]).is_empty());

    let problems = coverage::problems(&catalogs, &[suite("demo", &["D-1", "D-9"])]);
    assert_eq!(
        problems,
        [
            "demo: row D-2 has no check",
            "demo: check D-9 has no row in conformance/catalog/demo.toml"
        ]
    );

    let problems = coverage::problems(&catalogs, &[]);
    assert!(
        problems[0].contains("declare `pub mod demo;`"),
        "{problems:?}"
    );
    assert_eq!(problems.len(), 3);

    let problems = coverage::problems(
        &catalogs,
        &[suite("demo", &["D-1"]), suite("other", &["D-2"])],
    );
    assert!(
        problems
            .iter()
            .any(|p| p.contains("suite other has checks but no catalog file"))
    );
    assert!(
        problems
            .iter()
            .any(|p| p.contains("row D-2 has its check in suite other"))
    );

    let mut nameless = suite("demo", &["D-1", "D-2"]);
    nameless.checks[0] = Check::new("D-1", " ", ok);
    let problems = coverage::problems(&catalogs, &[nameless]);
    assert_eq!(problems.len(), 1);
    assert!(problems[0].contains("no `how` text"));
}

#[test]
fn missing_errata_are_named() {
    let text = DEMO.replace(
        "source = \"s\"\n\n[[scenario]]",
        "source = \"s\"\nerrata = [\"E-DEMO-01\"]\n\n[[scenario]]",
    );
    let catalogs = CatalogSet::parse_all([("demo.toml", text.as_str())]).unwrap();
    assert_eq!(
        coverage::missing_errata(&catalogs, "## E-DEMO-01 decided"),
        Vec::<String>::new()
    );
    assert_eq!(
        coverage::missing_errata(&catalogs, "## E-DEMO-011"),
        ["D-1 cites E-DEMO-01"]
    );
}
