//! `ski-fake-slack`: a fake Slack (Web API, Socket Mode, control API) for tests (see `--help`).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Parser, Subcommand};
use serde_json::json;
use ski::cli::output;
use ski::exit::{CommandError, CommandResult};
use ski_mocks::slack::{Config, FakeSlack};
use tokio::io::AsyncReadExt;
use tokio::signal::unix::{SignalKind, signal};

const AFTER_HELP: &str = "\
Examples:
  ski-fake-slack serve                       the default workspace (team T0000000001, bot
                                             U0000000001, #general C0000000001, #random C0000000002)
  ski-fake-slack serve --config workspace.toml --record /tmp/slack.ndjson
  ski-fake-slack serve --tls --ca-file /tmp/fake-slack-ca.pem
  ski-fake-slack serve --request-url http://127.0.0.1:3000/slack/events --signing-secret S
  curl -s \"$CONTROL_URL/user_message\" \\
    -d '{\"channel\":\"C0000000001\",\"user\":\"U0000000002\",\"text\":\"hi\"}'
  curl -s \"$CONTROL_URL/messages\" -d '{\"channel\":\"C0000000001\"}'

CONTROL_URL is the control_url of the first stdout line.
Exit codes: 0 stopped (stdin closed or SIGTERM); 2 invalid arguments, or --record or --ca-file
cannot be written; 3 an unusable --config; 5 internal failure.";

/// A fake Slack that real Slack clients accept unmodified.
#[derive(Parser)]
#[command(name = "ski-fake-slack", version, after_help = AFTER_HELP)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve the Web API, Socket Mode and the control API on loopback ports until stdin closes or
    /// SIGTERM. The first stdout line is JSON with the URLs.
    #[command(after_help = AFTER_HELP)]
    Serve {
        /// A workspace TOML file (team, bot, users, channels, socket_mode timings, retention, auth,
        /// listener limits).
        #[arg(long, value_name = "FILE")]
        config: Option<PathBuf>,
        /// Write every request, response, frame and note as NDJSON to this file.
        #[arg(long, value_name = "FILE")]
        record: Option<PathBuf>,
        /// Serve the Web API over HTTPS and Socket Mode over WSS, with a certificate from a CA
        /// made at start and written to --ca-file (point SSL_CERT_FILE or the client's CA option
        /// at it).
        #[arg(long)]
        tls: bool,
        /// Where --tls writes the CA certificate (PEM), kept after exit; default: a file in the
        /// temp directory named after this process, removed when the fake stops.
        #[arg(long, value_name = "FILE", requires = "tls")]
        ca_file: Option<PathBuf>,
        /// The Events API over HTTP: POST events, slash commands and interactivity to this
        /// Request URL (http://), signed, instead of sending them over Socket Mode. Taken as
        /// verified; the control API's set_request_url sends the url_verification challenge.
        #[arg(long, value_name = "URL")]
        request_url: Option<String>,
        /// The signing secret of X-Slack-Signature (default: the config's, or
        /// ski-fake-slack-signing-secret); the readiness line names it.
        #[arg(long, value_name = "SECRET")]
        signing_secret: Option<String>,
    },
    /// List the Web API methods the fake serves, one a line; with --markdown, the coverage
    /// matrix (support, rate-limit tier, errors modelled) that mocks/SLACK-METHODS.md holds.
    Methods {
        #[arg(long)]
        markdown: bool,
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
    let (config, record, tls, ca_file, request_url, signing_secret) = match cli.command {
        Command::Serve {
            config,
            record,
            tls,
            ca_file,
            request_url,
            signing_secret,
        } => (config, record, tls, ca_file, request_url, signing_secret),
        Command::Methods { markdown } => {
            let text = if markdown {
                ski_mocks::slack::methods_markdown()
            } else {
                ski_mocks::slack::method_names().join("\n") + "\n"
            };
            output::text(&text);
            return Ok(());
        }
    };
    let mut config = match config {
        Some(path) => Config::load(&path).map_err(CommandError::configuration)?,
        None => Config::default(),
    };
    if let Some(url) = request_url {
        config.events_http.request_url = Some(url);
        config.check().map_err(CommandError::invalid_input)?;
    }
    if let Some(secret) = signing_secret {
        config.events_http.signing_secret = secret;
    }
    let transcript = match record {
        Some(path) => Some(
            std::fs::File::create(&path)
                .with_context(|| format!("cannot create {}", path.display()))
                .map_err(CommandError::invalid_input)?,
        ),
        None => None,
    };
    // The handler is in place before the readiness line, so a SIGTERM right after it is clean.
    let mut terminate = signal(SignalKind::terminate()).map_err(CommandError::internal)?;
    let slack = if tls {
        FakeSlack::start_tls(config, transcript).await
    } else {
        FakeSlack::start_recording(config, transcript).await
    }
    .map_err(CommandError::internal)?;
    // A CA file the fake chose itself is removed again when it stops; one the caller named stays.
    let mut own_ca_file = None;
    let ca_file = match slack.ca_pem() {
        Some(pem) => {
            let path = match ca_file {
                Some(path) => path,
                None => {
                    let path = std::env::temp_dir()
                        .join(format!("ski-fake-slack-{}-ca.pem", std::process::id()));
                    own_ca_file = Some(path.clone());
                    path
                }
            };
            std::fs::write(&path, pem)
                .with_context(|| format!("cannot write the CA to {}", path.display()))
                .map_err(CommandError::invalid_input)?;
            Some(path.display().to_string())
        }
        None => None,
    };
    let mut ready = json!({
        "api_base_url": slack.api_base_url(),
        "socket_mode_url": slack.socket_mode_url(),
        "control_url": slack.control_url(),
        "team_id": slack.config().team.id,
        "bot_user_id": slack.config().bot.user_id,
        "app_id": slack.config().bot.app_id,
        "signing_secret": slack.config().events_http.signing_secret,
        "bot_token": slack.config().auth.bot_token,
        "app_token": slack.config().auth.app_token,
        "user_token": slack.config().auth.user_token,
    });
    if let Some(url) = slack.config().events_http.request_url {
        ready["request_url"] = json!(url);
    }
    if let Some(path) = ca_file {
        ready["ca_file"] = json!(path);
    }
    // A reader that went away (`serve | true`) does not stop the fake: it serves until stdin
    // closes or SIGTERM, as with any reader.
    output::line(&ready);
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
    drop(slack);
    if let Some(path) = own_ca_file {
        // Nothing is lost if it is already gone.
        let _ = std::fs::remove_file(path);
    }
    Ok(())
}
