//! `ski-mock-agent record`: sits between a client (this process's stdio) and a real agent (a
//! child), passes every line through unchanged as it comes, and writes what it saw as a
//! replayable recording ([`super::recording`]) with its secrets redacted ([`redact`]).

pub mod redact;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::anyhow;
use serde_json::Value;
use ski::exit::CommandError;
use ski::jsonrpc::{FrameError, LineReader};
use ski::transport::child::{ChildSpec, OutputStream, spawn};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};

use super::recording::{AgentLineSpec, ExchangeSpec, RecordingFile, RecordingSpec};
use redact::{Extra, Redactor};

/// The longest client line passed through.
pub const MAX_LINE_BYTES: usize = ski::jsonrpc::DEFAULT_MAX_LINE_BYTES;

/// What to record and how.
#[derive(Debug, Clone, Default)]
pub struct RecordOptions {
    /// Where the recording goes.
    pub out: PathBuf,
    /// The agent's command line, program first.
    pub command: Vec<String>,
    /// Labels stored in `[recording].tags`.
    pub tags: Vec<String>,
    /// What to redact beyond the defaults.
    pub extra: Extra,
    /// The working directory paths are made relative to.
    pub cwd: String,
    /// The environment whose values are redacted.
    pub env: Vec<(String, String)>,
}

/// One line seen, in the order seen.
#[derive(Debug, Clone)]
struct Seen {
    at: Duration,
    from_client: bool,
    text: String,
}

/// How a recording session ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recorded {
    /// The code to exit with: the agent's, or 143/130 when this process was signalled.
    pub code: i32,
    /// How many lines were recorded.
    pub lines: usize,
}

/// Runs the agent between `stdin`/`stdout` and records; `stderr` gets the agent's stderr.
///
/// A command that cannot be started is an upstream error (exit 4); a recording that cannot be
/// written a configuration error (exit 3), checked before the agent starts.
pub async fn record<R, W, E>(
    options: RecordOptions,
    stdin: R,
    mut stdout: W,
    mut stderr: E,
) -> Result<Recorded, CommandError>
where
    R: AsyncRead + Send + Unpin + 'static,
    W: AsyncWrite + Send + Unpin,
    E: AsyncWrite + Send + Unpin,
{
    let redactor = Redactor::new(&options.cwd, &options.env, &options.extra)
        .map_err(|message| CommandError::invalid_input(anyhow!(message)))?;
    check_writable(&options.out)?;
    let spec = ChildSpec::from_argv("agent", &options.command)
        .ok_or_else(|| CommandError::invalid_input(anyhow!("no agent command after --")))?
        .die_with_parent();
    let mut child = spawn(spec).map_err(|e| CommandError::upstream(anyhow!(e)))?;
    let mut to_agent = Some(
        child
            .take_stdin()
            .map_err(|e| CommandError::internal(anyhow!(e)))?,
    );
    let origin = Instant::now();
    let mut seen: Vec<Seen> = Vec::new();
    let mut client = LineReader::with_max_line_bytes(stdin, MAX_LINE_BYTES);
    let mut client_open = true;
    let mut signals = Signals::new();
    let code = loop {
        tokio::select! {
            line = client.next_line(), if client_open => match line {
                Some(Ok(line)) => {
                    let text = String::from_utf8_lossy(line).into_owned();
                    seen.push(Seen { at: origin.elapsed(), from_client: true, text });
                    let mut bytes = line.to_vec();
                    bytes.push(b'\n');
                    // An agent that stopped reading ends by itself; its output decides the end.
                    if let Some(writer) = to_agent.as_mut() {
                        let _ = writer.write_all(&bytes).await;
                        let _ = writer.flush().await;
                    }
                }
                Some(Err(FrameError::Oversize { length, .. })) => {
                    let note = format!("ski-mock-agent record: a client line of {length} bytes was not passed on\n");
                    let _ = stderr.write_all(note.as_bytes()).await;
                }
                Some(Err(FrameError::Io(_))) | None => {
                    client_open = false;
                    // Dropping the pipe's end is what the agent sees as the end of its input.
                    to_agent = None;
                }
            },
            output = child.next_output_line() => match output {
                Some((OutputStream::Stdout, line)) => {
                    let mut bytes = line.clone().into_bytes();
                    bytes.push(b'\n');
                    let _ = stdout.write_all(&bytes).await;
                    let _ = stdout.flush().await;
                    seen.push(Seen { at: origin.elapsed(), from_client: false, text: line });
                }
                Some((OutputStream::Stderr, line)) => {
                    let _ = stderr.write_all(format!("{line}\n").as_bytes()).await;
                    let _ = stderr.flush().await;
                }
                None => {
                    let status = child.wait().await.ok();
                    break status.map_or(1, exit_code);
                }
            },
            code = signals.next() => {
                drop(to_agent.take());
                let _ = child.shutdown().await;
                break code;
            }
        }
    };
    let _ = stdout.shutdown().await;
    let lines = seen.len();
    let text = recording_text(&options, &redactor, &seen)
        .map_err(|e| CommandError::internal(anyhow!("cannot write the recording: {e}")))?;
    ski::storage::atomic_file::write_atomic(&options.out, text.as_bytes()).map_err(|e| {
        CommandError::configuration(anyhow!(
            "cannot write the recording {}: {e}",
            options.out.display()
        ))
    })?;
    Ok(Recorded { code, lines })
}

