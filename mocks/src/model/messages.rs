//! Anthropic Messages (`POST /v1/messages`): an answer as a `message` object, or as the events
//! `message_start`, per content block `content_block_start`, its `text_delta` or
//! `input_json_delta` deltas and `content_block_stop` (a `ping` after the first start), then
//! `message_delta` with the stop reason and the output usage, and `message_stop`.

use serde_json::{Value, json};

use super::answer::Answer;
use super::sse::Event;

fn id(answer: &Answer) -> String {
    format!("msg_ski{:08}", answer.number)
}

fn tool_use_id(answer: &Answer, index: usize) -> String {
    format!("toolu_ski{:08}x{index}", answer.number)
}

fn stop_reason(answer: &Answer) -> &'static str {
    if !answer.calls.is_empty() {
        "tool_use"
    } else if answer.refusal.is_some() {
        "refusal"
    } else {
        "end_turn"
    }
}

fn usage(answer: &Answer, output_tokens: u64) -> Value {
    json!({
        "input_tokens": answer.input_tokens,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
        "output_tokens": output_tokens,
        "service_tier": "standard"
    })
}

/// The text of the first block: the text, or the refusal's words.
fn text(answer: &Answer) -> Option<&Vec<String>> {
    answer.text.as_ref().or(answer.refusal.as_ref())
}

fn message(answer: &Answer, content: Vec<Value>, stop: Option<&str>, output_tokens: u64) -> Value {
    json!({
        "id": id(answer),
        "type": "message",
        "role": "assistant",
        "model": answer.model,
        "content": content,
        "stop_reason": stop,
        "stop_sequence": null,
        "usage": usage(answer, output_tokens)
    })
}

/// The whole `message` object.
pub fn complete(answer: &Answer) -> Value {
    let mut content = Vec::new();
    if let Some(pieces) = text(answer) {
        content.push(json!({"type": "text", "text": pieces.concat()}));
    }
    for (index, call) in answer.calls.iter().enumerate() {
        let input: Value = serde_json::from_str(&call.arguments).unwrap_or_else(|_| json!({}));
        content.push(json!({
            "type": "tool_use",
            "id": tool_use_id(answer, index),
            "name": call.name,
            "input": input
        }));
    }
    message(
        answer,
        content,
        Some(stop_reason(answer)),
        answer.output_tokens,
    )
}

/// The event stream of the answer.
pub fn stream(answer: &Answer) -> Vec<Event> {
    let mut events = vec![Event::named(
        "message_start",
        &json!({"type": "message_start", "message": message(answer, Vec::new(), None, 1)}),
    )];
    let mut index = 0;
    let start = |events: &mut Vec<Event>, index: usize, block: Value| {
        let event = Event::named(
            "content_block_start",
            &json!({"type": "content_block_start", "index": index, "content_block": block}),
        );
        events.push(if index == 0 { event } else { event.paced() });
        if index == 0 {
            events.push(Event::named("ping", &json!({"type": "ping"})));
        }
    };
    let stop = |events: &mut Vec<Event>, index: usize| {
        events.push(Event::named(
            "content_block_stop",
            &json!({"type": "content_block_stop", "index": index}),
        ));
    };
    if let Some(pieces) = text(answer) {
        start(&mut events, index, json!({"type": "text", "text": ""}));
        for piece in pieces {
            events.push(
                Event::named(
                    "content_block_delta",
                    &json!({"type": "content_block_delta", "index": index,
                            "delta": {"type": "text_delta", "text": piece}}),
                )
                .paced(),
            );
        }
        stop(&mut events, index);
        index += 1;
    }
    for (call_index, call) in answer.calls.iter().enumerate() {
        start(
            &mut events,
            index,
            json!({"type": "tool_use", "id": tool_use_id(answer, call_index),
                   "name": call.name, "input": {}}),
        );
        for piece in &call.pieces {
            events.push(
                Event::named(
                    "content_block_delta",
                    &json!({"type": "content_block_delta", "index": index,
                            "delta": {"type": "input_json_delta", "partial_json": piece}}),
                )
                .paced(),
            );
        }
        stop(&mut events, index);
        index += 1;
    }
    events.push(Event::named(
        "message_delta",
        &json!({"type": "message_delta",
                "delta": {"stop_reason": stop_reason(answer), "stop_sequence": null},
                "usage": {"output_tokens": answer.output_tokens}}),
    ));
    events.push(Event::named(
        "message_stop",
        &json!({"type": "message_stop"}),
    ));
    events
}
