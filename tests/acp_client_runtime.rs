//! The ACP client runtime against a scripted agent on the other end of an in-memory pipe: the
//! test reads every line the client writes and writes the agent's lines by hand, so ordering,
//! noise and misbehaviour are exact.

use std::time::Duration;

use serde_json::{Value, json};
use ski::acp::client::{Client, ClientConfig, FsConfig, PermissionPolicy, TerminalConfig};
use ski::acp::{NewSessionRequest, PromptRequest, SessionUpdate, StopReason};
use ski::jsonrpc::{CallError, ErrorCode, LineReader};
use tokio::io::{AsyncWriteExt, DuplexStream, ReadHalf, WriteHalf};

/// The agent's end of the pipe.
struct Agent {
    reader: LineReader<ReadHalf<DuplexStream>>,
    writer: WriteHalf<DuplexStream>,
}

impl Agent {
    /// The next message the client wrote, as JSON.
    async fn recv(&mut self) -> Value {
        let line = self
            .reader
            .next_line()
            .await
            .expect("the client closed its output")
            .expect("frame error");
        serde_json::from_slice(line).expect("the client wrote invalid json")
    }

    /// The next message, which must be a request of `method`; returns its id and params.
    async fn request(&mut self, method: &str) -> (Value, Value) {
        let message = self.recv().await;
        assert_eq!(message["method"], method, "unexpected message {message}");
        assert!(
            message.get("id").is_some(),
            "{method} must be a request: {message}"
        );
        (message["id"].clone(), message["params"].clone())
    }

    async fn send(&mut self, message: Value) {
        let mut line = message.to_string();
        line.push('\n');
        self.writer.write_all(line.as_bytes()).await.unwrap();
    }

    async fn respond(&mut self, id: &Value, result: Value) {
        self.send(json!({"jsonrpc": "2.0", "id": id, "result": result}))
            .await;
    }

    async fn notify(&mut self, method: &str, params: Value) {
        self.send(json!({"jsonrpc": "2.0", "method": method, "params": params}))
            .await;
    }

    async fn update(&mut self, session: &str, text: &str) {
        self.notify(
            "session/update",
            json!({"sessionId": session, "update": {
                "sessionUpdate": "agent_message_chunk",
                "content": {"type": "text", "text": text}
            }}),
        )
        .await;
    }

    /// Sends an agent-to-client request and returns the client's response.
    async fn call(&mut self, id: Value, method: &str, params: Value) -> Value {
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await;
        let response = self.recv().await;
        assert_eq!(response["id"], id, "the response must echo the id exactly");
        response
    }

    /// Answers `initialize` with an agent that advertises nothing optional.
    async fn initialize(&mut self) -> Value {
        let (id, params) = self.request("initialize").await;
        self.respond(
            &id,
            json!({"protocolVersion": 1, "agentCapabilities": {"loadSession": false}}),
        )
        .await;
        params
    }
}

fn connect(config: ClientConfig) -> (Client, Agent) {
    let (ours, theirs) = tokio::io::duplex(1 << 20);
    let (read, write) = tokio::io::split(ours);
    let client = Client::over(ski::jsonrpc::Transport::bytes(read, write), config);
    let (read, write) = tokio::io::split(theirs);
    (
        client,
        Agent {
            reader: LineReader::new(read),
            writer: write,
        },
    )
}

fn text_of(update: &SessionUpdate) -> String {
    match update {
        SessionUpdate::AgentMessageChunk(chunk) => chunk.content.as_text().unwrap().to_owned(),
        other => panic!("unexpected update {other:?}"),
    }
}

#[tokio::test]
async fn initialize_advertises_what_is_configured() {
    let dir = tempfile::tempdir().unwrap();
    let config = ClientConfig {
        fs: Some(FsConfig::read_write([dir.path()])),
        terminal: Some(TerminalConfig::default()),
        ..ClientConfig::default()
    };
    let (client, mut agent) = connect(config);
    let init = tokio::spawn({
        let client = client.clone();
        async move { client.initialize().await }
    });
    let message = agent.recv().await;
    assert_eq!(message["id"], 1, "ids start at 1");
    assert_eq!(message["params"]["protocolVersion"], 1);
    assert_eq!(
        message["params"]["clientCapabilities"],
        json!({"fs": {"readTextFile": true, "writeTextFile": true}, "terminal": true})
    );
    assert_eq!(message["params"]["clientInfo"]["name"], "ski");
    agent
        .respond(
            &message["id"],
            json!({"protocolVersion": 1, "agentCapabilities": {}}),
        )
        .await;
    let response = init.await.unwrap().unwrap();
    assert_eq!(response.protocol_version, 1);
    assert!(client.agent().is_some());

    let (plain, mut agent) = connect(ClientConfig::default());
    tokio::spawn(async move { plain.initialize().await });
    let params = agent.initialize().await;
    assert_eq!(
        params["clientCapabilities"],
        json!({"fs": {"readTextFile": false, "writeTextFile": false}, "terminal": false})
    );
}

