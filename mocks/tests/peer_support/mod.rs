//! What the tests that run foreign peers share: finding a program on `PATH`, the peers' folder
//! (`conformance/targets/peers`), installing a peer by its own script into `<target>/peers`, and
//! running a program (or a scenario against the fake Slack) to its end. Not every test that
//! includes it uses every part.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::time::Duration;

use ski::transport::child::{ChildSpec, spawn};

/// Whether `program` is an executable file in a directory of `PATH`.
pub fn on_path(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join(program).is_file()))
}

/// `conformance/targets/peers`: each peer's install script and scenario.
pub fn peers_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../conformance/targets/peers")
}

/// `<target>/peers`, beside the build profiles.
pub fn install_root() -> PathBuf {
    Path::new(env!("CARGO_BIN_EXE_ski-fake-slack"))
        .parent()
        .and_then(Path::parent)
        .unwrap_or(Path::new("."))
        .join("peers")
}

/// Runs a program to its end: its exit code and its output, both streams in order.
pub async fn run_to_end(spec: ChildSpec) -> (Option<i32>, String) {
    let mut child = spawn(spec.grace(Duration::from_millis(500))).expect("spawn");
    let mut output = String::new();
    while let Some((_, line)) = child.next_output_line().await {
        output.push_str(&line);
        output.push('\n');
    }
    let status = child.wait().await.expect("exit");
    (status.code(), output)
}

/// Runs a peer's install script into `<target>/peers/<name>`; `None` (with a plain note) when
/// it fails.
pub async fn install(name: &str) -> Option<PathBuf> {
    let dest = install_root().join(name);
    let (code, output) = run_to_end(
        ChildSpec::new("install", "bash")
            .arg(peers_dir().join(name).join("install.sh"))
            .arg(&dest),
    )
    .await;
    if code == Some(0) {
        Some(dest)
    } else {
        println!("{name} peer: NOT RUN (install.sh failed, registry unreachable?):\n{output}");
        None
    }
}

/// Starts the fake Slack (`fake`), runs `scenario` with the fake's readiness line as its last
/// argument and no proxy in its environment, stops the fake, and checks that the scenario ended
/// with `<name>: ok`.
pub async fn run_against_fake(name: &str, fake: ChildSpec, scenario: ChildSpec) {
    let mut fake = spawn(fake).expect("spawn the fake");
    let ready = fake
        .next_line()
        .await
        .expect("read")
        .expect("readiness line");
    let mut scenario = scenario.arg(&ready);
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
    assert!(output.contains(&format!("{name}: ok")), "{output}");
    println!("{name} peer: ran, ok");
}
