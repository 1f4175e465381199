//! `cargo xtask ci`: the project's test command, the same locally and in CI (format, feature
//! checks, one build that is clippy's and the tests', the tests with the doc tests, and the fuzz
//! engine's tests and a short campaign per target).
//! Each step's output streams as it runs; the last line says which step failed (for the tests,
//! which test programs), or how many steps passed and how long they took.

use std::ffi::OsString;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use clap::Args;
use serde_json::Value;
use xshell::{Shell, cmd};

/// Options of `cargo xtask ci`.
#[derive(Debug, Args)]
pub struct CiArgs {
    /// Skip the format check, clippy and the feature checks; run only the tests.
    #[arg(long)]
    pub tests_only: bool,
}

/// Runs the format check, the feature checks, one build with clippy's lints (`-D warnings`),
/// every test program of the workspace with the doc tests, and the fuzz engine's tests and
/// campaigns, stopping at the first
/// step that fails. Ends with one line: the step that failed (and the process exits 1), or the
/// steps run and the time they took.
pub fn run(args: &CiArgs) -> Result<()> {
    let started = Instant::now();
    let mut passed = 0;
    match run_steps(args, &mut passed) {
        Ok(()) => {
            eprintln!(
                "ci: ok, {passed} steps passed in {}",
                minutes(started.elapsed())
            );
            Ok(())
        }
        Err(failure) => {
            eprintln!(
                "ci: FAILED at step {} ({failure}), after {passed} passed steps and {}",
                passed + 1,
                minutes(started.elapsed())
            );
            std::process::exit(1)
        }
    }
}

/// The steps, in order; `passed` counts those that passed.
fn run_steps(args: &CiArgs, passed: &mut usize) -> Result<(), String> {
    let sh = Shell::new().map_err(|error| format!("setup: {error}"))?;
    sh.change_dir(workspace_root());
    // Snapshots are never written in CI: a changed golden fails with the command that fixes it.
    sh.set_var("INSTA_UPDATE", "no");
    let mut step = |name: &str, result: Result<()>| match result {
        Ok(()) => {
            *passed += 1;
            Ok(())
        }
        Err(error) => Err(format!("{name}: {error:#}")),
    };
    if !args.tests_only {
        step(
            "format",
            ensure_component(&sh, "rustfmt", "fmt").and_then(|()| {
                cmd!(sh, "cargo fmt --all -- --check")
                    .run()
                    .context("formatting differs: run `cargo fmt --all` and commit")
            }),
        )?;
        step("feature checks", check_features(&sh))?;
    }
    // Clippy's lints come with the test build rather than from a build of their own: clippy's
    // driver is the compiler of the workspace's packages (`RUSTC_WORKSPACE_WRAPPER`, as `cargo
    // clippy` sets it, but compiling to programs rather than only checking), so one build of the
    // dependencies serves both. It lints what `cargo test --workspace` builds (every library,
    // program and test program, the doc tests aside), the benchmarks, and below the one program
    // no test builds and the fuzz engine; `cargo clippy --workspace --all-targets -- -D
    // warnings` covers the same code.
    // (The driver is part of what cargo fingerprints: a later `cargo test` without it compiles
    // the workspace's packages again, not their dependencies.)
    let lints = if args.tests_only {
        Vec::new()
    } else {
        let lints = match clippy_as_compiler(&sh) {
            Ok(lints) => lints,
            Err(error) => return Err(format!("clippy: {error:#}")),
        };
        step(
            "lints and test build",
            cargo_step(
                &sh,
                &lints,
                &["test", "--workspace", "--locked", "--no-run"],
            )
            .and_then(|()| {
                cargo_step(
                    &sh,
                    &lints,
                    &["test", "--workspace", "--locked", "--no-run", "--benches"],
                )
            })
            .context("clippy or the compiler found problems"),
        )?;
        lints
    };
    // The test programs of the workspace and its doc tests (`--all-targets` would add every
    // program and benchmark built in test mode, none of which has tests). First the one program
    // no test program makes cargo build, which the conformance tests run (without it they would
    // build every program again, with the features of a build that is not a test build).
    step(
        "tests",
        cargo_step(
            &sh,
            &lints,
            &[
                "build",
                "--workspace",
                "--locked",
                "--bin",
                "ski-conformance-sqlite",
            ],
        )
        .and_then(|()| {
            let threads = test_threads().to_string();
            cargo_step(
                &sh,
                &lints,
                &[
                    "test",
                    "--workspace",
                    "--locked",
                    "--no-fail-fast",
                    "--",
                    "--test-threads",
                    &threads,
                ],
            )
        }),
    )?;
    // The fuzz engine's tests and the regression pass, which replays every seed, corpus entry
    // and saved finding (`test = false` in fuzz/Cargo.toml: only this step builds them, by name,
    // with the workspace's features, so only `ski-fuzz` is compiled, at the `opt-level = 3` of
    // its campaigns; the other libraries' unit tests run again, in about a second). Then every
    // fuzz target for a short, fixed budget from a fixed seed: the same inputs each run, so a
    // finding here is reproducible with `cargo xtask fuzz --seed`. The program is the one this
    // build made (cargo builds a package's programs for its integration tests).
    let fuzz_options = ["--time", FUZZ_SECONDS_PER_TARGET, "--seed", FUZZ_SEED].map(str::to_owned);
    step(
        "fuzz",
        cargo_step(
            &sh,
            &lints,
            &[
                "test",
                "--workspace",
                "--locked",
                "--lib",
                "--test",
                "regression",
            ],
        )
        .and_then(|()| crate::fuzz::campaign(&sh, &fuzz_options, crate::fuzz::Build::Done)),
    )?;
    Ok(())
}