#[tokio::test]
async fn updates_are_routed_per_session_including_early_and_late_ones() {
    let (client, mut agent) = connect(ClientConfig::default());
    let new = tokio::spawn({
        let client = client.clone();
        async move { client.new_session(&NewSessionRequest::new("/tmp")).await }
    });
    let (id, params) = agent.request("session/new").await;
    assert_eq!(params, json!({"cwd": "/tmp", "mcpServers": []}));
    // Updates before the result, another session's update and an unknown extension
    // notification, then the result.
    agent.update("s1", "early-1").await;
    agent.update("subagent", "not yours").await;
    agent
        .notify("_kiro.dev/metadata", json!({"sessionId": "s1", "x": 1}))
        .await;
    agent.update("s1", "early-2").await;
    agent.respond(&id, json!({"sessionId": "s1"})).await;
    let session = new.await.unwrap().unwrap();
    assert_eq!(session.session_id, "s1");
    let mut updates = client.follow("s1");

    let prompt = tokio::spawn({
        let client = client.clone();
        async move { client.prompt(&PromptRequest::text("s1", "hi")).await }
    });
    let (id, params) = agent.request("session/prompt").await;
    assert_eq!(params["prompt"], json!([{"type": "text", "text": "hi"}]));
    agent.update("s1", "reply").await;
    agent.respond(&id, json!({"stopReason": "end_turn"})).await;
    // An update after the result (context usage and the like) must not disturb anything.
    agent.update("s1", "late").await;
    let result = prompt.await.unwrap().unwrap();
    assert_eq!(result.stop_reason, StopReason::EndTurn);

    let mut seen = Vec::new();
    while seen.len() < 4 {
        seen.push(text_of(&updates.next().await.unwrap().update));
    }
    assert_eq!(seen, ["early-1", "early-2", "reply", "late"]);
    assert!(updates.try_next().is_none());
    let mut other = client.follow("subagent");
    assert_eq!(text_of(&other.next().await.unwrap().update), "not yours");
}

#[tokio::test]
async fn invalid_and_unknown_updates_do_not_end_the_turn() {
    let (client, mut agent) = connect(ClientConfig::default());
    let mut updates = client.follow("s");
    let prompt = tokio::spawn({
        let client = client.clone();
        async move { client.prompt(&PromptRequest::text("s", "hi")).await }
    });
    let (id, _) = agent.request("session/prompt").await;
    agent
        .notify(
            "session/update",
            json!({"sessionId": "s", "update": {"sessionUpdate": "tool_call"}}),
        )
        .await;
    agent
        .notify(
            "session/update",
            json!({"sessionId": "s", "update": {"sessionUpdate": "turn_end"}}),
        )
        .await;
    agent.update("s", "ok").await;
    agent.respond(&id, json!({"stopReason": "end_turn"})).await;
    prompt.await.unwrap().unwrap();
    let first = updates.next().await.unwrap();
    assert!(
        matches!(first.update, SessionUpdate::Unknown(_)),
        "{first:?}"
    );
    assert_eq!(text_of(&updates.next().await.unwrap().update), "ok");
    let stats = client.stats();
    assert_eq!((stats.updates.invalid, stats.updates.accepted), (1, 2));
}

