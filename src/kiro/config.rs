//! The bot's configuration (BR-01): read from the process environment and an optional `.env`
//! file (the environment wins, as python-dotenv does by default), validated as a whole so every
//! violation is reported at once, and immutable afterwards (BR-01.7: fields are private, there
//! are only getters). [`KiroConfig::redacted_json`] prints it with `BOT_TOKEN` hidden.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::{Value, json};

use super::agent_name::AgentName;
use crate::storage::inside_root::{self, InsideRootError};

/// The default template directory.
pub const DEFAULT_CONFIG_PATH: &str = "./kiro-config/";
/// The default workspace base directory.
pub const DEFAULT_WORKSPACE_BASE_PATH: &str = "./workspaces/";
/// The default process cap.
pub const DEFAULT_MAX_PROCESSES: u64 = 5;
/// The default idle timeout.
pub const DEFAULT_IDLE_TIMEOUT_SECONDS: u64 = 30;
/// What a secret value is printed as.
pub const REDACTED: &str = "<redacted>";
/// The largest `.env` file read (1 MiB); a larger one is refused, not read past the cap.
pub const MAX_DOTENV_BYTES: u64 = 1 << 20;

/// The keys the configuration reads.
pub const KEYS: [&str; 7] = [
    "BOT_TOKEN",
    "KIRO_AGENT_NAME",
    "KIRO_CONFIG_PATH",
    "WORKSPACE_BASE_PATH",
    "MAX_PROCESSES",
    "IDLE_TIMEOUT_SECONDS",
    "LOG_LEVEL",
];

/// The accepted log levels (BR-01.6), upper case on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum LogLevel {
    /// `DEBUG`.
    Debug,
    /// `INFO` (the default).
    Info,
    /// `WARNING`.
    Warning,
    /// `ERROR`.
    Error,
}

impl LogLevel {
    /// Parses a level case-insensitively (upstream upper-cases the value first).
    pub fn parse(text: &str) -> Option<Self> {
        match text.trim().to_ascii_uppercase().as_str() {
            "DEBUG" => Some(Self::Debug),
            "INFO" => Some(Self::Info),
            "WARNING" => Some(Self::Warning),
            "ERROR" => Some(Self::Error),
            _ => None,
        }
    }

    /// The level's name as the document writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Debug => "DEBUG",
            Self::Info => "INFO",
            Self::Warning => "WARNING",
            Self::Error => "ERROR",
        }
    }

    /// The matching `tracing` level.
    pub fn tracing_level(self) -> tracing::Level {
        match self {
            Self::Debug => tracing::Level::DEBUG,
            Self::Info => tracing::Level::INFO,
            Self::Warning => tracing::Level::WARN,
            Self::Error => tracing::Level::ERROR,
        }
    }
}

/// One broken rule: the key, the rule ID and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Violation {
    /// The configuration key (or the prerequisite) concerned.
    pub key: String,
    /// The business rule, for example `BR-01.2`.
    pub rule: String,
    /// What is wrong, in words.
    pub message: String,
}

impl Violation {
    /// A violation of `rule` on `key`.
    pub fn new(key: &str, rule: &str, message: impl Into<String>) -> Self {
        Self {
            key: key.to_owned(),
            rule: rule.to_owned(),
            message: message.into(),
        }
    }
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.message, self.rule)
    }
}

/// Why the configuration could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The `.env` file could not be read.
    #[error("cannot read {path}: {source}")]
    DotEnv {
        /// The file.
        path: PathBuf,
        /// Why reading failed.
        #[source]
        source: std::io::Error,
    },
    /// The `.env` file is not a regular file (a FIFO, a device, a directory) or is larger than
    /// [`MAX_DOTENV_BYTES`].
    #[error("env file {path} {why}")]
    DotEnvRefused {
        /// The file as given.
        path: PathBuf,
        /// Why, e.g. `is a FIFO, not a regular file`.
        why: String,
    },
    /// A line of the `.env` file is not `KEY=VALUE`.
    #[error("{path}:{line}: expected KEY=VALUE")]
    DotEnvSyntax {
        /// The file.
        path: PathBuf,
        /// The 1-based line number.
        line: usize,
    },
    /// One or more rules are broken.
    #[error("invalid configuration: {}", join(.0))]
    Invalid(Vec<Violation>),
}

