//! What keeps secrets out of a recording: environment values, fields named like tokens and keys,
//! text shaped like a credential, and the recording's working directory (made relative).

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

use regex::Regex;
use serde_json::Value;

/// Field names (lower case, without `_` and `-`) whose string values are always redacted.
pub const SECRET_FIELDS: &[&str] = &[
    "token",
    "secret",
    "password",
    "passwd",
    "apikey",
    "authorization",
    "cookie",
    "credential",
    "privatekey",
    "accesskey",
    "secretkey",
    "sessionkey",
    "bearer",
];

/// Field names that are exactly a secret (a substring match would take too much).
const SECRET_NAMES: &[&str] = &["key", "auth", "pat"];

/// Credential shapes redacted wherever they appear: name and expression.
pub const SECRET_PATTERNS: &[(&str, &str)] = &[
    ("bearer", r"(?i)\bbearer\s+[A-Za-z0-9._~+/-]{8,}=*"),
    ("openai-key", r"\bsk-[A-Za-z0-9_-]{16,}"),
    ("github-token", r"\bgh[pousr]_[A-Za-z0-9]{20,}"),
    ("github-pat", r"\bgithub_pat_[A-Za-z0-9_]{20,}"),
    ("slack-token", r"\bxox[abposr]-[A-Za-z0-9-]{10,}"),
    ("slack-app-token", r"\bxapp-[A-Za-z0-9-]{10,}"),
    ("aws-key-id", r"\bAKIA[0-9A-Z]{16}\b"),
    ("google-key", r"\bAIza[0-9A-Za-z_-]{35}"),
    (
        "jwt",
        r"\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}",
    ),
];

/// The shortest environment value redacted for its value alone; a variable named like a secret
/// is redacted from four characters on.
pub const MIN_ENV_VALUE: usize = 8;

/// What the user adds to the defaults.
#[derive(Debug, Clone, Default)]
pub struct Extra {
    /// More field names (matched like [`SECRET_FIELDS`]).
    pub fields: Vec<String>,
    /// More expressions.
    pub patterns: Vec<String>,
    /// Environment variables whose values are redacted whatever their length.
    pub env: Vec<String>,
}

/// Redacts messages and text for a recording.
#[derive(Debug, Clone)]
pub struct Redactor {
    cwd: String,
    /// `(name, value)`, longest value first.
    env: Vec<(String, String)>,
    fields: Vec<String>,
    patterns: Vec<(String, Regex)>,
    /// What was redacted so far: `cwd`, `env:NAME`, `field:NAME`, `pattern:NAME`.
    hits: Arc<Mutex<BTreeSet<String>>>,
}

fn normalised(name: &str) -> String {
    name.chars()
        .filter(|c| *c != '_' && *c != '-')
        .flat_map(char::to_lowercase)
        .collect()
}

impl Redactor {
    /// A redactor for this working directory and environment, with the user's additions; an
    /// expression that does not compile is an error naming it.
    pub fn new(cwd: &str, env: &[(String, String)], extra: &Extra) -> Result<Self, String> {
        let mut fields: Vec<String> = SECRET_FIELDS.iter().map(|f| (*f).to_owned()).collect();
        fields.extend(extra.fields.iter().map(|f| normalised(f)));
        let mut patterns = Vec::new();
        for (name, expression) in SECRET_PATTERNS {
            let regex = Regex::new(expression).map_err(|e| format!("pattern {name}: {e}"))?;
            patterns.push(((*name).to_owned(), regex));
        }
        for (index, expression) in extra.patterns.iter().enumerate() {
            let regex =
                Regex::new(expression).map_err(|e| format!("bad pattern {expression:?}: {e}"))?;
            patterns.push((format!("user-{index}"), regex));
        }
        let mut secret_env: Vec<(String, String)> = env
            .iter()
            .filter(|(name, value)| {
                let forced = extra.env.iter().any(|n| n == name);
                let secret_name = is_secret_name(name, &fields);
                let long_enough = value.chars().count() >= MIN_ENV_VALUE
                    || (secret_name && value.chars().count() >= 4)
                    || (forced && !value.is_empty());
                // The working directory and its parents are made relative, not redacted.
                let is_cwd_path = !cwd.is_empty() && cwd.starts_with(value.as_str());
                long_enough && !is_cwd_path
            })
            .cloned()
            .collect();
        secret_env.sort_by(|a, b| b.1.len().cmp(&a.1.len()).then_with(|| a.0.cmp(&b.0)));
        Ok(Self {
            cwd: cwd.trim_end_matches('/').to_owned(),
            env: secret_env,
            fields,
            patterns,
            hits: Arc::default(),
        })
    }

