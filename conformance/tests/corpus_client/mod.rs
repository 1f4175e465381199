//! The ACP defect corpus's own client: a small ACP client over stdio, built from ski's JSON-RPC
//! and ACP types, that conforms when run without a defect and breaks exactly one requirement with
//! each `--defect`. It is the `acp_defects` test binary started again as `<test> --acp-client
//! ARGS…` (`{corpus_client}` in `corpus.toml`), so it needs no build of its own and is no part of
//! any product.
//!
//! `--agent-cmd CMD --cwd DIR --prompt TEXT… [--session-id ID] [--defect NAME]`: starts the agent,
//! initializes, opens a session (or uses the one given), runs one turn per prompt and ends the
//! agent. It prints what `ski acp client connect --json` prints: a `session_update` line for each
//! valid update of its session and a `prompt_result` line after each turn. It answers
//! `session/request_permission` with an allow option and every other request -32601.
//!
//! `--remote MODE …` runs one of the remote modes of [`remote`] instead (the client rows of ACP's
//! remote transport RFD).

mod connection;
mod output;
mod remote;

use std::process::ExitCode;
use std::time::Duration;

use ski::acp::{
    InitializeRequest, InitializeResponse, NewSessionRequest, NewSessionResponse, PROTOCOL_VERSION,
    PromptRequest, PromptResponse, StopReason, methods,
};
use ski::jsonrpc::ErrorCode;

use connection::Connection;

/// The first argument that turns the test binary into this client.
pub const FLAG: &str = "--acp-client";

/// How long the agent has to exit once its stdin is closed before its group is signalled.
const EXIT_GRACE: Duration = Duration::from_secs(3);

/// The one requirement a run breaks, or none.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Defect {
    /// Nothing: the conforming client.
    None,
    /// A pending request takes the next response, whatever its id (WS-008).
    AnswersInOrder,
    /// Updates are printed as they arrived, invalid ones too (WS-046).
    PrintsInvalidUpdates,
    /// An unknown notification is answered with a -32601 error (ACP-CORE-033).
    AnswersNotifications,
    /// Every session's updates are printed as the client's own session's (ACP-CORE-033).
    MixesSessions,
    /// An update after its turn's result ends the run with an error (ACP-CORE-035).
    FailsOnLateUpdates,
    /// A prompt answered -32800 ends the run with an error instead of the turn (ACP-CORE-036).
    CancelledAsError,
    /// The agent is left running when it does not exit once its stdin is closed (ACP-CORE-037).
    LeavesAgentRunning,
    /// An update of a kind the client does not know ends the run with an error (ACP-CORE-039).
    RefusesUnknownKinds,
}

impl Defect {
    fn parse(name: &str) -> Result<Self, String> {
        Ok(match name {
            "answers-in-order" => Defect::AnswersInOrder,
            "prints-invalid-updates" => Defect::PrintsInvalidUpdates,
            "answers-notifications" => Defect::AnswersNotifications,
            "mixes-sessions" => Defect::MixesSessions,
            "fails-on-late-updates" => Defect::FailsOnLateUpdates,
            "cancelled-as-error" => Defect::CancelledAsError,
            "leaves-agent-running" => Defect::LeavesAgentRunning,
            "refuses-unknown-kinds" => Defect::RefusesUnknownKinds,
            other => return Err(format!("unknown --defect {other:?}")),
        })
    }
}

/// The command line.
#[derive(Debug)]
struct Args {
    agent_cmd: Vec<String>,
    cwd: String,
    prompts: Vec<String>,
    session_id: Option<String>,
    defect: Defect,
}

