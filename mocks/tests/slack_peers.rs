//! Foreign Socket Mode clients against the fake, each run against `ski-fake-slack serve` and
//! against `serve --tls` (the client trusting the fake's CA the way it trusts any extra CA:
//! `SSL_CERT_FILE` for Python, `NODE_EXTRA_CA_CERTS` for Node), from
//! `conformance/targets/peers/`: Python `slack_sdk` with its built-in Socket Mode client
//! (`slack-python/scenario.py`) and with its asyncio clients on aiohttp (`scenario_aiohttp.py`);
//! Node `@slack/web-api` + `@slack/socket-mode`, the current lines (`slack-node`) and the previous
//! ones (`slack-node-v7`, same scenario); Bolt for Python's `App` with `SocketModeHandler`
//! (`slack-bolt-python/scenario.py --socket-mode`) and `AsyncApp` with `AsyncSocketModeHandler`
//! (`scenario_async.py`); Bolt for JavaScript in Socket Mode (`slack-bolt-node/scenario.cjs
//! --socket-mode`). Each is installed by its own script into the target directory; when `python3`
//! or `node`/`npm` is missing, or the install cannot reach its registry, the test says plainly
//! that the peer did not run.

use crate::peer_support;

use std::path::Path;

use peer_support::{
    Transport, node_peer, peers_dir, python_peer, run_against_fake_slack, run_to_end,
};
use ski::transport::child::ChildSpec;

async fn slack_sdk_sync(transport: Transport) {
    if let Some((_, scenario)) = python_peer("slack-python", "slack-python/scenario.py").await {
        run_against_fake_slack("slack-python", scenario, transport).await;
    }
}

async fn slack_sdk_aiohttp(transport: Transport) {
    let peer = python_peer("slack-python", "slack-python/scenario_aiohttp.py").await;
    if let Some((_, scenario)) = peer {
        run_against_fake_slack("slack-python-aiohttp", scenario, transport).await;
    }
}

async fn node_clients(install_name: &str, transport: Transport) {
    if let Some(scenario) = node_peer(install_name, "slack-node/scenario.cjs").await {
        run_against_fake_slack("slack-node", scenario, transport).await;
    }
}

async fn bolt_python_sync(transport: Transport) {
    let peer = python_peer("slack-bolt-python", "slack-bolt-python/scenario.py").await;
    if let Some((_, scenario)) = peer {
        let scenario = scenario.arg("--socket-mode");
        run_against_fake_slack("slack-bolt-python-socket", scenario, transport).await;
    }
}

async fn bolt_python_async(transport: Transport) {
    let peer = python_peer("slack-bolt-python", "slack-bolt-python/scenario_async.py").await;
    if let Some((_, scenario)) = peer {
        run_against_fake_slack("slack-bolt-python-async", scenario, transport).await;
    }
}

async fn bolt_node(transport: Transport) {
    if let Some(scenario) = node_peer("slack-bolt-node", "slack-bolt-node/scenario.cjs").await {
        let scenario = scenario.arg("--socket-mode");
        run_against_fake_slack("slack-bolt-node-socket", scenario, transport).await;
    }
}

#[tokio::test]
async fn python_slack_sdk_runs_the_scenario_unmodified() {
    slack_sdk_sync(Transport::Plain).await;
    let Some((venv, _)) = python_peer("slack-python", "slack-python/scenario.py").await else {
        return;
    };

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

/// The Web API over HTTPS, and Socket Mode on the `wss://` URL, which slack_sdk's built-in
/// client dials in plain TCP (it uses TLS only on port 443, whatever the scheme says): the fake's
/// Socket Mode port serves both.
#[tokio::test]
async fn python_slack_sdk_runs_the_scenario_over_tls() {
    slack_sdk_sync(Transport::Tls).await;
}

#[tokio::test]
async fn python_slack_sdk_aiohttp_runs_the_scenario_unmodified() {
    slack_sdk_aiohttp(Transport::Plain).await;
}

#[tokio::test]
async fn python_slack_sdk_aiohttp_runs_the_scenario_over_tls() {
    slack_sdk_aiohttp(Transport::Tls).await;
}

#[tokio::test]
async fn node_web_api_and_socket_mode_run_the_scenario_unmodified() {
    node_clients("slack-node", Transport::Plain).await;
}

#[tokio::test]
async fn node_web_api_and_socket_mode_run_the_scenario_over_tls() {
    node_clients("slack-node", Transport::Tls).await;
}

#[tokio::test]
async fn node_web_api_7_and_socket_mode_2_run_the_scenario_unmodified() {
    node_clients("slack-node-v7", Transport::Plain).await;
}

#[tokio::test]
async fn node_web_api_7_and_socket_mode_2_run_the_scenario_over_tls() {
    node_clients("slack-node-v7", Transport::Tls).await;
}

#[tokio::test]
async fn python_bolt_in_socket_mode_runs_the_scenario_unmodified() {
    bolt_python_sync(Transport::Plain).await;
}

#[tokio::test]
async fn python_bolt_in_socket_mode_runs_the_scenario_over_tls() {
    bolt_python_sync(Transport::Tls).await;
}

#[tokio::test]
async fn python_async_bolt_in_socket_mode_runs_the_scenario_unmodified() {
    bolt_python_async(Transport::Plain).await;
}

#[tokio::test]
async fn python_async_bolt_in_socket_mode_runs_the_scenario_over_tls() {
    bolt_python_async(Transport::Tls).await;
}

#[tokio::test]
async fn node_bolt_in_socket_mode_runs_the_scenario_unmodified() {
    bolt_node(Transport::Plain).await;
}

#[tokio::test]
async fn node_bolt_in_socket_mode_runs_the_scenario_over_tls() {
    bolt_node(Transport::Tls).await;
}
