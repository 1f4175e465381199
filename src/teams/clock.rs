//! The time every write records (`createdAt`, `claimedAt`, `completedAt`, message `timestamp`):
//! the system clock, or a fixed instant from `--now-ms` or `SKI_TEAMS_NOW_MS`.

use std::time::{SystemTime, UNIX_EPOCH};

/// Tells the current time in epoch milliseconds.
#[derive(Debug, Clone, Copy, Default)]
pub struct Clock {
    fixed_ms: Option<i64>,
}

impl Clock {
    /// The system clock.
    pub fn system() -> Self {
        Self { fixed_ms: None }
    }

    /// A clock that always tells `ms`.
    pub fn fixed(ms: i64) -> Self {
        Self { fixed_ms: Some(ms) }
    }

    /// Now, in epoch milliseconds.
    pub fn now_ms(&self) -> i64 {
        self.fixed_ms.unwrap_or_else(|| {
            SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
                .unwrap_or(0)
        })
    }
}
