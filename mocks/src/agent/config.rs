//! The resolved configuration: a script's tables, with the command line's choices on top and
//! the personality's defaults underneath.

use std::time::Duration;

use serde_json::{Value, json};
use ski::jsonrpc::DEFAULT_MAX_LINE_BYTES;

use super::script::{
    FaultSpec, Handshake, IdStyle, InterruptAction, Personality, PromptMode, Quirk, Script,
};

/// The agent's version, as `agentInfo.version` reports it by default.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// What the command line (or a test) sets on top of a script.
#[derive(Debug, Clone, Default)]
pub struct Overrides {
    /// The personality.
    pub personality: Option<Personality>,
    /// The prompt mode (`--commands` sets `commands`).
    pub prompt_mode: Option<PromptMode>,
    /// Faults; a field set here wins over the script's.
    pub faults: FaultSpec,
    /// Kiro quirks, added to the script's.
    pub quirks: Vec<Quirk>,
    /// Quirk profiles, added to the script's (names checked by the caller).
    pub profiles: Vec<String>,
    /// Kiro `--agent`.
    pub kiro_agent: Option<String>,
    /// Kiro `--model`.
    pub kiro_model: Option<String>,
    /// Kiro `--trust-all-tools`.
    pub kiro_trust_all_tools: bool,
    /// Kiro `--trust-tools`.
    pub kiro_trust_tools: Option<String>,
    /// Kiro `--agent-engine`.
    pub kiro_engine: Option<String>,
    /// The intercom handshake.
    pub handshake: Option<Handshake>,
    /// The newest ACP protocol version to speak (`--protocol`): 2 offers ACP v2 (draft) and
    /// v1, 1 pins v1.
    pub protocol: Option<u16>,
}

/// How session ids are made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SessionIds {
    /// UUID v4.
    Uuid,
    /// A prefix and a counter from 1.
    Prefix(String),
}

/// `[agent]`, resolved.
#[derive(Debug, Clone)]
pub struct AgentConfig {
    /// `agentInfo`.
    pub info: Value,
    /// A forced protocol version.
    pub protocol_version: Option<u16>,
    /// The newest ACP protocol version negotiated: 2 (the standard personality's default) or
    /// 1 (kiro, intercom, a forced `protocol_version`, `--protocol 1`).
    pub max_protocol: u16,
    /// `agentCapabilities`.
    pub capabilities: Value,
    /// `authMethods`.
    pub auth_methods: Value,
    /// Session methods need `authenticate` first.
    pub auth_required: bool,
    /// Merged into the `initialize` result.
    pub initialize_extra: Option<Value>,
    /// Merged into the `session/new` result.
    pub session_extra: Option<Value>,
    /// Session id style.
    pub session_ids: SessionIds,
    /// Request id style.
    pub request_ids: IdStyle,
    /// Legacy `models` and `session/set_model`.
    pub legacy_models: bool,
    /// Input line limit.
    pub max_line_bytes: usize,
}

/// `[faults]`, resolved.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Faults {
    /// Keep running after stdin closes.
    pub ignore_eof: bool,
    /// Ignore `session/cancel` and `$/cancel_request`.
    pub ignore_cancel: bool,
    /// An update before the `session/new` result.
    pub update_before_session_result: bool,
    /// An update after each prompt result.
    pub updates_after_prompt_result: bool,
    /// Every response twice.
    pub duplicate_responses: bool,
    /// Every line in this many fragments.
    pub fragment_lines: Option<u32>,
    /// Pause between fragments.
    pub fragment_delay: Option<Duration>,
    /// Pause before every line.
    pub delay: Option<Duration>,
    /// Methods never answered.
    pub hang_on: Vec<String>,
    /// Exit when this method arrives.
    pub exit_on: Option<String>,
    /// The code for `exit_on`.
    pub exit_code: i32,
    /// Bytes of stderr at start.
    pub startup_stderr_bytes: u64,
}

/// `[kiro]`, resolved.
#[derive(Debug, Clone)]
pub struct KiroConfig {
    /// The agent name (`--agent`).
    pub agent: String,
    /// The model (`--model`).
    pub model: String,
    /// Quirks switched on.
    pub quirks: Vec<Quirk>,
    /// `_kiro.dev/metadata` per turn.
    pub metadata: bool,
    /// Turn start and end markers.
    pub turn_markers: bool,
    /// Sessions kept on disk under `$HOME/.kiro/sessions/cli/`, with lock files.
    pub sessions_on_disk: bool,
    /// `session/load` replays its history after the result.
    pub replay_after_result: bool,
    /// `--agent NAME` is looked up at start; a missing agent ends the process.
    pub require_agent: bool,
    /// The longest chunk of a `turn` answer in characters; 0 sends one chunk.
    pub chunk_chars: usize,
    /// `--trust-all-tools` was given.
    pub trust_all_tools: bool,
    /// `--trust-tools` as given.
    pub trust_tools: Option<String>,
    /// `--agent-engine` as given.
    pub engine: Option<String>,
}

