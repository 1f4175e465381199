//! The agent's output path: every byte it writes to stdout goes through a raw [`LineWriter`],
//! so a line can be written whole, in flushed fragments, without its newline, or not at all
//! after stdout was closed. Whole lines are queued and written together: by the stdin reader
//! before it waits for input, or by the flusher task for lines other tasks queue. Each line is
//! also recorded in the transcript.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::{Map, Value, json};
use ski::jsonrpc::LineWriter;
use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::sync::{Notify, Semaphore};

use super::script::step::FragmentPlan;
use super::transcript::{Kind, Transcript};

/// A boxed byte sink.
pub type BoxWrite = Box<dyn AsyncWrite + Send + Unpin + 'static>;

/// Named gates that a step can wait on and the control channel can release, one pass per
/// release.
#[derive(Debug, Default)]
pub struct Gates {
    gates: Mutex<HashMap<String, Arc<Semaphore>>>,
}

impl Gates {
    fn gate(&self, name: &str) -> Arc<Semaphore> {
        let mut gates = self
            .gates
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        Arc::clone(
            gates
                .entry(name.to_owned())
                .or_insert_with(|| Arc::new(Semaphore::new(0))),
        )
    }

    /// Waits for one release of `name`.
    pub async fn wait(&self, name: &str) {
        let gate = self.gate(name);
        if let Ok(permit) = gate.acquire().await {
            permit.forget();
        }
    }

    /// Lets one waiter (present or future) of `name` pass.
    pub fn release(&self, name: &str) {
        self.gate(name).add_permits(1);
    }
}

/// What happened to a write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Written {
    /// Written, or queued to be written as soon as the writing task waits.
    Ok,
    /// Dropped because stdout is closed.
    Closed,
    /// Writing failed (the reader went away).
    Failed,
}

/// Stdout as the agent writes it.
///
/// A whole line is queued, not written at once: everything queued goes out in one write, by the
/// stdin reader before it waits for the next input line, or by the agent's flusher task (which
/// runs [`Output::flush_queued`]) when a task other than the reader queued it, so a turn's update
/// and its response reach the client together, as from any buffered agent. A line
/// in fragments first writes what is queued, then each fragment on its own, so the order of the
/// bytes is always the order of the calls.
pub struct Output {
    writer: Option<LineWriter<BoxWrite>>,
    lines: u64,
    queued: bool,
    failed: bool,
    flush_wanted: Arc<Notify>,
    fragments_under_way: Arc<AtomicBool>,
    reader_flushes: Arc<AtomicBool>,
}

impl std::fmt::Debug for Output {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Output")
            .field("open", &self.writer.is_some())
            .field("lines", &self.lines)
            .field("queued", &self.queued)
            .finish()
    }
}

impl Output {
    /// Wraps stdout.
    pub fn new(stdout: BoxWrite) -> Self {
        Self {
            writer: Some(LineWriter::new(stdout)),
            lines: 0,
            queued: false,
            failed: false,
            flush_wanted: Arc::new(Notify::new()),
            fragments_under_way: Arc::new(AtomicBool::new(false)),
            reader_flushes: Arc::new(AtomicBool::new(false)),
        }
    }

    /// Set while the stdin reader runs a message's sequence up to its first wait: lines queued
    /// then wake no flusher, because the reader writes them itself before it waits for input
    /// (or wakes the flusher when the sequence waits first).
    pub fn reader_flushes(&self) -> Arc<AtomicBool> {
        Arc::clone(&self.reader_flushes)
    }

    /// True while a line is being written in fragments: that write holds stdout between its
    /// fragments, maybe waiting on a gate, so a flush must not wait for stdout then.
    pub fn fragments_under_way(&self) -> Arc<AtomicBool> {
        Arc::clone(&self.fragments_under_way)
    }

    /// Notified when a line is queued and nothing was queued before it: the flusher task waits
    /// on it, then calls [`Output::flush_queued`].
    pub fn flush_wanted(&self) -> Arc<Notify> {
        Arc::clone(&self.flush_wanted)
    }

    /// Whether stdout is still open.
    pub fn is_open(&self) -> bool {
        self.writer.is_some()
    }

    /// How many lines were written or queued.
    pub fn lines(&self) -> u64 {
        self.lines
    }

    /// Writes everything queued. A failure is noted in the transcript once, and every later
    /// write answers [`Written::Failed`].
    pub async fn flush_queued(&mut self, transcript: &Transcript) -> Written {
        if self.failed {
            return Written::Failed;
        }
        let Some(writer) = self.writer.as_mut() else {
            return Written::Closed;
        };
        if !std::mem::take(&mut self.queued) {
            return Written::Ok;
        }
        if writer.flush().await.is_err() {
            self.failed = true;
            transcript.note("write to stdout failed");
            return Written::Failed;
        }
        Written::Ok
    }

