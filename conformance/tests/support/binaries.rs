//! The workspace's binaries for tests that run a target profile: located in the cargo target dir
//! the test was built into, and built first with `cargo build --workspace --bins` when missing or
//! older than one of their own sources, as cargo's dep-info file beside each program lists them
//! (a program a test build made has none: then older than any source of the workspace;
//! `SKI_CONFORMANCE_NO_BUILD=1` only locates them).

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use ski::transport::child::{ChildSpec, spawn};
use ski_conformance::Target;
use ski_conformance::target::CommandTemplate;

/// The cargo target profile dir this test binary lives in (`target/debug`).
pub fn profile_dir() -> Result<PathBuf, String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot locate the test binary: {e}"))?;
    // target/<profile>/deps/reference-<hash>
    exe.parent()
        .and_then(Path::parent)
        .map(Path::to_path_buf)
        .ok_or_else(|| format!("{} is not inside a cargo target dir", exe.display()))
}

/// The binaries the reference profile starts as `{bin_dir}/NAME`.
fn needed_binaries(target: &Target) -> Vec<String> {
    let mut names: Vec<String> = target
        .suites
        .values()
        .flat_map(|s| s.commands.values())
        .filter_map(|c: &CommandTemplate| c.words().ok())
        .flatten()
        .filter_map(|w| w.strip_prefix("{bin_dir}/").map(str::to_owned))
        .collect();
    // The teams and intercom suites read the target's SQLite file through it.
    names.push(ski_conformance::sqlite::PROGRAM.to_owned());
    names.sort();
    names.dedup();
    names
}

pub fn prepare_binaries(target: &Target) -> Result<PathBuf, String> {
    let bin_dir = profile_dir()?;
    let needed = needed_binaries(target);
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .ok_or("the package has no workspace root")?;
    let stale: Vec<&String> = needed
        .iter()
        .filter(|name| is_stale(&bin_dir, name, &root))
        .collect();
    if stale.is_empty() {
        return Ok(bin_dir);
    }
    let names: Vec<&str> = stale.iter().map(|s| s.as_str()).collect();
    if std::env::var_os("SKI_CONFORMANCE_NO_BUILD").is_some() {
        return Err(format!(
            "the reference binaries {} are missing or older than the sources in {}; run \
             `cargo build --workspace --bins` (or `cargo xtask conformance`)",
            names.join(", "),
            bin_dir.display()
        ));
    }
    build(&root, &bin_dir).map_err(|e| {
        format!(
            "the reference binaries {} are missing or stale and building them failed: {e}; run \
             `cargo build --workspace --bins` and retry",
            names.join(", ")
        )
    })?;
    Ok(bin_dir)
}

/// Runs `cargo build --workspace --bins` into the target dir this test was built into.
fn build(root: &Path, bin_dir: &Path) -> Result<(), String> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let profile = bin_dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "debug".to_owned());
    let target_dir = bin_dir.parent().ok_or("no target dir")?;
    let mut spec = ChildSpec::new("cargo", cargo)
        .args(["build", "--workspace", "--bins"])
        .env("CARGO_TARGET_DIR", target_dir)
        .cwd(root);
    if profile != "debug" {
        let name = if profile == "release" {
            "release"
        } else {
            profile.as_str()
        };
        spec = spec.arg("--profile").arg(name);
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    runtime.block_on(async move {
        let mut child = spawn(spec).map_err(|e| e.to_string())?;
        child.close_stdin();
        let mut output = String::new();
        while let Some((_, line)) = child.next_output_line().await {
            output.push_str(&line);
            output.push('\n');
        }
        let status = child.wait().await.map_err(|e| e.to_string())?;
        if status.success() {
            Ok(())
        } else {
            Err(format!("cargo build ended with {status}:\n{output}"))
        }
    })
}

/// Whether the program `name` in `bin_dir` is missing, or older than a source cargo built it
/// from: the paths its dep-info file (`NAME.d`, written beside the program by a `cargo build`
/// that names it) lists, so an edit elsewhere in the workspace leaves it fresh. A program only a
/// test build made (cargo writes no dep-info beside the programs it builds for integration
/// tests) is stale when older than any source of the workspace under `root`.
fn is_stale(bin_dir: &Path, name: &str, root: &Path) -> bool {
    let modified = |path: &Path| std::fs::metadata(path).and_then(|m| m.modified());
    let Ok(built) = modified(&bin_dir.join(name)) else {
        return true;
    };
    let Ok(dep_info) = std::fs::read_to_string(bin_dir.join(format!("{name}.d"))) else {
        return newest_mtime(root).is_some_and(|source| built < source);
    };
    let sources = dep_info_sources(&dep_info);
    sources.is_empty()
        || sources
            .iter()
            .any(|source| modified(source).map_or(true, |time| time > built))
}

/// The sources a dep-info file names: the words after the first rule's colon, with `\ ` an
/// escaped space and a trailing `\` continuing the line.
fn dep_info_sources(dep_info: &str) -> Vec<PathBuf> {
    let joined = dep_info.replace("\\\n", " ");
    let Some(rule) = joined.lines().find(|line| line.contains(": ")) else {
        return Vec::new();
    };
    let Some((_, sources)) = rule.split_once(": ") else {
        return Vec::new();
    };
    let mut paths = Vec::new();
    let mut current = String::new();
    let mut words = sources.split(' ').peekable();
    while let Some(word) = words.next() {
        if let Some(escaped) = word.strip_suffix('\\')
            && words.peek().is_some()
        {
            current.push_str(escaped);
            current.push(' ');
            continue;
        }
        current.push_str(word);
        if !current.is_empty() {
            paths.push(PathBuf::from(std::mem::take(&mut current)));
        }
    }
    paths
}

/// The newest modification time of the workspace's sources (Rust files and manifests).
fn newest_mtime(root: &Path) -> Option<SystemTime> {
    let mut newest: Option<SystemTime> = None;
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let name = entry.file_name();
            let name = name.to_string_lossy();
            if name.starts_with('.') || name == "target" {
                continue;
            }
            if path.is_dir() {
                stack.push(path);
            } else if (name.ends_with(".rs") || name == "Cargo.toml" || name == "Cargo.lock")
                && let Ok(modified) = entry.metadata().and_then(|m| m.modified())
            {
                newest = Some(newest.map_or(modified, |n| n.max(modified)));
            }
        }
    }
    // File systems with coarse time stamps: treat sources up to a second newer as equal.
    newest.map(|n| n.checked_sub(Duration::from_secs(1)).unwrap_or(n))
}

#[test]
fn a_dep_info_file_lists_its_sources_across_continued_lines_and_escaped_spaces() {
    let dep_info =
        "/t/debug/ski: /w/src/main.rs /w/my\\ dir/lib.rs \\\n /w/src/acp.rs\n\n/w/src/main.rs:\n";
    assert_eq!(
        dep_info_sources(dep_info),
        ["/w/src/main.rs", "/w/my dir/lib.rs", "/w/src/acp.rs"].map(PathBuf::from)
    );
    assert!(dep_info_sources("").is_empty());
}
