//! Transports that carry protocol messages between processes, and the wire log they record into.
//!
//! - [`child`]: child processes in their own process group, killed as a group, with piped stdio.
//! - [`stdio`]: this process's own stdin and stdout, non-blocking on pipes and sockets.
//! - [`ws_client`]: the WebSocket client side: connecting, heartbeat, reconnect policy and the
//!   connection-factory seam.
//! - [`ws_server`]: the WebSocket listener, with its connection cap; [`ws_guard`] holds each of
//!   its connections to a message deadline and pings silent clients, following the frames with
//!   [`ws_frames`].
//! - [`WireLog`]: an ordered record of every line that crossed a channel, with its direction and a
//!   monotonic time stamp, so that a failed exchange can be shown exactly as it happened. Byte
//!   streams record through [`LoggedRead`] and [`LoggedWrite`], peers through
//!   [`WireLog::observer`].
//!
//! The wire log is a shared handle: every channel of one exchange (a child's stdin, stdout and
//! stderr, a WebSocket, harness notes) records into the same log, which keeps their relative order.

pub mod child;
pub mod stdio;
pub mod ws_client;
pub mod ws_frames;
pub mod ws_guard;
pub mod ws_server;

use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::Instant;

use crate::jsonrpc::{WireEvent, WireObserver};

/// The longest text one wire-log entry keeps; longer lines are cut and say how much was cut.
pub const MAX_ENTRY_BYTES: usize = 64 * 1024;

/// The most a wire log keeps of its first entries: a target that floods a channel must not grow
/// the log without end. Past it, the log keeps the last [`MAX_LOG_TAIL_BYTES`] and a note of how
/// much it left out between.
pub const MAX_LOG_HEAD_BYTES: usize = 1024 * 1024;

/// The most a wire log keeps of its latest entries once its head is full.
pub const MAX_LOG_TAIL_BYTES: usize = 3 * 1024 * 1024;

/// What one entry counts against the log's budget besides its text (its channel, stamp, slot).
const ENTRY_OVERHEAD: usize = 64;

pub use crate::jsonrpc::Direction;

/// One line of a wire log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WireEntry {
    /// The channel the line crossed, for example `agent` or `agent/stderr`.
    pub channel: String,
    /// Which way it travelled.
    pub direction: Direction,
    /// Monotonic time since the log was created.
    pub at: Duration,
    /// The raw text without its line terminator (lossy UTF-8, cut at [`MAX_ENTRY_BYTES`]).
    pub text: String,
}

#[derive(Debug)]
struct WireLogInner {
    origin: Instant,
    entries: Mutex<Kept>,
}

/// The entries a log keeps: the first ones up to [`MAX_LOG_HEAD_BYTES`], then the latest ones up
/// to [`MAX_LOG_TAIL_BYTES`], and how many were left out between them.
#[derive(Debug, Default)]
struct Kept {
    head: Vec<WireEntry>,
    head_bytes: usize,
    tail: std::collections::VecDeque<WireEntry>,
    tail_bytes: usize,
    left_out: usize,
    left_out_bytes: usize,
    /// Where the gap is: the stamp of the last entry left out.
    left_out_at: Duration,
}

fn weight(entry: &WireEntry) -> usize {
    entry.text.len() + entry.channel.len() + ENTRY_OVERHEAD
}

impl Kept {
    fn push(&mut self, entry: WireEntry) {
        let size = weight(&entry);
        if self.tail.is_empty() && self.head_bytes + size <= MAX_LOG_HEAD_BYTES {
            self.head_bytes += size;
            self.head.push(entry);
            return;
        }
        self.tail_bytes += size;
        self.tail.push_back(entry);
        while self.tail_bytes > MAX_LOG_TAIL_BYTES {
            let Some(oldest) = self.tail.pop_front() else {
                break;
            };
            self.tail_bytes -= weight(&oldest);
            self.left_out += 1;
            self.left_out_bytes += oldest.text.len();
            self.left_out_at = oldest.at;
        }
    }

