//! The AOF suite against stand-in adapters, for `cargo test -p ski-conformance --test
//! trials -- aof_stand_in` (libtest-mimic trials).
//!
//! The stand-in is this test binary started again as `<test> --aof-stand-in VARIANT SKI ARGS…`:
//! an adapter that answers through the reference `ski aof` but, like another AOF/1 build, lacks
//! every output the document does not ask for:
//!
//! - `document`: no `fromStatus` on poll actions, no `staleHeartbeatsProcessed`, no `run.expired`
//!   event, and `handoff.md` in a layout that names neither task (the original's own layout).
//!   Every row of the `aof` suite must pass against it; the `aof-ski` rows must fail.
//! - `stops`: `document`, whose `route --ndjson` routes each line as the original's router
//!   would if it threw: the first failed message ends the process. `AOF-X-03` must fail.
//!
//! The stand-in declares no `aof-batch`, so every call is a process of its own.

use crate::one_row;

use std::io::{BufRead, Read, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use libtest_mimic::{Failed, Trial};
use serde_json::{Value, json};
use ski_conformance::catalog::TimeoutClass;
use ski_conformance::report::junit::details;
use ski_conformance::runner::ScenarioResult;
use ski_conformance::{Outcome, Target, catalog};

/// The first argument that turns this binary into the stand-in adapter.
const STAND_IN: &str = "--aof-stand-in";

/// Plays this module's part when the command line names it (this test program started again
/// as a stand-in), and then exits; otherwise returns.
pub fn play_role(argv: &[String]) {
    if argv.get(1).map(String::as_str) == Some(STAND_IN) {
        std::process::exit(stand_in(&argv[2..]));
    }
}

/// The extension rows, each of which must fail against the `document` stand-in.
const EXTENSION_ROWS: [&str; 4] = ["AOF-SKI-01", "AOF-SKI-02", "AOF-SKI-03", "AOF-SKI-04"];

/// This module's trials (the root runs them with every other module's).
pub fn trials() -> Vec<Trial> {
    let rows = match every_aof_row() {
        Ok(rows) => rows,
        Err(failed) => return vec![Trial::test("aof_stand_in::setup", move || Err(failed))],
    };
    // Every row of the document, among them the rows whose checks no longer ask for ski's own
    // outputs: AOF-060-02, AOF-061-01, AOF-061-11, AOF-061-13, and AOF-X-03.
    let mut trials: Vec<Trial> = rows
        .into_iter()
        .map(|id| {
            Trial::test(format!("document_stand_in_passes::{id}"), move || {
                expect(&id, "document", Outcome::Pass)
            })
        })
        .collect();
    for id in EXTENSION_ROWS {
        trials.push(Trial::test(
            format!("document_stand_in_fails::{id}"),
            move || expect(id, "document", Outcome::Fail),
        ));
    }
    trials.push(Trial::test("router_that_stops_fails::AOF-X-03", || {
        let result = run_row("AOF-X-03", "stops")?;
        if result.outcome != Outcome::Fail {
            return Err(Failed::from(format!(
                "AOF-X-03 against a router that stops at the first failure: {}\n{}",
                result.outcome.as_str(),
                details(&result)
            )));
        }
        let said = details(&result);
        if !said.contains("the router goes on after a handler error") {
            return Err(Failed::from(format!(
                "AOF-X-03 failed for another reason than the stopped router:\n{said}"
            )));
        }
        Ok(())
    }));
    trials
}

/// The most adapter calls a row of `class` may make: about one second each (catalog header).
fn call_budget(class: TimeoutClass) -> usize {
    match class {
        TimeoutClass::Short => 4,
        TimeoutClass::Normal => 15,
        TimeoutClass::Long => 45,
    }
}

/// Fails unless row `id` against the stand-in `variant` has `outcome` and made no more adapter
/// calls (each a process here) than its timeout class budgets.
fn expect(id: &str, variant: &str, outcome: Outcome) -> Result<(), Failed> {
    let result = run_row(id, variant)?;
    let class = catalog::builtin()
        .map_err(|e| Failed::from(e.to_string()))?
        .scenarios()
        .find(|s| s.id == id)
        .map(|s| s.timeout)
        .unwrap_or_default();
    let calls = result.processes.len();
    if calls > call_budget(class) {
        return Err(Failed::from(format!(
            "{id} makes {calls} adapter calls, more than its timeout class {} budgets ({}); \
             give it a longer class in its catalog",
            class.as_str(),
            call_budget(class)
        )));
    }
    if result.outcome == outcome {
        return Ok(());
    }
    Err(Failed::from(format!(
        "{id} against the {variant} stand-in: expected {}, got {}\n{}Wire log:\n{}",
        outcome.as_str(),
        result.outcome.as_str(),
        details(&result),
        result.wire_text()
    )))
}

/// The ids of the `aof` suite's rows.
fn every_aof_row() -> Result<Vec<String>, Failed> {
    let catalogs = catalog::builtin().map_err(|e| Failed::from(e.to_string()))?;
    Ok(catalogs
        .scenarios()
        .filter(|s| s.suite == "aof")
        .map(|s| s.id.clone())
        .collect())
}

/// The stand-in profile of `variant`, over the reference `ski` in `bin_dir`.
fn profile(variant: &str, bin_dir: &Path) -> Result<Target, String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let adapter = format!(
        "'{}' {STAND_IN} {variant} '{}'",
        exe.display(),
        bin_dir.join("ski").display()
    );
    let text = format!(
        "name = \"aof-stand-in-{variant}\"\n\
         [suites.aof]\n\
         capabilities = [\"aof-validate\", \"aof-route\", \"aof-route-ndjson\", \"aof-runs\", \
         \"aof-resolve\", \"aof-session-end\", \"aof-poll\"]\n\
         settings = {{ runs_dir = \"runs\" }}\n\
         [suites.aof.commands]\n\
         adapter = {adapter:?}\n\
         [suites.aof-ski]\n\
         capabilities = [\"aof-route\", \"aof-runs\", \"aof-poll\", \"aof-ski-extensions\"]\n\
         settings = {{ runs_dir = \"runs\" }}\n\
         [suites.aof-ski.commands]\n\
         adapter = {adapter:?}\n"
    );
    Target::parse("stand-in", &text).map_err(|e| e.to_string())
}

