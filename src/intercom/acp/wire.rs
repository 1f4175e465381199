//! What a spawned agent's lines mean and what the server writes back: the stream dialect
//! (`{method, id?, params}` without `"jsonrpc"`) and the JSON-RPC messages of standard ACP, read
//! by one parser so a hybrid agent works in either dialect.

use serde_json::{Map, Value, json};

use crate::intercom::vocab::RiskLevel;

/// The `reason` of every `session/interrupt`.
pub const INTERRUPT_REASON: &str = "Operator requested termination";

/// One message from the agent.
#[derive(Debug, Clone, PartialEq)]
pub enum Inbound {
    /// `status/update {message}`.
    Status { message: String },
    /// `clearance/request` with its id (a string or a number, echoed back as given).
    Clearance(ClearanceRequest),
    /// `prompt/forward {text, type}` with its id.
    PromptForward {
        id: Value,
        text: String,
        kind: String,
    },
    /// `heartbeat {progress?}`.
    Heartbeat { progress: Option<Value> },
    /// A JSON-RPC response to one of the server's requests.
    Response {
        id: Value,
        outcome: Result<Value, Value>,
    },
    /// ACP `session/update` (only `agent_message_chunk` text is used).
    Update { text: Option<String> },
    /// ACP `session/request_permission`.
    Permission {
        id: Value,
        title: String,
        file_path: String,
        options: Vec<PermissionOption>,
    },
    /// A JSON-RPC request the server does not serve (answered with -32601).
    UnsupportedRequest { id: Value, method: String },
    /// A message that needs nothing (`initialized`, notifications the server does not use).
    Ignored { method: String },
}

/// A clearance request's fields.
#[derive(Debug, Clone, PartialEq)]
pub struct ClearanceRequest {
    pub id: Value,
    pub title: String,
    pub description: Option<String>,
    pub file_path: String,
    pub risk_level: RiskLevel,
    pub diff: Option<String>,
}

/// One option of a permission request.
#[derive(Debug, Clone, PartialEq)]
pub struct PermissionOption {
    pub option_id: String,
    pub kind: String,
}

/// Why a line was skipped; the text is what the log says.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LineError {
    #[error("received malformed JSON: {0}")]
    Malformed(String),
    #[error("unknown method: {0}")]
    UnknownMethod(String),
    #[error("missing required field: {method} params: {field}")]
    MissingField { method: String, field: String },
}

fn field(params: &Map<String, Value>, method: &str, name: &str) -> Result<String, LineError> {
    match params.get(name) {
        Some(Value::String(text)) => Ok(text.clone()),
        Some(Value::Number(number)) => Ok(number.to_string()),
        _ => Err(LineError::MissingField {
            method: method.into(),
            field: name.into(),
        }),
    }
}

fn optional(params: &Map<String, Value>, name: &str) -> Option<String> {
    params.get(name).and_then(Value::as_str).map(str::to_string)
}

fn request_id(message: &Map<String, Value>, method: &str) -> Result<Value, LineError> {
    match message.get("id") {
        Some(id @ (Value::String(_) | Value::Number(_))) => Ok(id.clone()),
        _ => Err(LineError::MissingField {
            method: method.into(),
            field: "id".into(),
        }),
    }
}

