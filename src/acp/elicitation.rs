//! Elicitation: the agent asks the user for structured input (`elicitation/create`, form or URL
//! mode) and reports a finished URL flow (`elicitation/complete`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Number, Value};

use super::meta::{Extra, present, tagged_union};
use crate::jsonrpc::RequestId;

tagged_union! {
    /// Params of `elicitation/create`, discriminated by `mode`. Scoped to a session (and maybe
    /// a tool call) or to a request.
    pub enum CreateElicitationRequest: "mode" {
        /// Ask for values that match a schema.
        Form(FormElicitation) = "form",
        /// Send the user to a URL.
        Url(UrlElicitation) = "url",
    }
}

/// What an elicitation is attached to: `sessionId` (+ `toolCallId`), or `requestId`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ElicitationScope {
    /// The session.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// The tool call within the session.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    /// The request it belongs to.
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub request_id: Option<RequestId>,
}

/// `mode: "form"`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FormElicitation {
    /// What to ask.
    pub message: String,
    /// The fields to fill in.
    pub requested_schema: ElicitationSchema,
    /// What it is attached to.
    #[serde(flatten)]
    pub scope: ElicitationScope,
    /// `_meta` and unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// `mode: "url"`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UrlElicitation {
    /// What to ask.
    pub message: String,
    /// Named again in `elicitation/complete`.
    pub elicitation_id: String,
    /// Where to send the user.
    pub url: String,
    /// What it is attached to.
    #[serde(flatten)]
    pub scope: ElicitationScope,
    /// `_meta` and unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// A flat object schema of the values a form asks for.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ElicitationSchema {
    /// Always `"object"` when present.
    #[serde(rename = "type", skip_serializing_if = "Option::is_none")]
    pub schema_type: Option<String>,
    /// A title for the form.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// A description of the form.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The fields, by name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub properties: Option<BTreeMap<String, PropertySchema>>,
    /// The names of required fields.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub required: Option<Vec<String>>,
    /// `_meta` and unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

tagged_union! {
    /// One form field, discriminated by `type`.
    pub enum PropertySchema: "type" {
        /// Text, maybe an enum.
        String(StringSchema) = "string",
        /// A floating point number.
        Number(NumberSchema) = "number",
        /// An integer.
        Integer(IntegerSchema) = "integer",
        /// A checkbox.
        Boolean(BooleanSchema) = "boolean",
        /// Several choices.
        Array(MultiSelectSchema) = "array",
    }
}

/// `type: "string"`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StringSchema {
    /// A label.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Help text.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Shortest length.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_length: Option<u32>,
    /// Longest length.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_length: Option<u32>,
    /// A regular expression.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pattern: Option<String>,
    /// `email`, `uri`, `date` or `date-time`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub format: Option<String>,
    /// The default value.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub default: Option<String>,
    /// The allowed values.
    #[serde(rename = "enum", skip_serializing_if = "Option::is_none")]
    pub enum_values: Option<Vec<String>>,
    /// The allowed values with labels.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub one_of: Option<Vec<EnumOption>>,
    /// `_meta` and unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// A labelled enum value.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EnumOption {
    /// The value.
    #[serde(rename = "const")]
    pub value: String,
    /// Its label.
    pub title: String,
    /// Help text.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// `_meta` and unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// `type: "number"`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NumberSchema {
    /// A label.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Help text.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Lowest value.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub minimum: Option<Number>,
    /// Highest value.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub maximum: Option<Number>,
    /// The default value.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub default: Option<Number>,
    /// `_meta` and unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// `type: "integer"`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct IntegerSchema {
    /// A label.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Help text.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Lowest value.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub minimum: Option<i64>,
    /// Highest value.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub maximum: Option<i64>,
    /// The default value.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub default: Option<i64>,
    /// `_meta` and unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// `type: "boolean"`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BooleanSchema {
    /// A label.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Help text.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The default value.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub default: Option<bool>,
    /// `_meta` and unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// `type: "array"`: choose several values.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MultiSelectSchema {
    /// A label.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Help text.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Fewest choices.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_items: Option<u64>,
    /// Most choices.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_items: Option<u64>,
    /// The values to choose from: `{type: "string", enum}` or `{anyOf: [EnumOption]}`.
    pub items: Value,
    /// The values chosen by default.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub default: Option<Vec<String>>,
    /// `_meta` and unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

tagged_union! {
    /// Result of `elicitation/create`, discriminated by `action`.
    pub enum CreateElicitationResponse: "action" {
        /// The user submitted.
        Accept(ElicitationAccept) = "accept",
        /// The user said no.
        Decline(ElicitationClosed) = "decline",
        /// The user dismissed it.
        Cancel(ElicitationClosed) = "cancel",
    }
}

/// `action: "accept"`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ElicitationAccept {
    /// The submitted values, by field name (form mode).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub content: Option<Map<String, Value>>,
    /// `_meta` and unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// `action: "decline"` or `"cancel"`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ElicitationClosed {
    /// `_meta` and unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// Params of `elicitation/complete` (agent to client notification).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CompleteElicitationNotification {
    /// The URL elicitation that finished.
    pub elicitation_id: String,
    /// `_meta` and unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}
