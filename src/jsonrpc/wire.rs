//! Wire taps: observers that see every raw line or frame a peer reads and writes. The recorder
//! harnesses print when a check fails is [`crate::transport::WireLog`], which takes a peer's
//! events through [`crate::transport::WireLog::observer`].

/// Which way a line travelled, seen from the side that records it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Direction {
    /// Written by this side to the peer.
    Out,
    /// Read by this side from the peer.
    In,
    /// An event of this side (a process started, a signal sent, a stream closed), not wire data.
    Note,
}

impl Direction {
    /// The short lower-case name used in reports: `out`, `in` or `note`.
    pub fn as_str(self) -> &'static str {
        match self {
            Direction::Out => "out",
            Direction::In => "in",
            Direction::Note => "note",
        }
    }
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
                Direction::In
            }
            WireEvent::Sent(_) | WireEvent::SentRaw(_) | WireEvent::OutputClosed => Direction::Out,
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
