//! `views.open`, `views.push` and `views.update`: modals with Slack's defaults, ids and hashes.

use serde_json::{Map, Value, json};

use super::{Answer, object};

/// Slack's most blocks in a modal.
const MAX_VIEW_BLOCKS: usize = 100;
use crate::slack::params::Params;
use crate::slack::workspace::Workspace;

/// The view as sent, completed with the fields Slack adds.
fn complete(
    workspace: &mut Workspace,
    sent: &Map<String, Value>,
    id: &str,
    root: Option<String>,
    previous: Option<String>,
) -> Value {
    let config = &workspace.config;
    let mut view = Map::new();
    view.insert("id".into(), json!(id));
    view.insert("team_id".into(), json!(config.team.id));
    view.insert("app_id".into(), json!(config.bot.app_id));
    view.insert("bot_id".into(), json!(config.bot.bot_id));
    view.insert("private_metadata".into(), json!(""));
    view.insert("callback_id".into(), json!(""));
    view.insert("external_id".into(), json!(""));
    view.insert("clear_on_close".into(), json!(false));
    view.insert("notify_on_close".into(), json!(false));
    view.insert("blocks".into(), json!([]));
    view.extend(sent.clone());
    view.insert("id".into(), json!(id));
    view.insert("state".into(), json!({ "values": {} }));
    let hash = workspace.next_id("h");
    view.insert("hash".into(), json!(hash));
    view.insert(
        "root_view_id".into(),
        json!(root.unwrap_or_else(|| id.to_string())),
    );
    view.insert(
        "previous_view_id".into(),
        previous.map_or(Value::Null, Value::String),
    );
    Value::Object(view)
}

/// Checks a sent view: a type, a title for modals, and Slack's block limit.
fn sent_view(params: &Params) -> Result<Map<String, Value>, &'static str> {
    let view = params.get("view").ok_or("invalid_arguments")?;
    let view = view.as_object().ok_or("invalid_arguments")?;
    let kind = view
        .get("type")
        .and_then(Value::as_str)
        .ok_or("invalid_arguments")?;
    if kind == "modal" && !view.get("title").is_some_and(Value::is_object) {
        return Err("invalid_arguments");
    }
    if let Some(blocks) = view.get("blocks") {
        let blocks = blocks.as_array().ok_or("invalid_blocks")?;
        if blocks.len() > MAX_VIEW_BLOCKS
            || blocks
                .iter()
                .any(|block| !block.get("type").is_some_and(Value::is_string))
        {
            return Err("invalid_blocks");
        }
    }
    Ok(view.clone())
}

pub(super) fn open(workspace: &mut Workspace, params: &Params, push: bool) -> Answer {
    let trigger = params.required("trigger_id")?;
    let sent = sent_view(params)?;
    workspace.use_trigger(&trigger)?;
    let id = workspace.next_id("V");
    let (root, previous) = if push {
        let last = workspace.views.keys().max().cloned();
        let root = last
            .as_ref()
            .and_then(|last| workspace.views.get(last))
            .and_then(|view| view["root_view_id"].as_str().map(str::to_string));
        (root, last)
    } else {
        (None, None)
    };
    let view = complete(workspace, &sent, &id, root, previous);
    workspace.views.insert(id, view.clone());
    Ok(object(json!({ "view": view })))
}

pub(super) fn update(workspace: &mut Workspace, params: &Params) -> Answer {
    let sent = sent_view(params)?;
    let id = match (params.str("view_id"), params.str("external_id")) {
        (Some(id), _) => id,
        (None, Some(external)) => workspace
            .views
            .iter()
            .find(|(_, view)| view["external_id"] == json!(external))
            .map(|(id, _)| id.clone())
            .ok_or("not_found")?,
        (None, None) => return Err("invalid_arguments"),
    };
    let old = workspace.views.get(&id).ok_or("not_found")?.clone();
    if let Some(hash) = params.str("hash")
        && old["hash"] != json!(hash)
    {
        return Err("hash_conflict");
    }
    let root = old["root_view_id"].as_str().map(str::to_string);
    let previous = old["previous_view_id"].as_str().map(str::to_string);
    let view = complete(workspace, &sent, &id, root, previous);
    workspace.views.insert(id, view.clone());
    Ok(object(json!({ "view": view })))
}
