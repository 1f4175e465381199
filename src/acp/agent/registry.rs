//! The connections of one agent and the owner of each session: where a session's notifications
//! and the agent's requests to the client go.
//!
//! Every connection runs its own JSON-RPC peer, so request ids never mix between connections and
//! each response goes back on the connection that asked. The owner of a session is the
//! connection that last created, forked, loaded, resumed or prompted it. A session's
//! notifications and requests go to its owner only; a notification with no session, or for a
//! session that never had an owner, goes to every open connection. Sending when the owner has
//! gone, or when no connection is open, is a [`RouteError`], never a panic. The registry also
//! counts the sessions each open connection owns, for the agent's cap on live sessions.

use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard, PoisonError};

use serde::Serialize;

use crate::acp::ClientCapabilities;
use crate::acp::methods::Generation;
use crate::jsonrpc::{Peer, SendError};

/// Identifies one connection of an agent.
pub type ConnectionId = u64;

/// Why a message could not be routed or sent.
#[derive(Debug, thiserror::Error)]
pub enum RouteError {
    /// No connection is open.
    #[error("not connected: no client connection is open")]
    NoConnections,
    /// The connection that owns the session has closed.
    #[error("not connected: the connection that owns session {session} has closed")]
    OwnerGone {
        /// The session.
        session: String,
    },
    /// The session has no owner connection to send a request to.
    #[error("not connected: session {session} has no owner connection")]
    NoOwner {
        /// The session.
        session: String,
    },
    /// Writing to the connection failed.
    #[error("sending to connection {connection} failed: {source}")]
    Send {
        /// The connection.
        connection: ConnectionId,
        /// What failed.
        #[source]
        source: SendError,
    },
}

/// Where a message goes.
#[derive(Debug)]
pub enum Target {
    /// The session's owner.
    Owner(ConnectionId, Peer),
    /// Every open connection.
    All(Vec<(ConnectionId, Peer)>),
}

#[derive(Debug)]
struct Connection {
    label: String,
    peer: Option<Peer>,
    client: ClientCapabilities,
    /// The protocol generation `initialize` settled on (v1 until then).
    generation: Generation,
    /// How many sessions this connection owns.
    owned: usize,
    /// Whether the connection's client has authenticated (and not logged out since).
    authenticated: bool,
}

#[derive(Debug, Default)]
struct Inner {
    next: ConnectionId,
    connections: BTreeMap<ConnectionId, Connection>,
    /// Keyed by ids of sessions that exist (the store made them), never by a peer's choice:
    /// foldhash, not SipHash.
    owners: foldhash::HashMap<String, ConnectionId>,
}

impl Inner {
    /// Adds `change` (1 or -1) to the owned count of a connection, if it is still open.
    fn count_owned(&mut self, id: Option<ConnectionId>, change: isize) {
        if let Some(connection) = id.and_then(|id| self.connections.get_mut(&id)) {
            connection.owned = connection.owned.saturating_add_signed(change);
        }
    }
}

/// The connections and session owners of one agent.
#[derive(Debug, Default)]
pub struct Registry {
    inner: Mutex<Inner>,
}

impl Registry {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Registers a new connection and returns its id.
    pub fn open(&self, label: &str) -> ConnectionId {
        let mut inner = self.lock();
        inner.next += 1;
        let id = inner.next;
        inner.connections.insert(
            id,
            Connection {
                label: label.to_owned(),
                peer: None,
                client: ClientCapabilities::default(),
                generation: Generation::V1,
                owned: 0,
                authenticated: false,
            },
        );
        id
    }

    /// Records the peer of a connection (the first call wins).
    pub fn attach(&self, id: ConnectionId, peer: &Peer) {
        if let Some(connection) = self.lock().connections.get_mut(&id)
            && connection.peer.is_none()
        {
            connection.peer = Some(peer.clone());
        }
    }

    /// Forgets a connection; sessions it owned keep it as their (gone) owner.
    pub fn close(&self, id: ConnectionId) {
        self.lock().connections.remove(&id);
    }

    /// The label of a connection (for logs).
    pub fn label(&self, id: ConnectionId) -> Option<String> {
        self.lock().connections.get(&id).map(|c| c.label.clone())
    }

    /// Records what the client of a connection advertised in `initialize`.
    pub fn set_client(&self, id: ConnectionId, client: ClientCapabilities) {
        if let Some(connection) = self.lock().connections.get_mut(&id) {
            connection.client = client;
        }
    }

    /// Records the protocol generation `initialize` settled on for a connection.
    pub fn set_generation(&self, id: ConnectionId, generation: Generation) {
        if let Some(connection) = self.lock().connections.get_mut(&id) {
            connection.generation = generation;
        }
    }

    /// The protocol generation of a connection (v1 before `initialize`, and for one that is
    /// gone).
    pub fn generation(&self, id: ConnectionId) -> Generation {
        self.lock()
            .connections
            .get(&id)
            .map_or(Generation::V1, |c| c.generation)
    }

