//! ACP params and results (`ski::acp::message`) for every method of ACP's method table: the
//! params (or the result) of one JSON-RPC message are decoded as those of each method in turn,
//! and whatever decodes must encode and decode to the same typed value.

use std::path::Path;

use serde_json::Value;
use ski::acp::message::{MethodParams, MethodResult};
use ski::acp::methods::{Kind, METHODS};

use super::{Target, json_close, message_class};
use crate::corpus::{golden_json_lines, recorded_lines};
use crate::rng::fnv1a;

pub const TARGET: Target = Target {
    name: "acp",
    about: "ACP params and results of every method: decode -> encode -> decode",
    run,
    seeds,
    words: &[
        b"\"sessionId\"",
        b"\"sessionUpdate\"",
        b"\"agent_message_chunk\"",
        b"\"tool_call\"",
        b"\"tool_call_update\"",
        b"\"plan\"",
        b"\"content\"",
        b"\"type\"",
        b"\"text\"",
        b"\"image\"",
        b"\"resource_link\"",
        b"\"resource\"",
        b"\"_meta\"",
        b"\"protocolVersion\"",
        b"\"mcpServers\"",
        b"\"cwd\"",
        b"\"prompt\"",
        b"\"options\"",
        b"\"outcome\"",
        b"\"optionId\"",
        b"\"stopReason\"",
        b"\"terminalId\"",
        b"\"path\"",
        b"\"line\"",
        b"\"limit\"",
        b"\"requestId\"",
        b"\"mode\"",
        b"\"schema\"",
    ],
};

fn run(data: &[u8]) -> u64 {
    let Ok(value) = serde_json::from_slice::<Value>(data) else {
        return 0;
    };
    let (params, result) = payloads(value);
    let mut class = 0u64;
    for (index, method) in METHODS.iter().enumerate() {
        let bit = 1u64 << (index % 64);
        if let Some(params) = &params
            && let Ok(typed) = MethodParams::decode(method.name, params.clone())
        {
            class ^= bit;
            assert_eq!(typed.method(), method.name);
            let encoded = match typed.to_value() {
                Ok(encoded) => encoded,
                Err(error) => panic!("{} params decode but do not encode: {error}", method.name),
            };
            match MethodParams::decode(method.name, encoded.clone()) {
                Ok(again) => {
                    if again != typed {
                        let after = again.to_value().ok().flatten().unwrap_or(Value::Null);
                        assert!(
                            json_close(&encoded.unwrap_or(Value::Null), &after),
                            "{} params: decode -> encode -> decode changed them:\n{typed:?}\n{again:?}",
                            method.name
                        );
                    }
                }
                Err(error) => panic!(
                    "{} params encode to what does not decode: {error}",
                    method.name
                ),
            }
        }
        if method.kind != Kind::Notification
            && let Some(result) = &result
        {
            match MethodResult::decode(method.name, result.clone()) {
                Ok(typed) => {
                    class ^= bit.rotate_left(32);
                    let encoded = match typed.to_value() {
                        Ok(encoded) => encoded,
                        Err(error) => {
                            panic!(
                                "{} result decodes but does not encode: {error}",
                                method.name
                            )
                        }
                    };
                    match MethodResult::decode(method.name, encoded.clone()) {
                        Ok(again) => {
                            if again != typed {
                                let after = again.to_value().unwrap_or(Value::Null);
                                assert!(
                                    json_close(&encoded, &after),
                                    "{} result: decode -> encode -> decode changed it:\n{typed:?}\n{again:?}",
                                    method.name
                                );
                            }
                        }
                        Err(error) => {
                            panic!(
                                "{} result encodes to what does not decode: {error}",
                                method.name
                            )
                        }
                    }
                }
                Err(error) => class ^= message_class("result", &error.to_string()) & 0xff,
            }
        }
    }
    fnv1a(&class.to_le_bytes())
}

/// The params and the result to try: a request's or notification's params (absent params as
/// `None`), a response's result, or for any other JSON the whole value as both.
fn payloads(value: Value) -> (Option<Option<Value>>, Option<Value>) {
    if let Value::Object(map) = &value {
        if map.contains_key("method") {
            return (Some(map.get("params").cloned()), None);
        }
        if let Some(result) = map.get("result") {
            return (None, Some(result.clone()));
        }
    }
    (Some(Some(value.clone())), Some(value))
}

fn seeds(root: &Path) -> Vec<Vec<u8>> {
    let mut seeds = Vec::new();
    for sub in ["acp", "kiro"] {
        seeds.extend(golden_json_lines(root, sub));
    }
    seeds.extend(recorded_lines(root));
    seeds
}
