//! `ski-fake-model`: a fake model provider that the official OpenAI and Anthropic clients
//! accept unmodified. One loopback port serves OpenAI Chat Completions and Responses and
//! Anthropic Messages (each whole or streamed as server-sent events, with tool calls, usage and
//! the providers' error shapes) and `GET /v1/models`, answering from a [`Script`] turn by turn,
//! and records every request (bounded) for checks.
//!
//! - [`script`]: the turns (text, tool calls, refusal, error, hang) and their TOML form.
//! - [`record`]: the bounded request log and its waits.
//! - `server`: routing, keys, body bounds and the streams; `chat`, `responses`, `messages`:
//!   each API's shapes; `errors`: the error bodies; `answer`: chunks, ids and usage.

mod answer;
mod chat;
mod errors;
mod messages;
pub mod record;
mod responses;
pub mod script;
mod server;
mod sse;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

pub use answer::last_user_text;
pub use record::{Api, Outcome, RecordedRequest};
pub use script::{ErrorKind, Pacing, Reply, Script, ToolCall, Turn};

/// The key the fake accepts unless told otherwise.
pub const DEFAULT_API_KEY: &str = "ski-fake-model-key";

/// The model the listing names unless told otherwise (requests may name any model).
pub const DEFAULT_MODEL: &str = "ski-fake-model";

/// What goes wrong starting or using the fake.
#[derive(Debug, thiserror::Error)]
pub enum FakeModelError {
    #[error("cannot read the script {path}: {source}")]
    ReadScript {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("invalid script: {0}")]
    Script(String),
    #[error("cannot listen on {address}: {source}")]
    Listen {
        address: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("{0} is not a loopback address")]
    NotLoopback(SocketAddr),
    #[error("no such request within {0:?}")]
    Timeout(Duration),
}

/// How the fake starts.
#[derive(Debug, Clone)]
pub struct Config {
    pub script: Script,
    /// The keys accepted (`Authorization: Bearer` or `x-api-key`); empty accepts any request,
    /// even one without a key.
    pub api_keys: Vec<String>,
    /// The models `GET /v1/models` lists.
    pub models: Vec<String>,
    /// A loopback address; port 0 picks a free port.
    pub listen: SocketAddr,
    /// A larger request body is answered 413.
    pub max_body_bytes: usize,
    /// The request log keeps about this many bytes of bodies; the oldest requests go first.
    pub max_log_bytes: usize,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            script: Script::default(),
            api_keys: vec![DEFAULT_API_KEY.into()],
            models: vec![DEFAULT_MODEL.into()],
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            max_body_bytes: 8 << 20,
            max_log_bytes: 16 << 20,
        }
    }
}

impl Config {
    /// The default configuration answering with `script`.
    pub fn with_script(script: Script) -> Config {
        Config {
            script,
            ..Config::default()
        }
    }
}

/// A running fake; it stops (and closes every connection) when dropped.
pub struct FakeModel {
    address: SocketAddr,
    shared: Arc<server::Shared>,
    api_keys: Vec<String>,
    server: tokio::task::JoinHandle<()>,
}

impl Drop for FakeModel {
    fn drop(&mut self) {
        self.server.abort();
    }
}

impl FakeModel {
    /// Binds `config.listen` (loopback only) and serves until dropped.
    pub async fn start(config: Config) -> Result<FakeModel, FakeModelError> {
        if !config.listen.ip().is_loopback() {
            return Err(FakeModelError::NotLoopback(config.listen));
        }
        let listener = tokio::net::TcpListener::bind(config.listen)
            .await
            .map_err(|source| FakeModelError::Listen {
                address: config.listen,
                source,
            })?;
        let address = listener
            .local_addr()
            .map_err(|source| FakeModelError::Listen {
                address: config.listen,
                source,
            })?;
        let shared = Arc::new(server::Shared::new(
            config.script,
            config.api_keys.clone(),
            config.models,
            config.max_body_bytes,
            config.max_log_bytes,
        ));
        let server = tokio::spawn(server::serve(listener, shared.clone()));
        Ok(FakeModel {
            address,
            shared,
            api_keys: config.api_keys,
            server,
        })
    }

    /// The address served.
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// The base URL for OpenAI clients (`OPENAI_BASE_URL`): `http://127.0.0.1:<port>/v1`.
    pub fn openai_base_url(&self) -> String {
        format!("http://{}/v1", self.address)
    }

    /// The base URL for Anthropic clients (`ANTHROPIC_BASE_URL`): `http://127.0.0.1:<port>`.
    pub fn anthropic_base_url(&self) -> String {
        format!("http://{}", self.address)
    }

    /// The keys accepted (empty: any).
    pub fn api_keys(&self) -> &[String] {
        &self.api_keys
    }

    /// Every request still in the log, oldest first.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.shared.log.requests()
    }

    /// How many requests the log's bound pushed out.
    pub fn dropped_requests(&self) -> u64 {
        self.shared.log.dropped()
    }

    /// The first logged request for which `wanted` holds, waiting up to `timeout` for it
    /// (woken by each new request and outcome, no polling).
    pub async fn await_request(
        &self,
        wanted: impl Fn(&RecordedRequest) -> bool,
        timeout: Duration,
    ) -> Result<RecordedRequest, FakeModelError> {
        self.shared.log.wait_for(wanted, timeout).await
    }

    /// Replaces the script (every turn unused again) and empties the log.
    pub fn reset(&self, script: Script) {
        *self.shared.script() = server::ScriptState::new(script);
        self.shared.log.clear();
    }

    /// How many turns of the script have not answered yet.
    pub fn turns_left(&self) -> usize {
        self.shared
            .script()
            .used
            .iter()
            .filter(|used| !**used)
            .count()
    }
}
