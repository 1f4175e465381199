//! An inbound request or notification as the agent keeps it: what the record of seen messages,
//! a sequence's context and the template variables share.

use serde_json::Value;
use ski::jsonrpc::RequestId;

use super::params::Params;

/// An inbound request or notification. Shared (`Arc`) by the record of what was seen, the
/// context of the sequence it started, and its template variables.
#[derive(Debug)]
pub struct Inbound {
    /// The method.
    pub method: String,
    /// The id, for a request.
    pub id: Option<RequestId>,
    /// The params.
    pub params: Option<Params>,
    /// Whether the message carried `"jsonrpc"`.
    pub jsonrpc: bool,
}

impl Inbound {
    /// The params as a JSON value.
    pub fn params_value(&self) -> Option<&Value> {
        self.params.as_ref().map(Params::value)
    }

    /// A member of the params.
    pub fn param(&self, key: &str) -> Option<&Value> {
        self.params_value()?.get(key)
    }

    /// A string member of the params.
    pub fn param_str(&self, key: &str) -> Option<&str> {
        self.param(key)?.as_str()
    }
}
