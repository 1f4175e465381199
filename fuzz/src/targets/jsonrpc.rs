//! The JSON-RPC classifier and decoder (`ski::jsonrpc::decode`, `decode_with_params`,
//! `classify`) on one line, in both version modes: what decodes encodes and decodes to the same
//! message, the raw-params decoder accepts exactly what the tree decoder accepts, and every
//! refusal has an answer that encodes.

use std::path::Path;

use serde_json::Value;
use serde_json::value::RawValue;
use ski::jsonrpc::{
    DecodeError, Message, RequestId, VersionField, classify, decode, decode_with_params,
};

use super::{Target, json_close, message_class};
use crate::corpus::{golden_json_lines, recorded_lines};

pub const TARGET: Target = Target {
    name: "jsonrpc",
    about: "JSON-RPC classifier: one line decoded, re-encoded and decoded again",
    run,
    seeds,
    words: &[
        b"\"jsonrpc\"",
        b"\"2.0\"",
        b"\"1.0\"",
        b"\"id\"",
        b"\"method\"",
        b"\"params\"",
        b"\"result\"",
        b"\"error\"",
        b"\"code\"",
        b"\"message\"",
        b"\"data\"",
        b"-32700",
        b"-32600",
        b"-32601",
    ],
};

fn run(data: &[u8]) -> u64 {
    let mut class = 0;
    for version in [VersionField::Required, VersionField::Optional] {
        let decoded = decode(data, version);
        let raw = decode_with_params::<Box<RawValue>>(data, version);
        if refused_only_as_a_tree(&decoded) && raw.is_ok() {
            // Known and accepted: params kept as text are checked for syntax only, so a number
            // past f64's range or a lone surrogate escape there is refused later, by the typed
            // params (`-32602`), where the tree decoder refuses the whole text (`-32700`).
            class ^= 0x5eed;
            continue;
        }
        assert_eq!(
            decoded.is_ok(),
            raw.is_ok(),
            "the tree decoder and the raw-params decoder disagree ({version:?}): {:?} / {:?}",
            decoded.as_ref().err(),
            raw.as_ref().err()
        );
        if let (Ok(message), Ok((raw_message, _))) = (&decoded, &raw) {
            assert_eq!(
                (message.method(), message.id()),
                method_and_id(raw_message),
                "the two decoders read different messages"
            );
        }
        class ^= match &decoded {
            Ok(message) => {
                check_round_trip(message);
                let kind = match message {
                    Message::Request(_) => "request",
                    Message::Notification(_) => "notification",
                    Message::Response(response) if response.result.is_ok() => "result",
                    Message::Response(_) => "error",
                };
                message_class("ok", kind)
            }
            Err(error) => {
                check_refusal(error);
                message_class(error_kind(error), &error.to_string())
            }
        };
        if let Ok(value) = serde_json::from_slice::<Value>(data) {
            // The same text as a tree: classified as the decoder read it. The tree no longer
            // holds the text of a number id, so those ids are compared as numbers.
            let classified = classify(value, version);
            if let Ok(message) = &decoded {
                let Ok(classified) = &classified else {
                    panic!("classify refuses a valid message: {classified:?}");
                };
                assert_eq!(
                    classified.method(),
                    message.method(),
                    "classify and decode disagree"
                );
                assert!(
                    same_id(classified.id(), message.id()),
                    "classify and decode read different ids: {:?} / {:?}",
                    classified.id(),
                    message.id()
                );
            }
        }
        class = class.rotate_left(1);
    }
    class
}

/// Whether the tree decoder refused what only a tree reads: a number too large for an `f64`,
/// a lone UTF-16 surrogate escape.
fn refused_only_as_a_tree(decoded: &Result<Message, DecodeError>) -> bool {
    const TREE_ONLY: [&str; 4] = [
        "number out of range",
        "lone leading surrogate",
        "lone trailing surrogate",
        "unexpected end of hex escape",
    ];
    matches!(decoded, Err(DecodeError::Parse { reason })
        if TREE_ONLY.iter().any(|start| reason.starts_with(start)))
}

fn same_id(left: Option<&RequestId>, right: Option<&RequestId>) -> bool {
    fn numeric(id: Option<&RequestId>) -> Option<f64> {
        match id? {
            RequestId::Number(number) => Some(*number as f64),
            RequestId::NumberText(text) => text.parse().ok(),
            _ => None,
        }
    }
    // serde_json reads a float text to within an ulp or two (see `json_close`).
    left == right
        || matches!((numeric(left), numeric(right)), (Some(a), Some(b))
            if a == b || (a - b).abs() <= a.abs().max(b.abs()) * 1e-14)
}

fn method_and_id<P>(message: &Message<P>) -> (Option<&str>, Option<&RequestId>) {
    match message {
        Message::Request(request) => (Some(&request.method), Some(&request.id)),
        Message::Notification(notification) => (Some(&notification.method), None),
        Message::Response(response) => (None, Some(&response.id)),
    }
}

fn error_kind(error: &DecodeError) -> &'static str {
    match error {
        DecodeError::Parse { .. } => "parse",
        DecodeError::InvalidRequest { .. } => "invalid-request",
        DecodeError::InvalidResponse { .. } => "invalid-response",
    }
}

/// A decoded message encodes as one line that decodes to the same message.
fn check_round_trip(message: &Message) {
    let line = match message.to_line() {
        Ok(line) => line,
        Err(error) => panic!("a decoded message does not encode: {error}"),
    };
    assert!(!line.contains('\n'));
    match decode(line.as_bytes(), VersionField::Required) {
        Ok(again) => {
            if &again != message {
                let as_json = |m: &Message| {
                    m.to_line()
                        .ok()
                        .and_then(|l| serde_json::from_str::<Value>(&l).ok())
                };
                let (before, after) = (as_json(message), as_json(&again));
                assert!(
                    before.is_some()
                        && after.is_some()
                        && json_close(
                            before.as_ref().unwrap_or(&Value::Null),
                            after.as_ref().unwrap_or(&Value::Null)
                        ),
                    "decode -> encode -> decode changed the message:\n{message:?}\n{again:?}"
                );
            }
        }
        Err(error) => panic!("an encoded message does not decode: {error}: {line}"),
    }
}

/// The answer owed for a refused message encodes and decodes as a response with its id.
fn check_refusal(error: &DecodeError) {
    let Some(response) = error.error_response() else {
        return;
    };
    let id = response.id.clone();
    let line = match Message::Response(response).to_line() {
        Ok(line) => line,
        Err(encode) => panic!("the answer to a refused message does not encode: {encode}"),
    };
    match decode(line.as_bytes(), VersionField::Required) {
        Ok(Message::Response(again)) => assert_eq!(again.id, id),
        other => panic!("the answer to a refused message does not decode: {other:?}"),
    }
}

fn seeds(root: &Path) -> Vec<Vec<u8>> {
    let mut seeds = Vec::new();
    for sub in ["acp", "kiro", "intercom"] {
        seeds.extend(golden_json_lines(root, sub));
    }
    seeds.extend(recorded_lines(root));
    seeds.push(br#"[{"jsonrpc":"2.0","id":1,"method":"a"}]"#.to_vec());
    seeds.push(br#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"x"}}"#.to_vec());
    seeds
}
