//! `ski-fake-slack`: a fake Slack that real Slack clients accept unmodified — the Web API behind
//! a `wiremock::MockServer` that tests extend with their own `Mock`s, Socket Mode on
//! tokio-tungstenite, and a control API (in-process here, over HTTP in [`control`]) to inject
//! user actions, read what the app did and inject faults.
//!
//! ```no_run
//! # async fn demo() -> Result<(), ski_mocks::slack::FakeSlackError> {
//! use std::time::Duration;
//! use ski_mocks::slack::{Config, FakeSlack};
//! let slack = FakeSlack::start(Config::default()).await?;
//! // Point the client at slack.api_base_url(), then:
//! let posted = slack
//!     .wait_for_message(|m| m.text().contains("hello"), Duration::from_secs(5))
//!     .await?;
//! assert_eq!(posted.channel, "C0000000001");
//! # Ok(()) }
//! ```
//!
//! # Overriding the fake with wiremock
//!
//! Every Web API request (`/api/<method>`, the upload URLs, the `response_url`s) is put first to
//! the `wiremock::MockServer` of [`FakeSlack::mock_server`]; a `Mock` mounted there answers the
//! requests it matches, and everything else is answered from the fake's state, as if the mock
//! were not there. wiremock tries mocks by priority (1 first, its default 5) and, at equal
//! priority, in the order they were mounted; the fake's own place is the lowest priority, 255,
//! so a mock mounted with any priority from 1 to 254 comes first. A request a mock answered does
//! not reach the fake's state or its request log. `expect`s are verified when the fake is
//! dropped (or by `mock_server().verify()`), and [`FakeSlack::reset_mocks`] takes the mocks
//! away again. wiremock's request recording is off (it keeps every request, unbounded);
//! [`config::RetentionConfig::wiremock_requests`] turns it on for `received_requests()`. Until
//! `mock_server()` is first called no mock can be mounted, so the fake answers every request
//! itself without putting it to the server (unless recording is on).
//!
//! A one-off error: the first `chat.update` is rate limited, the next ones reach the fake.
//!
//! ```no_run
//! # async fn demo() -> Result<(), ski_mocks::slack::FakeSlackError> {
//! use ski_mocks::slack::{Config, FakeSlack};
//! use wiremock::matchers::path;
//! use wiremock::{Mock, ResponseTemplate};
//! let slack = FakeSlack::start(Config::default()).await?;
//! Mock::given(path("/api/chat.update"))
//!     .respond_with(
//!         ResponseTemplate::new(429)
//!             .insert_header("retry-after", "1")
//!             .set_body_json(serde_json::json!({"ok": false, "error": "ratelimited"})),
//!     )
//!     .up_to_n_times(1)
//!     .mount(slack.mock_server())
//!     .await;
//! # Ok(()) }
//! ```
//!
//! A delay: `users.info` answers after two seconds (the answer is the mock's).
//!
//! ```no_run
//! # async fn demo(slack: ski_mocks::slack::FakeSlack) {
//! use std::time::Duration;
//! use wiremock::matchers::path;
//! use wiremock::{Mock, ResponseTemplate};
//! Mock::given(path("/api/users.info"))
//!     .respond_with(
//!         ResponseTemplate::new(200)
//!             .set_body_json(serde_json::json!({"ok": false, "error": "user_not_found"}))
//!             .set_delay(Duration::from_secs(2)),
//!     )
//!     .mount(slack.mock_server())
//!     .await;
//! # }
//! ```
//!
//! To delay the fake's own answer instead, use [`FakeSlack::fail_next`] with [`Fault::Delay`].
//!
//! An `expect(1)`: the app must post exactly one message; dropping the fake (or `verify`)
//! panics otherwise. Here the mock answers too, so the post is not stored in the fake.
//!
//! ```no_run
//! # async fn demo(slack: ski_mocks::slack::FakeSlack) {
//! use wiremock::matchers::{method, path};
//! use wiremock::{Mock, ResponseTemplate};
//! Mock::given(method("POST"))
//!     .and(path("/api/chat.postMessage"))
//!     .respond_with(ResponseTemplate::new(200).set_body_json(
//!         serde_json::json!({"ok": true, "channel": "C0000000001", "ts": "1.000001"}),
//!     ))
//!     .expect(1)
//!     .mount(slack.mock_server())
//!     .await;
//! // ... run the app ...
//! slack.mock_server().verify().await;
//! # }
//! ```

