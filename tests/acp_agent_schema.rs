//! What the agent sends, decoded with the official ACP schema crate as an oracle: every result
//! of the standard methods, every `session/update` of a turn with tool calls, and every request
//! the agent makes of the client.

use crate::acp_agent_support;

use acp_agent_support::{TestClient, duplex_client};
use agent_client_protocol_schema::v1 as official;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use ski::acp::agent::{
    Agent, AgentConfig, EchoConfig, PermissionConfig, PermissionMode, PolicyMode,
};

fn decodes<T: DeserializeOwned>(what: &str, value: &Value) {
    if let Err(error) = serde_json::from_value::<T>(value.clone()) {
        panic!("{what} does not decode with the official schema: {error}\n{value}");
    }
}

async fn call(client: &TestClient, method: &str, params: Value) -> Value {
    client
        .call(method, params)
        .await
        .unwrap_or_else(|e| panic!("{method}: {e}"))
}

#[tokio::test]
async fn everything_the_agent_sends_decodes_with_the_official_schema() {
    let agent = Agent::new(AgentConfig {
        permission: PermissionConfig {
            mode: PermissionMode::Required,
            policy: PolicyMode::Ask,
            ..PermissionConfig::default()
        },
        echo: EchoConfig {
            tool_calls: vec![
                "read:notes.txt:1:2".parse().unwrap(),
                "write:out.txt".parse().unwrap(),
                "terminal:ls -l".parse().unwrap(),
            ],
            ..EchoConfig::default()
        },
        ..AgentConfig::default()
    });
    let (client, _connection) = duplex_client(&agent);
    client
        .state
        .files
        .lock()
        .unwrap()
        .insert("/notes.txt".into(), "a\nb\n".into());
    let init = client
        .initialize_with(
            json!({"fs": {"readTextFile": true, "writeTextFile": true}, "terminal": true}),
        )
        .await;
    decodes::<official::InitializeResponse>("initialize", &init);

    let new = call(
        &client,
        "session/new",
        json!({"cwd": "/", "mcpServers": []}),
    )
    .await;
    decodes::<official::NewSessionResponse>("session/new", &new);
    let session = new["sessionId"].as_str().unwrap().to_owned();

    let prompt = call(
        &client,
        "session/prompt",
        json!({"sessionId": session, "prompt": [
            {"type": "text", "text": "hello"},
            {"type": "resource_link", "uri": "file:///srv/project/a", "name": "a"}
        ]}),
    )
    .await;
    decodes::<official::PromptResponse>("session/prompt", &prompt);
    assert_eq!(prompt["stopReason"], "end_turn");

    let config = call(
        &client,
        "session/set_config_option",
        json!({"sessionId": session, "configId": "thought_level", "value": "high"}),
    )
    .await;
    decodes::<official::SetSessionConfigOptionResponse>("session/set_config_option", &config);
    call(
        &client,
        "session/set_mode",
        json!({"sessionId": session, "modeId": "plan"}),
    )
    .await;

    let list = call(&client, "session/list", json!({})).await;
    decodes::<official::ListSessionsResponse>("session/list", &list);
    let load = call(
        &client,
        "session/load",
        json!({"sessionId": session, "cwd": "/", "mcpServers": []}),
    )
    .await;
    decodes::<official::LoadSessionResponse>("session/load", &load);
    let resume = call(
        &client,
        "session/resume",
        json!({"sessionId": session, "cwd": "/"}),
    )
    .await;
    decodes::<official::ResumeSessionResponse>("session/resume", &resume);

    let updates = client.all_updates();
    assert!(updates.len() >= 12, "{updates:?}");
    for update in &updates {
        decodes::<official::SessionNotification>("session/update", update);
    }
    let mut methods = client.request_methods();
    methods.dedup();
    assert_eq!(
        methods,
        [
            "session/request_permission",
            "fs/read_text_file",
            "fs/write_text_file",
            "terminal/create",
            "terminal/wait_for_exit",
            "terminal/output",
            "terminal/release"
        ]
    );
    for method in &methods {
        for params in client.requests(method) {
            match method.as_str() {
                "session/request_permission" => {
                    decodes::<official::RequestPermissionRequest>(method, &params)
                }
                "fs/read_text_file" => decodes::<official::ReadTextFileRequest>(method, &params),
                "fs/write_text_file" => decodes::<official::WriteTextFileRequest>(method, &params),
                "terminal/create" => decodes::<official::CreateTerminalRequest>(method, &params),
                "terminal/wait_for_exit" => {
                    decodes::<official::WaitForTerminalExitRequest>(method, &params)
                }
                "terminal/output" => decodes::<official::TerminalOutputRequest>(method, &params),
                "terminal/release" => decodes::<official::ReleaseTerminalRequest>(method, &params),
                other => panic!("unexpected request {other}"),
            }
        }
    }
}
