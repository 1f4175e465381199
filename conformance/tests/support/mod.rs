//! What the command-line tests share: running `ski-conformance` as a process and reading what
//! it printed and how it exited.

use std::path::Path;

use ski::transport::child::{ChildSpec, OutputStream, spawn};

/// How a `ski-conformance` run ended.
pub struct Output {
    /// The exit code (`None` if a signal ended it).
    pub code: Option<i32>,
    /// Everything it printed on stdout.
    pub stdout: String,
    /// Everything it printed on stderr.
    pub stderr: String,
}

/// Runs `ski-conformance ARGS` in `cwd` (with `CI` unset, so no progress bar) to its end.
pub async fn ski_conformance(args: &[&str], cwd: &Path) -> Output {
    ski_conformance_with_env(args, cwd, &[]).await
}

/// [`ski_conformance`] with `env` added to its environment.
pub async fn ski_conformance_with_env(args: &[&str], cwd: &Path, env: &[(&str, &str)]) -> Output {
    let mut spec = ChildSpec::new("ski-conformance", env!("CARGO_BIN_EXE_ski-conformance"))
        .args(args)
        .env_remove("CI")
        .cwd(cwd);
    for (key, value) in env {
        spec = spec.env(key, value);
    }
    let mut child = spawn(spec).expect("ski-conformance starts");
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
