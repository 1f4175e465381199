//! Handlers for inbound requests and notifications, the context each call gets, and the table
//! that maps method names to handlers.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use serde_json::value::RawValue;
use tokio_util::sync::CancellationToken;

use super::Peer;
use crate::jsonrpc::error::{RpcError, decode_params};
use crate::jsonrpc::id::RequestId;

/// A boxed, sendable future.
pub type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send + 'static>>;

/// Handles one inbound request method; the result becomes the response.
///
/// Any `Fn(RequestContext, Option<Value>) -> impl Future<Output = Result<Value, RpcError>>`
/// closure is a handler.
pub trait RequestHandler: Send + Sync + 'static {
    /// Handles one request. `params` is the raw `params` member (`None` when absent).
    fn call(&self, cx: RequestContext, params: Option<Value>)
    -> BoxFuture<Result<Value, RpcError>>;
}

impl<F, Fut> RequestHandler for F
where
    F: Fn(RequestContext, Option<Value>) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<Value, RpcError>> + Send + 'static,
{
    fn call(
        &self,
        cx: RequestContext,
        params: Option<Value>,
    ) -> BoxFuture<Result<Value, RpcError>> {
        Box::pin(self(cx, params))
    }
}

/// Handles one inbound request method as text: its params' text, the `params` member exactly as
/// it arrived (`None` when absent), in, and its result's JSON text out. For a handler that
/// decodes its params into its own types and encodes its result from them, which then costs no
/// `serde_json::Value` tree either way. A peer with such a handler keeps the params of every
/// inbound message as text and parses a `Value` only for the handlers that take one.
///
/// Any `Fn(RequestContext, Option<Box<RawValue>>) -> impl Future<Output = Result<Box<RawValue>,
/// RpcError>>` closure is a handler; [`crate::jsonrpc::decode_params_text`] decodes the params
/// as [`crate::jsonrpc::decode_params`] decodes a `Value`, with the same errors, and
/// `serde_json::value::to_raw_value` encodes a result.
pub trait TextRequestHandler: Send + Sync + 'static {
    /// Handles one request.
    fn call(
        &self,
        cx: RequestContext,
        params: Option<Box<RawValue>>,
    ) -> BoxFuture<Result<Box<RawValue>, RpcError>>;
}

impl<F, Fut> TextRequestHandler for F
where
    F: Fn(RequestContext, Option<Box<RawValue>>) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<Box<RawValue>, RpcError>> + Send + 'static,
{
    fn call(
        &self,
        cx: RequestContext,
        params: Option<Box<RawValue>>,
    ) -> BoxFuture<Result<Box<RawValue>, RpcError>> {
        Box::pin(self(cx, params))
    }
}

/// Handles one inbound notification method.
///
/// Any `Fn(NotificationContext, Option<Value>) -> impl Future<Output = ()>` closure is a handler.
pub trait NotificationHandler: Send + Sync + 'static {
    /// Handles one notification. Notifications are handled one at a time, in arrival order.
    fn call(&self, cx: NotificationContext, params: Option<Value>) -> BoxFuture<()>;
}

impl<F, Fut> NotificationHandler for F
where
    F: Fn(NotificationContext, Option<Value>) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    fn call(&self, cx: NotificationContext, params: Option<Value>) -> BoxFuture<()> {
        Box::pin(self(cx, params))
    }
}

/// Adapts a typed closure to a [`RequestHandler`]: params decode into `P` (failure answers
/// `-32602`) and the result encodes from `R` (failure answers `-32603`).
pub(crate) struct TypedRequest<F, P, R> {
    f: F,
    types: std::marker::PhantomData<fn(P) -> R>,
}

impl<F, P, R> TypedRequest<F, P, R> {
    pub(crate) fn new(f: F) -> Self {
        Self {
            f,
            types: std::marker::PhantomData,
        }
    }
}

impl<F, Fut, P, R> RequestHandler for TypedRequest<F, P, R>
where
    F: Fn(RequestContext, P) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<R, RpcError>> + Send + 'static,
    P: DeserializeOwned + Send + 'static,
    R: Serialize + Send + 'static,
{
    fn call(
        &self,
        cx: RequestContext,
        params: Option<Value>,
    ) -> BoxFuture<Result<Value, RpcError>> {
        let params = match decode_params::<P>(params) {
            Ok(params) => params,
            Err(error) => return Box::pin(std::future::ready(Err(error))),
        };
        let fut = (self.f)(cx, params);
        Box::pin(async move {
            let result = fut.await?;
            serde_json::to_value(result)
                .map_err(|e| RpcError::internal_error(format!("cannot encode result: {e}")))
        })
    }
}

