//! `ski kiro`: the bot foundation as a command-line adapter (`conformance/targets/kiro-adapter.md`).
//!
//! - `check`: loads the configuration (environment, then an optional `.env`) and the startup
//!   prerequisites; prints the configuration as JSON with `BOT_TOKEN` redacted, or every violation.
//! - `provision`: the prefix-scoped sync of the template into the kiro home; prints what it
//!   deleted and copied.
//! - `echo PROMPT`: the startup sequence (check, provision), then `kiro-cli acp --agent NAME`
//!   from `PATH`: initialize, `session/new`, one prompt, its streamed chunks, the end of the turn
//!   and a clean shutdown, as JSON lines. Output nobody reads stops the bot: past its bounded
//!   queues it reads no more from kiro-cli, whose writes then block; nothing is dropped.
//!
//! Exit codes (`ski::exit`): 0 ok, 2 invalid arguments, 3 configuration, prerequisite or
//! provisioning refused, 4 kiro-cli failed or died, 5 internal.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::anyhow;
use clap::{Args, Subcommand};
use serde_json::{Value, json};

use super::client::{ClientError, ClientOptions, ClientState, KiroClient, TurnEvent};
use super::config::{ConfigError, KiroConfig, LogLevel, Violation};
use super::prerequisites;
use super::provision::{ProvisionReport, Provisioner};
use crate::cli::output;
use crate::exit::{CommandError, CommandResult};

const LONG_ABOUT: &str = "The foundation of a bot that drives `kiro-cli acp --agent NAME`.

Configuration comes from the environment and an optional .env file (the environment wins):
BOT_TOKEN, KIRO_AGENT_NAME, KIRO_CONFIG_PATH (./kiro-config/), WORKSPACE_BASE_PATH (./workspaces/),
MAX_PROCESSES (5), IDLE_TIMEOUT_SECONDS (30), LOG_LEVEL (INFO).

Every command prints JSON on stdout (echo: one JSON object per line); logs and kiro-cli's stderr
go to stderr at LOG_LEVEL. Exit codes: 0 ok; 2 invalid arguments; 3 configuration, prerequisites
or provisioning refused; 4 kiro-cli failed or died; 5 internal error.";

const AFTER_HELP: &str = "\
Examples:
  BOT_TOKEN=x KIRO_AGENT_NAME=tg-acp ski kiro check
  ski kiro check --env-file bot.env
  ski kiro provision --kiro-home ~/.kiro
  ski kiro echo \"Say exactly: HI\"
  ski kiro echo --cancel --no-provision \"Say exactly: HI\"";

/// What `ski kiro` is, in one line (also the stub `ski --help` lists before it is built).
pub const ABOUT: &str =
    "The foundation of a bot driving kiro-cli acp: config check, provisioner, an echo turn";

/// `ski kiro`.
#[derive(Debug, Args)]
#[command(about = ABOUT, long_about = LONG_ABOUT, after_help = AFTER_HELP)]
pub struct KiroArgs {
    #[command(subcommand)]
    command: KiroCommand,
}

#[derive(Debug, Subcommand)]
enum KiroCommand {
    /// Validate the configuration and the startup prerequisites; print the configuration
    /// (BOT_TOKEN redacted) or every violation.
    #[command(after_help = concat!(
        "Examples:\n",
        "  BOT_TOKEN=x KIRO_AGENT_NAME=tg-acp ski kiro check\n",
        "  ski kiro check --env-file bot.env"
    ))]
    Check(CommonArgs),
    /// Sync the agent's entries of agents/, steering/ and skills/ into the kiro home.
    #[command(after_help = concat!(
        "Examples:\n",
        "  ski kiro provision\n",
        "  ski kiro provision --env-file bot.env --kiro-home /tmp/kiro-home"
    ))]
    Provision(CommonArgs),
    /// Start up, run one prompt through kiro-cli and print the turn as JSON lines.
    #[command(after_help = concat!(
        "Examples:\n",
        "  ski kiro echo \"Say exactly: HI\"\n",
        "  ski kiro echo --no-provision --grace-ms 1000 \"Say exactly: HI\"\n",
        "  ski kiro echo --kill \"Say exactly: HI\"    (then a prompt refused as DEAD)"
    ))]
    Echo(EchoArgs),
}

