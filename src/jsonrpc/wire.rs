//! Wire taps: observers that see every raw line or frame a peer reads and writes, and a ready
//! recorder for harnesses that print the wire log of a failed check.

use std::sync::{Arc, Mutex, PoisonError};

/// Which way a line travelled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Direction {
    /// Read from the remote side.
    Inbound,
    /// Written to the remote side.
    Outbound,
}

/// One thing that happened on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WireEvent<'a> {
    /// A non-blank line (without terminator) or a text frame was read.
    Received(&'a [u8]),
    /// A message was written: one line without its terminator, or one frame.
    Sent(&'a [u8]),
    /// Raw bytes were written exactly as given.
    SentRaw(&'a [u8]),
    /// An inbound line longer than the limit was discarded.
    Oversize {
        /// Its length in bytes, terminator excluded.
        length: u64,
    },
    /// The inbound side ended (end of stream, read error or local close).
    InputClosed,
    /// The outbound side was shut down.
    OutputClosed,
}

impl WireEvent<'_> {
    /// The direction of the event.
    pub fn direction(&self) -> Direction {
        match self {
            WireEvent::Received(_) | WireEvent::Oversize { .. } | WireEvent::InputClosed => {
                Direction::Inbound
            }
            WireEvent::Sent(_) | WireEvent::SentRaw(_) | WireEvent::OutputClosed => {
                Direction::Outbound
            }
        }
    }
}

/// Something that wants to see every wire event of a peer.
///
/// Observers run inline on the peer's reader and writer tasks, so they must be quick and must
/// not block.
pub trait WireObserver: Send + Sync + 'static {
    /// Called once per event, in wire order for each direction.
    fn observe(&self, event: &WireEvent<'_>);
}

impl<F> WireObserver for F
where
    F: Fn(&WireEvent<'_>) + Send + Sync + 'static,
{
    fn observe(&self, event: &WireEvent<'_>) {
        self(event)
    }
}

/// What a [`WireLog`] keeps of one event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WireRecordKind {
    /// A line or frame read.
    Received,
    /// A message written.
    Sent,
    /// Raw bytes written.
    SentRaw,
    /// An oversize inbound line of this length, discarded.
    Oversize(u64),
    /// The inbound side ended.
    InputClosed,
    /// The outbound side was shut down.
    OutputClosed,
}

/// One recorded event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WireRecord {
    /// Which way it travelled.
    pub direction: Direction,
    /// What it was.
    pub kind: WireRecordKind,
    /// The bytes as text (invalid UTF-8 replaced by U+FFFD); empty for events without bytes.
    pub text: String,
}

/// A shareable, ordered recording of wire events; clones share the same log.
#[derive(Debug, Clone, Default)]
pub struct WireLog {
    records: Arc<Mutex<Vec<WireRecord>>>,
}

impl WireLog {
    /// An empty log.
    pub fn new() -> Self {
        Self::default()
    }

    /// Every record so far, in the order observed.
    pub fn records(&self) -> Vec<WireRecord> {
        self.lock().clone()
    }

    /// The text of every line or frame that travelled in `direction` (messages and raw writes).
    pub fn lines(&self, direction: Direction) -> Vec<String> {
        self.lock()
            .iter()
            .filter(|r| {
                r.direction == direction
                    && matches!(
                        r.kind,
                        WireRecordKind::Received | WireRecordKind::Sent | WireRecordKind::SentRaw
                    )
            })
            .map(|r| r.text.clone())
            .collect()
    }

    /// The log as readable text, one event per line (`<-` inbound, `->` outbound).
    pub fn render(&self) -> String {
        let mut out = String::new();
        for record in self.lock().iter() {
            let arrow = match record.direction {
                Direction::Inbound => "<-",
                Direction::Outbound => "->",
            };
            let line = match &record.kind {
                WireRecordKind::Received | WireRecordKind::Sent => record.text.clone(),
                WireRecordKind::SentRaw => format!("(raw) {:?}", record.text),
                WireRecordKind::Oversize(length) => format!("(oversize line of {length} bytes)"),
                WireRecordKind::InputClosed => "(input closed)".to_owned(),
                WireRecordKind::OutputClosed => "(output closed)".to_owned(),
            };
            out.push_str(arrow);
            out.push(' ');
            out.push_str(&line);
            out.push('\n');
        }
        out
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<WireRecord>> {
        self.records.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl WireObserver for WireLog {
    fn observe(&self, event: &WireEvent<'_>) {
        let text = |bytes: &[u8]| String::from_utf8_lossy(bytes).into_owned();
        let (kind, text) = match *event {
            WireEvent::Received(bytes) => (WireRecordKind::Received, text(bytes)),
            WireEvent::Sent(bytes) => (WireRecordKind::Sent, text(bytes)),
            WireEvent::SentRaw(bytes) => (WireRecordKind::SentRaw, text(bytes)),
            WireEvent::Oversize { length } => (WireRecordKind::Oversize(length), String::new()),
            WireEvent::InputClosed => (WireRecordKind::InputClosed, String::new()),
            WireEvent::OutputClosed => (WireRecordKind::OutputClosed, String::new()),
        };
        self.lock().push(WireRecord {
            direction: event.direction(),
            kind,
            text,
        });
    }
}
