//! Target profiles: how to start and observe one build under test (`conformance/targets/*.toml`).
//!
//! The format is documented in `conformance/targets/README.md`. A profile has one section per
//! suite with command templates, URLs, environment, declared capabilities, free-form settings and
//! per-scenario text overrides. Templates use `{placeholder}`s filled in per scenario.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// Errors of loading a profile or rendering one of its templates.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TargetError {
    /// The profile file could not be read. The message names the file; the reason is the
    /// source, so a printer that walks the chain shows it once.
    #[error("cannot read target profile {path}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The profile is not valid TOML of the profile format.
    #[error("target profile {origin} is not valid: {message}")]
    Parse {
        /// The file.
        origin: String,
        /// The parser's message.
        message: String,
    },
    /// The profile parsed but breaks a rule.
    #[error("target profile {origin}: {problems}", problems = .problems.join("; "))]
    Invalid {
        /// The file.
        origin: String,
        /// Every rule broken.
        problems: Vec<String>,
    },
    /// No profile of that name exists.
    #[error("no target profile named {name:?} (known: {known})")]
    Unknown {
        /// The name asked for.
        name: String,
        /// The names that exist.
        known: String,
    },
    /// A template names a placeholder that has no value here.
    #[error("template {template:?} uses {{{name}}}, which has no value here")]
    Placeholder {
        /// The template.
        template: String,
        /// The placeholder.
        name: String,
    },
    /// A template is malformed (an unclosed brace or quote).
    #[error("template {template:?} is malformed: {message}")]
    Template {
        /// The template.
        template: String,
        /// What is wrong.
        message: String,
    },
    /// The section has no command of this name.
    #[error("target {target} declares no command {name:?} for suite {suite}")]
    NoCommand {
        /// The profile name.
        target: String,
        /// The suite.
        suite: String,
        /// The command name.
        name: String,
    },
}

/// The HOME of an ad-hoc agent started over stdio: the scenario's own `{home}` directory.
pub const AD_HOC_HOME: &str = "{home}";

/// Placeholders every template may use, filled in by the harness for each scenario.
pub const BUILTIN_PLACEHOLDERS: &[&str] = &[
    // The directory of the binaries under test (`--bin-dir`).
    "bin_dir",
    // The scenario's own temporary directory.
    "temp_dir",
    // `{temp_dir}/data`, for targets that keep state in a directory.
    "data_dir",
    // `{temp_dir}/home`, created by the harness: a home directory of the scenario's own (for
    // example `env = { HOME = "{home}" }` for an agent that writes under its home).
    "home",
    // The scenario ID and its suite.
    "scenario",
    "suite",
    // A free loopback address (`127.0.0.1:PORT`), its host and port; only in listening commands.
    "listen",
    "host",
    "port",
    // A URL built by the check, for example the fake server a client under test must reach.
    "url",
    // The rendered `agent` command of the same section as one shell-quoted string.
    "agent_cmd",
    // Client commands of the ACP suite: the prompt texts of a run, a session id to reuse and the
    // path of a driver script.
    "prompt",
    "prompt2",
    "session_id",
    "script",
    // The intercom suite: the config file and mode of `server`/`server_mode`, and what the
    // config and workspace templates are filled with.
    "config",
    "mode",
    "top",
    "workspaces",
    "api_base_url",
    "authorized_user",
    "database",
    "workspace_id",
    "channel_id",
    // The intercom suite's ACP rows: the agent and ACP parts of the config.
    "mock_agent",
    "control",
    "transcripts",
    "dialect",
    "max_sessions",
    "startup_timeout_ms",
    "max_line_length",
    "stall_enabled",
    "inactivity_ms",
    "escalation_ms",
    "max_retries",
    // The same times in whole seconds, rounded up, for a build that only knows seconds.
    "startup_timeout_s",
    "inactivity_s",
    "escalation_s",
    // A free loopback port the harness chose for the target's MCP endpoint (`mcp_url` setting).
    "mcp_port",
    // The ACP suite's fake model (`[suites.acp.model]`), started for each agent a row starts:
    // its OpenAI base URL (`http://127.0.0.1:PORT/v1`), its Anthropic base URL
    // (`http://127.0.0.1:PORT`) and the key it accepts.
    "model_openai_url",
    "model_anthropic_url",
    "model_key",
];

