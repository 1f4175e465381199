//! `initialize` in ACP v2: `info` and `capabilities` on both sides, the `session` capability as
//! the session baseline, and v2's authentication methods.

use serde::{Deserialize, Serialize};

use crate::acp::initialize::{Capability, ElicitationCapabilities, Implementation};
use crate::acp::meta::Extra;

/// Params of `initialize` (v2).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InitializeRequest {
    /// The latest protocol version the client speaks.
    pub protocol_version: u16,
    /// The client's implementation.
    pub info: Implementation,
    /// What the client supports; absent is none.
    #[serde(default)]
    pub capabilities: ClientCapabilities,
    /// `_meta` and unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// Result of `initialize` (v2).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InitializeResponse {
    /// The version the agent chose.
    pub protocol_version: u16,
    /// The agent's implementation.
    pub info: Implementation,
    /// What the agent supports; absent is none.
    #[serde(default)]
    pub capabilities: AgentCapabilities,
    /// The authentication methods; any entry means `auth/login` and `auth/logout` are served.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub auth_methods: Vec<AuthMethod>,
    /// `_meta` and unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// What the client supports (v2): no file system or terminal surface any more.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClientCapabilities {
    /// Authentication extensions (`terminal`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub auth: Option<serde_json::Value>,
    /// Elicitation modes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub elicitation: Option<ElicitationCapabilities>,
    /// `_meta` and unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// What the agent supports (v2).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentCapabilities {
    /// The `session/*` surface; `{}` is the baseline, absent is none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session: Option<SessionCapabilities>,
    /// Authentication extensions.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub auth: Option<serde_json::Value>,
    /// `_meta` and unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// The agent's `session` capability: present means the baseline methods; the fields add to it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionCapabilities {
    /// Content beyond text and resource links that prompts may carry.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prompt: Option<PromptCapabilities>,
    /// MCP server transports sessions may be given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mcp: Option<McpCapabilities>,
    /// `session/delete` is served.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub delete: Option<Capability>,
    /// `additionalDirectories` is honoured.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub additional_directories: Option<Capability>,
    /// `_meta` and unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// Prompt content beyond the baseline (v2: each an object, not a boolean).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PromptCapabilities {
    /// Image blocks.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub image: Option<Capability>,
    /// Audio blocks.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub audio: Option<Capability>,
    /// Embedded resources.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub embedded_context: Option<Capability>,
    /// `_meta` and unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// MCP server transports (v2).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct McpCapabilities {
    /// stdio servers.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stdio: Option<Capability>,
    /// HTTP servers.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub http: Option<Capability>,
    /// `_meta` and unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// An authentication method (v2): `type` (`agent`, `terminal` or another), `methodId`, `name`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AuthMethod {
    /// `agent` (the agent logs in on `auth/login`) or `terminal`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The id passed to `auth/login`.
    pub method_id: String,
    /// A display name.
    pub name: String,
    /// What it does.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// `_meta` and unknown fields (`args` and `env` of a terminal method).
    #[serde(flatten)]
    pub extra: Extra,
}

impl AuthMethod {
    /// An `agent` method.
    pub fn agent(method_id: impl Into<String>, name: impl Into<String>) -> Self {
        Self {
            kind: "agent".to_owned(),
            method_id: method_id.into(),
            name: name.into(),
            description: None,
            extra: Extra::new(),
        }
    }
}
