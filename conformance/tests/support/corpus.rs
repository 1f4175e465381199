//! A defect corpus on disk (`conformance/defects/<suite>/corpus.toml`): its entries, each made
//! into a target profile of its own, and the rows no defect can exercise. The trials program's
//! root declares it, next to `binaries.rs`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

/// One corpus: the bases entries are made from, the entries, and the uncovered rows.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Corpus {
    /// The base of every `role = "agent"` entry.
    pub agent: Base,
    /// The base of every `role = "client"` entry.
    pub client: Base,
    /// The base of every `role = "serve"` entry.
    pub serve: Base,
    /// The base of every `role = "corpus-client"` entry.
    pub corpus_client: Base,
    /// The base of every `role = "ws-front"` entry.
    pub ws_front: Base,
    /// The base of every `role = "http-front"` entry.
    pub http_front: Base,
    /// The entries, in file order.
    #[serde(rename = "entry")]
    pub entries: Vec<Entry>,
    /// Rows no entry fails, each with the reason.
    #[serde(default)]
    pub uncovered: BTreeMap<String, String>,
    /// The directory the corpus was read from (what `{corpus}` stands for).
    #[serde(skip)]
    pub dir: PathBuf,
}

/// What the entries of one role start from.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Base {
    /// Capabilities the profile declares.
    pub capabilities: Vec<String>,
    /// Commands of the profile's section, by name.
    pub commands: BTreeMap<String, String>,
    /// Settings of the profile's section.
    #[serde(default)]
    pub settings: BTreeMap<String, String>,
}

/// Which side of ACP an entry is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Role {
    /// The runner is its client.
    Agent,
    /// The runner drives it against the mock agent.
    Client,
    /// ski's own agent (`ski acp serve`) in one of its configurations; the runner is its client.
    Serve,
    /// The corpus's own small client (`{corpus_client}`), driven like `Client`.
    CorpusClient,
    /// ski's own agent over WebSocket behind the corpus's front (`{corpus_ws_front}`); the
    /// runner is its client.
    WsFront,
    /// ski's own agent on its remote `/acp` endpoint behind the corpus's HTTP front
    /// (`{corpus_http_front}`); the runner is its client.
    HttpFront,
}

impl Role {
    /// The name `corpus.toml` gives it.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Agent => "agent",
            Role::Client => "client",
            Role::Serve => "serve",
            Role::CorpusClient => "corpus-client",
            Role::WsFront => "ws-front",
            Role::HttpFront => "http-front",
        }
    }
}

/// One agent or client of the corpus.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Entry {
    /// How the catch table names it.
    pub name: String,
    /// Agent or client.
    pub role: Role,
    /// The one requirement it breaks.
    pub what: String,
    /// It breaks nothing.
    #[serde(default)]
    pub conforming: bool,
    /// Rows that must fail, each with words its failure report must contain (or a list of such
    /// words, one per symptom the defect can show: the report must contain one of them).
    #[serde(default)]
    pub fails: BTreeMap<String, Symptoms>,
    /// Rows that may fail as consequences of the same defect, each with why.
    #[serde(default)]
    pub also: BTreeMap<String, String>,
    /// Globs narrowing the rows run (default: every row of the suite).
    #[serde(default)]
    pub rows: Vec<String>,
    /// For a defect no row catches yet: why.
    #[serde(default)]
    pub uncaught: Option<String>,
    /// Commands replacing the base's of the same name.
    #[serde(default)]
    pub commands: BTreeMap<String, String>,
    /// Words appended to every command of the role.
    #[serde(default)]
    pub args: Vec<String>,
    /// Capabilities of the base the entry's profile does not declare (an agent judged as one
    /// without that feature, such as a `hold` variant).
    #[serde(default)]
    pub without: Vec<String>,
    /// Capabilities the entry's profile declares besides its base's (`cancel-turn` for an agent
    /// whose turns end only when cancelled, as discovery declares it).
    #[serde(default)]
    pub with: Vec<String>,
}

/// What a row's failure report must say for the failure to count as the defect's catch: the
/// words of the one symptom the defect has, or of each symptom it can show (which of them a run
/// shows first may depend on the machine, so a catch accepts all of them).
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum Symptoms {
    /// One symptom: `"WS-031" = "current_mode_update"`.
    One(String),
    /// Any of these: `"WS-006" = ["the answer to session/prompt", "the reply equals"]`.
    Any(Vec<String>),
}

impl Symptoms {
    /// Whether `report` says one of the symptoms.
    pub fn seen_in(&self, report: &str) -> bool {
        match self {
            Symptoms::One(words) => report.contains(words.as_str()),
            Symptoms::Any(each) => each.iter().any(|words| report.contains(words.as_str())),
        }
    }

