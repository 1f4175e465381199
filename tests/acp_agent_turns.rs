//! Prompt turns over an in-memory pipe: one prompt per session, every way of stopping a running
//! prompt, execution states, retries, timeouts, the permission bridge and policy memory, and
//! tool calls through the client.

use crate::acp_agent_support;

use std::time::Duration;

use acp_agent_support::{
    CONTENT_KINDS, PermissionAnswer, TestClient, duplex_client, reply_text, within,
};
use serde_json::json;
use ski::acp::PromptRequest;
use ski::acp::agent::{
    Agent, AgentConfig, EchoConfig, PermissionConfig, PermissionMode, PolicyMode, ToolCallSpec,
};
use ski::jsonrpc::{CallError, decode_params};

fn config() -> AgentConfig {
    AgentConfig {
        permission: PermissionConfig {
            mode: PermissionMode::Disabled,
            ..PermissionConfig::default()
        },
        execution_state: true,
        ..AgentConfig::default()
    }
}

fn holding() -> AgentConfig {
    AgentConfig {
        echo: EchoConfig {
            hold: true,
            ..EchoConfig::default()
        },
        ..config()
    }
}

fn asking(mode: PermissionMode, policy: PolicyMode) -> AgentConfig {
    AgentConfig {
        permission: PermissionConfig {
            mode,
            timeout: Duration::from_secs(30),
            policy,
        },
        ..config()
    }
}

async fn client(config: AgentConfig) -> (Agent, TestClient) {
    let agent = Agent::new(config);
    let (client, _connection) = duplex_client(&agent);
    client.initialize().await;
    (agent, client)
}

fn no_content_updates(client: &TestClient, session: &str) {
    let kinds = client.kinds(session);
    for kind in CONTENT_KINDS {
        assert!(!kinds.iter().any(|k| k == kind), "{kind} in {kinds:?}");
    }
}

fn rpc_code(result: Result<serde_json::Value, CallError>) -> (i64, String) {
    match result {
        Err(CallError::Rpc(error)) => (error.code.0, error.message),
        other => panic!("expected an rpc error, got {other:?}"),
    }
}

#[tokio::test]
async fn states_go_queued_running_completed_and_are_off_by_default() {
    let (_agent, client) = client(config()).await;
    let session = client.new_session().await;
    client.prompt(&session, "hi").await.unwrap();
    assert_eq!(client.states(&session), ["queued", "running", "completed"]);
    let kinds = client.kinds(&session);
    assert_eq!(kinds.first().unwrap(), "execution_state_update");
    assert_eq!(kinds.last().unwrap(), "execution_state_update");
    let caps = client.initialize().await["agentCapabilities"].clone();
    assert_eq!(caps["_meta"]["ski"]["executionState"], json!({}));

    let (_agent, plain) = self::client(AgentConfig {
        execution_state: false,
        ..config()
    })
    .await;
    let session = plain.new_session().await;
    plain.prompt(&session, "hi").await.unwrap();
    assert!(plain.states(&session).is_empty());
}

#[tokio::test]
async fn a_second_prompt_on_a_busy_session_is_refused_without_any_update() {
    let (_agent, client) = client(holding()).await;
    let session = client.new_session().await;
    let other = client.new_session().await;
    let (_, first) = client.start_prompt(&session, "first").await;
    client.wait_for_state(&session, "running").await;
    let before = client.updates(&session).len();
    let (code, message) = rpc_code(client.prompt(&session, "second").await);
    assert_eq!(code, -32602);
    assert!(message.contains("already running"), "{message}");
    assert_eq!(
        client.updates(&session).len(),
        before,
        "no queued for the refused prompt"
    );
    // Another session is not affected.
    let (_, other_prompt) = client.start_prompt(&other, "other").await;
    client.wait_for_state(&other, "running").await;
    client
        .peer
        .notify("session/cancel", Some(json!({"sessionId": session})))
        .await
        .unwrap();
    client
        .peer
        .notify("session/cancel", Some(json!({"sessionId": other})))
        .await
        .unwrap();
    let result = within("the first prompt", first).await.unwrap().unwrap();
    assert_eq!(result["stopReason"], "cancelled");
    within("the other prompt", other_prompt)
        .await
        .unwrap()
        .unwrap();
    // The session takes a new prompt once the first has ended.
    client
        .call(
            "session/prompt",
            json!({"sessionId": session, "prompt": [{"type": "text", "text": "third"}],
                   "_meta": {"ski": {"hold": false}}}),
        )
        .await
        .unwrap();
}

