//! `${...}` placeholders in script values: what names exist, how they are checked when a script
//! loads, and how they are filled in when a step runs.
//!
//! A string that is exactly one placeholder is replaced by the JSON value itself (so `"${id}"`
//! keeps a numeric id a number); placeholders inside longer strings are replaced by their text.
//! `$${` writes a literal `${`.

use std::borrow::Cow;
use std::sync::Arc;

use serde_json::Value;

use super::runtime::inbound::Inbound;

/// The placeholder names, for messages; `match.N`, `params.PATH`, `reply.PATH` and `env.NAME`
/// take a suffix.
pub const NAMES: &[&str] = &[
    "session",
    "id",
    "method",
    "prompt",
    "previous_prompt",
    "first_prompt",
    "match.N",
    "params",
    "params.PATH",
    "reply",
    "reply.PATH",
    "uuid",
    "turn",
    "pid",
    "agent",
    "model",
    "identity",
    "env.NAME",
];

/// The agent's own names, the same for every sequence: shared, not copied per message.
#[derive(Debug, Clone, Default)]
pub struct AgentNames {
    /// The kiro agent name.
    pub agent: String,
    /// The kiro model.
    pub model: String,
    /// The agent's identity (`INTERCOM_SESSION_ID`).
    pub identity: Option<String>,
}

/// The values placeholders are filled from.
#[derive(Debug, Clone, Default)]
pub struct Vars {
    /// The current session id.
    pub session: Option<Arc<str>>,
    /// The triggering message: `${id}`, `${method}` and `${params...}` read it.
    pub trigger: Option<Arc<Inbound>>,
    /// The prompt text.
    pub prompt: Option<Arc<str>>,
    /// The session's prompt before this one (from its history, also after a reload).
    pub previous_prompt: Option<Arc<str>>,
    /// The session's first prompt (from its history, also after a reload).
    pub first_prompt: Option<Arc<str>>,
    /// Captures of the prompt pattern.
    pub captures: Captures,
    /// The last reply received by a `request` step.
    pub reply: Option<Value>,
    /// The number of prompts received so far.
    pub turn: u64,
    /// `${agent}`, `${model}` and `${identity}`.
    pub names: Option<Arc<AgentNames>>,
}

/// Checks that every placeholder in `text` has a known name.
pub fn check_str(text: &str) -> Result<(), String> {
    for piece in parse(text) {
        if let Piece::Var(name) = piece
            && !known(name)
        {
            return Err(format!(
                "unknown placeholder ${{{name}}}; known: {}",
                NAMES.join(", ")
            ));
        }
        if let Piece::Unclosed = piece {
            return Err(format!("unclosed placeholder in {text:?}"));
        }
    }
    Ok(())
}

/// Checks every string (and object key) inside `value`.
pub fn check_value(value: &Value) -> Result<(), String> {
    match value {
        Value::String(text) => check_str(text),
        Value::Array(items) => items.iter().try_for_each(check_value),
        Value::Object(map) => map.iter().try_for_each(|(key, value)| {
            check_str(key)?;
            check_value(value)
        }),
        _ => Ok(()),
    }
}

fn known(name: &str) -> bool {
    matches!(
        name,
        "session"
            | "id"
            | "method"
            | "prompt"
            | "previous_prompt"
            | "first_prompt"
            | "params"
            | "reply"
            | "uuid"
            | "turn"
            | "pid"
            | "agent"
            | "model"
            | "identity"
    ) || ["match.", "params.", "reply.", "env."]
        .iter()
        .any(|prefix| {
            name.strip_prefix(prefix)
                .is_some_and(|rest| !rest.is_empty())
        })
}

enum Piece<'a> {
    Text(&'a str),
    Dollar,
    Var(&'a str),
    Unclosed,
}

fn parse(text: &str) -> Vec<Piece<'_>> {
    let mut pieces = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find('$') {
        let after = &rest[start + 1..];
        if after.starts_with("${") {
            pieces.push(Piece::Text(&rest[..start]));
            pieces.push(Piece::Dollar);
            rest = &after[1..];
            continue;
        }
        if let Some(body) = after.strip_prefix('{') {
            pieces.push(Piece::Text(&rest[..start]));
            match body.find('}') {
                Some(end) => {
                    pieces.push(Piece::Var(&body[..end]));
                    rest = &body[end + 1..];
                }
                None => {
                    pieces.push(Piece::Unclosed);
                    return pieces;
                }
            }
            continue;
        }
        pieces.push(Piece::Text(&rest[..=start]));
        rest = after;
    }
    pieces.push(Piece::Text(rest));
    pieces
}

