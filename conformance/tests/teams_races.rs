//! The teams suite's concurrency rows against a deliberately broken adapter, for `cargo test -p
//! ski-conformance --test trials -- teams_races` (libtest-mimic trials).
//!
//! The broken adapter is this test binary started again as `<test> --teams-races SKI ARGS…`. It
//! answers through the reference `ski teams` except for three commands, which it implements
//! itself with the races the rows exist to catch:
//!
//! - `task claim` reads the task and then writes its owner with an unconditional `UPDATE` (a
//!   read-then-write claim), retrying a locked ledger with `busy` events;
//! - `task complete` has no busy handling: a locked ledger fails it at once with `busy`;
//! - `context inject` reads the inbox without its lock, prints, then deletes the file.
//!
//! Like a foreign build, it declares no `teams-busy-trace`. TEAM-CC-01, TEAM-CC-02 and TEAM-CC-03
//! must fail against it in every run, each for its race, and pass against the reference. `for i in $(seq 20); do cargo test -p ski-conformance --test trials -- teams_races; done`
//! repeats the proof.

use crate::one_row;

use std::io::{Read, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use libtest_mimic::{Failed, Trial};
use rusqlite::{Connection, ErrorCode};
use serde_json::{Value, json};
use ski_conformance::report::junit::details;
use ski_conformance::runner::ScenarioResult;
use ski_conformance::{Outcome, Target};

/// The first argument that turns this binary into the broken adapter.
const BROKEN: &str = "--teams-races";

/// The rows that must catch the broken adapter's races, each with words of the failure it must
/// report (so a row failing for another reason does not count).
const RACE_ROWS: [(&str, &str); 3] = [
    ("TEAM-CC-01", "successful claims among 10"),
    ("TEAM-CC-02", "waits and retries while the ledger is locked"),
    ("TEAM-CC-03", "sent while draining"),
];

/// Plays this module's part when the command line names it (this test program started again
/// as a stand-in), and then exits; otherwise returns.
pub fn play_role(argv: &[String]) {
    if argv.get(1).map(String::as_str) == Some(BROKEN) {
        std::process::exit(broken(&argv[2..]));
    }
}

/// This module's trials (the root runs them with every other module's).
pub fn trials() -> Vec<Trial> {
    let mut trials = Vec::new();
    for (id, reason) in RACE_ROWS {
        trials.push(Trial::test(format!("broken_adapter_fails::{id}"), move || {
            let said = expect(id, true, Outcome::Fail)?;
            if said.contains(reason) {
                return Ok(());
            }
            Err(Failed::from(format!(
                "{id} failed against the broken adapter for another reason than {reason:?}:\n{said}"
            )))
        }));
        trials.push(Trial::test(format!("reference_passes::{id}"), move || {
            expect(id, false, Outcome::Pass).map(drop)
        }));
    }
    trials
}

/// Fails unless row `id` has `outcome` against the broken adapter (`broken`) or the reference;
/// returns what the row reported.
fn expect(id: &str, broken: bool, outcome: Outcome) -> Result<String, Failed> {
    let result = run_row(id, broken)?;
    if result.outcome == outcome {
        return Ok(details(&result));
    }
    let against = if broken {
        "the broken adapter"
    } else {
        "the reference"
    };
    Err(Failed::from(format!(
        "{id} against {against}: expected {}, got {}\n{}",
        outcome.as_str(),
        result.outcome.as_str(),
        details(&result)
    )))
}

/// The profile of the broken adapter over the reference `ski` in `bin_dir`.
fn profile(bin_dir: &Path) -> Result<Target, String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let adapter = format!(
        "'{}' {BROKEN} '{}'",
        exe.display(),
        bin_dir.join("ski").display()
    );
    let text = format!(
        "name = \"teams-races\"\n\
         [suites.teams]\n\
         capabilities = [\"teams-core\", \"teams-ledger-read\", \"teams-gate\", \
         \"teams-context\"]\n\
         [suites.teams.commands]\n\
         adapter = {adapter:?}\n"
    );
    Target::parse("teams-races", &text).map_err(|e| e.to_string())
}

/// Runs row `id` against the broken adapter or the reference profile.
fn run_row(id: &str, broken: bool) -> Result<ScenarioResult, Failed> {
    one_row::run_row(id, |bin_dir, reference| {
        if broken {
            profile(bin_dir)
        } else {
            Ok(reference)
        }
    })
    .map_err(Failed::from)
}

// The broken adapter.

/// The global options the suite passes and the command words after them.
struct Call {
    root: PathBuf,
    caller: String,
    gate: bool,
    words: Vec<String>,
}

impl Call {
    fn parse(args: &[String]) -> Self {
        let mut call = Call {
            root: PathBuf::new(),
            caller: String::new(),
            gate: false,
            words: Vec::new(),
        };
        let mut args = args.iter();
        while let Some(arg) = args.next() {
            match arg.as_str() {
                "--root" => call.root = args.next().cloned().unwrap_or_default().into(),
                "--as" => call.caller = args.next().cloned().unwrap_or_default(),
                "--busy-timeout-ms" | "--now-ms" => {
                    args.next();
                }
                "--gate" => call.gate = true,
                "--trace" => {}
                word => call.words.push(word.to_owned()),
            }
        }
        call
    }

