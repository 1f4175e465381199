//! Foreign clients against the fake: the Python `slack_sdk` scenario in
//! `conformance/targets/peers/slack-python/` and the Node `@slack/web-api` + `@slack/socket-mode`
//! scenario in `conformance/targets/peers/slack-node/`, each installed by its own script into the
//! target directory, each run against `ski-fake-slack serve` and against `serve --tls` (the
//! client trusting the fake's CA the way it trusts any extra CA: `SSL_CERT_FILE` for Python,
//! `NODE_EXTRA_CA_CERTS` for Node). When `python3` or `node`/`npm` is missing, or the install
//! cannot reach its registry, the test says plainly that the peer did not run.

mod peer_support;

use std::path::{Path, PathBuf};
use std::time::Duration;

use peer_support::{install, on_path, peers_dir, run_against_fake, run_to_end};
use ski::transport::child::ChildSpec;

/// How the fake serves a scenario.
enum Mode {
    Plain,
    /// `serve --tls`; the scenario finds the CA file in this environment variable.
    Tls {
        ca_variable: &'static str,
    },
}

/// Starts the fake binary, runs `scenario` with the readiness line as its last argument, and
/// checks that it ends with `<name>: ok`.
async fn run_scenario(name: &str, scenario: ChildSpec, mode: Mode) {
    let ca_dir = tempfile::tempdir().expect("a directory for the CA");
    let ca_file = ca_dir.path().join("fake-slack-ca.pem");
    let mut fake = ChildSpec::new("ski-fake-slack", env!("CARGO_BIN_EXE_ski-fake-slack"))
        .arg("serve")
        .grace(Duration::from_millis(500));
    let mut scenario = scenario;
    if let Mode::Tls { ca_variable } = mode {
        fake = fake.arg("--tls").arg("--ca-file").arg(&ca_file);
        scenario = scenario.env(ca_variable, &ca_file);
    }
    run_against_fake(name, fake, scenario).await;
}

/// The Python scenario's program, when `python3` is present and the install worked.
async fn python_scenario() -> Option<(PathBuf, ChildSpec)> {
    if !on_path("python3") {
        println!("slack-python peer: NOT RUN (python3 is not on PATH)");
        return None;
    }
    let venv = install("slack-python").await?;
    let scenario = ChildSpec::new("slack-python", venv.join("bin/python"))
        .arg(peers_dir().join("slack-python/scenario.py"));
    Some((venv, scenario))
}

/// The Node scenario's program, when `node` and `npm` are present and the install worked.
async fn node_scenario() -> Option<ChildSpec> {
    if !on_path("node") || !on_path("npm") {
        println!("slack-node peer: NOT RUN (node or npm is not on PATH)");
        return None;
    }
    let modules = install("slack-node").await?;
    Some(
        ChildSpec::new("slack-node", "node")
            .arg(peers_dir().join("slack-node/scenario.cjs"))
            .env("NODE_PATH", modules.join("node_modules")),
    )
}

#[tokio::test]
async fn python_slack_sdk_runs_the_scenario_unmodified() {
    let Some((venv, scenario)) = python_scenario().await else {
        return;
    };
    run_scenario("slack-python", scenario, Mode::Plain).await;

    // The README's Python test, as written, with `ski-fake-slack` on PATH.
    let readme = std::fs::read_to_string(peers_dir().join("../../../README.md")).expect("README");
    let section = &readme[readme
        .find("## ski-fake-slack\n")
        .expect("the fake's section")..];
    let example = section
        .split_once("```python\n")
        .and_then(|(_, rest)| rest.split_once("\n```"))
        .map(|(code, _)| code)
        .expect("a Python example");
    let binary_dir = Path::new(env!("CARGO_BIN_EXE_ski-fake-slack"))
        .parent()
        .expect("the binary's directory");
    let path = format!(
        "{}:{}",
        binary_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let (code, output) = run_to_end(
        ChildSpec::new("readme-python", venv.join("bin/python"))
            .args(["-c", example])
            .env("PATH", path),
    )
    .await;
    assert_eq!(code, Some(0), "the README's Python test failed:\n{output}");
    println!("README Python test: ran, ok");
}

#[tokio::test]
async fn node_web_api_and_socket_mode_run_the_scenario_unmodified() {
    let Some(scenario) = node_scenario().await else {
        return;
    };
    run_scenario("slack-node", scenario, Mode::Plain).await;
}

/// The Web API over HTTPS, and Socket Mode on the `wss://` URL, which slack_sdk's built-in
/// client dials in plain TCP (it uses TLS only on port 443, whatever the scheme says): the fake's
/// Socket Mode port serves both.
#[tokio::test]
async fn python_slack_sdk_runs_the_scenario_over_tls() {
    let Some((_, scenario)) = python_scenario().await else {
        return;
    };
    let tls = Mode::Tls {
        ca_variable: "SSL_CERT_FILE",
    };
    run_scenario("slack-python", scenario, tls).await;
}

#[tokio::test]
async fn node_web_api_and_socket_mode_run_the_scenario_over_tls() {
    let Some(scenario) = node_scenario().await else {
        return;
    };
    let tls = Mode::Tls {
        ca_variable: "NODE_EXTRA_CA_CERTS",
    };
    run_scenario("slack-node", scenario, tls).await;
}
