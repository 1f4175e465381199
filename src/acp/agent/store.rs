//! The agent's sessions: their settings (mode, model, config values), conversation history,
//! permission memory and running turn, with the ordering `session/list` uses and pruning of
//! idle sessions by age.
//!
//! Sessions live in memory for the life of the agent process and are shared by every
//! connection of one agent.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use serde_json::Value;

use super::control::TurnControl;
use super::listing::Listings;
use super::policy::PolicyMemory;
use crate::acp::{
    ConfigOptionCategory, ConfigValue, ContentBlock, Extra, ModelInfo, SelectConfigOption,
    SelectOption, SelectOptions, SessionConfigOption, SessionMode, SessionModeState,
    SessionModelState,
};

/// The modes every session offers: `(id, name, description)`.
pub const MODES: [(&str, &str, &str); 2] = [
    ("default", "Default", "Ask before running a prompt"),
    ("plan", "Plan", "Describe the work before doing it"),
];

/// The models every session offers: `(id, name, description)`. Both echo the prompt.
pub const MODELS: [(&str, &str, &str); 2] = [
    ("echo", "Echo", "Replies with the text of the prompt"),
    (
        "echo-large",
        "Echo Large",
        "Replies with the text of the prompt; a second model to switch to",
    ),
];

/// The values of the `thought_level` config option.
pub const THOUGHT_LEVELS: [&str; 3] = ["low", "medium", "high"];

/// The id of the model config option.
pub const MODEL_OPTION: &str = "model";

/// The id of the thought level config option.
pub const THOUGHT_LEVEL_OPTION: &str = "thought_level";

/// A session's current mode, model and config values.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// The current mode id.
    pub mode: String,
    /// The current model id.
    pub model: String,
    /// The current thought level.
    pub thought_level: String,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            mode: MODES[0].0.to_owned(),
            model: MODELS[0].0.to_owned(),
            thought_level: THOUGHT_LEVELS[1].to_owned(),
        }
    }
}

impl Settings {
    /// The `modes` state of session results.
    pub fn modes(&self) -> SessionModeState {
        SessionModeState {
            current_mode_id: self.mode.clone(),
            available_modes: MODES
                .iter()
                .map(|(id, name, description)| SessionMode {
                    id: (*id).to_owned(),
                    name: (*name).to_owned(),
                    description: Some((*description).to_owned()),
                    extra: Extra::new(),
                })
                .collect(),
            extra: Extra::new(),
        }
    }

    /// The legacy `models` state of session results.
    pub fn models(&self) -> SessionModelState {
        SessionModelState {
            current_model_id: self.model.clone(),
            available_models: MODELS
                .iter()
                .map(|(id, name, description)| ModelInfo {
                    model_id: (*id).to_owned(),
                    name: (*name).to_owned(),
                    description: Some((*description).to_owned()),
                    extra: Extra::new(),
                })
                .collect(),
            extra: Extra::new(),
        }
    }

    /// The complete list of config options with their current values.
    pub fn config_options(&self) -> Vec<SessionConfigOption> {
        let select = |id: &str, name: &str, category, current: &str, values: Vec<(&str, &str)>| {
            SessionConfigOption::Select(SelectConfigOption {
                id: id.to_owned(),
                name: name.to_owned(),
                description: None,
                category: Some(category),
                current_value: current.to_owned(),
                options: SelectOptions::Flat(
                    values
                        .into_iter()
                        .map(|(value, name)| SelectOption {
                            value: value.to_owned(),
                            name: name.to_owned(),
                            description: None,
                            extra: Extra::new(),
                        })
                        .collect(),
                ),
                extra: Extra::new(),
            })
        };
        vec![
            select(
                MODEL_OPTION,
                "Model",
                ConfigOptionCategory::Model,
                &self.model,
                MODELS.iter().map(|(id, name, _)| (*id, *name)).collect(),
            ),
            select(
                THOUGHT_LEVEL_OPTION,
                "Thought level",
                ConfigOptionCategory::ThoughtLevel,
                &self.thought_level,
                THOUGHT_LEVELS
                    .iter()
                    .map(|level| (*level, *level))
                    .collect(),
            ),
        ]
    }

    /// Sets the mode; an unknown id is refused with a reason.
    pub fn set_mode(&mut self, mode: &str) -> Result<(), String> {
        if !MODES.iter().any(|(id, _, _)| *id == mode) {
            let known: Vec<&str> = MODES.iter().map(|(id, _, _)| *id).collect();
            return Err(format!(
                "unknown modeId {mode:?}; available: {}",
                known.join(", ")
            ));
        }
        self.mode = mode.to_owned();
        Ok(())
    }

