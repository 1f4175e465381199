//! Honest verdicts and CI fit of `ski-conformance`: how much of a selection ran, `--min-coverage`,
//! `--quiet`, shards merged back into the report of one run, baselines drafted from results, and
//! the tiers: a failed `should` row is a warning unless `--strict`, a failed `must` row fails the
//! run, an `info` row never does, and a `must` row the run could not exercise is *not tested*.

use crate::support;

use std::path::Path;

use support::ski_conformance;

/// Twelve rows: CLI-01 has no check (an error), the others need capabilities the target does
/// not declare (skips), so every outcome is known without running anything.
fn catalog() -> String {
    let mut text = String::from(
        "suite = \"cli\"\ndocument = \"cli.md\"\n\n[capabilities]\nteleport = \"t\"\nlevitate = \"l\"\n",
    );
    for n in 1..=12 {
        let requires = match n {
            1 => "",
            2..=9 => "requires = [\"teleport\"]\n",
            _ => "requires = [\"levitate\", \"teleport\"]\n",
        };
        text.push_str(&format!(
            "\n[[scenario]]\nid = \"CLI-{n:02}\"\ntitle = \"row {n}\"\ncategory = \"happy-path\"\nlevel = \"must\"\ngiven = \"g\"\nwhen = \"w\"\nthen = \"t\"\nsource = \"cli.md, {n}\"\n{requires}"
        ));
    }
    text
}

fn setup() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("a temp dir");
    std::fs::create_dir(dir.path().join("catalog")).expect("catalog dir");
    std::fs::write(dir.path().join("catalog/cli.toml"), catalog()).expect("catalog");
    std::fs::write(
        dir.path().join("target.toml"),
        "name = \"t\"\n[suites.cli]\n",
    )
    .expect("target");
    std::fs::write(
        dir.path().join("baseline.toml"),
        "[[failure]]\nid = \"CLI-01\"\nreason = \"no check yet\"\n",
    )
    .expect("baseline");
    dir
}

fn run_args<'a>(out: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec![
        "run",
        "--catalog-dir",
        "catalog",
        "--target",
        "target.toml",
        "--baseline",
        "baseline.toml",
        "--out",
        out,
    ];
    args.extend_from_slice(extra);
    args
}

fn results(dir: &Path, out: &str) -> serde_json::Value {
    let text = std::fs::read_to_string(dir.join(out).join("results.json")).expect("results.json");
    serde_json::from_str(&text).expect("results.json is json")
}

/// Requires `run` to have failed nothing: as expected (0), or not as expected (1) only for the
/// required rows it could not exercise, which are findings of the verdict.
fn nothing_failed_but_rows_not_tested(run: &support::Output, dir: &Path, out: &str) {
    let json = results(dir, out);
    match run.code {
        Some(0) => {}
        Some(1) => assert!(
            json["unexpected"] == json["not_tested"]
                && json["not_tested"].as_array().is_some_and(|n| !n.is_empty()),
            "only rows not tested may make the run not as expected: {}{}",
            run.stdout,
            run.stderr
        ),
        other => panic!("exit {other:?}: {}{}", run.stdout, run.stderr),
    }
}

