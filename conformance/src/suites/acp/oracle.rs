//! The schema oracle: every frame one side sends (the agent under test, or a client under test) is
//! decoded, by its method and direction, with the official `agent-client-protocol-schema` crate
//! (ACP v1, stable and unstable types), and the ski extensions with ski's own types
//! (`conformance/ERRATA.md`, E-ACP-46).
//!
//! Two kinds of [`Problem`] are recorded:
//! - [`ProblemKind::Invalid`]: the frame is not JSON, not a JSON-RPC 2.0 message, or its payload
//!   does not decode as the type its method calls for (ACP-CORE-013);
//! - [`ProblemKind::UnknownField`]: the payload decodes, but encoding it again with the official
//!   types loses a property that is not null: a property the schema does not define for that
//!   object, at the root of a spec type (ACP-CORE-023).

use std::collections::{BTreeSet, HashMap};

use agent_client_protocol_schema::v1 as o;
use schemars::JsonSchema;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use ski::jsonrpc::{VersionField, classify};

use super::declared::declared;

/// What is wrong with a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProblemKind {
    /// The frame does not validate against the schema.
    Invalid,
    /// An object carries a property its schema type does not define.
    UnknownField,
}

/// One problem with one frame of the agent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// The wire-log channel of the connection (set by the connection).
    pub channel: String,
    /// The frame's position among the judged side's frames on its connection.
    pub seq: usize,
    /// What kind of problem.
    pub kind: ProblemKind,
    /// The frame (cut).
    pub frame: String,
    /// What is wrong.
    pub error: String,
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} frame #{} {}: {}",
            self.channel, self.seq, self.frame, self.error
        )
    }
}

/// The ski session update kinds (E-WIRE-03) and the `_meta.ski` capability that enables each.
const SKI_UPDATE_KINDS: &[(&str, &str)] = &[
    ("execution_state_update", "executionState"),
    ("retry_update", "promptRetry"),
    ("audit_update", "audit"),
];

/// Results that may carry the legacy `models` (E-ACP-34).
const MODELS_ALLOWED: &[&str] = &[
    "session/new",
    "session/load",
    "session/resume",
    "session/fork",
];

/// The side whose frames an oracle judges.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Sender {
    /// The agent: its results, its requests to the client and its notifications.
    #[default]
    Agent,
    /// The client: its requests and notifications to the agent, its answers to the agent.
    Client,
}

/// The oracle of one connection, judging the frames of one side.
#[derive(Debug, Default)]
pub struct Oracle {
    sender: Sender,
    seq: usize,
    problems: Vec<Problem>,
    /// The keys of `agentCapabilities._meta.ski` the agent advertised.
    enabled: BTreeSet<String>,
}

impl Oracle {
    /// An oracle for the frames `sender` sends.
    pub fn new(sender: Sender) -> Self {
        Self {
            sender,
            ..Self::default()
        }
    }

    /// Every problem found so far.
    pub fn problems(&self) -> &[Problem] {
        &self.problems
    }

    fn report(&mut self, seq: usize, text: &str, kind: ProblemKind, error: String) {
        self.problems.push(Problem {
            channel: String::new(),
            seq,
            kind,
            frame: super::connection::clip(text, 400),
            error,
        });
    }

    /// Inspects the next frame of the judged side. `sent` maps the JSON text of every request id
    /// the other side used to its method.
    pub fn inspect(
        &mut self,
        text: &str,
        binary: bool,
        value: Option<&Value>,
        sent: &HashMap<String, String>,
    ) {
        let seq = self.seq;
        self.seq += 1;
        if binary {
            self.report(seq, text, ProblemKind::Invalid, "a binary frame".to_owned());
            return;
        }
        let Some(value) = value else {
            let error = serde_json::from_str::<Value>(text)
                .err()
                .map_or_else(|| "not json".to_owned(), |e| e.to_string());
            self.report(
                seq,
                text,
                ProblemKind::Invalid,
                format!("not JSON: {error}"),
            );
            return;
        };
        if let Err(error) = classify(value.clone(), VersionField::Required) {
            self.report(
                seq,
                text,
                ProblemKind::Invalid,
                format!("not a JSON-RPC 2.0 message: {error}"),
            );
            return;
        }
        let findings = self.judge(value, sent);
        for (kind, error) in findings {
            self.report(seq, text, kind, error);
        }
    }

