//! The tests step's runner: every test program of the workspace and the doc tests at once, each
//! program's output kept in its own log and printed whole when it ends, so the step lasts as long
//! as its longest program rather than the sum of all (`cargo test` runs them one after another).

use std::ffi::OsString;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde_json::Value;

/// One test program cargo built: what to run and how cargo itself would run it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Program {
    /// How cargo names it in "to rerun pass": `-p ski --test main`, `-p ski-mocks --lib`.
    pub label: String,
    /// The test program, or `cargo` for the doc tests.
    pub executable: PathBuf,
    /// Arguments before the test harness's own (`test --doc …` for the doc tests).
    pub leading_args: Vec<String>,
    /// The package's directory: cargo runs a test program there.
    pub manifest_dir: PathBuf,
    /// The package's name (`CARGO_PKG_NAME`).
    pub package: String,
}

/// The test programs `cargo test --workspace` would run, read from cargo's build messages: one
/// per compiler artifact built in test mode that has an executable. Builds what is missing, with
/// `env` (the lints' compiler), so the programs are the ones the earlier build made.
pub fn list(root: &Path, env: &[(&str, OsString)]) -> Result<Vec<Program>> {
    let output = Command::new("cargo")
        .args([
            "test",
            "--workspace",
            "--locked",
            "--no-run",
            "--message-format=json-render-diagnostics",
        ])
        .current_dir(root)
        .envs(env.iter().map(|(name, value)| (name, value)))
        .stderr(Stdio::inherit())
        .output()
        .context("cannot start cargo test --no-run")?;
    if !output.status.success() {
        bail!("cargo test --no-run failed ({})", output.status);
    }
    let messages = String::from_utf8_lossy(&output.stdout);
    let programs = messages
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter_map(|message| program_of(&message))
        .collect::<Vec<_>>();
    if programs.is_empty() {
        bail!("cargo test --no-run named no test program");
    }
    Ok(programs)
}

/// The program a `compiler-artifact` message describes, when it is a test program.
fn program_of(message: &Value) -> Option<Program> {
    if message["reason"] != "compiler-artifact" || message["profile"]["test"] != true {
        return None;
    }
    let executable = PathBuf::from(message["executable"].as_str()?);
    let target = &message["target"];
    let name = target["name"].as_str()?;
    let kind = target["kind"].as_array()?.first()?.as_str()?;
    let manifest_dir = Path::new(message["manifest_path"].as_str()?)
        .parent()?
        .to_path_buf();
    let package = package_name(message["package_id"].as_str()?)?;
    let selector = match kind {
        "lib" | "proc-macro" => "--lib".to_owned(),
        "test" => format!("--test {name}"),
        "bin" => format!("--bin {name}"),
        "bench" => format!("--bench {name}"),
        "example" => format!("--example {name}"),
        _ => return None,
    };
    Some(Program {
        label: format!("-p {package} {selector}"),
        executable,
        leading_args: Vec::new(),
        manifest_dir,
        package,
    })
}

/// The package's name in a package id: `path+file:///x/mocks#ski-mocks@0.1.0` (or
/// `path+file:///x/ski#0.1.0`, where the directory's name is the package's).
fn package_name(package_id: &str) -> Option<String> {
    let (path, fragment) = package_id.rsplit_once('#')?;
    match fragment.split_once('@') {
        Some((name, _version)) => Some(name.to_owned()),
        None => path.rsplit('/').next().map(str::to_owned),
    }
}

/// The doc tests of the workspace, run by cargo (rustdoc compiles them), as one more program.
pub fn doc_tests(root: &Path) -> Program {
    Program {
        label: "--doc".to_owned(),
        executable: PathBuf::from("cargo"),
        leading_args: ["test", "--workspace", "--locked", "--doc", "--"]
            .map(str::to_owned)
            .to_vec(),
        manifest_dir: root.to_path_buf(),
        package: String::new(),
    }
}

/// How one program ended.
#[derive(Debug)]
struct Outcome {
    program: Program,
    status: std::io::Result<ExitStatus>,
    elapsed: Duration,
    log: PathBuf,
}

