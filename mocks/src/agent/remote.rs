//! The mock agent on ACP's remote `/acp` endpoint (`ski-mock-agent --listen HOST:PORT`): ski's
//! own `/acp` server ([`ski::acp::remote::server`]) hosting the scripted agent, Streamable HTTP
//! and the WebSocket upgrade on one listener. Each connection runs its own scripted agent over a
//! pair of pipes, as a client on stdio would, and ends it when the connection ends.

use std::collections::HashSet;
use std::sync::{Arc, Mutex, PoisonError};

use futures::future::BoxFuture;
use futures::{SinkExt, StreamExt};
use serde_json::Value;
use ski::acp::remote::host::{Host, Hosted, Incoming, Link, Outgoing};
use ski::acp::remote::server::{HttpOptions, HttpServer};
use ski::exit::CommandError;
use ski::jsonrpc::{DEFAULT_MAX_LINE_BYTES, LineReader};
use tokio::io::{AsyncWrite, AsyncWriteExt, DuplexStream};
use tokio::sync::{oneshot, watch};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::{EOF_GRACE, Launch};

/// The buffer of each pipe between a connection and its scripted agent.
const PIPE_BYTES: usize = 64 * 1024;

/// The scripted agent as a [`Host`] of ski's `/acp` server: one agent per connection.
#[derive(Debug, Clone)]
pub struct MockHost {
    launch: Launch,
    sessions: Arc<Mutex<HashSet<String>>>,
}

impl MockHost {
    /// Every connection runs an agent launched as `launch` (its transcript and control channel
    /// are not used: they belong to one client).
    pub fn new(launch: Launch) -> Self {
        Self {
            launch: Launch {
                transcript: None,
                control: None,
                control_connect: None,
                handle_signals: false,
                ..launch
            },
            sessions: Arc::default(),
        }
    }

    fn note_session(&self, line: &str) {
        let Ok(message) = serde_json::from_str::<Value>(line) else {
            return;
        };
        let named = message
            .get("result")
            .and_then(|result| result.get("sessionId"))
            .or_else(|| message.get("params").and_then(|p| p.get("sessionId")))
            .and_then(Value::as_str);
        if let Some(session) = named {
            self.sessions
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .insert(session.to_owned());
        }
    }
}

impl Host for MockHost {
    fn connect(&self, link: Link, _label: &str) -> Box<dyn Hosted> {
        let (incoming, outgoing) = link.into_messages();
        let (to_agent, agent_stdin) = tokio::io::duplex(PIPE_BYTES);
        let (agent_stdout, from_agent) = tokio::io::duplex(PIPE_BYTES);
        let (stop, stopped) = oneshot::channel();
        let (done, finished) = watch::channel(false);
        tokio::spawn(feed(incoming, to_agent, stopped));
        tokio::spawn(forward(from_agent, outgoing, self.clone()));
        let launch = self.launch.clone();
        let run = tokio::spawn(async move {
            // Its notes (and a transcript or control error, which cannot happen without
            // either) go to this process's stderr, as on stdio.
            let _ = super::run(launch, agent_stdin, agent_stdout, tokio::io::stderr()).await;
            let _ = done.send(true);
        });
        Box::new(MockConnection {
            stop,
            finished,
            run,
        })
    }

    fn has_session(&self, id: &str) -> bool {
        self.sessions
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .contains(id)
    }

    fn stop(&self) -> BoxFuture<'static, ()> {
        // Every connection's agent was ended by closing its input.
        Box::pin(async {})
    }
}

/// One connection's scripted agent.
struct MockConnection {
    /// Ends the agent's input when sent or dropped.
    stop: oneshot::Sender<()>,
    /// `true` once the agent has ended.
    finished: watch::Receiver<bool>,
    run: JoinHandle<()>,
}

impl Hosted for MockConnection {
    fn ended(&mut self) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            // An error is a dropped sender: the agent's task is gone as well.
            let _ = self.finished.wait_for(|ended| *ended).await;
        })
    }

    fn close(self: Box<Self>) -> BoxFuture<'static, ()> {
        let Self {
            stop,
            mut finished,
            run,
        } = *self;
        drop(stop);
        Box::pin(async move {
            // The agent answers what it is working on for at most EOF_GRACE after its input
            // ends; one that goes on (a script ignoring end of input) is stopped.
            let ended = finished.wait_for(|ended| *ended);
            if tokio::time::timeout(EOF_GRACE * 2, ended).await.is_err() {
                run.abort();
            }
        })
    }
}

/// Writes each client message to the agent's input as one line; ends the input when the
/// connection's messages end or `stop` fires.
async fn feed(mut incoming: Incoming, mut to_agent: DuplexStream, mut stop: oneshot::Receiver<()>) {
    loop {
        let message = tokio::select! {
            biased;
            _ = &mut stop => break,
            message = incoming.next() => message,
        };
        let Some(Ok(mut text)) = message else { break };
        text.push('\n');
        if to_agent.write_all(text.as_bytes()).await.is_err() {
            break;
        }
    }
    let _ = to_agent.shutdown().await;
}

/// Sends each line the agent writes to the connection, noting the sessions it names.
async fn forward(from_agent: DuplexStream, mut outgoing: Outgoing, host: MockHost) {
    let mut lines = LineReader::with_max_line_bytes(from_agent, DEFAULT_MAX_LINE_BYTES);
    while let Some(line) = lines.next_line().await {
        let Ok(line) = line else { continue };
        let Ok(text) = std::str::from_utf8(line) else {
            continue;
        };
        host.note_session(text);
        if outgoing.send(text.to_owned()).await.is_err() {
            break;
        }
    }
    let _ = outgoing.close().await;
}

/// Serves `/acp` on `address` (port 0 picks a free one) until SIGTERM or SIGINT, writing
/// `listening on http://HOST:PORT/acp` to `notes` once it accepts; returns the exit code (143,
/// 130). An address that cannot be bound is a configuration error (exit 3).
pub async fn listen<E>(launch: Launch, address: &str, mut notes: E) -> Result<i32, CommandError>
where
    E: AsyncWrite + Unpin,
{
    let server = HttpServer::bind(address, HttpOptions::default())
        .await
        .map_err(CommandError::configuration)?;
    let note = format!("listening on {}\n", server.url());
    let _ = notes.write_all(note.as_bytes()).await;
    let _ = notes.flush().await;
    let shutdown = CancellationToken::new();
    let serving =
        tokio::spawn(server.serve_host(Arc::new(MockHost::new(launch)), shutdown.clone()));
    let (mut term, mut int) = {
        use tokio::signal::unix::{SignalKind, signal};
        (
            signal(SignalKind::terminate()).ok(),
            signal(SignalKind::interrupt()).ok(),
        )
    };
    let (code, _) = super::next_signal(&mut term, &mut int).await;
    shutdown.cancel();
    let _ = serving.await;
    Ok(code)
}
