//! NDJSON framing: one JSON text per line, read from any `AsyncRead` with a bounded buffer and
//! written to any `AsyncWrite`.
//!
//! Reading rules: a line ends at LF, and a CR before the LF is dropped; whitespace-only lines are
//! skipped; a final line without a terminator is still returned at end of stream. A line longer
//! than the limit is never buffered whole: once the pending bytes exceed the limit the reader
//! switches to discarding, scans the following chunks for the next LF with `memchr`, reports one
//! [`FrameError::Oversize`] for that line and then carries on with the next line.

use std::io;

use memchr::memchr;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use super::message::{EncodeError, Message, VersionField, encode_into};

/// The default maximum line length: 32 MiB, as in the TypeScript ACP SDK.
pub const DEFAULT_MAX_LINE_BYTES: usize = 32 * 1024 * 1024;

/// Bytes requested from the inner reader at a time, and the slack the buffer may hold above the
/// line limit. The reader's buffer never exceeds `max_line_bytes + READ_CHUNK + 2`.
pub const READ_CHUNK: usize = 64 * 1024;

/// A problem with one inbound line or frame, or with the stream itself.
#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    /// The line (or frame) was longer than the limit and was dropped; the stream goes on.
    #[error("line of {length} bytes exceeds the limit of {limit} bytes")]
    Oversize {
        /// How many bytes the line had, without its terminator.
        length: u64,
        /// The configured limit.
        limit: usize,
    },
    /// Reading failed; the stream is over.
    #[error("read failed: {0}")]
    Io(#[from] io::Error),
}

/// Reads NDJSON lines from an `AsyncRead` with a bounded buffer.
#[derive(Debug)]
pub struct LineReader<R> {
    inner: R,
    /// Working buffer: its length is always `end` and its capacity its usable size. Reads go
    /// into the spare capacity (`read_buf`), so no byte is zeroed before the kernel writes it
    /// (zero-filling a 64 KiB buffer cost every process 16 page faults at start).
    buf: Vec<u8>,
    /// Start of the bytes not yet returned.
    start: usize,
    /// End of the bytes read so far.
    end: usize,
    /// Bytes in `start..scanned` are known to contain no LF.
    scanned: usize,
    max_line: usize,
    high_water: usize,
    eof: bool,
}

impl<R: AsyncRead + Unpin> LineReader<R> {
    /// A reader with the default limit of [`DEFAULT_MAX_LINE_BYTES`].
    pub fn new(inner: R) -> Self {
        Self::with_max_line_bytes(inner, DEFAULT_MAX_LINE_BYTES)
    }

    /// A reader that treats lines longer than `max_line_bytes` (terminator excluded) as oversize.
    pub fn with_max_line_bytes(inner: R, max_line_bytes: usize) -> Self {
        Self {
            inner,
            buf: Vec::new(),
            start: 0,
            end: 0,
            scanned: 0,
            max_line: max_line_bytes,
            high_water: 0,
            eof: false,
        }
    }

    /// The configured line limit.
    pub fn max_line_bytes(&self) -> usize {
        self.max_line
    }

    /// The current capacity of the internal buffer in bytes.
    pub fn buffer_capacity(&self) -> usize {
        self.buf.capacity()
    }

    /// The largest buffer capacity this reader has had.
    pub fn high_water_mark(&self) -> usize {
        self.high_water
    }

    /// The largest capacity the buffer can ever reach: the limit plus one read chunk plus room
    /// for a CRLF.
    pub fn buffer_bound(&self) -> usize {
        self.max_line.saturating_add(READ_CHUNK + 2)
    }

    /// Gives back the inner reader; buffered bytes are lost.
    pub fn into_inner(self) -> R {
        self.inner
    }

    /// Whether a whole line is already buffered, so the next [`LineReader::next_line`] answers
    /// without waiting for input.
    pub fn has_buffered_line(&self) -> bool {
        memchr(b'\n', &self.buf[self.scanned..self.end]).is_some()
    }

    /// The next non-blank line without its terminator, an error for one bad line, or `None` at
    /// end of stream.
    ///
    /// After `Some(Err(FrameError::Oversize { .. }))` the next call returns the line after the
    /// oversize one. After `Some(Err(FrameError::Io(_)))` the stream should be treated as over.
    /// The returned slice is valid until the next call.
    ///
    /// Cancel safety: dropping the future loses no complete line; a partly read line stays
    /// buffered, but dropping it while it discards an oversize line loses the discard progress.
    pub async fn next_line(&mut self) -> Option<Result<&[u8], FrameError>> {
        loop {
            if let Some(offset) = memchr(b'\n', &self.buf[self.scanned..self.end]) {
                let newline = self.scanned + offset;
                let line_start = self.start;
                let mut line_end = newline;
                if line_end > line_start && self.buf[line_end - 1] == b'\r' {
                    line_end -= 1;
                }
                self.start = newline + 1;
                self.scanned = self.start;
                let length = line_end - line_start;
                if length > self.max_line {
                    return Some(Err(self.oversize(length as u64)));
                }
                if is_blank(&self.buf[line_start..line_end]) {
                    continue;
                }
                return Some(Ok(&self.buf[line_start..line_end]));
            }
            self.scanned = self.end;
            let pending = self.end - self.start;
            if self.exceeds_limit(pending) {
                return Some(self.discard_line().await);
            }
            if self.eof {
                if pending == 0 {
                    return None;
                }
                let (line_start, mut line_end) = (self.start, self.end);
                if self.buf[line_end - 1] == b'\r' {
                    line_end -= 1;
                }
                self.start = self.end;
                self.scanned = self.end;
                if is_blank(&self.buf[line_start..line_end]) {
                    return None;
                }
                return Some(Ok(&self.buf[line_start..line_end]));
            }
            if let Err(error) = self.fill().await {
                return Some(Err(FrameError::Io(error)));
            }
        }
    }

