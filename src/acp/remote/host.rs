//! The seam between the `/acp` server and the agent core it serves: [`Host`] takes each
//! connection's [`Link`] (Streamable HTTP or WebSocket alike) and says which sessions exist.
//! ski's reference [`Agent`] is one host ([`ReferenceHost`]); the mock agent is another.

use std::pin::Pin;

use futures::future::BoxFuture;
use futures::{Sink, SinkExt, Stream, StreamExt, future};
use hyper_util::rt::TokioIo;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;

use crate::acp::agent::{Agent, AgentConnection, ConnectionOptions};
use crate::jsonrpc::Transport;
use crate::jsonrpc::transport::BoxError;

/// The messages the client sends, one JSON text each; the stream ends with the connection.
pub type Incoming = Pin<Box<dyn Stream<Item = Result<String, BoxError>> + Send + 'static>>;

/// Where the agent's messages go, one JSON text each.
pub type Outgoing = Pin<Box<dyn Sink<String, Error = BoxError> + Send + 'static>>;

/// The socket of an upgraded WebSocket connection.
type Socket = WebSocketStream<TokioIo<hyper::upgrade::Upgraded>>;

/// One ACP connection as the server hands it to its host.
pub struct Link {
    kind: LinkKind,
}

enum LinkKind {
    Messages(Incoming, Outgoing),
    WebSocket(Box<Socket>),
}

impl std::fmt::Debug for Link {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = match self.kind {
            LinkKind::Messages(..) => "messages",
            LinkKind::WebSocket(_) => "websocket",
        };
        f.debug_struct("Link").field("kind", &kind).finish()
    }
}

impl Link {
    /// A link over a stream and a sink of messages (a Streamable HTTP connection's routes).
    pub fn messages(incoming: Incoming, outgoing: Outgoing) -> Self {
        Self {
            kind: LinkKind::Messages(incoming, outgoing),
        }
    }

    pub(super) fn websocket(socket: Socket) -> Self {
        Self {
            kind: LinkKind::WebSocket(Box::new(socket)),
        }
    }

    /// The transport a [`crate::jsonrpc`] peer runs over (a WebSocket's frames as
    /// [`Transport::websocket`] reads them: an oversize message is answered, not dropped).
    pub fn into_transport(self) -> Transport {
        match self.kind {
            LinkKind::Messages(incoming, outgoing) => Transport::frames(incoming, outgoing),
            LinkKind::WebSocket(socket) => Transport::websocket(*socket),
        }
    }

    /// The link as a stream and a sink of message texts, for a host that does its own framing.
    /// Over WebSocket: text frames are messages, other data frames are ignored, a close frame or
    /// an error ends the stream (an oversize message is the error).
    pub fn into_messages(self) -> (Incoming, Outgoing) {
        match self.kind {
            LinkKind::Messages(incoming, outgoing) => (incoming, outgoing),
            LinkKind::WebSocket(socket) => {
                let (sink, frames) = socket.split();
                let incoming = frames
                    .take_while(|frame| future::ready(!matches!(frame, Ok(Message::Close(_)))))
                    .filter_map(|frame| {
                        future::ready(match frame {
                            Ok(Message::Text(text)) => Some(Ok(text.as_str().to_owned())),
                            Ok(_) => None,
                            Err(error) => Some(Err(BoxError::from(error))),
                        })
                    })
                    .take_while({
                        let mut failed = false;
                        move |item| {
                            let go = !failed;
                            failed = item.is_err();
                            future::ready(go)
                        }
                    });
                let outgoing = sink
                    .sink_map_err(BoxError::from)
                    .with(|text: String| future::ready(Ok(Message::text(text))));
                (Box::pin(incoming), Box::pin(outgoing))
            }
        }
    }
}

/// An agent core the `/acp` server drives.
pub trait Host: Send + Sync + 'static {
    /// Starts serving one connection; `label` names it in logs (its `Acp-Connection-Id`).
    fn connect(&self, link: Link, label: &str) -> Box<dyn Hosted>;

    /// Whether the agent has this session: session-scoped POSTs and GET streams naming any
    /// other are 404.
    fn has_session(&self, id: &str) -> bool;

    /// Stops the agent's work once the server is shutting down and every connection was told
    /// to end.
    fn stop(&self) -> BoxFuture<'static, ()>;
}

/// One connection a [`Host`] serves.
pub trait Hosted: Send {
    /// Resolves once the agent has stopped reading the connection (it ended it).
    fn ended(&mut self) -> BoxFuture<'_, ()>;

    /// Ends the connection and waits until the agent has let go of it.
    fn close(self: Box<Self>) -> BoxFuture<'static, ()>;
}

/// ski's reference agent as a host: every connection joins the one [`Agent`], as stdio and
/// `--transport ws` do.
#[derive(Debug, Clone)]
pub struct ReferenceHost {
    agent: Agent,
    connection: ConnectionOptions,
}

impl ReferenceHost {
    /// Serves `agent`, each connection with `connection`'s options (its label replaced).
    pub fn new(agent: Agent, connection: ConnectionOptions) -> Self {
        Self { agent, connection }
    }
}

impl Host for ReferenceHost {
    fn connect(&self, link: Link, label: &str) -> Box<dyn Hosted> {
        let options = ConnectionOptions {
            label: label.to_owned(),
            ..self.connection.clone()
        };
        Box::new(self.agent.connect(link.into_transport(), &options))
    }

    fn has_session(&self, id: &str) -> bool {
        self.agent.has_session(id)
    }

    fn stop(&self) -> BoxFuture<'static, ()> {
        let agent = self.agent.clone();
        Box::pin(async move { agent.stop_turns().await })
    }
}

impl Hosted for AgentConnection {
    fn ended(&mut self) -> BoxFuture<'_, ()> {
        Box::pin(self.input_closed())
    }

    fn close(self: Box<Self>) -> BoxFuture<'static, ()> {
        Box::pin(AgentConnection::close(*self))
    }
}
