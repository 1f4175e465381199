//! The files upload v2 flow: `files.getUploadURLExternal`, the upload POST (served by the web
//! front), and `files.completeUploadExternal`, which shares the files as a message.

use serde_json::{Value, json};

use super::{Answer, Site, object};
use crate::slack::channel::Kind;
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
        let kind = file_kind(&upload.name);
        answered.push(json!({
            "id": id,
            "created": 1_700_000_000,
            "timestamp": 1_700_000_000,
            "name": upload.name,
            "title": title,
            "mimetype": kind.mimetype,
            "filetype": kind.filetype,
            "pretty_type": kind.pretty_type,
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
        record_share(workspace, &answered, &channel, &ts);
    }
    Ok(object(json!({ "files": answered })))
}

/// Notes in each stored file where it was shared: `shares.public` or `shares.private` by
/// channel, and the channel in `channels`, `groups` or `ims`.
fn record_share(workspace: &mut Workspace, files: &[Value], channel: &str, ts: &str) {
    let Some(conversation) = workspace.channel(channel).cloned() else {
        return;
    };
    let (visibility, list) = match conversation.kind {
        Kind::Public => ("public", "channels"),
        Kind::Private | Kind::Mpim => ("private", "groups"),
        Kind::Im => ("private", "ims"),
    };
    let share = json!({
        "ts": ts,
        "channel_name": conversation.name,
        "team_id": workspace.config.team.id,
        "share_user_id": workspace.config.bot.user_id,
        "reply_users": [],
        "reply_users_count": 0,
        "reply_count": 0,
    });
    for file in files {
        let Some(stored) = file["id"]
            .as_str()
            .and_then(|id| workspace.items.files.get_mut(id))
            .and_then(Value::as_object_mut)
        else {
            continue;
        };
        let shares = stored.entry("shares").or_insert_with(|| json!({}));
        if let Some(entries) = shares[visibility][channel].as_array_mut() {
            entries.push(share.clone());
        } else {
            shares[visibility][channel] = json!([share]);
        }
        for name in ["channels", "groups", "ims"] {
            stored.entry(name).or_insert_with(|| json!([]));
        }
        if let Some(ids) = stored[list].as_array_mut()
            && !ids.contains(&json!(channel))
        {
            ids.push(json!(channel));
        }
    }
}

/// What Slack derives from a file's name.
struct FileKind {
    mimetype: &'static str,
    filetype: &'static str,
    pretty_type: &'static str,
}

/// The type Slack gives a file, from the extension of its name.
fn file_kind(name: &str) -> FileKind {
    let extension = name
        .rsplit_once('.')
        .map(|(_, extension)| extension.to_ascii_lowercase())
        .unwrap_or_default();
    let (mimetype, filetype, pretty_type) = match extension.as_str() {
        "txt" | "log" => ("text/plain", "text", "Plain Text"),
        "md" | "markdown" => ("text/plain", "markdown", "Markdown (raw)"),
        "csv" => ("text/csv", "csv", "CSV"),
        "json" => ("application/json", "json", "JSON"),
        "html" | "htm" => ("text/html", "html", "HTML"),
        "xml" => ("text/xml", "xml", "XML"),
        "yaml" | "yml" => ("text/plain", "yaml", "YAML"),
        "py" => ("text/plain", "python", "Python"),
        "rs" => ("text/plain", "rust", "Rust"),
        "js" => ("text/javascript", "javascript", "JavaScript"),
        "ts" => ("text/plain", "typescript", "TypeScript"),
        "sh" => ("text/plain", "shell", "Shell"),
        "diff" | "patch" => ("text/plain", "diff", "Diff"),
        "png" => ("image/png", "png", "PNG"),
        "jpg" | "jpeg" => ("image/jpeg", "jpg", "JPEG"),
        "gif" => ("image/gif", "gif", "GIF"),
        "svg" => ("image/svg+xml", "svg", "SVG"),
        "pdf" => ("application/pdf", "pdf", "PDF"),
        "zip" => ("application/zip", "zip", "Zip"),
        "gz" => ("application/gzip", "gzip", "GZip"),
        _ => ("application/octet-stream", "binary", "Binary"),
    };
    FileKind {
        mimetype,
        filetype,
        pretty_type,
    }
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
