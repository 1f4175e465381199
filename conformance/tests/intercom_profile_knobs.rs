//! The intercom profile's knobs against stand-ins for a foreign build, for `cargo test -p
//! ski-conformance --test trials -- intercom_profile_knobs` (libtest-mimic trials).
//!
//! The stand-ins are this test binary started again:
//!
//! - `<test> --intercom-foreign FLAG… -- SKI ARGS…` runs the reference `ski intercom` and makes it
//!   look like the public server in one way per flag: `--ready-line TEXT` prints no readiness
//!   object but TEXT once ready, `--log-to-stdout` logs on stdout, `--seconds` takes the time
//!   knobs as `NAME_s = SECONDS`, `--stdin-blocks-exit` does not end before its stdin does (the
//!   blocking stdin read that kept the public build alive after SIGTERM), `--needs-host-cli`
//!   refuses a config without `host_cli` in any mode.
//! - `<test> --jsonrpc-agent MOCK ARGS…` stands between the reference (stream dialect) and the
//!   mock agent and speaks the `intercom-jsonrpc` dialect to the agent: a JSON-RPC handshake
//!   first, then `prompt/send` and `nudge` as `session/prompt`.
//!
//! For each knob a row passes against its stand-in when the profile sets the knob, and fails
//! when it does not (or sets it wrong).

use crate::one_row;

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};

use libtest_mimic::{Failed, Trial};
use serde_json::{Value, json};
use ski_conformance::report::junit::details;
use ski_conformance::target::{CommandTemplate, SuiteTarget};
use ski_conformance::{Outcome, Target};

/// The first argument that turns this binary into the server stand-in.
const FOREIGN: &str = "--intercom-foreign";
/// The first argument that turns this binary into the agent-side dialect stand-in.
const JSONRPC_AGENT: &str = "--jsonrpc-agent";
/// What the stand-in prints instead of a readiness object.
const READY_TEXT: &str = "intercom stand-in ready";
/// The stand-in's fixed line limit (S057).
const FIXED_LIMIT: &str = "8192";

/// How a trial changes the reference profile's intercom section.
type Describe = fn(&mut Profile);

/// One trial: a row, the stand-in's flags, the profile with the knob and without it, and words
/// of the failure the row must report without it (so a failure for another reason does not
/// count).
struct Knob {
    name: &'static str,
    row: &'static str,
    reason: &'static str,
    flags: &'static [&'static str],
    with_knob: Describe,
    without_knob: Describe,
}

const KNOBS: &[Knob] = &[
    Knob {
        name: "ready_line",
        row: "S002",
        reason: "the readiness line",
        flags: &["--ready-line", READY_TEXT],
        with_knob: |p| {
            p.mcp_port_in_config();
            p.set("ready", "line");
            p.set("ready_line", READY_TEXT);
            p.set("mcp_url", "http://127.0.0.1:{mcp_port}/mcp");
        },
        without_knob: |p| p.mcp_port_in_config(),
    },
    Knob {
        name: "ready_port",
        row: "S002",
        reason: "the readiness line",
        flags: &["--ready-line", READY_TEXT],
        with_knob: |p| {
            p.mcp_port_in_config();
            p.set("ready", "port");
            p.set("mcp_url", "http://127.0.0.1:{mcp_port}/mcp");
        },
        without_knob: |p| p.mcp_port_in_config(),
    },
    Knob {
        name: "log_stream",
        row: "S052",
        reason: "a log line with",
        flags: &["--ready-line", READY_TEXT, "--log-to-stdout"],
        with_knob: |p| {
            p.set("ready", "line");
            p.set("ready_line", READY_TEXT);
            p.set("mcp_url", "http://127.0.0.1:{mcp_port}/mcp");
            p.set("log_stream", "stdout");
        },
        without_knob: |p| {
            p.set("ready", "line");
            p.set("ready_line", READY_TEXT);
            p.set("mcp_url", "http://127.0.0.1:{mcp_port}/mcp");
        },
    },
    Knob {
        name: "seconds_startup",
        row: "S025",
        reason: "did not respond within startup timeout",
        flags: &["--seconds"],
        with_knob: |p| p.seconds("{startup_timeout_s}"),
        // A seconds key given the milliseconds: 500 s instead of one.
        without_knob: |p| p.seconds("{startup_timeout_ms}"),
    },
    Knob {
        name: "seconds_stall",
        row: "S063",
        reason: "nudge",
        flags: &["--seconds"],
        with_knob: |p| p.seconds("{startup_timeout_s}"),
        // Milliseconds in a seconds key: the 600 ms threshold becomes 600 s, no nudge comes.
        without_knob: |p| {
            p.seconds("{startup_timeout_s}");
            p.edit("acp_template", "{inactivity_s}", "{inactivity_ms}");
        },
    },
    Knob {
        name: "max_line_length",
        row: "S057",
        reason: "line exceeded max length",
        flags: &[],
        with_knob: |p| {
            p.fixed_line_limit();
            p.set("max_line_length", FIXED_LIMIT);
        },
        without_knob: |p| p.fixed_line_limit(),
    },
    DIALECT,
    Knob {
        name: "stdin",
        row: "S002",
        reason: "the target to exit after SIGTERM",
        flags: &["--stdin-blocks-exit"],
        with_knob: |p| p.set("stdin", "closed"),
        without_knob: |_| {},
    },
    Knob {
        name: "agent_in_mcp_mode",
        row: "S002",
        reason: "missing field `host_cli`",
        flags: &["--needs-host-cli"],
        with_knob: |p| p.set("agent_in_mcp_mode", "true"),
        without_knob: |_| {},
    },
];

