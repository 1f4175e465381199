//! The intercom suites' defect corpus, for `cargo test -p ski-conformance --test trials --
//! intercom_defects` (libtest-mimic trials): each `intercom-ski` row is proven against a build broken in
//! one way, while the `intercom` row of the same behaviour, which judges only the matrix, passes.
//!
//! The broken build is the reference `ski intercom` behind this test binary started again:
//!
//! - `<test> --intercom-defect DEFECT -- SKI ARGS…` runs the reference with its config edited for
//!   the defect (an agent behind the agent stand-in, no slash command in MCP mode), its database
//!   given a trigger once it is ready, its environment or its stdin changed;
//! - `<test> --intercom-agent-defect DEFECT DATABASE -- MOCK ARGS…` stands between the server and
//!   its agent (the config's `host_cli`): it drops or alters the one line the defect is about, or
//!   writes to the database what the build would have.
//!
//! A last trial proves that a failing intercom row's report carries what the fake Slack saw.

use crate::defects;
use crate::one_row;

use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Command, Stdio};

use defects::Defect;
use libtest_mimic::{Failed, Trial};
use serde_json::Value;
use ski_conformance::runner::ScenarioResult;
use ski_conformance::target::CommandTemplate;
use ski_conformance::{Outcome, Target};

/// The first argument that turns this binary into the broken server.
const SERVER: &str = "--intercom-defect";
/// The first argument that turns this binary into the broken agent side.
const AGENT: &str = "--intercom-agent-defect";

/// Every defect, the rows it must fail and the rows it must leave passing.
const DEFECTS: &[Defect] = &[
    Defect {
        name: "mcp-mode-without-slash-commands",
        what: "the server answers no slash command in MCP mode (the public build's session-stop is ACP-only)",
        fails: &[("INT-SKI-01", "the final message")],
        passes: &["S040"],
    },
    Defect {
        name: "approval-decisions-unrecorded",
        what: "an approval row stays pending whatever is decided (accepted, rejected, expired)",
        fails: &[
            ("INT-SKI-02", "the approval row of session"),
            ("INT-SKI-10", "the approval row's status"),
        ],
        passes: &["S010", "S011", "S068"],
    },
    Defect {
        name: "interrupt-without-reason",
        what: "session/interrupt reaches the agent without params.reason",
        fails: &[("INT-SKI-04", "the interrupt's reason")],
        passes: &["S015"],
    },
    Defect {
        name: "rejection-without-reason",
        what: "clearance/response reaches the agent without the operator's reason",
        fails: &[("INT-SKI-05", "params.reason")],
        passes: &["S011"],
    },
    Defect {
        name: "slack-token-to-agent",
        what: "the agent is started with SLACK_BOT_TOKEN in its environment",
        fails: &[("INT-SKI-06", "SLACK_BOT_TOKEN")],
        passes: &["S018"],
    },
    Defect {
        name: "unauthorized-unlogged",
        what: "the server logs nothing below ERROR, so no unauthorized attempt",
        fails: &[("INT-SKI-07", "a log line with")],
        passes: &["S072"],
    },
    Defect {
        name: "stdin-blocks-exit",
        what: "the server does not end before its stdin does (the profile closes it)",
        fails: &[("INT-SKI-08", "the target to exit after SIGTERM")],
        passes: &["S002"],
    },
    Defect {
        name: "skipped-request-recorded",
        what: "a clearance/request without file_path is recorded as an approval row before it is skipped",
        fails: &[(
            "INT-SKI-09",
            "approval rows after a request without file_path",
        )],
        passes: &["S054"],
    },
    Defect {
        name: "agent-escapes-teardown",
        what: "the agent runs in a process group of its own, which the server's teardown does not reach",
        fails: &[("INT-SKI-03", "was ended")],
        passes: &["S055"],
    },
    Defect {
        name: "stream-ends-at-oversize-line",
        what: "the agent's stream ends after a line over the limit",
        fails: &[("INT-SKI-11", "after oversize")],
        passes: &["S057"],
    },
];

/// The defect whose INT-SKI-04 failure shows the fake Slack's record.
const REPORTED: &str = "interrupt-without-reason";

/// A line the agent writes longer than every line limit the rows set (4096 bytes).
const OVERSIZE: usize = 4096;

/// Plays this module's part when the command line names it (this test program started again
/// as a stand-in), and then exits; otherwise returns.
pub fn play_role(argv: &[String]) {
    match argv.get(1).map(String::as_str) {
        Some(SERVER) => std::process::exit(exit_code(server(&argv[2..]))),
        Some(AGENT) => std::process::exit(exit_code(agent(&argv[2..]))),
        _ => {}
    }
}

