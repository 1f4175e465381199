//! JSON-RPC over a WebSocket: one message per text frame. Binary frames are ignored (as the ACP
//! remote-transport RFD requires), control frames are left to tungstenite, and a close frame
//! ends the input.
//!
//! A message over the socket's size limit is refused by tungstenite from its frame header, before
//! its payload is buffered. The rest of it cannot be skipped, so the input ends there: the peer
//! answers it -32600 with id null, as it answers an oversize line, and closing the output then
//! sends a close frame with code 1009 (message too big) instead of one without a code.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll, ready};

use futures::{Sink, StreamExt, stream};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::error::CapacityError;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::{Error as WsError, Message as WsMessage};

use super::transport::{BoxError, MessageTooBig, Transport};

/// The reason sent with close code 1009.
const TOO_BIG_REASON: &str = "message too big";

impl Transport {
    /// A message transport over an established WebSocket (client or server side).
    pub fn websocket<S>(socket: WebSocketStream<S>) -> Self
    where
        S: AsyncRead + AsyncWrite + Send + Unpin + 'static,
    {
        let (sink, frames) = socket.split();
        let too_big = Arc::new(AtomicBool::new(false));
        let incoming = stream::unfold(
            (frames, too_big.clone(), false),
            |(mut frames, too_big, ended)| async move {
                if ended {
                    return None;
                }
                loop {
                    let error: BoxError = match Frame::of(frames.next().await) {
                        Frame::Text(text) => return Some((Ok(text), (frames, too_big, false))),
                        Frame::Ignored => continue,
                        Frame::End => return None,
                        Frame::Failed(error) => match too_big_message(&error) {
                            Some(message) => {
                                too_big.store(true, Ordering::SeqCst);
                                return Some((Err(message.into()), (frames, too_big, true)));
                            }
                            None => error.into(),
                        },
                    };
                    return Some((Err(error), (frames, too_big, false)));
                }
            },
        );
        let outgoing = Outgoing { sink, too_big };
        Transport::frames(incoming, outgoing)
    }
}

/// The size error of a message over the socket's limit.
fn too_big_message(error: &WsError) -> Option<MessageTooBig> {
    match error {
        WsError::Capacity(CapacityError::MessageTooLong { size, max_size }) => {
            Some(MessageTooBig {
                length: *size as u64,
                limit: *max_size,
            })
        }
        _ => None,
    }
}

/// The sending half: every item a text frame; closing it after an oversize message sends close
/// code 1009 first.
struct Outgoing<Si> {
    sink: Si,
    /// Set by the receiving half when a message was over the limit; cleared once the close frame
    /// is queued.
    too_big: Arc<AtomicBool>,
}

impl<Si> Sink<String> for Outgoing<Si>
where
    Si: Sink<WsMessage, Error = WsError> + Unpin,
{
    type Error = WsError;

    fn poll_ready(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), WsError>> {
        Pin::new(&mut self.sink).poll_ready(cx)
    }

    fn start_send(mut self: Pin<&mut Self>, text: String) -> Result<(), WsError> {
        Pin::new(&mut self.sink).start_send(WsMessage::text(text))
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), WsError>> {
        Pin::new(&mut self.sink).poll_flush(cx)
    }

    fn poll_close(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), WsError>> {
        if self.too_big.load(Ordering::SeqCst) {
            ready!(Pin::new(&mut self.sink).poll_ready(cx))?;
            let frame = CloseFrame {
                code: CloseCode::Size,
                reason: TOO_BIG_REASON.into(),
            };
            Pin::new(&mut self.sink).start_send(WsMessage::Close(Some(frame)))?;
            self.too_big.store(false, Ordering::SeqCst);
        }
        Pin::new(&mut self.sink).poll_close(cx)
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
