//! Server-Sent Events for the Streamable HTTP profile: one JSON-RPC message per event, written as
//! `data:` lines, and a reader that turns a byte stream back into event data with a size bound.

use hyper::body::Bytes;

/// One event carrying `message` (a JSON text): each line of it a `data:` line, then a blank line.
pub fn event(message: &str) -> Bytes {
    let mut out = String::with_capacity(message.len() + 16);
    for line in message.split('\n') {
        out.push_str("data: ");
        out.push_str(line.strip_suffix('\r').unwrap_or(line));
        out.push('\n');
    }
    out.push('\n');
    Bytes::from(out)
}

/// Why reading an event stream failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SseError {
    /// An event grew past the bound before it ended.
    #[error("an SSE event exceeds the limit of {limit} bytes")]
    TooBig {
        /// The bound.
        limit: usize,
    },
    /// An event's data is not UTF-8.
    #[error("an SSE event is not UTF-8")]
    NotUtf8,
}

/// Reads events from chunks of an event stream: comments, `event:`, `id:` and `retry:` lines are
/// skipped; the `data:` lines of an event are joined with newlines.
#[derive(Debug)]
pub struct SseReader {
    pending: Vec<u8>,
    data: String,
    has_data: bool,
    limit: usize,
}

impl SseReader {
    /// A reader whose events (and unfinished lines) may hold at most `limit` bytes.
    pub fn new(limit: usize) -> Self {
        Self {
            pending: Vec::new(),
            data: String::new(),
            has_data: false,
            limit,
        }
    }

    /// Feeds a chunk; returns the data of every event it completes.
    pub fn push(&mut self, chunk: &[u8]) -> Result<Vec<String>, SseError> {
        let mut events = Vec::new();
        let mut rest = chunk;
        while let Some(end) = rest.iter().position(|&b| b == b'\n') {
            let (line, tail) = rest.split_at(end);
            rest = &tail[1..];
            let line = if self.pending.is_empty() {
                line.to_vec()
            } else {
                let mut whole = std::mem::take(&mut self.pending);
                whole.extend_from_slice(line);
                whole
            };
            let line = line.strip_suffix(b"\r").unwrap_or(&line);
            if line.is_empty() {
                if self.has_data {
                    events.push(std::mem::take(&mut self.data));
                    self.has_data = false;
                }
                continue;
            }
            let Some(value) = line.strip_prefix(b"data:") else {
                continue;
            };
            let value = value.strip_prefix(b" ").unwrap_or(value);
            let value = std::str::from_utf8(value).map_err(|_| SseError::NotUtf8)?;
            if self.has_data {
                self.data.push('\n');
            }
            self.data.push_str(value);
            self.has_data = true;
            if self.data.len() > self.limit {
                return Err(SseError::TooBig { limit: self.limit });
            }
        }
        self.pending.extend_from_slice(rest);
        if self.pending.len() + self.data.len() > self.limit {
            return Err(SseError::TooBig { limit: self.limit });
        }
        Ok(events)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_round_trip_across_chunk_boundaries() {
        let wire = [event(r#"{"a":1}"#), event("x\ny")].concat();
        let mut reader = SseReader::new(1024);
        let mut got = Vec::new();
        for chunk in wire.chunks(3) {
            got.extend(reader.push(chunk).unwrap());
        }
        assert_eq!(got, vec![r#"{"a":1}"#.to_owned(), "x\ny".to_owned()]);
        assert_eq!(
            reader
                .push(b": comment\nevent: m\r\ndata:z\r\n\r\n")
                .unwrap(),
            vec!["z".to_owned()]
        );
    }

    #[test]
    fn an_event_past_the_bound_is_an_error() {
        let mut reader = SseReader::new(8);
        assert_eq!(
            reader.push(b"data: 0123456789"),
            Err(SseError::TooBig { limit: 8 })
        );
        let mut reader = SseReader::new(8);
        assert_eq!(
            reader.push(b"data: 0123456789\n"),
            Err(SseError::TooBig { limit: 8 })
        );
    }
}
