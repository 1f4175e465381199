//! Names and keys that become paths: team names, member names and the sanitised session keys of
//! inbox directories. Every check here runs before any filesystem call.

use super::error::{TeamsError, TeamsResult};

/// The team-name rule, as `limits` reports it (E-TEAM-01).
pub const TEAM_NAME_PATTERN: &str = "^[a-z0-9][a-z0-9_-]{0,49}$";
/// The longest sanitised session key an inbox directory may have (E-TEAM-06).
pub const MAX_INBOX_KEY_CHARS: usize = 100;
/// The longest session key accepted at all.
pub const MAX_SESSION_KEY_BYTES: usize = 256;

/// Checks a team name: 1-50 characters of `[a-z0-9_-]`, the first one alphanumeric.
pub fn check_team_name(name: &str) -> TeamsResult<()> {
    let bytes = name.as_bytes();
    let valid = !bytes.is_empty()
        && bytes.len() <= 50
        && (bytes[0].is_ascii_lowercase() || bytes[0].is_ascii_digit())
        && bytes
            .iter()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-' || *b == b'_');
    if valid {
        Ok(())
    } else {
        Err(TeamsError::InvalidTeamName(name.to_owned()))
    }
}

/// Checks a member name: 1-64 characters of `[A-Za-z0-9_-]`, the first one alphanumeric.
pub fn check_member_name(name: &str) -> TeamsResult<()> {
    let bytes = name.as_bytes();
    let valid = !bytes.is_empty()
        && bytes.len() <= 64
        && bytes[0].is_ascii_alphanumeric()
        && bytes
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || *b == b'-' || *b == b'_');
    if valid {
        Ok(())
    } else {
        Err(TeamsError::InvalidMemberName(name.to_owned()))
    }
}

/// The inbox directory name of a session key: every character outside `[A-Za-z0-9_-]` becomes
/// `_`. Refuses an empty key, a key with control characters, and a result longer than 100.
pub fn inbox_key(session_key: &str) -> TeamsResult<String> {
    let refuse = |reason: &str| TeamsError::InvalidSessionKey {
        key: session_key.to_owned(),
        reason: reason.to_owned(),
    };
    if session_key.is_empty() {
        return Err(refuse("it is empty"));
    }
    if session_key.len() > MAX_SESSION_KEY_BYTES {
        return Err(refuse("it is longer than 256 bytes"));
    }
    if session_key.chars().any(char::is_control) {
        return Err(refuse("it contains control characters"));
    }
    let key: String = session_key
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if key.chars().count() > MAX_INBOX_KEY_CHARS {
        return Err(refuse("its sanitised form is longer than 100 characters"));
    }
    Ok(key)
}

/// The agent-id part of a spawned teammate's key: lowercase, `[a-z0-9_-]`, other characters `-`.
pub fn normalise_agent_id(raw: &str) -> String {
    let id: String = raw
        .trim()
        .to_ascii_lowercase()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '-'
            }
        })
        .collect();
    let id = id.trim_matches('-');
    if id.is_empty() {
        "main".to_owned()
    } else {
        id.chars().take(50).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_documents_valid_and_invalid_team_names() {
        for valid in ["alpha-squad", "team_123", "a", &"a".repeat(50)] {
            assert!(check_team_name(valid).is_ok(), "{valid}");
        }
        for invalid in [
            "Alpha Squad",
            "team!",
            "",
            &"a".repeat(51),
            "../../../etc/passwd",
            "..",
            "a/b",
            "a\\b",
            "a\0b",
            "%2e%2e",
            "-rf",
            "_x",
        ] {
            assert!(check_team_name(invalid).is_err(), "{invalid:?}");
        }
    }

    #[test]
    fn session_keys_sanitise_to_safe_directory_names() {
        assert_eq!(
            inbox_key("agent:main:user@example.com").unwrap(),
            "agent_main_user_example_com"
        );
        assert_eq!(inbox_key("../../x").unwrap(), "______x");
        assert_eq!(inbox_key("a\\b/c").unwrap(), "a_b_c");
        assert!(inbox_key("").is_err());
        assert!(inbox_key(&"k".repeat(101)).is_err());
        assert!(inbox_key("a\nb").is_err());
    }
}
