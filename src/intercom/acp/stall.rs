//! The stall detector of one agent: a state machine over instants the caller passes in (the
//! injectable clock), so its timeline is tested without waiting.
//!
//! With threshold T, interval E and `max_retries` R: silence for T sends nudge 1, each further E
//! of silence another nudge up to R, and E after nudge R the operator is told (escalation) and
//! the agent counts as offline. Any activity resets it; a paused detector (the agent waits for
//! the operator) never fires.

use std::time::Duration;

use tokio::time::Instant;

/// What the caller must do when the deadline passed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StallAction {
    /// Write a `nudge` to the agent; this is nudge number `n`.
    Nudge(u32),
    /// Tell the operator after `n` nudges; the agent is offline until it speaks again.
    Escalate(u32),
}

/// What activity ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Recovery {
    /// Nothing was pending.
    None,
    /// The agent answered after `n` nudges.
    Nudged(u32),
    /// The agent was offline (escalated) and is back.
    BackOnline,
}

/// The detector's state.
#[derive(Debug, Clone)]
pub struct StallDetector {
    threshold: Duration,
    interval: Duration,
    max_retries: u32,
    enabled: bool,
    last_activity: Instant,
    nudges: u32,
    escalated: bool,
    paused: bool,
}

impl StallDetector {
    /// A detector that starts counting at `now`.
    pub fn new(
        enabled: bool,
        threshold: Duration,
        interval: Duration,
        max_retries: u32,
        now: Instant,
    ) -> Self {
        StallDetector {
            threshold,
            interval,
            max_retries,
            enabled,
            last_activity: now,
            nudges: 0,
            escalated: false,
            paused: false,
        }
    }

    /// Nudges sent since the last activity.
    pub fn nudges(&self) -> u32 {
        self.nudges
    }

    /// Whether the agent is offline (escalated and silent since).
    pub fn escalated(&self) -> bool {
        self.escalated
    }

    /// Whether the detector is paused.
    pub fn paused(&self) -> bool {
        self.paused
    }

    /// The agent said something at `now`.
    pub fn activity(&mut self, now: Instant) -> Recovery {
        self.last_activity = now;
        let recovery = if self.escalated {
            Recovery::BackOnline
        } else if self.nudges > 0 {
            Recovery::Nudged(self.nudges)
        } else {
            Recovery::None
        };
        self.nudges = 0;
        self.escalated = false;
        recovery
    }

    /// Pauses (the agent waits for the operator) or resumes at `now` (the silence counts from
    /// there).
    pub fn set_paused(&mut self, paused: bool, now: Instant) {
        if self.paused && !paused {
            self.last_activity = now;
        }
        self.paused = paused;
    }

    /// When the detector fires next; `None` while disabled, paused or escalated.
    pub fn deadline(&self) -> Option<Instant> {
        if !self.enabled || self.paused || self.escalated {
            return None;
        }
        Some(self.last_activity + self.threshold + self.interval * self.nudges)
    }

    /// The deadline passed at `now`: answers what to do, or `None` when it has not really
    /// passed (a stale timer).
    pub fn fire(&mut self, now: Instant) -> Option<StallAction> {
        let deadline = self.deadline()?;
        if now < deadline {
            return None;
        }
        if self.nudges < self.max_retries {
            self.nudges += 1;
            Some(StallAction::Nudge(self.nudges))
        } else {
            self.escalated = true;
            Some(StallAction::Escalate(self.nudges))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: Duration = Duration::from_millis(300);
    const E: Duration = Duration::from_millis(100);

    #[test]
    fn silence_nudges_max_retries_times_then_escalates() {
        let start = Instant::now();
        let mut detector = StallDetector::new(true, T, E, 3, start);
        assert_eq!(detector.deadline(), Some(start + T));
        assert_eq!(detector.fire(start + T - E), None);
        assert_eq!(detector.fire(start + T), Some(StallAction::Nudge(1)));
        assert_eq!(detector.deadline(), Some(start + T + E));
        assert_eq!(detector.fire(start + T + E), Some(StallAction::Nudge(2)));
        assert_eq!(
            detector.fire(start + T + E * 2),
            Some(StallAction::Nudge(3))
        );
        assert_eq!(
            detector.fire(start + T + E * 3),
            Some(StallAction::Escalate(3))
        );
        assert_eq!(detector.deadline(), None);
        assert!(detector.escalated());
        assert_eq!(detector.activity(start + T * 5), Recovery::BackOnline);
        assert_eq!(detector.deadline(), Some(start + T * 6));
    }

    #[test]
    fn activity_resets_the_timer_and_the_count() {
        let start = Instant::now();
        let mut detector = StallDetector::new(true, T, E, 3, start);
        assert_eq!(detector.activity(start + E), Recovery::None);
        assert_eq!(detector.fire(start + T), None, "the timer restarted at E");
        assert_eq!(detector.fire(start + T + E), Some(StallAction::Nudge(1)));
        assert_eq!(detector.activity(start + T + E * 2), Recovery::Nudged(1));
        assert_eq!(detector.nudges(), 0);
        assert_eq!(detector.deadline(), Some(start + T * 2 + E * 2));
    }

    #[test]
    fn a_paused_or_disabled_detector_never_fires() {
        let start = Instant::now();
        let mut detector = StallDetector::new(true, T, E, 3, start);
        detector.set_paused(true, start);
        assert_eq!(detector.deadline(), None);
        assert_eq!(detector.fire(start + T * 10), None);
        detector.set_paused(false, start + T * 10);
        assert_eq!(detector.deadline(), Some(start + T * 11));
        let mut off = StallDetector::new(false, T, E, 3, start);
        assert_eq!(off.fire(start + T * 10), None);
    }
}