/// A command template: a list of words, or one string split like a shell would.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum CommandTemplate {
    /// `"ski acp serve --listen {listen}"`.
    Line(String),
    /// `["ski", "acp", "serve"]`.
    Argv(Vec<String>),
    /// A table with the argv and extras.
    Full(CommandTable),
}

/// The table form of a command.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CommandTable {
    /// The words (or one line to split).
    pub argv: ArgvTemplate,
    /// Environment for this command only.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Working directory (a template; default `{temp_dir}`).
    #[serde(default)]
    pub cwd: Option<String>,
    /// How to know a listening command is ready.
    #[serde(default)]
    pub ready: Option<Readiness>,
}

/// The argv of a command table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ArgvTemplate {
    /// One line to split.
    Line(String),
    /// Words.
    Words(Vec<String>),
}

/// How the harness knows that a started server is ready.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Readiness {
    /// A TCP connection to the allocated address succeeds (while the process still runs).
    Connect,
    /// A line of stdout or stderr contains this text.
    Line(String),
}

/// One suite's part of a profile.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SuiteTarget {
    /// Another section of the profile this one starts from (`extends = "aof"` in
    /// `[suites.aof-ski]`): every key of its `env`, `commands`, `urls`, `settings` and
    /// `overrides` this section does not set, and its `auth` and `model` unless this section has
    /// its own; never its `capabilities`, `discover` or `exclude_capabilities`, which each
    /// section declares for its own rows (an inherited `model` still adds what a model gives).
    /// [`Target::parse`] resolves it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extends: Option<String>,
    /// Capabilities this build declares for the suite.
    #[serde(default)]
    pub capabilities: BTreeSet<String>,
    /// Environment for every command of the suite.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Named command templates (`agent`, `server`, `client`, ...).
    #[serde(default)]
    pub commands: BTreeMap<String, CommandTemplate>,
    /// Named URLs of already-running servers (`ws`, ...).
    #[serde(default)]
    pub urls: BTreeMap<String, String>,
    /// Free-form settings the suite's checks read (templates allowed).
    #[serde(default)]
    pub settings: BTreeMap<String, String>,
    /// Per-scenario text overrides: scenario ID, then key, then text.
    #[serde(default)]
    pub overrides: BTreeMap<String, BTreeMap<String, String>>,
    /// ACP: start the `agent` command once before the run and add the capabilities it shows
    /// (`ski-conformance probe` explains them) to `capabilities`.
    #[serde(default)]
    pub discover: bool,
    /// ACP with `discover`: capabilities never added by discovery (an auth method that needs a
    /// person, a session loader that has nothing to load offline).
    #[serde(default)]
    pub exclude_capabilities: BTreeSet<String>,
    /// ACP: the auth method every connection authenticates with, after `initialize` and before
    /// any other request of an ordinary row, and the environment that method needs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth: Option<AuthSetting>,
    /// ACP: a fake model (`ski-fake-model`) started for each agent a row starts, and how the
    /// agent is pointed at it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<ModelSetting>,
}

/// The fake model of an ACP section (`[suites.acp.model]`): the runner starts one in-process
/// for each agent a row starts, scripted for what the row needs, and passes its URL and key to
/// the agent through `env` and `files` (templates that may use `{model_openai_url}`,
/// `{model_anthropic_url}` and `{model_key}`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelSetting {
    /// The API the agent speaks: `openai-chat`, `openai-responses` or `anthropic` (said in
    /// reports; the fake serves all three on one port).
    pub api: String,
    /// Environment added to every agent command while the model runs.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Files written before the agent starts: path (relative to `{home}` unless absolute), then
    /// content; both templates.
    #[serde(default)]
    pub files: BTreeMap<String, String>,
    /// Capabilities the agent has once a model answers; `prompt` and `hold` when not given.
    #[serde(default)]
    pub capabilities: Option<BTreeSet<String>>,
    /// The agent's own tools for the actions a row scripts: `read` (a file), `write` (a file),
    /// `run` (a command).
    #[serde(default)]
    pub tools: BTreeMap<String, ModelTool>,
}

/// The capabilities a fake model gives an agent unless its section names them.
pub const MODEL_CAPABILITIES: &[&str] = &["prompt", "hold"];

