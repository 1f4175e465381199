//! A raw HTTP/1.1 client for judging ACP's remote `/acp` endpoint: one request per TCP
//! connection (`Connection: close`), the answer's status, headers and body kept as the server
//! sent them, a long response body read as it arrives (Server-Sent Events for the GET streams),
//! and the HTTP/2 connection preface sent on its own. Nothing is repaired or retried.
//!
//! An `https://` endpoint is reached over TLS (rustls, ring provider), its certificate checked
//! against the profile's `settings.http_ca` ([`Endpoint::for_ctx`]) or else the platform's
//! roots: HTTP/1.1 offered by ALPN for requests and the WebSocket upgrade (`wss://`), `h2` for
//! the HTTP/2 preface.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use ski::acp::remote::tls;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio_rustls::rustls::ClientConfig;

use crate::check::CheckError;
use crate::context::Ctx;
use crate::vocabulary::acp;

/// The most bytes of a response head.
const MAX_HEAD_BYTES: usize = 64 * 1024;

/// The most bytes of a body read whole, or of one SSE event.
const MAX_BODY_BYTES: usize = 4 * 1024 * 1024;

/// The host, port and path of an `http://` or `https://` URL, and for `https://` the trust its
/// certificate is checked against.
#[derive(Debug, Clone)]
pub struct Endpoint {
    /// `HOST:PORT`.
    pub authority: String,
    /// The path and query, `/acp` by default.
    pub path: String,
    /// `https://`.
    pub secure: bool,
    /// The TLS client of an `https://` endpoint (HTTP/1.1 by ALPN); `None` until a CA is given
    /// (then the platform's roots are read when the first connection opens).
    tls: Option<Arc<ClientConfig>>,
}

impl PartialEq for Endpoint {
    fn eq(&self, other: &Self) -> bool {
        (&self.authority, &self.path, self.secure) == (&other.authority, &other.path, other.secure)
    }
}

impl Eq for Endpoint {}

/// A byte stream to the server: TCP, or TLS over TCP.
pub trait Io: AsyncRead + AsyncWrite + Unpin + Send {}

impl<T: AsyncRead + AsyncWrite + Unpin + Send> Io for T {}

