//! Golden ACP fixtures: every file under `golden/acp/` decodes into ski's types and encodes
//! back to the same JSON, matches its insta snapshot in `golden/acp/snapshots/`, and (for
//! standard fixtures) decodes with the official `agent-client-protocol-schema` crate, whose known
//! disagreements are listed in `conformance/ERRATA.md`. Coverage is checked too, so fixtures
//! cannot silently disappear.
//!
//! How fixtures are laid out is described in `golden/acp/README.md`.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};
use ski::acp::meta::record_unknown_fields;
use ski::acp::methods::{self, Kind, Method, Stability};
use ski::acp::session_update::UpdateStability;
use ski::acp::{
    ContentBlock, CreateElicitationRequest, CreateElicitationResponse, MethodParams, MethodResult,
    PermissionOutcome, SessionUpdate, StopReason,
};

const GOLDEN_DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/golden/acp");
const SNAPSHOTS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/golden/acp/snapshots");
const ERRATA: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/conformance/ERRATA.md");

/// Which part of a JSON-RPC exchange a fixture holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Part {
    Request,
    Notification,
    Result,
    Error,
}

/// One fixture file.
struct Fixture {
    /// Path relative to `golden/acp`, with `/` separators.
    name: String,
    folder: String,
    case: String,
    method: Option<&'static Method>,
    part: Part,
    message: Value,
}

impl Fixture {
    /// Deliberately non-standard cases are named `x-*`.
    fn is_deliberately_nonstandard(&self) -> bool {
        self.case.starts_with("x-")
    }

    /// The case name up to `--`, which names the variant a fixture covers.
    fn variant(&self) -> &str {
        self.case.split("--").next().unwrap_or(&self.case)
    }

    /// The payload: params, result or error.
    fn payload(&self) -> Option<&Value> {
        let key = match self.part {
            Part::Request | Part::Notification => "params",
            Part::Result => "result",
            Part::Error => "error",
        };
        self.message.get(key)
    }

    /// Whether the fixture is plain ACP, so the official crate must read it. Legacy methods,
    /// ski extensions, ski session update kinds and `x-*` cases are not.
    fn is_standard(&self) -> bool {
        if self.is_deliberately_nonstandard() {
            return false;
        }
        if let Some(method) = self.method
            && !matches!(method.stability, Stability::Stable | Stability::Unstable)
        {
            return false;
        }
        if self.folder == "session-update" {
            let kind = self
                .payload()
                .and_then(|p| p["update"]["sessionUpdate"].as_str());
            return matches!(
                kind.and_then(SessionUpdate::stability_of),
                Some(UpdateStability::Stable | UpdateStability::Unstable)
            );
        }
        true
    }
}

/// The folder name of a method: `/` becomes `-`, a leading `$/` is dropped.
fn slug(method: &str) -> String {
    method.trim_start_matches("$/").replace('/', "-")
}

/// What a folder holds: the method (none for errors) and the message part.
fn folder_kind(folder: &str) -> Result<(Option<&'static Method>, Part), String> {
    let lookup = |name: &str| methods::lookup(name).ok_or_else(|| format!("no method {name}"));
    match folder {
        "session-update" => {
            return Ok((Some(lookup(methods::SESSION_UPDATE)?), Part::Notification));
        }
        "content-block" => return Ok((Some(lookup(methods::SESSION_PROMPT)?), Part::Request)),
        "error" => return Ok((None, Part::Error)),
        // Extension methods (`_`-prefixed) have no row in the method table.
        "extension" => return Ok((None, Part::Notification)),
        _ => {}
    }
    let (name, part) = folder
        .rsplit_once('.')
        .ok_or_else(|| format!("folder {folder} is not <method>.<part>"))?;
    let part = match part {
        "request" => Part::Request,
        "notification" => Part::Notification,
        "result" => Part::Result,
        other => return Err(format!("folder {folder}: unknown part {other}")),
    };
    let method = methods::METHODS
        .iter()
        .find(|method| slug(method.name) == name)
        .ok_or_else(|| format!("folder {folder}: no method has the slug {name}"))?;
    Ok((Some(method), part))
}