#[derive(Debug, Clone, Args)]
struct CommonArgs {
    /// The .env file read after the environment [default: .env in the working directory]
    #[arg(long, value_name = "FILE")]
    env_file: Option<PathBuf>,
    /// The kiro home the provisioner writes into [default: $HOME/.kiro]
    #[arg(long, value_name = "DIR")]
    kiro_home: Option<PathBuf>,
}

#[derive(Debug, Args)]
struct EchoArgs {
    #[command(flatten)]
    common: CommonArgs,
    /// The prompt text
    prompt: String,
    /// Time between SIGTERM and SIGKILL when kiro-cli is killed, in milliseconds
    #[arg(long, value_name = "MS", default_value_t = 5000)]
    grace_ms: u64,
    /// Timeout of initialize and session/new, in milliseconds
    #[arg(long, value_name = "MS", default_value_t = 30_000)]
    request_timeout_ms: u64,
    /// Send session/cancel once before the prompt (READY) and once during it (BUSY)
    #[arg(long)]
    cancel: bool,
    /// Try a second prompt while the first is in flight (refused: BUSY)
    #[arg(long)]
    second_prompt: bool,
    /// Try session/new before initialize (refused: NEW)
    #[arg(long)]
    early_session: bool,
    /// After the turn, kill kiro-cli (SIGTERM, grace, SIGKILL) and try another prompt (refused: DEAD)
    #[arg(long)]
    kill: bool,
    /// Skip the provisioning step of the startup sequence
    #[arg(long)]
    no_provision: bool,
}

