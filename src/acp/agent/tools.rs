//! Injected tool calls: a turn can read or write a file through the client (`fs/*`) or run a
//! command in the client's terminal (`terminal/*`), reporting each as a `tool_call` followed by
//! `tool_call_update`s.
//!
//! A call is made only when the session's owner connection advertised the capability it needs;
//! otherwise the tool call is reported `failed` and nothing is sent to the client. A file call
//! is made only for a path inside the session's roots, its `cwd` and its
//! `additionalDirectories` (relative paths resolve against the `cwd`): a path that leaves every
//! root by `..` or a symbolic link is reported `failed` the same way. Every terminal the agent
//! creates is released, also when the turn is stopped while the command runs.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use super::Inner;
use super::config::ToolCallSpec;
use super::control::{StopCause, TurnControl, TurnOutcome};
use super::store::HistoryEntry;
use crate::acp::methods::{
    FS_READ_TEXT_FILE, FS_WRITE_TEXT_FILE, TERMINAL_CREATE, TERMINAL_KILL, TERMINAL_OUTPUT,
    TERMINAL_RELEASE, TERMINAL_WAIT_FOR_EXIT,
};
use crate::acp::{
    ContentBlock, Diff, Extra, Nullable, SessionUpdate, ToolCall, ToolCallContent,
    ToolCallContentBlock, ToolCallLocation, ToolCallStatus, ToolCallTerminal, ToolCallUpdate,
    ToolKind,
};
use crate::jsonrpc::{Peer, RequestOptions};
use crate::storage::inside_root::Root;

/// How long the clean-up calls of a stopped terminal (`kill`, `release`) may take.
const CLEANUP_TIMEOUT: Duration = Duration::from_secs(5);

/// A new tool call id, `call_<uuid>`.
pub fn new_tool_call_id() -> String {
    format!("call_{}", uuid::Uuid::new_v4().simple())
}

/// Resolves a path against the session's working directory.
fn resolve(cwd: &str, path: &str) -> String {
    if Path::new(path).is_absolute() {
        path.to_owned()
    } else {
        Path::new(cwd).join(path).to_string_lossy().into_owned()
    }
}

/// Whether the absolute `path` lies inside one of `roots`, resolved as the client's file methods
/// resolve it (`..` and symbolic links followed on this machine, so a link out of a root is
/// outside); a root that is no existing directory holds nothing. What is missing below a root
/// (a file to be created) is inside.
pub(crate) fn inside_roots(path: &str, roots: &[String]) -> bool {
    roots.iter().any(|root| {
        Root::new(Path::new(root)).is_ok_and(|root| match root.resolve_absolute(Path::new(path)) {
            Ok(_) => true,
            Err(error) => !error.is_escape(),
        })
    })
}

/// The result of one client call: its result, or the error text.
type Reply = Result<Value, String>;

/// Calls the client unless the turn is stopped first; a stop cancels the call.
async fn call(
    peer: &Peer,
    control: &TurnControl,
    method: &str,
    params: Value,
) -> Result<Reply, TurnOutcome> {
    let stopped = || TurnOutcome::Stopped(control.cause().unwrap_or(StopCause::Cancelled));
    let start = peer.start_request(method, Some(params), RequestOptions::default());
    let pending = tokio::select! {
        biased;
        () = control.token().cancelled() => return Err(stopped()),
        pending = start => match pending {
            Ok(pending) => pending,
            Err(error) => return Ok(Err(error.to_string())),
        },
    };
    let id = pending.id().clone();
    tokio::select! {
        biased;
        result = pending => Ok(result.map_err(|error| error.to_string())),
        () = control.token().cancelled() => {
            if let Err(error) = peer.cancel_request(&id).await {
                tracing::debug!(%error, method, "could not cancel a client call");
            }
            Err(stopped())
        }
    }
}

