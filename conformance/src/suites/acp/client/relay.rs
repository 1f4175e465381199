//! A byte-level HTTP relay of the runner's own: it accepts a client on a loopback port, opens one
//! TCP connection upstream per client connection, and passes everything on while it reads each
//! request and answer as the wire carries it, HTTP/2 (prior knowledge: frames, HPACK) and
//! HTTP/1.1 (heads, bodies, the WebSocket upgrade and its frames) alike. A [`Hooks`] value sees
//! every request head and body, every answer head and every WebSocket frame, and may change heads
//! and frames on their way: the recording front of the client rows adds its cookies to answers,
//! the defect corpus's relays break one requirement of a client.
//!
//! Every HTTP/2 header block that passes is decoded with the sender's dynamic table and sent on
//! as literals without indexing ([`hpack::encode`]), so a changed block never leaves the
//! receiver's table out of step with the sender's.

pub mod hpack;

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio::task::JoinSet;

use hpack::{CONTINUATION, DATA, Decoder, END_HEADERS, END_STREAM, Frame, HEADERS, PREFACE};

/// The HTTP version a request came in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Version {
    /// HTTP/1.0 or HTTP/1.1.
    Http1,
    /// HTTP/2.
    Http2,
}

/// Where a message is: which client connection (counting from 0) and which request on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Place {
    /// The client's TCP connection, counting from 0 in the order they were accepted.
    pub tcp: usize,
    /// The HTTP/2 stream, or the request's position on an HTTP/1.1 connection.
    pub stream: u32,
}

/// A request or answer head: for a request the method and path, for an answer the status; the
/// header fields in order, names lower case.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Head {
    /// `GET`, `POST`… (requests).
    pub method: String,
    /// The request target (requests).
    pub path: String,
    /// The status (answers).
    pub status: u16,
    /// The header fields other than HTTP/2's pseudo-headers.
    pub fields: Vec<(String, String)>,
}

impl Head {
    /// The values of the field `name` (lower case), in order.
    pub fn all(&self, name: &str) -> Vec<&str> {
        self.fields
            .iter()
            .filter(|(field, _)| field.eq_ignore_ascii_case(name))
            .map(|(_, value)| value.as_str())
            .collect()
    }

    /// The first value of the field `name`.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.all(name).into_iter().next()
    }

    /// Removes every field `name`.
    pub fn remove(&mut self, name: &str) {
        self.fields
            .retain(|(field, _)| !field.eq_ignore_ascii_case(name));
    }

    /// Replaces every field `name` by one with `value`.
    pub fn set(&mut self, name: &str, value: &str) {
        self.remove(name);
        self.fields.push((name.to_owned(), value.to_owned()));
    }
}

/// A WebSocket frame the client sent, as the relay saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WsFrame {
    /// The opcode (1 text, 2 binary, 0 continuation, 8 close, 9 ping, 10 pong).
    pub opcode: u8,
    /// The unmasked payload.
    pub payload: Vec<u8>,
}

/// What a relay's user sees and changes.
pub trait Hooks: Send + Sync + 'static {
    /// A request head, before it goes upstream.
    fn request(&self, place: Place, version: Version, head: &mut Head);
    /// A request's body, whole, once it has gone upstream (HTTP/2: when its stream ended; an
    /// unfinished body is never reported).
    fn body(&self, place: Place, body: &[u8]);
    /// An answer head, before it goes to the client.
    fn answer(&self, place: Place, head: &mut Head);
    /// An answer's body, whole, once it ended (an event stream that never ends is never
    /// reported).
    fn answer_body(&self, place: Place, body: &[u8]);
    /// A WebSocket frame of the client, before it goes upstream; the hook may change its opcode.
    fn ws_frame(&self, place: Place, frame: &mut WsFrame);
}