/// Runs `ski kiro`.
pub fn run(args: KiroArgs) -> ExitCode {
    let result = match args.command {
        KiroCommand::Check(common) => check(&common),
        KiroCommand::Provision(common) => provision(&common),
        KiroCommand::Echo(echo_args) => echo(echo_args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => error.report(),
    }
}

/// Prints one JSON line on stdout (a closed reader ends the output quietly). A stdout nobody
/// reads blocks the write off the runtime's workers, so kiro-cli's connection goes on meanwhile;
/// the turn stops taking updates, and the client's bounded hand-off stops reading kiro-cli.
fn emit(value: &Value) {
    output::blocking_write(|| output::line(value));
}

fn environment() -> BTreeMap<String, String> {
    std::env::vars_os()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
        .collect()
}

fn violations_json(violations: &[Violation]) -> Value {
    json!({"ok": false, "violations": violations})
}

fn refused(violations: &[Violation]) -> CommandError {
    let text: Vec<String> = violations.iter().map(ToString::to_string).collect();
    CommandError::configuration(anyhow!("{}", text.join("; ")))
}

/// Loads the configuration; on violations prints them (when `print`) and fails with exit 3.
fn load(common: &CommonArgs, print: bool) -> CommandResult<KiroConfig> {
    let dotenv = common
        .env_file
        .clone()
        .unwrap_or_else(|| PathBuf::from(".env"));
    if common.env_file.is_some() && !dotenv.exists() {
        return Err(CommandError::configuration(anyhow!(
            "env file {} does not exist",
            dotenv.display()
        )));
    }
    match KiroConfig::load(&environment(), Some(&dotenv)) {
        Ok(config) => Ok(config),
        Err(ConfigError::Invalid(violations)) => {
            if print {
                emit(&violations_json(&violations));
            }
            Err(refused(&violations))
        }
        Err(error) => Err(CommandError::configuration(error)),
    }
}

fn kiro_home(common: &CommonArgs) -> CommandResult<PathBuf> {
    if let Some(home) = &common.kiro_home {
        return Ok(home.clone());
    }
    match std::env::var_os("HOME") {
        Some(home) if !home.is_empty() => Ok(PathBuf::from(home).join(".kiro")),
        _ => Err(CommandError::configuration(anyhow!(
            "HOME is not set; pass --kiro-home DIR"
        ))),
    }
}

fn path_env() -> Option<OsString> {
    std::env::var_os("PATH")
}

fn check(common: &CommonArgs) -> CommandResult {
    let config = load(common, true)?;
    match prerequisites::check(&config, path_env().as_deref()) {
        Ok(found) => {
            emit(&json!({
                "ok": true,
                "config": config.redacted_json(),
                "kiroCli": found.kiro_cli.display().to_string(),
            }));
            Ok(())
        }
        Err(violations) => {
            emit(&violations_json(&violations));
            Err(refused(&violations))
        }
    }
}

fn run_provisioner(config: &KiroConfig, common: &CommonArgs) -> CommandResult<ProvisionReport> {
    let home = kiro_home(common)?;
    let provisioner = Provisioner::new(config.config_path(), &home, config.agent_name().clone())
        .map_err(|e| CommandError::configuration(anyhow!("kiro home {}: {e}", home.display())))?;
    provisioner.provision().map_err(|error| {
        emit(&json!({"ok": false, "error": error.to_string(), "rule": error.rule()}));
        CommandError::configuration(error)
    })
}

fn provision(common: &CommonArgs) -> CommandResult {
    let config = load(common, true)?;
    let report = run_provisioner(&config, common)?;
    emit(
        &json!({"ok": true, "kiroHome": report.kiro_home, "deleted": report.deleted, "copied": report.copied}),
    );
    Ok(())
}

fn init_logging(level: LogLevel) {
    let filter = tracing_subscriber::EnvFilter::new(level.tracing_level().as_str());
    // A second initialisation (tests in one process) keeps the first subscriber.
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .without_time()
        .try_init();
}

fn echo(args: EchoArgs) -> CommandResult {
    let config = load(&args.common, true)?;
    init_logging(config.log_level());
    let found = match prerequisites::check(&config, path_env().as_deref()) {
        Ok(found) => found,
        Err(violations) => {
            emit(&violations_json(&violations));
            return Err(refused(&violations));
        }
    };
    if !args.no_provision {
        let report = run_provisioner(&config, &args.common)?;
        emit(&json!({"event": "provisioned", "deleted": report.deleted, "copied": report.copied}));
    }
    let workspace = std::path::absolute(&found.workspace)
        .map_err(|e| CommandError::configuration(anyhow!("workspace: {e}")))?;
    let mut options = ClientOptions::new(&found.kiro_cli, config.agent_name().clone(), &workspace);
    options.kill_grace = Duration::from_millis(args.grace_ms);
    options.request_timeout = Duration::from_millis(args.request_timeout_ms);
    options.stderr_level = config.log_level();
    // Grandchildren of a killed kiro-cli (its forked chat process, a wrapper's children) are
    // reaped here, so the process group really disappears even where init does not reap.
    crate::transport::child::adopt_orphans();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| CommandError::internal(anyhow!("cannot start the async runtime: {e}")))?;
    let result = runtime.block_on(async move {
        tokio::spawn(echo_turn(options, args))
            .await
            .unwrap_or_else(|e| Err(CommandError::internal(anyhow!("the echo turn failed: {e}"))))
    });
    runtime.shutdown_timeout(Duration::from_millis(100));
    result
}

/// Prints the client's state now (after a kill, a close or a failure: what is true now).
fn state_event(client: &KiroClient) {
    state_reached(client.state());
}

/// Prints the state an operation that succeeded moved the client into. Reading the state
/// afterwards would race with kiro-cli's death: a kiro-cli dying right after the prompt was sent
/// showed DEAD before BUSY, though the death happened while BUSY. The death is printed when it
/// is observed, after this.
fn state_reached(state: ClientState) {
    emit(&json!({"event": "state", "state": state}));
}

fn refusal_event(error: &ClientError) -> bool {
    if let ClientError::WrongState {
        operation,
        state,
        reason,
    } = error
    {
        emit(
            &json!({"event": "refused", "operation": operation, "state": state, "reason": reason}),
        );
        true
    } else {
        false
    }
}

