//! The kiro personality's sessions on disk, through real pipes and separate processes: a session
//! created by one `ski-mock-agent` is loaded by a new one and its history replayed (before or
//! after the result), a live holder's lock refuses the load with kiro-cli's error, a killed
//! holder's lock is stale, and a scripted answer depends on the session's earlier prompt.

use crate::agent_support;

use agent_support::{Agent, Start, chunk_text};
use nix::sys::signal::Signal;
use serde_json::{Value, json};

fn kiro(home: &std::path::Path, extra_kiro: &str) -> Agent {
    let script = format!(
        "personality = \"kiro\"\n[kiro]\nsessions_on_disk = true\n{extra_kiro}\n\
         [[on]]\nprompt_regex = '^Say exactly: (.*)$'\ndo = [{{ turn = \"${{match.1}}\" }}]\n\
         [[on]]\nprompt = \"What did I say?\"\ndo = [{{ turn = \"You said: ${{previous_prompt}}\" }}]\n"
    );
    Agent::start(
        Start::args(&["--script", "{dir}/kiro.toml", "acp", "--agent", "tg-acp"])
            .file("kiro.toml", &script)
            .env("HOME", &home.display().to_string()),
    )
}

async fn turn(agent: &mut Agent, session: &str, text: &str) -> Vec<String> {
    let id = agent.prompt(session, text).await;
    let (updates, response) = agent.until_response(&json!(id)).await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    updates
        .iter()
        .filter_map(|m| chunk_text(m).map(str::to_owned))
        .collect()
}

async fn load(agent: &mut Agent, session: &str) -> (Vec<Value>, Value, Vec<Value>) {
    let id = agent
        .request("initialize", json!({"protocolVersion": 1}))
        .await;
    agent.until_response(&json!(id)).await;
    let cwd = agent.dir.path().display().to_string();
    let id = agent
        .request(
            "session/load",
            json!({"sessionId": session, "cwd": cwd, "mcpServers": []}),
        )
        .await;
    let (before, response) = agent.until_response(&json!(id)).await;
    (before, response, Vec::new())
}

fn replayed(messages: &[Value]) -> Vec<(String, String)> {
    messages
        .iter()
        .filter(|m| m["method"] == "session/update")
        .filter_map(|m| {
            let update = &m["params"]["update"];
            Some((
                update["sessionUpdate"].as_str()?.to_owned(),
                update["content"]["text"].as_str()?.to_owned(),
            ))
        })
        .collect()
}

#[tokio::test]
async fn a_new_process_loads_and_replays_a_session_and_remembers_it() {
    let home = tempfile::tempdir().unwrap();
    let mut first = kiro(home.path(), "");
    let session = first.handshake().await;
    assert_eq!(
        turn(&mut first, &session, "Say exactly: remember me").await,
        ["remember me"]
    );
    first.close_stdin();
    assert_eq!(first.code().await, 0);
    let files = home.path().join(".kiro/sessions/cli");
    assert!(files.join(format!("{session}.json")).is_file());
    assert!(files.join(format!("{session}.jsonl")).is_file());
    assert!(
        !files.join(format!("{session}.lock")).exists(),
        "a process that exits by itself releases its lock"
    );

    let mut second = kiro(home.path(), "");
    let (before, response, _) = load(&mut second, &session).await;
    assert!(response.get("result").is_some(), "{response}");
    assert_eq!(
        replayed(&before),
        [
            (
                "user_message_chunk".to_owned(),
                "Say exactly: remember me".to_owned()
            ),
            ("agent_message_chunk".to_owned(), "remember me".to_owned()),
        ]
    );
    assert_eq!(
        turn(&mut second, &session, "What did I say?").await,
        ["You said: Say exactly: remember me"]
    );
    second.close_stdin();
    assert_eq!(second.code().await, 0);
}

