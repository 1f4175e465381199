//! Prompt-as-command mode: the vocabulary of the official Rust SDK's test agent, so a client
//! tested against that agent can be tested against this one with the same prompts.
//!
//! Plain-text prompts: `help`, `greet`, `echo <message>`, and the scenario names
//! `session_updates`, `content`, `tool_calls`, `callbacks`, `elicitations`, `cancel_status`,
//! `wait_for_cancel`, `full` (with the same aliases). JSON prompts:
//! `{"command":"echo","message":"hi"}`, `{"command":"run_scenario","scenario":"full"}`,
//! `{"command":"help"}`, `{"command":"greet"}`. Anything else is answered `Hello, world!`.
//!
//! A scenario sends its updates and requests, then one `agent_message_chunk` with a report of
//! what happened (one line per step) and the stop reason (`cancelled` when the session was
//! cancelled meanwhile). The updates' content is fixed, so every run writes the same bytes.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use ski::jsonrpc::RpcError;

use super::personality::{begin_turn, finish_turn, reply, stop_reason};
use super::runtime::Agent;
use super::runtime::ctx::Ctx;

pub mod scenario;
pub use scenario::Scenario;

/// How long a scenario waits for the client to answer one of its requests.
const CALLBACK_TIMEOUT: Duration = Duration::from_secs(60);

/// A prompt read as a command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// The list of commands.
    Help,
    /// `Hello, world!`.
    Greet,
    /// The message back.
    Echo(String),
    /// A scenario.
    Run(Scenario),
}

impl Command {
    /// Reads a prompt's text as a command.
    pub fn parse(text: &str) -> Self {
        let trimmed = text.trim();
        if trimmed.is_empty() {
            return Command::Greet;
        }
        if let Ok(value) = serde_json::from_str::<Value>(trimmed)
            && let Some(command) = value.get("command").and_then(Value::as_str)
        {
            return match command {
                "help" => Command::Help,
                "echo" => Command::Echo(
                    value
                        .get("message")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_owned(),
                ),
                "run_scenario" => value
                    .get("scenario")
                    .and_then(Value::as_str)
                    .and_then(Scenario::parse)
                    .map_or(Command::Greet, Command::Run),
                _ => Command::Greet,
            };
        }
        if trimmed.eq_ignore_ascii_case("help") {
            return Command::Help;
        }
        if trimmed.eq_ignore_ascii_case("greet") {
            return Command::Greet;
        }
        if let Some(scenario) = Scenario::parse(trimmed) {
            return Command::Run(scenario);
        }
        if let Some(message) = trimmed.strip_prefix("echo ") {
            return Command::Echo(message.to_owned());
        }
        Command::Greet
    }
}

/// The `help` text.
pub fn help_text() -> String {
    format!(
        "Commands: help, greet, echo <message>, {}. JSON form: {{\"command\":\"run_scenario\",\"scenario\":\"full\"}}",
        Scenario::NAMES.join(", ")
    )
}

/// Answers a prompt in command mode.
pub async fn run_prompt(agent: &Arc<Agent>, ctx: &mut Ctx) {
    let text = ctx.vars.prompt.clone().unwrap_or_default();
    match Command::parse(&text) {
        Command::Help => finish_with_text(agent, ctx, help_text(), None).await,
        Command::Greet => finish_with_text(agent, ctx, "Hello, world!".to_owned(), None).await,
        Command::Echo(message) => finish_with_text(agent, ctx, message, None).await,
        Command::Run(scenario) => run_scenario_turn(agent, ctx, scenario).await,
    }
}

