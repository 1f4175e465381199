//! Socket Mode on tokio-tungstenite: `hello` on connect, envelopes routed to live connections,
//! acks matched by `envelope_id`, redelivery of unacked events, server pings with a payload,
//! `disconnect` on demand, and every frame recorded.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use futures::{SinkExt, StreamExt};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::Message as Frame;
use tokio_tungstenite::tungstenite::handshake::server::{ErrorResponse, Request, Response};
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;

use super::config::LimitsConfig;
use super::envelope::{self, EnvelopeKind};
use super::limits::{Gate, after_accept_error};
use super::record::Direction;
use super::shared::{Ack, Shared};
use super::workspace::Stored;

/// The reasons Slack gives in `disconnect`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DisconnectReason {
    RefreshRequested,
    Warning,
    TooManyWebsockets,
    LinkDisabled,
}

impl DisconnectReason {
    fn as_str(self) -> &'static str {
        match self {
            DisconnectReason::RefreshRequested => "refresh_requested",
            DisconnectReason::Warning => "warning",
            DisconnectReason::TooManyWebsockets => "too_many_websockets",
            DisconnectReason::LinkDisabled => "link_disabled",
        }
    }
}

/// What a connection's writer is told to do.
#[derive(Debug)]
pub enum Outgoing {
    Text(String),
    Drop,
}

#[derive(Debug)]
pub struct Connection {
    tx: mpsc::UnboundedSender<Outgoing>,
    /// Sent `disconnect`: no new envelopes.
    draining: bool,
}

/// One envelope the fake sent and what became of it.
#[derive(Debug, Clone)]
pub struct EnvelopeState {
    pub kind: EnvelopeKind,
    pub accepts: bool,
    pub payload: Value,
    pub attempt: u32,
    pub sent_at_ms: Option<u64>,
    pub ack: Option<Ack>,
}

/// The live connections and the envelopes in flight.
#[derive(Debug, Default)]
pub struct Hub {
    next_connection: u64,
    connections: BTreeMap<u64, Connection>,
    turn: usize,
    /// Envelopes waiting for a connection.
    pending: VecDeque<String>,
    pub envelopes: HashMap<String, EnvelopeState>,
    /// Envelope ids oldest first, to forget the oldest beyond the retention limit.
    order: VecDeque<String>,
}

impl Hub {
    /// Keeps an envelope, forgetting the oldest beyond `max` (its ack can no longer be read).
    pub(super) fn keep(&mut self, id: &str, state: EnvelopeState, max: usize) {
        if self.envelopes.insert(id.to_string(), state).is_none() {
            self.order.push_back(id.to_string());
        }
        while self.order.len() > max.max(1) {
            if let Some(oldest) = self.order.pop_front() {
                self.envelopes.remove(&oldest);
            }
        }
    }

    /// Forgets every envelope.
    pub fn clear_envelopes(&mut self) {
        self.envelopes.clear();
        self.order.clear();
    }

    /// Connections that take envelopes.
    pub fn live(&self) -> usize {
        self.connections.values().filter(|c| !c.draining).count()
    }

    /// The next live connection, round robin.
    fn pick(&mut self) -> Option<(u64, mpsc::UnboundedSender<Outgoing>)> {
        let live: Vec<(u64, mpsc::UnboundedSender<Outgoing>)> = self
            .connections
            .iter()
            .filter(|(_, c)| !c.draining)
            .map(|(id, c)| (*id, c.tx.clone()))
            .collect();
        if live.is_empty() {
            return None;
        }
        let choice = live[self.turn % live.len()].clone();
        self.turn = self.turn.wrapping_add(1);
        Some(choice)
    }
}

