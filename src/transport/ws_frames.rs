//! Follows one direction of a WebSocket connection byte by byte: the HTTP head of the upgrade,
//! then frame headers and payload lengths (RFC 6455 section 5.2), so a caller that only sees
//! bytes knows where frames and messages begin and end, without buffering any payload.

/// The longest frame header: two bytes, an eight-byte length and a four-byte mask.
const MAX_HEADER: usize = 14;

/// The end of an HTTP head.
const HEAD_END: &[u8] = b"\r\n\r\n";

/// Where a byte stream of a WebSocket connection stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FrameTracker {
    state: State,
    /// A data frame without FIN was seen and its message's final frame not yet.
    fragmented: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum State {
    /// In the HTTP head; how many bytes of `\r\n\r\n` were just seen.
    Head { matched: usize },
    /// Between frames or inside a frame header; `have` bytes of it seen so far.
    Header {
        bytes: [u8; MAX_HEADER],
        have: usize,
    },
    /// Inside a frame's payload: `remaining` bytes to go.
    Payload { remaining: u64 },
}

impl Default for FrameTracker {
    fn default() -> Self {
        Self::new()
    }
}

impl FrameTracker {
    /// A tracker at the start of a connection (before the HTTP head).
    pub fn new() -> Self {
        Self {
            state: State::Head { matched: 0 },
            fragmented: false,
        }
    }

    /// Whether the HTTP head is over and frames follow.
    pub fn in_frames(&self) -> bool {
        !matches!(self.state, State::Head { .. })
    }

    /// Whether the stream stands between two frames (never inside the HTTP head): a frame of
    /// one's own may be written here without cutting another in two.
    pub fn at_frame_boundary(&self) -> bool {
        matches!(self.state, State::Header { have: 0, .. })
    }

    /// Whether a message has begun and not yet ended: inside a frame, or between the frames of
    /// a fragmented message.
    pub fn message_open(&self) -> bool {
        match self.state {
            State::Head { .. } => false,
            State::Header { have, .. } => have > 0 || self.fragmented,
            State::Payload { .. } => true,
        }
    }

    /// Takes in the next bytes of the stream.
    pub fn feed(&mut self, mut bytes: &[u8]) {
        while !bytes.is_empty() {
            bytes = match &mut self.state {
                State::Head { matched } => {
                    let mut taken = 0;
                    for &byte in bytes {
                        taken += 1;
                        *matched = if byte == HEAD_END[*matched] {
                            *matched + 1
                        } else if byte == HEAD_END[0] {
                            1
                        } else {
                            0
                        };
                        if *matched == HEAD_END.len() {
                            self.state = State::Header {
                                bytes: [0; MAX_HEADER],
                                have: 0,
                            };
                            break;
                        }
                    }
                    &bytes[taken..]
                }
                State::Header {
                    bytes: header,
                    have,
                } => {
                    let needed = header_length(&header[..*have]);
                    let take = (needed - *have).min(bytes.len());
                    header[*have..*have + take].copy_from_slice(&bytes[..take]);
                    *have += take;
                    if *have == header_length(&header[..*have]) {
                        let header = *header;
                        self.begin_payload(&header);
                    }
                    &bytes[take..]
                }
                State::Payload { remaining } => {
                    let take = usize::try_from(*remaining)
                        .unwrap_or(usize::MAX)
                        .min(bytes.len());
                    *remaining -= take as u64;
                    if *remaining == 0 {
                        self.end_frame();
                    }
                    &bytes[take..]
                }
            };
        }
    }

    /// A complete header was read: what its payload is.
    fn begin_payload(&mut self, header: &[u8; MAX_HEADER]) {
        let fin = header[0] & 0x80 != 0;
        let opcode = header[0] & 0x0f;
        let control = opcode & 0x08 != 0;
        let length = match header[1] & 0x7f {
            126 => u64::from(u16::from_be_bytes([header[2], header[3]])),
            127 => u64::from_be_bytes([
                header[2], header[3], header[4], header[5], header[6], header[7], header[8],
                header[9],
            ]),
            short => u64::from(short),
        };
        if !control {
            // A data frame (text, binary or continuation) without FIN opens a fragmented message.
            self.fragmented = !fin;
        }
        if length == 0 {
            self.end_frame();
        } else {
            self.state = State::Payload { remaining: length };
        }
    }

    fn end_frame(&mut self) {
        self.state = State::Header {
            bytes: [0; MAX_HEADER],
            have: 0,
        };
    }
}

