//! The structure of messages, compared: which messages came in which order (by kind, method and
//! update kind), and per message which fields exist with which JSON kinds and which values say
//! what kind of thing something is (`type`, `sessionUpdate`, `stopReason`, error codes...), what
//! the agent can do (every `true`/`false`) and which agent it is (`agentInfo`'s name and version,
//! the ids of its auth methods), so another release of the agent shows. Values that always vary
//! (ids, session ids, times, paths) are never compared; text only when asked. The items of an
//! array share one path, which holds every kind and value its items have.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::agent::recording::{MessageKind, method_of};

/// Fields whose values name a kind of thing, compared whatever the options.
pub const KIND_FIELDS: &[&str] = &[
    "type",
    "sessionUpdate",
    "stopReason",
    "kind",
    "status",
    "role",
    "method",
    "code",
    "protocolVersion",
    "outcome",
];

/// Paths whose values say which agent answered and how a client logs in to it, compared whatever
/// the options (`--ignore` leaves them out).
pub const IDENTITY_PATHS: &[&str] = &[
    "result.agentInfo.name",
    "result.agentInfo.version",
    "result.authMethods[].id",
];

/// What the comparison leaves out.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Don't compare the values of `text` fields (model output).
    pub ignore_text: bool,
    /// Field paths (dotted, `[]` for array items) left out, with everything under them.
    pub ignore: Vec<String>,
}

impl Options {
    fn ignored(&self, path: &str) -> bool {
        self.ignore.iter().any(|prefix| {
            path == prefix
                || path
                    .strip_prefix(prefix.as_str())
                    .is_some_and(|rest| rest.starts_with('.') || rest.starts_with('['))
        })
    }
}

/// A message's place in the order: kind, method, update kind.
pub fn signature(message: &Value) -> String {
    let kind = MessageKind::of(message);
    let mut out = kind.name().to_owned();
    if let Some(method) = method_of(message) {
        out.push(' ');
        out.push_str(method);
    }
    if let Some(update) = message
        .get("params")
        .and_then(|p| p.get("update"))
        .and_then(|u| u.get("sessionUpdate"))
        .and_then(Value::as_str)
    {
        out.push(' ');
        out.push_str(update);
    }
    out
}

/// One leaf of a message's structure: its JSON kinds and, where values count, its values, each
/// once in the order the items of an array first show them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Leaf {
    kinds: Vec<&'static str>,
    values: Vec<String>,
}

impl Leaf {
    fn add(&mut self, kind: &'static str, value: Option<String>) {
        if !self.kinds.contains(&kind) {
            self.kinds.push(kind);
        }
        if let Some(value) = value
            && !self.values.contains(&value)
        {
            self.values.push(value);
        }
    }
}

