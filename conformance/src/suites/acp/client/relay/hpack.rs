//! HTTP/2 frames and HPACK header blocks (RFC 9113, RFC 7541) as the runner's relay reads and
//! writes them: a frame read whole from a byte stream and written back, a header block decoded
//! with its dynamic table and Huffman strings, and header fields encoded again as literals that
//! never touch the peer's dynamic table.

use std::collections::{HashMap, VecDeque};
use std::sync::OnceLock;

use tokio::io::{AsyncRead, AsyncReadExt};

/// The client connection preface of HTTP/2 (RFC 9113 section 3.4).
pub const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// Frame types the relay looks into.
pub const DATA: u8 = 0x0;
/// A `HEADERS` frame.
pub const HEADERS: u8 = 0x1;
/// A `CONTINUATION` frame.
pub const CONTINUATION: u8 = 0x9;

/// Frame flags.
pub const END_STREAM: u8 = 0x1;
/// The last frame of a header block.
pub const END_HEADERS: u8 = 0x4;
/// The payload is padded.
pub const PADDED: u8 = 0x8;
/// A `HEADERS` frame carries priority fields.
pub const PRIORITY: u8 = 0x20;

/// The largest frame payload every peer takes (the initial `SETTINGS_MAX_FRAME_SIZE`).
pub const MIN_MAX_FRAME: usize = 16_384;

/// The largest payload the relay reads (the largest `SETTINGS_MAX_FRAME_SIZE` allowed).
const MAX_FRAME: usize = (1 << 24) - 1;

/// One HTTP/2 frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    /// The frame type.
    pub kind: u8,
    /// Its flags.
    pub flags: u8,
    /// The stream identifier (the reserved bit cleared).
    pub stream: u32,
    /// The payload.
    pub payload: Vec<u8>,
}

impl Frame {
    /// Reads one frame; `None` at the end of the stream before a frame began.
    pub async fn read<R: AsyncRead + Unpin>(reader: &mut R) -> std::io::Result<Option<Frame>> {
        let mut head = [0u8; 9];
        let mut filled = 0;
        while filled < head.len() {
            let n = reader.read(&mut head[filled..]).await?;
            if n == 0 {
                if filled == 0 {
                    return Ok(None);
                }
                return Err(std::io::ErrorKind::UnexpectedEof.into());
            }
            filled += n;
        }
        let length = usize::from(head[0]) << 16 | usize::from(head[1]) << 8 | usize::from(head[2]);
        if length > MAX_FRAME {
            return Err(std::io::Error::other("frame too large"));
        }
        let mut payload = vec![0u8; length];
        reader.read_exact(&mut payload).await?;
        Ok(Some(Frame {
            kind: head[3],
            flags: head[4],
            stream: u32::from_be_bytes([head[5], head[6], head[7], head[8]]) & 0x7fff_ffff,
            payload,
        }))
    }

    /// The frame as bytes on the wire.
    pub fn encode(&self) -> Vec<u8> {
        let length = self.payload.len();
        let mut bytes = Vec::with_capacity(9 + length);
        bytes.extend_from_slice(&[(length >> 16) as u8, (length >> 8) as u8, length as u8]);
        bytes.push(self.kind);
        bytes.push(self.flags);
        bytes.extend_from_slice(&self.stream.to_be_bytes());
        bytes.extend_from_slice(&self.payload);
        bytes
    }

    /// The payload without padding (and, for `HEADERS`, without priority fields): the data of a
    /// `DATA` frame or the header block fragment of `HEADERS` and `CONTINUATION`.
    pub fn content(&self) -> Result<&[u8], String> {
        let mut payload = &self.payload[..];
        let padded = matches!(self.kind, DATA | HEADERS) && self.flags & PADDED != 0;
        let mut pad = 0;
        if padded {
            let (&length, rest) = payload
                .split_first()
                .ok_or("a padded frame without length")?;
            pad = usize::from(length);
            payload = rest;
        }
        if self.kind == HEADERS && self.flags & PRIORITY != 0 {
            payload = payload.get(5..).ok_or("priority fields missing")?;
        }
        let end = payload
            .len()
            .checked_sub(pad)
            .ok_or("padding longer than the payload")?;
        Ok(&payload[..end])
    }
}