/// Runs `cargo <args>` (a build or the tests) in the workspace root with the variables `env`, its
/// output passed on as it comes; when it fails, the error names what cargo reported failing: the
/// test programs (`-p ski --test main`) or the targets that did not compile.
fn cargo_step(sh: &Shell, env: &[(&str, OsString)], args: &[&str]) -> Result<()> {
    let mut child = Command::new("cargo")
        .args(args)
        .current_dir(sh.current_dir())
        .env("INSTA_UPDATE", "no")
        .envs(env.iter().map(|(name, value)| (name, value)))
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("cannot start cargo {}", args.join(" ")))?;
    let mut failed = Vec::new();
    if let Some(stderr) = child.stderr.take() {
        for line in BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            eprintln!("{line}");
            if let Some(target) = failed_target(&line)
                && !failed.contains(&target)
            {
                failed.push(target);
            }
        }
    }
    let status = child.wait().context("waiting for cargo")?;
    if status.success() {
        return Ok(());
    }
    if failed.is_empty() {
        bail!("cargo {} failed ({status})", args.join(" "));
    }
    bail!("{}", failed.join(", "))
}

/// What a line of cargo's output names as failing: a test program that failed (`-p ski --test
/// main failed`, from "to rerun pass `…`" or the list after "N targets failed:") or a target
/// that did not compile.
fn failed_target(line: &str) -> Option<String> {
    let quoted = |text: &str| {
        let start = text.find('`')? + 1;
        let end = start + text[start..].find('`')?;
        Some(text[start..end].to_owned())
    };
    let trimmed = line.trim_start();
    if let Some(rest) = line.split_once("to rerun pass ").map(|(_, rest)| rest) {
        return quoted(rest).map(|target| format!("{target} failed"));
    }
    if trimmed.starts_with('`') && line.starts_with(char::is_whitespace) {
        return quoted(trimmed).map(|target| format!("{target} failed"));
    }
    if let Some(rest) = line.strip_prefix("error: could not compile ") {
        let end = rest.find(" due to").unwrap_or(rest.len());
        return Some(format!("{} does not compile", &rest[..end]));
    }
    None
}

/// `m:ss`.
fn minutes(elapsed: Duration) -> String {
    let seconds = elapsed.as_secs();
    format!("{}:{:02}", seconds / 60, seconds % 60)
}