fn join(violations: &[Violation]) -> String {
    violations
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

/// The bot token; its `Debug` never shows the value.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// The secret value, for the one place that needs it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(REDACTED)
    }
}

/// The loaded configuration; immutable (BR-01.7).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KiroConfig {
    bot_token: Secret,
    agent_name: AgentName,
    config_path: PathBuf,
    workspace_base_path: PathBuf,
    max_processes: u64,
    idle_timeout_seconds: u64,
    log_level: LogLevel,
}

impl KiroConfig {
    /// Loads the configuration from `env` (the process environment) and, when given and
    /// present, the `.env` file `dotenv`; `env` wins over the file.
    pub fn load(
        env: &BTreeMap<String, String>,
        dotenv: Option<&Path>,
    ) -> Result<Self, ConfigError> {
        let mut values = match dotenv {
            Some(path) if path.exists() => parse_dotenv_file(path)?,
            _ => BTreeMap::new(),
        };
        for key in KEYS {
            if let Some(value) = env.get(key) {
                values.insert(key.to_owned(), value.clone());
            }
        }
        Self::from_values(&values)
    }

    /// Validates the values of [`KEYS`] (missing keys take their defaults).
    pub fn from_values(values: &BTreeMap<String, String>) -> Result<Self, ConfigError> {
        let get = |key: &str| values.get(key).map(String::as_str);
        let mut violations = Vec::new();

        let bot_token = get("BOT_TOKEN").unwrap_or("").trim();
        if bot_token.is_empty() {
            violations.push(Violation::new(
                "BOT_TOKEN",
                "BR-01.1",
                "BOT_TOKEN is required",
            ));
        }
        let agent_name = match AgentName::parse(get("KIRO_AGENT_NAME").unwrap_or("").trim()) {
            Ok(name) => Some(name),
            Err(error) => {
                violations.push(Violation::new(
                    "KIRO_AGENT_NAME",
                    error.rule(),
                    error.to_string(),
                ));
                None
            }
        };
        let max_processes = integer(
            &mut violations,
            "MAX_PROCESSES",
            "BR-01.4",
            get("MAX_PROCESSES"),
            DEFAULT_MAX_PROCESSES,
            1,
            "a positive integer (>= 1)",
        );
        let idle_timeout_seconds = integer(
            &mut violations,
            "IDLE_TIMEOUT_SECONDS",
            "BR-01.5",
            get("IDLE_TIMEOUT_SECONDS"),
            DEFAULT_IDLE_TIMEOUT_SECONDS,
            0,
            "a non-negative integer (>= 0)",
        );
        let log_level = match get("LOG_LEVEL") {
            None => Some(LogLevel::Info),
            Some(text) => {
                let level = LogLevel::parse(text);
                if level.is_none() {
                    violations.push(Violation::new(
                        "LOG_LEVEL",
                        "BR-01.6",
                        format!(
                            "LOG_LEVEL must be one of DEBUG, INFO, WARNING, ERROR, got {text:?}"
                        ),
                    ));
                }
                level
            }
        };
        let path = |key: &str, default: &str| {
            PathBuf::from(get(key).filter(|v| !v.trim().is_empty()).unwrap_or(default))
        };
        match (agent_name, max_processes, idle_timeout_seconds, log_level) {
            (
                Some(agent_name),
                Some(max_processes),
                Some(idle_timeout_seconds),
                Some(log_level),
            ) if violations.is_empty() => Ok(Self {
                bot_token: Secret(bot_token.to_owned()),
                agent_name,
                config_path: path("KIRO_CONFIG_PATH", DEFAULT_CONFIG_PATH),
                workspace_base_path: path("WORKSPACE_BASE_PATH", DEFAULT_WORKSPACE_BASE_PATH),
                max_processes,
                idle_timeout_seconds,
                log_level,
            }),
            _ => Err(ConfigError::Invalid(violations)),
        }
    }

