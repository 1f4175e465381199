//! Exactly-once claims, the busy retry and concurrent inbox writers of `ski teams`, proven with
//! real OS processes and a deterministic barrier: each claimant is gated on stdin and the test
//! holds the ledger's write lock until every claimant reported a busy wait, so a claim that reads
//! before it writes would see the task pending in all ten processes.

use crate::teams_support;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::mpsc;
use std::time::Duration;

use rusqlite::Connection;
use teams_support::{Event, LEAD, Root, finish, is_event, spawn_watched};

const CLAIMANTS: usize = 10;

/// The claimants: the lead and nine teammates (the member limit of 10 counts the lead).
fn keys() -> Vec<String> {
    let mut keys: Vec<String> = (1..CLAIMANTS).map(|i| format!("agent:w{i}:main")).collect();
    keys.push(LEAD.to_owned());
    keys
}

/// Waits until every process in `pending` printed `event` or closed stderr.
fn await_each(events: &mpsc::Receiver<Event>, event: &str, count: usize) -> BTreeSet<usize> {
    let mut seen = BTreeSet::new();
    let mut closed = BTreeSet::new();
    while seen.len() + closed.iter().filter(|i| !seen.contains(*i)).count() < count {
        match events.recv_timeout(Duration::from_secs(60)) {
            Ok(Event::Line(i, line)) if is_event(&line, event) => {
                seen.insert(i);
            }
            Ok(Event::Line(..)) => {}
            Ok(Event::Closed(i)) => {
                closed.insert(i);
            }
            Err(_) => panic!("timed out waiting for {event:?}: seen {seen:?}, closed {closed:?}"),
        }
    }
    seen
}

