//! Sessions of a real `ski acp serve` over stdio: `cwd` must be an existing directory, the number of live
//! sessions of one connection is capped (`--max-sessions`), and `session/close` drops the
//! session, which frees its place under the cap.

use std::time::Duration;

use serde_json::{Value, json};
use ski::transport::child::{self, Child, ChildSpec};

const SKI: &str = env!("CARGO_BIN_EXE_ski");

/// How long any answer may take before the test fails.
const PATIENCE: Duration = Duration::from_secs(30);

/// A JSON-RPC client over the agent's stdin and stdout, one request at a time.
struct Client {
    agent: Child,
    next_id: i64,
}

impl Client {
    fn start(args: &[&str]) -> Self {
        let agent = child::spawn(
            ChildSpec::new("agent", SKI)
                .args(["acp", "serve", "--permission-mode", "disabled"])
                .args(args),
        )
        .expect("spawn ski acp serve");
        Self { agent, next_id: 1 }
    }

    /// Sends a request and returns its answer (`result` or `error`), skipping notifications.
    async fn call(&mut self, method: &str, params: Value) -> Result<Value, Value> {
        let id = self.next_id;
        self.next_id += 1;
        let request = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        self.agent
            .send_line(&request.to_string())
            .await
            .expect("write a request");
        loop {
            let line = tokio::time::timeout(PATIENCE, self.agent.next_line())
                .await
                .unwrap_or_else(|_| panic!("no answer to {method} in time"))
                .expect("stdout readable")
                .expect("an answer before end of output");
            let message: Value = serde_json::from_str(&line).expect("a JSON line");
            if message["id"] != json!(id) {
                continue;
            }
            return match message.get("error") {
                Some(error) => Err(error.clone()),
                None => Ok(message["result"].clone()),
            };
        }
    }

    async fn new_session(&mut self, cwd: &str) -> Result<String, Value> {
        self.call("session/new", json!({"cwd": cwd, "mcpServers": []}))
            .await
            .map(|result| {
                result["sessionId"]
                    .as_str()
                    .expect("a sessionId")
                    .to_owned()
            })
    }

    async fn end(mut self) {
        self.agent.close_stdin();
        let status = tokio::time::timeout(PATIENCE, self.agent.wait())
            .await
            .expect("exit at end of input")
            .expect("exit status");
        assert_eq!(status.code(), Some(0));
        assert!(self.agent.shutdown().await.expect("teardown").group_gone);
    }
}

fn listed(list: &Value) -> Vec<String> {
    list["sessions"]
        .as_array()
        .expect("a session list")
        .iter()
        .map(|entry| entry["sessionId"].as_str().unwrap().to_owned())
        .collect()
}

/// Asserts that `error` is -32602 and its message says `why` about `path`.
fn refused_for(error: &Value, path: &str, why: &str) {
    assert_eq!(error["code"], -32602, "{path:?}: {error}");
    let message = error["message"].as_str().unwrap();
    assert!(
        message.contains(why) && message.contains(&format!("{path:?}")),
        "{path:?}: {message}"
    );
}