/// Runs a scenario as a whole prompt turn: updates, requests, the report, the result.
pub async fn run_scenario_turn(agent: &Arc<Agent>, ctx: &mut Ctx, scenario: Scenario) {
    begin_turn(agent, ctx).await;
    let mut report = vec![format!("scenario: {}", scenario.name())];
    match run_scenario(agent, ctx, scenario, &mut report).await {
        Ok(()) => {
            let cancelled = report
                .iter()
                .any(|line| line.ends_with(": cancelled") && !line.starts_with("scenario"));
            let reason = if cancelled {
                Some("cancelled".to_owned())
            } else {
                None
            };
            finish_with_text(agent, ctx, report.join("\n"), reason).await;
        }
        Err(error) => reply(agent, ctx, Err(error)).await,
    }
}

async fn finish_with_text(agent: &Arc<Agent>, ctx: &mut Ctx, text: String, reason: Option<String>) {
    let reason = reason.unwrap_or_else(|| stop_reason(agent, ctx).into_owned());
    if reason != "cancelled" {
        let id = agent.state().next_item();
        agent
            .update(
                &ctx.session_id(),
                json!({"sessionUpdate": "agent_message_chunk", "messageId": format!("mock-message-{id}"),
                       "content": {"type": "text", "text": text}}),
            )
            .await;
    }
    finish_turn(agent, ctx, &reason).await;
}

async fn run_scenario(
    agent: &Arc<Agent>,
    ctx: &mut Ctx,
    scenario: Scenario,
    report: &mut Vec<String>,
) -> Result<(), RpcError> {
    match scenario {
        Scenario::SessionUpdates => {
            session_updates(agent, ctx).await;
            content(agent, ctx).await;
            tool_calls(agent, ctx).await;
            report.push("session_updates: sent".to_owned());
        }
        Scenario::Content => {
            let blocks = content(agent, ctx).await;
            report.push(format!("content_blocks: {blocks}"));
        }
        Scenario::ToolCalls => {
            tool_calls(agent, ctx).await;
            report.push("tool_calls: sent".to_owned());
        }
        Scenario::Callbacks => {
            if callbacks(agent, ctx, report).await {
                elicitations(agent, ctx, report, true).await?;
            }
        }
        Scenario::Elicitations => {
            elicitations(agent, ctx, report, true).await?;
        }
        Scenario::CancelStatus => report.push(cancel_status(agent, ctx)),
        Scenario::WaitForCancel => {
            ctx.wait_cancelled().await;
            report.push("wait_for_cancel: cancelled".to_owned());
        }
        Scenario::Full => {
            session_updates(agent, ctx).await;
            report.push("session_updates: sent".to_owned());
            let blocks = content(agent, ctx).await;
            report.push(format!("content_blocks: {blocks}"));
            tool_calls(agent, ctx).await;
            report.push("tool_calls: sent".to_owned());
            if callbacks(agent, ctx, report).await {
                elicitations(agent, ctx, report, false).await?;
            }
            if !ctx.cancelled() {
                report.push(cancel_status(agent, ctx));
            }
        }
    }
    Ok(())
}

fn cancel_status(agent: &Agent, ctx: &Ctx) -> String {
    let session = ctx.session_id();
    let mut state = agent.state();
    let pending = state
        .session(&session)
        .map(|s| std::mem::take(&mut s.pending_cancel))
        .unwrap_or(false);
    if pending || ctx.cancelled() {
        "cancel_status: cancelled".to_owned()
    } else {
        "cancel_status: not_cancelled".to_owned()
    }
}

async fn send(agent: &Agent, ctx: &Ctx, update: Value) {
    agent.update(&ctx.session_id(), update).await;
}

