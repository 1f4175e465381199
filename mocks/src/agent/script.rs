//! The script model: what a TOML script file says, how it is checked, and the ready scripts
//! that ship with the mock agent.
//!
//! A script has optional tables that tune the built-in behaviour (`[agent]`, `[prompt]`,
//! `[faults]`, `[kiro]`, `[intercom]`) and a list of rules (`[[on]]`). Each rule has one trigger
//! and a list of steps (`do`). Loading checks everything a script can get wrong before the agent
//! starts: unknown keys, a rule with no or two triggers, a step with no or two actions, bad
//! patterns, unknown `${...}` placeholders.

pub mod step;
pub mod trigger;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Deserialize;
use serde_json::Value;

pub use step::{Action, ErrorSpec, Fragments, Step, StepSpec};
pub use trigger::{Matcher, Rule, RuleSpec, Trigger};

pub use super::profile::Quirk;

use super::recording::{ExchangeSpec, Recording, RecordingSpec};
use super::template;

/// The ready scripts: name, file name, and the text compiled into the binary.
pub const BUILTIN_SCRIPTS: &[(&str, &str)] = &[
    ("echo", include_str!("../../scripts/echo.toml")),
    ("testy", include_str!("../../scripts/testy.toml")),
    ("faults", include_str!("../../scripts/faults.toml")),
    ("kiro", include_str!("../../scripts/kiro.toml")),
    ("intercom", include_str!("../../scripts/intercom.toml")),
    (
        "intercom-jsonrpc",
        include_str!("../../scripts/intercom-jsonrpc.toml"),
    ),
    (
        "intercom-acp",
        include_str!("../../scripts/intercom-acp.toml"),
    ),
];

/// Why a script could not be used.
#[derive(Debug, thiserror::Error)]
pub enum ScriptError {
    /// The file could not be read.
    #[error("cannot read script {path}: {source}")]
    Read {
        /// The path that was given.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The text is not valid TOML, or does not fit the script format.
    #[error("invalid script {origin}: {message}")]
    Parse {
        /// Where the script came from (a path or `builtin:NAME`).
        origin: String,
        /// What the parser reported, with the line and column.
        message: String,
    },
    /// A value is well formed but not usable.
    #[error("invalid script {origin}: {at}: {message}")]
    Invalid {
        /// Where the script came from.
        origin: String,
        /// Which part of the script, for example `on[2].do[0]`.
        at: String,
        /// What is wrong.
        message: String,
    },
}

/// Which built-in behaviour the agent starts from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Personality {
    /// Standard ACP v1.
    #[default]
    Standard,
    /// A stand-in for `kiro-cli acp`.
    Kiro,
    /// A headless agent as the intercom server spawns it, speaking the intercom stream dialect.
    Intercom,
}

impl Personality {
    /// The name used on the command line and in scripts.
    pub fn name(self) -> &'static str {
        match self {
            Personality::Standard => "standard",
            Personality::Kiro => "kiro",
            Personality::Intercom => "intercom",
        }
    }

    /// Parses a personality name.
    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "standard" | "acp" => Some(Personality::Standard),
            "kiro" => Some(Personality::Kiro),
            "intercom" => Some(Personality::Intercom),
            _ => None,
        }
    }
}

/// How the built-in prompt handler answers a prompt no rule matched.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PromptMode {
    /// Streams the prompt text back as one `agent_message_chunk` and ends the turn.
    #[default]
    Echo,
    /// Reads the prompt as a command of the official test agent's vocabulary.
    Commands,
    /// Ends the turn without any update.
    Silent,
}

/// How the agent numbers its own requests to the client.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum IdStyle {
    /// Integers counting from 0.
    Number,
    /// UUID v4 strings.
    Uuid,
    /// Strings `s2c-N` counting from 0.
    String,
}

/// Which handshake the intercom personality expects.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Handshake {
    /// The stream dialect as specified: no handshake, prompts arrive as `prompt/send`.
    #[default]
    Stream,
    /// Later intercom builds: JSON-RPC `initialize`, `initialized`, `session/new`,
    /// `session/prompt`, with the bespoke methods alongside.
    Jsonrpc,
}

/// What the intercom personality does on `session/interrupt`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum InterruptAction {
    /// Sends a last `status/update` and exits with code 0.
    #[default]
    Exit,
    /// Records it and carries on.
    Ignore,
}

