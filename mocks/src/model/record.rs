//! The fake model's request log: every request in arrival order with what it was answered,
//! bounded in bytes (the oldest go first), and a change counter that waits sleep on.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::Duration;

use serde::Serialize;
use serde_json::Value;
use tokio::sync::watch;

use super::FakeModelError;

/// Which API a request spoke.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Api {
    /// OpenAI's `POST /v1/chat/completions`.
    ChatCompletions,
    /// OpenAI's `POST /v1/responses`.
    Responses,
    /// Anthropic's `POST /v1/messages`.
    Messages,
    /// Anthropic's `POST /v1/messages/count_tokens` (answered, no turn taken).
    CountTokens,
    /// `GET /v1/models` and `GET /v1/models/{id}`.
    Models,
    /// Anything else (answered 404).
    Unknown,
}

/// How a request ended, as far as the fake knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// The answer is still being written (a stream, a hang).
    InProgress,
    /// The whole answer was handed to the connection.
    Answered,
    /// The client went away before the answer was whole.
    Cancelled,
}

/// One request as the fake saw it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RecordedRequest {
    /// 1 for the first request, then one more each.
    pub seq: u64,
    pub method: String,
    pub path: String,
    pub api: Api,
    /// The body as JSON; a body that is no JSON is kept as a string.
    pub body: Value,
    /// Whether the request asked for a stream.
    pub stream: bool,
    /// The index of the script turn that answered, `None` when no turn did (an error of the
    /// fake's own, a listing, or the script's end).
    pub turn: Option<usize>,
    /// The HTTP status answered.
    pub status: u16,
    pub outcome: Outcome,
}

struct Entries {
    requests: VecDeque<(RecordedRequest, usize)>,
    bytes: usize,
    dropped: u64,
    next_seq: u64,
}

/// The bounded log.
pub struct RequestLog {
    entries: Mutex<Entries>,
    max_bytes: usize,
    changes: watch::Sender<u64>,
}

impl RequestLog {
    /// A log keeping at most about `max_bytes` of request bodies and paths.
    pub fn new(max_bytes: usize) -> RequestLog {
        RequestLog {
            entries: Mutex::new(Entries {
                requests: VecDeque::new(),
                bytes: 0,
                dropped: 0,
                next_seq: 1,
            }),
            max_bytes,
            changes: watch::channel(0).0,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Entries> {
        self.entries
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Adds `request` (its `seq` is set here, and returned); the oldest requests go while the
    /// log is over its bound, the new one always stays.
    pub fn push(&self, mut request: RecordedRequest, body_bytes: usize) -> u64 {
        let size = body_bytes + request.path.len() + 64;
        let seq = {
            let mut entries = self.lock();
            request.seq = entries.next_seq;
            entries.next_seq += 1;
            let seq = request.seq;
            entries.bytes += size;
            entries.requests.push_back((request, size));
            while entries.bytes > self.max_bytes && entries.requests.len() > 1 {
                if let Some((_, size)) = entries.requests.pop_front() {
                    entries.bytes -= size;
                    entries.dropped += 1;
                }
            }
            seq
        };
        self.changes.send_modify(|count| *count += 1);
        seq
    }

    /// Sets the outcome of request `seq` (if still in the log).
    pub fn set_outcome(&self, seq: u64, outcome: Outcome) {
        {
            let mut entries = self.lock();
            if let Some((request, _)) = entries
                .requests
                .iter_mut()
                .find(|(request, _)| request.seq == seq)
            {
                request.outcome = outcome;
            }
        }
        self.changes.send_modify(|count| *count += 1);
    }

    /// Every request still in the log, oldest first.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.lock()
            .requests
            .iter()
            .map(|(request, _)| request.clone())
            .collect()
    }

    /// How many requests the bound pushed out.
    pub fn dropped(&self) -> u64 {
        self.lock().dropped
    }

    /// Empties the log (sequence numbers go on).
    pub fn clear(&self) {
        let mut entries = self.lock();
        entries.requests.clear();
        entries.bytes = 0;
        entries.dropped = 0;
    }

    /// The first request in the log for which `wanted` holds, waiting for changes up to
    /// `timeout`.
    pub async fn wait_for(
        &self,
        wanted: impl Fn(&RecordedRequest) -> bool,
        timeout: Duration,
    ) -> Result<RecordedRequest, FakeModelError> {
        let mut changes = self.changes.subscribe();
        let search = async {
            loop {
                changes.borrow_and_update();
                if let Some(found) = self
                    .lock()
                    .requests
                    .iter()
                    .find(|(request, _)| wanted(request))
                {
                    return found.0.clone();
                }
                if changes.changed().await.is_err() {
                    // The sender lives as long as `self`: not reached while borrowed.
                    std::future::pending::<()>().await;
                }
            }
        };
        tokio::time::timeout(timeout, search)
            .await
            .map_err(|_| FakeModelError::Timeout(timeout))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(body_len: usize) -> RecordedRequest {
        RecordedRequest {
            seq: 0,
            method: "POST".into(),
            path: "/v1/messages".into(),
            api: Api::Messages,
            body: Value::String("x".repeat(body_len)),
            stream: false,
            turn: None,
            status: 200,
            outcome: Outcome::Answered,
        }
    }

    #[test]
    fn the_oldest_requests_go_when_the_log_is_over_its_bound() {
        let log = RequestLog::new(1000);
        for _ in 0..5 {
            log.push(request(300), 300);
        }
        let seqs: Vec<u64> = log.requests().iter().map(|request| request.seq).collect();
        assert_eq!(seqs, [4, 5]);
        assert_eq!(log.dropped(), 3);
        // One request larger than the bound still stays, alone.
        log.push(request(5000), 5000);
        assert_eq!(log.requests().len(), 1);
        assert_eq!(log.requests()[0].seq, 6);
    }

    #[tokio::test]
    async fn a_wait_wakes_on_an_outcome_change() {
        let log = std::sync::Arc::new(RequestLog::new(1 << 20));
        let seq = log.push(request(1), 1);
        log.set_outcome(seq, Outcome::InProgress);
        let waiter = {
            let log = log.clone();
            tokio::spawn(async move {
                log.wait_for(
                    |request| request.outcome == Outcome::Cancelled,
                    Duration::from_secs(10),
                )
                .await
            })
        };
        log.set_outcome(seq, Outcome::Cancelled);
        assert_eq!(waiter.await.unwrap().unwrap().seq, seq);
        let timeout = log
            .wait_for(|request| request.seq == 99, Duration::from_millis(1))
            .await;
        assert!(matches!(timeout, Err(FakeModelError::Timeout(_))));
    }
}
