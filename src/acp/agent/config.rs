//! What a reference agent is configured to do: the capabilities it advertises, how it asks for
//! permission, the switches of its echo back end, and its limits.
//!
//! Everything the agent can do is on by default; behaviours that change the outcome of a turn
//! (execution-state updates, retries, injected failures, delays, timeouts, a permission policy
//! other than `ask`, required authentication) are off until configured.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use crate::acp::methods::Generation;

/// Default page size of `session/list`.
pub const DEFAULT_PAGE_SIZE: usize = 50;

/// Default number of live sessions one connection may own (some 12 KiB each).
pub const DEFAULT_MAX_SESSIONS: usize = 1024;

/// Default number of live sessions across every connection of an agent (some 50 MiB at most).
pub const DEFAULT_MAX_TOTAL_SESSIONS: usize = 4096;

/// Default time the permission bridge waits for the client's answer.
pub const DEFAULT_PERMISSION_TIMEOUT: Duration = Duration::from_secs(10);

/// Default base delay between prompt retries (the delay before retry `n` is `n` times this).
pub const DEFAULT_RETRY_BASE_DELAY: Duration = Duration::from_millis(100);

/// The complete configuration of an [`Agent`](super::Agent).
#[derive(Debug, Clone)]
pub struct AgentConfig {
    /// The `agentInfo` of the `initialize` result.
    pub name: String,
    /// The human-readable title in `agentInfo`.
    pub title: String,
    /// The version in `agentInfo`.
    pub version: String,
    /// Which optional methods and capabilities are offered.
    pub features: Features,
    /// The advertised `authMethods` (agent type); `authenticate` answers `-32601` without any.
    pub auth_methods: Vec<AuthMethodSpec>,
    /// Whether session work is refused with `-32000` until `authenticate` succeeded.
    pub auth_required: bool,
    /// How the agent asks the client before it runs a prompt.
    pub permission: PermissionConfig,
    /// Whether `execution_state_update` notifications are sent (off by default).
    pub execution_state: bool,
    /// How many times a failed model attempt is retried (0: never).
    pub max_retries: u32,
    /// The delay before retry `n` is `n` times this.
    pub retry_base_delay: Duration,
    /// A turn that runs longer than this ends with `-32603` (and `timed_out`).
    pub prompt_timeout: Option<Duration>,
    /// Sessions idle for longer than this are removed (checked on every request).
    pub session_ttl: Option<Duration>,
    /// Entries per `session/list` page (at least 1).
    pub page_size: usize,
    /// Live sessions one connection may own; `session/new` and `session/fork` beyond it are
    /// refused with `-32603` until one is closed or deleted.
    pub max_sessions: usize,
    /// Live sessions across every connection; `session/new` and `session/fork` beyond it are
    /// refused with `-32603` until one is closed, deleted or expires.
    pub max_total_sessions: usize,
    /// Which updates a successful turn sends.
    pub turn_updates: TurnUpdates,
    /// The default behaviour of the echo back end; a prompt may override it (see
    /// [`PromptDirectives`](super::PromptDirectives)).
    pub echo: EchoConfig,
    /// `initialize` refuses a `protocolVersion` other than 1 with `-32602`, as
    /// acp-websocket-serve-spec.md asks (WS-023), instead of answering 1 as ACP negotiates.
    pub strict_version: bool,
    /// The newest protocol generation `initialize` settles on (every older one is spoken too):
    /// v2 by default, v1 to offer v1 alone (`ski acp serve --protocol 1`).
    pub max_protocol: Generation,
    /// Advertise `sessionCapabilities.additionalDirectories` in v1 (on by default; off with
    /// `ski acp serve --minimal`). The roots are honoured either way.
    pub additional_directories: bool,
}

