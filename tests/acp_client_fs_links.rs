//! `ski acp client connect --fs` against a real agent process (a shell script) that asks it to
//! read and write through symbolic links, FIFOs and another session's id: nothing outside the
//! root is created or read, nothing blocks, and every refusal is a JSON-RPC error.
//!
//! The agent answers `initialize` and `session/new` (session `sess-1`); on the prompt it sends
//! the requests of a file one at a time, waits for each reply and logs it, then ends the turn.

use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::time::Duration;

use assert_cmd::Command;
use nix::sys::stat::Mode;
use serde_json::{Value, json};

const SESSION: &str = "sess-1";

/// `@REQUESTS@` and `@REPLIES@` are replaced by the files' paths.
const AGENT: &str = r#"
while IFS= read -r line; do
  id=$(printf '%s' "$line" | sed -n 's/.*"id":\([0-9][0-9]*\).*/\1/p')
  case "$line" in
    *'"method":"initialize"'*)
      printf '%s\n' "{\"jsonrpc\":\"2.0\",\"id\":$id,\"result\":{\"protocolVersion\":1,\"agentCapabilities\":{}}}" ;;
    *'"method":"session/new"'*)
      printf '%s\n' "{\"jsonrpc\":\"2.0\",\"id\":$id,\"result\":{\"sessionId\":\"sess-1\"}}" ;;
    *'"method":"session/prompt"'*)
      n=0
      while IFS= read -r request <&3; do
        n=$((n + 1))
        printf '%s\n' "$request"
        while IFS= read -r reply; do
          case "$reply" in
            *"\"id\":\"fs-$n\""*) printf '%s\n' "$reply" >> '@REPLIES@'; break ;;
          esac
        done
      done 3< '@REQUESTS@'
      printf '%s\n' "{\"jsonrpc\":\"2.0\",\"id\":$id,\"result\":{\"stopReason\":\"end_turn\"}}" ;;
  esac
done
"#;

/// A root the client allows and a directory outside it, both canonical.
struct World {
    dir: tempfile::TempDir,
    root: PathBuf,
    outside: PathBuf,
}

fn world() -> World {
    let dir = tempfile::tempdir().expect("tempdir");
    let base = dir.path().canonicalize().expect("canonical");
    let root = base.join("root");
    let outside = base.join("outside");
    std::fs::create_dir_all(root.join("sub")).expect("root");
    std::fs::create_dir_all(&outside).expect("outside");
    std::fs::write(root.join("sub/file.txt"), "inside\n").expect("file");
    std::fs::write(outside.join("secret"), "secret\n").expect("secret");
    World { dir, root, outside }
}

fn read(path: &Path) -> Value {
    json!({"method": "fs/read_text_file", "params": {"sessionId": SESSION, "path": path}})
}

fn write(path: &Path, content: &str) -> Value {
    json!({"method": "fs/write_text_file",
           "params": {"sessionId": SESSION, "path": path, "content": content}})
}

/// Runs one turn in which the agent sends `requests`; returns the client's replies in order.
fn turn(world: &World, requests: &[Value]) -> Vec<Value> {
    let work = world.dir.path();
    let requests_file = work.join("requests.ndjson");
    let replies_file = work.join("replies.ndjson");
    let _ = std::fs::remove_file(&replies_file);
    let lines: String = requests
        .iter()
        .enumerate()
        .map(|(index, request)| {
            let mut request = request.clone();
            request["jsonrpc"] = json!("2.0");
            request["id"] = json!(format!("fs-{}", index + 1));
            format!("{request}\n")
        })
        .collect();
    std::fs::write(&requests_file, lines).expect("requests");
    let script = work.join("agent.sh");
    std::fs::write(
        &script,
        AGENT
            .replace("@REQUESTS@", requests_file.to_str().expect("utf-8"))
            .replace("@REPLIES@", replies_file.to_str().expect("utf-8")),
    )
    .expect("agent");
    Command::new(env!("CARGO_BIN_EXE_ski"))
        // A guard for a client that blocks (the defect), not a timing assertion.
        .timeout(Duration::from_secs(120))
        .env_remove("RUST_LOG")
        .args([
            "acp",
            "client",
            "connect",
            "--agent-cmd",
            "/bin/sh",
            "--args",
        ])
        .arg(&script)
        .args(["--prompt", "go", "--fs", "--cwd"])
        .arg(&world.root)
        .assert()
        .success();
    let replies: Vec<Value> = std::fs::read_to_string(&replies_file)
        .expect("the agent logged the replies")
        .lines()
        .map(|line| serde_json::from_str(line).expect("a reply"))
        .collect();
    assert_eq!(replies.len(), requests.len(), "{replies:?}");
    replies
}

