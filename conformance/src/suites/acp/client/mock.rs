//! The other side of a client under test: `ski-mock-agent` started by the client with a script
//! the check writes, its transcript read back as the record of every line both ways, and the
//! run of the client's profile command with its JSON output and exit code.

use std::collections::HashMap;
use std::path::PathBuf;

use serde_json::Value;

use super::super::oracle::{Oracle, Problem, Sender};
use crate::check::{CheckError, Failure};
use crate::context::Ctx;
use crate::target::join_words;
use crate::vocabulary::acp;

/// A mock agent for one client run: the command the client spawns and where its transcript goes.
#[derive(Debug, Clone)]
pub struct Mock {
    /// The mock agent's command line, shell-quoted (`{agent_cmd}`).
    pub cmd: String,
    /// The same command as words.
    pub argv: Vec<String>,
    /// Its transcript file.
    pub transcript: PathBuf,
}

impl Mock {
    /// Writes `script` (TOML) as `<name>.toml` into the temp dir and builds the command that runs
    /// the mock agent with it, plus `extra` arguments (faults).
    pub fn new(ctx: &Ctx, name: &str, script: &str, extra: &[&str]) -> Result<Mock, CheckError> {
        let path = ctx.temp_dir().join(format!("{name}.toml"));
        std::fs::write(&path, script)?;
        let transcript = ctx.temp_dir().join(format!("{name}.transcript.ndjson"));
        let program = match ctx.setting(&acp::MOCK_AGENT)? {
            Some(program) => PathBuf::from(program),
            None => ctx.bin("ski-mock-agent"),
        };
        if !program.exists() {
            return Err(CheckError::Harness(format!(
                "the mock agent {} is missing; build ski-mock-agent or set settings.mock_agent",
                program.display()
            )));
        }
        let mut words = vec![
            program.display().to_string(),
            "--script".to_owned(),
            path.display().to_string(),
            "--transcript".to_owned(),
            transcript.display().to_string(),
        ];
        words.extend(extra.iter().map(|s| (*s).to_owned()));
        Ok(Mock {
            cmd: join_words(&words),
            argv: words,
            transcript,
        })
    }

    /// The transcript as written so far.
    pub fn transcript(&self) -> Result<Transcript, CheckError> {
        Transcript::read(&self.transcript)
    }
}

/// One line of the transcript that was a message.
#[derive(Debug, Clone)]
pub struct Line {
    /// `true` for a line the client sent (transcript `in`), `false` for one the mock sent.
    pub from_client: bool,
    /// The text.
    pub text: String,
    /// The parsed message, if the text was JSON.
    pub value: Option<Value>,
    /// Seconds since the mock started.
    pub at: f64,
}

/// The mock agent's transcript.
#[derive(Debug, Clone, Default)]
pub struct Transcript {
    /// The message lines in order.
    pub lines: Vec<Line>,
    /// The notes, the exit record and stderr, as text.
    pub notes: Vec<String>,
}

impl Transcript {
    /// Reads a transcript file; a missing file is an empty transcript (the client never started
    /// the mock).
    pub fn read(path: &std::path::Path) -> Result<Transcript, CheckError> {
        let text = match std::fs::read_to_string(path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
            Err(e) => return Err(e.into()),
        };
        let mut transcript = Transcript::default();
        for raw in text.lines() {
            let Ok(record) = serde_json::from_str::<Value>(raw) else {
                continue;
            };
            let kind = record.get("kind").and_then(Value::as_str).unwrap_or("");
            let text = record
                .get("text")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned();
            let at = record.get("at").and_then(Value::as_f64).unwrap_or(0.0);
            match kind {
                "in" | "out" => transcript.lines.push(Line {
                    from_client: kind == "in",
                    value: serde_json::from_str(&text).ok(),
                    text,
                    at,
                }),
                "start" => {}
                _ => transcript.notes.push(format!("{kind} {raw}")),
            }
        }
        Ok(transcript)
    }

    /// Whether the mock recorded its exit.
    pub fn exited(&self) -> bool {
        self.notes.iter().any(|n| n.starts_with("exit "))
    }