    /// The note standing in for what was left out, if anything was.
    fn gap(&self) -> Option<WireEntry> {
        (self.left_out > 0).then(|| WireEntry {
            channel: "wire-log".to_owned(),
            direction: Direction::Note,
            at: self.left_out_at,
            text: format!(
                "{} entries ({} bytes) left out here: the log keeps its first {} KiB and its last {} KiB",
                self.left_out,
                self.left_out_bytes,
                MAX_LOG_HEAD_BYTES / 1024,
                MAX_LOG_TAIL_BYTES / 1024
            ),
        })
    }

    fn iter(&self) -> impl Iterator<Item = WireEntry> + '_ {
        self.head
            .iter()
            .cloned()
            .chain(self.gap())
            .chain(self.tail.iter().cloned())
    }

    fn len(&self) -> usize {
        self.head.len() + usize::from(self.left_out > 0) + self.tail.len()
    }
}

/// A shared, ordered record of the traffic on every channel of one exchange.
///
/// Cloning gives another handle to the same log. Time stamps come from the tokio clock, so a test
/// that pauses time sees deterministic stamps. The log is bounded: it keeps its first
/// [`MAX_LOG_HEAD_BYTES`] and its last [`MAX_LOG_TAIL_BYTES`], and one note says what it left out
/// between them, so a channel that floods costs a few megabytes at most.
#[derive(Debug, Clone)]
pub struct WireLog {
    inner: Arc<WireLogInner>,
}

impl Default for WireLog {
    fn default() -> Self {
        Self::new()
    }
}

impl WireLog {
    /// Creates an empty log whose clock starts now.
    pub fn new() -> Self {
        Self {
            inner: Arc::new(WireLogInner {
                origin: Instant::now(),
                entries: Mutex::new(Kept::default()),
            }),
        }
    }

    /// Appends one entry stamped with the current time.
    pub fn record(&self, channel: &str, direction: Direction, text: &str) {
        let entry = WireEntry {
            channel: channel.to_owned(),
            direction,
            at: Instant::now().saturating_duration_since(self.inner.origin),
            text: clip(text),
        };
        self.lock().push(entry);
    }

    /// Records a harness event on a channel.
    pub fn note(&self, channel: &str, text: &str) {
        self.record(channel, Direction::Note, text);
    }

    /// An observer that records a [`crate::jsonrpc::Peer`]'s wire events under `channel`: lines
    /// and frames read (`in`) and written (`out`, raw writes as written), and as notes an oversize
    /// line discarded and each side closing.
    pub fn observer(&self, channel: &str) -> PeerObserver {
        PeerObserver {
            log: self.clone(),
            channel: channel.to_owned(),
        }
    }

    /// The text of every kept entry of `channel` that travelled in `direction`, in order.
    pub fn texts(&self, channel: &str, direction: Direction) -> Vec<String> {
        self.lock()
            .iter()
            .filter(|entry| entry.channel == channel && entry.direction == direction)
            .map(|entry| entry.text)
            .collect()
    }

    /// A copy of every kept entry so far, in the order they were recorded; where entries were
    /// left out (the log is bounded), one note says how many.
    pub fn entries(&self) -> Vec<WireEntry> {
        self.lock().iter().collect()
    }

    /// The number of kept entries so far (the note of a gap counts as one).
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether nothing has been recorded yet.
    pub fn is_empty(&self) -> bool {
        self.lock().len() == 0
    }

    /// The log as text, one entry per line: `+0.001234s agent in {...}`.
    pub fn render(&self) -> String {
        let mut out = String::new();
        for entry in self.lock().iter() {
            out.push_str(&format!(
                "+{:.6}s {} {} {}\n",
                entry.at.as_secs_f64(),
                entry.channel,
                entry.direction.as_str(),
                entry.text
            ));
        }
        out
    }

