//! Classifying an incoming JSON text as a request, notification or response, or as the error a
//! peer must answer.
//!
//! Decoding reads the top level of the text straight into its six JSON-RPC members instead of
//! building a generic map first, so parsing a message costs no more than parsing it into a
//! `serde_json::Value`; unknown members are still parsed (and so validated) and then dropped.

use std::fmt;
use std::marker::PhantomData;

use serde::Deserialize;
use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::Value;
use serde_json::value::RawValue;

use super::{DecodeError, JSONRPC_VERSION, Message, Notification, Request, Response, VersionField};
use crate::jsonrpc::error::RpcError;
use crate::jsonrpc::id::RequestId;

/// Decodes one JSON text (a line without its terminator, or a WebSocket text frame).
///
/// Invalid JSON, including invalid UTF-8, is [`DecodeError::Parse`]; valid JSON that is not a
/// message is [`DecodeError::InvalidRequest`] or [`DecodeError::InvalidResponse`].
pub fn decode(bytes: &[u8], version: VersionField) -> Result<Message, DecodeError> {
    decode_noting_version(bytes, version).map(|(message, _)| message)
}

/// As [`decode`], and whether the text carried the `jsonrpc` member: a peer of a dialect that
/// may leave it out (with [`VersionField::Optional`]) answers each message in kind.
pub fn decode_noting_version(
    bytes: &[u8],
    version: VersionField,
) -> Result<(Message, bool), DecodeError> {
    decode_with_params(bytes, version)
}

/// As [`decode_noting_version`], with the params held as `P`: `Box<RawValue>` keeps them as the
/// text they arrived as (one copy, no tree), for a peer that reads few of them or reads them
/// into its own types. The same texts decode, and fail, as with [`decode`].
pub fn decode_with_params<P: CallParams>(
    bytes: &[u8],
    version: VersionField,
) -> Result<(Message<P>, bool), DecodeError> {
    // Text that is UTF-8 throughout (nearly every message) is checked once here instead of
    // string by string; any other fails in the byte parser, with the message it always gave.
    let parsed = match std::str::from_utf8(bytes) {
        Ok(text) => serde_json::from_str(text),
        Err(_) => serde_json::from_slice(bytes),
    };
    let shape: Shape<P> = parsed.map_err(|e| DecodeError::Parse {
        reason: e.to_string(),
    })?;
    let carried = matches!(&shape, Shape::Object(members) if members.jsonrpc.is_some());
    shape
        .into_message(version)
        .map(|message| (message, carried))
}

/// What the params of a decoded request or notification can be held as.
pub trait CallParams: for<'de> Deserialize<'de> {
    /// Whether these params have a shape JSON-RPC allows: an object, an array, or `null`.
    fn has_params_shape(&self) -> bool;

    /// Why the same text would not have parsed into a `Value`, if it would not: params held in
    /// any form decode from exactly the texts [`decode`] accepts.
    fn refusal(&self) -> Option<&'static str> {
        None
    }
}

impl CallParams for Value {
    fn has_params_shape(&self) -> bool {
        matches!(self, Value::Object(_) | Value::Array(_) | Value::Null)
    }
}

impl CallParams for Box<RawValue> {
    fn has_params_shape(&self) -> bool {
        let text = self.get();
        text.starts_with(['{', '[']) || text == "null"
    }

    /// A raw value is captured without serde_json's recursion limit, which a `Value` parse of
    /// the message hits at 128 nested arrays and objects, the message's own object included.
    fn refusal(&self) -> Option<&'static str> {
        const LIMIT: usize = 126;
        let text = self.get().as_bytes();
        // Nesting deeper than the limit takes two bytes per level.
        if text.len() <= 2 * LIMIT || nesting_depth(text) <= LIMIT {
            return None;
        }
        Some("recursion limit exceeded")
    }
}

