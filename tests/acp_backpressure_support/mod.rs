//! What the backpressure tests share: a writer that records how far it got and whether its pipe
//! is full, pipe capacities, and the wait until a process has stopped taking in more (its
//! writer blocked on a full pipe, every thread of the process asleep, nothing more accepted),
//! failing as soon as more than a bound was taken in; and the flooding ACP agent both clients are
//! tested against.

use std::future::poll_fn;
use std::os::fd::AsFd;
use std::path::Path;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::task::Poll;
use std::time::Duration;

use nix::fcntl::{FcntlArg, fcntl};
use nix::sys::stat::Mode;
use tokio::io::AsyncWrite;

/// How long the whole exchange may take before the test fails (a loaded machine included).
pub const PATIENCE: Duration = Duration::from_secs(120);

/// How often the state of the process is looked at while waiting for it to settle.
const POLL: Duration = Duration::from_millis(20);

/// How many looks in a row must find the process settled (asleep, nothing more taken in).
const SETTLED_LOOKS: u32 = 5;

/// A flooding ACP agent, as a `sh` script: answers `initialize` and `session/new` itself; on
/// `session/prompt` it copies the test's updates from the FIFO `fifo` to its stdout until the test
/// closes the FIFO, then ends the turn; it exits when its stdin closes.
pub fn flooding_agent(fifo: &Path) -> String {
    let fifo = fifo.to_str().expect("a UTF-8 temporary path");
    r#"#!/bin/sh
while IFS= read -r line; do
  id=$(printf '%s' "$line" | sed -n 's/.*"id":\([0-9][0-9]*\).*/\1/p')
  case "$line" in
    *'"method":"initialize"'*)
      printf '%s\n' "{\"jsonrpc\":\"2.0\",\"id\":$id,\"result\":{\"protocolVersion\":1,\"agentCapabilities\":{},\"agentInfo\":{\"name\":\"flood\",\"version\":\"1\"}}}" ;;
    *'"method":"session/new"'*)
      printf '%s\n' "{\"jsonrpc\":\"2.0\",\"id\":$id,\"result\":{\"sessionId\":\"sess-1\"}}" ;;
    *'"method":"session/prompt"'*)
      cat '{fifo}'
      printf '%s\n' "{\"jsonrpc\":\"2.0\",\"id\":$id,\"result\":{\"stopReason\":\"end_turn\"}}" ;;
  esac
done
"#
    .replace("{fifo}", fifo)
}

/// More than the flooding agent's `cat` holds between a read and its write (GNU cat reads 128
/// or 256 KiB at once).
pub const CAT_BUFFER_ALLOWANCE: u64 = 1024 * 1024;

/// The `session/update` line (newline included) of an `agent_message_chunk` with `text`.
pub fn chunk_update(text: &str) -> String {
    let update = serde_json::json!({
        "jsonrpc": "2.0",
        "method": "session/update",
        "params": {
            "sessionId": "sess-1",
            "update": {
                "sessionUpdate": "agent_message_chunk",
                "content": {"type": "text", "text": text}
            }
        }
    });
    format!("{update}\n")
}

/// Makes a FIFO at `path`.
pub fn make_fifo(path: &Path) {
    nix::unistd::mkfifo(path, Mode::from_bits_truncate(0o600)).expect("mkfifo");
}

/// What a tracked writer reports.
#[derive(Debug, Default)]
pub struct Progress {
    /// Bytes the pipe accepted so far.
    written: AtomicU64,
    /// Whether the writer is waiting for room in the pipe right now.
    blocked: AtomicBool,
    /// Whether every byte was written.
    done: AtomicBool,
}

impl Progress {
    /// Bytes the pipe accepted so far.
    pub fn written(&self) -> u64 {
        self.written.load(Ordering::SeqCst)
    }
}

/// Writes `bytes`, recording how far it got and whether the pipe is full; returns the writer.
pub async fn write_tracked<W: AsyncWrite + Unpin>(
    mut writer: W,
    bytes: Vec<u8>,
    progress: &Progress,
) -> W {
    let mut offset = 0;
    while offset < bytes.len() {
        let written = poll_fn(
            |cx| match Pin::new(&mut writer).poll_write(cx, &bytes[offset..]) {
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
        .expect("the pipe accepts writes");
        offset += written;
        progress.written.store(offset as u64, Ordering::SeqCst);
    }
    progress.done.store(true, Ordering::SeqCst);
    writer
}

/// The capacity of a pipe, in bytes.
pub fn pipe_capacity(fd: impl AsFd) -> u64 {
    let size = fcntl(fd, FcntlArg::F_GETPIPE_SZ).expect("F_GETPIPE_SZ on a pipe");
    u64::try_from(size).expect("a pipe size is positive")
}

/// Whether every thread of a process is asleep (state `S` in `/proc/PID/task/*/stat`).
pub fn all_threads_asleep(pid: u32) -> bool {
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

/// The resident memory of a process in KiB (`VmRSS`), if it can be read.
pub fn resident_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|line| line.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Why a process did not settle within its bound.
#[derive(Debug)]
pub enum Unsettled {
    /// More than the bound was taken in, or everything was (bytes written so far).
    Overrun(u64),
    /// Neither stopped nor read everything within [`PATIENCE`] (bytes written so far).
    Timeout(u64),
}

/// Waits until the writer is blocked on a full pipe, every thread of process `pid` is asleep and
/// nothing more was taken in for several looks in a row; fails as soon as more than `bound`
/// bytes, or everything, was written. Returns the bytes written by then.
pub async fn settle(progress: &Progress, pid: u32, bound: u64) -> Result<u64, Unsettled> {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    let (mut last_written, mut settled) = (u64::MAX, 0);
    loop {
        let written = progress.written();
        if progress.done.load(Ordering::SeqCst) || written > bound {
            return Err(Unsettled::Overrun(written));
        }
        let asleep = progress.blocked.load(Ordering::SeqCst) && all_threads_asleep(pid);
        settled = if asleep && written == last_written {
            settled + 1
        } else {
            0
        };
        if settled >= SETTLED_LOOKS {
            return Ok(written);
        }
        last_written = written;
        if tokio::time::Instant::now() >= deadline {
            return Err(Unsettled::Timeout(written));
        }
        tokio::time::sleep(POLL).await;
    }
}
