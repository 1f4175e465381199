//! The rate limit of warnings about what an agent writes (malformed lines, missing fields,
//! oversize lines): per kind, the first [`BURST`] of each [`INTERVAL`] are logged whole, the rest
//! only counted, and the count is reported in one summary line when the next interval begins or
//! the agent's run ends. A flood of junk lines costs a bounded log. A state machine over instants
//! the caller passes in (the injectable clock), like the stall detector.

use std::collections::HashMap;
use std::time::Duration;

use tokio::time::Instant;

/// Warnings of one kind logged whole per interval.
pub const BURST: u32 = 10;
/// The length of an interval.
pub const INTERVAL: Duration = Duration::from_secs(60);

/// What to do with one warning.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Verdict {
    /// Log this warning whole.
    pub log: bool,
    /// Before it, report this many suppressed warnings of its kind from the interval that ended.
    pub report_suppressed: u64,
}

#[derive(Debug, Clone)]
struct Window {
    started: Instant,
    logged: u32,
    suppressed: u64,
}

/// The limiter of one agent run.
#[derive(Debug, Clone)]
pub struct WarningLimiter {
    burst: u32,
    interval: Duration,
    windows: HashMap<&'static str, Window>,
}

impl Default for WarningLimiter {
    fn default() -> Self {
        WarningLimiter::new(BURST, INTERVAL)
    }
}

impl WarningLimiter {
    /// A limiter logging `burst` warnings of a kind per `interval`.
    pub fn new(burst: u32, interval: Duration) -> Self {
        WarningLimiter {
            burst,
            interval,
            windows: HashMap::new(),
        }
    }

    /// A warning of `kind` happened at `now`: whether to log it, and what to report first.
    pub fn check(&mut self, kind: &'static str, now: Instant) -> Verdict {
        let window = self.windows.entry(kind).or_insert(Window {
            started: now,
            logged: 0,
            suppressed: 0,
        });
        let mut report_suppressed = 0;
        if now.saturating_duration_since(window.started) >= self.interval {
            report_suppressed = std::mem::take(&mut window.suppressed);
            window.started = now;
            window.logged = 0;
        }
        let log = window.logged < self.burst;
        if log {
            window.logged += 1;
        } else {
            window.suppressed += 1;
        }
        Verdict {
            log,
            report_suppressed,
        }
    }

    /// The counts not reported yet, by kind (sorted), and a fresh start.
    pub fn drain(&mut self) -> Vec<(&'static str, u64)> {
        let mut pending: Vec<(&'static str, u64)> = self
            .windows
            .drain()
            .filter(|(_, window)| window.suppressed > 0)
            .map(|(kind, window)| (kind, window.suppressed))
            .collect();
        pending.sort_unstable();
        pending
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn logged(verdicts: &[Verdict]) -> usize {
        verdicts.iter().filter(|v| v.log).count()
    }

    #[test]
    fn a_burst_per_kind_and_interval_then_one_report_of_the_rest() {
        let start = Instant::now();
        let mut limiter = WarningLimiter::new(3, Duration::from_secs(60));
        let first: Vec<Verdict> = (0..100)
            .map(|i| limiter.check("malformed", start + Duration::from_millis(i)))
            .collect();
        assert_eq!(logged(&first), 3);
        assert!(first.iter().all(|v| v.report_suppressed == 0));
        // Another kind has its own burst.
        assert!(limiter.check("missing_field", start).log);
        // The next interval reports the 97 suppressed ones once, and logs a new burst.
        let later = start + Duration::from_secs(60);
        let next = limiter.check("malformed", later);
        assert_eq!(
            next,
            Verdict {
                log: true,
                report_suppressed: 97
            }
        );
        assert_eq!(limiter.check("malformed", later).report_suppressed, 0);
        for _ in 0..5 {
            limiter.check("malformed", later);
        }
        // What the last interval suppressed is handed over at the end, and only once.
        assert_eq!(limiter.drain(), vec![("malformed", 4)]);
        assert!(limiter.drain().is_empty());
    }

    #[test]
    fn a_clock_going_backwards_starts_no_new_interval() {
        let start = Instant::now() + Duration::from_secs(10);
        let mut limiter = WarningLimiter::new(1, Duration::from_secs(60));
        assert!(limiter.check("k", start).log);
        assert!(!limiter.check("k", start - Duration::from_secs(5)).log);
        assert_eq!(limiter.drain(), vec![("k", 1)]);
    }
}