/// The deepest nesting of arrays and objects in a valid JSON text.
fn nesting_depth(text: &[u8]) -> usize {
    let (mut depth, mut deepest) = (0usize, 0usize);
    let (mut in_string, mut escaped) = (false, false);
    for &byte in text {
        if in_string {
            match byte {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match byte {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    deepest
}

/// Classifies an already parsed JSON value as a message. The value no longer holds the text of
/// a number id, so an id that is not an `i64` gets the text serde_json writes for its value
/// (`100.0` for `1e2`); [`decode`] keeps the text as it was written.
pub fn classify(value: Value, version: VersionField) -> Result<Message, DecodeError> {
    let shape = match value {
        Value::Object(mut map) => Shape::Object(Members {
            jsonrpc: map.remove("jsonrpc").map(|value| match value {
                Value::String(text) if text == JSONRPC_VERSION => Version::Supported,
                _ => Version::Other,
            }),
            // A `Value` always encodes; the id's original text is gone already, so a number that
            // is not an `i64` keeps the text serde_json writes for its value.
            id: map
                .remove("id")
                .and_then(|id| serde_json::value::to_raw_value(&id).ok()),
            method: map.remove("method"),
            params: map.remove("params"),
            result: map.remove("result"),
            error: map.remove("error"),
        }),
        Value::Array(_) => Shape::Array,
        _ => Shape::Scalar,
    };
    shape.into_message(version)
}

/// The top-level shape of a JSON text.
// `allow`, not `expect`: whether the lint fires depends on serde_json's `preserve_order`
// feature, which feature unification turns on in some builds of the workspace and not in others.
#[allow(
    clippy::large_enum_variant,
    reason = "a short-lived value on the decode path; boxing would add an allocation per message"
)]
pub(super) enum Shape<P = Value> {
    Object(Members<P>),
    Array,
    Scalar,
}

/// The JSON-RPC members of an object; `Some(Value::Null)` is a member present with `null`. The id
/// is held as the text it was written in, so a number id is answered byte for byte.
pub(super) struct Members<P = Value> {
    jsonrpc: Option<Version>,
    id: Option<Box<RawValue>>,
    method: Option<Value>,
    params: Option<P>,
    result: Option<Value>,
    error: Option<Value>,
}

impl<P> Members<P> {
    fn absent() -> Self {
        Self {
            jsonrpc: None,
            id: None,
            method: None,
            params: None,
            result: None,
            error: None,
        }
    }
}

impl<P: CallParams> Shape<P> {
    pub(super) fn into_message(self, version: VersionField) -> Result<Message<P>, DecodeError> {
        match self {
            Shape::Object(members) => members.into_message(version),
            Shape::Array => Err(invalid_request(
                RequestId::Null,
                "batch requests are not supported",
            )),
            Shape::Scalar => Err(invalid_request(
                RequestId::Null,
                "message is not a json object",
            )),
        }
    }
}

impl<P: CallParams> Members<P> {
    fn into_message(self, version: VersionField) -> Result<Message<P>, DecodeError> {
        let is_response = self.method.is_none() && (self.result.is_some() || self.error.is_some());
        self.check_version(version, is_response)?;
        if is_response {
            self.into_response()
        } else {
            self.into_call()
        }
    }

    fn check_version(&self, version: VersionField, is_response: bool) -> Result<(), DecodeError> {
        let reason = match &self.jsonrpc {
            Some(Version::Supported) => return Ok(()),
            None if version == VersionField::Optional => return Ok(()),
            None => "missing \"jsonrpc\":\"2.0\"",
            Some(_) => "\"jsonrpc\" must be \"2.0\"",
        };
        let id = self.id.as_deref().and_then(id_of);
        Err(if is_response {
            DecodeError::InvalidResponse {
                id,
                reason: reason.to_owned(),
            }
        } else {
            invalid_request(id.unwrap_or(RequestId::Null), reason)
        })
    }

    fn into_call(self) -> Result<Message<P>, DecodeError> {
        let id = match &self.id {
            None => None,
            Some(raw) => match id_of(raw) {
                Some(id) => Some(id),
                None => {
                    return Err(invalid_request(
                        RequestId::Null,
                        "\"id\" must be a number, a string or null",
                    ));
                }
            },
        };
        let answer_id = || id.clone().unwrap_or(RequestId::Null);
        let method = match self.method {
            Some(Value::String(method)) => method,
            Some(_) => return Err(invalid_request(answer_id(), "\"method\" must be a string")),
            None => return Err(invalid_request(answer_id(), "missing \"method\"")),
        };
        let params = match self.params {
            None => None,
            Some(p) if p.has_params_shape() => Some(p),
            Some(_) => {
                return Err(invalid_request(
                    answer_id(),
                    "\"params\" must be an object or an array",
                ));
            }
        };
        Ok(match id {
            Some(id) => Message::Request(Request { id, method, params }),
            None => Message::Notification(Notification { method, params }),
        })
    }

    fn into_response(self) -> Result<Message<P>, DecodeError> {
        let Some(id) = self.id.as_deref().and_then(id_of) else {
            return Err(DecodeError::InvalidResponse {
                id: None,
                reason: if self.id.is_some() {
                    "\"id\" must be a number, a string or null".to_owned()
                } else {
                    "missing \"id\"".to_owned()
                },
            });
        };
        let invalid = |id: RequestId, reason: String| DecodeError::InvalidResponse {
            id: Some(id),
            reason,
        };
        match (self.result, self.error) {
            (Some(_), Some(_)) => Err(invalid(
                id,
                "a response must not carry both \"result\" and \"error\"".to_owned(),
            )),
            (Some(result), None) => Ok(Message::Response(Response::success(id, result))),
            (None, Some(error)) => match serde_json::from_value::<RpcError>(error) {
                Ok(error) => Ok(Message::Response(Response::error(id, error))),
                Err(e) => Err(invalid(id, format!("malformed error object: {e}"))),
            },
            (None, None) => Err(invalid(id, "missing \"result\" or \"error\"".to_owned())),
        }
    }
}

/// The id a member's text stands for; `None` for an object, an array or a boolean.
fn id_of(raw: &RawValue) -> Option<RequestId> {
    RequestId::from_json_text(raw.get())
}

fn invalid_request(id: RequestId, reason: &str) -> DecodeError {
    DecodeError::InvalidRequest {
        id,
        reason: reason.to_owned(),
    }
}

/// The `jsonrpc` member: whether it says `"2.0"`. Read without building a value for it (a
/// string that is not kept); any other value is still parsed in full.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Version {
    Supported,
    Other,
}

impl<'de> Deserialize<'de> for Version {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct VersionVisitor;

        impl<'de> Visitor<'de> for VersionVisitor {
            type Value = Version;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a json value")
            }

            fn visit_str<E: de::Error>(self, text: &str) -> Result<Version, E> {
                Ok(if text == JSONRPC_VERSION {
                    Version::Supported
                } else {
                    Version::Other
                })
            }

            fn visit_bool<E: de::Error>(self, _: bool) -> Result<Version, E> {
                Ok(Version::Other)
            }

            fn visit_i64<E: de::Error>(self, _: i64) -> Result<Version, E> {
                Ok(Version::Other)
            }

            fn visit_u64<E: de::Error>(self, _: u64) -> Result<Version, E> {
                Ok(Version::Other)
            }

            fn visit_f64<E: de::Error>(self, _: f64) -> Result<Version, E> {
                Ok(Version::Other)
            }

            fn visit_unit<E: de::Error>(self) -> Result<Version, E> {
                Ok(Version::Other)
            }

            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Version, A::Error> {
                while map.next_entry::<String, Value>()?.is_some() {}
                Ok(Version::Other)
            }

            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Version, A::Error> {
                while seq.next_element::<Value>()?.is_some() {}
                Ok(Version::Other)
            }
        }

        deserializer.deserialize_any(VersionVisitor)
    }
}