/// One of the agent's tools as the fake model calls it: its name and its arguments, whose string
/// values may use `{path}`, `{content}` and `{command}` (what the row asks for).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelTool {
    /// The tool's name as the agent offers it to the model.
    pub name: String,
    /// The arguments, a table of strings.
    #[serde(default)]
    pub arguments: BTreeMap<String, String>,
}

/// The APIs a fake model section may name.
pub const MODEL_APIS: &[&str] = &["openai-chat", "openai-responses", "anthropic"];

/// The actions a fake model section may map to the agent's tools.
pub const MODEL_ACTIONS: &[&str] = &["read", "write", "run"];

impl ModelSetting {
    /// The capabilities the model gives the agent.
    pub fn capabilities(&self) -> BTreeSet<String> {
        self.capabilities
            .clone()
            .unwrap_or_else(|| MODEL_CAPABILITIES.iter().map(|c| (*c).to_owned()).collect())
    }
}

/// How the runner authenticates with an ACP agent (`[suites.acp.auth]`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuthSetting {
    /// The `methodId` passed to `authenticate` (one the agent advertises in `authMethods`).
    pub method: String,
    /// Environment the method reads (an API key), added to every command of the suite.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
}

impl SuiteTarget {
    /// Takes from `parent` what [`extends`](Self::extends) inherits: each key this section does
    /// not set, and `auth` and `model` when this section has none.
    fn inherit(&mut self, parent: &SuiteTarget) {
        fn fill<V: Clone>(own: &mut BTreeMap<String, V>, parent: &BTreeMap<String, V>) {
            for (key, value) in parent {
                own.entry(key.clone()).or_insert_with(|| value.clone());
            }
        }
        fill(&mut self.env, &parent.env);
        fill(&mut self.commands, &parent.commands);
        fill(&mut self.urls, &parent.urls);
        fill(&mut self.settings, &parent.settings);
        for (scenario, texts) in &parent.overrides {
            fill(self.overrides.entry(scenario.clone()).or_default(), texts);
        }
        if self.auth.is_none() {
            self.auth.clone_from(&parent.auth);
        }
        if self.model.is_none() {
            self.model.clone_from(&parent.model);
        }
    }

    /// Authenticates every connection with `method`, its environment added to the suite's
    /// (a variable the suite already sets keeps its value).
    pub fn set_auth(&mut self, auth: AuthSetting) {
        for (key, value) in &auth.env {
            self.env.entry(key.clone()).or_insert_with(|| value.clone());
        }
        self.auth = Some(auth);
    }
}

/// A target profile.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Target {
    /// The profile's name (defaults to the file stem).
    #[serde(default)]
    pub name: String,
    /// One line on what build this is.
    #[serde(default)]
    pub description: String,
    /// Custom placeholders, usable in every template.
    #[serde(default)]
    pub vars: BTreeMap<String, String>,
    /// Environment for every command of every suite.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// One section per suite.
    #[serde(default)]
    pub suites: BTreeMap<String, SuiteTarget>,
}

/// The profiles compiled into this build from `conformance/targets/*.toml`.
pub const BUILTIN: &[(&str, &str)] = include!(concat!(env!("OUT_DIR"), "/targets.rs"));

impl Target {
    /// Parses and validates a profile; `origin` is its file name.
    pub fn parse(origin: &str, text: &str) -> Result<Self, TargetError> {
        let mut target: Target = toml::from_str(text).map_err(|e| TargetError::Parse {
            origin: origin.to_owned(),
            message: ski::exit::parse_error_line(e.message(), e.span(), text),
        })?;
        if target.name.is_empty() {
            target.name = origin.trim_end_matches(".toml").to_owned();
        }
        let mut problems = target.resolve_extends();
        for section in target.suites.values_mut() {
            if let Some(auth) = section.auth.take() {
                section.set_auth(auth);
            }
            if let Some(model) = &section.model {
                section.capabilities.extend(model.capabilities());
            }
        }
        problems.extend(target.problems());
        if problems.is_empty() {
            Ok(target)
        } else {
            Err(TargetError::Invalid {
                origin: origin.to_owned(),
                problems,
            })
        }
    }