async fn session_updates(agent: &Arc<Agent>, ctx: &Ctx) {
    let session = ctx.session_id();
    let (mode, verbosity) = agent
        .state()
        .session(&session)
        .map(|s| (s.mode.clone(), s.verbosity.clone()))
        .unwrap_or_else(|| ("default".to_owned(), "normal".to_owned()));
    send(
        agent,
        ctx,
        json!({"sessionUpdate": "session_info_update",
        "title": "Mock deterministic session", "updatedAt": "2026-01-01T00:00:00Z"}),
    )
    .await;
    send(
        agent,
        ctx,
        json!({"sessionUpdate": "current_mode_update", "currentModeId": mode}),
    )
    .await;
    send(
        agent,
        ctx,
        json!({"sessionUpdate": "config_option_update",
        "configOptions": super::personality::standard::config_options(&verbosity)}),
    )
    .await;
    send(agent, ctx, json!({"sessionUpdate": "available_commands_update", "availableCommands": [
        {"name": "full", "description": "Run every scenario", "input": {"hint": "optional arguments"}},
        {"name": "callbacks", "description": "Send every agent-to-client request"},
        {"name": "elicitations", "description": "Send elicitation requests"}
    ]})).await;
    send(
        agent,
        ctx,
        json!({"sessionUpdate": "usage_update", "used": 128, "size": 4096,
        "cost": {"amount": 0.0, "currency": "USD"}}),
    )
    .await;
}

async fn content(agent: &Arc<Agent>, ctx: &Ctx) -> usize {
    let blocks = ctx
        .trigger
        .as_ref()
        .and_then(|t| t.param("prompt"))
        .and_then(Value::as_array)
        .map_or(0, Vec::len);
    let updates = [
        json!({"sessionUpdate": "user_message_chunk",
               "content": {"type": "text", "text": format!("received {blocks} prompt content block(s)")}}),
        json!({"sessionUpdate": "agent_thought_chunk",
               "content": {"type": "text", "text": "thinking deterministically"}}),
        json!({"sessionUpdate": "agent_message_chunk",
               "content": {"type": "text", "text": "text content block"}}),
        json!({"sessionUpdate": "agent_message_chunk",
               "content": {"type": "image", "mimeType": "image/png", "uri": "file:///tmp/mock-pixel.png",
                           "data": "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mP8/x8AAwMCAO+/p9sAAAAASUVORK5CYII="}}),
        json!({"sessionUpdate": "agent_message_chunk",
               "content": {"type": "audio", "mimeType": "audio/wav",
                           "data": "UklGRiQAAABXQVZFZm10IBAAAAABAAEAESsAACJWAAACABAAZGF0YQAAAAA="}}),
        json!({"sessionUpdate": "agent_message_chunk",
               "content": {"type": "resource_link", "name": "Mock reference", "uri": "file:///tmp/mock-reference.txt",
                           "description": "A deterministic resource link", "mimeType": "text/plain"}}),
        json!({"sessionUpdate": "agent_message_chunk",
               "content": {"type": "resource", "resource": {"uri": "file:///tmp/mock-embedded.txt",
                           "text": "embedded resource text", "mimeType": "text/plain"}}}),
    ];
    for (index, mut update) in updates.into_iter().enumerate() {
        update["messageId"] = json!(format!("mock-content-{}", index + 1));
        send(agent, ctx, update).await;
    }
    blocks
}

async fn tool_calls(agent: &Arc<Agent>, ctx: &Ctx) {
    let read = format!("mock-tool-read-{}", agent.state().next_item());
    let edit = format!("mock-tool-edit-{}", agent.state().next_item());
    send(
        agent,
        ctx,
        json!({"sessionUpdate": "tool_call", "toolCallId": read,
        "title": "Read a fixture", "kind": "read", "status": "pending",
        "locations": [{"path": "/tmp/mock-input.txt", "line": 1}],
        "rawInput": {"path": "/tmp/mock-input.txt"}}),
    )
    .await;
    send(agent, ctx, json!({"sessionUpdate": "tool_call_update", "toolCallId": read,
        "status": "in_progress",
        "content": [{"type": "content", "content": {"type": "text", "text": "reading /tmp/mock-input.txt"}}]})).await;
    send(agent, ctx, json!({"sessionUpdate": "tool_call_update", "toolCallId": read,
        "status": "completed",
        "content": [{"type": "content", "content": {"type": "text", "text": "read /tmp/mock-input.txt"}}],
        "rawOutput": {"bytes": 12}})).await;
    send(
        agent,
        ctx,
        json!({"sessionUpdate": "tool_call", "toolCallId": edit,
        "title": "Apply an edit", "kind": "edit", "status": "pending",
        "rawInput": {"path": "/tmp/mock-output.txt"}}),
    )
    .await;
    send(agent, ctx, json!({"sessionUpdate": "tool_call_update", "toolCallId": edit,
        "status": "completed",
        "content": [{"type": "diff", "path": "/tmp/mock-output.txt", "oldText": "before\n", "newText": "after\n"}],
        "rawOutput": {"changed": true}})).await;
    send(
        agent,
        ctx,
        json!({"sessionUpdate": "plan", "entries": [
            {"content": "Send session updates", "priority": "high", "status": "completed"},
            {"content": "Exercise callbacks", "priority": "medium", "status": "in_progress"},
            {"content": "Summarize results", "priority": "low", "status": "pending"}
        ]}),
    )
    .await;
}

