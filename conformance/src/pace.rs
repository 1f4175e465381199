//! The concurrency of a run without `-j`: chosen from how its rows spend their time. A row mostly
//! waits (for a target to answer, a process to end, a timer); the runner measures the CPU time
//! the run and the processes it reaped used per second of row time, and runs as many rows at once
//! as keep the cores that busy, never fewer than the cores and at most [`MAX_PER_CORE`] per core.

use std::time::Duration;

use ski::transport::child::procfs;

/// The most rows per core a paced run starts at once: ports, file descriptors and the
/// timing of the rows' own waits bound it, whatever the CPU says.
pub const MAX_PER_CORE: usize = 4;

/// The share of the cores a paced run aims to keep busy; the rest absorbs bursts (a build's
/// start-up) so that no row's wait runs out for lack of CPU.
pub const TARGET_LOAD: f64 = 0.8;

/// Rows finished before the measurement decides (until then: one row per core).
pub const WARM_UP_ROWS: usize = 4;

/// CPU seconds used by this process and the children it reaped (`/proc/self/stat`), if readable.
pub fn cpu_seconds() -> Option<f64> {
    procfs::own().map(|me| me.cpu_seconds())
}

/// How a paced run measures its rows.
#[derive(Debug, Clone)]
pub struct Pace {
    cores: usize,
    cpu_at_start: Option<f64>,
    row_seconds: f64,
    rows: usize,
    jobs: usize,
}

impl Pace {
    /// A run on `cores` cores, starting at one row per core.
    pub fn new(cores: usize) -> Self {
        let cores = cores.max(1);
        Self {
            cores,
            cpu_at_start: cpu_seconds(),
            row_seconds: 0.0,
            rows: 0,
            jobs: cores,
        }
    }

    /// The rows to run at once now.
    pub fn jobs(&self) -> usize {
        self.jobs
    }

    /// Counts one finished row of `took` and answers the rows to run at once from now on.
    pub fn row_finished(&mut self, took: Duration) -> usize {
        self.rows += 1;
        self.row_seconds += took.as_secs_f64();
        if self.rows >= WARM_UP_ROWS
            && let (Some(start), Some(now)) = (self.cpu_at_start, cpu_seconds())
        {
            self.jobs = jobs_for(self.cores, now - start, self.row_seconds);
        }
        self.jobs
    }
}

/// The rows at once that keep `cores` at [`TARGET_LOAD`] when rows used `cpu` CPU seconds in
/// `row_seconds` of their time, between one and [`MAX_PER_CORE`] per core.
pub fn jobs_for(cores: usize, cpu: f64, row_seconds: f64) -> usize {
    let most = cores * MAX_PER_CORE;
    if row_seconds <= 0.0 {
        return cores;
    }
    let busy = cpu / row_seconds;
    if busy <= 0.0 {
        return most;
    }
    let wanted = (cores as f64 * TARGET_LOAD / busy).floor();
    if wanted.is_finite() {
        (wanted as usize).clamp(cores, most)
    } else {
        most
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_that_mostly_wait_run_more_at_once_and_busy_rows_one_per_core() {
        // Rows busy a tenth of their time: 2 cores × 0.8 / 0.1 = 16, capped at 4 per core.
        assert_eq!(jobs_for(2, 1.0, 10.0), 8);
        // A fifth: 2 × 0.8 / 0.2 = 8.
        assert_eq!(jobs_for(2, 2.0, 10.0), 8);
        // Two fifths: 4.
        assert_eq!(jobs_for(2, 4.0, 10.0), 4);
        // Rows that use a core each the whole time: one per core, never fewer.
        assert_eq!(jobs_for(2, 10.0, 10.0), 2);
        assert_eq!(jobs_for(2, 30.0, 10.0), 2);
        assert_eq!(jobs_for(2, 0.0, 0.0), 2);
    }

    #[test]
    fn this_process_has_cpu_time() {
        let before = cpu_seconds().expect("/proc/self/stat is readable");
        let mut x = 0u64;
        for i in 0..20_000_000u64 {
            x = x.wrapping_mul(31).wrapping_add(i);
        }
        assert!(x != 1);
        assert!(cpu_seconds().expect("readable") >= before);
    }
}
