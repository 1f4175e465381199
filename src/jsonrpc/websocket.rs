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
                match frames.next().await? {
                    Ok(WsMessage::Text(text)) => {
                        return Some((Ok(text.as_str().to_owned()), frames));
                    }
                    Ok(WsMessage::Binary(bytes)) => {
                        tracing::debug!(length = bytes.len(), "binary websocket frame ignored");
                    }
                    Ok(WsMessage::Close(_)) => return None,
                    Ok(WsMessage::Ping(_) | WsMessage::Pong(_) | WsMessage::Frame(_)) => {}
                    Err(WsError::ConnectionClosed | WsError::AlreadyClosed) => return None,
                    Err(error) => return Some((Err(error), frames)),
                }
            }
        });
        let outgoing =
            sink.with(|text: String| future::ready(Ok::<_, WsError>(WsMessage::text(text))));
        Transport::frames(incoming, outgoing)
    }
}
