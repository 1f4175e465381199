//! The regression pass of `cargo xtask ci`'s fuzz step: every seed, every in-tree corpus entry
//! and every saved finding goes through every target once; a finding that comes back fails here.

use std::time::Duration;

use ski_fuzz::corpus::repository_root;
use ski_fuzz::engine::{replay, replay_inputs};
use ski_fuzz::targets::TARGETS;

#[test]
fn every_corpus_entry_and_finding_passes_every_target() {
    let inputs = replay_inputs(&repository_root());
    assert!(inputs.len() > 100, "only {} inputs found", inputs.len());
    let mut failures = Vec::new();
    for target in TARGETS {
        failures.extend(replay(target, inputs.clone(), Duration::from_secs(20)));
    }
    let report: Vec<String> = failures
        .iter()
        .map(|f| format!("{} on {}: {}", f.target, f.input, f.message))
        .collect();
    assert!(report.is_empty(), "{}", report.join("\n"));
}
