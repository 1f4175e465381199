//! The corpus client's remote modes, for the client rows of ACP's remote transport RFD
//! (ACP-HTTP-018 to -027), started as `<test> --acp-client --remote MODE …`:
//!
//! - `relay --defect NAME --upstream URL -- CLIENT…`: a relay between a client and the runner's
//!   front at `URL` (the runner's own relay, `ski_conformance::suites::acp::client::relay`, with
//!   hooks of the corpus) that breaks one requirement of every request or frame that passes. It
//!   listens on a loopback port, starts `CLIENT…` with the word `@relay` replaced by its own
//!   `http://…/acp` URL, passes the client's output on and exits with its code.
//! - `http1 --endpoint URL --prompt TEXT`: a Streamable HTTP client that conforms to every client
//!   requirement of the RFD but one: it speaks HTTP/1.1 (one request per TCP connection), not
//!   HTTP/2. It runs one turn, allows the permission the agent asks, prints the
//!   `prompt_result` line `ski acp client connect --json` prints and ends the connection.

use std::collections::BTreeMap;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use ski::transport::child::{ChildSpec, OutputStream, spawn};
use ski_conformance::suites::acp::client::relay::{Head, Hooks, Place, Relay, Version, WsFrame};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;

/// The word that selects a remote mode after [`super::FLAG`].
pub const REMOTE: &str = "--remote";

/// How long the HTTP/1.1 client waits for any one message.
const WAIT: Duration = Duration::from_secs(20);

/// The one requirement the relay breaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Defect {
    /// Every request goes without `Cookie` (ACP-HTTP-020).
    StripCookie,
    /// Session-scoped POSTs go with `Content-Type: text/plain` (ACP-HTTP-021).
    PostTextPlain,
    /// The connection's GET stream asks `Accept: application/json` (ACP-HTTP-022).
    AcceptJson,
    /// DELETE goes without `Acp-Connection-Id` (ACP-HTTP-023).
    DeleteWithoutConnection,
    /// POSTs go without `Acp-Session-Id` (ACP-HTTP-024).
    PostWithoutSession,
    /// No request carries `Acp-Protocol-Version` (ACP-HTTP-027).
    NoProtocolVersion,
    /// Text frames go as binary frames (ACP-HTTP-026).
    BinaryFrames,
}

impl Defect {
    fn parse(name: &str) -> Result<Self, String> {
        Ok(match name {
            "strip-cookie" => Defect::StripCookie,
            "post-text-plain" => Defect::PostTextPlain,
            "accept-json" => Defect::AcceptJson,
            "delete-without-connection" => Defect::DeleteWithoutConnection,
            "post-without-session" => Defect::PostWithoutSession,
            "no-protocol-version" => Defect::NoProtocolVersion,
            "binary-frames" => Defect::BinaryFrames,
            other => return Err(format!("unknown relay defect {other:?}")),
        })
    }
}

impl Hooks for Defect {
    fn request(&self, _: Place, _: Version, head: &mut Head) {
        let upgrade = head.get("upgrade").is_some();
        let scoped = head.get("acp-session-id").is_some();
        match (self, head.method.as_str()) {
            (Defect::StripCookie, _) => head.remove("cookie"),
            (Defect::PostTextPlain, "POST") if scoped => head.set("content-type", "text/plain"),
            (Defect::AcceptJson, "GET") if !upgrade && !scoped => {
                head.set("accept", "application/json");
            }
            (Defect::DeleteWithoutConnection, "DELETE") => head.remove("acp-connection-id"),
            (Defect::PostWithoutSession, "POST") => head.remove("acp-session-id"),
            (Defect::NoProtocolVersion, _) => head.remove("acp-protocol-version"),
            _ => {}
        }
    }

    fn body(&self, _: Place, _: &[u8]) {}

    fn answer(&self, _: Place, _: &mut Head) {}

    fn answer_body(&self, _: Place, _: &[u8]) {}

