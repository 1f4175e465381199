//! What the fake observed, in order: every Web API request with its answer, every Socket Mode
//! frame both ways, every POST of the Events API over HTTP, every ack and every note (late,
//! missing, malformed or duplicate acks), and the optional NDJSON transcript of all of it. Bounded
//! by the retention settings, in bytes and in count: a record larger than `max_record_bytes` (as
//! JSON text) is shrunk, and beyond the limits (the memory the records hold, and their count) the
//! oldest records are forgotten (the transcript keeps
//! everything, and per-method request counts stay exact).

mod budget;

use std::collections::HashMap;
use std::fs::File;
use std::io::Write;
use std::mem::size_of;
use std::time::Instant;

use serde::Serialize;
use serde_json::{Map, Value, json};

pub use budget::Bounded;
use budget::{map_memory, shrink, shrink_text, text_memory, value_memory};

use super::config::RetentionConfig;
use super::params::TokenKind;

/// One Web API request as the fake saw it.
#[derive(Debug, Clone, Serialize)]
pub struct RecordedRequest {
    pub seq: u64,
    /// Milliseconds since the fake started.
    pub at_ms: u64,
    pub http_method: String,
    pub method: String,
    pub params: Map<String, Value>,
    pub token_kind: TokenKind,
    pub status: u16,
    pub response: Value,
}

/// Which way a frame went.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    /// From the fake to the client.
    Out,
    /// From the client to the fake.
    In,
}

/// One Socket Mode frame.
#[derive(Debug, Clone, Serialize)]
pub struct RecordedFrame {
    pub seq: u64,
    pub at_ms: u64,
    pub connection: u64,
    pub direction: Direction,
    /// `text`, `ping`, `pong` or `close`.
    pub kind: String,
    /// The text of a text frame, the payload of a ping or pong.
    pub text: String,
}

impl RecordedFrame {
    /// The frame's JSON, for a text frame that holds JSON.
    pub fn json(&self) -> Option<Value> {
        (self.kind == "text")
            .then(|| serde_json::from_str(&self.text).ok())
            .flatten()
    }
}

/// One POST of the Events API over HTTP to the app's Request URL.
#[derive(Debug, Clone, Serialize)]
pub struct RecordedDelivery {
    pub seq: u64,
    pub at_ms: u64,
    /// The envelope id the delivery stands for (`None` for `url_verification`).
    pub envelope_id: Option<String>,
    /// `events_api`, `slash_commands`, `interactive` or `url_verification`.
    pub kind: String,
    pub url: String,
    pub content_type: String,
    /// The body as sent.
    pub body: String,
    /// `X-Slack-Retry-Num`: 0 for the first try.
    pub retry_num: u32,
    /// `X-Slack-Retry-Reason` sent with a retry.
    pub retry_reason: Option<String>,
    /// The app's HTTP status, when it answered in time.
    pub status: Option<u16>,
    /// The app's answer (its first 64 KiB), when it answered in time.
    pub response: Option<String>,
    /// Why the try failed: `http_timeout`, `http_error`, `connection_failed` or `unknown_error`.
    pub failure: Option<String>,
    /// What the fake did next, as Slack would.
    pub then: AfterTry,
}

/// What follows one try of a delivery: Slack retries only a failed event, and not when the app
/// answered `X-Slack-No-Retry: 1`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AfterTry {
    /// A 2xx answer: the delivery is done.
    Answered,
    /// A failed event with retries left: it is sent again.
    Retry,
    /// A failed event whose answer carried `X-Slack-No-Retry: 1`: not sent again.
    NoRetryAsked,
    /// A failed slash command, interaction or challenge: Slack shows the user an error and does
    /// not send it again.
    NotRetried,
    /// A failed event after its last retry.
    GivenUp,
}

/// Everything recorded, plus the transcript file.
#[derive(Debug)]
pub struct Log {
    started: Instant,
    seq: u64,
    pub requests: Bounded<RecordedRequest>,
    pub frames: Bounded<RecordedFrame>,
    pub notes: Bounded<String>,
    pub deliveries: Bounded<RecordedDelivery>,
    /// Requests seen per method, forgotten ones included.
    counts: HashMap<String, usize>,
    retention: RetentionConfig,
    transcript: Option<File>,
}

/// What a record costs besides its variable parts (its fixed fields, its place in the list).
const RECORD_OVERHEAD: usize = 128;