#[tokio::test]
async fn a_run_says_how_much_ran_and_can_demand_a_minimum() {
    let dir = setup();
    let run = ski_conformance(&run_args("out", &[]), dir.path()).await;
    assert_eq!(run.code, Some(0), "{}{}", run.stdout, run.stderr);
    assert!(
        run.stdout.contains(
            "coverage: 1 of 1 applicable rows ran (100.0%); of 12 selected rows, 11 need capabilities the target does not declare (teleport 11, levitate 3)"
        ),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout.contains("WARNING: most selected rows did not run: 11 of 12 need capabilities the target does not declare"),
        "{}",
        run.stdout
    );
    assert!(!run.stdout.contains("--capability"), "{}", run.stdout);
    let report = std::fs::read_to_string(dir.path().join("out/report.md")).expect("report.md");
    assert!(
        report.contains("Coverage: 1 of 1 applicable rows ran"),
        "{report}"
    );
    assert!(
        report.contains("WARNING: most selected rows did not run"),
        "{report}"
    );
    let skipped = &results(dir.path(), "out")["results"][11];
    assert_eq!(
        skipped["undeclared"],
        serde_json::json!(["levitate", "teleport"])
    );

    let run = ski_conformance(&run_args("out", &["--min-coverage", "50"]), dir.path()).await;
    assert_eq!(run.code, Some(1), "{}{}", run.stdout, run.stderr);
    assert!(
        run.stdout
            .contains("coverage 8.3% is below --min-coverage 50"),
        "{}",
        run.stdout
    );
    let run = ski_conformance(&run_args("out", &["--min-coverage", "5"]), dir.path()).await;
    assert_eq!(run.code, Some(0), "{}{}", run.stdout, run.stderr);
    let run = ski_conformance(&run_args("out", &["--min-coverage", "150"]), dir.path()).await;
    assert_eq!(run.code, Some(2), "{}", run.stderr);

    // A selection that runs what it selects is not flagged.
    let run = ski_conformance(&run_args("out", &["--id", "CLI-01"]), dir.path()).await;
    assert!(
        run.stdout
            .contains("coverage: 1 of 1 applicable rows ran (100.0%)"),
        "{}",
        run.stdout
    );
    assert!(!run.stdout.contains("WARNING"), "{}", run.stdout);
}

#[tokio::test]
async fn quiet_leaves_out_the_skipped_rows_but_still_counts_them() {
    let dir = setup();
    let run = ski_conformance(&run_args("out", &["--quiet"]), dir.path()).await;
    assert_eq!(run.code, Some(0), "{}{}", run.stdout, run.stderr);
    assert!(!run.stdout.contains("SKIP "), "{}", run.stdout);
    assert!(run.stdout.contains("CLI-01"), "{}", run.stdout);
    assert!(run.stdout.contains("11 skipped"), "{}", run.stdout);
}

#[tokio::test]
async fn shards_merge_into_the_report_of_one_run() {
    let dir = setup();
    let whole = ski_conformance(&run_args("whole", &[]), dir.path()).await;
    assert_eq!(whole.code, Some(0), "{}{}", whole.stdout, whole.stderr);
    let mut files = Vec::new();
    for i in 1..=3 {
        let out = format!("shard{i}");
        let shard = format!("{i}/3");
        let run = ski_conformance(&run_args(&out, &["--shard", &shard]), dir.path()).await;
        assert_eq!(run.code, Some(0), "{}{}", run.stdout, run.stderr);
        files.push(format!("{out}/results.json"));
    }
    let mut args = vec!["merge", "--catalog-dir", "catalog", "--out", "merged"];
    args.extend(files.iter().map(String::as_str));
    let merged = ski_conformance(&args, dir.path()).await;
    assert_eq!(merged.code, Some(0), "{}{}", merged.stdout, merged.stderr);
    assert!(
        merged
            .stdout
            .contains("coverage: 1 of 1 applicable rows ran"),
        "{}",
        merged.stdout
    );
    let rows = |value: &serde_json::Value| -> Vec<(String, String)> {
        value["results"]
            .as_array()
            .expect("results")
            .iter()
            .map(|r| (r["id"].to_string(), r["outcome"].to_string()))
            .collect()
    };
    assert_eq!(
        rows(&results(dir.path(), "whole")),
        rows(&results(dir.path(), "merged"))
    );
    assert_eq!(
        results(dir.path(), "merged")["counts"],
        results(dir.path(), "whole")["counts"]
    );
    for file in ["report.md", "junit.xml"] {
        assert!(
            dir.path().join("merged").join(file).is_file(),
            "{file} missing"
        );
    }

    // The same shard twice overlaps; a run without the baseline is another run.
    let overlap = ski_conformance(
        &[
            "merge",
            "--catalog-dir",
            "catalog",
            "--out",
            "bad",
            &files[0],
            &files[0],
        ],
        dir.path(),
    )
    .await;
    assert_eq!(overlap.code, Some(2));
    assert!(
        overlap.stderr.contains("the shards overlap"),
        "{}",
        overlap.stderr
    );
    let other = ski_conformance(
        &[
            "run",
            "--catalog-dir",
            "catalog",
            "--target",
            "target.toml",
            "--out",
            "other",
            "--shard",
            "2/3",
        ],
        dir.path(),
    )
    .await;
    assert!(matches!(other.code, Some(0 | 1)), "{}", other.stderr);
    let mixed = ski_conformance(
        &[
            "merge",
            "--catalog-dir",
            "catalog",
            "--out",
            "bad",
            &files[0],
            "other/results.json",
        ],
        dir.path(),
    )
    .await;
    assert_eq!(mixed.code, Some(2));
    assert!(mixed.stderr.contains("baseline"), "{}", mixed.stderr);
    std::fs::write(dir.path().join("junk.json"), "{\"rows\": []}").expect("junk");
    let junk = ski_conformance(&["merge", "junk.json"], dir.path()).await;
    assert_eq!(junk.code, Some(2));
    assert!(
        junk.stderr.contains("not a ski-conformance results file"),
        "{}",
        junk.stderr
    );
}

