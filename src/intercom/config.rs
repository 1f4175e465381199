//! The intercom server's configuration file (TOML) and its validation; tokens come only from the
//! environment.

use std::collections::HashSet;
use std::net::IpAddr;
use std::path::{Component, Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Slack's own Web API base URL, used when `[slack] api_base_url` is absent.
pub const SLACK_API_BASE_URL: &str = "https://slack.com/api";
/// The slash command the server answers when `[slack] slash_command` is absent.
pub const DEFAULT_SLASH_COMMAND: &str = "/intercom";
/// The environment variable holding the bot token (`xoxb-…`).
pub const BOT_TOKEN_ENV: &str = "SLACK_BOT_TOKEN";
/// The environment variable holding the app-level token (`xapp-…`) for Socket Mode.
pub const APP_TOKEN_ENV: &str = "SLACK_APP_TOKEN";
/// The environment variable holding the MCP endpoint's bearer token; unset, no token is asked.
pub const MCP_TOKEN_ENV: &str = "SKI_INTERCOM_MCP_TOKEN";
/// Live MCP sessions at most unless `[mcp] max_sessions` says otherwise.
pub const DEFAULT_MCP_MAX_SESSIONS: u32 = 32;
/// Open connections to the MCP endpoint at most unless `[mcp] max_connections` says otherwise.
pub const DEFAULT_MCP_MAX_CONNECTIONS: u32 = 256;
/// How long a request's headers (and an idle keep-alive connection's next request) may take
/// unless `[mcp] header_timeout_ms` says otherwise.
pub const DEFAULT_MCP_HEADER_TIMEOUT_MS: u64 = 10_000;

/// Why a configuration was refused; the text is what the operator reads on stderr.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config file {path}: {source}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("invalid config {path}: {message}")]
    Parse { path: String, message: String },
    #[error("workspace id must not be empty")]
    EmptyWorkspaceId,
    #[error("workspace id must be alphanumeric, hyphens, or underscores: {0}")]
    BadWorkspaceId(String),
    #[error("duplicate workspace id: {0}")]
    DuplicateWorkspaceId(String),
    #[error("channel_id must not be empty for workspace: {0}")]
    EmptyChannel(String),
    #[error("path must not contain '..': {0}")]
    PathTraversal(String),
    #[error("ACP mode requires host_cli configuration")]
    MissingHostCli,
    #[error("host_cli binary not found: {0}")]
    HostCliNotFound(String),
    #[error("[mcp] host must be a loopback address, got {0}")]
    NotLoopback(String),
    #[error("[mcp] max_sessions must be at least 1")]
    NoMcpSessions,
    #[error("[mcp] max_connections must be at least 1")]
    NoMcpConnections,
    #[error("[mcp] header_timeout_ms must be at least 1")]
    NoMcpHeaderTimeout,
    #[error(
        "[mcp] allowed_origins: not an origin (scheme://host, scheme://host:port or scheme://host:*): {0}"
    )]
    BadOrigin(String),
    #[error("[mcp] token must not be written in the config file; set {MCP_TOKEN_ENV} instead")]
    McpTokenInFile,
    #[error("{MCP_TOKEN_ENV} is set but empty; unset it (no token) or give the token")]
    EmptyMcpToken,
    #[error("[slack] authorized_user_ids must name at least one user")]
    NoAuthorizedUsers,
    #[error("[slack] slash_command must start with '/': {0}")]
    BadSlashCommand(String),
    #[error("{0} is not set (Slack tokens come only from the environment)")]
    MissingToken(&'static str),
    #[error("{0} must not be written in the config file; set the environment variable instead")]
    TokenInFile(&'static str),
}

/// `--mode`: how agents reach the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Agents connect to the server's MCP endpoint.
    Mcp,
    /// The server spawns agents and speaks a line protocol on their stdio.
    Acp,
}