    /// Fills each section that names another in `extends` from that section, as written in the
    /// profile; a section it names must exist, be another one, and extend none itself.
    fn resolve_extends(&mut self) -> Vec<String> {
        let mut problems = Vec::new();
        let written = self.suites.clone();
        for (suite, section) in &mut self.suites {
            let Some(parent) = section.extends.as_deref() else {
                continue;
            };
            match written.get(parent) {
                _ if parent == suite => {
                    problems.push(format!("suites.{suite}.extends: a section cannot extend itself"));
                }
                None => problems.push(format!(
                    "suites.{suite}.extends: the profile has no section {parent:?}"
                )),
                Some(from) if from.extends.is_some() => problems.push(format!(
                    "suites.{suite}.extends: {parent:?} extends another section itself; name that one"
                )),
                Some(from) => section.inherit(from),
            }
        }
        problems
    }

    /// Loads a profile from a path, or by name from the built-in profiles.
    ///
    /// A value that names an existing file (or ends in `.toml`) is a path.
    pub fn load(name_or_path: &str) -> Result<Self, TargetError> {
        let path = Path::new(name_or_path);
        if path.exists() || name_or_path.ends_with(".toml") {
            let text = std::fs::read_to_string(path).map_err(|source| TargetError::Read {
                path: path.to_owned(),
                source,
            })?;
            let origin = path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_else(|| name_or_path.to_owned());
            return Self::parse(&origin, &text);
        }
        let file = format!("{name_or_path}.toml");
        match BUILTIN.iter().find(|(origin, _)| *origin == file) {
            Some((origin, text)) => Self::parse(origin, text),
            None => Err(TargetError::Unknown {
                name: name_or_path.to_owned(),
                known: BUILTIN
                    .iter()
                    .map(|(origin, _)| origin.trim_end_matches(".toml"))
                    .collect::<Vec<_>>()
                    .join(", "),
            }),
        }
    }

    /// An ad-hoc profile for an ACP agent given on the command line.
    ///
    /// `agent_cmd` becomes the `agent` command (capability `stdio`), `agent_url` the `ws` URL
    /// (capability `ws`), or for an `http://` or `https://` URL the remote endpoint's `http` URL
    /// (capability `acp-http`; an `https://` one trusts the platform's roots, which honour
    /// `SSL_CERT_FILE`, as no profile sets `http_ca`); `capabilities` are added as declared.
    pub fn ad_hoc(
        agent_cmd: Option<&str>,
        agent_url: Option<&str>,
        capabilities: &[String],
    ) -> Result<Self, TargetError> {
        let mut section = SuiteTarget::default();
        if let Some(cmd) = agent_cmd {
            split_words(cmd).map_err(|message| TargetError::Template {
                template: cmd.to_owned(),
                message,
            })?;
            section
                .commands
                .insert("agent".to_owned(), CommandTemplate::Line(cmd.to_owned()));
            section.capabilities.insert("stdio".to_owned());
            // Each scenario's agent gets a HOME of its own: what one row leaves there (sessions,
            // caches) is not seen by the next, and the user's own HOME is left alone.
            section
                .env
                .insert("HOME".to_owned(), AD_HOC_HOME.to_owned());
        }
        if let Some(url) = agent_url {
            let remote = url.starts_with("http://") || url.starts_with("https://");
            let (key, capability) = if remote {
                ("http", "acp-http")
            } else {
                ("ws", "ws")
            };
            section.urls.insert(key.to_owned(), url.to_owned());
            section.capabilities.insert(capability.to_owned());
        }
        section.capabilities.extend(capabilities.iter().cloned());
        let target = Target {
            name: "command-line".to_owned(),
            description: "built from --agent-cmd / --agent-url".to_owned(),
            suites: BTreeMap::from([("acp".to_owned(), section)]),
            ..Target::default()
        };
        let problems = target.problems();
        if problems.is_empty() {
            Ok(target)
        } else {
            Err(TargetError::Invalid {
                origin: "the command line".to_owned(),
                problems,
            })
        }
    }

    /// Runs an ad-hoc profile's agent with this process's HOME instead of one per scenario.
    pub fn with_shared_home(mut self) -> Self {
        if let Some(section) = self.suites.get_mut("acp") {
            section.env.remove("HOME");
        }
        self
    }