/// Parses one non-empty line.
pub fn parse(line: &[u8]) -> Result<Inbound, LineError> {
    let value: Value =
        serde_json::from_slice(line).map_err(|error| LineError::Malformed(error.to_string()))?;
    let Value::Object(message) = value else {
        return Err(LineError::Malformed("not a JSON object".into()));
    };
    let Some(method) = message.get("method").and_then(Value::as_str) else {
        if let Some(id) = message.get("id").filter(|id| !id.is_null())
            && (message.contains_key("result") || message.contains_key("error"))
        {
            let outcome = match message.get("error") {
                Some(error) => Err(error.clone()),
                None => Ok(message.get("result").cloned().unwrap_or(Value::Null)),
            };
            return Ok(Inbound::Response {
                id: id.clone(),
                outcome,
            });
        }
        return Err(LineError::MissingField {
            method: "(none)".into(),
            field: "method".into(),
        });
    };
    let method = method.to_string();
    let empty = Map::new();
    let params = match message.get("params") {
        Some(Value::Object(params)) => params,
        None | Some(Value::Null) => &empty,
        Some(_) => {
            return Err(LineError::MissingField {
                method,
                field: "params (an object)".into(),
            });
        }
    };
    match method.as_str() {
        "status/update" => Ok(Inbound::Status {
            message: field(params, &method, "message")?,
        }),
        "clearance/request" => {
            let id = request_id(&message, &method)?;
            // A risk level outside the set (or none) is taken as low.
            let risk = optional(params, "risk_level")
                .and_then(|risk| risk.parse().ok())
                .unwrap_or(RiskLevel::Low);
            Ok(Inbound::Clearance(ClearanceRequest {
                id,
                title: field(params, &method, "title")?,
                description: optional(params, "description"),
                file_path: field(params, &method, "file_path")?,
                risk_level: risk,
                diff: optional(params, "diff"),
            }))
        }
        "prompt/forward" => Ok(Inbound::PromptForward {
            id: request_id(&message, &method)?,
            text: field(params, &method, "text")?,
            kind: optional(params, "type").unwrap_or_else(|| "continuation".into()),
        }),
        "heartbeat" => Ok(Inbound::Heartbeat {
            progress: params.get("progress").cloned(),
        }),
        "session/update" => {
            let update = params.get("update");
            let chunk = update
                .filter(|u| u["sessionUpdate"] == "agent_message_chunk")
                .and_then(|u| u.pointer("/content/text"))
                .and_then(Value::as_str)
                .map(str::to_string);
            Ok(Inbound::Update { text: chunk })
        }
        "session/request_permission" => {
            let id = request_id(&message, &method)?;
            let tool = params.get("toolCall").cloned().unwrap_or(Value::Null);
            let title = tool["title"].as_str().unwrap_or("permission").to_string();
            let file_path = tool
                .pointer("/locations/0/path")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string();
            let options = params
                .get("options")
                .and_then(Value::as_array)
                .map(|options| {
                    options
                        .iter()
                        .filter_map(|o| {
                            Some(PermissionOption {
                                option_id: o["optionId"].as_str()?.to_string(),
                                kind: o["kind"].as_str().unwrap_or("").to_string(),
                            })
                        })
                        .collect()
                })
                .unwrap_or_default();
            Ok(Inbound::Permission {
                id,
                title,
                file_path,
                options,
            })
        }
        "initialized" => Ok(Inbound::Ignored { method }),
        _ => match message.get("id").filter(|id| !id.is_null()) {
            Some(id) if message.contains_key("jsonrpc") => Ok(Inbound::UnsupportedRequest {
                id: id.clone(),
                method,
            }),
            _ => Err(LineError::UnknownMethod(method)),
        },
    }
}

/// The option a permission answer selects: allow_once, then allow_always when approved;
/// reject_once, then reject_always when rejected; otherwise the first (approve) or the last
/// (reject) option. `None` when the agent offered no options.
pub fn choose_option(options: &[PermissionOption], approved: bool) -> Option<&str> {
    let preferred: &[&str] = if approved {
        &["allow_once", "allow_always"]
    } else {
        &["reject_once", "reject_always"]
    };
    preferred
        .iter()
        .find_map(|kind| options.iter().find(|o| o.kind == *kind))
        .or(if approved {
            options.first()
        } else {
            options.last()
        })
        .map(|o| o.option_id.as_str())
}

/// Lines the server writes. Keys are written in the order shown here (`method`, `id`,
/// `params`), each line ends with `\n`.
pub mod out {
    use super::*;

    fn line(value: &Value) -> String {
        let mut text = value.to_string();
        text.push('\n');
        text
    }

    /// `clearance/response`; `reason` only when there is one (S056's exact shape).
    pub fn clearance_response(id: &Value, status: &str, reason: Option<&str>) -> String {
        let mut params = json!({ "status": status });
        if let Some(reason) = reason {
            params["reason"] = json!(reason);
        }
        line(&json!({ "method": "clearance/response", "id": id, "params": params }))
    }

    /// `prompt/response`.
    pub fn prompt_response(id: &Value, decision: &str, instruction: Option<&str>) -> String {
        line(&json!({
            "method": "prompt/response", "id": id,
            "params": { "decision": decision, "instruction": instruction },
        }))
    }

