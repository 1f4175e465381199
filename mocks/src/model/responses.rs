//! OpenAI Responses (`POST /v1/responses`): an answer as a `response` object, or as the named
//! events `response.created`, `response.in_progress`, per output item `output_item.added`, its
//! content part or argument deltas and their `done` events, `output_item.done`, and
//! `response.completed`, each with its `sequence_number`.

use serde_json::{Value, json};

use super::answer::Answer;
use super::sse::Event;

fn id(answer: &Answer) -> String {
    format!("resp_ski{:08}", answer.number)
}

fn message_id(answer: &Answer) -> String {
    format!("msg_ski{:08}", answer.number)
}

fn call_item_id(answer: &Answer, index: usize) -> String {
    format!("fc_ski{:08}x{index}", answer.number)
}

fn call_id(answer: &Answer, index: usize) -> String {
    format!("call_ski{:08}x{index}", answer.number)
}

fn usage(answer: &Answer) -> Value {
    json!({
        "input_tokens": answer.input_tokens,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": answer.output_tokens,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": answer.input_tokens + answer.output_tokens
    })
}

/// The content part of the message item: `output_text` or `refusal`, with `text` so far.
fn part(answer: &Answer, text: &str) -> Value {
    if answer.refusal.is_some() {
        json!({"type": "refusal", "refusal": text})
    } else {
        json!({"type": "output_text", "text": text, "annotations": [], "logprobs": []})
    }
}

fn message_item(answer: &Answer, done: bool) -> Option<Value> {
    let text = answer.full_text().or_else(|| answer.full_refusal())?;
    let (status, content) = if done {
        ("completed", json!([part(answer, &text)]))
    } else {
        ("in_progress", json!([]))
    };
    Some(json!({
        "id": message_id(answer),
        "type": "message",
        "status": status,
        "role": "assistant",
        "content": content
    }))
}

fn call_item(answer: &Answer, index: usize, done: bool) -> Value {
    let call = &answer.calls[index];
    json!({
        "id": call_item_id(answer, index),
        "type": "function_call",
        "status": if done { "completed" } else { "in_progress" },
        "arguments": if done { call.arguments.as_str() } else { "" },
        "call_id": call_id(answer, index),
        "name": call.name
    })
}

fn output(answer: &Answer) -> Vec<Value> {
    message_item(answer, true)
        .into_iter()
        .chain((0..answer.calls.len()).map(|index| call_item(answer, index, true)))
        .collect()
}

/// The `response` object, `completed` with its output and usage or `in_progress` without.
fn response(answer: &Answer, request: &Value, completed: bool) -> Value {
    let echo = |field: &str| request.get(field).cloned().unwrap_or(Value::Null);
    json!({
        "id": id(answer),
        "object": "response",
        "created_at": answer.created,
        "status": if completed { "completed" } else { "in_progress" },
        "background": false,
        "error": null,
        "incomplete_details": null,
        "instructions": echo("instructions"),
        "max_output_tokens": echo("max_output_tokens"),
        "model": answer.model,
        "output": if completed { output(answer) } else { Vec::new() },
        "parallel_tool_calls": request.get("parallel_tool_calls").cloned().unwrap_or(json!(true)),
        "previous_response_id": echo("previous_response_id"),
        "reasoning": {"effort": null, "summary": null},
        "store": request.get("store").cloned().unwrap_or(json!(true)),
        "temperature": request.get("temperature").cloned().unwrap_or(json!(1.0)),
        "text": {"format": {"type": "text"}, "verbosity": "medium"},
        "tool_choice": request.get("tool_choice").cloned().unwrap_or(json!("auto")),
        "tools": request.get("tools").cloned().unwrap_or(json!([])),
        "top_p": request.get("top_p").cloned().unwrap_or(json!(1.0)),
        "truncation": "disabled",
        "usage": if completed { usage(answer) } else { Value::Null },
        "user": null,
        "metadata": request.get("metadata").cloned().unwrap_or(json!({}))
    })
}

/// The whole `response` object.
pub fn complete(answer: &Answer, request: &Value) -> Value {
    response(answer, request, true)
}

struct Stream {
    events: Vec<Event>,
}

impl Stream {
    fn push(&mut self, kind: &str, mut data: Value, paced: bool) {
        data["type"] = json!(kind);
        data["sequence_number"] = json!(self.events.len());
        let event = Event::named(kind, &data);
        self.events.push(if paced { event.paced() } else { event });
    }
}

/// The event stream of the answer.
pub fn stream(answer: &Answer, request: &Value) -> Vec<Event> {
    let mut out = Stream { events: Vec::new() };
    out.push(
        "response.created",
        json!({"response": response(answer, request, false)}),
        false,
    );
    out.push(
        "response.in_progress",
        json!({"response": response(answer, request, false)}),
        false,
    );
    let mut output_index = 0;
    if let Some(item) = message_item(answer, false) {
        let item_id = message_id(answer);
        let at = json!({"item_id": item_id, "output_index": 0, "content_index": 0});
        let with = |extra: Value| {
            let mut data = at.clone();
            if let (Some(data), Some(extra)) = (data.as_object_mut(), extra.as_object()) {
                data.extend(extra.clone());
            }
            data
        };
        out.push(
            "response.output_item.added",
            json!({"output_index": 0, "item": item}),
            false,
        );
        out.push(
            "response.content_part.added",
            with(json!({"part": part(answer, "")})),
            false,
        );
        if let Some(pieces) = &answer.text {
            for piece in pieces {
                out.push(
                    "response.output_text.delta",
                    with(json!({"delta": piece, "logprobs": []})),
                    true,
                );
            }
            let text = pieces.concat();
            out.push(
                "response.output_text.done",
                with(json!({"text": text, "logprobs": []})),
                false,
            );
            out.push(
                "response.content_part.done",
                with(json!({"part": part(answer, &text)})),
                false,
            );
        } else if let Some(pieces) = &answer.refusal {
            for piece in pieces {
                out.push(
                    "response.refusal.delta",
                    with(json!({"delta": piece})),
                    true,
                );
            }
            let text = pieces.concat();
            out.push(
                "response.refusal.done",
                with(json!({"refusal": text})),
                false,
            );
            out.push(
                "response.content_part.done",
                with(json!({"part": part(answer, &text)})),
                false,
            );
        }
        out.push(
            "response.output_item.done",
            json!({"output_index": 0, "item": message_item(answer, true)}),
            false,
        );
        output_index = 1;
    }
    for (index, call) in answer.calls.iter().enumerate() {
        let item_id = call_item_id(answer, index);
        let at = output_index + index;
        out.push(
            "response.output_item.added",
            json!({"output_index": at, "item": call_item(answer, index, false)}),
            true,
        );
        for piece in &call.pieces {
            out.push(
                "response.function_call_arguments.delta",
                json!({"item_id": item_id, "output_index": at, "delta": piece}),
                true,
            );
        }
        out.push(
            "response.function_call_arguments.done",
            json!({"item_id": item_id, "output_index": at, "name": call.name,
                   "arguments": call.arguments}),
            false,
        );
        out.push(
            "response.output_item.done",
            json!({"output_index": at, "item": call_item(answer, index, true)}),
            false,
        );
    }
    out.push(
        "response.completed",
        json!({"response": response(answer, request, true)}),
        false,
    );
    out.events
}
