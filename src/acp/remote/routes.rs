//! One Streamable HTTP connection: the message transport the agent runs over, and the routing
//! of what the agent sends to the connection-scoped stream or a session-scoped stream.
//!
//! Routing follows the RFD. A response goes where its request asked: the connection-scoped
//! stream for requests without a session and for [`super::CONNECTION_SCOPED_RESPONSES`], the
//! session's stream otherwise. A notification or request of the agent goes to the stream of the
//! `sessionId` in its params, or to the connection-scoped stream without one. The response to
//! the `initialize` that created the connection is handed to the POST that sent it instead.
//!
//! Each stream has a queue of at most `queue_bound` messages, filled while no GET reads it and
//! drained by the GET that does. A reader that falls that far behind (or a stream no client
//! opens) loses it: the message that does not fit is dropped, the stream being read ends after
//! what it already holds, and a new queue starts for the next GET, which gets messages from then
//! on (v1 of the RFD replays nothing). A second GET for a stream that is being read takes it
//! over; the first ends after what it holds.

use std::collections::HashMap;
use std::convert::Infallible;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll};

use futures::{Sink, SinkExt, Stream, stream};
use hyper::body::Bytes;
use serde_json::Value;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use super::host::Link;
use super::{CONNECTION_SCOPED_RESPONSES, id_key, params_session, sse};
use crate::jsonrpc::transport::BoxError;

/// Messages from the client waiting for the agent to read them; a POST past it waits.
pub const INBOUND_QUEUE: usize = 64;

/// Where a message of the agent goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// The connection-scoped stream.
    Connection,
    /// The stream of one session.
    Session(String),
}

/// The queue of one SSE stream.
struct Queue {
    tx: mpsc::Sender<Bytes>,
    /// The receiving end while no GET reads it.
    rx: Option<mpsc::Receiver<Bytes>>,
}

impl Queue {
    fn new(bound: usize) -> Self {
        let (tx, rx) = mpsc::channel(bound.max(1));
        Self { tx, rx: Some(rx) }
    }
}

#[derive(Default)]
struct State {
    connection: Option<Queue>,
    sessions: HashMap<String, Queue>,
    /// Where the response to each client request in flight goes, by id.
    pending: HashMap<String, Target>,
    /// The session of each agent request in flight, by id (a client's response to it is
    /// session-scoped).
    agent_requests: HashMap<String, Option<String>>,
    /// The POST waiting for the response to the `initialize` that created the connection.
    initialize: Option<(String, oneshot::Sender<String>)>,
    /// The protocol version the `initialize` response named.
    protocol_version: Option<u64>,
    closed: bool,
}

/// The shared state of one connection: the HTTP side posts into it and opens streams, the agent
/// side sends through it.
pub struct Routes {
    state: Mutex<State>,
    inbound: mpsc::Sender<String>,
    queue_bound: usize,
    ended: CancellationToken,
}

impl std::fmt::Debug for Routes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Routes")
            .field("queue_bound", &self.queue_bound)
            .finish_non_exhaustive()
    }
}

/// Why a client message was not taken.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PostError {
    /// The connection has ended.
    Closed,
}

