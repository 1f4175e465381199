//! Honest verdicts and CI fit of `ski-conformance`: how much of a selection ran, `--min-coverage`,
//! `--quiet`, shards merged back into the report of one run, and baselines drafted from results.

use std::path::Path;

use ski::transport::child::{ChildSpec, OutputStream, spawn};

/// Twelve rows: CLI-01 has no check (an error), the others need capabilities the target does
/// not declare (skips), so every outcome is known without running anything.
fn catalog() -> String {
    let mut text = String::from("suite = \"cli\"\ndocument = \"cli.md\"\n");
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

struct Output {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

async fn ski_conformance(args: &[&str], cwd: &Path) -> Output {
    let mut child = spawn(
        ChildSpec::new("ski-conformance", env!("CARGO_BIN_EXE_ski-conformance"))
            .args(args)
            .env_remove("CI")
            .cwd(cwd),
    )
    .expect("ski-conformance starts");
    child.close_stdin();
    let mut stdout = String::new();
    let mut stderr = String::new();
    while let Some((stream, line)) = child.next_output_line().await {
        let out = match stream {
            OutputStream::Stdout => &mut stdout,
            OutputStream::Stderr => &mut stderr,
        };
        out.push_str(&line);
        out.push('\n');
    }
    let status = child.wait().await.expect("ski-conformance exits");
    Output {
        code: status.code(),
        stdout,
        stderr,
    }
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

#[tokio::test]
async fn a_run_says_how_much_ran_and_can_demand_a_minimum() {
    let dir = setup();
    let run = ski_conformance(&run_args("out", &[]), dir.path()).await;
    assert_eq!(run.code, Some(0), "{}{}", run.stdout, run.stderr);
    assert!(
        run.stdout.contains(
            "coverage: 1 of 12 rows ran (8.3%); 11 skipped: 11 for undeclared capabilities (teleport 11, levitate 3)"
        ),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout.contains("WARNING: most rows did not run"),
        "{}",
        run.stdout
    );
    let report = std::fs::read_to_string(dir.path().join("out/report.md")).expect("report.md");
    assert!(report.contains("Coverage: 1 of 12 rows ran"), "{report}");
    assert!(
        report.contains("WARNING: most rows did not run"),
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
        run.stdout.contains("coverage: 1 of 1 rows ran (100.0%)"),
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
        merged.stdout.contains("coverage: 1 of 12 rows ran"),
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
