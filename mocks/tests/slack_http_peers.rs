//! Bolt in HTTP mode against the fake: Bolt for Python (`conformance/targets/peers/slack-bolt-python/`)
//! and Bolt for JavaScript (`slack-bolt-node/`), each with a signing secret, served on a port-0
//! loopback address, given to the fake as its Request URL through the control API (Bolt answers
//! the `url_verification` challenge), then driven through the Web API part of the Socket Mode
//! scenario plus a slash command, a click with `respond`, a mention answered with `say` and a
//! view submission, every request signed. Each is installed by its own script into the target
//! directory; when `python3` or `node`/`npm` is missing, or the install cannot reach its
//! registry, the test says plainly that the peer did not run.

mod peer_support;

use std::time::Duration;

use peer_support::{install, on_path, peers_dir, run_against_fake};
use ski::transport::child::ChildSpec;

/// Starts the fake binary with a signing secret of its own, runs `scenario` with the readiness
/// line as its last argument, and checks that it ends with `<name>: ok`.
async fn run_scenario(name: &str, scenario: ChildSpec) {
    let fake = ChildSpec::new("ski-fake-slack", env!("CARGO_BIN_EXE_ski-fake-slack"))
        .args([
            "serve",
            "--signing-secret",
            "8f742231b10e8888abcd99yyyzzz85a5",
        ])
        .grace(Duration::from_millis(500));
    run_against_fake(name, fake, scenario).await;
}

#[tokio::test]
async fn python_bolt_in_http_mode_runs_the_scenario_unmodified() {
    if !on_path("python3") {
        println!("slack-bolt-python peer: NOT RUN (python3 is not on PATH)");
        return;
    }
    let Some(venv) = install("slack-bolt-python").await else {
        return;
    };
    let scenario = ChildSpec::new("slack-bolt-python", venv.join("bin/python"))
        .arg(peers_dir().join("slack-bolt-python/scenario.py"));
    run_scenario("slack-bolt-python", scenario).await;
}

#[tokio::test]
async fn node_bolt_in_http_mode_runs_the_scenario_unmodified() {
    if !on_path("node") || !on_path("npm") {
        println!("slack-bolt-node peer: NOT RUN (node or npm is not on PATH)");
        return;
    }
    let Some(modules) = install("slack-bolt-node").await else {
        return;
    };
    let scenario = ChildSpec::new("slack-bolt-node", "node")
        .arg(peers_dir().join("slack-bolt-node/scenario.cjs"))
        .env("NODE_PATH", modules.join("node_modules"));
    run_scenario("slack-bolt-node", scenario).await;
}
