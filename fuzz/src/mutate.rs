//! The mutation engine: byte-level edits (flips, inserts, deletes, copies, splices between corpus
//! entries, dictionary words, invalid UTF-8) and structure-aware ones that parse a JSON or TOML
//! region, change one node (another type, deep nesting, huge numbers, long strings, missing or
//! unknown keys) and write it back.

use serde_json::{Map, Value};

use crate::rng::Rng;

/// Words every target gets: JSON and TOML punctuation, edge values, escapes and invalid UTF-8.
const COMMON_WORDS: &[&[u8]] = &[
    b"null",
    b"true",
    b"false",
    b"{}",
    b"[]",
    b"\"\"",
    b"0",
    b"-0",
    b"-1",
    b"1.5",
    b"1e999",
    b"-1e999",
    b"1e-999",
    b"18446744073709551616",
    b"-9223372036854775809",
    b"9223372036854775807",
    b"4294967296",
    b"0.30000000000000004",
    b"\"\\ud800\"",
    b"\"\\u0000\"",
    b"\\u",
    b"\\",
    b"\"",
    b",",
    b":",
    b"=",
    b"\n",
    b"\r\n",
    b"\r",
    b"\t",
    b" ",
    b"[[",
    b"]]",
    b"'''",
    b"\"\"\"",
    b"#",
    b"nan",
    b"inf",
    b"1979-05-27T07:32:00Z",
    b"\xc3\x28",
    b"\xed\xa0\x80",
    b"\xf4\x90\x80\x80",
    b"\xff",
    b"\xc0\x80",
    b"%",
    b"%zz",
    b"%00",
    b"&",
    b"+",
];

/// What one mutation pass may do.
pub struct Mutator<'a> {
    /// The longest input produced; longer results are cut.
    pub max_len: usize,
    /// Words of the target (method names, field names, keys) added to [`COMMON_WORDS`].
    pub words: &'a [&'a [u8]],
}

impl Mutator<'_> {
    /// A new input made from `input` by one to four stacked mutations; `corpus` feeds splices.
    pub fn mutate(&self, rng: &mut Rng, input: &[u8], corpus: &[Vec<u8>]) -> Vec<u8> {
        let mut data = input.to_vec();
        let rounds = 1 + rng.below(4);
        for _ in 0..rounds {
            self.mutate_once(rng, &mut data, corpus);
        }
        data.truncate(self.max_len);
        data
    }

    fn mutate_once(&self, rng: &mut Rng, data: &mut Vec<u8>, corpus: &[Vec<u8>]) {
        match rng.below(16) {
            0 => flip_bit(rng, data),
            1 => set_byte(rng, data),
            2 => insert_random(rng, data),
            3 => delete_range(rng, data),
            4 => copy_range(rng, data),
            5 => splice(rng, data, corpus),
            6 | 7 => {
                let word = self.word(rng);
                insert_word(rng, data, word);
            }
            8 => {
                let word = self.word(rng);
                replace_token(rng, data, word);
            }
            9 => wrap_in_nesting(rng, data),
            10 => repeat_range(rng, data, self.max_len),
            11 => truncate(rng, data),
            _ => {
                if !mutate_structure(rng, data, self.words, self.max_len) {
                    let word = self.word(rng);
                    insert_word(rng, data, word);
                }
            }
        }
    }

    fn word(&self, rng: &mut Rng) -> &[u8] {
        let total = COMMON_WORDS.len() + self.words.len();
        let index = rng.below(total);
        if index < COMMON_WORDS.len() {
            COMMON_WORDS[index]
        } else {
            self.words[index - COMMON_WORDS.len()]
        }
    }
}

fn flip_bit(rng: &mut Rng, data: &mut [u8]) {
    if !data.is_empty() {
        let at = rng.below(data.len());
        data[at] ^= 1 << rng.below(8);
    }
}

fn set_byte(rng: &mut Rng, data: &mut [u8]) {
    const INTERESTING: &[u8] = b"\x00\x7f\x80\xff{}[]\":,\\\n\r 0-9eE.'=#";
    if !data.is_empty() {
        let at = rng.below(data.len());
        data[at] = if rng.one_in(2) {
            *rng.pick(INTERESTING)
        } else {
            rng.byte()
        };
    }
}

fn insert_random(rng: &mut Rng, data: &mut Vec<u8>) {
    let at = rng.below(data.len() + 1);
    let count = 1 + rng.below(8);
    let bytes: Vec<u8> = (0..count).map(|_| rng.byte()).collect();
    data.splice(at..at, bytes);
}

