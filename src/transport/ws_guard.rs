//! The TCP stream of one WebSocket server connection, guarded: it holds the connection's place
//! under the server's connection cap for as long as the stream lives, gives every inbound
//! message a deadline to arrive whole once its first byte came, and pings a client that sent
//! nothing for a while, ending the connection when no byte answers in time.
//!
//! The guard sees only bytes. It follows both directions' frames ([`FrameTracker`]) so it knows
//! when a message is partly received, and writes its own ping or close frame only between two
//! frames of the server's. A limit that runs out sends a close frame (1008 for a message too
//! slow, 1001 for a client that answers no ping) when the server's side stands between frames,
//! and then fails the read with [`io::ErrorKind::TimedOut`], which ends the connection; what the
//! server writes after that close frame is discarded.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::sync::OwnedSemaphorePermit;
use tokio::time::{Instant, Sleep};

use super::ws_frames::FrameTracker;

/// Close code 1001 (going away): the client answered no ping.
const GOING_AWAY: u16 = 1001;

/// Close code 1008 (policy violation): a message did not arrive whole in time.
const POLICY_VIOLATION: u16 = 1008;

/// The longest close reason a control frame carries (125 bytes less the code).
const MAX_REASON: usize = 123;

/// How long a connection may stay partly received or silent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Liveness {
    /// How long the server may wait for the rest of an inbound message after its first byte
    /// (counting only the time it waits for the client, not pauses of its own reading).
    pub message_timeout: Duration,
    /// How long the client may send nothing before it is pinged.
    pub idle_timeout: Duration,
    /// How long after a ping the client has to send anything (a pong, a message).
    pub pong_timeout: Duration,
}

impl Default for Liveness {
    fn default() -> Self {
        Self {
            message_timeout: Duration::from_secs(30),
            idle_timeout: Duration::from_secs(60),
            pong_timeout: Duration::from_secs(30),
        }
    }
}

/// Why the guard ended a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ended {
    SlowMessage,
    NoPong,
}

impl Ended {
    fn code(self) -> u16 {
        match self {
            Ended::SlowMessage => POLICY_VIOLATION,
            Ended::NoPong => GOING_AWAY,
        }
    }

    fn reason(self, liveness: &Liveness) -> String {
        match self {
            Ended::SlowMessage => format!(
                "a message did not arrive whole within {} ms",
                liveness.message_timeout.as_millis()
            ),
            Ended::NoPong => format!(
                "no answer to a ping within {} ms",
                liveness.pong_timeout.as_millis()
            ),
        }
    }
}

/// A control frame of the guard's own, written between the server's frames.
#[derive(Debug, Default)]
struct Injected {
    bytes: Vec<u8>,
    written: usize,
}

impl Injected {
    fn is_pending(&self) -> bool {
        self.written < self.bytes.len()
    }
}

/// A server connection's TCP stream under the guard; see the module documentation.
#[derive(Debug)]
pub struct GuardedStream {
    inner: TcpStream,
    _place: Option<OwnedSemaphorePermit>,
    liveness: Liveness,
    inbound: FrameTracker,
    outbound: FrameTracker,
    /// How long the server waited for the client since the inbound message now partly received
    /// began (time the server itself did not read, say while its writes waited, is not counted).
    message_waited: Duration,
    /// When the server began waiting for the rest of a partly received message.
    waiting_since: Option<Instant>,
    last_inbound: Instant,
    /// When a ping became due for want of inbound bytes (sent or waiting for a frame boundary).
    pinged: Option<Instant>,
    ping_owed: bool,
    injected: Injected,
    timer: Pin<Box<Sleep>>,
    ended: Option<Ended>,
    /// A close frame of the guard's was queued: the server's later bytes are discarded.
    closed_by_guard: bool,
}

impl GuardedStream {
    /// Guards `inner`; `place` is its slot under the server's connection cap, given back when
    /// the stream is dropped.
    pub fn new(inner: TcpStream, place: Option<OwnedSemaphorePermit>, liveness: Liveness) -> Self {
        let now = Instant::now();
        Self {
            inner,
            _place: place,
            liveness,
            inbound: FrameTracker::new(),
            outbound: FrameTracker::new(),
            message_waited: Duration::ZERO,
            waiting_since: None,
            last_inbound: now,
            pinged: None,
            ping_owed: false,
            injected: Injected::default(),
            timer: Box::pin(tokio::time::sleep_until(now)),
            ended: None,
            closed_by_guard: false,
        }
    }

    /// The TCP stream.
    pub fn get_ref(&self) -> &TcpStream {
        &self.inner
    }

    /// Writes what is left of the guard's own frame.
    fn poll_injected(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while self.injected.is_pending() {
            let rest = &self.injected.bytes[self.injected.written..];
            let written = ready!(Pin::new(&mut self.inner).poll_write(cx, rest))?;
            if written == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            self.injected.written += written;
        }
        Poll::Ready(Ok(()))
    }

    /// Queues a frame of the guard's if the server's side stands between frames; `false` if it
    /// cannot now.
    fn inject(&mut self, cx: &mut Context<'_>, frame: Vec<u8>) -> bool {
        if self.closed_by_guard || self.injected.is_pending() || !self.outbound.at_frame_boundary()
        {
            return false;
        }
        self.injected = Injected {
            bytes: frame,
            written: 0,
        };
        // What the socket does not take now is written before the server's next bytes.
        if let Poll::Ready(Err(error)) = self.poll_injected(cx) {
            tracing::debug!(%error, "writing a control frame failed");
        }
        true
    }