    /// The bot token (secret).
    pub fn bot_token(&self) -> &Secret {
        &self.bot_token
    }

    /// The agent name.
    pub fn agent_name(&self) -> &AgentName {
        &self.agent_name
    }

    /// The template directory (`KIRO_CONFIG_PATH`).
    pub fn config_path(&self) -> &Path {
        &self.config_path
    }

    /// The workspace base directory.
    pub fn workspace_base_path(&self) -> &Path {
        &self.workspace_base_path
    }

    /// The process cap.
    pub fn max_processes(&self) -> u64 {
        self.max_processes
    }

    /// The idle timeout in seconds.
    pub fn idle_timeout_seconds(&self) -> u64 {
        self.idle_timeout_seconds
    }

    /// The log level, also the level kiro-cli's stderr is logged at (BR-08.2).
    pub fn log_level(&self) -> LogLevel {
        self.log_level
    }

    /// The configuration as JSON with `BOT_TOKEN` replaced by [`REDACTED`].
    pub fn redacted_json(&self) -> Value {
        json!({
            "BOT_TOKEN": REDACTED,
            "KIRO_AGENT_NAME": self.agent_name.as_str(),
            "KIRO_CONFIG_PATH": self.config_path.display().to_string(),
            "WORKSPACE_BASE_PATH": self.workspace_base_path.display().to_string(),
            "MAX_PROCESSES": self.max_processes,
            "IDLE_TIMEOUT_SECONDS": self.idle_timeout_seconds,
            "LOG_LEVEL": self.log_level.as_str(),
        })
    }
}

fn integer(
    violations: &mut Vec<Violation>,
    key: &str,
    rule: &str,
    text: Option<&str>,
    default: u64,
    min: u64,
    what: &str,
) -> Option<u64> {
    let Some(text) = text else {
        return Some(default);
    };
    match text.trim().parse::<i128>() {
        Ok(value) if value >= i128::from(min) && value <= i128::from(u32::MAX) => {
            u64::try_from(value).ok()
        }
        _ => {
            violations.push(Violation::new(
                key,
                rule,
                format!("{key} must be {what}, got {text:?}"),
            ));
            None
        }
    }
}

/// Reads a `.env` file: `KEY=VALUE` lines, optional `export `, `#` comments, blank lines, and
/// values in single or double quotes. The file (a link is followed) must be regular and at most
/// [`MAX_DOTENV_BYTES`] long; a FIFO or device is refused without blocking on it.
pub fn parse_dotenv_file(path: &Path) -> Result<BTreeMap<String, String>, ConfigError> {
    let failed = |source| ConfigError::DotEnv {
        path: path.to_owned(),
        source,
    };
    let real = path.canonicalize().map_err(failed)?;
    let bytes =
        inside_root::read_regular(&real, MAX_DOTENV_BYTES).map_err(|error| match error {
            InsideRootError::NotRegular { kind, .. } => ConfigError::DotEnvRefused {
                path: path.to_owned(),
                why: format!("is {kind}, not a regular file"),
            },
            InsideRootError::TooLarge { .. } => ConfigError::DotEnvRefused {
                path: path.to_owned(),
                why: format!("is larger than the 1 MiB limit ({MAX_DOTENV_BYTES} bytes)"),
            },
            other => failed(std::io::Error::other(other.to_string())),
        })?;
    let text = String::from_utf8(bytes).map_err(|_| {
        failed(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "stream did not contain valid UTF-8",
        ))
    })?;
    parse_dotenv(&text).map_err(|line| ConfigError::DotEnvSyntax {
        path: path.to_owned(),
        line,
    })
}