impl Mode {
    /// The value stored in `session.protocol_mode`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Mode::Mcp => "mcp",
            Mode::Acp => "acp",
        }
    }
}

/// One `[[workspace]]` entry: a workspace id agents name, the channel its sessions post in.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Workspace {
    pub id: String,
    pub channel_id: String,
    /// The working directory of an agent spawned for this workspace (ACP), and the root
    /// `check_diff` writes under.
    #[serde(default)]
    pub path: Option<PathBuf>,
    #[serde(default)]
    pub label: Option<String>,
}

/// `[slack]`.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct SlackConfig {
    #[serde(default = "default_api_base_url")]
    pub api_base_url: String,
    #[serde(default = "default_slash_command")]
    pub slash_command: String,
    #[serde(default)]
    pub authorized_user_ids: Vec<String>,
    // Present only to refuse them with a clear message.
    #[serde(default, skip_serializing)]
    bot_token: Option<toml::Value>,
    #[serde(default, skip_serializing)]
    app_token: Option<toml::Value>,
}

fn default_api_base_url() -> String {
    SLACK_API_BASE_URL.to_string()
}

fn default_slash_command() -> String {
    DEFAULT_SLASH_COMMAND.to_string()
}

/// `[mcp]`: where the streamable HTTP endpoint listens and who it serves.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct McpConfig {
    #[serde(default = "default_host")]
    pub host: String,
    /// 0 picks a free port; the readiness line reports the address.
    #[serde(default = "default_mcp_port")]
    pub port: u16,
    /// Browser origins served besides the loopback ones; a request with any other `Origin` is
    /// refused (403). Requests without `Origin` are served.
    #[serde(default)]
    pub allowed_origins: Vec<String>,
    /// Live MCP sessions at most; an `initialize` beyond it is refused.
    #[serde(default = "default_mcp_max_sessions")]
    pub max_sessions: u32,
    /// Open connections at most, idle keep-alive ones included; one more is answered 503.
    #[serde(default = "default_mcp_max_connections")]
    pub max_connections: u32,
    /// How long a client may take to send a request's headers, and an idle keep-alive
    /// connection to begin its next request; past it the connection is closed.
    #[serde(default = "default_mcp_header_timeout_ms")]
    pub header_timeout_ms: u64,
    // Present only to refuse it with a clear message: the token comes from the environment.
    #[serde(default, skip_serializing)]
    token: Option<toml::Value>,
}

fn default_host() -> String {
    "127.0.0.1".to_string()
}

fn default_mcp_port() -> u16 {
    3000
}

fn default_mcp_max_sessions() -> u32 {
    DEFAULT_MCP_MAX_SESSIONS
}

fn default_mcp_max_connections() -> u32 {
    DEFAULT_MCP_MAX_CONNECTIONS
}

fn default_mcp_header_timeout_ms() -> u64 {
    DEFAULT_MCP_HEADER_TIMEOUT_MS
}

impl Default for McpConfig {
    fn default() -> Self {
        McpConfig {
            host: default_host(),
            port: default_mcp_port(),
            allowed_origins: Vec::new(),
            max_sessions: default_mcp_max_sessions(),
            max_connections: default_mcp_max_connections(),
            header_timeout_ms: default_mcp_header_timeout_ms(),
            token: None,
        }
    }
}

/// Whether `origin` reads as an origin rmcp can match: `null`, or `http(s)://host` with an
/// optional `:port` or `:*`, nothing after it (an IPv6 host in brackets).
fn is_origin(origin: &str) -> bool {
    if origin == "null" {
        return true;
    }
    let Some(rest) = origin
        .strip_prefix("http://")
        .or_else(|| origin.strip_prefix("https://"))
    else {
        return false;
    };
    let (host, port) = match rest.strip_prefix('[') {
        Some(bracketed) => match bracketed.split_once(']') {
            Some((host, after)) => (host, after),
            None => return false,
        },
        None => match rest.split_once(':') {
            Some((host, _)) => (host, &rest[host.len()..]),
            None => (rest, ""),
        },
    };
    let port_ok = match port.strip_prefix(':') {
        Some(port) => port == "*" || port.parse::<u16>().is_ok(),
        None => port.is_empty(),
    };
    port_ok && !host.is_empty() && !host.contains(['/', '?', '#', '@', ' ', '[', ']'])
}

