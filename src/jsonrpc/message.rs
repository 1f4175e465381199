//! JSON-RPC 2.0 messages: requests, notifications and responses, how an incoming JSON text is
//! classified into one of them (or into the error a peer must answer), and how a message is
//! encoded as one compact line.

use serde::de::{self, Deserializer};
use serde::ser::{SerializeMap, Serializer};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::error::RpcError;
use super::id::RequestId;

mod classify;

pub use classify::{CallParams, classify, decode, decode_noting_version, decode_with_params};

/// The only value of the `jsonrpc` member this engine speaks.
pub const JSONRPC_VERSION: &str = "2.0";

/// A request: a method call that expects a response carrying the same id.
#[derive(Debug, Clone, PartialEq)]
pub struct Request<P = Value> {
    /// The id the response must echo, exactly as it was sent.
    pub id: RequestId,
    /// The method name.
    pub method: String,
    /// The params as raw JSON: `None` when the member is absent. Protocol layers decode them.
    pub params: Option<P>,
}

/// A notification: a method call without an id, never answered.
#[derive(Debug, Clone, PartialEq)]
pub struct Notification<P = Value> {
    /// The method name.
    pub method: String,
    /// The params as raw JSON: `None` when the member is absent.
    pub params: Option<P>,
}

/// A response: either a result or an error object, for the request with the same id.
#[derive(Debug, Clone, PartialEq)]
pub struct Response {
    /// The id of the request this answers (`null` when the request's id could not be read).
    pub id: RequestId,
    /// `Ok(result)` for a success response, `Err(error)` for an error response.
    pub result: Result<Value, RpcError>,
}

impl Response {
    /// A success response.
    pub fn success(id: RequestId, result: Value) -> Self {
        Self {
            id,
            result: Ok(result),
        }
    }

    /// An error response.
    pub fn error(id: RequestId, error: RpcError) -> Self {
        Self {
            id,
            result: Err(error),
        }
    }
}

/// Any JSON-RPC message. `P` is how the params of requests and notifications are held: a
/// [`Value`] tree by default, or any other [`CallParams`] (see [`decode_with_params`]).
#[derive(Debug, Clone, PartialEq)]
pub enum Message<P = Value> {
    /// A request (has `method` and `id`).
    Request(Request<P>),
    /// A notification (has `method`, no `id`).
    Notification(Notification<P>),
    /// A success or error response (has `id` and `result` or `error`).
    Response(Response),
}

impl Message {
    /// A request message.
    pub fn request(
        id: impl Into<RequestId>,
        method: impl Into<String>,
        params: Option<Value>,
    ) -> Self {
        Message::Request(Request {
            id: id.into(),
            method: method.into(),
            params,
        })
    }

    /// A notification message.
    pub fn notification(method: impl Into<String>, params: Option<Value>) -> Self {
        Message::Notification(Notification {
            method: method.into(),
            params,
        })
    }

    /// A success response message.
    pub fn success(id: impl Into<RequestId>, result: Value) -> Self {
        Message::Response(Response::success(id.into(), result))
    }

    /// An error response message.
    pub fn error(id: impl Into<RequestId>, error: RpcError) -> Self {
        Message::Response(Response::error(id.into(), error))
    }

    /// The method name of a request or notification.
    pub fn method(&self) -> Option<&str> {
        match self {
            Message::Request(r) => Some(&r.method),
            Message::Notification(n) => Some(&n.method),
            Message::Response(_) => None,
        }
    }

    /// The id of a request or response.
    pub fn id(&self) -> Option<&RequestId> {
        match self {
            Message::Request(r) => Some(&r.id),
            Message::Notification(_) => None,
            Message::Response(r) => Some(&r.id),
        }
    }

    /// Encodes the message as one compact JSON line, without a line terminator.
    ///
    /// The result never contains a newline byte; an encoder that produced one would fail with
    /// [`EncodeError::EmbeddedNewline`] rather than corrupt the framing.
    pub fn to_line(&self) -> Result<String, EncodeError> {
        let mut out = Vec::with_capacity(128);
        encode_into(self, VersionField::Required, &mut out)?;
        // serde_json writes only valid UTF-8.
        String::from_utf8(out).map_err(|_| EncodeError::NotUtf8)
    }
}

