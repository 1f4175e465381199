//! The agent's session surface over an in-memory pipe: initialize and capability gating,
//! authentication, new/load/list/resume/fork/delete/close/export, modes, models and config
//! options, list pagination with cursors, and session TTL with an injected clock.

use crate::acp_agent_support;

use std::sync::Arc;
use std::time::Duration;

use acp_agent_support::{TestClient, duplex_client, reply_text};
use rstest::rstest;
use serde_json::{Value, json};
use ski::acp::agent::{
    Agent, AgentConfig, AuthMethodSpec, Feature, Features, ManualClock, PermissionConfig,
    PermissionMode,
};

fn config() -> AgentConfig {
    AgentConfig {
        permission: PermissionConfig {
            mode: PermissionMode::Disabled,
            ..PermissionConfig::default()
        },
        ..AgentConfig::default()
    }
}

async fn client(config: AgentConfig) -> (Agent, TestClient) {
    let agent = Agent::new(config);
    let (client, _connection) = duplex_client(&agent);
    client.initialize().await;
    (agent, client)
}

#[rstest]
#[case::two(json!(2))]
#[case::zero(json!(0))]
#[case::a_later_one(json!(99))]
#[case::the_largest(json!(65535))]
#[tokio::test]
async fn initialize_answers_an_unsupported_version_with_1_as_acp_negotiates(
    #[case] version: Value,
) {
    let agent = Agent::new(config());
    let (client, _connection) = duplex_client(&agent);
    let result = client
        .call("initialize", json!({"protocolVersion": version}))
        .await
        .unwrap_or_else(|error| panic!("initialize with {version}: {error:?}"));
    assert_eq!(result["protocolVersion"], json!(1), "{version}: {result}");
}

#[rstest]
#[case::a_string(json!("1"))]
#[case::a_fraction(json!(1.5))]
#[case::negative(json!(-1))]
#[case::beyond_uint16(json!(65536))]
#[tokio::test]
async fn initialize_refuses_a_version_that_is_no_uint16_and_names_it(#[case] version: Value) {
    let agent = Agent::new(config());
    let (client, _connection) = duplex_client(&agent);
    let (code, message) = client
        .call_err("initialize", json!({"protocolVersion": version}))
        .await;
    assert_eq!(code, -32602, "{version}");
    assert!(message.contains(&version.to_string()), "{message}");
}

#[rstest]
#[case::two(json!(2))]
#[case::a_string(json!("1"))]
#[case::zero(json!(0))]
#[case::a_fraction(json!(1.5))]
#[tokio::test]
async fn initialize_with_strict_version_refuses_any_version_but_1_and_names_both(
    #[case] version: Value,
) {
    let agent = Agent::new(AgentConfig {
        strict_version: true,
        ..config()
    });
    let (client, _connection) = duplex_client(&agent);
    let (code, message) = client
        .call_err("initialize", json!({"protocolVersion": version}))
        .await;
    assert_eq!(code, -32602, "{version}");
    assert!(message.contains("expected: 1"), "{message}");
    assert!(message.contains(&version.to_string()), "{message}");
}

#[tokio::test]
async fn initialize_accepts_only_version_1_and_advertises_capabilities() {
    let agent = Agent::new(config());
    let (client, _connection) = duplex_client(&agent);
    let (code, _) = client.call_err("initialize", json!({})).await;
    assert_eq!(code, -32602);
    let result = client.initialize().await;
    assert_eq!(result["protocolVersion"], json!(1));
    let caps = &result["agentCapabilities"];
    assert_eq!(caps["loadSession"], json!(true));
    for capability in ["list", "resume", "fork", "delete", "close"] {
        assert_eq!(
            caps["sessionCapabilities"][capability],
            json!({}),
            "{capability}"
        );
    }
    assert_eq!(caps["auth"]["logout"], json!({}));
    assert_eq!(caps["_meta"]["ski"]["sessionExport"], json!({}));
    assert_eq!(caps["_meta"]["ski"]["sessionStop"], json!({}));
    assert!(caps["_meta"]["ski"].get("executionState").is_none());
    assert_eq!(
        caps["promptCapabilities"],
        json!({"image": true, "audio": true, "embeddedContext": true})
    );
    assert_eq!(result["agentInfo"]["name"], "ski");
    assert_eq!(result["authMethods"], json!([]));
}

