//! The message store: each message kept once (as compact JSON text), indexed by channel, by `ts`
//! and by thread, bounded by a retention limit. Every change gets a sequence number, so a waiter
//! looks only at what changed since it last looked.
//!
//! Retention: when more than `max_messages` messages are kept, the least recently changed ones
//! are forgotten first (a message is changed when it is stored, edited or reacted to).

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::ops::{Bound, RangeBounds};

use serde_json::{Value, json};

/// A message `ts` as a number: microseconds since the epoch (`"1700000000.000001"` is
/// `1_700_000_000_000_001`). Slack's `ts` strings are fixed-width, so this orders them as Slack
/// does.
pub type TsKey = u64;

/// Reads a `ts` (or an `oldest`/`latest` bound such as `"1700000000"` or `"1700000000.5"`).
pub fn ts_key(ts: &str) -> Option<TsKey> {
    let (seconds, fraction) = ts.split_once('.').unwrap_or((ts, ""));
    if seconds.is_empty()
        || !seconds.bytes().all(|b| b.is_ascii_digit())
        || !fraction.bytes().all(|b| b.is_ascii_digit())
    {
        return None;
    }
    let seconds: u64 = seconds.parse().ok()?;
    let mut micros = 0u64;
    for (place, digit) in fraction.bytes().take(6).enumerate() {
        micros += u64::from(digit - b'0') * 10u64.pow(5 - u32::try_from(place).ok()?);
    }
    seconds.checked_mul(1_000_000)?.checked_add(micros)
}

/// The `ts` string of a key.
pub fn ts_text(key: TsKey) -> String {
    format!("{}.{:06}", key / 1_000_000, key % 1_000_000)
}

/// One stored message (top level or thread reply) and its channel.
#[derive(Debug, Clone)]
pub struct Stored {
    pub channel: String,
    pub message: Value,
}

impl Stored {
    pub fn ts(&self) -> &str {
        self.message["ts"].as_str().unwrap_or_default()
    }

    /// The thread this message belongs to (its own ts for a parent with replies).
    pub fn thread_ts(&self) -> Option<&str> {
        self.message["thread_ts"].as_str()
    }
}

#[derive(Debug)]
struct Entry {
    /// The sequence number of the message's last change.
    seq: u64,
    json: Box<str>,
    /// The thread root, for a reply.
    root: Option<TsKey>,
}

#[derive(Debug, Default)]
struct Channel {
    messages: HashMap<TsKey, Entry>,
    /// What `conversations.history` lists: top-level messages and broadcast replies.
    top: BTreeSet<TsKey>,
    /// Replies by thread root.
    threads: HashMap<TsKey, BTreeSet<TsKey>>,
}

/// The store; see the module documentation for its retention policy.
#[derive(Debug)]
pub struct Store {
    names: Vec<String>,
    index: HashMap<String, usize>,
    channels: Vec<Channel>,
    /// Changes in order: (sequence number, channel index, ts). An entry whose message has changed
    /// since (or is gone) is stale and skipped.
    changes: VecDeque<(u64, usize, TsKey)>,
    next_seq: u64,
    live: usize,
    max_messages: usize,
}

fn parse(json: &str) -> Value {
    serde_json::from_str(json).unwrap_or(Value::Null)
}

impl Store {
    pub fn new(max_messages: usize) -> Store {
        Store {
            names: Vec::new(),
            index: HashMap::new(),
            channels: Vec::new(),
            changes: VecDeque::new(),
            next_seq: 0,
            live: 0,
            max_messages: max_messages.max(1),
        }
    }

    /// How many messages are kept.
    pub fn len(&self) -> usize {
        self.live
    }

    /// The sequence number the next change will get.
    pub fn next_seq(&self) -> u64 {
        self.next_seq
    }

    fn channel_index(&mut self, channel: &str) -> usize {
        if let Some(index) = self.index.get(channel) {
            return *index;
        }
        self.names.push(channel.to_string());
        self.channels.push(Channel::default());
        self.index.insert(channel.to_string(), self.names.len() - 1);
        self.names.len() - 1
    }

    fn channel(&self, channel: &str) -> Option<&Channel> {
        self.index.get(channel).map(|index| &self.channels[*index])
    }

    /// The message with this `ts` in `channel`.
    pub fn get(&self, channel: &str, ts: &str) -> Option<Stored> {
        let entry = self.channel(channel)?.messages.get(&ts_key(ts)?)?;
        Some(Stored {
            channel: channel.to_string(),
            message: parse(&entry.json),
        })
    }

    fn touch(&mut self, index: usize, key: TsKey) -> u64 {
        let seq = self.next_seq;
        self.next_seq += 1;
        self.changes.push_back((seq, index, key));
        seq
    }