/// The held tool call of a turn (`holdToolCall`): reported `in_progress` and cancellable, it
/// runs until `tool_call/cancel` names it (then it reports `cancelled` and the turn goes on) or
/// the turn is stopped (then the turn ends as stopped turns do, with no further update).
pub(crate) async fn held(
    agent: &Arc<Inner>,
    session: &str,
    control: &TurnControl,
) -> Result<(), TurnOutcome> {
    let id = new_tool_call_id();
    let token = tokio_util::sync::CancellationToken::new();
    agent.hold_tool(session, &id, token.clone());
    let mut call = ToolCall::new(&id, "Wait until cancelled");
    call.kind = Some(ToolKind::Other);
    call.status = Some(ToolCallStatus::InProgress);
    let reported = agent
        .content(session, control, SessionUpdate::ToolCall(call))
        .await;
    if let Err(stopped) = reported {
        agent.release_tool(&id);
        return Err(stopped);
    }
    tokio::select! {
        biased;
        () = control.token().cancelled() => {
            agent.release_tool(&id);
            Err(TurnOutcome::stopped(control))
        }
        () = token.cancelled() => {
            agent.release_tool(&id);
            let mut update = ToolCallUpdate::new(&id);
            update.status = Nullable::Value(ToolCallStatus::Unknown("cancelled".to_owned()));
            agent
                .content(session, control, SessionUpdate::ToolCallUpdate(update))
                .await
        }
    }
}

/// A clean-up call that runs even though the turn is stopped.
async fn cleanup(peer: &Peer, method: &str, params: Value) {
    if let Err(error) = peer
        .request_with(
            method,
            Some(params),
            RequestOptions::timeout(CLEANUP_TIMEOUT),
        )
        .await
    {
        tracing::warn!(%error, method, "terminal clean-up failed");
    }
}

fn finished(id: &str, status: ToolCallStatus, output: Value) -> ToolCallUpdate {
    let mut update = ToolCallUpdate::new(id);
    update.status = Nullable::Value(status);
    update.raw_output = Nullable::Value(output);
    update
}

fn text_content(text: String) -> Vec<ToolCallContent> {
    vec![ToolCallContent::Content(ToolCallContentBlock {
        content: ContentBlock::text(text),
        extra: Extra::new(),
    })]
}

/// Runs one injected tool call.
pub(crate) async fn run(
    agent: &Arc<Inner>,
    session: &str,
    control: &TurnControl,
    spec: &ToolCallSpec,
    reply: &str,
) -> Result<(), TurnOutcome> {
    let Some(roots) = agent.session_roots(session) else {
        return Err(TurnOutcome::Stopped(StopCause::Cancelled));
    };
    let cwd = &roots[0];
    let id = new_tool_call_id();
    let (name, call, input) = describe(spec, cwd, reply, &id);
    agent
        .content(session, control, SessionUpdate::ToolCall(call))
        .await?;
    if let Some(path) = input.get("path").and_then(Value::as_str) {
        let (path, checked) = (path.to_owned(), roots.clone());
        let inside = tokio::task::spawn_blocking(move || inside_roots(&path, &checked))
            .await
            .unwrap_or(false);
        if !inside {
            let reason = format!(
                "{} is outside the session's roots (its cwd and additionalDirectories: {})",
                input["path"],
                roots.join(", ")
            );
            return report_failure(agent, session, control, &id, name, input, reason).await;
        }
    }
    let owner = agent.registry.owner_peer(session);
    let capable = owner
        .as_ref()
        .ok()
        .is_some_and(|(_, _, client)| match spec {
            ToolCallSpec::ReadFile { .. } => client.can_read_text_file(),
            ToolCallSpec::WriteFile { .. } => client.can_write_text_file(),
            ToolCallSpec::Terminal { .. } => client.has_terminal(),
        });
    let peer = match owner {
        Ok((_, peer, _)) if capable => peer,
        Ok(_) => {
            let needed = match spec {
                ToolCallSpec::ReadFile { .. } => "fs.readTextFile",
                ToolCallSpec::WriteFile { .. } => "fs.writeTextFile",
                ToolCallSpec::Terminal { .. } => "terminal",
            };
            let reason = format!("the client did not advertise {needed}");
            return report_failure(agent, session, control, &id, name, input, reason).await;
        }
        Err(error) => {
            return report_failure(agent, session, control, &id, name, input, error.to_string())
                .await;
        }
    };
    let (status, output, extra_content) = match spec {
        ToolCallSpec::ReadFile { .. } => {
            match call_client(&peer, control, FS_READ_TEXT_FILE, session, &input).await? {
                Ok(result) => {
                    let text = result
                        .get("content")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_owned();
                    (
                        ToolCallStatus::Completed,
                        json!({ "content": text }),
                        Some(text_content(text)),
                    )
                }
                Err(error) => (ToolCallStatus::Failed, json!({ "error": error }), None),
            }
        }
        ToolCallSpec::WriteFile { .. } => {
            match call_client(&peer, control, FS_WRITE_TEXT_FILE, session, &input).await? {
                Ok(_) => (ToolCallStatus::Completed, json!({ "written": true }), None),
                Err(error) => (ToolCallStatus::Failed, json!({ "error": error }), None),
            }
        }
        ToolCallSpec::Terminal { .. } => {
            run_terminal(agent, session, control, &peer, &id, &input).await?
        }
    };
    let mut update = finished(&id, status, output.clone());
    if let Some(extra_content) = extra_content {
        update.content = Nullable::Value(extra_content);
    }
    agent.record(
        session,
        HistoryEntry::tool(id.clone(), name.to_owned(), input, output),
    );
    agent
        .content(session, control, SessionUpdate::ToolCallUpdate(update))
        .await
}

