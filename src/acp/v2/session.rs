//! Session methods in ACP v2: `session/new` and `session/resume` answered with config options
//! (no modes), config options keyed by `configId`, the prompt acknowledgement, and the new
//! `tool_call/cancel`, `terminal/cancel` and `auth/login`/`auth/logout` params.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::acp::config::{ConfigValue, SessionConfigOption as V1ConfigOption};
use crate::acp::mcp::McpServer;
use crate::acp::meta::Extra;
use crate::acp::session_update::AvailableCommand;

/// Params of `session/new` (v2): `mcpServers` may be left out.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NewSessionRequest {
    /// Absolute working directory.
    pub cwd: String,
    /// More absolute directories the session may use.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub additional_directories: Vec<String>,
    /// MCP servers to connect to.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mcp_servers: Vec<McpServer>,
    /// `_meta` and unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// Result of `session/new` (v2).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NewSessionResponse {
    /// The new session.
    pub session_id: String,
    /// The session's settings.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub config_options: Vec<SessionConfigOption>,
    /// The commands the agent offers.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub available_commands: Vec<AvailableCommand>,
    /// `_meta` and unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// Params of `session/resume` (v2).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResumeSessionRequest {
    /// The session to resume.
    pub session_id: String,
    /// Absolute working directory.
    pub cwd: String,
    /// More absolute directories the session may use.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub additional_directories: Vec<String>,
    /// MCP servers to connect to.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mcp_servers: Vec<McpServer>,
    /// `_meta`, `replayFrom` and unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// Result of `session/resume` (v2).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResumeSessionResponse {
    /// The session's settings.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub config_options: Vec<SessionConfigOption>,
    /// The commands the agent offers.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub available_commands: Vec<AvailableCommand>,
    /// `_meta` and unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// A config option (v2): v1's option with its `id` named `configId`; the rest of the object
/// (`name`, `type`, `currentValue`, `options`, `category`, ...) is v1's.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionConfigOption {
    /// The option id.
    pub config_id: String,
    /// The other fields, as v1 writes them.
    #[serde(flatten)]
    pub fields: Map<String, Value>,
}

impl SessionConfigOption {
    /// The v2 form of a v1 option; `None` for one without an id.
    pub fn from_v1(option: &V1ConfigOption) -> Option<Self> {
        let Ok(Value::Object(mut fields)) = serde_json::to_value(option) else {
            return None;
        };
        let Some(Value::String(config_id)) = fields.remove("id") else {
            return None;
        };
        Some(Self { config_id, fields })
    }

    /// The v2 forms of v1 options.
    pub fn all_from_v1(options: &[V1ConfigOption]) -> Vec<Self> {
        options.iter().filter_map(Self::from_v1).collect()
    }

    /// The `currentValue` field.
    pub fn current_value(&self) -> Option<&Value> {
        self.fields.get("currentValue")
    }
}

/// Params of `session/set_config_option` (v2): `type` is `id` for a select value, `boolean`
/// for a boolean.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SetSessionConfigOptionRequest {
    /// The session.
    pub session_id: String,
    /// The option to set.
    pub config_id: String,
    /// `id` or `boolean`.
    #[serde(rename = "type")]
    pub value_type: String,
    /// The new value.
    pub value: ConfigValue,
    /// `_meta` and unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

impl SetSessionConfigOptionRequest {
    /// Sets a select option to the value id `value`.
    pub fn id(
        session_id: impl Into<String>,
        config_id: impl Into<String>,
        value: impl Into<String>,
    ) -> Self {
        Self {
            session_id: session_id.into(),
            config_id: config_id.into(),
            value_type: "id".to_owned(),
            value: ConfigValue::Id(value.into()),
            extra: Extra::new(),
        }
    }

    /// Whether `type` fits `value` (`id` with a string, `boolean` with a boolean).
    pub fn type_fits_value(&self) -> bool {
        matches!(
            (self.value_type.as_str(), &self.value),
            ("id", ConfigValue::Id(_)) | ("boolean", ConfigValue::Boolean(_))
        )
    }
}

/// Result of `session/set_config_option` (v2).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SetSessionConfigOptionResponse {
    /// Every option after the change.
    pub config_options: Vec<SessionConfigOption>,
    /// `_meta` and unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// Result of `session/prompt` (v2): the prompt was accepted; the turn goes on and ends with an
/// idle `state_update`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PromptResponse {
    /// The id of the user message the prompt became (its `user_message` update carries it too).
    pub message_id: String,
    /// `_meta` and unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// Params of `tool_call/cancel`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CancelToolCallRequest {
    /// The session that owns the tool call.
    pub session_id: String,
    /// The tool call to cancel.
    pub tool_call_id: String,
    /// `_meta` and unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// Params of `terminal/cancel`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CancelTerminalRequest {
    /// The session that owns the terminal.
    pub session_id: String,
    /// The terminal to cancel.
    pub terminal_id: String,
    /// `_meta` and unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// Params of `auth/login`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LoginAuthRequest {
    /// One of the advertised `authMethods`' `methodId`.
    pub method_id: String,
    /// `_meta` and unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}