#[tokio::test]
async fn a_baseline_drafted_from_a_run_excuses_exactly_its_failures() {
    let dir = setup();
    let args = [
        "run",
        "--catalog-dir",
        "catalog",
        "--target",
        "target.toml",
        "--out",
        "first",
    ];
    let first = ski_conformance(&args, dir.path()).await;
    assert_eq!(first.code, Some(1), "{}{}", first.stdout, first.stderr);
    let draft = ski_conformance(
        &[
            "baseline",
            "--from",
            "first/results.json",
            "--out",
            "drafted.toml",
        ],
        dir.path(),
    )
    .await;
    assert_eq!(draft.code, Some(0), "{}", draft.stderr);
    let text = std::fs::read_to_string(dir.path().join("drafted.toml")).expect("drafted");
    assert_eq!(text.matches("[[failure]]").count(), 1, "{text}");
    assert!(text.contains("id = \"CLI-01\""), "{text}");
    assert!(
        text.contains("harness error: no check is registered"),
        "{text}"
    );
    let mut again = args.to_vec();
    again.extend(["--baseline", "drafted.toml"]);
    let second = ski_conformance(&again, dir.path()).await;
    assert_eq!(second.code, Some(0), "{}{}", second.stdout, second.stderr);
}

/// The directory of the workspace's binaries (`ski`, `ski-mock-agent`), beside this one.
fn bin_dir() -> std::path::PathBuf {
    Path::new(env!("CARGO_BIN_EXE_ski-conformance"))
        .parent()
        .expect("the binary's directory")
        .to_owned()
}

#[tokio::test]
async fn probe_reports_what_an_agent_declares_as_a_profile() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let ski = format!(
        "{} acp serve --permission-mode disabled --enable fork",
        bin_dir().join("ski").display()
    );
    let probe = ski_conformance(&["probe", "--agent-cmd", &ski, "--name", "ski"], dir.path()).await;
    assert_eq!(probe.code, Some(0), "{}{}", probe.stdout, probe.stderr);
    let profile: toml::Value = toml::from_str(&probe.stdout).expect("the probe prints TOML");
    let declared: Vec<&str> = profile["suites"]["acp"]["capabilities"]
        .as_array()
        .expect("capabilities")
        .iter()
        .filter_map(toml::Value::as_str)
        .collect();
    for capability in [
        "agent",
        "stdio",
        "prompt",
        "echo",
        "load-session",
        "session-list",
        "session-resume",
        "session-fork",
        "session-delete",
        "logout",
        "set-mode",
        "config-options",
    ] {
        assert!(
            declared.contains(&capability),
            "{capability} missing: {}",
            probe.stdout
        );
    }
    // Configurations are never guessed.
    assert!(!declared.contains(&"hold") && !declared.contains(&"auth-required"));
    assert_eq!(
        profile["suites"]["acp"]["commands"]["agent"].as_str(),
        Some(ski.as_str())
    );

    // An agent whose replies are not the prompt gets every protocol row but no echo row.
    let mock = format!(
        "{} --script testy",
        bin_dir().join("ski-mock-agent").display()
    );
    let probe = ski_conformance(&["probe", "--agent-cmd", &mock], dir.path()).await;
    assert_eq!(probe.code, Some(0), "{}{}", probe.stdout, probe.stderr);
    assert!(probe.stdout.contains("\"prompt\""), "{}", probe.stdout);
    assert!(!probe.stdout.contains("\"echo\""), "{}", probe.stdout);
    assert!(
        probe.stdout.contains("not the prompt's text"),
        "{}",
        probe.stdout
    );

    // An agent that cannot be initialized is still an agent: the profile declares only that,
    // so its initialize rows judge it, and says why.
    let dead = ski_conformance(&["probe", "--agent-cmd", "false"], dir.path()).await;
    assert_eq!(dead.code, Some(0), "{}{}", dead.stdout, dead.stderr);
    assert!(dead.stdout.contains("initialize failed"), "{}", dead.stdout);
    assert!(
        dead.stdout.contains(r#"capabilities = ["agent", "stdio"]"#),
        "{}",
        dead.stdout
    );
}