impl KiroConfig {
    /// Whether a quirk is on.
    pub fn has(&self, quirk: Quirk) -> bool {
        self.quirks.contains(&quirk)
    }
}

/// `[intercom]`, resolved.
#[derive(Debug, Clone)]
pub struct IntercomConfig {
    /// The handshake.
    pub handshake: Handshake,
    /// The greeting `status/update`, if any.
    pub greeting: Option<String>,
    /// The heartbeat period, if any.
    pub heartbeat: Option<Duration>,
    /// What `session/interrupt` does.
    pub on_interrupt: InterruptAction,
}

/// Everything the agent runs with.
#[derive(Debug, Clone)]
pub struct Config {
    /// The personality.
    pub personality: Personality,
    /// The script (rules and tables as written).
    pub script: Script,
    /// `[agent]`.
    pub agent: AgentConfig,
    /// How unmatched prompts are answered.
    pub prompt_mode: PromptMode,
    /// The stop reason of a normal turn.
    pub stop_reason: String,
    /// Faults.
    pub faults: Faults,
    /// Kiro settings.
    pub kiro: KiroConfig,
    /// Intercom settings.
    pub intercom: IntercomConfig,
}

impl Faults {
    /// No fault at all.
    pub fn none() -> Self {
        merge_faults(&FaultSpec::default(), &FaultSpec::default())
    }
}

fn merge_faults(cli: &FaultSpec, script: &FaultSpec) -> Faults {
    macro_rules! pick {
        ($field:ident) => {
            cli.$field.clone().or_else(|| script.$field.clone())
        };
    }
    Faults {
        ignore_eof: pick!(ignore_eof).unwrap_or(false),
        ignore_cancel: pick!(ignore_cancel).unwrap_or(false),
        update_before_session_result: pick!(update_before_session_result).unwrap_or(false),
        updates_after_prompt_result: pick!(updates_after_prompt_result).unwrap_or(false),
        duplicate_responses: pick!(duplicate_responses).unwrap_or(false),
        fragment_lines: pick!(fragment_lines).filter(|n| *n > 1),
        fragment_delay: pick!(fragment_delay_ms).map(Duration::from_millis),
        delay: pick!(delay_ms)
            .filter(|ms| *ms > 0)
            .map(Duration::from_millis),
        hang_on: pick!(hang_on).unwrap_or_default(),
        exit_on: pick!(exit_on),
        exit_code: pick!(exit_code).unwrap_or(1),
        startup_stderr_bytes: pick!(startup_stderr_bytes)
            .unwrap_or(0)
            .min(super::script::step::MAX_GENERATED_BYTES),
    }
}

fn standard_capabilities() -> Value {
    json!({
        "loadSession": true,
        "promptCapabilities": {"image": true, "audio": true, "embeddedContext": true},
        "mcpCapabilities": {"http": true, "sse": false},
        "sessionCapabilities": {"list": {}, "resume": {}, "close": {}, "delete": {}},
        "auth": {"logout": {}}
    })
}

