//! What the official-SDK benchmark peers share: the WebSocket adapter that turns text frames into
//! the SDK's line transport, and the prompt directives both agents understand.

use std::io;

use agent_client_protocol::Lines;
use futures::{SinkExt, StreamExt, future};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;

/// The `_meta.ski.floodChunks` of a prompt: how many times the agent sends its reply chunk.
pub fn flood_chunks(meta: Option<&serde_json::Map<String, serde_json::Value>>) -> u64 {
    meta.and_then(|meta| meta.get("ski"))
        .and_then(|ski| ski.get("floodChunks"))
        .and_then(serde_json::Value::as_u64)
        .unwrap_or(1)
        .max(1)
}

/// A WebSocket connection as the SDK's line transport: one JSON-RPC message per text frame.
/// Binary, ping and pong frames are not messages; the stream ends with the connection.
pub fn ws_lines<S>(
    ws: WebSocketStream<S>,
) -> Lines<
    impl futures::Sink<String, Error = io::Error> + Send + 'static,
    impl futures::Stream<Item = io::Result<String>> + Send + 'static,
>
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (sink, stream) = ws.split();
    let sink = sink
        .sink_map_err(io::Error::other)
        .with(|line: String| future::ready(Ok::<_, io::Error>(Message::text(line))));
    let stream = stream.filter_map(|frame| {
        future::ready(match frame {
            Ok(Message::Text(text)) => Some(Ok(text.as_str().to_owned())),
            Ok(_) => None,
            Err(error) => Some(Err(io::Error::other(error))),
        })
    });
    Lines::new(sink, stream)
}