fn load_fixtures() -> Vec<Fixture> {
    let root = Path::new(GOLDEN_DIR);
    let mut files = Vec::new();
    collect_json(root, &mut files);
    files.sort();
    assert!(!files.is_empty(), "no fixtures under {GOLDEN_DIR}");
    files
        .into_iter()
        .map(|path| {
            let name = path
                .strip_prefix(root)
                .unwrap()
                .to_string_lossy()
                .replace('\\', "/");
            let (folder, file) = name
                .rsplit_once('/')
                .unwrap_or_else(|| panic!("{name}: fixtures live in a folder"));
            let case = file.strip_suffix(".json").unwrap().to_owned();
            let (method, part) = folder_kind(folder).unwrap_or_else(|e| panic!("{name}: {e}"));
            let text = fs::read_to_string(&path).unwrap();
            let message =
                serde_json::from_str(&text).unwrap_or_else(|e| panic!("{name}: not JSON: {e}"));
            Fixture {
                name: name.clone(),
                folder: folder.to_owned(),
                case,
                method,
                part,
                message,
            }
        })
        .collect()
}

fn collect_json(dir: &Path, files: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            collect_json(&path, files);
        } else if path.extension().is_some_and(|ext| ext == "json") {
            files.push(path);
        }
    }
}

/// A JSON-RPC error object, as the fixtures of `error/` hold it.
#[derive(serde::Deserialize, Serialize)]
struct ErrorObject {
    code: i32,
    message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    data: Option<Value>,
    #[serde(flatten)]
    extra: Map<String, Value>,
}

/// Checks the envelope, decodes the payload into ski's type and encodes the whole message again.
fn decode_and_encode(fixture: &Fixture) -> Result<Value, String> {
    let message = fixture
        .message
        .as_object()
        .ok_or("a message must be an object")?;
    if message.get("jsonrpc") != Some(&Value::from("2.0")) {
        return Err("`jsonrpc` must be \"2.0\"".into());
    }
    let has_id = message.contains_key("id");
    let expected_method = fixture.method.map(|m| m.name);
    let mut encoded = message.clone();
    match fixture.part {
        Part::Request | Part::Notification => {
            if has_id != (fixture.part == Part::Request) {
                return Err(format!(
                    "a {:?} {} an id",
                    fixture.part,
                    if has_id { "must not have" } else { "needs" }
                ));
            }
            let method = message
                .get("method")
                .and_then(Value::as_str)
                .ok_or("missing method")?;
            let params = MethodParams::decode(method, message.get("params").cloned())
                .map_err(|e| e.to_string())?;
            if fixture.folder == "extension" {
                if !methods::is_extension(method)
                    || fixture.case != slug(method.trim_start_matches('_'))
                {
                    return Err(format!(
                        "extension fixtures hold `_` methods and are named after them, not {method}"
                    ));
                }
            } else if Some(method) != expected_method {
                return Err(format!("method {method} in folder for {expected_method:?}"));
            } else if matches!(params, MethodParams::Other { .. }) {
                return Err(format!("ski has no params type for {method}"));
            }
            check_variant(fixture, &params)?;
            match params.to_value().map_err(|e| e.to_string())? {
                Some(value) => encoded.insert("params".into(), value),
                None => encoded.remove("params"),
            };
        }
        Part::Result => {
            let method = expected_method.ok_or("result folder without a method")?;
            let result = message.get("result").cloned().ok_or("missing result")?;
            let result = MethodResult::decode(method, result).map_err(|e| e.to_string())?;
            if matches!(result, MethodResult::Other { .. }) {
                return Err(format!("ski has no result type for {method}"));
            }
            encoded.insert(
                "result".into(),
                result.to_value().map_err(|e| e.to_string())?,
            );
        }
        Part::Error => {
            let error: ErrorObject =
                serde_json::from_value(message.get("error").cloned().ok_or("missing error")?)
                    .map_err(|e| e.to_string())?;
            encoded.insert(
                "error".into(),
                serde_json::to_value(error).map_err(|e| e.to_string())?,
            );
        }
    }
    Ok(Value::Object(encoded))
}