fn race_round(root: &Root, team: &str, task: &str) {
    let keys = keys();
    let (tx, rx) = mpsc::channel();
    let mut children = Vec::new();
    for (i, key) in keys.iter().enumerate() {
        let command = root.command(
            key,
            &[
                "--gate",
                "--trace",
                "--busy-timeout-ms",
                "60000",
                "task",
                "claim",
                team,
                task,
            ],
        );
        children.push(spawn_watched(command, i, &tx));
    }
    let ready = await_each(&rx, "ready", CLAIMANTS);
    assert_eq!(ready.len(), CLAIMANTS, "every claimant opened the ledger");
    let mut lock = Connection::open(root.ledger(team)).expect("open ledger");
    lock.busy_timeout(Duration::from_secs(30))
        .expect("busy timeout");
    let held = lock
        .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
        .expect("take the write lock");
    for child in &mut children {
        drop(child.child.stdin.take());
    }
    let waiting = await_each(&rx, "busy", CLAIMANTS);
    assert_eq!(
        waiting.len(),
        CLAIMANTS,
        "every claimant waited for the lock"
    );
    held.rollback().expect("release the lock");
    let results: Vec<(i32, serde_json::Value)> = children.into_iter().map(finish).collect();
    let winners: Vec<usize> = (0..CLAIMANTS).filter(|i| results[*i].0 == 0).collect();
    assert_eq!(winners.len(), 1, "exactly one claim succeeds: {results:?}");
    let winner = winners[0];
    assert_eq!(results[winner].1["task"]["owner"], keys[winner].as_str());
    for (i, (code, value)) in results.iter().enumerate() {
        if i != winner {
            assert_eq!(*code, 2, "a losing claim exits 2: {value}");
            assert_eq!(value["error"]["code"], "already_claimed", "{value}");
            assert_eq!(
                value["error"]["message"],
                "Task already claimed by another agent"
            );
        }
    }
    let (status, owner): (String, String) = lock
        .query_row(
            "SELECT status, owner FROM tasks WHERE id = ?1",
            [task],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .expect("read the task");
    assert_eq!(
        (status.as_str(), owner.as_str()),
        ("in_progress", keys[winner].as_str())
    );
}

#[test]
fn ten_processes_claiming_one_task_behind_a_held_lock_give_exactly_one_winner() {
    let rounds: usize = std::env::var("SKI_TEAMS_RACE_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(3);
    let root = Root::new();
    root.team_with("race", &keys()[..CLAIMANTS - 1]);
    for round in 0..rounds {
        let task = root.ok(
            LEAD,
            &[
                "task",
                "create",
                "race",
                "--subject",
                &format!("round {round}"),
            ],
        );
        let id = task["task"]["id"].as_str().expect("id").to_owned();
        race_round(&root, "race", &id);
    }
}

#[test]
fn a_locked_ledger_is_retried_with_growing_delays_and_the_update_lands() {
    let root = Root::new();
    root.team_with("busy", &["agent:w0:main".to_owned()]);
    root.ok(LEAD, &["task", "create", "busy", "--subject", "one"]);
    let mut lock = Connection::open(root.ledger("busy")).expect("open ledger");
    let held = lock
        .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
        .expect("take the write lock");
    let (tx, rx) = mpsc::channel();
    let command = root.command(
        "agent:w0:main",
        &[
            "--trace",
            "--busy-timeout-ms",
            "60000",
            "task",
            "claim",
            "busy",
            "1",
        ],
    );
    let child = spawn_watched(command, 0, &tx);
    let mut delays = Vec::new();
    while delays.len() < 3 {
        match rx
            .recv_timeout(Duration::from_secs(60))
            .expect("a busy event")
        {
            Event::Line(_, line) if is_event(&line, "busy") => {
                let v: serde_json::Value = serde_json::from_str(&line).expect("json");
                delays.push(v["delayMs"].as_u64().expect("delayMs"));
            }
            Event::Line(..) => {}
            Event::Closed(_) => panic!("the claim gave up while the lock was held"),
        }
    }
    assert!(
        delays[1] > delays[0] && delays[2] > delays[1],
        "backoff grows: {delays:?}"
    );
    held.rollback().expect("release");
    let (code, value) = finish(child);
    assert_eq!(code, 0, "{value}");
    assert!(value["busyRetries"].as_u64().unwrap_or(0) >= 3, "{value}");
    assert_eq!(value["task"]["status"], "in_progress");

    // Bounded: with a short budget and the lock never released, exit 5 and nothing changed.
    root.ok(LEAD, &["task", "create", "busy", "--subject", "two"]);
    let held = lock
        .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
        .expect("take the write lock again");
    let (code, value) = root.run(
        "agent:w0:main",
        &["--busy-timeout-ms", "200", "task", "claim", "busy", "2"],
    );
    assert_eq!(code, 5, "{value}");
    assert_eq!(value["error"]["code"], "busy");
    held.rollback().expect("release");
    let task = root.ok(LEAD, &["task", "show", "busy", "2"]);
    assert_eq!(task["task"]["status"], "pending");
}

#[test]
fn concurrent_writers_and_a_draining_reader_deliver_every_message_exactly_once() {
    const WRITERS: usize = 4;
    const PER_WRITER: usize = 25;
    let root = Root::new();
    let writers: Vec<String> = (0..WRITERS).map(|i| format!("agent:w{i}:main")).collect();
    let mut keys = writers.clone();
    keys.push("agent:reader:main".to_owned());
    root.team_with("mail", &keys);
    let handles: Vec<_> = writers
        .iter()
        .map(|key| {
            let commands: Vec<std::process::Command> = (0..PER_WRITER)
                .map(|n| {
                    root.command(
                        key,
                        &[
                            "message",
                            "send",
                            "mail",
                            "--to",
                            "agent:reader:main",
                            "--content",
                            &format!("{key} #{n}"),
                        ],
                    )
                })
                .collect();
            std::thread::spawn(move || {
                for mut command in commands {
                    let output = command.output().expect("send");
                    assert!(output.status.success(), "{output:?}");
                }
            })
        })
        .collect();
    let mut received: Vec<String> = Vec::new();
    while handles.iter().any(|h| !h.is_finished()) {
        let value = root.ok("agent:reader:main", &["context", "inject", "mail"]);
        let block = value["block"].as_str().expect("block").to_owned();
        received.extend(
            block
                .lines()
                .filter(|l| l.starts_with("agent:"))
                .map(str::to_owned),
        );
    }
    for handle in handles {
        handle.join().expect("writer");
    }
    let value = root.ok("agent:reader:main", &["inbox", "read", "mail"]);
    for message in value["messages"].as_array().expect("messages") {
        received.push(message["content"].as_str().expect("content").to_owned());
    }
    let mut per_writer: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for line in &received {
        let (key, n) = line.split_once(" #").expect("content shape");
        per_writer
            .entry(key)
            .or_default()
            .push(n.parse().expect("number"));
    }
    assert_eq!(
        received.len(),
        WRITERS * PER_WRITER,
        "every message exactly once"
    );
    for (key, numbers) in per_writer {
        assert_eq!(
            numbers,
            (0..PER_WRITER).collect::<Vec<_>>(),
            "{key}'s messages in send order"
        );
    }
}

/// Starts `commands` gated, waits for every `ready`, opens the gates, and returns the results.
fn gated_all(commands: Vec<std::process::Command>) -> Vec<(i32, serde_json::Value)> {
    let (tx, rx) = mpsc::channel();
    let count = commands.len();
    let mut children: Vec<_> = commands
        .into_iter()
        .enumerate()
        .map(|(i, command)| spawn_watched(command, i, &tx))
        .collect();
    let ready = await_each(&rx, "ready", count);
    assert_eq!(ready.len(), count, "every process reached its gate");
    for child in &mut children {
        drop(child.child.stdin.take());
    }
    children.into_iter().map(finish).collect()
}

#[test]
fn of_six_processes_creating_one_team_exactly_one_wins() {
    let root = Root::new();
    let commands = (0..6)
        .map(|i| {
            root.command(
                &format!("agent:c{i}:main"),
                &["--gate", "team", "create", "same"],
            )
        })
        .collect();
    let results = gated_all(commands);
    let winners = results.iter().filter(|(code, _)| *code == 0).count();
    assert_eq!(winners, 1, "{results:?}");
    for (code, value) in results.iter().filter(|(code, _)| *code != 0) {
        assert_eq!(
            (*code, value["error"]["code"].as_str()),
            (2, Some("team_exists")),
            "{value}"
        );
    }
    let lead = results
        .iter()
        .find(|(code, _)| *code == 0)
        .map(|(_, v)| v["lead"].clone());
    let team = root.ok(LEAD, &["team", "show", "same"]);
    assert_eq!(
        Some(team["team"]["lead"].clone()),
        lead,
        "the config names the winner as lead"
    );
}

#[test]
fn concurrent_joins_stop_exactly_at_the_member_limit() {
    let root = Root::new();
    root.ok(LEAD, &["team", "create", "full"]);
    let commands = (0..12)
        .map(|i| {
            root.command(
                &format!("agent:j{i}:main"),
                &[
                    "--gate",
                    "--busy-timeout-ms",
                    "60000",
                    "member",
                    "join",
                    "full",
                    &format!("j{i}"),
                ],
            )
        })
        .collect();
    let results = gated_all(commands);
    let joined = results.iter().filter(|(code, _)| *code == 0).count();
    assert_eq!(
        joined, 9,
        "the lead and nine joiners fill the limit of 10: {results:?}"
    );
    for (_, value) in results.iter().filter(|(code, _)| *code != 0) {
        assert_eq!(value["error"]["code"], "member_limit", "{value}");
    }
    let members = root.ok(LEAD, &["member", "list", "full"]);
    assert_eq!(members["members"].as_array().map(Vec::len), Some(10));
}