/// `[acp] dialect`: what a spawned agent speaks on its stdio.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Dialect {
    /// The matrix's stream dialect: `{method, id?, params}` lines without `"jsonrpc"`.
    #[default]
    Intercom,
    /// Standard ACP: the server is an ACP client (`initialize`, `session/new`,
    /// `session/prompt`, `session/request_permission`, `session/cancel`).
    Acp,
}

impl Dialect {
    /// The name used in config and logs.
    pub fn as_str(self) -> &'static str {
        match self {
            Dialect::Intercom => "intercom",
            Dialect::Acp => "acp",
        }
    }
}

/// `[acp]`: spawned agents. Durations have a `_ms` form that wins over `_seconds`, so tests and
/// conformance runs can use milliseconds.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct AcpConfig {
    pub dialect: Dialect,
    /// Live agent sessions at most; `session-start` beyond it is refused.
    pub max_sessions: u32,
    pub startup_timeout_seconds: u64,
    pub startup_timeout_ms: Option<u64>,
    /// How long a stopped agent gets to exit after `session/interrupt` before its group is
    /// signalled (SIGTERM, then SIGKILL after the same grace).
    pub stop_grace_ms: u64,
    /// The longest line read from an agent; longer lines are logged and skipped.
    pub max_line_length: usize,
}

impl Default for AcpConfig {
    fn default() -> Self {
        AcpConfig {
            dialect: Dialect::Intercom,
            max_sessions: 5,
            startup_timeout_seconds: 30,
            startup_timeout_ms: None,
            stop_grace_ms: 2000,
            max_line_length: 1024 * 1024,
        }
    }
}

impl AcpConfig {
    /// How long a new agent has to send its first line.
    pub fn startup_timeout(&self) -> Duration {
        self.startup_timeout_ms.map_or_else(
            || Duration::from_secs(self.startup_timeout_seconds),
            Duration::from_millis,
        )
    }

    /// The grace between the interrupt and the group's signals.
    pub fn stop_grace(&self) -> Duration {
        Duration::from_millis(self.stop_grace_ms)
    }
}

/// `[stall]`: when a silent agent is nudged and when the operator is told. Durations have a `_ms`
/// form that wins over `_seconds`.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct StallConfig {
    pub enabled: bool,
    pub inactivity_threshold_seconds: u64,
    pub inactivity_threshold_ms: Option<u64>,
    pub escalation_threshold_seconds: u64,
    pub escalation_threshold_ms: Option<u64>,
    pub max_retries: u32,
    pub nudge_message: String,
}

/// What a `nudge` says unless `[stall] nudge_message` says otherwise.
pub const DEFAULT_NUDGE_MESSAGE: &str =
    "Continue working on the current task. Pick up where you left off.";

impl Default for StallConfig {
    fn default() -> Self {
        StallConfig {
            enabled: true,
            inactivity_threshold_seconds: 300,
            inactivity_threshold_ms: None,
            escalation_threshold_seconds: 120,
            escalation_threshold_ms: None,
            max_retries: 3,
            nudge_message: DEFAULT_NUDGE_MESSAGE.to_string(),
        }
    }
}

impl StallConfig {
    /// Silence before the first nudge.
    pub fn inactivity(&self) -> Duration {
        self.inactivity_threshold_ms.map_or_else(
            || Duration::from_secs(self.inactivity_threshold_seconds),
            Duration::from_millis,
        )
    }

