//! Whether the JSON Schema of an official ACP type declares a property at a place in a payload:
//! the schema oracle's round trip loses a property the type leaves out at its default value
//! (`status: "pending"`, `kind: "other"`, an empty array) as well as one the schema does not
//! define, and only the second is an unknown field (ACP-CORE-023, E-ACP-46).

use schemars::JsonSchema;
use serde_json::Value;

/// How deep a schema is followed through `$ref`, `allOf`, `anyOf` and `oneOf` before giving up.
const MAX_DEPTH: usize = 64;

/// Whether the schema of `T` declares the property at `path` (segments from the root of
/// `payload`, the last one the property's name) for the object `payload` holds there. Branches of
/// `oneOf`/`anyOf` whose `const` properties contradict the payload (another `sessionUpdate`,
/// another `type`) do not count.
pub fn declared<T: JsonSchema>(payload: &Value, path: &[String]) -> bool {
    let schema = schemars::schema_for!(T);
    let root = schema.as_value();
    let walker = Walker {
        defs: root.get("$defs"),
    };
    let Some((name, parents)) = path.split_last() else {
        return true;
    };
    let mut schemas = vec![root];
    let mut value = payload;
    for segment in parents {
        let Some(child) = child_value(value, segment) else {
            return false;
        };
        schemas = walker.children(&schemas, value, segment);
        value = child;
        if schemas.is_empty() {
            return false;
        }
    }
    walker.declares(&schemas, value, name)
}

fn child_value<'a>(value: &'a Value, segment: &str) -> Option<&'a Value> {
    match value {
        Value::Object(map) => map.get(segment),
        Value::Array(items) => segment.parse::<usize>().ok().and_then(|i| items.get(i)),
        _ => None,
    }
}

struct Walker<'a> {
    defs: Option<&'a Value>,
}

impl<'a> Walker<'a> {
    /// The schemas that apply to `value` under `schemas`: references resolved, `allOf` parts
    /// added, and the `anyOf`/`oneOf` branches the value does not contradict.
    fn expand(&self, schemas: &[&'a Value], value: &Value) -> Vec<&'a Value> {
        let mut out = Vec::new();
        for schema in schemas {
            self.expand_one(schema, value, 0, &mut out);
        }
        out
    }

    fn expand_one(&self, schema: &'a Value, value: &Value, depth: usize, out: &mut Vec<&'a Value>) {
        if depth > MAX_DEPTH {
            return;
        }
        out.push(schema);
        if let Some(target) = schema
            .get("$ref")
            .and_then(Value::as_str)
            .and_then(|r| self.resolve(r))
        {
            self.expand_one(target, value, depth + 1, out);
        }
        for part in list(schema, "allOf") {
            self.expand_one(part, value, depth + 1, out);
        }
        for branch in list(schema, "anyOf").chain(list(schema, "oneOf")) {
            let mut nodes = Vec::new();
            self.expand_one(branch, value, depth + 1, &mut nodes);
            if !contradicts(&nodes, value) {
                out.extend(nodes);
            }
        }
    }

    fn resolve(&self, reference: &str) -> Option<&'a Value> {
        let name = reference.strip_prefix("#/$defs/")?;
        self.defs?.get(name)
    }

    /// The schemas of `value[segment]`.
    fn children(&self, schemas: &[&'a Value], value: &Value, segment: &str) -> Vec<&'a Value> {
        let mut out = Vec::new();
        for node in self.expand(schemas, value) {
            match value {
                Value::Object(_) => {
                    if let Some(property) = node.get("properties").and_then(|p| p.get(segment)) {
                        out.push(property);
                    } else if let Some(extra) =
                        node.get("additionalProperties").filter(|a| a.is_object())
                    {
                        out.push(extra);
                    }
                }
                Value::Array(_) => {
                    if let Some(items) = node.get("items").filter(|i| i.is_object()) {
                        out.push(items);
                    }
                }
                _ => {}
            }
        }
        out
    }

    /// Whether one of `schemas` (as they apply to the object `value`) declares `name`, or takes
    /// any property (a map such as `_meta` or `env`).
    fn declares(&self, schemas: &[&'a Value], value: &Value, name: &str) -> bool {
        self.expand(schemas, value).iter().any(|node| {
            node.get("properties")
                .is_some_and(|p| p.get(name).is_some())
                || node
                    .get("additionalProperties")
                    .is_some_and(|a| a.is_object() || a == &Value::Bool(true))
        })
    }
}

fn list<'a>(schema: &'a Value, key: &str) -> impl Iterator<Item = &'a Value> {
    schema
        .get(key)
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
}

/// Whether a branch fixes a property with `const` to another value than the payload's.
fn contradicts(nodes: &[&Value], value: &Value) -> bool {
    let Some(object) = value.as_object() else {
        return false;
    };
    nodes.iter().any(|node| {
        node.get("properties")
            .and_then(Value::as_object)
            .is_some_and(|properties| {
                properties.iter().any(|(key, property)| {
                    match (property.get("const"), object.get(key)) {
                        (Some(expected), Some(actual)) => expected != actual,
                        _ => false,
                    }
                })
            })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use agent_client_protocol_schema::v1 as o;
    use serde_json::json;

    fn path(text: &str) -> Vec<String> {
        text.split('/').skip(1).map(str::to_owned).collect()
    }

    #[test]
    fn a_property_is_declared_only_by_its_own_branch() {
        let tool_call = json!({"sessionId": "s", "update": {"sessionUpdate": "tool_call",
            "toolCallId": "t", "title": "x", "status": "pending"}});
        assert!(declared::<o::SessionNotification>(
            &tool_call,
            &path("/update/status")
        ));
        let chunk = json!({"sessionId": "s", "update": {"sessionUpdate": "agent_message_chunk",
            "content": {"type": "text", "text": "hi"}, "status": "pending"}});
        assert!(!declared::<o::SessionNotification>(
            &chunk,
            &path("/update/status")
        ));
        assert!(!declared::<o::SessionNotification>(
            &chunk,
            &path("/vendor")
        ));
    }

    #[test]
    fn maps_take_any_key() {
        let meta = json!({"sessionId": "s", "_meta": {"vendor": {"x": 1}}});
        assert!(declared::<o::NewSessionResponse>(
            &meta,
            &path("/_meta/vendor")
        ));
    }
}
