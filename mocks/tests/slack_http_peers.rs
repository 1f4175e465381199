//! Bolt in HTTP mode against the fake: Bolt for Python (`conformance/targets/peers/slack-bolt-python/`)
//! and Bolt for JavaScript (`slack-bolt-node/`), each with a signing secret, served on a port-0
//! loopback address, given to the fake as its Request URL through the control API (Bolt answers
//! the `url_verification` challenge), then driven through the Web API part of the Socket Mode
//! scenario plus a slash command, a click with `respond`, a mention answered with `say` and a
//! view submission, every request signed; each against `serve` and against `serve --tls` (the
//! app's Web API calls over HTTPS, trusting the fake's CA). Each is installed by its own script
//! into the target directory; when `python3` or `node`/`npm` is missing, or the install cannot
//! reach its registry, the test says plainly that the peer did not run.

use crate::peer_support;

use peer_support::{Transport, node_peer, python_peer, run_against_fake_slack};

async fn bolt_python(transport: Transport) {
    let peer = python_peer("slack-bolt-python", "slack-bolt-python/scenario.py").await;
    if let Some((_, scenario)) = peer {
        run_against_fake_slack("slack-bolt-python", scenario, transport).await;
    }
}

async fn bolt_node(transport: Transport) {
    if let Some(scenario) = node_peer("slack-bolt-node", "slack-bolt-node/scenario.cjs").await {
        run_against_fake_slack("slack-bolt-node", scenario, transport).await;
    }
}

#[tokio::test]
async fn python_bolt_in_http_mode_runs_the_scenario_unmodified() {
    bolt_python(Transport::Plain).await;
}

#[tokio::test]
async fn python_bolt_in_http_mode_runs_the_scenario_over_tls() {
    bolt_python(Transport::Tls).await;
}

#[tokio::test]
async fn node_bolt_in_http_mode_runs_the_scenario_unmodified() {
    bolt_node(Transport::Plain).await;
}

#[tokio::test]
async fn node_bolt_in_http_mode_runs_the_scenario_over_tls() {
    bolt_node(Transport::Tls).await;
}
