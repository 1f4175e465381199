//! The official model clients against `ski-fake-model serve --script
//! mocks/tests/model_support/peer_turns.toml`, from `conformance/targets/peers/`: Python `openai`
//! and `anthropic` (`model-python/scenario.py`) and Node `openai` and `@anthropic-ai/sdk`
//! (`model-node/scenario.cjs`), each through Chat Completions, Responses and Messages, whole
//! and streamed (their own accumulating stream helpers too), with tool calls, a refusal, a
//! wrong key, a scripted 500 and a 429/529 they retry. Each is installed by its own script into
//! the target directory; when `python3` or `node`/`npm` is missing, or the install cannot reach
//! its registry, the test says plainly that the peer did not run.

use crate::peer_support;

use std::path::Path;
use std::time::Duration;

use peer_support::{node_peer, python_peer, run_against_fake};
use ski::transport::child::ChildSpec;

fn fake_model() -> ChildSpec {
    let turns = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/model_support/peer_turns.toml");
    ChildSpec::new("ski-fake-model", env!("CARGO_BIN_EXE_ski-fake-model"))
        .arg("serve")
        .arg("--script")
        .arg(turns)
        .grace(Duration::from_millis(500))
}

#[tokio::test]
async fn python_openai_and_anthropic_clients_run_the_scenario_unmodified() {
    if let Some((_, scenario)) = python_peer("model-python", "model-python/scenario.py").await {
        run_against_fake("model-python", fake_model(), scenario).await;
    }
}

#[tokio::test]
async fn node_openai_and_anthropic_clients_run_the_scenario_unmodified() {
    if let Some(scenario) = node_peer("model-node", "model-node/scenario.cjs").await {
        run_against_fake("model-node", fake_model(), scenario).await;
    }
}