/// What a request handler knows about its call, and how it talks back.
#[derive(Clone)]
pub struct RequestContext {
    pub(crate) peer: Peer,
    pub(crate) id: RequestId,
    pub(crate) method: Arc<str>,
    pub(crate) cancel: CancellationToken,
    pub(crate) flags: Arc<CallFlags>,
}

#[derive(Debug, Default)]
pub(crate) struct CallFlags {
    pub(crate) cooperative: AtomicBool,
    pub(crate) suppressed: AtomicBool,
}

impl fmt::Debug for RequestContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RequestContext")
            .field("id", &self.id)
            .field("method", &self.method)
            .field("cancelled", &self.cancel.is_cancelled())
            .finish()
    }
}

impl RequestContext {
    /// The peer the request came from, for sending notifications and requests back.
    pub fn peer(&self) -> &Peer {
        &self.peer
    }

    /// The request's id, as the remote side sent it.
    pub fn id(&self) -> &RequestId {
        &self.id
    }

    /// The method name (useful in a catch-all handler).
    pub fn method(&self) -> &str {
        &self.method
    }

    /// Cancelled when the remote side sends `$/cancel_request` for this id, or the peer closes.
    pub fn cancellation(&self) -> &CancellationToken {
        &self.cancel
    }

    /// Whether cancellation was requested.
    pub fn is_cancelled(&self) -> bool {
        self.cancel.is_cancelled()
    }

    /// Takes over cancellation: after this call a `$/cancel_request` no longer drops the handler
    /// and answers `-32800`; the handler watches [`RequestContext::cancellation`] and returns
    /// whatever it wants (a normal result or `Err(RpcError::request_cancelled())`).
    pub fn handle_cancellation(&self) {
        self.flags.cooperative.store(true, Ordering::SeqCst);
    }

    /// Sends no response for this request, whatever the handler returns. For fakes that must
    /// misbehave (never answer, or answer by hand with [`Peer::send_message`]).
    pub fn suppress_response(&self) {
        self.flags.suppressed.store(true, Ordering::SeqCst);
    }
}

/// What a notification handler knows about its call.
#[derive(Clone)]
pub struct NotificationContext {
    pub(crate) peer: Peer,
    pub(crate) method: Arc<str>,
}

impl fmt::Debug for NotificationContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NotificationContext")
            .field("method", &self.method)
            .finish()
    }
}

impl NotificationContext {
    /// The peer the notification came from.
    pub fn peer(&self) -> &Peer {
        &self.peer
    }

    /// The method name.
    pub fn method(&self) -> &str {
        &self.method
    }
}

/// The handler of one request method, with the form of params it takes.
#[derive(Clone)]
pub(crate) enum RequestRoute {
    /// Params as a `Value`.
    Value(Arc<dyn RequestHandler>),
    /// Params as their text.
    Text(Arc<dyn TextRequestHandler>),
}

/// Method name to handler, with optional catch-alls.
#[derive(Default, Clone)]
pub(crate) struct Router {
    // Keys are the method names this process installs (a peer only looks them up): foldhash.
    requests: foldhash::HashMap<String, RequestRoute>,
    notifications: foldhash::HashMap<String, Arc<dyn NotificationHandler>>,
    any_request: Option<Arc<dyn RequestHandler>>,
    any_notification: Option<Arc<dyn NotificationHandler>>,
}

impl Router {
    pub(crate) fn add_request(&mut self, method: String, handler: Arc<dyn RequestHandler>) {
        self.requests.insert(method, RequestRoute::Value(handler));
    }

    pub(crate) fn add_text_request(
        &mut self,
        method: String,
        handler: Arc<dyn TextRequestHandler>,
    ) {
        self.requests.insert(method, RequestRoute::Text(handler));
    }

    /// Whether some request handler takes its params as text: the read loop then keeps every
    /// message's params as text.
    pub(crate) fn reads_text(&self) -> bool {
        self.requests
            .values()
            .any(|route| matches!(route, RequestRoute::Text(_)))
    }

    pub(crate) fn add_notification(
        &mut self,
        method: String,
        handler: Arc<dyn NotificationHandler>,
    ) {
        self.notifications.insert(method, handler);
    }

    pub(crate) fn set_any_request(&mut self, handler: Arc<dyn RequestHandler>) {
        self.any_request = Some(handler);
    }

    pub(crate) fn set_any_notification(&mut self, handler: Arc<dyn NotificationHandler>) {
        self.any_notification = Some(handler);
    }

    pub(crate) fn request(&self, method: &str) -> Option<RequestRoute> {
        match self.requests.get(method) {
            Some(route) => Some(route.clone()),
            None => self.any_request.clone().map(RequestRoute::Value),
        }
    }

    pub(crate) fn notification(&self, method: &str) -> Option<&Arc<dyn NotificationHandler>> {
        self.notifications
            .get(method)
            .or(self.any_notification.as_ref())
    }
}