impl From<Request> for Message {
    fn from(value: Request) -> Self {
        Message::Request(value)
    }
}

impl From<Notification> for Message {
    fn from(value: Notification) -> Self {
        Message::Notification(value)
    }
}

impl From<Response> for Message {
    fn from(value: Response) -> Self {
        Message::Response(value)
    }
}

/// How the `jsonrpc` member is treated.
///
/// JSON-RPC 2.0 and ACP require `"jsonrpc":"2.0"` on every message; the intercom stream dialect
/// omits it. In both modes a present member with any other value is invalid.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum VersionField {
    /// Incoming messages must carry `"jsonrpc":"2.0"`; outgoing messages carry it.
    #[default]
    Required,
    /// Incoming messages may omit `jsonrpc`; outgoing messages omit it.
    Optional,
}

/// Why a message could not be encoded.
#[derive(Debug, thiserror::Error)]
pub enum EncodeError {
    /// serde_json failed (for example a map with non-string keys inside a value).
    #[error("cannot encode message as json: {0}")]
    Json(#[from] serde_json::Error),
    /// The encoded text contained a newline byte, which would break NDJSON framing.
    #[error("encoded message contains a newline byte")]
    EmbeddedNewline,
    /// The encoded text was not UTF-8.
    #[error("encoded message is not utf-8")]
    NotUtf8,
}

/// Why an incoming JSON text is not a usable message, and what the peer answers.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum DecodeError {
    /// Not JSON, or not UTF-8: answered `-32700` with id `null`.
    #[error("parse error: {reason}")]
    Parse {
        /// What the parser reported.
        reason: String,
    },
    /// JSON, but not a valid request or notification (including batches and non-objects):
    /// answered `-32600`, with the message's id when it could be read and `null` otherwise.
    #[error("invalid request: {reason}")]
    InvalidRequest {
        /// The id to answer with.
        id: RequestId,
        /// What is wrong.
        reason: String,
    },
    /// Shaped like a response but malformed. Responses are never answered; when the id can be
    /// read, the pending request with that id fails instead.
    #[error("invalid response: {reason}")]
    InvalidResponse {
        /// The id, when it could be read.
        id: Option<RequestId>,
        /// What is wrong.
        reason: String,
    },
}

impl DecodeError {
    /// The error response a peer sends for this error, or `None` for a malformed response.
    pub fn error_response(&self) -> Option<Response> {
        match self {
            DecodeError::Parse { reason } => Some(Response::error(
                RequestId::Null,
                RpcError::parse_error(reason.clone()),
            )),
            DecodeError::InvalidRequest { id, reason } => Some(Response::error(
                id.clone(),
                RpcError::invalid_request(reason.clone()),
            )),
            DecodeError::InvalidResponse { .. } => None,
        }
    }
}

/// Appends the compact JSON encoding of `message` to `out`, without a line terminator.
///
/// With [`VersionField::Optional`] the `jsonrpc` member is left out (the intercom dialect).
/// Fails without touching the framing if the encoding would contain a newline byte.
pub fn encode_into(
    message: &Message,
    version: VersionField,
    out: &mut Vec<u8>,
) -> Result<(), EncodeError> {
    let wire = Wire {
        message,
        version: version == VersionField::Required,
    };
    encode_wire(&wire, out)
}

/// Appends a notification as [`encode_into`] would write `Message::notification(method,
/// params)`, serialising `params` straight from its own type: no [`Value`] tree is built, which
/// on a hot path (a streamed update per turn) saves most of the allocations of the message.
pub fn encode_notification_into<P: Serialize + ?Sized>(
    method: &str,
    params: &P,
    version: VersionField,
    out: &mut Vec<u8>,
) -> Result<(), EncodeError> {
    let wire = TypedWire {
        version: version == VersionField::Required,
        first: ("method", method),
        second: ("params", params),
    };
    encode_wire(&wire, out)
}