impl Shared {
    /// Registers an envelope and sends it (or queues it until a connection is up); unacked
    /// events are sent again later.
    pub fn send_envelope(
        self: &Arc<Self>,
        id: &str,
        kind: EnvelopeKind,
        payload: Value,
        accepts: bool,
    ) {
        let max = self.workspace().config.retention.max_frames;
        self.hub().keep(
            id,
            EnvelopeState {
                kind,
                accepts,
                payload,
                attempt: 0,
                sent_at_ms: None,
                ack: None,
            },
            max,
        );
        self.deliver(id);
        let config = self.config().socket_mode;
        if kind == EnvelopeKind::EventsApi || config.redeliver_all {
            let shared = self.clone();
            let id = id.to_string();
            self.runtime.spawn(async move {
                for _ in 0..config.max_retries {
                    tokio::time::sleep(config.redelivery()).await;
                    let again = {
                        let mut hub = shared.hub();
                        match hub.envelopes.get_mut(&id) {
                            Some(state) if state.ack.is_none() => {
                                state.attempt += 1;
                                true
                            }
                            _ => false,
                        }
                    };
                    if !again {
                        return;
                    }
                    shared.log().note(format!(
                        "envelope {id} not acked within {} ms: sent again",
                        config.redelivery_ms
                    ));
                    shared.deliver(&id);
                }
            });
        }
    }

    /// Sends an envelope on a live connection, or queues it.
    fn deliver(&self, id: &str) {
        let (connection, text) = {
            let mut hub = self.hub();
            let Some(state) = hub.envelopes.get(id).cloned() else {
                return;
            };
            let frame = envelope::wrap(id, state.kind, state.payload, state.accepts, state.attempt);
            match hub.pick() {
                Some((connection, tx)) => {
                    let text = frame.to_string();
                    if tx.send(Outgoing::Text(text.clone())).is_err() {
                        hub.pending.push_back(id.to_string());
                        return;
                    }
                    (connection, text)
                }
                None => {
                    hub.pending.push_back(id.to_string());
                    return;
                }
            }
        };
        let mut log = self.log();
        let now = log.now_ms();
        log.frame(connection, Direction::Out, "text", text);
        drop(log);
        if let Some(state) = self.hub().envelopes.get_mut(id) {
            state.sent_at_ms = Some(now);
        }
    }

    /// Sends `disconnect` on every live connection; they take no more envelopes.
    pub fn disconnect(&self, reason: DisconnectReason) {
        let text = json!({
            "type": "disconnect",
            "reason": reason.as_str(),
            "debug_info": { "host": "ski-fake-slack" },
        })
        .to_string();
        let sent: Vec<u64> = {
            let mut hub = self.hub();
            hub.connections
                .iter_mut()
                .filter(|(_, c)| !c.draining)
                .filter_map(|(id, c)| {
                    c.draining = true;
                    c.tx.send(Outgoing::Text(text.clone())).ok().map(|_| *id)
                })
                .collect()
        };
        let mut log = self.log();
        for id in sent {
            log.frame(id, Direction::Out, "text", text.clone());
        }
        drop(log);
        self.bump();
    }

    /// Drops every connection without a close frame.
    pub fn close_connections(&self) {
        let mut hub = self.hub();
        for connection in hub.connections.values() {
            let _ = connection.tx.send(Outgoing::Drop);
        }
        hub.connections.clear();
    }

    /// Reads one text frame from a client: an ack, or something to note.
    fn receive(&self, connection: u64, text: &str) {
        self.log()
            .frame(connection, Direction::In, "text", text.to_string());
        let Ok(frame) = serde_json::from_str::<Value>(text) else {
            self.log()
                .note(format!("connection {connection}: a frame that is not JSON"));
            return;
        };
        let Some(id) = frame.get("envelope_id").and_then(Value::as_str) else {
            self.log().note(format!(
                "connection {connection}: a frame without envelope_id"
            ));
            return;
        };
        let payload = frame
            .get("payload")
            .filter(|payload| {
                !payload.is_null() && payload.as_object().is_none_or(|o| !o.is_empty())
            })
            .cloned();
        let mut notes = Vec::new();
        let slash = {
            let mut hub = self.hub();
            let Some(state) = hub.envelopes.get_mut(id) else {
                drop(hub);
                self.log().note(format!("ack for unknown envelope {id}"));
                return;
            };
            if state.ack.is_some() {
                notes.push(format!("duplicate ack for envelope {id}"));
                None
            } else {
                if payload.is_some() && !state.accepts {
                    notes.push(format!("ack payload for envelope {id}, which accepts none"));
                }
                let now = self.log().now_ms();
                state.ack = Some(Ack {
                    envelope_id: id.to_string(),
                    payload: payload.clone(),
                    connection,
                    latency_ms: now.saturating_sub(state.sent_at_ms.unwrap_or(now)),
                });
                (state.kind == EnvelopeKind::SlashCommands).then(|| state.payload.clone())
            }
        };
        for note in notes {
            self.log().note(note);
        }
        if let (Some(command), Some(reply)) = (slash, payload) {
            self.slash_reply(&command, &reply);
        }
        self.bump();
    }

