//! Inbound params as the read loop holds them: parsed into a `Value`, or kept as the text they
//! arrived as when the peer has a handler that reads text ([`super::TextRequestHandler`]).
//!
//! A peer without such a handler decodes every message's params into a `Value` as before. A peer
//! with one keeps every message's params as text and parses a `Value` only for a handler that
//! takes one, so the requests that decode their params into their own types (an ACP agent's
//! `session/prompt`) build no `Value` tree on the way.

use serde_json::Value;
use serde_json::value::RawValue;

/// The params of one inbound request or notification.
#[derive(Debug)]
pub(crate) enum Params {
    /// Parsed into a value.
    Value(Value),
    /// The text they arrived as.
    Text(Box<RawValue>),
}

impl Params {
    /// The params as a `Value`. Text captured by the decoder is valid JSON within the `Value`
    /// parser's nesting limit (the decoder refuses deeper params), so this fails only if that
    /// guarantee is broken.
    pub(crate) fn into_value(self) -> Result<Value, serde_json::Error> {
        match self {
            Params::Value(value) => Ok(value),
            Params::Text(text) => serde_json::from_str(text.get()),
        }
    }

    /// The params as text (a `Value` is written out; only a peer that reads text holds text).
    pub(crate) fn into_text(self) -> Result<Box<RawValue>, serde_json::Error> {
        match self {
            Params::Value(value) => serde_json::value::to_raw_value(&value),
            Params::Text(text) => Ok(text),
        }
    }
}
