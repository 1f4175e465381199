//! The NDJSON framer (`ski::jsonrpc::LineReader`) over an in-memory reader that hands out small
//! chunks, with a small line limit, checked line by line against a plain model of the framing
//! rules; every line it returns also goes through the JSON-RPC decoder, as a peer reads it.

use std::io;
use std::path::Path;
use std::pin::Pin;
use std::task::{Context, Poll};

use ski::jsonrpc::{FrameError, LineReader, VersionField, decode};
use tokio::io::{AsyncRead, ReadBuf};

use super::Target;
use crate::corpus::golden_json_lines;
use crate::rng::fnv1a;

pub const TARGET: Target = Target {
    name: "ndjson",
    about: "NDJSON framer: bytes [limit, chunk] then a stream; lines checked against a model",
    run,
    seeds,
    words: &[b"\n", b"\r\n", b"\r", b"  \t\n", b"\n\n"],
};

/// An `AsyncRead` over a byte slice that returns at most `chunk` bytes per read.
struct ChunkedReader<'a> {
    data: &'a [u8],
    chunk: usize,
}

impl AsyncRead for ChunkedReader<'_> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let count = self.chunk.min(self.data.len()).min(buf.remaining());
        let (head, tail) = self.data.split_at(count);
        buf.put_slice(head);
        self.data = tail;
        Poll::Ready(Ok(()))
    }
}

/// What the reader must return for one line.
#[derive(Debug, PartialEq)]
enum Framed {
    Line(Vec<u8>),
    Oversize,
}

/// The framing rules of `ski::jsonrpc::framing`, written plainly: LF ends a line, one CR before
/// it is dropped, a line longer than the limit is one oversize error, blank lines are skipped,
/// and a last line without LF still counts.
fn model(stream: &[u8], limit: usize) -> Vec<Framed> {
    let mut out = Vec::new();
    let mut pieces: Vec<&[u8]> = stream.split(|b| *b == b'\n').collect();
    // After a final LF, split gives an empty last piece, which is no line.
    if pieces.last().is_some_and(|piece| piece.is_empty()) {
        pieces.pop();
    }
    for piece in pieces {
        let line = piece.strip_suffix(b"\r").unwrap_or(piece);
        if line.len() > limit {
            out.push(Framed::Oversize);
        } else if !line.iter().all(|b| matches!(b, b' ' | b'\t' | b'\r')) {
            out.push(Framed::Line(line.to_vec()));
        }
    }
    out
}

fn run(data: &[u8]) -> u64 {
    let [limit_byte, chunk_byte, stream @ ..] = data else {
        return 0;
    };
    let limit = 1 + usize::from(*limit_byte) * 8;
    let chunk = 1 + usize::from(*chunk_byte);
    let reader = ChunkedReader {
        data: stream,
        chunk,
    };
    let mut lines = LineReader::with_max_line_bytes(reader, limit);
    let mut seen = Vec::new();
    let mut class = 0u64;
    futures::executor::block_on(async {
        while let Some(next) = lines.next_line().await {
            match next {
                Ok(line) => {
                    assert!(
                        line.len() <= limit,
                        "a line longer than the limit came through"
                    );
                    assert!(!line.contains(&b'\n'), "a line contains LF");
                    let kind: u64 = match decode(line, VersionField::Required) {
                        Ok(message) => 1 + u64::from(message.method().is_some()),
                        Err(error) => 3 + u64::from(error.error_response().is_some()),
                    };
                    class |= 1 << kind;
                    seen.push(Framed::Line(line.to_vec()));
                }
                Err(FrameError::Oversize {
                    limit: reported, ..
                }) => {
                    assert_eq!(reported, limit);
                    class |= 1 << 5;
                    seen.push(Framed::Oversize);
                }
                Err(FrameError::Io(error)) => panic!("an in-memory read failed: {error}"),
            }
        }
    });
    assert!(
        lines.high_water_mark() <= lines.buffer_bound(),
        "the buffer grew to {} bytes, past its bound of {}",
        lines.high_water_mark(),
        lines.buffer_bound()
    );
    let expected = model(stream, limit);
    assert_eq!(
        seen, expected,
        "the framer disagrees with the framing rules"
    );
    fnv1a(&class.to_le_bytes()) ^ (seen.len().min(3) as u64)
}

fn seeds(root: &Path) -> Vec<Vec<u8>> {
    let mut seeds = Vec::new();
    for (index, sub) in ["acp", "kiro", "intercom", "aof"].iter().enumerate() {
        let lines = golden_json_lines(root, sub);
        for (variant, separator) in [&b"\n"[..], b"\r\n", b"\n\n  \n"].iter().enumerate() {
            let mut stream = vec![
                (16 + 40 * index + 7 * variant) as u8,
                (3 + 60 * variant) as u8,
            ];
            for line in lines.iter().take(24) {
                stream.extend_from_slice(line);
                stream.extend_from_slice(separator);
            }
            seeds.push(stream);
        }
    }
    seeds.push(b"\x00\x00a\nb\r\n\r\n".to_vec());
    seeds.push(b"\x01\x00aaaaaaaaa\r\n\r\r\nxxxxxxxxxxxxxxxxxxxxxx".to_vec());
    seeds
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_model_follows_the_framing_rules() {
        assert_eq!(
            model(b"a\r\n \n\r\nbbbbb\nc", 3),
            vec![
                Framed::Line(b"a".to_vec()),
                Framed::Oversize,
                Framed::Line(b"c".to_vec())
            ]
        );
        assert_eq!(model(b"abc\r\r\n", 3), vec![Framed::Oversize]);
    }

    #[test]
    fn golden_streams_frame_as_the_model_says() {
        for seed in seeds(&crate::corpus::repository_root()) {
            run(&seed);
        }
    }
}
