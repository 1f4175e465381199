//! The transcript: an NDJSON file with one record per line read or written, framed by a start
//! record (argv, cwd, environment names, identity) and an exit record (code and reason).
//!
//! Every record has `kind` and `at` (seconds since the agent started, from a monotonic clock).
//! Line records also have `text` (the raw line without its terminator; invalid UTF-8 is replaced
//! and the exact bytes are added as `hex`). Each record is written and flushed at once, so a
//! transcript is complete up to the moment the process died.
//!
//! Environment: every variable name is recorded. Values are recorded only for the names in
//! [`RECORDED_VALUES`]; names that look secret (see [`looks_secret`]) are recorded as
//! `"<redacted>"`; every other value is `null`.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Instant;

use serde_json::{Map, Value, json};

/// The longest text one record keeps; longer lines are cut and carry their full `len`.
pub const MAX_TEXT_BYTES: usize = 1024 * 1024;

/// Environment variables whose values are recorded: the agent's identity, its own
/// configuration, and harmless process context.
pub const RECORDED_VALUES: &[&str] = &[
    "INTERCOM_SESSION_ID",
    "SKI_MOCK_AGENT_SCRIPT",
    "SKI_MOCK_AGENT_TRANSCRIPT",
    "SKI_MOCK_AGENT_CONTROL",
    "SKI_MOCK_AGENT_CONTROL_CONNECT",
    "HOME",
    "PATH",
    "PWD",
    "RUST_LOG",
    "LANG",
    "LC_ALL",
    "TERM",
    "TMPDIR",
    "XDG_RUNTIME_DIR",
    "SHELL",
    "USER",
    "LOGNAME",
    "KIRO_LOG_LEVEL",
    "KIRO_CHAT_LOG_FILE",
];

/// Whether a variable name looks like it holds a secret (a token, key, password, credential,
/// cookie or certificate). Such values are never recorded.
pub fn looks_secret(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    [
        "TOKEN",
        "SECRET",
        "PASSWORD",
        "PASSWD",
        "PASS",
        "KEY",
        "CREDENTIAL",
        "AUTH",
        "COOKIE",
        "PRIVATE",
        "CERT",
        "SESSION_TOKEN",
    ]
    .iter()
    .any(|needle| upper.contains(needle))
}

/// The environment as the start record shows it: every name, selected values.
pub fn environment_record(vars: &[(String, String)]) -> Value {
    let mut map = Map::new();
    let mut sorted: Vec<&(String, String)> = vars.iter().collect();
    sorted.sort_by(|a, b| a.0.cmp(&b.0));
    for (name, value) in sorted {
        let recorded = if looks_secret(name) {
            Value::String("<redacted>".to_owned())
        } else if RECORDED_VALUES.contains(&name.as_str()) {
            Value::String(value.clone())
        } else {
            Value::Null
        };
        map.insert(name.clone(), recorded);
    }
    Value::Object(map)
}

/// Which way a line went, or what a record is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A line read from stdin.
    In,
    /// A line written to stdout.
    Out,
    /// Bytes written to stderr.
    Stderr,
    /// A line read from the control channel.
    ControlIn,
    /// A line written to the control channel.
    ControlOut,
    /// Something the agent did or saw that is not a line (stdin closed, a dropped write).
    Note,
}

impl Kind {
    fn as_str(self) -> &'static str {
        match self {
            Kind::In => "in",
            Kind::Out => "out",
            Kind::Stderr => "stderr",
            Kind::ControlIn => "control_in",
            Kind::ControlOut => "control_out",
            Kind::Note => "note",
        }
    }
}

/// The transcript writer; without a file every call does nothing.
#[derive(Debug)]
pub struct Transcript {
    file: Mutex<Option<BufWriter<File>>>,
    origin: Instant,
    path: Option<PathBuf>,
}

impl Transcript {
    /// A transcript that records nothing.
    pub fn disabled(origin: Instant) -> Self {
        Self {
            file: Mutex::new(None),
            origin,
            path: None,
        }
    }

    /// Creates (or truncates) the transcript file.
    pub fn create(path: &Path, origin: Instant) -> io::Result<Self> {
        let file = File::create(path)?;
        Ok(Self {
            file: Mutex::new(Some(BufWriter::new(file))),
            origin,
            path: Some(path.to_owned()),
        })
    }