#[tokio::test]
async fn session_cancel_ends_a_held_prompt_cancelled_with_no_content_updates() {
    let (_agent, client) = client(holding()).await;
    let session = client.new_session().await;
    let (_, prompt) = client.start_prompt(&session, "hold").await;
    client.wait_for_state(&session, "running").await;
    client
        .peer
        .notify("session/cancel", Some(json!({"sessionId": session})))
        .await
        .unwrap();
    let result = within("the cancelled prompt", prompt)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(result, json!({"stopReason": "cancelled"}));
    assert_eq!(client.states(&session), ["queued", "running", "cancelled"]);
    no_content_updates(&client, &session);
}

#[tokio::test]
async fn cancel_request_answers_32800_and_leaves_other_prompts_alone() {
    let (_agent, client) = client(AgentConfig {
        echo: EchoConfig {
            delay: Duration::from_millis(300),
            ..EchoConfig::default()
        },
        ..config()
    })
    .await;
    let held = client.new_session().await;
    let other = client.new_session().await;
    let (id, prompt) = client.start_prompt(&held, "cancel me").await;
    let (_, other_prompt) = client.start_prompt(&other, "finish me").await;
    client.wait_for_state(&held, "running").await;
    client.peer.cancel_request(&id).await.unwrap();
    let (code, _) = rpc_code(within("the cancelled prompt", prompt).await.unwrap());
    assert_eq!(code, -32800);
    let result = within("the other prompt", other_prompt)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(result["stopReason"], "end_turn");
    assert_eq!(client.states(&held), ["queued", "running", "cancelled"]);
    no_content_updates(&client, &held);
    // A cancel for an id that is not running is ignored, and the id can be used again.
    client.peer.cancel_request(&id).await.unwrap();
    client.prompt(&held, "after").await.unwrap();
}

#[tokio::test]
async fn session_stop_as_request_and_as_notification_ends_the_prompt() {
    let (_agent, client) = client(holding()).await;
    let session = client.new_session().await;
    let (_, prompt) = client.start_prompt(&session, "hold").await;
    client.wait_for_state(&session, "running").await;
    let stopped = client
        .call("session/stop", json!({"sessionId": session}))
        .await
        .unwrap();
    assert_eq!(stopped, json!({}));
    let result = within("the stopped prompt", prompt).await.unwrap().unwrap();
    assert_eq!(result["stopReason"], "cancelled");
    no_content_updates(&client, &session);

    let (_, prompt) = client.start_prompt(&session, "hold again").await;
    client
        .wait_for("a second running state", |c| {
            c.states(&session)
                .iter()
                .filter(|s| *s == "running")
                .count()
                == 2
        })
        .await;
    client
        .peer
        .notify("session/stop", Some(json!({"sessionId": session})))
        .await
        .unwrap();
    let result = within("the stopped prompt", prompt).await.unwrap().unwrap();
    assert_eq!(result["stopReason"], "cancelled");
    // Stopping an idle session succeeds; an unknown one is refused.
    client
        .call("session/stop", json!({"sessionId": session}))
        .await
        .unwrap();
    let (code, _) = client
        .call_err("session/stop", json!({"sessionId": "nope"}))
        .await;
    assert_eq!(code, -32002);
}

#[tokio::test]
async fn delete_and_logout_cancel_a_running_prompt() {
    let (_agent, client) = client(holding()).await;
    let session = client.new_session().await;
    let (_, prompt) = client.start_prompt(&session, "hold").await;
    client.wait_for_state(&session, "running").await;
    client
        .call("session/delete", json!({"sessionId": session}))
        .await
        .unwrap();
    let result = within("the prompt of the deleted session", prompt)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(result["stopReason"], "cancelled");

    let session = client.new_session().await;
    let (_, prompt) = client.start_prompt(&session, "hold").await;
    client.wait_for_state(&session, "running").await;
    client.call("logout", json!({})).await.unwrap();
    let result = within("the prompt ended by logout", prompt)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(result["stopReason"], "cancelled");
}

