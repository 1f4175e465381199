//! Authentication: advertised auth methods, `authenticate`, `logout` and the unstable
//! `auth/status` request and `auth/status_update` notification.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::meta::{Empty, Extra, string_enum, tagged_union};

tagged_union! {
    /// An authentication method the agent offers, discriminated by `type`; no `type` means
    /// `agent`.
    pub enum AuthMethod: "type", untagged = Agent {
        /// The agent authenticates when the client calls `authenticate`.
        Agent(AuthMethodAgent) = "agent",
        /// The client re-runs the agent in a terminal; `authenticate` must not be called.
        Terminal(AuthMethodTerminal) = "terminal",
    }
}

impl AuthMethod {
    /// The method id, for a known type.
    pub fn id(&self) -> Option<&str> {
        match self {
            AuthMethod::Agent(method) => Some(&method.id),
            AuthMethod::Terminal(method) => Some(&method.id),
            AuthMethod::Unknown(value) => value.get("id").and_then(|id| id.as_str()),
        }
    }
}

/// An auth method handled by the agent through `authenticate`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AuthMethodAgent {
    /// The method id passed to `authenticate`.
    pub id: String,
    /// A display name.
    pub name: String,
    /// What it does.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// `_meta`, an explicit `type: "agent"`, and unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// An auth method run by relaunching the agent in an interactive terminal.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AuthMethodTerminal {
    /// The method id.
    pub id: String,
    /// A display name.
    pub name: String,
    /// What it does.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Arguments for the relaunched agent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub args: Option<Vec<String>>,
    /// Environment for the relaunched agent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub env: Option<BTreeMap<String, String>>,
    /// `_meta` and unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// Params of `authenticate`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AuthenticateRequest {
    /// One of the advertised agent-type method ids.
    pub method_id: String,
    /// `_meta` and unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// Result of `authenticate`.
pub type AuthenticateResponse = Empty;

/// Params of `logout`.
pub type LogoutRequest = Empty;

/// Result of `logout`.
pub type LogoutResponse = Empty;

/// Params of the unstable `auth/status`.
pub type AuthStatusRequest = Empty;

/// Result of the unstable `auth/status`, and params of `auth/status_update`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AuthStatus {
    /// The authentication state.
    pub state: AuthState,
    /// The signed-in accounts.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub accounts: Option<Vec<AuthAccount>>,
    /// `_meta` and unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

string_enum! {
    /// Authentication state (open: other strings are allowed).
    pub enum AuthState {
        /// Signed in.
        Authenticated = "authenticated",
        /// Not signed in.
        Unauthenticated = "unauthenticated",
        /// No sign-in needed.
        NotRequired = "not_required",
        /// Not known.
        UnknownState = "unknown",
    }
}

/// A signed-in account.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AuthAccount {
    /// A display label.
    pub label: String,
    /// Whether it is the account in use.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub active: Option<bool>,
    /// The person's name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The e-mail address.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub email: Option<String>,
    /// The organisation.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub organization: Option<String>,
    /// `_meta` and unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}
