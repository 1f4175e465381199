//! The agent name: the `--agent` argument of kiro-cli and the prefix the provisioner owns
//! (BR-01.2, BR-01.3; a leading dash is refused as well, E-KIRO-02).

use std::fmt;

/// The shortest accepted agent name (BR-01.2).
pub const MIN_LEN: usize = 3;

/// Why a text is not an agent name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AgentNameError {
    /// The name is empty (BR-01.2).
    #[error("KIRO_AGENT_NAME is required")]
    Empty,
    /// The name is shorter than [`MIN_LEN`] characters (BR-01.2).
    #[error("KIRO_AGENT_NAME must be at least {MIN_LEN} characters, got {0:?}")]
    TooShort(String),
    /// The name has a character outside `[a-zA-Z0-9_-]` (BR-01.3).
    #[error("KIRO_AGENT_NAME must match ^[a-zA-Z0-9_-]+$, got {0:?}")]
    BadCharacter(String),
    /// The name starts with `-`, which kiro-cli would read as an option (E-KIRO-02).
    #[error("KIRO_AGENT_NAME must not start with '-', got {0:?}")]
    LeadingDash(String),
}

impl AgentNameError {
    /// The business rule the name breaks.
    pub fn rule(&self) -> &'static str {
        match self {
            AgentNameError::Empty | AgentNameError::TooShort(_) => "BR-01.2",
            AgentNameError::BadCharacter(_) | AgentNameError::LeadingDash(_) => "BR-01.3",
        }
    }
}

/// A validated agent name: at least 3 characters of `[a-zA-Z0-9_-]`, not starting with `-`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct AgentName(String);

impl AgentName {
    /// Validates `text` as an agent name.
    pub fn parse(text: &str) -> Result<Self, AgentNameError> {
        if text.is_empty() {
            return Err(AgentNameError::Empty);
        }
        if !text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        {
            return Err(AgentNameError::BadCharacter(text.to_owned()));
        }
        if text.chars().count() < MIN_LEN {
            return Err(AgentNameError::TooShort(text.to_owned()));
        }
        if text.starts_with('-') {
            return Err(AgentNameError::LeadingDash(text.to_owned()));
        }
        Ok(Self(text.to_owned()))
    }

    /// The name as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether a directory entry's name belongs to this agent: it starts with the name,
    /// case-sensitively (BR-03.1, BR-04.5).
    pub fn owns(&self, entry_name: &str) -> bool {
        entry_name.starts_with(&self.0)
    }

    /// The agent's JSON file name, `NAME.json`.
    pub fn json_file(&self) -> String {
        format!("{}.json", self.0)
    }
}

impl fmt::Display for AgentName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_the_document_alphabet() {
        for name in ["tg-acp", "abc", "A_b-9", "kiro_bot"] {
            assert_eq!(AgentName::parse(name).unwrap().as_str(), name);
        }
    }

    #[test]
    fn refuses_hostile_and_short_names() {
        assert_eq!(AgentName::parse(""), Err(AgentNameError::Empty));
        assert!(matches!(
            AgentName::parse("ab"),
            Err(AgentNameError::TooShort(_))
        ));
        for name in ["tg*", "a.b.c", "../etc", "a/bc", "tg acp", "tgé", "x\ny"] {
            assert!(
                matches!(AgentName::parse(name), Err(AgentNameError::BadCharacter(_))),
                "{name:?}"
            );
        }
        assert!(matches!(
            AgentName::parse("-rf"),
            Err(AgentNameError::LeadingDash(_))
        ));
    }

    #[test]
    fn prefix_is_case_sensitive() {
        let name = AgentName::parse("tg-acp").unwrap();
        assert!(name.owns("tg-acp.json"));
        assert!(name.owns("tg-acp-context.md"));
        assert!(!name.owns("TG-ACP.json"));
        assert!(!name.owns("other.json"));
    }
}
