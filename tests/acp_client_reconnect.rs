//! Reconnect through a scripted connection factory, without a network: connections are
//! in-memory frame channels, the agent on each is a `Peer` with a few handlers, and a script
//! says how each connection fails. Time is paused, so the backoff delays are exact.

use std::collections::VecDeque;
use std::io;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::channel::mpsc;
use futures::{SinkExt, StreamExt};
use serde_json::{Value, json};
use ski::acp::client::{Client, ClientConfig, ClientError};
use ski::acp::{NewSessionRequest, PromptRequest, SessionUpdate, StopReason};
use ski::jsonrpc::peer::BoxFuture;
use ski::jsonrpc::{Peer, RpcError, Transport};
use ski::transport::ws_client::{ConnectError, ConnectionFactory, ReconnectPolicy};
use tokio::time::Instant;

/// How one scripted connection behaves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Plan {
    /// The connection attempt fails.
    Refuse,
    /// The connection opens, but the client's first send fails.
    FailFirstSend,
    /// The connection works until the agent receives a request of this method; then the
    /// client's receive side fails and the request is never answered.
    FailReceiveOn(&'static str),
    /// The connection works.
    Healthy,
}

/// What the agents of every connection saw.
#[derive(Default)]
struct Seen {
    initialize: AtomicUsize,
    new_session: AtomicUsize,
    prompt: AtomicUsize,
}

struct ScriptedFactory {
    plans: Mutex<VecDeque<Plan>>,
    attempts: Mutex<Vec<(Instant, Plan)>>,
    seen: Arc<Seen>,
}

impl ScriptedFactory {
    fn new(plans: &[Plan]) -> Arc<Self> {
        Arc::new(Self {
            plans: Mutex::new(plans.iter().copied().collect()),
            attempts: Mutex::new(Vec::new()),
            seen: Arc::new(Seen::default()),
        })
    }

    fn attempts(&self) -> Vec<(Instant, Plan)> {
        self.attempts.lock().unwrap().clone()
    }

    fn open(&self, plan: Plan) -> Transport {
        // Frames from the agent to the client, and a second source for injected receive errors.
        let (to_client, from_agent) = mpsc::unbounded::<String>();
        let (fault, faults) = mpsc::unbounded::<Result<String, io::Error>>();
        let client_input = futures::stream::select(from_agent.map(Ok), faults);
        let (to_agent, from_client) = mpsc::unbounded::<String>();
        let agent_transport = Transport::frames(
            from_client.map(Ok::<_, io::Error>),
            to_client.sink_map_err(io::Error::other),
        );
        spawn_agent(agent_transport, self.seen.clone(), plan, fault);
        if plan == Plan::FailFirstSend {
            let failing = futures::sink::unfold((), |(), _frame: String| async {
                Err::<(), io::Error>(io::Error::new(
                    io::ErrorKind::BrokenPipe,
                    "scripted send failure",
                ))
            });
            // The agent's end stays open but never hears anything.
            std::mem::forget(to_agent);
            return Transport::frames(client_input, failing);
        }
        Transport::frames(client_input, to_agent.sink_map_err(io::Error::other))
    }
}

impl ConnectionFactory for ScriptedFactory {
    fn connect(&self) -> BoxFuture<Result<Transport, ConnectError>> {
        let plan = self
            .plans
            .lock()
            .unwrap()
            .pop_front()
            .unwrap_or(Plan::Healthy);
        self.attempts.lock().unwrap().push((Instant::now(), plan));
        let result = match plan {
            Plan::Refuse => Err(ConnectError::Failed("scripted refusal".to_owned())),
            plan => Ok(self.open(plan)),
        };
        Box::pin(std::future::ready(result))
    }

    fn describe(&self) -> String {
        "scripted".to_owned()
    }
}

