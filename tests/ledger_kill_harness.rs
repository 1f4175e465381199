//! Real `ski teams` processes claiming tasks, sending messages and draining inboxes at the same
//! time on one root, some of them SIGKILLed at random points, and the recorded history checked
//! against what a ledger and its inboxes promise.
//!
//! Each round the lead creates two tasks; then six processes, each a random member doing a random
//! call (claim one of the tasks, send a direct message or a broadcast, drain its inbox with
//! `inbox read` or `context inject`, or drain it with stdout closed before it starts), start
//! gated on stdin and are released together once all of them opened the ledger. A seeded plan
//! kills some of them (SIGKILL to the process group): after a random fraction (0 to 1.5) of the
//! typical lifetime of the calls so far, or, for a drain, once a random number of bytes of its
//! output arrived (the rest of a large inbox then waits in a full pipe). Every call's invocation and return
//! is recorded: ok with its output, refused with its error, or killed (indeterminate) with what
//! it printed before it died. At the end every member drains its inbox once more, unkilled, and
//! the ledger is listed.
//!
//! The rules the history must keep:
//! - **Claims.** All successful claims of a task name one member, and the final ledger names
//!   that member as owner. A killed claim may or may not have happened: the final ledger
//!   decides, and an owner must be a member whose claim of the task succeeded or was killed. A
//!   refused claim changed nothing: `already_claimed` names the final owner.
//! - **Messages.** A send's content starts with a unique token `[m<round>.<n>]`. A message is
//!   delivered by a completed read (exit 0, its JSON whole): `inbox read`'s messages, `context
//!   inject`'s block, or the final drains. Every message a completed read delivers was sent (the
//!   send succeeded or was killed, never refused) by its sender to this reader. Each message is
//!   delivered at most once per recipient. A message whose send succeeded is delivered exactly
//!   once to each recipient the send reported, unless its token appears in the output of a
//!   killed reader of that recipient: that reader may have taken it, and it counts as
//!   indeterminate (delivered at most once). A message a killed send may have sent is delivered at
//!   most once. A reader whose stdout is closed delivers nothing, so it may remove nothing.
//!
//! A correct implementation passes every run wherever the kills land; a run can be replayed with
//! the seed printed on failure (the plan repeats: the calls, who is killed and at which fraction
//! of the lifetime or which byte; where in the program a kill lands is the machine's timing).
//!
//! Environment: `SKI_KILL_HARNESS_ROUNDS` (default 80), `SKI_KILL_HARNESS_SEED` (default: from
//! the clock), and `SKI_KILL_HARNESS_BIN`: another `ski` build to run instead of this one's (an
//! older commit's, or one broken on purpose to see the harness catch it).

use crate::ledger_history;
use crate::teams_support;

use std::collections::{BTreeMap, BTreeSet};
use std::io::Read;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use ledger_history::Rng;
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use serde_json::Value;
use teams_support::{Event, Guarded, LEAD, Root, is_event, spawn_watched};

const TEAM: &str = "harness";
const WORKERS: [&str; 4] = [
    "agent:w0:main",
    "agent:w1:main",
    "agent:w2:main",
    "agent:w3:main",
];
const DEFAULT_ROUNDS: usize = 80;
const PROCESSES: usize = 6;
const TASKS_PER_ROUND: usize = 2;
/// How long a round may take before the harness calls it hung.
const ROUND_LIMIT: Duration = Duration::from_secs(120);

/// What one process is asked to do.
#[derive(Debug, Clone)]
enum Call {
    Claim {
        task: String,
    },
    Send {
        to: Option<String>,
        content: String,
    },
    Drain {
        inject: bool,
    },
    /// `inbox read` with its stdout closed before it starts.
    DrainClosed,
}

impl Call {
    fn args(&self) -> Vec<String> {
        let mut args: Vec<String> = ["--gate", "--busy-timeout-ms", "60000"]
            .map(str::to_owned)
            .to_vec();
        let rest: Vec<&str> = match self {
            Call::Claim { task } => vec!["task", "claim", TEAM, task],
            Call::Send {
                to: Some(to),
                content,
            } => {
                vec!["message", "send", TEAM, "--to", to, "--content", content]
            }
            Call::Send { to: None, content } => {
                vec!["message", "send", TEAM, "--broadcast", "--content", content]
            }
            Call::Drain { inject: true } => vec!["context", "inject", TEAM],
            Call::Drain { inject: false } | Call::DrainClosed => vec!["inbox", "read", TEAM],
        };
        args.extend(rest.into_iter().map(str::to_owned));
        args
    }
}