/// The variant named by the case must be the one decoded (`session-update/plan.json` holds a
/// `plan`), and deliberately non-standard cases must decode to an unknown variant or carry
/// unknown fields.
fn check_variant(fixture: &Fixture, params: &MethodParams) -> Result<(), String> {
    let decoded = match (fixture.folder.as_str(), params) {
        ("session-update", MethodParams::SessionUpdate(notification)) => {
            if fixture.is_deliberately_nonstandard() {
                let unknown_fields = match &notification.update {
                    SessionUpdate::AgentMessageChunk(chunk) => chunk.extra.unknown_keys().count(),
                    _ => 0,
                };
                return if notification.update.is_known() && unknown_fields == 0 {
                    Err("an x- case must decode to an unknown kind or keep unknown fields".into())
                } else {
                    Ok(())
                };
            }
            notification.update.kind().to_owned()
        }
        ("content-block", MethodParams::Prompt(prompt)) => {
            let [block] = prompt.prompt.as_slice() else {
                return Err("a content-block fixture holds exactly one block".into());
            };
            if fixture.is_deliberately_nonstandard() {
                return if block.is_known() {
                    Err("an x- case must decode to an unknown type".into())
                } else {
                    Ok(())
                };
            }
            block.kind().to_owned()
        }
        _ => return Ok(()),
    };
    if decoded == fixture.variant() {
        Ok(())
    } else {
        Err(format!(
            "case names {} but decodes to {decoded}",
            fixture.variant()
        ))
    }
}

#[test]
fn every_fixture_round_trips_and_matches_its_snapshot() {
    let fixtures = load_fixtures();
    let mut failures = Vec::new();
    for fixture in &fixtures {
        let (outcome, unknown) = record_unknown_fields(|| decode_and_encode(fixture));
        if !fixture.is_deliberately_nonstandard() && !unknown.is_empty() {
            failures.push(format!(
                "{}: fields no type declares: {unknown:?}",
                fixture.name
            ));
        }
        match outcome {
            Ok(encoded) if encoded == fixture.message => {}
            Ok(encoded) => failures.push(format!(
                "{}: encodes differently\n  expected: {}\n  actual:   {}",
                fixture.name, fixture.message, encoded
            )),
            Err(error) => failures.push(format!("{}: {error}", fixture.name)),
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} fixtures failed:\n{}",
        failures.len(),
        fixtures.len(),
        failures.join("\n")
    );

    insta::glob!("../golden/acp", "**/*.json", |path| {
        let name = path
            .strip_prefix(GOLDEN_DIR)
            .unwrap()
            .to_string_lossy()
            .replace('\\', "/");
        let fixture = fixtures
            .iter()
            .find(|f| name == format!("/{}", f.name) || name == f.name)
            .unwrap();
        let encoded = decode_and_encode(fixture).unwrap();
        insta::with_settings!({ snapshot_path => SNAPSHOTS, prepend_module_to_snapshot => false, omit_expression => true, sort_maps => true }, {
            insta::assert_json_snapshot!(encoded);
        });
    });
}