impl Endpoint {
    /// Parses `http://HOST[:PORT][/PATH]` or `https://…` (port 443 by default); every other
    /// scheme is refused. An `https://` endpoint parsed here trusts the platform's roots; see
    /// [`Endpoint::for_ctx`] for the profile's CA.
    pub fn parse(url: &str) -> Result<Self, String> {
        let (rest, secure) = if let Some(rest) = url.strip_prefix("http://") {
            (rest, false)
        } else if let Some(rest) = url.strip_prefix("https://") {
            (rest, true)
        } else {
            return Err(format!(
                "{url}: the URL must start with http:// or https://"
            ));
        };
        let split = rest.find(['/', '?', '#']).unwrap_or(rest.len());
        let (authority, path) = rest.split_at(split);
        if authority.is_empty() {
            return Err(format!("{url}: the URL names no host"));
        }
        let has_port = authority
            .rsplit_once(':')
            .is_some_and(|(_, p)| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()));
        let authority = if has_port {
            authority.to_owned()
        } else {
            format!("{authority}:{}", if secure { 443 } else { 80 })
        };
        let path = path.split('#').next().unwrap_or_default();
        Ok(Self {
            authority,
            path: if path.is_empty() {
                "/acp".to_owned()
            } else {
                path.to_owned()
            },
            secure,
            tls: None,
        })
    }

    /// Parses `url`, an `https://` endpoint trusting the CA file `ca` (PEM) instead of the
    /// platform's roots. The file is read and checked now.
    pub fn parse_trusting(url: &str, ca: Option<&Path>) -> Result<Self, String> {
        let mut endpoint = Self::parse(url)?;
        if let (true, Some(ca)) = (endpoint.secure, ca) {
            let config = tls::client_config(Some(ca), &[tls::ALPN_HTTP1])
                .map_err(|error| format!("settings.http_ca: {error}"))?;
            endpoint.tls = Some(config);
        }
        Ok(endpoint)
    }

    /// Parses `url` with the trust the scenario's profile sets: `settings.http_ca`, else the
    /// platform's roots. A CA file that cannot be used fails the harness, named.
    pub fn for_ctx(ctx: &Ctx, url: &str) -> Result<Self, CheckError> {
        let ca = ctx.setting(&acp::HTTP_CA)?;
        Self::parse_trusting(url, ca.as_deref().map(Path::new)).map_err(CheckError::Harness)
    }

    /// The same endpoint as a `ws://` URL (`wss://` for `https://`), the WebSocket profile's
    /// upgrade.
    pub fn ws_url(&self) -> String {
        let scheme = if self.secure { "wss" } else { "ws" };
        format!("{scheme}://{}{}", self.authority, self.path)
    }

    /// The `http://` or `https://` URL.
    pub fn url(&self) -> String {
        let scheme = if self.secure { "https" } else { "http" };
        format!("{scheme}://{}{}", self.authority, self.path)
    }

    /// The TLS client of an `https://` endpoint offering `alpn`; `None` for `http://`.
    fn client(&self, alpn: &[u8]) -> Result<Option<Arc<ClientConfig>>, String> {
        if !self.secure {
            return Ok(None);
        }
        let config = match &self.tls {
            Some(config) => config.clone(),
            None => platform_roots()?,
        };
        if config.alpn_protocols.iter().any(|name| name == alpn) {
            return Ok(Some(config));
        }
        let mut config = (*config).clone();
        config.alpn_protocols = vec![alpn.to_vec()];
        Ok(Some(Arc::new(config)))
    }

    /// The connector of a `wss://` upgrade to this endpoint; `None` for `http://`.
    pub fn ws_connector(&self) -> Result<Option<tokio_tungstenite::Connector>, String> {
        Ok(self
            .client(tls::ALPN_HTTP1)?
            .map(tokio_tungstenite::Connector::Rustls))
    }

    /// A connection to the server: TCP, then for `https://` the TLS handshake offering `alpn`.
    pub async fn connect(&self, alpn: &[u8]) -> Result<Box<dyn Io>, String> {
        let tcp = TcpStream::connect(&self.authority)
            .await
            .map_err(|e| format!("cannot connect to {}: {e}", self.authority))?;
        let _ = tcp.set_nodelay(true);
        match self.client(alpn)? {
            None => Ok(Box::new(tcp)),
            Some(config) => {
                let stream = tls::connect(config, &self.authority, tcp)
                    .await
                    .map_err(|e| {
                        format!(
                            "{}: {e} (settings.http_ca names that CA's PEM file)",
                            self.url()
                        )
                    })?;
                Ok(Box::new(stream))
            }
        }
    }
}

/// The TLS client trusting the platform's roots (read once per run).
fn platform_roots() -> Result<Arc<ClientConfig>, String> {
    static CONFIG: std::sync::OnceLock<Result<Arc<ClientConfig>, String>> =
        std::sync::OnceLock::new();
    CONFIG
        .get_or_init(|| {
            tls::client_config(None, &[tls::ALPN_HTTP1])
                .map_err(|e| format!("{e} (settings.http_ca)"))
        })
        .clone()
}

/// The connector for a WebSocket `url` a check opens (`wss://` with the profile's
/// `settings.http_ca`, see [`Endpoint::for_ctx`]); `None` for `ws://`.
pub fn ws_connector(
    ctx: &Ctx,
    url: &str,
) -> Result<Option<tokio_tungstenite::Connector>, CheckError> {
    let Some(rest) = url.strip_prefix("wss://") else {
        return Ok(None);
    };
    Endpoint::for_ctx(ctx, &format!("https://{rest}"))?
        .ws_connector()
        .map_err(CheckError::Harness)
}

/// A response's status line and headers.
#[derive(Debug, Clone, Default)]
pub struct Head {
    /// The status code.
    pub status: u16,
    /// Every header as sent, names lower-cased.
    pub headers: Vec<(String, String)>,
}