mod api;
mod channel;
pub mod config;
pub mod control;
mod envelope;
mod events_http;
pub mod fault;
mod limits;
pub mod overrides;
mod params;
mod rate;
mod record;
mod shared;
mod socket;
mod store;
pub mod tls;
mod web;
mod workspace;

use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use config::Config;
pub use envelope::EnvelopeKind;
pub use fault::Fault;
pub use params::TokenKind;
pub use record::{AfterTry, Direction, RecordedDelivery, RecordedFrame, RecordedRequest};
pub use shared::{Ack, Message};
pub use socket::DisconnectReason;

use shared::Shared;

/// The Web API parameter parser and the request it reads, reachable for the fuzz targets of
/// `ski-fuzz`; not a stable interface.
#[doc(hidden)]
pub mod web_params {
    pub use super::params::{JSON_FIELDS, Params, Request};
}

/// The Web API coverage matrix as Markdown (what `ski-fake-slack methods --markdown` prints and
/// `mocks/SLACK-METHODS.md` holds).
pub fn methods_markdown() -> String {
    api::methods::markdown()
}

/// The names of the Web API methods the fake serves.
pub fn method_names() -> Vec<&'static str> {
    api::methods::METHODS
        .iter()
        .map(|method| method.name)
        .collect()
}

/// What can go wrong starting or driving the fake.
#[derive(Debug, thiserror::Error)]
pub enum FakeSlackError {
    #[error("cannot listen on loopback: {0}")]
    Bind(#[source] std::io::Error),
    #[error("bad workspace config: {0}")]
    Config(String),
    #[error("unknown channel {0}")]
    UnknownChannel(String),
    #[error("unknown user {0}")]
    UnknownUser(String),
    #[error("no message {ts} in channel {channel}")]
    UnknownMessage { channel: String, ts: String },
    #[error("no element with action_id {0} in that message")]
    UnknownAction(String),
    #[error("unknown view {0}")]
    UnknownView(String),
    #[error("{0} did not write that message")]
    NotAuthor(String),
    #[error("unknown envelope {0}")]
    UnknownEnvelope(String),
    #[error("timed out after {0:?} waiting for {1}")]
    Timeout(Duration, String),
    #[error("{0}")]
    Tls(#[source] tls::TlsError),
    #[error("the Request URL was not set: {0}")]
    RequestUrl(String),
}

/// A slash command a user types.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SlashCommand {
    /// With its slash: `/ski`.
    pub command: String,
    #[serde(default)]
    pub text: String,
    pub channel: String,
    pub user: String,
}

/// A click on a button (or any block element) of a posted message.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Click {
    pub channel: String,
    pub message_ts: String,
    pub action_id: String,
    pub user: String,
}

/// A message a user writes in a channel or a thread.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct UserMessage {
    pub channel: String,
    #[serde(default)]
    pub thread_ts: Option<String>,
    pub text: String,
    pub user: String,
}

/// An envelope the fake sent: its id, and a way to await its ack.
#[derive(Debug, Clone)]
pub struct Injected {
    pub envelope_id: String,
    /// The `ts` of the message a [`FakeSlack::user_message`] stored.
    pub ts: Option<String>,
    /// The `app_mention` envelope sent as well, when the message mentions the bot.
    pub mention_envelope_id: Option<String>,
    shared: Arc<Shared>,
}

impl Injected {
    /// Waits until the client acks this envelope (with or without a payload).
    pub async fn ack(&self, timeout: Duration) -> Result<Ack, FakeSlackError> {
        self.shared.await_ack(&self.envelope_id, timeout).await
    }
}

/// A running fake Slack; everything stops when it is dropped.
pub struct FakeSlack {
    shared: Arc<Shared>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    control_url: String,
    tls: Option<tls::Tls>,
    /// Dropped last: dropping the mock server verifies the tests' `expect`s.
    overrides: overrides::Overrides,
}

impl Drop for FakeSlack {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
        self.shared.close_connections();
    }
}

impl FakeSlack {
    /// Starts the Web API, the Socket Mode listener and the control server on port-0 loopback
    /// addresses, with no transcript.
    pub async fn start(config: Config) -> Result<FakeSlack, FakeSlackError> {
        FakeSlack::start_recording(config, None).await
    }