#[tokio::test]
async fn replay_can_arrive_after_the_load_result() {
    let home = tempfile::tempdir().unwrap();
    let mut first = kiro(home.path(), "replay = \"after\"");
    let session = first.handshake().await;
    turn(&mut first, &session, "Say exactly: later").await;
    first.close_stdin();
    first.code().await;

    let mut second = kiro(home.path(), "replay = \"after\"");
    let (before, response, _) = load(&mut second, &session).await;
    assert!(response.get("result").is_some(), "{response}");
    assert!(replayed(&before).is_empty(), "{before:?}");
    let mut after = Vec::new();
    for _ in 0..2 {
        after.push(second.json().await);
    }
    assert_eq!(
        replayed(&after),
        [
            (
                "user_message_chunk".to_owned(),
                "Say exactly: later".to_owned()
            ),
            ("agent_message_chunk".to_owned(), "later".to_owned()),
        ]
    );
}

#[tokio::test]
async fn a_live_holder_refuses_the_load_and_a_killed_one_does_not() {
    let home = tempfile::tempdir().unwrap();
    let mut holder = kiro(home.path(), "");
    let session = holder.handshake().await;
    turn(&mut holder, &session, "Say exactly: mine").await;
    let pid = holder.child.pid();

    let mut other = kiro(home.path(), "");
    let (_, response, _) = load(&mut other, &session).await;
    assert_eq!(response["error"]["code"], -32603, "{response}");
    assert_eq!(
        response["error"]["data"],
        format!("Failed to start session: Session is active in another process (PID {pid})")
    );

    // SIGKILL leaves the lock file behind; its process is gone, so the lock is stale.
    holder.child.signal_group(Signal::SIGKILL).unwrap();
    holder.status().await;
    let lock = home
        .path()
        .join(format!(".kiro/sessions/cli/{session}.lock"));
    assert_eq!(
        std::fs::read_to_string(&lock).unwrap().trim(),
        pid.to_string()
    );
    let mut third = kiro(home.path(), "");
    let (before, response, _) = load(&mut third, &session).await;
    assert!(response.get("result").is_some(), "{response}");
    assert_eq!(replayed(&before).len(), 2);
    assert_eq!(
        std::fs::read_to_string(&lock).unwrap().trim(),
        third.child.pid().to_string()
    );
}

#[tokio::test]
async fn an_unknown_session_is_still_unknown() {
    let home = tempfile::tempdir().unwrap();
    let mut agent = kiro(home.path(), "");
    let (_, response, _) = load(&mut agent, "no-such-session").await;
    assert!(response.get("error").is_some(), "{response}");
    let (_, response, _) = load(&mut agent, "../../etc/passwd").await;
    assert!(response.get("error").is_some(), "{response}");
}

#[tokio::test]
async fn the_ready_script_looks_the_agent_up_like_kiro_cli() {
    let home = tempfile::tempdir().unwrap();
    let mut missing = Agent::start(
        Start::args(&["--script", "kiro", "acp", "--agent", "nobody"])
            .env("HOME", &home.path().display().to_string()),
    );
    let stderr = missing
        .stderr_until(|text| text.contains("not found"))
        .await;
    assert!(stderr.contains("agent 'nobody' not found"), "{stderr}");
    assert_eq!(missing.code().await, 1);

    std::fs::create_dir_all(home.path().join(".kiro/agents")).unwrap();
    std::fs::write(home.path().join(".kiro/agents/tg-acp.json"), "{}").unwrap();
    let mut both = Agent::start(
        Start::args(&["--script", "kiro", "acp", "--agent", "tg-acp"])
            .env("HOME", &home.path().display().to_string())
            .file(".kiro/agents/tg-acp.json", "{}"),
    );
    let stderr = both
        .stderr_until(|text| text.contains("Agent conflict"))
        .await;
    assert!(stderr.contains("Using workspace version."), "{stderr}");
    let session = both.handshake().await;
    assert_eq!(
        turn(&mut both, &session, "Say exactly: found").await,
        ["found"]
    );
    both.close_stdin();
    assert_eq!(both.code().await, 0);

    // The ready script remembers across a reload in a new process.
    let mut again = Agent::start(
        Start::args(&["--script", "kiro", "acp", "--agent", "tg-acp"])
            .env("HOME", &home.path().display().to_string()),
    );
    let (before, response, _) = load(&mut again, &session).await;
    assert!(response.get("result").is_some(), "{response}");
    assert_eq!(replayed(&before).len(), 2, "{before:?}");
    assert_eq!(
        turn(&mut again, &session, "What did I say?").await.concat(),
        "You said: Say exactly: found"
    );
}

