//! Set-up steps and the time they are given: a row's budget grows by one allowance for each step
//! it takes before it can judge anything (starting the target until it is ready, `initialize`,
//! `session/new`), and a run whose target has answered no set-up step at all gives the next ones
//! only a short wait, so that a target that answers nothing fails every row quickly. A step of a
//! named kind (the intercom target's Socket Mode connection, its exit at start-up) is short too
//! once the run has seen that kind run out and never done.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How long one set-up step may take (scaled by the run's timeouts): a target that has answered
/// nothing by then fails the row at this deadline, not at the row's.
pub const SETUP_ALLOWANCE: Duration = Duration::from_secs(10);

/// How long a set-up step may take (scaled) once the run has seen set-up steps run out and none
/// answered: the target has shown that it answers nothing.
pub const SILENT_ALLOWANCE: Duration = Duration::from_secs(1);

/// What a run has seen of its target's set-up steps, shared by every row of the run, and how
/// much its measured start-up scales each step's allowance.
#[derive(Debug, Clone)]
pub struct SetupGauge {
    counts: Arc<Counts>,
    startup_scale: f64,
}

impl Default for SetupGauge {
    fn default() -> Self {
        Self {
            counts: Arc::default(),
            startup_scale: 1.0,
        }
    }
}

#[derive(Debug, Default)]
struct Counts {
    answered: AtomicUsize,
    ran_out: AtomicUsize,
    refused: AtomicUsize,
    /// Per kind of step a row names ([`SetupGauge::record_of`]): answered, ran out.
    kinds: Mutex<HashMap<String, (usize, usize)>>,
}

impl SetupGauge {
    /// A gauge that has seen nothing yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// A gauge whose allowances grow by `scale`: how much slower than a quick agent the run
    /// measured its target's start-up (once, before the first row). Values that are not finite
    /// and at least 1 mean 1.
    pub fn with_startup_scale(mut self, scale: f64) -> Self {
        self.startup_scale = if scale.is_finite() && scale >= 1.0 {
            scale
        } else {
            1.0
        };
        self
    }

    /// Whether the target has answered no set-up step of the run while at least one ran out:
    /// it answers nothing, and neither a longer wait nor a second attempt would change that.
    pub fn silent(&self) -> bool {
        self.counts.answered.load(Ordering::Relaxed) == 0
            && self.counts.ran_out.load(Ordering::Relaxed) > 0
    }

    /// Records how a set-up step ended: the target did something in time (answered, even with
    /// an error, or exited), or the step ran out its allowance.
    pub fn record(&self, answered: bool) {
        let counter = if answered {
            &self.counts.answered
        } else {
            &self.counts.ran_out
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// Records how a set-up step of one kind ended (for example the target opening its Socket
    /// Mode connection), besides [`SetupGauge::record`].
    pub fn record_of(&self, kind: &str, answered: bool) {
        self.record(answered);
        let mut kinds = self
            .counts
            .kinds
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let (yes, no) = kinds.entry(kind.to_owned()).or_default();
        if answered {
            *yes += 1;
        } else {
            *no += 1;
        }
    }

    /// Whether the target has done no set-up step of `kind` in this run while at least one ran
    /// out: a target that answers other steps but never this one.
    pub fn silent_of(&self, kind: &str) -> bool {
        let kinds = self
            .counts
            .kinds
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        kinds
            .get(kind)
            .is_some_and(|(answered, ran_out)| *answered == 0 && *ran_out > 0)
    }

    /// The allowance of the next set-up step of `kind`: [`SILENT_ALLOWANCE`] once the target
    /// has shown it answers nothing, or never does this kind of step, else
    /// [`SetupGauge::allowance`].
    pub fn allowance_of(&self, kind: &str) -> Duration {
        if self.silent_of(kind) {
            SILENT_ALLOWANCE
        } else {
            self.allowance()
        }
    }

    /// Records that the target, ready, refused a request any working build answers (its MCP
    /// endpoint answered HTTP 5xx or dropped the connection): the row failed at that refusal.
    pub fn record_refusal(&self) {
        self.counts.refused.fetch_add(1, Ordering::Relaxed);
    }

    /// Whether the target refused a request in this run ([`SetupGauge::record_refusal`]): its
    /// failures are the target's answer, and a solo re-run would meet the same refusal.
    pub fn refused(&self) -> bool {
        self.counts.refused.load(Ordering::Relaxed) > 0
    }

    /// The allowance of the next set-up step before the run's `--timeout-multiplier`:
    /// [`SILENT_ALLOWANCE`] once the target has shown it answers nothing, else
    /// [`SETUP_ALLOWANCE`] times the start-up scale.
    pub fn allowance(&self) -> Duration {
        if self.silent() {
            SILENT_ALLOWANCE
        } else {
            SETUP_ALLOWANCE.mul_f64(self.startup_scale)
        }
    }
}

/// What a row's set-up steps added to its budget.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Granted {
    /// How many set-up steps the row took.
    pub steps: usize,
    /// The time they added to the row's budget (scaled).
    pub time: Duration,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_target_is_silent_only_while_it_has_answered_nothing() {
        let gauge = SetupGauge::new();
        assert!(!gauge.silent());
        assert_eq!(gauge.allowance(), SETUP_ALLOWANCE);
        gauge.record(false);
        assert!(gauge.silent());
        assert_eq!(gauge.clone().allowance(), SILENT_ALLOWANCE);
        gauge.record(true);
        assert!(!gauge.silent());
        assert_eq!(gauge.allowance(), SETUP_ALLOWANCE);
    }

    #[test]
    fn a_target_that_never_does_one_kind_of_step_gets_the_short_wait_for_it() {
        let gauge = SetupGauge::new();
        gauge.record(true);
        assert_eq!(gauge.allowance_of("socket"), SETUP_ALLOWANCE);
        gauge.record_of("socket", false);
        assert!(!gauge.silent());
        assert_eq!(gauge.allowance_of("socket"), SILENT_ALLOWANCE);
        assert_eq!(gauge.allowance_of("other"), SETUP_ALLOWANCE);
        gauge.record_of("socket", true);
        assert_eq!(gauge.allowance_of("socket"), SETUP_ALLOWANCE);
    }

    #[test]
    fn a_slow_start_grows_the_allowance_not_the_short_one() {
        let gauge = SetupGauge::new().with_startup_scale(2.5);
        assert_eq!(gauge.allowance(), SETUP_ALLOWANCE.mul_f64(2.5));
        gauge.record(false);
        assert_eq!(gauge.allowance(), SILENT_ALLOWANCE);
        assert_eq!(
            SetupGauge::new().with_startup_scale(f64::NAN).allowance(),
            SETUP_ALLOWANCE
        );
    }
}
