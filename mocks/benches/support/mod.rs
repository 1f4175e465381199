//! What the benchmarks of `ski-mocks` share: where rows go, finding the `ski` binary beside this
//! package's, and starting short helper commands.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};
use ski::transport::child::{ChildSpec, spawn};

/// The bench directory: `SKI_BENCH_DIR` as `cargo xtask bench` sets it, else `target/bench`.
pub fn bench_dir() -> Result<PathBuf> {
    if let Some(dir) = std::env::var_os("SKI_BENCH_DIR") {
        return Ok(PathBuf::from(dir));
    }
    // target/<profile>/deps/<bench>-HASH -> target/bench
    let exe = std::env::current_exe().context("the bench's own path")?;
    let target = exe
        .ancestors()
        .nth(3)
        .context("the bench runs from target/<profile>/deps")?;
    Ok(target.join("bench"))
}

/// Writes `$SKI_BENCH_DIR/rows/<name>.json` in the `cargo xtask bench` row format.
pub fn write_rows(name: &str, rows: &[Value], notes: &[String]) -> Result<()> {
    let dir = bench_dir()?.join("rows");
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let path = dir.join(format!("{name}.json"));
    std::fs::write(
        &path,
        serde_json::to_string_pretty(&json!({ "rows": rows, "notes": notes }))?,
    )
    .with_context(|| format!("cannot write {}", path.display()))?;
    println!("rows: {}", path.display());
    Ok(())
}

/// Whether `program args` exits 0 (stdin closed, output ignored).
pub async fn succeeds(program: &Path, args: &[&str], cwd: Option<&Path>) -> bool {
    let mut spec = ChildSpec::new("probe", program).args(args);
    if let Some(cwd) = cwd {
        spec = spec.cwd(cwd);
    }
    let Ok(mut child) = spawn(spec) else {
        return false;
    };
    child.close_stdin();
    while let Ok(Some(_)) = child.next_line().await {}
    matches!(
        tokio::time::timeout(Duration::from_secs(600), child.wait()).await,
        Ok(Ok(status)) if status.success()
    )
}

/// The `ski` binary of this build (`SKI_BIN`, else beside this bench's profile directory),
/// built in release mode first if it is missing; it must have `ski acp serve`.
pub async fn ski_binary() -> Result<PathBuf> {
    let exe = std::env::current_exe().context("the bench's own path")?;
    let sibling = exe
        .parent()
        .and_then(Path::parent)
        .context("the bench runs from target/<profile>/deps")?
        .join("ski");
    let program = std::env::var_os("SKI_BIN").map_or(sibling, PathBuf::from);
    if !program.exists() {
        let cargo = std::env::var_os("CARGO").map_or_else(|| PathBuf::from("cargo"), PathBuf::from);
        let built = succeeds(
            &cargo,
            &["build", "--release", "-p", "ski", "--bin", "ski"],
            Some(Path::new(env!("CARGO_MANIFEST_DIR"))),
        )
        .await;
        if !built || !program.exists() {
            bail!(
                "no ski binary at {} (cargo build --release -p ski)",
                program.display()
            );
        }
    }
    if !succeeds(&program, &["acp", "serve", "--help"], None).await {
        bail!("{} has no `acp serve` subcommand", program.display());
    }
    Ok(program)
}