    /// The protocol generation of a session's owner (v1 when it has none).
    pub fn session_generation(&self, session: &str) -> Generation {
        let inner = self.lock();
        inner
            .owners
            .get(session)
            .and_then(|owner| inner.connections.get(owner))
            .map_or(Generation::V1, |c| c.generation)
    }

    /// What the client of a connection advertised (nothing before `initialize`).
    pub fn client(&self, id: ConnectionId) -> ClientCapabilities {
        self.lock()
            .connections
            .get(&id)
            .map(|c| c.client.clone())
            .unwrap_or_default()
    }

    /// Makes a connection the owner of a session.
    pub fn set_owner(&self, session: &str, id: ConnectionId) {
        let mut inner = self.lock();
        // A prompt sets the owner it already has: that costs no copy of the id.
        let previous = match inner.owners.get_mut(session) {
            Some(owner) => Some(std::mem::replace(owner, id)),
            None => inner.owners.insert(session.to_owned(), id),
        };
        if previous != Some(id) {
            inner.count_owned(previous, -1);
            inner.count_owned(Some(id), 1);
        }
    }

    /// Records whether a connection's client is authenticated.
    pub fn set_authenticated(&self, id: ConnectionId, on: bool) {
        if let Some(connection) = self.lock().connections.get_mut(&id) {
            connection.authenticated = on;
        }
    }

    /// Whether a connection's client has authenticated (`false` for a closed one).
    pub fn is_authenticated(&self, id: ConnectionId) -> bool {
        self.lock()
            .connections
            .get(&id)
            .is_some_and(|c| c.authenticated)
    }

    /// The sessions a connection owns.
    pub fn sessions_of(&self, id: ConnectionId) -> Vec<String> {
        self.lock()
            .owners
            .iter()
            .filter(|(_, owner)| **owner == id)
            .map(|(session, _)| session.clone())
            .collect()
    }

    /// How many sessions a connection owns (0 for a closed one).
    pub fn owned_sessions(&self, id: ConnectionId) -> usize {
        self.lock().connections.get(&id).map_or(0, |c| c.owned)
    }

    /// The owner of a session, if it ever had one (it may have closed since).
    pub fn owner(&self, session: &str) -> Option<ConnectionId> {
        self.lock().owners.get(session).copied()
    }

    /// Forgets the owner of a removed session.
    pub fn forget_session(&self, session: &str) {
        let mut inner = self.lock();
        let previous = inner.owners.remove(session);
        inner.count_owned(previous, -1);
    }

    /// Forgets every session owner.
    pub fn forget_sessions(&self) {
        let mut inner = self.lock();
        inner.owners.clear();
        for connection in inner.connections.values_mut() {
            connection.owned = 0;
        }
    }

    /// How many connections are open.
    pub fn open_connections(&self) -> usize {
        self.lock().connections.len()
    }

    /// Where a notification about `session` (or about no session) goes.
    pub fn route(&self, session: Option<&str>) -> Result<Target, RouteError> {
        let inner = self.lock();
        if let Some(session) = session
            && let Some(owner) = inner.owners.get(session)
        {
            return match inner.connections.get(owner).and_then(|c| c.peer.clone()) {
                Some(peer) => Ok(Target::Owner(*owner, peer)),
                None => Err(RouteError::OwnerGone {
                    session: session.to_owned(),
                }),
            };
        }
        let all: Vec<(ConnectionId, Peer)> = inner
            .connections
            .iter()
            .filter_map(|(id, c)| c.peer.clone().map(|peer| (*id, peer)))
            .collect();
        if all.is_empty() {
            return Err(RouteError::NoConnections);
        }
        Ok(Target::All(all))
    }

    /// The owner of a session with its peer and client capabilities, for a request to the client.
    pub fn owner_peer(
        &self,
        session: &str,
    ) -> Result<(ConnectionId, Peer, ClientCapabilities), RouteError> {
        let inner = self.lock();
        let Some(owner) = inner.owners.get(session) else {
            if inner.connections.is_empty() {
                return Err(RouteError::NoConnections);
            }
            return Err(RouteError::NoOwner {
                session: session.to_owned(),
            });
        };
        match inner.connections.get(owner) {
            Some(Connection {
                peer: Some(peer),
                client,
                ..
            }) => Ok((*owner, peer.clone(), client.clone())),
            _ => Err(RouteError::OwnerGone {
                session: session.to_owned(),
            }),
        }
    }

    /// Sends a notification where [`Registry::route`] says; with several targets, the first
    /// failure is reported after every target was tried.
    pub async fn notify<P: Serialize + ?Sized>(
        &self,
        session: Option<&str>,
        method: &str,
        params: &P,
    ) -> Result<(), RouteError> {
        self.send(session, |peer| async move {
            peer.notify_typed(method, params).await
        })
        .await
    }

