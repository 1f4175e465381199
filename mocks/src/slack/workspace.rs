//! The fake workspace's state: users, channels, the message store, the clock its `ts` values
//! come from, views, files, trigger ids and response URLs. Every id it hands out is
//! deterministic; `ts` values are too with a fixed clock (`clock_start`).

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant, SystemTime};

use serde_json::{Map, Value, json};

use super::config::Config;
pub use super::store::Stored;
use super::store::{Store, TsKey, ts_text};

/// The `created`/`updated` time of the workspace's fixed objects (users, channels, the bot).
const TS_EPOCH: u64 = 1_700_000_000;

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
    pub messages: Store,
    pub ephemerals: VecDeque<Stored>,
    pub views: HashMap<String, Value>,
    pub uploads: HashMap<String, Upload>,
    pub triggers: HashMap<String, Trigger>,
    pub response_urls: HashMap<String, ResponseTarget>,
    counter: u64,
    /// The last `ts` handed out.
    last_ts: TsKey,
}

impl Workspace {
    pub fn new(config: Config) -> Workspace {
        Workspace {
            messages: Store::new(config.retention.max_messages),
            config,
            ephemerals: VecDeque::new(),
            views: HashMap::new(),
            uploads: HashMap::new(),
            triggers: HashMap::new(),
            response_urls: HashMap::new(),
            counter: 0,
            last_ts: 0,
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

    /// A fresh message timestamp: `"<10 digits>.<6 digits>"`, unique and increasing. From the
    /// wall clock; with `clock_start` set, the n-th id is `<clock_start + n>.<n>` in every run.
    pub fn next_ts(&mut self) -> String {
        let n = self.next();
        let key = match self.config.clock_start {
            Some(start) => (start + n) * 1_000_000 + n % 1_000_000,
            None => {
                let now = SystemTime::now()
                    .duration_since(SystemTime::UNIX_EPOCH)
                    .map_or(0, |since| {
                        u64::try_from(since.as_micros()).unwrap_or(u64::MAX)
                    });
                now.max(self.last_ts + 1)
            }
        };
        self.last_ts = key;
        ts_text(key)
    }

    /// The seconds of the clock `ts` values come from (for `event_time` and the like).
    pub fn now_seconds(&self) -> u64 {
        self.last_ts / 1_000_000
    }

    /// Keeps an ephemeral message, forgetting the oldest beyond the retention limit.
    pub fn store_ephemeral(&mut self, stored: Stored) {
        self.ephemerals.push_back(stored);
        while self.ephemerals.len() > self.config.retention.max_messages.max(1) {
            self.ephemerals.pop_front();
        }
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

    pub fn find(&self, channel: &str, ts: &str) -> Option<Stored> {
        self.messages.get(channel, ts)
    }

    /// Stores a message; a reply also updates its parent's thread fields.
    pub fn store(&mut self, channel: &str, message: Value) {
        self.messages.insert(channel, message);
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