    fn judge(
        &mut self,
        value: &Value,
        sent: &HashMap<String, String>,
    ) -> Vec<(ProblemKind, String)> {
        let method = value.get("method").and_then(Value::as_str);
        let has_id = value.get("id").is_some();
        let client = self.sender == Sender::Client;
        match method {
            Some(method) if has_id && client => client_request(method, value.get("params")),
            Some(method) if has_id => request(method, value.get("params")),
            Some(method) if client => client_notification(method, value.get("params")),
            Some(method) => self.notification(method, value.get("params")),
            None => {
                let id = value.get("id").map(Value::to_string).unwrap_or_default();
                if let Some(error) = value.get("error") {
                    return check::<o::Error>("error", error, &[]);
                }
                let result = value.get("result").unwrap_or(&Value::Null);
                match sent.get(&id) {
                    Some(method) if client => client_response(method, result),
                    Some(method) => {
                        if method == "initialize" {
                            self.learn(result);
                        }
                        response(method, result)
                    }
                    None => vec![(
                        ProblemKind::Invalid,
                        format!("a result for id {id}, which the other side never used"),
                    )],
                }
            }
        }
    }

    /// Remembers which ski extensions the agent advertised.
    fn learn(&mut self, result: &Value) {
        if let Some(ski) = result
            .pointer("/agentCapabilities/_meta/ski")
            .and_then(Value::as_object)
        {
            self.enabled.extend(ski.keys().cloned());
        }
    }

    fn notification(&self, method: &str, params: Option<&Value>) -> Vec<(ProblemKind, String)> {
        let params = params.unwrap_or(&Value::Null);
        match method {
            "session/update" => {
                let kind = params
                    .pointer("/update/sessionUpdate")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                if let Some((_, capability)) = SKI_UPDATE_KINDS.iter().find(|(k, _)| *k == kind) {
                    let mut found = Vec::new();
                    if !self.enabled.contains(*capability) {
                        found.push((
                            ProblemKind::Invalid,
                            format!(
                                "ski extension kind {kind} without agentCapabilities._meta.ski.{capability}"
                            ),
                        ));
                    }
                    if let Err(error) =
                        serde_json::from_value::<ski::acp::SessionNotification>(params.clone())
                    {
                        found.push((
                            ProblemKind::Invalid,
                            format!("{kind} does not have the shape of ERRATA.md: {error}"),
                        ));
                    }
                    return found;
                }
                check::<o::SessionNotification>("session/update params", params, &[])
            }
            "$/cancel_request" => {
                check::<o::CancelRequestNotification>("$/cancel_request params", params, &[])
            }
            "elicitation/complete" => check::<o::CompleteElicitationNotification>(
                "elicitation/complete params",
                params,
                &[],
            ),
            "auth/status_update" => {
                check::<o::AuthStatusUpdateNotification>("auth/status_update params", params, &[])
            }
            m if m.starts_with('_') => Vec::new(),
            other => vec![(
                ProblemKind::Invalid,
                format!("{other} is not a notification an ACP v1 agent sends"),
            )],
        }
    }
}

/// Decodes `payload` as `T`; an error is a problem, and so is every property lost when the
/// decoded value is encoded again that `T`'s schema does not declare there (a declared one was
/// left out at its default value), except the paths in `allowed`.
fn check<T: DeserializeOwned + Serialize + JsonSchema>(
    what: &str,
    payload: &Value,
    allowed: &[&str],
) -> Vec<(ProblemKind, String)> {
    match serde_json::from_value::<T>(payload.clone()) {
        Err(error) => vec![(
            ProblemKind::Invalid,
            format!("{what} do not decode as the schema type: {error}"),
        )],
        Ok(decoded) => {
            let Ok(encoded) = serde_json::to_value(&decoded) else {
                return Vec::new();
            };
            let mut lost = Vec::new();
            unknown_fields(payload, &encoded, &mut Vec::new(), &mut lost);
            lost.into_iter()
                .filter(|segments| !declared::<T>(payload, segments))
                .map(|segments| pointer(&segments))
                .filter(|path| !allowed.contains(&path.as_str()))
                .map(|path| {
                    (
                        ProblemKind::UnknownField,
                        format!("{what}: {path} is not a property the schema defines there"),
                    )
                })
                .collect()
        }
    }
}

