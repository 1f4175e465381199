//! The tests' own wiremock `Mock`s in front of the fake Slack's Web API: every Web API request
//! is first put to a `wiremock::MockServer`; what no mounted `Mock` matches falls through to the
//! fake's state.
//!
//! How the fall-through is told apart from a mock's answer: the front tags each request it
//! forwards with a number in [`REQUEST_ID_HEADER`], and the server holds one mock of its own at
//! the lowest priority (255), whose matcher never matches but notes the number of every request
//! that reached it, that is, every request no other mock took. wiremock keeps a copy of each
//! request a mock *matched*; since the fake's own answers never come from a matching mock, the
//! server holds nothing for them (and its request recording is off unless configured).
//!
//! When the hop is skipped: a `Mock` can be mounted only through the `&MockServer` that
//! [`Overrides::server`] lends (the server is the fake's alone and has no other way in), so
//! until it is first lent no request can match a test's mock, and none is put to the server.
//! From the first loan on (or from the start, when request recording is on and every request
//! must reach wiremock's record) every request is.

use std::collections::HashSet;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use wiremock::{Match, Mock, MockServer, ResponseTemplate};

/// The header that numbers each request the front forwards to the mock server.
pub const REQUEST_ID_HEADER: &str = "x-ski-fake-slack-request";

/// The priority of the fake's own mock: the lowest wiremock has, so any mock a test mounts with
/// a priority from 1 to 254 (wiremock's default is 5) is tried before it.
pub const FAKE_PRIORITY: u8 = u8::MAX;

/// Request numbers the fake's mock saw: no test mock took them.
type Unmatched = Arc<Mutex<HashSet<u64>>>;

/// The mock server, owned by the fake alone so that dropping the fake drops it (and wiremock
/// verifies the mocks' expectations then).
pub struct Overrides {
    server: MockServer,
    router: Arc<Router>,
}

/// What the front connections share to put requests to the mock server.
pub struct Router {
    address: SocketAddr,
    unmatched: Unmatched,
    next_id: AtomicU64,
    /// Whether requests are put to the server: once the server was lent out (a mock may be
    /// mounted) or when it records requests.
    engaged: AtomicBool,
}

/// What the mock server made of one request.
pub enum Verdict {
    /// No test mock matched: the fake answers from its state.
    FallThrough,
    /// A test mock answered this.
    Answered(hyper::Response<Full<Bytes>>),
}

/// The matcher of the fake's own mock: never matches, notes the request number.
struct FallThrough {
    unmatched: Unmatched,
}

impl Match for FallThrough {
    fn matches(&self, request: &wiremock::Request) -> bool {
        if let Some(id) = request
            .headers
            .get(REQUEST_ID_HEADER)
            .and_then(|value| value.to_str().ok())
            .and_then(|value| value.parse::<u64>().ok())
        {
            self.unmatched
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .insert(id);
        }
        false
    }
}

/// One front connection's connection to the mock server, opened at its first request.
#[derive(Default)]
pub struct Upstream {
    sender: Option<SendRequest<Full<Bytes>>>,
}

impl Overrides {
    /// Starts the mock server on `listener`, recording requests only when `record_requests`.
    pub async fn start(listener: std::net::TcpListener, record_requests: bool) -> Overrides {
        let builder = MockServer::builder().listener(listener);
        let builder = if record_requests {
            builder
        } else {
            builder.disable_request_recording()
        };
        let server = builder.start().await;
        let overrides = Overrides {
            router: Arc::new(Router {
                address: *server.address(),
                unmatched: Arc::default(),
                next_id: AtomicU64::new(0),
                engaged: AtomicBool::new(record_requests),
            }),
            server,
        };
        overrides.mount_fall_through().await;
        overrides
    }

    async fn mount_fall_through(&self) {
        Mock::given(FallThrough {
            unmatched: self.router.unmatched.clone(),
        })
        .respond_with(ResponseTemplate::new(404))
        .with_priority(FAKE_PRIORITY)
        .named("ski-fake-slack state (never matches: what reaches it falls through)")
        .mount(&self.server)
        .await;
    }