    /// Starts the fake, writing every request, response, frame and note as NDJSON to `transcript`.
    pub async fn start_recording(
        config: Config,
        transcript: Option<std::fs::File>,
    ) -> Result<FakeSlack, FakeSlackError> {
        FakeSlack::start_with(config, transcript, false).await
    }

    /// Starts the fake in TLS mode: the Web API on HTTPS and Socket Mode on WSS, with a server
    /// certificate for `127.0.0.1` and `localhost` from a CA made now ([`FakeSlack::ca_pem`]).
    /// The control server stays on plain HTTP.
    pub async fn start_tls(
        config: Config,
        transcript: Option<std::fs::File>,
    ) -> Result<FakeSlack, FakeSlackError> {
        FakeSlack::start_with(config, transcript, true).await
    }

    async fn start_with(
        config: Config,
        transcript: Option<std::fs::File>,
        secure: bool,
    ) -> Result<FakeSlack, FakeSlackError> {
        let tls = if secure {
            Some(tls::Tls::generate().map_err(FakeSlackError::Tls)?)
        } else {
            None
        };
        let api = std::net::TcpListener::bind("127.0.0.1:0").map_err(FakeSlackError::Bind)?;
        let api_address = api.local_addr().map_err(FakeSlackError::Bind)?;
        // In TLS mode clients reach the Web API through the TLS front on a port of its own.
        let front = match &tls {
            Some(_) => Some(
                tokio::net::TcpListener::bind("127.0.0.1:0")
                    .await
                    .map_err(FakeSlackError::Bind)?,
            ),
            None => None,
        };
        let socket = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(FakeSlackError::Bind)?;
        let control = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(FakeSlackError::Bind)?;
        let origin = match &front {
            Some(front) => format!(
                "https://{}",
                front.local_addr().map_err(FakeSlackError::Bind)?
            ),
            None => format!("http://{api_address}"),
        };
        let socket_url = format!(
            "{}://{}/link",
            if tls.is_some() { "wss" } else { "ws" },
            socket.local_addr().map_err(FakeSlackError::Bind)?
        );
        let control_url = format!(
            "http://{}",
            control.local_addr().map_err(FakeSlackError::Bind)?
        );
        let mocks = std::net::TcpListener::bind("127.0.0.1:0").map_err(FakeSlackError::Bind)?;
        let overrides =
            overrides::Overrides::start(mocks, config.retention.wiremock_requests).await;
        let shared = Arc::new(Shared::new(
            config,
            api::Site { origin, socket_url },
            transcript,
        ));
        let mut tasks = vec![
            tokio::spawn(web::serve(api, shared.clone(), overrides.router())),
            tokio::spawn(socket::serve(socket, shared.clone(), tls.clone())),
            tokio::spawn(control::serve(control, shared.clone())),
        ];
        if let (Some(front), Some(tls)) = (front, &tls) {
            let limits = shared.config().limits;
            tasks.push(tokio::spawn(tls::front(
                front,
                api_address,
                tls.clone(),
                limits,
            )));
        }
        Ok(FakeSlack {
            shared,
            tasks,
            control_url,
            tls,
            overrides,
        })
    }

    /// The base URL for clients: `http://127.0.0.1:PORT/api` (add a `/` for slack_sdk and Node).
    pub fn api_base_url(&self) -> String {
        format!("{}/api", self.shared.site.origin)
    }

    /// The wiremock server every Web API request is put to first: mount `Mock`s on it to
    /// override the fake for the requests they match (see [`overrides`] and the crate docs).
    /// Mount with a priority from 1 to 254 (wiremock's default, 5, is fine): the fake's own
    /// mock holds 255. Use [`FakeSlack::reset_mocks`] rather than `MockServer::reset`, which
    /// would remove the fake's own mock too.
    pub fn mock_server(&self) -> &wiremock::MockServer {
        self.overrides.server()
    }

    /// Removes every mock the tests mounted; the fake answers everything from its state again.
    pub async fn reset_mocks(&self) {
        self.overrides.reset().await;
    }

    /// The Socket Mode URL `apps.connections.open` hands out (without its ticket).
    pub fn socket_mode_url(&self) -> String {
        self.shared.site.socket_url.clone()
    }