#[tokio::test]
async fn an_ad_hoc_agent_is_discovered_and_its_rows_run() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let ski = format!(
        "{} acp serve --permission-mode disabled",
        bin_dir().join("ski").display()
    );
    let base = [
        "run",
        "--agent-cmd",
        &ski,
        "--suite",
        "acp",
        "--id",
        "ACP-CORE-00*",
        "--out",
        "out",
    ];
    let run = ski_conformance(&base, dir.path()).await;
    nothing_failed_but_rows_not_tested(&run, dir.path(), "out");
    assert!(discovered_agent(&run.stdout), "{}", run.stdout);
    let skipped = results(dir.path(), "out")["counts"]["skip"]
        .as_u64()
        .expect("counts");
    let ran = results(dir.path(), "out")["counts"]["pass"]
        .as_u64()
        .expect("counts");
    assert!(ran >= 5, "{}", run.stdout);

    // Without discovery the same selection skips what it cannot declare.
    let mut blind = base.to_vec();
    blind.push("--no-discover");
    let run = ski_conformance(&blind, dir.path()).await;
    nothing_failed_but_rows_not_tested(&run, dir.path(), "out");
    let blind_skipped = results(dir.path(), "out")["counts"]["skip"]
        .as_u64()
        .expect("counts");
    assert!(blind_skipped > skipped, "{}", run.stdout);

    // --no-capability takes a discovered capability away; unknown names are refused.
    let mut less = base.to_vec();
    less.extend(["--no-capability", "prompt"]);
    let run = ski_conformance(&less, dir.path()).await;
    assert!(run.stdout.contains("discovered: "), "{}", run.stdout);
    nothing_failed_but_rows_not_tested(&run, dir.path(), "out");
    let fewer = results(dir.path(), "out")["counts"]["pass"]
        .as_u64()
        .expect("counts");
    assert!(fewer < ran, "{}", run.stdout);
    let mut unknown = base.to_vec();
    unknown.extend(["--capability", "teleport"]);
    let run = ski_conformance(&unknown, dir.path()).await;
    assert_eq!(run.code, Some(2));
    assert!(
        run.stderr.contains("unknown capability \"teleport\""),
        "{}",
        run.stderr
    );
}

