//! The fake workspace's configuration: team, bot, users, channels, Socket Mode timings and the
//! Events API over HTTP.

use std::path::Path;
use std::time::Duration;

use serde::Deserialize;

use super::FakeSlackError;

/// Everything the fake is started with; every field has a default.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    pub team: TeamConfig,
    pub bot: BotConfig,
    pub users: Vec<UserConfig>,
    pub channels: Vec<ChannelConfig>,
    pub socket_mode: SocketModeConfig,
    /// How long a `trigger_id` stays valid for `views.open`/`views.push`, in milliseconds.
    pub trigger_ttl_ms: u64,
    /// With a value, `ts` values do not come from the wall clock: the n-th id the workspace
    /// hands out is `<clock_start + n>.<n>`, the same in every run (for golden tests).
    pub clock_start: Option<u64>,
    pub retention: RetentionConfig,
    pub auth: AuthConfig,
    pub rate_limits: RateLimitConfig,
    pub events_http: EventsHttpConfig,
    pub limits: LimitsConfig,
}

/// What each listener (Web API, its TLS front, Socket Mode, control API) accepts and how long it
/// waits, so that idle or slow clients cannot hold the fake's memory or descriptors.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LimitsConfig {
    /// Open connections per listener; one more is answered 503 with `Retry-After` and closed.
    pub max_connections: usize,
    /// A request's headers, a kept-alive connection's next request, and a TLS or Socket Mode
    /// handshake must arrive within this many milliseconds; else the connection is closed.
    pub header_timeout_ms: u64,
    /// A Socket Mode connection from which nothing (not even a pong) arrives for this many
    /// milliseconds is closed with code 1001; 0 never closes it.
    pub idle_timeout_ms: u64,
}

impl Default for LimitsConfig {
    fn default() -> Self {
        LimitsConfig {
            max_connections: 512,
            header_timeout_ms: 10_000,
            idle_timeout_ms: 120_000,
        }
    }
}

impl LimitsConfig {
    /// [`LimitsConfig::header_timeout_ms`] as a duration (at least 1 ms).
    pub fn header_timeout(&self) -> std::time::Duration {
        std::time::Duration::from_millis(self.header_timeout_ms.max(1))
    }

    /// [`LimitsConfig::idle_timeout_ms`] as a duration, `None` for 0.
    pub fn idle_timeout(&self) -> Option<std::time::Duration> {
        (self.idle_timeout_ms > 0).then(|| std::time::Duration::from_millis(self.idle_timeout_ms))
    }
}

/// The Events API over HTTP: with a `request_url`, events, slash commands and interactivity
/// payloads are POSTed there, signed with `signing_secret`, instead of going over Socket Mode.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EventsHttpConfig {
    /// `http://host:port/path`; taken as verified (the control API's `set_request_url` sends
    /// the `url_verification` challenge first).
    pub request_url: Option<String>,
    /// The app's signing secret, the key of `X-Slack-Signature`.
    pub signing_secret: String,
    /// How long the app has to answer a request (Slack's: 3 s); slower is `http_timeout`.
    pub timeout_ms: u64,
    /// The wait before each retry of an event that failed (Slack's: nearly at once, 1 minute,
    /// 5 minutes); its length is the number of retries.
    pub retry_delays_ms: Vec<u64>,
}

/// The signing secret the fake signs with unless one is configured.
pub const DEFAULT_SIGNING_SECRET: &str = "ski-fake-slack-signing-secret";

impl Default for EventsHttpConfig {
    fn default() -> Self {
        EventsHttpConfig {
            request_url: None,
            signing_secret: DEFAULT_SIGNING_SECRET.into(),
            timeout_ms: 3_000,
            retry_delays_ms: vec![0, 60_000, 300_000],
        }
    }
}