    /// Silence between nudges, and after the last one before the operator is told.
    pub fn escalation(&self) -> Duration {
        self.escalation_threshold_ms.map_or_else(
            || Duration::from_secs(self.escalation_threshold_seconds),
            Duration::from_millis,
        )
    }
}

/// `[database]`.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct DatabaseConfig {
    /// Relative paths are taken from the config file's directory.
    #[serde(default = "default_database_path")]
    pub path: PathBuf,
}

fn default_database_path() -> PathBuf {
    PathBuf::from("intercom.db")
}

impl Default for DatabaseConfig {
    fn default() -> Self {
        DatabaseConfig {
            path: default_database_path(),
        }
    }
}

/// The whole file.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    #[serde(default)]
    pub host_cli: Option<String>,
    #[serde(default)]
    pub host_cli_args: Vec<String>,
    #[serde(default, rename = "workspace")]
    pub workspaces: Vec<Workspace>,
    pub slack: SlackConfig,
    #[serde(default)]
    pub mcp: McpConfig,
    #[serde(default)]
    pub acp: AcpConfig,
    #[serde(default)]
    pub stall: StallConfig,
    #[serde(default)]
    pub database: DatabaseConfig,
}

/// The two Slack tokens and the MCP endpoint's optional bearer token, read from the
/// environment; `Debug` never shows them.
#[derive(Clone)]
pub struct Tokens {
    pub bot: String,
    pub app: String,
    /// When set, every MCP request must carry `Authorization: Bearer <token>`.
    pub mcp: Option<String>,
}

impl std::fmt::Debug for Tokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Tokens { bot: <redacted>, app: <redacted>, mcp: <redacted> }")
    }
}

impl Tokens {
    /// Reads the tokens from the environment; an empty Slack token counts as unset, an empty MCP
    /// token is refused (it would read as "no token").
    pub fn from_env() -> Result<Tokens, ConfigError> {
        let read = |name: &'static str| {
            std::env::var(name)
                .ok()
                .filter(|value| !value.trim().is_empty())
                .ok_or(ConfigError::MissingToken(name))
        };
        let mcp = match std::env::var(MCP_TOKEN_ENV) {
            Ok(token) if token.trim().is_empty() => return Err(ConfigError::EmptyMcpToken),
            Ok(token) => Some(token),
            Err(_) => None,
        };
        Ok(Tokens {
            bot: read(BOT_TOKEN_ENV)?,
            app: read(APP_TOKEN_ENV)?,
            mcp,
        })
    }
}

