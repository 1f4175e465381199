//! The command line of `ski-mock-agent`: options, environment variables, and the kiro-cli form
//! `acp --agent NAME [--model M] [--trust-all-tools]` so that the binary can be installed as
//! `kiro-cli`.

use std::path::{Path, PathBuf};

use anyhow::anyhow;
use clap::{Args, Parser, Subcommand, ValueEnum};
use ski::exit::CommandError;

use super::config::{Config, Overrides};
use super::diff::DiffOptions;
use super::diff::shape::Options as ShapeOptions;
use super::record::RecordOptions;
use super::record::redact::Extra;
use super::recording::{Timing, Unrecorded};
use super::runtime::ProcessInfo;
use super::script::{FaultSpec, Handshake, Personality, PromptMode, Quirk, Script};
use super::{Launch, expand_path};

const ABOUT: &str = "A scriptable fake agent: put it where a real ACP agent, kiro-cli or an \
intercom headless agent goes, and it behaves exactly as scripted, including the broken ways \
real agents behave.";

const AFTER_HELP: &str = "\
Ready scripts (give the name to --script): echo, testy, faults, kiro, intercom, intercom-jsonrpc.
Print one with --print-script NAME to start your own.

Faults (--fault, repeatable):
  ignore-eof                    keep running after stdin closes
  ignore-cancel                 behave as if session/cancel never arrived
  update-before-session-result  send an update for a new session before its result
  updates-after-prompt-result   send an update after every prompt result
  duplicate-responses           write every response twice
  fragment-lines=N              write every line in N flushed pieces
  fragment-delay-ms=MS          pause between the pieces
  delay-ms=MS                   pause before every line
  hang-on=METHOD                never answer METHOD (repeatable)
  exit-on=METHOD[:CODE]         exit with CODE (default 1) when METHOD arrives
  startup-stderr-bytes=N        write N bytes to stderr at start

Kiro quirks (--quirk, repeatable, with the kiro personality):
  exit-on-missing-mcp-servers, silent-malformed-load, exit-on-unknown-load,
  context-usage-after-result