fn delete_range(rng: &mut Rng, data: &mut Vec<u8>) {
    if data.is_empty() {
        return;
    }
    let at = rng.below(data.len());
    let count = 1 + rng.below((data.len() - at).min(64));
    data.drain(at..at + count);
}

fn copy_range(rng: &mut Rng, data: &mut Vec<u8>) {
    if data.is_empty() {
        return;
    }
    let from = rng.below(data.len());
    let count = 1 + rng.below((data.len() - from).min(256));
    let piece = data[from..from + count].to_vec();
    let to = rng.below(data.len() + 1);
    data.splice(to..to, piece);
}

fn splice(rng: &mut Rng, data: &mut Vec<u8>, corpus: &[Vec<u8>]) {
    if corpus.is_empty() {
        return;
    }
    let other = rng.pick(corpus);
    if other.is_empty() {
        return;
    }
    let from = rng.below(other.len());
    let count = 1 + rng.below(other.len() - from);
    let at = rng.below(data.len() + 1);
    if rng.one_in(2) {
        // Cross-over: this input's head, the other's tail.
        data.truncate(at);
        data.extend_from_slice(&other[from..]);
    } else {
        data.splice(at..at, other[from..from + count].iter().copied());
    }
}

fn insert_word(rng: &mut Rng, data: &mut Vec<u8>, word: &[u8]) {
    let at = rng.below(data.len() + 1);
    data.splice(at..at, word.iter().copied());
}

/// Replaces the token (a run of letters, digits, `.`, `-`, `+` or `_`) at a random place.
fn replace_token(rng: &mut Rng, data: &mut Vec<u8>, word: &[u8]) {
    if data.is_empty() {
        return;
    }
    let is_token = |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'+' | b'_');
    let mut start = rng.below(data.len());
    while start > 0 && is_token(data[start - 1]) {
        start -= 1;
    }
    let mut end = start;
    while end < data.len() && is_token(data[end]) {
        end += 1;
    }
    if end == start {
        end = (start + 1).min(data.len());
    }
    data.splice(start..end, word.iter().copied());
}

/// Wraps a range in many levels of brackets or tables: deep nesting.
fn wrap_in_nesting(rng: &mut Rng, data: &mut Vec<u8>) {
    const PAIRS: &[(&[u8], &[u8])] = &[
        (b"[", b"]"),
        (b"{\"a\":", b"}"),
        (b"{a=", b"}"),
        (b"[{\"type\":\"text\",\"text\":", b"}]"),
    ];
    let depth = match rng.below(3) {
        0 => 1 + rng.below(16),
        1 => 100 + rng.below(200),
        _ => 1000 + rng.below(20_000),
    };
    let (open, close) = *rng.pick(PAIRS);
    let start = rng.below(data.len() + 1);
    let end = start + rng.below(data.len() - start + 1);
    let tail = data.split_off(end);
    let middle = data.split_off(start);
    for _ in 0..depth {
        data.extend_from_slice(open);
    }
    data.extend_from_slice(&middle);
    for _ in 0..depth {
        data.extend_from_slice(close);
    }
    data.extend_from_slice(&tail);
}

/// Repeats a short range many times: long strings and long lines.
fn repeat_range(rng: &mut Rng, data: &mut Vec<u8>, max_len: usize) {
    if data.is_empty() {
        return;
    }
    let from = rng.below(data.len());
    let count = 1 + rng.below((data.len() - from).min(8));
    let piece = data[from..from + count].to_vec();
    let room = max_len.saturating_sub(data.len()) / count;
    let times = rng.below(room.min(1 << 14) + 1);
    let at = from + count;
    let repeated: Vec<u8> = piece.iter().copied().cycle().take(count * times).collect();
    data.splice(at..at, repeated);
}

fn truncate(rng: &mut Rng, data: &mut Vec<u8>) {
    let at = rng.below(data.len() + 1);
    data.truncate(at);
}

