//! The ACP defect corpus's HTTP front: ski's remote `/acp` endpoint (`ski acp serve --transport
//! http`) behind a relay of the corpus's own that passes every request and answer on unchanged
//! (one upstream TCP connection per client connection, the HTTP/2 preface and WebSocket upgrades
//! piped as bytes), or breaks exactly one requirement of the RFD with `--http-front-defect NAME`.
//! The trials program runs it as `<test> --acp-http-front AGENT ARGV…` (`{corpus_http_front}` in
//! `corpus.toml`); the main test program starts it in-process ([`start`]).
//!
//! The runner appends its `http_args` (`--transport http --listen 127.0.0.1:0`) to the command:
//! they go to the agent, whose printed `http://` address the front relays to; the front then
//! listens on a port of its own and prints `listening on http://…/acp` as the agent would.

use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::Duration;

use ski::transport::child::{ChildSpec, OutputStream, spawn};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};

/// The first argument that turns the test binary into the front.
pub const FLAG: &str = "--acp-http-front";

/// The argument, anywhere after [`FLAG`], that names the front's defect.
const DEFECT_FLAG: &str = "--http-front-defect";

/// How long the agent has to print its address.
const START_LIMIT: Duration = Duration::from_secs(60);

/// The one requirement of the RFD the front breaks, or none.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Defect {
    /// Nothing: every byte passes unchanged.
    None,
    /// POSTs answered 202 reach the client as 200 (ACP-HTTP-002).
    AcceptsAs200,
    /// DELETE is answered 202 without ending the connection (ACP-HTTP-013).
    IgnoresDelete,
    /// A batch POST is answered 202 instead of 501 (ACP-HTTP-010).
    AcceptsBatch,
    /// A GET naming an unknown session is answered 200 instead of 404 (ACP-HTTP-008).
    OpensUnknownSession,
}

impl Defect {
    /// The defect `name` names.
    pub fn parse(name: &str) -> Result<Self, String> {
        Ok(match name {
            "accepts-as-200" => Defect::AcceptsAs200,
            "ignores-delete" => Defect::IgnoresDelete,
            "accepts-batch" => Defect::AcceptsBatch,
            "opens-unknown-session" => Defect::OpensUnknownSession,
            other => return Err(format!("unknown {DEFECT_FLAG} {other:?}")),
        })
    }
}

/// Runs the front when the command line asks for it; its exit code, or `None` for a test run.
pub fn run_if_asked() -> Option<ExitCode> {
    let argv: Vec<String> = std::env::args().collect();
    if argv.get(1).map(String::as_str) != Some(FLAG) {
        return None;
    }
    let mut agent = Vec::new();
    let mut defect = Defect::None;
    let mut words = argv[2..].iter();
    while let Some(word) = words.next() {
        if word != DEFECT_FLAG {
            agent.push(word.clone());
            continue;
        }
        match words.next().map(|name| Defect::parse(name)) {
            Some(Ok(parsed)) => defect = parsed,
            Some(Err(error)) => return Some(fail(&error, 2)),
            None => return Some(fail(&format!("{DEFECT_FLAG} needs a name"), 2)),
        }
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => return Some(fail(&format!("no runtime: {error}"), 5)),
    };
    Some(match runtime.block_on(serve(&agent, defect)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => fail(&error, 4),
    })
}

fn fail(error: &str, code: u8) -> ExitCode {
    eprintln!("corpus http front: {error}");
    ExitCode::from(code)
}

/// Starts the agent, waits for its address, then relays every connection to it.
async fn serve(agent: &[String], defect: Defect) -> Result<(), String> {
    let spec = ChildSpec::from_argv("agent", agent).ok_or("no agent command")?;
    let mut child = spawn(spec).map_err(|e| format!("cannot start the agent: {e}"))?;
    let upstream = tokio::time::timeout(START_LIMIT, async {
        while let Some((_, line)) = child.next_output_line().await {
            if let Some(authority) = http_authority(&line) {
                return Some(authority);
            }
            eprintln!("{line}");
        }
        None
    })
    .await
    .ok()
    .flatten()
    .ok_or("the agent printed no http:// address")?;
    let (address, relay) = start(upstream, defect).await?;
    eprintln!("corpus http front: listening on http://{address}/acp");
    let ended = tokio::spawn(async move {
        while let Some((stream, line)) = child.next_output_line().await {
            if stream == OutputStream::Stderr || !line.is_empty() {
                eprintln!("{line}");
            }
        }
        let _ = child.wait().await;
    });
    tokio::select! {
        _ = ended => Err("the agent ended".to_owned()),
        _ = relay => Err("the relay ended".to_owned()),
    }
}

