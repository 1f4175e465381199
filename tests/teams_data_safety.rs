//! What `ski teams` must never lose, refuse or duplicate: messages stay in the inbox until their
//! JSON has reached the reader (a closed stdout, or a reader killed while it writes, loses none);
//! a broadcast that cannot reach one recipient reaches nobody, so a retry delivers each copy once;
//! an empty `ledger.db` is a damaged ledger, not a new one; reads work on a read-only root; and one
//! team's broken `config.json` does not hide the other teams from `team list`.

use crate::teams_support;

use std::fs;
use std::io::Read;
use std::os::unix::fs::{MetadataExt, PermissionsExt, chown};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use rstest::rstest;
use serde_json::{Value, json};
use ski_mocks::testing::run_with_closed_stdout;
use teams_support::{Guarded, LEAD, Root};

const READER: &str = "agent:reader:main";

/// A team `t` whose member [`READER`] has `count` messages from the lead, each its number and
/// `size` bytes of padding.
fn inbox_with(count: usize, size: usize) -> Root {
    let root = Root::new();
    root.team_with("t", &[READER.to_owned()]);
    for n in 0..count {
        let content = format!("{n} {}", ".".repeat(size));
        root.ok(
            LEAD,
            &[
                "message",
                "send",
                "t",
                "--to",
                READER,
                "--content",
                &content,
            ],
        );
    }
    root
}

