//! `ski-fake-model`: a fake OpenAI and Anthropic model provider for tests (see `--help`).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Parser, Subcommand};
use serde_json::json;
use ski::cli::output;
use ski::exit::{CommandError, CommandResult};
use ski_mocks::model::{Config, DEFAULT_API_KEY, FakeModel, Script};
use tokio::io::AsyncReadExt;
use tokio::signal::unix::{SignalKind, signal};

const AFTER_HELP: &str = "\
Examples:
  ski-fake-model serve                        answers every request \"end of script\"
  ski-fake-model serve --script turns.toml    answers turn by turn (text, tool calls, refusal,
                                              error, hang; see the ski-mocks README)
  ski-fake-model serve --listen 127.0.0.1:8089 --api-key sk-test
  ski-fake-model serve --record requests.ndjson   every request, written on exit
  OPENAI_BASE_URL=$OPENAI_BASE_URL OPENAI_API_KEY=ski-fake-model-key my-agent
  ANTHROPIC_BASE_URL=$ANTHROPIC_BASE_URL ANTHROPIC_API_KEY=ski-fake-model-key my-agent
  curl -s \"$OPENAI_BASE_URL/chat/completions\" -H 'authorization: Bearer ski-fake-model-key' \\
    -d '{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}'

The first stdout line is JSON: openai_base_url, anthropic_base_url, api_keys.
Exit codes: 0 stopped (stdin closed or SIGTERM); 2 invalid arguments or --listen not loopback;
3 an unusable --script; 5 internal failure (the address is taken).";

/// A fake model provider that the OpenAI and Anthropic clients accept unmodified.
#[derive(Parser)]
#[command(name = "ski-fake-model", version, after_help = AFTER_HELP)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve OpenAI Chat Completions and Responses, Anthropic Messages and /v1/models on one
    /// loopback port until stdin closes or SIGTERM. The first stdout line is JSON with the URLs.
    #[command(after_help = AFTER_HELP)]
    Serve {
        /// A TOML script of turns; without one, every request is answered "end of script".
        #[arg(long, value_name = "FILE")]
        script: Option<PathBuf>,
        /// The loopback address to listen on.
        #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:0")]
        listen: SocketAddr,
        /// A key to accept (repeatable; default ski-fake-model-key).
        #[arg(long = "api-key", value_name = "KEY")]
        api_keys: Vec<String>,
        /// Accept any request, with any key or none.
        #[arg(long, conflicts_with = "api_keys")]
        any_key: bool,
        /// On exit, write the request log (bounded, oldest first) to this file as NDJSON.
        #[arg(long, value_name = "FILE")]
        record: Option<PathBuf>,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => return CommandError::internal(error).report(),
    };
    let outcome = runtime.block_on(run(cli));
    // The stdin reader sits on a blocking thread that a SIGTERM leaves waiting: do not wait for it.
    runtime.shutdown_background();
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => error.report(),
    }
}

async fn run(cli: Cli) -> CommandResult {
    let Command::Serve {
        script,
        listen,
        api_keys,
        any_key,
        record,
    } = cli.command;
    if !listen.ip().is_loopback() {
        return Err(CommandError::invalid_input(anyhow::anyhow!(
            "--listen {listen} is not a loopback address"
        )));
    }
    let script = match script {
        Some(path) => Script::load(&path).map_err(CommandError::configuration)?,
        None => Script::default(),
    };
    let api_keys = if any_key {
        Vec::new()
    } else if api_keys.is_empty() {
        vec![DEFAULT_API_KEY.to_string()]
    } else {
        api_keys
    };
    // The handler is in place before the readiness line, so a SIGTERM right after it is clean.
    let mut terminate = signal(SignalKind::terminate()).map_err(CommandError::internal)?;
    let model = FakeModel::start(Config {
        script,
        api_keys,
        listen,
        ..Config::default()
    })
    .await
    .map_err(CommandError::internal)?;
    output::line(json!({
        "openai_base_url": model.openai_base_url(),
        "anthropic_base_url": model.anthropic_base_url(),
        "api_keys": model.api_keys(),
    }));
    let mut stdin = tokio::io::stdin();
    let mut buffer = [0u8; 1024];
    loop {
        tokio::select! {
            read = stdin.read(&mut buffer) => match read {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            },
            _ = terminate.recv() => break,
        }
    }
    if let Some(path) = record {
        let mut lines = String::new();
        for request in model.requests() {
            lines.push_str(&json!(request).to_string());
            lines.push('\n');
        }
        std::fs::write(&path, lines)
            .with_context(|| format!("cannot write the request log to {}", path.display()))
            .map_err(CommandError::internal)?;
    }
    drop(model);
    Ok(())
}
