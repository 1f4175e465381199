//! The fake workspace's state: users, channels, the message store with its `ts` counter, views,
//! files, trigger ids and response URLs. Every id it hands out is deterministic.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};

use super::config::Config;

/// The seconds part of the first `ts`; each message adds one second, so `ts` values are unique,
/// increasing and the same in every run.
const TS_EPOCH: u64 = 1_700_000_000;

/// One stored message (top level or thread reply).
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

    /// A reply inside a thread (not the parent).
    pub fn is_reply(&self) -> bool {
        self.thread_ts().is_some_and(|thread| thread != self.ts())
    }
}

#[derive(Debug, Clone)]
pub struct Trigger {
    pub issued: Instant,
    pub used: bool,
}

#[derive(Debug, Clone)]
pub struct Upload {
    pub name: String,
    pub title: Option<String>,
    pub length: u64,
    pub received: Option<usize>,
}

/// What a `response_url` answers for: the channel and, for a click, the message it came from.
#[derive(Debug, Clone)]
pub struct ResponseTarget {
    pub channel: String,
    pub message_ts: Option<String>,
    pub user: String,
}

/// The workspace: configuration plus everything the API has changed.
#[derive(Debug)]
pub struct Workspace {
    pub config: Config,
    pub messages: Vec<Stored>,
    pub ephemerals: Vec<Stored>,
    pub views: HashMap<String, Value>,
    pub uploads: HashMap<String, Upload>,
    pub triggers: HashMap<String, Trigger>,
    pub response_urls: HashMap<String, ResponseTarget>,
    counter: u64,
}

impl Workspace {
    pub fn new(config: Config) -> Workspace {
        Workspace {
            config,
            messages: Vec::new(),
            ephemerals: Vec::new(),
            views: HashMap::new(),
            uploads: HashMap::new(),
            triggers: HashMap::new(),
            response_urls: HashMap::new(),
            counter: 0,
        }
    }

    /// Forgets every message, view, file and trigger; ids start again from the beginning.
    pub fn reset(&mut self) {
        *self = Workspace::new(self.config.clone());
    }

    fn next(&mut self) -> u64 {
        self.counter += 1;
        self.counter
    }

    /// A fresh message timestamp: `"<10 digits>.<6 digits>"`, increasing.
    pub fn next_ts(&mut self) -> String {
        let n = self.next();
        format!("{}.{:06}", TS_EPOCH + n, n % 1_000_000)
    }

    /// A fresh id with this prefix (`V`, `F`, `Ev`, ...).
    pub fn next_id(&mut self, prefix: &str) -> String {
        let n = self.next();
        format!("{prefix}{n:010}")
    }

    /// A fresh envelope id, shaped as a UUID.
    pub fn next_envelope_id(&mut self) -> String {
        let n = self.next();
        format!("00000000-0000-4000-8000-{n:012}")
    }

    /// Issues a trigger id valid for one `views.open`/`views.push` within the configured time.
    pub fn issue_trigger(&mut self) -> String {
        let n = self.next();
        let id = format!("{n}.{}.fake", self.counter_seconds());
        self.triggers.insert(
            id.clone(),
            Trigger {
                issued: Instant::now(),
                used: false,
            },
        );
        id
    }

    fn counter_seconds(&self) -> u64 {
        TS_EPOCH + self.counter
    }

