//! What the fake observed, in order: every Web API request with its answer, every Socket Mode
//! frame both ways, every ack and every note (late, missing, malformed or duplicate acks), and the
//! optional NDJSON transcript of all of it.

use std::fs::File;
use std::io::Write;
use std::time::Instant;

use serde::Serialize;
use serde_json::{Map, Value, json};

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

/// Everything recorded, plus the transcript file.
#[derive(Debug)]
pub struct Log {
    started: Instant,
    seq: u64,
    pub requests: Vec<RecordedRequest>,
    pub frames: Vec<RecordedFrame>,
    pub notes: Vec<String>,
    transcript: Option<File>,
}

impl Log {
    pub fn new(transcript: Option<File>) -> Log {
        Log {
            started: Instant::now(),
            seq: 0,
            requests: Vec::new(),
            frames: Vec::new(),
            notes: Vec::new(),
            transcript,
        }
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
        let record = RecordedRequest {
            seq,
            at_ms,
            http_method: http_method.to_string(),
            method: method.to_string(),
            params,
            token_kind,
            status,
            response,
        };
        let line = json!({ "kind": "request", "record": record });
        self.write(&line);
        self.requests.push(record);
    }

    pub fn frame(&mut self, connection: u64, direction: Direction, kind: &str, text: String) {
        let (seq, at_ms) = self.next();
        let record = RecordedFrame {
            seq,
            at_ms,
            connection,
            direction,
            kind: kind.to_string(),
            text,
        };
        let line = json!({ "kind": "frame", "record": record });
        self.write(&line);
        self.frames.push(record);
    }

    pub fn note(&mut self, text: String) {
        let (seq, at_ms) = self.next();
        let line = json!({ "kind": "note", "seq": seq, "at_ms": at_ms, "text": text });
        self.write(&line);
        self.notes.push(text);
    }

    /// Forgets everything recorded (the transcript file keeps what it has).
    pub fn clear(&mut self) {
        self.requests.clear();
        self.frames.clear();
        self.notes.clear();
    }
}
