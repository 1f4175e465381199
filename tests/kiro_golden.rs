//! Golden kiro fixtures (`golden/kiro/<method>.<kind>/<case>.json`): each is one JSON-RPC message
//! of the kind its folder names, re-encodes to itself, decodes into ski's ACP types where the
//! method is ACP's, and is pinned by an insta snapshot in `golden/kiro/snapshots/`.
//!
//! After an intended change: `cargo insta review` (CI never writes snapshots).

use std::fs;
use std::path::{Path, PathBuf};

use serde_json::Value;
use ski::acp::{MethodParams, MethodResult};
use ski::jsonrpc::{Message, VersionField, decode};
use ski::kiro::client::permission_answer;

const SNAPSHOTS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/golden/kiro/snapshots");

fn golden_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("golden/kiro")
}

struct Fixture {
    name: String,
    method: String,
    kind: String,
    value: Value,
}

fn fixtures() -> Vec<Fixture> {
    let mut found = Vec::new();
    for folder in fs::read_dir(golden_root())
        .expect("golden/kiro exists")
        .flatten()
    {
        let folder_name = folder.file_name().to_string_lossy().into_owned();
        let Some((method, kind)) = folder_name.rsplit_once('.') else {
            continue;
        };
        if !folder.path().is_dir() || folder_name == "snapshots" {
            continue;
        }
        for file in fs::read_dir(folder.path())
            .expect("a fixture folder")
            .flatten()
        {
            let text = fs::read_to_string(file.path()).expect("a readable fixture");
            let value: Value = serde_json::from_str(&text).expect("a JSON fixture");
            found.push(Fixture {
                name: format!("{folder_name}/{}", file.file_name().to_string_lossy()),
                method: method.to_owned(),
                kind: kind.to_owned(),
                value,
            });
        }
    }
    found.sort_by(|a, b| a.name.cmp(&b.name));
    found
}

fn check(fixture: &Fixture) -> Result<(), String> {
    let text = fixture.value.to_string();
    let message = decode(text.as_bytes(), VersionField::Required).map_err(|e| e.to_string())?;
    let line = message.to_line().map_err(|e| e.to_string())?;
    let reencoded: Value = serde_json::from_str(&line).map_err(|e| e.to_string())?;
    if reencoded != fixture.value {
        return Err(format!("re-encodes as {line}"));
    }
    match (&message, fixture.kind.as_str()) {
        (Message::Request(_), "request") | (Message::Notification(_), "notification")
            if message.method().map(|m| m.replace('/', "-")) == Some(fixture.method.clone()) =>
        {
            let method = message.method().unwrap_or_default();
            let params = fixture.value.get("params").cloned();
            if !method.starts_with('_') {
                let decoded =
                    MethodParams::decode(method, params.clone()).map_err(|e| e.to_string())?;
                if decoded.to_value().map_err(|e| e.to_string())? != params {
                    return Err(format!("params of {method} change through ski's ACP types"));
                }
            }
            Ok(())
        }
        (Message::Response(_), "result") => {
            let method = fixture.method.replacen('-', "/", 1);
            let result = fixture.value.get("result").cloned().ok_or("no result")?;
            let decoded =
                MethodResult::decode(&method, result.clone()).map_err(|e| e.to_string())?;
            if decoded.to_value().map_err(|e| e.to_string())? != result {
                return Err(format!(
                    "the result of {method} changes through ski's ACP types"
                ));
            }
            Ok(())
        }
        (Message::Response(_), "error") if fixture.value.get("error").is_some() => Ok(()),
        _ => Err(format!("not a {} of {}", fixture.kind, fixture.method)),
    }
}

#[test]
fn every_fixture_is_the_message_its_folder_names_and_is_pinned() {
    let fixtures = fixtures();
    assert!(fixtures.len() >= 20, "{} fixtures", fixtures.len());
    let failures: Vec<String> = fixtures
        .iter()
        .filter_map(|f| check(f).err().map(|e| format!("{}: {e}", f.name)))
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    insta::with_settings!({ snapshot_path => SNAPSHOTS, prepend_module_to_snapshot => false, omit_expression => true, sort_maps => true }, {
        for fixture in &fixtures {
            let name = fixture.name.replace(['/', '.'], "__");
            insta::assert_json_snapshot!(name, fixture.value);
        }
    });
}

#[test]
fn the_client_answers_kiro_permission_options_with_allow_once() {
    let read = |path: &str| -> Value {
        serde_json::from_str(&fs::read_to_string(golden_root().join(path)).expect("fixture"))
            .expect("JSON")
    };
    let request = read("session-request_permission.request/kiro-options.json");
    let result = read("session-request_permission.result/allow-once.json");
    assert_eq!(permission_answer(request.get("params")), result["result"]);
    assert_eq!(request["id"], result["id"]);
}
