//! `cargo xtask conformance`: builds every binary and runs `ski-conformance run` against a target,
//! writing `report.md`, `junit.xml` and `results.json` into `<target dir>/conformance`. The
//! reference's profiles run with `--strict`. With `--defects` it runs the ACP defect corpus
//! instead and prints its catch table.

use anyhow::{Context, Result};
use clap::Args;
use xshell::{Shell, cmd};

use crate::ci::{target_dir, workspace_root};

/// Options of `cargo xtask conformance`; anything else is passed to `ski-conformance run`.
#[derive(Debug, Args)]
pub struct ConformanceArgs {
    /// Only this suite (repeatable).
    #[arg(long = "suite", value_name = "SUITE")]
    pub suites: Vec<String>,
    /// The target profile (a name from conformance/targets or a path); default: reference.
    #[arg(long, value_name = "PROFILE")]
    pub target: Option<String>,
    /// Only shard i of n.
    #[arg(long, value_name = "I/N")]
    pub shard: Option<String>,
    /// Run the ACP defect corpus (conformance/defects/acp) and print its catch table: each
    /// defect with the rows that caught it, and every ACP row with the defects that caught it
    /// or why none can.
    #[arg(long, conflicts_with_all = ["suites", "target", "shard", "rest"])]
    pub defects: bool,
    /// More options for `ski-conformance run` (see `ski-conformance run --help`).
    #[arg(
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "ARGS"
    )]
    pub rest: Vec<String>,
}

/// Whether a run against this profile is strict: the reference's profiles (`reference`,
/// `reference-*`), which are held to every row; another build gets warnings for its should and
/// interop failures unless `--strict` is passed on.
fn holds_to_every_row(target: Option<&str>) -> bool {
    target.is_none_or(|name| name == "reference" || name.starts_with("reference-"))
}

/// Builds the workspace's binaries, then runs the conformance catalog; exits with its code.
pub fn run(args: &ConformanceArgs) -> Result<()> {
    let sh = Shell::new()?;
    let root = workspace_root();
    sh.change_dir(&root);
    if args.defects {
        return run_defects(&sh, &root);
    }
    cmd!(sh, "cargo build --workspace --bins")
        .run()
        .context("building the binaries failed")?;
    let target_dir = target_dir(&sh, &root)?;
    let runner = target_dir.join("debug").join("ski-conformance");
    // Each shard keeps its own reports, so that `ski-conformance merge` can combine them.
    let out = match &args.shard {
        Some(shard) => target_dir
            .join("conformance")
            .join(format!("shard-{}", shard.replace('/', "-of-"))),
        None => target_dir.join("conformance"),
    };
    let mut forwarded: Vec<String> = Vec::new();
    for suite in &args.suites {
        forwarded.extend(["--suite".to_owned(), suite.clone()]);
    }
    if let Some(target) = &args.target {
        forwarded.extend(["--target".to_owned(), target.clone()]);
    }
    if let Some(shard) = &args.shard {
        forwarded.extend(["--shard".to_owned(), shard.clone()]);
    }
    // The reference is held to every row: its should and interop failures fail the run too.
    if holds_to_every_row(args.target.as_deref()) && !args.rest.iter().any(|a| a == "--strict") {
        forwarded.push("--strict".to_owned());
    }
    forwarded.extend(args.rest.iter().cloned());
    let command = cmd!(sh, "{runner} run --out {out} {forwarded...}");
    let status = std::process::Command::from(command)
        .status()
        .with_context(|| format!("cannot start {}", runner.display()))?;
    match status.code() {
        Some(0) => Ok(()),
        Some(code) => std::process::exit(code),
        None => anyhow::bail!("ski-conformance was ended by a signal"),
    }
}

/// Runs the ACP defect corpus's test, then prints the catch table it wrote; exits as the test did.
fn run_defects(sh: &Shell, root: &std::path::Path) -> Result<()> {
    let table = target_dir(sh, root)?
        .join("conformance")
        .join("acp-defects.md");
    // A table left by an earlier run must not pass for this one's.
    if let Err(e) = std::fs::remove_file(&table)
        && e.kind() != std::io::ErrorKind::NotFound
    {
        return Err(e).with_context(|| format!("cannot remove {}", table.display()));
    }
    let test = cmd!(
        sh,
        "cargo test -p ski-conformance --test trials -- acp_defects"
    );
    let status = std::process::Command::from(test)
        .status()
        .context("cannot start cargo test")?;
    match std::fs::read_to_string(&table) {
        Ok(text) => print!("{text}"),
        Err(e) => eprintln!("no catch table at {}: {e}", table.display()),
    }
    match status.code() {
        Some(0) => Ok(()),
        Some(code) => std::process::exit(code),
        None => anyhow::bail!("cargo test was ended by a signal"),
    }
}

#[cfg(test)]
mod tests {
    use super::holds_to_every_row;

    #[test]
    fn only_the_reference_is_held_to_every_row_by_default() {
        assert!(holds_to_every_row(None));
        assert!(holds_to_every_row(Some("reference")));
        assert!(holds_to_every_row(Some("reference-ws")));
        assert!(!holds_to_every_row(Some("gemini-cli")));
        assert!(!holds_to_every_row(Some("my/reference.toml")));
    }
}
