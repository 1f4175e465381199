//! `ski acp serve` on stdio under a client that writes requests and never reads the answers: the
//! server stops reading once its writer is backed up, so what it takes in is bounded by its pipes
//! and its send queue, and once the answers are read again every request is answered.

use std::future::poll_fn;
use std::os::fd::AsFd;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::task::Poll;
use std::time::Duration;

use nix::fcntl::{FcntlArg, fcntl};
use serde_json::Value;
use ski::jsonrpc::framing::READ_CHUNK;
use ski::jsonrpc::peer::DEFAULT_MAX_IN_FLIGHT_SENDS;
use ski::transport::child::{self, ChildSpec};
use tokio::io::{AsyncBufReadExt, AsyncWrite, BufReader};

const SKI: &str = env!("CARGO_BIN_EXE_ski");

/// A method no agent has: every request is answered at once with -32601, nothing else happens.
const METHOD: &str = "ski/backpressure-probe";

/// How long the whole exchange may take before the test fails (a loaded machine included).
const PATIENCE: Duration = Duration::from_secs(120);

/// How often the state of the server is looked at while waiting for it to settle.
const POLL: Duration = Duration::from_millis(20);

/// How many looks in a row must find the server settled (asleep, nothing more taken in).
const SETTLED_LOOKS: u32 = 5;

/// One request line of a fixed length (string ids of eight digits).
fn request(n: usize) -> String {
    format!("{{\"jsonrpc\":\"2.0\",\"id\":\"{n:08}\",\"method\":\"{METHOD}\"}}\n")
}

/// What the writer task reports.
#[derive(Default)]
struct Progress {
    /// Bytes the stdin pipe accepted so far.
    written: AtomicU64,
    /// Whether the writer is waiting for room in the pipe right now.
    blocked: AtomicBool,
    /// Whether every request was written.
    done: AtomicBool,
}

/// Writes `requests` request lines, recording how far it got and whether the pipe is full.
async fn write_requests<W: AsyncWrite + Unpin>(
    mut stdin: W,
    requests: usize,
    progress: Arc<Progress>,
) -> W {
    let bytes: Vec<u8> = (0..requests)
        .flat_map(|n| request(n).into_bytes())
        .collect();
    let mut offset = 0;
    while offset < bytes.len() {
        let written = poll_fn(
            |cx| match Pin::new(&mut stdin).poll_write(cx, &bytes[offset..]) {
                Poll::Pending => {
                    progress.blocked.store(true, Ordering::SeqCst);
                    Poll::Pending
                }
                ready => {
                    progress.blocked.store(false, Ordering::SeqCst);
                    ready
                }
            },
        )
        .await
        .expect("the server's stdin accepts writes");
        offset += written;
        progress.written.store(offset as u64, Ordering::SeqCst);
    }
    progress.done.store(true, Ordering::SeqCst);
    stdin
}

/// The capacity of a pipe, in bytes.
fn pipe_capacity(fd: impl AsFd) -> u64 {
    let size = fcntl(fd, FcntlArg::F_GETPIPE_SZ).expect("F_GETPIPE_SZ on a pipe");
    u64::try_from(size).expect("a pipe size is positive")
}

/// Whether every thread of a process is asleep (state `S` in `/proc/PID/task/*/stat`).
fn all_threads_asleep(pid: u32) -> bool {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return false;
    };
    tasks.flatten().all(|task| {
        std::fs::read_to_string(task.path().join("stat"))
            .ok()
            .and_then(|stat| {
                stat.rsplit_once(')')
                    .map(|(_, rest)| rest.trim_start().starts_with('S'))
            })
            .unwrap_or(false)
    })
}

#[tokio::test]
async fn a_client_that_does_not_read_stops_the_server_reading_and_loses_no_answer() {
    let mut agent = child::spawn(ChildSpec::new("agent", SKI).args(["acp", "serve"]))
        .expect("spawn ski acp serve");
    let pid = agent.pid();
    let stdin = agent.take_stdin().expect("stdin");
    let stdout = agent.take_stdout().expect("stdout");
    let request_bytes = request(0).len() as u64;
    // What the server may hold once it stops: its stdin pipe full, one read chunk in its line
    // reader, and the requests whose answers fill its stdout pipe (an answer is longer than 64
    // bytes), wait in the send queue or are on their way there.
    let answers_held =
        pipe_capacity(stdout.get_ref()) / 64 + DEFAULT_MAX_IN_FLIGHT_SENDS as u64 + 16;
    let bound = pipe_capacity(stdin.get_ref()) + READ_CHUNK as u64 + answers_held * request_bytes;
    // Four times what a bounded server can take in: one that reads on regardless takes it all.
    let requests = usize::try_from(4 * bound / request_bytes).expect("a request count");
    let progress = Arc::new(Progress::default());
    let writer = tokio::spawn(write_requests(stdin, requests, progress.clone()));

    let deadline = tokio::time::Instant::now() + PATIENCE;
    let (mut last_written, mut settled) = (u64::MAX, 0);
    while settled < SETTLED_LOOKS {
        let written = progress.written.load(Ordering::SeqCst);
        assert!(
            !progress.done.load(Ordering::SeqCst) && written <= bound,
            "the server took in {written} bytes of requests ({} of {requests} written) while \
             nobody read its answers; a server with backpressure stops by {bound} bytes",
            written / request_bytes
        );
        let asleep = progress.blocked.load(Ordering::SeqCst) && all_threads_asleep(pid);
        settled = if asleep && written == last_written {
            settled + 1
        } else {
            0
        };
        last_written = written;
        assert!(
            tokio::time::Instant::now() < deadline,
            "the server neither stopped reading nor read everything within {PATIENCE:?} \
             ({written} bytes written)"
        );
        tokio::time::sleep(POLL).await;
    }

    // Reading the answers lets the server go on: every request is answered, in order.
    let mut answers = BufReader::new(stdout).lines();
    for n in 0..requests {
        let line = tokio::time::timeout(PATIENCE, answers.next_line())
            .await
            .expect("answers keep coming once they are read")
            .expect("stdout readable")
            .expect("an answer for every request");
        let answer: Value = serde_json::from_str(&line).expect("an answer is JSON");
        assert_eq!(answer["id"], format!("{n:08}"), "{line}");
        assert_eq!(answer["error"]["code"], -32601, "{line}");
    }
    let stdin = writer.await.expect("the writer finishes");
    drop(stdin);
    let status = tokio::time::timeout(PATIENCE, agent.wait())
        .await
        .expect("the server exits at end of input")
        .expect("exit status");
    assert_eq!(status.code(), Some(0));
    assert!(agent.shutdown().await.expect("teardown").group_gone);
}
