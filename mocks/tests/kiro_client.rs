//! `ski::kiro::client` against `ski-mock-agent --script kiro` installed as `kiro-cli`, through
//! real pipes: the full flow, streaming, the state machine, kill with the SIGKILL fallback, death
//! detection and hostile output (a stderr flood, a 10 MiB line, invalid UTF-8, a line that is not
//! JSON).

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::Value;
use ski::kiro::agent_name::AgentName;
use ski::kiro::client::{ClientError, ClientOptions, ClientState, KiroClient, TurnEvent};
use ski::transport::child::group_exists;
use ski_mocks::testing::KIRO_RULES;

/// The mock's script: the kiro personality with the rules the kiro conformance suite uses.
fn script_text() -> String {
    format!("personality = \"kiro\"\n{KIRO_RULES}")
}

struct Setup {
    dir: tempfile::TempDir,
    program: PathBuf,
}

impl Setup {
    /// `kiro-cli` is the mock with the script above; with `ignore_term` it is a shell that
    /// ignores SIGTERM and outlives the mock, so only SIGKILL ends it.
    fn new(ignore_term: bool) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let script = dir.path().join("kiro.toml");
        std::fs::write(&script, script_text()).unwrap();
        let mock = env!("CARGO_BIN_EXE_ski-mock-agent");
        let transcript = dir.path().join("transcript.jsonl");
        let body = if ignore_term {
            format!(
                "#!/bin/sh\ntrap '' TERM\n'{mock}' --script '{}' --transcript '{}' \"$@\"\nwhile :; do sleep 1; done\n",
                script.display(),
                transcript.display()
            )
        } else {
            format!(
                "#!/bin/sh\nexec '{mock}' --script '{}' --transcript '{}' \"$@\"\n",
                script.display(),
                transcript.display()
            )
        };
        let bin = dir.path().join("bin");
        std::fs::create_dir(&bin).unwrap();
        let program = bin.join("kiro-cli");
        std::fs::write(&program, body).unwrap();
        std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).unwrap();
        Self { dir, program }
    }

    fn options(&self, grace: Duration) -> ClientOptions {
        let mut options = ClientOptions::new(
            &self.program,
            AgentName::parse("tg-acp").unwrap(),
            self.dir.path(),
        );
        options.kill_grace = grace;
        options
    }

    /// The lines the client wrote, as the mock recorded them.
    fn sent(&self) -> Vec<Value> {
        read_transcript(&self.dir.path().join("transcript.jsonl"))
            .into_iter()
            .filter(|r| r["kind"] == "in")
            .map(|r| serde_json::from_str(r["text"].as_str().unwrap()).unwrap())
            .collect()
    }
}

