//! Hostile input to `ski-mock-agent` from its client, through a real pipe to the built binary:
//! malformed, non-UTF-8, oversize and wrongly typed lines each get a clear JSON-RPC error, the
//! agent goes on answering, and a client that goes away ends it cleanly (no panic, exit 0).

use crate::agent_support;

use agent_support::{Agent, PATIENCE, Start};
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;

/// The longest line the agent under test accepts.
const MAX_LINE: usize = 256;

fn agent() -> Agent {
    let script = format!("[agent]\nmax_line_bytes = {MAX_LINE}\n");
    Agent::start(Start::args(&["--script", "{dir}/script.toml"]).file("script.toml", &script))
}

/// Writes raw bytes (a line that may not be UTF-8) to the agent's stdin.
async fn send_bytes(agent: &mut Agent, stdin: &mut (impl AsyncWriteExt + Unpin), bytes: &[u8]) {
    let written = async {
        stdin.write_all(bytes).await?;
        stdin.flush().await
    };
    if let Err(error) = tokio::time::timeout(PATIENCE, written).await {
        panic!(
            "writing to the agent timed out: {error}\n{}",
            agent.log.render()
        );
    }
}

/// The error code of the next line, which must be an error response with a null id.
async fn next_error_code(agent: &mut Agent) -> i64 {
    let answer = agent.json().await;
    assert_eq!(
        answer["id"],
        Value::Null,
        "an error about an unreadable line has no id: {answer}"
    );
    answer["error"]["code"]
        .as_i64()
        .unwrap_or_else(|| panic!("an error response: {answer}"))
}

#[tokio::test]
async fn every_bad_line_is_answered_and_the_agent_goes_on() {
    let mut agent = agent();
    let mut stdin = agent.child.take_stdin().expect("stdin");

    send_bytes(
        &mut agent,
        &mut stdin,
        b"{\"jsonrpc\": \"2.0\", \"id\": 1, \n",
    )
    .await;
    assert_eq!(next_error_code(&mut agent).await, -32700, "malformed JSON");

    send_bytes(
        &mut agent,
        &mut stdin,
        b"{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"\xff\xfe\"}\n",
    )
    .await;
    assert_eq!(
        next_error_code(&mut agent).await,
        -32700,
        "a line that is not UTF-8"
    );

    let mut oversize = vec![b'x'; MAX_LINE * 2];
    oversize.push(b'\n');
    send_bytes(&mut agent, &mut stdin, &oversize).await;
    let code = next_error_code(&mut agent).await;
    assert!(
        code == -32600 || code == -32700,
        "an oversize line is refused as invalid: {code}"
    );

    send_bytes(&mut agent, &mut stdin, b"42\n").await;
    assert_eq!(
        next_error_code(&mut agent).await,
        -32600,
        "JSON that is not a message"
    );

    let wrong_types = json!({"jsonrpc": "2.0", "id": 3, "method": "initialize", "params": {"protocolVersion": "one"}});
    send_bytes(
        &mut agent,
        &mut stdin,
        format!("{wrong_types}\n").as_bytes(),
    )
    .await;
    let answer = agent.json().await;
    assert_eq!(answer["id"], 3, "{answer}");
    assert_eq!(
        answer["error"]["code"], -32602,
        "wrong parameter types: {answer}"
    );

    let initialize = json!({"jsonrpc": "2.0", "id": 4, "method": "initialize", "params": {"protocolVersion": 1}});
    send_bytes(&mut agent, &mut stdin, format!("{initialize}\n").as_bytes()).await;
    let answer = agent.json().await;
    assert_eq!(answer["id"], 4, "{answer}");
    assert_eq!(
        answer["result"]["protocolVersion"], 1,
        "still answering: {answer}"
    );

    drop(stdin);
    let status = tokio::time::timeout(PATIENCE, agent.child.wait())
        .await
        .expect("the agent ends when its client goes away")
        .expect("status");
    assert_eq!(status.code(), Some(0), "{}", agent.log.render());
    let stderr = agent.log.render();
    assert!(!stderr.contains("panicked"), "no panic: {stderr}");
}