/// Decodes `payload` with the official crate's type for `method` and encodes it again.
fn official(method: &str, part: Part, payload: Value) -> Option<Result<Value, String>> {
    use agent_client_protocol_schema::v1 as o;
    fn rt<T: DeserializeOwned + Serialize>(payload: Value) -> std::result::Result<Value, String> {
        let typed: T = serde_json::from_value(payload).map_err(|e| e.to_string())?;
        serde_json::to_value(&typed).map_err(|e| e.to_string())
    }
    use Part::{Error, Notification, Request, Result};
    Some(match (method, part) {
        (_, Error) => rt::<o::Error>(payload),
        // The official crate carries extension params through as raw JSON, untouched.
        (method, _) if methods::is_extension(method) => Ok(payload),
        ("initialize", Request) => rt::<o::InitializeRequest>(payload),
        ("initialize", Result) => rt::<o::InitializeResponse>(payload),
        ("authenticate", Request) => rt::<o::AuthenticateRequest>(payload),
        ("authenticate", Result) => rt::<o::AuthenticateResponse>(payload),
        ("logout", Request) => rt::<o::LogoutRequest>(payload),
        ("logout", Result) => rt::<o::LogoutResponse>(payload),
        ("session/new", Request) => rt::<o::NewSessionRequest>(payload),
        ("session/new", Result) => rt::<o::NewSessionResponse>(payload),
        ("session/load", Request) => rt::<o::LoadSessionRequest>(payload),
        ("session/load", Result) => rt::<o::LoadSessionResponse>(payload),
        ("session/list", Request) => rt::<o::ListSessionsRequest>(payload),
        ("session/list", Result) => rt::<o::ListSessionsResponse>(payload),
        ("session/delete", Request) => rt::<o::DeleteSessionRequest>(payload),
        ("session/delete", Result) => rt::<o::DeleteSessionResponse>(payload),
        ("session/resume", Request) => rt::<o::ResumeSessionRequest>(payload),
        ("session/resume", Result) => rt::<o::ResumeSessionResponse>(payload),
        ("session/close", Request) => rt::<o::CloseSessionRequest>(payload),
        ("session/close", Result) => rt::<o::CloseSessionResponse>(payload),
        ("session/set_mode", Request) => rt::<o::SetSessionModeRequest>(payload),
        ("session/set_mode", Result) => rt::<o::SetSessionModeResponse>(payload),
        ("session/set_config_option", Request) => rt::<o::SetSessionConfigOptionRequest>(payload),
        ("session/set_config_option", Result) => rt::<o::SetSessionConfigOptionResponse>(payload),
        ("session/prompt", Request) => rt::<o::PromptRequest>(payload),
        ("session/prompt", Result) => rt::<o::PromptResponse>(payload),
        ("session/cancel", Notification) => rt::<o::CancelNotification>(payload),
        ("session/update", Notification) => rt::<o::SessionNotification>(payload),
        ("session/request_permission", Request) => rt::<o::RequestPermissionRequest>(payload),
        ("session/request_permission", Result) => rt::<o::RequestPermissionResponse>(payload),
        ("fs/read_text_file", Request) => rt::<o::ReadTextFileRequest>(payload),
        ("fs/read_text_file", Result) => rt::<o::ReadTextFileResponse>(payload),
        ("fs/write_text_file", Request) => rt::<o::WriteTextFileRequest>(payload),
        ("fs/write_text_file", Result) => rt::<o::WriteTextFileResponse>(payload),
        ("terminal/create", Request) => rt::<o::CreateTerminalRequest>(payload),
        ("terminal/create", Result) => rt::<o::CreateTerminalResponse>(payload),
        ("terminal/output", Request) => rt::<o::TerminalOutputRequest>(payload),
        ("terminal/output", Result) => rt::<o::TerminalOutputResponse>(payload),
        ("terminal/wait_for_exit", Request) => rt::<o::WaitForTerminalExitRequest>(payload),
        ("terminal/wait_for_exit", Result) => rt::<o::WaitForTerminalExitResponse>(payload),
        ("terminal/kill", Request) => rt::<o::KillTerminalRequest>(payload),
        ("terminal/kill", Result) => rt::<o::KillTerminalResponse>(payload),
        ("terminal/release", Request) => rt::<o::ReleaseTerminalRequest>(payload),
        ("terminal/release", Result) => rt::<o::ReleaseTerminalResponse>(payload),
        ("elicitation/create", Request) => rt::<o::CreateElicitationRequest>(payload),
        ("elicitation/create", Result) => rt::<o::CreateElicitationResponse>(payload),
        ("elicitation/complete", Notification) => rt::<o::CompleteElicitationNotification>(payload),
        ("$/cancel_request", Notification) => rt::<o::CancelRequestNotification>(payload),
        ("session/fork", Request) => rt::<o::ForkSessionRequest>(payload),
        ("session/fork", Result) => rt::<o::ForkSessionResponse>(payload),
        ("session/archive", Request) => rt::<o::ArchiveSessionRequest>(payload),
        ("session/archive", Result) => rt::<o::ArchiveSessionResponse>(payload),
        ("session/unarchive", Request) => rt::<o::UnarchiveSessionRequest>(payload),
        ("session/unarchive", Result) => rt::<o::UnarchiveSessionResponse>(payload),
        ("session/status", Request) => rt::<o::SessionStatusRequest>(payload),
        ("session/status", Result) => rt::<o::SessionStatusResponse>(payload),
        ("session/set_title", Request) => rt::<o::SetSessionTitleRequest>(payload),
        ("session/set_title", Result) => rt::<o::SetSessionTitleResponse>(payload),
        ("auth/status", Request) => rt::<o::AuthStatusRequest>(payload),
        ("auth/status", Result) => rt::<o::AuthStatusResponse>(payload),
        ("auth/status_update", Notification) => rt::<o::AuthStatusUpdateNotification>(payload),
        _ => return None,
    })
}