/// Appends a success response as [`encode_into`] would write `Message::success(id, result)`,
/// serialising `result` straight from its own type, as [`encode_notification_into`] does for
/// params.
pub fn encode_result_into<R: Serialize + ?Sized>(
    id: &RequestId,
    result: &R,
    version: VersionField,
    out: &mut Vec<u8>,
) -> Result<(), EncodeError> {
    let wire = TypedWire {
        version: version == VersionField::Required,
        first: ("id", id),
        second: ("result", result),
    };
    encode_wire(&wire, out)
}

fn encode_wire<T: Serialize>(wire: &T, out: &mut Vec<u8>) -> Result<(), EncodeError> {
    let start = out.len();
    if let Err(e) = serde_json::to_writer(&mut *out, wire) {
        out.truncate(start);
        return Err(e.into());
    }
    if memchr::memchr(b'\n', &out[start..]).is_some() {
        out.truncate(start);
        return Err(EncodeError::EmbeddedNewline);
    }
    Ok(())
}

/// A message written straight from typed parts: `jsonrpc` if asked, then two members
/// (`method` and `params` of a notification, `id` and `result` of a success), in the order
/// [`Wire`] writes them.
struct TypedWire<'a, A: ?Sized, B: ?Sized> {
    version: bool,
    first: (&'static str, &'a A),
    second: (&'static str, &'a B),
}

impl<A: Serialize + ?Sized, B: Serialize + ?Sized> Serialize for TypedWire<'_, A, B> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        if self.version {
            map.serialize_entry("jsonrpc", JSONRPC_VERSION)?;
        }
        map.serialize_entry(self.first.0, self.first.1)?;
        map.serialize_entry(self.second.0, self.second.1)?;
        map.end()
    }
}

/// A message with the choice of writing the `jsonrpc` member; members are written in the
/// conventional order (`jsonrpc`, `id`, `method`, `params` / `result` / `error`).
struct Wire<'a> {
    message: &'a Message,
    version: bool,
}

impl Serialize for Wire<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        if self.version {
            map.serialize_entry("jsonrpc", JSONRPC_VERSION)?;
        }
        match self.message {
            Message::Request(r) => {
                map.serialize_entry("id", &r.id)?;
                map.serialize_entry("method", &r.method)?;
                if let Some(params) = &r.params {
                    map.serialize_entry("params", params)?;
                }
            }
            Message::Notification(n) => {
                map.serialize_entry("method", &n.method)?;
                if let Some(params) = &n.params {
                    map.serialize_entry("params", params)?;
                }
            }
            Message::Response(r) => {
                map.serialize_entry("id", &r.id)?;
                match &r.result {
                    Ok(result) => map.serialize_entry("result", result)?,
                    Err(error) => map.serialize_entry("error", error)?,
                }
            }
        }
        map.end()
    }
}

