//! Unmodified ACP clients against the recordings in `golden/recordings/` replayed by
//! `ski-mock-agent --script FILE`: the official TypeScript SDK's client
//! (`conformance/targets/peers/ts-sdk-client/`) and acpx (`conformance/targets/peers/acpx/`),
//! each installed by its own script into the target directory. Each client sees a replay as the
//! recording holds it, and where the recorded agent is installed, exactly as it sees the live
//! agent. When `node`/`npm` is missing, or an install cannot reach its registry, the test says
//! plainly that the client did not run.

use crate::agent_support;
use crate::peer_support;

use std::path::{Path, PathBuf};
use std::time::Duration;

use agent_support::{PATIENCE, binary};
use peer_support::{install, on_path};
use serde_json::Value;
use ski::transport::child::{ChildSpec, OutputStream, spawn};
use ski_mocks::agent::pool::recordings_in;
use ski_mocks::agent::recording::{MessageKind, Recording, method_of, prompt_text_of};

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the workspace")
        .to_owned()
}

/// Runs a program to its end in `cwd`, ends whatever it left in its process group, and answers
/// (exit code, stdout lines, stderr text).
async fn run(spec: ChildSpec) -> (Option<i32>, Vec<String>, String) {
    let mut child = spawn(spec.grace(Duration::from_millis(500))).expect("the program starts");
    child.close_stdin();
    let mut out = Vec::new();
    let mut err = String::new();
    let read = async {
        while let Some((stream, line)) = child.next_output_line().await {
            match stream {
                OutputStream::Stdout => out.push(line),
                OutputStream::Stderr => {
                    err.push_str(&line);
                    err.push('\n');
                }
            }
        }
    };
    let ended = tokio::time::timeout(PATIENCE * 3, read).await;
    let termination = child.shutdown().await.expect("the group ends");
    assert!(ended.is_ok(), "the program did not end: {out:?} {err}");
    (termination.status.and_then(|s| s.code()), out, err)
}

