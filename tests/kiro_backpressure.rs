//! `ski kiro echo` against a kiro-cli that streams `session/update`s while nobody reads the
//! bot's own output (a stalled consumer of its JSON lines): the client stops reading kiro-cli
//! once its printing is blocked, so what it takes in is bounded by its pipes and its queues, and
//! once its output is read again every chunk is printed, in order, the turn ends and kiro-cli is
//! closed cleanly.

use crate::acp_backpressure_support;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::sync::Arc;

use acp_backpressure_support::{
    CAT_BUFFER_ALLOWANCE, PATIENCE, Progress, Unsettled, chunk_update, flooding_agent, make_fifo,
    pipe_capacity, resident_kib, settle, write_tracked,
};
use serde_json::{Value, json};
use ski::jsonrpc::framing::READ_CHUNK;
use ski::jsonrpc::peer::MAX_QUEUED_NOTIFICATIONS;
use ski::kiro::client::TURN_UPDATE_LIMIT;
use ski::transport::child::{self, ChildSpec};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::net::unix::pipe;

const SKI: &str = env!("CARGO_BIN_EXE_ski");
const AGENT: &str = "tg-acp";

/// The text of the n-th chunk.
fn text(n: usize) -> String {
    format!("update {n:08} {}", "x".repeat(100))
}

/// The n-th `session/update` line kiro-cli sends.
fn update(n: usize) -> String {
    chunk_update(&text(n))
}

/// The line `ski kiro echo` prints for the n-th chunk.
fn printed(n: usize) -> String {
    format!("{}\n", json!({"event": "chunk", "text": text(n)}))
}

