//! The fake workspace's state: users, channels, the message store, the clock its `ts` values
//! come from, views, files, trigger ids and response URLs. Every id it hands out is
//! deterministic; `ts` values are too with a fixed clock (`clock_start`).

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant, SystemTime};

use serde_json::{Map, Value, json};

use super::channel::{Channel, Kind};
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

/// What the smaller method families keep.
#[derive(Debug, Default)]
pub struct Items {
    /// Pinned message `ts` values by channel.
    pub pins: HashMap<String, Vec<String>>,
    /// Bookmarks by channel.
    pub bookmarks: HashMap<String, Vec<Value>>,
    pub usergroups: Vec<Value>,
    /// Scheduled messages not yet due (the fake never sends them).
    pub scheduled: Vec<Value>,
    /// The App Home view published for each user.
    pub home_views: HashMap<String, Value>,
    /// Streams started by `chat.startStream` and not stopped: message ts by channel.
    pub streams: HashMap<String, String>,
    /// Shared files by id (from `files.completeUploadExternal`).
    pub files: HashMap<String, Value>,
    /// Profile fields users set (`users.profile.set`), by user id.
    pub profiles: HashMap<String, serde_json::Map<String, Value>>,
    /// Starred items of the user token's owner, oldest first.
    pub stars: Vec<Value>,
    /// When the user token owner's snooze ends (Unix seconds), while one is on.
    pub snooze_until: Option<u64>,
    /// Reminders, oldest first.
    pub reminders: Vec<Value>,
}

/// The workspace: configuration plus everything the API has changed.
#[derive(Debug)]
pub struct Workspace {
    pub config: Config,
    /// Every conversation: configured, created by the app, and direct messages.
    pub channels: Vec<Channel>,
    pub messages: Store,
    pub ephemerals: VecDeque<Stored>,
    pub views: HashMap<String, Value>,
    pub uploads: HashMap<String, Upload>,
    pub triggers: HashMap<String, Trigger>,
    pub response_urls: HashMap<String, ResponseTarget>,
    /// Tokens revoked through `auth.revoke` or the control API.
    pub revoked: std::collections::HashSet<String>,
    /// Pins, bookmarks, user groups, scheduled messages, App Home views and streams.
    pub items: Items,
    /// Events the last call caused (a join, a leave, a new channel), for the Events API.
    pub events: Vec<Value>,
    counter: u64,
    /// The last `ts` handed out.
    last_ts: TsKey,
}

impl Workspace {
    pub fn new(config: Config) -> Workspace {
        let everyone: Vec<String> = std::iter::once(config.bot.user_id.clone())
            .chain(config.users.iter().map(|user| user.id.clone()))
            .collect();
        let channels = config
            .channels
            .iter()
            .map(|channel| Channel::configured(channel, &everyone, &config.bot.user_id))
            .collect();
        Workspace {
            channels,
            revoked: std::collections::HashSet::new(),
            events: Vec::new(),
            items: Items::default(),
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

    /// Forgets every message, view, file, trigger, created channel and revocation; ids start
    /// again from the beginning.
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
    pub fn channel(&self, key: &str) -> Option<&Channel> {
        let name = key.strip_prefix('#').unwrap_or(key);
        self.channels
            .iter()
            .find(|channel| channel.id == key || (!channel.is_dm() && channel.name == name))
    }

    pub fn channel_mut(&mut self, id: &str) -> Option<&mut Channel> {
        self.channels.iter_mut().find(|channel| channel.id == id)
    }

    /// The direct message among the bot and `users` (one user: an IM, more: an MPIM), opened
    /// now if there is none yet; `Err` is Slack's error code.
    pub fn open_dm(&mut self, users: &[String]) -> Result<(String, bool), &'static str> {
        let bot = self.config.bot.user_id.clone();
        let mut members: Vec<String> = users.iter().filter(|user| **user != bot).cloned().collect();
        if members.iter().any(|user| self.user(user).is_none()) {
            return Err("user_not_found");
        }
        members.sort();
        members.dedup();
        if members.is_empty() {
            members.push(bot.clone());
        }
        if members.len() > 8 {
            return Err("too_many_users");
        }
        let kind = if members.len() == 1 {
            Kind::Im
        } else {
            Kind::Mpim
        };
        members.insert(0, bot.clone());
        members.dedup();
        let existing = self.channels.iter_mut().find(|channel| {
            channel.kind == kind && {
                let mut sorted = channel.members.clone();
                sorted.sort();
                let mut wanted = members.clone();
                wanted.sort();
                sorted == wanted
            }
        });
        if let Some(channel) = existing {
            let was_open = channel.open;
            channel.open = true;
            return Ok((channel.id.clone(), was_open));
        }
        let prefix = if kind == Kind::Im { "D" } else { "GM" };
        let id = self.next_id(prefix);
        let name = match kind {
            Kind::Mpim => format!(
                "mpdm-{}-1",
                members
                    .iter()
                    .filter_map(|member| self.user(member))
                    .map(|user| user["name"].as_str().unwrap_or_default().to_string())
                    .collect::<Vec<_>>()
                    .join("--")
            ),
            _ => id.clone(),
        };
        let created = self.now_seconds().max(TS_EPOCH);
        self.channels.push(Channel {
            id: id.clone(),
            name,
            kind,
            members,
            topic: Default::default(),
            purpose: Default::default(),
            archived: false,
            created,
            creator: bot,
            open: true,
        });
        Ok((id, false))
    }

    /// The channel object as the app sees it.
    pub fn channel_json(&self, channel: &Channel) -> Value {
        channel.json(&self.config.team.id, &self.config.bot.user_id)
    }

    /// Queues an Events API event (`type` and fields) for delivery after the call.
    pub fn emit(&mut self, event: Value) {
        self.events.push(event);
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
    if !is_bot {
        user["profile"]["email"] = json!(format!("{name}@example.com"));
    }
    if let Some(bot_id) = bot_id {
        user["profile"]["bot_id"] = json!(bot_id);
    }
    user
}