/// Parses `.env` text; the error is the 1-based number of the first bad line.
pub fn parse_dotenv(text: &str) -> Result<BTreeMap<String, String>, usize> {
    let mut values = BTreeMap::new();
    for (index, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let line = line.strip_prefix("export ").unwrap_or(line);
        let Some((key, value)) = line.split_once('=') else {
            return Err(index + 1);
        };
        let key = key.trim();
        if key.is_empty() || !key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(index + 1);
        }
        let value = value.trim();
        let value = if value.len() >= 2
            && ((value.starts_with('"') && value.ends_with('"'))
                || (value.starts_with('\'') && value.ends_with('\'')))
        {
            &value[1..value.len() - 1]
        } else {
            // An unquoted value ends at an inline comment.
            value.split(" #").next().unwrap_or("").trim_end()
        };
        values.insert(key.to_owned(), value.to_owned());
    }
    Ok(values)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    fn violations(pairs: &[(&str, &str)]) -> Vec<Violation> {
        match KiroConfig::from_values(&values(pairs)) {
            Err(ConfigError::Invalid(v)) => v,
            other => panic!("expected violations, got {other:?}"),
        }
    }

    #[test]
    fn loads_valid_values_with_defaults() {
        let config = KiroConfig::from_values(&values(&[
            ("BOT_TOKEN", "t0k"),
            ("KIRO_AGENT_NAME", "tg-acp"),
        ]))
        .unwrap();
        assert_eq!(config.agent_name().as_str(), "tg-acp");
        assert_eq!(config.max_processes(), 5);
        assert_eq!(config.idle_timeout_seconds(), 30);
        assert_eq!(config.log_level(), LogLevel::Info);
        assert_eq!(config.config_path(), Path::new("./kiro-config/"));
        let printed = config.redacted_json().to_string();
        assert!(!printed.contains("t0k"), "{printed}");
        assert!(!format!("{config:?}").contains("t0k"));
    }

    #[test]
    fn reports_every_violation_at_once() {
        let found = violations(&[
            ("KIRO_AGENT_NAME", "a*"),
            ("MAX_PROCESSES", "0"),
            ("IDLE_TIMEOUT_SECONDS", "-1"),
            ("LOG_LEVEL", "verbose"),
        ]);
        let rules: Vec<&str> = found.iter().map(|v| v.rule.as_str()).collect();
        assert_eq!(
            rules,
            ["BR-01.1", "BR-01.3", "BR-01.4", "BR-01.5", "BR-01.6"]
        );
    }

    #[test]
    fn boundaries() {
        let base = [("BOT_TOKEN", "x"), ("KIRO_AGENT_NAME", "abc")];
        let with = |k: &'static str, v: &'static str| {
            let mut pairs = base.to_vec();
            pairs.push((k, v));
            KiroConfig::from_values(&values(&pairs))
        };
        assert!(with("MAX_PROCESSES", "1").is_ok());
        assert!(with("MAX_PROCESSES", "1.5").is_err());
        assert!(with("IDLE_TIMEOUT_SECONDS", "0").is_ok());
        assert_eq!(
            with("LOG_LEVEL", "warning").unwrap().log_level(),
            LogLevel::Warning
        );
        assert!(with("LOG_LEVEL", "TRACE").is_err());
    }

    #[test]
    fn dotenv_syntax() {
        let parsed =
            parse_dotenv("# c\nexport A=1\nB=\"two words\"\nC='x' \nD=v # note\n\n").unwrap();
        assert_eq!(
            parsed,
            values(&[("A", "1"), ("B", "two words"), ("C", "x"), ("D", "v")])
        );
        assert_eq!(parse_dotenv("A=1\nnot a pair\n"), Err(2));
    }

    #[test]
    fn environment_wins_over_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join(".env");
        std::fs::write(&file, "BOT_TOKEN=file\nKIRO_AGENT_NAME=from-file\n").unwrap();
        let env = values(&[("KIRO_AGENT_NAME", "from-env")]);
        let config = KiroConfig::load(&env, Some(&file)).unwrap();
        assert_eq!(config.agent_name().as_str(), "from-env");
        assert_eq!(config.bot_token().expose(), "file");
    }
}