impl Serialize for Message {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        Wire {
            message: self,
            version: true,
        }
        .serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for Message {
    /// Deserializes with the strict rules of [`decode`] (`jsonrpc` required).
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let shape = classify::Shape::deserialize(deserializer)?;
        shape
            .into_message(VersionField::Required)
            .map_err(de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::jsonrpc::ErrorCode;

    fn strict(text: &str) -> Result<Message, DecodeError> {
        decode(text.as_bytes(), VersionField::Required)
    }

    #[test]
    fn decoding_notes_whether_the_version_member_was_there() {
        let with = br#"{"jsonrpc":"2.0","method":"heartbeat"}"#;
        let without = br#"{"method":"heartbeat"}"#;
        let (message, carried) =
            decode_noting_version(with, VersionField::Optional).expect("decodes");
        assert!(carried);
        assert_eq!(
            message,
            decode(with, VersionField::Optional).expect("decodes")
        );
        let (_, carried) = decode_noting_version(without, VersionField::Optional).expect("decodes");
        assert!(!carried);
        assert!(decode_noting_version(without, VersionField::Required).is_err());
        assert!(matches!(
            decode_noting_version(b"{", VersionField::Optional),
            Err(DecodeError::Parse { .. })
        ));
    }

    #[test]
    fn typed_notifications_encode_as_their_value_form_would() {
        #[derive(Serialize)]
        struct Params<'a> {
            #[serde(rename = "sessionId")]
            session_id: &'a str,
            count: u32,
        }
        let typed = Params {
            session_id: "s-1",
            count: 2,
        };
        for version in [VersionField::Required, VersionField::Optional] {
            let mut from_type = Vec::new();
            encode_notification_into("session/update", &typed, version, &mut from_type)
                .expect("encodes");
            let mut from_value = Vec::new();
            let message = Message::notification(
                "session/update",
                Some(json!({"sessionId": "s-1", "count": 2})),
            );
            encode_into(&message, version, &mut from_value).expect("encodes");
            assert_eq!(from_type, from_value);
        }
    }

    #[test]
    fn typed_results_encode_as_their_value_form_would() {
        #[derive(Serialize)]
        struct Outcome<'a> {
            #[serde(rename = "stopReason")]
            stop_reason: &'a str,
        }
        let typed = Outcome {
            stop_reason: "end_turn",
        };
        for id in [RequestId::Number(7), RequestId::String("a\"b".into())] {
            for version in [VersionField::Required, VersionField::Optional] {
                let mut from_type = Vec::new();
                encode_result_into(&id, &typed, version, &mut from_type).expect("encodes");
                let mut from_value = Vec::new();
                let message = Message::success(id.clone(), json!({"stopReason": "end_turn"}));
                encode_into(&message, version, &mut from_value).expect("encodes");
                assert_eq!(from_type, from_value);
            }
        }
    }