/// A running relay; dropping it stops it and every connection it carries.
#[derive(Debug)]
pub struct Relay {
    addr: SocketAddr,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Relay {
    /// Relays every client of `listener` to `upstream`.
    pub fn start(listener: TcpListener, upstream: SocketAddr, hooks: Arc<dyn Hooks>) -> Relay {
        let addr = listener.local_addr().unwrap_or(upstream);
        let task = tokio::spawn(async move {
            let mut connections = JoinSet::new();
            let mut tcp = 0usize;
            while let Ok((client, _)) = listener.accept().await {
                let hooks = hooks.clone();
                let index = tcp;
                tcp += 1;
                connections.spawn(async move {
                    if let Ok(server) = TcpStream::connect(upstream).await {
                        let _ = client.set_nodelay(true);
                        let _ = server.set_nodelay(true);
                        // A connection that ends with an error ends as the client sees it.
                        let _ = relay(client, server, index, hooks).await;
                    }
                });
            }
        });
        Relay { addr, task }
    }

    /// The address clients connect to.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
}

type Io = std::io::Result<()>;

async fn relay(mut client: TcpStream, server: TcpStream, tcp: usize, hooks: Arc<dyn Hooks>) -> Io {
    let mut first = vec![0u8; PREFACE.len()];
    let mut filled = 0;
    while filled < first.len() {
        let n = client.read(&mut first[filled..]).await?;
        if n == 0 {
            break;
        }
        filled += n;
        if !PREFACE.starts_with(&first[..filled]) {
            break;
        }
    }
    first.truncate(filled);
    let (client_read, client_write) = client.into_split();
    let (server_read, server_write) = server.into_split();
    if first == PREFACE {
        let mut server_write = server_write;
        server_write.write_all(PREFACE).await?;
        let up = h2_direction(client_read, server_write, tcp, hooks.clone(), true);
        let down = h2_direction(server_read, client_write, tcp, hooks, false);
        let (up, down) = tokio::join!(up, down);
        up.and(down)
    } else {
        let (answers, pending) = mpsc::unbounded_channel();
        let up = h1_requests(
            first,
            client_read,
            server_write,
            tcp,
            hooks.clone(),
            answers,
        );
        let down = h1_answers(server_read, client_write, tcp, hooks, pending);
        let (up, down) = tokio::join!(up, down);
        up.and(down)
    }
}

/// One direction of an HTTP/2 connection: frames passed on, header blocks decoded, given to the
/// hooks and encoded again.
async fn h2_direction<R, W>(
    mut from: R,
    mut to: W,
    tcp: usize,
    hooks: Arc<dyn Hooks>,
    requests: bool,
) -> Io
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut decoder = Decoder::default();
    let mut bodies: std::collections::HashMap<u32, Vec<u8>> = std::collections::HashMap::new();
    let mut pending: Option<(u32, bool, Vec<u8>)> = None;
    let invalid = |e: String| std::io::Error::new(std::io::ErrorKind::InvalidData, e);
    while let Some(frame) = Frame::read(&mut from).await? {
        let place = Place {
            tcp,
            stream: frame.stream,
        };
        match frame.kind {
            HEADERS | CONTINUATION => {
                let fragment = frame.content().map_err(invalid)?.to_vec();
                let (stream, end_stream, mut block) = match (frame.kind, pending.take()) {
                    (HEADERS, _) => (frame.stream, frame.flags & END_STREAM != 0, Vec::new()),
                    (_, Some(started)) => started,
                    (_, None) => return Err(invalid("CONTINUATION without HEADERS".into())),
                };
                block.extend_from_slice(&fragment);
                if frame.flags & END_HEADERS == 0 {
                    pending = Some((stream, end_stream, block));
                    continue;
                }
                let fields = decoder.decode(&block).map_err(invalid)?;
                let (pseudo, fields): (Vec<_>, Vec<_>) = fields
                    .into_iter()
                    .partition(|(name, _)| name.starts_with(':'));
                let mut head = Head {
                    fields,
                    ..Head::default()
                };
                for (name, value) in &pseudo {
                    match name.as_str() {
                        ":method" => head.method.clone_from(value),
                        ":path" => head.path.clone_from(value),
                        ":status" => head.status = value.parse().unwrap_or(0),
                        _ => {}
                    }
                }
                let trailers = if requests {
                    bodies.contains_key(&stream)
                } else {
                    head.status == 0
                };
                if !trailers {
                    bodies.insert(stream, Vec::new());
                    if requests {
                        hooks.request(place, Version::Http2, &mut head);
                    } else {
                        hooks.answer(place, &mut head);
                    }
                }
                let mut all = pseudo;
                if !trailers && requests {
                    for (name, value) in &mut all {
                        match name.as_str() {
                            ":method" => value.clone_from(&head.method),
                            ":path" => value.clone_from(&head.path),
                            _ => {}
                        }
                    }
                } else if !trailers {
                    all = vec![(":status".to_owned(), head.status.to_string())];
                }
                all.extend(head.fields);
                if end_stream {
                    finish_body(&mut bodies, stream, place, &*hooks, requests);
                }
                let mut bytes = Vec::new();
                for out in hpack::header_frames(stream, end_stream, &hpack::encode(&all)) {
                    bytes.extend(out.encode());
                }
                to.write_all(&bytes).await?;
            }
            DATA => {
                let content = frame.content().map_err(invalid)?;
                if let Some(body) = bodies.get_mut(&frame.stream) {
                    body.extend_from_slice(content);
                }
                if frame.flags & END_STREAM != 0 {
                    finish_body(&mut bodies, frame.stream, place, &*hooks, requests);
                }
                to.write_all(&frame.encode()).await?;
            }
            _ => to.write_all(&frame.encode()).await?,
        }
    }
    to.shutdown().await
}