/// A header block as `HEADERS` and `CONTINUATION` frames of at most [`MIN_MAX_FRAME`] bytes each.
pub fn header_frames(stream: u32, end_stream: bool, block: &[u8]) -> Vec<Frame> {
    let mut chunks: Vec<&[u8]> = block.chunks(MIN_MAX_FRAME).collect();
    if chunks.is_empty() {
        chunks.push(&[]);
    }
    let last = chunks.len() - 1;
    chunks
        .into_iter()
        .enumerate()
        .map(|(index, chunk)| {
            let mut flags = if index == last { END_HEADERS } else { 0 };
            if index == 0 && end_stream {
                flags |= END_STREAM;
            }
            Frame {
                kind: if index == 0 { HEADERS } else { CONTINUATION },
                flags,
                stream,
                payload: chunk.to_vec(),
            }
        })
        .collect()
}

/// Header fields as a block of literals without indexing and without Huffman coding (RFC 7541
/// section 6.2.2), which leave the receiver's dynamic table as it was.
pub fn encode(fields: &[(String, String)]) -> Vec<u8> {
    let mut block = Vec::new();
    for (name, value) in fields {
        block.push(0x00);
        encode_string(&mut block, name.as_bytes());
        encode_string(&mut block, value.as_bytes());
    }
    block
}

fn encode_string(block: &mut Vec<u8>, text: &[u8]) {
    encode_integer(block, 0x00, 7, text.len());
    block.extend_from_slice(text);
}

fn encode_integer(block: &mut Vec<u8>, first: u8, prefix: u8, value: usize) {
    let max = (1usize << prefix) - 1;
    if value < max {
        block.push(first | value as u8);
        return;
    }
    block.push(first | max as u8);
    let mut rest = value - max;
    while rest >= 0x80 {
        block.push((rest & 0x7f) as u8 | 0x80);
        rest >>= 7;
    }
    block.push(rest as u8);
}

/// The static table of RFC 7541 Appendix A (index 1 first).
const STATIC: [(&str, &str); 61] = [
    (":authority", ""),
    (":method", "GET"),
    (":method", "POST"),
    (":path", "/"),
    (":path", "/index.html"),
    (":scheme", "http"),
    (":scheme", "https"),
    (":status", "200"),
    (":status", "204"),
    (":status", "206"),
    (":status", "304"),
    (":status", "400"),
    (":status", "404"),
    (":status", "500"),
    ("accept-charset", ""),
    ("accept-encoding", "gzip, deflate"),
    ("accept-language", ""),
    ("accept-ranges", ""),
    ("accept", ""),
    ("access-control-allow-origin", ""),
    ("age", ""),
    ("allow", ""),
    ("authorization", ""),
    ("cache-control", ""),
    ("content-disposition", ""),
    ("content-encoding", ""),
    ("content-language", ""),
    ("content-length", ""),
    ("content-location", ""),
    ("content-range", ""),
    ("content-type", ""),
    ("cookie", ""),
    ("date", ""),
    ("etag", ""),
    ("expect", ""),
    ("expires", ""),
    ("from", ""),
    ("host", ""),
    ("if-match", ""),
    ("if-modified-since", ""),
    ("if-none-match", ""),
    ("if-range", ""),
    ("if-unmodified-since", ""),
    ("last-modified", ""),
    ("link", ""),
    ("location", ""),
    ("max-forwards", ""),
    ("proxy-authenticate", ""),
    ("proxy-authorization", ""),
    ("range", ""),
    ("referer", ""),
    ("refresh", ""),
    ("retry-after", ""),
    ("server", ""),
    ("set-cookie", ""),
    ("strict-transport-security", ""),
    ("transfer-encoding", ""),
    ("user-agent", ""),
    ("vary", ""),
    ("via", ""),
    ("www-authenticate", ""),
];