/// `[agent]`: identity, capabilities and ids.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentSpec {
    /// `agentInfo.name`.
    pub name: Option<String>,
    /// `agentInfo.title`.
    pub title: Option<String>,
    /// `agentInfo.version`.
    pub version: Option<String>,
    /// The protocol version to answer with; by default the client's if it is 1, else 1.
    pub protocol_version: Option<u16>,
    /// `agentCapabilities`, replacing the personality's.
    pub capabilities: Option<Value>,
    /// `authMethods`, replacing the personality's.
    pub auth_methods: Option<Value>,
    /// Whether session methods fail with -32000 until `authenticate` succeeded.
    pub auth_required: Option<bool>,
    /// Members merged into every `initialize` result.
    pub initialize_result: Option<Value>,
    /// Members merged into every `session/new` result.
    pub session_result: Option<Value>,
    /// Session ids: `uuid`, or a prefix followed by a counter from 1 (default `sess-`).
    pub session_ids: Option<String>,
    /// How the agent numbers its own requests.
    pub request_ids: Option<IdStyle>,
    /// Whether `session/new` returns the legacy `models` and `session/set_model` is accepted.
    pub legacy_models: Option<bool>,
    /// The longest input line accepted, in bytes.
    pub max_line_bytes: Option<usize>,
}

/// `[prompt]`: the built-in prompt handler.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PromptSpec {
    /// How a prompt no rule matched is answered.
    pub mode: Option<PromptMode>,
    /// The stop reason of a turn that was not cancelled (default `end_turn`).
    pub stop_reason: Option<String>,
}

/// `[faults]`: faults applied to the built-in behaviour and to every written line.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct FaultSpec {
    /// Keep running after stdin closes.
    pub ignore_eof: Option<bool>,
    /// Treat `session/cancel` and `$/cancel_request` as if they never arrived.
    pub ignore_cancel: Option<bool>,
    /// Send an `agent_message_chunk` for the new session before the `session/new` result.
    pub update_before_session_result: Option<bool>,
    /// Send an `agent_message_chunk` after each prompt result.
    pub updates_after_prompt_result: Option<bool>,
    /// Write every response twice.
    pub duplicate_responses: Option<bool>,
    /// Write every line in this many fragments, flushing between them.
    pub fragment_lines: Option<u32>,
    /// Pause between fragments.
    pub fragment_delay_ms: Option<u64>,
    /// Pause before every written line.
    pub delay_ms: Option<u64>,
    /// Methods the agent never answers.
    pub hang_on: Option<Vec<String>>,
    /// Exit with `exit_code` when this method arrives.
    pub exit_on: Option<String>,
    /// The exit code for `exit_on` (default 1).
    pub exit_code: Option<i32>,
    /// Bytes written to stderr at start.
    pub startup_stderr_bytes: Option<u64>,
}

/// `[kiro]`: the kiro personality.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KiroSpec {
    /// The agent name when `--agent` is not given.
    pub agent: Option<String>,
    /// The model when `--model` is not given.
    pub model: Option<String>,
    /// Quirks to switch on.
    pub quirks: Option<Vec<Quirk>>,
    /// Whether `_kiro.dev/metadata` is sent per turn (default true).
    pub metadata: Option<bool>,
    /// Whether turn start and end are sent as `session_info_update` with `_meta.kiro`
    /// (default true).
    pub turn_markers: Option<bool>,
    /// Whether sessions are kept under `$HOME/.kiro/sessions/cli/` with lock files
    /// (default false).
    pub sessions_on_disk: Option<bool>,
    /// When `session/load` replays history: `"before"` the result (default) or `"after"` it.
    pub replay: Option<ReplayTiming>,
    /// Whether `--agent NAME` must exist as `.kiro/agents/NAME.json` in the working directory
    /// or under `$HOME` (default false).
    pub require_agent: Option<bool>,
    /// A `turn` answer is streamed in `agent_message_chunk`s of at most this many characters
    /// (default 0: one chunk).
    pub chunk_chars: Option<usize>,
}

/// When `session/load` replays a session's history.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ReplayTiming {
    /// The updates come before the result.
    #[default]
    Before,
    /// The updates come after the result.
    After,
}

/// `[intercom]`: the intercom personality.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IntercomSpec {
    /// The handshake the server uses.
    pub handshake: Option<Handshake>,
    /// A `status/update` message sent at start (default `ready` for the stream handshake).
    pub greeting: Option<String>,
    /// The period of `heartbeat` messages; 0 sends none.
    pub heartbeat_ms: Option<u64>,
    /// What `session/interrupt` does.
    pub on_interrupt: Option<InterruptAction>,
}

/// A script file as written.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScriptSpec {
    /// A short name shown in the transcript and the state report.
    pub name: Option<String>,
    /// What the script is for.
    pub description: Option<String>,
    /// The personality, unless the command line names one.
    pub personality: Option<Personality>,
    /// Quirk profiles to switch on ([`super::profile`]).
    pub profiles: Option<Vec<String>>,
    /// `[agent]`.
    #[serde(default)]
    pub agent: AgentSpec,
    /// `[prompt]`.
    #[serde(default)]
    pub prompt: PromptSpec,
    /// `[faults]`.
    #[serde(default)]
    pub faults: FaultSpec,
    /// `[kiro]`.
    #[serde(default)]
    pub kiro: KiroSpec,
    /// `[intercom]`.
    #[serde(default)]
    pub intercom: IntercomSpec,
    /// `[[on]]`: the rules.
    #[serde(default)]
    pub on: Vec<RuleSpec>,
    /// `[recording]`: a recording's provenance and replay settings.
    #[serde(default)]
    pub recording: Option<RecordingSpec>,
    /// `[[exchange]]`: a recording's exchanges, replayed in place of the built-in behaviour.
    #[serde(default)]
    pub exchange: Vec<ExchangeSpec>,
}