    /// A slash command's ack payload is the reply the user sees.
    pub(super) fn slash_reply(&self, command: &Value, reply: &Value) {
        let channel = command["channel_id"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let user = command["user_id"].as_str().unwrap_or_default().to_string();
        let mut workspace = self.workspace();
        let ts = workspace.next_ts();
        let mut fields = serde_json::Map::new();
        fields.insert(
            "text".into(),
            reply.get("text").cloned().unwrap_or(json!("")),
        );
        if let Some(blocks) = reply.get("blocks") {
            fields.insert("blocks".into(), blocks.clone());
        }
        let message = workspace.bot_message(&ts, fields);
        if reply["response_type"] == "in_channel" {
            workspace.store(&channel, message);
        } else {
            let mut message = message;
            message["ephemeral_to"] = json!(user);
            workspace.store_ephemeral(Stored { channel, message });
        }
    }

    fn register(&self) -> (u64, mpsc::UnboundedReceiver<Outgoing>, String) {
        let (tx, rx) = mpsc::unbounded_channel();
        let mut hub = self.hub();
        hub.next_connection += 1;
        let id = hub.next_connection;
        hub.connections.insert(
            id,
            Connection {
                tx,
                draining: false,
            },
        );
        let hello = json!({
            "type": "hello",
            "num_connections": hub.live(),
            "debug_info": {
                "host": "ski-fake-slack",
                "build_number": 1,
                "approximate_connection_time": 18060,
            },
            "connection_info": { "app_id": self.workspace().config.bot.app_id },
        });
        (id, rx, hello.to_string())
    }

    fn unregister(&self, connection: u64) {
        self.hub().connections.remove(&connection);
        self.log().note(format!("connection {connection} closed"));
        self.bump();
    }
}

/// The first byte of a TLS connection: the content type of a handshake record.
const TLS_HANDSHAKE_RECORD: u8 = 0x16;

/// Accepts Socket Mode connections until the task is aborted. In TLS mode a connection is
/// served over TLS when it opens with a TLS handshake and as plain WebSocket otherwise: Python's
/// built-in Socket Mode client (`slack_sdk.socket_mode.builtin`) uses TLS only on port 443,
/// whatever the URL's scheme, so on the fake's `wss://` port it speaks plain HTTP.
pub async fn serve(listener: TcpListener, shared: Arc<Shared>, tls: Option<super::tls::Tls>) {
    let limits = shared.config().limits;
    let gate = Gate::new(limits.max_connections);
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            after_accept_error().await;
            continue;
        };
        let Some(permit) = gate.admit() else {
            gate.refuse(stream, "socket_mode");
            continue;
        };
        let shared = shared.clone();
        let limits = limits.clone();
        let tls = tls.clone();
        tokio::spawn(async move {
            let _permit = permit;
            let Some(tls) = tls else {
                connection(stream, shared, &limits).await;
                return;
            };
            let mut first = [0u8; 1];
            // A client that closes (or says nothing) before its first byte is simply gone.
            let peeked = tokio::time::timeout(limits.header_timeout(), stream.peek(&mut first));
            if !matches!(peeked.await, Ok(Ok(1))) {
                return;
            }
            if first[0] != TLS_HANDSHAKE_RECORD {
                connection(stream, shared, &limits).await;
            } else if let Ok(Ok(secure)) =
                tokio::time::timeout(limits.header_timeout(), tls.acceptor().accept(stream)).await
            {
                // A client that gives up during the handshake, or takes too long, is gone.
                connection(secure, shared, &limits).await;
            }
        });
    }
}