#[tokio::test]
async fn the_prompt_timeout_answers_32603_with_timed_out() {
    let (_agent, client) = client(AgentConfig {
        prompt_timeout: Some(Duration::from_millis(50)),
        ..holding()
    })
    .await;
    let session = client.new_session().await;
    let (code, message) = rpc_code(client.prompt(&session, "too slow").await);
    assert_eq!(code, -32603);
    assert!(message.contains("timed out"), "{message}");
    assert_eq!(client.states(&session), ["queued", "running", "timed_out"]);
    no_content_updates(&client, &session);
}

#[tokio::test]
async fn a_failed_attempt_is_retried_with_retry_update_then_ends_the_turn() {
    let (_agent, client) = client(AgentConfig {
        max_retries: 2,
        retry_base_delay: Duration::from_millis(1),
        echo: EchoConfig {
            fail_attempts: 1,
            ..EchoConfig::default()
        },
        ..config()
    })
    .await;
    let caps = client.initialize().await["agentCapabilities"].clone();
    assert_eq!(caps["_meta"]["ski"]["promptRetry"], json!({}));
    let session = client.new_session().await;
    let result = client.prompt(&session, "retry me").await.unwrap();
    assert_eq!(result["stopReason"], "end_turn");
    assert_eq!(
        client.states(&session),
        ["queued", "running", "retrying", "running", "completed"]
    );
    let retries: Vec<_> = client
        .updates(&session)
        .into_iter()
        .filter(|u| u["sessionUpdate"] == "retry_update")
        .collect();
    assert_eq!(retries.len(), 1);
    assert_eq!(retries[0]["retry"]["attempt"], 1);
    assert_eq!(retries[0]["retry"]["maxAttempts"], 3);
    assert!(retries[0]["retry"]["reason"].is_string());
    let replies = client
        .kinds(&session)
        .iter()
        .filter(|k| *k == "agent_message_chunk")
        .count();
    assert_eq!(replies, 1, "the reply is sent once");
}

#[tokio::test]
async fn exhausted_retries_answer_32603_after_failed() {
    let (_agent, client) = client(AgentConfig {
        max_retries: 1,
        retry_base_delay: Duration::from_millis(1),
        echo: EchoConfig {
            fail_attempts: 10,
            ..EchoConfig::default()
        },
        ..config()
    })
    .await;
    let session = client.new_session().await;
    let (code, message) = rpc_code(client.prompt(&session, "fail").await);
    assert_eq!(code, -32603);
    assert!(
        message.contains("attempt 2"),
        "the last failure's message: {message}"
    );
    assert_eq!(
        client.states(&session),
        ["queued", "running", "retrying", "running", "failed"]
    );
    assert_eq!(
        client
            .kinds(&session)
            .iter()
            .filter(|k| *k == "retry_update")
            .count(),
        1
    );
    no_content_updates(&client, &session);
}

#[tokio::test(start_paused = true)]
async fn retry_delays_grow_linearly_on_the_tokio_clock() {
    let (_agent, client) = client(AgentConfig {
        max_retries: 3,
        retry_base_delay: Duration::from_secs(100),
        echo: EchoConfig {
            fail_attempts: 3,
            ..EchoConfig::default()
        },
        ..config()
    })
    .await;
    let session = client.new_session().await;
    let started = tokio::time::Instant::now();
    // No patience timeout here: with paused time it would fire before the retry delays.
    let result = client
        .peer
        .request(
            "session/prompt",
            Some(json!({"sessionId": session, "prompt": [{"type": "text", "text": "slowly"}]})),
        )
        .await
        .unwrap();
    assert_eq!(result["stopReason"], "end_turn");
    // 100 + 200 + 300 seconds of retry delay, and nothing else that takes time.
    let elapsed = started.elapsed();
    assert!(elapsed >= Duration::from_secs(600), "{elapsed:?}");
    assert!(elapsed < Duration::from_secs(601), "{elapsed:?}");
}