fn finish_body(
    bodies: &mut std::collections::HashMap<u32, Vec<u8>>,
    stream: u32,
    place: Place,
    hooks: &dyn Hooks,
    request: bool,
) {
    if let Some(body) = bodies.get_mut(&stream) {
        if request {
            hooks.body(place, body);
        } else {
            hooks.answer_body(place, body);
        }
        // Kept (empty) so later HEADERS on the stream read as trailers.
        body.clear();
    }
}

/// The longest HTTP/1.1 head the relay reads.
const MAX_HEAD: usize = 64 * 1024;

/// The largest WebSocket frame or HTTP/1.1 body the relay holds to read.
const MAX_BODY: usize = 64 * 1024 * 1024;

/// A byte reader that keeps what it read ahead.
struct Bytes<R> {
    reader: R,
    buffer: Vec<u8>,
}

impl<R: AsyncRead + Unpin> Bytes<R> {
    async fn fill(&mut self) -> std::io::Result<bool> {
        self.buffer.reserve(16 * 1024);
        let n = self.reader.read_buf(&mut self.buffer).await?;
        Ok(n > 0)
    }

    /// The bytes up to and including the first `\r\n\r\n`; `None` at the end before any byte.
    async fn head(&mut self) -> std::io::Result<Option<Vec<u8>>> {
        loop {
            if let Some(at) = self.buffer.windows(4).position(|w| w == b"\r\n\r\n") {
                return Ok(Some(self.buffer.drain(..at + 4).collect()));
            }
            if self.buffer.len() > MAX_HEAD {
                return Err(std::io::Error::other("an HTTP head too long"));
            }
            if !self.fill().await? {
                if self.buffer.is_empty() {
                    return Ok(None);
                }
                return Err(std::io::ErrorKind::UnexpectedEof.into());
            }
        }
    }

    async fn take(&mut self, n: usize) -> std::io::Result<Vec<u8>> {
        if n > MAX_BODY {
            return Err(std::io::Error::other("a body too large for the relay"));
        }
        while self.buffer.len() < n {
            if !self.fill().await? {
                return Err(std::io::ErrorKind::UnexpectedEof.into());
            }
        }
        Ok(self.buffer.drain(..n).collect())
    }

    async fn line(&mut self) -> std::io::Result<Vec<u8>> {
        loop {
            if let Some(at) = self.buffer.windows(2).position(|w| w == b"\r\n") {
                return Ok(self.buffer.drain(..at + 2).collect());
            }
            if self.buffer.len() > MAX_HEAD || !self.fill().await? {
                return Err(std::io::Error::other("a chunk size line is missing"));
            }
        }
    }
}

/// An HTTP/1.1 head: its first line and fields.
fn parse_head(raw: &[u8]) -> (String, Vec<(String, String)>) {
    let text = String::from_utf8_lossy(raw);
    let mut lines = text.split("\r\n");
    let first = lines.next().unwrap_or_default().to_owned();
    let fields = lines
        .filter(|line| !line.is_empty())
        .filter_map(|line| line.split_once(':'))
        .map(|(name, value)| (name.trim().to_ascii_lowercase(), value.trim().to_owned()))
        .collect();
    (first, fields)
}