impl Routes {
    /// A connection and the transport the agent runs over. `queue_bound` is the most messages
    /// one stream holds.
    pub fn new(queue_bound: usize) -> (Arc<Self>, Link) {
        let (inbound, rx) = mpsc::channel::<String>(INBOUND_QUEUE);
        let ended = CancellationToken::new();
        let routes = Arc::new(Self {
            state: Mutex::new(State {
                connection: Some(Queue::new(queue_bound)),
                ..State::default()
            }),
            inbound,
            queue_bound,
            ended: ended.clone(),
        });
        let incoming = stream::unfold((rx, ended), |(mut rx, ended)| async move {
            let message = tokio::select! {
                biased;
                () = ended.cancelled() => None,
                message = rx.recv() => message,
            }?;
            Some((Ok::<_, BoxError>(message), (rx, ended)))
        });
        let outgoing = Outgoing {
            routes: routes.clone(),
        }
        .sink_map_err(BoxError::from);
        (
            routes,
            Link::messages(Box::pin(incoming), Box::pin(outgoing)),
        )
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Ends the connection: the agent's input ends and every stream ends after what it holds.
    pub fn close(&self) {
        let mut state = self.lock();
        state.closed = true;
        state.connection = None;
        state.sessions.clear();
        state.initialize = None;
        drop(state);
        self.ended.cancel();
    }

    /// Whether the connection has ended.
    pub fn is_closed(&self) -> bool {
        self.ended.is_cancelled()
    }

    /// Resolves once the connection has ended.
    pub async fn closed(&self) {
        self.ended.cancelled().await;
    }

    /// The protocol version the agent's `initialize` response named.
    pub fn protocol_version(&self) -> Option<u64> {
        self.lock().protocol_version
    }

    /// The session a client message belongs to: its params' `sessionId`, or for a response the
    /// session of the agent request it answers.
    pub fn session_of(&self, message: &Value) -> Option<String> {
        if message.get("method").is_some() {
            return params_session(message).map(str::to_owned);
        }
        let key = id_key(message)?;
        self.lock().agent_requests.get(&key).cloned().flatten()
    }

    /// Hands a client message (its text and parsed form) to the agent, noting where the
    /// response to a request goes. Waits while the agent has [`INBOUND_QUEUE`] messages unread.
    pub async fn post(&self, text: String, message: &Value) -> Result<(), PostError> {
        self.note(message)?;
        self.inbound.send(text).await.map_err(|_| PostError::Closed)
    }

    /// Posts the `initialize` request that created the connection and waits for its response.
    pub async fn initialize(&self, text: String, message: &Value) -> Result<String, PostError> {
        let (tx, rx) = oneshot::channel();
        {
            let mut state = self.lock();
            if state.closed {
                return Err(PostError::Closed);
            }
            if let Some(key) = id_key(message) {
                state.initialize = Some((key, tx));
            }
        }
        self.post(text, message).await?;
        tokio::select! {
            response = rx => response.map_err(|_| PostError::Closed),
            () = self.ended.cancelled() => Err(PostError::Closed),
        }
    }

    fn note(&self, message: &Value) -> Result<(), PostError> {
        let mut state = self.lock();
        if state.closed {
            return Err(PostError::Closed);
        }
        let Some(key) = id_key(message) else {
            return Ok(());
        };
        match message.get("method").and_then(Value::as_str) {
            Some(method) => {
                let target = match params_session(message) {
                    Some(session) if !CONNECTION_SCOPED_RESPONSES.contains(&method) => {
                        Target::Session(session.to_owned())
                    }
                    _ => Target::Connection,
                };
                state.pending.insert(key, target);
            }
            None => {
                state.agent_requests.remove(&key);
            }
        }
        Ok(())
    }

    /// Takes the queue of a stream for a GET: the messages waiting in it and those to come. A
    /// stream already being read is taken over. `None` once the connection has ended.
    pub fn open(&self, target: &Target) -> Option<mpsc::Receiver<Bytes>> {
        let bound = self.queue_bound;
        let mut state = self.lock();
        if state.closed {
            return None;
        }
        let queue = match target {
            Target::Connection => state.connection.get_or_insert_with(|| Queue::new(bound)),
            Target::Session(id) => state
                .sessions
                .entry(id.clone())
                .or_insert_with(|| Queue::new(bound)),
        };
        Some(match queue.rx.take() {
            Some(rx) => rx,
            None => {
                let (tx, rx) = mpsc::channel(bound.max(1));
                queue.tx = tx;
                rx
            }
        })
    }

    /// Routes one message of the agent.
    fn send(&self, text: String) {
        let message: Value = match serde_json::from_str(&text) {
            Ok(message) => message,
            Err(error) => {
                tracing::warn!(%error, "the agent sent a message that is not JSON; dropped");
                return;
            }
        };
        let mut state = self.lock();
        if state.closed {
            return;
        }
        let key = id_key(&message);
        let target = if message.get("method").is_some() {
            let session = params_session(&message).map(str::to_owned);
            if let Some(key) = key {
                state.agent_requests.insert(key, session.clone());
            }
            session.map_or(Target::Connection, Target::Session)
        } else {
            if let Some(key) = &key
                && state
                    .initialize
                    .as_ref()
                    .is_some_and(|(waiting, _)| waiting == key)
            {
                state.protocol_version = message
                    .get("result")
                    .and_then(|result| result.get("protocolVersion"))
                    .and_then(Value::as_u64);
                state.pending.remove(key);
                if let Some((_, waiter)) = state.initialize.take() {
                    let _ = waiter.send(text);
                }
                return;
            }
            if let Some(version) = message
                .get("result")
                .and_then(|result| result.get("protocolVersion"))
                .and_then(Value::as_u64)
                && key
                    .as_ref()
                    .is_some_and(|key| state.pending.get(key) == Some(&Target::Connection))
            {
                state.protocol_version = Some(version);
            }
            key.and_then(|key| state.pending.remove(&key))
                .unwrap_or(Target::Connection)
        };
        let bound = self.queue_bound;
        let queue = match &target {
            Target::Connection => state.connection.get_or_insert_with(|| Queue::new(bound)),
            Target::Session(id) => state
                .sessions
                .entry(id.clone())
                .or_insert_with(|| Queue::new(bound)),
        };
        match queue.tx.try_send(sse::event(&text)) {
            Ok(()) => {}
            Err(mpsc::error::TrySendError::Full(_)) => {
                tracing::warn!(
                    ?target,
                    bound,
                    "an SSE stream's reader is too slow (or no client opened it): the stream ends and a message is dropped"
                );
                *queue = Queue::new(bound);
            }
            Err(mpsc::error::TrySendError::Closed(event)) => {
                // Its reader went away: the message waits in a new queue for the next GET.
                *queue = Queue::new(bound);
                let _ = queue.tx.try_send(event);
            }
        }
    }
}

/// The agent's sending half: every message is routed at once, so it never waits.
struct Outgoing {
    routes: Arc<Routes>,
}

impl Sink<String> for Outgoing {
    type Error = Infallible;