    /// What was redacted so far, for `[recording].redacted`: `cwd`, `env:NAME`, `field:NAME`,
    /// `pattern:NAME` (names only, never a value).
    pub fn summary(&self) -> Vec<String> {
        self.hits
            .lock()
            .map(|hits| hits.iter().cloned().collect())
            .unwrap_or_default()
    }

    fn hit(&self, what: String) {
        if let Ok(mut hits) = self.hits.lock() {
            hits.insert(what);
        }
    }

    /// Redacts one recorded line: a JSON message value by value, anything else as text.
    pub fn line(&self, line: &str) -> String {
        match serde_json::from_str::<Value>(line) {
            Ok(mut value) => {
                self.value(&mut value);
                value.to_string()
            }
            Err(_) => self.text(line),
        }
    }

    /// Redacts every string in `value`, and every string under a field named like a secret.
    pub fn value(&self, value: &mut Value) {
        match value {
            Value::String(text) => *text = self.text(text),
            Value::Array(items) => items.iter_mut().for_each(|item| self.value(item)),
            Value::Object(map) => {
                // `{"name": "API_TOKEN", "value": "..."}`: environment and header entries.
                let named_secret = map
                    .get("name")
                    .and_then(Value::as_str)
                    .is_some_and(|name| is_secret_name(name, &self.fields));
                for (key, item) in map.iter_mut() {
                    let secret =
                        is_secret_name(key, &self.fields) || (named_secret && key == "value");
                    if secret {
                        if redact_all_strings(item) {
                            let name = if key == "value" {
                                "value of a secret name"
                            } else {
                                key.as_str()
                            };
                            self.hit(format!("field:{name}"));
                        }
                    } else {
                        self.value(item);
                    }
                }
            }
            _ => {}
        }
    }

    /// Redacts one text: the working directory becomes `.`, environment values and credential
    /// shapes become `[redacted:...]`.
    pub fn text(&self, text: &str) -> String {
        let mut out = self.relative(text);
        // Credential shapes first: an environment value inside a token would otherwise break
        // the token's shape and leave the rest of it in the text.
        for (name, pattern) in &self.patterns {
            if pattern.is_match(&out) {
                self.hit(format!("pattern:{name}"));
                out = pattern
                    .replace_all(&out, format!("[redacted:{name}]").as_str())
                    .into_owned();
            }
        }
        for (name, value) in &self.env {
            if out.contains(value.as_str()) {
                self.hit(format!("env:{name}"));
                out = out.replace(value.as_str(), &format!("[redacted:env:{name}]"));
            }
        }
        out
    }

    /// A command line for the provenance: each word redacted, and the word after a flag named
    /// like a secret (`--api-key VALUE`) too.
    pub fn command(&self, argv: &[String]) -> Vec<String> {
        let mut out = Vec::with_capacity(argv.len());
        let mut next_is_secret = false;
        for word in argv {
            if next_is_secret {
                out.push("[redacted]".to_owned());
                self.hit("command".to_owned());
                next_is_secret = false;
                continue;
            }
            let flag = word.trim_start_matches('-');
            match flag.split_once('=') {
                Some((name, _)) if word.starts_with('-') && is_secret_name(name, &self.fields) => {
                    self.hit("command".to_owned());
                    out.push(format!(
                        "{}=[redacted]",
                        &word[..word.len() - flag.len() + name.len()]
                    ));
                }
                None if word.starts_with('-') && is_secret_name(flag, &self.fields) => {
                    out.push(self.text(word));
                    next_is_secret = true;
                }
                _ => out.push(self.text(word)),
            }
        }
        out
    }