/// Runs row `id` against the stand-in `variant`.
fn run_row(id: &str, variant: &str) -> Result<ScenarioResult, Failed> {
    one_row::run_row(id, |bin_dir, _| profile(variant, bin_dir)).map_err(Failed::from)
}

// The stand-in adapter.

/// Runs the stand-in with `[variant, ski, args…]`; returns its exit code.
fn stand_in(argv: &[String]) -> i32 {
    let [variant, ski, args @ ..] = argv else {
        eprintln!("error: usage: {STAND_IN} VARIANT SKI ARGS…");
        return 2;
    };
    let command = args.first().map(String::as_str).unwrap_or_default();
    let ndjson = args.iter().any(|a| a == "--ndjson");
    match (command, ndjson) {
        ("poll", _) => filtered(ski, args, document_poll),
        ("events", _) => filtered(ski, args, without_ski_events),
        ("route", false) => route_one(ski, args),
        ("route", true) if variant == "stops" => route_until_failure(ski, args),
        _ => {
            let error = Command::new(ski).arg("aof").args(args).exec();
            eprintln!("error: cannot start {ski}: {error}");
            5
        }
    }
}

/// What one `ski aof` call printed and its exit code.
struct Called {
    code: i32,
    stdout: String,
    stderr: String,
}

/// Runs `ski aof ARGS…` with `stdin` and collects its output.
fn call(ski: &str, args: &[String], stdin: &str) -> Called {
    let child = Command::new(ski)
        .arg("aof")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn();
    let mut child = match child {
        Ok(child) => child,
        Err(error) => {
            return Called {
                code: 5,
                stdout: String::new(),
                stderr: format!("error: cannot start {ski}: {error}\n"),
            };
        }
    };
    if let Some(mut input) = child.stdin.take() {
        let _ = input.write_all(stdin.as_bytes());
    }
    match child.wait_with_output() {
        Ok(output) => Called {
            code: output.status.code().unwrap_or(5),
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        },
        Err(error) => Called {
            code: 5,
            stdout: String::new(),
            stderr: format!("error: waiting for {ski}: {error}\n"),
        },
    }
}

/// All of this process's stdin.
fn read_stdin() -> String {
    let mut text = String::new();
    let _ = std::io::stdin().read_to_string(&mut text);
    text
}

/// Prints what a call printed (stdout through `edit` when it is JSON) and returns its code.
fn relay(called: Called, edit: impl Fn(&mut Value)) -> i32 {
    eprint!("{}", called.stderr);
    match serde_json::from_str::<Value>(called.stdout.trim()) {
        Ok(mut value) => {
            edit(&mut value);
            println!("{value:#}");
        }
        Err(_) => print!("{}", called.stdout),
    }
    called.code
}