/// This module's trials (the root runs them with every other module's).
pub fn trials() -> Vec<Trial> {
    let report = Trial::test(
        "failing_row_report_shows_fake_slack::INT-SKI-04",
        failing_row_report_shows_fake_slack,
    );
    defects::trials(DEFECTS, run, vec![report])
}

/// Runs row `id` against the build with `defect`, or against the reference.
fn run(id: &str, defect: Option<&str>) -> Result<ScenarioResult, String> {
    one_row::run_row(id, |_, reference| match defect {
        Some(defect) => profile(reference, defect),
        None => Ok(reference),
    })
}

/// A failing row's wire log holds the fake Slack's record: the messages the target posted.
fn failing_row_report_shows_fake_slack() -> Result<(), Failed> {
    let result = run("INT-SKI-04", Some(REPORTED))?;
    if result.outcome != Outcome::Fail {
        return Err(format!("INT-SKI-04 against {REPORTED}: {}", result.outcome.as_str()).into());
    }
    let posted: Vec<&str> = result
        .wire
        .iter()
        .filter(|r| r.channel == "fake-slack" && r.text.starts_with("message in "))
        .map(|r| r.text.as_str())
        .collect();
    let final_posted = posted.iter().any(|text| text.contains("Session ended"));
    let request_seen = result
        .wire
        .iter()
        .any(|r| r.channel == "fake-slack" && r.text.contains("chat.postMessage"));
    if final_posted && request_seen {
        return Ok(());
    }
    Err(format!(
        "the failing row's wire log lacks the fake Slack's record (messages {posted:?}):\n{}",
        result.wire_text()
    )
    .into())
}

/// The reference profile with its servers behind the broken server (`defect`).
fn profile(mut reference: Target, defect: &str) -> Result<Target, String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let exe = exe.display().to_string();
    for (suite, section) in reference.suites.iter_mut() {
        if !suite.starts_with("intercom") {
            continue;
        }
        for name in ["server", "server_mode"] {
            let command = section
                .commands
                .get(name)
                .ok_or(format!("the reference has no {name}"))?;
            let mut words = vec![exe.clone(), SERVER.to_owned(), defect.to_owned()];
            words.push("--".to_owned());
            words.extend(command.words()?);
            section
                .commands
                .insert(name.to_owned(), CommandTemplate::Argv(words));
        }
        if defect == "stdin-blocks-exit" {
            section.settings.insert("stdin".into(), "closed".into());
        }
    }
    reference.name = format!("intercom-defect-{defect}");
    Ok(reference)
}

fn exit_code(result: Result<i32, String>) -> i32 {
    result.unwrap_or_else(|message| {
        eprintln!("error: {message}");
        5
    })
}

// The broken server.

/// Runs `DEFECT -- SKI ARGS…`: the reference with the defect; answers its exit code.
fn server(args: &[String]) -> Result<i32, String> {
    let (defect, mut command) = split(args, "usage: --intercom-defect DEFECT -- SKI ARGS…")?;
    let config_at = command
        .iter()
        .position(|a| a == "--config")
        .map(|i| i + 1)
        .filter(|i| *i < command.len())
        .ok_or("no --config")?;
    let config_path = command[config_at].clone();
    let config = std::fs::read_to_string(&config_path).map_err(|e| e.to_string())?;
    let database = database_path(&config)?;
    let edited = edit_config(&config, &defect, &database)?;
    if edited != config {
        let path = format!("{config_path}.defect.toml");
        std::fs::write(&path, edited).map_err(|e| e.to_string())?;
        command[config_at] = path;
    }
    let (program, rest) = command.split_first().ok_or("no program")?;
    let stdin_blocks_exit = defect == "stdin-blocks-exit";
    let mut server = Command::new(program);
    server
        .args(rest)
        .stdin(if stdin_blocks_exit {
            Stdio::null()
        } else {
            Stdio::inherit()
        })
        .stdout(Stdio::piped());
    if defect == "unauthorized-unlogged" {
        server.env("RUST_LOG", "error");
    }
    let mut child = server
        .spawn()
        .map_err(|e| format!("cannot start {program}: {e}"))?;
    // SIGTERM reaches the whole group: the server's own ends this stand-in too.
    nix::sys::signal::SigSet::from(nix::sys::signal::Signal::SIGTERM)
        .thread_block()
        .map_err(|e| e.to_string())?;
    let stdout = child.stdout.take().ok_or("no stdout")?;
    let mut ready = false;
    let mut out = std::io::stdout();
    for line in BufReader::new(stdout).lines().map_while(Result::ok) {
        if !ready {
            // The readiness line comes once the database is open: the trigger goes in first.
            ready = true;
            if defect == "approval-decisions-unrecorded" {
                keep_approvals_pending(&database)?;
            }
        }
        if writeln!(out, "{line}").and_then(|()| out.flush()).is_err() {
            break;
        }
    }
    let status = child.wait().map_err(|e| e.to_string())?;
    if stdin_blocks_exit {
        let _ = std::io::stdin().read_to_end(&mut Vec::new());
    }
    Ok(status.code().unwrap_or(1))
}

