//! The `ski-conformance` command line: exit codes (0 as expected, 1 unexpected or stale, 2 usage
//! or configuration), the files it writes, `list` and `explain`, error messages and help pages.

use crate::support;

use support::ski_conformance;

const CATALOG: &str = r#"
suite = "cli"
document = "cli.md"

[capabilities]
teleport = "the target can teleport"

[[scenario]]
id = "CLI-01"
title = "has no check yet"
category = "happy-path"
level = "must"
given = "g"
when = "w"
then = "the first then"
source = "cli.md, 1"

[[scenario]]
id = "CLI-02"
title = "needs a capability"
category = "edge-case"
level = "should"
given = "g"
when = "w"
then = "t"
source = "cli.md, 2"
requires = ["teleport"]
"#;

fn setup() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("catalog")).unwrap();
    std::fs::write(dir.path().join("catalog/cli.toml"), CATALOG).unwrap();
    std::fs::write(
        dir.path().join("target.toml"),
        "name = \"t\"\n[suites.cli]\n",
    )
    .unwrap();
    dir
}

#[tokio::test]
async fn exit_codes_follow_the_baseline() {
    let dir = setup();
    let base = [
        "run",
        "--catalog-dir",
        "catalog",
        "--target",
        "target.toml",
        "--out",
        "out",
    ];

    // CLI-01 has no registered check: an unexpected error.
    let run = ski_conformance(&base, dir.path()).await;
    assert_eq!(run.code, Some(1), "{}{}", run.stdout, run.stderr);
    assert!(
        run.stdout.contains("ERROR cli      CLI-01"),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout.contains("SKIP  cli      CLI-02"),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout.contains("Then: the first then"),
        "{}",
        run.stdout
    );
    for file in ["report.md", "junit.xml", "results.json"] {
        assert!(
            dir.path().join("out").join(file).is_file(),
            "{file} missing"
        );
    }

    std::fs::write(
        dir.path().join("baseline.toml"),
        "# strict\n[[failure]]\nid = \"CLI-01\"\nreason = \"no check yet\"\n",
    )
    .unwrap();
    let mut args = base.to_vec();
    args.extend(["--baseline", "baseline.toml"]);
    let run = ski_conformance(&args, dir.path()).await;
    assert_eq!(run.code, Some(0), "{}{}", run.stdout, run.stderr);
    assert!(run.stdout.contains("result: as expected"), "{}", run.stdout);

    // Only the skipped scenario: nothing unexpected.
    let mut args = base.to_vec();
    args.extend(["--id", "CLI-0?", "--category", "edge-case"]);
    assert_eq!(ski_conformance(&args, dir.path()).await.code, Some(0));

    std::fs::write(
        dir.path().join("unknown.toml"),
        "[[failure]]\nid = \"NOPE-1\"\nreason = \"x\"\n",
    )
    .unwrap();
    let mut args = base.to_vec();
    args.extend(["--baseline", "unknown.toml"]);
    let run = ski_conformance(&args, dir.path()).await;
    assert_eq!(run.code, Some(2));
    assert!(run.stderr.contains("NOPE-1"), "{}", run.stderr);
}

#[tokio::test]
async fn usage_and_configuration_errors_exit_with_2() {
    let dir = setup();
    std::fs::write(
        dir.path().join("bad-target.toml"),
        "[suites.cli]\ncommands.agent = \"x {nope}\"\n",
    )
    .unwrap();
    std::fs::create_dir(dir.path().join("bad-catalog")).unwrap();
    std::fs::write(
        dir.path().join("bad-catalog/cli.toml"),
        CATALOG.replace("happy-path", "sunny"),
    )
    .unwrap();
    let cases: [&[&str]; 7] = [
        &[
            "run",
            "--catalog-dir",
            "catalog",
            "--target",
            "target.toml",
            "--shard",
            "3/2",
        ],
        &[
            "run",
            "--catalog-dir",
            "catalog",
            "--target",
            "target.toml",
            "--suite",
            "nope",
        ],
        &[
            "run",
            "--catalog-dir",
            "catalog",
            "--target",
            "target.toml",
            "--id",
            "ZZZ*",
        ],
        &[
            "run",
            "--catalog-dir",
            "catalog",
            "--target",
            "bad-target.toml",
        ],
        &[
            "run",
            "--catalog-dir",
            "bad-catalog",
            "--target",
            "target.toml",
        ],
        &[
            "run",
            "--catalog-dir",
            "catalog",
            "--target",
            "no-such-profile",
        ],
        &[
            "run",
            "--catalog-dir",
            "catalog",
            "--jobs",
            "0",
            "--target",
            "target.toml",
        ],
    ];
    for args in cases {
        let run = ski_conformance(args, dir.path()).await;
        assert_eq!(run.code, Some(2), "{args:?}: {}{}", run.stdout, run.stderr);
        assert!(run.stderr.contains("error"), "{args:?}: {}", run.stderr);
    }
}

