//! How the agent's handlers are installed on a connection's peer: each under a key of the method
//! table ([`crate::acp::methods::typed`]), which gives its wire name, its admission (gate and
//! authentication) and the params and result types the handler takes and returns.
//!
//! A request first passes [`Inner::admit`]: a method whose [`Gate`] the agent did not advertise
//! answers `-32601` (before its params are read), session work before `authenticate` answers
//! `-32000` when authentication is required (each connection authenticates for itself), and
//! idle sessions older than the TTL are pruned.
//! Then its params are decoded once into the row's params type; params that do not decode answer
//! `-32602` with the decoder's message in `data.reason`. Absent params read as `null` (so their
//! refusal names the type expected), unless the type reads them as no fields (`logout`'s `{}`).
//! A notification of a gated method the agent did not advertise, or with params that do not
//! decode, is ignored (and logged).
//!
//! A request is served by the handler of the connection's protocol generation (the one its
//! `initialize` settled on; v1 before): a method v1 and v2 both have is installed once per
//! generation and each request goes to its generation's handler, and a method the connection's
//! generation lacks answers `-32601` (`session/load` on v2, `auth/login` on v1). `initialize` is
//! served in every generation.

use std::future::Future;
use std::sync::Arc;

use serde::de::DeserializeOwned;
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use crate::acp::agent::Inner;
use crate::acp::agent::registry::ConnectionId;
use crate::acp::methods::{Gate, Generation, Method, TypedMethod, TypedRequest};
use crate::jsonrpc::{
    ErrorCode, NotificationContext, PeerBuilder, RequestContext, RequestHandler, RpcError,
    TextRequestHandler, decode_params, decode_params_text,
};

/// A check of a request's raw params that runs before they are decoded, for a method whose
/// refusals say more than the decoder would (`initialize`'s protocol version).
pub(super) type RawCheck = fn(&Inner, Option<&Value>) -> Result<(), RpcError>;

impl Inner {
    /// Whether the agent advertised what `method` needs.
    fn serves(&self, method: &Method) -> bool {
        match method.gate {
            None => true,
            Some(Gate::Feature(feature)) => self.config.features.has(feature),
            Some(Gate::AuthMethods) => !self.config.auth_methods.is_empty(),
        }
    }

    /// The admission checks every request passes before its params are read.
    fn admit(&self, method: &Method, connection: ConnectionId) -> Result<(), RpcError> {
        if !self.serves(method) {
            return Err(RpcError::method_not_found(method.name));
        }
        if self.config.auth_required
            && method.needs_auth
            && !self.registry.is_authenticated(connection)
        {
            let ids: Vec<&str> = self
                .config
                .auth_methods
                .iter()
                .map(|m| m.id.as_str())
                .collect();
            return Err(RpcError::new(
                ErrorCode::AUTH_REQUIRED,
                format!(
                    "authentication required: call authenticate with one of: {}",
                    ids.join(", ")
                ),
            ));
        }
        self.prune();
        Ok(())
    }
}

/// Decodes a request's params (see the module documentation for absent params).
fn decode<P: DeserializeOwned>(params: Option<Value>) -> Result<P, RpcError> {
    match params {
        Some(params) => decode_params(Some(params)),
        None => decode_params(None).or_else(|refused| {
            serde_json::from_value(Value::Object(Map::new())).map_err(|_| refused)
        }),
    }
}

fn encode_error(error: &serde_json::Error) -> RpcError {
    RpcError::internal_error(format!("cannot encode result: {error}"))
}

/// A request handler and the generations it serves.
struct Served<H: ?Sized> {
    name: &'static str,
    generations: &'static [Generation],
    handler: Arc<H>,
}

/// The peer builder of one connection while the agent's handlers are installed on it.
pub(super) struct Installer {
    builder: PeerBuilder,
    agent: Arc<Inner>,
    connection: ConnectionId,
    requests: Vec<Served<dyn RequestHandler>>,
    text_requests: Vec<Served<dyn TextRequestHandler>>,
}

