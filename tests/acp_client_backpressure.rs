//! `ski acp client connect` against an agent that streams `session/update`s while nobody reads
//! the client's own output (a user piping it into a stalled program): the client stops reading
//! the agent once its printer is blocked, so what it takes in is bounded by its pipes and its
//! queues, and once its output is read again every update is printed, in order, and the turn
//! ends.

use crate::acp_backpressure_support;

use std::sync::Arc;

use acp_backpressure_support::{
    CAT_BUFFER_ALLOWANCE, PATIENCE, Progress, Unsettled, chunk_update, flooding_agent, make_fifo,
    pipe_capacity, resident_kib, settle, write_tracked,
};
use ski::acp::client::UPDATE_BUFFER_LIMIT;
use ski::jsonrpc::framing::READ_CHUNK;
use ski::jsonrpc::peer::MAX_QUEUED_NOTIFICATIONS;
use ski::transport::child::{self, ChildSpec};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::net::unix::pipe;

const SKI: &str = env!("CARGO_BIN_EXE_ski");

/// The text of the n-th update: one line the client prints as it is.
fn text(n: usize) -> String {
    format!("update {n:08} {}\n", "x".repeat(100))
}

/// The n-th `session/update` line the agent sends.
fn update(n: usize) -> String {
    chunk_update(&text(n))
}

#[tokio::test]
async fn a_client_whose_output_is_not_read_stops_reading_the_agent_and_loses_no_update() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let fifo = dir.path().join("updates.fifo");
    make_fifo(&fifo);
    let script = dir.path().join("agent.sh");
    std::fs::write(&script, flooding_agent(&fifo)).expect("write the agent");
    // Opened for reading too, the FIFO opens before the agent's `cat` does (Linux).
    let updates_in = pipe::OpenOptions::new()
        .read_write(true)
        .open_sender(&fifo)
        .expect("open the FIFO");
    let fifo_capacity = pipe_capacity(&updates_in);

    let mut client = child::spawn(
        ChildSpec::new("client", SKI)
            .args(["acp", "client", "connect", "--agent-cmd", "sh", "--args"])
            .arg(&script)
            .args(["--prompt", "flood", "--cwd"])
            .arg(dir.path())
            .env_remove("RUST_LOG"),
    )
    .expect("spawn ski acp client");
    let pid = client.pid();
    let stdout = client.take_stdout().expect("stdout");

    let update_bytes = update(0).len() as u64;
    let printed_bytes = text(0).len() as u64;
    // What the client may hold once it stops: the updates that fill its own stdout pipe, the
    // one its printer is writing, those handed to the printer and not yet taken, those queued
    // behind the notification handler waiting for room, and one read chunk in its line reader.
    let updates_held = pipe_capacity(stdout.get_ref()) / printed_bytes
        + UPDATE_BUFFER_LIMIT as u64
        + MAX_QUEUED_NOTIFICATIONS as u64
        + 8;
    // Before it: the agent's stdout pipe (a new pipe, as large as the FIFO), `cat`, the FIFO.
    let bound =
        updates_held * update_bytes + READ_CHUNK as u64 + 2 * fifo_capacity + CAT_BUFFER_ALLOWANCE;
    // Four times what a bounded client can take in: one that reads on regardless takes it all.
    let updates = usize::try_from(4 * bound / update_bytes).expect("an update count");
    let progress = Arc::new(Progress::default());
    let bytes = (0..updates).flat_map(|n| update(n).into_bytes()).collect();
    let writer = tokio::spawn({
        let progress = progress.clone();
        // Dropped at the end: the agent's `cat` sees end of stream and the turn ends.
        async move { drop(write_tracked(updates_in, bytes, &progress).await) }
    });

    let settled = settle(&progress, pid, bound).await;
    if let Err(unsettled) = settled {
        let rss = resident_kib(pid).map_or("?".to_owned(), |kib| format!("{kib} KiB"));
        let _ = client.shutdown().await;
        match unsettled {
            Unsettled::Overrun(written) => panic!(
                "the client took in {written} bytes of updates ({} of {updates} written, its \
                 resident memory {rss}) while nobody read its output; a client with \
                 backpressure stops by {bound} bytes",
                written / update_bytes
            ),
            Unsettled::Timeout(written) => panic!(
                "the client neither stopped reading nor read everything within {PATIENCE:?} \
                 ({written} bytes written)"
            ),
        }
    }

    // Reading the output lets the client go on: every update is printed, in order.
    let mut printed = BufReader::new(stdout).lines();
    let mut next_line = async || {
        tokio::time::timeout(PATIENCE, printed.next_line())
            .await
            .expect("output keeps coming once it is read")
            .expect("stdout readable")
    };
    for n in 0..updates {
        let line = next_line().await.expect("a line for every update");
        assert_eq!(line, text(n).trim_end(), "update {n}");
    }
    assert_eq!(
        next_line().await.as_deref(),
        Some("stopReason: end_turn"),
        "the turn ends after its updates"
    );
    assert_eq!(next_line().await, None);
    writer.await.expect("the writer finishes");
    let status = tokio::time::timeout(PATIENCE, client.wait())
        .await
        .expect("the client exits after its turn")
        .expect("exit status");
    assert_eq!(status.code(), Some(0));
    assert!(client.shutdown().await.expect("teardown").group_gone);
}