    /// Stores a message (its `ts` must be new); a reply also updates its parent's thread fields.
    pub fn insert(&mut self, channel: &str, message: Value) {
        let Some(key) = message["ts"].as_str().and_then(ts_key) else {
            return;
        };
        let root = message["thread_ts"]
            .as_str()
            .and_then(ts_key)
            .filter(|root| *root != key);
        let broadcast = message["subtype"] == "thread_broadcast";
        if let Some(root) = root {
            let reply_ts = ts_text(key);
            let user = message["user"].clone();
            self.update(channel, &ts_text(root), |parent| {
                let Some(object) = parent.as_object_mut() else {
                    return;
                };
                object.insert("thread_ts".into(), json!(ts_text(root)));
                let count = object
                    .get("reply_count")
                    .and_then(Value::as_u64)
                    .unwrap_or(0);
                object.insert("reply_count".into(), json!(count + 1));
                object.insert("latest_reply".into(), json!(reply_ts));
                let users = object.entry("reply_users").or_insert_with(|| json!([]));
                if let Some(users) = users.as_array_mut()
                    && !users.contains(&user)
                {
                    users.push(user);
                }
            });
        }
        let index = self.channel_index(channel);
        let seq = self.touch(index, key);
        let slot = &mut self.channels[index];
        let entry = Entry {
            seq,
            json: message.to_string().into_boxed_str(),
            root,
        };
        if slot.messages.insert(key, entry).is_none() {
            self.live += 1;
        }
        match root {
            Some(root) => {
                slot.threads.entry(root).or_default().insert(key);
                if broadcast {
                    slot.top.insert(key);
                }
            }
            None => {
                slot.top.insert(key);
            }
        }
        self.retain();
    }

    /// Changes a stored message in place; `None` when there is none.
    pub fn update<R>(
        &mut self,
        channel: &str,
        ts: &str,
        change: impl FnOnce(&mut Value) -> R,
    ) -> Option<R> {
        let key = ts_key(ts)?;
        let index = *self.index.get(channel)?;
        let entry = self.channels[index].messages.get(&key)?;
        let mut message = parse(&entry.json);
        let answer = change(&mut message);
        let seq = self.touch(index, key);
        if let Some(entry) = self.channels[index].messages.get_mut(&key) {
            entry.json = message.to_string().into_boxed_str();
            entry.seq = seq;
        }
        self.compact();
        Some(answer)
    }

    /// Forgets a message; its replies stay, as in Slack.
    pub fn remove(&mut self, channel: &str, ts: &str) -> Option<Stored> {
        let key = ts_key(ts)?;
        let index = *self.index.get(channel)?;
        let message = self.forget(index, key)?;
        self.compact();
        Some(Stored {
            channel: channel.to_string(),
            message,
        })
    }

    fn forget(&mut self, index: usize, key: TsKey) -> Option<Value> {
        let slot = &mut self.channels[index];
        let entry = slot.messages.remove(&key)?;
        slot.top.remove(&key);
        if let Some(root) = entry.root
            && let Some(replies) = slot.threads.get_mut(&root)
        {
            replies.remove(&key);
            if replies.is_empty() {
                slot.threads.remove(&root);
            }
        }
        self.live -= 1;
        Some(parse(&entry.json))
    }

    /// Forgets the least recently changed messages beyond the limit.
    fn retain(&mut self) {
        while self.live > self.max_messages {
            let Some((seq, index, key)) = self.changes.pop_front() else {
                return;
            };
            let current = self.channels[index]
                .messages
                .get(&key)
                .is_some_and(|entry| entry.seq == seq);
            if current {
                self.forget(index, key);
            }
        }
        self.compact();
    }

    /// Drops stale change entries from the front, and rebuilds the list when most are stale.
    fn compact(&mut self) {
        while let Some((seq, index, key)) = self.changes.front().copied() {
            let current = self.channels[index]
                .messages
                .get(&key)
                .is_some_and(|entry| entry.seq == seq);
            if current {
                break;
            }
            self.changes.pop_front();
        }
        if self.changes.len() > 2 * self.live + 1024 {
            let channels = &self.channels;
            self.changes.retain(|(seq, index, key)| {
                channels[*index]
                    .messages
                    .get(key)
                    .is_some_and(|entry| entry.seq == *seq)
            });
        }
    }

    /// Messages changed at or after `seq` (their current version, each once), and the sequence
    /// number to look from next time.
    pub fn changed_since(&self, seq: u64) -> (Vec<Stored>, u64) {
        let start = self
            .changes
            .partition_point(|(entry_seq, _, _)| *entry_seq < seq);
        let found = self
            .changes
            .range(start..)
            .filter_map(|(entry_seq, index, key)| {
                let entry = self.channels[*index].messages.get(key)?;
                (entry.seq == *entry_seq).then(|| Stored {
                    channel: self.names[*index].clone(),
                    message: parse(&entry.json),
                })
            })
            .collect();
        (found, self.next_seq)
    }

    /// Every message, in the order they were stored (by `ts`).
    pub fn all(&self) -> Vec<Stored> {
        let mut keyed: Vec<(TsKey, usize)> = self
            .channels
            .iter()
            .enumerate()
            .flat_map(|(index, slot)| slot.messages.keys().map(move |key| (*key, index)))
            .collect();
        keyed.sort_unstable();
        keyed
            .into_iter()
            .filter_map(|(key, index)| {
                let entry = self.channels[index].messages.get(&key)?;
                Some(Stored {
                    channel: self.names[index].clone(),
                    message: parse(&entry.json),
                })
            })
            .collect()
    }