    /// `prompt/send` (the stream dialect's prompt and steering).
    pub fn prompt_send(text: &str) -> String {
        line(&json!({ "method": "prompt/send", "params": { "text": text } }))
    }

    /// `session/interrupt`.
    pub fn interrupt() -> String {
        line(&json!({ "method": "session/interrupt", "params": { "reason": INTERRUPT_REASON } }))
    }

    /// `nudge` with the count so far.
    pub fn nudge(message: &str, count: u32) -> String {
        line(&json!({ "method": "nudge", "params": { "message": message, "count": count } }))
    }

    /// A JSON-RPC request.
    pub fn request(id: &str, method: &str, params: Value) -> String {
        line(&json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params }))
    }

    /// A JSON-RPC notification.
    pub fn notification(method: &str, params: Value) -> String {
        line(&json!({ "jsonrpc": "2.0", "method": method, "params": params }))
    }

    /// A JSON-RPC result.
    pub fn result(id: &Value, result: Value) -> String {
        line(&json!({ "jsonrpc": "2.0", "id": id, "result": result }))
    }

    /// A JSON-RPC `-32601` error.
    pub fn method_not_found(id: &Value, method: &str) -> String {
        line(&json!({
            "jsonrpc": "2.0", "id": id,
            "error": { "code": -32601, "message": format!("method not found: {method}") },
        }))
    }

    /// An ACP text prompt.
    pub fn prompt_blocks(text: &str) -> Value {
        json!([{ "type": "text", "text": text }])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stream_dialect_parses_and_reports_what_is_wrong() {
        assert_eq!(
            parse(br#"{"method":"status/update","params":{"message":"hello"}}"#),
            Ok(Inbound::Status {
                message: "hello".into()
            })
        );
        assert!(matches!(
            parse(b"{not valid json}"),
            Err(LineError::Malformed(_))
        ));
        assert_eq!(
            parse(br#"{"method":"unknown/method","params":{}}"#),
            Err(LineError::UnknownMethod("unknown/method".into()))
        );
        let missing = parse(br#"{"method":"clearance/request","id":"r","params":{"title":"x"}}"#)
            .unwrap_err();
        assert!(missing.to_string().starts_with("missing required field"));
        assert!(missing.to_string().contains("file_path"));
        assert!(matches!(
            parse(br#"{"method":"clearance/request","params":{"title":"x","file_path":"a"}}"#),
            Err(LineError::MissingField { .. })
        ));
    }

    #[test]
    fn the_clearance_response_has_the_exact_shape_of_s056() {
        assert_eq!(
            out::clearance_response(&json!("req-001"), "approved", None),
            "{\"method\":\"clearance/response\",\"id\":\"req-001\",\"params\":{\"status\":\"approved\"}}\n"
        );
        assert!(
            out::clearance_response(&json!(7), "rejected", Some("wrong file"))
                .contains(r#""id":7,"params":{"status":"rejected","reason":"wrong file"}"#)
        );
    }

    #[test]
    fn acp_messages_are_read_as_responses_updates_and_permissions() {
        assert_eq!(
            parse(br#"{"jsonrpc":"2.0","id":"i-1","result":{"protocolVersion":1}}"#),
            Ok(Inbound::Response {
                id: json!("i-1"),
                outcome: Ok(json!({"protocolVersion":1}))
            })
        );
        assert_eq!(
            parse(br#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"hi"}}}}"#),
            Ok(Inbound::Update { text: Some("hi".into()) })
        );
        let Ok(Inbound::Permission { options, .. }) = parse(
            br#"{"jsonrpc":"2.0","id":3,"method":"session/request_permission","params":{"toolCall":{"title":"Edit"},"options":[{"optionId":"a","kind":"allow_always"},{"optionId":"r","kind":"reject_once"}]}}"#,
        ) else {
            panic!("a permission request");
        };
        assert_eq!(choose_option(&options, true), Some("a"));
        assert_eq!(choose_option(&options, false), Some("r"));
        assert_eq!(choose_option(&[], true), None);
        assert!(matches!(
            parse(br#"{"jsonrpc":"2.0","id":4,"method":"fs/read_text_file","params":{}}"#),
            Ok(Inbound::UnsupportedRequest { .. })
        ));
    }
}