    #[test]
    fn requests_notifications_and_responses_round_trip() {
        let lines = [
            r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}"#,
            r#"{"jsonrpc":"2.0","id":"5f0c","method":"session/new","params":[]}"#,
            r#"{"jsonrpc":"2.0","id":null,"method":"x","params":null}"#,
            r#"{"jsonrpc":"2.0","id":7,"method":"noparams"}"#,
            r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s"}}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":{"ok":true}}"#,
            r#"{"jsonrpc":"2.0","id":"a","result":null}"#,
            r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}"#,
            r#"{"jsonrpc":"2.0","id":2,"error":{"code":-32601,"message":"m","data":{"method":"x"}}}"#,
            r#"{"jsonrpc":"2.0","id":1e2,"method":"m"}"#,
            r#"{"jsonrpc":"2.0","id":1.5,"method":"m"}"#,
            r#"{"jsonrpc":"2.0","id":18446744073709551616,"method":"m"}"#,
            r#"{"jsonrpc":"2.0","id":-0,"result":null}"#,
        ];
        for line in lines {
            let message = strict(line).unwrap();
            assert_eq!(message.to_line().unwrap(), line, "round trip of {line}");
        }
    }

    #[test]
    fn ids_are_echoed_in_their_form() {
        let Message::Request(r) = strict(r#"{"jsonrpc":"2.0","id":"1","method":"m"}"#).unwrap()
        else {
            panic!("expected a request");
        };
        assert_eq!(r.id, RequestId::String("1".into()));
        let Message::Request(r) = strict(r#"{"jsonrpc":"2.0","id":null,"method":"m"}"#).unwrap()
        else {
            panic!("expected a request");
        };
        assert_eq!(r.id, RequestId::Null);
    }

    #[test]
    fn invalid_inputs_map_to_the_answer_a_peer_sends() {
        // (input, expected code of the answer or None for "never answered", expected id)
        let cases: &[(&str, Option<i64>, Option<RequestId>)] = &[
            ("not json", Some(-32700), Some(RequestId::Null)),
            ("[]", Some(-32600), Some(RequestId::Null)),
            (
                r#"[{"jsonrpc":"2.0","id":1,"method":"m"}]"#,
                Some(-32600),
                Some(RequestId::Null),
            ),
            ("42", Some(-32600), Some(RequestId::Null)),
            (r#""text""#, Some(-32600), Some(RequestId::Null)),
            (r#"{"id":3,"method":"m"}"#, Some(-32600), Some(3.into())),
            (
                r#"{"jsonrpc":"1.0","id":3,"method":"m"}"#,
                Some(-32600),
                Some(3.into()),
            ),
            (
                r#"{"jsonrpc":2.0,"id":"x","method":"m"}"#,
                Some(-32600),
                Some("x".into()),
            ),
            (
                r#"{"jsonrpc":"2.0","id":true,"method":"m"}"#,
                Some(-32600),
                Some(RequestId::Null),
            ),
            (
                r#"{"jsonrpc":"2.0","id":{},"method":"m"}"#,
                Some(-32600),
                Some(RequestId::Null),
            ),
            (
                r#"{"jsonrpc":"2.0","id":4,"method":5}"#,
                Some(-32600),
                Some(4.into()),
            ),
            (r#"{"jsonrpc":"2.0","id":4}"#, Some(-32600), Some(4.into())),
            (
                r#"{"jsonrpc":"2.0","id":4,"method":"m","params":3}"#,
                Some(-32600),
                Some(4.into()),
            ),
            (r#"{}"#, Some(-32600), Some(RequestId::Null)),
            (
                r#"{"jsonrpc":"2.0","id":1,"result":1,"error":{"code":1,"message":"m"}}"#,
                None,
                None,
            ),
            (
                r#"{"jsonrpc":"2.0","id":1,"error":{"code":"x","message":"m"}}"#,
                None,
                None,
            ),
            (r#"{"jsonrpc":"2.0","result":1}"#, None, None),
            (r#"{"id":1,"result":1}"#, None, None),
        ];
        for (input, code, id) in cases {
            let error = strict(input).expect_err(input);
            match (error.error_response(), code) {
                (Some(response), Some(code)) => {
                    let rpc = response.result.unwrap_err();
                    assert_eq!(rpc.code, ErrorCode(*code), "code for {input}");
                    assert_eq!(Some(&response.id), id.as_ref(), "id for {input}");
                }
                (None, None) => {}
                (answer, expected) => {
                    panic!("{input}: expected answer code {expected:?}, got {answer:?}")
                }
            }
        }
    }

    #[test]
    fn invalid_utf8_is_a_parse_error() {
        let error = decode(
            b"{\"jsonrpc\":\"2.0\",\"method\":\"\xff\"}",
            VersionField::Required,
        )
        .unwrap_err();
        assert!(matches!(error, DecodeError::Parse { .. }), "{error:?}");
    }

    #[test]
    fn the_optional_version_field_accepts_its_absence_only() {
        let message = decode(
            br#"{"method":"status/update","params":{}}"#,
            VersionField::Optional,
        )
        .unwrap();
        assert_eq!(message.method(), Some("status/update"));
        assert!(decode(br#"{"jsonrpc":"1.0","method":"m"}"#, VersionField::Optional).is_err());
        let mut out = Vec::new();
        encode_into(&message, VersionField::Optional, &mut out).unwrap();
        assert_eq!(out, br#"{"method":"status/update","params":{}}"#);
    }

    #[test]
    fn strings_with_newlines_are_escaped_on_encode() {
        let message = Message::notification("m", Some(json!({"text": "a\nb\r\n"})));
        let line = message.to_line().unwrap();
        assert!(!line.contains('\n'));
        assert_eq!(strict(&line).unwrap(), message);
    }

    #[test]
    fn serde_impls_follow_the_strict_rules() {
        let message: Message = serde_json::from_str(r#"{"jsonrpc":"2.0","method":"m"}"#).unwrap();
        assert_eq!(message, Message::notification("m", None));
        assert!(serde_json::from_str::<Message>(r#"{"method":"m"}"#).is_err());
        assert_eq!(
            serde_json::to_value(Message::success(1, json!(2))).unwrap(),
            json!({"jsonrpc": "2.0", "id": 1, "result": 2})
        );
    }
}
