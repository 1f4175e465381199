//! What AI apps call: `assistant.threads.*` (status, suggested prompts, title) and the streamed
//! message methods `chat.startStream`, `chat.appendStream` and `chat.stopStream`.

use serde_json::json;

use super::{Answer, check_content, object};
use crate::slack::params::Params;
use crate::slack::workspace::Workspace;

use super::chat::{channel_id, postable_channel};

/// The channel and thread an `assistant.threads.*` call names; both required.
fn assistant_thread(workspace: &Workspace, params: &Params) -> Result<(), &'static str> {
    channel_id(workspace, params, "channel_id")?;
    params.str("thread_ts").ok_or("invalid_arguments")?;
    Ok(())
}

pub(super) fn set_status(workspace: &mut Workspace, params: &Params) -> Answer {
    assistant_thread(workspace, params)?;
    if params.get("status").is_none() {
        return Err("invalid_arguments");
    }
    Ok(serde_json::Map::new())
}

pub(super) fn set_suggested_prompts(workspace: &mut Workspace, params: &Params) -> Answer {
    assistant_thread(workspace, params)?;
    let prompts = params
        .get("prompts")
        .and_then(|prompts| prompts.as_array().cloned())
        .or_else(|| {
            params
                .str("prompts")
                .and_then(|text| serde_json::from_str::<Vec<serde_json::Value>>(&text).ok())
        })
        .ok_or("invalid_arguments")?;
    if prompts.is_empty() || prompts.len() > 4 {
        return Err("invalid_arguments");
    }
    Ok(serde_json::Map::new())
}

pub(super) fn set_title(workspace: &mut Workspace, params: &Params) -> Answer {
    assistant_thread(workspace, params)?;
    params.str("title").ok_or("invalid_arguments")?;
    Ok(serde_json::Map::new())
}

pub(super) fn start_stream(workspace: &mut Workspace, params: &Params) -> Answer {
    check_content(params)?;
    let channel = postable_channel(workspace, params)?;
    let thread = params.str("thread_ts").ok_or("invalid_arguments")?;
    let ts = workspace.next_ts();
    let mut fields = serde_json::Map::new();
    fields.insert(
        "text".into(),
        json!(params.str("markdown_text").unwrap_or_default()),
    );
    fields.insert("thread_ts".into(), json!(thread));
    let message = workspace.bot_message(&ts, fields);
    workspace.store(&channel, message);
    workspace.items.streams.insert(ts.clone(), channel.clone());
    Ok(object(json!({ "channel": channel, "ts": ts })))
}

/// `chat.appendStream` (`stop` false) and `chat.stopStream`.
pub(super) fn append_stream(workspace: &mut Workspace, params: &Params, stop: bool) -> Answer {
    let channel = channel_id(workspace, params, "channel")?;
    let ts = params.str("ts").ok_or("invalid_arguments")?;
    if workspace.find(&channel, &ts).is_none() {
        return Err("message_not_found");
    }
    if workspace.items.streams.get(&ts) != Some(&channel) {
        return Err("message_not_in_streaming_state");
    }
    let more = params.str("markdown_text").unwrap_or_default();
    if !stop && more.is_empty() {
        return Err("invalid_arguments");
    }
    workspace.messages.update(&channel, &ts, |message| {
        let text = message["text"].as_str().unwrap_or_default().to_string();
        message["text"] = json!(text + &more);
        if let Some(blocks) = params.get("blocks").filter(|_| stop) {
            message["blocks"] = blocks.clone();
        }
    });
    if stop {
        workspace.items.streams.remove(&ts);
    }
    Ok(object(json!({ "channel": channel, "ts": ts })))
}
