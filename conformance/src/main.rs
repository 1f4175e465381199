//! `ski-conformance`: runs the scenario catalog against a target and writes the reports.
//!
//! See `ski-conformance --help` and `conformance/README.md`.

fn main() -> std::process::ExitCode {
    std::process::ExitCode::from(ski_conformance::cli::main_with_args(std::env::args_os()))
}