#[tokio::test]
async fn responses_are_matched_by_id_through_noise() {
    let (client, mut agent) = connect(ClientConfig::default());
    let first = tokio::spawn({
        let client = client.clone();
        async move { client.new_session(&NewSessionRequest::new("/a")).await }
    });
    let (first_id, _) = agent.request("session/new").await;
    let second = tokio::spawn({
        let client = client.clone();
        async move { client.new_session(&NewSessionRequest::new("/b")).await }
    });
    let (second_id, _) = agent.request("session/new").await;
    // Unknown ids, an id of the wrong JSON type, the second answer first, then a duplicate.
    agent
        .respond(&json!(999), json!({"sessionId": "ghost"}))
        .await;
    agent
        .respond(&json!("unknown"), json!({"sessionId": "ghost"}))
        .await;
    agent
        .respond(
            &json!(first_id.to_string()),
            json!({"sessionId": "wrong type"}),
        )
        .await;
    agent.respond(&second_id, json!({"sessionId": "b"})).await;
    agent
        .respond(&second_id, json!({"sessionId": "b-again"}))
        .await;
    agent.respond(&first_id, json!({"sessionId": "a"})).await;
    assert_eq!(first.await.unwrap().unwrap().session_id, "a");
    assert_eq!(second.await.unwrap().unwrap().session_id, "b");

    let next = tokio::spawn({
        let client = client.clone();
        async move { client.new_session(&NewSessionRequest::new("/c")).await }
    });
    let (id, _) = agent.request("session/new").await;
    agent.respond(&id, json!({"sessionId": "c"})).await;
    assert_eq!(next.await.unwrap().unwrap().session_id, "c");
    let stats = client.stats();
    assert_eq!(stats.peer.pending_requests, 0);
    assert_eq!(stats.peer.ignored_responses, 4);
}

#[tokio::test]
async fn permission_requests_get_outcomes_on_the_same_id() {
    let (client, mut agent) = connect(ClientConfig::default());
    let options = json!([
        {"optionId": "no", "name": "No", "kind": "reject_once"},
        {"optionId": "yes", "name": "Yes", "kind": "allow_once"},
    ]);
    let params = json!({"sessionId": "s", "toolCall": {"toolCallId": "c1"}, "options": options});
    for id in [
        json!("perm-1"),
        json!(0),
        json!("6f9619ff-8b86-d011-b42d-00c04fc964ff"),
    ] {
        let response = agent
            .call(id, "session/request_permission", params.clone())
            .await;
        assert_eq!(
            response["result"],
            json!({"outcome": {"outcome": "selected", "optionId": "yes"}})
        );
    }
    let invalid = agent
        .call(
            json!(7),
            "session/request_permission",
            json!({"sessionId": "s"}),
        )
        .await;
    assert_eq!(invalid["error"]["code"], -32602);
    assert_eq!(client.stats().permissions.requests, 3);

    let (_client, mut agent) = connect(ClientConfig {
        permission: PermissionPolicy::Deny,
        ..ClientConfig::default()
    });
    let response = agent
        .call(json!(1), "session/request_permission", params)
        .await;
    assert_eq!(
        response["result"],
        json!({"outcome": {"outcome": "selected", "optionId": "no"}})
    );
}

