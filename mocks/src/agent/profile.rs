//! Quirk profiles: named sets of a real agent's quirks that a script, a recording or the command
//! line (`--profile`) switches on, whatever the personality. kiro-cli's quirks are the first.

use serde::Deserialize;

/// A kiro-cli quirk that can be switched on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Quirk {
    /// `session/new` without `mcpServers`: exit 0 without a word.
    ExitOnMissingMcpServers,
    /// `session/load` without `cwd` or `mcpServers`: a parse error on stderr, and no response.
    SilentMalformedLoad,
    /// `session/load` of an unknown session: exit 0 without a response.
    ExitOnUnknownLoad,
    /// A `context_usage` update after the prompt result.
    ContextUsageAfterResult,
}

impl Quirk {
    /// Parses a quirk name as given on the command line.
    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "exit-on-missing-mcp-servers" => Some(Quirk::ExitOnMissingMcpServers),
            "silent-malformed-load" => Some(Quirk::SilentMalformedLoad),
            "exit-on-unknown-load" => Some(Quirk::ExitOnUnknownLoad),
            "context-usage-after-result" => Some(Quirk::ContextUsageAfterResult),
            _ => None,
        }
    }

    /// Every quirk name, for help texts.
    pub const NAMES: &'static [&'static str] = &[
        "exit-on-missing-mcp-servers",
        "silent-malformed-load",
        "exit-on-unknown-load",
        "context-usage-after-result",
    ];
}

/// A named set of quirks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Profile {
    /// The name given to `--profile` or `profiles = [...]`.
    pub name: &'static str,
    /// What it does, for `--help`.
    pub about: &'static str,
    /// The quirks it switches on.
    pub quirks: &'static [Quirk],
    /// Answers (and, in replay, recorded message chunks) are streamed in chunks of at most this
    /// many characters.
    pub chunk_chars: Option<usize>,
}

/// Every profile.
pub const PROFILES: &[Profile] = &[
    Profile {
        name: "kiro-cli",
        about: "everything kiro-cli does below, with answers in 8-character chunks",
        quirks: &[
            Quirk::ExitOnMissingMcpServers,
            Quirk::SilentMalformedLoad,
            Quirk::ExitOnUnknownLoad,
            Quirk::ContextUsageAfterResult,
        ],
        chunk_chars: Some(8),
    },
    Profile {
        name: "exit-on-unknown-load",
        about: "session/load of an unknown session: exit 0 without an answer",
        quirks: &[Quirk::ExitOnUnknownLoad],
        chunk_chars: None,
    },
    Profile {
        name: "exit-on-missing-mcp-servers",
        about: "session/new without mcpServers: exit 0 without a word",
        quirks: &[Quirk::ExitOnMissingMcpServers],
        chunk_chars: None,
    },
    Profile {
        name: "silent-malformed-load",
        about: "session/load without cwd or mcpServers: never answered (kiro personality)",
        quirks: &[Quirk::SilentMalformedLoad],
        chunk_chars: None,
    },
    Profile {
        name: "update-after-result",
        about: "a context_usage session_info_update after each prompt result",
        quirks: &[Quirk::ContextUsageAfterResult],
        chunk_chars: None,
    },
    Profile {
        name: "chunked",
        about: "answers streamed in agent_message_chunks of at most 8 characters",
        quirks: &[],
        chunk_chars: Some(8),
    },
];

/// The profile with this name.
pub fn find(name: &str) -> Option<&'static Profile> {
    PROFILES.iter().find(|p| p.name == name)
}

/// The profile names, for error messages.
pub fn names() -> String {
    PROFILES
        .iter()
        .map(|p| p.name)
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kiro_quirk_is_in_the_kiro_cli_profile_and_has_a_profile_of_its_own() {
        let kiro = find("kiro-cli").expect("the kiro-cli profile");
        for name in Quirk::NAMES {
            let quirk = Quirk::parse(name).expect("a quirk");
            assert!(kiro.quirks.contains(&quirk), "{name}");
            assert!(
                PROFILES.iter().any(|p| p.quirks == [quirk]),
                "{name} has a profile of its own"
            );
        }
    }
}