/// The paths (as segments) of properties of `input` (not null) that `output` does not have.
fn unknown_fields(
    input: &Value,
    output: &Value,
    path: &mut Vec<String>,
    found: &mut Vec<Vec<String>>,
) {
    match (input, output) {
        (Value::Object(input), Value::Object(output)) => {
            for (key, value) in input {
                path.push(key.clone());
                match output.get(key) {
                    None if !value.is_null() => found.push(path.clone()),
                    None => {}
                    Some(out) => unknown_fields(value, out, path, found),
                }
                path.pop();
            }
        }
        (Value::Array(input), Value::Array(output)) if input.len() == output.len() => {
            for (index, (value, out)) in input.iter().zip(output).enumerate() {
                path.push(index.to_string());
                unknown_fields(value, out, path, found);
                path.pop();
            }
        }
        _ => {}
    }
}

/// A JSON pointer of `segments`, as the problems name a property.
fn pointer(segments: &[String]) -> String {
    segments.iter().map(|s| format!("/{s}")).collect()
}

fn request(method: &str, params: Option<&Value>) -> Vec<(ProblemKind, String)> {
    let params = params.unwrap_or(&Value::Null);
    let what = format!("{method} params");
    match method {
        "session/request_permission" => check::<o::RequestPermissionRequest>(&what, params, &[]),
        "fs/read_text_file" => check::<o::ReadTextFileRequest>(&what, params, &[]),
        "fs/write_text_file" => check::<o::WriteTextFileRequest>(&what, params, &[]),
        "terminal/create" => check::<o::CreateTerminalRequest>(&what, params, &[]),
        "terminal/output" => check::<o::TerminalOutputRequest>(&what, params, &[]),
        "terminal/wait_for_exit" => check::<o::WaitForTerminalExitRequest>(&what, params, &[]),
        "terminal/kill" => check::<o::KillTerminalRequest>(&what, params, &[]),
        "terminal/release" => check::<o::ReleaseTerminalRequest>(&what, params, &[]),
        "elicitation/create" => check::<o::CreateElicitationRequest>(&what, params, &[]),
        m if m.starts_with('_') => Vec::new(),
        other => vec![(
            ProblemKind::Invalid,
            format!("{other} is not a request an ACP v1 agent sends to its client"),
        )],
    }
}

/// A request of the client to the agent.
fn client_request(method: &str, params: Option<&Value>) -> Vec<(ProblemKind, String)> {
    let params = params.unwrap_or(&Value::Null);
    let what = format!("{method} params");
    match method {
        "initialize" => check::<o::InitializeRequest>(&what, params, &[]),
        "authenticate" => check::<o::AuthenticateRequest>(&what, params, &[]),
        "logout" => check::<o::LogoutRequest>(&what, params, &[]),
        "session/new" => check::<o::NewSessionRequest>(&what, params, &[]),
        "session/load" => check::<o::LoadSessionRequest>(&what, params, &[]),
        "session/list" => check::<o::ListSessionsRequest>(&what, params, &[]),
        "session/delete" => check::<o::DeleteSessionRequest>(&what, params, &[]),
        "session/resume" => check::<o::ResumeSessionRequest>(&what, params, &[]),
        "session/close" => check::<o::CloseSessionRequest>(&what, params, &[]),
        "session/fork" => check::<o::ForkSessionRequest>(&what, params, &[]),
        "session/set_mode" => check::<o::SetSessionModeRequest>(&what, params, &[]),
        "session/set_config_option" => {
            check::<o::SetSessionConfigOptionRequest>(&what, params, &[])
        }
        "session/prompt" => check::<o::PromptRequest>(&what, params, &[]),
        "session/set_model" | "session/export" | "session/stop" => {
            match ski::acp::MethodParams::decode(method, Some(params.clone())) {
                Ok(_) => Vec::new(),
                Err(error) => vec![(ProblemKind::Invalid, error.to_string())],
            }
        }
        m if m.starts_with('_') => Vec::new(),
        other => vec![(
            ProblemKind::Invalid,
            format!("{other} is not a request an ACP v1 client sends to its agent"),
        )],
    }
}