impl Config {
    /// Reads and validates the file for `mode`; relative paths are resolved against its directory.
    pub fn load(path: &Path, mode: Mode) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.display().to_string(),
            source,
        })?;
        let mut config = Config::parse(&text, path)?;
        config.validate(mode)?;
        let base = path.parent().unwrap_or(Path::new("."));
        if config.database.path.is_relative() {
            config.database.path = base.join(&config.database.path);
        }
        for workspace in &mut config.workspaces {
            if let Some(dir) = &workspace.path
                && dir.is_relative()
            {
                workspace.path = Some(base.join(dir));
            }
        }
        Ok(config)
    }

    /// Parses the TOML text (no validation).
    pub fn parse(text: &str, path: &Path) -> Result<Config, ConfigError> {
        toml::from_str(text).map_err(|error| ConfigError::Parse {
            path: path.display().to_string(),
            message: crate::exit::parse_error_line(error.message(), error.span(), text),
        })
    }

    /// Everything but the tokens: workspaces, paths, the MCP host, the slash command, the
    /// authorized users, and in ACP mode the agent command.
    pub fn validate(&self, mode: Mode) -> Result<(), ConfigError> {
        if self.slack.bot_token.is_some() {
            return Err(ConfigError::TokenInFile("bot_token"));
        }
        if self.slack.app_token.is_some() {
            return Err(ConfigError::TokenInFile("app_token"));
        }
        validate_workspaces(&self.workspaces)?;
        reject_traversal(&self.database.path)?;
        if !self.slack.slash_command.starts_with('/') || self.slack.slash_command.len() < 2 {
            return Err(ConfigError::BadSlashCommand(
                self.slack.slash_command.clone(),
            ));
        }
        if self
            .slack
            .authorized_user_ids
            .iter()
            .all(|id| id.trim().is_empty())
        {
            return Err(ConfigError::NoAuthorizedUsers);
        }
        let loopback = self
            .mcp
            .host
            .parse::<IpAddr>()
            .map(|ip| ip.is_loopback())
            .unwrap_or(self.mcp.host == "localhost");
        if !loopback {
            return Err(ConfigError::NotLoopback(self.mcp.host.clone()));
        }
        if self.mcp.token.is_some() {
            return Err(ConfigError::McpTokenInFile);
        }
        if self.mcp.max_sessions == 0 {
            return Err(ConfigError::NoMcpSessions);
        }
        if self.mcp.max_connections == 0 {
            return Err(ConfigError::NoMcpConnections);
        }
        if self.mcp.header_timeout_ms == 0 {
            return Err(ConfigError::NoMcpHeaderTimeout);
        }
        if let Some(bad) = self.mcp.allowed_origins.iter().find(|o| !is_origin(o)) {
            return Err(ConfigError::BadOrigin(bad.clone()));
        }
        if mode == Mode::Acp {
            let host_cli = self
                .host_cli
                .as_deref()
                .map(str::trim)
                .filter(|cli| !cli.is_empty())
                .ok_or(ConfigError::MissingHostCli)?;
            if resolve_executable(host_cli).is_none() {
                return Err(ConfigError::HostCliNotFound(host_cli.to_string()));
            }
        }
        Ok(())
    }

    /// The channel mapped to `workspace_id`, if any.
    pub fn channel_for(&self, workspace_id: &str) -> Option<&Workspace> {
        self.workspaces.iter().find(|w| w.id == workspace_id)
    }
}

/// The `[[workspace]]` rules: ids non-empty, `[A-Za-z0-9_-]+` and unique; channels non-empty;
/// paths without `..`.
pub fn validate_workspaces(workspaces: &[Workspace]) -> Result<(), ConfigError> {
    let mut seen = HashSet::new();
    for workspace in workspaces {
        if workspace.id.is_empty() {
            return Err(ConfigError::EmptyWorkspaceId);
        }
        if !workspace
            .id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        {
            return Err(ConfigError::BadWorkspaceId(workspace.id.clone()));
        }
        if !seen.insert(workspace.id.as_str()) {
            return Err(ConfigError::DuplicateWorkspaceId(workspace.id.clone()));
        }
        if workspace.channel_id.trim().is_empty() {
            return Err(ConfigError::EmptyChannel(workspace.id.clone()));
        }
        if let Some(path) = &workspace.path {
            reject_traversal(path)?;
        }
    }
    Ok(())
}

fn reject_traversal(path: &Path) -> Result<(), ConfigError> {
    if path.components().any(|c| matches!(c, Component::ParentDir)) {
        return Err(ConfigError::PathTraversal(path.display().to_string()));
    }
    Ok(())
}

