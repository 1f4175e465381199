//! `ski-mock-agent record`: sits between a client and a real agent, passes every message
//! through unchanged as it comes, and writes what it saw as a replayable recording
//! ([`super::recording`]) with its secrets redacted ([`redact`]). The client is on this
//! process's stdio or connects over WebSocket (`--listen`); the agent is a child on stdio or
//! listens on WebSocket (`--connect`) ([`ends`]).

pub mod ends;
pub mod redact;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::anyhow;
use serde_json::Value;
use ski::exit::CommandError;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};

use super::recording::{AgentLineSpec, ExchangeSpec, RecordingFile, RecordingSpec};
use ends::{AgentEnd, ClientEnd, Event};
use redact::{Extra, Redactor};

/// The longest client line passed through.
pub const MAX_LINE_BYTES: usize = ends::MAX_MESSAGE_BYTES;

/// What to record and how.
#[derive(Debug, Clone, Default)]
pub struct RecordOptions {
    /// Where the recording goes.
    pub out: PathBuf,
    /// The agent's command line, program first (empty with `connect`).
    pub command: Vec<String>,
    /// Accept the client's WebSocket connection on this `HOST:PORT` instead of stdio.
    pub listen: Option<String>,
    /// Reach the agent at this `ws://` URL instead of starting `command`.
    pub connect: Option<String>,
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

/// Runs the agent between the client and records; `stderr` gets the agent's stderr, notes, and
/// with `listen` the line `listening on ws://HOST:PORT/acp` once the agent is ready.
///
/// A command or URL that cannot be reached is an upstream error (exit 4); a recording that
/// cannot be written or an address that cannot be bound a configuration error (exit 3), checked
/// before the agent starts.
pub async fn record<R, W, E>(
    options: RecordOptions,
    stdin: R,
    stdout: W,
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
    let server = match &options.listen {
        Some(address) => Some(ends::listen(address).await?),
        None => None,
    };
    let mut agent = match &options.connect {
        Some(url) => AgentEnd::connect(url).await?,
        None => AgentEnd::spawn(&options.command)?,
    };
    let mut signals = Signals::new();
    let mut client = match server {
        None => ClientEnd::stdio(stdin, stdout),
        Some(mut server) => {
            let note = format!("listening on {}\n", server.url());
            let _ = stderr.write_all(note.as_bytes()).await;
            let _ = stderr.flush().await;
            // One client per recording: the listener is dropped once it has connected.
            let accepted = tokio::select! {
                connection = server.accept() => connection,
                code = signals.next() => {
                    agent.stop().await;
                    return write_recording(&options, &redactor, &[], code);
                }
            };
            match accepted {
                Some(connection) => ClientEnd::WebSocket(Box::new(connection.into_socket())),
                None => {
                    agent.stop().await;
                    return Err(CommandError::internal(anyhow!(
                        "--listen: the listener failed before a client connected"
                    )));
                }
            }
        }
    };
    let origin = Instant::now();
    let mut seen: Vec<Seen> = Vec::new();
    let mut client_open = true;
    let ending = loop {
        tokio::select! {
            event = client.next(), if client_open => match event {
                Event::Message(message) => {
                    if let Some(text) = message.text() {
                        seen.push(Seen { at: origin.elapsed(), from_client: true, text });
                    }
                    agent.send(message).await;
                }
                Event::Oversize(length) => {
                    let note = format!("ski-mock-agent record: a client message of {length} bytes was not passed on\n");
                    let _ = stderr.write_all(note.as_bytes()).await;
                }
                Event::Stderr(_) => {}
                Event::Closed(_) => {
                    client_open = false;
                    agent.close_input().await;
                }
            },
            event = agent.next() => match event {
                Event::Message(message) => {
                    let text = message.text();
                    client.send(message).await;
                    if let Some(text) = text {
                        seen.push(Seen { at: origin.elapsed(), from_client: false, text });
                    }
                }
                Event::Oversize(length) => {
                    let note = format!("ski-mock-agent record: an agent message of {length} bytes was not passed on\n");
                    let _ = stderr.write_all(note.as_bytes()).await;
                }
                Event::Stderr(line) => {
                    let _ = stderr.write_all(format!("{line}\n").as_bytes()).await;
                    let _ = stderr.flush().await;
                }
                Event::Closed(code) => break Ending::AgentEnded(code),
            },
            code = signals.next() => break Ending::Signalled(code),
        }
    };
    let code = match ending {
        Ending::AgentEnded(code) => code,
        Ending::Signalled(code) => {
            agent.stop().await;
            code
        }
    };
    client.close().await;
    write_recording(&options, &redactor, &seen, code)
}

/// Why the relay stopped.
enum Ending {
    /// The agent ended (its exit code, or 0/1 for a WebSocket closed cleanly or not).
    AgentEnded(i32),
    /// This process was signalled (143 or 130).
    Signalled(i32),
}

fn write_recording(
    options: &RecordOptions,
    redactor: &Redactor,
    seen: &[Seen],
    code: i32,
) -> Result<Recorded, CommandError> {
    let text = recording_text(options, redactor, seen)
        .map_err(|e| CommandError::internal(anyhow!("cannot write the recording: {e}")))?;
    ski::storage::atomic_file::write_atomic(&options.out, text.as_bytes()).map_err(|e| {
        CommandError::configuration(anyhow!(
            "cannot write the recording {}: {e}",
            options.out.display()
        ))
    })?;
    Ok(Recorded {
        code,
        lines: seen.len(),
    })
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
    let exchanges = exchanges_of(seen, redactor);
    let mut spec = provenance(seen, redactor);
    spec.command = redactor.command(&options.command);
    spec.endpoint = options.connect.as_deref().map(|url| redactor.text(url));
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

/// The lines seen, grouped into exchanges: each client line opens one, and the agent lines that
/// follow it belong to it, in time order. One exception keeps a pipelining client replayable: an
/// answer to an earlier request goes to that request's exchange when every exchange opened since
/// is a request that has had no agent line yet (a client that sent `initialize` and
/// `session/new` together gets each answer under its own request). After a notification such as
/// `session/cancel`, time order stands: the turn's answer is what followed the cancel.
fn exchanges_of(seen: &[Seen], redactor: &Redactor) -> Vec<ExchangeSpec> {
    let mut exchanges: Vec<ExchangeSpec> = Vec::new();
    // Per exchange: the id of the request that opened it (None for a notification, an answer
    // or the agent's lines before the first client line), and when it was opened.
    let mut opened: Vec<(Option<Value>, Duration)> = Vec::new();
    for line in seen {
        if line.from_client {
            exchanges.push(ExchangeSpec {
                client: Some(redactor.line(&line.text)),
                at_ms: millis(line.at),
                agent: Vec::new(),
            });
            opened.push((request_id(&line.text), line.at));
            continue;
        }
        if exchanges.is_empty() {
            exchanges.push(ExchangeSpec::default());
            opened.push((None, Duration::ZERO));
        }
        let index =
            answered_exchange(&line.text, &exchanges, &opened).unwrap_or(exchanges.len() - 1);
        exchanges[index].agent.push(AgentLineSpec {
            after_ms: millis(line.at.saturating_sub(opened[index].1)),
            line: redactor.line(&line.text),
        });
    }
    exchanges
}

/// The id of a client line that is a request.
fn request_id(text: &str) -> Option<Value> {
    let message: Value = serde_json::from_str(text).ok()?;
    message.get("method")?;
    message.get("id").filter(|id| !id.is_null()).cloned()
}

/// The earlier exchange an agent answer belongs to, when every exchange after it is a request
/// still waiting for its first agent line.
fn answered_exchange(
    text: &str,
    exchanges: &[ExchangeSpec],
    opened: &[(Option<Value>, Duration)],
) -> Option<usize> {
    let message: Value = serde_json::from_str(text).ok()?;
    if message.get("method").is_some() {
        return None;
    }
    let id = message.get("id")?;
    let index = opened
        .iter()
        .rposition(|(request, _)| request.as_ref() == Some(id))?;
    let later_all_waiting = (index + 1..exchanges.len())
        .all(|later| opened[later].0.is_some() && exchanges[later].agent.is_empty());
    later_all_waiting.then_some(index)
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

#[cfg(test)]
mod tests {
    use super::*;

    fn client(at_ms: u64, text: &str) -> Seen {
        Seen {
            at: Duration::from_millis(at_ms),
            from_client: true,
            text: text.to_owned(),
        }
    }

    fn agent(at_ms: u64, text: &str) -> Seen {
        Seen {
            at: Duration::from_millis(at_ms),
            from_client: false,
            text: text.to_owned(),
        }
    }

    fn grouped(seen: &[Seen]) -> Vec<(Option<String>, Vec<String>)> {
        let redactor = Redactor::new("/nowhere", &[], &Extra::default()).expect("redactor");
        exchanges_of(seen, &redactor)
            .into_iter()
            .map(|e| (e.client, e.agent.into_iter().map(|l| l.line).collect()))
            .collect()
    }

    const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{}}"#;
    const NEW: &str = r#"{"jsonrpc":"2.0","id":1,"method":"session/new","params":{}}"#;
    const INITIALIZED: &str = r#"{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":1}}"#;
    const CREATED: &str = r#"{"jsonrpc":"2.0","id":1,"result":{"sessionId":"s"}}"#;

    #[test]
    fn a_pipelined_requests_answer_goes_to_its_own_exchange() {
        let seen = [
            client(0, INITIALIZE),
            client(1, NEW),
            agent(5, INITIALIZED),
            agent(6, CREATED),
        ];
        assert_eq!(
            grouped(&seen),
            vec![
                (Some(INITIALIZE.to_owned()), vec![INITIALIZED.to_owned()]),
                (Some(NEW.to_owned()), vec![CREATED.to_owned()]),
            ]
        );
    }

    #[test]
    fn after_a_notification_or_a_later_answer_time_order_stands() {
        let prompt = r#"{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{}}"#;
        let cancel = r#"{"jsonrpc":"2.0","method":"session/cancel","params":{}}"#;
        let ended = r#"{"jsonrpc":"2.0","id":2,"result":{"stopReason":"cancelled"}}"#;
        let seen = [client(0, prompt), client(1, cancel), agent(2, ended)];
        assert_eq!(
            grouped(&seen),
            vec![
                (Some(prompt.to_owned()), vec![]),
                (Some(cancel.to_owned()), vec![ended.to_owned()]),
            ]
        );
        let seen = [
            client(0, INITIALIZE),
            client(1, NEW),
            agent(2, CREATED),
            agent(3, INITIALIZED),
        ];
        assert_eq!(
            grouped(&seen),
            vec![
                (Some(INITIALIZE.to_owned()), vec![]),
                (
                    Some(NEW.to_owned()),
                    vec![CREATED.to_owned(), INITIALIZED.to_owned()]
                ),
            ]
        );
    }
}
