//! ski-fuzz: fuzzing on stable Rust, in the tree. Each target drives one parser of the project
//! with mutated input and checks its invariants; `cargo xtask fuzz` runs the campaigns, and the
//! package's tests (`cargo test -p ski-fuzz --lib --test regression`, a step of `cargo xtask ci`)
//! replay every corpus entry and saved finding.
//!
//! - [`targets`]: the targets and their seeds.
//! - [`mutate`]: the mutation engine.
//! - [`engine`]: the campaign loop, the watchdog, findings, minimising and replay.
//! - [`corpus`]: seeds from the repository, the in-tree corpus and the artifacts.
//! - [`alloc`]: the counting allocator behind the memory checks.
//! - [`rng`]: the seeded generator.

pub mod alloc;
pub mod corpus;
pub mod engine;
pub mod mutate;
pub mod rng;
pub mod targets;

/// Unit tests count allocations as `ski-fuzz` does.
#[cfg(test)]
#[global_allocator]
static ALLOCATOR: alloc::CountingAllocator = alloc::CountingAllocator;