/// Runs every program at once with `harness_args` (`--test-threads N`) and the variables `env`,
/// each one's output in `log_dir`, printed whole (with a line: the program, its verdict, the
/// libtest counts, its time) as it ends. Fails naming every program that failed.
pub fn run_all(
    programs: &[Program],
    env: &[(&str, OsString)],
    harness_args: &[String],
    log_dir: &Path,
) -> Result<()> {
    std::fs::create_dir_all(log_dir)
        .with_context(|| format!("cannot create {}", log_dir.display()))?;
    let (finished, outcomes) = mpsc::channel();
    for (index, program) in programs.iter().enumerate() {
        let log = log_dir.join(format!("{index:02}{}.log", file_name_of(&program.label)));
        let output =
            File::create(&log).with_context(|| format!("cannot create {}", log.display()))?;
        let errors = output.try_clone().context("cannot share the log")?;
        let mut command = Command::new(&program.executable);
        command
            .args(&program.leading_args)
            .args(harness_args)
            .current_dir(&program.manifest_dir)
            .env("INSTA_UPDATE", "no")
            .envs(env.iter().map(|(name, value)| (name, value)))
            .stdin(Stdio::null())
            .stdout(output)
            .stderr(errors);
        if !program.package.is_empty() {
            command
                .env("CARGO_MANIFEST_DIR", &program.manifest_dir)
                .env("CARGO_PKG_NAME", &program.package);
        }
        let started = Instant::now();
        let child = command.spawn();
        let finished = finished.clone();
        let program = program.clone();
        std::thread::spawn(move || {
            let status = child.and_then(|mut child| child.wait());
            let _ = finished.send(Outcome {
                program,
                status,
                elapsed: started.elapsed(),
                log,
            });
        });
    }
    drop(finished);
    let mut failed = Vec::new();
    for outcome in outcomes {
        let text = std::fs::read_to_string(&outcome.log).unwrap_or_default();
        let passed = matches!(&outcome.status, Ok(status) if status.success());
        eprintln!("{text}");
        eprintln!(
            "tests: {} {} ({}) in {:.1} s",
            outcome.program.label,
            match &outcome.status {
                Ok(status) if status.success() => "ok".to_owned(),
                Ok(status) => format!("FAILED, {status}"),
                Err(error) => format!("FAILED, not started: {error}"),
            },
            counts(&text),
            outcome.elapsed.as_secs_f64()
        );
        if !passed {
            failed.push(format!("{} failed", outcome.program.label));
        }
    }
    if failed.is_empty() {
        Ok(())
    } else {
        bail!("{}", failed.join(", "))
    }
}

/// A label as part of a file name: `-p ski --test main` → `-ski-main`.
fn file_name_of(label: &str) -> String {
    label
        .split_whitespace()
        .filter(|word| !word.starts_with('-'))
        .fold(String::new(), |name, word| name + "-" + word)
}

/// The sums of libtest's "test result:" lines: `12 passed, 0 failed`.
fn counts(output: &str) -> String {
    let (mut passed, mut failed) = (0u64, 0u64);
    for line in output.lines() {
        let Some(result) = line.strip_prefix("test result: ") else {
            continue;
        };
        for part in result.split(';') {
            let mut words = part.split_whitespace().rev();
            let (Some(what), Some(number)) = (words.next(), words.next()) else {
                continue;
            };
            let Ok(number) = number.parse::<u64>() else {
                continue;
            };
            match what {
                "passed" => passed += number,
                "failed" => failed += number,
                _ => {}
            }
        }
    }
    format!("{passed} passed, {failed} failed")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_test_artifact_becomes_a_program_named_as_cargo_names_it() {
        let message = serde_json::json!({
            "reason": "compiler-artifact",
            "package_id": "path+file:///x/mocks#ski-mocks@0.1.0",
            "manifest_path": "/x/mocks/Cargo.toml",
            "target": {"kind": ["test"], "name": "main"},
            "profile": {"test": true},
            "executable": "/x/target/debug/deps/main-1234"
        });
        let program = program_of(&message).unwrap();
        assert_eq!(program.label, "-p ski-mocks --test main");
        assert_eq!(program.package, "ski-mocks");
        assert_eq!(program.manifest_dir, Path::new("/x/mocks"));
        let mut library = message.clone();
        library["target"]["kind"] = serde_json::json!(["lib"]);
        library["package_id"] = "path+file:///x/ski#0.1.0".into();
        assert_eq!(program_of(&library).unwrap().label, "-p ski --lib");
    }

    #[test]
    fn artifacts_not_built_for_tests_are_not_programs() {
        let built = serde_json::json!({
            "reason": "compiler-artifact",
            "package_id": "path+file:///x#ski@0.1.0",
            "manifest_path": "/x/Cargo.toml",
            "target": {"kind": ["bin"], "name": "ski"},
            "profile": {"test": false},
            "executable": "/x/target/debug/ski"
        });
        assert_eq!(program_of(&built), None);
        let mut no_program = built.clone();
        no_program["profile"]["test"] = true.into();
        no_program["executable"] = Value::Null;
        assert_eq!(program_of(&no_program), None);
    }

    #[test]
    fn the_counts_add_up_every_result_line() {
        let output = "test a ... ok\ntest result: ok. 3 passed; 0 failed; 1 ignored; 0 measured; \
                      0 filtered out; finished in 0.01s\ntest result: FAILED. 2 passed; 1 failed; \
                      0 ignored; 0 measured; 0 filtered out; finished in 1s\n";
        assert_eq!(counts(output), "5 passed, 1 failed");
        assert_eq!(counts("nothing"), "0 passed, 0 failed");
    }

    #[test]
    fn log_names_keep_the_package_and_target() {
        assert_eq!(file_name_of("-p ski --test main"), "-ski-main");
        assert_eq!(file_name_of("--doc"), "");
    }
}