fn recordings() -> Vec<(PathBuf, Recording)> {
    let dir = workspace().join("golden/recordings");
    let recordings = recordings_in(&dir).expect("golden/recordings loads");
    assert!(
        !recordings.is_empty(),
        "recordings are in {}",
        dir.display()
    );
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

/// The recorded command, when every file it names is installed here.
fn live_command(recording: &Recording) -> Option<Vec<String>> {
    let command = &recording.spec.command;
    let installed = !command.is_empty()
        && command
            .iter()
            .all(|word| !word.contains('/') || workspace().join(word).exists());
    installed.then(|| command.clone())
}

/// The replay's command line.
fn replay_command(path: &Path) -> Vec<String> {
    vec![
        binary().to_owned(),
        "--script".to_owned(),
        path.display().to_string(),
    ]
}

/// What the SDK client's lines show: its `initialize`, `session_update` and `prompt_result`
/// lines as they are (they carry no id).
fn sdk_shape(lines: &[String]) -> Vec<String> {
    lines
        .iter()
        .map(|line| serde_json::from_str::<Value>(line).expect("a JSON line"))
        .filter(|line| {
            matches!(
                line["type"].as_str(),
                Some("initialize" | "session_update" | "prompt_result")
            )
        })
        .map(|line| line.to_string())
        .collect()
}

/// The same lines as the recording holds them: the agent's `initialize` answer, then each
/// prompt's updates and result.
fn recorded_sdk_shape(recording: &Recording) -> Vec<String> {
    let mut out = Vec::new();
    for exchange in &recording.exchanges {
        let method = exchange.client.as_ref().and_then(method_of);
        for message in exchange.agent.iter().filter_map(|l| l.message.as_ref()) {
            let kind = MessageKind::of(message);
            let line = match method {
                Some("initialize") if kind == MessageKind::Result => serde_json::json!({
                    "type": "initialize",
                    "protocolVersion": message["result"]["protocolVersion"],
                    "agent": message["result"]["agentInfo"]["name"],
                }),
                Some("session/prompt") if method_of(message) == Some("session/update") => {
                    let update = &message["params"]["update"];
                    serde_json::json!({
                        "type": "session_update",
                        "update": update["sessionUpdate"],
                        "text": update["content"]["text"].as_str().unwrap_or(""),
                    })
                }
                Some("session/prompt") if kind == MessageKind::Result => serde_json::json!({
                    "type": "prompt_result",
                    "stopReason": message["result"]["stopReason"],
                }),
                _ => continue,
            };
            out.push(line.to_string());
        }
    }
    out
}

/// The TypeScript SDK client against `agent`, in a fresh directory.
async fn sdk_client(
    client: &Path,
    prompts: &[String],
    agent: &[String],
) -> (Option<i32>, Vec<String>) {
    let dir = tempfile::tempdir().expect("a directory");
    let mut spec = ChildSpec::new("ts-sdk-client", "node")
        .arg(client.join("sdk-client.mjs"))
        .cwd(dir.path());
    for prompt in prompts {
        spec = spec.arg("--prompt").arg(prompt);
    }
    let mut args = vec!["--".to_owned()];
    args.extend(agent.iter().map(|word| absolute(word)));
    let (code, out, err) = run(spec.args(&args)).await;
    assert!(
        code == Some(0) || code == Some(1),
        "ts-sdk-client against {agent:?}: {code:?} {out:?}\n{err}"
    );
    (code, out)
}

/// A word of a recorded command line naming a file of the workspace, made absolute.
fn absolute(word: &str) -> String {
    if word.contains('/') && workspace().join(word).exists() {
        workspace().join(word).display().to_string()
    } else {
        word.to_owned()
    }
}

#[tokio::test]
async fn the_typescript_sdk_client_sees_each_replay_as_recorded_and_as_the_live_agent() {
    if !on_path("node") || !on_path("npm") {
        println!("ts-sdk-client: NOT RUN (node or npm is not on PATH)");
        return;
    }
    let Some(client) = install("ts-sdk-client").await else {
        return;
    };
    let mut live_runs = 0;
    for (path, recording) in recordings() {
        let prompts = prompts(&recording);
        let (code, replayed) = sdk_client(&client, &prompts, &replay_command(&path)).await;
        let replayed = sdk_shape(&replayed);
        assert_eq!(
            replayed,
            recorded_sdk_shape(&recording),
            "{}",
            path.display()
        );
        if prompts.is_empty() {
            // An initialize-only recording: the session the client asks for next is not in it.
            continue;
        }
        assert_eq!(code, Some(0), "{}", path.display());
        if let Some(live) = live_command(&recording) {
            let (code, live) = sdk_client(&client, &prompts, &live).await;
            assert_eq!(code, Some(0));
            assert_eq!(sdk_shape(&live), replayed, "live {}", path.display());
            live_runs += 1;
        }
    }
    println!("ts-sdk-client: ran, {live_runs} recording(s) also against the live agent");
}

/// What acpx prints with `--format json`, each wire line without its ids: a request's or
/// notification's method (an update's kind and text), a result's stop reason, an error's code.
fn acpx_shape(lines: &[String]) -> Vec<String> {
    lines
        .iter()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .map(|message| match method_of(&message) {
            Some("session/update") => {
                let update = &message["params"]["update"];
                format!(
                    "session/update {} {}",
                    update["sessionUpdate"].as_str().unwrap_or("?"),
                    update["content"]["text"].as_str().unwrap_or("")
                )
            }
            Some(method) => method.to_owned(),
            None if message.get("error").is_some() => {
                format!("error {}", message["error"]["code"])
            }
            None => format!(
                "result {}",
                message["result"]["stopReason"].as_str().unwrap_or("")
            ),
        })
        .collect()
}

/// The recording's first prompt turn as [`acpx_shape`] shows it.
fn recorded_first_turn(recording: &Recording) -> Vec<String> {
    let Some(exchange) = recording
        .exchanges
        .iter()
        .find(|e| e.client.as_ref().and_then(method_of) == Some("session/prompt"))
    else {
        return Vec::new();
    };
    let lines: Vec<String> = exchange
        .client
        .iter()
        .chain(exchange.agent.iter().filter_map(|l| l.message.as_ref()))
        .map(Value::to_string)
        .collect();
    acpx_shape(&lines)
}

/// `acpx --agent AGENT --format json --approve-all exec PROMPT`, with its own home and cwd.
async fn acpx(acpx: &Path, prompt: &str, agent: &[String]) -> Vec<String> {
    let dir = tempfile::tempdir().expect("a directory");
    let agent: Vec<String> = agent.iter().map(|word| absolute(word)).collect();
    let spec = ChildSpec::new("acpx", "node")
        .arg(acpx.join("node_modules/acpx/dist/cli.js"))
        .arg("--agent")
        .arg(shell_words::join(&agent))
        .args(["--format", "json", "--approve-all", "exec", prompt])
        .cwd(dir.path())
        .env("HOME", dir.path());
    let (code, out, err) = run(spec).await;
    assert_eq!(code, Some(0), "acpx against {agent:?}: {out:?}\n{err}");
    acpx_shape(&out)
}

#[tokio::test]
async fn acpx_sees_each_replay_as_recorded_and_as_the_live_agent() {
    if !on_path("node") || !on_path("npm") {
        println!("acpx: NOT RUN (node or npm is not on PATH)");
        return;
    }
    let Some(installed) = install("acpx").await else {
        return;
    };
    let mut live_runs = 0;
    for (path, recording) in recordings() {
        let Some(prompt) = prompts(&recording).into_iter().next() else {
            continue;
        };
        let replayed = acpx(&installed, &prompt, &replay_command(&path)).await;
        let turn: Vec<String> = replayed
            .iter()
            .skip_while(|line| *line != "session/prompt")
            .cloned()
            .collect();
        assert_eq!(turn, recorded_first_turn(&recording), "{}", path.display());
        if let Some(live) = live_command(&recording) {
            let live = acpx(&installed, &prompt, &live).await;
            assert_eq!(live, replayed, "live {}", path.display());
            live_runs += 1;
        }
    }
    println!("acpx: ran, {live_runs} recording(s) also against the live agent");
}