/// A checked Request URL: `http://host[:port]/path`, with a host.
pub(crate) fn parse_request_url(text: &str) -> Result<url::Url, String> {
    let url = url::Url::parse(text).map_err(|error| format!("{text:?} is not a URL: {error}"))?;
    if url.scheme() != "http" {
        return Err(format!(
            "{text:?}: the fake posts to http:// Request URLs only"
        ));
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err(format!("{text:?} names no host"));
    }
    Ok(url)
}

/// Per-method rate limits in Slack's tiers (see `mocks/SLACK-METHODS.md`); off by default.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RateLimitConfig {
    pub enabled: bool,
    /// The window the tiers' allowances count over, in milliseconds (Slack's: a minute).
    pub window_ms: u64,
}

impl Default for RateLimitConfig {
    fn default() -> Self {
        RateLimitConfig {
            enabled: false,
            window_ms: 60_000,
        }
    }
}

/// Which tokens the Web API accepts. The workspace's own tokens (`bot_token`, `user_token`,
/// `app_token`) always work. Beyond them: with no `tokens` listed and `strict` off (the
/// default, for quick starts) any token of the right prefix works (`xoxb-`, `xoxp-`, `xapp-`);
/// with a list, those; in `strict` mode with no list, no other (for tests of auth handling).
/// Any other token answers `invalid_auth`, a revoked one `token_revoked`.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AuthConfig {
    pub tokens: Vec<String>,
    pub strict: bool,
    pub bot_token: String,
    pub user_token: String,
    pub app_token: String,
}

impl Default for AuthConfig {
    fn default() -> Self {
        AuthConfig {
            tokens: Vec::new(),
            strict: false,
            bot_token: "xoxb-ski-fake-bot".into(),
            user_token: "xoxp-ski-fake-user".into(),
            app_token: "xapp-ski-fake-app".into(),
        }
    }
}

impl AuthConfig {
    /// Whether the workspace accepts `token` (its prefix is checked apart).
    pub fn accepts(&self, token: &str) -> bool {
        let own = [&self.bot_token, &self.user_token, &self.app_token];
        if own.iter().any(|known| *known == token) || self.tokens.iter().any(|known| known == token)
        {
            return true;
        }
        self.tokens.is_empty() && !self.strict
    }
}

/// How much the fake keeps, so that a long run stays within bounded memory: beyond each limit
/// the oldest entries are forgotten first.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RetentionConfig {
    /// Messages kept (each once); the least recently changed are forgotten first. The same
    /// limit applies to ephemeral messages.
    pub max_messages: usize,
    /// Web API requests kept for `requests()` and the control API (counts stay exact).
    pub max_requests: usize,
    /// Socket Mode frames, notes and envelopes (with their acks) kept.
    pub max_frames: usize,
    /// The bytes of memory each of the logs holds: Web API requests, Socket Mode frames, notes,
    /// Events API deliveries; beyond it the oldest records are forgotten. A request's record is
    /// counted at what its parsed parameters and answer hold (estimated), several times their
    /// JSON text.
    pub max_log_bytes: usize,
    /// The most bytes one record keeps: a larger request has its largest parameters and answer
    /// fields replaced by a note of their size (half the budget each), a larger frame, note or
    /// delivery body is cut.
    pub max_record_bytes: usize,
    /// Let the wiremock server record every request for `MockServer::received_requests` (off
    /// by default: wiremock keeps each one, unbounded, until `reset_mocks`).
    pub wiremock_requests: bool,
}