#[tokio::test]
async fn a_probed_profile_and_a_discovering_profile_reproduce_the_ad_hoc_run() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let ski = format!(
        "{} acp serve --permission-mode disabled",
        bin_dir().join("ski").display()
    );
    let select = [
        "--suite",
        "acp",
        "--id",
        "ACP-CORE-00*",
        "--id",
        "ACP-CORE-01*",
        "--no-rerun",
    ];
    let outcomes = |out: &str| -> Vec<(String, String)> {
        results(dir.path(), out)["results"]
            .as_array()
            .expect("results")
            .iter()
            .map(|r| (r["id"].to_string(), r["outcome"].to_string()))
            .collect()
    };

    let mut ad_hoc = vec!["run", "--agent-cmd", ski.as_str(), "--out", "ad-hoc"];
    ad_hoc.extend(select);
    let run = ski_conformance(&ad_hoc, dir.path()).await;
    nothing_failed_but_rows_not_tested(&run, dir.path(), "ad-hoc");

    let probe = ski_conformance(&["probe", "--agent-cmd", &ski], dir.path()).await;
    assert_eq!(probe.code, Some(0), "{}", probe.stderr);
    std::fs::write(dir.path().join("probed.toml"), &probe.stdout).expect("write the profile");
    let mut probed = vec!["run", "--target", "probed.toml", "--out", "probed"];
    probed.extend(select);
    let run = ski_conformance(&probed, dir.path()).await;
    nothing_failed_but_rows_not_tested(&run, dir.path(), "probed");
    assert_eq!(outcomes("ad-hoc"), outcomes("probed"));

    std::fs::write(
        dir.path().join("discovering.toml"),
        "name = \"discovering\"\n[suites.acp]\ndiscover = true\n[suites.acp.commands]\nagent = \"{bin_dir}/ski acp serve --permission-mode disabled\"\n",
    )
    .expect("write the profile");
    let mut discovering = vec![
        "run",
        "--target",
        "discovering.toml",
        "--out",
        "discovering",
    ];
    discovering.extend(select);
    let run = ski_conformance(&discovering, dir.path()).await;
    nothing_failed_but_rows_not_tested(&run, dir.path(), "discovering");
    assert!(discovered_agent(&run.stdout), "{}", run.stdout);
    assert_eq!(outcomes("ad-hoc"), outcomes("discovering"));
}

#[tokio::test]
async fn a_run_says_what_kept_discovered_rows_from_running() {
    let dir = tempfile::tempdir().expect("a temp dir");
    // Its model fails every first attempt and it does not retry: no completed turn.
    let ski = format!(
        "{} acp serve --fail-attempts 1",
        bin_dir().join("ski").display()
    );
    let run = ski_conformance(
        &[
            "run",
            "--agent-cmd",
            &ski,
            "--id",
            "ACP-CORE-012",
            "--out",
            "out",
        ],
        dir.path(),
    )
    .await;
    assert_eq!(run.code, Some(0), "{}{}", run.stdout, run.stderr);
    assert!(
        run.stdout
            .contains("discovery: the probe prompt did not end with end_turn"),
        "{}",
        run.stdout
    );
    let found = discovered(&run.stdout);
    assert!(
        found.iter().any(|capability| capability == "agent")
            && !found.iter().any(|capability| capability == "prompt"),
        "{}",
        run.stdout
    );
}

/// A catalog of the acp suite holding real rows under the levels a test gives them, so that the
/// registered checks judge a stand-in agent: `(id, level, requires)`.
fn tier_catalog(rows: &[(&str, &str, &[&str])]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("a temp dir");
    let mut text = String::from(
        "suite = \"acp\"\ndocument = \"acp.md\"\nnot_tested_without = [\"session\", \"prompt\", \"hold\"]\n",
    );
    // The vocabulary: every capability the rows name, and the not-tested ones.
    let mut vocabulary: std::collections::BTreeSet<&str> = ["session", "prompt", "hold"].into();
    vocabulary.extend(
        rows.iter()
            .flat_map(|(_, _, requires)| requires.iter().copied()),
    );
    text.push_str("\n[capabilities]\n");
    for name in vocabulary {
        text.push_str(&format!("{name} = \"what {name} offers\"\n"));
    }
    for (id, level, requires) in rows {
        let requires: Vec<String> = requires.iter().map(|c| format!("{c:?}")).collect();
        text.push_str(&format!(
            "\n[[scenario]]\nid = \"{id}\"\ntitle = \"{id} as a {level} row\"\ncategory = \"edge-case\"\nlevel = \"{level}\"\ngiven = \"g\"\nwhen = \"w\"\nthen = \"t\"\nsource = \"acp.md\"\nrequires = [{}]\n",
            requires.join(", ")
        ));
    }
    std::fs::create_dir(dir.path().join("catalog")).expect("catalog dir");
    std::fs::write(dir.path().join("catalog/acp.toml"), text).expect("catalog");
    dir
}

/// The mock agent with one defect: it keeps running after its stdin closes (ACP-CORE-008 fails).
fn agent_ignoring_eof() -> String {
    format!(
        "{} --fault ignore-eof",
        bin_dir().join("ski-mock-agent").display()
    )
}