/// Parses the JSON region of `data` (from its first `{` or `[` to its last `}` or `]`), or the
/// whole of it as TOML, changes one node and writes it back. False when nothing parsed.
fn mutate_structure(rng: &mut Rng, data: &mut Vec<u8>, words: &[&[u8]], max_len: usize) -> bool {
    let start = data.iter().position(|b| matches!(b, b'{' | b'['));
    let end = data.iter().rposition(|b| matches!(b, b'}' | b']'));
    if let (Some(start), Some(end)) = (start, end)
        && start < end
        && let Ok(mut value) = serde_json::from_slice::<Value>(&data[start..=end])
    {
        let mut keys = Vec::new();
        collect_keys(&value, &mut keys);
        mutate_json(rng, &mut value, &keys, words, max_len);
        let text = if rng.one_in(4) {
            serde_json::to_vec_pretty(&value)
        } else {
            serde_json::to_vec(&value)
        };
        if let Ok(text) = text {
            data.splice(start..=end, text);
            return true;
        }
    }
    if let Ok(text) = std::str::from_utf8(data)
        && let Ok(mut table) = text.parse::<toml::Table>()
        && !table.is_empty()
    {
        mutate_toml_table(rng, &mut table, words, 0);
        if let Ok(text) = toml::to_string(&table) {
            *data = text.into_bytes();
            return true;
        }
    }
    false
}

fn collect_keys(value: &Value, keys: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            for (key, child) in map {
                if keys.len() < 64 {
                    keys.push(key.clone());
                }
                collect_keys(child, keys);
            }
        }
        Value::Array(items) => items.iter().for_each(|item| collect_keys(item, keys)),
        _ => {}
    }
}

/// Counts the nodes of a tree.
fn count_nodes(value: &Value) -> usize {
    1 + match value {
        Value::Object(map) => map.values().map(count_nodes).sum(),
        Value::Array(items) => items.iter().map(count_nodes).sum(),
        _ => 0,
    }
}

/// The `index`-th node in pre-order.
fn nth_node<'a>(value: &'a mut Value, index: &mut usize) -> Option<&'a mut Value> {
    if *index == 0 {
        return Some(value);
    }
    *index -= 1;
    match value {
        Value::Object(map) => map.values_mut().find_map(|child| nth_node(child, index)),
        Value::Array(items) => items.iter_mut().find_map(|child| nth_node(child, index)),
        _ => None,
    }
}

fn mutate_json(rng: &mut Rng, root: &mut Value, keys: &[String], words: &[&[u8]], max_len: usize) {
    let mut index = rng.below(count_nodes(root));
    let Some(node) = nth_node(root, &mut index) else {
        return;
    };
    let replacement = match node {
        Value::Object(map) if !map.is_empty() && rng.one_in(2) => {
            if rng.one_in(2) {
                let key = map.keys().nth(rng.below(map.len())).cloned();
                if let Some(key) = key {
                    map.remove(&key);
                }
            } else {
                let key = pick_key(rng, keys, words);
                map.insert(key, random_json(rng, keys, words, 0));
            }
            return;
        }
        Value::Array(items) if !items.is_empty() && rng.one_in(2) => {
            let at = rng.below(items.len());
            if rng.one_in(2) {
                items.remove(at);
            } else {
                let copy = items[at].clone();
                items.insert(at, copy);
            }
            return;
        }
        Value::String(text) if rng.one_in(2) => {
            let piece = if text.is_empty() {
                "x".to_owned()
            } else {
                text.clone()
            };
            let most = (max_len / piece.len()).clamp(1, 2000);
            Value::String(piece.repeat(1 + rng.below(most)))
        }
        _ => random_json(rng, keys, words, 0),
    };
    *node = replacement;
}

fn pick_key(rng: &mut Rng, keys: &[String], words: &[&[u8]]) -> String {
    match rng.below(3) {
        0 if !keys.is_empty() => rng.pick(keys).clone(),
        1 if !words.is_empty() => String::from_utf8_lossy(rng.pick::<&[u8]>(words)).into_owned(),
        _ => ["_meta", "type", "sessionId", "id", "", "\u{0}", "é"][rng.below(7)].to_owned(),
    }
}

fn random_json(rng: &mut Rng, keys: &[String], words: &[&[u8]], depth: usize) -> Value {
    match rng.below(if depth > 3 { 9 } else { 12 }) {
        0 => Value::Null,
        1 => Value::Bool(rng.one_in(2)),
        2 => Value::from(*rng.pick(&[0i64, -1, 1, i64::MAX, i64::MIN, 4_294_967_296])),
        3 => Value::from(u64::MAX),
        4 => Value::from(*rng.pick(&[0.5f64, -0.0, 1e308, -1e308, 5e-324])),
        5 => Value::String(String::new()),
        6 => Value::String(pick_key(rng, keys, words)),
        7 => Value::String("\u{1F600}\u{0}\"\\\n".repeat(1 + rng.below(64))),
        8 => {
            // Deep nesting (past the 128 levels serde_json reads when it is parsed again).
            let mut value = Value::Null;
            for _ in 0..(1 + rng.below(300)) {
                value = if rng.one_in(2) {
                    Value::Array(vec![value])
                } else {
                    let mut map = Map::new();
                    map.insert("a".to_owned(), value);
                    Value::Object(map)
                };
            }
            value
        }
        9 => Value::Array(
            (0..rng.below(4))
                .map(|_| random_json(rng, keys, words, depth + 1))
                .collect(),
        ),
        _ => {
            let mut map = Map::new();
            for _ in 0..rng.below(4) {
                let key = pick_key(rng, keys, words);
                map.insert(key, random_json(rng, keys, words, depth + 1));
            }
            Value::Object(map)
        }
    }
}