#[tokio::test]
async fn cancel_answers_the_pending_permission_request_cancelled() {
    let (client, mut agent) = connect(ClientConfig {
        permission: PermissionPolicy::Hold,
        ..ClientConfig::default()
    });
    let prompt = tokio::spawn({
        let client = client.clone();
        async move { client.prompt(&PromptRequest::text("s", "hi")).await }
    });
    let (prompt_id, _) = agent.request("session/prompt").await;
    agent
        .send(
            json!({"jsonrpc": "2.0", "id": "perm-1", "method": "session/request_permission",
            "params": {"sessionId": "s", "toolCall": {"toolCallId": "c1"},
                       "options": [{"optionId": "ok", "name": "Ok", "kind": "allow_once"}]}}),
        )
        .await;
    client.wait_pending_permissions(1).await;
    assert_eq!(client.cancel("s").await.unwrap(), 1);
    let cancel = agent.recv().await;
    assert_eq!(
        cancel,
        json!({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": "s"}})
    );
    let answer = agent.recv().await;
    assert_eq!(
        answer,
        json!({"jsonrpc": "2.0", "id": "perm-1", "result": {"outcome": {"outcome": "cancelled"}}})
    );
    agent
        .respond(&prompt_id, json!({"stopReason": "cancelled"}))
        .await;
    assert_eq!(
        prompt.await.unwrap().unwrap().stop_reason,
        StopReason::Cancelled
    );
    assert_eq!(client.stats().pending_permissions, 0);
}

#[tokio::test]
async fn fs_requests_are_served_inside_the_root_only() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    std::fs::write(root.join("five.txt"), "1\n2\n3\n4\n5\n").unwrap();
    let (client, mut agent) = connect(ClientConfig {
        fs: Some(FsConfig::read_write([&root])),
        ..ClientConfig::default()
    });
    // The client serves its own sessions only.
    let new = tokio::spawn(async move { client.new_session(&NewSessionRequest::new("/")).await });
    let (id, _) = agent.request("session/new").await;
    agent.respond(&id, json!({"sessionId": "s"})).await;
    new.await.unwrap().unwrap();
    let path = root.join("five.txt").to_string_lossy().into_owned();
    let read = agent
        .call(
            json!(1),
            "fs/read_text_file",
            json!({"sessionId": "s", "path": path, "line": 2, "limit": 2}),
        )
        .await;
    assert_eq!(read["result"], json!({"content": "2\n3\n"}));
    let relative = agent
        .call(
            json!(2),
            "fs/read_text_file",
            json!({"sessionId": "s", "path": "five.txt"}),
        )
        .await;
    assert_eq!(relative["error"]["code"], -32602);
    let negative = agent
        .call(
            json!(3),
            "fs/read_text_file",
            json!({"sessionId": "s", "path": path, "limit": -1}),
        )
        .await;
    assert_eq!(negative["error"]["code"], -32602);
    let new_file = root.join("new.txt").to_string_lossy().into_owned();
    let write = agent
        .call(
            json!(4),
            "fs/write_text_file",
            json!({"sessionId": "s", "path": new_file, "content": "hello"}),
        )
        .await;
    assert_eq!(write["result"], json!({}));
    assert_eq!(
        std::fs::read_to_string(root.join("new.txt")).unwrap(),
        "hello"
    );
    let to_dir = agent
        .call(
            json!(5),
            "fs/write_text_file",
            json!({"sessionId": "s", "path": root.to_string_lossy(), "content": "x"}),
        )
        .await;
    assert_eq!(to_dir["error"]["code"], -32603);

    let (_client, mut agent) = connect(ClientConfig::default());
    let not_offered = agent
        .call(
            json!(1),
            "fs/read_text_file",
            json!({"sessionId": "s", "path": path}),
        )
        .await;
    assert_eq!(not_offered["error"]["code"], -32601);
}

#[tokio::test]
async fn terminal_lifecycle_over_the_wire_and_close_kills_terminals() {
    let (client, mut agent) = connect(ClientConfig {
        terminal: Some(TerminalConfig::default()),
        ..ClientConfig::default()
    });
    let created = agent
        .call(
            json!(1),
            "terminal/create",
            json!({"sessionId": "s", "command": "/bin/sh",
            "args": ["-c", "printf 'hello'; exit 7"], "outputByteLimit": 3}),
        )
        .await;
    let terminal = created["result"]["terminalId"].clone();
    let wait = agent
        .call(
            json!(2),
            "terminal/wait_for_exit",
            json!({"sessionId": "s", "terminalId": terminal}),
        )
        .await;
    assert_eq!(wait["result"], json!({"exitCode": 7, "signal": null}));
    let output = agent
        .call(
            json!(3),
            "terminal/output",
            json!({"sessionId": "s", "terminalId": terminal}),
        )
        .await;
    assert_eq!(
        output["result"],
        json!({"output": "llo", "truncated": true, "exitStatus": {"exitCode": 7, "signal": null}})
    );
    let release = agent
        .call(
            json!(4),
            "terminal/release",
            json!({"sessionId": "s", "terminalId": terminal}),
        )
        .await;
    assert_eq!(release["result"], json!({}));
    let gone = agent
        .call(
            json!(5),
            "terminal/output",
            json!({"sessionId": "s", "terminalId": terminal}),
        )
        .await;
    assert_eq!(gone["error"]["code"], -32002);

    // A running command: its pid is its output; closing the client must end it.
    let created = agent
        .call(
            json!(6),
            "terminal/create",
            json!({"sessionId": "s", "command": "/bin/sh",
            "args": ["-c", "echo $$; exec sleep 600"]}),
        )
        .await;
    let terminal = created["result"]["terminalId"].clone();
    let pid: u32 = loop {
        let output = agent
            .call(
                json!(7),
                "terminal/output",
                json!({"sessionId": "s", "terminalId": terminal}),
            )
            .await;
        assert!(output["result"].get("exitStatus").is_none(), "{output}");
        if let Some(line) = output["result"]["output"]
            .as_str()
            .and_then(|o| o.lines().next())
        {
            break line.trim().parse().unwrap();
        }
        tokio::task::yield_now().await;
    };
    assert!(ski::transport::child::process_exists(pid));
    assert_eq!(client.stats().terminals, 1);
    client.close().await;
    assert_eq!(client.stats().terminals, 0);
    assert!(
        !ski::transport::child::group_exists(pid),
        "the terminal's group outlived close"
    );
}

#[tokio::test]
async fn unknown_requests_get_method_not_found_and_unknown_notifications_nothing() {
    let (_client, mut agent) = connect(ClientConfig::default());
    agent
        .notify("_kiro.dev/metadata", json!({"anything": true}))
        .await;
    agent.notify("mystery/notification", json!({})).await;
    let unknown = agent
        .call(json!("x-1"), "_mock.conformance/unknown", json!({}))
        .await;
    assert_eq!(unknown["error"]["code"], -32601);
    let elicitation = agent
        .call(
            json!(2),
            "elicitation/create",
            json!({"message": "?", "mode": "form", "requestedSchema": {}}),
        )
        .await;
    assert_eq!(elicitation["error"]["code"], -32601);
}

#[tokio::test]
async fn close_fails_pending_requests_with_eof_and_later_ones_with_not_connected() {
    let (client, mut agent) = connect(ClientConfig::default());
    let pending: Vec<_> = (0..5)
        .map(|n| {
            let client = client.clone();
            tokio::spawn(async move {
                client
                    .new_session(&NewSessionRequest::new(format!("/{n}")))
                    .await
            })
        })
        .collect();
    for _ in 0..5 {
        agent.request("session/new").await;
    }
    assert_eq!(client.stats().peer.pending_requests, 5);
    client.close().await;
    for task in pending {
        let error = task.await.unwrap().unwrap_err();
        assert!(
            matches!(error.call_error(), Some(CallError::Eof)),
            "{error}"
        );
    }
    client.close().await;
    assert!(client.is_closed());
    let late = client
        .new_session(&NewSessionRequest::new("/late"))
        .await
        .unwrap_err();
    assert!(
        matches!(late.call_error(), Some(CallError::NotConnected)),
        "{late}"
    );
    let stats = client.stats();
    assert_eq!(
        (stats.peer.pending_requests, stats.peer.pending_timeouts),
        (0, 0)
    );
}

#[tokio::test(start_paused = true)]
async fn timeouts_fail_only_their_request_and_leave_no_state() {
    let (client, mut agent) = connect(ClientConfig {
        request_timeout: Some(Duration::from_secs(5)),
        ..ClientConfig::default()
    });
    let slow = tokio::spawn({
        let client = client.clone();
        async move { client.new_session(&NewSessionRequest::new("/slow")).await }
    });
    agent.request("session/new").await;
    assert_eq!(client.stats().peer.pending_timeouts, 1);
    let error = slow.await.unwrap().unwrap_err();
    assert!(
        matches!(error.call_error(), Some(CallError::Timeout { method, .. }) if method == "session/new"),
        "{error}"
    );
    let stats = client.stats();
    assert_eq!(
        (stats.peer.pending_requests, stats.peer.pending_timeouts),
        (0, 0)
    );

    let fast = tokio::spawn({
        let client = client.clone();
        async move { client.new_session(&NewSessionRequest::new("/fast")).await }
    });
    let (id, _) = agent.request("session/new").await;
    agent.respond(&id, json!({"sessionId": "f"})).await;
    assert_eq!(fast.await.unwrap().unwrap().session_id, "f");
}

#[tokio::test]
async fn a_request_cancelled_by_the_agent_is_an_rpc_error_the_caller_can_read() {
    let (client, mut agent) = connect(ClientConfig::default());
    let prompt = tokio::spawn({
        let client = client.clone();
        async move { client.prompt(&PromptRequest::text("s", "hi")).await }
    });
    let (id, _) = agent.request("session/prompt").await;
    agent
        .send(json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32800, "message": "Request cancelled"}}))
        .await;
    let error = prompt.await.unwrap().unwrap_err();
    assert!(error.is_rpc(ErrorCode::REQUEST_CANCELLED), "{error}");
    // The connection stays usable for the next turn.
    let next = tokio::spawn({
        let client = client.clone();
        async move { client.prompt(&PromptRequest::text("s", "again")).await }
    });
    let (id, _) = agent.request("session/prompt").await;
    agent.respond(&id, json!({"stopReason": "end_turn"})).await;
    next.await.unwrap().unwrap();
}
