//! The client's connection to its agent, and how it is replaced after a failure.
//!
//! A link holds the current [`Peer`]. When it was opened through a [`ConnectionFactory`] and a
//! request fails because the connection was lost (its send failed, or its input ended before the
//! response), the link opens a new connection by the reconnect policy (the n-th attempt after
//! `base·2^(n−1)`, capped), sends `initialize` again with the parameters of the first one, and
//! the request is sent again on the new connection. Concurrent requests that lost the same
//! connection share one reconnect. After [`Link::close`] nothing reconnects.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, RwLock};

use serde_json::Value;

use super::ClientError;
use crate::acp::methods;
use crate::jsonrpc::{CallError, Peer, RequestOptions, SendError, Transport};
use crate::transport::ws_client::{ConnectionFactory, ReconnectPolicy};

/// Builds a peer, with the client's handlers, over a new connection.
pub(crate) type PeerMaker = Arc<dyn Fn(Transport) -> Peer + Send + Sync>;

struct Current {
    generation: u64,
    peer: Peer,
}

pub(crate) struct Link {
    current: RwLock<Current>,
    factory: Option<Arc<dyn ConnectionFactory>>,
    policy: ReconnectPolicy,
    make_peer: PeerMaker,
    reconnecting: tokio::sync::Mutex<()>,
    initialize: Mutex<Option<Value>>,
    closed: AtomicBool,
    reconnects: AtomicU64,
}

impl Link {
    /// A link over a connection that cannot be replaced (stdio, a test pipe).
    pub(crate) fn fixed(transport: Transport, make_peer: PeerMaker) -> Self {
        Self::new(transport, None, ReconnectPolicy::never(), make_peer)
    }

    /// A link over a connection from `factory`, replaced by `policy` when it fails.
    pub(crate) fn reconnecting(
        transport: Transport,
        factory: Arc<dyn ConnectionFactory>,
        policy: ReconnectPolicy,
        make_peer: PeerMaker,
    ) -> Self {
        Self::new(transport, Some(factory), policy, make_peer)
    }

    fn new(
        transport: Transport,
        factory: Option<Arc<dyn ConnectionFactory>>,
        policy: ReconnectPolicy,
        make_peer: PeerMaker,
    ) -> Self {
        let peer = make_peer(transport);
        Self {
            current: RwLock::new(Current {
                generation: 0,
                peer,
            }),
            factory,
            policy,
            make_peer,
            reconnecting: tokio::sync::Mutex::new(()),
            initialize: Mutex::new(None),
            closed: AtomicBool::new(false),
            reconnects: AtomicU64::new(0),
        }
    }

    fn lock_initialize(&self) -> MutexGuard<'_, Option<Value>> {
        self.initialize
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// The current peer and its generation.
    fn current(&self) -> (u64, Peer) {
        let current = self.current.read().unwrap_or_else(PoisonError::into_inner);
        (current.generation, current.peer.clone())
    }

    /// The current peer.
    pub(crate) fn peer(&self) -> Peer {
        self.current().1
    }

    /// How many times the connection was replaced.
    pub(crate) fn reconnects(&self) -> u64 {
        self.reconnects.load(Ordering::Relaxed)
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::SeqCst)
    }

    /// Whether `error` means the connection was lost (rather than closed by us or answered).
    fn lost(&self, error: &CallError) -> bool {
        !self.is_closed()
            && matches!(
                error,
                CallError::Eof | CallError::NotConnected | CallError::Send(SendError::Write(_))
            )
    }

    /// Sends a request; a lost connection is replaced and the request sent again, at most
    /// `policy.attempts` times.
    pub(crate) async fn request(
        &self,
        method: &str,
        params: Option<Value>,
        options: RequestOptions,
    ) -> Result<Value, ClientError> {
        if method == methods::INITIALIZE {
            *self.lock_initialize() = params.clone();
        }
        let mut retries = 0;
        loop {
            let (generation, peer) = self.current();
            let result = peer.request_with(method, params.clone(), options).await;
            match result {
                Err(error)
                    if self.factory.is_some()
                        && retries < self.policy.attempts
                        && self.lost(&error) =>
                {
                    retries += 1;
                    tracing::info!(%method, %error, "connection lost; reconnecting");
                    // A failed `initialize` is itself what is retried; anything else needs the
                    // new connection initialized first.
                    self.reconnect(generation, method != methods::INITIALIZE)
                        .await?;
                }
                result => {
                    return result.map_err(|source| ClientError::Call {
                        method: method.to_owned(),
                        source,
                    });
                }
            }
        }
    }

    /// Sends a notification on the current connection.
    pub(crate) async fn notify(
        &self,
        method: &str,
        params: Option<Value>,
    ) -> Result<(), ClientError> {
        self.peer()
            .notify(method, params)
            .await
            .map_err(|source| ClientError::Call {
                method: method.to_owned(),
                source: source.into(),
            })
    }

    /// Replaces the connection of generation `lost`, unless another caller already did.
    async fn reconnect(&self, lost: u64, initialize: bool) -> Result<(), ClientError> {
        let _turn = self.reconnecting.lock().await;
        if self.current().0 != lost {
            return Ok(());
        }
        let Some(factory) = &self.factory else {
            return Err(ClientError::Reconnect {
                attempts: 0,
                reason: "this connection cannot be replaced".to_owned(),
            });
        };
        let mut last = String::from("no attempt was made");
        for attempt in 1..=self.policy.attempts {
            tokio::time::sleep(self.policy.delay(attempt)).await;
            if self.is_closed() {
                break;
            }
            let transport = match factory.connect().await {
                Ok(transport) => transport,
                Err(error) => {
                    tracing::info!(attempt, %error, "reconnect attempt failed");
                    last = error.to_string();
                    continue;
                }
            };
            let peer = (self.make_peer)(transport);
            let replay = if initialize {
                self.lock_initialize().clone()
            } else {
                None
            };
            if let Some(params) = replay
                && let Err(error) = peer.request(methods::INITIALIZE, Some(params)).await
            {
                tracing::info!(attempt, %error, "initialize after reconnect failed");
                last = format!("initialize after reconnect failed: {error}");
                peer.close().await;
                continue;
            }
            let old = {
                let mut current = self.current.write().unwrap_or_else(PoisonError::into_inner);
                current.generation += 1;
                std::mem::replace(&mut current.peer, peer)
            };
            self.reconnects.fetch_add(1, Ordering::Relaxed);
            tracing::info!(attempt, target = %factory.describe(), "reconnected");
            tokio::spawn(async move { old.close().await });
            if self.is_closed() {
                self.peer().close().await;
            }
            return Ok(());
        }
        Err(ClientError::Reconnect {
            attempts: self.policy.attempts,
            reason: last,
        })
    }

    /// Closes the connection for good; idempotent.
    pub(crate) async fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
        self.peer().close().await;
    }
}