impl Default for RetentionConfig {
    fn default() -> Self {
        RetentionConfig {
            max_messages: 100_000,
            max_requests: 10_000,
            max_frames: 10_000,
            max_log_bytes: 16 << 20,
            max_record_bytes: 64 << 10,
            wiremock_requests: false,
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TeamConfig {
    pub id: String,
    pub name: String,
    pub domain: String,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct BotConfig {
    pub user_id: String,
    pub bot_id: String,
    pub app_id: String,
    pub name: String,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UserConfig {
    pub id: String,
    pub name: String,
    #[serde(default)]
    pub real_name: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChannelConfig {
    pub id: String,
    pub name: String,
    #[serde(default)]
    pub private: bool,
    /// Member user ids; empty means every user and the bot.
    #[serde(default)]
    pub members: Vec<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SocketModeConfig {
    /// An unacked `events_api` envelope is sent again after this many milliseconds.
    pub redelivery_ms: u64,
    /// At most this many redeliveries per envelope.
    pub max_retries: u32,
    /// Redeliver every kind of envelope, not only `events_api`.
    pub redeliver_all: bool,
    /// Server pings (with a payload) every this many milliseconds; 0 sends none.
    pub ping_interval_ms: u64,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            team: TeamConfig::default(),
            bot: BotConfig::default(),
            users: vec![
                UserConfig {
                    id: "U0000000002".into(),
                    name: "alice".into(),
                    real_name: Some("Alice Example".into()),
                },
                UserConfig {
                    id: "U0000000003".into(),
                    name: "bob".into(),
                    real_name: Some("Bob Example".into()),
                },
            ],
            channels: vec![
                ChannelConfig {
                    id: "C0000000001".into(),
                    name: "general".into(),
                    private: false,
                    members: Vec::new(),
                },
                ChannelConfig {
                    id: "C0000000002".into(),
                    name: "random".into(),
                    private: false,
                    members: Vec::new(),
                },
            ],
            socket_mode: SocketModeConfig::default(),
            trigger_ttl_ms: 3_000,
            clock_start: None,
            retention: RetentionConfig::default(),
            auth: AuthConfig::default(),
            rate_limits: RateLimitConfig::default(),
            events_http: EventsHttpConfig::default(),
            limits: LimitsConfig::default(),
        }
    }
}

impl Default for TeamConfig {
    fn default() -> Self {
        TeamConfig {
            id: "T0000000001".into(),
            name: "ski".into(),
            domain: "ski-fake".into(),
        }
    }
}

impl Default for BotConfig {
    fn default() -> Self {
        BotConfig {
            user_id: "U0000000001".into(),
            bot_id: "B0000000001".into(),
            app_id: "A0000000001".into(),
            name: "ski-bot".into(),
        }
    }
}

impl Default for SocketModeConfig {
    fn default() -> Self {
        SocketModeConfig {
            redelivery_ms: 3_000,
            max_retries: 3,
            redeliver_all: false,
            ping_interval_ms: 10_000,
        }
    }
}

impl SocketModeConfig {
    pub fn redelivery(&self) -> Duration {
        Duration::from_millis(self.redelivery_ms)
    }
}

impl Config {
    /// Reads a workspace TOML file (every table optional).
    pub fn load(path: &Path) -> Result<Config, FakeSlackError> {
        let text = std::fs::read_to_string(path)
            .map_err(|error| FakeSlackError::Config(format!("{}: {error}", path.display())))?;
        Config::parse(&text)
    }

    /// Parses workspace TOML.
    pub fn parse(text: &str) -> Result<Config, FakeSlackError> {
        let config: Config = toml::from_str(text).map_err(|error| {
            FakeSlackError::Config(ski::exit::parse_error_line(
                error.message(),
                error.span(),
                text,
            ))
        })?;
        config.check()?;
        Ok(config)
    }

    /// Checks what the TOML types cannot: the Request URL.
    pub fn check(&self) -> Result<(), FakeSlackError> {
        match &self.events_http.request_url {
            Some(url) => parse_request_url(url).map(|_| ()).map_err(|error| {
                FakeSlackError::Config(format!("events_http.request_url: {error}"))
            }),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_http_urls_with_a_host_are_request_urls() {
        assert!(parse_request_url("http://127.0.0.1:3000/slack/events").is_ok());
        assert!(parse_request_url("https://example.test/slack/events").is_err());
        assert!(parse_request_url("not a url").is_err());
        assert!(parse_request_url("file:///tmp/x").is_err());
    }
}
