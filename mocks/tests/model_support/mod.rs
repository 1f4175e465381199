//! What the fake model's tests share: one HTTP/1.1 exchange with the fake on a connection of its
//! own (so a test can hang up mid-answer), read whole or frame by frame.

use std::net::SocketAddr;

use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper_util::rt::TokioIo;
use serde_json::Value;
use ski_mocks::model::DEFAULT_API_KEY;

/// One request and its answer, with the connection it came on.
pub struct Exchange {
    pub status: u16,
    pub headers: hyper::HeaderMap,
    body: Incoming,
    connection: tokio::task::JoinHandle<()>,
}

/// Sends `method path` with `headers` and `body` on a new connection to `address`.
pub async fn send(
    address: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: impl Into<Bytes>,
) -> Exchange {
    let stream = tokio::net::TcpStream::connect(address)
        .await
        .expect("connect");
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .expect("handshake");
    let connection = tokio::spawn(async move {
        let _ = connection.await;
    });
    let mut request = hyper::Request::builder()
        .method(method)
        .uri(path)
        .header("host", address.to_string());
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = sender
        .send_request(request.body(Full::new(body.into())).expect("request"))
        .await
        .expect("response");
    let (parts, body) = response.into_parts();
    Exchange {
        status: parts.status.as_u16(),
        headers: parts.headers,
        body,
        connection,
    }
}

/// POSTs `body` as JSON with the default key as OpenAI clients send it.
pub async fn openai(address: SocketAddr, path: &str, body: &Value) -> Exchange {
    let bearer = format!("Bearer {DEFAULT_API_KEY}");
    send(
        address,
        "POST",
        path,
        &[
            ("authorization", &bearer),
            ("content-type", "application/json"),
        ],
        body.to_string(),
    )
    .await
}

/// POSTs `body` to `/v1/messages` with the default key as Anthropic clients send it.
pub async fn anthropic(address: SocketAddr, body: &Value) -> Exchange {
    send(
        address,
        "POST",
        "/v1/messages",
        &[
            ("x-api-key", DEFAULT_API_KEY),
            ("anthropic-version", "2023-06-01"),
            ("content-type", "application/json"),
        ],
        body.to_string(),
    )
    .await
}

impl Exchange {
    /// The next frame of data, `None` at the body's end.
    pub async fn next_data(&mut self) -> Option<Bytes> {
        loop {
            let frame = self.body.frame().await?.expect("a frame");
            if let Ok(data) = frame.into_data() {
                return Some(data);
            }
        }
    }

    /// The whole body as text.
    pub async fn text(self) -> String {
        let body = self.body.collect().await.expect("the body").to_bytes();
        String::from_utf8(body.to_vec()).expect("UTF-8")
    }

    /// The whole body as JSON.
    pub async fn json(self) -> Value {
        serde_json::from_str(&self.text().await).expect("a JSON body")
    }

    /// The whole body's server-sent events as (name, data) pairs, data parsed unless `[DONE]`.
    pub async fn events(self) -> Vec<(Option<String>, Value)> {
        parse_events(&self.text().await)
    }

    /// Closes the connection at once, whatever is still to come.
    pub fn hang_up(self) {
        self.connection.abort();
        drop(self.body);
    }
}

/// Server-sent events as (name, data) pairs; `data: [DONE]` is the string "[DONE]".
pub fn parse_events(text: &str) -> Vec<(Option<String>, Value)> {
    text.split("\n\n")
        .filter(|block| !block.trim().is_empty())
        .map(|block| {
            let mut name = None;
            let mut data = Value::Null;
            for line in block.lines() {
                if let Some(value) = line.strip_prefix("event: ") {
                    name = Some(value.to_string());
                } else if let Some(value) = line.strip_prefix("data: ") {
                    data = serde_json::from_str(value)
                        .unwrap_or_else(|_| Value::String(value.to_string()));
                }
            }
            (name, data)
        })
        .collect()
}