#[allow(clippy::result_large_err)]
fn check_path(request: &Request, response: Response) -> Result<Response, ErrorResponse> {
    if request.uri().path().starts_with("/link") {
        Ok(response)
    } else {
        let mut refusal = ErrorResponse::new(Some("not a socket mode url".into()));
        *refusal.status_mut() = tokio_tungstenite::tungstenite::http::StatusCode::NOT_FOUND;
        Err(refusal)
    }
}

async fn connection<S>(stream: S, shared: Arc<Shared>, limits: &LimitsConfig)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let handshake = tokio_tungstenite::accept_hdr_async(stream, check_path);
    let Ok(Ok(socket)) = tokio::time::timeout(limits.header_timeout(), handshake).await else {
        return;
    };
    let (mut sink, mut source) = socket.split();
    let (id, mut outgoing, hello) = shared.register();
    if sink.send(Frame::text(hello.clone())).await.is_err() {
        shared.unregister(id);
        return;
    }
    shared.log().frame(id, Direction::Out, "text", hello);
    shared.bump();
    let pending: Vec<String> = shared.hub().pending.drain(..).collect();
    for envelope in pending {
        shared.deliver(&envelope);
    }
    let interval = shared.config().socket_mode.ping_interval_ms;
    let mut pings = tokio::time::interval(Duration::from_millis(interval.max(1)));
    pings.tick().await;
    let mut ping_count = 0u64;
    let idle = limits.idle_timeout();
    let mut last_heard = tokio::time::Instant::now();
    loop {
        // Nothing heard for `idle` (a frame trickled byte by byte never completes): the
        // connection is closed, as a server does with a peer that stopped answering its pings.
        let deaf = async {
            match idle {
                Some(idle) => tokio::time::sleep_until(last_heard + idle).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            () = deaf => {
                shared.log().note(format!("connection {id}: nothing heard for {} ms; closed (1001)", limits.idle_timeout_ms));
                let close = CloseFrame { code: CloseCode::Away, reason: "idle".into() };
                let _ = tokio::time::timeout(limits.header_timeout(), sink.send(Frame::Close(Some(close)))).await;
                break;
            }
            incoming = source.next() => { last_heard = tokio::time::Instant::now(); match incoming {
                Some(Ok(Frame::Text(text))) => shared.receive(id, text.as_str()),
                Some(Ok(Frame::Ping(payload))) => {
                    shared.log().frame(id, Direction::In, "ping", String::from_utf8_lossy(&payload).into_owned());
                    if sink.send(Frame::Pong(payload.clone())).await.is_err() {
                        break;
                    }
                    shared.log().frame(id, Direction::Out, "pong", String::from_utf8_lossy(&payload).into_owned());
                }
                Some(Ok(Frame::Pong(payload))) => {
                    shared.log().frame(id, Direction::In, "pong", String::from_utf8_lossy(&payload).into_owned());
                }
                Some(Ok(Frame::Close(_))) => {
                    // Completes the close handshake the client started.
                    let _ = sink.close().await;
                    break;
                }
                None | Some(Err(_)) => break,
                Some(Ok(_)) => shared.log().note(format!("connection {id}: a binary frame")),
            }},
            out = outgoing.recv() => match out {
                Some(Outgoing::Text(text)) => {
                    if sink.send(Frame::text(text)).await.is_err() {
                        break;
                    }
                }
                Some(Outgoing::Drop) | None => return,
            },
            _ = pings.tick(), if interval > 0 => {
                ping_count += 1;
                let payload = format!("ski-fake-slack:{ping_count}");
                if sink.send(Frame::Ping(payload.clone().into_bytes().into())).await.is_err() {
                    break;
                }
                shared.log().frame(id, Direction::Out, "ping", payload);
            }
        }
    }
    shared.unregister(id);
}