fn ready_kiro(home: &std::path::Path) -> Agent {
    std::fs::create_dir_all(home.join(".kiro/agents")).unwrap();
    std::fs::write(home.join(".kiro/agents/tg-acp.json"), "{}").unwrap();
    Agent::start(
        Start::args(&["--script", "kiro", "acp", "--agent", "tg-acp"])
            .env("HOME", &home.display().to_string()),
    )
}

#[tokio::test]
async fn the_ready_script_streams_several_incremental_chunks() {
    let home = tempfile::tempdir().unwrap();
    let mut agent = ready_kiro(home.path());
    let session = agent.handshake().await;
    let chunks = turn(&mut agent, &session, "Say exactly: HELLO_ACP_TEST").await;
    assert_eq!(chunks, ["HELLO_AC", "P_TEST"]);
    let chunks = turn(&mut agent, &session, "Count to 3.").await;
    assert_eq!(chunks.concat(), "1, 2, 3");
}

#[tokio::test]
async fn the_ready_script_answers_a_recall_question_with_the_first_prompt_after_a_reload() {
    let home = tempfile::tempdir().unwrap();
    let mut first = ready_kiro(home.path());
    let session = first.handshake().await;
    turn(
        &mut first,
        &session,
        "Remember: my favorite color is TURQUOISE. Confirm.",
    )
    .await;
    turn(&mut first, &session, "Say exactly: noted").await;
    first.close_stdin();
    assert_eq!(first.code().await, 0);

    let mut again = ready_kiro(home.path());
    let (_, response, _) = load(&mut again, &session).await;
    assert!(response.get("result").is_some(), "{response}");
    let answer = turn(&mut again, &session, "What is my favorite color?")
        .await
        .concat();
    assert!(answer.contains("TURQUOISE"), "{answer}");
    // Asked twice, it still answers with what was to be remembered.
    let answer = turn(&mut again, &session, "What color was it?")
        .await
        .concat();
    assert!(answer.contains("TURQUOISE"), "{answer}");
}

#[tokio::test]
async fn tool_calls_are_shaped_like_kiros() {
    let home = tempfile::tempdir().unwrap();
    let mut agent = ready_kiro(home.path());
    let session = agent.handshake().await;
    let id = agent.prompt(&session, "run a tool").await;
    let mut seen = Vec::new();
    let request = loop {
        let message = agent.json().await;
        if message["method"] == "session/request_permission" {
            break message;
        }
        seen.push(message);
    };
    let call = seen
        .iter()
        .map(|m| &m["params"]["update"])
        .find(|u| u["sessionUpdate"] == "tool_call")
        .cloned()
        .unwrap();
    let call_id = call["toolCallId"].as_str().unwrap().to_owned();
    assert!(call_id.starts_with("tooluse_"), "{call}");
    assert_eq!(
        (call["title"].as_str(), call["kind"].as_str()),
        (Some("Run ls"), Some("execute"))
    );
    let options: Vec<&str> = request["params"]["options"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|o| o["optionId"].as_str())
        .collect();
    assert_eq!(options, ["allow-once", "allow-always", "reject-once"]);
    assert!(request["id"].is_string(), "{request}");
    agent
        .send_json(json!({"jsonrpc": "2.0", "id": request["id"],
            "result": {"outcome": {"outcome": "selected", "optionId": "allow-once"}}}))
        .await;
    let (after, response) = agent.until_response(&json!(id)).await;
    assert_eq!(response["result"]["stopReason"], "end_turn");
    let done = after
        .iter()
        .map(|m| &m["params"]["update"])
        .find(|u| u["sessionUpdate"] == "tool_call_update")
        .cloned()
        .unwrap();
    assert_eq!(done["toolCallId"], call_id.as_str());
    assert_eq!(
        (
            done["title"].as_str(),
            done["kind"].as_str(),
            done["status"].as_str()
        ),
        (Some("Run ls"), Some("execute"), Some("completed"))
    );
}
