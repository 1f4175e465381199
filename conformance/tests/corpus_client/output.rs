//! What the corpus client prints: the lines of `ski acp client connect --json`, one JSON object
//! with sorted keys each.

use serde_json::{Value, json};
use ski::acp::client::driver::sorted_line;
use ski::acp::{SessionUpdate, StopReason};

/// A `session_update` line for `update`, re-encoded.
pub fn update(session: &str, update: &SessionUpdate) {
    let text = match update {
        SessionUpdate::AgentMessageChunk(chunk)
        | SessionUpdate::AgentThoughtChunk(chunk)
        | SessionUpdate::UserMessageChunk(chunk) => chunk.content.as_text().map(str::to_owned),
        _ => None,
    };
    let Ok(payload) = serde_json::to_value(update) else {
        eprintln!("corpus client: cannot re-encode an update");
        return;
    };
    let mut line = json!({
        "type": "session_update",
        "sessionId": session,
        "update": payload.get(SessionUpdate::TAG).cloned().unwrap_or(Value::Null),
        "payload": payload,
    });
    if let Some(text) = text {
        line["text"] = json!(text);
    }
    ski::cli::output::line(sorted_line(&line));
}

/// A `session_update` line for `update` as it arrived.
pub fn raw_update(session: &str, update: &Value) {
    let line = json!({
        "type": "session_update",
        "sessionId": session,
        "update": update.get(SessionUpdate::TAG).cloned().unwrap_or(Value::Null),
        "payload": update,
    });
    ski::cli::output::line(sorted_line(&line));
}

/// The `prompt_result` line of a turn.
pub fn prompt_result(session: &str, stop_reason: &StopReason) {
    let line = json!({
        "type": "prompt_result",
        "sessionId": session,
        "stopReason": stop_reason.as_str(),
    });
    ski::cli::output::line(sorted_line(&line));
}