Quirk profiles (--profile NAME, repeatable, or profiles = [\"NAME\"] in a script or a
recording; any personality, and in replay an unrecorded session/load and the recorded chunks):
  kiro-cli                      all four kiro quirks above, answers in 8-character chunks
  exit-on-unknown-load          session/load of an unknown session: exit 0 without an answer
  exit-on-missing-mcp-servers   session/new without mcpServers: exit 0 without a word
  silent-malformed-load         session/load without cwd or mcpServers: never answered (kiro)
  update-after-result           a context_usage session_info_update after each prompt result
  chunked                       answers in agent_message_chunks of at most 8 characters

Recordings: `record` writes one (see `ski-mock-agent record --help`), --script replays it with
the live ids (--unrecorded, --replay-timing), `diff` checks it against the live agent. --script
DIR replays every recording in DIR as a pool: a prompt is answered by the recording holding its
text; --pool-tag keeps those with a tag, --pool-seed picks the one answering initialize.

Paths given to --transcript and --control may contain {pid} and {env:NAME}, so that every
agent spawned with the same arguments gets its own files.

Examples:
  ski-mock-agent --script echo --transcript /tmp/agent.ndjson
  ski-mock-agent --script faults --fault update-before-session-result
  ski-mock-agent --script kiro acp --agent my-agent --model auto
  ski-mock-agent --script echo --listen 127.0.0.1:0
  ski-mock-agent --script intercom --control '/tmp/agent-{env:INTERCOM_SESSION_ID}.sock'
  ski-mock-agent control /tmp/agent-sess-1.sock '{\"cmd\":\"state\"}'

Exit codes: 0 when stdin closes, or the code a script or the control channel gives; 143 on
SIGTERM, 130 on SIGINT; 2 a bad argument; 3 a script, transcript or control socket that cannot be
used; 5 an internal failure.";

/// `ski-mock-agent` options.
#[derive(Debug, Parser)]
#[command(
    name = "ski-mock-agent",
    version,
    about = ABOUT,
    after_help = AFTER_HELP,
    max_term_width = 100
)]
pub struct Cli {
    /// Script file, a recording, a directory of recordings (a pool), or the name of a ready
    /// script.
    #[arg(
        short,
        long,
        value_name = "FILE|NAME",
        env = "SKI_MOCK_AGENT_SCRIPT",
        hide_env_values = true
    )]
    pub script: Option<String>,

    /// Built-in behaviour; default: the script's, else `kiro` when called as kiro-cli or with
    /// `acp`, else `standard`.
    #[arg(short, long, value_enum)]
    pub personality: Option<PersonalityArg>,

    /// Record every line in and out, argv, cwd, environment names and the exit code (NDJSON).
    #[arg(
        long,
        value_name = "FILE",
        env = "SKI_MOCK_AGENT_TRANSCRIPT",
        hide_env_values = true
    )]
    pub transcript: Option<String>,

    /// Listen for control commands on this Unix socket.
    #[arg(
        long,
        value_name = "PATH",
        env = "SKI_MOCK_AGENT_CONTROL",
        hide_env_values = true
    )]
    pub control: Option<String>,

    /// Connect to a runner's Unix socket, say hello and take control commands from it.
    #[arg(
        long,
        value_name = "PATH",
        env = "SKI_MOCK_AGENT_CONTROL_CONNECT",
        hide_env_values = true
    )]
    pub control_connect: Option<String>,

    /// Take clients on ACP's remote endpoint instead of stdio: listen on HOST:PORT (port 0 picks
    /// a free one), serve `/acp` in both profiles (Streamable HTTP and the WebSocket upgrade),
    /// print `listening on http://HOST:PORT/acp` on stderr once it accepts, and run one scripted
    /// agent per connection until SIGTERM or SIGINT.
    #[arg(
        long,
        value_name = "HOST:PORT",
        conflicts_with_all = ["transcript", "control", "control_connect"]
    )]
    pub listen: Option<String>,

    /// Read prompts as commands of the official test agent (help, echo <msg>, full, ...).
    #[arg(long)]
    pub commands: bool,

    /// Inject a fault (see below).
    #[arg(long = "fault", value_name = "NAME[=VALUE]")]
    pub faults: Vec<String>,

    /// Switch on a kiro quirk (see below).
    #[arg(long = "quirk", value_name = "NAME")]
    pub quirks: Vec<String>,

    /// Switch on a quirk profile (see below).
    #[arg(long = "profile", value_name = "NAME")]
    pub profiles: Vec<String>,

    /// The handshake of the intercom personality.
    #[arg(long, value_enum, value_name = "KIND")]
    pub intercom_handshake: Option<HandshakeArg>,

    /// The newest ACP protocol version to speak: 2 (the default) offers ACP v2 (draft) beside
    /// v1 to a client asking for it, 1 pins v1 (the standard personality; the others speak v1).
    #[arg(long, value_name = "VERSION", value_parser = clap::value_parser!(u16).range(1..=2))]
    pub protocol: Option<u16>,

    /// Replaying a recording: what a client message it does not hold gets: `error` (-32603, or
    /// -32601 for a method never recorded), `nearest` (the answer to the closest recorded message
    /// of its method, else as `error`) or `fail` (exit 1); default: the recording's, else
    /// `error`. A request without a field the ACP schema requires and every recorded one carried
    /// gets -32602.
    #[arg(long, value_name = "ANSWER", value_parser = ["error", "nearest", "fail"])]
    pub unrecorded: Option<String>,

    /// Replaying a directory of recordings (--script DIR): only those with this tag.
    #[arg(long, value_name = "TAG")]
    pub pool_tag: Option<String>,

    /// Replaying a directory of recordings: which one answers what they all hold (initialize,
    /// session/new): the seed modulo their number, in file-name order.
    #[arg(long, value_name = "N")]
    pub pool_seed: Option<u64>,

    /// Replaying a recording: `none` (as fast as possible, the default), `recorded` (the
    /// recorded gaps) or `scale=F` (the gaps times F).
    #[arg(long, value_name = "TIMING")]
    pub replay_timing: Option<String>,

    /// Check the script and print a summary, then exit.
    #[arg(long)]
    pub check: bool,

    /// Print a ready script and exit.
    #[arg(long, value_name = "NAME")]
    pub print_script: Option<String>,

    /// `acp`: kiro-cli's command line; `control`: send a command to a running agent; `record`:
    /// record a real agent; `diff`: check a recording against the live agent.
    #[command(subcommand)]
    pub command: Option<SubCommand>,
}