/// The dialect knob: the server's agents see `intercom-jsonrpc` through the dialect stand-in.
const DIALECT: Knob = Knob {
    name: "dialect",
    row: "S013",
    reason: "prompt/send",
    flags: &[],
    with_knob: |p| p.jsonrpc_agent("dialect-intercom-jsonrpc"),
    without_knob: |p| p.jsonrpc_agent("dialect-intercom"),
};

/// The approval knob against the reference itself (no stand-in flags).
const APPROVAL: Knob = Knob {
    name: "approval",
    row: "S043",
    reason: "check_clearance to return",
    flags: &[],
    with_knob: |p| {
        p.set("approval", "reply");
        // What the reference's request shows; the default marker is the public build's word.
        p.set("approval_marker", "Approval request");
    },
    without_knob: |_| {},
};

/// Rows that also pass in the `intercom-jsonrpc` dialect through the stand-in.
const JSONRPC_ROWS: [&str; 5] = ["S010", "S019", "S060", "S064", "S066"];

/// Plays this module's part when the command line names it (this test program started again
/// as a stand-in), and then exits; otherwise returns.
pub fn play_role(argv: &[String]) {
    match argv.get(1).map(String::as_str) {
        Some(FOREIGN) => std::process::exit(foreign(&argv[2..])),
        Some(JSONRPC_AGENT) => std::process::exit(jsonrpc_agent(&argv[2..])),
        _ => {}
    }
}

/// This module's trials (the root runs them with every other module's).
pub fn trials() -> Vec<Trial> {
    let mut trials = Vec::new();
    for knob in KNOBS {
        trials.push(Trial::test(
            format!("with_knob_passes::{}::{}", knob.name, knob.row),
            move || expect(knob, knob.with_knob, Outcome::Pass),
        ));
        trials.push(Trial::test(
            format!("without_knob_fails::{}::{}", knob.name, knob.row),
            move || expect(knob, knob.without_knob, Outcome::Fail),
        ));
    }
    // With the knob the other rows pass; INT-SKI-08 still holds stdin open and catches the fault.
    let stdin = KNOBS
        .iter()
        .find(|k| k.name == "stdin")
        .expect("the stdin knob");
    trials.push(Trial::test(
        "stdin_open_row_fails_with_knob::INT-SKI-08",
        move || {
            expect(
                &Knob {
                    row: "INT-SKI-08",
                    ..*stdin
                },
                stdin.with_knob,
                Outcome::Fail,
            )
        },
    ));
    // `approval`: the rows whose document says "approves" decide as the profile says. The
    // reference takes only its buttons, so `buttons` passes S043, while `reply` (the decision
    // as a reply in the request's thread) leaves A's call waiting: the row replied, not clicked.
    trials.push(Trial::test(
        "with_knob_passes::approval_buttons::S043",
        || expect(&APPROVAL, |p| p.set("approval", "buttons"), Outcome::Pass),
    ));
    trials.push(Trial::test(
        "reply_is_not_a_click::approval_reply::S043",
        || expect(&APPROVAL, APPROVAL.with_knob, Outcome::Fail),
    ));
    // More rows in the JSON-RPC dialect: clearance, the queue, nudges as prompts, escalation.
    for row in JSONRPC_ROWS {
        trials.push(Trial::test(
            format!("with_knob_passes::dialect::{row}"),
            move || expect(&Knob { row, ..DIALECT }, DIALECT.with_knob, Outcome::Pass),
        ));
    }
    trials
}