/// `DEFECT -- PROGRAM ARGS…` split into the defect and the command.
fn split(args: &[String], usage: &str) -> Result<(String, Vec<String>), String> {
    let at = args.iter().position(|a| a == "--").ok_or(usage)?;
    let defect = args[..at].first().ok_or(usage)?.clone();
    Ok((defect, args[at + 1..].to_vec()))
}

/// The `[database] path` of a config.
fn database_path(config: &str) -> Result<String, String> {
    let table: toml::Table = config.parse().map_err(|e| format!("the config: {e}"))?;
    table
        .get("database")
        .and_then(|d| d.get("path"))
        .and_then(toml::Value::as_str)
        .map(str::to_owned)
        .ok_or_else(|| "the config has no [database] path".to_owned())
}

/// The config with the defect's edits: the agent behind the agent stand-in (ACP mode), no
/// slash command the fake Slack sends (MCP mode).
fn edit_config(config: &str, defect: &str, database: &str) -> Result<String, String> {
    let acp_mode = config
        .lines()
        .any(|l| l.trim_start().starts_with("host_cli "));
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let quote = |text: &str| Value::from(text).to_string();
    let mut edited = String::new();
    let mut host_cli = None;
    for line in config.lines() {
        let trimmed = line.trim_start();
        if acp_mode && trimmed.starts_with("host_cli ") {
            let (_, value) = trimmed.split_once('=').ok_or("host_cli without =")?;
            host_cli = Some(value.trim().to_owned());
            edited.push_str(&format!(
                "host_cli = {}\n",
                quote(&exe.display().to_string())
            ));
            continue;
        }
        if acp_mode && trimmed.starts_with("host_cli_args = [") {
            let mock = host_cli.take().ok_or("host_cli_args before host_cli")?;
            let rest = &trimmed["host_cli_args = [".len()..];
            edited.push_str(&format!(
                "host_cli_args = [{}, {}, {}, \"--\", {mock}, {rest}\n",
                quote(AGENT),
                quote(defect),
                quote(database)
            ));
            continue;
        }
        if !acp_mode
            && defect == "mcp-mode-without-slash-commands"
            && trimmed.starts_with("slash_command ")
        {
            edited.push_str("slash_command = \"/answered-in-acp-mode-only\"\n");
            continue;
        }
        edited.push_str(line);
        edited.push('\n');
    }
    Ok(edited)
}

/// Installs the trigger that puts every decided approval back to pending.
fn keep_approvals_pending(database: &str) -> Result<(), String> {
    let db = rusqlite::Connection::open(database).map_err(|e| e.to_string())?;
    db.busy_timeout(std::time::Duration::from_secs(30))
        .map_err(|e| e.to_string())?;
    db.execute_batch(
        "CREATE TRIGGER IF NOT EXISTS decisions_unrecorded
         AFTER UPDATE OF status ON approval_request WHEN NEW.status <> 'pending'
         BEGIN
           UPDATE approval_request SET status = 'pending'
           WHERE session_id = NEW.session_id AND request_id = NEW.request_id;
         END;",
    )
    .map_err(|e| format!("the trigger: {e}"))
}

// The broken agent side.

