//! The fake Slack's Web API parameter parser (query string, form and JSON bodies, JSON inside
//! form fields, the token from the header or the body).
//!
//! Input: one flag byte (bits 0-2 choose the content type, bit 3 adds an `Authorization` header
//! whose value is the first line), then the query string up to the next LF, then the body.

use std::path::Path;

use hyper::body::Bytes;
use hyper::header::{AUTHORIZATION, CONTENT_TYPE, HeaderMap, HeaderValue};
use serde_json::Value;
use ski_mocks::slack::web_params::{JSON_FIELDS, Params, Request};

use super::{Target, message_class};
use crate::corpus::{files_under, snapshot_body};

pub const TARGET: Target = Target {
    name: "slack-params",
    about: "fake Slack's Web API parameter parser (form and JSON bodies)",
    run,
    seeds,
    words: &[
        b"token=",
        b"xoxb-",
        b"xoxp-",
        b"xapp-",
        b"Bearer ",
        b"channel=",
        b"text=",
        b"blocks=",
        b"attachments=",
        b"view=",
        b"metadata=",
        b"unfurls=",
        b"files=",
        b"ts=",
        b"thread_ts=",
        b"\"blocks\"",
        b"\"token\"",
        b"%5B%7B%7D%5D",
        b"%7B%22",
    ],
};

const CONTENT_TYPES: [&str; 8] = [
    "application/x-www-form-urlencoded",
    "application/json",
    "application/json; charset=utf-8",
    "multipart/form-data; boundary=x",
    "",
    "text/plain",
    "APPLICATION/JSON",
    "application/x-www-form-urlencoded; charset=utf-8",
];

fn run(data: &[u8]) -> u64 {
    let Some((flags, mut rest)) = data.split_first() else {
        return 0;
    };
    let mut headers = HeaderMap::new();
    let content_type = CONTENT_TYPES[usize::from(flags & 7)];
    if !content_type.is_empty() {
        headers.insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    }
    if flags & 8 != 0 {
        let (line, tail) = split_line(rest);
        rest = tail;
        if let Ok(value) = HeaderValue::from_bytes(line) {
            headers.insert(AUTHORIZATION, value);
        }
    }
    let (query, body) = split_line(rest);
    let mut url = url_for("chat.postMessage");
    url.set_query(Some(&String::from_utf8_lossy(query)));
    let request = Request {
        method: "POST".to_owned(),
        url,
        headers,
        body: Bytes::copy_from_slice(body),
    };
    let params = match Params::from_request(&request) {
        Ok(params) => params,
        Err(code) => return message_class("error", code),
    };
    assert!(
        !params.map.contains_key("token"),
        "the token stayed among the parameters"
    );
    for field in JSON_FIELDS {
        if let Some(Value::String(text)) = params.map.get(field) {
            let decoded = serde_json::from_str::<Value>(text);
            assert!(
                !decoded.is_ok_and(|value| value.is_array() || value.is_object()),
                "{field} holds JSON text that was not decoded"
            );
        }
    }
    let keys: Vec<String> = params.map.keys().cloned().collect();
    for key in &keys {
        let _ = params.str(key);
        let _ = params.required(key);
        let _ = params.flag(key);
        let _ = params.get(key);
    }
    let decoded: Vec<&str> = JSON_FIELDS
        .into_iter()
        .filter(|field| {
            params
                .map
                .get(*field)
                .is_some_and(|v| v.is_array() || v.is_object())
        })
        .collect();
    message_class(
        &format!("{:?}/{}", params.token_kind(), keys.len().min(4)),
        &decoded.join(","),
    )
}

fn url_for(method: &str) -> url::Url {
    match url::Url::parse(&format!("http://127.0.0.1/api/{method}")) {
        Ok(url) => url,
        Err(error) => panic!("a fixed URL does not parse: {error}"),
    }
}

fn split_line(bytes: &[u8]) -> (&[u8], &[u8]) {
    match bytes.iter().position(|b| *b == b'\n') {
        Some(at) => (&bytes[..at], &bytes[at + 1..]),
        None => (bytes, &[]),
    }
}

fn seeds(root: &Path) -> Vec<Vec<u8>> {
    let mut seeds = vec![
        b"\x00token=xoxb-1&channel=C1\ntext=hello&blocks=%5B%7B%22type%22%3A%22divider%22%7D%5D"
            .to_vec(),
        b"\x08Bearer xoxb-1\nchannel=C1\n{\"text\":\"hi\",\"view\":\"{\\\"type\\\":\\\"modal\\\"}\"}"
            .to_vec(),
        b"\x09Bearer xapp-1\n\n{\"channel\":\"C1\",\"ts\":1700000000.000001,\"unfurls\":\"{}\"}"
            .to_vec(),
        b"\x03\n--x\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\nb\r\n--x--".to_vec(),
    ];
    // Bodies the fake sends are what a client echoes back in its calls: JSON objects with
    // blocks, views and metadata, sent as JSON and as a form.
    for path in files_under(&root.join("golden").join("slack"), ".snap") {
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        let Ok(Value::Object(map)) = serde_json::from_str::<Value>(snapshot_body(&text)) else {
            continue;
        };
        let mut json = vec![0x09];
        json.extend_from_slice(b"Bearer xoxb-fuzz\n\n");
        json.extend_from_slice(serde_json::to_string(&map).unwrap_or_default().as_bytes());
        seeds.push(json);
        let mut form = url::form_urlencoded::Serializer::new(String::new());
        for (key, value) in map.iter().take(12) {
            let text = match value {
                Value::String(text) => text.clone(),
                other => other.to_string(),
            };
            form.append_pair(key, &text);
        }
        let mut body = vec![0x00, b'\n'];
        body.extend_from_slice(form.finish().as_bytes());
        seeds.push(body);
    }
    seeds
}