/// Paths of `input` that `output` lost or changed. Keys the output adds (spelled-out defaults)
/// are not losses.
fn losses(input: &Value, output: Option<&Value>, path: &str, found: &mut Vec<String>) {
    match (input, output) {
        (_, None) => found.push(path.to_owned()),
        (Value::Object(input), Some(Value::Object(output))) => {
            for (key, value) in input {
                losses(value, output.get(key), &format!("{path}/{key}"), found);
            }
        }
        (Value::Array(input), Some(Value::Array(output))) if input.len() == output.len() => {
            for (index, (value, out)) in input.iter().zip(output).enumerate() {
                losses(value, Some(out), &format!("{path}/{index}"), found);
            }
        }
        (input, Some(output)) if input == output => {}
        (Value::Number(a), Some(Value::Number(b))) if a.as_f64() == b.as_f64() => {}
        _ => found.push(path.to_owned()),
    }
}

/// What the official crate does with a fixture, when that differs from the wire.
#[derive(Debug, PartialEq)]
enum Disagreement {
    /// It has no type for the method (legacy methods and ski extensions).
    NoType,
    /// It fails to decode the payload.
    Rejects,
    /// It decodes, but encoding again loses these JSON pointer paths of the payload.
    Drops(&'static [&'static str]),
}

/// Every known disagreement with the official crate, with its ERRATA entry.
const KNOWN_DISAGREEMENTS: &[(&str, &str, Disagreement)] = &[
    (
        "session-update/x-agent_message_chunk--unknown-root-field.json",
        "E-WIRE-01",
        Drops(&["/update/vendorScore"]),
    ),
    (
        "session-update/x-unknown-kind-turn_end.json",
        "E-WIRE-02",
        Rejects,
    ),
    ("content-block/x-unknown-type.json", "E-WIRE-02", Rejects),
    ("session-update/audit_update.json", "E-WIRE-03", Rejects),
    (
        "session-update/execution_state_update.json",
        "E-WIRE-03",
        Rejects,
    ),
    (
        "session-update/execution_state_update--retrying.json",
        "E-WIRE-03",
        Rejects,
    ),
    ("session-update/retry_update.json", "E-WIRE-03", Rejects),
    (
        "session-new.result/legacy-models.json",
        "E-WIRE-04",
        Drops(&["/models"]),
    ),
    ("session-set_model.request/basic.json", "E-WIRE-04", NoType),
    ("session-set_model.result/empty.json", "E-WIRE-04", NoType),
    ("session-export.request/jsonl.json", "E-WIRE-05", NoType),
    ("session-export.result/jsonl.json", "E-WIRE-05", NoType),
    ("session-stop.request/basic.json", "E-WIRE-05", NoType),
    ("session-stop.result/empty.json", "E-WIRE-05", NoType),
    ("session-stop.notification/basic.json", "E-WIRE-05", NoType),
    (
        "initialize.result/ski-capabilities.json",
        "E-WIRE-06",
        Drops(&[
            "/agentCapabilities/sessionCapabilities/export",
            "/agentCapabilities/authCapabilities",
        ]),
    ),
    (
        "session-list.result/fork-parent.json",
        "E-WIRE-07",
        Drops(&[
            "/sessions/0/parentSessionId",
            "/sessions/0/messageCount",
            "/sessions/1/messageCount",
        ]),
    ),
    (
        "session-list.result/last-page-null-cursor.json",
        "E-WIRE-08",
        Drops(&["/nextCursor"]),
    ),
    (
        "terminal-wait_for_exit.result/signal.json",
        "E-WIRE-09",
        Drops(&["/exitCode"]),
    ),
    (
        "session-resume.request/with-mcp-servers.json",
        "E-WIRE-10",
        Drops(&["/mcpServers"]),
    ),
    (
        "session-fork.request/basic.json",
        "E-WIRE-10",
        Drops(&["/mcpServers"]),
    ),
];

