//! Foreign clients against the fake: the Python `slack_sdk` scenario in
//! `conformance/targets/peers/slack-python/` (installed by its own script into the target
//! directory). When `python3` is missing, or the install cannot reach PyPI, the test says plainly
//! that the peer did not run.

use std::path::{Path, PathBuf};
use std::time::Duration;

use ski::transport::child::{ChildSpec, spawn};

fn on_path(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join(program).is_file()))
}

fn peers_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../conformance/targets/peers")
}

/// `<target>/peers`, beside the build profiles.
fn install_root() -> PathBuf {
    let binary = Path::new(env!("CARGO_BIN_EXE_ski-fake-slack"));
    binary
        .parent()
        .and_then(Path::parent)
        .unwrap_or(Path::new("."))
        .join("peers")
}

async fn run_to_end(spec: ChildSpec) -> (Option<i32>, String) {
    let mut child = spawn(spec.grace(Duration::from_millis(500))).expect("spawn");
    let mut output = String::new();
    while let Some((_, line)) = child.next_output_line().await {
        output.push_str(&line);
        output.push('\n');
    }
    let status = child.wait().await.expect("exit");
    (status.code(), output)
}

#[tokio::test]
async fn python_slack_sdk_runs_the_scenario_unmodified() {
    if !on_path("python3") {
        println!("slack-python peer: NOT RUN (python3 is not on PATH)");
        return;
    }
    let venv = install_root().join("slack-python");
    let (code, output) = run_to_end(
        ChildSpec::new("install", "bash")
            .arg(peers_dir().join("slack-python/install.sh"))
            .arg(&venv),
    )
    .await;
    if code != Some(0) {
        println!("slack-python peer: NOT RUN (install.sh failed, PyPI unreachable?):\n{output}");
        return;
    }

    let mut fake = spawn(
        ChildSpec::new("ski-fake-slack", env!("CARGO_BIN_EXE_ski-fake-slack"))
            .arg("serve")
            .grace(Duration::from_millis(500)),
    )
    .expect("spawn the fake");
    let ready = fake
        .next_line()
        .await
        .expect("read")
        .expect("readiness line");
    let mut scenario = ChildSpec::new("slack-python", venv.join("bin/python"))
        .arg(peers_dir().join("slack-python/scenario.py"))
        .arg(&ready);
    for proxy in [
        "HTTPS_PROXY",
        "HTTP_PROXY",
        "https_proxy",
        "http_proxy",
        "ALL_PROXY",
        "all_proxy",
    ] {
        scenario = scenario.env_remove(proxy);
    }
    let (code, output) = run_to_end(scenario).await;
    fake.shutdown().await.expect("stop the fake");
    assert_eq!(code, Some(0), "{output}");
    assert!(output.contains("slack-python: ok"), "{output}");
    println!("slack-python peer: ran, ok");
}