/// Listens on a loopback port and relays every connection to `upstream` (`HOST:PORT`) with
/// `defect`: the address and the task accepting connections (abort it to stop).
pub async fn start(
    upstream: String,
    defect: Defect,
) -> Result<(SocketAddr, tokio::task::JoinHandle<()>), String> {
    let listener = TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(|e| format!("cannot listen: {e}"))?;
    let address = listener.local_addr().map_err(|e| e.to_string())?;
    let task = tokio::spawn(async move {
        while let Ok((client, _)) = listener.accept().await {
            let upstream = upstream.clone();
            tokio::spawn(async move {
                if let Err(error) = relay(client, &upstream, defect).await {
                    eprintln!("corpus http front: {error}");
                }
            });
        }
    });
    Ok((address, task))
}

/// `HOST:PORT` of the first `http://` address in `line`.
pub fn http_authority(line: &str) -> Option<String> {
    let start = line.find("http://")? + "http://".len();
    let authority: String = line[start..]
        .chars()
        .take_while(|c| !c.is_whitespace() && !matches!(c, '/' | '"'))
        .collect();
    (!authority.is_empty()).then_some(authority)
}

/// Reads a head (up to the blank line) as text.
async fn read_head<R: tokio::io::AsyncBufRead + Unpin>(reader: &mut R) -> std::io::Result<String> {
    let mut head = String::new();
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).await? == 0 {
            break;
        }
        let end = line == "\r\n" || line == "\n";
        head.push_str(&line);
        if end || head.len() > 64 * 1024 {
            break;
        }
    }
    Ok(head)
}

fn header<'h>(head: &'h str, name: &str) -> Option<&'h str> {
    head.lines().skip(1).find_map(|line| {
        let (key, value) = line.split_once(':')?;
        key.trim().eq_ignore_ascii_case(name).then(|| value.trim())
    })
}

const ACCEPTED: &[u8] = b"HTTP/1.1 202 Accepted\r\ncontent-length: 0\r\nconnection: close\r\n\r\n";

async fn relay(client: TcpStream, upstream: &str, defect: Defect) -> Result<(), String> {
    let mut client = BufReader::new(client);
    let head = read_head(&mut client).await.map_err(|e| e.to_string())?;
    let method = head
        .split_whitespace()
        .next()
        .unwrap_or_default()
        .to_owned();
    let length: usize = header(&head, "content-length")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let mut body = vec![0u8; if method == "PRI" { 0 } else { length }];
    client
        .read_exact(&mut body)
        .await
        .map_err(|e| e.to_string())?;
    let connection = header(&head, "acp-connection-id").is_some();
    let answer_here = match defect {
        Defect::IgnoresDelete => method == "DELETE" && connection,
        Defect::AcceptsBatch => method == "POST" && body.first() == Some(&b'['),
        _ => false,
    };
    if answer_here {
        let mut client = client.into_inner();
        return client.write_all(ACCEPTED).await.map_err(|e| e.to_string());
    }
    let mut up = TcpStream::connect(upstream)
        .await
        .map_err(|e| format!("cannot reach the agent: {e}"))?;
    let buffered = client.buffer().to_vec();
    up.write_all(head.as_bytes())
        .await
        .map_err(|e| e.to_string())?;
    up.write_all(&body).await.map_err(|e| e.to_string())?;
    up.write_all(&buffered).await.map_err(|e| e.to_string())?;
    let client = client.into_inner();
    let (mut client_read, mut client_write) = client.into_split();
    let (up_read, mut up_write) = up.into_split();
    let upward = tokio::spawn(async move {
        let _ = tokio::io::copy(&mut client_read, &mut up_write).await;
        let _ = up_write.shutdown().await;
    });
    let mut up_read = BufReader::new(up_read);
    if method == "PRI" {
        let _ = tokio::io::copy(&mut up_read, &mut client_write).await;
        upward.abort();
        return Ok(());
    }
    let answer = read_head(&mut up_read).await.map_err(|e| e.to_string())?;
    let session_get = method == "GET" && header(&head, "acp-session-id").is_some();
    let answer = match defect {
        Defect::AcceptsAs200 if method == "POST" && answer.starts_with("HTTP/1.1 202") => {
            answer.replacen("HTTP/1.1 202 Accepted", "HTTP/1.1 200 OK", 1)
        }
        Defect::OpensUnknownSession if session_get && answer.starts_with("HTTP/1.1 404") => {
            // An empty event stream.
            let _ = client_write
                .write_all(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: 0\r\n\r\n")
                .await;
            upward.abort();
            return Ok(());
        }
        _ => answer,
    };
    client_write
        .write_all(answer.as_bytes())
        .await
        .map_err(|e| e.to_string())?;
    let _ = tokio::io::copy(&mut up_read, &mut client_write).await;
    let _ = client_write.shutdown().await;
    upward.abort();
    Ok(())
}