/// When a process is killed.
#[derive(Debug, Clone, Copy)]
enum Kill {
    Never,
    /// After this many thousandths of the typical lifetime of a call (the median so far).
    AtPermille(u64),
    /// Once this many bytes of its output arrived.
    AfterBytes(usize),
}

/// How a call returned.
#[derive(Debug)]
enum Returned {
    Ok(Value),
    Refused(i32, Value),
    /// Killed: indeterminate; what it printed before it died.
    Killed(String),
    /// Its stdout was closed: whatever it printed reached nobody.
    Unread,
}

/// One call of the history.
#[derive(Debug)]
struct Record {
    round: usize,
    caller: String,
    call: Call,
    kill: Kill,
    returned: Returned,
}

impl Record {
    /// One line for a failure report: the call (a message by its token), the kill plan, and how
    /// it returned (outputs by the tokens they hold).
    fn line(&self) -> String {
        let call = match &self.call {
            Call::Send { to, content } => {
                format!(
                    "send {} to {}",
                    tokens(content).join(""),
                    to.as_deref().unwrap_or("all")
                )
            }
            other => format!("{other:?}"),
        };
        let returned = match &self.returned {
            Returned::Ok(value)
                if value.get("messages").is_some() || value.get("block").is_some() =>
            {
                format!("ok, delivered {}", tokens(&value.to_string()).join(""))
            }
            Returned::Ok(value) if value.get("task").is_some() => {
                format!("ok, owner {}", value["task"]["owner"])
            }
            Returned::Ok(value) => format!("ok, recipients {}", value["recipients"]),
            Returned::Refused(code, value) => format!("exit {code}, {}", value["error"]),
            Returned::Killed(partial) => format!(
                "killed after {} bytes holding {}",
                partial.len(),
                tokens(partial).join("")
            ),
            Returned::Unread => "stdout closed".to_owned(),
        };
        format!(
            "round {} {}: {call}, kill {:?} -> {returned}",
            self.round, self.caller, self.kill
        )
    }
}

/// `ski teams` as `caller` on `root`: [`Root::command`], run by `SKI_KILL_HARNESS_BIN` when set.
fn ski(root: &Root, caller: &str, args: &[&str]) -> Command {
    let command = root.command(caller, args);
    let Some(program) = std::env::var_os("SKI_KILL_HARNESS_BIN") else {
        return command;
    };
    let mut other = Command::new(program);
    other.args(command.get_args()).process_group(0);
    for (name, value) in command.get_envs() {
        match value {
            Some(value) => other.env(name, value),
            None => other.env_remove(name),
        };
    }
    other
}

/// Runs a call the harness does not kill; it must succeed.
fn ok(root: &Root, caller: &str, args: &[&str]) -> Value {
    let output = ski(root, caller, args)
        .stdin(Stdio::null())
        .output()
        .expect("run ski teams");
    let value: Value = serde_json::from_slice(&output.stdout).unwrap_or(Value::Null);
    assert!(
        output.status.success(),
        "ski teams {args:?} as {caller} failed: {value} {}",
        String::from_utf8_lossy(&output.stderr)
    );
    value
}

fn members() -> Vec<String> {
    let mut members = vec![LEAD.to_owned()];
    members.extend(WORKERS.iter().map(|w| (*w).to_owned()));
    members
}