/// An agent on one connection: counts what it sees, answers, and on `FailReceiveOn(method)`
/// breaks the client's receive side instead of answering.
fn spawn_agent(
    transport: Transport,
    seen: Arc<Seen>,
    plan: Plan,
    fault: mpsc::UnboundedSender<Result<String, io::Error>>,
) {
    let fail_on = match plan {
        Plan::FailReceiveOn(method) => Some(method),
        _ => None,
    };
    let fault = Arc::new(Mutex::new(Some(fault)));
    let trip = move |method: &str| -> bool {
        if fail_on == Some(method)
            && let Some(fault) = fault.lock().unwrap().take()
        {
            let _ = fault.unbounded_send(Err(io::Error::new(
                io::ErrorKind::ConnectionReset,
                "scripted receive failure",
            )));
            return true;
        }
        false
    };
    let trip = Arc::new(trip);
    let (s1, s2, s3) = (seen.clone(), seen.clone(), seen);
    let (t1, t2, t3) = (trip.clone(), trip.clone(), trip);
    let peer = Peer::builder()
        .on_request("initialize", move |_cx, _params: Option<Value>| {
            s1.initialize.fetch_add(1, Ordering::SeqCst);
            let tripped = t1("initialize");
            async move {
                if tripped {
                    std::future::pending::<()>().await;
                }
                Ok(json!({"protocolVersion": 1, "agentCapabilities": {}}))
            }
        })
        .on_request("session/new", move |_cx, _params: Option<Value>| {
            let n = s2.new_session.fetch_add(1, Ordering::SeqCst);
            let tripped = t2("session/new");
            async move {
                if tripped {
                    std::future::pending::<()>().await;
                }
                Ok(json!({"sessionId": format!("s{n}")}))
            }
        })
        .on_request(
            "session/prompt",
            move |cx: ski::jsonrpc::RequestContext, params: Option<Value>| {
                s3.prompt.fetch_add(1, Ordering::SeqCst);
                let tripped = t3("session/prompt");
                async move {
                    if tripped {
                        std::future::pending::<()>().await;
                    }
                    let params = params.ok_or_else(|| RpcError::invalid_params("no params"))?;
                    let update = json!({"sessionId": params["sessionId"], "update": {
                    "sessionUpdate": "agent_message_chunk",
                    "content": {"type": "text", "text": "echo"}}});
                    cx.peer()
                        .notify("session/update", Some(update))
                        .await
                        .map_err(|e| RpcError::internal_error(e.to_string()))?;
                    Ok(json!({"stopReason": "end_turn"}))
                }
            },
        )
        .spawn(transport);
    // The peer's tasks keep running after the handle is dropped; keep it alive explicitly.
    std::mem::forget(peer);
}

fn config(attempts: u32) -> ClientConfig {
    ClientConfig {
        reconnect: ReconnectPolicy::new(attempts, Duration::from_millis(200)),
        ..ClientConfig::default()
    }
}

#[tokio::test(start_paused = true)]
async fn a_failed_first_send_reconnects_after_the_base_delay() {
    let factory = ScriptedFactory::new(&[Plan::FailFirstSend, Plan::Healthy]);
    let client = Client::connect(factory.clone(), config(2)).await.unwrap();
    let response = client.initialize().await.unwrap();
    assert_eq!(response.protocol_version, 1);
    let attempts = factory.attempts();
    assert_eq!(attempts.len(), 2, "{attempts:?}");
    let waited = attempts[1].0 - attempts[0].0;
    assert!(
        waited >= Duration::from_millis(200) && waited <= Duration::from_secs(3),
        "reconnected after {waited:?}"
    );
    assert_eq!(factory.seen.initialize.load(Ordering::SeqCst), 1);
    assert_eq!(client.stats().reconnects, 1);
    client.close().await;
}

#[tokio::test(start_paused = true)]
async fn a_failed_receive_reinitializes_and_retries_the_prompt() {
    let factory = ScriptedFactory::new(&[Plan::FailReceiveOn("session/prompt"), Plan::Healthy]);
    let client = Client::connect(factory.clone(), config(2)).await.unwrap();
    client.initialize().await.unwrap();
    let session = client
        .new_session(&NewSessionRequest::new("/tmp"))
        .await
        .unwrap();
    let mut updates = client.follow(&session.session_id);
    let result = client
        .prompt(&PromptRequest::text(&session.session_id, "hi"))
        .await
        .unwrap();
    assert_eq!(result.stop_reason, StopReason::EndTurn);
    let update = updates.next().await.unwrap();
    assert!(matches!(update.update, SessionUpdate::AgentMessageChunk(_)));
    // The prompt reached both agents; the second connection was initialized first.
    assert_eq!(factory.seen.prompt.load(Ordering::SeqCst), 2);
    assert_eq!(factory.seen.initialize.load(Ordering::SeqCst), 2);
    assert_eq!(factory.seen.new_session.load(Ordering::SeqCst), 1);
    let attempts = factory.attempts();
    assert_eq!(attempts.len(), 2);
    assert!(attempts[1].0 - attempts[0].0 >= Duration::from_millis(200));
    client.close().await;
}