    fn ws_frame(&self, _: Place, frame: &mut WsFrame) {
        if *self == Defect::BinaryFrames && frame.opcode == 1 {
            frame.opcode = 2;
        }
    }
}

/// Runs a remote mode; `words` follow [`REMOTE`].
pub fn run(words: &[String]) -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => return fail(&format!("no runtime: {error}"), 5),
    };
    let result = match words.first().map(String::as_str) {
        Some("relay") => runtime.block_on(relay(&words[1..])),
        Some("http1") => runtime.block_on(http1(&words[1..])),
        _ => Err("--remote needs relay or http1".to_owned()),
    };
    match result {
        Ok(code) => code,
        Err(error) => fail(&error, 4),
    }
}

fn fail(error: &str, code: u8) -> ExitCode {
    eprintln!("corpus client (remote): {error}");
    ExitCode::from(code)
}

/// The value after `flag` among `words`.
fn option<'w>(words: &'w [String], flag: &str) -> Result<&'w str, String> {
    words
        .iter()
        .position(|w| w == flag)
        .and_then(|at| words.get(at + 1))
        .map(String::as_str)
        .ok_or_else(|| format!("{flag} is missing"))
}

/// `HOST:PORT` of an `http://HOST:PORT/…` URL.
fn authority(url: &str) -> Result<String, String> {
    let rest = url
        .strip_prefix("http://")
        .ok_or_else(|| format!("{url} is no http:// URL"))?;
    Ok(rest.split('/').next().unwrap_or_default().to_owned())
}

async fn relay(words: &[String]) -> Result<ExitCode, String> {
    let split = words
        .iter()
        .position(|w| w == "--")
        .ok_or("relay needs -- CLIENT…")?;
    let (options, client) = (&words[..split], &words[split + 1..]);
    let defect = Defect::parse(option(options, "--defect")?)?;
    let upstream = authority(option(options, "--upstream")?)?;
    let upstream = tokio::net::lookup_host(&upstream)
        .await
        .map_err(|e| e.to_string())?
        .next()
        .ok_or("the upstream has no address")?;
    let listener = TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(|e| format!("cannot listen: {e}"))?;
    let relay = Relay::start(listener, upstream, Arc::new(defect));
    let url = format!("http://{}/acp", relay.addr());
    let argv: Vec<String> = client
        .iter()
        .map(|w| {
            if w == "@relay" {
                url.clone()
            } else {
                w.clone()
            }
        })
        .collect();
    let spec = ChildSpec::from_argv("client", &argv).ok_or("no client command")?;
    let mut child = spawn(spec).map_err(|e| format!("cannot start the client: {e}"))?;
    while let Some((stream, line)) = child.next_output_line().await {
        match stream {
            OutputStream::Stdout => println!("{line}"),
            OutputStream::Stderr => eprintln!("{line}"),
        }
    }
    let status = child.wait().await.map_err(|e| e.to_string())?;
    drop(relay);
    Ok(ExitCode::from(
        status
            .code()
            .and_then(|c| u8::try_from(c).ok())
            .unwrap_or(1),
    ))
}

/// The HTTP/1.1 client's connection state: the endpoint, cookies and headers it sends.
struct H1 {
    authority: String,
    cookies: BTreeMap<String, String>,
    connection: Option<String>,
    version: Option<u64>,
}

/// An answer: status, headers, body.
struct Answer {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl H1 {
    fn head(&self, method: &str, session: Option<&str>, extra: &[(&str, &str)]) -> String {
        let mut text = format!("{method} /acp HTTP/1.1\r\nhost: {}\r\n", self.authority);
        if let Some(id) = &self.connection {
            text.push_str(&format!("acp-connection-id: {id}\r\n"));
        }
        if let Some(version) = self.version {
            text.push_str(&format!("acp-protocol-version: {version}\r\n"));
        }
        if let Some(id) = session {
            text.push_str(&format!("acp-session-id: {id}\r\n"));
        }
        if !self.cookies.is_empty() {
            let pairs: Vec<String> = self
                .cookies
                .iter()
                .map(|(n, v)| format!("{n}={v}"))
                .collect();
            text.push_str(&format!("cookie: {}\r\n", pairs.join("; ")));
        }
        for (name, value) in extra {
            text.push_str(&format!("{name}: {value}\r\n"));
        }
        text
    }