#[tokio::test]
async fn permission_allowed_refused_and_cancelled_by_the_client() {
    let (_agent, client) = client(asking(PermissionMode::Permissive, PolicyMode::Ask)).await;
    let session = client.new_session().await;
    client.answer_permissions([
        PermissionAnswer::select("allow_once"),
        PermissionAnswer::select("reject_once"),
        PermissionAnswer::Cancelled,
    ]);
    let result = client.prompt(&session, "allowed").await.unwrap();
    assert_eq!(result["stopReason"], "end_turn");
    let request = &client.requests("session/request_permission")[0];
    assert_eq!(request["sessionId"], json!(session));
    assert_eq!(request["toolCall"]["title"], "Execute session prompt");
    let kinds: Vec<&str> = request["options"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["kind"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        ["allow_once", "allow_always", "reject_once", "reject_always"]
    );

    let denied = client.new_session().await;
    let result = client.prompt(&denied, "refused").await.unwrap();
    assert_eq!(result["stopReason"], "cancelled");
    assert_eq!(
        client.states(&denied),
        ["queued", "cancelled"],
        "no running, no model call"
    );
    no_content_updates(&client, &denied);

    let cancelled = client.new_session().await;
    let result = client.prompt(&cancelled, "cancelled").await.unwrap();
    assert_eq!(result["stopReason"], "cancelled");
    no_content_updates(&client, &cancelled);
}

#[tokio::test]
async fn permissive_mode_falls_back_to_allow_when_the_bridge_fails() {
    let (_agent, client) = client(AgentConfig {
        permission: PermissionConfig {
            mode: PermissionMode::Permissive,
            timeout: Duration::from_millis(50),
            policy: PolicyMode::Ask,
        },
        ..config()
    })
    .await;
    let session = client.new_session().await;
    client.default_permission(PermissionAnswer::Never);
    let result = client.prompt(&session, "nobody answers").await.unwrap();
    assert_eq!(result["stopReason"], "end_turn");
    client.default_permission(PermissionAnswer::Error);
    let result = client.prompt(&session, "error answer").await.unwrap();
    assert_eq!(result["stopReason"], "end_turn");
    client.default_permission(PermissionAnswer::select("bogus"));
    let result = client.prompt(&session, "unknown option").await.unwrap();
    assert_eq!(result["stopReason"], "end_turn");
}

#[tokio::test]
async fn required_mode_fails_on_bridge_errors_and_cancels_on_refusal() {
    let (_agent, client) = client(AgentConfig {
        permission: PermissionConfig {
            mode: PermissionMode::Required,
            timeout: Duration::from_millis(50),
            policy: PolicyMode::Ask,
        },
        ..config()
    })
    .await;
    let session = client.new_session().await;
    client.answer_permissions([
        PermissionAnswer::Never,
        PermissionAnswer::select("reject_once"),
        PermissionAnswer::select("allow_once"),
    ]);
    let (code, message) = rpc_code(client.prompt(&session, "silence").await);
    assert_eq!(code, -32603);
    assert!(message.contains("permission"), "{message}");
    no_content_updates(&client, &session);
    let result = client.prompt(&session, "refused").await.unwrap();
    assert_eq!(result["stopReason"], "cancelled");
    no_content_updates(&client, &session);
    let result = client.prompt(&session, "allowed").await.unwrap();
    assert_eq!(result["stopReason"], "end_turn");
}

#[tokio::test]
async fn cancelling_while_permission_is_pending_cancels_the_request_too() {
    let (_agent, client) = client(asking(PermissionMode::Required, PolicyMode::Ask)).await;
    let session = client.new_session().await;
    client.default_permission(PermissionAnswer::Never);
    let (_, prompt) = client.start_prompt(&session, "waiting").await;
    client
        .wait_for("the permission request", |c| {
            !c.requests("session/request_permission").is_empty()
        })
        .await;
    client
        .peer
        .notify("session/cancel", Some(json!({"sessionId": session})))
        .await
        .unwrap();
    let result = within("the cancelled prompt", prompt)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(result["stopReason"], "cancelled");
    // The client's pending permission handler was cancelled by $/cancel_request.
    client
        .wait_for("the permission handler to end", |c| {
            c.peer.stats().inbound_requests == 0
        })
        .await;
}

#[tokio::test]
async fn policy_allow_and_deny_decide_without_asking() {
    let (_agent, client) = client(asking(PermissionMode::Required, PolicyMode::Allow)).await;
    let session = client.new_session().await;
    assert_eq!(
        client.prompt(&session, "x").await.unwrap()["stopReason"],
        "end_turn"
    );
    assert!(client.requests("session/request_permission").is_empty());

    let (_agent, client) = self::client(asking(PermissionMode::Required, PolicyMode::Deny)).await;
    let session = client.new_session().await;
    assert_eq!(
        client.prompt(&session, "x").await.unwrap()["stopReason"],
        "cancelled"
    );
    assert!(client.requests("session/request_permission").is_empty());
    no_content_updates(&client, &session);
}

#[tokio::test]
async fn policy_memory_remembers_always_answers_per_session() {
    let (_agent, client) = client(asking(PermissionMode::Required, PolicyMode::Ask)).await;
    let asks = |c: &TestClient| c.requests("session/request_permission").len();
    let allowed = client.new_session().await;
    client.answer_permissions([PermissionAnswer::select("allow_always")]);
    client.prompt(&allowed, "one").await.unwrap();
    assert_eq!(asks(&client), 1);
    client.default_permission(PermissionAnswer::select("reject_once"));
    let result = client.prompt(&allowed, "two").await.unwrap();
    assert_eq!(result["stopReason"], "end_turn", "remembered allow_always");
    assert_eq!(asks(&client), 1, "not asked again");

    // Another session asks again.
    let rejected = client.new_session().await;
    client.answer_permissions([PermissionAnswer::select("reject_always")]);
    assert_eq!(
        client.prompt(&rejected, "a").await.unwrap()["stopReason"],
        "cancelled"
    );
    assert_eq!(asks(&client), 2);
    client.default_permission(PermissionAnswer::select("allow_once"));
    assert_eq!(
        client.prompt(&rejected, "b").await.unwrap()["stopReason"],
        "cancelled"
    );
    assert_eq!(asks(&client), 2, "remembered reject_always without asking");

    // Delete forgets the session and its memory.
    client
        .call("session/delete", json!({"sessionId": rejected}))
        .await
        .unwrap();
    let (code, _) = client
        .call_err(
            "session/prompt",
            json!({"sessionId": rejected, "prompt": [{"type": "text", "text": "c"}]}),
        )
        .await;
    assert_eq!(code, -32002);

    // Logout ends every session; a new one asks again.
    client.call("logout", json!({})).await.unwrap();
    let fresh = client.new_session().await;
    client.prompt(&fresh, "after logout").await.unwrap();
    assert_eq!(asks(&client), 3);
}

#[tokio::test]
async fn tool_calls_go_through_the_client_and_terminals_are_released() {
    let (_agent, client) = client(AgentConfig {
        echo: EchoConfig {
            tool_calls: vec![
                "read:notes.txt:2:1".parse::<ToolCallSpec>().unwrap(),
                "write:/out/reply.txt".parse().unwrap(),
                "terminal:echo hello".parse().unwrap(),
            ],
            ..EchoConfig::default()
        },
        ..config()
    })
    .await;
    client
        .initialize_with(
            json!({"fs": {"readTextFile": true, "writeTextFile": true}, "terminal": true}),
        )
        .await;
    client
        .state
        .files
        .lock()
        .unwrap()
        .insert("/notes.txt".into(), "line two".into());
    let session = client.new_session().await;
    let result = client.prompt(&session, "tools please").await.unwrap();
    assert_eq!(result["stopReason"], "end_turn");
    assert_eq!(
        client.request_methods(),
        [
            "fs/read_text_file",
            "fs/write_text_file",
            "terminal/create",
            "terminal/wait_for_exit",
            "terminal/output",
            "terminal/release"
        ]
    );
    let read = &client.requests("fs/read_text_file")[0];
    assert_eq!(
        read,
        &json!({"sessionId": session, "path": "/notes.txt", "line": 2, "limit": 1})
    );
    assert_eq!(
        client
            .state
            .files
            .lock()
            .unwrap()
            .get("/out/reply.txt")
            .map(String::as_str),
        Some("tools please")
    );
    let create = &client.requests("terminal/create")[0];
    assert_eq!(create["command"], "echo");
    assert_eq!(create["args"], json!(["hello"]));
    assert_eq!(create["cwd"], "/");
    assert_eq!(
        client.content_kinds(&session),
        [
            "available_commands_update",
            "plan",
            "tool_call",
            "tool_call_update",
            "tool_call",
            "tool_call_update",
            "tool_call",
            "tool_call_update",
            "tool_call_update",
            "agent_message_chunk",
            "session_info_update",
            "usage_update"
        ]
    );
    let updates = client.updates(&session);
    let read_done = updates.iter().find(|u| {
        u["sessionUpdate"] == "tool_call_update" && u["content"][0]["content"]["text"] == "line two"
    });
    assert!(read_done.is_some(), "the read result is reported");
    let terminal_ref = updates
        .iter()
        .find(|u| u["content"][0]["type"] == "terminal")
        .expect("an update referencing the terminal");
    assert_eq!(terminal_ref["content"][0]["terminalId"], "term-1");
    assert_eq!(reply_text(&updates).as_deref(), Some("tools please"));
}

#[tokio::test]
async fn no_fs_or_terminal_calls_without_the_client_capability() {
    let (_agent, client) = client(AgentConfig {
        echo: EchoConfig {
            tool_calls: vec![
                "read:/a".parse().unwrap(),
                "write:/b".parse().unwrap(),
                "terminal:ls".parse().unwrap(),
            ],
            ..EchoConfig::default()
        },
        ..config()
    })
    .await;
    let session = client.new_session().await;
    let result = client.prompt(&session, "x").await.unwrap();
    assert_eq!(result["stopReason"], "end_turn");
    assert!(
        client.request_methods().is_empty(),
        "{:?}",
        client.request_methods()
    );
    let failed = client
        .updates(&session)
        .into_iter()
        .filter(|u| u["sessionUpdate"] == "tool_call_update" && u["status"] == "failed")
        .count();
    assert_eq!(failed, 3);
}

#[tokio::test]
async fn a_turn_stopped_while_a_command_runs_kills_and_releases_the_terminal() {
    let (_agent, client) = client(AgentConfig {
        echo: EchoConfig {
            tool_calls: vec!["terminal:sleep 100".parse().unwrap()],
            ..EchoConfig::default()
        },
        ..config()
    })
    .await;
    client.initialize_with(json!({"terminal": true})).await;
    *client.state.terminal_hangs.lock().unwrap() = true;
    let session = client.new_session().await;
    let (_, prompt) = client.start_prompt(&session, "run").await;
    client
        .wait_for("terminal/wait_for_exit", |c| {
            !c.requests("terminal/wait_for_exit").is_empty()
        })
        .await;
    let seen = client.updates(&session).len();
    client
        .peer
        .notify("session/cancel", Some(json!({"sessionId": session})))
        .await
        .unwrap();
    let result = within("the cancelled prompt", prompt)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(result["stopReason"], "cancelled");
    let methods = client.request_methods();
    assert_eq!(
        &methods[methods.len() - 2..],
        ["terminal/kill", "terminal/release"]
    );
    let later: Vec<String> = client.kinds(&session)[seen..].to_vec();
    assert_eq!(
        later,
        ["execution_state_update"],
        "no content after the cancel"
    );
}

#[tokio::test]
async fn prompt_directives_override_the_echo_per_prompt() {
    let (_agent, client) = client(config()).await;
    let session = client.new_session().await;
    let (code, _) = rpc_code(
        client
            .call(
                "session/prompt",
                json!({"sessionId": session, "prompt": [], "_meta": {"ski": {"failAttempts": 1}}}),
            )
            .await,
    );
    assert_eq!(code, -32603);
    let (code, message) = rpc_code(
        client
            .call(
                "session/prompt",
                json!({"sessionId": session, "prompt": [], "_meta": {"ski": {"bogus": 1}}}),
            )
            .await,
    );
    assert_eq!(code, -32602);
    assert!(message.contains("_meta.ski"), "{message}");
}

#[tokio::test]
async fn end_of_input_stops_running_turns_and_closes_the_connection() {
    let agent = Agent::new(holding());
    let (ours, theirs) = tokio::io::duplex(1 << 16);
    let (read, write) = tokio::io::split(theirs);
    let serving = tokio::spawn({
        let agent = agent.clone();
        async move {
            agent
                .serve_stream(
                    ski::jsonrpc::Transport::bytes(read, write),
                    &Default::default(),
                    &tokio_util::sync::CancellationToken::new(),
                )
                .await;
        }
    });
    let (read, write) = tokio::io::split(ours);
    let mut reader = ski::jsonrpc::LineReader::new(read);
    let mut writer = write;
    use tokio::io::AsyncWriteExt;
    for line in [
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}"#,
        r#"{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"/","mcpServers":[]}}"#,
    ] {
        writer.write_all(line.as_bytes()).await.unwrap();
        writer.write_all(b"\n").await.unwrap();
    }
    let mut session = None;
    while session.is_none() {
        let line = within("session/new", reader.next_line())
            .await
            .unwrap()
            .unwrap();
        let value: serde_json::Value = serde_json::from_slice(line).unwrap();
        if value["id"] == 2 {
            session = value["result"]["sessionId"].as_str().map(str::to_owned);
        }
    }
    let prompt = json!({"jsonrpc": "2.0", "id": 3, "method": "session/prompt",
        "params": {"sessionId": session, "prompt": [{"type": "text", "text": "x"}]}});
    writer
        .write_all(format!("{prompt}\n").as_bytes())
        .await
        .unwrap();
    // Wait for the turn to run before ending the input.
    loop {
        let line = within("running", reader.next_line())
            .await
            .unwrap()
            .unwrap();
        if std::str::from_utf8(line)
            .unwrap()
            .contains(r#""state":"running""#)
        {
            break;
        }
    }
    writer.shutdown().await.unwrap();
    drop(writer);
    let mut answered = false;
    while let Some(line) = within("the rest of the output", reader.next_line()).await {
        let value: serde_json::Value = serde_json::from_slice(line.unwrap()).unwrap();
        if value["id"] == 3 {
            assert_eq!(value["result"]["stopReason"], "cancelled");
            answered = true;
        }
    }
    assert!(
        answered,
        "the held prompt was answered before the connection closed"
    );
    within("serve_stream to return", serving).await.unwrap();
    assert_eq!(agent.connection_count(), 0);
}

#[tokio::test]
async fn racing_cancels_leave_exactly_one_answer_per_prompt_and_a_free_session() {
    let (agent, client) = client(AgentConfig {
        echo: EchoConfig {
            delay: Duration::from_millis(1),
            ..EchoConfig::default()
        },
        ..config()
    })
    .await;
    let session = client.new_session().await;
    for round in 0..40 {
        let (id, prompt) = client.start_prompt(&session, "race").await;
        // Cancel at once, before or after the turn got going, in one of four ways.
        match round % 4 {
            0 => {}
            1 => client
                .peer
                .notify("session/cancel", Some(json!({"sessionId": session})))
                .await
                .unwrap(),
            2 => client.peer.cancel_request(&id).await.unwrap(),
            _ => client
                .peer
                .notify("session/stop", Some(json!({"sessionId": session})))
                .await
                .unwrap(),
        }
        let outcome = within("a racing prompt", prompt).await.unwrap();
        match (round % 4, outcome) {
            (_, Ok(result)) => {
                let reason = result["stopReason"].as_str().unwrap().to_owned();
                assert!(
                    reason == "end_turn" || (round % 4 != 0 && reason == "cancelled"),
                    "round {round}: {reason}"
                );
            }
            (2, Err(CallError::Rpc(error))) => assert_eq!(error.code.0, -32800),
            (_, other) => panic!("round {round}: unexpected outcome {other:?}"),
        }
        assert_eq!(
            agent.running_turns(),
            0,
            "round {round}: the session is free"
        );
    }
    assert_eq!(
        client.peer.stats().ignored_responses,
        0,
        "no duplicate answers"
    );
    let states = client.states(&session);
    let ends = states
        .iter()
        .filter(|s| {
            matches!(
                s.as_str(),
                "completed" | "cancelled" | "failed" | "timed_out"
            )
        })
        .count();
    assert_eq!(ends, 40, "one terminal state per prompt: {states:?}");
}

/// Reads raw lines until the response with `id` and returns it, skipping notifications.
async fn raw_response(
    reader: &mut ski::jsonrpc::LineReader<tokio::io::ReadHalf<tokio::io::DuplexStream>>,
    id: u64,
    what: &str,
) -> serde_json::Value {
    loop {
        let line = within(what, reader.next_line())
            .await
            .expect("the agent closed its output")
            .expect("a frame");
        let message: serde_json::Value = serde_json::from_slice(line).expect("json from agent");
        if message.get("method").is_none() && message["id"] == json!(id) {
            return message;
        }
    }
}

/// `session/prompt` and `session/cancel` written in one write to a held agent: the cancel is
/// read right behind the prompt, and must still find its turn running and end it `cancelled`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_cancel_written_with_its_prompt_always_ends_it_cancelled() {
    use tokio::io::AsyncWriteExt;
    let agent = Agent::new(holding());
    let (ours, theirs) = tokio::io::duplex(1 << 20);
    let (read, write) = tokio::io::split(theirs);
    let _connection = agent.connect(
        ski::jsonrpc::Transport::bytes(read, write),
        &ski::acp::agent::ConnectionOptions::default(),
    );
    let (read, mut writer) = tokio::io::split(ours);
    let mut reader = ski::jsonrpc::LineReader::new(read);
    let mut send = async |text: String| {
        writer.write_all(text.as_bytes()).await.unwrap();
    };
    send(format!(
        "{}\n{}\n",
        json!({"jsonrpc": "2.0", "id": 0, "method": "initialize",
               "params": {"protocolVersion": 1, "clientCapabilities": {}}}),
        json!({"jsonrpc": "2.0", "id": 1, "method": "session/new",
               "params": {"cwd": "/", "mcpServers": []}}),
    ))
    .await;
    assert!(
        raw_response(&mut reader, 0, "initialize")
            .await
            .get("result")
            .is_some()
    );
    let created = raw_response(&mut reader, 1, "session/new").await;
    let session = created["result"]["sessionId"]
        .as_str()
        .expect("sessionId")
        .to_owned();
    for round in 0..100u64 {
        let id = round + 2;
        send(format!(
            "{}\n{}\n",
            json!({"jsonrpc": "2.0", "id": id, "method": "session/prompt",
                   "params": {"sessionId": session,
                              "prompt": [{"type": "text", "text": "hold"}]}}),
            json!({"jsonrpc": "2.0", "method": "session/cancel",
                   "params": {"sessionId": session}}),
        ))
        .await;
        let what = format!("round {round}: the prompt's answer (a lost cancel leaves it held)");
        let answer = raw_response(&mut reader, id, &what).await;
        assert_eq!(
            answer["result"],
            json!({"stopReason": "cancelled"}),
            "round {round}: {answer}"
        );
    }
}

#[tokio::test]
async fn a_malformed_prompt_is_answered_invalid_params_as_a_value_decode_words_it() {
    let (_agent, client) = client(config()).await;
    let session = client.new_session().await;
    for params in [
        json!({"sessionId": session, "prompt": 3}),
        json!({"sessionId": session}),
        json!({"sessionId": 7, "prompt": []}),
        json!({"sessionId": session, "prompt": [{"type": "text"}]}),
        json!({"sessionId": session, "prompt": [{"type": "text", "text": 1}]}),
        json!([session]),
    ] {
        let expected = decode_params::<PromptRequest>(Some(params.clone())).unwrap_err();
        match client.call("session/prompt", params.clone()).await {
            Err(CallError::Rpc(error)) => assert_eq!(error, expected, "{params}"),
            other => panic!("{params}: expected an rpc error, got {other:?}"),
        }
    }
    let result = client.prompt(&session, "after").await.unwrap();
    assert_eq!(result["stopReason"], "end_turn");
}