    /// The section of one suite.
    pub fn suite(&self, name: &str) -> Option<&SuiteTarget> {
        self.suites.get(name)
    }

    /// Every placeholder a template of this profile may use.
    pub fn known_placeholders(&self) -> BTreeSet<String> {
        BUILTIN_PLACEHOLDERS
            .iter()
            .map(|s| (*s).to_owned())
            .chain(self.vars.keys().cloned())
            .collect()
    }

    fn problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        // Every template of the profile, with where it is.
        let mut templates: Vec<(String, String)> = Vec::new();
        for (key, value) in &self.env {
            templates.push((format!("env.{key}"), value.clone()));
        }
        for (suite, section) in &self.suites {
            if !section.capabilities.iter().all(|c| {
                !c.is_empty()
                    && c.chars()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
            }) {
                problems.push(format!(
                    "suites.{suite}.capabilities: names must be lower-case letters, digits and dashes"
                ));
            }
            if section.auth.as_ref().is_some_and(|a| a.method.is_empty()) {
                problems.push(format!("suites.{suite}.auth.method: empty method id"));
            }
            if let Some(model) = &section.model {
                if !MODEL_APIS.contains(&model.api.as_str()) {
                    problems.push(format!(
                        "suites.{suite}.model.api: {:?} is none of {}",
                        model.api,
                        MODEL_APIS.join(", ")
                    ));
                }
                for (action, tool) in &model.tools {
                    if !MODEL_ACTIONS.contains(&action.as_str()) {
                        problems.push(format!(
                            "suites.{suite}.model.tools.{action}: not one of {}",
                            MODEL_ACTIONS.join(", ")
                        ));
                    }
                    if tool.name.is_empty() {
                        problems.push(format!("suites.{suite}.model.tools.{action}.name: empty"));
                    }
                }
                for (key, value) in &model.env {
                    templates.push((format!("suites.{suite}.model.env.{key}"), value.clone()));
                }
                for (path, content) in &model.files {
                    templates.push((format!("suites.{suite}.model.files"), path.clone()));
                    templates.push((
                        format!("suites.{suite}.model.files.{path}"),
                        content.clone(),
                    ));
                }
            }
            let maps = [
                ("env", &section.env),
                ("urls", &section.urls),
                ("settings", &section.settings),
            ];
            for (kind, map) in maps {
                for (key, value) in map {
                    templates.push((format!("suites.{suite}.{kind}.{key}"), value.clone()));
                }
            }
            for (name, command) in &section.commands {
                let at = format!("suites.{suite}.commands.{name}");
                match command.words() {
                    Ok(words) if words.is_empty() => problems.push(format!("{at}: empty command")),
                    Ok(words) => {
                        templates.extend(words.into_iter().map(|w| (at.clone(), w)));
                    }
                    Err(message) => problems.push(format!("{at}: {message}")),
                }
                for (key, value) in command.env() {
                    templates.push((format!("{at}.env.{key}"), value));
                }
                if let Some(cwd) = command.cwd() {
                    templates.push((format!("{at}.cwd"), cwd.to_owned()));
                }
            }
        }
        let builtin: BTreeSet<String> = BUILTIN_PLACEHOLDERS
            .iter()
            .map(|s| (*s).to_owned())
            .collect();
        for (key, value) in &self.vars {
            if BUILTIN_PLACEHOLDERS.contains(&key.as_str()) {
                problems.push(format!(
                    "vars.{key}: a built-in placeholder cannot be redefined"
                ));
            }
            match placeholders(value) {
                Ok(names) => {
                    for name in names.into_iter().filter(|n| !builtin.contains(n)) {
                        problems.push(format!(
                            "vars.{key}: {{{name}}} is not a built-in placeholder"
                        ));
                    }
                }
                Err(message) => problems.push(format!("vars.{key}: {message}")),
            }
        }
        let known = self.known_placeholders();
        for (at, template) in templates {
            match placeholders(&template) {
                Ok(names) => {
                    for name in names.into_iter().filter(|n| !known.contains(n)) {
                        problems.push(format!("{at}: unknown placeholder {{{name}}}"));
                    }
                }
                Err(message) => problems.push(format!("{at}: {message}")),
            }
        }
        problems
    }
}

