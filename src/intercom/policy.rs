//! The workspace auto-approve policy behind the `auto_check` tool: `<workspace path>/.intercom/
//! settings.json`, read at every check (so edits apply at once), with glob patterns for tool
//! names and for shell commands. Anything missing, unreadable or invalid approves nothing.
//!
//! ```json
//! { "auto_approve": { "tools": ["read_file", "list_*"], "commands": ["cargo test*", "git status"] } }
//! ```

use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::Value;

use crate::storage::inside_root::{InsideRootError, Root};

/// Where the policy lives under a workspace root.
pub const POLICY_FILE: &str = ".intercom/settings.json";
/// A larger policy file is refused rather than read.
pub const MAX_POLICY_BYTES: u64 = 64 * 1024;
/// Characters that chain or redirect shell commands: a command containing one is never
/// approved by a pattern (`cargo test*` must not approve `cargo test; rm -rf ~`).
const SHELL_CONTROL: &[char] = &[';', '&', '|', '$', '`', '<', '>', '\n', '\r', '(', ')'];

/// Why a policy could not be used (the check then approves nothing).
#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    #[error("cannot read {path}: {message}")]
    Read { path: String, message: String },
    #[error("{path} is larger than {MAX_POLICY_BYTES} bytes")]
    TooLarge { path: String },
    #[error("invalid policy {path}: {message}")]
    Invalid { path: String, message: String },
}

/// `auto_approve` in the settings file.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AutoApprove {
    /// Patterns for `tool_name`.
    #[serde(default)]
    pub tools: Vec<String>,
    /// Patterns for `context.command`.
    #[serde(default)]
    pub commands: Vec<String>,
}

#[derive(Debug, Deserialize)]
struct Settings {
    #[serde(default)]
    auto_approve: AutoApprove,
}

/// The answer of one check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    pub auto_approved: bool,
    /// `tools:<pattern>` or `commands:<pattern>` when approved.
    pub matched_rule: Option<String>,
}

/// The policy file of a workspace root.
pub fn policy_path(root: &Path) -> PathBuf {
    root.join(POLICY_FILE)
}

/// Reads the policy under `root`; no file is an empty policy. The file is resolved inside the
/// workspace by `storage::inside_root` (a link out of it is refused) and must be a regular file
/// of at most [`MAX_POLICY_BYTES`], read without blocking (a FIFO or device is refused).
pub fn load(root: &Path) -> Result<AutoApprove, PolicyError> {
    let path = policy_path(root);
    let shown = || path.display().to_string();
    let unreadable = |error: InsideRootError| PolicyError::Read {
        path: shown(),
        message: error.to_string(),
    };
    let read = Root::new(root)
        .and_then(|root| root.resolve(Path::new(POLICY_FILE)))
        .and_then(|resolved| resolved.read_file(MAX_POLICY_BYTES));
    let bytes = match read {
        Ok(bytes) => bytes,
        Err(InsideRootError::NotFound { .. }) => return Ok(AutoApprove::default()),
        Err(InsideRootError::Root { source, .. })
            if source.kind() == std::io::ErrorKind::NotFound =>
        {
            return Ok(AutoApprove::default());
        }
        Err(InsideRootError::TooLarge { .. }) => {
            return Err(PolicyError::TooLarge { path: shown() });
        }
        Err(error) => return Err(unreadable(error)),
    };
    let text = String::from_utf8(bytes).map_err(|_| PolicyError::Read {
        path: shown(),
        message: "not valid UTF-8".to_owned(),
    })?;
    let policy = serde_json::from_str::<Settings>(&text)
        .map(|settings| settings.auto_approve)
        .map_err(|error| PolicyError::Invalid {
            path: shown(),
            message: error.to_string(),
        })?;
    let patterns = policy
        .tools
        .iter()
        .map(|p| ("tools", p))
        .chain(policy.commands.iter().map(|p| ("commands", p)));
    for (list, pattern) in patterns {
        glob(pattern).map_err(|message| PolicyError::Invalid {
            path: shown(),
            message: format!("auto_approve.{list}: {message}"),
        })?;
    }
    Ok(policy)
}

/// A policy pattern as a matcher: [`globset`]'s syntax (`*` any run of characters, `/` and
/// spaces included, `?` one byte, `[...]`, `{a,b}`, `\` escapes), matched against the whole
/// text. An invalid pattern (`read_[`) is an error naming it.
pub fn glob(pattern: &str) -> Result<globset::GlobMatcher, String> {
    globset::GlobBuilder::new(pattern)
        .literal_separator(false)
        .build()
        .map(|glob| glob.compile_matcher())
        .map_err(|error| format!("invalid pattern {pattern:?}: {}", error.kind()))
}

/// Whether `text` matches `pattern` (see [`glob`]); an invalid pattern matches nothing.
pub fn glob_match(pattern: &str, text: &str) -> bool {
    glob(pattern).is_ok_and(|matcher| matcher.is_match(text))
}