/// The calls of one round.
fn plan(rng: &mut Rng, round: usize, tasks: &[String]) -> Vec<(String, Call, Kill)> {
    let members = members();
    (0..PROCESSES)
        .map(|n| {
            let caller = rng.pick(&members).clone();
            let call = match rng.below(10) {
                0..=3 => {
                    // Mostly this round's tasks, sometimes an earlier one.
                    let recent = &tasks[tasks.len() - TASKS_PER_ROUND..];
                    let pool = if rng.chance(80) { recent } else { tasks };
                    Call::Claim {
                        task: rng.pick(pool).clone(),
                    }
                }
                4..=6 => {
                    let others: Vec<String> =
                        members.iter().filter(|m| **m != caller).cloned().collect();
                    let to = if rng.chance(25) {
                        None
                    } else {
                        Some(rng.pick(&others).clone())
                    };
                    let padding = "x".repeat(1024 + rng.below(12 * 1024));
                    Call::Send {
                        to,
                        content: format!("[m{round}.{n}] {padding}"),
                    }
                }
                7..=8 => Call::Drain {
                    inject: rng.chance(30),
                },
                _ => Call::DrainClosed,
            };
            let kill = match (&call, rng.below(10)) {
                (Call::DrainClosed, _) | (_, 0..=4) => Kill::Never,
                (Call::Drain { .. }, 8..=9) => Kill::AfterBytes(1 + rng.below(48 * 1024)),
                _ => Kill::AtPermille(rng.below(1500) as u64),
            };
            (caller, call, kill)
        })
        .collect()
}

fn kill_group(pid: u32) {
    if let Ok(pid) = i32::try_from(pid) {
        let _ = killpg(Pid::from_raw(pid), Signal::SIGKILL);
    }
}

/// Reads a process's stdout to its end, killing its group once `kill_after` bytes arrived;
/// returns the bytes and when the output ended.
fn read_output(
    mut stdout: std::process::ChildStdout,
    pid: u32,
    kill_after: Option<usize>,
) -> (Vec<u8>, Instant) {
    let mut out = Vec::new();
    let mut buffer = [0u8; 4096];
    let mut killed = false;
    loop {
        match stdout.read(&mut buffer) {
            Ok(0) | Err(_) => break,
            Ok(n) => out.extend_from_slice(&buffer[..n]),
        }
        if !killed && kill_after.is_some_and(|limit| out.len() >= limit) {
            kill_group(pid);
            killed = true;
        }
    }
    (out, Instant::now())
}

/// A started process of a round.
struct Running {
    guarded: Guarded,
    output: Option<thread::JoinHandle<(Vec<u8>, Instant)>>,
}

/// Waits until every process printed its ready event or closed stderr.
fn await_ready(events: &mpsc::Receiver<Event>, count: usize) {
    let mut done = BTreeSet::new();
    while done.len() < count {
        match events.recv_timeout(ROUND_LIMIT) {
            Ok(Event::Line(i, line)) if is_event(&line, "ready") => {
                done.insert(i);
            }
            Ok(Event::Line(..)) => {}
            Ok(Event::Closed(i)) => {
                done.insert(i);
            }
            Err(_) => panic!("processes did not reach their gate: {done:?} of {count}"),
        }
    }
}

/// How long calls live from their release to the end of their output: the median of the unkilled
/// calls so far.
#[derive(Debug, Default)]
struct Lifetimes(Vec<Duration>);

impl Lifetimes {
    fn typical(&self) -> Duration {
        let mut sorted = self.0.clone();
        sorted.sort();
        sorted
            .get(sorted.len() / 2)
            .copied()
            .unwrap_or(Duration::from_millis(10))
    }
}