    /// The messages the client sent.
    pub fn from_client(&self) -> Vec<&Value> {
        self.lines
            .iter()
            .filter(|l| l.from_client)
            .filter_map(|l| l.value.as_ref())
            .collect()
    }

    /// The requests the client sent with `method`.
    pub fn client_requests(&self, method: &str) -> Vec<&Value> {
        self.from_client()
            .into_iter()
            .filter(|v| is_request(v) && method_of(v) == Some(method))
            .collect()
    }

    /// The client's methods (requests and notifications), in order.
    pub fn client_methods(&self) -> Vec<String> {
        self.from_client()
            .into_iter()
            .filter_map(|v| method_of(v).map(str::to_owned))
            .collect()
    }

    /// The client's responses (messages without a method) whose id equals `id` exactly (same
    /// JSON value and type).
    pub fn client_answers(&self, id: &Value) -> Vec<&Value> {
        self.from_client()
            .into_iter()
            .filter(|v| v.get("method").is_none() && v.get("id") == Some(id))
            .collect()
    }

    /// The client's responses to requests of the mock with `method`, in order, each with the
    /// request it answers (by exact id).
    pub fn answers_to(&self, method: &str) -> Vec<(&Value, Option<&Value>)> {
        self.lines
            .iter()
            .filter(|l| !l.from_client)
            .filter_map(|l| l.value.as_ref())
            .filter(|v| is_request(v) && method_of(v) == Some(method))
            .map(|request| {
                let id = request.get("id").unwrap_or(&Value::Null);
                (request, self.client_answers(id).into_iter().next())
            })
            .collect()
    }