impl Head {
    /// The first value of header `name`.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// Every value of header `name`.
    pub fn all(&self, name: &str) -> Vec<&str> {
        self.headers
            .iter()
            .filter(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
            .collect()
    }

    /// `STATUS` and the headers, for an Actual line.
    pub fn describe(&self) -> String {
        format!("{} {:?}", self.status, self.headers)
    }
}

/// A response read whole.
#[derive(Debug, Clone, Default)]
pub struct Answer {
    /// Status and headers.
    pub head: Head,
    /// The body.
    pub body: Vec<u8>,
}

impl Answer {
    /// The body as text (lossy).
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// Status, headers and the start of the body, for an Actual line.
    pub fn describe(&self) -> String {
        let text = self.text();
        let body: String = text.chars().take(300).collect();
        format!("{} body {body:?}", self.head.describe())
    }
}

/// One request: method, headers and an optional body.
#[derive(Debug, Clone)]
pub struct Request {
    method: String,
    headers: Vec<(String, String)>,
    body: Option<String>,
}

impl Request {
    /// A request without headers or body.
    pub fn new(method: &str) -> Self {
        Self {
            method: method.to_owned(),
            headers: Vec::new(),
            body: None,
        }
    }

    /// A POST of `body` as `application/json`.
    pub fn post_json(body: &str) -> Self {
        Self::new("POST")
            .header("Content-Type", "application/json")
            .body(body)
    }

    /// A GET of an event stream.
    pub fn get_stream() -> Self {
        Self::new("GET").header("Accept", "text/event-stream")
    }

    /// Adds a header.
    pub fn header(mut self, name: &str, value: &str) -> Self {
        self.headers.push((name.to_owned(), value.to_owned()));
        self
    }

    /// Adds a header when `value` is some.
    pub fn header_opt(self, name: &str, value: Option<&str>) -> Self {
        match value {
            Some(value) => self.header(name, value),
            None => self,
        }
    }

    /// Sets the body.
    pub fn body(mut self, body: &str) -> Self {
        self.body = Some(body.to_owned());
        self
    }

    /// The request line (for the wire log).
    pub fn line(&self) -> String {
        let names: Vec<String> = self
            .headers
            .iter()
            .map(|(k, v)| format!("{k}: {v}"))
            .collect();
        format!(
            "{} [{}] {}",
            self.method,
            names.join(", "),
            self.body.as_deref().unwrap_or("")
        )
    }

    fn bytes(&self, endpoint: &Endpoint) -> Vec<u8> {
        let mut text = format!(
            "{} {} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n",
            self.method, endpoint.path, endpoint.authority
        );
        for (k, v) in &self.headers {
            text.push_str(&format!("{k}: {v}\r\n"));
        }
        if let Some(body) = &self.body {
            text.push_str(&format!("Content-Length: {}\r\n", body.len()));
        }
        text.push_str("\r\n");
        if let Some(body) = &self.body {
            text.push_str(body);
        }
        text.into_bytes()
    }
}

/// How a body ends.
#[derive(Debug)]
enum Framing {
    Length(usize),
    Chunked { left: usize, done: bool },
    Close,
}

/// The body of a response, read as it arrives.
pub struct Body {
    reader: BufReader<Box<dyn Io>>,
    framing: Framing,
}

impl std::fmt::Debug for Body {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Body")
            .field("framing", &self.framing)
            .finish_non_exhaustive()
    }
}

