//! What a peer runs over: a byte stream framed as NDJSON (stdio, child pipes, sockets,
//! `tokio::io::duplex`), or a message transport carrying one JSON text per frame (WebSocket).

use std::fmt;
use std::io;
use std::pin::Pin;

use futures::{Sink, SinkExt, Stream, StreamExt};
use tokio::io::{AsyncRead, AsyncWrite};

use super::framing::{FrameError, LineReader, LineWriter};
use super::message::VersionField;

/// A boxed error from a message transport.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// The error a frame stream yields for a message over its own size limit, which it did not
/// buffer: the peer answers it -32600 with id null, as it answers an oversize line. A stream that
/// cannot go on after such a message ends right after this error.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("message of {length} bytes exceeds the limit of {limit} bytes")]
pub struct MessageTooBig {
    /// How long the message is, or claims to be.
    pub length: u64,
    /// The limit it exceeds.
    pub limit: usize,
}

type BoxReader = Box<dyn AsyncRead + Send + Unpin + 'static>;
type BoxWriter = Box<dyn AsyncWrite + Send + Unpin + 'static>;
type BoxFrameStream = Pin<Box<dyn Stream<Item = Result<String, BoxError>> + Send + 'static>>;
type BoxFrameSink = Pin<Box<dyn Sink<String, Error = BoxError> + Send + 'static>>;

/// The two halves a peer reads from and writes to.
pub struct Transport {
    kind: TransportKind,
}

enum TransportKind {
    Bytes {
        reader: BoxReader,
        writer: BoxWriter,
    },
    Frames {
        stream: BoxFrameStream,
        sink: BoxFrameSink,
    },
}

impl fmt::Debug for Transport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match self.kind {
            TransportKind::Bytes { .. } => "bytes",
            TransportKind::Frames { .. } => "frames",
        };
        f.debug_struct("Transport").field("kind", &kind).finish()
    }
}

impl Transport {
    /// A byte stream framed as NDJSON: one message per line.
    pub fn bytes<R, W>(reader: R, writer: W) -> Self
    where
        R: AsyncRead + Send + Unpin + 'static,
        W: AsyncWrite + Send + Unpin + 'static,
    {
        Self {
            kind: TransportKind::Bytes {
                reader: Box::new(reader),
                writer: Box::new(writer),
            },
        }
    }

    /// This process's stdin and stdout ([`crate::transport::stdio`]: no thread hop per message
    /// when they are pipes or sockets). Call it inside a tokio runtime.
    pub fn stdio() -> Self {
        Self::bytes(
            crate::transport::stdio::ProcessStdin::new(),
            crate::transport::stdio::ProcessStdout::new(),
        )
    }

    /// A message transport: each stream item and each sink item is one JSON text (for example
    /// one WebSocket text frame). A stream error ends the input, except [`MessageTooBig`], which
    /// is answered like an oversize line.
    pub fn frames<St, Si, E1, E2>(stream: St, sink: Si) -> Self
    where
        St: Stream<Item = Result<String, E1>> + Send + 'static,
        Si: Sink<String, Error = E2> + Send + 'static,
        E1: Into<BoxError> + 'static,
        E2: Into<BoxError> + 'static,
    {
        Self {
            kind: TransportKind::Frames {
                stream: Box::pin(stream.map(|item| item.map_err(Into::into))),
                sink: Box::pin(sink.sink_map_err(Into::into)),
            },
        }
    }

    /// Whether this is a message (frame) transport.
    pub fn is_frames(&self) -> bool {
        matches!(self.kind, TransportKind::Frames { .. })
    }

    pub(crate) fn split(self, max_bytes: usize, version: VersionField) -> (Input, Output) {
        match self.kind {
            TransportKind::Bytes { reader, writer } => (
                Input::Lines(LineReader::with_max_line_bytes(reader, max_bytes)),
                Output::Lines(LineWriter::with_version(writer, version)),
            ),
            TransportKind::Frames { stream, sink } => (
                Input::Frames {
                    stream,
                    current: String::new(),
                    max_bytes,
                },
                Output::Frames(sink),
            ),
        }
    }
}

/// The reading half, as the peer's read loop uses it.
pub(crate) enum Input {
    Lines(LineReader<BoxReader>),
    Frames {
        stream: BoxFrameStream,
        current: String,
        max_bytes: usize,
    },
}

impl Input {
    /// The next non-blank line or frame, a per-item error, or `None` at end of input.
    pub(crate) async fn next(&mut self) -> Option<Result<&[u8], FrameError>> {
        match self {
            Input::Lines(reader) => reader.next_line().await,
            Input::Frames {
                stream,
                current,
                max_bytes,
            } => loop {
                match stream.next().await? {
                    Err(error) => {
                        return Some(Err(match error.downcast::<MessageTooBig>() {
                            Ok(too_big) => FrameError::Oversize {
                                length: too_big.length,
                                limit: too_big.limit,
                            },
                            Err(error) => FrameError::Io(io::Error::other(error)),
                        }));
                    }
                    Ok(text) if text.len() > *max_bytes => {
                        return Some(Err(FrameError::Oversize {
                            length: text.len() as u64,
                            limit: *max_bytes,
                        }));
                    }
                    Ok(text) if text.trim_ascii().is_empty() => continue,
                    Ok(text) => {
                        *current = text;
                        return Some(Ok(current.as_bytes()));
                    }
                }
            },
        }
    }
}

/// The writing half, as the peer's writer task uses it.
pub(crate) enum Output {
    Lines(LineWriter<BoxWriter>),
    Frames(BoxFrameSink),
}

impl Output {
    /// Queues one encoded message (no terminator).
    pub(crate) async fn queue_line(&mut self, line: Vec<u8>) -> io::Result<()> {
        match self {
            Output::Lines(writer) => writer.queue_line(&line).map_err(io::Error::other),
            Output::Frames(sink) => {
                let text = String::from_utf8(line).map_err(io::Error::other)?;
                sink.feed(text).await.map_err(io::Error::other)
            }
        }
    }

    /// Queues raw bytes as they are (over frames: one frame, which must be UTF-8).
    pub(crate) async fn queue_raw(&mut self, bytes: Vec<u8>) -> io::Result<()> {
        match self {
            Output::Lines(writer) => {
                writer.queue_raw(&bytes);
                Ok(())
            }
            Output::Frames(sink) => {
                let text = String::from_utf8(bytes).map_err(|_| {
                    io::Error::new(
                        io::ErrorKind::InvalidData,
                        "a raw frame must be valid utf-8",
                    )
                })?;
                sink.feed(text).await.map_err(io::Error::other)
            }
        }
    }

    pub(crate) async fn flush(&mut self) -> io::Result<()> {
        match self {
            Output::Lines(writer) => writer.flush().await,
            Output::Frames(sink) => sink.flush().await.map_err(io::Error::other),
        }
    }

    pub(crate) async fn shutdown(&mut self) -> io::Result<()> {
        match self {
            Output::Lines(writer) => writer.shutdown().await,
            Output::Frames(sink) => sink.close().await.map_err(io::Error::other),
        }
    }
}