    /// Uses a trigger id: `Err` carries Slack's error code.
    pub fn use_trigger(&mut self, id: &str) -> Result<(), &'static str> {
        let ttl = Duration::from_millis(self.config.trigger_ttl_ms);
        let trigger = self.triggers.get_mut(id).ok_or("invalid_trigger_id")?;
        if trigger.used {
            return Err("exchanged_trigger_id");
        }
        if trigger.issued.elapsed() > ttl {
            return Err("expired_trigger_id");
        }
        trigger.used = true;
        Ok(())
    }

    /// Finds a channel by id, by name or by `#name`.
    pub fn channel(&self, key: &str) -> Option<&super::config::ChannelConfig> {
        let name = key.strip_prefix('#').unwrap_or(key);
        self.config
            .channels
            .iter()
            .find(|channel| channel.id == key || channel.name == name)
    }

    pub fn members(&self, channel: &super::config::ChannelConfig) -> Vec<String> {
        if channel.members.is_empty() {
            let mut all = vec![self.config.bot.user_id.clone()];
            all.extend(self.config.users.iter().map(|user| user.id.clone()));
            all
        } else {
            channel.members.clone()
        }
    }

    /// The user object Slack's `users.info` returns (the bot included).
    pub fn user(&self, id: &str) -> Option<Value> {
        let team = &self.config.team.id;
        let bot = &self.config.bot;
        if id == bot.user_id {
            return Some(user_json(
                id,
                &bot.name,
                &bot.name,
                team,
                true,
                Some(&bot.bot_id),
            ));
        }
        self.config
            .users
            .iter()
            .find(|user| user.id == id)
            .map(|user| {
                let real = user.real_name.as_deref().unwrap_or(&user.name);
                user_json(&user.id, &user.name, real, team, false, None)
            })
    }

    pub fn user_ids(&self) -> Vec<String> {
        let mut ids = vec![self.config.bot.user_id.clone()];
        ids.extend(self.config.users.iter().map(|user| user.id.clone()));
        ids
    }

    /// The channel object of `conversations.info` and `conversations.list`.
    pub fn channel_json(&self, channel: &super::config::ChannelConfig) -> Value {
        json!({
            "id": channel.id,
            "name": channel.name,
            "name_normalized": channel.name,
            "created": TS_EPOCH,
            "creator": self.config.bot.user_id,
            "is_channel": !channel.private,
            "is_group": channel.private,
            "is_im": false,
            "is_mpim": false,
            "is_private": channel.private,
            "is_archived": false,
            "is_general": channel.name == "general",
            "is_shared": false,
            "is_ext_shared": false,
            "is_org_shared": false,
            "is_member": self.members(channel).contains(&self.config.bot.user_id),
            "context_team_id": self.config.team.id,
            "topic": {"value": "", "creator": "", "last_set": 0},
            "purpose": {"value": "", "creator": "", "last_set": 0},
            "num_members": self.members(channel).len(),
        })
    }

    pub fn find(&self, channel: &str, ts: &str) -> Option<&Stored> {
        self.messages
            .iter()
            .find(|stored| stored.channel == channel && stored.ts() == ts)
    }

    pub fn find_mut(&mut self, channel: &str, ts: &str) -> Option<&mut Stored> {
        self.messages
            .iter_mut()
            .find(|stored| stored.channel == channel && stored.ts() == ts)
    }

    /// Stores a message; a reply also updates its parent's thread fields.
    pub fn store(&mut self, channel: &str, message: Value) {
        let stored = Stored {
            channel: channel.to_string(),
            message,
        };
        if stored.is_reply() {
            let thread = stored.thread_ts().unwrap_or_default().to_string();
            let ts = stored.ts().to_string();
            let user = stored.message["user"].clone();
            if let Some(parent) = self.find_mut(channel, &thread) {
                let object = parent.message.as_object_mut();
                if let Some(object) = object {
                    object.insert("thread_ts".into(), Value::String(thread.clone()));
                    let count = object
                        .get("reply_count")
                        .and_then(Value::as_u64)
                        .unwrap_or(0);
                    object.insert("reply_count".into(), json!(count + 1));
                    object.insert("latest_reply".into(), Value::String(ts));
                    let users = object.entry("reply_users").or_insert_with(|| json!([]));
                    if let Some(users) = users.as_array_mut()
                        && !users.contains(&user)
                    {
                        users.push(user);
                    }
                }
            }
        }
        self.messages.push(stored);
    }

    /// Messages of a channel: top level (and broadcast replies) when `thread` is `None`, else the
    /// thread's parent and replies; oldest first.
    pub fn listing(&self, channel: &str, thread: Option<&str>) -> Vec<Value> {
        self.messages
            .iter()
            .filter(|stored| stored.channel == channel)
            .filter(|stored| match thread {
                None => !stored.is_reply() || stored.message["subtype"] == "thread_broadcast",
                Some(thread) => stored.ts() == thread || stored.thread_ts() == Some(thread),
            })
            .map(|stored| stored.message.clone())
            .collect()
    }

    /// A message posted by the bot, as Slack stores it.
    pub fn bot_message(&self, ts: &str, fields: Map<String, Value>) -> Value {
        let bot = &self.config.bot;
        let mut message = Map::new();
        message.insert("type".into(), json!("message"));
        message.insert("user".into(), json!(bot.user_id));
        message.insert("bot_id".into(), json!(bot.bot_id));
        message.insert("app_id".into(), json!(bot.app_id));
        message.insert("team".into(), json!(self.config.team.id));
        message.insert("ts".into(), json!(ts));
        message.insert(
            "bot_profile".into(),
            json!({"id": bot.bot_id, "app_id": bot.app_id, "name": bot.name, "team_id": self.config.team.id, "deleted": false, "updated": TS_EPOCH}),
        );
        message.extend(fields);
        Value::Object(message)
    }
}

fn user_json(
    id: &str,
    name: &str,
    real: &str,
    team: &str,
    is_bot: bool,
    bot_id: Option<&str>,
) -> Value {
    let mut user = json!({
        "id": id,
        "team_id": team,
        "name": name,
        "real_name": real,
        "deleted": false,
        "is_bot": is_bot,
        "is_admin": false,
        "is_owner": false,
        "is_app_user": false,
        "tz": "UTC",
        "tz_offset": 0,
        "updated": TS_EPOCH,
        "profile": {"display_name": name, "real_name": real, "team": team},
    });
    if let Some(bot_id) = bot_id {
        user["profile"]["bot_id"] = json!(bot_id);
    }
    user
}