    /// Top-level messages (and broadcast replies) of a channel within the bounds, newest first,
    /// at most `limit`; and whether more lie beyond.
    pub fn history(
        &self,
        channel: &str,
        oldest: Bound<TsKey>,
        latest: Bound<TsKey>,
        limit: usize,
    ) -> (Vec<Value>, bool) {
        let Some(slot) = self.channel(channel) else {
            return (Vec::new(), false);
        };
        if bounds_empty(oldest, latest) {
            return (Vec::new(), false);
        }
        let mut keys = slot.top.range((oldest, latest)).rev().copied();
        let page = self.values(slot, keys.by_ref().take(limit));
        (page, keys.next().is_some())
    }

    /// A thread's parent (when kept) and its replies within the bounds, oldest first, at most
    /// `limit`; and whether more lie beyond.
    pub fn thread(
        &self,
        channel: &str,
        root: TsKey,
        oldest: Bound<TsKey>,
        latest: Bound<TsKey>,
        limit: usize,
    ) -> (Vec<Value>, bool) {
        let Some(slot) = self.channel(channel) else {
            return (Vec::new(), false);
        };
        if bounds_empty(oldest, latest) {
            return (Vec::new(), false);
        }
        let in_bounds = |key: &TsKey| (oldest, latest).contains(key);
        let parent = slot
            .messages
            .contains_key(&root)
            .then_some(root)
            .filter(in_bounds);
        let replies = slot
            .threads
            .get(&root)
            .into_iter()
            .flat_map(|replies| replies.range((oldest, latest)));
        let mut keys = parent.into_iter().chain(replies.copied());
        let page = self.values(slot, keys.by_ref().take(limit));
        (page, keys.next().is_some())
    }

    /// Whether `ts` in `channel` is a kept message or the root of a kept thread.
    pub fn has_thread(&self, channel: &str, ts: &str) -> bool {
        let (Some(slot), Some(key)) = (self.channel(channel), ts_key(ts)) else {
            return false;
        };
        slot.messages.contains_key(&key) || slot.threads.contains_key(&key)
    }

    fn values(&self, slot: &Channel, keys: impl Iterator<Item = TsKey>) -> Vec<Value> {
        keys.filter_map(|key| slot.messages.get(&key))
            .map(|entry| parse(&entry.json))
            .collect()
    }
}

/// Whether no key lies between the bounds (a range with them would panic).
fn bounds_empty(oldest: Bound<TsKey>, latest: Bound<TsKey>) -> bool {
    match (oldest, latest) {
        (Bound::Included(low), Bound::Included(high)) => low > high,
        (Bound::Included(low) | Bound::Excluded(low), Bound::Excluded(high))
        | (Bound::Excluded(low), Bound::Included(high)) => low >= high,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(ts: &str, thread: Option<&str>) -> Value {
        let mut message = json!({ "type": "message", "ts": ts, "text": ts, "user": "U1" });
        if let Some(thread) = thread {
            message["thread_ts"] = json!(thread);
        }
        message
    }

    #[test]
    fn ts_keys_order_as_slack_does() {
        assert_eq!(ts_key("1700000000.000001"), Some(1_700_000_000_000_001));
        assert_eq!(ts_key("1700000000.5"), Some(1_700_000_000_500_000));
        assert_eq!(ts_key("1700000000"), Some(1_700_000_000_000_000));
        assert_eq!(ts_key("17a"), None);
        assert_eq!(ts_key(".5"), None);
        assert_eq!(ts_text(1_700_000_000_000_001), "1700000000.000001");
    }

    #[test]
    fn retention_forgets_the_least_recently_changed_first() {
        let mut store = Store::new(2);
        store.insert("C", message("1.000001", None));
        store.insert("C", message("1.000002", None));
        store.update("C", "1.000001", |m| m["text"] = json!("edited"));
        store.insert("C", message("1.000003", None));
        assert_eq!(store.len(), 2);
        assert!(store.get("C", "1.000002").is_none());
        assert!(store.get("C", "1.000001").is_some());
    }

    #[test]
    fn threads_and_history_come_from_their_indexes() {
        let mut store = Store::new(100);
        store.insert("C", message("1.000001", None));
        store.insert("C", message("1.000002", Some("1.000001")));
        store.insert("C", message("1.000003", None));
        let (top, more) = store.history("C", Bound::Unbounded, Bound::Unbounded, 1);
        assert_eq!(top[0]["ts"], "1.000003");
        assert!(more);
        let (thread, _) = store.thread("C", 1_000_001, Bound::Unbounded, Bound::Unbounded, 10);
        assert_eq!(thread.len(), 2);
        assert_eq!(thread[0]["reply_count"], 1);
        let (changed, _) = store.changed_since(0);
        assert_eq!(changed.len(), 3, "each message once, in its latest version");
    }
}