    fn keep_cookies(&mut self, headers: &[(String, String)]) {
        for (name, value) in headers {
            if name == "set-cookie"
                && let Some((n, v)) = value.split(';').next().and_then(|p| p.split_once('='))
            {
                self.cookies
                    .insert(n.trim().to_owned(), v.trim().to_owned());
            }
        }
    }

    /// One request on its own TCP connection, its answer read whole.
    async fn exchange(
        &mut self,
        method: &str,
        session: Option<&str>,
        body: &str,
    ) -> Result<Answer, String> {
        let mut tcp = TcpStream::connect(&self.authority)
            .await
            .map_err(|e| e.to_string())?;
        let mut head = self.head(
            method,
            session,
            &[
                ("content-type", "application/json"),
                ("connection", "close"),
            ],
        );
        head.push_str(&format!("content-length: {}\r\n\r\n", body.len()));
        tcp.write_all(head.as_bytes())
            .await
            .map_err(|e| e.to_string())?;
        tcp.write_all(body.as_bytes())
            .await
            .map_err(|e| e.to_string())?;
        let mut reader = BufReader::new(tcp);
        let (status, headers) = read_head(&mut reader).await?;
        self.keep_cookies(&headers);
        let length: usize = header(&headers, "content-length")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        let mut body = vec![0u8; length];
        reader
            .read_exact(&mut body)
            .await
            .map_err(|e| e.to_string())?;
        Ok(Answer {
            status,
            headers,
            body,
        })
    }

    /// Opens a GET stream whose SSE events go to `events`.
    async fn stream(
        &mut self,
        session: Option<&str>,
        events: mpsc::UnboundedSender<Value>,
    ) -> Result<(), String> {
        let mut tcp = TcpStream::connect(&self.authority)
            .await
            .map_err(|e| e.to_string())?;
        let mut head = self.head("GET", session, &[("accept", "text/event-stream")]);
        head.push_str("\r\n");
        tcp.write_all(head.as_bytes())
            .await
            .map_err(|e| e.to_string())?;
        let mut reader = BufReader::new(tcp);
        let (status, headers) = read_head(&mut reader).await?;
        self.keep_cookies(&headers);
        if status != 200 {
            return Err(format!("the GET stream was answered {status}"));
        }
        let chunked = header(&headers, "transfer-encoding").is_some_and(|v| v.contains("chunked"));
        tokio::spawn(async move {
            let mut text = String::new();
            loop {
                let mut line = String::new();
                match reader.read_line(&mut line).await {
                    Ok(0) | Err(_) => return,
                    Ok(_) => {}
                }
                if chunked {
                    let size = usize::from_str_radix(line.trim(), 16).unwrap_or(0);
                    let mut chunk = vec![0u8; size + 2];
                    if size == 0 || reader.read_exact(&mut chunk).await.is_err() {
                        return;
                    }
                    text.push_str(&String::from_utf8_lossy(&chunk[..size]));
                } else {
                    text.push_str(&line);
                }
                while let Some(end) = text.find("\n\n") {
                    let event: String = text.drain(..end + 2).collect();
                    let data: Vec<&str> = event
                        .lines()
                        .filter_map(|l| l.strip_prefix("data:"))
                        .map(str::trim_start)
                        .collect();
                    if let Ok(value) = serde_json::from_str(&data.join("\n"))
                        && events.send(value).is_err()
                    {
                        return;
                    }
                }
            }
        });
        Ok(())
    }
}

async fn read_head(
    reader: &mut BufReader<TcpStream>,
) -> Result<(u16, Vec<(String, String)>), String> {
    let mut first = String::new();
    reader
        .read_line(&mut first)
        .await
        .map_err(|e| e.to_string())?;
    let status = first
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("no status line: {first:?}"))?;
    let mut headers = Vec::new();
    loop {
        let mut line = String::new();
        if reader
            .read_line(&mut line)
            .await
            .map_err(|e| e.to_string())?
            == 0
            || line.trim().is_empty()
        {
            break;
        }
        if let Some((name, value)) = line.split_once(':') {
            headers.push((name.trim().to_ascii_lowercase(), value.trim().to_owned()));
        }
    }
    Ok((status, headers))
}