#[tokio::test]
async fn list_and_explain_print_the_catalog() {
    let dir = setup();
    let list = ski_conformance(&["list", "--catalog-dir", "catalog"], dir.path()).await;
    assert_eq!(list.code, Some(0));
    assert!(
        list.stdout.contains("suite cli (cli.md, 2 scenarios)"),
        "{}",
        list.stdout
    );
    assert!(list.stdout.contains("CLI-02"), "{}", list.stdout);
    assert!(
        list.stdout.contains("[requires teleport]"),
        "{}",
        list.stdout
    );
    assert!(list.stdout.contains("(no check yet)"), "{}", list.stdout);

    let json = ski_conformance(&["list", "--catalog-dir", "catalog", "--json"], dir.path()).await;
    let value: serde_json::Value = serde_json::from_str(&json.stdout).unwrap();
    assert_eq!(value[0]["scenarios"][1]["id"], "CLI-02");

    let explain = ski_conformance(
        &["explain", "--catalog-dir", "catalog", "CLI-01"],
        dir.path(),
    )
    .await;
    assert_eq!(explain.code, Some(0));
    assert!(
        explain.stdout.contains("Then the first then"),
        "{}",
        explain.stdout
    );
    assert!(
        explain.stdout.contains("No check is registered"),
        "{}",
        explain.stdout
    );
    let missing = ski_conformance(
        &["explain", "--catalog-dir", "catalog", "CLI-99"],
        dir.path(),
    )
    .await;
    assert_eq!(missing.code, Some(2));
}

#[tokio::test]
async fn a_missing_target_file_is_named_once_with_its_reason_once() {
    let dir = setup();
    let missing = dir.path().join("none.toml");
    let missing = missing.to_str().unwrap();
    let run = ski_conformance(&["run", "--target", missing], dir.path()).await;
    assert_eq!(run.code, Some(2), "{}{}", run.stdout, run.stderr);
    let reason = std::fs::read(missing).unwrap_err().to_string();
    assert_eq!(
        run.stderr,
        format!("error: cannot read target profile {missing}: {reason}\n"),
    );
    assert_eq!(run.stderr.matches(&reason).count(), 1, "{}", run.stderr);
}

#[tokio::test]
async fn an_invalid_id_glob_is_a_usage_error_that_names_it() {
    let dir = setup();
    let run = ski_conformance(
        &[
            "run",
            "--catalog-dir",
            "catalog",
            "--target",
            "target.toml",
            "--id",
            "CLI-[0",
        ],
        dir.path(),
    )
    .await;
    assert_eq!(run.code, Some(2), "{}{}", run.stdout, run.stderr);
    assert!(
        run.stderr
            .contains("invalid glob \"CLI-[0\": unclosed character class"),
        "{}",
        run.stderr
    );
}

#[tokio::test]
async fn an_unclosed_quote_in_agent_cmd_names_the_flag() {
    let dir = setup();
    for command in ["run", "probe"] {
        let run = ski_conformance(&[command, "--agent-cmd", "my-agent 'x"], dir.path()).await;
        assert_eq!(run.code, Some(2), "{}{}", run.stdout, run.stderr);
        assert!(
            run.stderr
                .starts_with("error: --agent-cmd \"my-agent 'x\": unclosed quote"),
            "{command}: {}",
            run.stderr
        );
    }
}

