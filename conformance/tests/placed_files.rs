//! A kiro target whose bot reads `.env` next to its own sources (`env_file` an absolute path into
//! the implementation's tree): the suite run twice in a row at `-j 2` gives the same result per
//! row both times and leaves the implementation's tree exactly as it found it (no `.env` left).

use crate::support;

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use support::ski_conformance;

/// Every file under `root` (relative path → contents).
fn tree(root: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    fn walk(root: &Path, dir: &Path, into: &mut BTreeMap<PathBuf, Vec<u8>>) {
        for entry in std::fs::read_dir(dir).expect("a readable dir").flatten() {
            let path = entry.path();
            if path.is_dir() {
                walk(root, &path, into);
            } else {
                let relative = path.strip_prefix(root).expect("under root").to_owned();
                into.insert(relative, std::fs::read(&path).expect("a readable file"));
            }
        }
    }
    let mut files = BTreeMap::new();
    walk(root, root, &mut files);
    files
}

/// Each row's id and outcome in a run's results.json.
fn outcomes(results: &Path) -> BTreeMap<String, String> {
    let text = std::fs::read_to_string(results).expect("results.json");
    let report: serde_json::Value = serde_json::from_str(&text).expect("JSON");
    report["results"]
        .as_array()
        .expect("results")
        .iter()
        .map(|r| {
            (
                r["id"].as_str().unwrap_or_default().to_owned(),
                r["outcome"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fixed_path_env_file_is_put_back_after_every_row_of_two_runs() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let bin_dir = Path::new(env!("CARGO_BIN_EXE_ski-conformance"))
        .parent()
        .expect("the binaries' dir");
    // The implementation: a bot that reads `.env` beside its sources, whatever its working dir.
    let implementation = dir.path().join("bot");
    std::fs::create_dir(&implementation).expect("mkdir");
    std::fs::write(implementation.join("README"), "a bot\n").expect("README");
    let bot = implementation.join("bot.sh");
    std::fs::write(
        &bot,
        format!(
            "#!/bin/sh\nrm -f .env\nif [ -f '{env}' ]; then cp '{env}' .env; fi\nexec '{ski}' kiro \"$@\"\n",
            env = implementation.join(".env").display(),
            ski = bin_dir.join("ski").display()
        ),
    )
    .expect("bot.sh");
    std::fs::set_permissions(&bot, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let profile = dir.path().join("fixed-env.toml");
    std::fs::write(
        &profile,
        format!(
            r#"name = "fixed-env"
description = "the reference kiro adapter reading .env beside its sources"

[suites.kiro]
capabilities = ["kiro-check", "kiro-provision", "kiro-echo"]
settings = {{ mock_agent = "{{bin_dir}}/ski-mock-agent", grace_ms = "300", env_file = "{env}" }}

[suites.kiro.commands]
adapter = "{bot}"
"#,
            env = implementation.join(".env").display(),
            bot = bot.display()
        ),
    )
    .expect("the profile");
    let before = tree(&implementation);
    let mut runs = Vec::new();
    for run in ["first", "second"] {
        let out = dir.path().join(run);
        let output = ski_conformance(
            &[
                "run",
                "--target",
                profile.to_str().expect("a UTF-8 path"),
                "--suite",
                "kiro",
                "-j",
                "2",
                "--no-rerun",
                "--out",
                out.to_str().expect("a UTF-8 path"),
            ],
            dir.path(),
        )
        .await;
        assert_eq!(
            output.code,
            Some(0),
            "the {run} run: {}\n{}",
            output.stdout,
            output.stderr
        );
        assert_eq!(
            tree(&implementation),
            before,
            "the {run} run left the implementation's tree changed"
        );
        let results = std::fs::read_to_string(out.join("results.json")).expect("results");
        assert!(
            results.contains("\"placed\""),
            "the rows say they wrote outside their temp dirs"
        );
        runs.push(outcomes(&out.join("results.json")));
    }
    assert!(runs[0].len() > 50, "{:?}", runs[0]);
    assert_eq!(runs[0], runs[1], "the two runs differ");
    assert!(!implementation.join(".env").exists());
}