/// `run` of the tier catalog against the agent, declaring what it has (no discovery), short
/// timeouts and no re-run, plus `extra`.
async fn run_tiers(dir: &Path, agent: &str, declared: &[&str], extra: &[&str]) -> support::Output {
    let mut args = vec![
        "run",
        "--catalog-dir",
        "catalog",
        "--agent-cmd",
        agent,
        "--no-discover",
        "--no-rerun",
        "--timeout-multiplier",
        "0.3",
        "--out",
        "out",
    ];
    for capability in declared {
        args.extend(["--capability", capability]);
    }
    args.extend_from_slice(extra);
    ski_conformance(&args, dir).await
}

const EOF_ROW: &[&str] = &["agent", "session", "stdio"];

#[tokio::test]
async fn a_failing_should_row_is_a_warning_and_fails_only_a_strict_run() {
    let dir = tier_catalog(&[("ACP-CORE-008", "should", EOF_ROW)]);
    let agent = agent_ignoring_eof();
    let run = run_tiers(dir.path(), &agent, EOF_ROW, &[]).await;
    assert_eq!(run.code, Some(0), "{}{}", run.stdout, run.stderr);
    assert!(
        run.stdout.contains(
            "warnings: 1 should/interop row(s) failed; they do not fail the run unless --strict"
        ),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout.contains("FAIL ACP-CORE-008 (should)"),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout.contains("result: passed, not strict"),
        "{}",
        run.stdout
    );
    let json = results(dir.path(), "out");
    assert_eq!(json["exit_code"], 0);
    assert_eq!(json["warnings"], serde_json::json!(["ACP-CORE-008"]));
    assert_eq!(json["unexpected"], serde_json::json!([]));
    assert_eq!(json["counts"]["warnings"], 1);
    let report = std::fs::read_to_string(dir.path().join("out/report.md")).expect("report.md");
    assert!(report.contains("**passed, not strict**"), "{report}");
    let junit = std::fs::read_to_string(dir.path().join("out/junit.xml")).expect("junit.xml");
    assert!(junit.contains("name=\"warnings\" value=\"1\""), "{junit}");
    assert!(!junit.contains("<failure"), "{junit}");

    std::fs::rename(dir.path().join("out"), dir.path().join("loose")).expect("keep the run");
    let strict = run_tiers(dir.path(), &agent, EOF_ROW, &["--strict"]).await;
    assert_eq!(strict.code, Some(1), "{}{}", strict.stdout, strict.stderr);
    assert!(
        strict.stdout.contains("result: NOT as expected"),
        "{}",
        strict.stdout
    );
    let json = results(dir.path(), "out");
    assert_eq!(json["unexpected"], serde_json::json!(["ACP-CORE-008"]));
    assert_eq!(json["strict"], true);

    // A strict run and one that is not are not shards of one run.
    let merged = ski_conformance(
        &[
            "merge",
            "--catalog-dir",
            "catalog",
            "--out",
            "merged",
            "loose/results.json",
            "out/results.json",
        ],
        dir.path(),
    )
    .await;
    assert_eq!(merged.code, Some(2), "{}{}", merged.stdout, merged.stderr);
    assert!(merged.stderr.contains("--strict"), "{}", merged.stderr);
}

#[tokio::test]
async fn a_failing_must_row_fails_the_run() {
    let dir = tier_catalog(&[("ACP-CORE-008", "must", EOF_ROW)]);
    let run = run_tiers(dir.path(), &agent_ignoring_eof(), EOF_ROW, &[]).await;
    assert_eq!(run.code, Some(1), "{}{}", run.stdout, run.stderr);
    let json = results(dir.path(), "out");
    assert_eq!(json["unexpected"], serde_json::json!(["ACP-CORE-008"]));
    assert_eq!(json["counts"]["warnings"], 0);
}

#[tokio::test]
async fn an_info_row_is_recorded_and_never_fails_a_run() {
    let dir = tier_catalog(&[("ACP-CORE-008", "info", EOF_ROW)]);
    let run = run_tiers(dir.path(), &agent_ignoring_eof(), EOF_ROW, &["--strict"]).await;
    assert_eq!(run.code, Some(0), "{}{}", run.stdout, run.stderr);
    assert!(
        run.stdout.contains("[info: recorded, never asserted]"),
        "{}",
        run.stdout
    );
    let json = results(dir.path(), "out");
    assert_eq!(json["results"][0]["outcome"], "fail");
    assert_eq!(json["counts"]["warnings"], 0);
    assert_eq!(json["unexpected"], serde_json::json!([]));
}