/// Runs one round's calls concurrently, and notes how long the unkilled ones lived.
fn run_round(
    root: &Root,
    round: usize,
    calls: Vec<(String, Call, Kill)>,
    lifetimes: &mut Lifetimes,
) -> Vec<Record> {
    let lifetime = lifetimes.typical();
    let (tx, rx) = mpsc::channel();
    let mut running = Vec::new();
    for (i, (caller, call, kill)) in calls.iter().enumerate() {
        let command = ski(
            root,
            caller,
            &call.args().iter().map(String::as_str).collect::<Vec<_>>(),
        );
        let mut guarded = spawn_watched(command, i, &tx);
        let stdout = guarded.child.stdout.take().expect("stdout");
        let output = if matches!(call, Call::DrainClosed) {
            drop(stdout);
            None
        } else {
            let pid = guarded.child.id();
            let kill_after = match kill {
                Kill::AfterBytes(bytes) => Some(*bytes),
                _ => None,
            };
            Some(thread::spawn(move || read_output(stdout, pid, kill_after)))
        };
        running.push(Running { guarded, output });
    }
    await_ready(&rx, calls.len());
    let pids: Vec<u32> = running.iter().map(|p| p.guarded.child.id()).collect();
    let (finished, watch) = mpsc::channel::<()>();
    let watchdog = thread::spawn(move || {
        let hung = watch.recv_timeout(ROUND_LIMIT).is_err();
        if hung {
            pids.into_iter().for_each(kill_group);
        }
        hung
    });
    let started = Instant::now();
    for process in &mut running {
        drop(process.guarded.child.stdin.take());
    }
    let mut timed: Vec<(Duration, u32)> = calls
        .iter()
        .zip(&running)
        .filter_map(|((_, _, kill), process)| match kill {
            Kill::AtPermille(permille) => Some((
                lifetime.mul_f64(*permille as f64 / 1000.0),
                process.guarded.child.id(),
            )),
            _ => None,
        })
        .collect();
    timed.sort();
    for (delay, pid) in timed {
        // A kill point, not a wait for readiness: the process may be anywhere, or gone.
        thread::sleep((started + delay).saturating_duration_since(Instant::now()));
        kill_group(pid);
    }
    let mut records = Vec::new();
    for ((caller, call, kill), mut process) in calls.into_iter().zip(running) {
        let output = process.output.take().map(|reader| {
            let (bytes, ended) = reader.join().expect("output reader");
            (String::from_utf8_lossy(&bytes).into_owned(), ended)
        });
        let status = process.guarded.child.wait().expect("reap");
        let returned = match (&output, status.code()) {
            (None, _) => Returned::Unread,
            (Some(_), None) => {
                assert_eq!(
                    status.signal(),
                    Some(9),
                    "only the harness kills: {status:?}"
                );
                Returned::Killed(output.map(|(text, _)| text).unwrap_or_default())
            }
            (Some((text, ended)), Some(code)) => {
                if matches!(kill, Kill::Never) {
                    lifetimes.0.push(ended.duration_since(started));
                }
                let value: Value = serde_json::from_str(text.trim()).unwrap_or_else(|_| {
                    panic!("round {round}: {caller} {call:?} exited {code} without whole JSON: {text:?}")
                });
                if code == 0 {
                    Returned::Ok(value)
                } else {
                    Returned::Refused(code, value)
                }
            }
        };
        records.push(Record {
            round,
            caller,
            call,
            kill,
            returned,
        });
    }
    let _ = finished.send(());
    let hung = watchdog.join().expect("watchdog");
    assert!(
        !hung,
        "round {round} hung: its processes were killed after {ROUND_LIMIT:?}"
    );
    records
}

/// The tokens `[m<round>.<n>]` in a text, in order.
fn tokens(text: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find("[m") {
        rest = &rest[start + 2..];
        let Some(end) = rest.find(']') else { break };
        let body = &rest[..end];
        let shaped = body.split_once('.').is_some_and(|(r, n)| {
            !r.is_empty()
                && !n.is_empty()
                && (r.bytes().chain(n.bytes())).all(|b| b.is_ascii_digit())
        });
        if shaped {
            found.push(format!("[m{body}]"));
        }
    }
    found
}

/// What the history says of one send.
#[derive(Debug)]
struct Sent {
    from: String,
    /// The recipients it reported (ok) or may have reached (killed).
    recipients: BTreeSet<String>,
    /// Whether it succeeded (else killed).
    confirmed: bool,
}

/// The messages a completed read delivered: token, sender as printed, recipient as printed.
fn delivered(call: &Call, value: &Value) -> Vec<(String, Option<String>, Option<String>)> {
    match call {
        Call::Drain { inject: true } => tokens(value["block"].as_str().unwrap_or_default())
            .into_iter()
            .map(|token| (token, None, None))
            .collect(),
        _ => value["messages"]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or_default()
            .iter()
            .map(|m| {
                let content = m["content"].as_str().unwrap_or_default();
                let token = tokens(content).into_iter().next().unwrap_or_default();
                let text = |field: &str| m[field].as_str().map(str::to_owned);
                (token, text("from"), text("to"))
            })
            .collect(),
    }
}