impl Default for AgentConfig {
    fn default() -> Self {
        Self {
            name: "ski".to_owned(),
            title: "ski reference ACP agent".to_owned(),
            version: env!("CARGO_PKG_VERSION").to_owned(),
            features: Features::all(),
            auth_methods: Vec::new(),
            auth_required: false,
            permission: PermissionConfig::default(),
            execution_state: false,
            max_retries: 0,
            retry_base_delay: DEFAULT_RETRY_BASE_DELAY,
            prompt_timeout: None,
            session_ttl: None,
            page_size: DEFAULT_PAGE_SIZE,
            max_sessions: DEFAULT_MAX_SESSIONS,
            max_total_sessions: DEFAULT_MAX_TOTAL_SESSIONS,
            turn_updates: TurnUpdates::Full,
            echo: EchoConfig::default(),
            strict_version: false,
            max_protocol: Generation::V2,
            additional_directories: true,
        }
    }
}

/// An agent-type auth method to advertise.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthMethodSpec {
    /// The `id` a client passes to `authenticate`.
    pub id: String,
    /// The display name.
    pub name: String,
}

impl FromStr for AuthMethodSpec {
    type Err = String;

    /// Reads `ID` or `ID=NAME`.
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let (id, name) = match text.split_once('=') {
            Some((id, name)) => (id.trim(), name.trim()),
            None => (text.trim(), text.trim()),
        };
        if id.is_empty() {
            return Err(format!(
                "auth method {text:?} has an empty id; write ID or ID=NAME"
            ));
        }
        let name = if name.is_empty() { id } else { name };
        Ok(Self {
            id: id.to_owned(),
            name: name.to_owned(),
        })
    }
}

/// One optional method or capability of the agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Feature {
    /// `loadSession` and `session/load`.
    LoadSession,
    /// `sessionCapabilities.list` and `session/list`.
    List,
    /// `sessionCapabilities.resume` and `session/resume`.
    Resume,
    /// `sessionCapabilities.fork` and `session/fork`.
    Fork,
    /// `sessionCapabilities.delete` and `session/delete`.
    Delete,
    /// `sessionCapabilities.close` and `session/close`.
    Close,
    /// `_meta.ski.sessionExport` and `session/export`.
    Export,
    /// `_meta.ski.sessionStop` and `session/stop`.
    Stop,
    /// `auth.logout` and `logout`.
    Logout,
    /// The legacy `session/set_model` and the `models` state.
    SetModel,
}

impl Feature {
    /// Every feature, in the order of [`Feature::name`]'s documentation.
    pub const ALL: [Feature; 10] = [
        Feature::LoadSession,
        Feature::List,
        Feature::Resume,
        Feature::Fork,
        Feature::Delete,
        Feature::Close,
        Feature::Export,
        Feature::Stop,
        Feature::Logout,
        Feature::SetModel,
    ];

    /// The name used on the command line: `load-session`, `list`, `resume`, `fork`, `delete`,
    /// `close`, `export`, `stop`, `logout`, `set-model`.
    pub fn name(self) -> &'static str {
        match self {
            Feature::LoadSession => "load-session",
            Feature::List => "list",
            Feature::Resume => "resume",
            Feature::Fork => "fork",
            Feature::Delete => "delete",
            Feature::Close => "close",
            Feature::Export => "export",
            Feature::Stop => "stop",
            Feature::Logout => "logout",
            Feature::SetModel => "set-model",
        }
    }
}

impl fmt::Display for Feature {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Feature {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Feature::ALL
            .into_iter()
            .find(|feature| feature.name() == text)
            .ok_or_else(|| {
                let names: Vec<&str> = Feature::ALL.iter().map(|f| f.name()).collect();
                format!(
                    "unknown feature {text:?}; expected one of {}",
                    names.join(", ")
                )
            })
    }
}

/// The set of enabled optional features.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Features {
    enabled: [bool; Feature::ALL.len()],
}

impl Features {
    /// Every feature on (the default).
    pub fn all() -> Self {
        Self {
            enabled: [true; Feature::ALL.len()],
        }
    }

    /// The features of the stable ACP v1 schema and ski's `_meta` extensions: every feature but
    /// the unstable `session/fork` and the legacy `models` state (`ski acp serve`'s default).
    pub fn stable() -> Self {
        Self::all()
            .without(Feature::Fork)
            .without(Feature::SetModel)
    }

    /// Every feature off: no `loadSession`, no `sessionCapabilities`, no logout, no ski
    /// extensions, no legacy model selection.
    pub fn minimal() -> Self {
        Self {
            enabled: [false; Feature::ALL.len()],
        }
    }

