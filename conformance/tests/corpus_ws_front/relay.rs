//! The front's relay: each client connection gets its own connection to the agent, and every
//! frame passes between the two, except where the front's defect routes, drops or rewrites one.

use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use futures::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::handshake::server::{Request, Response};

use super::Defect;

/// Where a frame goes.
type Outbox = UnboundedSender<Message>;

/// What every connection shares.
pub struct Relay {
    upstream: String,
    defect: Defect,
    agent_pid: u32,
    next: AtomicUsize,
    /// The live clients' outboxes, oldest first.
    clients: Mutex<Vec<(usize, Outbox)>>,
}

/// What one connection remembers of the requests crossing it (ids as JSON text).
#[derive(Default)]
struct Pending {
    /// The client's requests the agent has not answered.
    requests: HashSet<String>,
    /// The agent's session/request_permission requests.
    permissions: HashSet<String>,
}

impl Relay {
    pub fn new(upstream: String, defect: Defect, agent_pid: u32) -> Self {
        Self {
            upstream,
            defect,
            agent_pid,
            next: AtomicUsize::new(0),
            clients: Mutex::new(Vec::new()),
        }
    }

    fn clients(&self) -> MutexGuard<'_, Vec<(usize, Outbox)>> {
        self.clients
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The most recently connected client's outbox.
    fn latest(&self) -> Option<Outbox> {
        self.clients().last().map(|(_, outbox)| outbox.clone())
    }

    /// Relays one client connection until either side ends.
    // The upgrade callback's error type is tungstenite's own rejection response, large or not.
    #[allow(clippy::result_large_err)]
    async fn connection(self: Arc<Self>, stream: TcpStream) -> Result<(), String> {
        let (upstream, response) = tokio_tungstenite::connect_async(self.upstream.as_str())
            .await
            .map_err(|e| format!("cannot reach the agent at {}: {e}", self.upstream))?;
        let connection_id = response.headers().get("acp-connection-id").cloned();
        let defect = self.defect;
        let client = tokio_tungstenite::accept_hdr_async(
            stream,
            move |_: &Request, mut response: Response| {
                if let Some(id) = connection_id.filter(|_| defect != Defect::NoConnectionId) {
                    response.headers_mut().insert("acp-connection-id", id);
                }
                Ok(response)
            },
        )
        .await
        .map_err(|e| format!("the client's upgrade failed: {e}"))?;
        let number = self.next.fetch_add(1, Ordering::Relaxed);
        let (client_sink, mut from_client) = client.split();
        let (agent_sink, mut from_agent) = upstream.split();
        let (outbox, outgoing) = unbounded_channel();
        let (to_agent, incoming) = unbounded_channel();
        tokio::spawn(write_all(outgoing, client_sink));
        tokio::spawn(write_all(incoming, agent_sink));
        self.clients().push((number, outbox.clone()));
        let pending = Mutex::new(Pending::default());
        let down = async {
            while let Some(Ok(message)) = from_agent.next().await {
                match message {
                    Message::Text(text) => {
                        if let Some(to) = self.route_down(&outbox, text.as_str(), &pending) {
                            let _ = to.send(Message::Text(text));
                        }
                    }
                    Message::Close(_) => break,
                    other => {
                        let _ = outbox.send(other);
                    }
                }
            }
        };
        tokio::pin!(down);
        let up = async {
            while let Some(Ok(message)) = from_client.next().await {
                let message = match message {
                    Message::Text(text) => Message::text(self.route_up(text.as_str(), &pending)),
                    Message::Binary(bytes) if defect == Defect::ReadsBinaryFrames => {
                        Message::text(String::from_utf8_lossy(&bytes).into_owned())
                    }
                    Message::Close(_) => break,
                    other => other,
                };
                let _ = to_agent.send(message);
            }
        };
        tokio::select! {
            () = &mut down => {}
            () = up => {
                self.clients().retain(|(n, _)| *n != number);
                let unanswered = !lock(&pending).requests.is_empty();
                if defect == Defect::DiesOnDisconnect && unanswered {
                    eprintln!("corpus ws front: a client left with a request unanswered; exiting");
                    let _ = nix::sys::signal::killpg(
                        nix::unistd::Pid::from_raw(self.agent_pid as i32),
                        nix::sys::signal::Signal::SIGKILL,
                    );
                    std::process::exit(1);
                }
                if defect == Defect::KeepsClosedLinks {
                    (&mut down).await;
                }
            }
        }
        self.clients().retain(|(n, _)| *n != number);
        let _ = to_agent.send(Message::Close(None));
        let _ = outbox.send(Message::Close(None));
        Ok(())
    }

    /// Where a text frame of the agent goes (`None`: nowhere).
    fn route_down(&self, own: &Outbox, text: &str, pending: &Mutex<Pending>) -> Option<Outbox> {
        let Ok(value) = serde_json::from_str::<Value>(text) else {
            return Some(own.clone());
        };
        let method = value.get("method").and_then(Value::as_str);
        let id = value.get("id").map(Value::to_string);
        match (method, id) {
            (None, Some(id)) => {
                lock(pending).requests.remove(&id);
                if self.defect == Defect::AnswersLatestConnection {
                    return self.latest();
                }
            }
            (Some("session/request_permission"), Some(id)) => {
                lock(pending).permissions.insert(id);
            }
            (Some(method), None) => {
                let kind = value.pointer("/params/update/sessionUpdate");
                let dropped = match self.defect {
                    Defect::DropsUpdates => method == "session/update",
                    Defect::DropsPlanUpdates => kind == Some(&json!("plan")),
                    _ => false,
                };
                if dropped {
                    return None;
                }
                if self.defect == Defect::NotifiesLatestConnection {
                    return self.latest();
                }
            }
            _ => {}
        }
        Some(own.clone())
    }

    /// A text frame of the client as the agent gets it.
    fn route_up(&self, text: &str, pending: &Mutex<Pending>) -> String {
        let Ok(mut value) = serde_json::from_str::<Value>(text) else {
            return text.to_owned();
        };
        let Some(id) = value.get("id").map(Value::to_string) else {
            return text.to_owned();
        };
        if value.get("method").is_some() {
            lock(pending).requests.insert(id);
            return text.to_owned();
        }
        let permission = lock(pending).permissions.remove(&id);
        if permission
            && self.defect == Defect::CancelsPermissionAnswers
            && value.get("result").is_some()
        {
            value["result"] = json!({"outcome": {"outcome": "cancelled"}});
            return value.to_string();
        }
        text.to_owned()
    }
}

fn lock(pending: &Mutex<Pending>) -> MutexGuard<'_, Pending> {
    pending
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Writes every message of `outgoing` to `sink`, until a close or a failed write.
async fn write_all<S>(mut outgoing: UnboundedReceiver<Message>, mut sink: S)
where
    S: futures::Sink<Message> + Unpin,
{
    while let Some(message) = outgoing.recv().await {
        let close = matches!(message, Message::Close(_));
        if sink.send(message).await.is_err() || close {
            break;
        }
    }
}

/// Accepts client connections for ever, each relayed on a task of its own.
pub async fn accept_all(relay: Arc<Relay>, listener: TcpListener) -> Result<(), String> {
    loop {
        let (stream, _) = listener
            .accept()
            .await
            .map_err(|e| format!("accept failed: {e}"))?;
        let relay = relay.clone();
        tokio::spawn(async move {
            if let Err(error) = relay.connection(stream).await {
                eprintln!("corpus ws front: {error}");
            }
        });
    }
}