/// Tests run at once in each test program: three per core. The tests wait far more than they
/// compute (processes, sockets, a target's timeouts: `ski-conformance`'s `main` used 110 s of CPU
/// in 213 s on 2 cores two at a time; 119 s at six), and none may depend on an idle machine (the
/// project's rule: deterministic on a loaded 2-core machine).
fn test_threads() -> usize {
    std::thread::available_parallelism().map_or(2, usize::from) * 3
}

/// Seconds CI fuzzes each target (six targets: 30 s in all). A smoke test from a fixed seed; long
/// campaigns are `cargo xtask fuzz`.
const FUZZ_SECONDS_PER_TARGET: &str = "5";

/// The seed of CI's fuzz campaigns.
const FUZZ_SEED: &str = "20261207";

/// The systems of `ski`, one Cargo feature each.
const SYSTEMS: &[&str] = &["acp", "aof", "teams", "kiro", "intercom"];

/// What each library layer must not link (`docs/ARCHITECTURE.md`, "Layers"): a package and the
/// crates, or `crate/feature` pairs, absent from its normal dependency tree. A project that adds
/// `ski-mocks` builds no SQLite, MCP SDK or Slack client; the runner links none of the systems it
/// judges (it reads SQLite files through `ski-conformance-sqlite`, and is an MCP client only).
const LAYERS: &[(&str, &[&str])] = &[
    (
        "ski-mocks",
        &[
            "rusqlite",
            "libsqlite3-sys",
            "rmcp",
            "slack-morphism",
            "notify",
        ],
    ),
    (
        "ski-conformance",
        &[
            "rusqlite",
            "libsqlite3-sys",
            "slack-morphism",
            "notify",
            "rmcp/server",
        ],
    ),
];

/// Each system of `ski` builds alone (and with none), and `ski-mocks` pulls in none of the heavy
/// dependencies of the systems it does not use.
fn check_features(sh: &Shell) -> Result<()> {
    cmd!(
        sh,
        "cargo check -p ski --no-default-features --lib --locked"
    )
    .run()
    .context("ski does not build without its systems")?;
    for system in SYSTEMS {
        cmd!(
            sh,
            "cargo check -p ski --no-default-features --features {system} --lib --bins --locked"
        )
        .run()
        .with_context(|| format!("ski does not build with only the `{system}` feature"))?;
    }
    for (package, forbidden) in LAYERS {
        // Built alone, as a project that adds it builds it: no feature comes from another package.
        cmd!(sh, "cargo check -p {package} --lib --bins --locked")
            .run()
            .with_context(|| format!("{package} does not build on its own"))?;
        let format = "{p} [{f}]";
        let tree = cmd!(
            sh,
            "cargo tree -p {package} --edges normal,build --prefix none --format {format} --locked"
        )
        .quiet()
        .read()
        .context("cargo tree failed")?;
        let found = forbidden_in(&tree, forbidden);
        if !found.is_empty() {
            bail!(
                "{package} links {} (docs/ARCHITECTURE.md, \"Layers\": enable fewer features of its \
                 dependencies)",
                found.join(", ")
            );
        }
    }
    Ok(())
}

/// The entries of `forbidden` (a crate, or `crate/feature`) present in a
/// `cargo tree --prefix none --format "{p} [{f}]"` listing.
fn forbidden_in<'a>(tree: &str, forbidden: &[&'a str]) -> Vec<&'a str> {
    forbidden
        .iter()
        .copied()
        .filter(|entry| {
            let (name, feature) = entry.split_once('/').unwrap_or((entry, ""));
            tree.lines().any(|line| {
                let mut words = line.split_whitespace();
                let features = line.rsplit_once('[').map_or("", |(_, rest)| {
                    rest.trim_end_matches([']', ' ', '(', '*', ')'])
                });
                words.next() == Some(name)
                    && (feature.is_empty() || features.split(',').any(|f| f == feature))
            })
        })
        .collect()
}