/// Fails unless `knob`'s row against its stand-in, described by `describe`, has `outcome`.
fn expect(knob: &Knob, describe: Describe, outcome: Outcome) -> Result<(), Failed> {
    let result = one_row::run_row(knob.row, |_, reference| {
        profile(reference, knob.flags, describe)
    })
    .map_err(Failed::from)?;
    let said = details(&result);
    if result.outcome == outcome && (outcome == Outcome::Pass || said.contains(knob.reason)) {
        return Ok(());
    }
    Err(Failed::from(format!(
        "{} against the stand-in ({}): expected {} (a failure naming {:?}), got {}\n{said}",
        knob.row,
        knob.name,
        outcome.as_str(),
        knob.reason,
        result.outcome.as_str(),
    )))
}

/// The reference profile with its servers wrapped in the stand-in (`flags`), then described by
/// the trial.
fn profile(mut reference: Target, flags: &[&str], describe: Describe) -> Result<Target, String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let exe = exe.display().to_string();
    for (suite, section) in reference.suites.iter_mut() {
        if suite.starts_with("intercom") {
            wrap(section, &exe, flags, describe)?;
        }
    }
    reference.name = "intercom-stand-in".to_owned();
    Ok(reference)
}

/// One intercom section (`intercom`, `intercom-ski`) wrapped and described.
fn wrap(
    section: &mut SuiteTarget,
    exe: &str,
    flags: &[&str],
    describe: Describe,
) -> Result<(), String> {
    for name in ["server", "server_mode"] {
        let command = section
            .commands
            .get(name)
            .ok_or(format!("the reference has no {name}"))?;
        let mut words = vec![exe.to_owned(), FOREIGN.to_owned()];
        words.extend(flags.iter().map(|f| (*f).to_owned()));
        words.push("--".to_owned());
        words.extend(command.words()?);
        section
            .commands
            .insert(name.to_owned(), CommandTemplate::Argv(words));
    }
    let mut profile = Profile {
        section: section.clone(),
        exe: exe.to_owned(),
    };
    describe(&mut profile);
    *section = profile.section;
    Ok(())
}

/// The intercom section being described.
struct Profile {
    section: SuiteTarget,
    exe: String,
}

impl Profile {
    fn set(&mut self, key: &str, value: &str) {
        self.section
            .settings
            .insert(key.to_owned(), value.to_owned());
    }

    /// Replaces `from` by `to` in setting `key` (which must contain it).
    fn edit(&mut self, key: &str, from: &str, to: &str) {
        let text = self.section.settings.get(key).cloned().unwrap_or_default();
        assert!(text.contains(from), "settings.{key} has no {from:?}");
        self.set(key, &text.replace(from, to));
    }

    /// The MCP endpoint binds the harness's `{mcp_port}`.
    fn mcp_port_in_config(&mut self) {
        self.edit("config_template", "port = 0", "port = {mcp_port}");
    }

    /// The time knobs as `NAME_s` keys (the stand-in's `--seconds`), the startup timeout from
    /// `startup`.
    fn seconds(&mut self, startup: &str) {
        self.edit(
            "acp_template",
            "startup_timeout_ms = {startup_timeout_ms}",
            &format!("startup_timeout_s = {startup}"),
        );
        self.edit(
            "acp_template",
            "inactivity_threshold_ms = {inactivity_ms}",
            "inactivity_threshold_s = {inactivity_s}",
        );
        self.edit(
            "acp_template",
            "escalation_threshold_ms = {escalation_ms}",
            "escalation_threshold_s = {escalation_s}",
        );
    }

    /// The build's line limit is fixed: the template does not place `{max_line_length}`.
    fn fixed_line_limit(&mut self) {
        self.edit(
            "acp_template",
            "max_line_length = {max_line_length}",
            &format!("max_line_length = {FIXED_LIMIT}"),
        );
    }

    /// The server reaches its agents through the dialect stand-in, so the agents see the
    /// `intercom-jsonrpc` dialect; the profile declares `dialect` only.
    fn jsonrpc_agent(&mut self, dialect: &str) {
        self.section
            .capabilities
            .retain(|c| !c.starts_with("dialect-"));
        self.section.capabilities.insert(dialect.to_owned());
        self.edit(
            "acp_template",
            "dialect = \"{dialect}\"",
            "dialect = \"intercom\"",
        );
        let exe = self.exe.clone();
        self.edit(
            "agent_template",
            "host_cli = \"{mock_agent}\"\nhost_cli_args = [",
            &format!(
                "host_cli = \"{exe}\"\nhost_cli_args = [\"{JSONRPC_AGENT}\", \"{{mock_agent}}\", "
            ),
        );
    }
}

