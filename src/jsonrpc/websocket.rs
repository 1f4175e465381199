//! JSON-RPC over a WebSocket: one message per text frame. Binary frames are ignored (as the ACP
//! remote-transport RFD requires), control frames are left to tungstenite, and a close frame
//! ends the input.

use futures::{SinkExt, StreamExt, future, stream};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::{Error as WsError, Message as WsMessage};

use super::transport::Transport;

impl Transport {
    /// A message transport over an established WebSocket (client or server side).
    pub fn websocket<S>(socket: WebSocketStream<S>) -> Self
    where
        S: AsyncRead + AsyncWrite + Send + Unpin + 'static,
    {
        let (sink, frames) = socket.split();
        let incoming = stream::unfold(frames, |mut frames| async move {
            loop {
                match Frame::of(frames.next().await) {
                    Frame::Text(text) => return Some((Ok(text), frames)),
                    Frame::Ignored => {}
                    Frame::End => return None,
                    Frame::Failed(error) => return Some((Err(error), frames)),
                }
            }
        });
        let outgoing =
            sink.with(|text: String| future::ready(Ok::<_, WsError>(WsMessage::text(text))));
        Transport::frames(incoming, outgoing)
    }
}

/// What one item of a WebSocket's frame stream means to a message transport.
pub(crate) enum Frame {
    /// A text frame: one message.
    Text(String),
    /// A binary or control frame: no message, but proof that the remote side is alive.
    Ignored,
    /// A close frame or the end of the connection.
    End,
    /// The connection failed.
    Failed(WsError),
}

impl Frame {
    pub(crate) fn of(item: Option<Result<WsMessage, WsError>>) -> Self {
        match item {
            None => Frame::End,
            Some(Ok(WsMessage::Text(text))) => Frame::Text(text.as_str().to_owned()),
            Some(Ok(WsMessage::Binary(bytes))) => {
                tracing::debug!(length = bytes.len(), "binary websocket frame ignored");
                Frame::Ignored
            }
            Some(Ok(WsMessage::Close(_))) => Frame::End,
            Some(Ok(WsMessage::Ping(_) | WsMessage::Pong(_) | WsMessage::Frame(_))) => {
                Frame::Ignored
            }
            Some(Err(WsError::ConnectionClosed | WsError::AlreadyClosed)) => Frame::End,
            Some(Err(error)) => Frame::Failed(error),
        }
    }
}