/// The send of `token`, if it may have reached `reader`; else why not.
fn origin<'a>(
    sent: &'a BTreeMap<String, Sent>,
    refused: &BTreeSet<String>,
    token: &str,
    reader: &str,
) -> Result<&'a Sent, String> {
    match sent.get(token) {
        Some(send) if send.recipients.contains(reader) => Ok(send),
        Some(send) => Err(format!("sent by {} to {:?}", send.from, send.recipients)),
        None if refused.contains(token) => Err("whose send was refused".to_owned()),
        None => Err("never sent".to_owned()),
    }
}

/// Every violation of the message rules.
fn check_messages(history: &[Record]) -> Vec<String> {
    let everyone: BTreeSet<String> = members().into_iter().collect();
    let mut sent: BTreeMap<String, Sent> = BTreeMap::new();
    let mut refused: BTreeSet<String> = BTreeSet::new();
    for record in history {
        let Call::Send { to, content } = &record.call else {
            continue;
        };
        let token = tokens(content).remove(0);
        let (recipients, confirmed) = match &record.returned {
            Returned::Ok(value) => (
                value["recipients"]
                    .as_array()
                    .map(Vec::as_slice)
                    .unwrap_or_default()
                    .iter()
                    .filter_map(|r| r.as_str().map(str::to_owned))
                    .collect(),
                true,
            ),
            Returned::Killed(_) => match to {
                Some(to) => ([to.clone()].into(), false),
                None => {
                    let mut others = everyone.clone();
                    others.remove(&record.caller);
                    (others, false)
                }
            },
            Returned::Refused(..) | Returned::Unread => {
                refused.insert(token);
                continue;
            }
        };
        sent.insert(
            token,
            Sent {
                from: record.caller.clone(),
                recipients,
                confirmed,
            },
        );
    }
    let mut violations = Vec::new();
    let mut counts: BTreeMap<(String, String), usize> = BTreeMap::new();
    let mut maybe: BTreeSet<(String, String)> = BTreeSet::new();
    for record in history {
        let Call::Drain { .. } = &record.call else {
            continue;
        };
        let reader = &record.caller;
        match &record.returned {
            Returned::Ok(value) => {
                for (token, from, to) in delivered(&record.call, value) {
                    let send = match origin(&sent, &refused, &token, reader) {
                        Ok(send) => send,
                        Err(why) => {
                            violations.push(format!(
                                "round {}: {reader} was delivered {token:?}, {why}",
                                record.round
                            ));
                            continue;
                        }
                    };
                    if from.as_ref().is_some_and(|f| *f != send.from)
                        || to.as_ref().is_some_and(|t| t != reader)
                    {
                        violations.push(format!(
                            "round {}: {reader} got {token} as from {from:?} to {to:?}; it was sent by {}",
                            record.round, send.from
                        ));
                    }
                    *counts.entry((token, reader.clone())).or_default() += 1;
                }
            }
            Returned::Killed(partial) => {
                for token in tokens(partial) {
                    match origin(&sent, &refused, &token, reader) {
                        Ok(_) => {
                            maybe.insert((token, reader.clone()));
                        }
                        Err(why) => violations.push(format!(
                            "round {}: {reader} printed {token:?} before it was killed, {why}",
                            record.round
                        )),
                    }
                }
            }
            Returned::Refused(..) | Returned::Unread => {}
        }
    }
    for (token, send) in &sent {
        for recipient in &send.recipients {
            let key = (token.clone(), recipient.clone());
            let count = counts.get(&key).copied().unwrap_or(0);
            if count > 1 {
                violations.push(format!(
                    "{token} was delivered to {recipient} {count} times"
                ));
            }
            if count == 0 && send.confirmed && !maybe.contains(&key) {
                violations.push(format!(
                    "{token} (sent by {} and confirmed) never reached {recipient}, and no killed reader printed it",
                    send.from
                ));
            }
        }
    }
    violations
}

