//! The `ski` command line as clap checks it: every command and subcommand answers `--help`. In
//! a debug build clap runs its consistency checks (`Command::debug_assert`: duplicate names,
//! conflicting or missing arguments) on each command as it is built, and the deferred
//! subcommands are built only when reached, so this walks the whole tree.

use std::process::Command;

/// The subcommands a `--help` text lists under "Commands:" (clap's own `help` left out).
fn subcommands(help: &str) -> Vec<String> {
    help.lines()
        .skip_while(|line| line.trim_end() != "Commands:")
        .skip(1)
        .take_while(|line| !line.trim().is_empty())
        .filter(|line| line.starts_with("  ") && !line.starts_with("   "))
        .filter_map(|line| line.split_whitespace().next())
        .filter(|name| *name != "help")
        .map(str::to_owned)
        .collect()
}

#[test]
fn every_command_of_the_command_line_passes_clap_checks_and_answers_help() {
    let mut pending = vec![Vec::<String>::new()];
    let mut seen = 0;
    while let Some(path) = pending.pop() {
        let output = Command::new(env!("CARGO_BIN_EXE_ski"))
            .args(&path)
            .arg("--help")
            .output()
            .expect("ski runs");
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(
            output.status.success() && stdout.contains("Usage: ski"),
            "ski {} --help: {:?}\n{stdout}{}",
            path.join(" "),
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
        seen += 1;
        for name in subcommands(&stdout) {
            let mut next = path.clone();
            next.push(name);
            pending.push(next);
        }
    }
    // The five systems and their subcommands.
    assert!(seen > 20, "only {seen} commands were found");
}

#[test]
fn the_listed_subcommands_are_read_without_continuation_lines_or_help() {
    let help = "Usage: ski <COMMAND>\n\nCommands:\n  acp   ACP\n  aof   AOF: validate,\n        \
                route\n  help  Print this message\n\nOptions:\n  -h, --help\n";
    assert_eq!(subcommands(help), ["acp", "aof"]);
}