/// `--personality`.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum PersonalityArg {
    /// Standard ACP v1.
    Standard,
    /// kiro-cli stand-in.
    Kiro,
    /// intercom stream dialect.
    Intercom,
}

/// `--intercom-handshake`.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum HandshakeArg {
    /// No handshake; prompts arrive as prompt/send.
    Stream,
    /// JSON-RPC initialize, initialized, session/new, session/prompt.
    Jsonrpc,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum SubCommand {
    /// `kiro-cli acp`: speak ACP on stdio (selects the kiro personality), so that this binary
    /// can stand in for `kiro-cli`.
    #[command(after_help = concat!(
        "Examples:\n",
        "  ski-mock-agent --script kiro acp --agent my-agent --model auto\n",
        "  ski-mock-agent acp --agent my-agent --trust-all-tools"
    ))]
    Acp(KiroArgs),
    /// Send one control command to a running agent's socket and print the reply; exits 1 if
    /// the reply is not ok (2 a command that is not JSON, 4 an agent that cannot be reached).
    /// Waits up to 10 s for the socket to accept.
    #[command(after_help = concat!(
        "Examples:\n",
        "  ski-mock-agent control /tmp/agent.sock '{\"cmd\":\"state\"}'\n",
        "  ski-mock-agent control /tmp/agent.sock '{\"cmd\":\"exit\",\"code\":3}'"
    ))]
    Control(ControlArgs),
    /// Sit between a client (stdio, or WebSocket with --listen) and a real agent (a command, or
    /// a WebSocket URL with --connect), pass every message through unchanged, and write a
    /// replayable recording with its secrets redacted.
    #[command(after_help = RECORD_HELP)]
    Record(RecordArgs),
    /// Replay a recording's client side against the live agent and report, per exchange, what
    /// changed structurally in its answers; exits 0 when nothing did, 1 when something did.
    #[command(after_help = DIFF_HELP)]
    Diff(DiffArgs),
}

const DIFF_HELP: &str = "\
Compared per exchange: which messages came in which order (kind, method, session update kind;
runs of one kind count once), and per message the fields present, their JSON kinds and the values
that name a kind of thing (type, sessionUpdate, stopReason, kind, status, role, method, code,
protocolVersion, outcome), every true or false, which agent answered (agentInfo's name and
version, the ids of its authMethods), and text unless --ignore-text; every item of an array
counts. Ids, session ids, times and other values are never compared. The live answers are
redacted as the recording was before they are compared. The live agent's requests get the
recorded client's replies.

Exit codes: 0 no structural drift, 1 drift, 2 a bad argument, 3 a recording that cannot be
read, 4 an agent that cannot be started.

Examples:
  ski-mock-agent diff golden/recordings/ts-sdk-echo.toml -- node echo-agent.mjs
  ski-mock-agent diff s.toml --ignore-text --ignore result.agentInfo -- my-agent --acp";

/// `diff` arguments.
#[derive(Debug, Args)]
pub struct DiffArgs {
    /// The recording.
    pub recording: String,
    /// Don't compare the values of `text` fields (model output).
    #[arg(long)]
    pub ignore_text: bool,
    /// Leave out this field path (dotted, `[]` for array items, e.g. result.agentInfo) and
    /// everything under it (repeatable).
    #[arg(long = "ignore", value_name = "PATH")]
    pub ignore: Vec<String>,
    /// How long to wait for each answer the recording holds, in milliseconds.
    #[arg(long, value_name = "MS", default_value_t = 30_000)]
    pub timeout_ms: u64,
    /// How long to wait for recorded lines that answer nothing (updates after a result), and
    /// for more output after the last exchange, in milliseconds.
    #[arg(long, value_name = "MS", default_value_t = 500)]
    pub settle_ms: u64,
    /// The live agent's command line.
    #[arg(last = true, required = true, value_name = "AGENT")]
    pub command: Vec<String>,
}