fn write_head(first: &str, fields: &[(String, String)]) -> Vec<u8> {
    let mut text = format!("{first}\r\n");
    for (name, value) in fields {
        text.push_str(&format!("{name}: {value}\r\n"));
    }
    text.push_str("\r\n");
    text.into_bytes()
}

/// How an HTTP/1.1 message's body is delimited.
enum Length {
    Fixed(usize),
    Chunked,
    UntilClose,
}

fn body_length(head: &Head, request: bool) -> Length {
    if head
        .get("transfer-encoding")
        .is_some_and(|value| value.to_ascii_lowercase().contains("chunked"))
    {
        return Length::Chunked;
    }
    match head.get("content-length").and_then(|v| v.parse().ok()) {
        Some(n) => Length::Fixed(n),
        None if request || matches!(head.status, 101 | 204 | 304) || head.status < 200 => {
            Length::Fixed(0)
        }
        None => Length::UntilClose,
    }
}

/// Copies a body to `to` as it is, returning its content (chunks joined) when `keep`.
async fn copy_body<R, W>(
    from: &mut Bytes<R>,
    to: &mut W,
    length: Length,
    keep: bool,
) -> std::io::Result<Vec<u8>>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut content = Vec::new();
    match length {
        Length::Fixed(n) => {
            let bytes = from.take(n).await?;
            to.write_all(&bytes).await?;
            if keep {
                content = bytes;
            }
        }
        Length::Chunked => loop {
            let line = from.line().await?;
            to.write_all(&line).await?;
            let size_text = String::from_utf8_lossy(&line);
            let size_text = size_text.trim().split(';').next().unwrap_or_default();
            let size = usize::from_str_radix(size_text.trim(), 16)
                .map_err(|_| std::io::Error::other("a bad chunk size"))?;
            if size == 0 {
                // Trailers, then the empty line.
                loop {
                    let line = from.line().await?;
                    to.write_all(&line).await?;
                    if line == b"\r\n" {
                        break;
                    }
                }
                break;
            }
            let chunk = from.take(size + 2).await?;
            to.write_all(&chunk).await?;
            to.flush().await?;
            if keep {
                content.extend_from_slice(&chunk[..size]);
            }
        },
        Length::UntilClose => {
            to.write_all(&std::mem::take(&mut from.buffer)).await?;
            let mut chunk = vec![0u8; 16 * 1024];
            loop {
                let n = from.reader.read(&mut chunk).await?;
                if n == 0 {
                    break;
                }
                to.write_all(&chunk[..n]).await?;
                to.flush().await?;
            }
        }
    }
    Ok(content)
}

/// A request body read whole: its bytes as sent and its content (chunks joined).
async fn read_body<R: AsyncRead + Unpin>(
    from: &mut Bytes<R>,
    length: Length,
) -> std::io::Result<(Vec<u8>, Vec<u8>)> {
    let mut raw = Vec::new();
    let content = copy_body(from, &mut raw, length, true).await?;
    Ok((raw, content))
}

/// The client side of an HTTP/1.1 connection: request heads and bodies, then (after an
/// upgrade) WebSocket frames.
async fn h1_requests<R, W>(
    first: Vec<u8>,
    reader: R,
    mut to: W,
    tcp: usize,
    hooks: Arc<dyn Hooks>,
    answers: mpsc::UnboundedSender<(Place, bool, tokio::sync::oneshot::Sender<bool>)>,
) -> Io
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut from = Bytes {
        reader,
        buffer: first,
    };
    let mut index = 0u32;
    while let Some(raw) = from.head().await? {
        let place = Place { tcp, stream: index };
        index += 1;
        let (line, fields) = parse_head(&raw);
        let mut words = line.split_whitespace();
        let mut head = Head {
            method: words.next().unwrap_or_default().to_owned(),
            path: words.next().unwrap_or_default().to_owned(),
            fields,
            ..Head::default()
        };
        let upgrade = head
            .get("upgrade")
            .is_some_and(|value| value.eq_ignore_ascii_case("websocket"));
        hooks.request(place, Version::Http1, &mut head);
        let (raw_body, body) = read_body(&mut from, body_length(&head, true)).await?;
        hooks.body(place, &body);
        let line = format!(
            "{} {} {}",
            head.method,
            head.path,
            line.rsplit(' ').next().unwrap_or("HTTP/1.1")
        );
        to.write_all(&write_head(&line, &head.fields)).await?;
        let (switched, answered) = tokio::sync::oneshot::channel();
        if answers.send((place, upgrade, switched)).is_err() {
            return Ok(());
        }
        to.write_all(&raw_body).await?;
        to.flush().await?;
        if upgrade && answered.await.unwrap_or(false) {
            return ws_frames(from, to, place, hooks).await;
        }
    }
    to.shutdown().await
}