use Disagreement::{Drops, NoType, Rejects};

#[test]
fn fixtures_agree_with_the_official_crate_or_are_listed() {
    let fixtures = load_fixtures();
    let mut observed: BTreeMap<&str, Disagreement> = BTreeMap::new();
    let mut problems = Vec::new();
    let mut standard = 0;
    for fixture in &fixtures {
        let method = fixture.method.map_or_else(
            || fixture.message["method"].as_str().unwrap_or(""),
            |m| m.name,
        );
        let payload = fixture.payload().cloned().unwrap_or(Value::Null);
        let disagreement = match official(method, fixture.part, payload.clone()) {
            None => Some(Disagreement::NoType),
            Some(Err(error)) => {
                eprintln!("{}: the official crate rejects it: {error}", fixture.name);
                Some(Disagreement::Rejects)
            }
            Some(Ok(output)) => {
                let mut found = Vec::new();
                losses(&payload, Some(&output), "", &mut found);
                let found: Vec<&'static str> = found
                    .into_iter()
                    .map(|p| &*Box::leak(p.into_boxed_str()))
                    .collect();
                (!found.is_empty())
                    .then(|| Disagreement::Drops(Box::leak(found.into_boxed_slice())))
            }
        };
        if fixture.is_standard() {
            standard += 1;
            if matches!(
                disagreement,
                Some(Disagreement::NoType | Disagreement::Rejects)
            ) {
                problems.push(format!(
                    "{}: a standard fixture the official crate cannot read",
                    fixture.name
                ));
            }
        }
        if let Some(disagreement) = disagreement {
            observed.insert(&fixture.name, disagreement);
        }
    }
    assert!(standard >= 60, "only {standard} standard fixtures");

    let errata = fs::read_to_string(ERRATA).unwrap();
    for (name, id, expected) in KNOWN_DISAGREEMENTS {
        if !errata.contains(&format!("### {id}")) {
            problems.push(format!(
                "{name}: {id} has no entry in conformance/ERRATA.md"
            ));
        }
        match observed.remove(name) {
            Some(actual) if actual == *expected => {}
            Some(actual) => problems.push(format!(
                "{name}: listed as {expected:?} ({id}), observed {actual:?}"
            )),
            None => problems.push(format!(
                "{name}: listed as {expected:?} ({id}) but the official crate agrees now"
            )),
        }
    }
    for (name, actual) in observed {
        problems.push(format!(
            "{name}: unlisted disagreement with the official crate: {actual:?}"
        ));
    }
    assert!(
        problems.is_empty(),
        "official crate check:\n{}",
        problems.join("\n")
    );
}

