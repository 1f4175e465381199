//! The two ends `ski-mock-agent record` joins: the client on this process's stdio or on the one
//! WebSocket connection it accepts (`--listen`), and the agent as a child on stdio or at a
//! WebSocket URL (`--connect`). Each message passes as it came: a line stays the same bytes, a
//! text or binary frame the same frame; only pings are answered by each hop itself.

use std::time::Duration;

use anyhow::anyhow;
use futures::{SinkExt, StreamExt};
use ski::exit::CommandError;
use ski::jsonrpc::{FrameError, LineReader};
use ski::transport::child::{Child, ChildSpec, OutputStream, spawn};
use ski::transport::ws_server::{GuardedStream, WsServer, WsServerOptions};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message as WsMessage;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

/// The longest line or WebSocket message passed through.
pub const MAX_MESSAGE_BYTES: usize = ski::jsonrpc::DEFAULT_MAX_LINE_BYTES;

/// How long connecting to the agent's WebSocket may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// One message crossing the recorder, as it came.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Message {
    /// A line (without its newline) or a text frame.
    Text(Vec<u8>),
    /// A binary frame; passed on, never recorded (ACP speaks text).
    Binary(Vec<u8>),
}

impl Message {
    /// The text recorded for it, if it is text.
    pub fn text(&self) -> Option<String> {
        match self {
            Message::Text(bytes) => Some(String::from_utf8_lossy(bytes).into_owned()),
            Message::Binary(_) => None,
        }
    }
}

/// What came from one end.
#[derive(Debug)]
pub enum Event {
    /// A message to pass on.
    Message(Message),
    /// A message over [`MAX_MESSAGE_BYTES`] that was not passed on.
    Oversize(u64),
    /// A line the agent wrote on stderr.
    Stderr(String),
    /// The end is gone; for the agent, with the code to exit with.
    Closed(i32),
}

/// The client's side.
pub enum ClientEnd<R, W> {
    /// NDJSON on this process's stdin and stdout.
    Stdio {
        /// The client's lines.
        lines: LineReader<R>,
        /// Where the agent's lines go.
        out: W,
    },
    /// The one WebSocket connection accepted on `--listen`.
    WebSocket(Box<WebSocketStream<GuardedStream>>),
}

impl<R, W> ClientEnd<R, W>
where
    R: AsyncRead + Send + Unpin,
    W: AsyncWrite + Send + Unpin,
{
    /// The client on stdio.
    pub fn stdio(stdin: R, stdout: W) -> Self {
        ClientEnd::Stdio {
            lines: LineReader::with_max_line_bytes(stdin, MAX_MESSAGE_BYTES),
            out: stdout,
        }
    }

    /// The next thing the client sent (cancel safe).
    pub async fn next(&mut self) -> Event {
        match self {
            ClientEnd::Stdio { lines, .. } => match lines.next_line().await {
                Some(Ok(line)) => Event::Message(Message::Text(line.to_vec())),
                Some(Err(FrameError::Oversize { length, .. })) => Event::Oversize(length),
                Some(Err(FrameError::Io(_))) | None => Event::Closed(0),
            },
            ClientEnd::WebSocket(socket) => next_frame(socket.as_mut()).await,
        }
    }

    /// Passes the agent's message on; a client that is gone is not an error (the agent's end
    /// decides when recording stops).
    pub async fn send(&mut self, message: Message) {
        match self {
            ClientEnd::Stdio { out, .. } => {
                let mut bytes = match message {
                    Message::Text(bytes) | Message::Binary(bytes) => bytes,
                };
                bytes.push(b'\n');
                let _ = out.write_all(&bytes).await;
                let _ = out.flush().await;
            }
            ClientEnd::WebSocket(socket) => {
                let _ = socket.send(frame(message)).await;
            }
        }
    }

    /// Tells the client the agent is gone: stdout closed, or a close frame.
    pub async fn close(&mut self) {
        match self {
            ClientEnd::Stdio { out, .. } => {
                let _ = out.shutdown().await;
            }
            ClientEnd::WebSocket(socket) => {
                let _ = SinkExt::close(socket.as_mut()).await;
            }
        }
    }
}

/// The agent's side.
pub enum AgentEnd {
    /// A child on stdio; `stdin` is dropped when the client is gone.
    Child {
        /// The agent's process (its own group).
        child: Box<Child>,
        /// Its input while the client is there.
        stdin: Option<ski::transport::LoggedWrite<tokio::process::ChildStdin>>,
    },
    /// A WebSocket connection to the agent.
    WebSocket {
        /// The connection.
        socket: Box<WebSocketStream<MaybeTlsStream<TcpStream>>>,
        /// Whether the client's end was passed on as a close frame.
        closing: bool,
    },
}

impl AgentEnd {
    /// Starts the agent's command; one that cannot start is an upstream error (exit 4).
    pub fn spawn(command: &[String]) -> Result<Self, CommandError> {
        let spec = ChildSpec::from_argv("agent", command)
            .ok_or_else(|| CommandError::invalid_input(anyhow!("no agent command after --")))?
            .die_with_parent();
        let mut child = spawn(spec).map_err(|e| CommandError::upstream(anyhow!(e)))?;
        let stdin = child
            .take_stdin()
            .map_err(|e| CommandError::internal(anyhow!(e)))?;
        Ok(AgentEnd::Child {
            child: Box::new(child),
            stdin: Some(stdin),
        })
    }

