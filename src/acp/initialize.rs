//! `initialize`: protocol version negotiation, implementation info and the capabilities of
//! both sides. Omitted or `null` capabilities mean "not supported"; booleans default to false.

use serde::{Deserialize, Serialize};

use super::auth::AuthMethod;
use super::meta::Extra;

/// The only stable ACP protocol version.
pub const PROTOCOL_VERSION: u16 = 1;

/// Params of `initialize`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InitializeRequest {
    /// The latest protocol version the client supports.
    pub protocol_version: u16,
    /// What the client can do.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_capabilities: Option<ClientCapabilities>,
    /// Who the client is.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_info: Option<Implementation>,
    /// `_meta` and unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// Result of `initialize`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InitializeResponse {
    /// The version both sides will speak.
    pub protocol_version: u16,
    /// What the agent can do.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent_capabilities: Option<AgentCapabilities>,
    /// How the client can authenticate.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub auth_methods: Option<Vec<AuthMethod>>,
    /// Who the agent is.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent_info: Option<Implementation>,
    /// `_meta` and unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// Name and version of a client or agent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Implementation {
    /// A programmatic name.
    pub name: String,
    /// A display name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// The version.
    pub version: String,
    /// `_meta` and unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

impl Implementation {
    /// `name` at `version`.
    pub fn new(name: impl Into<String>, version: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            title: None,
            version: version.into(),
            extra: Extra::new(),
        }
    }
}

/// A capability that is advertised by its presence: `{}` (plus optional `_meta`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Capability {
    /// `_meta` and unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// What the client can do.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClientCapabilities {
    /// File system methods the agent may call.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fs: Option<FileSystemCapabilities>,
    /// Whether the agent may call `terminal/*`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub terminal: Option<bool>,
    /// Session features the client understands.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session: Option<ClientSessionCapabilities>,
    /// Authentication features the client supports.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub auth: Option<ClientAuthCapabilities>,
    /// Elicitation modes the client supports.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub elicitation: Option<ElicitationCapabilities>,
    /// Unstable: the client shows subagents.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subagents: Option<Capability>,
    /// Unstable: the client understands plan operations.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub plan: Option<Capability>,
    /// `_meta` and unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

impl ClientCapabilities {
    /// Whether `fs/read_text_file` is allowed.
    pub fn can_read_text_file(&self) -> bool {
        self.fs
            .as_ref()
            .and_then(|fs| fs.read_text_file)
            .unwrap_or(false)
    }

    /// Whether `fs/write_text_file` is allowed.
    pub fn can_write_text_file(&self) -> bool {
        self.fs
            .as_ref()
            .and_then(|fs| fs.write_text_file)
            .unwrap_or(false)
    }

    /// Whether `terminal/*` is allowed.
    pub fn has_terminal(&self) -> bool {
        self.terminal.unwrap_or(false)
    }

    /// Whether the client presents `notice` updates (`session.notices`).
    pub fn shows_notices(&self) -> bool {
        self.session.as_ref().is_some_and(|s| s.notices.is_some())
    }

    /// Whether the client takes compaction updates (`session.compaction`).
    pub fn shows_compaction(&self) -> bool {
        self.session
            .as_ref()
            .is_some_and(|s| s.compaction.is_some())
    }
}

/// File system capabilities of the client.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FileSystemCapabilities {
    /// `fs/read_text_file` is supported.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub read_text_file: Option<bool>,
    /// `fs/write_text_file` is supported.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub write_text_file: Option<bool>,
    /// `_meta` and unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// Session features the client understands.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClientSessionCapabilities {
    /// Config option features.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub config_options: Option<ConfigOptionsCapabilities>,
    /// The client shows compaction updates.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub compaction: Option<Capability>,
    /// The client shows notices.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub notices: Option<Capability>,
    /// `_meta` and unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// Config option features the client understands.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConfigOptionsCapabilities {
    /// Boolean options are shown.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub boolean: Option<Capability>,
    /// `_meta` and unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// Authentication features of the client.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClientAuthCapabilities {
    /// The client can run terminal auth methods.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub terminal: Option<bool>,
    /// `_meta` and unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// Elicitation modes the client supports.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ElicitationCapabilities {
    /// Form mode.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub form: Option<Capability>,
    /// URL mode.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<Capability>,
    /// `_meta` and unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// What the agent can do.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentCapabilities {
    /// `session/load` is supported.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub load_session: Option<bool>,
    /// Content the agent accepts in prompts.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prompt_capabilities: Option<PromptCapabilities>,
    /// MCP transports the agent can connect to.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mcp_capabilities: Option<McpCapabilities>,
    /// Optional session methods.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session_capabilities: Option<SessionCapabilities>,
    /// Optional authentication methods.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub auth: Option<AgentAuthCapabilities>,
    /// ski legacy spelling of `auth` (`authCapabilities.logout`), read and written as such.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub auth_capabilities: Option<AgentAuthCapabilities>,
    /// Unstable: `providers/*` is supported.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub providers: Option<Capability>,
    /// `_meta` and unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

impl AgentCapabilities {
    /// Whether `session/load` is supported.
    pub fn can_load_session(&self) -> bool {
        self.load_session.unwrap_or(false)
    }

    /// Whether `logout` is supported, under `auth` or the ski legacy `authCapabilities`.
    pub fn can_logout(&self) -> bool {
        [&self.auth, &self.auth_capabilities]
            .into_iter()
            .any(|auth| auth.as_ref().is_some_and(|auth| auth.logout.is_some()))
    }
}

/// Content the agent accepts in prompts beyond text and resource links.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PromptCapabilities {
    /// `image` blocks.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub image: Option<bool>,
    /// `audio` blocks.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub audio: Option<bool>,
    /// `resource` blocks.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub embedded_context: Option<bool>,
    /// `_meta` and unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// MCP transports the agent can connect to (stdio is always supported).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct McpCapabilities {
    /// HTTP servers.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub http: Option<bool>,
    /// SSE servers.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sse: Option<bool>,
    /// Unstable: MCP over ACP.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub acp: Option<bool>,
    /// `_meta` and unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// Optional session methods the agent supports; each is advertised by an object.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionCapabilities {
    /// `session/list`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub list: Option<Capability>,
    /// `session/delete`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub delete: Option<Capability>,
    /// `additionalDirectories` in session setup.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub additional_directories: Option<Capability>,
    /// `session/resume`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resume: Option<Capability>,
    /// `session/close`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub close: Option<Capability>,
    /// Unstable: `session/fork`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fork: Option<Capability>,
    /// Unstable: `session/archive` and `session/unarchive`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub archive: Option<Capability>,
    /// Unstable: `session/status`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<Capability>,
    /// Unstable: `session/set_title`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<Capability>,
    /// Unstable: `systemPrompt` in session setup.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub system_prompt: Option<SystemPromptCapabilities>,
    /// ski extension: `session/export`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub export: Option<Capability>,
    /// `_meta` and unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// Unstable: how the agent takes a system prompt.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SystemPromptCapabilities {
    /// Modes beyond `append`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mode: Option<SystemPromptModeCapabilities>,
    /// `_meta` and unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// Unstable: system prompt modes beyond `append`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SystemPromptModeCapabilities {
    /// `override` replaces the agent's own system prompt.
    #[serde(rename = "override", skip_serializing_if = "Option::is_none")]
    pub override_: Option<Capability>,
    /// `_meta` and unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// Optional authentication methods of the agent.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentAuthCapabilities {
    /// `logout`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub logout: Option<Capability>,
    /// Unstable: `auth/status`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<Capability>,
    /// `_meta` and unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}