    fn poll_ready(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn start_send(self: Pin<&mut Self>, item: String) -> Result<(), Infallible> {
        self.routes.send(item);
        Ok(())
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn poll_close(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.routes.close();
        Poll::Ready(Ok(()))
    }
}

/// An SSE body stream over a queue: it ends when the queue's sender is gone or the connection
/// ends.
pub fn event_stream(
    rx: mpsc::Receiver<Bytes>,
    routes: Arc<Routes>,
) -> impl Stream<Item = Bytes> + Send + 'static {
    stream::unfold((rx, routes), |(mut rx, routes)| async move {
        let next = tokio::select! {
            biased;
            next = rx.recv() => next,
            () = routes.closed() => rx.try_recv().ok(),
        }?;
        Some((next, (rx, routes)))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn drain(rx: &mut mpsc::Receiver<Bytes>) -> Vec<String> {
        let mut out = Vec::new();
        while let Ok(event) = rx.try_recv() {
            out.push(String::from_utf8(event.to_vec()).unwrap());
        }
        out
    }

    #[tokio::test]
    async fn responses_follow_their_request_and_notifications_their_session() {
        let (routes, _transport) = Routes::new(8);
        let prompt =
            json!({"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{"sessionId":"s1"}});
        let new = json!({"jsonrpc":"2.0","id":"n","method":"session/new","params":{}});
        routes.note(&prompt).unwrap();
        routes.note(&new).unwrap();
        routes.send(
            r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1"}}"#.into(),
        );
        routes.send(r#"{"jsonrpc":"2.0","id":3,"result":{}}"#.into());
        routes.send(r#"{"jsonrpc":"2.0","id":"n","result":{"sessionId":"s1"}}"#.into());
        let mut session = routes.open(&Target::Session("s1".into())).unwrap();
        let mut connection = routes.open(&Target::Connection).unwrap();
        let session = drain(&mut session);
        assert_eq!(session.len(), 2, "{session:?}");
        assert!(session[1].contains(r#""id":3"#));
        let connection = drain(&mut connection);
        assert_eq!(connection.len(), 1);
        assert!(connection[0].contains(r#""id":"n""#));
    }

    #[tokio::test]
    async fn a_full_queue_ends_its_stream_and_starts_a_new_one() {
        let (routes, _transport) = Routes::new(2);
        let mut first = routes.open(&Target::Connection).unwrap();
        for n in 0..3 {
            routes.send(format!(
                r#"{{"jsonrpc":"2.0","method":"m","params":{{"n":{n}}}}}"#
            ));
        }
        // The first two fit, the third is dropped and the first stream's sender is gone.
        assert_eq!(drain(&mut first).len(), 2);
        assert!(first.recv().await.is_none());
        routes.send(r#"{"jsonrpc":"2.0","method":"m","params":{"n":3}}"#.into());
        let mut second = routes.open(&Target::Connection).unwrap();
        let events = drain(&mut second);
        assert_eq!(events.len(), 1);
        assert!(events[0].contains(r#""n":3"#));
    }

    #[tokio::test]
    async fn a_client_response_is_scoped_to_the_session_of_the_agent_request() {
        let (routes, _transport) = Routes::new(4);
        routes.send(r#"{"jsonrpc":"2.0","id":0,"method":"session/request_permission","params":{"sessionId":"s9"}}"#.into());
        assert_eq!(
            routes.session_of(&json!({"jsonrpc":"2.0","id":0,"result":{}})),
            Some("s9".to_owned())
        );
        assert_eq!(
            routes.session_of(&json!({"jsonrpc":"2.0","id":1,"result":{}})),
            None
        );
    }
}