#[tokio::test]
async fn minimal_agent_advertises_nothing_optional_and_gates_with_32601() {
    let (_agent, client) = client(AgentConfig {
        features: Features::minimal(),
        additional_directories: false,
        ..config()
    })
    .await;
    let result = client.initialize().await;
    let caps = &result["agentCapabilities"];
    assert_eq!(caps["loadSession"], json!(false));
    assert!(caps.get("sessionCapabilities").is_none(), "{caps}");
    assert!(caps.get("auth").is_none(), "{caps}");
    assert!(caps.get("_meta").is_none(), "{caps}");
    let session = client.new_session().await;
    let probe = json!({"sessionId": session, "cwd": "/", "mcpServers": [], "modelId": "echo"});
    for method in [
        "session/load",
        "session/list",
        "session/resume",
        "session/fork",
        "session/delete",
        "session/close",
        "session/export",
        "session/stop",
        "session/set_model",
        "logout",
    ] {
        let (code, _) = client.call_err(method, probe.clone()).await;
        assert_eq!(code, -32601, "{method}");
    }
    let (code, _) = client
        .call_err("authenticate", json!({"methodId": "x"}))
        .await;
    assert_eq!(code, -32601, "authenticate without authMethods");
    // Gating comes before params: a disabled method answers -32601 even to empty params.
    let (code, _) = client.call_err("session/delete", json!({})).await;
    assert_eq!(code, -32601);
    // The core still works.
    let result = client.prompt(&session, "hi").await.unwrap();
    assert_eq!(result["stopReason"], "end_turn");
}

/// Params are decoded once into the type of the method's table row. Absent params read as
/// `null`, so a method with required fields refuses them `-32602` naming the type it expected;
/// `logout`, whose params have no required field, is served without any.
#[tokio::test]
async fn absent_params_are_refused_by_type_and_logout_takes_none() {
    let (_agent, client) = client(config()).await;
    let refused =
        acp_agent_support::within("session/new", client.peer.request("session/new", None)).await;
    let Err(ski::jsonrpc::CallError::Rpc(error)) = refused else {
        panic!("session/new without params: {refused:?}");
    };
    assert_eq!(error.code.0, -32602);
    let reason = error.data.as_ref().and_then(|data| data["reason"].as_str());
    assert_eq!(
        reason,
        Some("invalid type: null, expected struct NewSessionRequest")
    );
    let session = client.new_session().await;
    let logout = acp_agent_support::within("logout", client.peer.request("logout", None)).await;
    assert_eq!(logout.unwrap(), json!({}));
    let (code, _) = client
        .call_err(
            "session/prompt",
            json!({"sessionId": session, "prompt": []}),
        )
        .await;
    assert_eq!(code, -32002, "logout ended {session}");
}

#[tokio::test]
async fn disabling_one_feature_gates_only_that_method() {
    let (_agent, client) = client(AgentConfig {
        features: Features::all().without(Feature::Delete),
        ..config()
    })
    .await;
    let caps = client.initialize().await["agentCapabilities"].clone();
    assert!(caps["sessionCapabilities"].get("delete").is_none());
    assert_eq!(caps["sessionCapabilities"]["list"], json!({}));
    let (code, _) = client
        .call_err("session/delete", json!({"sessionId": "x"}))
        .await;
    assert_eq!(code, -32601);
    client.call("session/list", json!({})).await.unwrap();
}

#[tokio::test]
async fn unknown_methods_and_sessions_answer_their_codes_and_the_agent_keeps_serving() {
    let (_agent, client) = client(config()).await;
    let (code, _) = client.call_err("_vendor/thing", json!({})).await;
    assert_eq!(code, -32601);
    client
        .peer
        .notify("_vendor/notice", Some(json!({})))
        .await
        .unwrap();
    let (code, message) = client
        .call_err("session/prompt", json!({"sessionId": "nope", "prompt": []}))
        .await;
    assert_eq!(code, -32002);
    assert!(message.contains("nope"), "{message}");
    let (code, _) = client.call_err("session/new", json!({"cwd": "/"})).await;
    assert_eq!(code, -32602, "missing mcpServers");
    client.new_session().await;
}

