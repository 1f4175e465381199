//! The runner's Streamable HTTP client, the message transport of a [`Connection`] to an agent
//! at `http://…/acp` in the Streamable profile: `initialize` POSTed without `Acp-Connection-Id`
//! and its `200` body taken as the answer, then the connection-scoped GET stream opened, and a
//! session's GET stream opened before the first message of that session. Every later POST carries
//! `Acp-Connection-Id`, `Acp-Protocol-Version` and, for a session's message (its params'
//! `sessionId`, or the answer to an agent request that came on a session's stream),
//! `Acp-Session-Id`. Messages of every stream reach the connection in the order read.
//!
//! It judges nothing itself (the ACP-HTTP rows of [`super`] do): a POST answered other than `202`
//! fails the send, with the status and body, so that a check stops there. An `https://` agent is
//! reached the same way over TLS, through the connections of its [`Endpoint`] (the profile's
//! `settings.http_ca`, see [`Endpoint::for_ctx`]).
//!
//! [`Connection`]: super::super::connection::Connection

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::time::Duration;

use serde_json::Value;
use ski::transport::{Direction, WireLog};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::http::{self, Endpoint, Events, Request};

/// What the client hands the connection.
#[derive(Debug)]
pub enum Item {
    /// One JSON-RPC message the agent sent (an SSE event's data, or `initialize`'s body).
    Message(String),
    /// The connection-scoped stream ended: nothing more can come.
    Ended(String),
}

#[derive(Debug, Default)]
struct State {
    connection: Option<String>,
    version: Option<String>,
    sessions: HashSet<String>,
    /// The session of each agent request read on a session's stream, by the JSON text of its id.
    asked: HashMap<String, String>,
    readers: Vec<JoinHandle<()>>,
}

/// A POST answered with a status other than `202`: the error a send fails with.
#[derive(Debug)]
pub struct Refused {
    /// The status.
    pub status: u16,
    /// Status, headers and body.
    pub detail: String,
}

impl Refused {
    /// Whether the RFD answers this status at the HTTP level for a message a row sends on
    /// purpose (400: not one JSON object, or a session's header missing; 404: an unknown
    /// session or connection; 501: a batch): the message's JSON-RPC answer cannot be judged over
    /// this profile (E-ACP-64).
    pub fn is_http_level_answer(&self) -> bool {
        matches!(self.status, 400 | 404 | 501)
    }
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the POST of this message was answered {} (202 expected): {}",
            self.status, self.detail
        )
    }
}

impl std::error::Error for Refused {}

/// One Streamable HTTP connection to an endpoint. See the module docs.
#[derive(Debug)]
pub struct Streamable {
    endpoint: Endpoint,
    state: Mutex<State>,
    items: mpsc::UnboundedSender<Item>,
    wire: WireLog,
    channel: String,
    limit: Duration,
}

fn lock(state: &Mutex<State>) -> MutexGuard<'_, State> {
    state.lock().unwrap_or_else(PoisonError::into_inner)
}

fn failed(reason: String) -> std::io::Error {
    std::io::Error::other(reason)
}

impl Streamable {
    /// A client of `endpoint`; nothing is sent until the first message. `limit` bounds each
    /// POST and each stream's opening.
    pub fn new(
        endpoint: Endpoint,
        wire: WireLog,
        channel: &str,
        limit: Duration,
    ) -> (Arc<Self>, mpsc::UnboundedReceiver<Item>) {
        let (items, rx) = mpsc::unbounded_channel();
        (
            Arc::new(Self {
                endpoint,
                state: Mutex::default(),
                items,
                wire,
                channel: channel.to_owned(),
                limit,
            }),
            rx,
        )
    }

    /// The connection id the server gave, once `initialize` was answered.
    pub fn connection_id(&self) -> Option<String> {
        lock(&self.state).connection.clone()
    }

    /// Sends one message: POSTs it, opening the streams it needs first.
    pub async fn send(self: &Arc<Self>, text: &str) -> std::io::Result<()> {
        self.wire.record(&self.channel, Direction::Out, text);
        let value: Option<Value> = serde_json::from_str(text).ok();
        let connection = self.connection_id();
        let Some(connection) = connection else {
            return self.initialize(text).await;
        };
        let session = value.as_ref().and_then(|v| {
            if let Some(session) = v.pointer("/params/sessionId").and_then(Value::as_str) {
                return Some(session.to_owned());
            }
            let id = v.get("id")?;
            (v.get("method").is_none())
                .then(|| lock(&self.state).asked.remove(&id.to_string()))
                .flatten()
        });
        if let Some(session) = &session {
            let open = lock(&self.state).sessions.contains(session);
            if !open {
                self.open_stream(&connection, Some(session)).await?;
            }
        }
        let version = lock(&self.state).version.clone();
        let request = Request::post_json(text)
            .header("Acp-Connection-Id", &connection)
            .header_opt("Acp-Protocol-Version", version.as_deref())
            .header_opt("Acp-Session-Id", session.as_deref());
        let answer = http::send(&self.endpoint, &request, self.limit)
            .await
            .map_err(failed)?;
        self.wire.note(
            &self.channel,
            &format!("POST answered {}", answer.head.status),
        );
        if answer.head.status == 202 {
            return Ok(());
        }
        Err(std::io::Error::other(Refused {
            status: answer.head.status,
            detail: answer.describe(),
        }))
    }