    /// Whether `pending` bytes without a LF already make an oversize line. One byte more than
    /// the limit is allowed when it is a CR that may start a CRLF.
    fn exceeds_limit(&self, pending: usize) -> bool {
        pending > self.max_line.saturating_add(1)
            || (pending == self.max_line.saturating_add(1) && self.buf[self.end - 1] != b'\r')
    }

    fn oversize(&self, length: u64) -> FrameError {
        FrameError::Oversize {
            length,
            limit: self.max_line,
        }
    }

    /// Reads more bytes into the buffer, compacting or growing it first when it is full.
    async fn fill(&mut self) -> io::Result<()> {
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
            self.scanned = 0;
            self.buf.clear();
        } else if self.end == self.buf.capacity() && self.start > 0 {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.scanned -= self.start;
            self.start = 0;
            self.buf.truncate(self.end);
        }
        if self.end == self.buf.capacity() {
            let wanted = (self.buf.capacity() * 2)
                .max(READ_CHUNK)
                .min(self.buffer_bound());
            self.buf.reserve_exact(wanted - self.buf.len());
            self.high_water = self.high_water.max(self.buf.capacity());
        }
        let read = self.inner.read_buf(&mut self.buf).await?;
        if read == 0 {
            self.eof = true;
        }
        self.end += read;
        Ok(())
    }

    /// Drops the pending bytes of an oversize line and everything up to its LF, keeping what
    /// follows the LF. Only whole chunks are scanned, with `memchr`; nothing is copied.
    async fn discard_line(&mut self) -> Result<&[u8], FrameError> {
        let mut length = (self.end - self.start) as u64;
        self.start = 0;
        self.end = 0;
        self.scanned = 0;
        loop {
            self.buf.clear();
            if self.eof {
                return Err(self.oversize(length));
            }
            let read = match self.inner.read_buf(&mut self.buf).await {
                Ok(read) => read,
                Err(error) => return Err(FrameError::Io(error)),
            };
            if read == 0 {
                self.eof = true;
                continue;
            }
            match memchr(b'\n', &self.buf[..read]) {
                Some(newline) => {
                    let mut line_length = length + newline as u64;
                    let ends_with_cr = if newline > 0 {
                        self.buf[newline - 1] == b'\r'
                    } else {
                        // The CR, if any, was in an earlier chunk; it is counted, which only
                        // matters for a line that is oversize anyway.
                        false
                    };
                    if ends_with_cr {
                        line_length -= 1;
                    }
                    self.start = newline + 1;
                    self.end = read;
                    self.scanned = self.start;
                    length = line_length;
                    return Err(self.oversize(length));
                }
                None => length += read as u64,
            }
        }
    }
}

fn is_blank(line: &[u8]) -> bool {
    line.iter().all(|b| matches!(b, b' ' | b'\t' | b'\r'))
}

/// Writes NDJSON lines to an `AsyncWrite`, batching them until [`LineWriter::flush`].
#[derive(Debug)]
pub struct LineWriter<W> {
    inner: W,
    buf: Vec<u8>,
    version: VersionField,
}

impl<W: AsyncWrite + Unpin> LineWriter<W> {
    /// A writer that emits `"jsonrpc":"2.0"` on every message.
    pub fn new(inner: W) -> Self {
        Self::with_version(inner, VersionField::Required)
    }

    /// A writer with the given treatment of the `jsonrpc` member.
    pub fn with_version(inner: W, version: VersionField) -> Self {
        Self {
            inner,
            buf: Vec::with_capacity(READ_CHUNK),
            version,
        }
    }

    /// Queues a message as one line (compact JSON plus LF).
    pub fn queue_message(&mut self, message: &Message) -> Result<(), EncodeError> {
        encode_into(message, self.version, &mut self.buf)?;
        self.buf.push(b'\n');
        Ok(())
    }

    /// Queues an already encoded line; the LF is appended here.
    ///
    /// Fails with [`EncodeError::EmbeddedNewline`] if `line` contains a LF.
    pub fn queue_line(&mut self, line: &[u8]) -> Result<(), EncodeError> {
        if memchr(b'\n', line).is_some() {
            return Err(EncodeError::EmbeddedNewline);
        }
        self.buf.extend_from_slice(line);
        self.buf.push(b'\n');
        Ok(())
    }

    /// Queues bytes exactly as given: no terminator is added and nothing is checked. This is the
    /// path for writing malformed or fragmented output on purpose.
    pub fn queue_raw(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    /// Writes everything queued and flushes the inner writer.
    pub async fn flush(&mut self) -> io::Result<()> {
        if !self.buf.is_empty() {
            let result = self.inner.write_all(&self.buf).await;
            self.buf.clear();
            result?;
        }
        self.inner.flush().await
    }

    /// Writes one message and flushes.
    pub async fn write_message(&mut self, message: &Message) -> io::Result<()> {
        self.queue_message(message).map_err(io::Error::other)?;
        self.flush().await
    }

    /// Writes raw bytes and flushes.
    pub async fn write_raw(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.queue_raw(bytes);
        self.flush().await
    }

    /// Flushes and shuts the writer down (for a pipe: closes it, so the peer reads EOF).
    pub async fn shutdown(&mut self) -> io::Result<()> {
        self.flush().await?;
        self.inner.shutdown().await
    }

    /// Gives back the inner writer; queued bytes are lost.
    pub fn into_inner(self) -> W {
        self.inner
    }
}