    /// In TLS mode, the PEM of the CA that signed the fake's certificate (write it to a file and
    /// point `SSL_CERT_FILE` or the client's CA option at it).
    pub fn ca_pem(&self) -> Option<&str> {
        self.tls.as_ref().map(tls::Tls::ca_pem)
    }

    /// The control server: `POST <control_url>/<operation>` with JSON (see the README).
    pub fn control_url(&self) -> String {
        self.control_url.clone()
    }

    /// The workspace's configuration (ids of the team, bot, users and channels).
    pub fn config(&self) -> Config {
        self.shared.config()
    }

    /// A user types a slash command; the envelope goes to a live Socket Mode connection (or waits
    /// for one).
    pub fn slash_command(&self, command: SlashCommand) -> Result<Injected, FakeSlackError> {
        let id = self.shared.slash_command(&command)?;
        Ok(self.injected(id, None, None))
    }

    /// A user clicks the element with `action_id` on a posted message.
    pub fn click(&self, click: Click) -> Result<Injected, FakeSlackError> {
        let id = self.shared.click(&click)?;
        Ok(self.injected(id, None, None))
    }

    /// A user submits an open modal with these input values (`{block_id: {action_id: value}}`).
    pub fn submit_view(
        &self,
        view_id: &str,
        values: Value,
        user: &str,
    ) -> Result<Injected, FakeSlackError> {
        let id = self.shared.view_event(view_id, &values, user, false)?;
        Ok(self.injected(id, None, None))
    }

    /// A user closes an open modal (`view_closed`).
    pub fn close_view(&self, view_id: &str, user: &str) -> Result<Injected, FakeSlackError> {
        let id = self.shared.view_event(view_id, &Value::Null, user, true)?;
        Ok(self.injected(id, None, None))
    }

    /// A user writes a message: it is stored and sent as a `message` event (and an `app_mention`
    /// when it mentions the bot).
    pub fn user_message(&self, message: UserMessage) -> Result<Injected, FakeSlackError> {
        let (id, ts, mention) = self.shared.user_message(&message)?;
        Ok(self.injected(id, Some(ts), mention))
    }

    /// Sends `payload` unchanged in an envelope of `kind` (hostile or malformed payloads).
    pub fn raw_envelope(&self, kind: EnvelopeKind, payload: Value) -> Injected {
        let id = self.shared.raw_envelope(kind, payload);
        self.injected(id, None, None)
    }

    /// A user adds a reaction to a message (`reaction_added`).
    pub fn user_reaction(
        &self,
        user: &str,
        channel: &str,
        ts: &str,
        name: &str,
    ) -> Result<Injected, FakeSlackError> {
        let id = self.shared.user_reaction(user, channel, ts, name)?;
        Ok(self.injected(id, None, None))
    }

    /// A user edits their own message (`message_changed`).
    pub fn user_edit(
        &self,
        user: &str,
        channel: &str,
        ts: &str,
        text: &str,
    ) -> Result<(), FakeSlackError> {
        self.shared.user_edit(user, channel, ts, text)
    }

    /// A user deletes their own message (`message_deleted`).
    pub fn user_delete(&self, user: &str, channel: &str, ts: &str) -> Result<(), FakeSlackError> {
        self.shared.user_delete(user, channel, ts)
    }

    /// A user joins (`join` true) or leaves a channel (`member_joined_channel`,
    /// `member_left_channel`).
    pub fn user_membership(
        &self,
        user: &str,
        channel: &str,
        join: bool,
    ) -> Result<(), FakeSlackError> {
        self.shared.user_membership(user, channel, join)
    }

    /// A user opens the app's Home tab (`app_home_opened`).
    pub fn app_home_opened(&self, user: &str) -> Result<(), FakeSlackError> {
        self.shared.app_home_opened(user)
    }

    fn injected(
        &self,
        envelope_id: String,
        ts: Option<String>,
        mention: Option<String>,
    ) -> Injected {
        Injected {
            envelope_id,
            ts,
            mention_envelope_id: mention,
            shared: self.shared.clone(),
        }
    }

    /// Waits for the ack of any envelope the fake sent.
    pub async fn await_ack(
        &self,
        envelope_id: &str,
        timeout: Duration,
    ) -> Result<Ack, FakeSlackError> {
        self.shared.await_ack(envelope_id, timeout).await
    }