impl Body {
    /// The next bytes of the body; `Ok(None)` at its end.
    pub async fn chunk(&mut self) -> Result<Option<Vec<u8>>, String> {
        let mut buf = vec![0u8; 16 * 1024];
        match &mut self.framing {
            Framing::Length(0) => Ok(None),
            Framing::Length(left) => {
                let want = (*left).min(buf.len());
                let n = self
                    .reader
                    .read(&mut buf[..want])
                    .await
                    .map_err(|e| e.to_string())?;
                if n == 0 {
                    return Err("the connection ended inside the body".to_owned());
                }
                *left -= n;
                buf.truncate(n);
                Ok(Some(buf))
            }
            Framing::Close => {
                let n = self
                    .reader
                    .read(&mut buf)
                    .await
                    .map_err(|e| e.to_string())?;
                if n == 0 {
                    return Ok(None);
                }
                buf.truncate(n);
                Ok(Some(buf))
            }
            Framing::Chunked { left, done } => {
                if *done {
                    return Ok(None);
                }
                if *left == 0 {
                    let line = read_line(&mut self.reader).await?;
                    let size = line.split(';').next().unwrap_or_default().trim();
                    let size = usize::from_str_radix(size, 16)
                        .map_err(|_| format!("a bad chunk size line {line:?}"))?;
                    if size == 0 {
                        // Trailers, then the blank line.
                        loop {
                            if read_line(&mut self.reader).await?.is_empty() {
                                break;
                            }
                        }
                        *done = true;
                        return Ok(None);
                    }
                    *left = size;
                }
                let want = (*left).min(buf.len());
                let n = self
                    .reader
                    .read(&mut buf[..want])
                    .await
                    .map_err(|e| e.to_string())?;
                if n == 0 {
                    return Err("the connection ended inside a chunk".to_owned());
                }
                *left -= n;
                if *left == 0 {
                    read_line(&mut self.reader).await?;
                }
                buf.truncate(n);
                Ok(Some(buf))
            }
        }
    }

    /// The whole rest of the body (at most 4 MiB).
    pub async fn all(mut self) -> Result<Vec<u8>, String> {
        let mut body = Vec::new();
        while let Some(chunk) = self.chunk().await? {
            body.extend_from_slice(&chunk);
            if body.len() > MAX_BODY_BYTES {
                return Err("the body is larger than 4 MiB".to_owned());
            }
        }
        Ok(body)
    }
}

async fn read_line(reader: &mut BufReader<Box<dyn Io>>) -> Result<String, String> {
    let mut line = Vec::new();
    let n = (&mut *reader)
        .take(MAX_HEAD_BYTES as u64)
        .read_until(b'\n', &mut line)
        .await
        .map_err(|e| e.to_string())?;
    if n == 0 {
        return Err("the connection ended".to_owned());
    }
    while matches!(line.last(), Some(b'\n' | b'\r')) {
        line.pop();
    }
    Ok(String::from_utf8_lossy(&line).into_owned())
}

/// Sends `request` on a new connection to `endpoint` and reads the response head; the body is
/// left to read.
pub async fn open(endpoint: &Endpoint, request: &Request) -> Result<(Head, Body), String> {
    let mut tcp = endpoint.connect(tls::ALPN_HTTP1).await?;
    tcp.write_all(&request.bytes(endpoint))
        .await
        .map_err(|e| format!("cannot send the request: {e}"))?;
    let mut reader = BufReader::new(tcp);
    let status_line = read_line(&mut reader).await?;
    let mut words = status_line.split_whitespace();
    let status = match (words.next(), words.next()) {
        (Some(version), Some(code)) if version.starts_with("HTTP/") => code
            .parse::<u16>()
            .map_err(|_| format!("a bad status line {status_line:?}"))?,
        _ => return Err(format!("not an HTTP response: {status_line:?}")),
    };
    let mut head = Head {
        status,
        headers: Vec::new(),
    };
    let mut size = status_line.len();
    loop {
        let line = read_line(&mut reader).await?;
        if line.is_empty() {
            break;
        }
        size += line.len();
        if size > MAX_HEAD_BYTES {
            return Err("the response head is larger than 64 KiB".to_owned());
        }
        if let Some((name, value)) = line.split_once(':') {
            head.headers
                .push((name.trim().to_ascii_lowercase(), value.trim().to_owned()));
        }
    }
    let chunked = head
        .header("transfer-encoding")
        .is_some_and(|v| v.to_ascii_lowercase().contains("chunked"));
    let framing = if request.method == "HEAD" || matches!(status, 101 | 204 | 304) {
        Framing::Length(0)
    } else if chunked {
        Framing::Chunked {
            left: 0,
            done: false,
        }
    } else if let Some(length) = head.header("content-length") {
        Framing::Length(
            length
                .trim()
                .parse()
                .map_err(|_| format!("a bad Content-Length {length:?}"))?,
        )
    } else {
        Framing::Close
    };
    Ok((head, Body { reader, framing }))
}