#[tokio::test]
async fn a_must_row_the_run_could_not_exercise_is_not_tested_never_passed() {
    // The agent is never started: every row lacks something. ACP-CORE-001 needs a held turn
    // the runner cannot make (not tested); WS-050 needs session/list, which this agent does not
    // offer (not applicable); ACP-CORE-014 is interop (not counted either way).
    let dir = tier_catalog(&[
        ("ACP-CORE-001", "must", &["agent", "prompt", "hold"]),
        ("WS-050", "capability", &["agent", "session-list"]),
        ("ACP-CORE-014", "interop", &["agent", "hold"]),
    ]);
    let run = run_tiers(dir.path(), &agent_ignoring_eof(), &["agent", "prompt"], &[]).await;
    // A must row that could not be exercised is a finding of the verdict, not "as expected".
    assert_eq!(run.code, Some(1), "{}{}", run.stdout, run.stderr);
    assert!(
        run.stdout.contains("result: NOT as expected"),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout.contains(
            "not tested: 1 must/capability row(s) the run could not exercise (each row says why): ACP-CORE-001"
        ),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout.contains("[NOT TESTED: a must row]"),
        "{}",
        run.stdout
    );
    assert!(run.stdout.contains("1 not tested"), "{}", run.stdout);
    // Coverage counts the row not tested as applicable: it is the target's, and it did not run.
    assert!(
        run.stdout.contains(
            "coverage: 0 of 1 applicable rows ran (0.0%); of 3 selected rows, 2 need capabilities the target does not declare (hold 1, session-list 1); 1 required row(s) not tested (the run could not exercise them"
        ),
        "{}",
        run.stdout
    );
    let json = results(dir.path(), "out");
    assert_eq!(json["not_tested"], serde_json::json!(["ACP-CORE-001"]));
    assert_eq!(json["unexpected"], serde_json::json!(["ACP-CORE-001"]));
    assert_eq!(json["counts"]["not_tested"], 1);
    assert_eq!(json["counts"]["pass"], 0);
    assert_eq!(json["results"][0]["not_tested"], true);
    assert!(json["results"][1].get("not_tested").is_none(), "{json}");
    let report = std::fs::read_to_string(dir.path().join("out/report.md")).expect("report.md");
    assert!(
        report.contains("**Not tested: 1 must/capability row(s)**"),
        "{report}"
    );
    let junit = std::fs::read_to_string(dir.path().join("out/junit.xml")).expect("junit.xml");
    assert!(junit.contains("name=\"not-tested\" value=\"1\""), "{junit}");
    assert!(junit.contains("NOT TESTED: a must row"), "{junit}");
    // A baseline entry that says why the target cannot be made to show the row excuses it.
    std::fs::write(
        dir.path().join("baseline.toml"),
        "[[failure]]\nid = \"ACP-CORE-001\"\nreason = \"no turn of this agent can be held\"\n",
    )
    .expect("a baseline");
    let excused = run_tiers(
        dir.path(),
        &agent_ignoring_eof(),
        &["agent", "prompt"],
        &["--baseline", "baseline.toml"],
    )
    .await;
    assert_eq!(
        excused.code,
        Some(0),
        "{}{}",
        excused.stdout,
        excused.stderr
    );
    assert!(
        excused.stdout.contains("[NOT TESTED: a must row]"),
        "{}",
        excused.stdout
    );
}

/// Whether the run's "discovered:" line names the capability `agent`.
fn discovered_agent(stdout: &str) -> bool {
    discovered(stdout)
        .iter()
        .any(|capability| capability == "agent")
}

/// The capabilities the run's "discovered:" line names (in the order it names them).
fn discovered(stdout: &str) -> Vec<String> {
    stdout
        .lines()
        .find_map(|line| line.strip_prefix("discovered: "))
        .map(|list| {
            list.split(" (")
                .next()
                .unwrap_or_default()
                .split(", ")
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}