    /// The ack of an envelope, if it came.
    pub fn ack(&self, envelope_id: &str) -> Option<Ack> {
        self.shared.ack(envelope_id)
    }

    /// Messages of a channel, oldest first: the top level (`thread` `None`) or one thread.
    pub fn messages(&self, channel: &str, thread: Option<&str>) -> Vec<Message> {
        self.shared.messages(channel, thread)
    }

    /// Every message in the workspace, in the order they were stored.
    pub fn all_messages(&self) -> Vec<Message> {
        self.shared.all_messages()
    }

    /// Ephemeral messages (from `chat.postEphemeral`, slash-command ack payloads, response URLs).
    pub fn ephemerals(&self) -> Vec<Message> {
        self.shared.ephemerals()
    }

    /// A view the app opened, by id.
    pub fn view(&self, view_id: &str) -> Option<Value> {
        self.shared.view(view_id)
    }

    /// Every Web API request, in order.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.shared.log().requests.iter().cloned().collect()
    }

    /// Every Socket Mode frame both ways, in order.
    pub fn frames(&self) -> Vec<RecordedFrame> {
        self.shared.log().frames.iter().cloned().collect()
    }

    /// Observations about the app: late, missing, duplicate or malformed acks, payloads sent to
    /// envelopes that accept none.
    pub fn notes(&self) -> Vec<String> {
        self.shared.log().notes.iter().cloned().collect()
    }

    /// Waits until a message (anywhere, stored now or later) matches `predicate`.
    pub async fn wait_for_message(
        &self,
        predicate: impl Fn(&Message) -> bool,
        timeout: Duration,
    ) -> Result<Message, FakeSlackError> {
        self.shared.wait_for_message(predicate, timeout).await
    }

    /// Waits until `count` requests of `method` have been recorded.
    pub async fn wait_for_requests(
        &self,
        method: &str,
        count: usize,
        timeout: Duration,
    ) -> Result<Vec<RecordedRequest>, FakeSlackError> {
        self.shared.wait_for_requests(method, count, timeout).await
    }

    /// Waits until `count` Socket Mode connections have received their `hello`.
    pub async fn wait_for_connections(
        &self,
        count: usize,
        timeout: Duration,
    ) -> Result<(), FakeSlackError> {
        self.shared.wait_for_connections(count, timeout).await
    }

    /// The next `count` calls of `method` get `fault`.
    pub fn fail_next(&self, method: &str, count: usize, fault: Fault) {
        self.shared.faults().add(method, count, fault);
    }

    /// From now on the Web API answers `token_revoked` to `token` (until a reset).
    pub fn revoke_token(&self, token: &str) {
        self.shared.workspace().revoked.insert(token.to_string());
    }

    /// Sends `disconnect` with this reason on every live connection.
    pub fn disconnect(&self, reason: DisconnectReason) {
        self.shared.disconnect(reason);
    }

    /// Sets the Request URL of the Events API over HTTP after its `url_verification` challenge
    /// (the app must answer with the challenge): from now on events, slash commands and
    /// interactivity payloads are POSTed there, signed, instead of going over Socket Mode.
    /// `None` goes back to Socket Mode.
    pub async fn set_request_url(&self, url: Option<&str>) -> Result<(), FakeSlackError> {
        self.shared.set_request_url(url).await
    }

    /// Every POST to the Request URL, retries and `url_verification` included, in order.
    pub fn deliveries(&self) -> Vec<RecordedDelivery> {
        self.shared.log().deliveries.iter().cloned().collect()
    }

    /// Waits for a POST to the Request URL that `predicate` picks: a try and what followed it.
    pub async fn await_delivery(
        &self,
        predicate: impl Fn(&RecordedDelivery) -> bool,
        timeout: Duration,
    ) -> Result<RecordedDelivery, FakeSlackError> {
        self.shared.await_delivery(predicate, timeout).await
    }

    /// Drops every Socket Mode connection without a close frame.
    pub fn drop_connections(&self) {
        self.shared.close_connections();
    }

    /// Forgets messages, views, files, recordings and faults; ids start again. Live connections
    /// stay.
    pub fn reset(&self) {
        self.shared.reset();
    }
}
