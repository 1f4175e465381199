//! Sizes of recorded values in bytes (their length as JSON text, estimated without encoding
//! them, and the memory they hold as `serde_json` values) and the shrinking of one record to a
//! byte budget: the log is bounded by bytes of memory, not only by count.

use std::collections::VecDeque;
use std::mem::size_of;

use serde_json::{Map, Value};

/// What one heap allocation costs beyond the bytes asked for: the allocator's header and its
/// rounding, on average.
const ALLOCATION: usize = 16;

/// The memory a `String` holds on the heap.
pub fn text_memory(text: &str) -> usize {
    if text.is_empty() {
        0
    } else {
        text.len() + ALLOCATION
    }
}

/// The memory `value` holds on the heap, estimated: a parsed JSON value takes several times its
/// text (each member a whole `Value` beside its key and hash), so a log bounded by the text
/// alone would hold several times its bound. An object is an ordered map (`preserve_order`): an entry
/// vector and a hash index, both grown by doubling.
pub fn value_memory(value: &Value) -> usize {
    match value {
        Value::Null | Value::Bool(_) | Value::Number(_) => 0,
        Value::String(text) => text_memory(text),
        Value::Array(items) => {
            let slots = items.len().next_power_of_two();
            let own = if items.is_empty() {
                0
            } else {
                slots * size_of::<Value>() + ALLOCATION
            };
            own + items.iter().map(value_memory).sum::<usize>()
        }
        Value::Object(members) => map_memory(members),
    }
}

/// The memory an object's members hold on the heap, estimated as [`value_memory`] does.
pub fn map_memory(members: &Map<String, Value>) -> usize {
    if members.is_empty() {
        return 0;
    }
    let slots = members.len().next_power_of_two();
    // An entry: its hash, key and value; the index: a position and a control byte per bucket,
    // with room to spare.
    let entries = slots * (size_of::<u64>() + size_of::<String>() + size_of::<Value>());
    let index = slots * 2 * (size_of::<usize>() + 1);
    entries
        + index
        + 2 * ALLOCATION
        + members
            .iter()
            .map(|(key, item)| text_memory(key) + value_memory(item))
            .sum::<usize>()
}

/// The estimated length of `value` as JSON text.
pub fn json_size(value: &Value) -> usize {
    match value {
        Value::Null => 4,
        Value::Bool(_) => 5,
        Value::Number(_) => 8,
        Value::String(text) => text.len() + 2,
        Value::Array(items) => 2 + items.iter().map(|item| json_size(item) + 1).sum::<usize>(),
        Value::Object(members) => {
            2 + members
                .iter()
                .map(|(key, item)| key.len() + 4 + json_size(item))
                .sum::<usize>()
        }
    }
}

/// What stands in for a value that was not kept.
fn not_kept(size: usize) -> Value {
    Value::String(format!("[{size} bytes not kept]"))
}

/// `value` itself when it fits `budget`; otherwise an object keeps its members that fit a
/// quarter of the budget each and the others are replaced by a note of their size (anything else
/// is replaced whole).
pub fn shrink(value: Value, budget: usize) -> Value {
    let size = json_size(&value);
    if size <= budget {
        return value;
    }
    match value {
        Value::Object(members) => Value::Object(
            members
                .into_iter()
                .map(|(key, item)| {
                    let size = json_size(&item);
                    let item = if size <= budget / 4 {
                        item
                    } else {
                        not_kept(size)
                    };
                    (key, item)
                })
                .collect(),
        ),
        _ => not_kept(size),
    }
}

/// `text` cut to at most `budget` bytes (on a character boundary), with a note of what was cut.
pub fn shrink_text(mut text: String, budget: usize) -> String {
    if text.len() <= budget {
        return text;
    }
    let total = text.len();
    let mut end = budget;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text.truncate(end);
    text.push_str(&format!("[{} of {total} bytes not kept]", total - end));
    text
}

/// A list bounded by a count and a total of bytes: beyond either, the oldest entries go first
/// (the newest one always stays).
#[derive(Debug)]
pub struct Bounded<T> {
    items: VecDeque<T>,
    sizes: VecDeque<usize>,
    bytes: usize,
}

impl<T> Default for Bounded<T> {
    fn default() -> Self {
        Bounded {
            items: VecDeque::new(),
            sizes: VecDeque::new(),
            bytes: 0,
        }
    }
}

impl<T> Bounded<T> {
    pub fn push(&mut self, item: T, size: usize, max_count: usize, max_bytes: usize) {
        self.items.push_back(item);
        self.sizes.push_back(size);
        self.bytes += size;
        while self.items.len() > 1
            && (self.items.len() > max_count.max(1) || self.bytes > max_bytes)
        {
            self.items.pop_front();
            self.bytes -= self.sizes.pop_front().unwrap_or(0);
        }
    }

    pub fn iter(&self) -> impl DoubleEndedIterator<Item = &T> + ExactSizeIterator {
        self.items.iter()
    }

    pub fn len(&self) -> usize {
        self.items.len()
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// The total size of the entries kept.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    pub fn clear(&mut self) {
        self.items.clear();
        self.sizes.clear();
        self.bytes = 0;
    }
}

impl<T: serde::Serialize> serde::Serialize for Bounded<T> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.items.iter())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_estimate_is_the_encoded_length_for_strings_and_structure() {
        let value = json!({"ok": true, "text": "hello", "list": ["a", null]});
        let encoded = serde_json::to_string(&value).expect("encode").len();
        assert!(
            json_size(&value).abs_diff(encoded) <= 8,
            "{} vs {encoded}",
            json_size(&value)
        );
    }

    #[test]
    fn a_parsed_object_is_counted_at_several_times_its_text() {
        let message = json!({
            "type": "message", "user": "U0000000001", "text": "bench", "ts": "1700000000.000001",
            "team": "T0000000001", "bot_id": "B0000000001", "app_id": "A0000000001",
            "blocks": [], "channel": "C0000000001",
        });
        let text = json_size(&message);
        let memory = value_memory(&message);
        assert!(memory > 4 * text, "{memory} bytes for {text} bytes of text");
        assert_eq!(value_memory(&json!("")), 0);
        assert_eq!(value_memory(&json!("abc")), 3 + ALLOCATION);
    }

    #[test]
    fn a_large_member_is_replaced_by_its_size_and_small_ones_stay() {
        let big = "x".repeat(10_000);
        let shrunk = shrink(json!({"ok": true, "messages": [big]}), 1_000);
        assert_eq!(shrunk["ok"], json!(true));
        assert_eq!(shrunk["messages"], json!("[10005 bytes not kept]"));
        assert!(json_size(&shrunk) <= 1_000);
    }

    #[test]
    fn text_is_cut_on_a_character_boundary() {
        let text = shrink_text("é".repeat(10), 5);
        assert_eq!(text, "éé[16 of 20 bytes not kept]");
    }

    #[test]
    fn the_oldest_entries_go_when_the_bytes_run_out() {
        let mut list = Bounded::default();
        for item in 0..5 {
            list.push(item, 100, 1_000, 250);
        }
        assert_eq!(list.iter().copied().collect::<Vec<_>>(), vec![3, 4]);
        assert_eq!(list.bytes(), 200);
        list.push(9, 1_000, 1_000, 250);
        assert_eq!(
            list.iter().copied().collect::<Vec<_>>(),
            vec![9],
            "the newest stays"
        );
    }
}