    /// Whether a feature is on.
    pub fn has(&self, feature: Feature) -> bool {
        self.enabled[Self::index(feature)]
    }

    /// Turns a feature on or off.
    pub fn set(&mut self, feature: Feature, on: bool) {
        self.enabled[Self::index(feature)] = on;
    }

    /// Returns the set with a feature turned off.
    #[must_use]
    pub fn without(mut self, feature: Feature) -> Self {
        self.set(feature, false);
        self
    }

    fn index(feature: Feature) -> usize {
        Feature::ALL
            .iter()
            .position(|f| *f == feature)
            .unwrap_or_default()
    }
}

impl Default for Features {
    fn default() -> Self {
        Self::all()
    }
}

/// How the agent asks for permission before it runs a prompt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PermissionConfig {
    /// Whether and how strictly the client is asked.
    pub mode: PermissionMode,
    /// How long the bridge waits for the client's answer.
    pub timeout: Duration,
    /// Whether to ask at all, or to decide locally.
    pub policy: PolicyMode,
}

impl Default for PermissionConfig {
    fn default() -> Self {
        Self {
            mode: PermissionMode::Permissive,
            timeout: DEFAULT_PERMISSION_TIMEOUT,
            policy: PolicyMode::Ask,
        }
    }
}

/// The serve permission modes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PermissionMode {
    /// No permission step: every prompt runs.
    Disabled,
    /// Ask; a bridge failure (timeout, transport error, lost connection) counts as `allow_once`.
    Permissive,
    /// Ask; a bridge failure ends the turn with `-32603`, a refusal with `cancelled`.
    Required,
}

impl PermissionMode {
    /// The command-line name.
    pub fn name(self) -> &'static str {
        match self {
            PermissionMode::Disabled => "disabled",
            PermissionMode::Permissive => "permissive",
            PermissionMode::Required => "required",
        }
    }
}

/// The permission policy: decide locally or ask the client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PolicyMode {
    /// Grant `allow_once` without asking.
    Allow,
    /// Refuse without asking; the turn ends `cancelled`.
    Deny,
    /// Ask the client, remembering `allow_always` and `reject_always` per session.
    Ask,
}

impl PolicyMode {
    /// The command-line name.
    pub fn name(self) -> &'static str {
        match self {
            PolicyMode::Allow => "allow",
            PolicyMode::Deny => "deny",
            PolicyMode::Ask => "ask",
        }
    }
}

/// Which updates a successful turn sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TurnUpdates {
    /// `available_commands_update`, `plan`, `tool_call`, `tool_call_update`,
    /// `agent_message_chunk`, and `session_info_update` after a session's first turn.
    Full,
    /// Only the `agent_message_chunk` (and the updates of injected tool calls).
    Message,
}

/// The default behaviour of the echo back end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EchoConfig {
    /// How long each model attempt takes.
    pub delay: Duration,
    /// Whether each attempt runs until the turn is cancelled (or times out).
    pub hold: bool,
    /// How many attempts fail before one succeeds.
    pub fail_attempts: u32,
    /// Tool calls every turn makes, in order.
    pub tool_calls: Vec<ToolCallSpec>,
    /// How many times the reply's `agent_message_chunk` is sent (1 normally; more makes a
    /// notification flood for benchmarks).
    pub reply_chunks: u32,
    /// Whether each turn makes a tool call that runs until it is cancelled (`tool_call/cancel`
    /// in v2, or the turn's own stop), before the reply.
    pub hold_tool_call: bool,
}

impl Default for EchoConfig {
    fn default() -> Self {
        Self {
            delay: Duration::ZERO,
            hold: false,
            fail_attempts: 0,
            tool_calls: Vec::new(),
            reply_chunks: 1,
            hold_tool_call: false,
        }
    }
}

/// A tool call the echo back end makes during a turn, through the client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolCallSpec {
    /// `fs/read_text_file` of a path (relative paths resolve against the session's cwd).
    ReadFile {
        /// The path to read.
        path: String,
        /// The first line to read (1-based).
        line: Option<u32>,
        /// How many lines to read.
        limit: Option<u32>,
    },
    /// `fs/write_text_file` of a path with the prompt's text (or the given content).
    WriteFile {
        /// The path to write.
        path: String,
        /// The content; the prompt's text when absent.
        content: Option<String>,
    },
    /// `terminal/create` of a command in the session's cwd, then `wait_for_exit`, `output` and
    /// `release`.
    Terminal {
        /// The program.
        command: String,
        /// Its arguments.
        args: Vec<String>,
    },
}