/// The server side of an HTTP/1.1 connection: answer heads (given to the hooks) and bodies, then
/// (after a `101`) the bytes as they come.
async fn h1_answers<R, W>(
    reader: R,
    mut to: W,
    tcp: usize,
    hooks: Arc<dyn Hooks>,
    mut pending: mpsc::UnboundedReceiver<(Place, bool, tokio::sync::oneshot::Sender<bool>)>,
) -> Io
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut from = Bytes {
        reader,
        buffer: Vec::new(),
    };
    while let Some(raw) = from.head().await? {
        let (place, _, switched) = match pending.recv().await {
            Some(next) => next,
            None => (
                Place { tcp, stream: 0 },
                false,
                tokio::sync::oneshot::channel().0,
            ),
        };
        let (line, fields) = parse_head(&raw);
        let mut head = Head {
            status: line
                .split_whitespace()
                .nth(1)
                .and_then(|s| s.parse().ok())
                .unwrap_or(0),
            fields,
            ..Head::default()
        };
        hooks.answer(place, &mut head);
        to.write_all(&write_head(&line, &head.fields)).await?;
        to.flush().await?;
        if head.status == 101 {
            let _ = switched.send(true);
            let length = Length::UntilClose;
            copy_body(&mut from, &mut to, length, false).await?;
            break;
        }
        let _ = switched.send(false);
        let length = body_length(&head, false);
        let whole = !matches!(length, Length::UntilClose);
        let body = copy_body(&mut from, &mut to, length, whole).await?;
        to.flush().await?;
        if whole {
            hooks.answer_body(place, &body);
        }
    }
    to.shutdown().await
}

/// The client's WebSocket frames after an upgrade: each read whole, given to the hooks, and
/// written again (with its mask) as the hook left it.
async fn ws_frames<R, W>(mut from: Bytes<R>, mut to: W, place: Place, hooks: Arc<dyn Hooks>) -> Io
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    loop {
        while from.buffer.len() < 2 {
            if !from.fill().await? {
                return to.shutdown().await;
            }
        }
        let head = from.take(2).await?;
        let (first, second) = (head[0], head[1]);
        let masked = second & 0x80 != 0;
        let mut header = head.clone();
        let length = match second & 0x7f {
            126 => {
                let bytes = from.take(2).await?;
                header.extend_from_slice(&bytes);
                usize::from(u16::from_be_bytes([bytes[0], bytes[1]]))
            }
            127 => {
                let bytes = from.take(8).await?;
                header.extend_from_slice(&bytes);
                let mut raw = [0u8; 8];
                raw.copy_from_slice(&bytes);
                usize::try_from(u64::from_be_bytes(raw)).unwrap_or(usize::MAX)
            }
            n => usize::from(n),
        };
        let mask = if masked {
            let key = from.take(4).await?;
            header.extend_from_slice(&key);
            Some([key[0], key[1], key[2], key[3]])
        } else {
            None
        };
        let mut payload = from.take(length).await?;
        if let Some(mask) = mask {
            for (i, byte) in payload.iter_mut().enumerate() {
                *byte ^= mask[i % 4];
            }
        }
        let mut frame = WsFrame {
            opcode: first & 0x0f,
            payload,
        };
        hooks.ws_frame(place, &mut frame);
        header[0] = (first & 0xf0) | (frame.opcode & 0x0f);
        if let Some(mask) = mask {
            for (i, byte) in frame.payload.iter_mut().enumerate() {
                *byte ^= mask[i % 4];
            }
        }
        to.write_all(&header).await?;
        to.write_all(&frame.payload).await?;
        to.flush().await?;
    }
}