/// Every violation of the claim rules, against the final ledger's owners.
fn check_claims(history: &[Record], owners: &BTreeMap<String, Option<String>>) -> Vec<String> {
    let mut violations = Vec::new();
    for (task, owner) in owners {
        let claims: Vec<&Record> = history
            .iter()
            .filter(|r| matches!(&r.call, Call::Claim { task: t } if t == task))
            .collect();
        let winners: BTreeSet<&str> = claims
            .iter()
            .filter(|r| matches!(r.returned, Returned::Ok(_)))
            .map(|r| r.caller.as_str())
            .collect();
        let possible: BTreeSet<&str> = claims
            .iter()
            .filter(|r| matches!(r.returned, Returned::Ok(_) | Returned::Killed(_)))
            .map(|r| r.caller.as_str())
            .collect();
        if winners.len() > 1 {
            violations.push(format!("task {task} was claimed by {winners:?}"));
        }
        if let Some(winner) = winners.iter().next()
            && owner.as_deref() != Some(*winner)
        {
            violations.push(format!(
                "task {task} was claimed by {winner} but the ledger says {owner:?}"
            ));
        }
        if let Some(owner) = owner
            && !possible.contains(owner.as_str())
        {
            violations.push(format!(
                "task {task} is owned by {owner}, whose claim never succeeded nor was killed"
            ));
        }
        for record in &claims {
            match &record.returned {
                Returned::Ok(value) if value["task"]["owner"] != record.caller.as_str() => {
                    violations.push(format!(
                        "round {}: {}'s claim of {task} succeeded naming {}",
                        record.round, record.caller, value["task"]["owner"]
                    ));
                }
                Returned::Refused(_, value) => {
                    let error = &value["error"];
                    if error["code"] != "already_claimed"
                        || error["owner"].as_str() != owner.as_deref()
                    {
                        violations.push(format!(
                            "round {}: {}'s claim of {task} was refused with {error} while the ledger says {owner:?}",
                            record.round, record.caller
                        ));
                    }
                }
                _ => {}
            }
        }
    }
    violations
}

fn env_number(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.parse().ok())
}

#[test]
fn killed_claimants_senders_and_readers_lose_nothing_and_double_nothing() {
    let rounds = env_number("SKI_KILL_HARNESS_ROUNDS").map_or(DEFAULT_ROUNDS, |r| r as usize);
    let seed = env_number("SKI_KILL_HARNESS_SEED").unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64)
    });
    let replay = format!(
        "seed {seed} (replay: SKI_KILL_HARNESS_SEED={seed} SKI_KILL_HARNESS_ROUNDS={rounds})"
    );
    let mut rng = Rng::new(seed);
    let root = Root::new();
    ok(&root, LEAD, &["team", "create", TEAM]);
    for (i, worker) in WORKERS.iter().enumerate() {
        ok(&root, worker, &["member", "join", TEAM, &format!("w{i}")]);
    }
    let mut tasks = Vec::new();
    let mut history = Vec::new();
    let mut lifetimes = Lifetimes::default();
    for round in 0..rounds {
        for n in 0..TASKS_PER_ROUND {
            let subject = format!("round {round} task {n}");
            let created = ok(
                &root,
                LEAD,
                &["task", "create", TEAM, "--subject", &subject],
            );
            tasks.push(created["task"]["id"].as_str().expect("id").to_owned());
        }
        let calls = plan(&mut rng, round, &tasks);
        history.extend(run_round(&root, round, calls, &mut lifetimes));
    }
    for member in members() {
        let value = ok(&root, &member, &["inbox", "read", TEAM]);
        history.push(Record {
            round: rounds,
            caller: member,
            call: Call::Drain { inject: false },
            kill: Kill::Never,
            returned: Returned::Ok(value),
        });
    }
    let listed = ok(&root, LEAD, &["task", "list", TEAM, "--include-completed"]);
    let owners: BTreeMap<String, Option<String>> = listed["tasks"]
        .as_array()
        .expect("tasks")
        .iter()
        .map(|t| {
            (
                t["id"].as_str().expect("id").to_owned(),
                t["owner"].as_str().map(str::to_owned),
            )
        })
        .collect();
    let mut violations = check_claims(&history, &owners);
    violations.extend(check_messages(&history));
    let killed = history
        .iter()
        .filter(|r| matches!(r.returned, Returned::Killed(_)))
        .count();
    assert!(
        violations.is_empty(),
        "{replay}: {} violations in {} calls ({killed} killed):\n{}\n\nhistory:\n{}",
        violations.len(),
        history.len(),
        violations.join("\n"),
        history
            .iter()
            .map(Record::line)
            .collect::<Vec<_>>()
            .join("\n")
    );
    eprintln!(
        "{replay}: {} calls, {killed} killed, typical call {:?}",
        history.len(),
        lifetimes.typical()
    );
}