/// Installs the flooding `bin/kiro-cli`, the template and the kiro home under `root`.
fn arrange(root: &Path, fifo: &Path) {
    let bin = root.join("bin");
    std::fs::create_dir_all(&bin).expect("bin");
    std::fs::create_dir_all(root.join("template/agents")).expect("template");
    std::fs::create_dir_all(root.join("home")).expect("home");
    std::fs::write(
        root.join(format!("template/agents/{AGENT}.json")),
        format!(r#"{{"name":"{AGENT}","prompt":"be brief"}}"#),
    )
    .expect("agent json");
    let program = bin.join("kiro-cli");
    std::fs::write(&program, flooding_agent(fifo)).expect("kiro-cli");
    std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    make_fifo(fifo);
}

/// `ski kiro echo` with the kiro-cli of `arrange` first on `PATH`.
fn echo_spec(root: &Path) -> ChildSpec {
    let path = format!(
        "{}:{}",
        root.join("bin").display(),
        std::env::var("PATH").unwrap_or_else(|_| "/usr/bin:/bin".to_owned())
    );
    ChildSpec::new("ski kiro", SKI)
        .args(["kiro", "echo", "--no-provision", "flood"])
        .cwd(root)
        .env_clear()
        .env("PATH", &path)
        .env("HOME", root.join("home"))
        .env("BOT_TOKEN", "123456:telegram-secret")
        .env("KIRO_AGENT_NAME", AGENT)
        .env("KIRO_CONFIG_PATH", root.join("template"))
        .env("WORKSPACE_BASE_PATH", root.join("workspaces"))
        .env("LOG_LEVEL", "ERROR")
}

/// The `event` of a printed line.
fn event_of(line: &str) -> String {
    let value: Value = serde_json::from_str(line).expect("every line is JSON");
    value["event"].as_str().expect("an event name").to_owned()
}

#[tokio::test]
async fn a_bot_whose_output_is_not_read_stops_reading_kiro_cli_and_loses_no_update() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let root = dir.path();
    let fifo = root.join("updates.fifo");
    arrange(root, &fifo);
    // Opened for reading too, the FIFO opens before kiro-cli's `cat` does (Linux).
    let updates_in = pipe::OpenOptions::new()
        .read_write(true)
        .open_sender(&fifo)
        .expect("open the FIFO");
    let fifo_capacity = pipe_capacity(&updates_in);

    // Dropping the child (also on a failed assertion) ends its process group.
    let mut ski = child::spawn(echo_spec(root)).expect("ski kiro starts");
    ski.close_stdin();
    let pid = ski.pid();
    let stdout = ski.take_stdout().expect("stdout");

    let update_bytes = update(0).len() as u64;
    let printed_bytes = printed(0).len() as u64;
    // What the bot may hold once it stops: the chunks that fill its own stdout pipe, the one
    // being printed, the updates handed to the turn and not yet taken, the one whose hand-over
    // waits for room, those queued behind it, and one read chunk in its line reader.
    let updates_held = pipe_capacity(stdout.get_ref()) / printed_bytes
        + TURN_UPDATE_LIMIT as u64
        + MAX_QUEUED_NOTIFICATIONS as u64
        + 8;
    // Before it: kiro-cli's stdout pipe (a new pipe, as large as the FIFO), `cat`, the FIFO.
    let bound =
        updates_held * update_bytes + READ_CHUNK as u64 + 2 * fifo_capacity + CAT_BUFFER_ALLOWANCE;
    // Four times what a bounded bot can take in: one that reads on regardless takes it all.
    let updates = usize::try_from(4 * bound / update_bytes).expect("an update count");
    let progress = Arc::new(Progress::default());
    let bytes = (0..updates).flat_map(|n| update(n).into_bytes()).collect();
    let writer = tokio::spawn({
        let progress = progress.clone();
        // Dropped at the end: kiro-cli's `cat` sees end of stream and the turn ends.
        async move { drop(write_tracked(updates_in, bytes, &progress).await) }
    });

    if let Err(unsettled) = settle(&progress, pid, bound).await {
        let rss = resident_kib(pid).map_or("?".to_owned(), |kib| format!("{kib} KiB"));
        let _ = ski.shutdown().await;
        match unsettled {
            Unsettled::Overrun(written) => panic!(
                "ski kiro took in {written} bytes of updates ({} of {updates} written, its \
                 resident memory {rss}) while nobody read its output; a bot with backpressure \
                 stops by {bound} bytes",
                written / update_bytes
            ),
            Unsettled::Timeout(written) => panic!(
                "ski kiro neither stopped reading nor read everything within {PATIENCE:?} \
                 ({written} bytes written)"
            ),
        }
    }

    // Reading the output lets the bot go on: every chunk is printed, in order, then the turn
    // ends and kiro-cli is closed.
    let mut lines = BufReader::new(stdout).lines();
    let mut next_line = async || {
        tokio::time::timeout(PATIENCE, lines.next_line())
            .await
            .expect("output keeps coming once it is read")
            .expect("stdout readable")
    };
    let mut before = Vec::new();
    let first_chunk = loop {
        let line = next_line().await.expect("the output reaches the chunks");
        if event_of(&line) == "chunk" {
            break line;
        }
        before.push(event_of(&line));
    };
    assert_eq!(
        before,
        [
            "spawned",
            "state",
            "initialized",
            "state",
            "session",
            "prompt",
            "state"
        ]
    );
    assert_eq!(first_chunk, printed(0).trim_end(), "update 0");
    for n in 1..updates {
        let line = next_line().await.expect("a line for every update");
        assert_eq!(line, printed(n).trim_end(), "update {n}");
    }
    let mut after = Vec::new();
    while let Some(line) = next_line().await {
        after.push(serde_json::from_str::<Value>(&line).expect("every line is JSON"));
    }
    let events: Vec<&str> = after.iter().filter_map(|v| v["event"].as_str()).collect();
    assert_eq!(
        events,
        ["turn_end", "state", "closed", "state"],
        "{after:?}"
    );
    assert_eq!(after[0]["stopReason"], "end_turn");
    assert_eq!(after[2]["exitedByItself"], true, "{after:?}");
    writer.await.expect("the writer finishes");
    let status = tokio::time::timeout(PATIENCE, ski.wait())
        .await
        .expect("ski kiro exits after its turn")
        .expect("exit status");
    assert_eq!(status.code(), Some(0));
    assert!(ski.shutdown().await.expect("teardown").group_gone);
}