/// The one generation a row belongs to, as a slice.
fn generation_of(method: &Method) -> &'static [Generation] {
    match method.generation {
        Generation::V1 => &[Generation::V1],
        Generation::V2 => &[Generation::V2],
    }
}

/// The handlers of one method name, each with the generations it serves.
type ByGeneration<H> = Vec<(&'static [Generation], Arc<H>)>;

/// The handler of `name` for the connection's generation, from `served`.
fn pick<H: ?Sized>(
    served: &[(&'static [Generation], Arc<H>)],
    generation: Generation,
) -> Option<Arc<H>> {
    served
        .iter()
        .find(|(generations, _)| generations.contains(&generation))
        .map(|(_, handler)| handler.clone())
}

/// Groups handlers by method name, in installation order.
fn by_name<H: ?Sized>(served: Vec<Served<H>>) -> Vec<(&'static str, ByGeneration<H>)> {
    let mut grouped: Vec<(&'static str, ByGeneration<H>)> = Vec::new();
    for Served {
        name,
        generations,
        handler,
    } in served
    {
        match grouped.iter_mut().find(|(known, _)| *known == name) {
            Some((_, handlers)) => handlers.push((generations, handler)),
            None => grouped.push((name, vec![(generations, handler)])),
        }
    }
    grouped
}

impl Installer {
    /// Installs on `builder` for `connection` of `agent`.
    pub(super) fn new(builder: PeerBuilder, agent: &Arc<Inner>, connection: ConnectionId) -> Self {
        Self {
            builder,
            agent: agent.clone(),
            connection,
            requests: Vec::new(),
            text_requests: Vec::new(),
        }
    }

    /// The builder with every handler installed: one per method name, which hands each request
    /// to the handler of the connection's generation.
    pub(super) fn finish(self) -> PeerBuilder {
        let Self {
            mut builder,
            agent,
            connection,
            requests,
            text_requests,
        } = self;
        for (name, served) in by_name(requests) {
            let agent = agent.clone();
            builder = builder.on_request(name, move |cx: RequestContext, params: Option<Value>| {
                let generation = agent.registry.generation(connection);
                let handler = pick(&served, generation);
                async move {
                    match handler {
                        Some(handler) => handler.call(cx, params).await,
                        None => Err(RpcError::method_not_found(name)),
                    }
                }
            });
        }
        for (name, served) in by_name(text_requests) {
            let agent = agent.clone();
            builder = builder.on_text_request(
                name,
                move |cx: RequestContext, params: Option<Box<RawValue>>| {
                    let generation = agent.registry.generation(connection);
                    let handler = pick(&served, generation);
                    async move {
                        match handler {
                            Some(handler) => handler.call(cx, params).await,
                            None => Err(RpcError::method_not_found(name)),
                        }
                    }
                },
            );
        }
        builder
    }

    /// Installs `handler` for `method` in every generation (`initialize`, which settles the
    /// generation): after admission and `check`, it reads the raw params itself (`null` when
    /// absent) and returns its result as JSON.
    pub(super) fn every_generation<M, F, Fut>(
        mut self,
        _method: M,
        check: RawCheck,
        handler: F,
    ) -> Self
    where
        M: TypedRequest,
        F: Fn(Arc<Inner>, ConnectionId, RequestContext, Value) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Value, RpcError>> + Send + 'static,
    {
        let handler = Arc::new(handler);
        let method = M::ROW;
        let shared = self.agent.clone();
        let connection = self.connection;
        let served: Arc<dyn RequestHandler> =
            Arc::new(move |cx: RequestContext, params: Option<Value>| {
                let agent = shared.clone();
                let handler = handler.clone();
                async move {
                    agent.registry.attach(connection, cx.peer());
                    agent.admit(method, connection)?;
                    check(&agent, params.as_ref())?;
                    handler(agent, connection, cx, params.unwrap_or(Value::Null)).await
                }
            });
        self.requests.push(Served {
            name: method.name,
            generations: &Generation::ALL,
            handler: served,
        });
        self
    }

    /// Installs the handler of request `M`: it records the connection's peer, admits the
    /// request, decodes its params and encodes its result.
    pub(super) fn request<M, F, Fut>(self, method: M, handler: F) -> Self
    where
        M: TypedRequest,
        F: Fn(Arc<Inner>, ConnectionId, RequestContext, M::Params) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<M::Result, RpcError>> + Send + 'static,
    {
        self.checked_request(method, |_, _| Ok(()), handler)
    }

    /// As [`Installer::request`], with `check` run on the raw params after admission and before
    /// decoding.
    pub(super) fn checked_request<M, F, Fut>(
        mut self,
        _method: M,
        check: RawCheck,
        handler: F,
    ) -> Self
    where
        M: TypedRequest,
        F: Fn(Arc<Inner>, ConnectionId, RequestContext, M::Params) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<M::Result, RpcError>> + Send + 'static,
    {
        let handler = Arc::new(handler);
        let method = M::ROW;
        let shared = self.agent.clone();
        let connection = self.connection;
        let served: Arc<dyn RequestHandler> =
            Arc::new(move |cx: RequestContext, params: Option<Value>| {
                let agent = shared.clone();
                let handler = handler.clone();
                async move {
                    agent.registry.attach(connection, cx.peer());
                    agent.admit(method, connection)?;
                    check(&agent, params.as_ref())?;
                    let params = decode::<M::Params>(params)?;
                    let result = handler(agent, connection, cx, params).await?;
                    serde_json::to_value(result).map_err(|error| encode_error(&error))
                }
            });
        self.requests.push(Served {
            name: method.name,
            generations: generation_of(method),
            handler: served,
        });
        self
    }

    /// As [`Installer::request`], with the params decoded from their text and the result written
    /// as text: the prompt turn, the one request a client sends over and over, builds no `Value`
    /// of its params or its result.
    pub(super) fn text_request<M, F, Fut>(mut self, _method: M, handler: F) -> Self
    where
        M: TypedRequest,
        F: Fn(Arc<Inner>, ConnectionId, RequestContext, M::Params) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<M::Result, RpcError>> + Send + 'static,
    {
        let handler = Arc::new(handler);
        let method = M::ROW;
        let shared = self.agent.clone();
        let connection = self.connection;
        let served: Arc<dyn TextRequestHandler> =
            Arc::new(move |cx: RequestContext, params: Option<Box<RawValue>>| {
                let agent = shared.clone();
                let handler = handler.clone();
                async move {
                    agent.registry.attach(connection, cx.peer());
                    agent.admit(method, connection)?;
                    let params = match params.as_deref() {
                        Some(text) => decode_params_text::<M::Params>(Some(text))?,
                        None => decode::<M::Params>(None)?,
                    };
                    let result = handler(agent, connection, cx, params).await?;
                    serde_json::value::to_raw_value(&result).map_err(|error| encode_error(&error))
                }
            });
        self.text_requests.push(Served {
            name: method.name,
            generations: generation_of(method),
            handler: served,
        });
        self
    }

    /// Installs the handler of notification `M`; it runs only when the agent serves the method
    /// and the params decode.
    pub(super) fn notification<M, F>(self, _method: M, handler: F) -> Self
    where
        M: TypedMethod,
        F: Fn(&Inner, M::Params) + Send + Sync + 'static,
    {
        let Self {
            builder,
            agent,
            connection,
            requests,
            text_requests,
        } = self;
        let handler = Arc::new(handler);
        let method = M::ROW;
        let shared = agent.clone();
        let builder = builder.on_notification(
            method.name,
            move |cx: NotificationContext, params: Option<Value>| {
                let agent = shared.clone();
                let handler = handler.clone();
                agent.registry.attach(connection, cx.peer());
                async move {
                    if !agent.serves(method) {
                        let method = method.name;
                        tracing::debug!(method, "notification ignored: the agent does not serve it");
                        return;
                    }
                    match serde_json::from_value::<M::Params>(params.unwrap_or(Value::Null)) {
                        Ok(params) => handler(&agent, params),
                        Err(error) => {
                            let method = method.name;
                            tracing::info!(method, %error, "notification with invalid params ignored");
                        }
                    }
                }
            },
        );
        Self {
            builder,
            agent,
            connection,
            requests,
            text_requests,
        }
    }
}
