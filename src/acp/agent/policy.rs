//! The permission policy's memory: per session, the `allow_always` and `reject_always` answers
//! the client gave, keyed by a fingerprint of the tool call they were given for.
//!
//! The fingerprint covers the tool call's kind, title, its locations as sorted `path:line`
//! strings, and its raw input in canonical JSON (keys sorted at every level). The tool call id is
//! left out, so the same call made again (under a new id) hits the memory.

use std::collections::HashMap;

use serde_json::Value;

use crate::acp::{PermissionOptionKind, ToolCallUpdate};

/// What the memory holds for one fingerprint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Remembered {
    /// The client chose `allow_always`.
    AllowAlways,
    /// The client chose `reject_always`.
    RejectAlways,
}

/// One session's remembered decisions.
#[derive(Debug, Clone, Default)]
pub struct PolicyMemory {
    decisions: HashMap<String, Remembered>,
}

impl PolicyMemory {
    /// The remembered decision for a tool call, if any.
    pub fn recall(&self, tool_call: &ToolCallUpdate) -> Option<Remembered> {
        self.decisions.get(&fingerprint(tool_call)).copied()
    }

    /// Remembers the client's choice when it is one of the `*_always` kinds.
    pub fn remember(&mut self, tool_call: &ToolCallUpdate, kind: &PermissionOptionKind) {
        let remembered = match kind {
            PermissionOptionKind::AllowAlways => Remembered::AllowAlways,
            PermissionOptionKind::RejectAlways => Remembered::RejectAlways,
            _ => return,
        };
        self.decisions.insert(fingerprint(tool_call), remembered);
    }

    /// Forgets everything.
    pub fn clear(&mut self) {
        self.decisions.clear();
    }

    /// How many decisions are remembered.
    pub fn len(&self) -> usize {
        self.decisions.len()
    }

    /// Whether nothing is remembered.
    pub fn is_empty(&self) -> bool {
        self.decisions.is_empty()
    }
}

/// The fingerprint of a tool call: everything that identifies the call except its id.
pub fn fingerprint(tool_call: &ToolCallUpdate) -> String {
    let kind = tool_call
        .kind
        .value()
        .map(|kind| kind.as_str().to_owned())
        .unwrap_or_default();
    let title = tool_call.title.value().cloned().unwrap_or_default();
    let mut locations: Vec<String> = tool_call
        .locations
        .value()
        .map(|locations| {
            locations
                .iter()
                .map(|location| match location.line {
                    Some(line) => format!("{}:{line}", location.path),
                    None => location.path.clone(),
                })
                .collect()
        })
        .unwrap_or_default();
    locations.sort();
    let raw_input = tool_call
        .raw_input
        .value()
        .map(canonical_json)
        .unwrap_or_default();
    canonical_json(&serde_json::json!({
        "kind": kind,
        "title": title,
        "locations": locations,
        "rawInput": raw_input,
    }))
}

/// JSON text with the keys of every object sorted, whatever the map order of `serde_json`.
pub fn canonical_json(value: &Value) -> String {
    let mut out = String::new();
    write_canonical(value, &mut out);
    out
}

fn write_canonical(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (i, key) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(key.clone()).to_string());
                out.push(':');
                write_canonical(&map[key], out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(item, out);
            }
            out.push(']');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::acp::{Nullable, ToolCallLocation, ToolKind};
    use serde_json::json;

    fn call(id: &str, input: Value, locations: &[(&str, Option<u32>)]) -> ToolCallUpdate {
        let mut call = ToolCallUpdate::new(id);
        call.title = Nullable::Value("Execute".into());
        call.kind = Nullable::Value(ToolKind::Execute);
        call.raw_input = Nullable::Value(input);
        call.locations = Nullable::Value(
            locations
                .iter()
                .map(|(path, line)| ToolCallLocation {
                    path: (*path).to_owned(),
                    line: *line,
                    extra: Default::default(),
                })
                .collect(),
        );
        call
    }

    #[test]
    fn fingerprint_ignores_the_id_key_order_and_location_order() {
        let a = call(
            "call_1",
            json!({"b": 1, "a": {"y": 2, "x": 1}}),
            &[("/b", Some(2)), ("/a", None)],
        );
        let b = call(
            "call_2",
            json!({"a": {"x": 1, "y": 2}, "b": 1}),
            &[("/a", None), ("/b", Some(2))],
        );
        assert_eq!(fingerprint(&a), fingerprint(&b));
        let c = call("call_3", json!({"b": 2}), &[]);
        assert_ne!(fingerprint(&a), fingerprint(&c));
        let d = call(
            "call_1",
            json!({"b": 1, "a": {"y": 2, "x": 1}}),
            &[("/b", Some(3))],
        );
        assert_ne!(fingerprint(&a), fingerprint(&d));
    }

    #[test]
    fn only_always_answers_are_remembered_and_clear_forgets() {
        let tool = call("call_1", json!({}), &[]);
        let mut memory = PolicyMemory::default();
        memory.remember(&tool, &PermissionOptionKind::AllowOnce);
        memory.remember(&tool, &PermissionOptionKind::RejectOnce);
        assert_eq!(memory.recall(&tool), None);
        memory.remember(&tool, &PermissionOptionKind::RejectAlways);
        let again = call("call_9", json!({}), &[]);
        assert_eq!(memory.recall(&again), Some(Remembered::RejectAlways));
        memory.remember(&tool, &PermissionOptionKind::AllowAlways);
        assert_eq!(memory.recall(&again), Some(Remembered::AllowAlways));
        memory.clear();
        assert!(memory.is_empty());
        assert_eq!(memory.recall(&again), None);
    }

    #[test]
    fn canonical_json_sorts_nested_keys() {
        assert_eq!(
            canonical_json(&json!({"z": [ {"b": 1, "a": "x/y"} ], "a": null})),
            r#"{"a":null,"z":[{"a":"x/y","b":1}]}"#
        );
    }
}