#[tokio::test]
async fn a_prompt_sends_the_documented_update_order_and_echoes() {
    let (_agent, client) = client(config()).await;
    let session = client.new_session().await;
    let result = client.prompt(&session, "hello there").await.unwrap();
    assert_eq!(result, json!({"stopReason": "end_turn"}));
    assert_eq!(
        client.kinds(&session),
        [
            "available_commands_update",
            "plan",
            "tool_call",
            "tool_call_update",
            "agent_message_chunk",
            "session_info_update",
            "usage_update"
        ]
    );
    let updates = client.updates(&session);
    assert_eq!(reply_text(&updates).as_deref(), Some("hello there"));
    assert_eq!(updates[2]["toolCallId"], updates[3]["toolCallId"]);
    assert_eq!(updates[3]["status"], "completed");
    assert_eq!(updates[5]["title"], "hello there");
    assert!(updates[5]["updatedAt"].as_str().unwrap().ends_with('Z'));
    // session/list shows the title and updatedAt the update reported.
    let list = client.call("session/list", json!({})).await.unwrap();
    assert_eq!(list["sessions"][0]["title"], updates[5]["title"]);
    assert_eq!(list["sessions"][0]["updatedAt"], updates[5]["updatedAt"]);
    // The title is sent after the first turn only.
    client.prompt(&session, "second").await.unwrap();
    let kinds = client.kinds(&session);
    assert_eq!(
        kinds.iter().filter(|k| *k == "session_info_update").count(),
        1
    );
}

#[tokio::test]
async fn message_only_turns_send_one_update() {
    let (_agent, client) = client(AgentConfig {
        turn_updates: ski::acp::agent::TurnUpdates::Message,
        ..config()
    })
    .await;
    let session = client.new_session().await;
    client.prompt(&session, "x").await.unwrap();
    assert_eq!(client.kinds(&session), ["agent_message_chunk"]);
}

#[tokio::test]
async fn non_text_blocks_are_accepted_and_the_text_is_echoed() {
    let (_agent, client) = client(config()).await;
    let session = client.new_session().await;
    let result = client
        .call(
            "session/prompt",
            json!({"sessionId": session, "prompt": [
                {"type": "text", "text": "look"},
                {"type": "image", "data": "AAAA", "mimeType": "image/png"},
                {"type": "audio", "data": "AAAA", "mimeType": "audio/wav"},
                {"type": "resource_link", "uri": "file:///w/a.txt", "name": "a.txt"}
            ]}),
        )
        .await
        .unwrap();
    assert_eq!(result["stopReason"], "end_turn");
    assert_eq!(
        reply_text(&client.updates(&session)).as_deref(),
        Some("look")
    );
}

#[tokio::test]
async fn a_600_kb_prompt_is_echoed_byte_for_byte() {
    let (_agent, client) = client(config()).await;
    let session = client.new_session().await;
    let text: String = "ä€😀x".repeat(600 * 1024 / 10);
    assert!(text.len() >= 600 * 1024);
    let result = client.prompt(&session, &text).await.unwrap();
    assert_eq!(result["stopReason"], "end_turn");
    assert_eq!(reply_text(&client.updates(&session)).unwrap(), text);
}

#[tokio::test]
async fn list_pages_through_every_session_and_refuses_bad_cursors() {
    let clock = ManualClock::default();
    let agent = Agent::with_clock(
        AgentConfig {
            page_size: 2,
            ..config()
        },
        Arc::new(clock.clone()),
    );
    let (client, _connection) = duplex_client(&agent);
    client.initialize().await;
    let mut created = Vec::new();
    for _ in 0..5 {
        created.push(client.new_session().await);
    }
    let elsewhere = tempfile::tempdir().unwrap();
    let other = client
        .new_session_in(elsewhere.path().to_str().unwrap())
        .await;
    let mut seen = Vec::new();
    let mut page = client
        .call("session/list", json!({"cwd": "/"}))
        .await
        .unwrap();
    let mut pages = 0;
    loop {
        pages += 1;
        let entries = page["sessions"].as_array().unwrap().clone();
        for entry in &entries {
            assert_eq!(entry["cwd"], "/");
            assert!(entry["updatedAt"].is_string());
            seen.push(entry["sessionId"].as_str().unwrap().to_owned());
        }
        match page["nextCursor"].as_str() {
            Some(cursor) => {
                assert_eq!(entries.len(), 2, "every page but the last is full");
                page = client
                    .call("session/list", json!({"cwd": "/", "cursor": cursor}))
                    .await
                    .unwrap();
            }
            None => {
                assert_eq!(page["nextCursor"], Value::Null);
                assert!(page.as_object().unwrap().contains_key("nextCursor"));
                break;
            }
        }
    }
    assert_eq!(pages, 3);
    // Newest first, each once, the other cwd filtered out.
    created.reverse();
    assert_eq!(seen, created);
    assert!(!seen.contains(&other));

    let first = client.call("session/list", json!({})).await.unwrap();
    let cursor = first["nextCursor"].as_str().unwrap().to_owned();
    for (params, why) in [
        (json!({"cursor": "not-a-cursor"}), "garbage"),
        (json!({"cursor": cursor, "cwd": "/"}), "another filter"),
        (json!({"cursor": "76313a3939393a30"}), "unknown listing"),
    ] {
        let (code, message) = client.call_err("session/list", params).await;
        assert_eq!(code, -32602, "{why}");
        assert!(message.contains("cursor"), "{why}: {message}");
    }
    // A cursor expires with its listing.
    clock.advance(Duration::from_secs(3600));
    let (code, message) = client
        .call_err("session/list", json!({"cursor": cursor}))
        .await;
    assert_eq!(code, -32602);
    assert!(message.contains("stale cursor"), "{message}");
}