/// A notification of the client to the agent.
fn client_notification(method: &str, params: Option<&Value>) -> Vec<(ProblemKind, String)> {
    let params = params.unwrap_or(&Value::Null);
    match method {
        "session/cancel" => check::<o::CancelNotification>("session/cancel params", params, &[]),
        "$/cancel_request" => {
            check::<o::CancelRequestNotification>("$/cancel_request params", params, &[])
        }
        "session/stop" => match ski::acp::MethodParams::decode(method, Some(params.clone())) {
            Ok(_) => Vec::new(),
            Err(error) => vec![(ProblemKind::Invalid, error.to_string())],
        },
        m if m.starts_with('_') => Vec::new(),
        other => vec![(
            ProblemKind::Invalid,
            format!("{other} is not a notification an ACP v1 client sends"),
        )],
    }
}

/// The client's answer to a request of the agent.
fn client_response(method: &str, result: &Value) -> Vec<(ProblemKind, String)> {
    let what = format!("the {method} result");
    match method {
        "session/request_permission" => check::<o::RequestPermissionResponse>(&what, result, &[]),
        "fs/read_text_file" => check::<o::ReadTextFileResponse>(&what, result, &[]),
        "fs/write_text_file" => check::<o::WriteTextFileResponse>(&what, result, &[]),
        "terminal/create" => check::<o::CreateTerminalResponse>(&what, result, &[]),
        "terminal/output" => check::<o::TerminalOutputResponse>(&what, result, &[]),
        "terminal/wait_for_exit" => check::<o::WaitForTerminalExitResponse>(&what, result, &[]),
        "terminal/kill" => check::<o::KillTerminalResponse>(&what, result, &[]),
        "terminal/release" => check::<o::ReleaseTerminalResponse>(&what, result, &[]),
        "elicitation/create" => check::<o::CreateElicitationResponse>(&what, result, &[]),
        _ => Vec::new(),
    }
}