    /// Sends the ping owed, if the server's side allows it now.
    fn send_owed_ping(&mut self, cx: &mut Context<'_>) {
        if self.ping_owed && self.inject(cx, vec![0x89, 0x00]) {
            self.ping_owed = false;
        }
    }

    /// Ends the connection for `why`: a close frame if one can go now, then an error for the
    /// reader.
    fn end(&mut self, cx: &mut Context<'_>, why: Ended) -> io::Error {
        let reason = why.reason(&self.liveness);
        tracing::info!(reason = %reason, "websocket connection ended by its limits");
        if self.ended.is_none() {
            self.ended = Some(why);
            if self.inject(cx, close_frame(why.code(), &reason)) {
                self.closed_by_guard = true;
            }
        }
        io::Error::new(io::ErrorKind::TimedOut, reason)
    }

    /// With nothing to read: ends the connection if a limit ran out, pings if it is due, and
    /// otherwise sets the timer for the next deadline.
    fn poll_limits(&mut self, cx: &mut Context<'_>) -> Poll<io::Error> {
        loop {
            let now = Instant::now();
            let deadline = if self.inbound.message_open() {
                let since = *self.waiting_since.get_or_insert(now);
                let waited = self.message_waited + (now - since);
                if waited >= self.liveness.message_timeout {
                    return Poll::Ready(self.end(cx, Ended::SlowMessage));
                }
                now + (self.liveness.message_timeout - waited)
            } else if let Some(pinged) = self.pinged {
                let due = pinged + self.liveness.pong_timeout;
                if now >= due {
                    return Poll::Ready(self.end(cx, Ended::NoPong));
                }
                due
            } else if self.inbound.in_frames() {
                let due = self.last_inbound + self.liveness.idle_timeout;
                if now >= due {
                    self.pinged = Some(now);
                    self.ping_owed = true;
                    self.send_owed_ping(cx);
                    continue;
                }
                due
            } else {
                // The upgrade is under way; the server's handshake timeout bounds it.
                return Poll::Pending;
            };
            self.timer.as_mut().reset(deadline);
            if self.timer.as_mut().poll(cx).is_pending() {
                return Poll::Pending;
            }
        }
    }

    /// Notes bytes the client sent.
    fn received(&mut self, bytes: &[u8]) {
        let now = Instant::now();
        self.last_inbound = now;
        self.pinged = None;
        self.ping_owed = false;
        self.inbound.feed(bytes);
        if !self.inbound.message_open() {
            self.message_waited = Duration::ZERO;
        }
    }

    /// Counts the wait that just ended against the message partly received.
    fn stop_waiting(&mut self) {
        if let Some(since) = self.waiting_since.take() {
            self.message_waited += since.elapsed();
        }
    }
}

/// A close frame from the server (unmasked) with `code` and `reason` (cut to fit).
fn close_frame(code: u16, reason: &str) -> Vec<u8> {
    let mut end = reason.len().min(MAX_REASON);
    while !reason.is_char_boundary(end) {
        end -= 1;
    }
    let reason = &reason.as_bytes()[..end];
    let mut frame = Vec::with_capacity(4 + reason.len());
    frame.push(0x88);
    frame.push(2 + reason.len() as u8);
    frame.extend_from_slice(&code.to_be_bytes());
    frame.extend_from_slice(reason);
    frame
}

impl AsyncRead for GuardedStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if let Some(why) = this.ended {
            return Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                why.reason(&this.liveness),
            )));
        }
        // A frame of the guard's that the socket did not take at once goes on here too.
        if let Poll::Ready(Err(error)) = this.poll_injected(cx) {
            return Poll::Ready(Err(error));
        }
        this.stop_waiting();
        if this.message_waited >= this.liveness.message_timeout {
            return Poll::Ready(Err(this.end(cx, Ended::SlowMessage)));
        }
        let before = buf.filled().len();
        match Pin::new(&mut this.inner).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {
                let end = buf.filled().len();
                if end > before {
                    this.received(&buf.filled()[before..end]);
                }
                Poll::Ready(Ok(()))
            }
            Poll::Ready(Err(error)) => Poll::Ready(Err(error)),
            Poll::Pending => this.poll_limits(cx).map(Err),
        }
    }
}

impl AsyncWrite for GuardedStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        ready!(this.poll_injected(cx))?;
        if this.closed_by_guard {
            return Poll::Ready(Ok(buf.len()));
        }
        let written = ready!(Pin::new(&mut this.inner).poll_write(cx, buf))?;
        this.outbound.feed(&buf[..written]);
        this.send_owed_ping(cx);
        Poll::Ready(Ok(written))
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        ready!(this.poll_injected(cx))?;
        Pin::new(&mut this.inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        ready!(this.poll_injected(cx))?;
        Pin::new(&mut this.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn close_frames_carry_the_code_and_a_reason_cut_to_fit() {
        let frame = close_frame(1008, "slow");
        assert_eq!(frame, [0x88, 6, 0x03, 0xf0, b's', b'l', b'o', b'w']);
        let long = "é".repeat(100);
        let frame = close_frame(1001, &long);
        assert!(frame.len() <= 2 + 125);
        assert_eq!(usize::from(frame[1]), frame.len() - 2);
        assert!(std::str::from_utf8(&frame[4..]).is_ok());
    }
}