/// The environment that makes clippy's driver the compiler of the workspace's packages, its
/// warnings denied (what `cargo clippy -- -D warnings` sets for a check), installing clippy when
/// it is missing. The dependencies are compiled by rustc as before.
fn clippy_as_compiler(sh: &Shell) -> Result<Vec<(&'static str, OsString)>> {
    ensure_component(sh, "clippy", "clippy")?;
    let sysroot = cmd!(sh, "rustc --print sysroot")
        .quiet()
        .read()
        .context("rustc --print sysroot")?;
    let driver = Path::new(sysroot.trim()).join("bin").join("clippy-driver");
    if !driver.is_file() {
        bail!("clippy is installed but {} is missing", driver.display());
    }
    Ok(vec![
        ("RUSTC_WORKSPACE_WRAPPER", driver.into_os_string()),
        // Arguments for clippy's driver, separated as `cargo clippy` separates them.
        (
            "CLIPPY_ARGS",
            "-D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__".into(),
        ),
    ])
}

/// Installs a rustup component when the cargo subcommand it provides is missing.
fn ensure_component(sh: &Shell, component: &str, subcommand: &str) -> Result<()> {
    if cmd!(sh, "cargo {subcommand} --version")
        .quiet()
        .ignore_stdout()
        .ignore_stderr()
        .run()
        .is_ok()
    {
        return Ok(());
    }
    cmd!(sh, "rustup component add {component}")
        .run()
        .with_context(|| format!("cannot install the rustup component {component}"))
}

/// The workspace root: the parent of this package's manifest directory.
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."))
}

/// The target directory: `CARGO_TARGET_DIR` when set, else what `cargo metadata` says.
pub fn target_dir(sh: &Shell, root: &Path) -> Result<PathBuf> {
    if let Some(dir) = std::env::var_os("CARGO_TARGET_DIR") {
        let dir = PathBuf::from(dir);
        return Ok(if dir.is_absolute() {
            dir
        } else {
            root.join(dir)
        });
    }
    let metadata = cmd!(sh, "cargo metadata --format-version 1 --no-deps")
        .quiet()
        .read()
        .context("cargo metadata failed")?;
    let metadata: Value = serde_json::from_str(&metadata).context("cargo metadata output")?;
    metadata["target_directory"]
        .as_str()
        .map(PathBuf::from)
        .context("cargo metadata has no target_directory")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forbidden_crates_are_found_by_crate_name_only() {
        let tree = "ski-mocks v0.1.0 (/x/mocks) []\nski v0.1.0 (/x) [acp]\nrusqlite v0.37.0 \
                    [bundled]\nrmcp-macros v1.0.0 []\n";
        assert_eq!(forbidden_in(tree, &["rusqlite", "rmcp"]), vec!["rusqlite"]);
        assert!(forbidden_in("ski v0.1.0 [acp]\nserde v1.0.0 [std]\n", &["rusqlite"]).is_empty());
    }

    #[test]
    fn a_forbidden_feature_is_found_only_where_it_is_on() {
        let client = "rmcp v3.11.0 [base64,client,transport-worker]\n";
        assert!(forbidden_in(client, &["rmcp/server"]).is_empty());
        let server = "rmcp v3.11.0 [client,server,transport-io] (*)\n";
        assert_eq!(forbidden_in(server, &["rmcp/server"]), vec!["rmcp/server"]);
    }

    #[test]
    fn the_failed_test_programs_are_read_from_cargo_output() {
        assert_eq!(
            failed_target("error: test failed, to rerun pass `-p ski --test main`").as_deref(),
            Some("-p ski --test main failed")
        );
        assert_eq!(
            failed_target("    `-p ski-mocks --lib`").as_deref(),
            Some("-p ski-mocks --lib failed")
        );
        assert_eq!(
            failed_target(
                "error: could not compile `ski` (test \"main\") due to 2 previous errors"
            )
            .as_deref(),
            Some("`ski` (test \"main\") does not compile")
        );
        assert_eq!(failed_target("test foo ... ok"), None);
        assert_eq!(failed_target("`-p ski --lib` at the start of a line"), None);
    }

    #[test]
    fn durations_are_minutes_and_seconds() {
        assert_eq!(minutes(Duration::from_secs(754)), "12:34");
        assert_eq!(minutes(Duration::from_secs(5)), "0:05");
    }
}
