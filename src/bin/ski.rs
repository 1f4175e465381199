//! The `ski` command: reference implementations of the specified agent protocols.
//!
//! The program starts at a C `main` rather than std's `fn main`: std's start-up reads
//! `/proc/self/maps` to place the main thread's stack guard and sets up an alternate signal stack,
//! about 0.2 ms of every start on a small VM, as much as answering `initialize`. What of it `ski`
//! relies on is done in [`main`]: SIGPIPE is ignored (a write to a closed pipe fails with EPIPE),
//! a panic ends the process with status 101, and the exit goes through std (stdout flushed).
#![cfg_attr(not(test), no_main)]

use std::process::ExitCode;

use clap::{Args, Command, FromArgMatches, Subcommand};
use ski::cli::deferred;

/// The subcommands; each one's arguments are built only when it is the one invoked.
#[derive(Debug, Subcommand)]
enum SkiCommand {
    #[command(subcommand)]
    Acp(ski::acp::cli::AcpCommand),
    Aof(ski::aof::cli::AofArgs),
    Teams(ski::teams::cli::TeamsArgs),
    Kiro(ski::kiro::cli::KiroArgs),
    Intercom(ski::intercom::cli::IntercomArgs),
}

/// The command line. Building clap's whole tree (every flag of every subcommand) costs more at
/// start-up than an agent's first answer, so each subcommand is a stub naming itself, filled in
/// by clap (`Command::defer`) only when it is parsed or its help is shown.
fn command_line() -> Command {
    Command::new("ski")
        .version(env!("CARGO_PKG_VERSION"))
        .about(env!("CARGO_PKG_DESCRIPTION"))
        .subcommand_required(true)
        .arg_required_else_help(true)
        .subcommand(
            // The enum's own doc comment would replace the about line.
            deferred("acp", ski::acp::cli::ABOUT, |acp| {
                ski::acp::cli::add_deferred_subcommands(acp).about(ski::acp::cli::ABOUT)
            })
            .subcommand_required(true)
            .arg_required_else_help(true),
        )
        .subcommand(deferred(
            "aof",
            ski::aof::cli::ABOUT,
            ski::aof::cli::AofArgs::augment_args,
        ))
        .subcommand(deferred(
            "teams",
            ski::teams::cli::ABOUT,
            ski::teams::cli::TeamsArgs::augment_args,
        ))
        .subcommand(deferred(
            "kiro",
            ski::kiro::cli::ABOUT,
            ski::kiro::cli::KiroArgs::augment_args,
        ))
        .subcommand(deferred(
            "intercom",
            ski::intercom::cli::ABOUT,
            ski::intercom::cli::IntercomArgs::augment_args,
        ))
}

/// The process entry point (see the module documentation).
#[cfg(not(test))]
#[allow(unsafe_code)] // the exported symbol, and one `signal` call
#[unsafe(no_mangle)]
extern "C" fn main(
    _argc: std::ffi::c_int,
    _argv: *const *const std::ffi::c_char,
) -> std::ffi::c_int {
    // SAFETY: called once, before any other thread exists; SIG_IGN is a valid disposition.
    unsafe { nix::libc::signal(nix::libc::SIGPIPE, nix::libc::SIG_IGN) };
    let status = match std::panic::catch_unwind(run) {
        Ok(code) => exit_status(code),
        // The panic hook has printed the message, as it does under `fn main`.
        Err(_) => 101,
    };
    std::process::exit(status)
}

/// The number an [`ExitCode`] stands for (std offers no conversion; every code `ski` returns is
/// made from a `u8`).
fn exit_status(code: ExitCode) -> i32 {
    (0..=u8::MAX)
        .find(|&n| ExitCode::from(n) == code)
        .map_or(1, i32::from)
}

// Called only from the C `main`, which test builds do not have.
#[cfg_attr(test, allow(dead_code))]
fn run() -> ExitCode {
    let mut matches = command_line().get_matches();
    // `from_arg_matches` would clone every match first; the matches are not used again.
    let command =
        SkiCommand::from_arg_matches_mut(&mut matches).unwrap_or_else(|error| error.exit());
    match command {
        SkiCommand::Acp(command) => command.run(),
        SkiCommand::Aof(args) => match ski::aof::cli::run(args) {
            Ok(()) => ExitCode::SUCCESS,
            Err(error) => error.report(),
        },
        SkiCommand::Teams(args) => ski::teams::cli::run(args),
        SkiCommand::Kiro(args) => ski::kiro::cli::run(args),
        SkiCommand::Intercom(args) => ski::intercom::cli::run(args),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_codes_keep_their_number() {
        assert_eq!(exit_status(ExitCode::SUCCESS), 0);
        assert_eq!(exit_status(ExitCode::FAILURE), 1);
        assert_eq!(exit_status(ExitCode::from(3)), 3);
        assert_eq!(exit_status(ExitCode::from(255)), 255);
    }

    #[test]
    fn the_command_line_passes_clap_checks_with_every_subcommand_built() {
        command_line().debug_assert();
    }
}