const RECORD_HELP: &str = "\
Redacted by default: the value of every environment variable of 8 characters or more (4 for a
name like TOKEN, KEY, SECRET, PASSWORD), string values of fields named like token, secret,
password, apiKey, authorization, cookie, credential, key, and the value of {\"name\": ...,
\"value\": ...} entries with such a name, text shaped like a bearer token, an OpenAI, GitHub,
Slack, AWS or Google key or a JWT. Paths under the working directory become relative (./...).
The recording names what it redacted in [recording].redacted.

WebSocket: with --listen the client connects to the recorder (one client per recording), with
--connect the recorder connects to the agent; either or both replace stdio on their side. Every
text and binary frame passes through unchanged and in order, pings are answered by each hop, and
a close on one side closes the other. Text frames are recorded like lines.

The agent's exit code is this process's (an agent on WebSocket: 0 when it closed cleanly, 1
when the connection failed); 143 on SIGTERM, 130 on SIGINT (the agent's group is ended and the
recording written); 2 a bad argument, 3 a recording that cannot be written or a --listen address
that cannot be bound, 4 an agent that cannot be started or reached.

Examples:
  ski-mock-agent record --out echo.toml -- node echo-agent.mjs
  ski acp client connect --agent-cmd 'ski-mock-agent record --out s.toml -- my-agent' --prompt hi
  ski-mock-agent record --out s.toml --redact-env MY_ORG --redact-field sessionSecret -- agent
  ski-mock-agent record --out s.toml --listen 127.0.0.1:0 -- ski acp serve
  ski-mock-agent record --out s.toml --listen 127.0.0.1:0 --connect ws://127.0.0.1:8900/acp";

/// `record` arguments.
#[derive(Debug, Args)]
pub struct RecordArgs {
    /// Where to write the recording (a script file `--script` replays).
    #[arg(long, value_name = "FILE")]
    pub out: PathBuf,
    /// A label stored with the recording, for selecting it from a pool (repeatable).
    #[arg(long = "tag", value_name = "TAG")]
    pub tags: Vec<String>,
    /// Also redact the string values of fields with this name (repeatable).
    #[arg(long = "redact-field", value_name = "NAME")]
    pub redact_fields: Vec<String>,
    /// Also redact text matching this regular expression (repeatable).
    #[arg(long = "redact-pattern", value_name = "REGEX")]
    pub redact_patterns: Vec<String>,
    /// Also redact this environment variable's value, whatever its length (repeatable).
    #[arg(long = "redact-env", value_name = "NAME")]
    pub redact_env: Vec<String>,
    /// Take the client on WebSocket instead of stdio: listen on HOST:PORT (port 0 picks a free
    /// one), print `listening on ws://HOST:PORT/acp` on stderr once the agent is ready, and
    /// record the first client that connects.
    #[arg(long, value_name = "HOST:PORT")]
    pub listen: Option<String>,
    /// Reach the agent at this ws:// URL instead of starting a command.
    #[arg(long, value_name = "URL", conflicts_with = "command")]
    pub connect: Option<String>,
    /// The agent's command line (not with --connect).
    #[arg(last = true, required_unless_present = "connect", value_name = "AGENT")]
    pub command: Vec<String>,
}

/// `control` arguments.
#[derive(Debug, Args)]
pub struct ControlArgs {
    /// The agent's control socket.
    pub socket: PathBuf,
    /// The command, as JSON, for example '{"cmd":"state"}'.
    pub command: String,
}

/// `kiro-cli acp` options.
#[derive(Debug, Args)]
pub struct KiroArgs {
    /// The agent configuration to use.
    #[arg(long)]
    pub agent: Option<String>,
    /// The model to use.
    #[arg(long)]
    pub model: Option<String>,
    /// Trust every tool.
    #[arg(long)]
    pub trust_all_tools: bool,
    /// Trust these tools (comma separated).
    #[arg(long, value_name = "TOOLS")]
    pub trust_tools: Option<String>,
    /// The agent engine.
    #[arg(long, value_name = "ENGINE")]
    pub agent_engine: Option<String>,
}

/// What the command line asks for.
#[derive(Debug)]
pub enum Action {
    /// Run an agent.
    Run(Box<Launch>),
    /// Serve the remote `/acp` endpoint on this address, one agent per connection.
    Listen(Box<Launch>, String),
    /// Print this text and exit 0.
    Print(String),
    /// Send a control command to a running agent.
    Control(ControlArgs),
    /// Record a real agent.
    Record(RecordOptions),
    /// Check a recording against the live agent.
    Diff(DiffOptions),
}

/// Parses one `--fault` value into the fault table.
pub fn apply_fault(faults: &mut FaultSpec, text: &str) -> Result<(), String> {
    let (name, value) = match text.split_once('=') {
        Some((name, value)) => (name, Some(value)),
        None => (text, None),
    };
    let number = |value: Option<&str>| -> Result<u64, String> {
        let text = value.ok_or_else(|| format!("fault {name} needs a value: {name}=N"))?;
        text.parse::<u64>()
            .map_err(|_| format!("fault {name}: {text:?} is not a number"))
    };
    let flag = |value: Option<&str>| -> Result<bool, String> {
        match value {
            None | Some("true") => Ok(true),
            Some("false") => Ok(false),
            Some(other) => Err(format!("fault {name}: {other:?} is not true or false")),
        }
    };
    match name {
        "ignore-eof" => faults.ignore_eof = Some(flag(value)?),
        "ignore-cancel" => faults.ignore_cancel = Some(flag(value)?),
        "update-before-session-result" => {
            faults.update_before_session_result = Some(flag(value)?);
        }
        "updates-after-prompt-result" => {
            faults.updates_after_prompt_result = Some(flag(value)?);
        }
        "duplicate-responses" => faults.duplicate_responses = Some(flag(value)?),
        "fragment-lines" => {
            faults.fragment_lines = Some(u32::try_from(number(value)?).unwrap_or(u32::MAX));
        }
        "fragment-delay-ms" => faults.fragment_delay_ms = Some(number(value)?),
        "delay-ms" => faults.delay_ms = Some(number(value)?),
        "hang-on" => {
            let method = value.ok_or("fault hang-on needs a method: hang-on=METHOD")?;
            faults
                .hang_on
                .get_or_insert_with(Vec::new)
                .push(method.to_owned());
        }
        "exit-on" => {
            let value = value.ok_or("fault exit-on needs a method: exit-on=METHOD[:CODE]")?;
            let (method, code) = match value.rsplit_once(':') {
                Some((method, code)) if code.parse::<i32>().is_ok() => {
                    (method, code.parse::<i32>().ok())
                }
                _ => (value, None),
            };
            faults.exit_on = Some(method.to_owned());
            faults.exit_code = code.or(faults.exit_code);
        }
        "startup-stderr-bytes" => faults.startup_stderr_bytes = Some(number(value)?),
        other => {
            return Err(format!("unknown fault {other:?}; see --help for the list"));
        }
    }
    Ok(())
}

fn called_as_kiro(argv0: Option<&str>) -> bool {
    argv0
        .and_then(|arg| Path::new(arg).file_name())
        .and_then(|name| name.to_str())
        .is_some_and(|name| name.starts_with("kiro-cli"))
}

impl Cli {
    /// Turns the parsed command line into what to do; `argv` is the full command line.
    ///
    /// A bad argument is an invalid-input error (exit 2), a script that cannot be read or used a
    /// configuration error (exit 3).
    pub fn into_action(self, argv: Vec<String>) -> Result<Action, CommandError> {
        if let Some(SubCommand::Control(args)) = self.command {
            return Ok(Action::Control(args));
        }
        if let Some(SubCommand::Diff(args)) = self.command {
            let process = ProcessInfo::current(Vec::new());
            return Ok(Action::Diff(DiffOptions {
                recording: args.recording,
                command: args.command,
                shape: ShapeOptions {
                    ignore_text: args.ignore_text,
                    ignore: args.ignore,
                },
                timeout: std::time::Duration::from_millis(args.timeout_ms),
                settle: std::time::Duration::from_millis(args.settle_ms),
                cwd: process.cwd,
                env: process.env,
            }));
        }
        if let Some(SubCommand::Record(args)) = self.command {
            let process = ProcessInfo::current(argv);
            return Ok(Action::Record(RecordOptions {
                out: args.out,
                command: args.command,
                listen: args.listen,
                connect: args.connect,
                tags: args.tags,
                extra: Extra {
                    fields: args.redact_fields,
                    patterns: args.redact_patterns,
                    env: args.redact_env,
                },
                cwd: process.cwd,
                env: process.env,
            }));
        }
        if let Some(name) = &self.print_script {
            return super::script::BUILTIN_SCRIPTS
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, text)| Action::Print((*text).to_owned()))
                .ok_or_else(|| {
                    CommandError::invalid_input(anyhow!(
                        "no ready script {name:?}; ready: {}",
                        Script::builtin_names().collect::<Vec<_>>().join(", ")
                    ))
                });
        }
        let mut script = match &self.script {
            Some(name) if super::pool::is_pool(name) => {
                let selection = super::pool::Selection {
                    tag: self.pool_tag.clone(),
                    seed: self.pool_seed,
                };
                super::pool::load(Path::new(name), &selection)
                    .map_err(CommandError::configuration)?
            }
            Some(name) => Script::load(name).map_err(CommandError::configuration)?,
            None => Script::empty(),
        };
        if (self.pool_tag.is_some() || self.pool_seed.is_some())
            && !self.script.as_deref().is_some_and(super::pool::is_pool)
        {
            return Err(CommandError::invalid_input(anyhow!(
                "--pool-tag and --pool-seed need a directory of recordings (--script DIR)"
            )));
        }
        if self.unrecorded.is_some() || self.replay_timing.is_some() {
            let recording = script.recording.as_mut().ok_or_else(|| {
                CommandError::invalid_input(anyhow!(
                    "--unrecorded and --replay-timing need a recording (--script FILE)"
                ))
            })?;
            let recording = std::sync::Arc::make_mut(recording);
            if let Some(answer) = &self.unrecorded {
                recording.spec.unrecorded = Unrecorded::parse(answer);
            }
            if let Some(text) = &self.replay_timing {
                recording.timing = Timing::parse(text).ok_or_else(|| {
                    CommandError::invalid_input(anyhow!(
                        "--replay-timing {text:?}: not none, recorded or scale=F"
                    ))
                })?;
            }
        }
        let mut overrides = Overrides {
            protocol: self.protocol,
            ..Overrides::default()
        };
        for fault in &self.faults {
            apply_fault(&mut overrides.faults, fault)
                .map_err(|message| CommandError::invalid_input(anyhow!(message)))?;
        }
        for quirk in &self.quirks {
            overrides.quirks.push(Quirk::parse(quirk).ok_or_else(|| {
                CommandError::invalid_input(anyhow!(
                    "unknown quirk {quirk:?}; known: {}",
                    Quirk::NAMES.join(", ")
                ))
            })?);
        }
        for name in &self.profiles {
            if super::profile::find(name).is_none() {
                return Err(CommandError::invalid_input(anyhow!(
                    "unknown profile {name:?}; known: {}",
                    super::profile::names()
                )));
            }
            overrides.profiles.push(name.clone());
        }
        if self.commands {
            overrides.prompt_mode = Some(PromptMode::Commands);
        }
        overrides.handshake = self.intercom_handshake.map(|h| match h {
            HandshakeArg::Stream => Handshake::Stream,
            HandshakeArg::Jsonrpc => Handshake::Jsonrpc,
        });
        overrides.personality = match self.personality {
            Some(PersonalityArg::Standard) => Some(Personality::Standard),
            Some(PersonalityArg::Kiro) => Some(Personality::Kiro),
            Some(PersonalityArg::Intercom) => Some(Personality::Intercom),
            None if self.command.is_some() && script.spec.personality.is_none() => {
                Some(Personality::Kiro)
            }
            None if called_as_kiro(argv.first().map(String::as_str))
                && script.spec.personality.is_none() =>
            {
                Some(Personality::Kiro)
            }
            None => None,
        };
        if let Some(SubCommand::Acp(kiro)) = &self.command {
            overrides.kiro_agent.clone_from(&kiro.agent);
            overrides.kiro_model.clone_from(&kiro.model);
            overrides.kiro_trust_all_tools = kiro.trust_all_tools;
            overrides.kiro_trust_tools.clone_from(&kiro.trust_tools);
            overrides.kiro_engine.clone_from(&kiro.agent_engine);
        }
        let config = Config::resolve(script, &overrides);
        if self.check {
            return Ok(Action::Print(summary(&config)));
        }
        let pid = std::process::id();
        let path = |value: &Option<String>| -> Option<PathBuf> {
            value
                .as_deref()
                .filter(|v| !v.is_empty())
                .map(|v| expand_path(v, pid))
        };
        let launch = Box::new(Launch {
            transcript: path(&self.transcript),
            control: path(&self.control),
            control_connect: path(&self.control_connect),
            process: ProcessInfo::current(argv),
            handle_signals: true,
            config,
        });
        Ok(match self.listen {
            Some(address) => Action::Listen(launch, address),
            None => Action::Run(launch),
        })
    }
}