    /// Connects to the agent at a `ws://` URL; one that cannot be reached is an upstream error
    /// (exit 4).
    pub async fn connect(url: &str) -> Result<Self, CommandError> {
        if !url.starts_with("ws://") {
            return Err(CommandError::invalid_input(anyhow!(
                "--connect {url:?}: the url must start with ws://"
            )));
        }
        let config = tokio_tungstenite::tungstenite::protocol::WebSocketConfig::default()
            .max_message_size(Some(MAX_MESSAGE_BYTES))
            .max_frame_size(Some(MAX_MESSAGE_BYTES));
        let connecting = tokio_tungstenite::connect_async_with_config(url, Some(config), true);
        let (socket, _) = tokio::time::timeout(CONNECT_TIMEOUT, connecting)
            .await
            .map_err(|_| {
                CommandError::upstream(anyhow!(
                    "cannot connect to {url}: no answer within {}s",
                    CONNECT_TIMEOUT.as_secs()
                ))
            })?
            .map_err(|e| CommandError::upstream(anyhow!("cannot connect to {url}: {e}")))?;
        Ok(AgentEnd::WebSocket {
            socket: Box::new(socket),
            closing: false,
        })
    }

    /// The next thing the agent did (cancel safe).
    pub async fn next(&mut self) -> Event {
        match self {
            AgentEnd::Child { child, .. } => match child.next_output_line().await {
                Some((OutputStream::Stdout, line)) => {
                    Event::Message(Message::Text(line.into_bytes()))
                }
                Some((OutputStream::Stderr, line)) => Event::Stderr(line),
                None => {
                    let status = child.wait().await.ok();
                    Event::Closed(status.map_or(1, exit_code))
                }
            },
            AgentEnd::WebSocket { socket, .. } => next_frame(socket.as_mut()).await,
        }
    }

    /// Passes the client's message on; an agent that stopped reading ends by itself, and its
    /// end decides when recording stops.
    pub async fn send(&mut self, message: Message) {
        match self {
            AgentEnd::Child { stdin, .. } => {
                if let Some(writer) = stdin.as_mut() {
                    let mut bytes = match message {
                        Message::Text(bytes) | Message::Binary(bytes) => bytes,
                    };
                    bytes.push(b'\n');
                    let _ = writer.write_all(&bytes).await;
                    let _ = writer.flush().await;
                }
            }
            AgentEnd::WebSocket { socket, .. } => {
                let _ = socket.send(frame(message)).await;
            }
        }
    }

    /// Tells the agent the client is gone: its stdin closed, or a close frame.
    pub async fn close_input(&mut self) {
        match self {
            AgentEnd::Child { stdin, .. } => {
                // Dropping the pipe's end is what the agent sees as the end of its input.
                drop(stdin.take());
            }
            AgentEnd::WebSocket { socket, closing } => {
                if !*closing {
                    *closing = true;
                    let _ = SinkExt::close(socket.as_mut()).await;
                }
            }
        }
    }

    /// Ends the agent when this process was signalled: the child's group, or the connection.
    pub async fn stop(self) {
        match self {
            AgentEnd::Child { child, stdin } => {
                drop(stdin);
                let _ = (*child).shutdown().await;
            }
            AgentEnd::WebSocket { mut socket, .. } => {
                let _ = SinkExt::close(socket.as_mut()).await;
            }
        }
    }
}

/// Binds `--listen`'s address; one that cannot be bound is a configuration error (exit 3).
pub async fn listen(address: &str) -> Result<WsServer, CommandError> {
    let options = WsServerOptions {
        max_message_bytes: MAX_MESSAGE_BYTES,
        ..WsServerOptions::default()
    };
    WsServer::bind(address, options)
        .await
        .map_err(|e| CommandError::configuration(anyhow!("--listen {address}: {e}")))
}

/// The next message of a WebSocket; a close frame, the end of the stream or an error end it
/// (a clean end exits 0, an error 1).
async fn next_frame<S>(socket: &mut WebSocketStream<S>) -> Event
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    loop {
        return match socket.next().await {
            Some(Ok(WsMessage::Text(text))) => {
                Event::Message(Message::Text(text.as_bytes().to_vec()))
            }
            Some(Ok(WsMessage::Binary(bytes))) => Event::Message(Message::Binary(bytes.to_vec())),
            // tungstenite answers pings itself.
            Some(Ok(WsMessage::Ping(_) | WsMessage::Pong(_) | WsMessage::Frame(_))) => continue,
            Some(Ok(WsMessage::Close(_))) | None => Event::Closed(0),
            Some(Err(tokio_tungstenite::tungstenite::Error::Capacity(error))) => {
                Event::Oversize(oversize_length(&error))
            }
            Some(Err(_)) => Event::Closed(1),
        };
    }
}

fn oversize_length(error: &tokio_tungstenite::tungstenite::error::CapacityError) -> u64 {
    match error {
        tokio_tungstenite::tungstenite::error::CapacityError::MessageTooLong { size, .. } => {
            u64::try_from(*size).unwrap_or(u64::MAX)
        }
        tokio_tungstenite::tungstenite::error::CapacityError::TooManyHeaders => 0,
    }
}

fn frame(message: Message) -> WsMessage {
    match message {
        Message::Text(bytes) => match String::from_utf8(bytes) {
            Ok(text) => WsMessage::text(text),
            // A line that is not UTF-8 cannot be a text frame; it goes as it came, in binary.
            Err(error) => WsMessage::binary(error.into_bytes()),
        },
        Message::Binary(bytes) => WsMessage::binary(bytes),
    }
}

fn exit_code(status: std::process::ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    status
        .code()
        .or_else(|| status.signal().map(|s| 128 + s))
        .unwrap_or(1)
}
