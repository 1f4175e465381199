//! What the model-checked ledger tests share: the proptest configuration of the model tests
//! (`teams_model`, `aof_model`) and the seeded generator of the multi-process kill harness
//! (`ledger_kill_harness`).

use proptest::test_runner::Config;

/// The cases each model test runs unless `PROPTEST_CASES` says otherwise.
const DEFAULT_CASES: u32 = 64;

/// 64 cases (or `PROPTEST_CASES`), and no regression files written into the source tree: a
/// failure prints its minimal sequence of operations, which is what a regression test is built
/// from.
pub fn model_config() -> Config {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|cases| cases.parse().ok())
        .unwrap_or(DEFAULT_CASES);
    Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    }
}

/// A small seeded generator (SplitMix64): the same seed gives the same run, so a failing seed can
/// be replayed.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator starting from `seed`.
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in `0..bound` (`bound` > 0).
    pub fn below(&mut self, bound: usize) -> usize {
        (self.next_u64() % bound as u64) as usize
    }

    /// True with probability `percent` / 100.
    pub fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }

    /// One element of `items` (not empty).
    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}