impl Vars {
    /// The value of one placeholder; `None` when it has no value here.
    pub fn lookup(&self, name: &str) -> Option<Value> {
        let trigger = self.trigger.as_deref();
        let names = self.names.as_deref();
        match name {
            "session" => self.session.as_deref().map(Value::from),
            "id" => trigger?
                .id
                .as_ref()
                .map(|id| serde_json::to_value(id).unwrap_or(Value::Null)),
            "method" => Some(Value::String(trigger?.method.clone())),
            "prompt" => self.prompt.as_deref().map(Value::from),
            "previous_prompt" => Some(Value::from(self.previous_prompt.as_deref().unwrap_or(""))),
            "first_prompt" => Some(Value::from(self.first_prompt.as_deref().unwrap_or(""))),
            "params" => trigger?.params_value().cloned(),
            "reply" => self.reply.clone(),
            "uuid" => Some(Value::String(uuid::Uuid::new_v4().to_string())),
            "turn" => Some(Value::from(self.turn)),
            "pid" => Some(Value::from(std::process::id())),
            "agent" => Some(Value::String(names?.agent.clone())),
            "model" => Some(Value::String(names?.model.clone())),
            "identity" => names?.identity.clone().map(Value::String),
            _ => {
                if let Some(key) = name.strip_prefix("match.") {
                    return self.captures.get(key).map(|s| Value::String(s.to_owned()));
                }
                if let Some(path) = name.strip_prefix("params.") {
                    return pointer(trigger?.params_value()?, path);
                }
                if let Some(path) = name.strip_prefix("reply.") {
                    return pointer(self.reply.as_ref()?, path);
                }
                if let Some(var) = name.strip_prefix("env.") {
                    return std::env::var(var).ok().map(Value::String);
                }
                None
            }
        }
    }

    /// Fills in the placeholders of a string.
    pub fn expand_str(&self, text: &str) -> String {
        self.expand_text(text).into_owned()
    }

    /// As [`Vars::expand_str`], borrowing `text` when it has no placeholder.
    pub fn expand_text<'t>(&self, text: &'t str) -> Cow<'t, str> {
        if !text.contains('$') {
            return Cow::Borrowed(text);
        }
        let mut out = String::with_capacity(text.len());
        for piece in parse(text) {
            match piece {
                Piece::Text(t) => out.push_str(t),
                Piece::Dollar => out.push('$'),
                Piece::Var(name) => match self.lookup(name) {
                    Some(Value::String(s)) => out.push_str(&s),
                    Some(Value::Null) | None => {}
                    Some(other) => out.push_str(&other.to_string()),
                },
                Piece::Unclosed => {}
            }
        }
        Cow::Owned(out)
    }

    /// Fills in the placeholders of every string inside `value`.
    pub fn expand(&self, value: &Value) -> Value {
        match value {
            Value::String(text) => {
                if let Some(name) = whole_placeholder(text) {
                    return self.lookup(name).unwrap_or(Value::Null);
                }
                Value::String(self.expand_str(text))
            }
            Value::Array(items) => Value::Array(items.iter().map(|v| self.expand(v)).collect()),
            Value::Object(map) => Value::Object(
                map.iter()
                    .map(|(key, value)| (self.expand_str(key), self.expand(value)))
                    .collect(),
            ),
            other => other.clone(),
        }
    }
}

fn whole_placeholder(text: &str) -> Option<&str> {
    let body = text.strip_prefix("${")?.strip_suffix('}')?;
    (!body.contains('}') && !body.contains("${")).then_some(body)
}

/// Looks up a dotted path (`a.b.0.c`) in a JSON value.
fn pointer(value: &Value, path: &str) -> Option<Value> {
    let mut current = value;
    for key in path.split('.') {
        current = match current {
            Value::Object(map) => map.get(key)?,
            Value::Array(items) => items.get(key.parse::<usize>().ok()?)?,
            _ => return None,
        };
    }
    Some(current.clone())
}

/// The captured groups of a matching prompt.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Captures {
    /// By number (0 is the whole match).
    pub numbered: Vec<Option<String>>,
    /// By name.
    pub named: Vec<(String, String)>,
}

impl Captures {
    /// The group with this number or name.
    pub fn get(&self, key: &str) -> Option<&str> {
        if let Ok(index) = key.parse::<usize>() {
            return self.numbered.get(index)?.as_deref();
        }
        self.named
            .iter()
            .find(|(name, _)| name == key)
            .map(|(_, value)| value.as_str())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn whole_placeholders_keep_their_json_type() {
        let params = r#"{"a": {"b": [10, 20]}}"#.to_owned();
        let vars = Vars {
            trigger: Some(Arc::new(Inbound {
                method: "m".to_owned(),
                id: Some(ski::jsonrpc::RequestId::Number(7)),
                params: Some(super::super::runtime::params::Params::new(
                    serde_json::value::RawValue::from_string(params).unwrap(),
                )),
                jsonrpc: true,
            })),
            session: Some("s-1".into()),
            ..Vars::default()
        };
        let value = json!({"id": "${id}", "text": "in ${session}: ${params.a.b.1}", "k": "$${x}"});
        assert_eq!(
            vars.expand(&value),
            json!({"id": 7, "text": "in s-1: 20", "k": "${x}"})
        );
    }

    #[test]
    fn unknown_and_unclosed_placeholders_are_rejected() {
        assert!(check_str("${session} ${match.1} ${env.HOME}").is_ok());
        assert!(
            check_str("${sesion}")
                .unwrap_err()
                .contains("unknown placeholder ${sesion}")
        );
        assert!(check_str("${session").unwrap_err().contains("unclosed"));
        assert!(check_str("cost: $5 and $${literal}").is_ok());
    }
}
