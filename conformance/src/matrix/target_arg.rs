//! The columns of a matrix as the command line names them: `[LABEL=]PROFILE`, `[LABEL=]CMD`,
//! `[LABEL=]URL` or `[LABEL=]DIR`, each with a label that names its column and its
//! subdirectory of the output.

use std::path::{Path, PathBuf};

/// What a column is made from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TargetSource {
    /// A target profile (a name from `conformance/targets` or a `.toml` path), run now.
    Profile(String),
    /// An ad-hoc ACP agent command over stdio, run now.
    AgentCmd(String),
    /// An ad-hoc ACP agent at a WebSocket URL, run now.
    AgentUrl(String),
    /// The `results.json` of an earlier run (the file or its directory), read back.
    Results(PathBuf),
}

/// One column of the matrix: its label and what it is made from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TargetArg {
    /// The column's name, also its subdirectory of the output.
    pub label: String,
    /// What to run or read.
    pub source: TargetSource,
}

impl TargetArg {
    /// `[LABEL=]PROFILE`; without a label, the profile's file stem (or name).
    pub fn profile(text: &str) -> Result<Self, String> {
        let (label, rest) = split_label(text);
        let rest = non_empty("--target", text, rest)?;
        let label = match label {
            Some(label) => label,
            None => stem(rest).ok_or_else(|| format!("--target {text:?}: no profile named"))?,
        };
        Self::new(label, TargetSource::Profile(rest.to_owned()))
    }

    /// `[LABEL=]CMD`; without a label, the file name of the command's program.
    pub fn agent_cmd(text: &str) -> Result<Self, String> {
        let (label, rest) = split_label(text);
        let rest = non_empty("--agent-cmd", text, rest)?;
        let words = crate::target::split_words(rest)
            .map_err(|message| format!("--agent-cmd {rest:?}: {message}"))?;
        let label = match label {
            Some(label) => label,
            None => words
                .first()
                .and_then(|program| stem(program))
                .ok_or_else(|| format!("--agent-cmd {text:?}: no command"))?,
        };
        Self::new(label, TargetSource::AgentCmd(rest.to_owned()))
    }

    /// `[LABEL=]URL`; without a label, the URL's host and port.
    pub fn agent_url(text: &str) -> Result<Self, String> {
        let (label, rest) = split_label(text);
        let rest = non_empty("--agent-url", text, rest)?;
        let label = match label {
            Some(label) => label,
            None => {
                let host = rest.split("://").nth(1).unwrap_or(rest);
                let host = host.split('/').next().unwrap_or_default();
                sanitised(host).ok_or_else(|| format!("--agent-url {text:?}: no host"))?
            }
        };
        Self::new(label, TargetSource::AgentUrl(rest.to_owned()))
    }

    /// `[LABEL=]DIR` or `[LABEL=]DIR/results.json`; without a label, the directory's name.
    pub fn results(text: &str) -> Result<Self, String> {
        let (label, rest) = split_label(text);
        let rest = non_empty("--from", text, rest)?;
        let path = Path::new(rest);
        let dir = if path.file_name().is_some_and(|n| n == "results.json") {
            path.parent().unwrap_or(Path::new("."))
        } else {
            path
        };
        let label = match label {
            Some(label) => label,
            None => std::fs::canonicalize(dir)
                .ok()
                .and_then(|dir| {
                    dir.file_name()
                        .and_then(|n| sanitised(&n.to_string_lossy()))
                })
                .ok_or_else(|| format!("--from {text:?}: name it LABEL=DIR"))?,
        };
        Self::new(label, TargetSource::Results(path.to_owned()))
    }

    fn new(label: String, source: TargetSource) -> Result<Self, String> {
        if !is_label(&label) {
            return Err(format!(
                "label {label:?}: use letters, digits, '.', '_' and '-', starting with a letter or digit"
            ));
        }
        Ok(Self { label, source })
    }

    /// The `results.json` of this column once its run is over (or the one it reads).
    pub fn results_path(&self, out: &Path) -> PathBuf {
        match &self.source {
            TargetSource::Results(path) if path.ends_with("results.json") => path.clone(),
            TargetSource::Results(path) => path.join("results.json"),
            _ => out.join(&self.label).join("results.json"),
        }
    }

    /// Whether this column is run now (not read from an earlier run).
    pub fn runs(&self) -> bool {
        !matches!(self.source, TargetSource::Results(_))
    }
}

/// `LABEL=REST` when the text before the first `=` is a label, else no label and the whole text.
fn split_label(text: &str) -> (Option<String>, &str) {
    match text.split_once('=') {
        Some((label, rest)) if is_label(label) => (Some(label.to_owned()), rest),
        _ => (None, text),
    }
}

/// Refuses a target named by nothing but its label.
fn non_empty<'a>(flag: &str, text: &str, rest: &'a str) -> Result<&'a str, String> {
    if rest.trim().is_empty() {
        Err(format!("{flag} {text:?}: nothing after the label"))
    } else {
        Ok(rest)
    }
}

/// Letters, digits, `.`, `_` and `-`, starting with a letter or digit.
fn is_label(text: &str) -> bool {
    let mut chars = text.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphanumeric())
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
        && text.len() <= 64
}

/// The file stem of a path or name, made a label.
fn stem(text: &str) -> Option<String> {
    let name = Path::new(text).file_stem()?.to_string_lossy().into_owned();
    sanitised(&name)
}

/// `text` with every character a label cannot have replaced by `-`.
fn sanitised(text: &str) -> Option<String> {
    let label: String = text
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '-'
            }
        })
        .collect();
    let label = label.trim_start_matches(['.', '_', '-']).to_owned();
    (!label.is_empty()).then(|| label.chars().take(64).collect())
}

#[cfg(test)]
mod tests {
    use super::{TargetArg, TargetSource};

    #[test]
    fn a_label_is_taken_only_when_it_is_one() {
        let t = TargetArg::profile("ref=reference").unwrap();
        assert_eq!(t.label, "ref");
        assert_eq!(t.source, TargetSource::Profile("reference".into()));
        let t = TargetArg::profile("targets/my-agent.toml").unwrap();
        assert_eq!(t.label, "my-agent");
        let t = TargetArg::agent_cmd("node agent.mjs --level=3").unwrap();
        assert_eq!(t.label, "node");
        assert_eq!(
            t.source,
            TargetSource::AgentCmd("node agent.mjs --level=3".into())
        );
        let t = TargetArg::agent_cmd("echo=node agent.mjs").unwrap();
        assert_eq!(t.label, "echo");
        let t = TargetArg::agent_url("ws://127.0.0.1:4000/?a=b").unwrap();
        assert_eq!(t.label, "127.0.0.1-4000");
        assert!(TargetArg::agent_cmd("x=").is_err());
        assert!(TargetArg::agent_cmd("'unclosed").is_err());
    }
}
