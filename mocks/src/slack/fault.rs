//! Faults injected for the next N calls of a Web API method.

use std::collections::{HashMap, VecDeque};

use serde::{Deserialize, Serialize};

/// What the next calls of a method get instead of (or before) their answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Fault {
    /// HTTP 200 `{"ok":false,"error":error}`.
    Error { error: String },
    /// HTTP 429 with `Retry-After` (seconds; none when `None`) and `{"ok":false,"error":"ratelimited"}`.
    RateLimited { retry_after: Option<u64> },
    /// This HTTP status with `{"ok":false,"error":"fake_http_error"}`.
    Status { status: u16 },
    /// The normal answer, this many milliseconds late.
    Delay { ms: u64 },
}

/// Pending faults per method, used up in order.
#[derive(Debug, Default)]
pub struct Faults {
    pending: HashMap<String, VecDeque<Fault>>,
}

impl Faults {
    pub fn add(&mut self, method: &str, count: usize, fault: Fault) {
        let queue = self.pending.entry(method.to_string()).or_default();
        queue.extend(std::iter::repeat_n(fault, count));
    }

    pub fn take(&mut self, method: &str) -> Option<Fault> {
        self.pending.get_mut(method)?.pop_front()
    }

    pub fn clear(&mut self) {
        self.pending.clear();
    }
}