impl ToolCallSpec {
    /// The syntax accepted by [`ToolCallSpec::from_str`], for help texts and errors.
    pub const SYNTAX: &'static str =
        "read:PATH[:LINE[:LIMIT]], write:PATH[=CONTENT] or terminal:COMMAND [ARGS...]";
}

impl FromStr for ToolCallSpec {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let bad = |why: &str| {
            format!(
                "invalid tool call {text:?}: {why}; expected {}",
                Self::SYNTAX
            )
        };
        let (kind, rest) = text.split_once(':').ok_or_else(|| bad("missing a kind"))?;
        match kind {
            "read" => {
                let mut parts = rest.splitn(3, ':');
                let path = parts.next().unwrap_or_default();
                if path.is_empty() {
                    return Err(bad("the path is empty"));
                }
                let number = |part: Option<&str>, what: &str| -> Result<Option<u32>, String> {
                    part.map(|p| {
                        p.parse::<u32>()
                            .map_err(|_| bad(&format!("{what} {p:?} is not a whole number")))
                    })
                    .transpose()
                };
                let line = number(parts.next(), "line")?;
                let limit = number(parts.next(), "limit")?;
                Ok(ToolCallSpec::ReadFile {
                    path: path.to_owned(),
                    line,
                    limit,
                })
            }
            "write" => {
                let (path, content) = match rest.split_once('=') {
                    Some((path, content)) => (path, Some(content.to_owned())),
                    None => (rest, None),
                };
                if path.is_empty() {
                    return Err(bad("the path is empty"));
                }
                Ok(ToolCallSpec::WriteFile {
                    path: path.to_owned(),
                    content,
                })
            }
            "terminal" => {
                let mut words = rest.split_whitespace().map(str::to_owned);
                let command = words.next().ok_or_else(|| bad("the command is empty"))?;
                Ok(ToolCallSpec::Terminal {
                    command,
                    args: words.collect(),
                })
            }
            other => Err(bad(&format!("unknown kind {other:?}"))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tool_call_specs_parse() {
        assert_eq!(
            "read:/tmp/a.txt:2:3".parse::<ToolCallSpec>().unwrap(),
            ToolCallSpec::ReadFile {
                path: "/tmp/a.txt".into(),
                line: Some(2),
                limit: Some(3)
            }
        );
        assert_eq!(
            "write:out.txt=hello".parse::<ToolCallSpec>().unwrap(),
            ToolCallSpec::WriteFile {
                path: "out.txt".into(),
                content: Some("hello".into())
            }
        );
        assert_eq!(
            "terminal:echo hi there".parse::<ToolCallSpec>().unwrap(),
            ToolCallSpec::Terminal {
                command: "echo".into(),
                args: vec!["hi".into(), "there".into()]
            }
        );
        for bad in ["read:", "nope:x", "terminal:  ", "read:/a:x", "plain"] {
            let error = bad.parse::<ToolCallSpec>().unwrap_err();
            assert!(error.contains("expected"), "{error}");
        }
    }

    #[test]
    fn features_toggle_by_name() {
        let features = Features::all().without("delete".parse().unwrap());
        assert!(!features.has(Feature::Delete));
        assert!(features.has(Feature::List));
        assert!(Feature::ALL.iter().all(|f| !Features::minimal().has(*f)));
        assert!(
            "bogus"
                .parse::<Feature>()
                .unwrap_err()
                .contains("load-session")
        );
    }

    #[test]
    fn auth_methods_parse() {
        let spec: AuthMethodSpec = "token=Token login".parse().unwrap();
        assert_eq!(spec.id, "token");
        assert_eq!(spec.name, "Token login");
        let spec: AuthMethodSpec = "plain".parse().unwrap();
        assert_eq!(spec.name, "plain");
        assert!("=x".parse::<AuthMethodSpec>().is_err());
    }
}