/// The bit length of each symbol's Huffman code (RFC 7541 Appendix B; 256 is EOS). The code is
/// canonical: codes are assigned in order of (length, symbol), so the lengths define it.
const HUFFMAN_LENGTHS: [u8; 257] = [
    13, 23, 28, 28, 28, 28, 28, 28, 28, 24, 30, 28, 28, 30, 28, 28, 28, 28, 28, 28, 28, 28, 30, 28,
    28, 28, 28, 28, 28, 28, 28, 28, 6, 10, 10, 12, 13, 6, 8, 11, 10, 10, 8, 11, 8, 6, 6, 6, 5, 5,
    5, 6, 6, 6, 6, 6, 6, 6, 7, 8, 15, 6, 12, 10, 13, 6, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7,
    7, 7, 7, 7, 7, 7, 7, 7, 8, 7, 8, 13, 19, 13, 14, 6, 15, 5, 6, 5, 6, 5, 6, 6, 6, 5, 7, 7, 6, 6,
    6, 5, 6, 7, 6, 5, 5, 6, 7, 7, 7, 7, 7, 15, 11, 14, 13, 28, 20, 22, 20, 20, 22, 22, 22, 23, 22,
    23, 23, 23, 23, 23, 24, 23, 24, 24, 22, 23, 24, 23, 23, 23, 23, 21, 22, 23, 22, 23, 23, 24, 22,
    21, 20, 22, 22, 23, 23, 21, 23, 22, 22, 24, 21, 22, 23, 23, 21, 21, 22, 21, 23, 22, 23, 23, 20,
    22, 22, 22, 23, 22, 22, 23, 26, 26, 20, 19, 22, 23, 22, 25, 26, 26, 26, 27, 27, 26, 24, 25, 19,
    21, 26, 27, 27, 26, 27, 24, 21, 21, 26, 26, 28, 27, 27, 27, 20, 24, 20, 21, 22, 21, 21, 23, 22,
    22, 25, 25, 24, 24, 26, 23, 26, 27, 26, 26, 27, 27, 27, 27, 27, 28, 27, 27, 27, 27, 27, 26, 30,
];

/// (length, code) -> symbol, built once from [`HUFFMAN_LENGTHS`].
fn huffman_codes() -> &'static HashMap<(u8, u32), u16> {
    static CODES: OnceLock<HashMap<(u8, u32), u16>> = OnceLock::new();
    CODES.get_or_init(|| {
        let mut symbols: Vec<u16> = (0..257).collect();
        symbols.sort_by_key(|&symbol| (HUFFMAN_LENGTHS[usize::from(symbol)], symbol));
        let mut codes = HashMap::new();
        let mut code: u32 = 0;
        let mut previous = HUFFMAN_LENGTHS[usize::from(symbols[0])];
        for (index, &symbol) in symbols.iter().enumerate() {
            let length = HUFFMAN_LENGTHS[usize::from(symbol)];
            if index > 0 {
                code = (code + 1) << (length - previous);
            }
            previous = length;
            codes.insert((length, code), symbol);
        }
        codes
    })
}

fn huffman_decode(bytes: &[u8]) -> Result<Vec<u8>, String> {
    let codes = huffman_codes();
    let mut out = Vec::with_capacity(bytes.len() * 8 / 5);
    let (mut code, mut length) = (0u32, 0u8);
    for byte in bytes {
        for shift in (0..8).rev() {
            code = code << 1 | u32::from(byte >> shift & 1);
            length += 1;
            if let Some(&symbol) = codes.get(&(length, code)) {
                if symbol == 256 {
                    return Err("a Huffman string holds EOS".to_owned());
                }
                out.push(symbol as u8);
                code = 0;
                length = 0;
            } else if length >= 30 {
                return Err("an invalid Huffman code".to_owned());
            }
        }
    }
    if length >= 8 || code != (1 << length) - 1 {
        return Err("invalid Huffman padding".to_owned());
    }
    Ok(out)
}

/// The decoder of one direction of an HTTP/2 connection: its dynamic table lives as long as the
/// connection.
#[derive(Debug)]
pub struct Decoder {
    table: VecDeque<(String, String)>,
    size: usize,
    max: usize,
}

impl Default for Decoder {
    fn default() -> Self {
        Self {
            table: VecDeque::new(),
            size: 0,
            max: 4096,
        }
    }
}

