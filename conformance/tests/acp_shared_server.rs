//! The runner against one already-running agent that every scenario shares (`--agent-url` at a
//! `ski acp serve --transport http` started here, not per scenario): the session rows that load
//! and resume a session pass while the rows that log out run beside them, and a session another
//! client made before the run is still there after it (a `logout` ends the sessions of the
//! connection that sends it, not every session of the agent).

use crate::binaries;
use crate::corpus_http_front;
use crate::support;

use std::path::Path;
use std::time::Duration;

use serde_json::Value;
use ski::transport::child::{Child, ChildSpec, OutputStream, spawn};
use ski_conformance::Target;

/// The built binaries' directory (their build blocks, so it runs off the runtime's threads).
async fn bin_dir() -> std::path::PathBuf {
    tokio::task::spawn_blocking(|| {
        let reference = Target::load("reference").expect("the reference profile");
        binaries::prepare_binaries(&reference).expect("the binaries are built")
    })
    .await
    .expect("the build task ends")
}

/// `ski acp serve --transport http` on a free port, started as the reference profile starts its
/// agent: the process and its `/acp` URL.
async fn serve(bin_dir: &Path) -> (Child, String) {
    let spec = ChildSpec::new("serve", bin_dir.join("ski")).args([
        "acp",
        "serve",
        "--enable",
        "fork",
        "--enable",
        "set-model",
        "--permission-mode",
        "disabled",
        "--transport",
        "http",
        "--listen",
        "127.0.0.1:0",
    ]);
    let mut child = spawn(spec).expect("ski acp serve starts");
    while let Some((_, line)) = child.next_output_line().await {
        if let Some(authority) = corpus_http_front::http_authority(&line) {
            return (child, format!("http://{authority}/acp"));
        }
    }
    panic!("ski acp serve printed no http:// address");
}

/// `ski acp client connect` at `url` with `args`: its exit code and stdout lines (JSON).
async fn client(bin_dir: &Path, url: &str, cwd: &Path, args: &[&str]) -> (Option<i32>, Vec<Value>) {
    let spec = ChildSpec::new("client", bin_dir.join("ski"))
        .args([
            "acp",
            "client",
            "connect",
            "--transport",
            "http",
            "--endpoint",
            url,
        ])
        .args(["--json", "--log-level", "error", "--cwd"])
        .arg(cwd)
        .args(args)
        .cwd(cwd)
        .grace(Duration::from_millis(500));
    let mut child = spawn(spec).expect("ski acp client starts");
    child.close_stdin();
    let mut lines = Vec::new();
    while let Some((stream, line)) = child.next_output_line().await {
        if stream == OutputStream::Stdout {
            lines.push(serde_json::from_str(&line).unwrap_or(Value::String(line)));
        }
    }
    let status = child.wait().await.expect("an exit status");
    (status.code(), lines)
}

#[tokio::test]
async fn load_and_resume_pass_against_a_shared_agent_whose_other_clients_log_out() {
    let bin_dir = bin_dir().await;
    let (agent, url) = serve(&bin_dir).await;
    let dir = tempfile::tempdir().expect("a temp dir");

    // A session of another client, made before the run; its client has gone.
    let (code, lines) = client(&bin_dir, &url, dir.path(), &["--prompt", "kept"]).await;
    assert_eq!(code, Some(0), "{lines:?}");
    let session = lines
        .iter()
        .find(|l| l["type"] == "prompt_result")
        .and_then(|l| l["sessionId"].as_str())
        .unwrap_or_else(|| panic!("a prompt_result with a sessionId: {lines:?}"))
        .to_owned();

    let out = dir.path().join("out");
    let out_text = out.display().to_string();
    let run = support::ski_conformance(
        &[
            "run",
            "--agent-url",
            &url,
            "--suite",
            "acp",
            "--out",
            &out_text,
            "--quiet",
            "-j",
            "8",
            "--id",
            "ACP-CORE-005",
            "--id",
            "ACP-CORE-048",
            "--id",
            "ACP-CAP-002",
            "--id",
            "ACP-CAP-006",
            "--id",
            "ACP-V1X-006",
            "--id",
            "ACP-V2-015",
        ],
        dir.path(),
    )
    .await;

    // The session made before the run takes a prompt after it: no client's logout ended it.
    let (after, lines) = client(
        &bin_dir,
        &url,
        dir.path(),
        &["--session-id", &session, "--prompt", "still here"],
    )
    .await;
    drop(agent);
    assert_eq!(run.code, Some(0), "{}{}", run.stdout, run.stderr);
    let all = crate::results::row_outcomes(&out);
    assert_eq!(all.len(), 6, "{all:?}");
    for (id, outcome, failure) in &all {
        assert_eq!(outcome, "pass", "{id}: {failure}");
    }
    assert_eq!(after, Some(0), "{lines:?}");
    assert!(
        lines
            .iter()
            .any(|l| l["type"] == "prompt_result" && l["stopReason"] == "end_turn"),
        "{lines:?}"
    );
}
