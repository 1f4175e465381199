//! Pieces shared by the `ski` command tree: subcommands whose arguments clap builds lazily, and
//! [`output`], the stdout every program prints to (a closed reader is no panic).

pub mod output;

use clap::Command;

/// A subcommand as its parent's `--help` lists it (name and one-line `about`), whose arguments
/// `build` adds only when it is parsed or its own help is shown. A derived `augment_args` or
/// `augment_subcommands` applies its type's doc comment as `about`; `build` sets `about` again
/// where that comment differs.
pub fn deferred(name: &'static str, about: &'static str, build: fn(Command) -> Command) -> Command {
    Command::new(name).about(about).defer(build)
}
