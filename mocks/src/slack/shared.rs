//! The state every part of the fake shares: the workspace, the log, pending faults, the Socket
//! Mode hub, and a change counter that waiters watch (no polling).

use std::ops::Bound;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use serde::Serialize;
use serde_json::{Value, json};
use tokio::sync::watch;

use super::api::Site;
use super::config::Config;
use super::envelope::{self, EnvelopeKind};
use super::fault::Faults;
use super::rate::RateLimits;
use super::record::{Log, RecordedDelivery, RecordedRequest};
use super::socket::Hub;
use super::store::ts_key;
use super::workspace::{ResponseTarget, Workspace};
use super::{Click, FakeSlackError, SlashCommand, UserMessage};

/// A stored message and its channel.
#[derive(Debug, Clone, Serialize)]
pub struct Message {
    pub channel: String,
    pub message: Value,
}

impl Message {
    pub fn text(&self) -> &str {
        self.message["text"].as_str().unwrap_or_default()
    }

    pub fn ts(&self) -> &str {
        self.message["ts"].as_str().unwrap_or_default()
    }

    pub fn thread_ts(&self) -> Option<&str> {
        self.message["thread_ts"].as_str()
    }

    /// Posted by the app's bot user.
    pub fn is_bot(&self) -> bool {
        self.message.get("bot_id").is_some()
    }
}

/// An ack the client sent.
#[derive(Debug, Clone, Serialize)]
pub struct Ack {
    pub envelope_id: String,
    /// The ack's `payload`; `None` for a bare ack or `payload: {}`.
    pub payload: Option<Value>,
    pub connection: u64,
    /// Milliseconds from the (last) delivery to the ack.
    pub latency_ms: u64,
}

#[derive(Debug)]
pub struct Shared {
    workspace: Mutex<Workspace>,
    log: Mutex<Log>,
    faults: Mutex<Faults>,
    pub(super) hub: Mutex<Hub>,
    rate: Mutex<RateLimits>,
    changed: watch::Sender<u64>,
    pub site: Site,
    pub(super) runtime: tokio::runtime::Handle,
}