    fn lock(&self) -> MutexGuard<'_, Kept> {
        // A panic while holding this lock cannot leave the vector half-written, so a poisoned
        // lock still holds a usable log.
        self.inner
            .entries
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// Records a peer's wire events into a [`WireLog`]; see [`WireLog::observer`].
#[derive(Debug, Clone)]
pub struct PeerObserver {
    log: WireLog,
    channel: String,
}

impl WireObserver for PeerObserver {
    fn observe(&self, event: &WireEvent<'_>) {
        let text = |bytes: &[u8]| String::from_utf8_lossy(bytes).into_owned();
        match *event {
            WireEvent::Received(bytes) => {
                self.log.record(&self.channel, Direction::In, &text(bytes))
            }
            WireEvent::Sent(bytes) | WireEvent::SentRaw(bytes) => {
                self.log.record(&self.channel, Direction::Out, &text(bytes));
            }
            WireEvent::Oversize { length } => self.log.note(
                &self.channel,
                &format!("an inbound line of {length} bytes was over the limit and discarded"),
            ),
            WireEvent::InputClosed => self.log.note(&self.channel, "input closed"),
            WireEvent::OutputClosed => self.log.note(&self.channel, "output closed"),
        }
    }
}

fn clip(text: &str) -> String {
    if text.len() <= MAX_ENTRY_BYTES {
        return text.to_owned();
    }
    let mut end = MAX_ENTRY_BYTES;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!(
        "{}… ({} more bytes)",
        &text[..end],
        text.len().saturating_sub(end)
    )
}

/// Splits a byte stream into lines and records each complete line into a wire log.
#[derive(Debug)]
struct LineRecorder {
    log: WireLog,
    channel: String,
    direction: Direction,
    pending: Vec<u8>,
}

impl LineRecorder {
    fn new(log: WireLog, channel: &str, direction: Direction) -> Self {
        Self {
            log,
            channel: channel.to_owned(),
            direction,
            pending: Vec::new(),
        }
    }

    fn feed(&mut self, mut bytes: &[u8]) {
        while let Some(newline) = memchr::memchr(b'\n', bytes) {
            self.keep(&bytes[..newline]);
            self.emit();
            bytes = &bytes[newline + 1..];
        }
        self.keep(bytes);
    }

    /// Buffers part of the current line, up to the entry limit; the rest of a longer line is
    /// dropped from the log (the stream itself is untouched).
    fn keep(&mut self, part: &[u8]) {
        let room = (MAX_ENTRY_BYTES + 1).saturating_sub(self.pending.len());
        self.pending
            .extend_from_slice(&part[..part.len().min(room)]);
    }

    fn emit(&mut self) {
        if self.pending.last() == Some(&b'\r') {
            self.pending.pop();
        }
        let text = String::from_utf8_lossy(&self.pending).into_owned();
        self.log.record(&self.channel, self.direction, &text);
        self.pending.clear();
    }

    fn finish(&mut self) {
        if !self.pending.is_empty() {
            self.emit();
            self.log
                .note(&self.channel, "the last line above had no line terminator");
        }
    }
}

impl Drop for LineRecorder {
    fn drop(&mut self) {
        self.finish();
    }
}

/// An [`AsyncRead`] that records every line it reads into a wire log as [`Direction::In`].
///
/// Use it to put any framing (for example an NDJSON codec) on a child's stdout or a socket while
/// the exchange is still logged.
#[derive(Debug)]
pub struct LoggedRead<R> {
    inner: R,
    recorder: Option<LineRecorder>,
}

impl<R> LoggedRead<R> {
    /// Wraps `inner`, recording into `log` under `channel`.
    pub fn new(inner: R, log: WireLog, channel: &str) -> Self {
        Self {
            inner,
            recorder: Some(LineRecorder::new(log, channel, Direction::In)),
        }
    }

    /// Wraps `inner` without recording anything (no wire log was asked for).
    pub fn unlogged(inner: R) -> Self {
        Self {
            inner,
            recorder: None,
        }
    }

    /// The wrapped reader.
    pub fn get_ref(&self) -> &R {
        &self.inner
    }

    /// The wrapped reader, no longer recorded (a line read in part is not recorded).
    pub fn into_inner(self) -> R {
        self.inner
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for LoggedRead<R> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let poll = Pin::new(&mut this.inner).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = &poll {
            let filled = &buf.filled()[before..];
            if filled.is_empty() {
                if let Some(recorder) = &mut this.recorder {
                    recorder.finish();
                }
            } else {
                if let Some(recorder) = &mut this.recorder {
                    recorder.feed(filled);
                }
            }
        }
        poll
    }
}

/// An [`AsyncWrite`] that records every line it writes into a wire log as [`Direction::Out`].
#[derive(Debug)]
pub struct LoggedWrite<W> {
    inner: W,
    recorder: Option<LineRecorder>,
}

impl<W> LoggedWrite<W> {
    /// Wraps `inner`, recording into `log` under `channel`.
    pub fn new(inner: W, log: WireLog, channel: &str) -> Self {
        Self {
            inner,
            recorder: Some(LineRecorder::new(log, channel, Direction::Out)),
        }
    }