    /// Sets the model; an unknown id is refused with a reason.
    pub fn set_model(&mut self, model: &str) -> Result<(), String> {
        if !MODELS.iter().any(|(id, _, _)| *id == model) {
            let known: Vec<&str> = MODELS.iter().map(|(id, _, _)| *id).collect();
            return Err(format!(
                "unsupported modelId {model:?}; available: {}",
                known.join(", ")
            ));
        }
        self.model = model.to_owned();
        Ok(())
    }

    /// Sets a config option; an unknown id or value is refused with a reason.
    pub fn set_config(&mut self, config_id: &str, value: &ConfigValue) -> Result<(), String> {
        let ConfigValue::Id(value) = value else {
            return Err(format!(
                "config option {config_id:?} takes a string value, not a boolean"
            ));
        };
        match config_id {
            MODEL_OPTION => self.set_model(value),
            THOUGHT_LEVEL_OPTION => {
                if !THOUGHT_LEVELS.contains(&value.as_str()) {
                    return Err(format!(
                        "unknown value {value:?} for config option {config_id:?}; available: {}",
                        THOUGHT_LEVELS.join(", ")
                    ));
                }
                self.thought_level = value.clone();
                Ok(())
            }
            other => Err(format!(
                "unknown configId {other:?}; available: {MODEL_OPTION}, {THOUGHT_LEVEL_OPTION}"
            )),
        }
    }
}

/// One entry of a session's conversation. Every prompt adds one, so the usual entries stay small:
/// a plain text prompt is kept as its text and the rare tool call is boxed.
#[derive(Debug, Clone, PartialEq)]
pub enum HistoryEntry {
    /// A prompt, with the message id it was given (`session/load` replays it under that id).
    User {
        /// The prompt.
        prompt: StoredPrompt,
        /// The id of the user message.
        message_id: String,
    },
    /// A reply, with the message id its chunks carried when it was streamed.
    Agent {
        /// The reply's text.
        text: String,
        /// The id of the agent message.
        message_id: String,
    },
    /// A tool call the agent made and its result.
    Tool(Box<ToolRecord>),
}

impl HistoryEntry {
    /// A prompt's entry, the user message `message_id`.
    pub fn user(prompt: &[ContentBlock], message_id: String) -> Self {
        HistoryEntry::User {
            prompt: StoredPrompt::new(prompt),
            message_id,
        }
    }

    /// A reply's entry, the agent message `message_id`.
    pub fn agent(text: String, message_id: String) -> Self {
        HistoryEntry::Agent { text, message_id }
    }

    /// A tool call's entry.
    pub fn tool(id: String, name: String, input: Value, output: Value) -> Self {
        HistoryEntry::Tool(Box::new(ToolRecord {
            id,
            name,
            input,
            output,
        }))
    }
}

/// A prompt as a session's history keeps it: one text block with nothing but its text (nearly
/// every prompt) as that text, a tenth of the block's size; any other prompt as its blocks.
#[derive(Debug, Clone, PartialEq)]
pub enum StoredPrompt {
    /// The text of a prompt of one plain text block.
    Text(String),
    /// Any other prompt.
    Blocks(Vec<ContentBlock>),
}

impl StoredPrompt {
    /// Keeps `prompt`.
    pub fn new(prompt: &[ContentBlock]) -> Self {
        match prompt {
            [ContentBlock::Text(text)] if text.annotations.is_none() && text.extra.is_empty() => {
                StoredPrompt::Text(text.text.clone())
            }
            _ => StoredPrompt::Blocks(prompt.to_vec()),
        }
    }

    /// The prompt's blocks, as they arrived.
    pub fn into_blocks(self) -> Vec<ContentBlock> {
        match self {
            StoredPrompt::Text(text) => vec![ContentBlock::text(text)],
            StoredPrompt::Blocks(blocks) => blocks,
        }
    }
}

/// A tool call the agent made and its result.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolRecord {
    /// The tool call id.
    pub id: String,
    /// The tool's name (its kind).
    pub name: String,
    /// The call's input.
    pub input: Value,
    /// The call's output.
    pub output: Value,
}

/// One session.
#[derive(Debug)]
pub struct Session {
    /// The session id.
    pub id: String,
    /// The working directory the session was created with.
    pub cwd: String,
    /// Further roots of the session, as the last `session/new`, `session/load`,
    /// `session/resume` or `session/fork` gave them (`None`: none).
    pub additional_directories: Option<Vec<String>>,
    /// The title, set after the first completed turn.
    pub title: Option<String>,
    /// The session this one was forked from.
    pub parent: Option<String>,
    /// When the session was last used.
    pub updated: SystemTime,
    /// A counter value that orders sessions by last use, newest highest.
    pub touched: u64,
    /// Mode, model and config values.
    pub settings: Settings,
    /// The conversation.
    pub history: Vec<HistoryEntry>,
    /// The words of `history`, the tokens its `usage_update` reports (kept as entries are added,
    /// so a turn does not walk the whole history).
    pub context_words: u64,
    /// Remembered permission decisions.
    pub memory: PolicyMemory,
    /// The running turn, if any.
    pub turn: Option<Arc<TurnControl>>,
}