/// Locks a mutex; a panic elsewhere while it was held does not stop the fake.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Shared {
    pub fn new(config: Config, site: Site, transcript: Option<std::fs::File>) -> Shared {
        let log = Log::new(transcript, config.retention.clone());
        Shared {
            workspace: Mutex::new(Workspace::new(config)),
            log: Mutex::new(log),
            faults: Mutex::new(Faults::default()),
            hub: Mutex::new(Hub::default()),
            rate: Mutex::new(RateLimits::default()),
            changed: watch::channel(0).0,
            site,
            runtime: tokio::runtime::Handle::current(),
        }
    }

    pub fn workspace(&self) -> MutexGuard<'_, Workspace> {
        lock(&self.workspace)
    }

    pub fn log(&self) -> MutexGuard<'_, Log> {
        lock(&self.log)
    }

    pub fn faults(&self) -> MutexGuard<'_, Faults> {
        lock(&self.faults)
    }

    pub fn hub(&self) -> MutexGuard<'_, Hub> {
        lock(&self.hub)
    }

    /// Counts a Web API call against its tier; `Some(seconds)` when it is over the allowance.
    pub fn rate_limited(&self, method: &str) -> Option<u64> {
        let tier = super::api::methods::find(method)?.tier;
        let config = self.workspace().config.rate_limits.clone();
        lock(&self.rate).check(&config, method, tier)
    }

    pub fn config(&self) -> Config {
        self.workspace().config.clone()
    }

    /// Wakes every waiter to look again.
    pub fn bump(&self) {
        self.changed.send_modify(|version| *version += 1);
    }

    /// Waits until `check` gives a value, looking again on every change.
    async fn wait<T>(
        &self,
        timeout: Duration,
        what: &str,
        mut check: impl FnMut() -> Option<T>,
    ) -> Result<T, FakeSlackError> {
        let mut changes = self.changed.subscribe();
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            if let Some(found) = check() {
                return Ok(found);
            }
            match tokio::time::timeout_at(deadline, changes.changed()).await {
                Ok(Ok(())) => {}
                Ok(Err(_)) | Err(_) => {
                    return check()
                        .ok_or_else(|| FakeSlackError::Timeout(timeout, what.to_string()));
                }
            }
        }
    }

    pub async fn await_ack(
        &self,
        envelope_id: &str,
        timeout: Duration,
    ) -> Result<Ack, FakeSlackError> {
        if !self.hub().envelopes.contains_key(envelope_id) {
            return Err(FakeSlackError::UnknownEnvelope(envelope_id.to_string()));
        }
        self.wait(timeout, &format!("the ack of {envelope_id}"), || {
            self.ack(envelope_id)
        })
        .await
    }

    /// Waits for a POST to the Request URL that `predicate` picks (the kept ones, oldest first).
    pub async fn await_delivery(
        &self,
        predicate: impl Fn(&RecordedDelivery) -> bool,
        timeout: Duration,
    ) -> Result<RecordedDelivery, FakeSlackError> {
        self.wait(timeout, "a delivery", || {
            self.log().deliveries.iter().find(|d| predicate(d)).cloned()
        })
        .await
    }

    pub fn ack(&self, envelope_id: &str) -> Option<Ack> {
        self.hub().envelopes.get(envelope_id)?.ack.clone()
    }

    /// Looks at every kept message once, then only at messages stored or changed since the last
    /// look: a wait costs what changed, not the size of the store.
    pub async fn wait_for_message(
        &self,
        predicate: impl Fn(&Message) -> bool,
        timeout: Duration,
    ) -> Result<Message, FakeSlackError> {
        let mut seen = 0;
        self.wait(timeout, "a matching message", || {
            let (changed, next) = self.workspace().messages.changed_since(seen);
            seen = next;
            changed
                .into_iter()
                .map(|stored| Message {
                    channel: stored.channel,
                    message: stored.message,
                })
                .find(|message| predicate(message))
        })
        .await
    }

    pub async fn wait_for_requests(
        &self,
        method: &str,
        count: usize,
        timeout: Duration,
    ) -> Result<Vec<RecordedRequest>, FakeSlackError> {
        self.wait(timeout, &format!("{count} {method} requests"), || {
            let log = self.log();
            if log.count(method) < count {
                return None;
            }
            let found: Vec<RecordedRequest> = log
                .requests
                .iter()
                .filter(|request| request.method == method)
                .cloned()
                .collect();
            Some(found)
        })
        .await
    }

    pub async fn wait_for_connections(
        &self,
        count: usize,
        timeout: Duration,
    ) -> Result<(), FakeSlackError> {
        self.wait(timeout, &format!("{count} socket mode connections"), || {
            (self.hub().live() >= count).then_some(())
        })
        .await
    }

    pub fn messages(&self, channel: &str, thread: Option<&str>) -> Vec<Message> {
        let workspace = self.workspace();
        let channel = workspace
            .channel(channel)
            .map_or_else(|| channel.to_string(), |found| found.id.clone());
        let listing = match thread {
            None => {
                let (mut top, _) = workspace.messages.history(
                    &channel,
                    Bound::Unbounded,
                    Bound::Unbounded,
                    usize::MAX,
                );
                top.reverse();
                top
            }
            Some(thread) => match ts_key(thread) {
                Some(root) => {
                    workspace
                        .messages
                        .thread(
                            &channel,
                            root,
                            Bound::Unbounded,
                            Bound::Unbounded,
                            usize::MAX,
                        )
                        .0
                }
                None => Vec::new(),
            },
        };
        listing
            .into_iter()
            .map(|message| Message {
                channel: channel.clone(),
                message,
            })
            .collect()
    }

    pub fn all_messages(&self) -> Vec<Message> {
        self.workspace()
            .messages
            .all()
            .into_iter()
            .map(|stored| Message {
                channel: stored.channel.clone(),
                message: stored.message.clone(),
            })
            .collect()
    }

    pub fn ephemerals(&self) -> Vec<Message> {
        self.workspace()
            .ephemerals
            .iter()
            .map(|stored| Message {
                channel: stored.channel.clone(),
                message: stored.message.clone(),
            })
            .collect()
    }

    pub fn view(&self, view_id: &str) -> Option<Value> {
        self.workspace().views.get(view_id).cloned()
    }

    pub fn reset(&self) {
        self.workspace().reset();
        self.log().clear();
        self.faults().clear();
        self.hub().clear_envelopes();
        self.bump();
    }

    fn check_channel(workspace: &Workspace, channel: &str) -> Result<String, FakeSlackError> {
        workspace
            .channel(channel)
            .map(|found| found.id.clone())
            .ok_or_else(|| FakeSlackError::UnknownChannel(channel.to_string()))
    }

    /// The channel id and the message at `ts` a user acts on as its author (edits and deletes):
    /// an unknown channel, user or message, or another author's message, is refused.
    fn own_message(
        workspace: &Workspace,
        user: &str,
        channel: &str,
        ts: &str,
    ) -> Result<(String, Value), FakeSlackError> {
        let channel = Self::check_channel(workspace, channel)?;
        Self::check_user(workspace, user)?;
        let previous = workspace
            .find(&channel, ts)
            .ok_or_else(|| FakeSlackError::UnknownMessage {
                channel: channel.clone(),
                ts: ts.to_string(),
            })?
            .message;
        if previous["user"] != json!(user) {
            return Err(FakeSlackError::NotAuthor(user.to_string()));
        }
        Ok((channel, previous))
    }

    fn check_user(workspace: &Workspace, user: &str) -> Result<(), FakeSlackError> {
        workspace
            .user(user)
            .map(|_| ())
            .ok_or_else(|| FakeSlackError::UnknownUser(user.to_string()))
    }

    /// A new response URL for a command or an interaction in `channel`.
    fn response_url(&self, workspace: &mut Workspace, target: ResponseTarget) -> String {
        let id = workspace.next_id("R");
        workspace.response_urls.insert(id.clone(), target);
        format!("{}/response/{id}", self.site.origin)
    }

    pub fn slash_command(
        self: &Arc<Self>,
        command: &SlashCommand,
    ) -> Result<String, FakeSlackError> {
        let (id, payload) = {
            let mut workspace = self.workspace();
            let channel = Self::check_channel(&workspace, &command.channel)?;
            Self::check_user(&workspace, &command.user)?;
            let url = self.response_url(
                &mut workspace,
                ResponseTarget {
                    channel: channel.clone(),
                    message_ts: None,
                    user: command.user.clone(),
                },
            );
            let trigger = workspace.issue_trigger();
            let payload = envelope::slash_command(
                &workspace,
                &command.command,
                &command.text,
                &channel,
                &command.user,
                &url,
                &trigger,
            );
            (workspace.next_envelope_id(), payload)
        };
        self.dispatch_envelope(&id, EnvelopeKind::SlashCommands, payload, true);
        Ok(id)
    }

    /// Sends `payload` as it is in an envelope of `kind`: hostile or malformed payloads that no
    /// real Slack would send, to see the app answer them without harm.
    pub fn raw_envelope(self: &Arc<Self>, kind: EnvelopeKind, payload: Value) -> String {
        let id = self.workspace().next_envelope_id();
        self.dispatch_envelope(&id, kind, payload, kind != EnvelopeKind::EventsApi);
        id
    }

    pub fn click(self: &Arc<Self>, click: &Click) -> Result<String, FakeSlackError> {
        let (id, payload) = {
            let mut workspace = self.workspace();
            let channel = Self::check_channel(&workspace, &click.channel)?;
            Self::check_user(&workspace, &click.user)?;
            let message = workspace
                .find(&channel, &click.message_ts)
                .map(|stored| stored.message)
                .ok_or_else(|| FakeSlackError::UnknownMessage {
                    channel: channel.clone(),
                    ts: click.message_ts.clone(),
                })?;
            let (block_id, element) = find_element(&message, &click.action_id)
                .ok_or_else(|| FakeSlackError::UnknownAction(click.action_id.clone()))?;
            let url = self.response_url(
                &mut workspace,
                ResponseTarget {
                    channel: channel.clone(),
                    message_ts: Some(click.message_ts.clone()),
                    user: click.user.clone(),
                },
            );
            let trigger = workspace.issue_trigger();
            let action_ts = workspace.next_ts();
            let payload = envelope::block_actions(
                &workspace,
                &channel,
                &message,
                &block_id,
                &element,
                &click.user,
                &url,
                &trigger,
                &action_ts,
            );
            (workspace.next_envelope_id(), payload)
        };
        self.dispatch_envelope(&id, EnvelopeKind::Interactive, payload, false);
        Ok(id)
    }

    pub fn view_event(
        self: &Arc<Self>,
        view_id: &str,
        values: &Value,
        user: &str,
        closed: bool,
    ) -> Result<String, FakeSlackError> {
        let (id, payload) = {
            let mut workspace = self.workspace();
            Self::check_user(&workspace, user)?;
            let view = workspace
                .views
                .get(view_id)
                .cloned()
                .ok_or_else(|| FakeSlackError::UnknownView(view_id.to_string()))?;
            let trigger = workspace.issue_trigger();
            let payload = envelope::view_payload(&workspace, &view, values, user, &trigger, closed);
            (workspace.next_envelope_id(), payload)
        };
        self.dispatch_envelope(&id, EnvelopeKind::Interactive, payload, !closed);
        Ok(id)
    }

    pub fn user_message(
        self: &Arc<Self>,
        message: &UserMessage,
    ) -> Result<(String, String, Option<String>), FakeSlackError> {
        let (ts, events) = {
            let mut workspace = self.workspace();
            let channel = Self::check_channel(&workspace, &message.channel)?;
            Self::check_user(&workspace, &message.user)?;
            let thread = match &message.thread_ts {
                Some(thread) => Some(
                    workspace
                        .find(&channel, thread)
                        .map(|parent| parent.thread_ts().unwrap_or(thread).to_string())
                        .ok_or_else(|| FakeSlackError::UnknownMessage {
                            channel: channel.clone(),
                            ts: thread.clone(),
                        })?,
                ),
                None => None,
            };
            let ts = workspace.next_ts();
            let team = workspace.config.team.id.clone();
            let mut stored = json!({
                "type": "message",
                "user": message.user,
                "text": message.text,
                "ts": ts,
                "team": team,
            });
            if let Some(thread) = &thread {
                stored["thread_ts"] = json!(thread);
            }
            workspace.store(&channel, stored.clone());
            let mut event = stored.clone();
            event["channel"] = json!(channel);
            event["event_ts"] = json!(ts);
            event["channel_type"] = json!("channel");
            let mut events = vec![event.clone()];
            let mention = format!("<@{}>", workspace.config.bot.user_id);
            if message.text.contains(&mention) {
                event["type"] = json!("app_mention");
                events.push(event);
            }
            let events: Vec<(String, Value)> = events
                .into_iter()
                .map(|event| {
                    let event_id = workspace.next_id("Ev");
                    let payload = envelope::event_callback(
                        &workspace,
                        event,
                        &event_id,
                        workspace.now_seconds(),
                    );
                    (workspace.next_envelope_id(), payload)
                })
                .collect();
            (ts, events)
        };
        self.bump();
        let mut ids = Vec::new();
        for (id, payload) in events {
            self.dispatch_envelope(&id, EnvelopeKind::EventsApi, payload, false);
            ids.push(id);
        }
        let mut ids = ids.into_iter();
        let first = ids.next().unwrap_or_default();
        Ok((first, ts, ids.next()))
    }

    /// Sends events queued by a Web API call (joins, leaves, new channels) as `events_api`
    /// envelopes.
    pub fn deliver_queued_events(self: &Arc<Self>) {
        let envelopes: Vec<(String, Value)> = {
            let mut workspace = self.workspace();
            let events = std::mem::take(&mut workspace.events);
            let time = workspace.now_seconds();
            events
                .into_iter()
                .map(|event| {
                    let event_id = workspace.next_id("Ev");
                    let payload = envelope::event_callback(&workspace, event, &event_id, time);
                    (workspace.next_envelope_id(), payload)
                })
                .collect()
        };
        for (id, payload) in envelopes {
            self.dispatch_envelope(&id, EnvelopeKind::EventsApi, payload, false);
        }
    }

    /// A user edits their own message: stored, and sent as `message_changed`.
    pub fn user_edit(
        self: &Arc<Self>,
        user: &str,
        channel: &str,
        ts: &str,
        text: &str,
    ) -> Result<(), FakeSlackError> {
        {
            let mut workspace = self.workspace();
            let (channel, previous) = Self::own_message(&workspace, user, channel, ts)?;
            let edited_ts = workspace.next_ts();
            let message = workspace
                .messages
                .update(&channel, ts, |message| {
                    message["text"] = json!(text);
                    message["edited"] = json!({ "user": user, "ts": edited_ts });
                    message.clone()
                })
                .ok_or_else(|| FakeSlackError::UnknownMessage {
                    channel: channel.clone(),
                    ts: ts.to_string(),
                })?;
            workspace.emit(json!({
                "type": "message", "subtype": "message_changed", "hidden": true,
                "channel": channel, "message": message, "previous_message": previous,
                "ts": edited_ts, "event_ts": edited_ts, "channel_type": "channel",
            }));
        }
        self.bump();
        self.deliver_queued_events();
        Ok(())
    }

    /// A user deletes their own message: forgotten, and sent as `message_deleted`.
    pub fn user_delete(
        self: &Arc<Self>,
        user: &str,
        channel: &str,
        ts: &str,
    ) -> Result<(), FakeSlackError> {
        {
            let mut workspace = self.workspace();
            let (channel, previous) = Self::own_message(&workspace, user, channel, ts)?;
            workspace.messages.remove(&channel, ts);
            let event_ts = workspace.next_ts();
            workspace.emit(json!({
                "type": "message", "subtype": "message_deleted", "hidden": true,
                "channel": channel, "deleted_ts": ts, "previous_message": previous,
                "ts": event_ts, "event_ts": event_ts, "channel_type": "channel",
            }));
        }
        self.bump();
        self.deliver_queued_events();
        Ok(())
    }

    /// A user joins (`join` true) or leaves a channel: `member_joined_channel` or
    /// `member_left_channel`.
    pub fn user_membership(
        self: &Arc<Self>,
        user: &str,
        channel: &str,
        join: bool,
    ) -> Result<(), FakeSlackError> {
        {
            let mut workspace = self.workspace();
            let channel = Self::check_channel(&workspace, channel)?;
            Self::check_user(&workspace, user)?;
            let team = workspace.config.team.id.clone();
            let event_ts = workspace.next_ts();
            let Some(found) = workspace.channel_mut(&channel) else {
                return Err(FakeSlackError::UnknownChannel(channel));
            };
            let member = found.is_member(user);
            if join && !member {
                found.members.push(user.to_string());
            } else if !join && member {
                found.members.retain(|id| id != user);
            } else {
                return Ok(());
            }
            let kind = if join {
                "member_joined_channel"
            } else {
                "member_left_channel"
            };
            workspace.emit(json!({
                "type": kind, "user": user, "channel": channel, "channel_type": "C",
                "team": team, "event_ts": event_ts,
            }));
        }
        self.deliver_queued_events();
        Ok(())
    }

    /// A user opens the app's Home tab: `app_home_opened` with the published view, if any.
    pub fn app_home_opened(self: &Arc<Self>, user: &str) -> Result<(), FakeSlackError> {
        {
            let mut workspace = self.workspace();
            Self::check_user(&workspace, user)?;
            let (dm, _) = workspace
                .open_dm(&[user.to_string()])
                .map_err(|_| FakeSlackError::UnknownUser(user.to_string()))?;
            let event_ts = workspace.next_ts();
            let mut event = json!({
                "type": "app_home_opened", "user": user, "channel": dm, "tab": "home",
                "event_ts": event_ts,
            });
            if let Some(view) = workspace.items.home_views.get(user) {
                event["view"] = view.clone();
            }
            workspace.emit(event);
        }
        self.deliver_queued_events();
        Ok(())
    }

    pub fn user_reaction(
        self: &Arc<Self>,
        user: &str,
        channel: &str,
        ts: &str,
        name: &str,
    ) -> Result<String, FakeSlackError> {
        let (id, payload) = {
            let mut workspace = self.workspace();
            let channel = Self::check_channel(&workspace, channel)?;
            Self::check_user(&workspace, user)?;
            let item_user = workspace
                .find(&channel, ts)
                .map(|stored| stored.message["user"].clone())
                .ok_or_else(|| FakeSlackError::UnknownMessage {
                    channel: channel.clone(),
                    ts: ts.to_string(),
                })?;
            let event_ts = workspace.next_ts();
            let event = json!({
                "type": "reaction_added",
                "user": user,
                "reaction": name,
                "item_user": item_user,
                "item": { "type": "message", "channel": channel, "ts": ts },
                "event_ts": event_ts,
            });
            let event_id = workspace.next_id("Ev");
            let payload =
                envelope::event_callback(&workspace, event, &event_id, workspace.now_seconds());
            (workspace.next_envelope_id(), payload)
        };
        self.dispatch_envelope(&id, EnvelopeKind::EventsApi, payload, false);
        Ok(id)
    }
}

/// The block id and element with this `action_id` in a message's blocks (action blocks'
/// elements and section accessories).
fn find_element(message: &Value, action_id: &str) -> Option<(String, Value)> {
    for block in message["blocks"].as_array()? {
        let block_id = block["block_id"].as_str().unwrap_or_default().to_string();
        let mut candidates: Vec<&Value> = block["elements"]
            .as_array()
            .map(|e| e.iter().collect())
            .unwrap_or_default();
        if let Some(accessory) = block.get("accessory") {
            candidates.push(accessory);
        }
        if let Some(element) = candidates
            .into_iter()
            .find(|element| element["action_id"] == json!(action_id))
        {
            return Some((block_id, element.clone()));
        }
    }
    None
}
