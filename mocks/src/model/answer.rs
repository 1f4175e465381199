//! What one answer holds before any API shapes it: the text, refusal or tool calls cut into
//! stream pieces, the pacing, the ids and the token usage, counted deterministically from the
//! request and the answer (one token per whitespace-separated word, at least one).

use std::time::Duration;

use serde_json::Value;

use super::record::Api;
use super::script::{Reply, split_chunks};

/// One tool call ready to send: its name, its arguments as a JSON string and that string cut
/// into stream pieces.
#[derive(Debug, Clone)]
pub struct PlannedCall {
    pub name: String,
    pub arguments: String,
    pub pieces: Vec<String>,
}

/// An answer ready to render in any API's shape.
#[derive(Debug, Clone)]
pub struct Answer {
    /// The model named by the request (echoed back).
    pub model: String,
    /// A number unique in this fake, for the answer's ids.
    pub number: u64,
    /// Unix seconds for `created`/`created_at`.
    pub created: u64,
    pub text: Option<Vec<String>>,
    pub refusal: Option<Vec<String>>,
    pub calls: Vec<PlannedCall>,
    /// Waited before each stream piece.
    pub delay: Duration,
    pub input_tokens: u64,
    pub output_tokens: u64,
}

impl Answer {
    /// The answer for `reply` (text, tool calls or refusal; `None` for errors and hangs).
    pub fn plan(reply: &Reply, request: &Value, number: u64, created: u64) -> Option<Answer> {
        let (text, refusal, calls, stream) = match reply {
            Reply::Text { text, stream } => (Some(text.as_str()), None, &[][..], stream),
            Reply::ToolCalls {
                text,
                calls,
                stream,
            } => (text.as_deref(), None, &calls[..], stream),
            Reply::Refusal { text, stream } => (None, Some(text.as_str()), &[][..], stream),
            Reply::Error(_) | Reply::Hang => return None,
        };
        let calls: Vec<PlannedCall> = calls
            .iter()
            .map(|call| {
                let arguments = call.arguments.to_string();
                PlannedCall {
                    name: call.name.clone(),
                    pieces: split_chunks(&arguments, stream.chunks),
                    arguments,
                }
            })
            .collect();
        let output_words = text.map_or(0, words)
            + refusal.map_or(0, words)
            + calls
                .iter()
                .map(|call| words(&call.name) + words(&call.arguments))
                .sum::<u64>();
        Some(Answer {
            model: request
                .get("model")
                .and_then(Value::as_str)
                .unwrap_or("ski-fake-model")
                .to_string(),
            number,
            created,
            text: text.map(|text| split_chunks(text, stream.chunks)),
            refusal: refusal.map(|text| split_chunks(text, stream.chunks)),
            calls,
            delay: stream.delay,
            input_tokens: input_tokens(request),
            output_tokens: output_words.max(1),
        })
    }

    /// The whole text, if any.
    pub fn full_text(&self) -> Option<String> {
        self.text.as_ref().map(|pieces| pieces.concat())
    }

    /// The whole refusal, if any.
    pub fn full_refusal(&self) -> Option<String> {
        self.refusal.as_ref().map(|pieces| pieces.concat())
    }
}

fn words(text: &str) -> u64 {
    text.split_whitespace().count() as u64
}

/// Fields whose strings are names, not words a model reads.
const NOT_WORDS: [&str; 6] = [
    "role",
    "type",
    "id",
    "call_id",
    "tool_call_id",
    "tool_use_id",
];

/// One token per word in every string of the request's conversation (`messages`, `input`,
/// `system`, `instructions`, `tools`) but its roles, kinds and ids, at least one.
pub fn input_tokens(request: &Value) -> u64 {
    fn count(value: &Value) -> u64 {
        match value {
            Value::String(text) => words(text),
            Value::Array(items) => items.iter().map(count).sum(),
            Value::Object(fields) => fields
                .iter()
                .filter(|(name, _)| !NOT_WORDS.contains(&name.as_str()))
                .map(|(_, value)| count(value))
                .sum(),
            _ => 0,
        }
    }
    ["messages", "input", "system", "instructions", "tools"]
        .iter()
        .filter_map(|field| request.get(field))
        .map(count)
        .sum::<u64>()
        .max(1)
}