fn response(method: &str, result: &Value) -> Vec<(ProblemKind, String)> {
    let what = format!("the {method} result");
    let models: &[&str] = if MODELS_ALLOWED.contains(&method) {
        &["/models"]
    } else {
        &[]
    };
    match method {
        "initialize" => check::<o::InitializeResponse>(&what, result, &[]),
        "authenticate" => check::<o::AuthenticateResponse>(&what, result, &[]),
        "logout" => check::<o::LogoutResponse>(&what, result, &[]),
        "session/new" => check::<o::NewSessionResponse>(&what, result, models),
        "session/load" => check::<o::LoadSessionResponse>(&what, result, models),
        "session/list" => check::<o::ListSessionsResponse>(&what, result, &[]),
        "session/delete" => check::<o::DeleteSessionResponse>(&what, result, &[]),
        "session/resume" => check::<o::ResumeSessionResponse>(&what, result, models),
        "session/close" => check::<o::CloseSessionResponse>(&what, result, &[]),
        "session/fork" => check::<o::ForkSessionResponse>(&what, result, models),
        "session/set_mode" => check::<o::SetSessionModeResponse>(&what, result, &[]),
        "session/set_config_option" => {
            check::<o::SetSessionConfigOptionResponse>(&what, result, &[])
        }
        "session/prompt" => check::<o::PromptResponse>(&what, result, &[]),
        // The legacy and ski methods have no official types (E-WIRE-04, E-WIRE-05): their
        // shapes are ski's.
        "session/set_model" | "session/export" | "session/stop" => {
            match ski::acp::MethodResult::decode(method, result.clone()) {
                Ok(_) => Vec::new(),
                Err(error) => vec![(ProblemKind::Invalid, error.to_string())],
            }
        }
        // Extension methods answer whatever they define; other names are probes of methods an
        // agent does not have, whose results have no schema.
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn problems(frames: &[Value], sent: &[(&str, &str)]) -> Vec<Problem> {
        let sent: HashMap<String, String> = sent
            .iter()
            .map(|(id, m)| ((*id).to_owned(), (*m).to_owned()))
            .collect();
        let mut oracle = Oracle::default();
        for frame in frames {
            oracle.inspect(&frame.to_string(), false, Some(frame), &sent);
        }
        oracle.problems().to_vec()
    }

    #[test]
    fn valid_frames_pass_and_nested_tool_calls_fail() {
        let good = json!({"jsonrpc": "2.0", "method": "session/update", "params": {
            "sessionId": "s", "update": {"sessionUpdate": "tool_call", "toolCallId": "t", "title": "x"}}});
        assert!(problems(&[good], &[]).is_empty());
        let nested = json!({"jsonrpc": "2.0", "method": "session/update", "params": {
            "sessionId": "s", "update": {"sessionUpdate": "tool_call", "toolCall": {"toolCallId": "t", "title": "x"}}}});
        let found = problems(&[nested], &[]);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].kind, ProblemKind::Invalid);
    }

    #[test]
    fn extension_kinds_need_their_capability() {
        let state = json!({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "s",
            "update": {"sessionUpdate": "execution_state_update", "executionState": {"state": "queued"}}}});
        assert_eq!(problems(std::slice::from_ref(&state), &[]).len(), 1);
        let init = json!({"jsonrpc": "2.0", "id": 1, "result": {"protocolVersion": 1,
            "agentCapabilities": {"_meta": {"ski": {"executionState": {}}}}}});
        assert!(problems(&[init, state], &[("1", "initialize")]).is_empty());
    }

    #[test]
    fn root_fields_are_unknown_fields_except_legacy_models() {
        let result = json!({"jsonrpc": "2.0", "id": 2, "result": {"sessionId": "s",
            "models": {"currentModelId": "m", "availableModels": []}, "vendor": 1}});
        let found = problems(&[result], &[("2", "session/new")]);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].kind, ProblemKind::UnknownField);
        assert!(found[0].error.contains("/vendor"), "{}", found[0].error);
    }

    #[test]
    fn properties_sent_at_their_default_value_are_not_unknown() {
        // The official types leave out a property at its default when they encode it again
        // (`status: "pending"`, `kind: "other"`, an empty `content`); the schema defines them.
        let defaults = json!({"jsonrpc": "2.0", "method": "session/update", "params": {
            "sessionId": "s", "update": {"sessionUpdate": "tool_call", "toolCallId": "t",
            "title": "x", "kind": "other", "status": "pending", "content": [], "locations": []}}});
        let found = problems(&[defaults], &[]);
        assert!(found.is_empty(), "{found:?}");
        let custom = json!({"jsonrpc": "2.0", "method": "session/update", "params": {
            "sessionId": "s", "update": {"sessionUpdate": "agent_message_chunk",
            "content": {"type": "text", "text": "hi"}, "status": "pending"}}});
        let found = problems(&[custom], &[]);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(
            found[0].error.contains("/update/status"),
            "{}",
            found[0].error
        );
    }

    #[test]
    fn client_frames_are_judged_as_the_client_side() {
        let sent: HashMap<String, String> =
            HashMap::from([("0".to_owned(), "session/request_permission".to_owned())]);
        let mut oracle = Oracle::new(Sender::Client);
        let frames = [
            json!({"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {"cwd": "/w"}}),
            json!({"jsonrpc": "2.0", "id": 0, "result": {"optionId": "allow", "granted": true}}),
            json!({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": "s"}}),
        ];
        for frame in &frames {
            oracle.inspect(&frame.to_string(), false, Some(frame), &sent);
        }
        let found: Vec<usize> = oracle.problems().iter().map(|p| p.seq).collect();
        assert_eq!(found, [0, 1], "{:?}", oracle.problems());
    }

    #[test]
    fn envelopes_and_unknown_ids_are_problems() {
        let no_version = json!({"id": 1, "result": {}});
        let stray = json!({"jsonrpc": "2.0", "id": 9, "result": {}});
        let error =
            json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32700, "message": "x"}});
        let found = problems(&[no_version, stray, error], &[("1", "logout")]);
        assert_eq!(found.len(), 2, "{found:?}");
    }
}