impl CommandTemplate {
    /// The template's words, before placeholders are filled in.
    pub fn words(&self) -> Result<Vec<String>, String> {
        match self {
            CommandTemplate::Line(line) => split_words(line),
            CommandTemplate::Argv(words) => Ok(words.clone()),
            CommandTemplate::Full(table) => match &table.argv {
                ArgvTemplate::Line(line) => split_words(line),
                ArgvTemplate::Words(words) => Ok(words.clone()),
            },
        }
    }

    /// The command's own environment.
    pub fn env(&self) -> BTreeMap<String, String> {
        match self {
            CommandTemplate::Full(table) => table.env.clone(),
            _ => BTreeMap::new(),
        }
    }

    /// The command's working directory template, if set.
    pub fn cwd(&self) -> Option<&str> {
        match self {
            CommandTemplate::Full(table) => table.cwd.as_deref(),
            _ => None,
        }
    }

    /// How to know the command is ready, if set.
    pub fn ready(&self) -> Option<&Readiness> {
        match self {
            CommandTemplate::Full(table) => table.ready.as_ref(),
            _ => None,
        }
    }
}

/// The names of the `{placeholders}` in a template; `{{` and `}}` are literal braces.
pub fn placeholders(template: &str) -> Result<Vec<String>, String> {
    let mut names = Vec::new();
    render_with(template, &mut |name| {
        names.push(name.to_owned());
        Some(String::new())
    })
    .map_err(|e| match e {
        RenderError::Malformed(message) => message,
        RenderError::Missing(name) => format!("unknown placeholder {{{name}}}"),
    })?;
    Ok(names)
}

/// Fills in a template's placeholders from `vars`.
pub fn render(template: &str, vars: &BTreeMap<String, String>) -> Result<String, TargetError> {
    render_with(template, &mut |name| vars.get(name).cloned()).map_err(|e| match e {
        RenderError::Missing(name) => TargetError::Placeholder {
            template: template.to_owned(),
            name,
        },
        RenderError::Malformed(message) => TargetError::Template {
            template: template.to_owned(),
            message,
        },
    })
}

enum RenderError {
    Missing(String),
    Malformed(String),
}

fn render_with(
    template: &str,
    lookup: &mut dyn FnMut(&str) -> Option<String>,
) -> Result<String, RenderError> {
    let mut out = String::with_capacity(template.len());
    let mut chars = template.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '{' if chars.peek() == Some(&'{') => {
                chars.next();
                out.push('{');
            }
            '}' if chars.peek() == Some(&'}') => {
                chars.next();
                out.push('}');
            }
            '{' => {
                let mut name = String::new();
                loop {
                    match chars.next() {
                        Some('}') => break,
                        Some(c) if c.is_ascii_alphanumeric() || c == '_' => name.push(c),
                        Some(c) => {
                            return Err(RenderError::Malformed(format!(
                                "character {c:?} inside a placeholder"
                            )));
                        }
                        None => {
                            return Err(RenderError::Malformed("unclosed '{'".to_owned()));
                        }
                    }
                }
                if name.is_empty() {
                    return Err(RenderError::Malformed("empty placeholder {}".to_owned()));
                }
                let value = lookup(&name).ok_or(RenderError::Missing(name))?;
                out.push_str(&value);
            }
            '}' => return Err(RenderError::Malformed("unmatched '}'".to_owned())),
            c => out.push(c),
        }
    }
    Ok(out)
}

/// Splits a command line into words like a POSIX shell, without expansions ([`shell_words`]):
/// spaces, tabs and newlines separate, single quotes keep everything, double quotes keep
/// everything but `\"`, `\\`, `\$` and `` \` ``, a backslash outside quotes escapes the next
/// character, and a word starting with `#` begins a comment.
pub fn split_words(line: &str) -> Result<Vec<String>, String> {
    // shell-words' only error is a quote left open.
    shell_words::split(line).map_err(|_| "unclosed quote (a ' or \" is never closed)".to_owned())
}