impl Config {
    /// Resolves a script and overrides into a configuration.
    pub fn resolve(script: Script, overrides: &Overrides) -> Self {
        let spec = &script.spec;
        let personality = overrides
            .personality
            .or(spec.personality)
            .unwrap_or_default();
        let agent = &spec.agent;
        let (default_name, default_title, capabilities, session_ids, request_ids, legacy) =
            match personality {
                Personality::Standard => (
                    "ski-mock-agent",
                    "ski mock agent",
                    standard_capabilities(),
                    SessionIds::Prefix("sess-".to_owned()),
                    IdStyle::Number,
                    false,
                ),
                Personality::Kiro => (
                    "Kiro CLI Agent",
                    "Kiro CLI Agent (ski mock)",
                    json!({"loadSession": true, "promptCapabilities": {"image": true}}),
                    SessionIds::Uuid,
                    IdStyle::Uuid,
                    true,
                ),
                Personality::Intercom => (
                    "ski-mock-agent",
                    "ski mock agent (intercom)",
                    json!({}),
                    SessionIds::Prefix("sess-".to_owned()),
                    IdStyle::String,
                    false,
                ),
            };
        let mut info = json!({
            "name": agent.name.clone().unwrap_or_else(|| default_name.to_owned()),
            "title": agent.title.clone().unwrap_or_else(|| default_title.to_owned()),
            "version": agent.version.clone().unwrap_or_else(|| VERSION.to_owned()),
        });
        if personality == Personality::Kiro
            && agent.title.is_none()
            && let Some(map) = info.as_object_mut()
        {
            map.remove("title");
        }
        let session_ids = match agent.session_ids.as_deref() {
            Some("uuid") => SessionIds::Uuid,
            Some(prefix) => SessionIds::Prefix(prefix.to_owned()),
            None => session_ids,
        };
        let agent_config = AgentConfig {
            info,
            protocol_version: agent.protocol_version,
            max_protocol: if personality == Personality::Standard
                && agent.protocol_version.is_none()
            {
                overrides.protocol.unwrap_or(ski::acp::v2::PROTOCOL_VERSION)
            } else {
                1
            },
            capabilities: agent.capabilities.clone().unwrap_or(capabilities),
            auth_methods: agent.auth_methods.clone().unwrap_or_else(|| json!([])),
            auth_required: agent.auth_required.unwrap_or(false),
            initialize_extra: agent.initialize_result.clone(),
            session_extra: agent.session_result.clone(),
            session_ids,
            request_ids: agent.request_ids.unwrap_or(request_ids),
            legacy_models: agent.legacy_models.unwrap_or(legacy),
            max_line_bytes: agent.max_line_bytes.unwrap_or(DEFAULT_MAX_LINE_BYTES),
        };
        let mut quirks = spec.kiro.quirks.clone().unwrap_or_default();
        let mut profile_chunk_chars = None;
        let profiles = spec
            .profiles
            .iter()
            .flatten()
            .chain(&overrides.profiles)
            .filter_map(|name| super::profile::find(name));
        let profile_quirks: Vec<Quirk> = profiles
            .flat_map(|profile| {
                profile_chunk_chars = profile_chunk_chars.or(profile.chunk_chars);
                profile.quirks.iter().copied()
            })
            .collect();
        for quirk in overrides.quirks.iter().chain(&profile_quirks) {
            if !quirks.contains(quirk) {
                quirks.push(*quirk);
            }
        }
        let kiro = KiroConfig {
            agent: overrides
                .kiro_agent
                .clone()
                .or_else(|| spec.kiro.agent.clone())
                .unwrap_or_else(|| "kiro_default".to_owned()),
            model: overrides
                .kiro_model
                .clone()
                .or_else(|| spec.kiro.model.clone())
                .unwrap_or_else(|| "auto".to_owned()),
            quirks,
            metadata: spec.kiro.metadata.unwrap_or(true),
            turn_markers: spec.kiro.turn_markers.unwrap_or(true),
            sessions_on_disk: spec.kiro.sessions_on_disk.unwrap_or(false),
            require_agent: spec.kiro.require_agent.unwrap_or(false),
            chunk_chars: spec.kiro.chunk_chars.or(profile_chunk_chars).unwrap_or(0),
            replay_after_result: spec.kiro.replay
                == Some(crate::agent::script::ReplayTiming::After),
            trust_all_tools: overrides.kiro_trust_all_tools,
            trust_tools: overrides.kiro_trust_tools.clone(),
            engine: overrides.kiro_engine.clone(),
        };
        let handshake = overrides
            .handshake
            .or(spec.intercom.handshake)
            .unwrap_or_default();
        let greeting = match &spec.intercom.greeting {
            Some(text) if text.is_empty() => None,
            Some(text) => Some(text.clone()),
            None if handshake == Handshake::Stream => Some("ready".to_owned()),
            None => None,
        };
        let intercom = IntercomConfig {
            handshake,
            greeting,
            heartbeat: spec
                .intercom
                .heartbeat_ms
                .filter(|ms| *ms > 0)
                .map(Duration::from_millis),
            on_interrupt: spec.intercom.on_interrupt.unwrap_or_default(),
        };
        Self {
            personality,
            agent: agent_config,
            prompt_mode: overrides
                .prompt_mode
                .or(spec.prompt.mode)
                .unwrap_or_default(),
            stop_reason: spec
                .prompt
                .stop_reason
                .clone()
                .unwrap_or_else(|| "end_turn".to_owned()),
            faults: merge_faults(&overrides.faults, &spec.faults),
            kiro,
            intercom,
            script,
        }
    }
}