/// One item as itself, several as `[a, b]`.
fn listed(items: &[impl AsRef<str>]) -> String {
    match items {
        [] => "?".to_owned(),
        [one] => one.as_ref().to_owned(),
        many => format!(
            "[{}]",
            many.iter()
                .map(AsRef::as_ref)
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn flatten(
    value: &Value,
    path: &str,
    key: &str,
    options: &Options,
    out: &mut BTreeMap<String, Leaf>,
) {
    if !path.is_empty() && options.ignored(path) {
        return;
    }
    let counts = KIND_FIELDS.contains(&key)
        || IDENTITY_PATHS.contains(&path)
        || (key == "text" && !options.ignore_text);
    let value_text = match value {
        Value::String(text) if counts => Some(text.clone()),
        Value::Number(number) if counts => Some(number.to_string()),
        Value::Bool(flag) => Some(flag.to_string()),
        _ => None,
    };
    if !path.is_empty() {
        out.entry(path.to_owned())
            .or_default()
            .add(json_kind(value), value_text);
    }
    match value {
        Value::Object(map) => {
            for (child, item) in map {
                // The id of a message is always rewritten; `jsonrpc` is the codec's.
                if path.is_empty() && (child == "id" || child == "jsonrpc") {
                    continue;
                }
                let child_path = if path.is_empty() {
                    child.clone()
                } else {
                    format!("{path}.{child}")
                };
                flatten(item, &child_path, child, options, out);
            }
        }
        Value::Array(items) => {
            let child_path = format!("{path}[]");
            for item in items {
                flatten(item, &child_path, key, options, out);
            }
        }
        _ => {}
    }
}

/// What changed between a recorded message and the live one, one sentence each.
pub fn compare(recorded: &Value, live: &Value, options: &Options) -> Vec<String> {
    let mut before = BTreeMap::new();
    let mut after = BTreeMap::new();
    flatten(recorded, "", "", options, &mut before);
    flatten(live, "", "", options, &mut after);
    let mut out = Vec::new();
    for (path, leaf) in &before {
        match after.get(path) {
            None => out.push(format!("missing field {path} ({})", listed(&leaf.kinds))),
            Some(now) if now.kinds != leaf.kinds => {
                out.push(format!(
                    "field {path} changed kind: {} -> {}",
                    listed(&leaf.kinds),
                    listed(&now.kinds)
                ));
            }
            Some(now) if now.values != leaf.values => out.push(format!(
                "field {path} changed: {} -> {}",
                listed(&leaf.values),
                listed(&now.values)
            )),
            Some(_) => {}
        }
    }
    for (path, leaf) in &after {
        if !before.contains_key(path) {
            out.push(format!("new field {path} ({})", listed(&leaf.kinds)));
        }
    }
    out
}

/// Signatures with runs of the same one collapsed: how many chunks stream a text is the model's
/// business, not the protocol's.
pub fn collapsed(messages: &[Value]) -> Vec<(String, usize)> {
    let mut out: Vec<(String, usize)> = Vec::new();
    for (index, message) in messages.iter().enumerate() {
        let signature = signature(message);
        if out.last().is_none_or(|(last, _)| *last != signature) {
            out.push((signature, index));
        }
    }
    out
}

/// The longest common subsequence of two signature lists, as index pairs.
pub fn align(recorded: &[(String, usize)], live: &[(String, usize)]) -> Vec<(usize, usize)> {
    let (n, m) = (recorded.len(), live.len());
    let mut table = vec![vec![0usize; m + 1]; n + 1];
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            table[i][j] = if recorded[i].0 == live[j].0 {
                table[i + 1][j + 1] + 1
            } else {
                table[i + 1][j].max(table[i][j + 1])
            };
        }
    }
    let (mut i, mut j) = (0, 0);
    let mut pairs = Vec::new();
    while i < n && j < m {
        if recorded[i].0 == live[j].0 {
            pairs.push((i, j));
            i += 1;
            j += 1;
        } else if table[i + 1][j] >= table[i][j + 1] {
            i += 1;
        } else {
            j += 1;
        }
    }
    pairs
}

/// The differences between the agent lines of one exchange, recorded and live.
pub fn compare_exchange(recorded: &[Value], live: &[Value], options: &Options) -> Vec<String> {
    let before = collapsed(recorded);
    let after = collapsed(live);
    let pairs = align(&before, &after);
    let mut out = Vec::new();
    let mut matched_before = vec![false; before.len()];
    let mut matched_after = vec![false; after.len()];
    for (i, j) in &pairs {
        matched_before[*i] = true;
        matched_after[*j] = true;
        let (signature, at) = &before[*i];
        for change in compare(&recorded[*at], &live[after[*j].1], options) {
            out.push(format!("{signature}: {change}"));
        }
    }
    let missing: Vec<&str> = before
        .iter()
        .zip(&matched_before)
        .filter(|(_, matched)| !**matched)
        .map(|((signature, _), _)| signature.as_str())
        .collect();
    let new: Vec<&str> = after
        .iter()
        .zip(&matched_after)
        .filter(|(_, matched)| !**matched)
        .map(|((signature, _), _)| signature.as_str())
        .collect();
    let mut moved = Vec::new();
    for signature in &missing {
        if new.contains(signature) {
            moved.push(*signature);
        }
    }
    if !moved.is_empty() {
        let order = |list: &[(String, usize)]| {
            list.iter()
                .map(|(s, _)| s.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        };
        out.push(format!(
            "order changed: [{}] -> [{}]",
            order(&before),
            order(&after)
        ));
    }
    out.extend(
        missing
            .iter()
            .filter(|s| !moved.contains(s))
            .map(|s| format!("missing message: {s}")),
    );
    out.extend(
        new.iter()
            .filter(|s| !moved.contains(s))
            .map(|s| format!("new message: {s}")),
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn chunk(text: &str, extra: Option<Value>) -> Value {
        let mut update = json!({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}});
        if let Some(extra) = extra {
            update["_meta"] = extra;
        }
        json!({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "s", "update": update}})
    }

    fn result(id: i64, stop: &str) -> Value {
        json!({"jsonrpc": "2.0", "id": id, "result": {"stopReason": stop}})
    }

    #[test]
    fn identical_structure_with_other_ids_and_chunking_is_no_change() {
        let recorded = [chunk("hel", None), chunk("lo", None), result(3, "end_turn")];
        let live = [chunk("hello", None), result(9, "end_turn")];
        let options = Options {
            ignore_text: true,
            ..Options::default()
        };
        assert_eq!(
            compare_exchange(&recorded, &live, &options),
            Vec::<String>::new()
        );
    }

    #[test]
    fn new_fields_kinds_order_and_missing_messages_are_reported() {
        let recorded = [chunk("a", None), result(3, "end_turn")];
        let live = [result(3, "cancelled"), chunk("a", Some(json!({"x": 1})))];
        let changes = compare_exchange(&recorded, &live, &Options::default());
        assert!(
            changes.iter().any(|c| c.starts_with("order changed")),
            "{changes:?}"
        );
        let live = [chunk("b", Some(json!({"x": 1}))), result(3, "cancelled")];
        let changes = compare_exchange(&recorded, &live, &Options::default());
        assert_eq!(
            changes,
            [
                "notification session/update agent_message_chunk: field params.update.content.text changed: a -> b",
                "notification session/update agent_message_chunk: new field params.update._meta (object)",
                "notification session/update agent_message_chunk: new field params.update._meta.x (number)",
                "result: field result.stopReason changed: end_turn -> cancelled",
            ]
        );
        let changes = compare_exchange(&recorded, &recorded[..1], &Options::default());
        assert_eq!(changes, ["missing message: result"]);
    }

    #[test]
    fn ignored_paths_are_left_out() {
        let options = Options {
            ignore: vec!["result.agentInfo".to_owned()],
            ..Options::default()
        };
        let before = json!({"id": 1, "result": {"agentInfo": {"version": "1"}}});
        let after = json!({"id": 1, "result": {"agentInfo": {"version": "2", "title": "t"}}});
        assert!(compare(&before, &after, &options).is_empty());
    }

    #[test]
    fn a_later_array_items_kind_is_compared() {
        let before = json!({"result": {"content": [{"type": "text"}, {"type": "image"}]}});
        let after = json!({"result": {"content": [{"type": "text"}, {"type": "audio"}]}});
        assert_eq!(
            compare(&before, &after, &Options::default()),
            ["field result.content[].type changed: [text, image] -> [text, audio]"]
        );
    }

    #[test]
    fn flags_and_the_agents_identity_are_compared_its_other_strings_are_not() {
        let before = json!({"result": {
            "agentCapabilities": {"loadSession": true},
            "agentInfo": {"name": "a", "title": "A", "version": "1.0.0"},
            "authMethods": [{"id": "login", "name": "Log in"}]}});
        let after = json!({"result": {
            "agentCapabilities": {"loadSession": false},
            "agentInfo": {"name": "a", "title": "The A", "version": "1.1.0"},
            "authMethods": [{"id": "login", "name": "Sign in"}]}});
        assert_eq!(
            compare(&before, &after, &Options::default()),
            [
                "field result.agentCapabilities.loadSession changed: true -> false",
                "field result.agentInfo.version changed: 1.0.0 -> 1.1.0",
            ]
        );
    }
}