async fn call_client(
    peer: &Peer,
    control: &TurnControl,
    method: &str,
    session: &str,
    input: &Value,
) -> Result<Reply, TurnOutcome> {
    let mut params = input.clone();
    if let Value::Object(map) = &mut params {
        map.insert("sessionId".to_owned(), json!(session));
    }
    call(peer, control, method, params).await
}

async fn report_failure(
    agent: &Inner,
    session: &str,
    control: &TurnControl,
    id: &str,
    name: &str,
    input: Value,
    reason: String,
) -> Result<(), TurnOutcome> {
    tracing::info!(session, tool = name, %reason, "tool call not made");
    let output = json!({ "error": reason });
    let mut update = finished(id, ToolCallStatus::Failed, output.clone());
    update.content = Nullable::Value(text_content(reason));
    agent.record(
        session,
        HistoryEntry::tool(id.to_owned(), name.to_owned(), input, output),
    );
    agent
        .content(session, control, SessionUpdate::ToolCallUpdate(update))
        .await
}

/// The `tool_call` of a spec: its name, the update, and the input sent to the client.
fn describe(
    spec: &ToolCallSpec,
    cwd: &str,
    reply: &str,
    id: &str,
) -> (&'static str, ToolCall, Value) {
    let location = |path: &str, line: Option<u32>| ToolCallLocation {
        path: path.to_owned(),
        line,
        extra: Extra::new(),
    };
    match spec {
        ToolCallSpec::ReadFile { path, line, limit } => {
            let path = resolve(cwd, path);
            let mut call = ToolCall::new(id, format!("Read {path}"));
            call.kind = Some(ToolKind::Read);
            call.status = Some(ToolCallStatus::InProgress);
            call.locations = Some(vec![location(&path, *line)]);
            let mut input = json!({ "path": path });
            if let Some(line) = line {
                input["line"] = json!(line);
            }
            if let Some(limit) = limit {
                input["limit"] = json!(limit);
            }
            call.raw_input = Some(input.clone());
            ("read_text_file", call, input)
        }
        ToolCallSpec::WriteFile { path, content } => {
            let path = resolve(cwd, path);
            let text = content.clone().unwrap_or_else(|| reply.to_owned());
            let mut call = ToolCall::new(id, format!("Write {path}"));
            call.kind = Some(ToolKind::Edit);
            call.status = Some(ToolCallStatus::InProgress);
            call.locations = Some(vec![location(&path, None)]);
            call.content = Some(vec![ToolCallContent::Diff(Diff {
                path: path.clone(),
                old_text: None,
                new_text: text.clone(),
                extra: Extra::new(),
            })]);
            let input = json!({ "path": path, "content": text });
            call.raw_input = Some(json!({ "path": path }));
            ("write_text_file", call, input)
        }
        ToolCallSpec::Terminal { command, args } => {
            let mut title = command.clone();
            for arg in args {
                title.push(' ');
                title.push_str(arg);
            }
            let mut call = ToolCall::new(id, format!("Run {title}"));
            call.kind = Some(ToolKind::Execute);
            call.status = Some(ToolCallStatus::InProgress);
            let input = json!({ "command": command, "args": args, "cwd": cwd });
            call.raw_input = Some(input.clone());
            ("terminal", call, input)
        }
    }
}