impl Decoder {
    /// Decodes one complete header block.
    pub fn decode(&mut self, block: &[u8]) -> Result<Vec<(String, String)>, String> {
        let mut fields = Vec::new();
        let mut at = 0;
        while at < block.len() {
            let first = block[at];
            if first & 0x80 != 0 {
                let index = integer(block, &mut at, 7)?;
                fields.push(self.entry(index)?);
            } else if first & 0xc0 == 0x40 {
                let field = self.literal(block, &mut at, 6)?;
                self.insert(field.clone());
                fields.push(field);
            } else if first & 0xe0 == 0x20 {
                self.max = integer(block, &mut at, 5)?;
                self.evict(0);
            } else {
                fields.push(self.literal(block, &mut at, 4)?);
            }
        }
        Ok(fields)
    }

    fn literal(
        &self,
        block: &[u8],
        at: &mut usize,
        prefix: u8,
    ) -> Result<(String, String), String> {
        let index = integer(block, at, prefix)?;
        let name = if index == 0 {
            string(block, at)?
        } else {
            self.entry(index)?.0
        };
        Ok((name, string(block, at)?))
    }

    fn entry(&self, index: usize) -> Result<(String, String), String> {
        if index == 0 {
            return Err("header index 0".to_owned());
        }
        if let Some((name, value)) = STATIC.get(index - 1) {
            return Ok(((*name).to_owned(), (*value).to_owned()));
        }
        self.table
            .get(index - STATIC.len() - 1)
            .cloned()
            .ok_or_else(|| format!("header index {index} is not in the table"))
    }

    fn insert(&mut self, field: (String, String)) {
        let size = field.0.len() + field.1.len() + 32;
        if size > self.max {
            self.table.clear();
            self.size = 0;
            return;
        }
        self.evict(size);
        self.size += size;
        self.table.push_front(field);
    }

    fn evict(&mut self, room: usize) {
        while self.size + room > self.max {
            let Some((name, value)) = self.table.pop_back() else {
                self.size = 0;
                return;
            };
            self.size -= name.len() + value.len() + 32;
        }
    }
}

fn integer(block: &[u8], at: &mut usize, prefix: u8) -> Result<usize, String> {
    let truncated = || "a truncated header block".to_owned();
    let max = (1usize << prefix) - 1;
    let mut value = usize::from(*block.get(*at).ok_or_else(truncated)?) & max;
    *at += 1;
    if value < max {
        return Ok(value);
    }
    let mut shift = 0u32;
    loop {
        let byte = *block.get(*at).ok_or_else(truncated)?;
        *at += 1;
        if shift > 28 {
            return Err("a header integer too large".to_owned());
        }
        value += usize::from(byte & 0x7f) << shift;
        shift += 7;
        if byte & 0x80 == 0 {
            return Ok(value);
        }
    }
}

fn string(block: &[u8], at: &mut usize) -> Result<String, String> {
    let huffman = block.get(*at).is_some_and(|byte| byte & 0x80 != 0);
    let length = integer(block, at, 7)?;
    let end = at
        .checked_add(length)
        .filter(|&end| end <= block.len())
        .ok_or("a header string past the block")?;
    let raw = &block[*at..end];
    *at = end;
    let bytes = if huffman {
        huffman_decode(raw)?
    } else {
        raw.to_vec()
    };
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc_7541_examples_decode() {
        // C.4.1: a request with Huffman-coded strings and an indexed literal.
        let block = [
            0x82, 0x86, 0x84, 0x41, 0x8c, 0xf1, 0xe3, 0xc2, 0xe5, 0xf2, 0x3a, 0x6b, 0xa0, 0xab,
            0x90, 0xf4, 0xff,
        ];
        let mut decoder = Decoder::default();
        let fields = decoder.decode(&block).unwrap();
        assert_eq!(fields[3], (":authority".into(), "www.example.com".into()));
        // C.4.2: the same authority by its dynamic index 62.
        let fields = decoder
            .decode(&[
                0x82, 0x86, 0x84, 0xbe, 0x58, 0x86, 0xa8, 0xeb, 0x10, 0x64, 0x9c, 0xbf,
            ])
            .unwrap();
        assert_eq!(fields[3].1, "www.example.com");
        assert_eq!(fields[4], ("cache-control".into(), "no-cache".into()));
        let literal = encode(&[("cookie".into(), "a=b".into())]);
        assert_eq!(
            Decoder::default().decode(&literal).unwrap(),
            vec![("cookie".to_owned(), "a=b".to_owned())]
        );
    }
}