/// The number of fixtures in every folder. A fixture added or removed must be reflected here, so
/// coverage cannot shrink unnoticed.
const FIXTURES_PER_FOLDER: &[(&str, usize)] = &[
    ("auth-status.request", 1),
    ("auth-status.result", 1),
    ("auth-status_update.notification", 1),
    ("authenticate.request", 1),
    ("authenticate.result", 1),
    ("cancel_request.notification", 2),
    ("content-block", 9),
    ("elicitation-complete.notification", 1),
    ("elicitation-create.request", 2),
    ("elicitation-create.result", 3),
    ("error", 9),
    ("extension", 5),
    ("fs-read_text_file.request", 2),
    ("fs-read_text_file.result", 1),
    ("fs-write_text_file.request", 1),
    ("fs-write_text_file.result", 1),
    ("initialize.request", 2),
    ("initialize.result", 3),
    ("logout.request", 1),
    ("logout.result", 1),
    ("session-archive.request", 1),
    ("session-archive.result", 1),
    ("session-cancel.notification", 1),
    ("session-close.request", 1),
    ("session-close.result", 1),
    ("session-delete.request", 1),
    ("session-delete.result", 1),
    ("session-export.request", 1),
    ("session-export.result", 1),
    ("session-fork.request", 1),
    ("session-fork.result", 1),
    ("session-list.request", 2),
    ("session-list.result", 4),
    ("session-load.request", 1),
    ("session-load.result", 2),
    ("session-new.request", 2),
    ("session-new.result", 3),
    ("session-prompt.request", 2),
    ("session-prompt.result", 6),
    ("session-request_permission.request", 2),
    ("session-request_permission.result", 2),
    ("session-resume.request", 2),
    ("session-resume.result", 1),
    ("session-set_config_option.request", 2),
    ("session-set_config_option.result", 1),
    ("session-set_mode.request", 1),
    ("session-set_mode.result", 1),
    ("session-set_model.request", 1),
    ("session-set_model.result", 1),
    ("session-set_title.request", 1),
    ("session-set_title.result", 1),
    ("session-status.request", 1),
    ("session-status.result", 1),
    ("session-stop.notification", 1),
    ("session-stop.request", 1),
    ("session-stop.result", 1),
    ("session-unarchive.request", 1),
    ("session-unarchive.result", 1),
    ("session-update", 34),
    ("terminal-create.request", 2),
    ("terminal-create.result", 1),
    ("terminal-kill.request", 1),
    ("terminal-kill.result", 1),
    ("terminal-output.request", 1),
    ("terminal-output.result", 2),
    ("terminal-release.request", 1),
    ("terminal-release.result", 1),
    ("terminal-wait_for_exit.request", 1),
    ("terminal-wait_for_exit.result", 2),
];

#[test]
fn fixture_counts_per_folder_are_pinned() {
    let fixtures = load_fixtures();
    let mut actual: BTreeMap<&str, usize> = BTreeMap::new();
    for fixture in &fixtures {
        *actual.entry(fixture.folder.as_str()).or_default() += 1;
    }
    let expected: BTreeMap<&str, usize> = FIXTURES_PER_FOLDER.iter().copied().collect();
    assert_eq!(
        actual, expected,
        "fixture counts changed; update FIXTURES_PER_FOLDER"
    );
    assert!(fixtures.len() >= 60, "only {} fixtures", fixtures.len());
}

/// The case names (variant part) of the fixtures in `folder`.
fn variants<'a>(fixtures: &'a [Fixture], folder: &str) -> BTreeSet<&'a str> {
    fixtures
        .iter()
        .filter(|f| f.folder == folder)
        .map(Fixture::variant)
        .collect()
}

/// Every key, and every `key=value` string pair, in the fixtures of `folder` (all folders when `None`), at any
/// depth.
fn discriminators(fixtures: &[Fixture], folder: Option<&str>) -> BTreeSet<String> {
    fn walk(value: &Value, found: &mut BTreeSet<String>) {
        match value {
            Value::Object(map) => {
                for (key, value) in map {
                    found.insert(key.clone());
                    if let Value::String(text) = value {
                        found.insert(format!("{key}={text}"));
                    }
                    walk(value, found);
                }
            }
            Value::Array(items) => items.iter().for_each(|item| walk(item, found)),
            _ => {}
        }
    }
    let mut found = BTreeSet::new();
    for fixture in fixtures
        .iter()
        .filter(|f| folder.is_none_or(|folder| f.folder == folder))
    {
        walk(&fixture.message, &mut found);
    }
    found
}

