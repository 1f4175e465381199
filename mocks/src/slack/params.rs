//! A Web API request as the front read it, and its parameters and token, merged from the query
//! string, a form body (with JSON inside fields such as `blocks`), a JSON body, or nothing, as the
//! different clients send them.

use hyper::body::Bytes;
use hyper::header::HeaderMap;
use serde::Serialize;
use serde_json::{Map, Value};

/// Fields whose string values are JSON documents (the Node SDK and forms send them so).
pub const JSON_FIELDS: [&str; 6] = [
    "blocks",
    "attachments",
    "view",
    "files",
    "metadata",
    "unfurls",
];

/// One request as the Web API front read it.
pub struct Request {
    pub method: String,
    pub url: url::Url,
    pub headers: HeaderMap,
    pub body: Bytes,
}

/// The kind of a token, by its prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TokenKind {
    Bot,
    User,
    App,
    Other,
    Missing,
}

impl TokenKind {
    pub fn of(token: Option<&str>) -> TokenKind {
        match token {
            None | Some("") => TokenKind::Missing,
            Some(token) if token.starts_with("xoxb-") => TokenKind::Bot,
            Some(token) if token.starts_with("xoxp-") => TokenKind::User,
            Some(token) if token.starts_with("xapp-") => TokenKind::App,
            Some(_) => TokenKind::Other,
        }
    }
}

/// Parameters of one call, merged (later sources win: query, then body).
#[derive(Debug, Clone, Default)]
pub struct Params {
    pub map: Map<String, Value>,
    pub token: Option<String>,
}

impl Params {
    /// Reads a request's parameters; `Err` is Slack's error code for a body it cannot read.
    pub fn from_request(request: &Request) -> Result<Params, &'static str> {
        let mut map = Map::new();
        for (key, value) in request.url.query_pairs() {
            map.insert(key.into_owned(), Value::String(value.into_owned()));
        }
        let content_type = request
            .headers
            .get("content-type")
            .and_then(|value| value.to_str().ok())
            .unwrap_or("")
            .to_ascii_lowercase();
        let body: &[u8] = &request.body;
        if !body.iter().all(u8::is_ascii_whitespace) {
            if content_type.starts_with("application/json") {
                match serde_json::from_slice::<Value>(body) {
                    Ok(Value::Object(object)) => map.extend(object),
                    Ok(_) | Err(_) => return Err("invalid_json"),
                }
            } else if content_type.starts_with("multipart/form-data") {
                // Multipart is read only by the upload endpoint; a method call with it has no
                // parameters the fake can use.
                return Err("invalid_form_data");
            } else {
                if std::str::from_utf8(body).is_err() {
                    return Err("invalid_form_data");
                }
                for (key, value) in url::form_urlencoded::parse(body) {
                    map.insert(key.into_owned(), Value::String(value.into_owned()));
                }
            }
        }
        for field in JSON_FIELDS {
            if let Some(Value::String(text)) = map.get(field)
                && let Ok(decoded) = serde_json::from_str::<Value>(text)
                && (decoded.is_array() || decoded.is_object())
            {
                map.insert(field.to_string(), decoded);
            }
        }
        let bearer = request
            .headers
            .get("authorization")
            .and_then(|value| value.to_str().ok())
            .and_then(|value| value.strip_prefix("Bearer "))
            .map(|value| value.trim().to_string());
        let token = bearer.or_else(|| map.get("token").and_then(Value::as_str).map(str::to_string));
        map.remove("token");
        Ok(Params { map, token })
    }

    pub fn token_kind(&self) -> TokenKind {
        TokenKind::of(self.token.as_deref())
    }

    /// A string parameter (numbers are given as text).
    pub fn str(&self, key: &str) -> Option<String> {
        match self.map.get(key)? {
            Value::String(text) if !text.is_empty() => Some(text.clone()),
            Value::Number(number) => Some(number.to_string()),
            _ => None,
        }
    }

    /// A required string parameter; `Err` is `invalid_arguments`.
    pub fn required(&self, key: &str) -> Result<String, &'static str> {
        self.str(key).ok_or("invalid_arguments")
    }

    /// A boolean as the clients send it: `true`/`false`, `1`/`0` or JSON.
    pub fn flag(&self, key: &str) -> bool {
        match self.map.get(key) {
            Some(Value::Bool(flag)) => *flag,
            Some(Value::Number(number)) => number.as_i64() == Some(1),
            Some(Value::String(text)) => matches!(text.as_str(), "true" | "1"),
            _ => false,
        }
    }

    pub fn get(&self, key: &str) -> Option<&Value> {
        self.map.get(key).filter(|value| !value.is_null())
    }
}