/// Every session of one agent, and the snapshots of `session/list`.
#[derive(Debug, Default)]
pub struct Store {
    /// Keyed by ids this store made (`create`), so a peer cannot choose colliding keys: the
    /// cheaper foldhash is safe here where SipHash guards maps that take outside keys.
    sessions: foldhash::HashMap<String, Session>,
    touch_counter: u64,
    /// Listing snapshots for `session/list` cursors.
    pub listings: Listings,
}

impl Store {
    /// Creates a session and returns its id.
    pub fn create(
        &mut self,
        cwd: String,
        additional_directories: Option<Vec<String>>,
        now: SystemTime,
    ) -> String {
        let id = format!("sess_{}", uuid::Uuid::new_v4().simple());
        self.touch_counter += 1;
        self.sessions.insert(
            id.clone(),
            Session {
                id: id.clone(),
                cwd,
                additional_directories,
                title: None,
                parent: None,
                updated: now,
                touched: self.touch_counter,
                settings: Settings::default(),
                history: Vec::new(),
                context_words: 0,
                memory: PolicyMemory::default(),
                turn: None,
            },
        );
        id
    }

    /// Creates a fork of a session: a new id, the same settings, history and title, and the
    /// source recorded as its parent. Permission memory is not inherited, and neither are the
    /// source's additional directories: the fork has those the request named (ACP's
    /// additional-directories text: no root is inherited implicitly).
    pub fn fork(
        &mut self,
        source: &str,
        cwd: String,
        additional_directories: Option<Vec<String>>,
        now: SystemTime,
    ) -> Option<String> {
        let (settings, history, title) = {
            let source = self.sessions.get(source)?;
            (
                source.settings.clone(),
                source.history.clone(),
                source.title.clone(),
            )
        };
        let id = self.create(cwd, additional_directories, now);
        if let Some(session) = self.sessions.get_mut(&id) {
            session.settings = settings;
            session.context_words = history.iter().map(super::commands::words).sum();
            session.history = history;
            session.title = title;
            session.parent = Some(source.to_owned());
        }
        Some(id)
    }

    /// A session by id.
    pub fn get(&self, id: &str) -> Option<&Session> {
        self.sessions.get(id)
    }

    /// A session by id, for changing it.
    pub fn get_mut(&mut self, id: &str) -> Option<&mut Session> {
        self.sessions.get_mut(id)
    }

    /// Whether a session exists.
    pub fn contains(&self, id: &str) -> bool {
        self.sessions.contains_key(id)
    }

    /// Marks a session as used now.
    pub fn touch(&mut self, id: &str, now: SystemTime) {
        self.touch_counter += 1;
        let counter = self.touch_counter;
        if let Some(session) = self.sessions.get_mut(id) {
            session.updated = now;
            session.touched = counter;
        }
    }

    /// Moves a session to the front of the last-used order without changing its `updated`.
    pub fn reorder(&mut self, id: &str) {
        self.touch_counter += 1;
        let counter = self.touch_counter;
        if let Some(session) = self.sessions.get_mut(id) {
            session.touched = counter;
        }
    }

    /// Removes a session.
    pub fn remove(&mut self, id: &str) -> Option<Session> {
        self.sessions.remove(id)
    }

    /// Removes every session.
    pub fn clear(&mut self) -> Vec<Session> {
        self.listings.clear();
        self.sessions.drain().map(|(_, session)| session).collect()
    }

    /// Removes the sessions idle for longer than `ttl` (a session with a running turn is never
    /// idle) and returns them.
    pub fn prune(&mut self, ttl: Duration, now: SystemTime) -> Vec<Session> {
        let expired: Vec<String> = self
            .sessions
            .values()
            .filter(|session| session.turn.is_none())
            .filter(|session| {
                now.duration_since(session.updated)
                    .is_ok_and(|idle| idle > ttl)
            })
            .map(|session| session.id.clone())
            .collect();
        expired
            .iter()
            .filter_map(|id| self.sessions.remove(id))
            .collect()
    }

    /// The ids of the sessions in `cwd` (all when `None`), most recently used first.
    pub fn ordered(&self, cwd: Option<&str>) -> Vec<String> {
        let mut sessions: Vec<&Session> = self
            .sessions
            .values()
            .filter(|session| cwd.is_none_or(|cwd| session.cwd == cwd))
            .collect();
        sessions.sort_by_key(|session| std::cmp::Reverse(session.touched));
        sessions.into_iter().map(|s| s.id.clone()).collect()
    }

    /// How many sessions exist.
    pub fn len(&self) -> usize {
        self.sessions.len()
    }