/// How long the header that starts with `seen` is, as far as `seen` tells (at least two bytes).
fn header_length(seen: &[u8]) -> usize {
    let Some(&second) = seen.get(1) else {
        return 2;
    };
    let extended = match second & 0x7f {
        126 => 2,
        127 => 8,
        _ => 0,
    };
    let mask = if second & 0x80 != 0 { 4 } else { 0 };
    2 + extended + mask
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEAD: &[u8] = b"GET /acp HTTP/1.1\r\nHost: x\r\n\r\n";

    /// A masked client frame.
    fn frame(fin: bool, opcode: u8, payload: &[u8]) -> Vec<u8> {
        let mut out = vec![u8::from(fin) << 7 | opcode];
        match payload.len() {
            n if n < 126 => out.push(0x80 | n as u8),
            n if n <= 0xffff => {
                out.push(0x80 | 126);
                out.extend_from_slice(&(n as u16).to_be_bytes());
            }
            n => {
                out.push(0x80 | 127);
                out.extend_from_slice(&(n as u64).to_be_bytes());
            }
        }
        out.extend_from_slice(&[1, 2, 3, 4]);
        out.extend(payload.iter().map(|b| b ^ 0x5a));
        out
    }

    /// Feeds `bytes` one at a time and records `message_open` after each.
    fn open_after_each(tracker: &mut FrameTracker, bytes: &[u8]) -> Vec<bool> {
        bytes
            .iter()
            .map(|byte| {
                tracker.feed(std::slice::from_ref(byte));
                tracker.message_open()
            })
            .collect()
    }

    #[test]
    fn the_head_is_skipped_and_frames_follow_even_in_the_same_read() {
        let mut tracker = FrameTracker::new();
        assert!(!tracker.in_frames() && !tracker.at_frame_boundary());
        let mut bytes = HEAD.to_vec();
        bytes.extend(frame(true, 1, b"{}"));
        bytes.extend(&frame(true, 1, b"{\"a\":1}")[..3]);
        tracker.feed(&bytes);
        assert!(tracker.in_frames());
        assert!(tracker.message_open(), "three bytes of the second frame");
        tracker.feed(&frame(true, 1, b"{\"a\":1}")[3..]);
        assert!(tracker.at_frame_boundary() && !tracker.message_open());
    }

    #[test]
    fn a_head_with_a_lone_carriage_return_is_not_over_early() {
        let mut tracker = FrameTracker::new();
        tracker.feed(b"GET / HTTP/1.1\r\nX: a\r\r\n");
        assert!(!tracker.in_frames());
        tracker.feed(b"\r\n");
        assert!(tracker.at_frame_boundary());
    }

    #[test]
    fn a_message_is_open_from_its_first_byte_to_its_last_in_any_length_form() {
        for length in [0, 1, 125, 126, 70_000] {
            let mut tracker = FrameTracker::new();
            tracker.feed(HEAD);
            let bytes = frame(true, 1, &vec![b'x'; length]);
            let open = open_after_each(&mut tracker, &bytes);
            let (last, before) = open.split_last().unwrap();
            assert!(before.iter().all(|open| *open), "length {length}");
            assert!(!last, "length {length}");
            assert!(tracker.at_frame_boundary());
        }
    }

    #[test]
    fn a_fragmented_message_stays_open_across_control_frames_until_its_final_frame() {
        let mut tracker = FrameTracker::new();
        tracker.feed(HEAD);
        tracker.feed(&frame(false, 1, b"{\"a\""));
        assert!(tracker.at_frame_boundary() && tracker.message_open());
        tracker.feed(&frame(true, 0xA, b""));
        assert!(tracker.message_open(), "a pong inside the message");
        tracker.feed(&frame(false, 0, b":"));
        assert!(tracker.message_open());
        tracker.feed(&frame(true, 0, b"1}"));
        assert!(!tracker.message_open());
    }

    #[test]
    fn unmasked_server_frames_are_followed_too() {
        let mut tracker = FrameTracker::new();
        tracker.feed(b"HTTP/1.1 101 Switching Protocols\r\n\r\n");
        tracker.feed(&[0x81, 0x02, b'{']);
        assert!(!tracker.at_frame_boundary());
        tracker.feed(b"}");
        assert!(tracker.at_frame_boundary());
        tracker.feed(&[0x81, 126, 0x01]);
        assert!(!tracker.at_frame_boundary());
        tracker.feed(&[0x00]);
        tracker.feed(&vec![b'x'; 256]);
        assert!(tracker.at_frame_boundary());
    }
}