    fn relative(&self, text: &str) -> String {
        if self.cwd.is_empty() || self.cwd == "/" || !text.contains(self.cwd.as_str()) {
            return text.to_owned();
        }
        self.hit("cwd".to_owned());
        if text == self.cwd {
            return ".".to_owned();
        }
        let with_slash = format!("{}/", self.cwd);
        let mut out = text.replace(&with_slash, "./");
        // The directory itself, where it is not the start of a longer name.
        let mut result = String::with_capacity(out.len());
        while let Some(at) = out.find(self.cwd.as_str()) {
            let after = &out[at + self.cwd.len()..];
            let continues = after
                .chars()
                .next()
                .is_some_and(|c| c.is_alphanumeric() || matches!(c, '.' | '_' | '-'));
            result.push_str(&out[..at]);
            result.push_str(if continues { &self.cwd } else { "." });
            out = after.to_owned();
        }
        result.push_str(&out);
        result
    }
}

fn is_secret_name(name: &str, fields: &[String]) -> bool {
    let name = normalised(name);
    SECRET_NAMES.contains(&name.as_str()) || fields.iter().any(|f| name.contains(f.as_str()))
}

/// Replaces every non-empty string in `value`; answers whether there was one.
fn redact_all_strings(value: &mut Value) -> bool {
    match value {
        Value::String(text) if !text.is_empty() => {
            *text = "[redacted]".to_owned();
            true
        }
        Value::Array(items) => items
            .iter_mut()
            .fold(false, |any, item| redact_all_strings(item) | any),
        Value::Object(map) => map
            .values_mut()
            .fold(false, |any, item| redact_all_strings(item) | any),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn redactor() -> Redactor {
        let env = vec![
            ("MY_SERVICE_TOKEN".to_owned(), "tok1".to_owned()),
            ("LONG_VALUE".to_owned(), "abcdefghijkl".to_owned()),
            ("SHORT".to_owned(), "abc".to_owned()),
            ("HOME".to_owned(), "/home/u".to_owned()),
        ];
        Redactor::new("/home/u/proj", &env, &Extra::default()).unwrap()
    }

    #[test]
    fn fields_env_values_and_shapes_are_redacted_and_numbers_kept() {
        let mut message = json!({
            "params": {
                "cwd": "/home/u/proj",
                "path": "/home/u/proj/src/a.rs",
                "other": "/home/u/project2",
                "apiKey": "plain",
                "usage": {"inputTokens": 12},
                "text": "use tok1 and abcdefghijkl and ghp_abcdefghijklmnopqrstuvwxyz and abc",
                "env": [{"name": "OPENAI_API_KEY", "value": "v"}, {"name": "MODE", "value": "fast"}],
            }
        });
        redactor().value(&mut message);
        let params = &message["params"];
        assert_eq!(params["cwd"], ".");
        assert_eq!(params["path"], "./src/a.rs");
        assert_eq!(params["other"], "/home/u/project2");
        assert_eq!(params["apiKey"], "[redacted]");
        assert_eq!(params["usage"]["inputTokens"], 12);
        assert_eq!(
            params["text"],
            "use [redacted:env:MY_SERVICE_TOKEN] and [redacted:env:LONG_VALUE] and \
             [redacted:github-token] and abc"
        );
        assert_eq!(params["env"][0]["value"], "[redacted]");
        assert_eq!(params["env"][1]["value"], "fast");
    }

    #[test]
    fn a_secret_flag_and_its_value_are_redacted_in_the_command() {
        let argv: Vec<String> = ["agent", "--api-key", "k1", "--token=t2", "--model", "m"]
            .iter()
            .map(|s| (*s).to_owned())
            .collect();
        assert_eq!(
            redactor().command(&argv),
            [
                "agent",
                "--api-key",
                "[redacted]",
                "--token=[redacted]",
                "--model",
                "m"
            ]
        );
    }
}