impl Log {
    pub fn new(transcript: Option<File>, retention: RetentionConfig) -> Log {
        Log {
            started: Instant::now(),
            seq: 0,
            requests: Bounded::default(),
            frames: Bounded::default(),
            notes: Bounded::default(),
            deliveries: Bounded::default(),
            counts: HashMap::new(),
            retention,
            transcript,
        }
    }

    /// How many requests of `method` were seen since the start (or the last reset).
    pub fn count(&self, method: &str) -> usize {
        self.counts.get(method).copied().unwrap_or(0)
    }

    pub fn now_ms(&self) -> u64 {
        u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    fn next(&mut self) -> (u64, u64) {
        self.seq += 1;
        (self.seq, self.now_ms())
    }

    fn write(&mut self, line: &Value) {
        if let Some(file) = self.transcript.as_mut() {
            let _ = writeln!(file, "{line}");
            let _ = file.flush();
        }
    }

    pub fn request(
        &mut self,
        http_method: &str,
        method: &str,
        params: Map<String, Value>,
        token_kind: TokenKind,
        status: u16,
        response: Value,
    ) {
        let (seq, at_ms) = self.next();
        let mut record = RecordedRequest {
            seq,
            at_ms,
            http_method: http_method.to_string(),
            method: method.to_string(),
            params,
            token_kind,
            status,
            response,
        };
        if self.transcript.is_some() {
            self.write(&json!({ "kind": "request", "record": record }));
        }
        *self.counts.entry(record.method.clone()).or_default() += 1;
        // Half of a record's budget each for the parameters and the answer.
        let half = self.retention.max_record_bytes / 2;
        let params = std::mem::take(&mut record.params);
        record.params = match shrink(Value::Object(params), half) {
            Value::Object(params) => params,
            _ => Map::new(),
        };
        record.response = shrink(std::mem::take(&mut record.response), half);
        let size = size_of::<RecordedRequest>()
            + size_of::<usize>()
            + text_memory(&record.http_method)
            + text_memory(&record.method)
            + value_memory(&record.response)
            + map_memory(&record.params);
        self.requests.push(
            record,
            size,
            self.retention.max_requests,
            self.retention.max_log_bytes,
        );
    }

    pub fn frame(&mut self, connection: u64, direction: Direction, kind: &str, text: String) {
        let (seq, at_ms) = self.next();
        let mut record = RecordedFrame {
            seq,
            at_ms,
            connection,
            direction,
            kind: kind.to_string(),
            text,
        };
        if self.transcript.is_some() {
            self.write(&json!({ "kind": "frame", "record": record }));
        }
        record.text = shrink_text(
            std::mem::take(&mut record.text),
            self.retention.max_record_bytes,
        );
        let size = RECORD_OVERHEAD + record.text.len();
        self.frames.push(
            record,
            size,
            self.retention.max_frames,
            self.retention.max_log_bytes,
        );
    }

    pub fn note(&mut self, text: String) {
        let (seq, at_ms) = self.next();
        let line = json!({ "kind": "note", "seq": seq, "at_ms": at_ms, "text": text });
        self.write(&line);
        let text = shrink_text(text, self.retention.max_record_bytes);
        let size = RECORD_OVERHEAD + text.len();
        self.notes.push(
            text,
            size,
            self.retention.max_frames,
            self.retention.max_log_bytes,
        );
    }

    /// Records an Events API POST (`seq` and `at_ms` are set here).
    pub fn delivery(&mut self, mut record: RecordedDelivery) {
        (record.seq, record.at_ms) = self.next();
        if self.transcript.is_some() {
            self.write(&json!({ "kind": "delivery", "record": record }));
        }
        record.body = shrink_text(
            std::mem::take(&mut record.body),
            self.retention.max_record_bytes,
        );
        let size = RECORD_OVERHEAD
            + record.url.len()
            + record.body.len()
            + record.response.as_ref().map_or(0, String::len);
        self.deliveries.push(
            record,
            size,
            self.retention.max_frames,
            self.retention.max_log_bytes,
        );
    }

    /// Forgets everything recorded (the transcript file keeps what it has).
    pub fn clear(&mut self) {
        self.requests.clear();
        self.counts.clear();
        self.frames.clear();
        self.notes.clear();
        self.deliveries.clear();
    }
}