/// The error of a reply, as (code, reason).
fn error(reply: &Value) -> (i64, String) {
    let code = reply["error"]["code"]
        .as_i64()
        .unwrap_or_else(|| panic!("an error reply, got {reply}"));
    let reason = reply["error"]["data"]["reason"]
        .as_str()
        .unwrap_or_else(|| panic!("a reason, got {reply}"))
        .to_owned();
    (code, reason)
}

#[test]
fn a_write_through_a_dangling_link_out_of_the_root_creates_nothing_outside() {
    let world = world();
    let created = world.outside.join("created.txt");
    symlink(&created, world.root.join("escape")).expect("dangling link");
    symlink("../../outside/relative.txt", world.root.join("sub/up")).expect("relative link");
    symlink(&world.outside, world.root.join("docs")).expect("dir link");
    symlink(world.outside.join("secret"), world.root.join("notes.md")).expect("file link");
    let replies = turn(
        &world,
        &[
            write(&world.root.join("escape"), "escaped"),
            write(&world.root.join("sub/up"), "escaped"),
            write(&world.root.join("docs/readme.md"), "escaped"),
            write(&world.root.join("notes.md"), "escaped"),
            read(&world.root.join("notes.md")),
            write(&world.root.join("sub/new.txt"), "inside"),
        ],
    );
    for reply in &replies[..5] {
        let (code, message) = error(reply);
        assert_eq!(code, -32602, "{reply}");
        assert!(
            message.contains("leaves the root through the link"),
            "{reply}"
        );
    }
    assert!(!created.exists(), "the dangling link's target was created");
    assert!(!world.outside.join("relative.txt").exists());
    assert!(!world.outside.join("readme.md").exists());
    assert_eq!(
        std::fs::read_to_string(world.outside.join("secret")).expect("secret"),
        "secret\n"
    );
    assert_eq!(replies[5]["result"], json!({}), "{}", replies[5]);
    assert_eq!(
        std::fs::read_to_string(world.root.join("sub/new.txt")).expect("new"),
        "inside"
    );
}

#[test]
fn fifos_inside_the_root_are_refused_without_blocking() {
    let world = world();
    let fifo = world.root.join("pipe");
    nix::unistd::mkfifo(&fifo, Mode::from_bits_truncate(0o600)).expect("mkfifo");
    let replies = turn(&world, &[read(&fifo), write(&fifo, "x")]);
    for reply in &replies {
        let (code, message) = error(reply);
        assert_eq!(code, -32603, "{reply}");
        assert!(message.contains("is a FIFO, not a regular file"), "{reply}");
    }
}

#[test]
fn requests_naming_a_session_the_client_did_not_create_are_refused() {
    let world = world();
    let file = world.root.join("sub/file.txt");
    let mut foreign_read = read(&file);
    foreign_read["params"]["sessionId"] = json!("someone-else");
    let mut foreign_write = write(&file, "overwritten");
    foreign_write["params"]["sessionId"] = json!("someone-else");
    let replies = turn(&world, &[foreign_read, foreign_write, read(&file)]);
    for reply in &replies[..2] {
        let (code, message) = error(reply);
        assert_eq!(code, -32602, "{reply}");
        assert!(message.contains("unknown session someone-else"), "{reply}");
    }
    assert_eq!(
        std::fs::read_to_string(&file).expect("file"),
        "inside\n",
        "the foreign write changed nothing"
    );
    assert_eq!(
        replies[2]["result"]["content"], "inside\n",
        "{}",
        replies[2]
    );
}

#[test]
fn an_fs_root_that_is_not_a_directory_is_a_configuration_error() {
    let world = world();
    let file = world.root.join("sub/file.txt");
    let assert = Command::new(env!("CARGO_BIN_EXE_ski"))
        .timeout(Duration::from_secs(120))
        .env_remove("RUST_LOG")
        .args(["acp", "client", "connect", "--agent-cmd", "/bin/false"])
        .args(["--prompt", "go", "--fs", "--fs-root"])
        .arg(&file)
        .assert()
        .code(3);
    let stderr = String::from_utf8_lossy(&assert.get_output().stderr).into_owned();
    assert!(
        stderr.contains("--fs-root") && stderr.contains("not a directory"),
        "{stderr}"
    );
}