fn read_transcript(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

async fn ready(setup: &Setup, grace: Duration) -> (KiroClient, String) {
    let client = KiroClient::spawn(setup.options(grace)).unwrap();
    assert_eq!(client.state(), ClientState::New);
    let init = client.initialize().await.unwrap();
    assert_eq!(init["agentCapabilities"]["loadSession"], true);
    assert_eq!(client.state(), ClientState::Ready);
    let session = client.new_session().await.unwrap();
    (client, session)
}

async fn turn(
    client: &KiroClient,
    session: &str,
    text: &str,
) -> Result<Vec<TurnEvent>, ClientError> {
    let turn = client.start_prompt(session, text).await?;
    assert_eq!(client.state(), ClientState::Busy);
    let mut events = Vec::new();
    client.finish_turn(turn, |e| events.push(e)).await?;
    Ok(events)
}

fn chunks(events: &[TurnEvent]) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| match e {
            TurnEvent::Chunk { text } => Some(text.clone()),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn full_flow_with_monotonic_ids_and_a_clean_close() {
    let setup = Setup::new(false);
    let (client, session) = ready(&setup, Duration::from_secs(5)).await;
    assert!(!session.is_empty());
    let events = turn(&client, &session, "Say exactly: HELLO_ACP_TEST")
        .await
        .unwrap();
    assert_eq!(chunks(&events), ["HELLO_ACP_TEST"]);
    assert_eq!(
        events.last(),
        Some(&TurnEvent::TurnEnd {
            stop_reason: "end_turn".into()
        })
    );
    assert_eq!(client.state(), ClientState::Ready);
    client.cancel(&session).await.unwrap();
    let termination = client.close().await.unwrap();
    assert!(
        termination.group_gone && !termination.sent_kill,
        "{termination}"
    );
    assert_eq!(client.state(), ClientState::Dead);
    let sent = setup.sent();
    let ids: Vec<i64> = sent.iter().filter_map(|m| m["id"].as_i64()).collect();
    assert_eq!(ids, [0, 1, 2]);
    let cancel = sent
        .iter()
        .find(|m| m["method"] == "session/cancel")
        .unwrap();
    assert!(cancel.get("id").is_none(), "{cancel}");
    let new = sent.iter().find(|m| m["method"] == "session/new").unwrap();
    assert_eq!(new["params"]["mcpServers"], serde_json::json!([]));
}

#[tokio::test]
async fn streams_incremental_chunks_and_logs_other_updates() {
    let setup = Setup::new(false);
    let (client, session) = ready(&setup, Duration::from_secs(5)).await;
    let events = turn(&client, &session, "stream").await.unwrap();
    assert_eq!(chunks(&events), ["one ", "two ", "three"]);
    assert!(events.contains(&TurnEvent::Update {
        kind: "tool_call".into()
    }));
    let chunk_positions: Vec<usize> = events
        .iter()
        .enumerate()
        .filter(|(_, e)| matches!(e, TurnEvent::Chunk { .. }))
        .map(|(i, _)| i)
        .collect();
    assert!(chunk_positions.iter().all(|&i| i < events.len() - 1));
    assert_eq!(client.state(), ClientState::Ready);
    client.close().await.unwrap();
}

#[tokio::test]
async fn refuses_out_of_state_commands() {
    let setup = Setup::new(false);
    let client = KiroClient::spawn(setup.options(Duration::from_secs(5))).unwrap();
    let early = client.new_session().await.unwrap_err();
    assert!(
        matches!(
            early,
            ClientError::WrongState {
                state: ClientState::New,
                ..
            }
        ),
        "{early}"
    );
    client.initialize().await.unwrap();
    let again = client.initialize().await.unwrap_err();
    assert!(matches!(again, ClientError::WrongState { .. }));
    let session = client.new_session().await.unwrap();
    let first = client.start_prompt(&session, "stream").await.unwrap();
    let second = client.start_prompt(&session, "stream").await.err().unwrap();
    assert!(
        matches!(
            second,
            ClientError::WrongState {
                state: ClientState::Busy,
                ..
            }
        ),
        "{second}"
    );
    client.cancel(&session).await.unwrap();
    client.finish_turn(first, |_| {}).await.unwrap();
    client.close().await.unwrap();
    let prompts = setup
        .sent()
        .iter()
        .filter(|m| m["method"] == "session/prompt")
        .count();
    assert_eq!(prompts, 1);
    let news = setup
        .sent()
        .iter()
        .filter(|m| m["method"] == "session/new")
        .count();
    assert_eq!(news, 1);
}

#[tokio::test]
async fn kill_falls_back_to_sigkill_and_dead_is_terminal() {
    let setup = Setup::new(true);
    let grace = Duration::from_millis(300);
    let (client, session) = ready(&setup, grace).await;
    let pid = client.pid();
    let started = Instant::now();
    let termination = client.kill().await.unwrap();
    assert!(
        termination.sent_term && termination.sent_kill,
        "{termination}"
    );
    assert!(termination.group_gone);
    assert!(started.elapsed() >= grace);
    assert!(!group_exists(pid));
    assert!(!client.is_alive());
    assert_eq!(client.state(), ClientState::Dead);
    let refused = client.start_prompt(&session, "x").await.err().unwrap();
    assert!(matches!(
        refused,
        ClientError::WrongState {
            state: ClientState::Dead,
            ..
        }
    ));
    assert!(client.cancel(&session).await.is_err());
}

#[tokio::test]
async fn death_mid_turn_makes_the_client_dead() {
    let setup = Setup::new(false);
    let (client, session) = ready(&setup, Duration::from_secs(5)).await;
    let error = turn(&client, &session, "die").await.unwrap_err();
    assert!(matches!(error, ClientError::Died { .. }), "{error}");
    assert_eq!(client.state(), ClientState::Dead);
    assert!(client.start_prompt(&session, "x").await.is_err());
    let termination = client.kill().await.unwrap();
    assert!(termination.group_gone);
}

#[tokio::test]
async fn survives_a_stderr_flood_invalid_utf8_and_malformed_lines() {
    let setup = Setup::new(false);
    let (client, session) = ready(&setup, Duration::from_secs(5)).await;
    let events = turn(&client, &session, "noise").await.unwrap();
    let texts = chunks(&events);
    // The 10 MiB line is one valid chunk; it arrives whole, and the turn goes on.
    assert_eq!(texts.len(), 2);
    assert!(texts[0].len() > 10_000_000 && texts[0].bytes().all(|b| b == b'x'));
    assert_eq!(texts[1], "still fine");
    let events = turn(&client, &session, "Say exactly: again").await.unwrap();
    assert_eq!(chunks(&events), ["again"]);
    client.close().await.unwrap();
}