impl Args {
    fn parse(words: &[String]) -> Result<Self, String> {
        let mut args = Args {
            agent_cmd: Vec::new(),
            cwd: String::new(),
            prompts: Vec::new(),
            session_id: None,
            defect: Defect::None,
        };
        let mut words = words.iter();
        while let Some(flag) = words.next() {
            let value = words
                .next()
                .ok_or_else(|| format!("{flag} needs a value"))?;
            match flag.as_str() {
                "--agent-cmd" => {
                    args.agent_cmd = shell_words::split(value)
                        .map_err(|e| format!("--agent-cmd {value:?}: {e}"))?;
                }
                "--cwd" => args.cwd = value.clone(),
                "--prompt" => args.prompts.push(value.clone()),
                "--session-id" => args.session_id = Some(value.clone()),
                "--defect" => args.defect = Defect::parse(value)?,
                other => return Err(format!("unknown argument {other:?}")),
            }
        }
        if args.agent_cmd.is_empty() || args.cwd.is_empty() || args.prompts.is_empty() {
            return Err("--agent-cmd, --cwd and --prompt are required".to_owned());
        }
        Ok(args)
    }
}

/// Runs the client when the command line asks for it (`<test> --acp-client ARGS…`); its exit
/// code, or `None` for a test run.
pub fn run_if_asked() -> Option<ExitCode> {
    let argv: Vec<String> = std::env::args().collect();
    if argv.get(1).map(String::as_str) != Some(FLAG) {
        return None;
    }
    if argv.get(2).map(String::as_str) == Some(remote::REMOTE) {
        return Some(remote::run(&argv[3..]));
    }
    let args = match Args::parse(&argv[2..]) {
        Ok(args) => args,
        Err(error) => {
            eprintln!("corpus client: {error}");
            return Some(ExitCode::from(2));
        }
    };
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("corpus client: no runtime: {error}");
            return Some(ExitCode::from(5));
        }
    };
    Some(runtime.block_on(run(args)))
}

async fn run(args: Args) -> ExitCode {
    let mut connection = match Connection::start(&args.agent_cmd, args.defect) {
        Ok(connection) => connection,
        Err(error) => {
            eprintln!("corpus client: {error}");
            return ExitCode::from(4);
        }
    };
    let result = turns(&mut connection, &args).await;
    let ended = connection.end(EXIT_GRACE).await;
    match result.and(ended) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("corpus client: {error}");
            ExitCode::from(4)
        }
    }
}

/// Initialize, the session, then one turn per prompt.
async fn turns(connection: &mut Connection, args: &Args) -> Result<(), String> {
    let initialize = InitializeRequest {
        protocol_version: PROTOCOL_VERSION,
        client_capabilities: Some(Default::default()),
        client_info: Some(ski::acp::Implementation::new("ski-corpus-client", "1")),
        extra: Default::default(),
    };
    let answer: InitializeResponse = connection
        .call(methods::INITIALIZE, &initialize)
        .await?
        .map_err(|e| format!("initialize was answered {e}"))?;
    if answer.protocol_version != PROTOCOL_VERSION {
        return Err(format!(
            "the agent speaks protocol version {}",
            answer.protocol_version
        ));
    }
    let session_id = match &args.session_id {
        Some(id) => id.clone(),
        None => {
            let request = NewSessionRequest::new(args.cwd.as_str());
            let answer: NewSessionResponse = connection
                .call(methods::SESSION_NEW, &request)
                .await?
                .map_err(|e| format!("session/new was answered {e}"))?;
            answer.session_id
        }
    };
    connection.follow(&session_id);
    for text in &args.prompts {
        let request = PromptRequest::text(session_id.as_str(), text.as_str());
        let answer = connection
            .call::<_, PromptResponse>(methods::SESSION_PROMPT, &request)
            .await?;
        let stop_reason = match answer {
            Ok(answer) => answer.stop_reason,
            Err(error)
                if error.code == ErrorCode::REQUEST_CANCELLED
                    && args.defect != Defect::CancelledAsError =>
            {
                StopReason::Cancelled
            }
            Err(error) => return Err(format!("session/prompt was answered {error}")),
        };
        output::prompt_result(&session_id, &stop_reason);
    }
    Ok(())
}