/// The `--check` summary of a configuration.
pub fn summary(config: &Config) -> String {
    let mut out = String::new();
    let origin = if config.script.origin.is_empty() {
        "(no script)"
    } else {
        config.script.origin.as_str()
    };
    out.push_str(&format!("script: {origin}: ok\n"));
    out.push_str(&format!("personality: {}\n", config.personality.name()));
    out.push_str(&format!("prompt mode: {:?}\n", config.prompt_mode).to_lowercase());
    out.push_str(&format!("rules: {}\n", config.script.rules.len()));
    for rule in &config.script.rules {
        let trigger = match &rule.trigger {
            super::script::Trigger::Method(m) => format!("method {m}"),
            super::script::Trigger::Prompt { matcher, glob } => {
                format!(
                    "prompt {} {:?}",
                    if *glob { "glob" } else { "regex" },
                    matcher.source
                )
            }
            super::script::Trigger::Control(name) => format!("control {name}"),
            super::script::Trigger::Timer { after, every } => match every {
                Some(every) => format!("after {after:?}, every {every:?}"),
                None => format!("after {after:?}"),
            },
        };
        out.push_str(&format!(
            "  {}: {trigger}: {} step(s)\n",
            rule.at,
            rule.steps.len()
        ));
    }
    if config.faults != super::config::Faults::none() {
        out.push_str(&format!("faults: {:?}\n", config.faults));
    }
    out
}