fn header<'h>(headers: &'h [(String, String)], name: &str) -> Option<&'h str> {
    headers
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, v)| v.as_str())
}

async fn next(
    events: &mut mpsc::UnboundedReceiver<Value>,
    pred: impl Fn(&Value) -> bool,
) -> Result<Value, String> {
    loop {
        let event = tokio::time::timeout(WAIT, events.recv())
            .await
            .map_err(|_| "no answer in time".to_owned())?
            .ok_or("the streams ended")?;
        if pred(&event) {
            return Ok(event);
        }
    }
}

async fn http1(words: &[String]) -> Result<ExitCode, String> {
    let url = option(words, "--endpoint")?;
    let prompt = option(words, "--prompt")?;
    let mut h1 = H1 {
        authority: authority(url)?,
        cookies: BTreeMap::new(),
        connection: None,
        version: None,
    };
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": 1, "clientCapabilities": {}, "clientInfo": {"name": "corpus-http1", "version": "0"}}});
    let answer = h1.exchange("POST", None, &init.to_string()).await?;
    if answer.status != 200 {
        return Err(format!("initialize was answered {}", answer.status));
    }
    h1.connection = header(&answer.headers, "acp-connection-id").map(str::to_owned);
    let body: Value = serde_json::from_slice(&answer.body).map_err(|e| e.to_string())?;
    h1.version = body
        .pointer("/result/protocolVersion")
        .and_then(Value::as_u64);
    let (sender, mut events) = mpsc::unbounded_channel();
    h1.stream(None, sender.clone()).await?;
    let cwd = std::env::current_dir().map_err(|e| e.to_string())?;
    let new = json!({"jsonrpc": "2.0", "id": 2, "method": "session/new",
        "params": {"cwd": cwd, "mcpServers": []}});
    h1.exchange("POST", None, &new.to_string()).await?;
    let made = next(&mut events, |v| v.get("id") == Some(&json!(2))).await?;
    let session = made
        .pointer("/result/sessionId")
        .and_then(Value::as_str)
        .ok_or_else(|| format!("session/new failed: {made}"))?
        .to_owned();
    h1.stream(Some(&session), sender).await?;
    let turn = json!({"jsonrpc": "2.0", "id": 3, "method": "session/prompt",
        "params": {"sessionId": session, "prompt": [{"type": "text", "text": prompt}]}});
    h1.exchange("POST", Some(&session), &turn.to_string())
        .await?;
    loop {
        let event = next(&mut events, |_| true).await?;
        if event.get("method").and_then(Value::as_str) == Some("session/request_permission") {
            let option = event
                .pointer("/params/options")
                .and_then(Value::as_array)
                .and_then(|options| {
                    options.iter().find(|o| {
                        o.get("kind")
                            .and_then(Value::as_str)
                            .is_some_and(|k| k.starts_with("allow"))
                    })
                })
                .and_then(|o| o.get("optionId").cloned())
                .unwrap_or(Value::Null);
            let answer = json!({"jsonrpc": "2.0", "id": event.get("id"),
                "result": {"outcome": {"outcome": "selected", "optionId": option}}});
            h1.exchange("POST", Some(&session), &answer.to_string())
                .await?;
        } else if event.get("id") == Some(&json!(3)) {
            let reason = event.pointer("/result/stopReason").cloned();
            println!(
                "{}",
                json!({"type": "prompt_result", "sessionId": session, "stopReason": reason})
            );
            break;
        }
    }
    h1.exchange("DELETE", None, "").await?;
    Ok(ExitCode::SUCCESS)
}