    /// As [`Registry::notify`], for a notification of `session` that `encode` writes as one line
    /// (see [`Peer::notify_encoded`]).
    pub async fn notify_encoded(
        &self,
        session: &str,
        encode: impl Fn(bool, &mut Vec<u8>) -> serde_json::Result<()>,
    ) -> Result<(), RouteError> {
        let encode = &encode;
        self.send(Some(session), |peer| async move {
            peer.notify_encoded(encode).await
        })
        .await
    }

    /// Sends with `send` to the session's owner, or to every connection.
    async fn send<F, Fut>(&self, session: Option<&str>, send: F) -> Result<(), RouteError>
    where
        F: Fn(Peer) -> Fut,
        Fut: Future<Output = Result<(), SendError>>,
    {
        match self.route(session)? {
            Target::Owner(id, peer) => send(peer).await.map_err(|source| RouteError::Send {
                connection: id,
                source,
            }),
            Target::All(targets) => {
                let mut first_error = None;
                for (id, peer) in targets {
                    if let Err(source) = send(peer).await {
                        first_error.get_or_insert(RouteError::Send {
                            connection: id,
                            source,
                        });
                    }
                }
                first_error.map_or(Ok(()), Err)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jsonrpc::Transport;

    fn peer() -> Peer {
        let (a, _b) = tokio::io::duplex(1024);
        let (read, write) = tokio::io::split(a);
        Peer::builder().spawn(Transport::bytes(read, write))
    }

    fn target_ids(target: Target) -> Vec<ConnectionId> {
        match target {
            Target::Owner(id, _) => vec![id],
            Target::All(all) => all.into_iter().map(|(id, _)| id).collect(),
        }
    }

    #[tokio::test]
    async fn owner_routing_broadcast_fallback_and_gone_owners() {
        let registry = Registry::default();
        assert!(matches!(
            registry.route(Some("s")),
            Err(RouteError::NoConnections)
        ));
        let one = registry.open("one");
        let two = registry.open("two");
        // A connection without a peer yet receives nothing.
        assert!(matches!(
            registry.route(None),
            Err(RouteError::NoConnections)
        ));
        registry.attach(one, &peer());
        registry.attach(two, &peer());
        assert_eq!(target_ids(registry.route(None).unwrap()), [one, two]);
        assert_eq!(target_ids(registry.route(Some("s")).unwrap()), [one, two]);
        registry.set_owner("s", two);
        assert_eq!(target_ids(registry.route(Some("s")).unwrap()), [two]);
        assert_eq!(registry.owner_peer("s").unwrap().0, two);
        assert!(matches!(
            registry.owner_peer("t"),
            Err(RouteError::NoOwner { .. })
        ));
        registry.set_owner("s", one);
        assert_eq!(target_ids(registry.route(Some("s")).unwrap()), [one]);
        registry.close(one);
        assert!(matches!(
            registry.route(Some("s")),
            Err(RouteError::OwnerGone { .. })
        ));
        assert!(matches!(
            registry.owner_peer("s"),
            Err(RouteError::OwnerGone { .. })
        ));
        registry.forget_session("s");
        assert_eq!(target_ids(registry.route(Some("s")).unwrap()), [two]);
    }

    #[test]
    fn owned_sessions_follow_the_owner_and_end_with_the_session() {
        let registry = Registry::default();
        let one = registry.open("one");
        let two = registry.open("two");
        registry.set_owner("a", one);
        registry.set_owner("b", one);
        registry.set_owner("b", one);
        assert_eq!(registry.owned_sessions(one), 2);
        registry.set_owner("b", two);
        assert_eq!(
            (registry.owned_sessions(one), registry.owned_sessions(two)),
            (1, 1)
        );
        registry.forget_session("a");
        registry.forget_session("a");
        assert_eq!(registry.owned_sessions(one), 0);
        registry.close(two);
        assert_eq!(registry.owned_sessions(two), 0);
        registry.set_owner("b", one);
        assert_eq!(
            registry.owned_sessions(one),
            1,
            "taken over from a closed connection"
        );
        registry.forget_sessions();
        assert_eq!(registry.owned_sessions(one), 0);
    }

    #[tokio::test]
    async fn notify_with_no_connection_is_an_error_not_a_panic() {
        let registry = Registry::default();
        let error = registry
            .notify(Some("s"), "session/update", &serde_json::json!({}))
            .await
            .unwrap_err();
        assert!(error.to_string().starts_with("not connected"), "{error}");
    }

    #[tokio::test]
    async fn client_capabilities_are_kept_per_connection() {
        let registry = Registry::default();
        let one = registry.open("one");
        let two = registry.open("two");
        let caps = ClientCapabilities {
            terminal: Some(true),
            ..ClientCapabilities::default()
        };
        registry.set_client(one, caps);
        assert!(registry.client(one).has_terminal());
        assert!(!registry.client(two).has_terminal());
    }
}