// The server stand-in.

/// What `--intercom-foreign` was asked to change.
#[derive(Default)]
struct Flags {
    ready_line: Option<String>,
    log_to_stdout: bool,
    seconds: bool,
    stdin_blocks_exit: bool,
    needs_host_cli: bool,
}

/// Runs the server stand-in with `FLAG… -- SKI ARGS…`; answers its exit code.
fn foreign(args: &[String]) -> i32 {
    match run_foreign(args) {
        Ok(code) => code,
        Err(message) => {
            eprintln!("error: {message}");
            5
        }
    }
}

fn run_foreign(args: &[String]) -> Result<i32, String> {
    let split = args
        .iter()
        .position(|a| a == "--")
        .ok_or("usage: --intercom-foreign FLAG… -- SKI ARGS…")?;
    let mut flags = Flags::default();
    let mut words = args[..split].iter();
    while let Some(flag) = words.next() {
        match flag.as_str() {
            "--ready-line" => flags.ready_line = words.next().cloned(),
            "--log-to-stdout" => flags.log_to_stdout = true,
            "--seconds" => flags.seconds = true,
            "--stdin-blocks-exit" => flags.stdin_blocks_exit = true,
            "--needs-host-cli" => flags.needs_host_cli = true,
            other => return Err(format!("unknown flag {other}")),
        }
    }
    let mut command = args[split + 1..].to_vec();
    let config_at = command
        .iter()
        .position(|a| a == "--config")
        .map(|i| i + 1)
        .filter(|i| *i < command.len())
        .ok_or("no --config")?;
    let config = std::fs::read_to_string(&command[config_at]).map_err(|e| e.to_string())?;
    if flags.needs_host_cli
        && !config
            .lines()
            .any(|l| l.trim_start().starts_with("host_cli "))
    {
        eprintln!("Error: Config(\"invalid config: missing field `host_cli`\")");
        return Ok(1);
    }
    if flags.seconds {
        let converted = format!("{}.ms.toml", command[config_at]);
        std::fs::write(&converted, in_milliseconds(&config)?).map_err(|e| e.to_string())?;
        command[config_at] = converted;
    }
    let (program, rest) = command.split_first().ok_or("no program")?;
    let mut child = Command::new(program)
        .args(rest)
        .stdin(if flags.stdin_blocks_exit {
            Stdio::null()
        } else {
            Stdio::inherit()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start {program}: {e}"))?;
    // SIGTERM reaches the whole group: the server's own ends the stand-in too. The server was
    // started before, so its mask is untouched.
    hold_sigterm()?;
    let stdout = child.stdout.take().ok_or("no stdout")?;
    let stderr = child.stderr.take().ok_or("no stderr")?;
    let out = Arc::new(Mutex::new(std::io::stdout()));
    let ready_line = flags.ready_line.clone();
    let log_to_stdout = flags.log_to_stdout;
    let readiness = {
        let out = Arc::clone(&out);
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let is_object = serde_json::from_str::<Value>(&line).is_ok_and(|v| v.is_object());
                match &ready_line {
                    Some(text) if is_object => {
                        if log_to_stdout {
                            write_line(&out, text);
                        } else {
                            eprintln!("{text}");
                        }
                    }
                    _ => write_line(&out, &line),
                }
            }
        })
    };
    let log = {
        let out = Arc::clone(&out);
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if log_to_stdout {
                    write_line(&out, &line);
                } else {
                    eprintln!("{line}");
                }
            }
        })
    };
    let status = child.wait().map_err(|e| e.to_string())?;
    let _ = readiness.join();
    let _ = log.join();
    if flags.stdin_blocks_exit {
        let mut rest = Vec::new();
        let _ = std::io::stdin().read_to_end(&mut rest);
    }
    Ok(status.code().unwrap_or(1))
}