/// Sends a request and waits for its reply or a cancel; the report line says which.
async fn call(
    agent: &Arc<Agent>,
    ctx: &mut Ctx,
    method: &str,
    params: Value,
) -> (String, Option<Value>) {
    ctx.park();
    let id = agent.next_request_id();
    let receiver = agent.expect_reply(&id, None);
    let message = ski::jsonrpc::Message::request(id, method, Some(params));
    agent.write_message(&message, true, None).await;
    tokio::select! {
        reply = tokio::time::timeout(CALLBACK_TIMEOUT, receiver) => match reply {
            Ok(Ok(reply)) => {
                let value = reply.as_value();
                let line = match &reply.result {
                    Ok(result) => format!("{method}: ok {result}"),
                    Err(error) => format!("{method}: error {error}"),
                };
                (line, Some(value))
            }
            _ => (format!("{method}: no reply"), None),
        },
        () = ctx.wait_cancelled() => (format!("{method}: cancelled"), None),
    }
}

/// Sends every stable agent-to-client request; returns whether the turn was not cancelled.
async fn callbacks(agent: &Arc<Agent>, ctx: &mut Ctx, report: &mut Vec<String>) -> bool {
    let session = ctx.session_id();
    let cwd = agent
        .state()
        .session(&session)
        .and_then(|s| s.cwd.clone())
        .unwrap_or_else(|| "/tmp".to_owned());
    let path = format!("{}/ski-mock-agent-callbacks.txt", cwd.trim_end_matches('/'));
    let tool = format!("mock-permission-{}", agent.state().next_item());
    let steps: Vec<(&str, Value)> = vec![
        (
            "session/request_permission",
            json!({"sessionId": session,
            "toolCall": {"toolCallId": tool, "title": "Permission request", "kind": "execute", "status": "pending"},
            "options": [{"optionId": "allow_once", "name": "Allow once", "kind": "allow_once"},
                        {"optionId": "reject_once", "name": "Reject once", "kind": "reject_once"}]}),
        ),
        (
            "fs/write_text_file",
            json!({"sessionId": session, "path": path, "content": "written by ski-mock-agent\n"}),
        ),
        (
            "fs/read_text_file",
            json!({"sessionId": session, "path": path, "line": 1, "limit": 20}),
        ),
    ];
    for (method, params) in steps {
        let (line, _) = call(agent, ctx, method, params).await;
        let cancelled = line.ends_with(": cancelled");
        report.push(line);
        if cancelled || ctx.cancelled() {
            report.push("callbacks: cancelled".to_owned());
            return false;
        }
    }
    let (line, created) = call(
        agent,
        ctx,
        "terminal/create",
        json!({"sessionId": session, "command": "printf", "args": ["mock terminal\n"],
               "cwd": cwd, "outputByteLimit": 1024}),
    )
    .await;
    let cancelled = line.ends_with(": cancelled");
    report.push(line);
    if cancelled {
        report.push("callbacks: cancelled".to_owned());
        return false;
    }
    let terminal = created
        .as_ref()
        .and_then(|v| v.get("terminalId"))
        .and_then(Value::as_str)
        .map(str::to_owned);
    match terminal {
        Some(terminal) => {
            for method in [
                "terminal/output",
                "terminal/wait_for_exit",
                "terminal/kill",
                "terminal/release",
            ] {
                let (line, _) = call(
                    agent,
                    ctx,
                    method,
                    json!({"sessionId": session, "terminalId": terminal}),
                )
                .await;
                let cancelled = line.ends_with(": cancelled");
                report.push(line);
                if cancelled {
                    report.push("callbacks: cancelled".to_owned());
                    return false;
                }
            }
        }
        None => {
            for method in [
                "terminal/output",
                "terminal/wait_for_exit",
                "terminal/kill",
                "terminal/release",
            ] {
                report.push(format!("{method}: skipped"));
            }
        }
    }
    !ctx.cancelled()
}

