//! `session/export` as JSONL: a header line describing the session, then one line per
//! conversation entry, every object with its keys sorted, and a final newline.
//!
//! ```text
//! {"cwd":"/w","id":"sess_…","timestamp":"2026-01-01T00:00:00.000Z","type":"session","version":1}
//! {"message":{"content":"hi","role":"user"}}
//! {"message":{"content":"hi","role":"assistant"}}
//! ```

use serde_json::json;

use super::clock::rfc3339;
use super::model;
use super::policy::canonical_json;
use super::store::{HistoryEntry, Session, StoredPrompt, ToolRecord};

/// The only export format.
pub const FORMAT_JSONL: &str = "jsonl";

/// The MIME type of the export.
pub const MIME_TYPE: &str = "application/x-ndjson";

/// The session as JSONL.
pub fn jsonl(session: &Session) -> String {
    let mut out = String::new();
    let mut line = |value: serde_json::Value| {
        out.push_str(&canonical_json(&value));
        out.push('\n');
    };
    line(json!({
        "type": "session",
        "version": 1,
        "id": session.id,
        "timestamp": rfc3339(session.updated),
        "cwd": session.cwd,
    }));
    for entry in &session.history {
        match entry {
            HistoryEntry::User {
                prompt: StoredPrompt::Text(text),
                ..
            } => line(json!({
                "message": { "role": "user", "content": text }
            })),
            HistoryEntry::User {
                prompt: StoredPrompt::Blocks(prompt),
                ..
            } => line(json!({
                "message": { "role": "user", "content": model::describe(prompt) }
            })),
            HistoryEntry::Agent { text, .. } => line(json!({
                "message": { "role": "assistant", "content": text }
            })),
            HistoryEntry::Tool(tool) => {
                let ToolRecord {
                    id,
                    name,
                    input,
                    output,
                } = &**tool;
                line(json!({
                    "message": {
                        "role": "assistant",
                        "content": "",
                        "tool_calls": [{
                            "id": id,
                            "type": "function",
                            "function": { "name": name, "arguments": canonical_json(input) },
                        }],
                    }
                }));
                line(json!({
                    "message": {
                        "role": "tool",
                        "name": name,
                        "tool_call_id": id,
                        "content": canonical_json(output),
                    }
                }));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::acp::ContentBlock;
    use crate::acp::agent::store::Store;
    use std::time::SystemTime;

    #[test]
    fn export_has_a_sorted_header_and_one_line_per_message() {
        let mut store = Store::default();
        let id = store.create("/w/a b".into(), None, SystemTime::UNIX_EPOCH);
        let session = store.get_mut(&id).unwrap();
        session.history.push(HistoryEntry::user(
            &[ContentBlock::text("hi/there")],
            "msg_1".into(),
        ));
        session.history.push(HistoryEntry::tool(
            "call_1".into(),
            "read_text_file".into(),
            json!({"path": "/w/x"}),
            json!({"content": "x"}),
        ));
        session
            .history
            .push(HistoryEntry::agent("hi/there".into(), "msg_2".into()));
        let text = jsonl(store.get(&id).unwrap());
        assert!(text.ends_with('\n'));
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 5);
        assert_eq!(
            lines[0],
            format!(
                r#"{{"cwd":"/w/a b","id":"{id}","timestamp":"1970-01-01T00:00:00.000Z","type":"session","version":1}}"#
            )
        );
        assert_eq!(
            lines[1],
            r#"{"message":{"content":"hi/there","role":"user"}}"#
        );
        assert!(lines[2].contains(r#""tool_calls""#));
        assert!(lines[3].contains(r#""tool_call_id":"call_1""#));
        assert_eq!(
            lines[4],
            r#"{"message":{"content":"hi/there","role":"assistant"}}"#
        );
    }
}