/// A loaded and checked script.
#[derive(Debug, Clone, Default)]
pub struct Script {
    /// Where it came from: a path, `builtin:NAME`, or empty for no script.
    pub origin: String,
    /// The tables as written.
    pub spec: ScriptSpec,
    /// The checked rules, in file order.
    pub rules: Vec<Rule>,
    /// The recording it replays, if it is one.
    pub recording: Option<Arc<Recording>>,
}

impl Script {
    /// An empty script: only the built-in behaviour.
    pub fn empty() -> Self {
        Self::default()
    }

    /// Whether a rule has a `wait_for` step, which searches the messages that arrived.
    pub fn waits_for_messages(&self) -> bool {
        self.rules.iter().any(|rule| {
            rule.steps
                .iter()
                .any(|step| matches!(step.action, step::Action::WaitFor { .. }))
        })
    }

    /// Loads a script from a path, or a ready script by name (`echo`, `testy`, `faults`, `kiro`,
    /// `intercom`, `intercom-jsonrpc`) when `name_or_path` is one of those names and no file of
    /// that name exists.
    pub fn load(name_or_path: &str) -> Result<Self, ScriptError> {
        let path = Path::new(name_or_path);
        if !path.exists()
            && let Some((name, text)) = BUILTIN_SCRIPTS.iter().find(|(n, _)| *n == name_or_path)
        {
            return Self::parse(text, &format!("builtin:{name}"));
        }
        let text = std::fs::read_to_string(path).map_err(|source| ScriptError::Read {
            path: path.to_owned(),
            source,
        })?;
        Self::parse(&text, name_or_path)
    }

    /// Parses and checks script text; `origin` names it in errors.
    pub fn parse(text: &str, origin: &str) -> Result<Self, ScriptError> {
        let spec: ScriptSpec = toml::from_str(text).map_err(|e| ScriptError::Parse {
            origin: origin.to_owned(),
            message: ski::exit::parse_error_line(e.message(), e.span(), text),
        })?;
        Self::from_spec(spec, origin)
    }

    /// Checks a script given as a value (for example from JSON).
    pub fn from_spec(spec: ScriptSpec, origin: &str) -> Result<Self, ScriptError> {
        let invalid = |at: String, message: String| ScriptError::Invalid {
            origin: origin.to_owned(),
            at,
            message,
        };
        for (key, value) in [
            ("agent.capabilities", &spec.agent.capabilities),
            ("agent.initialize_result", &spec.agent.initialize_result),
            ("agent.session_result", &spec.agent.session_result),
        ] {
            if let Some(value) = value
                && !value.is_object()
            {
                return Err(invalid(key.to_owned(), "must be a table".to_owned()));
            }
        }
        if let Some(value) = &spec.agent.auth_methods
            && !value.is_array()
        {
            return Err(invalid(
                "agent.auth_methods".to_owned(),
                "must be an array".to_owned(),
            ));
        }
        if let Some(reason) = &spec.prompt.stop_reason {
            template::check_str(reason).map_err(|m| invalid("prompt.stop_reason".to_owned(), m))?;
        }
        for (index, name) in spec.profiles.iter().flatten().enumerate() {
            if super::profile::find(name).is_none() {
                return Err(invalid(
                    format!("profiles[{index}]"),
                    format!(
                        "unknown profile {name:?}; known: {}",
                        super::profile::names()
                    ),
                ));
            }
        }
        let mut rules = Vec::with_capacity(spec.on.len());
        for (index, rule) in spec.on.iter().enumerate() {
            let at = format!("on[{index}]");
            rules.push(Rule::from_spec(rule, &at).map_err(|(at, message)| invalid(at, message))?);
        }
        let recording = if spec.recording.is_some() || !spec.exchange.is_empty() {
            let provenance = spec.recording.clone().unwrap_or_default();
            Some(Arc::new(
                Recording::from_spec(&provenance, &spec.exchange)
                    .map_err(|(at, message)| invalid(at, message))?,
            ))
        } else {
            None
        };
        Ok(Self {
            origin: origin.to_owned(),
            spec,
            rules,
            recording,
        })
    }

    /// The names of the ready scripts.
    pub fn builtin_names() -> impl Iterator<Item = &'static str> {
        BUILTIN_SCRIPTS.iter().map(|(name, _)| *name)
    }
}