#[tokio::test]
async fn every_help_has_examples_and_run_groups_its_flags() {
    let dir = setup();
    for command in ["", "run", "list", "explain", "merge", "baseline", "probe"] {
        let args: Vec<&str> = [command, "--help"]
            .into_iter()
            .filter(|a| !a.is_empty())
            .collect();
        let help = ski_conformance(&args, dir.path()).await;
        assert_eq!(help.code, Some(0), "{args:?}: {}", help.stderr);
        assert!(
            help.stdout.contains("Examples:"),
            "{args:?}: {}",
            help.stdout
        );
    }
    let run = ski_conformance(&["run", "--help"], dir.path()).await;
    for heading in ["Target:", "Selection:", "Execution:", "Results:"] {
        assert!(run.stdout.contains(heading), "{heading}: {}", run.stdout);
    }
}

#[test]
fn a_closed_stdout_ends_the_output_quietly() {
    use std::process::Command;

    use ski_mocks::testing::run_with_closed_stdout;
    let dir = setup();
    for args in [
        &["list", "--catalog-dir", "catalog"][..],
        &["explain", "CLI-01", "--catalog-dir", "catalog"][..],
    ] {
        // The reader goes away before the program has printed anything.
        let run = run_with_closed_stdout(
            Command::new(env!("CARGO_BIN_EXE_ski-conformance"))
                .args(args)
                .current_dir(dir.path()),
            "",
        );
        let stderr = run.stderr;
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
        assert_eq!(run.code, Some(0), "{args:?}: {stderr}");
    }
}

#[tokio::test]
async fn a_profile_s_misspelt_setting_or_unknown_capability_stops_the_run_with_the_nearest_name() {
    let dir = tempfile::tempdir().unwrap();
    let run_with = |profile: &'static str| {
        std::fs::write(dir.path().join("target.toml"), profile).unwrap();
        ski_conformance(
            &[
                "run",
                "--target",
                "target.toml",
                "--suite",
                "teams",
                "--out",
                "out",
            ],
            dir.path(),
        )
    };
    let setting = run_with(
        "name = \"t\"\n[suites.teams]\ncapabilities = [\"teams-core\"]\n\
         settings = { task_descripton = \"required\" }\n",
    )
    .await;
    assert_eq!(
        setting.code,
        Some(2),
        "{}{}",
        setting.stdout,
        setting.stderr
    );
    assert!(
        setting
            .stderr
            .contains("unknown setting \"task_descripton\" (did you mean \"task_description\"?)"),
        "{}",
        setting.stderr
    );
    let capability = run_with(
        "name = \"t\"\n[suites.teams]\ncapabilities = [\"teams-cor\"]\n\
         settings = { task_description = \"required\" }\n",
    )
    .await;
    assert_eq!(capability.code, Some(2), "{}", capability.stderr);
    assert!(
        capability
            .stderr
            .contains("unknown capability \"teams-cor\" (did you mean \"teams-core\"?)"),
        "{}",
        capability.stderr
    );
    let value =
        run_with("name = \"t\"\n[suites.teams]\nsettings = { task_description = \"maybe\" }\n")
            .await;
    assert_eq!(value.code, Some(2), "{}", value.stderr);
    assert!(
        value.stderr.contains(
            "settings.task_description = \"maybe\": expected \"optional\" or \"required\""
        ),
        "{}",
        value.stderr
    );
    assert!(!dir.path().join("out").exists(), "nothing ran");
}

#[tokio::test]
async fn a_documented_capability_is_accepted_on_the_command_line() {
    let dir = tempfile::tempdir().unwrap();
    // An agent that is not there: the run gets past the flags and fails its rows, not its usage.
    let run = ski_conformance(
        &[
            "run",
            "--agent-cmd",
            "ski-no-such-agent-here",
            "--no-discover",
            "--capability",
            "agent-fs",
            "--id",
            "ACP-CORE-010",
            "--out",
            "out",
        ],
        dir.path(),
    )
    .await;
    assert_ne!(run.code, Some(2), "{}{}", run.stdout, run.stderr);
    let typo = ski_conformance(
        &[
            "run",
            "--agent-cmd",
            "ski-no-such-agent-here",
            "--capability",
            "agent-f",
        ],
        dir.path(),
    )
    .await;
    assert_eq!(typo.code, Some(2), "{}", typo.stderr);
    assert!(
        typo.stderr.contains("(did you mean \"agent-fs\"?)"),
        "{}",
        typo.stderr
    );
}