    /// Writes `bytes` (and a newline if asked), in fragments if the plan says so, recording
    /// the line in the transcript.
    pub async fn write(
        &mut self,
        bytes: &[u8],
        newline: bool,
        plan: &FragmentPlan,
        gates: &Gates,
        transcript: &Transcript,
    ) -> Written {
        let mut extra = Map::new();
        if !newline {
            extra.insert("newline".to_owned(), Value::Bool(false));
        }
        if self.writer.is_none() {
            extra.insert("dropped".to_owned(), json!("stdout is closed"));
            transcript.line(Kind::Out, bytes, Some(extra));
            return Written::Closed;
        }
        if self.failed {
            transcript.line(Kind::Out, bytes, (!extra.is_empty()).then_some(extra));
            return Written::Failed;
        }
        let length = bytes.len() + usize::from(newline);
        // The pieces of a line written in fragments; `None` for a line written whole.
        let pieces = plan
            .fragments
            .as_ref()
            .map(|fragments| fragments.split(length))
            .filter(|pieces| pieces.len() != 1);
        if let Some(pieces) = pieces.as_ref().filter(|pieces| pieces.len() > 1) {
            extra.insert(
                "fragments".to_owned(),
                json!(pieces.iter().map(|r| r.len()).collect::<Vec<_>>()),
            );
        }
        // The line is recorded before it is written, so a transcript read after the client saw
        // the line always contains it.
        transcript.line(
            Kind::Out,
            bytes,
            if extra.is_empty() { None } else { Some(extra) },
        );
        self.lines += 1;
        if pieces.is_none() && plan.delay.is_none() && plan.gate.is_none() {
            let Some(writer) = self.writer.as_mut() else {
                return Written::Closed;
            };
            writer.queue_raw(bytes);
            if newline {
                writer.queue_raw(b"\n");
            }
            // One wake of the flusher per batch: a line queued behind another is written by
            // the flush the first one asked for.
            if !std::mem::replace(&mut self.queued, true)
                && !self.reader_flushes.load(Ordering::Relaxed)
            {
                self.flush_wanted.notify_one();
            }
            return Written::Ok;
        }
        let mut line = Vec::with_capacity(length);
        line.extend_from_slice(bytes);
        if newline {
            line.push(b'\n');
        }
        let pieces = pieces.unwrap_or_else(|| std::iter::once(0..length).collect());
        // Boxed where it runs: every line's write holds this one's future, which only a line
        // in fragments, delayed or gated needs.
        Box::pin(self.write_in_pieces(&line, pieces, plan, gates, transcript)).await
    }

    /// Writes what is queued, then `line` in `pieces`, waiting between them as `plan` says.
    async fn write_in_pieces(
        &mut self,
        line: &[u8],
        pieces: Vec<std::ops::Range<usize>>,
        plan: &FragmentPlan,
        gates: &Gates,
        transcript: &Transcript,
    ) -> Written {
        let flushed = self.flush_queued(transcript).await;
        if flushed != Written::Ok {
            return flushed;
        }
        let count = pieces.len();
        let _fragmenting = (count > 1).then(|| FragmentsUnderWay::start(&self.fragments_under_way));
        for (index, range) in pieces.into_iter().enumerate() {
            let Some(writer) = self.writer.as_mut() else {
                return Written::Closed;
            };
            if writer.write_raw(&line[range]).await.is_err() {
                self.failed = true;
                transcript.note("write to stdout failed");
                return Written::Failed;
            }
            if index + 1 < count {
                if let Some(delay) = plan.delay {
                    tokio::time::sleep(delay).await;
                }
                if let Some(gate) = &plan.gate {
                    gates.wait(gate).await;
                }
            }
        }
        Written::Ok
    }

    /// Closes stdout: the reader sees end of stream; later writes are dropped.
    pub async fn close(&mut self, transcript: &Transcript) {
        self.flush_queued(transcript).await;
        if let Some(mut writer) = self.writer.take() {
            let _ = writer.shutdown().await;
            transcript.note("stdout closed");
        }
    }
}

/// Marks a fragmented write as under way until dropped (on every way out of the write).
struct FragmentsUnderWay(Arc<AtomicBool>);

impl FragmentsUnderWay {
    fn start(flag: &Arc<AtomicBool>) -> Self {
        flag.store(true, Ordering::Release);
        Self(Arc::clone(flag))
    }
}

impl Drop for FragmentsUnderWay {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}

/// Stderr as the agent writes it.
pub struct ErrorOutput {
    writer: BoxWrite,
}

impl std::fmt::Debug for ErrorOutput {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ErrorOutput").finish_non_exhaustive()
    }
}

impl ErrorOutput {
    /// Wraps stderr.
    pub fn new(writer: BoxWrite) -> Self {
        Self { writer }
    }

    /// Writes bytes to stderr and records them.
    pub async fn write(&mut self, bytes: &[u8], transcript: &Transcript) {
        transcript.line(
            Kind::Stderr,
            bytes.strip_suffix(b"\n").unwrap_or(bytes),
            None,
        );
        let _ = self.writer.write_all(bytes).await;
        let _ = self.writer.flush().await;
    }
}