    async fn initialize(self: &Arc<Self>, text: &str) -> std::io::Result<()> {
        let answer = http::send(&self.endpoint, &Request::post_json(text), self.limit)
            .await
            .map_err(failed)?;
        self.wire.note(
            &self.channel,
            &format!("initialize POST answered {}", answer.head.describe()),
        );
        let id = answer.head.header("acp-connection-id").map(str::to_owned);
        if answer.head.status != 200 {
            return Err(failed(format!(
                "the initialize POST was answered {} (200 expected): {}",
                answer.head.status,
                answer.describe()
            )));
        }
        let body = answer.text();
        let version = serde_json::from_str::<Value>(&body)
            .ok()
            .and_then(|v| v.pointer("/result/protocolVersion").cloned())
            .map(|v| v.to_string());
        self.wire.record(&self.channel, Direction::In, &body);
        let _ = self.items.send(Item::Message(body));
        let Some(id) = id else {
            // A refused initialize names no connection; the check reads the error it got.
            return Ok(());
        };
        {
            let mut state = lock(&self.state);
            state.connection = Some(id.clone());
            state.version = version;
        }
        self.open_stream(&id, None).await
    }

    /// Opens the connection-scoped stream (`session` none) or a session's, and reads it.
    async fn open_stream(
        self: &Arc<Self>,
        connection: &str,
        session: Option<&str>,
    ) -> std::io::Result<()> {
        let request = Request::get_stream()
            .header("Acp-Connection-Id", connection)
            .header_opt("Acp-Session-Id", session);
        let (head, body) = tokio::time::timeout(self.limit, http::open(&self.endpoint, &request))
            .await
            .map_err(|_| {
                failed(format!(
                    "no answer to {} within {:?}",
                    request.line(),
                    self.limit
                ))
            })?
            .map_err(failed)?;
        let scope = session.map_or_else(|| "connection".to_owned(), |s| format!("session {s}"));
        self.wire.note(
            &self.channel,
            &format!("GET of the {scope} stream answered {}", head.describe()),
        );
        if head.status == 404 && session.is_some() {
            // A session the server does not know: its POST gets the server's own answer.
            return Ok(());
        }
        if head.status != 200 {
            return Err(failed(format!(
                "the GET of the {scope} stream was answered {} (200 expected)",
                head.status
            )));
        }
        if let Some(session) = session {
            lock(&self.state).sessions.insert(session.to_owned());
        }
        let me = Arc::downgrade(self);
        let session = session.map(str::to_owned);
        let reader = tokio::spawn(read(me, Events::new(body), session));
        lock(&self.state).readers.push(reader);
        Ok(())
    }

    /// Ends the connection: `DELETE` with its id, and stops reading.
    pub async fn close(&self) {
        if let Some(id) = self.connection_id() {
            let request = Request::new("DELETE").header("Acp-Connection-Id", &id);
            let answered = http::send(&self.endpoint, &request, self.limit).await;
            self.wire.note(
                &self.channel,
                &format!(
                    "DELETE answered {}",
                    answered.map_or_else(|e| e, |a| a.head.status.to_string())
                ),
            );
        }
        for reader in lock(&self.state).readers.drain(..) {
            reader.abort();
        }
    }
}

impl Drop for Streamable {
    fn drop(&mut self) {
        for reader in lock(&self.state).readers.drain(..) {
            reader.abort();
        }
    }
}

/// Reads one stream until it ends or the client is dropped.
async fn read(client: Weak<Streamable>, mut events: Events, session: Option<String>) {
    let scope = session
        .as_deref()
        .map_or_else(|| "connection".to_owned(), |s| format!("session {s}"));
    let mut next = events.next().await;
    loop {
        let Some(me) = client.upgrade() else {
            return;
        };
        let end = match next {
            Ok(Some(data)) => {
                if let Some(session) = &session
                    && let Ok(value) = serde_json::from_str::<Value>(&data)
                    && value.get("method").is_some()
                    && let Some(id) = value.get("id")
                {
                    lock(&me.state)
                        .asked
                        .insert(id.to_string(), session.clone());
                }
                me.wire.record(&me.channel, Direction::In, &data);
                if me.items.send(Item::Message(data)).is_err() {
                    return;
                }
                None
            }
            Ok(None) => Some(format!("the {scope} stream ended")),
            Err(error) => Some(format!("the {scope} stream failed: {error}")),
        };
        if let Some(end) = end {
            me.wire.note(&me.channel, &end);
            if session.is_none() {
                let _ = me.items.send(Item::Ended(end));
            }
            return;
        }
        drop(me);
        next = events.next().await;
    }
}
