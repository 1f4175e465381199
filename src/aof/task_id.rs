//! Task identifiers, `TASK-YYYY-MM-DD-NNN`.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Why a string is not a task id.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("taskId must match TASK-YYYY-MM-DD-NNN pattern, got {0:?}")]
pub struct TaskIdError(pub String);

/// A validated task id such as `TASK-2026-02-09-001`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TaskId(String);

impl TaskId {
    /// Checks `^TASK-\d{4}-\d{2}-\d{2}-\d{3}$`.
    pub fn parse(text: &str) -> Result<Self, TaskIdError> {
        let bytes = text.as_bytes();
        let shape_ok = bytes.len() == 19
            && text.starts_with("TASK-")
            && bytes[9] == b'-'
            && bytes[12] == b'-'
            && bytes[15] == b'-'
            && [5..9, 10..12, 13..15, 16..19]
                .into_iter()
                .all(|range| bytes[range].iter().all(u8::is_ascii_digit));
        if shape_ok {
            Ok(Self(text.to_owned()))
        } else {
            Err(TaskIdError(text.to_owned()))
        }
    }

    /// Builds the id for a date (`YYYY-MM-DD`) and a sequence number of at most 999.
    pub fn from_parts(date: &str, sequence: u32) -> Result<Self, TaskIdError> {
        Self::parse(&format!("TASK-{date}-{sequence:03}"))
    }

    /// The date part, `YYYY-MM-DD`.
    pub fn date_part(&self) -> &str {
        &self.0[5..15]
    }

    /// The sequence number, `NNN`.
    pub fn sequence(&self) -> u32 {
        self.0[16..].parse().unwrap_or(0)
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for TaskId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl Serialize for TaskId {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for TaskId {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        Self::parse(&text).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_the_pattern_only() {
        assert!(TaskId::parse("TASK-2026-02-09-001").is_ok());
        for text in [
            "invalid-format",
            "TASK-2026-02-09-1",
            "TASK-2026-02-09-0001",
            "task-2026-02-09-001",
            "TASK-2026-0a-09-001",
            "TASK-2026-02-09-001 ",
        ] {
            assert!(TaskId::parse(text).is_err(), "{text} must be refused");
        }
        let id = TaskId::parse("TASK-2026-02-09-042").expect("valid");
        assert_eq!((id.date_part(), id.sequence()), ("2026-02-09", 42));
    }
}