    /// The file, if any.
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// Seconds since start.
    pub fn elapsed(&self) -> f64 {
        self.origin.elapsed().as_secs_f64()
    }

    fn write(&self, mut record: Map<String, Value>, kind: &str) {
        let mut guard = self
            .file
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let Some(file) = guard.as_mut() else {
            return;
        };
        let at = (self.elapsed() * 1e6).round() / 1e6;
        record.insert("kind".to_owned(), Value::String(kind.to_owned()));
        record.insert("at".to_owned(), json!(at));
        let mut line = Value::Object(record).to_string();
        line.push('\n');
        // A transcript that cannot be written must not stop the agent; the failure is reported
        // once on stderr and recording stops.
        if file
            .write_all(line.as_bytes())
            .and_then(|()| file.flush())
            .is_err()
        {
            eprintln!("ski-mock-agent: cannot write the transcript; recording stops");
            *guard = None;
        }
    }

    /// The start record.
    pub fn start(&self, fields: Map<String, Value>) {
        self.write(fields, "start");
    }

    /// One line (or chunk of bytes) in a direction; `extra` members are added to the record.
    pub fn line(&self, kind: Kind, bytes: &[u8], extra: Option<Map<String, Value>>) {
        if self.path.is_none() {
            return;
        }
        let mut record = Map::new();
        let (text, clipped) = if bytes.len() > MAX_TEXT_BYTES {
            (&bytes[..MAX_TEXT_BYTES], true)
        } else {
            (bytes, false)
        };
        // A cut in the middle of a character is moved back to the character's start.
        let text = match std::str::from_utf8(text) {
            Err(error) if clipped && error.error_len().is_none() => &text[..error.valid_up_to()],
            _ => text,
        };
        match std::str::from_utf8(text) {
            Ok(text) => {
                record.insert("text".to_owned(), Value::String(text.to_owned()));
            }
            Err(_) => {
                record.insert(
                    "text".to_owned(),
                    Value::String(String::from_utf8_lossy(text).into_owned()),
                );
                record.insert("hex".to_owned(), Value::String(hex(text)));
            }
        }
        if clipped {
            record.insert("len".to_owned(), json!(bytes.len()));
        }
        if let Some(mut extra) = extra {
            record.append(&mut extra);
        }
        self.write(record, kind.as_str());
    }

    /// A note.
    pub fn note(&self, text: &str) {
        self.line(Kind::Note, text.as_bytes(), None);
    }

    /// The exit record.
    pub fn exit(&self, code: i32, reason: &str) {
        let mut record = Map::new();
        record.insert("code".to_owned(), json!(code));
        record.insert("reason".to_owned(), Value::String(reason.to_owned()));
        self.write(record, "exit");
    }
}

fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    let mut out = String::with_capacity(bytes.len() * 2);
    for byte in bytes {
        let _ = write!(out, "{byte:02x}");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_redacted_and_only_listed_values_recorded() {
        let vars = vec![
            ("SLACK_BOT_TOKEN".to_owned(), "xoxb-1".to_owned()),
            ("INTERCOM_SESSION_ID".to_owned(), "abc".to_owned()),
            ("EDITOR".to_owned(), "vi".to_owned()),
            ("AWS_SECRET_ACCESS_KEY".to_owned(), "k".to_owned()),
        ];
        let record = environment_record(&vars);
        assert_eq!(
            record,
            json!({"AWS_SECRET_ACCESS_KEY": "<redacted>", "EDITOR": null,
                   "INTERCOM_SESSION_ID": "abc", "SLACK_BOT_TOKEN": "<redacted>"})
        );
    }

    #[test]
    fn records_carry_kind_time_and_text() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.ndjson");
        let transcript = Transcript::create(&path, Instant::now()).unwrap();
        transcript.line(Kind::In, b"{\"a\":1}", None);
        transcript.line(Kind::Out, &[0xff, b'x'], None);
        transcript.exit(3, "script");
        let text = std::fs::read_to_string(&path).unwrap();
        let records: Vec<Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(records[0]["kind"], "in");
        assert_eq!(records[0]["text"], "{\"a\":1}");
        assert_eq!(records[1]["hex"], "ff78");
        assert_eq!(records[2]["kind"], "exit");
        assert_eq!(records[2]["code"], 3);
        assert!(records[2]["at"].as_f64().unwrap() >= 0.0);
    }
}