/// Sends `request` and reads the whole response within `limit`.
pub async fn send(
    endpoint: &Endpoint,
    request: &Request,
    limit: Duration,
) -> Result<Answer, String> {
    tokio::time::timeout(limit, async {
        let (head, body) = open(endpoint, request).await?;
        let body = body.all().await?;
        Ok(Answer { head, body })
    })
    .await
    .map_err(|_| format!("no whole answer within {limit:?} to {}", request.line()))?
}

/// Server-Sent Events read from a body: the `data` of each event. Lines are split on the raw
/// bytes and decoded whole, so a character split between two chunks of the body is kept.
#[derive(Debug)]
pub struct Events {
    body: Body,
    pending: Vec<u8>,
    data: Vec<String>,
}

impl Events {
    /// Reads `body` as an event stream.
    pub fn new(body: Body) -> Self {
        Self {
            body,
            pending: Vec::new(),
            data: Vec::new(),
        }
    }

    /// The data of the next event; `Ok(None)` when the stream ends.
    pub async fn next(&mut self) -> Result<Option<String>, String> {
        loop {
            while let Some(end) = self.pending.iter().position(|b| *b == b'\n') {
                let mut line: Vec<u8> = self.pending.drain(..=end).collect();
                line.pop();
                if line.last() == Some(&b'\r') {
                    line.pop();
                }
                if line.is_empty() {
                    if !self.data.is_empty() {
                        let event = self.data.join("\n");
                        self.data.clear();
                        return Ok(Some(event));
                    }
                    continue;
                }
                let line = String::from_utf8_lossy(&line);
                if let Some(value) = line.strip_prefix("data:") {
                    self.data
                        .push(value.strip_prefix(' ').unwrap_or(value).to_owned());
                }
            }
            if self.pending.len() > MAX_BODY_BYTES {
                return Err("an event larger than 4 MiB".to_owned());
            }
            match self.body.chunk().await? {
                Some(bytes) => self.pending.extend_from_slice(&bytes),
                None => return Ok(None),
            }
        }
    }
}

/// Sends the HTTP/2 connection preface with an empty SETTINGS frame (cleartext with prior
/// knowledge, or over TLS after ALPN offered `h2` alone) and returns the type of the first frame
/// the server answers with (4 is SETTINGS), or what it sent instead.
pub async fn h2_preface(endpoint: &Endpoint, limit: Duration) -> Result<u8, String> {
    tokio::time::timeout(limit, async {
        let mut tcp = endpoint.connect(tls::ALPN_H2).await?;
        let mut hello = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
        hello.extend_from_slice(&[0, 0, 0, 4, 0, 0, 0, 0, 0]);
        tcp.write_all(&hello).await.map_err(|e| e.to_string())?;
        let mut header = [0u8; 9];
        tcp.read_exact(&mut header)
            .await
            .map_err(|e| format!("no HTTP/2 frame in answer to the connection preface ({e})"))?;
        if header.starts_with(b"HTTP/") {
            return Err(format!(
                "an HTTP/1 answer: {:?}",
                String::from_utf8_lossy(&header)
            ));
        }
        Ok(header[3])
    })
    .await
    .map_err(|_| format!("no answer to the HTTP/2 preface within {limit:?}"))?
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_are_parsed_http_and_https() {
        let e = Endpoint::parse("http://127.0.0.1:4000/acp").unwrap();
        assert_eq!(e.authority, "127.0.0.1:4000");
        assert_eq!(e.path, "/acp");
        assert_eq!(e.ws_url(), "ws://127.0.0.1:4000/acp");
        assert_eq!(Endpoint::parse("http://h").unwrap().authority, "h:80");
        let secure = Endpoint::parse("https://h/acp").unwrap();
        assert!(secure.secure);
        assert_eq!(secure.authority, "h:443");
        assert_eq!(secure.ws_url(), "wss://h:443/acp");
        assert_eq!(secure.url(), "https://h:443/acp");
        assert!(Endpoint::parse("ws://h:1/acp").is_err());
        let error =
            Endpoint::parse_trusting("https://h/acp", Some(Path::new("/nonexistent/ca.pem")))
                .unwrap_err();
        assert!(
            error.contains("http_ca") && error.contains("ca.pem"),
            "{error}"
        );
    }
}
