//! OpenAI Chat Completions (`POST /v1/chat/completions`): an answer as a `chat.completion`
//! object, or as `chat.completion.chunk` events ending with `data: [DONE]` (the usage chunk,
//! with empty `choices`, only when `stream_options.include_usage` asks for it).

use serde_json::{Value, json};

use super::answer::Answer;
use super::sse::Event;

fn id(answer: &Answer) -> String {
    format!("chatcmpl-ski{:08}", answer.number)
}

fn call_id(answer: &Answer, index: usize) -> String {
    format!("call_ski{:08}x{index}", answer.number)
}

fn finish_reason(answer: &Answer) -> &'static str {
    if answer.calls.is_empty() {
        "stop"
    } else {
        "tool_calls"
    }
}

fn usage(answer: &Answer) -> Value {
    json!({
        "prompt_tokens": answer.input_tokens,
        "completion_tokens": answer.output_tokens,
        "total_tokens": answer.input_tokens + answer.output_tokens,
        "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
        "completion_tokens_details": {
            "reasoning_tokens": 0, "audio_tokens": 0,
            "accepted_prediction_tokens": 0, "rejected_prediction_tokens": 0
        }
    })
}

/// The `chat.completion` object.
pub fn completion(answer: &Answer) -> Value {
    let tool_calls: Vec<Value> = answer
        .calls
        .iter()
        .enumerate()
        .map(|(index, call)| {
            json!({
                "id": call_id(answer, index),
                "type": "function",
                "function": {"name": call.name, "arguments": call.arguments}
            })
        })
        .collect();
    let mut message = json!({
        "role": "assistant",
        "content": answer.full_text(),
        "refusal": answer.full_refusal(),
        "annotations": []
    });
    if !tool_calls.is_empty() {
        message["tool_calls"] = Value::Array(tool_calls);
    }
    json!({
        "id": id(answer),
        "object": "chat.completion",
        "created": answer.created,
        "model": answer.model,
        "choices": [{
            "index": 0,
            "message": message,
            "logprobs": null,
            "finish_reason": finish_reason(answer)
        }],
        "usage": usage(answer),
        "service_tier": "default",
        "system_fingerprint": "fp_ski"
    })
}

fn chunk(answer: &Answer, delta: Value, finish_reason: Option<&str>) -> Value {
    json!({
        "id": id(answer),
        "object": "chat.completion.chunk",
        "created": answer.created,
        "model": answer.model,
        "service_tier": "default",
        "system_fingerprint": "fp_ski",
        "choices": [{
            "index": 0,
            "delta": delta,
            "logprobs": null,
            "finish_reason": finish_reason
        }]
    })
}

/// The stream: a first chunk with the role, the text or refusal pieces, each tool call's first
/// chunk (id, name, empty arguments) then its argument pieces, a chunk with the finish reason,
/// the usage chunk if asked for, `[DONE]`.
pub fn stream(answer: &Answer, include_usage: bool) -> Vec<Event> {
    let mut events = Vec::new();
    let first = if answer.refusal.is_some() {
        json!({"role": "assistant", "content": null, "refusal": null})
    } else {
        json!({"role": "assistant", "content": "", "refusal": null})
    };
    events.push(Event::data(&chunk(answer, first, None)));
    for piece in answer.text.iter().flatten() {
        events.push(Event::data(&chunk(answer, json!({"content": piece}), None)).paced());
    }
    for piece in answer.refusal.iter().flatten() {
        events.push(Event::data(&chunk(answer, json!({"refusal": piece}), None)).paced());
    }
    for (index, call) in answer.calls.iter().enumerate() {
        let opening = json!({"tool_calls": [{
            "index": index,
            "id": call_id(answer, index),
            "type": "function",
            "function": {"name": call.name, "arguments": ""}
        }]});
        events.push(Event::data(&chunk(answer, opening, None)).paced());
        for piece in &call.pieces {
            let delta = json!({"tool_calls": [{"index": index, "function": {"arguments": piece}}]});
            events.push(Event::data(&chunk(answer, delta, None)).paced());
        }
    }
    events.push(Event::data(&chunk(
        answer,
        json!({}),
        Some(finish_reason(answer)),
    )));
    if include_usage {
        let mut last = chunk(answer, json!({}), None);
        last["choices"] = json!([]);
        last["usage"] = usage(answer);
        events.push(Event::data(&last));
    }
    events.push(Event::done());
    events
}