fn write_line(out: &Mutex<std::io::Stdout>, line: &str) {
    let out = out
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let mut out = out.lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

/// `NAME_s = N` lines as `NAME_ms = N000`.
fn in_milliseconds(config: &str) -> Result<String, String> {
    let mut converted = String::new();
    for line in config.lines() {
        match line.split_once(" = ") {
            Some((key, value)) if key.ends_with("_s") => {
                let seconds: u64 = value
                    .trim()
                    .parse()
                    .map_err(|_| format!("{key} is not whole seconds: {value}"))?;
                let key = key.trim_end_matches("_s");
                converted.push_str(&format!("{key}_ms = {}\n", seconds * 1000));
            }
            _ => {
                converted.push_str(line);
                converted.push('\n');
            }
        }
    }
    Ok(converted)
}

/// Holds SIGTERM pending in this process from now on (threads started later inherit it): the
/// stand-in ends when the server it started does.
fn hold_sigterm() -> Result<(), String> {
    nix::sys::signal::SigSet::from(nix::sys::signal::Signal::SIGTERM)
        .thread_block()
        .map_err(|e| e.to_string())
}

// The dialect stand-in.

/// Runs the mock agent `MOCK ARGS…` behind the `intercom-jsonrpc` dialect; answers its exit code.
fn jsonrpc_agent(args: &[String]) -> i32 {
    match run_jsonrpc_agent(args) {
        Ok(code) => code,
        Err(message) => {
            eprintln!("error: {message}");
            5
        }
    }
}

fn run_jsonrpc_agent(args: &[String]) -> Result<i32, String> {
    let (program, rest) = args
        .split_first()
        .ok_or("usage: --jsonrpc-agent MOCK ARGS…")?;
    let mut child = Command::new(program)
        .args(rest)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start {program}: {e}"))?;
    let mut to_agent = child.stdin.take().ok_or("no stdin")?;
    let mut from_agent = BufReader::new(child.stdout.take().ok_or("no stdout")?).lines();
    let cwd = std::env::current_dir().map_err(|e| e.to_string())?;
    // The handshake, answered before anything the server sent is passed on.
    send(
        &mut to_agent,
        json!({"jsonrpc": "2.0", "id": "shim-init", "method": "initialize",
               "params": {"protocolVersion": 1, "clientInfo": {"name": "stand-in", "version": "0"}}}),
    )?;
    await_result(&mut from_agent, "shim-init")?;
    send(
        &mut to_agent,
        json!({"jsonrpc": "2.0", "method": "initialized"}),
    )?;
    send(
        &mut to_agent,
        json!({"jsonrpc": "2.0", "id": "shim-new", "method": "session/new",
               "params": {"cwd": cwd, "mcpServers": []}}),
    )?;
    let session = await_result(&mut from_agent, "shim-new")?["sessionId"]
        .as_str()
        .ok_or("session/new without a sessionId")?
        .to_owned();
    let to_server = std::thread::spawn(move || {
        let mut prompts = 0u64;
        for line in std::io::stdin().lock().lines().map_while(Result::ok) {
            let message = serde_json::from_str::<Value>(&line).ok();
            let text = match message.as_ref().and_then(|m| m["method"].as_str()) {
                Some("prompt/send") => message.as_ref().map(|m| m["params"]["text"].clone()),
                Some("nudge") => message.as_ref().map(|m| m["params"]["message"].clone()),
                _ => None,
            };
            let out = match text {
                Some(text) => {
                    prompts += 1;
                    json!({"jsonrpc": "2.0", "id": format!("shim-prompt-{prompts}"),
                           "method": "session/prompt",
                           "params": {"sessionId": session, "prompt": [{"type": "text", "text": text}]}})
                    .to_string()
                }
                None => line,
            };
            if writeln!(to_agent, "{out}").is_err() {
                break;
            }
        }
        // The server closed its end: so does the agent's stdin (dropped here).
    });
    let stdout = std::io::stdout();
    for line in from_agent.map_while(Result::ok) {
        let message = serde_json::from_str::<Value>(&line).ok();
        let own_result = message.as_ref().is_some_and(|m| {
            m.get("method").is_none() && m["id"].as_str().is_some_and(|id| id.starts_with("shim-"))
        });
        let update = message
            .as_ref()
            .is_some_and(|m| m["method"] == "session/update");
        if own_result || update {
            continue;
        }
        let mut out = stdout.lock();
        if writeln!(out, "{line}").and_then(|()| out.flush()).is_err() {
            break;
        }
    }
    let status = child.wait().map_err(|e| e.to_string())?;
    drop(to_server);
    Ok(status.code().unwrap_or(1))
}

fn send(to: &mut std::process::ChildStdin, message: Value) -> Result<(), String> {
    writeln!(to, "{message}").map_err(|e| e.to_string())
}

/// Reads the agent's lines until the result of request `id`.
fn await_result(
    lines: &mut std::io::Lines<BufReader<std::process::ChildStdout>>,
    id: &str,
) -> Result<Value, String> {
    for line in lines.by_ref().map_while(Result::ok) {
        let Ok(message) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        if message["id"] == id {
            return message
                .get("result")
                .cloned()
                .ok_or(format!("{id} failed: {message}"));
        }
    }
    Err(format!("the agent ended before answering {id}"))
}