    /// Whether no session exists.
    pub fn is_empty(&self) -> bool {
        self.sessions.is_empty()
    }

    /// Every running turn.
    pub fn running_turns(&self) -> Vec<Arc<TurnControl>> {
        self.sessions
            .values()
            .filter_map(|session| session.turn.clone())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Blocks from their JSON text.
    fn blocks(text: &str) -> Vec<ContentBlock> {
        serde_json::from_str(text).expect("content blocks")
    }

    #[test]
    fn a_stored_prompt_gives_back_the_blocks_it_kept() {
        for prompt in [
            r#"[{"type":"text","text":"plain"}]"#,
            r#"[{"type":"text","text":"noted","annotations":{"priority":0.5}}]"#,
            r#"[{"type":"text","text":"meta","_meta":{"k":1}}]"#,
            r#"[{"type":"text","text":"a"},{"type":"text","text":"b"}]"#,
            r#"[{"type":"resource_link","uri":"file:///x","name":"x"}]"#,
            "[]",
        ] {
            let prompt = blocks(prompt);
            assert_eq!(StoredPrompt::new(&prompt).into_blocks(), prompt);
        }
        // Only a single block with nothing but its text is kept as text.
        assert!(matches!(
            StoredPrompt::new(&blocks(r#"[{"type":"text","text":"plain"}]"#)),
            StoredPrompt::Text(text) if text == "plain"
        ));
        assert!(matches!(
            StoredPrompt::new(&blocks(r#"[{"type":"text","text":"m","_meta":{"k":1}}]"#)),
            StoredPrompt::Blocks(_)
        ));
    }

    #[test]
    fn sessions_are_ordered_by_last_use_and_filtered_by_cwd() {
        let now = SystemTime::UNIX_EPOCH;
        let mut store = Store::default();
        let a = store.create("/a".into(), None, now);
        let b = store.create("/b".into(), None, now);
        let c = store.create("/a".into(), None, now);
        assert_eq!(store.ordered(None), [c.clone(), b.clone(), a.clone()]);
        store.touch(&a, now);
        assert_eq!(store.ordered(None), [a.clone(), c.clone(), b]);
        assert_eq!(store.ordered(Some("/a")), [a, c]);
    }

    #[test]
    fn prune_removes_only_idle_sessions_older_than_the_ttl() {
        let start = SystemTime::UNIX_EPOCH;
        let mut store = Store::default();
        let old = store.create("/w".into(), None, start);
        let busy = store.create("/w".into(), None, start);
        store.get_mut(&busy).unwrap().turn = Some(Arc::new(TurnControl::new()));
        let fresh = store.create("/w".into(), None, start + Duration::from_secs(9));
        let removed = store.prune(Duration::from_secs(5), start + Duration::from_secs(10));
        let removed: Vec<String> = removed.into_iter().map(|s| s.id).collect();
        assert_eq!(removed, [old]);
        assert!(store.contains(&busy) && store.contains(&fresh));
    }

    #[test]
    fn fork_copies_settings_and_history_and_records_the_parent() {
        let now = SystemTime::UNIX_EPOCH;
        let mut store = Store::default();
        let source = store.create("/w".into(), None, now);
        {
            let session = store.get_mut(&source).unwrap();
            session.settings.set_mode("plan").unwrap();
            session.settings.set_model("echo-large").unwrap();
            session
                .settings
                .set_config(THOUGHT_LEVEL_OPTION, &ConfigValue::Id("high".into()))
                .unwrap();
            session
                .history
                .push(HistoryEntry::agent("hi".into(), "msg_1".into()));
        }
        let fork = store.fork(&source, "/w".into(), None, now).unwrap();
        assert_ne!(fork, source);
        let forked = store.get(&fork).unwrap();
        assert_eq!(forked.parent.as_deref(), Some(source.as_str()));
        assert_eq!(forked.settings, store.get(&source).unwrap().settings);
        assert_eq!(forked.history.len(), 1);
        assert!(store.fork("missing", "/w".into(), None, now).is_none());
    }

    #[test]
    fn settings_refuse_unknown_values_with_the_alternatives() {
        let mut settings = Settings::default();
        assert!(settings.set_mode("nope").unwrap_err().contains("default"));
        assert!(settings.set_model("gpt").unwrap_err().contains("echo"));
        assert!(
            settings
                .set_config("x", &ConfigValue::Id("y".into()))
                .unwrap_err()
                .contains("configId")
        );
        assert!(
            settings
                .set_config(THOUGHT_LEVEL_OPTION, &ConfigValue::Boolean(true))
                .is_err()
        );
        settings
            .set_config(MODEL_OPTION, &ConfigValue::Id("echo-large".into()))
            .unwrap();
        assert_eq!(settings.models().current_model_id, "echo-large");
    }
}