/// The messages in the reader's inbox (their first words), read with `--keep`.
fn kept(root: &Root) -> Vec<String> {
    let value = root.ok(READER, &["inbox", "read", "t", "--keep"]);
    value["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .filter_map(|m| m["content"].as_str()?.split(' ').next().map(str::to_owned))
        .collect()
}

fn numbers(count: usize) -> Vec<String> {
    (0..count).map(|n| n.to_string()).collect()
}

#[rstest]
#[case::inbox_read(&["inbox", "read", "t"])]
#[case::context_inject(&["context", "inject", "t"])]
fn a_drain_whose_stdout_is_closed_keeps_every_message(#[case] args: &[&str]) {
    let root = inbox_with(5, 10);
    let closed = run_with_closed_stdout(&mut root.command(READER, args), "");
    assert!(!closed.stderr.contains("panicked"), "{}", closed.stderr);
    assert_eq!(
        kept(&root),
        numbers(5),
        "{args:?} with stdout closed lost messages it never delivered"
    );
}

#[test]
fn a_reader_killed_while_it_writes_its_output_loses_no_message() {
    // Three messages of 90,000 bytes: the JSON (about 270 KB) is far larger than a pipe's
    // buffer (64 KiB), so the reader blocks in its write while the test reads nothing more.
    let root = inbox_with(3, 90_000);
    let child = root
        .command(READER, &["inbox", "read", "t"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn ski teams");
    let mut guarded = Guarded { child };
    let mut first = [0u8; 1];
    guarded
        .child
        .stdout
        .as_mut()
        .expect("stdout")
        .read_exact(&mut first)
        .expect("the reader starts writing its JSON");
    assert_eq!(&first, b"{");
    // The reader is now inside its write of the output and cannot finish it: SIGKILL it there.
    drop(guarded);
    assert_eq!(
        kept(&root),
        numbers(3),
        "messages were removed before their JSON was delivered"
    );
}

#[test]
fn a_drain_removes_what_it_delivered_and_keeps_what_arrived_meanwhile() {
    let root = inbox_with(3, 90_000);
    let child = root
        .command(READER, &["inbox", "read", "t"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn ski teams");
    let mut guarded = Guarded { child };
    let mut stdout = guarded.child.stdout.take().expect("stdout");
    let mut output = vec![0u8; 1];
    stdout
        .read_exact(&mut output)
        .expect("the reader starts writing its JSON");
    // While the reader is blocked in its write, a sender is not held up, and its message is not
    // part of what the reader delivers.
    root.ok(
        LEAD,
        &["message", "send", "t", "--to", READER, "--content", "late"],
    );
    stdout
        .read_to_end(&mut output)
        .expect("the rest of the JSON");
    let status = guarded.child.wait().expect("wait");
    assert!(status.success(), "{status:?}");
    let delivered: Value = serde_json::from_slice(&output).expect("one JSON document");
    assert_eq!(delivered["count"], 3, "{}", delivered["count"]);
    assert_eq!(kept(&root), ["late"]);
}

#[rstest]
#[case::task_list(&["task", "list", "t"])]
#[case::member_list(&["member", "list", "t"])]
#[case::maintenance_check(&["maintenance", "check", "t"])]
#[case::task_create(&["task", "create", "t", "--subject", "s"])]
fn an_empty_ledger_file_is_refused_as_damaged_and_left_empty(#[case] args: &[&str]) {
    let root = Root::new();
    root.ok(LEAD, &["team", "create", "t"]);
    root.ok(LEAD, &["task", "create", "t", "--subject", "before"]);
    let ledger = root.ledger("t");
    fs::write(&ledger, b"").expect("truncate the ledger");
    let (code, value) = root.run(LEAD, args);
    assert_eq!(
        (code, value["error"]["code"].as_str()),
        (3, Some("ledger_unusable")),
        "{args:?}: {value}"
    );
    assert_eq!(
        fs::metadata(&ledger).expect("ledger").len(),
        0,
        "the empty ledger was initialised again"
    );
}

/// Every file under `dir` with its content (directories with none), sorted.
fn snapshot(dir: &Path) -> Vec<(String, Option<Vec<u8>>)> {
    ski_mocks::testing::tree(dir)
        .into_iter()
        .map(|name| {
            let path = dir.join(&name);
            let content = path.is_file().then(|| fs::read(&path).expect("read"));
            (name, content)
        })
        .collect()
}

/// A teams root nobody may write: directories 0555 and files 0444. Root ignores modes, so as
/// root the tree is given to `nobody` and the commands run as `nobody`.
struct ReadOnlyRoot {
    dirs: Vec<PathBuf>,
    as_nobody: bool,
}

const NOBODY: u32 = 65_534;

impl ReadOnlyRoot {
    fn make(root: &Root) -> Self {
        // The temp dir belongs to this process's effective user.
        let owner = fs::metadata(root.dir.path()).expect("temp dir").uid();
        let as_nobody = owner == 0;
        let mut dirs = vec![root.root.clone()];
        let mut files = Vec::new();
        for name in ski_mocks::testing::tree(&root.root) {
            let path = root.root.join(name);
            if path.is_dir() {
                dirs.push(path);
            } else {
                files.push(path);
            }
        }
        for path in dirs.iter().chain(&files) {
            if as_nobody {
                chown(path, Some(NOBODY), Some(NOBODY)).expect("chown");
            }
            let mode = if path.is_dir() { 0o555 } else { 0o444 };
            fs::set_permissions(path, fs::Permissions::from_mode(mode)).expect("chmod");
        }
        // nobody must reach the root through the temp dir.
        fs::set_permissions(root.dir.path(), fs::Permissions::from_mode(0o755)).expect("chmod");
        Self { dirs, as_nobody }
    }

    fn command(&self, root: &Root, args: &[&str]) -> Command {
        let mut command = root.command(LEAD, args);
        if self.as_nobody {
            command.uid(NOBODY).gid(NOBODY);
        }
        command
    }
}

impl Drop for ReadOnlyRoot {
    fn drop(&mut self) {
        for dir in &self.dirs {
            let _ = fs::set_permissions(dir, fs::Permissions::from_mode(0o700));
        }
    }
}

#[test]
fn reads_work_on_a_read_only_root_and_write_nothing() {
    let root = Root::new();
    root.team_with("t", &[READER.to_owned()]);
    root.ok(LEAD, &["task", "create", "t", "--subject", "parse"]);
    root.ok(
        READER,
        &["message", "send", "t", "--to", LEAD, "--content", "hello"],
    );
    let read_only = ReadOnlyRoot::make(&root);
    let before = snapshot(&root.root);
    let reads: &[&[&str]] = &[
        &["team", "list"],
        &["team", "show", "t"],
        &["team", "board", "t"],
        &["member", "list", "t"],
        &["task", "list", "t"],
        &["task", "show", "t", "1"],
        &["task", "next-available", "t"],
        &["task", "activity", "t"],
        &["inbox", "read", "t", "--keep"],
        &["inbox", "path", "t", READER],
        &["maintenance", "check", "t"],
    ];
    for args in reads {
        let output = read_only
            .command(&root, args)
            .stdin(Stdio::null())
            .output()
            .expect("run ski teams");
        assert_eq!(
            output.status.code(),
            Some(0),
            "{args:?} on a read-only root: {}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        assert_eq!(snapshot(&root.root), before, "{args:?} wrote to the root");
    }
    let output = read_only
        .command(&root, &["inbox", "read", "t", "--keep"])
        .stdin(Stdio::null())
        .output()
        .expect("run ski teams");
    let value: Value = serde_json::from_slice(&output.stdout).expect("JSON");
    assert_eq!(value["messages"][0]["content"], "hello", "{value}");
    let output = read_only
        .command(&root, &["task", "list", "t"])
        .stdin(Stdio::null())
        .output()
        .expect("run ski teams");
    let value: Value = serde_json::from_slice(&output.stdout).expect("JSON");
    assert_eq!(value["tasks"][0]["subject"], "parse", "{value}");
}

#[test]
fn one_broken_config_is_reported_and_the_other_teams_are_still_listed() {
    let root = Root::new();
    for name in ["alpha", "bravo", "charlie"] {
        root.ok(LEAD, &["team", "create", name]);
    }
    fs::write(root.root.join("bravo/config.json"), b"{ not json").expect("break bravo");
    let output = root.output(LEAD, &["team", "list"]);
    let value: Value = serde_json::from_slice(&output.stdout).unwrap_or_else(|_| {
        panic!(
            "team list printed no JSON: {}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        )
    });
    assert_eq!(output.status.code(), Some(3), "{value}");
    assert_eq!(value["ok"], false, "{value}");
    let teams = value["teams"].as_array().expect("teams");
    let names: Vec<&str> = teams.iter().filter_map(|t| t["name"].as_str()).collect();
    assert_eq!(names, ["alpha", "bravo", "charlie"], "{value}");
    assert_eq!(teams[0]["lead"], LEAD);
    assert_eq!(teams[2]["lead"], LEAD);
    assert_eq!(teams[1]["error"]["code"], "team_unreadable", "{value}");
    assert!(teams[1].get("lead").is_none(), "{value}");
    assert_eq!(value["error"]["code"], "team_unreadable", "{value}");
    assert_eq!(value["error"]["teams"], json!(["bravo"]), "{value}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("bravo") && stderr.contains("config.json"),
        "{stderr}"
    );
}

#[test]
fn a_message_sent_after_a_torn_line_is_delivered_whole() {
    let root = inbox_with(1, 1);
    let inbox = root.root.join("t/inbox/agent_reader_main");
    // What a sender killed in the middle of its write leaves: the start of a line.
    let mut file = fs::OpenOptions::new()
        .append(true)
        .open(inbox.join("messages.jsonl"))
        .expect("open the inbox");
    std::io::Write::write_all(&mut file, b"{\"id\":\"torn-by-a-kill\",\"ty").expect("tear");
    root.ok(
        LEAD,
        &["message", "send", "t", "--to", READER, "--content", "after"],
    );
    let read = root.ok(READER, &["inbox", "read", "t"]);
    let contents: Vec<&str> = read["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .filter_map(|m| m["content"].as_str()?.split(' ').next())
        .collect();
    assert_eq!(contents, ["0", "after"], "{read}");
    let bad = fs::read_to_string(inbox.join("messages.jsonl.bad")).expect("quarantine");
    assert_eq!(bad, "{\"id\":\"torn-by-a-kill\",\"ty\n");
}

/// The members of the broadcast tests; `agent:c:main`'s inbox comes last, both in the order the
/// members joined and in the order of the inbox directories.
const MEMBERS: [&str; 3] = ["agent:a:main", "agent:b:main", "agent:c:main"];

/// How the last recipient's inbox fails.
#[derive(Debug, Clone, Copy)]
enum Obstacle {
    /// Its lock cannot be taken: a directory stands where the lock file belongs.
    BrokenLock,
    /// It is full.
    FullInbox,
    /// Its write fails after the others were written: the inbox is 4 MiB (sparse) and the sender
    /// runs with a 4 MiB file size limit, SIGXFSZ ignored, so that write gets EFBIG.
    FailedWrite,
}

const LIMITED_BYTES: u64 = 4 * 1024 * 1024;

/// The contents of `key`'s messages in team `t`, read with `--keep`.
fn contents_of(root: &Root, key: &str) -> Vec<String> {
    let value = root.ok(key, &["inbox", "read", "t", "--keep"]);
    value["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .filter_map(|m| Some(m["content"].as_str()?.to_owned()))
        .collect()
}

/// `command` run through `sh` with a file size limit of `bytes` (a multiple of 512) and SIGXFSZ
/// ignored, in its own process group.
fn with_file_size_limit(command: &Command, bytes: u64) -> Command {
    let mut limited = Command::new("sh");
    limited
        .arg("-c")
        .arg("trap '' XFSZ; ulimit -f \"$0\"; exec \"$@\"")
        .arg((bytes / 512).to_string())
        .arg(command.get_program())
        .args(command.get_args())
        .process_group(0);
    for (key, value) in command.get_envs() {
        match value {
            Some(value) => limited.env(key, value),
            None => limited.env_remove(key),
        };
    }
    limited
}

#[rstest]
#[case::broken_lock(Obstacle::BrokenLock)]
#[case::full_inbox(Obstacle::FullInbox)]
#[case::failed_write(Obstacle::FailedWrite)]
fn a_broadcast_that_cannot_reach_one_recipient_reaches_nobody_and_a_retry_delivers_once(
    #[case] obstacle: Obstacle,
) {
    let root = Root::new();
    root.team_with("t", &MEMBERS.map(str::to_owned));
    let last = root.root.join("t/inbox/agent_c_main");
    fs::create_dir_all(&last).expect("the last recipient's inbox");
    let messages = last.join("messages.jsonl");
    let broadcast = [
        "message",
        "send",
        "t",
        "--broadcast",
        "--content",
        "to everyone",
    ];
    let failed = match obstacle {
        Obstacle::BrokenLock => {
            fs::create_dir(last.join(".lock")).expect("a directory where the lock belongs");
            root.output(LEAD, &broadcast)
        }
        Obstacle::FullInbox => {
            fs::File::create(&messages)
                .and_then(|file| file.set_len(ski::teams::mailbox::MAX_INBOX_BYTES))
                .expect("a full inbox");
            root.output(LEAD, &broadcast)
        }
        Obstacle::FailedWrite => {
            fs::File::create(&messages)
                .and_then(|file| file.set_len(LIMITED_BYTES))
                .expect("an inbox at the size limit");
            with_file_size_limit(&root.command(LEAD, &broadcast), LIMITED_BYTES)
                .stdin(Stdio::null())
                .output()
                .expect("run ski teams with a file size limit")
        }
    };
    let refusal: Value = serde_json::from_slice(&failed.stdout).unwrap_or_else(|_| {
        panic!("{obstacle:?}: no JSON: {failed:?}");
    });
    assert_ne!(failed.status.code(), Some(0), "{obstacle:?}: {refusal}");
    assert_eq!(refusal["ok"], false, "{obstacle:?}: {refusal}");
    for key in &MEMBERS[..2] {
        assert_eq!(
            contents_of(&root, key),
            Vec::<String>::new(),
            "{obstacle:?}: the broadcast failed ({}), but {key} got a copy",
            refusal["error"]["code"]
        );
    }
    match obstacle {
        Obstacle::BrokenLock => fs::remove_dir(last.join(".lock")).expect("the lock is free"),
        Obstacle::FullInbox => fs::remove_file(&messages).expect("the inbox is empty again"),
        Obstacle::FailedWrite => {
            assert_eq!(
                fs::metadata(&messages).expect("the inbox").len(),
                LIMITED_BYTES,
                "the failed write left bytes behind"
            );
            fs::remove_file(&messages).expect("the inbox is empty again");
        }
    }

    root.ok(LEAD, &broadcast);
    for key in MEMBERS {
        assert_eq!(
            contents_of(&root, key),
            ["to everyone"],
            "{obstacle:?}: {key} after the retry"
        );
    }
}