#[tokio::test]
async fn idle_sessions_expire_after_the_ttl_on_the_injected_clock() {
    let clock = ManualClock::default();
    let agent = Agent::with_clock(
        AgentConfig {
            session_ttl: Some(Duration::from_secs(60)),
            ..config()
        },
        Arc::new(clock.clone()),
    );
    let (client, _connection) = duplex_client(&agent);
    client.initialize().await;
    let old = client.new_session().await;
    clock.advance(Duration::from_secs(45));
    let used = client.new_session().await;
    clock.advance(Duration::from_secs(30));
    client.prompt(&used, "keep me").await.unwrap();
    let list = client.call("session/list", json!({})).await.unwrap();
    let ids: Vec<&str> = list["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["sessionId"].as_str().unwrap())
        .collect();
    assert_eq!(ids, [used.as_str()]);
    let (code, _) = client
        .call_err(
            "session/prompt",
            json!({"sessionId": old, "prompt": [{"type": "text", "text": "x"}]}),
        )
        .await;
    assert_eq!(code, -32002);
    assert_eq!(agent.session_count(), 1);
    clock.advance(Duration::from_secs(61));
    agent.prune_sessions();
    assert_eq!(agent.session_count(), 0);
}

#[tokio::test]
async fn fork_gets_a_new_id_inherits_settings_and_names_its_parent() {
    let (_agent, client) = client(config()).await;
    let source = client.new_session().await;
    client
        .call(
            "session/set_mode",
            json!({"sessionId": source, "modeId": "plan"}),
        )
        .await
        .unwrap();
    client
        .call(
            "session/set_model",
            json!({"sessionId": source, "modelId": "echo-large"}),
        )
        .await
        .unwrap();
    client
        .call(
            "session/set_config_option",
            json!({"sessionId": source, "configId": "thought_level", "value": "high"}),
        )
        .await
        .unwrap();
    let fork = client
        .call("session/fork", json!({"sessionId": source, "cwd": "/"}))
        .await
        .unwrap();
    let fork_id = fork["sessionId"].as_str().unwrap();
    assert_ne!(fork_id, source);
    assert_eq!(fork["modes"]["currentModeId"], "plan");
    assert_eq!(fork["models"]["currentModelId"], "echo-large");
    let values: Vec<&Value> = fork["configOptions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| &o["currentValue"])
        .collect();
    assert_eq!(values, [&json!("echo-large"), &json!("high")]);
    let list = client.call("session/list", json!({})).await.unwrap();
    let entry = |id: &str| {
        list["sessions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["sessionId"] == id)
            .cloned()
            .unwrap()
    };
    assert_eq!(entry(fork_id)["_meta"]["parentSessionId"], json!(source));
    assert!(entry(&source).get("_meta").is_none());
    let (code, _) = client
        .call_err("session/fork", json!({"sessionId": "missing", "cwd": "/"}))
        .await;
    assert_eq!(code, -32002);
}

#[tokio::test]
async fn modes_models_and_config_options_change_with_their_updates() {
    let (_agent, client) = client(config()).await;
    let session = client.new_session().await;
    client
        .call(
            "session/set_mode",
            json!({"sessionId": session, "modeId": "plan"}),
        )
        .await
        .unwrap();
    assert_eq!(
        client.updates(&session).last().unwrap(),
        &json!({"sessionUpdate": "current_mode_update", "currentModeId": "plan"})
    );
    let (code, _) = client
        .call_err(
            "session/set_mode",
            json!({"sessionId": session, "modeId": "nope"}),
        )
        .await;
    assert_eq!(code, -32602);
    let result = client
        .call(
            "session/set_config_option",
            json!({"sessionId": session, "configId": "thought_level", "value": "low"}),
        )
        .await
        .unwrap();
    let last = client.updates(&session).last().unwrap().clone();
    assert_eq!(last["sessionUpdate"], "config_option_update");
    assert_eq!(last["configOptions"], result["configOptions"]);
    assert_eq!(result["configOptions"][1]["currentValue"], "low");
    for (config_id, value) in [("thought_level", json!("extreme")), ("nope", json!("x"))] {
        let (code, _) = client
            .call_err(
                "session/set_config_option",
                json!({"sessionId": session, "configId": config_id, "value": value}),
            )
            .await;
        assert_eq!(code, -32602, "{config_id}");
    }
    client
        .call(
            "session/set_model",
            json!({"sessionId": session, "modelId": "echo-large"}),
        )
        .await
        .unwrap();
    let last = client.updates(&session).last().unwrap().clone();
    assert_eq!(last["configOptions"][0]["currentValue"], "echo-large");
    let (code, message) = client
        .call_err(
            "session/set_model",
            json!({"sessionId": session, "modelId": "gpt-9"}),
        )
        .await;
    assert_eq!(code, -32602);
    assert!(message.contains("modelId"), "{message}");
}

#[tokio::test]
async fn load_replays_history_before_answering_and_resume_does_not() {
    let agent = Agent::new(config());
    let (first, _c1) = duplex_client(&agent);
    first.initialize().await;
    let session = first.new_session().await;
    first.prompt(&session, "remember this").await.unwrap();

    let (second, _c2) = duplex_client(&agent);
    second.initialize().await;
    let result = second
        .call(
            "session/load",
            json!({"sessionId": session, "cwd": "/", "mcpServers": []}),
        )
        .await
        .unwrap();
    // The client peer hands over a response only after the notifications before it.
    let mut replay = second.updates(&session);
    // Each replayed message carries the id the history keeps for it, one of its own.
    let ids: Vec<Value> = replay
        .iter_mut()
        .filter_map(|update| update.as_object_mut()?.remove("messageId"))
        .collect();
    assert_eq!(ids.len(), 2, "{replay:?}");
    assert!(
        ids.iter().all(Value::is_string) && ids[0] != ids[1],
        "{ids:?}"
    );
    assert_eq!(
        replay,
        [
            json!({"sessionUpdate": "user_message_chunk", "content": {"type": "text", "text": "remember this"}}),
            json!({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "remember this"}}),
        ]
    );
    assert_eq!(result["modes"]["currentModeId"], "default");
    assert!(result["configOptions"].is_array());

    let (third, _c3) = duplex_client(&agent);
    third.initialize().await;
    let result = third
        .call("session/resume", json!({"sessionId": session, "cwd": "/"}))
        .await
        .unwrap();
    assert!(result["modes"].is_object());
    assert!(third.updates(&session).is_empty(), "resume replays nothing");
    // The resuming connection owns the session now.
    third.prompt(&session, "again").await.unwrap();
    assert_eq!(
        reply_text(&third.updates(&session)).as_deref(),
        Some("again")
    );
    let (code, _) = third
        .call_err(
            "session/load",
            json!({"sessionId": "missing", "cwd": "/", "mcpServers": []}),
        )
        .await;
    assert_eq!(code, -32002);
}

#[tokio::test]
async fn delete_is_idempotent_and_removes_the_session_everywhere() {
    let (_agent, client) = client(config()).await;
    let session = client.new_session().await;
    let keep = client.new_session().await;
    for _ in 0..2 {
        let result = client
            .call("session/delete", json!({"sessionId": session}))
            .await
            .unwrap();
        assert_eq!(result, json!({}));
    }
    client
        .call("session/delete", json!({"sessionId": "never-existed"}))
        .await
        .unwrap();
    let list = client.call("session/list", json!({})).await.unwrap();
    let ids: Vec<&Value> = list["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| &s["sessionId"])
        .collect();
    assert_eq!(ids, [&json!(keep)]);
    let (code, _) = client
        .call_err(
            "session/prompt",
            json!({"sessionId": session, "prompt": [{"type": "text", "text": "x"}]}),
        )
        .await;
    assert_eq!(code, -32002);
}

#[tokio::test]
async fn export_is_jsonl_with_a_header_and_the_conversation() {
    let (_agent, client) = client(config()).await;
    let session = client.new_session().await;
    client.prompt(&session, "export me").await.unwrap();
    let result = client
        .call(
            "session/export",
            json!({"sessionId": session, "format": "jsonl"}),
        )
        .await
        .unwrap();
    assert_eq!(result["mimeType"], "application/x-ndjson");
    assert_eq!(result["format"], "jsonl");
    assert_eq!(result["sessionId"], json!(session));
    let content = result["content"].as_str().unwrap();
    assert!(content.ends_with('\n'));
    let lines: Vec<Value> = content
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert_eq!(lines[0]["type"], "session");
    assert_eq!(lines[0]["version"], 1);
    assert_eq!(lines[0]["id"], json!(session));
    assert_eq!(lines[0]["cwd"], "/");
    assert!(lines[0]["timestamp"].is_string());
    assert!(
        content
            .lines()
            .next()
            .unwrap()
            .starts_with(r#"{"cwd":"/","id":"#)
    );
    assert_eq!(
        lines[1]["message"],
        json!({"role": "user", "content": "export me"})
    );
    assert_eq!(
        lines[2]["message"],
        json!({"role": "assistant", "content": "export me"})
    );
    // The format defaults to jsonl; another format is refused.
    client
        .call("session/export", json!({"sessionId": session}))
        .await
        .unwrap();
    let (code, _) = client
        .call_err(
            "session/export",
            json!({"sessionId": session, "format": "csv"}),
        )
        .await;
    assert_eq!(code, -32602);
    let (code, _) = client
        .call_err("session/export", json!({"sessionId": "nope"}))
        .await;
    assert_eq!(code, -32002);
}

#[tokio::test]
async fn authentication_methods_required_auth_and_logout() {
    let (_agent, client) = client(AgentConfig {
        auth_methods: vec![AuthMethodSpec {
            id: "token".into(),
            name: "Token".into(),
        }],
        auth_required: true,
        ..config()
    })
    .await;
    let result = client.initialize().await;
    assert_eq!(
        result["authMethods"],
        json!([{"id": "token", "name": "Token"}])
    );
    let (code, message) = client
        .call_err("session/new", json!({"cwd": "/", "mcpServers": []}))
        .await;
    assert_eq!(code, -32000);
    assert!(message.contains("token"), "{message}");
    let (code, _) = client
        .call_err("authenticate", json!({"methodId": "password"}))
        .await;
    assert_eq!(code, -32602);
    assert_eq!(
        client
            .call("authenticate", json!({"methodId": "token"}))
            .await
            .unwrap(),
        json!({})
    );
    let session = client.new_session().await;
    assert_eq!(client.call("logout", json!({})).await.unwrap(), json!({}));
    let (code, _) = client.call_err("session/list", json!({})).await;
    assert_eq!(code, -32000, "logged out again");
    client
        .call("authenticate", json!({"methodId": "token"}))
        .await
        .unwrap();
    let list = client.call("session/list", json!({})).await.unwrap();
    assert_eq!(list["sessions"], json!([]), "logout ended {session}");
}

#[tokio::test]
async fn close_drops_the_session_and_unknown_sessions_are_refused() {
    let (agent, client) = client(config()).await;
    let session = client.new_session().await;
    assert_eq!(agent.session_count(), 1);
    assert_eq!(
        client
            .call("session/close", json!({"sessionId": session}))
            .await
            .unwrap(),
        json!({})
    );
    assert_eq!(
        agent.session_count(),
        0,
        "the closed session's state is freed"
    );
    for id in ["nope", session.as_str()] {
        let (code, _) = client
            .call_err("session/close", json!({"sessionId": id}))
            .await;
        assert_eq!(code, -32002, "{id}");
    }
}
