//! Optional rate limits in Slack's tiers (off unless `[rate_limits] enabled`): each method may be
//! called so many times per window (a minute by default); one call more answers 429
//! `ratelimited` with `Retry-After` in seconds until the window ends.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use super::config::RateLimitConfig;

/// Calls per window of a tier: Slack's Tier 1 to 4 per minute; tier 0 (special, such as
/// `chat.postMessage`'s one per second per channel) as 60 per minute per method.
fn allowance(tier: u8) -> u32 {
    match tier {
        1 => 1,
        2 => 20,
        3 => 50,
        4 => 100,
        _ => 60,
    }
}

#[derive(Debug)]
struct Window {
    started: Instant,
    calls: u32,
}

#[derive(Debug, Default)]
pub struct RateLimits {
    windows: HashMap<String, Window>,
}

impl RateLimits {
    /// Counts a call of `method` (of `tier`); `Some(seconds)` when it is over its allowance.
    pub fn check(&mut self, config: &RateLimitConfig, method: &str, tier: u8) -> Option<u64> {
        if !config.enabled {
            return None;
        }
        let length = Duration::from_millis(config.window_ms.max(1));
        let now = Instant::now();
        let window = self.windows.entry(method.to_string()).or_insert(Window {
            started: now,
            calls: 0,
        });
        if now.duration_since(window.started) >= length {
            *window = Window {
                started: now,
                calls: 0,
            };
        }
        if window.calls < allowance(tier) {
            window.calls += 1;
            return None;
        }
        let left = length.saturating_sub(now.duration_since(window.started));
        Some(left.as_secs_f64().ceil().max(1.0) as u64)
    }
}