/// Sends one control command and returns the reply line; waits up to 10 s for the socket.
///
/// A command that is not JSON is an invalid-input error (exit 2); an agent that cannot be reached
/// or answers something unreadable an upstream error (exit 4).
pub async fn send_control(args: &ControlArgs) -> Result<serde_json::Value, CommandError> {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
    let command: serde_json::Value = serde_json::from_str(&args.command)
        .map_err(|e| CommandError::invalid_input(anyhow!("the command is not json: {e}")))?;
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
    let stream = loop {
        match tokio::net::UnixStream::connect(&args.socket).await {
            Ok(stream) => break stream,
            Err(error) if tokio::time::Instant::now() >= deadline => {
                return Err(CommandError::upstream(anyhow!(
                    "cannot connect to {}: {error}",
                    args.socket.display()
                )));
            }
            Err(_) => tokio::time::sleep(std::time::Duration::from_millis(10)).await,
        }
    };
    let (read, mut write) = stream.into_split();
    let mut line = command.to_string();
    line.push('\n');
    write
        .write_all(line.as_bytes())
        .await
        .map_err(|e| CommandError::upstream(anyhow!("cannot send the command: {e}")))?;
    let mut reply = String::new();
    BufReader::new(read)
        .read_line(&mut reply)
        .await
        .map_err(|e| CommandError::upstream(anyhow!("cannot read the reply: {e}")))?;
    serde_json::from_str(reply.trim_end())
        .map_err(|e| CommandError::upstream(anyhow!("the reply is not json: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_help_lists_every_quirk_profile() {
        for profile in super::super::profile::PROFILES {
            assert!(AFTER_HELP.contains(profile.name), "{}", profile.name);
        }
    }
}