fn check_writable(out: &std::path::Path) -> Result<(), CommandError> {
    let parent = match out.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => std::path::Path::new("."),
    };
    if parent.is_dir() {
        Ok(())
    } else {
        Err(CommandError::configuration(anyhow!(
            "cannot write the recording {}: {} is not a directory",
            out.display(),
            parent.display()
        )))
    }
}

fn exit_code(status: std::process::ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    status
        .code()
        .or_else(|| status.signal().map(|s| 128 + s))
        .unwrap_or(1)
}

/// SIGTERM and SIGINT of this process, as exit codes 143 and 130.
struct Signals {
    term: Option<tokio::signal::unix::Signal>,
    int: Option<tokio::signal::unix::Signal>,
}

impl Signals {
    fn new() -> Self {
        use tokio::signal::unix::{SignalKind, signal};
        Self {
            term: signal(SignalKind::terminate()).ok(),
            int: signal(SignalKind::interrupt()).ok(),
        }
    }

    async fn next(&mut self) -> i32 {
        let term = async {
            match &mut self.term {
                Some(signal) => signal.recv().await,
                None => std::future::pending().await,
            }
        };
        let int = async {
            match &mut self.int {
                Some(signal) => signal.recv().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = term => 143,
            _ = int => 130,
        }
    }
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

/// The recording's TOML text: provenance, then one exchange per client line.
fn recording_text(
    options: &RecordOptions,
    redactor: &Redactor,
    seen: &[Seen],
) -> Result<String, toml::ser::Error> {
    let mut exchanges: Vec<ExchangeSpec> = Vec::new();
    let mut current = ExchangeSpec::default();
    let mut current_at = Duration::ZERO;
    for line in seen {
        if line.from_client {
            if current.client.is_some() || !current.agent.is_empty() {
                exchanges.push(std::mem::take(&mut current));
            }
            current.client = Some(redactor.line(&line.text));
            current.at_ms = millis(line.at);
            current_at = line.at;
        } else {
            current.agent.push(AgentLineSpec {
                after_ms: millis(line.at.saturating_sub(current_at)),
                line: redactor.line(&line.text),
            });
        }
    }
    if current.client.is_some() || !current.agent.is_empty() {
        exchanges.push(current);
    }
    let mut spec = provenance(seen, redactor);
    spec.command = redactor.command(&options.command);
    spec.tags.clone_from(&options.tags);
    spec.redacted = redactor.summary();
    let agent = spec.agent.clone().unwrap_or_else(|| "an agent".to_owned());
    RecordingFile {
        name: format!("recording of {agent}"),
        description: "recorded by `ski-mock-agent record`; replay it with `ski-mock-agent \
                      --script FILE`, check it against the live agent with `ski-mock-agent diff`"
            .to_owned(),
        recording: &spec,
        exchange: &exchanges,
    }
    .to_toml()
    .map(|mut text| {
        if !text.ends_with('\n') {
            text.push('\n');
        }
        text
    })
}

/// The agent's name, version and protocol version from the `initialize` exchange, and the date.
fn provenance(seen: &[Seen], redactor: &Redactor) -> RecordingSpec {
    let mut spec = RecordingSpec {
        recorded_at: now_rfc3339(),
        ..RecordingSpec::default()
    };
    let parse = |text: &str| serde_json::from_str::<Value>(text).ok();
    let initialize_id = seen.iter().filter(|l| l.from_client).find_map(|l| {
        let message = parse(&l.text)?;
        (message.get("method")?.as_str()? == "initialize").then(|| message.get("id").cloned())?
    });
    let Some(id) = initialize_id else {
        return spec;
    };
    let result = seen.iter().filter(|l| !l.from_client).find_map(|l| {
        let message = parse(&l.text)?;
        (message.get("id") == Some(&id) && message.get("method").is_none())
            .then(|| message.get("result").cloned())?
    });
    if let Some(result) = result {
        let info = result.get("agentInfo");
        let text = |key: &str| {
            info.and_then(|i| i.get(key))
                .and_then(Value::as_str)
                .map(|s| redactor.text(s))
        };
        spec.agent = text("name");
        spec.agent_version = text("version");
        spec.protocol_version = result.get("protocolVersion").and_then(Value::as_i64);
    }
    spec
}

fn now_rfc3339() -> Option<String> {
    let now = time::OffsetDateTime::now_utc();
    let now = now.replace_nanosecond(0).unwrap_or(now);
    now.format(&time::format_description::well_known::Rfc3339)
        .ok()
}
