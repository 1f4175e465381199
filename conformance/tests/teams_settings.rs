//! The teams adapter contract's settings against a stand-in for a foreign build, for `cargo test
//! -p ski-conformance --test trials -- teams_settings` (libtest-mimic trials).
//!
//! The stand-in is this test binary started again as `<test> --teams-foreign SKI ARGS…`: it
//! answers through the reference `ski teams` but, like the TypeScript fork the document comes
//! from, refuses a task without a description and detects cycles only on request (`task depend`
//! adds any edge; `task cycles` lists the cycles). TEAM-TL-02 and TEAM-TL-10 must pass against it
//! when its profile says `task_description = "required"` and `cycle_detection = "query"`, and
//! fail when the profile cannot say so.

use crate::one_row;

use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Command;

use libtest_mimic::{Failed, Trial};
use rusqlite::Connection;
use serde_json::{Value, json};
use ski_conformance::report::junit::details;
use ski_conformance::runner::ScenarioResult;
use ski_conformance::{Outcome, Target};

/// The first argument that turns this binary into the stand-in.
const FOREIGN: &str = "--teams-foreign";

/// The settings that describe the stand-in.
const SETTINGS: &str =
    "settings = { task_description = \"required\", cycle_detection = \"query\" }";

/// Plays this module's part when the command line names it (this test program started again
/// as a stand-in), and then exits; otherwise returns.
pub fn play_role(argv: &[String]) {
    if argv.get(1).map(String::as_str) == Some(FOREIGN) {
        std::process::exit(foreign(&argv[2..]));
    }
}

/// This module's trials (the root runs them with every other module's).
pub fn trials() -> Vec<Trial> {
    let mut trials = Vec::new();
    for id in ["TEAM-TL-02", "TEAM-TL-10"] {
        trials.push(Trial::test(
            format!("with_settings_passes::{id}"),
            move || expect(id, SETTINGS, Outcome::Pass),
        ));
        trials.push(Trial::test(
            format!("without_settings_fails::{id}"),
            move || expect(id, "", Outcome::Fail),
        ));
    }
    trials
}

/// Fails unless row `id` against the stand-in described with `settings` has `outcome`.
fn expect(id: &str, settings: &str, outcome: Outcome) -> Result<(), Failed> {
    let result = run_row(id, settings)?;
    if result.outcome == outcome {
        return Ok(());
    }
    Err(Failed::from(format!(
        "{id} against the stand-in with {settings:?}: expected {}, got {}\n{}",
        outcome.as_str(),
        result.outcome.as_str(),
        details(&result)
    )))
}

/// The stand-in's profile over the reference `ski` in `bin_dir`.
fn profile(settings: &str, bin_dir: &Path) -> Result<Target, String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let adapter = format!(
        "'{}' {FOREIGN} '{}'",
        exe.display(),
        bin_dir.join("ski").display()
    );
    let text = format!(
        "name = \"teams-foreign\"\n\
         [suites.teams]\n\
         capabilities = [\"teams-core\"]\n\
         {settings}\n\
         [suites.teams.commands]\n\
         adapter = {adapter:?}\n"
    );
    Target::parse("teams-foreign", &text).map_err(|e| e.to_string())
}

/// Runs row `id` against the stand-in described with `settings`.
fn run_row(id: &str, settings: &str) -> Result<ScenarioResult, Failed> {
    one_row::run_row(id, |bin_dir, _| profile(settings, bin_dir)).map_err(Failed::from)
}

// The stand-in.

/// Runs the stand-in with `[ski, args…]`; returns its exit code.
fn foreign(argv: &[String]) -> i32 {
    let [ski, args @ ..] = argv else {
        eprintln!("error: usage: {FOREIGN} SKI ARGS…");
        return 2;
    };
    let root = args
        .iter()
        .position(|a| a == "--root")
        .and_then(|i| args.get(i + 1))
        .cloned()
        .unwrap_or_default();
    let words: Vec<&str> = args.iter().map(String::as_str).collect();
    let command = words
        .iter()
        .position(|w| *w == "task")
        .map(|i| &words[i..])
        .unwrap_or_default();
    let result = match command {
        ["task", "create", ..] if !command.contains(&"--description") => {
            println!(
                "{}",
                json!({"ok": false, "error": {"code": "invalid_input",
                    "message": "description is required"}})
            );
            return 2;
        }
        ["task", "depend", team, id, "--on", dependency] => {
            add_edge(Path::new(&root), team, id, dependency)
        }
        ["task", "cycles", team] => cycles(Path::new(&root), team),
        _ => {
            let error = Command::new(ski).arg("teams").args(args).exec();
            Err(format!("cannot start {ski}: {error}"))
        }
    };
    match result {
        Ok(value) => {
            println!("{value}");
            0
        }
        Err(message) => {
            eprintln!("error: {message}");
            5
        }
    }
}

fn ledger(root: &Path, team: &str) -> Result<Connection, String> {
    Connection::open(root.join(team).join("ledger.db"))
        .map_err(|e| format!("cannot open the ledger: {e}"))
}

/// Adds the edge without looking for a cycle.
fn add_edge(root: &Path, team: &str, id: &str, dependency: &str) -> Result<Value, String> {
    ledger(root, team)?
        .execute(
            "UPDATE tasks SET dependsOn = json_insert(dependsOn, '$[#]', ?2), \
             blockedBy = json_insert(blockedBy, '$[#]', ?2) WHERE id = ?1",
            [id, dependency],
        )
        .map_err(|e| format!("cannot add the edge: {e}"))?;
    Ok(json!({"ok": true, "task": {"id": id}}))
}

/// Every cycle of the dependency graph, each as the ids along it.
fn cycles(root: &Path, team: &str) -> Result<Value, String> {
    let conn = ledger(root, team)?;
    let mut statement = conn
        .prepare("SELECT id, dependsOn FROM tasks")
        .map_err(|e| format!("cannot read the tasks: {e}"))?;
    let edges: Vec<(String, Vec<String>)> = statement
        .query_map([], |r| {
            let id: String = r.get(0)?;
            let depends: String = r.get(1)?;
            Ok((id, serde_json::from_str(&depends).unwrap_or_default()))
        })
        .and_then(Iterator::collect)
        .map_err(|e| format!("cannot read the tasks: {e}"))?;
    let mut found = Vec::new();
    for (start, _) in &edges {
        let mut path = vec![start.clone()];
        while let Some(next) = edges
            .iter()
            .find(|(id, _)| Some(id) == path.last())
            .and_then(|(_, depends)| depends.first())
        {
            if next == start {
                found.push(path.clone());
                break;
            }
            if path.contains(next) {
                break;
            }
            path.push(next.clone());
        }
    }
    Ok(json!({"ok": true, "cycles": found}))
}
