//! `cargo xtask`: the project's automation entry points (see `cargo xtask --help`).

mod bench;
mod ci;
mod conformance;

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
}

fn main() -> Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Command::Ci(args) => ci::run(&args),
        Command::Conformance(args) => conformance::run(&args),
        Command::Bench(args) => bench::run(&args),
    }
}