/// Runs `DEFECT DATABASE -- MOCK ARGS…` between the server and the mock agent; answers the
/// agent's exit code.
fn agent(args: &[String]) -> Result<i32, String> {
    let usage = "usage: --intercom-agent-defect DEFECT DATABASE -- MOCK ARGS…";
    let (defect, command) = split(args, usage)?;
    let database = args.get(1).filter(|d| *d != "--").ok_or(usage)?.clone();
    let (program, rest) = command.split_first().ok_or(usage)?;
    let mut mock = Command::new(program);
    mock.args(rest).stdout(Stdio::piped());
    if defect == "slack-token-to-agent" {
        mock.env("SLACK_BOT_TOKEN", "xoxb-leaked-to-the-agent");
    }
    let escapes = defect == "agent-escapes-teardown";
    // An escaping agent gets a group of its own and a stdin whose write end it holds itself, so
    // neither the server's signal to this stand-in's group nor this stand-in's death ends it.
    let escaping_stdin = if escapes {
        std::os::unix::process::CommandExt::process_group(&mut mock, 0);
        let (read, write) = nix::unistd::pipe().map_err(|e| e.to_string())?;
        mock.stdin(Stdio::from(read));
        Some(std::fs::File::from(write))
    } else {
        mock.stdin(Stdio::piped());
        None
    };
    let mut child = mock
        .spawn()
        .map_err(|e| format!("cannot start {program}: {e}"))?;
    let mut to_agent = match escaping_stdin {
        Some(write) => write,
        None => std::fs::File::from(std::os::fd::OwnedFd::from(
            child.stdin.take().ok_or("no stdin")?,
        )),
    };
    let from_agent = child.stdout.take().ok_or("no stdout")?;
    let to_server_defect = defect.clone();
    let inbound = std::thread::spawn(move || {
        for line in std::io::stdin().lock().lines().map_while(Result::ok) {
            let line = to_agent_line(&to_server_defect, line);
            if writeln!(to_agent, "{line}")
                .and_then(|()| to_agent.flush())
                .is_err()
            {
                break;
            }
        }
        // The server closed its end: so does the agent's stdin (dropped here).
    });
    let mut reader = BufReader::new(from_agent);
    let mut out = std::io::stdout();
    let mut line = Vec::new();
    loop {
        line.clear();
        match reader.read_until(b'\n', &mut line) {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        if defect == "skipped-request-recorded" {
            record_request_without_file_path(&database, &line)?;
        }
        if out.write_all(&line).and_then(|()| out.flush()).is_err() {
            break;
        }
        if defect == "stream-ends-at-oversize-line" && line.len() > OVERSIZE {
            // The stream ends here; the agent goes on.
            let null = std::fs::File::open("/dev/null").map_err(|e| e.to_string())?;
            nix::unistd::dup2_stdout(&null).map_err(|e| e.to_string())?;
        }
    }
    if escapes {
        // The agent closed its stdout: so does the stream the server reads, while the agent
        // runs on.
        let null = std::fs::File::open("/dev/null").map_err(|e| e.to_string())?;
        nix::unistd::dup2_stdout(&null).map_err(|e| e.to_string())?;
    }
    let status = child.wait().map_err(|e| e.to_string())?;
    drop(inbound);
    Ok(status.code().unwrap_or(1))
}

/// A line from the server as the broken build writes it.
fn to_agent_line(defect: &str, line: String) -> String {
    let method = match defect {
        "interrupt-without-reason" => "session/interrupt",
        "rejection-without-reason" => "clearance/response",
        _ => return line,
    };
    let Ok(mut message) = serde_json::from_str::<Value>(&line) else {
        return line;
    };
    if message["method"] != method {
        return line;
    }
    if let Some(params) = message.get_mut("params").and_then(Value::as_object_mut) {
        params.remove("reason");
    }
    message.to_string()
}

/// Writes an approval row for a `clearance/request` without `file_path`, as a build that records
/// a request before it checks its fields.
fn record_request_without_file_path(database: &str, line: &[u8]) -> Result<(), String> {
    let Ok(message) = serde_json::from_slice::<Value>(line) else {
        return Ok(());
    };
    if message["method"] != "clearance/request" || message["params"].get("file_path").is_some() {
        return Ok(());
    }
    let session = std::env::var("INTERCOM_SESSION_ID").map_err(|e| e.to_string())?;
    let request = message["id"].as_str().unwrap_or("unnumbered");
    let title = message["params"]["title"].as_str().unwrap_or_default();
    let db = rusqlite::Connection::open(Path::new(database)).map_err(|e| e.to_string())?;
    db.busy_timeout(std::time::Duration::from_secs(30))
        .map_err(|e| e.to_string())?;
    db.execute(
        "INSERT INTO approval_request (session_id, request_id, title, diff_content, file_path,
            created_at)
         VALUES (?1, ?2, ?3, '', '', '1970-01-01T00:00:00Z')",
        [session.as_str(), request, title],
    )
    .map_err(|e| format!("the approval row: {e}"))?;
    Ok(())
}