    /// Opens the team's ledger; with `--gate`, reports ready and waits for stdin to close.
    fn open(&self, team: &str) -> Result<Connection, String> {
        let conn = Connection::open(self.root.join(team).join("ledger.db"))
            .map_err(|e| format!("cannot open the ledger: {e}"))?;
        if self.gate {
            eprintln!("{}", json!({"event": "ready"}));
            let mut rest = Vec::new();
            std::io::stdin()
                .read_to_end(&mut rest)
                .map_err(|e| format!("cannot read the gate: {e}"))?;
        }
        Ok(conn)
    }
}

/// Runs the broken adapter with `[ski, args…]`; returns its exit code.
fn broken(argv: &[String]) -> i32 {
    let [ski, args @ ..] = argv else {
        eprintln!("error: usage: {BROKEN} SKI ARGS…");
        return 2;
    };
    let call = Call::parse(args);
    let words: Vec<&str> = call.words.iter().map(String::as_str).collect();
    let result = match words.as_slice() {
        ["task", "claim", team, id] => claim(&call, team, id),
        ["task", "complete", team, id] => complete(&call, team, id),
        ["context", "inject", team] => inject(&call, ski, team),
        _ => {
            let error = Command::new(ski).arg("teams").args(args).exec();
            Err(format!("cannot start {ski}: {error}"))
        }
    };
    match result {
        Ok(code) => code,
        Err(message) => {
            eprintln!("error: {message}");
            5
        }
    }
}

fn is_busy(error: &rusqlite::Error) -> bool {
    error.sqlite_error_code() == Some(ErrorCode::DatabaseBusy)
}

fn print(value: &Value) -> Result<(), String> {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{value}")
        .and_then(|()| out.flush())
        .map_err(|e| format!("cannot print: {e}"))
}

/// A read-then-write claim: the owner is read, then written without a condition.
fn claim(call: &Call, team: &str, id: &str) -> Result<i32, String> {
    let conn = call.open(team)?;
    let owner: Option<String> = conn
        .query_row("SELECT owner FROM tasks WHERE id = ?1", [id], |r| r.get(0))
        .map_err(|e| format!("cannot read the task: {e}"))?;
    if owner.is_some_and(|owner| owner != call.caller) {
        print(&json!({"ok": false, "error": {"code": "already_claimed",
            "message": "Task already claimed by another agent"}}))?;
        return Ok(2);
    }
    let mut attempt = 0;
    loop {
        let written = conn.execute(
            "UPDATE tasks SET status = 'in_progress', owner = ?1, claimedAt = 1 WHERE id = ?2",
            [call.caller.as_str(), id],
        );
        match written {
            Ok(_) => break,
            Err(e) if is_busy(&e) => {
                attempt += 1;
                let delay = 1u64 << attempt.min(6);
                eprintln!(
                    "{}",
                    json!({"event": "busy", "attempt": attempt, "delayMs": delay})
                );
                std::thread::sleep(Duration::from_millis(delay));
            }
            Err(e) => return Err(format!("cannot write the claim: {e}")),
        }
    }
    print(&json!({"ok": true, "task": {"id": id, "status": "in_progress", "owner": call.caller}}))?;
    Ok(0)
}

/// A completion without busy handling: a locked ledger fails it at once.
fn complete(call: &Call, team: &str, id: &str) -> Result<i32, String> {
    let conn = call.open(team)?;
    match conn.execute(
        "UPDATE tasks SET status = 'completed', completedAt = 1 WHERE id = ?1",
        [id],
    ) {
        Ok(_) => {
            print(&json!({"ok": true, "task": {"id": id, "status": "completed"}}))?;
            Ok(0)
        }
        Err(e) if is_busy(&e) => {
            print(&json!({"ok": false, "error": {"code": "busy", "message": e.to_string()}}))?;
            Ok(5)
        }
        Err(e) => Err(format!("cannot complete: {e}")),
    }
}

fn escape(text: &str, attribute: bool) -> String {
    let mut out = String::new();
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' if attribute => out.push_str("&quot;"),
            '\'' if attribute => out.push_str("&apos;"),
            c => out.push(c),
        }
    }
    out
}

/// A lock-free drain: reads the inbox, prints it, then deletes the file.
fn inject(call: &Call, ski: &str, team: &str) -> Result<i32, String> {
    let located = Command::new(ski)
        .arg("teams")
        .args([
            "--root",
            &call.root.display().to_string(),
            "--as",
            &call.caller,
        ])
        .args(["inbox", "path", team, &call.caller])
        .output()
        .map_err(|e| format!("cannot run {ski}: {e}"))?;
    let located: Value = serde_json::from_slice(&located.stdout)
        .map_err(|e| format!("inbox path printed no JSON: {e}"))?;
    let inbox = call.root.join(located["path"].as_str().unwrap_or_default());
    let text = std::fs::read_to_string(&inbox).unwrap_or_default();
    let mut block = String::new();
    let mut injected = 0;
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let message: Value =
            serde_json::from_str(line).map_err(|e| format!("a torn inbox line: {e}"))?;
        injected += 1;
        block.push_str(&format!(
            "<teammate-message teammate_id=\"{}\" type=\"{}\">\n{}\n</teammate-message>\n",
            escape(message["from"].as_str().unwrap_or_default(), true),
            escape(message["type"].as_str().unwrap_or_default(), true),
            escape(message["content"].as_str().unwrap_or_default(), false)
        ));
    }
    print(&json!({"ok": true, "injected": injected, "block": block, "prompt": block}))?;
    match std::fs::remove_file(&inbox) {
        Ok(()) => Ok(0),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(0),
        Err(e) => Err(format!("cannot delete the inbox: {e}")),
    }
}
