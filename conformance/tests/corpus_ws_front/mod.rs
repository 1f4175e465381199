//! The ACP defect corpus's WebSocket front: an ACP agent that serves WebSocket (`ski acp serve
//! --transport ws`) behind a small relay that passes every frame on unchanged, one upstream
//! connection per client connection, or breaks exactly one WebSocket requirement with
//! `--ws-front-defect NAME`. It is the `acp_defects` test binary started again as `<test>
//! --acp-ws-front AGENT ARGV…` (`{corpus_ws_front}` in `corpus.toml`).
//!
//! The runner appends its `ws_args` (`--transport ws --listen 127.0.0.1:0`) to the command: they
//! go to the agent, whose printed `ws://` address the front connects to; the front then listens on
//! a port of its own and prints `listening on ws://…` as the agent would. Without `--transport ws`
//! (a stdio row) the front becomes the agent itself.

mod relay;

use std::os::unix::process::CommandExt;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use ski::transport::child::{ChildSpec, OutputStream, spawn};

/// The first argument that turns the test binary into the front.
pub const FLAG: &str = "--acp-ws-front";

/// The argument, anywhere after [`FLAG`], that names the front's defect.
const DEFECT_FLAG: &str = "--ws-front-defect";

/// How long the agent has to print its address.
const START_LIMIT: Duration = Duration::from_secs(60);

/// The one WebSocket requirement the front breaks, or none.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Defect {
    /// Nothing: every frame passes unchanged.
    None,
    /// `session/update` notifications never reach the client (WS-001).
    DropsUpdates,
    /// The agent exits when a client leaves with a request unanswered (WS-003).
    DiesOnDisconnect,
    /// Every response goes to the most recently connected client (WS-020).
    AnswersLatestConnection,
    /// Every notification goes to the most recently connected client (WS-021).
    NotifiesLatestConnection,
    /// A client's answer to session/request_permission reaches the agent as cancelled (WS-026).
    CancelsPermissionAnswers,
    /// A closed client link leaves the agent's connection open, its requests pending (WS-027).
    KeepsClosedLinks,
    /// A binary frame is taken as a text frame (ACP-CORE-026).
    ReadsBinaryFrames,
    /// The upgrade response carries no Acp-Connection-Id header (ACP-CORE-027).
    NoConnectionId,
    /// `plan` updates are dropped over WebSocket, so its turns differ from stdio's (WS-048).
    DropsPlanUpdates,
}

impl Defect {
    fn parse(name: &str) -> Result<Self, String> {
        Ok(match name {
            "drops-updates" => Defect::DropsUpdates,
            "dies-on-disconnect" => Defect::DiesOnDisconnect,
            "answers-latest-connection" => Defect::AnswersLatestConnection,
            "notifies-latest-connection" => Defect::NotifiesLatestConnection,
            "cancels-permission-answers" => Defect::CancelsPermissionAnswers,
            "keeps-closed-links" => Defect::KeepsClosedLinks,
            "reads-binary-frames" => Defect::ReadsBinaryFrames,
            "no-connection-id" => Defect::NoConnectionId,
            "drops-plan-updates" => Defect::DropsPlanUpdates,
            other => return Err(format!("unknown {DEFECT_FLAG} {other:?}")),
        })
    }
}

/// Runs the front when the command line asks for it; its exit code, or `None` for a test run.
pub fn run_if_asked() -> Option<ExitCode> {
    let argv: Vec<String> = std::env::args().collect();
    if argv.get(1).map(String::as_str) != Some(FLAG) {
        return None;
    }
    let mut agent = Vec::new();
    let mut defect = Defect::None;
    let mut words = argv[2..].iter();
    while let Some(word) = words.next() {
        if word != DEFECT_FLAG {
            agent.push(word.clone());
            continue;
        }
        match words.next().map(|name| Defect::parse(name)) {
            Some(Ok(parsed)) => defect = parsed,
            Some(Err(error)) => return Some(fail(&error, 2)),
            None => return Some(fail(&format!("{DEFECT_FLAG} needs a name"), 2)),
        }
    }
    let Some((program, args)) = agent.split_first() else {
        return Some(fail("no agent command", 2));
    };
    if !args
        .windows(2)
        .any(|w| w[0] == "--transport" && w[1] == "ws")
    {
        let error = std::process::Command::new(program).args(args).exec();
        return Some(fail(&format!("cannot run {program}: {error}"), 4));
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => return Some(fail(&format!("no runtime: {error}"), 5)),
    };
    Some(match runtime.block_on(serve(&agent, defect)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => fail(&error, 4),
    })
}

fn fail(error: &str, code: u8) -> ExitCode {
    eprintln!("corpus ws front: {error}");
    ExitCode::from(code)
}

/// Starts the agent, waits for its address, then relays every connection to it.
async fn serve(agent: &[String], defect: Defect) -> Result<(), String> {
    let spec = ChildSpec::from_argv("agent", agent).ok_or("no agent command")?;
    let mut child = spawn(spec).map_err(|e| format!("cannot start the agent: {e}"))?;
    let upstream = tokio::time::timeout(START_LIMIT, async {
        while let Some((_, line)) = child.next_output_line().await {
            // The agent's own address is not printed: the runner takes the first it sees.
            if let Some(url) = ws_url(&line) {
                return Some(url);
            }
            eprintln!("{line}");
        }
        None
    })
    .await
    .ok()
    .flatten()
    .ok_or("the agent printed no ws:// address")?;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(|e| format!("cannot listen: {e}"))?;
    let address = listener.local_addr().map_err(|e| e.to_string())?;
    eprintln!("corpus ws front: listening on ws://{address}/acp");
    let agent_pid = child.pid();
    // The agent's later output goes on to stderr; the agent ends with the front.
    let ended = tokio::spawn(async move {
        while let Some((stream, line)) = child.next_output_line().await {
            if stream == OutputStream::Stderr || !line.is_empty() {
                eprintln!("{line}");
            }
        }
        let _ = child.wait().await;
    });
    let relay = Arc::new(relay::Relay::new(upstream, defect, agent_pid));
    tokio::select! {
        _ = ended => Err("the agent ended".to_owned()),
        accepted = relay::accept_all(relay, listener) => accepted,
    }
}

/// The first `ws://` address in `line`.
fn ws_url(line: &str) -> Option<String> {
    let start = line.find("ws://")?;
    let url: String = line[start..]
        .chars()
        .take_while(|c| !c.is_whitespace() && *c != '"')
        .collect();
    Some(url)
}
