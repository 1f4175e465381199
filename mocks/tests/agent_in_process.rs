//! The interpreter as a library: an agent run in-process over in-memory pipes.

use serde_json::{Value, json};
use ski_mocks::agent::script::PromptMode;
use ski_mocks::agent::{Config, Launch, Overrides, Script, run};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

async fn line<R: tokio::io::AsyncBufRead + Unpin>(lines: &mut tokio::io::Lines<R>) -> Value {
    let text = tokio::time::timeout(std::time::Duration::from_secs(20), lines.next_line())
        .await
        .expect("a line in time")
        .expect("read")
        .expect("a line");
    serde_json::from_str(&text).expect("json")
}

#[tokio::test]
async fn a_scripted_turn_and_an_exit_code_in_process() {
    let script = Script::parse(
        r#"
[[on]]
prompt = "bye"
do = [{ exit = 9 }]
"#,
        "inline",
    )
    .expect("a valid script");
    let overrides = Overrides {
        prompt_mode: Some(PromptMode::Commands),
        ..Overrides::default()
    };
    let config = Config::resolve(script, &overrides);
    let (mut client, agent_in) = tokio::io::duplex(1 << 16);
    let (agent_out, from_agent) = tokio::io::duplex(1 << 16);
    let task = tokio::spawn(run(
        Launch::new(config),
        agent_in,
        agent_out,
        tokio::io::sink(),
    ));
    let mut lines = BufReader::new(from_agent).lines();
    let send = |value: Value| {
        let mut text = value.to_string();
        text.push('\n');
        text
    };
    client
        .write_all(send(json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}})).as_bytes())
        .await
        .unwrap();
    assert_eq!(line(&mut lines).await["result"]["protocolVersion"], 1);
    client
        .write_all(send(json!({"jsonrpc": "2.0", "id": 2, "method": "session/new", "params": {"cwd": "/", "mcpServers": []}})).as_bytes())
        .await
        .unwrap();
    let session = line(&mut lines).await["result"]["sessionId"].clone();
    client
        .write_all(send(json!({"jsonrpc": "2.0", "id": 3, "method": "session/prompt", "params": {"sessionId": session, "prompt": [{"type": "text", "text": "echo in process"}]}})).as_bytes())
        .await
        .unwrap();
    assert_eq!(
        line(&mut lines).await["params"]["update"]["content"]["text"],
        "in process"
    );
    assert_eq!(line(&mut lines).await["result"]["stopReason"], "end_turn");
    client
        .write_all(send(json!({"jsonrpc": "2.0", "id": 4, "method": "session/prompt", "params": {"sessionId": session, "prompt": [{"type": "text", "text": "bye"}]}})).as_bytes())
        .await
        .unwrap();
    let outcome = task.await.expect("the agent task").expect("the agent ran");
    assert_eq!(outcome.code, 9);
    assert_eq!(outcome.reason, "script exit");
}
