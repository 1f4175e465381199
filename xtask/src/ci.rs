//! `cargo xtask ci`: the project's test command, the same locally and in CI.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
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

/// Runs the format check, clippy with `-D warnings`, and all tests of the workspace.
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
    Ok(())
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