/// A command with a `/` must name an existing file; a bare name is looked up on `PATH`.
pub fn resolve_executable(command: &str) -> Option<PathBuf> {
    if command.contains('/') {
        let path = PathBuf::from(command);
        return path.is_file().then_some(path);
    }
    let search = std::env::var_os("PATH")?;
    std::env::split_paths(&search)
        .map(|dir| dir.join(command))
        .find(|candidate| candidate.is_file())
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: &str = "[slack]\nauthorized_user_ids = [\"U1\"]\n";

    fn parse(extra: &str) -> Config {
        Config::parse(&format!("{extra}\n{BASE}"), Path::new("c.toml")).expect("parses")
    }

    #[test]
    fn duplicate_and_empty_workspace_ids_are_refused_with_the_matrix_texts() {
        let config = parse(
            "[[workspace]]\nid = \"myproj\"\nchannel_id = \"C1\"\n[[workspace]]\nid = \"myproj\"\nchannel_id = \"C2\"",
        );
        assert_eq!(
            config.validate(Mode::Mcp).unwrap_err().to_string(),
            "duplicate workspace id: myproj"
        );
        let config = parse("[[workspace]]\nid = \"\"\nchannel_id = \"C1\"");
        assert_eq!(
            config.validate(Mode::Mcp).unwrap_err().to_string(),
            "workspace id must not be empty"
        );
    }

    #[test]
    fn acp_mode_needs_an_existing_host_cli() {
        let config = parse("");
        assert!(config.validate(Mode::Mcp).is_ok());
        assert_eq!(
            config.validate(Mode::Acp).unwrap_err().to_string(),
            "ACP mode requires host_cli configuration"
        );
        let config = parse("host_cli = \"/nonexistent/path\"");
        assert_eq!(
            config.validate(Mode::Acp).unwrap_err().to_string(),
            "host_cli binary not found: /nonexistent/path"
        );
    }

    #[test]
    fn tokens_in_the_file_traversal_and_remote_hosts_are_refused() {
        let text = format!("{BASE}bot_token = \"xoxb-1\"\n");
        let config = Config::parse(&text, Path::new("c.toml")).expect("parses");
        assert!(matches!(
            config.validate(Mode::Mcp),
            Err(ConfigError::TokenInFile(_))
        ));
        let config = parse("[database]\npath = \"../x.db\"");
        assert!(matches!(
            config.validate(Mode::Mcp),
            Err(ConfigError::PathTraversal(_))
        ));
        let config = parse("[mcp]\nhost = \"0.0.0.0\"\nport = 0");
        assert!(matches!(
            config.validate(Mode::Mcp),
            Err(ConfigError::NotLoopback(_))
        ));
    }

    #[test]
    fn mcp_origins_the_session_cap_and_a_token_in_the_file_are_checked() {
        assert_eq!(parse("").mcp.max_sessions, DEFAULT_MCP_MAX_SESSIONS);
        let config = parse(
            "[mcp]\nallowed_origins = [\"https://ide.example\", \"http://localhost:*\", \"http://[::1]:8080\", \"http://[::1]\", \"null\"]",
        );
        assert!(config.validate(Mode::Mcp).is_ok());
        for bad in [
            "ide.example",
            "https://",
            "https://ide.example/path",
            "http://h:port",
        ] {
            let config = parse(&format!("[mcp]\nallowed_origins = [{bad:?}]"));
            assert!(
                matches!(config.validate(Mode::Mcp), Err(ConfigError::BadOrigin(ref o)) if o == bad),
                "{bad}"
            );
        }
        assert!(matches!(
            parse("[mcp]\nmax_sessions = 0").validate(Mode::Mcp),
            Err(ConfigError::NoMcpSessions)
        ));
        assert!(matches!(
            parse("[mcp]\nmax_connections = 0").validate(Mode::Mcp),
            Err(ConfigError::NoMcpConnections)
        ));
        assert!(matches!(
            parse("[mcp]\nheader_timeout_ms = 0").validate(Mode::Mcp),
            Err(ConfigError::NoMcpHeaderTimeout)
        ));
        let limits = parse("[mcp]\nmax_connections = 3\nheader_timeout_ms = 250");
        assert_eq!(limits.mcp.max_connections, 3);
        assert_eq!(limits.mcp.header_timeout_ms, 250);
        assert_eq!(parse("").mcp.max_connections, DEFAULT_MCP_MAX_CONNECTIONS);
        let refused = parse("[mcp]\ntoken = \"t\"").validate(Mode::Mcp);
        assert!(matches!(refused, Err(ConfigError::McpTokenInFile)));
    }
}