/// Joins words into one line that [`split_words`] (and a POSIX shell) splits back into them.
pub fn join_words<S: AsRef<str>>(words: &[S]) -> String {
    shell_words::join(words)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_and_join_round_trip() {
        let words = split_words(r#"ski acp 'a b' "c \"d\"" e\ f"#).unwrap();
        assert_eq!(words, ["ski", "acp", "a b", "c \"d\"", "e f"]);
        assert_eq!(split_words(&join_words(&words)).unwrap(), words);
        assert_eq!(
            split_words(&join_words(&["it's", ""])).unwrap(),
            ["it's", ""]
        );
        let tricky = [
            "--x=1",
            "$HOME",
            "a*",
            "#not-a-comment",
            "new\nline",
            "tab\there",
            "é",
        ];
        assert_eq!(split_words(&join_words(&tricky)).unwrap(), tricky);
        assert_eq!(join_words(&["ski", "acp", "serve"]), "ski acp serve");
        for open in ["'open", "\"open", "a \"b \\\""] {
            let message = split_words(open).unwrap_err();
            assert!(message.contains("unclosed quote"), "{open}: {message}");
        }
        // Every other input splits: words, quotes, escapes, comments.
        assert_eq!(
            split_words("a\tb\n c  # a comment").unwrap(),
            ["a", "b", "c"]
        );
        assert_eq!(split_words("''").unwrap(), [""]);
        assert!(split_words("   ").unwrap().is_empty());
    }

    #[test]
    fn render_fills_placeholders_and_rejects_unknown_ones() {
        let vars = BTreeMap::from([("listen".to_owned(), "127.0.0.1:9".to_owned())]);
        assert_eq!(
            render("--listen={listen} {{x}}", &vars).unwrap(),
            "--listen=127.0.0.1:9 {x}"
        );
        let err = render("{nope}", &vars).unwrap_err();
        assert!(err.to_string().contains("{nope}"), "{err}");
        assert!(render("{open", &vars).is_err());
    }

    #[test]
    fn profiles_with_unknown_placeholders_are_rejected() {
        let text = r#"
[suites.acp]
capabilities = ["stdio"]
commands.agent = "{bin_dir}/ski acp serve --x {mystery}"
"#;
        let err = Target::parse("t.toml", text).unwrap_err().to_string();
        assert!(err.contains("unknown placeholder {mystery}"), "{err}");
        let ok = text.replace("{mystery}", "{custom}") + "[vars]\ncustom = \"{temp_dir}/x\"\n";
        let target = Target::parse("t.toml", &ok).unwrap();
        assert_eq!(target.name, "t");
        let nested = text.replace("{mystery}", "{custom}") + "[vars]\ncustom = \"{other}\"\n";
        assert!(Target::parse("t.toml", &nested).is_err());
        let shadow = text.replace("{mystery}", "{port}") + "[vars]\nport = \"1\"\n";
        assert!(Target::parse("t.toml", &shadow).is_err());
    }

    #[test]
    fn ad_hoc_profiles_declare_transport_capabilities() {
        let target =
            Target::ad_hoc(Some("my-agent --stdio"), Some("ws://127.0.0.1:1/"), &[]).unwrap();
        let acp = target.suite("acp").unwrap();
        assert!(acp.capabilities.contains("stdio"));
        assert!(acp.capabilities.contains("ws"));
        assert_eq!(acp.env.get("HOME").map(String::as_str), Some(AD_HOC_HOME));
        let shared = target.clone().with_shared_home();
        assert!(!shared.suite("acp").unwrap().env.contains_key("HOME"));
        assert!(Target::ad_hoc(Some("'open"), None, &[]).is_err());
    }

    const EXTENDED: &str = r#"
[suites.aof]
capabilities = ["aof-route", "aof-validate"]
env = { A = "parent", B = "parent" }
settings = { runs_dir = "runs", grace_ms = "300" }
urls = { ws = "ws://127.0.0.1:1/" }
discover = true
exclude_capabilities = ["aof-validate"]
overrides = { AOF-01 = { final = "parent", other = "parent" } }
auth = { method = "local", env = { KEY = "parent" } }
[suites.aof.commands]
adapter = "{bin_dir}/ski aof"
batch = "{bin_dir}/ski aof batch"
"#;

    #[test]
    fn an_extending_section_takes_its_parents_configuration_but_not_its_capabilities() {
        let text = format!(
            "{EXTENDED}
[suites.aof-ski]
extends = \"aof\"
capabilities = [\"aof-route\", \"aof-ski-extensions\"]
env = {{ B = \"own\" }}
settings = {{ grace_ms = \"100\" }}
overrides = {{ AOF-01 = {{ final = \"own\" }} }}
[suites.aof-ski.commands]
batch = \"{{bin_dir}}/other batch\"
"
        );
        let target = Target::parse("t.toml", &text).unwrap();
        let parent = target.suite("aof").unwrap();
        let ski = target.suite("aof-ski").unwrap();
        assert_eq!(ski.extends.as_deref(), Some("aof"));
        let words = |name: &str| ski.commands[name].words().unwrap().join(" ");
        assert_eq!(words("adapter"), "{bin_dir}/ski aof");
        assert_eq!(words("batch"), "{bin_dir}/other batch");
        assert_eq!(ski.settings["runs_dir"], "runs");
        assert_eq!(ski.settings["grace_ms"], "100");
        assert_eq!(ski.env["A"], "parent");
        assert_eq!(ski.env["B"], "own");
        assert_eq!(ski.env["KEY"], "parent", "the inherited auth's environment");
        assert_eq!(ski.urls, parent.urls);
        assert_eq!(ski.overrides["AOF-01"]["final"], "own");
        assert_eq!(ski.overrides["AOF-01"]["other"], "parent");
        assert_eq!(ski.auth, parent.auth);
        // What the build claims for the rows stays the section's own.
        assert_eq!(
            ski.capabilities,
            BTreeSet::from(["aof-route".to_owned(), "aof-ski-extensions".to_owned()])
        );
        assert!(!ski.discover);
        assert!(ski.exclude_capabilities.is_empty());
        // The parent is left as written.
        assert_eq!(parent.settings["grace_ms"], "300");
        assert_eq!(parent.env["B"], "parent");
        // Written back, the resolved profile reads as the same profile (the fuzz target's rule).
        let written = toml::to_string(&target).unwrap();
        assert_eq!(Target::parse("t.toml", &written).unwrap(), target);
    }

    #[test]
    fn a_section_without_extends_inherits_nothing() {
        let text = format!("{EXTENDED}[suites.aof-ski]\ncapabilities = [\"aof-ski-extensions\"]\n");
        let target = Target::parse("t.toml", &text).unwrap();
        let ski = target.suite("aof-ski").unwrap();
        assert!(ski.commands.is_empty() && ski.settings.is_empty() && ski.env.is_empty());
        assert_eq!(ski.auth, None);
    }

    #[test]
    fn extends_names_another_section_that_extends_none() {
        for (section, problem) in [
            (
                "[suites.aof-ski]\nextends = \"aff\"\n",
                "the profile has no section \"aff\"",
            ),
            (
                "[suites.aof-ski]\nextends = \"aof-ski\"\n",
                "a section cannot extend itself",
            ),
            (
                "[suites.aof-ski]\nextends = \"aof\"\n[suites.aof-more]\nextends = \"aof-ski\"\n",
                "\"aof-ski\" extends another section itself",
            ),
        ] {
            let err = Target::parse("t.toml", &format!("{EXTENDED}{section}"))
                .unwrap_err()
                .to_string();
            assert!(err.contains(problem), "{section}: {err}");
        }
    }

    #[test]
    fn builtin_ski_sections_run_as_their_parents_do() {
        for (origin, text) in BUILTIN {
            let target = Target::parse(origin, text).unwrap();
            for (suite, section) in &target.suites {
                let Some(system) = suite.strip_suffix("-ski") else {
                    continue;
                };
                assert_eq!(
                    section.extends.as_deref(),
                    Some(system),
                    "{origin}: {suite}"
                );
                let parent = target.suite(system).unwrap();
                let configuration = |s: &SuiteTarget| {
                    (
                        s.env.clone(),
                        s.commands.clone(),
                        s.urls.clone(),
                        s.settings.clone(),
                        s.overrides.clone(),
                    )
                };
                assert_eq!(
                    configuration(section),
                    configuration(parent),
                    "{origin}: {suite}"
                );
            }
        }
    }

    #[test]
    fn builtin_profiles_are_valid() {
        for (origin, text) in BUILTIN {
            Target::parse(origin, text).unwrap();
        }
    }
}
