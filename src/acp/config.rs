//! Session modes, config options and the legacy model selection, with the methods that set them:
//! `session/set_mode`, `session/set_config_option` and the legacy `session/set_model`.

use serde::{Deserialize, Serialize};

use super::meta::{Empty, Extra, string_enum, tagged_union};

/// The modes a session offers and the one in effect.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionModeState {
    /// The mode in effect.
    pub current_mode_id: String,
    /// Every mode the client may switch to.
    pub available_modes: Vec<SessionMode>,
    /// `_meta` and unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// One session mode.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionMode {
    /// The mode id.
    pub id: String,
    /// A display name.
    pub name: String,
    /// What the mode does.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// `_meta` and unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

tagged_union! {
    /// A session config option, discriminated by `type`. Clients ignore types they do not know;
    /// the array order is the display priority.
    pub enum SessionConfigOption: "type" {
        /// Pick one value from a list.
        Select(SelectConfigOption) = "select",
        /// On or off; only if the client advertised `session.configOptions.boolean`.
        Boolean(BooleanConfigOption) = "boolean",
    }
}

impl SessionConfigOption {
    /// The option id, for a known type.
    pub fn id(&self) -> Option<&str> {
        match self {
            SessionConfigOption::Select(option) => Some(&option.id),
            SessionConfigOption::Boolean(option) => Some(&option.id),
            SessionConfigOption::Unknown(value) => value.get("id").and_then(|id| id.as_str()),
        }
    }
}

/// `type: "select"`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SelectConfigOption {
    /// The option id.
    pub id: String,
    /// A display name.
    pub name: String,
    /// What it controls.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// What kind of setting it is.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub category: Option<ConfigOptionCategory>,
    /// The value in effect.
    pub current_value: String,
    /// The values to pick from, flat or grouped.
    pub options: SelectOptions,
    /// `_meta` and unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// `type: "boolean"`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BooleanConfigOption {
    /// The option id.
    pub id: String,
    /// A display name.
    pub name: String,
    /// What it controls.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// What kind of setting it is.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub category: Option<ConfigOptionCategory>,
    /// The value in effect.
    pub current_value: bool,
    /// `_meta` and unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

string_enum! {
    /// What kind of setting a config option is (open: other strings are allowed).
    pub enum ConfigOptionCategory {
        /// The session mode.
        Mode = "mode",
        /// The model.
        Model = "model",
        /// A model setting.
        ModelConfig = "model_config",
        /// How much the model thinks.
        ThoughtLevel = "thought_level",
    }
}

/// The values of a select option: a flat list, or groups of values.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum SelectOptions {
    /// `[{value, name, description?}]`.
    Flat(Vec<SelectOption>),
    /// `[{group, name, options}]`.
    Grouped(Vec<SelectGroup>),
}

/// One value of a select option.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SelectOption {
    /// The value id.
    pub value: String,
    /// A display name.
    pub name: String,
    /// What it means.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// `_meta` and unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// A named group of select values.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SelectGroup {
    /// The group id.
    pub group: String,
    /// A display name.
    pub name: String,
    /// The values in the group.
    pub options: Vec<SelectOption>,
    /// `_meta` and unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// Params of `session/set_mode`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SetSessionModeRequest {
    /// The session.
    pub session_id: String,
    /// The mode to switch to.
    pub mode_id: String,
    /// `_meta` and unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// Result of `session/set_mode`.
pub type SetSessionModeResponse = Empty;

/// Params of `session/set_config_option`. A boolean value also carries `type: "boolean"`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SetSessionConfigOptionRequest {
    /// The session.
    pub session_id: String,
    /// The option to set.
    pub config_id: String,
    /// `"boolean"` for boolean values; absent for select values.
    #[serde(rename = "type", skip_serializing_if = "Option::is_none")]
    pub value_type: Option<String>,
    /// The new value.
    pub value: ConfigValue,
    /// `_meta` and unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

impl SetSessionConfigOptionRequest {
    /// Sets a select option to the value id `value`.
    pub fn select(
        session_id: impl Into<String>,
        config_id: impl Into<String>,
        value: impl Into<String>,
    ) -> Self {
        Self {
            session_id: session_id.into(),
            config_id: config_id.into(),
            value_type: None,
            value: ConfigValue::Id(value.into()),
            extra: Extra::new(),
        }
    }

    /// Sets a boolean option.
    pub fn boolean(
        session_id: impl Into<String>,
        config_id: impl Into<String>,
        value: bool,
    ) -> Self {
        Self {
            session_id: session_id.into(),
            config_id: config_id.into(),
            value_type: Some("boolean".to_owned()),
            value: ConfigValue::Boolean(value),
            extra: Extra::new(),
        }
    }
}

/// A config option value: a select value id or a boolean.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ConfigValue {
    /// A boolean option value.
    Boolean(bool),
    /// A select option value id.
    Id(String),
}

/// Result of `session/set_config_option`: the complete list of options after the change.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SetSessionConfigOptionResponse {
    /// Every option, with current values.
    pub config_options: Vec<SessionConfigOption>,
    /// `_meta` and unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// Legacy model selection (`models` in session results), removed from the ACP schema but still
/// sent by real agents; model choice is now a config option with `category: "model"`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionModelState {
    /// The model in effect.
    pub current_model_id: String,
    /// Every model the client may pick.
    pub available_models: Vec<ModelInfo>,
    /// `_meta` and unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// One model in the legacy model selection.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ModelInfo {
    /// The model id.
    pub model_id: String,
    /// A display name.
    pub name: String,
    /// What it is.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// `_meta` and unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// Params of the legacy `session/set_model`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SetSessionModelRequest {
    /// The session.
    pub session_id: String,
    /// The model to use.
    pub model_id: String,
    /// `_meta` and unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// Result of the legacy `session/set_model`.
pub type SetSessionModelResponse = Empty;
