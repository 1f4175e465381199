//! `cargo xtask`: the project's automation entry points (see `cargo xtask --help`).

mod bench;
mod ci;
mod conformance;
mod fuzz;
mod modules;

use anyhow::Result;
use clap::{Parser, Subcommand};

/// Project automation for ski.
#[derive(Debug, Parser)]
#[command(name = "cargo xtask", bin_name = "cargo xtask")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run what CI runs: format check, clippy with warnings denied, and every test.
    Ci(ci::CiArgs),
    /// Build the binaries and run the conformance catalog against a target (default: reference).
    Conformance(conformance::ConformanceArgs),
    /// Run the benchmarks, write target/bench/report.json and print a table.
    Bench(bench::BenchArgs),
    /// Fuzz the parsers for `--time` seconds per target; exits non-zero on a finding.
    Fuzz(fuzz::FuzzArgs),
    /// Check (or `--write`) the module index of docs/ARCHITECTURE.md against the sources.
    Modules(modules::ModulesArgs),
}

fn main() -> Result<()> {
    forget_package_environment();
    let cli = Cli::parse();
    match cli.command {
        Command::Ci(args) => ci::run(&args),
        Command::Conformance(args) => conformance::run(&args),
        Command::Bench(args) => bench::run(&args),
        Command::Fuzz(args) => fuzz::run(&args),
        Command::Modules(args) => modules::run(&args),
    }
}

/// `cargo xtask` is `cargo run`, which gives xtask the environment of a running package
/// (`CARGO_MANIFEST_DIR`, `CARGO_PKG_NAME`, ...). Passed on to the cargo commands xtask starts,
/// they made those builds differ from the same command typed by hand (ring's build script
/// watches `CARGO_MANIFEST_DIR`): each rebuilt ring and everything above it, a long link of the
/// release `ski` included, whenever the previous build had been made the other way. They are
/// removed before anything else runs.
#[allow(unsafe_code)] // `remove_var`
fn forget_package_environment() {
    let names: Vec<String> = std::env::vars_os()
        .filter_map(|(name, _)| name.into_string().ok())
        .filter(|name| {
            name.starts_with("CARGO_PKG_")
                || matches!(
                    name.as_str(),
                    "CARGO_MANIFEST_DIR"
                        | "CARGO_MANIFEST_PATH"
                        | "CARGO_CRATE_NAME"
                        | "CARGO_BIN_NAME"
                        | "CARGO_PRIMARY_PACKAGE"
                )
        })
        .collect();
    for name in names {
        // SAFETY: the first thing `main` does; xtask has no other thread yet.
        unsafe { std::env::remove_var(name) };
    }
}