/// `terminal/create`, then `wait_for_exit`, `output` and `release`; a stop kills and releases
/// the terminal before the turn unwinds.
async fn run_terminal(
    agent: &Inner,
    session: &str,
    control: &TurnControl,
    peer: &Peer,
    id: &str,
    input: &Value,
) -> Result<(ToolCallStatus, Value, Option<Vec<ToolCallContent>>), TurnOutcome> {
    let created = match call_client(peer, control, TERMINAL_CREATE, session, input).await? {
        Ok(created) => created,
        Err(error) => return Ok((ToolCallStatus::Failed, json!({ "error": error }), None)),
    };
    let Some(terminal_id) = created
        .get("terminalId")
        .and_then(Value::as_str)
        .map(str::to_owned)
    else {
        let error = "terminal/create answered without a terminalId";
        return Ok((ToolCallStatus::Failed, json!({ "error": error }), None));
    };
    let terminal = json!({ "sessionId": session, "terminalId": terminal_id });
    let outcome = terminal_steps(agent, session, control, peer, id, &terminal_id, &terminal).await;
    if let Err(stopped) = &outcome {
        tracing::info!(
            session,
            terminal_id,
            ?stopped,
            "turn stopped while a command ran"
        );
        cleanup(peer, TERMINAL_KILL, terminal.clone()).await;
    }
    cleanup(peer, TERMINAL_RELEASE, terminal).await;
    outcome
}

async fn terminal_steps(
    agent: &Inner,
    session: &str,
    control: &TurnControl,
    peer: &Peer,
    id: &str,
    terminal_id: &str,
    terminal: &Value,
) -> Result<(ToolCallStatus, Value, Option<Vec<ToolCallContent>>), TurnOutcome> {
    let mut running = ToolCallUpdate::new(id);
    running.status = Nullable::Value(ToolCallStatus::InProgress);
    running.content = Nullable::Value(vec![ToolCallContent::Terminal(ToolCallTerminal {
        terminal_id: terminal_id.to_owned(),
        extra: Extra::new(),
    })]);
    agent
        .content(session, control, SessionUpdate::ToolCallUpdate(running))
        .await?;
    let exit = match call(peer, control, TERMINAL_WAIT_FOR_EXIT, terminal.clone()).await? {
        Ok(exit) => exit,
        Err(error) => return Ok((ToolCallStatus::Failed, json!({ "error": error }), None)),
    };
    let output = match call(peer, control, TERMINAL_OUTPUT, terminal.clone()).await? {
        Ok(output) => output,
        Err(error) => return Ok((ToolCallStatus::Failed, json!({ "error": error }), None)),
    };
    let exit_code = exit.get("exitCode").cloned().unwrap_or(Value::Null);
    let status = if exit_code == json!(0) {
        ToolCallStatus::Completed
    } else {
        ToolCallStatus::Failed
    };
    let result = json!({
        "exitCode": exit_code,
        "signal": exit.get("signal").cloned().unwrap_or(Value::Null),
        "output": output.get("output").cloned().unwrap_or(Value::Null),
        "truncated": output.get("truncated").cloned().unwrap_or(Value::Null),
    });
    Ok((status, result, None))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_paths_resolve_against_the_session_cwd() {
        assert_eq!(
            resolve("/srv/project/dir", "a.txt"),
            "/srv/project/dir/a.txt"
        );
        assert_eq!(resolve("/srv/project/dir", "/etc/x"), "/etc/x");
    }

    #[test]
    fn described_calls_carry_their_kind_and_location() {
        let spec: ToolCallSpec = "read:notes.txt:2:3".parse().unwrap();
        let (name, call, input) = describe(&spec, "/w", "reply", "call_1");
        assert_eq!(name, "read_text_file");
        assert_eq!(call.kind, Some(ToolKind::Read));
        assert_eq!(
            input,
            json!({"path": "/w/notes.txt", "line": 2, "limit": 3})
        );
        let spec: ToolCallSpec = "write:out.txt".parse().unwrap();
        let (_, call, input) = describe(&spec, "/w", "reply", "call_2");
        assert_eq!(input["content"], "reply");
        assert_eq!(call.kind, Some(ToolKind::Edit));
    }
}