#[tokio::test]
async fn a_cwd_that_is_not_an_existing_directory_is_refused() {
    let scratch = tempfile::tempdir().unwrap();
    let root = scratch.path().to_str().unwrap().to_owned();
    let file = scratch.path().join("plain.txt");
    std::fs::write(&file, "not a directory").unwrap();
    let file = file.to_str().unwrap().to_owned();
    let missing = format!("{root}/missing");
    let with_nul = format!("{root}/a\u{0}b");
    let mut client = Client::start(&["--enable", "fork"]);
    client
        .call("initialize", json!({"protocolVersion": 1}))
        .await
        .unwrap();
    for relative in ["work", "./work", "work/../x", ""] {
        let error = client.new_session(relative).await.unwrap_err();
        refused_for(&error, relative, "must be an absolute path");
    }
    for (path, why) in [
        (missing.as_str(), "does not exist"),
        (file.as_str(), "is not a directory"),
        (with_nul.as_str(), "contains a NUL byte"),
    ] {
        let error = client.new_session(path).await.unwrap_err();
        refused_for(&error, path, why);
    }
    for additional in [&missing, &file, &"b".to_owned()] {
        let error = client
            .call(
                "session/new",
                json!({"cwd": root, "mcpServers": [], "additionalDirectories": [root, additional]}),
            )
            .await
            .unwrap_err();
        assert_eq!(error["code"], -32602, "{additional}: {error}");
        assert!(
            error["message"]
                .as_str()
                .unwrap()
                .contains("additionalDirectories"),
            "{error}"
        );
    }
    let session = client
        .call(
            "session/new",
            json!({"cwd": root, "mcpServers": [], "additionalDirectories": ["/"]}),
        )
        .await
        .expect("an existing directory is accepted")["sessionId"]
        .as_str()
        .unwrap()
        .to_owned();
    for method in ["session/fork", "session/load", "session/resume"] {
        for (path, why) in [
            ("rel", "must be an absolute path"),
            (missing.as_str(), "does not exist"),
            (file.as_str(), "is not a directory"),
            (with_nul.as_str(), "contains a NUL byte"),
        ] {
            let error = client
                .call(
                    method,
                    json!({"sessionId": session, "cwd": path, "mcpServers": []}),
                )
                .await
                .unwrap_err();
            refused_for(&error, path, why);
        }
    }
    client
        .call(
            "session/load",
            json!({"sessionId": session, "cwd": root, "mcpServers": []}),
        )
        .await
        .expect("the session loads in an existing directory");
    client.end().await;
}

#[tokio::test]
async fn close_drops_the_session() {
    let mut client = Client::start(&[]);
    client
        .call("initialize", json!({"protocolVersion": 1}))
        .await
        .unwrap();
    let closed = client.new_session("/").await.unwrap();
    let kept = client.new_session("/").await.unwrap();
    assert_eq!(
        client
            .call("session/close", json!({"sessionId": closed}))
            .await
            .unwrap(),
        json!({})
    );
    // Closed means gone: no longer listed, loaded, prompted or closed again.
    let list = client.call("session/list", json!({})).await.unwrap();
    assert_eq!(listed(&list), vec![kept.clone()], "{list}");
    for (method, params) in [
        (
            "session/prompt",
            json!({"sessionId": closed, "prompt": [{"type": "text", "text": "hi"}]}),
        ),
        (
            "session/load",
            json!({"sessionId": closed, "cwd": "/", "mcpServers": []}),
        ),
        ("session/close", json!({"sessionId": closed})),
    ] {
        let error = client.call(method, params).await.unwrap_err();
        assert_eq!(error["code"], -32002, "{method}: {error}");
    }
    client
        .call(
            "session/prompt",
            json!({"sessionId": kept, "prompt": [{"type": "text", "text": "hi"}]}),
        )
        .await
        .expect("the other session is untouched");
    client.end().await;
}

#[tokio::test]
async fn sessions_are_capped_per_connection_and_a_close_frees_a_place() {
    let mut client = Client::start(&["--max-sessions", "3", "--enable", "fork"]);
    client
        .call("initialize", json!({"protocolVersion": 1}))
        .await
        .unwrap();
    let mut sessions = Vec::new();
    for _ in 0..3 {
        sessions.push(client.new_session("/").await.expect("under the cap"));
    }
    let error = client.new_session("/").await.unwrap_err();
    assert_eq!(error["code"], -32603, "{error}");
    assert_eq!(error["data"]["maxSessions"], 3, "{error}");
    let message = error["message"].as_str().unwrap();
    assert!(
        message.contains('3') && message.contains("session/close"),
        "{message}"
    );
    let error = client
        .call(
            "session/fork",
            json!({"sessionId": sessions[0], "cwd": "/", "mcpServers": []}),
        )
        .await
        .unwrap_err();
    assert_eq!(
        error["code"], -32603,
        "a fork is a new session too: {error}"
    );
    let closed = sessions.remove(0);
    client
        .call("session/close", json!({"sessionId": closed}))
        .await
        .unwrap();
    sessions.push(client.new_session("/").await.expect("room after a close"));
    let list = client.call("session/list", json!({})).await.unwrap();
    let mut live = listed(&list);
    live.sort();
    sessions.sort();
    assert_eq!(live, sessions);
    client.end().await;
}