    /// Every line, one per row, for an Actual (cut).
    pub fn describe(&self) -> String {
        if self.lines.is_empty() {
            return format!("no lines; notes {:?}", self.notes);
        }
        self.lines
            .iter()
            .map(|l| {
                let arrow = if l.from_client { "client>" } else { "mock>" };
                format!("{arrow} {}", super::super::connection::clip(&l.text, 240))
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// The schema problems of the client's frames (the oracle judging the client side).
    pub fn client_problems(&self) -> Vec<Problem> {
        let mut sent: HashMap<String, String> = HashMap::new();
        let mut oracle = Oracle::new(Sender::Client);
        for line in &self.lines {
            if line.from_client {
                oracle.inspect(&line.text, false, line.value.as_ref(), &sent);
            } else if let Some(value) = &line.value
                && is_request(value)
                && let (Some(id), Some(method)) = (value.get("id"), method_of(value))
            {
                sent.insert(id.to_string(), method.to_owned());
            }
        }
        oracle.problems().to_vec()
    }
}

/// Whether `value` is a request (a method and an id).
pub fn is_request(value: &Value) -> bool {
    value.get("method").is_some() && value.get("id").is_some()
}

/// The method of a message.
pub fn method_of(value: &Value) -> Option<&str> {
    value.get("method").and_then(Value::as_str)
}

/// What a client run left behind.
#[derive(Debug, Clone)]
pub struct ClientRun {
    /// The exit code (`None` for a signal).
    pub code: Option<i32>,
    /// The JSON lines of stdout.
    pub json: Vec<Value>,
    /// Lines of stdout that were not JSON.
    pub other: Vec<String>,
    /// The last lines of stderr.
    pub stderr: Vec<String>,
    /// The mock agent's transcript once the client ended.
    pub transcript: Transcript,
}

impl ClientRun {
    /// The JSON lines whose `type` is `kind`.
    pub fn of_type(&self, kind: &str) -> Vec<&Value> {
        self.json
            .iter()
            .filter(|v| v.get("type").and_then(Value::as_str) == Some(kind))
            .collect()
    }

    /// The stop reasons of the `prompt_result` lines.
    pub fn stop_reasons(&self) -> Vec<String> {
        self.of_type("prompt_result")
            .iter()
            .filter_map(|v| v.get("stopReason").and_then(Value::as_str))
            .map(str::to_owned)
            .collect()
    }

    /// The `payload` of each `session_update` line.
    pub fn updates(&self) -> Vec<&Value> {
        self.of_type("session_update")
            .iter()
            .filter_map(|v| v.get("payload"))
            .collect()
    }

    /// The exit code, stdout and stderr tail, for an Actual.
    pub fn describe(&self) -> String {
        let stdout: Vec<String> = self
            .json
            .iter()
            .map(|v| super::super::connection::clip(&v.to_string(), 240))
            .chain(self.other.iter().cloned())
            .collect();
        format!(
            "exit {:?}; stdout {} line(s): {}; stderr tail: {}",
            self.code,
            stdout.len(),
            stdout.join(" | "),
            self.stderr.join(" | ")
        )
    }

    /// Fails unless the client exited 0 and reported exactly `reasons` as stop reasons.
    pub fn expect_turns(&self, reasons: &[&str], check: &str) -> Result<(), CheckError> {
        if self.code == Some(0) && self.stop_reasons() == reasons {
            return Ok(());
        }
        Err(Failure::new(
            check,
            format!("the client exits 0 and reports the stop reasons {reasons:?}"),
        )
        .actual(format!(
            "{}\ntranscript:\n{}",
            self.describe(),
            self.transcript.describe()
        ))
        .into())
    }
}

/// A client command that was started and is still read.
#[derive(Debug)]
pub struct Running {
    child: ski::transport::child::Child,
    command: String,
    json: Vec<Value>,
    other: Vec<String>,
    stderr: Vec<String>,
    read: usize,
}

impl Running {
    /// Reads output until a stdout JSON line satisfies `pred` (lines already read count too,
    /// from the last match on); `None` once output ended without one.
    pub async fn next_json(&mut self, pred: impl Fn(&Value) -> bool) -> Option<Value> {
        loop {
            while self.read < self.json.len() {
                self.read += 1;
                if pred(&self.json[self.read - 1]) {
                    return Some(self.json[self.read - 1].clone());
                }
            }
            if !self.pump().await {
                return None;
            }
        }
    }

    /// Reads one line of output; `false` once both streams ended.
    async fn pump(&mut self) -> bool {
        let Some((stream, line)) = self.child.next_output_line().await else {
            return false;
        };
        match stream {
            ski::transport::child::OutputStream::Stdout => {
                match serde_json::from_str::<Value>(&line) {
                    Ok(value) => self.json.push(value),
                    Err(_) => self.other.push(line),
                }
            }
            ski::transport::child::OutputStream::Stderr => {
                self.stderr.push(line);
                if self.stderr.len() > 20 {
                    self.stderr.remove(0);
                }
            }
        }
        true
    }

    /// The process id of the client.
    pub fn pid(&self) -> u32 {
        self.child.pid()
    }

    /// Reads the rest of the output, waits for the exit and reads the mock's transcript.
    pub async fn finish(mut self, ctx: &Ctx, mock: &Mock) -> Result<ClientRun, CheckError> {
        let what = format!("the client ({}) to finish and exit", self.command);
        ctx.within(&what, async { while self.pump().await {} })
            .await?;
        let status = ctx.within(&what, self.child.wait()).await?;
        let status = status.map_err(|e| CheckError::Harness(e.to_string()))?;
        let transcript = mock.transcript()?;
        Ok(ClientRun {
            code: status.code(),
            json: self.json,
            other: self.other,
            stderr: self.stderr,
            transcript,
        })
    }
}

/// Starts the profile's client command `command` against `mock` (as `{agent_cmd}`), with
/// `extra` placeholders.
pub fn start_client(
    ctx: &Ctx,
    command: &str,
    mock: &Mock,
    extra: &[(&str, &str)],
) -> Result<Running, CheckError> {
    let mut vars: Vec<(&str, &str)> = vec![("agent_cmd", mock.cmd.as_str())];
    vars.extend_from_slice(extra);
    let spec = ctx.command(command, &vars)?;
    let child = ctx.spawn(spec)?;
    Ok(Running {
        child,
        command: command.to_owned(),
        json: Vec::new(),
        other: Vec::new(),
        stderr: Vec::new(),
        read: 0,
    })
}

/// Runs the profile's client command `command` against `mock` until it exits; then reads the
/// mock's transcript.
pub async fn run_client(
    ctx: &Ctx,
    command: &str,
    mock: &Mock,
    extra: &[(&str, &str)],
) -> Result<ClientRun, CheckError> {
    start_client(ctx, command, mock, extra)?
        .finish(ctx, mock)
        .await
}

/// A TOML string literal of `text`.
pub fn toml_str(text: &str) -> String {
    toml::Value::String(text.to_owned()).to_string()
}

/// A `raw` step that sends `update` (JSON) as a `session/update` of the current session.
pub fn raw_update(update: &Value) -> String {
    let line = serde_json::json!({
        "jsonrpc": "2.0",
        "method": "session/update",
        "params": {"sessionId": "__SESSION__", "update": update},
    })
    .to_string()
    .replace("__SESSION__", "${session}");
    format!("{{ raw = {} }}", toml_str(&line))
}

/// A turn rule for a mock script: on any prompt run `steps` (TOML inline tables, one per item).
pub fn on_prompt(steps: &[&str]) -> String {
    format!(
        "[[on]]\nprompt = \"*\"\ndo = [\n  {},\n]\n",
        steps.join(",\n  ")
    )
}

/// The permission request step with `id` (a TOML value) for the current session.
pub fn permission_step(id: &str) -> String {
    format!(
        "{{ request = \"session/request_permission\", id = {id}, params = {{ sessionId = \"${{session}}\", \
         toolCall = {{ toolCallId = \"call-1\", title = \"Run the tool\" }}, options = [\
         {{ optionId = \"opt-allow\", name = \"Allow\", kind = \"allow_once\" }}, \
         {{ optionId = \"opt-always\", name = \"Always\", kind = \"allow_always\" }}, \
         {{ optionId = \"opt-reject\", name = \"Reject\", kind = \"reject_once\" }}] }} }}"
    )
}

/// The step that ends the turn with `reason`.
pub fn end_turn_step(reason: &str) -> String {
    format!("{{ respond = {{ stopReason = \"{reason}\" }} }}")
}

/// Writes the driver script `steps` into the temp dir and runs the profile's `client_drive`
/// command with it (`{script}`) against `mock`.
pub async fn run_drive(ctx: &Ctx, mock: &Mock, steps: &Value) -> Result<ClientRun, CheckError> {
    let path = start_drive_script(ctx, steps)?;
    run_client(ctx, "client_drive", mock, &[("script", &path)]).await
}

/// Writes the driver script `steps` into the temp dir; its path.
pub fn start_drive_script(ctx: &Ctx, steps: &Value) -> Result<String, CheckError> {
    let path = ctx.temp_dir().join("drive.json");
    std::fs::write(&path, serde_json::to_string_pretty(steps)?)?;
    Ok(path.display().to_string())
}

impl ClientRun {
    /// The driver's `outcome` lines of script step `step`.
    pub fn outcomes(&self, step: usize) -> Vec<&Value> {
        self.of_type("outcome")
            .into_iter()
            .filter(|v| v.get("step").and_then(Value::as_u64) == Some(step as u64))
            .collect()
    }

    /// The names of the outcomes of step `step`.
    pub fn outcome_names(&self, step: usize) -> Vec<String> {
        self.outcomes(step)
            .iter()
            .filter_map(|v| v.get("outcome").and_then(Value::as_str))
            .map(str::to_owned)
            .collect()
    }

    /// The driver's summary line.
    pub fn summary(&self) -> Option<&Value> {
        self.of_type("summary").into_iter().last()
    }

    /// Fails unless the summary reports `pending` and `timeouts` 0.
    pub fn expect_clear(&self, check: &str) -> Result<(), CheckError> {
        let summary = self.summary();
        let counters = summary.map(|s| (s.get("pending").cloned(), s.get("timeouts").cloned()));
        if counters == Some((Some(Value::from(0)), Some(Value::from(0)))) {
            return Ok(());
        }
        Err(
            Failure::new(check, "a summary with pending 0 and timeouts 0")
                .actual(format!("summary {summary:?}; {}", self.describe()))
                .into(),
        )
    }
}