    /// The mock server, to mount mocks on: from now on every request is put to it first.
    pub fn server(&self) -> &MockServer {
        self.router.engaged.store(true, Ordering::SeqCst);
        &self.server
    }

    pub fn router(&self) -> Arc<Router> {
        self.router.clone()
    }

    /// Removes every mock the tests mounted (and wiremock's recorded requests); the fake's own
    /// mock is mounted again.
    pub async fn reset(&self) {
        self.server.reset().await;
        self.router
            .unmatched
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
        self.mount_fall_through().await;
    }
}

impl Router {
    /// Whether a request must be put to the mock server: false until the server was first lent
    /// out (no mock can be mounted before) unless it records requests.
    pub fn engaged(&self) -> bool {
        self.engaged.load(Ordering::SeqCst)
    }

    /// Puts one request to the mock server. When the server cannot be reached the request falls
    /// through (the fake answers as it would without mocks).
    pub async fn ask(
        &self,
        upstream: &mut Upstream,
        parts: &hyper::http::request::Parts,
        body: &Bytes,
    ) -> Verdict {
        if !self.engaged() {
            return Verdict::FallThrough;
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let response = self.forward(upstream, parts, body, id).await;
        let fell_through = self
            .unmatched
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&id);
        match response {
            Some(response) if !fell_through => Verdict::Answered(response),
            _ => Verdict::FallThrough,
        }
    }

    async fn forward(
        &self,
        upstream: &mut Upstream,
        parts: &hyper::http::request::Parts,
        body: &Bytes,
        id: u64,
    ) -> Option<hyper::Response<Full<Bytes>>> {
        let mut request = hyper::Request::new(Full::new(body.clone()));
        *request.method_mut() = parts.method.clone();
        *request.uri_mut() = parts
            .uri
            .path_and_query()
            .map_or("/", |path| path.as_str())
            .parse()
            .ok()?;
        let headers = request.headers_mut();
        for (name, value) in &parts.headers {
            // Hop-by-hop headers and the body's framing belong to the client's connection.
            if !matches!(
                name.as_str(),
                "connection" | "keep-alive" | "transfer-encoding" | "content-length" | "upgrade"
            ) {
                headers.append(name.clone(), value.clone());
            }
        }
        headers.insert(REQUEST_ID_HEADER, id.into());
        if !body.is_empty() {
            headers.insert(hyper::header::CONTENT_LENGTH, body.len().into());
        }
        let sender = match upstream.sender.as_mut() {
            Some(sender) if !sender.is_closed() => sender,
            _ => upstream.sender.insert(self.connect().await?),
        };
        sender.ready().await.ok()?;
        let response = sender.send_request(request).await.ok()?;
        let (parts, body) = response.into_parts();
        let body = body.collect().await.ok()?.to_bytes();
        Some(hyper::Response::from_parts(parts, Full::new(body)))
    }

    async fn connect(&self) -> Option<SendRequest<Full<Bytes>>> {
        let stream = tokio::net::TcpStream::connect(self.address).await.ok()?;
        let _ = stream.set_nodelay(true);
        let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .ok()?;
        tokio::spawn(connection);
        Some(sender)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn loopback() -> std::net::TcpListener {
        std::net::TcpListener::bind("127.0.0.1:0").expect("a loopback port")
    }

    #[tokio::test]
    async fn requests_reach_the_server_once_it_was_lent_or_when_it_records() {
        let overrides = Overrides::start(loopback(), false).await;
        let router = overrides.router();
        assert!(!router.engaged(), "no mock can be mounted yet");
        let _server = overrides.server();
        assert!(router.engaged(), "a mock may be mounted now");
        overrides.reset().await;
        assert!(router.engaged(), "a reset does not take the loan back");

        let recording = Overrides::start(loopback(), true).await;
        assert!(
            recording.router().engaged(),
            "recorded requests must reach the server"
        );
    }
}
