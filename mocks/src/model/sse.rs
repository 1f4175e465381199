//! Server-sent events as the model APIs write them: an optional `event:` line, one `data:` line
//! and a blank line; whether the fake waits the answer's delay before writing each.

use serde_json::Value;

/// One event of a stream.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    /// The `event:` line's name (Responses and Messages name every event, Chat Completions none).
    pub name: Option<String>,
    /// The `data:` line: compact JSON, or `[DONE]`.
    pub data: String,
    /// Whether the answer's per-piece delay is waited before this event (a slow stream).
    pub paced: bool,
}

impl Event {
    /// A named event whose data is `data`.
    pub fn named(name: &str, data: &Value) -> Event {
        Event {
            name: Some(name.into()),
            data: data.to_string(),
            paced: false,
        }
    }

    /// An unnamed event whose data is `data`.
    pub fn data(data: &Value) -> Event {
        Event {
            name: None,
            data: data.to_string(),
            paced: false,
        }
    }

    /// Chat Completions' end of stream, `data: [DONE]`.
    pub fn done() -> Event {
        Event {
            name: None,
            data: "[DONE]".into(),
            paced: false,
        }
    }

    /// This event with the per-piece delay before it.
    pub fn paced(mut self) -> Event {
        self.paced = true;
        self
    }

    /// The event's bytes on the wire.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = String::with_capacity(self.data.len() + 32);
        if let Some(name) = &self.name {
            out.push_str("event: ");
            out.push_str(name);
            out.push('\n');
        }
        out.push_str("data: ");
        out.push_str(&self.data);
        out.push_str("\n\n");
        out.into_bytes()
    }
}