fn mutate_toml_table(rng: &mut Rng, table: &mut toml::Table, words: &[&[u8]], depth: usize) {
    let keys: Vec<String> = table.keys().cloned().collect();
    if keys.is_empty() || rng.one_in(6) {
        let key = if words.is_empty() || rng.one_in(3) {
            "x".to_owned()
        } else {
            String::from_utf8_lossy(rng.pick::<&[u8]>(words)).into_owned()
        };
        table.insert(key, random_toml(rng, 0));
        return;
    }
    let key = rng.pick(&keys).clone();
    if rng.one_in(5) {
        table.remove(&key);
        return;
    }
    let Some(value) = table.get_mut(&key) else {
        return;
    };
    match value {
        toml::Value::Table(inner) if depth < 8 && rng.one_in(2) => {
            mutate_toml_table(rng, inner, words, depth + 1)
        }
        toml::Value::Array(items) if !items.is_empty() && rng.one_in(2) => {
            let at = rng.below(items.len());
            match &mut items[at] {
                toml::Value::Table(inner) if depth < 8 => {
                    mutate_toml_table(rng, inner, words, depth + 1)
                }
                other => *other = random_toml(rng, 0),
            }
        }
        other => *other = random_toml(rng, 0),
    }
}

fn random_toml(rng: &mut Rng, depth: usize) -> toml::Value {
    match rng.below(if depth > 2 { 7 } else { 10 }) {
        0 => toml::Value::Boolean(rng.one_in(2)),
        1 => toml::Value::Integer(*rng.pick(&[0, -1, i64::MAX, i64::MIN, 1 << 40])),
        2 => toml::Value::Float(*rng.pick(&[0.5, f64::NAN, f64::INFINITY, -0.0, 1e308])),
        3 => toml::Value::String(String::new()),
        4 => toml::Value::String("{x}{{}}{".repeat(1 + rng.below(500))),
        5 => toml::Value::String("\u{0}é\"'\\\n$`".to_owned()),
        6 => toml::Value::String("a".repeat(rng.below(70_000))),
        7 => toml::Value::Array(
            (0..rng.below(4))
                .map(|_| random_toml(rng, depth + 1))
                .collect(),
        ),
        _ => {
            let mut table = toml::Table::new();
            for index in 0..rng.below(4) {
                table.insert(format!("k{index}"), random_toml(rng, depth + 1));
            }
            toml::Value::Table(table)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mutation_is_reproducible_from_the_seed() {
        let mutator = Mutator {
            max_len: 4096,
            words: &[b"session/prompt"],
        };
        let corpus = vec![br#"{"a":[1,2,{"b":"c"}]}"#.to_vec(), b"x = 1\n".to_vec()];
        let run = |seed| {
            let mut rng = Rng::new(seed);
            (0..200)
                .map(|i| mutator.mutate(&mut rng, &corpus[i % 2], &corpus))
                .collect::<Vec<_>>()
        };
        let first = run(11);
        assert_eq!(first, run(11));
        assert_ne!(first, run(12));
        assert!(first.iter().all(|input| input.len() <= 4096));
        assert!(
            first
                .iter()
                .any(|input| input != &corpus[0] && input != &corpus[1])
        );
    }

    #[test]
    fn structure_mutation_keeps_json_parseable_most_of_the_time() {
        let mut rng = Rng::new(3);
        let mut parsed = 0;
        for _ in 0..200 {
            let mut data = br#"{"jsonrpc":"2.0","id":1,"params":{"a":[1,"x"]}}"#.to_vec();
            assert!(mutate_structure(&mut rng, &mut data, &[], 4096));
            if serde_json::from_slice::<Value>(&data).is_ok() {
                parsed += 1;
            }
        }
        // Deep nesting past serde_json's limit is the only way to unparseable text.
        assert!(parsed > 150, "{parsed} of 200 parsed");
    }
}