    /// Every symptom's words.
    pub fn words(&self) -> &[String] {
        match self {
            Symptoms::One(words) => std::slice::from_ref(words),
            Symptoms::Any(each) => each,
        }
    }
}

impl Corpus {
    /// Reads `dir/corpus.toml` and checks that every entry says what it must.
    pub fn load(dir: &Path) -> Result<Self, String> {
        let path = dir.join("corpus.toml");
        let text = std::fs::read_to_string(&path)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        let mut corpus: Corpus =
            toml::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
        corpus.dir = dir
            .canonicalize()
            .map_err(|e| format!("cannot resolve {}: {e}", dir.display()))?;
        for entry in &corpus.entries {
            let named = !entry.fails.is_empty() || entry.uncaught.is_some();
            if entry.conforming == named {
                return Err(format!(
                    "{}: entry {} must be conforming or name the rows it fails (or why none can)",
                    path.display(),
                    entry.name
                ));
            }
        }
        Ok(corpus)
    }

    /// The base of `role`.
    pub fn base(&self, role: Role) -> &Base {
        match role {
            Role::Agent => &self.agent,
            Role::Client => &self.client,
            Role::Serve => &self.serve,
            Role::CorpusClient => &self.corpus_client,
            Role::WsFront => &self.ws_front,
            Role::HttpFront => &self.http_front,
        }
    }

    /// The target profile of `entry` (TOML text), its commands rendered with `{corpus}`,
    /// `{corpus_client}` and `{corpus_ws_front}` (this test binary started as the corpus's own
    /// client or WebSocket front).
    pub fn profile(&self, entry: &Entry) -> Result<String, String> {
        let base = self.base(entry.role);
        let corpus = shell_words::quote(&self.dir.display().to_string()).into_owned();
        let exe =
            std::env::current_exe().map_err(|e| format!("cannot locate the test binary: {e}"))?;
        let exe = shell_words::quote(&exe.display().to_string()).into_owned();
        let corpus_client = format!("{exe} {}", super::corpus_client::FLAG);
        let corpus_ws_front = format!("{exe} {}", super::corpus_ws_front::FLAG);
        let corpus_http_front = format!("{exe} {}", super::corpus_http_front::FLAG);
        let mut commands = base.commands.clone();
        for (name, command) in &entry.commands {
            if !commands.contains_key(name) {
                return Err(format!(
                    "entry {}: command {name} is not one of its base's",
                    entry.name
                ));
            }
            commands.insert(name.clone(), command.clone());
        }
        let extra: Vec<String> = entry
            .args
            .iter()
            .map(|a| shell_words::quote(a).into_owned())
            .collect();
        let commands: toml::Table = commands
            .into_iter()
            .map(|(name, command)| {
                let mut line = command
                    .replace("{corpus}", &corpus)
                    .replace("{corpus_client}", &corpus_client)
                    .replace("{corpus_ws_front}", &corpus_ws_front)
                    .replace("{corpus_http_front}", &corpus_http_front);
                for word in &extra {
                    line.push(' ');
                    line.push_str(word);
                }
                (name, toml::Value::String(line))
            })
            .collect();
        if let Some(unknown) = entry
            .without
            .iter()
            .find(|c| !base.capabilities.contains(c))
        {
            return Err(format!(
                "entry {}: capability {unknown} is not one of its base's",
                entry.name
            ));
        }
        let capabilities: Vec<toml::Value> = base
            .capabilities
            .iter()
            .filter(|c| !entry.without.contains(c))
            .chain(entry.with.iter().filter(|c| !base.capabilities.contains(c)))
            .map(|c| toml::Value::String(c.clone()))
            .collect();
        let settings: toml::Table = base
            .settings
            .iter()
            .map(|(k, v)| (k.clone(), toml::Value::String(v.clone())))
            .collect();
        let mut section = toml::Table::new();
        section.insert("capabilities".into(), toml::Value::Array(capabilities));
        section.insert("settings".into(), toml::Value::Table(settings));
        section.insert("commands".into(), toml::Value::Table(commands));
        let mut suites = toml::Table::new();
        suites.insert("acp".into(), toml::Value::Table(section));
        let mut profile = toml::Table::new();
        profile.insert("name".into(), toml::Value::String(entry.name.clone()));
        profile.insert(
            "description".into(),
            toml::Value::String(entry.what.clone()),
        );
        profile.insert("suites".into(), toml::Value::Table(suites));
        toml::to_string(&profile).map_err(|e| format!("entry {}: {e}", entry.name))
    }
}