/// A top-level member name.
enum Member {
    Jsonrpc,
    Id,
    Method,
    Params,
    Result,
    Error,
    Other,
}

impl<'de> Deserialize<'de> for Member {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct MemberVisitor;

        impl Visitor<'_> for MemberVisitor {
            type Value = Member;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a member name")
            }

            fn visit_str<E: de::Error>(self, name: &str) -> Result<Member, E> {
                Ok(match name {
                    "jsonrpc" => Member::Jsonrpc,
                    "id" => Member::Id,
                    "method" => Member::Method,
                    "params" => Member::Params,
                    "result" => Member::Result,
                    "error" => Member::Error,
                    _ => Member::Other,
                })
            }
        }

        deserializer.deserialize_str(MemberVisitor)
    }
}

impl<'de, P: CallParams> Deserialize<'de> for Shape<P> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(ShapeVisitor(PhantomData))
    }
}

struct ShapeVisitor<P>(PhantomData<P>);

impl<'de, P: CallParams> Visitor<'de> for ShapeVisitor<P> {
    type Value = Shape<P>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a json value")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Shape<P>, A::Error> {
        let mut members = Members::absent();
        // A repeated member keeps its last value, as a `serde_json::Value` map does.
        while let Some(member) = map.next_key::<Member>()? {
            let slot = match member {
                Member::Jsonrpc => {
                    members.jsonrpc = Some(map.next_value()?);
                    continue;
                }
                Member::Id => {
                    members.id = Some(map.next_value()?);
                    continue;
                }
                Member::Method => &mut members.method,
                Member::Params => {
                    let params: P = map.next_value()?;
                    if let Some(reason) = params.refusal() {
                        return Err(de::Error::custom(reason));
                    }
                    members.params = Some(params);
                    continue;
                }
                Member::Result => &mut members.result,
                Member::Error => &mut members.error,
                Member::Other => {
                    // Parsed in full, so invalid UTF-8 in an unknown member is still an error.
                    map.next_value::<Value>()?;
                    continue;
                }
            };
            *slot = Some(map.next_value()?);
        }
        Ok(Shape::Object(members))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Shape<P>, A::Error> {
        while seq.next_element::<Value>()?.is_some() {}
        Ok(Shape::Array)
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Shape<P>, E> {
        Ok(Shape::Scalar)
    }

    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Shape<P>, E> {
        Ok(Shape::Scalar)
    }

    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Shape<P>, E> {
        Ok(Shape::Scalar)
    }

    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Shape<P>, E> {
        Ok(Shape::Scalar)
    }

    fn visit_str<E: de::Error>(self, _: &str) -> Result<Shape<P>, E> {
        Ok(Shape::Scalar)
    }

    fn visit_unit<E: de::Error>(self) -> Result<Shape<P>, E> {
        Ok(Shape::Scalar)
    }

    fn visit_none<E: de::Error>(self) -> Result<Shape<P>, E> {
        Ok(Shape::Scalar)
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Shape<P>, D::Error> {
        deserializer.deserialize_any(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The streaming decoder and the `Value` classifier agree on every input.
    #[test]
    fn decode_and_classify_agree() {
        let inputs = [
            r#"{"jsonrpc":"2.0","id":1,"method":"m","params":{"a":[1,2]},"extra":{"x":1}}"#,
            r#"{"jsonrpc":"2.0","method":"m","method":"n"}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":null}"#,
            r#"{"jsonrpc":"2.0","id":1,"error":{"code":1,"message":"m"},"result":2}"#,
            r#"{"jsonrpc":"2.0","id":1}"#,
            r#"{"id":1,"method":"m"}"#,
            r#"[1,2]"#,
            r#""s""#,
            r#"null"#,
            r#"{"jsonrpc":"2.0","id":[1],"method":"m"}"#,
            r#"{"jsonrpc":"2.0","id":9223372036854775808,"method":"m"}"#,
        ];
        for input in inputs {
            for version in [VersionField::Required, VersionField::Optional] {
                let value: Value = serde_json::from_str(input).unwrap();
                assert_eq!(
                    decode(input.as_bytes(), version),
                    classify(value, version),
                    "{input}"
                );
            }
        }
    }

    /// Raw params decode the same texts to the same messages, and fail the same ones.
    #[test]
    fn raw_params_decode_as_value_params_do() {
        // Nested to serde_json's recursion limit and beyond it, with brackets inside strings.
        let nested = |depth: usize| {
            format!(
                r#"{{"jsonrpc":"2.0","id":1,"method":"m","params":{}"[{{\\\"]"{}}}"#,
                "[".repeat(depth),
                "]".repeat(depth)
            )
        };
        let (deep, deepest, too_deep) = (nested(125), nested(126), nested(127));
        assert!(decode(deepest.as_bytes(), VersionField::Required).is_ok());
        assert!(matches!(
            decode(too_deep.as_bytes(), VersionField::Required),
            Err(DecodeError::Parse { .. })
        ));
        let inputs = [
            r#"{"jsonrpc":"2.0","id":1,"method":"m","params":{"a":[1, 2]}}"#,
            r#"{"jsonrpc":"2.0","method":"m","params":[true]}"#,
            r#"{"jsonrpc":"2.0","id":"x","method":"m","params":null}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"m","params":3}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"m","params":"s"}"#,
            r#"{"jsonrpc":"2.0","method":"m","params":{"a":1},"params":[2]}"#,
            r#"{"method":"m","params":{}}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":{"r":1}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"m","params":{"a":"\u00e9\n"}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"m","params":{"a":}}"#,
            "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"m\",\"params\":{\"a\":\"\n\"}}",
            &deep,
            &deepest,
            &too_deep,
        ];
        for input in inputs {
            for version in [VersionField::Required, VersionField::Optional] {
                let by_value = decode_noting_version(input.as_bytes(), version);
                let by_raw = decode_with_params::<Box<RawValue>>(input.as_bytes(), version);
                let as_value = by_raw.map(|(message, carried)| {
                    let parse = |raw: Box<RawValue>| serde_json::from_str(raw.get()).unwrap();
                    let message = match message {
                        Message::Request(r) => Message::Request(super::super::Request {
                            id: r.id,
                            method: r.method,
                            params: r.params.map(parse),
                        }),
                        Message::Notification(n) => {
                            Message::Notification(super::super::Notification {
                                method: n.method,
                                params: n.params.map(parse),
                            })
                        }
                        Message::Response(r) => Message::Response(r),
                    };
                    (message, carried)
                });
                match (&by_value, &as_value) {
                    // The parser words the position of a raw-value error its own way.
                    (Err(DecodeError::Parse { .. }), Err(DecodeError::Parse { .. })) => {}
                    _ => assert_eq!(by_value, as_value, "{input}"),
                }
            }
        }
    }

    #[test]
    fn invalid_utf8_in_an_unknown_member_is_a_parse_error() {
        let line = b"{\"jsonrpc\":\"2.0\",\"method\":\"m\",\"x\":\"\xc3\x28\"}";
        assert!(matches!(
            decode(line, VersionField::Required),
            Err(DecodeError::Parse { .. })
        ));
    }
}