impl AutoApprove {
    /// Checks a tool call: its name against `tools`, then `context.command` against `commands`.
    pub fn check(&self, tool_name: &str, context: Option<&Value>) -> Verdict {
        if let Some(pattern) = self.tools.iter().find(|p| glob_match(p, tool_name)) {
            return Verdict {
                auto_approved: true,
                matched_rule: Some(format!("tools:{pattern}")),
            };
        }
        let command = context
            .and_then(|context| context.get("command"))
            .and_then(Value::as_str)
            .map(str::trim)
            .filter(|command| !command.is_empty() && !command.contains(SHELL_CONTROL));
        if let Some(command) = command
            && let Some(pattern) = self.commands.iter().find(|p| glob_match(p, command))
        {
            return Verdict {
                auto_approved: true,
                matched_rule: Some(format!("commands:{pattern}")),
            };
        }
        Verdict {
            auto_approved: false,
            matched_rule: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn policy(tools: &[&str], commands: &[&str]) -> AutoApprove {
        AutoApprove {
            tools: tools.iter().map(|s| s.to_string()).collect(),
            commands: commands.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn globs_match_whole_strings_with_stars_anywhere() {
        assert!(glob_match("read_file", "read_file"));
        assert!(!glob_match("read_file", "read_file2"));
        assert!(glob_match("list_*", "list_dir"));
        assert!(glob_match("*_file", "write_file"));
        assert!(glob_match("a*b*c", "a-x-b-y-c"));
        assert!(!glob_match("a*b*c", "a-x-c"));
        assert!(glob_match("*", ""));
        assert!(!glob_match("ab*ab", "ab"));
        assert!(!glob_match("", "x"));
        assert!(glob_match("cargo test*", "cargo test -p ski src/x.rs"));
        assert!(glob_match("git {status,diff}", "git diff"));
        assert!(!glob_match("git {status,diff}", "git push"));
        assert!(glob_match("read_?", "read_x"));
        // globset matches bytes: `?` is one byte, so it does not stand for a non-ASCII character.
        assert!(!glob_match("read_?", "read_é"));
        assert!(glob_match("read_*", "read_é"));
        assert!(glob_match(r"ls \*", "ls *"));
        assert!(!glob_match(r"ls \*", "ls x"));
        assert!(
            !glob_match("read_[", "read_["),
            "an invalid pattern matches nothing"
        );
    }

    #[test]
    fn tools_and_commands_are_approved_by_their_patterns_and_nothing_else() {
        let policy = policy(&["read_file", "list_*"], &["cargo test*", "git status"]);
        assert_eq!(
            policy.check("list_dir", None),
            Verdict {
                auto_approved: true,
                matched_rule: Some("tools:list_*".into())
            }
        );
        let shell = |command: &str| json!({ "command": command });
        assert_eq!(
            policy
                .check("run_command", Some(&shell("cargo test -p ski")))
                .matched_rule
                .as_deref(),
            Some("commands:cargo test*")
        );
        assert!(!policy.check("write_file", None).auto_approved);
        assert!(
            !policy
                .check("run_command", Some(&shell("git push")))
                .auto_approved
        );
        assert!(
            !policy
                .check("run_command", Some(&json!({ "command": 7 })))
                .auto_approved,
            "a command of the wrong type approves nothing"
        );
    }

    #[test]
    fn chained_or_redirected_commands_are_never_approved() {
        let policy = policy(&[], &["cargo test*"]);
        for command in [
            "cargo test; rm -rf ~",
            "cargo test && curl x",
            "cargo test | sh",
            "cargo test $(id)",
            "cargo test `id`",
            "cargo test > /etc/passwd",
            "cargo test\nrm -rf ~",
        ] {
            assert!(
                !policy
                    .check("run_command", Some(&json!({ "command": command })))
                    .auto_approved,
                "{command:?}"
            );
        }
    }

    #[test]
    fn missing_files_approve_nothing_and_bad_files_are_errors() {
        let dir = tempfile::tempdir().expect("tempdir");
        assert_eq!(load(dir.path()).expect("no file"), AutoApprove::default());
        std::fs::create_dir_all(dir.path().join(".intercom")).expect("mkdir");
        let file = policy_path(dir.path());
        std::fs::write(&file, r#"{"auto_approve": {"tools": "read_file"}}"#).expect("write");
        assert!(matches!(load(dir.path()), Err(PolicyError::Invalid { .. })));
        std::fs::write(&file, "x".repeat(MAX_POLICY_BYTES as usize + 1)).expect("write");
        assert!(matches!(
            load(dir.path()),
            Err(PolicyError::TooLarge { .. })
        ));
        std::fs::write(
            &file,
            r#"{"auto_approve": {"commands": ["ok", "git [st"]}}"#,
        )
        .expect("write");
        let Err(PolicyError::Invalid { message, .. }) = load(dir.path()) else {
            panic!("an invalid pattern is an invalid policy");
        };
        assert!(
            message.contains("auto_approve.commands: invalid pattern \"git [st\""),
            "{message}"
        );
        std::fs::write(&file, r#"{"auto_approve": {"tools": ["read_*"]}}"#).expect("write");
        assert!(
            load(dir.path())
                .expect("valid")
                .check("read_x", None)
                .auto_approved
        );
    }
}
