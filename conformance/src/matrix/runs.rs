//! One target's column made by the same `ski-conformance run` a user types: this binary started
//! once per target with the matrix's selection, its reports in the target's subdirectory, its
//! lines passed on with the target's label in front.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use ski::cli::output;
use ski::transport::child::{ChildSpec, OutputStream, spawn};

use super::target_arg::{TargetArg, TargetSource};

/// How many of a run's last stderr lines explain a run that left no results.
const STDERR_TAIL: usize = 5;

/// How one target's run ended.
#[derive(Debug)]
pub struct Finished {
    /// Its exit code (`None`: a signal ended it, or it never started).
    pub code: Option<i32>,
    /// Its last stderr lines (or why it did not start).
    pub stderr_tail: Vec<String>,
}

/// The `run` arguments naming `target`, with its reports going to `dir`.
pub fn run_args(target: &TargetArg, common: &[OsString], dir: &Path) -> Vec<OsString> {
    let mut args: Vec<OsString> = vec!["run".into()];
    match &target.source {
        TargetSource::Profile(profile) => args.extend(["--target".into(), profile.into()]),
        TargetSource::AgentCmd(cmd) => args.extend(["--agent-cmd".into(), cmd.into()]),
        TargetSource::AgentUrl(url) => args.extend(["--agent-url".into(), url.into()]),
        TargetSource::Results(_) => {}
    }
    args.extend(common.iter().cloned());
    args.extend(["--out".into(), dir.as_os_str().to_owned()]);
    args
}

/// Runs `program run ...` for `target` into `out/LABEL` (its earlier `results.json` removed
/// first, so a run that fails to start cannot leave a stale column) and waits for it.
pub async fn run_one(
    program: &Path,
    target: &TargetArg,
    common: &[OsString],
    out: &Path,
) -> Finished {
    let dir: PathBuf = out.join(&target.label);
    let _ = std::fs::remove_file(dir.join("results.json"));
    let spec = ChildSpec::new(format!("run {}", target.label), program)
        .args(run_args(target, common, &dir))
        .die_with_parent();
    let mut child = match spawn(spec) {
        Ok(child) => child,
        Err(error) => {
            return Finished {
                code: None,
                stderr_tail: vec![error.to_string()],
            };
        }
    };
    child.close_stdin();
    let mut tail: Vec<String> = Vec::new();
    while let Some((stream, line)) = child.next_output_line().await {
        match stream {
            OutputStream::Stdout => output::line(format_args!("[{}] {line}", target.label)),
            OutputStream::Stderr => {
                eprintln!("[{}] {line}", target.label);
                tail.push(line);
                if tail.len() > STDERR_TAIL {
                    tail.remove(0);
                }
            }
        }
    }
    let code = match child.wait().await {
        Ok(status) => status.code(),
        Err(error) => {
            tail.push(error.to_string());
            None
        }
    };
    Finished {
        code,
        stderr_tail: tail,
    }
}