/// Maps a client failure to exit 4 after printing it and the final state.
fn failed(client: &KiroClient, error: ClientError) -> CommandError {
    emit(&json!({"event": "error", "message": error.to_string()}));
    state_event(client);
    CommandError::upstream(error)
}

async fn echo_turn(options: ClientOptions, args: EchoArgs) -> CommandResult {
    let client = KiroClient::spawn(options).map_err(CommandError::upstream)?;
    emit(&json!({"event": "spawned", "pid": client.pid()}));
    state_reached(ClientState::New);
    if args.early_session {
        match client.new_session().await {
            Err(error) if refusal_event(&error) => {}
            Err(error) => return Err(failed(&client, error)),
            Ok(id) => emit(&json!({"event": "session", "sessionId": id})),
        }
    }
    let result = match client.initialize().await {
        Ok(result) => result,
        Err(error) => return Err(failed(&client, error)),
    };
    emit(&json!({"event": "initialized", "agentInfo": result.get("agentInfo")}));
    state_reached(ClientState::Ready);
    let session = match client.new_session().await {
        Ok(session) => session,
        Err(error) => return Err(failed(&client, error)),
    };
    emit(&json!({"event": "session", "sessionId": session}));
    if args.cancel {
        send_cancel(&client, &session).await?;
    }
    let turn = match client.start_prompt(&session, &args.prompt).await {
        Ok(turn) => turn,
        Err(error) => return Err(failed(&client, error)),
    };
    emit(&json!({"event": "prompt", "requestId": turn.request_id()}));
    state_reached(ClientState::Busy);
    if args.second_prompt {
        match client.start_prompt(&session, &args.prompt).await {
            Err(error) if refusal_event(&error) => {}
            Err(error) => return Err(failed(&client, error)),
            Ok(_) => emit(&json!({"event": "second_prompt_sent"})),
        }
    }
    if args.cancel {
        send_cancel(&client, &session).await?;
    }
    let finished = client
        .finish_turn(turn, |event| match event {
            TurnEvent::Chunk { text } => emit(&json!({"event": "chunk", "text": text})),
            TurnEvent::Update { kind } => emit(&json!({"event": "update", "kind": kind})),
            TurnEvent::TurnEnd { stop_reason } => {
                emit(&json!({"event": "turn_end", "stopReason": stop_reason}));
            }
        })
        .await;
    if let Err(error) = finished {
        return Err(failed(&client, error));
    }
    state_reached(ClientState::Ready);
    if args.kill {
        let termination = client.kill().await.map_err(CommandError::upstream)?;
        emit(&json!({
            "event": "killed",
            "pid": termination.pid,
            "sentTerm": termination.sent_term,
            "sentKill": termination.sent_kill,
            "groupGone": termination.group_gone,
            "alive": client.is_alive(),
        }));
        state_event(&client);
        match client.start_prompt(&session, &args.prompt).await {
            Err(error) if refusal_event(&error) => {}
            Err(error) => return Err(CommandError::upstream(error)),
            Ok(_) => emit(&json!({"event": "prompt_after_kill_sent"})),
        }
        if !termination.group_gone {
            return Err(CommandError::upstream(anyhow!(
                "the process group of kiro-cli survived the kill"
            )));
        }
        return Ok(());
    }
    let termination = client.close().await.map_err(CommandError::upstream)?;
    emit(&json!({
        "event": "closed",
        "pid": termination.pid,
        "exitedByItself": termination.exited_before_teardown,
        "sentKill": termination.sent_kill,
        "groupGone": termination.group_gone,
    }));
    state_event(&client);
    Ok(())
}

async fn send_cancel(client: &KiroClient, session: &str) -> CommandResult {
    match client.cancel(session).await {
        Ok(()) => {
            emit(&json!({"event": "cancel_sent", "state": client.state()}));
            Ok(())
        }
        Err(error) => Err(failed(client, error)),
    }
}