#[test]
fn every_variant_has_a_fixture() {
    let fixtures = load_fixtures();
    let mut missing = Vec::new();
    let mut require = |what: String, present: bool| {
        if !present {
            missing.push(what);
        }
    };

    let updates = variants(&fixtures, "session-update");
    for kind in SessionUpdate::KNOWN {
        require(
            format!("session-update/{kind}.json"),
            updates.contains(kind),
        );
    }
    let blocks = variants(&fixtures, "content-block");
    for kind in ContentBlock::KNOWN {
        require(format!("content-block/{kind}.json"), blocks.contains(kind));
    }
    let cases: BTreeSet<&str> = fixtures.iter().map(|f| f.name.as_str()).collect();
    for case in [
        "content-block/resource--text.json",
        "content-block/resource--blob.json",
        "content-block/text--annotations.json",
    ] {
        require(case.to_owned(), cases.contains(case));
    }
    let results = |folder: &str| variants(&fixtures, folder);
    for reason in StopReason::KNOWN {
        require(
            format!("session-prompt.result/{reason}.json"),
            results("session-prompt.result").contains(reason),
        );
    }
    for outcome in PermissionOutcome::KNOWN {
        require(
            format!("session-request_permission.result/{outcome}.json"),
            results("session-request_permission.result").contains(outcome),
        );
    }
    for action in CreateElicitationResponse::KNOWN {
        require(
            format!("elicitation-create.result/{action}.json"),
            results("elicitation-create.result").contains(action),
        );
    }
    for mode in CreateElicitationRequest::KNOWN {
        require(
            format!("elicitation-create.request/{mode}.json"),
            results("elicitation-create.request").contains(mode),
        );
    }

    // Every method ski has types for has a fixture for each of its parts.
    let folders: BTreeSet<&str> = fixtures.iter().map(|f| f.folder.as_str()).collect();
    for method in methods::METHODS {
        if matches!(
            MethodParams::decode(method.name, None),
            Ok(MethodParams::Other { .. })
        ) {
            continue;
        }
        let slug = slug(method.name);
        let parts: &[&str] = match method.kind {
            Kind::Request => &["request", "result"],
            Kind::Notification => &["notification"],
            Kind::RequestOrNotification => &["request", "result", "notification"],
        };
        for part in parts {
            let folder = format!("{slug}.{part}");
            let covered = folders.contains(folder.as_str())
                || (method.name == methods::SESSION_UPDATE && folders.contains("session-update"));
            require(format!("{folder}/ ({})", method.name), covered);
        }
    }

    // Every ACP error code has an error fixture.
    let codes: BTreeSet<i64> = fixtures
        .iter()
        .filter(|f| f.part == Part::Error)
        .filter_map(|f| f.message["error"]["code"].as_i64())
        .collect();
    use ski::acp::error::*;
    for code in [
        PARSE_ERROR,
        INVALID_REQUEST,
        METHOD_NOT_FOUND,
        INVALID_PARAMS,
        INTERNAL_ERROR,
        REQUEST_CANCELLED,
        AUTH_REQUIRED,
        RESOURCE_NOT_FOUND,
    ] {
        require(
            format!("error/ with code {code}"),
            codes.contains(&i64::from(code)),
        );
    }

    // Nested unions and shapes.
    let all = discriminators(&fixtures, None);
    let updates = discriminators(&fixtures, Some("session-update"));
    for kind in ski::acp::ToolCallContent::KNOWN {
        require(
            format!("tool call content type={kind}"),
            updates.contains(&format!("type={kind}")),
        );
    }
    for pair in [
        "type=http",
        "type=sse",
        "command",
        "type=terminal",
        "authMethods",
        "type=select",
        "type=boolean",
        "group",
        "availableModes",
        "currentModeId",
        "locations",
        "rawInput",
        "rawOutput",
        "oldText",
        "annotations",
        "nextCursor",
        "parentSessionId",
        "requestId",
        "exitStatus",
        "signal",
    ] {
        require(format!("a fixture with {pair}"), all.contains(pair));
    }
    assert!(
        missing.is_empty(),
        "no fixture for:\n{}",
        missing.join("\n")
    );
}

mod wire;
