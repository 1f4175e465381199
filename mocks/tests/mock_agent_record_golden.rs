//! The recordings of real agents in `golden/recordings/`: each replays to ski's own ACP client
//! (`ski acp client connect`) with the transcript shape the recording holds, and where the
//! recorded agent is installed (`conformance/targets/peers/`), the live agent gives the client
//! the same shape and `ski-mock-agent diff` finds no drift. The replay half always runs.

use crate::agent_support;

use std::path::{Path, PathBuf};

use agent_support::{Agent, PATIENCE, Start, binary};
use serde_json::{Value, json};
use ski::transport::child::{ChildSpec, OutputStream, spawn};
use ski_mocks::agent::pool::recordings_in;
use ski_mocks::agent::recording::{MessageKind, Recording, method_of, prompt_text_of};

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the workspace")
        .to_owned()
}

/// `ski`, built beside the mock agent.
fn ski() -> PathBuf {
    let path = Path::new(binary()).with_file_name("ski");
    assert!(
        path.is_file(),
        "{} is missing: run `cargo build -p ski --bin ski`",
        path.display()
    );
    path
}

fn recordings() -> Vec<(PathBuf, Recording)> {
    let dir = workspace().join("golden/recordings");
    let recordings = recordings_in(&dir).expect("golden/recordings loads");
    assert!(
        recordings.len() >= 2,
        "the SDK echo recordings are in {}",
        dir.display()
    );
    let root = workspace().display().to_string();
    for (path, _) in &recordings {
        let text = std::fs::read_to_string(path).expect("a recording");
        assert!(!text.contains(&root), "{} names {root}", path.display());
    }
    recordings
}

fn prompts(recording: &Recording) -> Vec<String> {
    recording
        .exchanges
        .iter()
        .filter_map(|e| e.client.as_ref())
        .filter(|c| method_of(c) == Some("session/prompt"))
        .filter_map(prompt_text_of)
        .collect()
}

/// What a client shows of a turn: update kinds with their text, and stop reasons.
fn recorded_shape(recording: &Recording) -> Vec<String> {
    let mut out = Vec::new();
    for exchange in &recording.exchanges {
        if exchange.client.as_ref().and_then(method_of) != Some("session/prompt") {
            continue;
        }
        for message in exchange.agent.iter().filter_map(|l| l.message.as_ref()) {
            if method_of(message) == Some("session/update") {
                let update = &message["params"]["update"];
                out.push(format!(
                    "update {} {}",
                    update["sessionUpdate"].as_str().unwrap_or("?"),
                    update["content"]["text"].as_str().unwrap_or("")
                ));
            } else if MessageKind::of(message) == MessageKind::Result {
                out.push(format!(
                    "result {}",
                    message["result"]["stopReason"].as_str().unwrap_or("?")
                ));
            }
        }
    }
    out
}

fn client_shape(lines: &[Value]) -> Vec<String> {
    lines
        .iter()
        .filter_map(|line| match line["type"].as_str() {
            Some("session_update") => Some(format!(
                "update {} {}",
                line["update"].as_str().unwrap_or("?"),
                line["text"].as_str().unwrap_or("")
            )),
            Some("prompt_result") => Some(format!(
                "result {}",
                line["stopReason"].as_str().unwrap_or("?")
            )),
            _ => None,
        })
        .collect()
}

/// Runs a program in the workspace to its end; answers (exit code, stdout lines).
async fn run(program: &Path, args: &[String]) -> (i32, Vec<String>) {
    let spec = ChildSpec::new("run", program).args(args).cwd(workspace());
    let mut child = spawn(spec).expect("the program starts");
    child.close_stdin();
    let mut out = Vec::new();
    let read = async {
        while let Some((stream, line)) = child.next_output_line().await {
            if stream == OutputStream::Stdout {
                out.push(line);
            }
        }
    };
    tokio::time::timeout(PATIENCE * 3, read)
        .await
        .expect("the program ends");
    let status = child.wait().await.expect("an exit status");
    (status.code().unwrap_or(-1), out)
}

/// `ski acp client connect --json` against `agent_cmd` with the recording's prompts.
async fn client_run(agent_cmd: &str, prompts: &[String]) -> Vec<String> {
    let mut args = vec![
        "acp".to_owned(),
        "client".to_owned(),
        "connect".to_owned(),
        "--json".to_owned(),
        "--agent-cmd".to_owned(),
        agent_cmd.to_owned(),
    ];
    for prompt in prompts {
        args.push("--prompt".to_owned());
        args.push(prompt.clone());
    }
    let (code, lines) = run(&ski(), &args).await;
    assert_eq!(code, 0, "ski acp client against {agent_cmd}: {lines:?}");
    let values: Vec<Value> = lines
        .iter()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    client_shape(&values)
}

/// The recorded command, when every file it names is installed here.
fn live_command(recording: &Recording) -> Option<String> {
    let command = &recording.spec.command;
    let installed = command
        .iter()
        .all(|word| !word.contains('/') || workspace().join(word).exists())
        && !command.is_empty();
    installed.then(|| shell_words::join(command))
}

#[tokio::test]
async fn each_recording_replays_to_skis_client_as_the_live_agent_answered() {
    for (path, recording) in recordings() {
        let prompts = prompts(&recording);
        if prompts.is_empty() {
            continue;
        }
        let replay_cmd = shell_words::join([binary(), "--script", &path.display().to_string()]);
        let replayed = client_run(&replay_cmd, &prompts).await;
        assert_eq!(replayed, recorded_shape(&recording), "{}", path.display());
        if let Some(live_cmd) = live_command(&recording) {
            let live = client_run(&live_cmd, &prompts).await;
            assert_eq!(
                live,
                replayed,
                "live {} against its recording",
                path.display()
            );
        }
    }
}

#[tokio::test]
async fn each_recordings_initialize_replays_with_the_live_id() {
    for (path, recording) in recordings() {
        let first = &recording.exchanges[0];
        let client = first.client.as_ref().expect("the client's initialize");
        assert_eq!(method_of(client), Some("initialize"));
        let recorded = first.agent[0].message.as_ref().expect("the answer");
        let mut agent = Agent::start(Start::args(&[
            "--script".to_owned(),
            path.display().to_string(),
        ]));
        let id = agent.request("initialize", client["params"].clone()).await;
        let (_, answer) = agent.until_response(&json!(id)).await;
        assert_eq!(answer["result"], recorded["result"], "{}", path.display());
        agent.close_stdin();
        assert_eq!(agent.code().await, 0);
    }
}

#[tokio::test]
async fn each_installed_agent_shows_no_drift_from_its_recording() {
    for (path, recording) in recordings() {
        let Some(live_cmd) = live_command(&recording) else {
            continue;
        };
        let mut args = vec![
            "diff".to_owned(),
            path.display().to_string(),
            "--".to_owned(),
        ];
        args.extend(recording.spec.command.iter().cloned());
        let (code, out) = run(Path::new(binary()), &args).await;
        assert_eq!(code, 0, "{live_cmd}: {out:?}");
    }
}
