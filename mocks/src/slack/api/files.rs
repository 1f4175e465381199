//! The files upload v2 flow: `files.getUploadURLExternal`, the upload POST (served by the web
//! front), and `files.completeUploadExternal`, which shares the files as a message.

use serde_json::{Value, json};

use super::{Answer, Site, object};
use crate::slack::params::Params;
use crate::slack::workspace::{Upload, Workspace};

use super::chat::channel_id;

pub(super) fn upload_url(workspace: &mut Workspace, site: &Site, params: &Params) -> Answer {
    let name = params.required("filename")?;
    let length = params
        .required("length")?
        .parse::<u64>()
        .map_err(|_| "invalid_arguments")?;
    let id = workspace.next_id("F");
    workspace.uploads.insert(
        id.clone(),
        Upload {
            name,
            title: None,
            length,
            received: None,
        },
    );
    Ok(object(json!({
        "upload_url": format!("{}/upload/{id}", site.origin),
        "file_id": id,
    })))
}

pub(super) fn complete(workspace: &mut Workspace, site: &Site, params: &Params) -> Answer {
    let files = params
        .get("files")
        .and_then(Value::as_array)
        .ok_or("invalid_arguments")?
        .clone();
    if files.is_empty() {
        return Err("invalid_arguments");
    }
    let channel = match params.str("channel_id").or_else(|| params.str("channels")) {
        Some(_) => Some(channel_id(
            workspace,
            params,
            if params.str("channel_id").is_some() {
                "channel_id"
            } else {
                "channels"
            },
        )?),
        None => None,
    };
    let thread = params.str("thread_ts");
    if let (Some(channel), Some(thread)) = (&channel, &thread)
        && workspace.find(channel, thread).is_none()
    {
        return Err("thread_not_found");
    }
    let user = workspace.config.bot.user_id.clone();
    let mut answered = Vec::new();
    for entry in &files {
        let id = entry["id"].as_str().ok_or("invalid_arguments")?;
        let upload = workspace.uploads.get_mut(id).ok_or("file_not_found")?;
        if upload.received.is_none() {
            return Err("file_upload_not_complete");
        }
        upload.title = entry["title"].as_str().map(str::to_string);
        let title = upload.title.clone().unwrap_or_else(|| upload.name.clone());
        let size = upload.received.unwrap_or_default();
        answered.push(json!({
            "id": id,
            "created": 1_700_000_000,
            "timestamp": 1_700_000_000,
            "name": upload.name,
            "title": title,
            "mimetype": "application/octet-stream",
            "filetype": "binary",
            "user": user,
            "size": size,
            "url_private": format!("{}/files/{id}/{}", site.origin, upload.name),
            "permalink": format!("https://{}.slack.com/files/{user}/{id}", workspace.config.team.domain),
            "is_external": false,
            "is_public": true,
        }));
    }
    for file in &answered {
        if let Some(id) = file["id"].as_str() {
            workspace.items.files.insert(id.to_string(), file.clone());
        }
    }
    if let Some(channel) = channel {
        let mut fields = serde_json::Map::new();
        fields.insert(
            "text".into(),
            json!(params.str("initial_comment").unwrap_or_default()),
        );
        fields.insert("subtype".into(), json!("file_share"));
        fields.insert("files".into(), json!(answered));
        if let Some(thread) = thread {
            fields.insert("thread_ts".into(), json!(thread));
        }
        let ts = workspace.next_ts();
        let message = workspace.bot_message(&ts, fields);
        workspace.store(&channel, message);
    }
    Ok(object(json!({ "files": answered })))
}

pub(super) fn info(workspace: &mut Workspace, params: &Params) -> Answer {
    let id = params.str("file").ok_or("file_not_found")?;
    let file = workspace.items.files.get(&id).ok_or("file_not_found")?;
    Ok(object(
        json!({ "file": file, "comments": [], "response_metadata": { "next_cursor": "" } }),
    ))
}

pub(super) fn list(workspace: &mut Workspace, _params: &Params) -> Answer {
    let mut files: Vec<Value> = workspace.items.files.values().cloned().collect();
    files.sort_by(|a, b| a["id"].as_str().cmp(&b["id"].as_str()));
    let count = files.len();
    Ok(object(json!({
        "files": files,
        "paging": { "count": 100, "total": count, "page": 1, "pages": 1 },
    })))
}

pub(super) fn delete(workspace: &mut Workspace, params: &Params) -> Answer {
    let id = params.str("file").ok_or("file_not_found")?;
    workspace.items.files.remove(&id).ok_or("file_not_found")?;
    workspace.uploads.remove(&id);
    Ok(serde_json::Map::new())
}