async fn elicitations(
    agent: &Arc<Agent>,
    ctx: &mut Ctx,
    report: &mut Vec<String>,
    required: bool,
) -> Result<(), RpcError> {
    let capabilities = agent.state().client_capabilities.clone();
    let form = capabilities.pointer("/elicitation/form").is_some();
    let url = capabilities.pointer("/elicitation/url").is_some();
    if !form {
        if required {
            return Err(RpcError::invalid_params(
                "client does not support form elicitation",
            ));
        }
        report.push("elicitations: skipped (no form elicitation capability)".to_owned());
        return Ok(());
    }
    let session = ctx.session_id();
    let (line, _) = call(
        agent,
        ctx,
        "elicitation/create",
        json!({"mode": "form", "sessionId": session, "message": "Fill in the mock form",
               "requestedSchema": {"type": "object", "properties": {
                   "name": {"type": "string", "title": "Name"},
                   "confirmed": {"type": "boolean", "title": "Confirmed"}},
                   "required": ["name"]}}),
    )
    .await;
    let cancelled = line.ends_with(": cancelled");
    report.push(line.replacen("elicitation/create", "elicitation/form", 1));
    if cancelled {
        report.push("elicitations: cancelled".to_owned());
        return Ok(());
    }
    if !url {
        if required {
            return Err(RpcError::invalid_params(
                "client does not support URL elicitation",
            ));
        }
        report.push("elicitation/url: skipped (no url elicitation capability)".to_owned());
        return Ok(());
    }
    let (line, _) = call(
        agent,
        ctx,
        "elicitation/create",
        json!({"mode": "url", "sessionId": session, "elicitationId": "mock-url-1",
               "url": "https://example.com/mock", "message": "Open the mock page"}),
    )
    .await;
    let cancelled = line.ends_with(": cancelled");
    report.push(line.replacen("elicitation/create", "elicitation/url", 1));
    if cancelled {
        report.push("elicitations: cancelled".to_owned());
        return Ok(());
    }
    agent
        .notify(
            "elicitation/complete",
            Some(json!({"elicitationId": "mock-url-1"})),
        )
        .await;
    report.push("elicitations: completed".to_owned());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prompts_parse_as_commands() {
        assert_eq!(Command::parse("help"), Command::Help);
        assert_eq!(
            Command::parse("echo hi there"),
            Command::Echo("hi there".into())
        );
        assert_eq!(
            Command::parse("  Tool Calls "),
            Command::Run(Scenario::ToolCalls)
        );
        assert_eq!(
            Command::parse(r#"{"command":"run_scenario","scenario":"full"}"#),
            Command::Run(Scenario::Full)
        );
        assert_eq!(
            Command::parse(r#"{"command":"echo","message":"x"}"#),
            Command::Echo("x".into())
        );
        assert_eq!(Command::parse("something else"), Command::Greet);
        assert_eq!(Command::parse(""), Command::Greet);
    }
}
