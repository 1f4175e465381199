//! The table of outgoing requests waiting for their response.
//!
//! Every way a request can end (its response, a timeout, the connection closing, the caller
//! giving up) goes through one removal under one lock, so exactly one of them wins.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use serde_json::Value;
use tokio::sync::oneshot;
use tokio::time::Instant;

use super::CallError;
use crate::jsonrpc::id::RequestId;

/// What the read loop hands to a waiting caller: the outcome, and how many notifications had
/// arrived before the response (so the caller can wait until those were handled).
pub(crate) struct Delivery {
    pub(crate) outcome: Result<Value, CallError>,
    pub(crate) notifications_before: u64,
}

/// The deadline of a pending request, with what its timeout error reports.
pub(crate) struct Deadline {
    pub(crate) at: Instant,
    pub(crate) timeout: Duration,
    pub(crate) method: String,
}

struct Entry {
    deadline: Option<Deadline>,
    tx: oneshot::Sender<Delivery>,
}

impl Entry {
    /// Hands over the outcome, unless the deadline has already passed: then the timeout came
    /// first, whoever gets to the table first, and the caller sees the timeout.
    fn finish(self, delivery: Delivery) {
        let delivery = match self.deadline {
            Some(deadline) if Instant::now() >= deadline.at => Delivery {
                outcome: Err(CallError::Timeout {
                    method: deadline.method,
                    timeout: deadline.timeout,
                }),
                notifications_before: 0,
            },
            _ => delivery,
        };
        // The caller may have given up already; nothing to do then.
        let _ = self.tx.send(delivery);
    }
}

#[derive(Default)]
struct Inner {
    entries: HashMap<RequestId, Entry>,
    closed: bool,
}

#[derive(Default)]
pub(crate) struct PendingTable {
    inner: Mutex<Inner>,
}

impl PendingTable {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Registers a request; fails with `NotConnected` once the table was closed.
    pub(crate) fn insert(
        &self,
        id: RequestId,
        deadline: Option<Deadline>,
    ) -> Result<oneshot::Receiver<Delivery>, CallError> {
        let (tx, rx) = oneshot::channel();
        let mut inner = self.lock();
        if inner.closed {
            return Err(CallError::NotConnected);
        }
        inner.entries.insert(id, Entry { deadline, tx });
        Ok(rx)
    }

    /// Completes the request with this id; `false` if no such request is pending.
    pub(crate) fn complete(&self, id: &RequestId, delivery: Delivery) -> bool {
        let entry = self.lock().entries.remove(id);
        match entry {
            Some(entry) => {
                entry.finish(delivery);
                true
            }
            None => false,
        }
    }

    /// Removes the request without completing it; `true` if it was still pending.
    pub(crate) fn remove(&self, id: &RequestId) -> bool {
        self.lock().entries.remove(id).is_some()
    }

    /// Removes the request if it is still pending and returns its deadline's timeout error.
    pub(crate) fn expire(&self, id: &RequestId) -> Option<CallError> {
        let entry = self.lock().entries.remove(id)?;
        let deadline = entry.deadline?;
        Some(CallError::Timeout {
            method: deadline.method,
            timeout: deadline.timeout,
        })
    }

    /// Fails every pending request with `error()` and refuses new ones from now on.
    pub(crate) fn close(&self, error: impl Fn() -> CallError) {
        let entries: Vec<Entry> = {
            let mut inner = self.lock();
            inner.closed = true;
            inner.entries.drain().map(|(_, entry)| entry).collect()
        };
        for entry in entries {
            entry.finish(Delivery {
                outcome: Err(error()),
                notifications_before: 0,
            });
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.lock().entries.len()
    }

    /// How many pending requests have a deadline armed.
    pub(crate) fn armed_timeouts(&self) -> usize {
        self.lock()
            .entries
            .values()
            .filter(|entry| entry.deadline.is_some())
            .count()
    }
}