/// The names of the tools a request offers the model, in any API's shape (`tools[].name`, or
/// Chat Completions' `tools[].function.name`).
pub fn offered_tools(request: &Value) -> Vec<String> {
    request["tools"]
        .as_array()
        .map(|tools| {
            tools
                .iter()
                .filter_map(|tool| {
                    tool.get("name")
                        .or_else(|| tool.pointer("/function/name"))
                        .and_then(Value::as_str)
                        .map(str::to_owned)
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The text of the last thing the client's side said in a request to `api`: a user message's
/// text parts or a tool's result (Chat `role: "tool"`, Responses `function_call_output`,
/// Messages `tool_result` blocks), joined by newlines; empty when there is none.
pub fn last_user_text(api: Api, request: &Value) -> String {
    let list = match api {
        Api::ChatCompletions | Api::Messages => &request["messages"],
        Api::Responses => match &request["input"] {
            Value::String(text) => return text.clone(),
            input => input,
        },
        Api::CountTokens | Api::Models | Api::Unknown => return String::new(),
    };
    let Some(last) = list.as_array().and_then(|items| {
        items.iter().rev().find(|item| {
            let role = item.get("role").and_then(Value::as_str);
            let kind = item.get("type").and_then(Value::as_str);
            matches!(role, Some("user") | Some("tool")) || kind == Some("function_call_output")
        })
    }) else {
        return String::new();
    };
    let mut texts = Vec::new();
    if let Some(output) = last.get("output") {
        collect_text(output, &mut texts);
    }
    if let Some(content) = last.get("content") {
        collect_text(content, &mut texts);
    }
    texts.join("\n")
}

/// The text of a content value: a string, or the `text` of text parts and the content of
/// `tool_result` blocks, in order.
fn collect_text(content: &Value, texts: &mut Vec<String>) {
    match content {
        Value::String(text) => texts.push(text.clone()),
        Value::Array(parts) => {
            for part in parts {
                match part.get("type").and_then(Value::as_str) {
                    Some("text" | "input_text" | "output_text") => {
                        if let Some(text) = part.get("text").and_then(Value::as_str) {
                            texts.push(text.to_string());
                        }
                    }
                    Some("tool_result") => {
                        if let Some(inner) = part.get("content") {
                            collect_text(inner, texts);
                        }
                    }
                    _ => {}
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_offered_tools_are_named_in_each_api_shape() {
        let chat = json!({"tools": [{"type": "function", "function": {"name": "read"}}]});
        assert_eq!(offered_tools(&chat), ["read"]);
        let flat = json!({"tools": [{"type": "function", "name": "exec"}, {"name": "Bash"}]});
        assert_eq!(offered_tools(&flat), ["exec", "Bash"]);
        assert!(offered_tools(&json!({"messages": []})).is_empty());
    }

    #[test]
    fn the_last_user_text_is_found_in_each_api_shape() {
        let chat = json!({"messages": [
            {"role": "user", "content": "first"},
            {"role": "assistant", "content": "ok"},
            {"role": "user", "content": [{"type": "text", "text": "second"}]},
            {"role": "tool", "content": "42", "tool_call_id": "call_1"}
        ]});
        assert_eq!(last_user_text(Api::ChatCompletions, &chat), "42");
        let before_tool = json!({"messages": chat["messages"].as_array().unwrap()[..3]});
        assert_eq!(last_user_text(Api::ChatCompletions, &before_tool), "second");
        let responses = json!({"input": [
            {"role": "user", "content": [{"type": "input_text", "text": "hello"}]},
            {"type": "function_call_output", "call_id": "c", "output": "x"}
        ]});
        assert_eq!(last_user_text(Api::Responses, &responses), "x");
        assert_eq!(
            last_user_text(Api::Responses, &json!({"input": "plain"})),
            "plain"
        );
        let messages = json!({"messages": [{"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "t", "content": "r"},
            {"type": "text", "text": "go on"}
        ]}]});
        assert_eq!(last_user_text(Api::Messages, &messages), "r\ngo on");
        assert_eq!(last_user_text(Api::Messages, &json!({})), "");
    }

    #[test]
    fn usage_counts_words() {
        let request = json!({"model": "m", "system": "be brief",
            "messages": [{"role": "user", "content": "what is the weather"}]});
        assert_eq!(input_tokens(&request), 6);
        let answer = Answer::plan(
            &Reply::Text {
                text: "It is sunny today".into(),
                stream: super::super::script::Pacing::default(),
            },
            &request,
            1,
            0,
        )
        .unwrap();
        assert_eq!(answer.output_tokens, 4);
        assert_eq!(answer.model, "m");
        assert_eq!(answer.full_text().as_deref(), Some("It is sunny today"));
    }
}