/// `ski aof ARGS…` with this process's stdin, its JSON edited by `edit`.
fn filtered(ski: &str, args: &[String], edit: fn(&mut Value)) -> i32 {
    let called = call(ski, args, &read_stdin());
    relay(called, edit)
}

/// Removes the `run.expired` events of an event array.
fn without_ski_events(value: &mut Value) {
    if let Some(events) = value.as_array_mut() {
        events.retain(|e| e["type"] != json!("run.expired"));
    }
}

/// A poll report without ski's `fromStatus`, `staleHeartbeatsProcessed` and `run.expired`.
fn document_poll(report: &mut Value) {
    if let Some(map) = report.as_object_mut() {
        map.remove("staleHeartbeatsProcessed");
    }
    if let Some(actions) = report["actions"].as_array_mut() {
        for action in actions {
            if let Some(action) = action.as_object_mut() {
                action.remove("fromStatus");
            }
        }
    }
    without_ski_events(&mut report["events"]);
}

/// The value of `--data-dir` among `args`.
fn data_dir(args: &[String]) -> Option<PathBuf> {
    args.iter()
        .position(|a| a == "--data-dir")
        .and_then(|i| args.get(i + 1))
        .map(PathBuf::from)
}

/// `route` of one message; after a handled handoff.request, handoff.md is rewritten in the
/// original's layout, which names neither task.
fn route_one(ski: &str, args: &[String]) -> i32 {
    let input = read_stdin();
    let called = call(ski, args, &input);
    let report: Value = serde_json::from_str(called.stdout.trim()).unwrap_or(Value::Null);
    if report["outcome"] == json!("handled")
        && report["type"] == json!("handoff.request")
        && let (Some(dir), Some(child)) = (data_dir(args), report["taskId"].as_str())
        && let Err(error) = rewrite_handoff_md(&dir, child)
    {
        eprintln!("error: rewriting handoff.md: {error}");
        return 5;
    }
    relay(called, |_| {})
}

/// Replaces `inputs/handoff.md` of `child` (found under any status) by a rendering of its
/// handoff.json without task ids: From, To, Due By and the four lists.
fn rewrite_handoff_md(data: &Path, child: &str) -> std::io::Result<()> {
    for status in std::fs::read_dir(data.join("tasks"))?.flatten() {
        let inputs = status.path().join(child).join("inputs");
        let Ok(text) = std::fs::read_to_string(inputs.join("handoff.json")) else {
            continue;
        };
        let handoff: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        let field = |key: &str| handoff[key].as_str().unwrap_or("").to_owned();
        let mut md = format!(
            "# Handoff Request\n\n**From:** {}\n**To:** {}\n**Due By:** {}\n",
            field("fromAgent"),
            field("toAgent"),
            field("dueBy")
        );
        for (title, key) in [
            ("Acceptance Criteria", "acceptanceCriteria"),
            ("Expected Outputs", "expectedOutputs"),
            ("Context References", "contextRefs"),
            ("Constraints", "constraints"),
        ] {
            md.push_str(&format!("\n## {title}\n"));
            let items: Vec<&str> = handoff[key]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect();
            if items.is_empty() {
                md.push_str("None\n");
            }
            for item in items {
                md.push_str(&format!("- {item}\n"));
            }
        }
        // Written into the file `ski aof` has just renamed into place: a temp file of our own
        // could be given the inode the replaced file has just freed.
        return std::fs::write(inputs.join("handoff.md"), md);
    }
    Ok(())
}

/// `route --ndjson` as a router that throws: each line routed alone, and the first failure
/// ends the process with exit 5 after its report.
fn route_until_failure(ski: &str, args: &[String]) -> i32 {
    let single: Vec<String> = args.iter().filter(|a| *a != "--ndjson").cloned().collect();
    let stdin = std::io::stdin();
    for line in stdin.lock().lines() {
        let Ok(line) = line else {
            return 2;
        };
        if line.trim().is_empty() {
            continue;
        }
        let called = call(ski, &single, &line);
        let report: Value = serde_json::from_str(called.stdout.trim())
            .unwrap_or_else(|_| json!({"outcome": "failed", "reason": called.stderr.trim()}));
        println!("{report}");
        let _ = std::io::stdout().flush();
        if report["outcome"] == json!("failed") {
            eprintln!("error: the router threw");
            return 5;
        }
    }
    0
}
