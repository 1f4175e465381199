//! `cargo xtask ci`: the project's test command, the same locally and in CI (format, clippy,
//! tests, and a short fuzz campaign per target).

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use clap::Args;
use serde_json::Value;
use xshell::{Shell, cmd};

/// Options of `cargo xtask ci`.
#[derive(Debug, Args)]
pub struct CiArgs {
    /// Skip the format check and clippy; run only the tests.
    #[arg(long)]
    pub tests_only: bool,
}

/// Runs the format check, clippy with `-D warnings`, all tests of the workspace and a short fuzz
/// campaign per target.
pub fn run(args: &CiArgs) -> Result<()> {
    let sh = Shell::new()?;
    sh.change_dir(workspace_root());
    // Snapshots are never written in CI: a changed golden fails with the command that fixes it.
    sh.set_var("INSTA_UPDATE", "no");
    if !args.tests_only {
        ensure_component(&sh, "rustfmt", "fmt")?;
        ensure_component(&sh, "clippy", "clippy")?;
        cmd!(sh, "cargo fmt --all -- --check")
            .run()
            .context("formatting differs: run `cargo fmt --all` and commit")?;
        cmd!(
            sh,
            "cargo clippy --workspace --all-targets --locked -- -D warnings"
        )
        .run()
        .context("clippy found problems")?;
        check_features(&sh)?;
    }
    cmd!(
        sh,
        "cargo test --workspace --all-targets --locked --no-fail-fast"
    )
    .run()
    .context("tests failed")?;
    cmd!(sh, "cargo test --workspace --doc --locked")
        .run()
        .context("doc tests failed")?;
    // Every fuzz target for a short, fixed budget from a fixed seed: the same inputs each run,
    // so a finding here is reproducible with `cargo xtask fuzz --seed`.
    let fuzz_options = ["--time", FUZZ_SECONDS_PER_TARGET, "--seed", FUZZ_SEED].map(str::to_owned);
    crate::fuzz::campaign(&sh, &fuzz_options, true)?;
    Ok(())
}

/// Seconds CI fuzzes each target (six targets: one minute in all).
const FUZZ_SECONDS_PER_TARGET: &str = "10";

/// The seed of CI's fuzz campaigns.
const FUZZ_SEED: &str = "20261207";

/// The systems of `ski`, one Cargo feature each.
const SYSTEMS: &[&str] = &["acp", "aof", "teams", "kiro", "intercom"];

/// What a package that adds `ski-mocks` must not compile (SQLite, the MCP SDK, the Slack client).
const HEAVY_FOR_MOCKS: &[&str] = &["rusqlite", "libsqlite3-sys", "rmcp", "slack-morphism"];

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
    // Built alone, as a project that adds it builds it: no feature comes from another package.
    cmd!(sh, "cargo check -p ski-mocks --lib --bins --locked")
        .run()
        .context("ski-mocks does not build on its own")?;
    let format = "{p}";
    let tree = cmd!(
        sh,
        "cargo tree -p ski-mocks --edges normal,build --prefix none --format {format} --locked"
    )
    .quiet()
    .read()
    .context("cargo tree failed")?;
    let heavy = heavy_dependencies(&tree);
    if !heavy.is_empty() {
        bail!(
            "ski-mocks pulls in {} (enable fewer features of ski in mocks/Cargo.toml)",
            heavy.join(", ")
        );
    }
    Ok(())
}

/// The crates of [`HEAVY_FOR_MOCKS`] named in a `cargo tree --prefix none` listing.
fn heavy_dependencies(tree: &str) -> Vec<&'static str> {
    HEAVY_FOR_MOCKS
        .iter()
        .copied()
        .filter(|name| {
            tree.lines()
                .any(|line| line.split_whitespace().next() == Some(*name))
        })
        .collect()
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
    fn heavy_dependencies_are_found_by_crate_name_only() {
        let tree =
            "ski-mocks v0.1.0 (/x/mocks)\nski v0.1.0 (/x)\nrusqlite v0.37.0\nrmcp-macros v1.0.0\n";
        assert_eq!(heavy_dependencies(tree), vec!["rusqlite"]);
        assert!(heavy_dependencies("ski v0.1.0\nserde v1.0.0\n").is_empty());
    }
}