    /// Wraps `inner` without recording anything (no wire log was asked for).
    pub fn unlogged(inner: W) -> Self {
        Self {
            inner,
            recorder: None,
        }
    }

    /// The wrapped writer.
    pub fn get_ref(&self) -> &W {
        &self.inner
    }

    /// The wrapped writer, no longer recorded.
    pub fn into_inner(self) -> W {
        self.inner
    }
}

impl<W: AsyncWrite + Unpin> AsyncWrite for LoggedWrite<W> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let poll = Pin::new(&mut this.inner).poll_write(cx, buf);
        if let Poll::Ready(Ok(written)) = &poll
            && let Some(recorder) = &mut this.recorder
        {
            recorder.feed(&buf[..*written]);
        }
        poll
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let poll = Pin::new(&mut this.inner).poll_shutdown(cx);
        if let Poll::Ready(Ok(())) = &poll
            && let Some(recorder) = &mut this.recorder
        {
            recorder.finish();
        }
        poll
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[tokio::test]
    async fn a_flooded_log_keeps_its_head_and_tail_and_says_what_it_left_out() {
        let log = WireLog::new();
        let line = "x".repeat(1000);
        let total = 20_000;
        for n in 0..total {
            log.record("agent", Direction::In, &format!("{n} {line}"));
        }
        let entries = log.entries();
        let kept: usize = entries.iter().map(|e| e.text.len()).sum();
        assert!(
            kept <= MAX_LOG_HEAD_BYTES + MAX_LOG_TAIL_BYTES,
            "{kept} bytes kept"
        );
        assert!(entries[0].text.starts_with("0 "), "the first entry is kept");
        let last = format!("{} ", total - 1);
        assert!(entries[entries.len() - 1].text.starts_with(&last));
        let gap: Vec<&WireEntry> = entries
            .iter()
            .filter(|e| e.direction == Direction::Note)
            .collect();
        assert_eq!(gap.len(), 1, "one note stands for the gap");
        let left_out = total - (entries.len() - 1);
        assert!(
            gap[0].text.starts_with(&format!("{left_out} entries (")),
            "{}",
            gap[0].text
        );
    }

    #[tokio::test]
    async fn logged_read_and_write_record_whole_lines_in_order() {
        let log = WireLog::new();
        let (client, server) = tokio::io::duplex(64);
        let mut writer = LoggedWrite::new(client, log.clone(), "peer");
        let mut reader = LoggedRead::new(server, log.clone(), "peer");
        writer.write_all(b"{\"a\":1}\n{\"b\"").await.unwrap();
        writer.write_all(b":2}\r\npartial").await.unwrap();
        writer.shutdown().await.unwrap();
        drop(writer);
        let mut text = String::new();
        reader.read_to_string(&mut text).await.unwrap();
        assert_eq!(text, "{\"a\":1}\n{\"b\":2}\r\npartial");
        let seen: Vec<(Direction, String)> = log
            .entries()
            .into_iter()
            .map(|e| (e.direction, e.text))
            .collect();
        let out: Vec<&str> = seen
            .iter()
            .filter(|(d, _)| *d == Direction::Out)
            .map(|(_, t)| t.as_str())
            .collect();
        let incoming: Vec<&str> = seen
            .iter()
            .filter(|(d, _)| *d == Direction::In)
            .map(|(_, t)| t.as_str())
            .collect();
        assert_eq!(out, ["{\"a\":1}", "{\"b\":2}", "partial"]);
        assert_eq!(incoming, ["{\"a\":1}", "{\"b\":2}", "partial"]);
        assert!(log.render().contains("peer in {\"b\":2}"));
    }

    #[test]
    fn long_entries_are_clipped_on_a_char_boundary() {
        let text = "é".repeat(MAX_ENTRY_BYTES);
        let clipped = clip(&text);
        assert!(clipped.len() < text.len());
        assert!(clipped.ends_with("more bytes)"));
    }
}