#[tokio::test(start_paused = true)]
async fn concurrent_requests_on_a_lost_connection_share_one_reconnect() {
    let factory = ScriptedFactory::new(&[Plan::FailReceiveOn("session/new"), Plan::Healthy]);
    let client = Client::connect(factory.clone(), config(2)).await.unwrap();
    client.initialize().await.unwrap();
    let requests: Vec<_> = (0..3)
        .map(|n| {
            let client = client.clone();
            tokio::spawn(async move {
                client
                    .new_session(&NewSessionRequest::new(format!("/{n}")))
                    .await
            })
        })
        .collect();
    for request in requests {
        request.await.unwrap().unwrap();
    }
    assert_eq!(factory.attempts().len(), 2, "one reconnect for all three");
    assert_eq!(client.stats().reconnects, 1);
    client.close().await;
}

#[tokio::test(start_paused = true)]
async fn reconnect_gives_up_after_the_configured_attempts_with_growing_delays() {
    let factory = ScriptedFactory::new(&[
        Plan::FailReceiveOn("session/new"),
        Plan::Refuse,
        Plan::Refuse,
        Plan::Healthy,
    ]);
    let client = Client::connect(factory.clone(), config(2)).await.unwrap();
    client.initialize().await.unwrap();
    let started = Instant::now();
    let error = client
        .new_session(&NewSessionRequest::new("/tmp"))
        .await
        .unwrap_err();
    assert!(
        matches!(error, ClientError::Reconnect { attempts: 2, .. }),
        "{error}"
    );
    let attempts = factory.attempts();
    assert_eq!(attempts.len(), 3, "{attempts:?}");
    assert_eq!(attempts[1].0 - started, Duration::from_millis(200));
    assert_eq!(attempts[2].0 - attempts[1].0, Duration::from_millis(400));
    client.close().await;
}

#[tokio::test(start_paused = true)]
async fn without_attempts_a_lost_connection_is_an_eof() {
    let factory = ScriptedFactory::new(&[Plan::FailReceiveOn("session/new")]);
    let client = Client::connect(factory.clone(), config(0)).await.unwrap();
    client.initialize().await.unwrap();
    let error = client
        .new_session(&NewSessionRequest::new("/tmp"))
        .await
        .unwrap_err();
    assert!(
        matches!(error.call_error(), Some(ski::jsonrpc::CallError::Eof)),
        "{error}"
    );
    assert_eq!(factory.attempts().len(), 1);
}

#[tokio::test(start_paused = true)]
async fn the_first_connection_is_retried_with_backoff() {
    let factory = ScriptedFactory::new(&[Plan::Refuse, Plan::Refuse, Plan::Healthy]);
    let started = Instant::now();
    let client = Client::connect(factory.clone(), config(2)).await.unwrap();
    assert_eq!(started.elapsed(), Duration::from_millis(600));
    client.initialize().await.unwrap();

    let refusing = ScriptedFactory::new(&[Plan::Refuse, Plan::Refuse, Plan::Refuse]);
    let error = Client::connect(refusing.clone(), config(2))
        .await
        .unwrap_err();
    assert!(
        error.to_string().contains("gave up after 3 attempts"),
        "{error}"
    );
}

#[tokio::test(start_paused = true)]
async fn closing_stops_reconnecting() {
    let factory = ScriptedFactory::new(&[Plan::FailReceiveOn("session/new"), Plan::Refuse]);
    let client = Client::connect(factory.clone(), config(3)).await.unwrap();
    client.initialize().await.unwrap();
    let request = tokio::spawn({
        let client = client.clone();
        async move { client.new_session(&NewSessionRequest::new("/tmp")).await }
    });
    // Let the request fail and the first reconnect attempt happen, then close.
    tokio::time::sleep(Duration::from_millis(300)).await;
    client.close().await;
    let error = request.await.unwrap().unwrap_err();
    assert!(matches!(error, ClientError::Reconnect { .. }), "{error}");
    assert_eq!(factory.attempts().len(), 2, "no attempt after close");
}
