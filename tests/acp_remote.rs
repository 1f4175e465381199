//! The remote `/acp` transport of a real `ski acp serve --transport http` on a free loopback
//! port, over real HTTP/2 (cleartext, prior knowledge) and real WebSocket: `initialize` answered
//! 200 with JSON and `Acp-Connection-Id`, other POSTs 202 with their answers on the
//! connection-scoped or session-scoped SSE stream, the status of every refusal the RFD names,
//! DELETE, the WebSocket upgrade on the same endpoint, and `ski acp client connect` doing a
//! prompt turn in both profiles. The framing of an `initialize` exchange and of an SSE event is
//! held by golden files.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::{SinkExt, StreamExt};
use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::client::conn::http2::SendRequest;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioExecutor, TokioIo};
use nix::sys::signal::Signal;
use serde_json::{Value, json};
use ski::transport::child::{self, Child, ChildSpec};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message as Frame;

const SKI: &str = env!("CARGO_BIN_EXE_ski");

const SNAPSHOTS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/golden/acp_http/snapshots");

/// How long any wait may take before the test fails.
const PATIENCE: Duration = Duration::from_secs(60);

async fn within<T>(what: &str, fut: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(PATIENCE, fut)
        .await
        .unwrap_or_else(|_| panic!("timed out waiting for {what}"))
}

/// A running `ski acp serve --transport http` on a free loopback port.
struct Served {
    agent: Child,
    url: String,
}

impl Served {
    async fn start(args: &[&str]) -> Self {
        let mut all = vec![
            "acp",
            "serve",
            "--transport",
            "http",
            "--listen",
            "127.0.0.1:0",
        ];
        all.extend(args);
        let mut agent =
            child::spawn(ChildSpec::new("agent", SKI).args(all)).expect("spawn ski acp serve");
        let url = crate::acp_serve_support::listening_url(&mut agent, PATIENCE).await;
        assert!(
            url.starts_with("http://127.0.0.1:") && url.ends_with("/acp"),
            "{url}"
        );
        Self { agent, url }
    }

    fn address(&self) -> &str {
        self.url
            .trim_start_matches("http://")
            .trim_end_matches("/acp")
    }

    /// An HTTP/2 connection to the server.
    async fn h2(&self) -> H2 {
        let tcp = TcpStream::connect(self.address()).await.expect("connect");
        let (send, connection) = hyper::client::conn::http2::handshake::<_, _, Full<Bytes>>(
            TokioExecutor::new(),
            TokioIo::new(tcp),
        )
        .await
        .expect("HTTP/2 handshake");
        tokio::spawn(connection);
        H2 {
            send,
            url: self.url.clone(),
        }
    }

    async fn stop(self) {
        self.agent
            .signal_group(Signal::SIGTERM)
            .expect("signal the agent");
        let status = within("the agent to stop on SIGTERM", self.agent.wait())
            .await
            .expect("exit status");
        assert_eq!(status.code(), Some(0));
        assert!(self.agent.shutdown().await.expect("teardown").group_gone);
    }
}

/// A client over one HTTP/2 connection.
struct H2 {
    send: SendRequest<Full<Bytes>>,
    url: String,
}

impl H2 {
    async fn request(
        &self,
        method: Method,
        headers: &[(&str, &str)],
        body: &str,
    ) -> Response<Incoming> {
        let mut request = Request::builder().method(method).uri(&self.url);
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let request = request
            .body(Full::new(Bytes::from(body.to_owned())))
            .unwrap();
        let mut send = self.send.clone();
        within("a response", async {
            send.ready().await.expect("connection ready");
            send.send_request(request).await.expect("response")
        })
        .await
    }

    /// POSTs a JSON message with the given headers besides the content type.
    async fn post(&self, headers: &[(&str, &str)], message: &Value) -> Response<Incoming> {
        let mut all = vec![("content-type", "application/json")];
        all.extend_from_slice(headers);
        self.request(Method::POST, &all, &message.to_string()).await
    }

    /// POSTs a message that must be accepted with 202 and an empty body.
    async fn accepted(&self, headers: &[(&str, &str)], message: &Value) {
        let response = self.post(headers, message).await;
        let status = response.status();
        let body = text(response).await;
        assert_eq!(status, StatusCode::ACCEPTED, "{message}: {body}");
        assert!(body.is_empty(), "{body}");
    }

    /// `initialize`, answered 200: the connection id and the answer.
    async fn initialize(&self) -> (String, Value) {
        let response = self
            .post(
                &[],
                &json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}),
            )
            .await;
        assert_eq!(response.status(), StatusCode::OK);
        let id = response
            .headers()
            .get("acp-connection-id")
            .expect("Acp-Connection-Id")
            .to_str()
            .unwrap()
            .to_owned();
        (id, serde_json::from_str(&text(response).await).unwrap())
    }

    /// Opens an SSE stream: the connection's, or with `session` that session's.
    async fn stream(&self, connection: &str, session: Option<&str>) -> Events {
        let mut headers = vec![
            ("accept", "text/event-stream"),
            ("acp-connection-id", connection),
        ];
        if let Some(session) = session {
            headers.push(("acp-session-id", session));
        }
        let response = self.request(Method::GET, &headers, "").await;
        assert_eq!(response.status(), StatusCode::OK);
        assert_eq!(response.headers()["content-type"], "text/event-stream");
        Events {
            body: response.into_body(),
            buffer: String::new(),
        }
    }

    async fn status(&self, method: Method, headers: &[(&str, &str)], body: &str) -> StatusCode {
        self.request(method, headers, body).await.status()
    }
}

async fn text(response: Response<Incoming>) -> String {
    let bytes = within("a body", response.into_body().collect())
        .await
        .expect("body")
        .to_bytes();
    String::from_utf8(bytes.to_vec()).expect("UTF-8 body")
}

/// An SSE stream read event by event.
struct Events {
    body: Incoming,
    buffer: String,
}

impl Events {
    /// The next event as it came on the wire (`data: ...` lines and the blank line), or `None`
    /// when the stream ended.
    async fn next_raw(&mut self) -> Option<String> {
        loop {
            if let Some(end) = self.buffer.find("\n\n") {
                let event = self.buffer[..end + 2].to_owned();
                self.buffer.drain(..end + 2);
                return Some(event);
            }
            let frame = within("an SSE event", self.body.frame()).await?;
            if let Ok(data) = frame.expect("stream frame").into_data() {
                self.buffer.push_str(std::str::from_utf8(&data).unwrap());
            }
        }
    }

    /// The next event's JSON message.
    async fn next(&mut self) -> Value {
        let event = self
            .next_raw()
            .await
            .expect("an event before the stream ended");
        let data: Vec<&str> = event
            .lines()
            .filter_map(|line| line.strip_prefix("data: "))
            .collect();
        serde_json::from_str(&data.join("\n")).expect("JSON event")
    }

    /// Events up to and including the response with `id`.
    async fn until_response(&mut self, id: i64) -> Vec<Value> {
        let mut seen = Vec::new();
        loop {
            let event = self.next().await;
            let done = event.get("method").is_none() && event["id"] == id;
            seen.push(event);
            if done {
                return seen;
            }
        }
    }
}

fn session_new(id: i64) -> Value {
    json!({"jsonrpc":"2.0","id":id,"method":"session/new","params":{"cwd": std::env::temp_dir(),"mcpServers":[]}})
}

fn prompt(id: i64, session: &str, text: &str) -> Value {
    json!({"jsonrpc":"2.0","id":id,"method":"session/prompt","params":{"sessionId":session,"prompt":[{"type":"text","text":text}]}})
}

/// A connection with its stream open and one session: (client, connection id, connection
/// stream, session id).
async fn with_session(served: &Served) -> (H2, String, Events, String) {
    let client = served.h2().await;
    let (connection, _) = client.initialize().await;
    let mut events = client.stream(&connection, None).await;
    client
        .accepted(&[("acp-connection-id", &connection)], &session_new(2))
        .await;
    let answer = events.next().await;
    assert_eq!(answer["id"], 2, "{answer}");
    let session = answer["result"]["sessionId"].as_str().unwrap().to_owned();
    (client, connection, events, session)
}

#[tokio::test]
async fn initialize_is_answered_200_with_json_and_the_connection_id() {
    let served = Served::start(&[]).await;
    let client = served.h2().await;
    let request = json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}});
    let response = client.post(&[], &request).await;
    assert_eq!(response.version(), hyper::Version::HTTP_2);
    let status = response.status();
    let headers = response.headers().clone();
    let connection = headers["acp-connection-id"].to_str().unwrap().to_owned();
    assert!(uuid_like(&connection), "{connection}");
    let answer: Value = serde_json::from_str(&text(response).await).unwrap();
    let exchange = json!({
        "request": {"method": "POST", "headers": {"content-type": "application/json"}, "body": request},
        "response": {
            "status": status.as_u16(),
            "headers": {
                "content-type": headers["content-type"].to_str().unwrap(),
                "acp-connection-id": "[connection id]",
            },
            "body": answer,
        },
    });
    insta::with_settings!({ snapshot_path => SNAPSHOTS, prepend_module_to_snapshot => false, omit_expression => true }, {
        // The framing is what this file holds; the answer's content is held by golden/acp.
        insta::assert_json_snapshot!("initialize_exchange", exchange, {
            ".response.body.result.agentCapabilities" => "[agent capabilities]",
            ".response.body.result.authMethods" => "[auth methods]",
            ".response.body.result.agentInfo" => "[agent info]",
        });
    });
    served.stop().await;
}

fn uuid_like(text: &str) -> bool {
    text.len() == 36 && text.chars().all(|c| c.is_ascii_hexdigit() || c == '-')
}

#[tokio::test]
async fn a_post_is_accepted_202_and_its_answer_arrives_on_the_connection_stream() {
    let served = Served::start(&["--permission-mode", "disabled"]).await;
    let client = served.h2().await;
    let (connection, _) = client.initialize().await;
    let mut events = client.stream(&connection, None).await;
    client
        .accepted(&[("acp-connection-id", &connection)], &session_new(2))
        .await;
    let answer = events.next().await;
    assert_eq!(answer["id"], 2, "{answer}");
    let session = answer["result"]["sessionId"].as_str().unwrap().to_owned();
    assert!(session.starts_with("sess_"), "{answer}");
    let mut stream = client.stream(&connection, Some(&session)).await;
    let scoped = [
        ("acp-connection-id", connection.as_str()),
        ("acp-session-id", session.as_str()),
    ];
    client
        .accepted(&scoped, &prompt(3, &session, "framed"))
        .await;
    let raw = loop {
        let raw = stream.next_raw().await.expect("the prompt's answer");
        if raw.starts_with("data: {\"jsonrpc\":\"2.0\",\"id\":3,") {
            break raw;
        }
    };
    // The wire form of one event: one data line, then a blank line.
    insta::with_settings!({ snapshot_path => SNAPSHOTS, prepend_module_to_snapshot => false, omit_expression => true }, {
        insta::assert_snapshot!("sse_event_prompt_answer", raw);
    });
    served.stop().await;
}

#[tokio::test]
async fn a_prompt_turn_streams_on_the_session_stream_and_permission_answers_are_posted() {
    let served = Served::start(&[]).await;
    let (client, connection, _events, session) = with_session(&served).await;
    let mut stream = client.stream(&connection, Some(&session)).await;
    let scoped = [
        ("acp-connection-id", connection.as_str()),
        ("acp-session-id", session.as_str()),
        ("acp-protocol-version", "1"),
    ];
    client
        .accepted(&scoped, &prompt(3, &session, "over http"))
        .await;
    // The default agent asks permission first, on the session's stream.
    let ask = loop {
        let event = stream.next().await;
        if event["method"] == "session/request_permission" {
            break event;
        }
        assert_eq!(event["params"]["sessionId"], session.as_str(), "{event}");
    };
    assert_eq!(ask["params"]["sessionId"], session.as_str());
    let answer = json!({"jsonrpc":"2.0","id":ask["id"],"result":{"outcome":{"outcome":"selected","optionId":"allow_once"}}});
    // A response to a session's request is session-scoped: without Acp-Session-Id it is 400.
    let unscoped = client
        .post(&[("acp-connection-id", &connection)], &answer)
        .await;
    assert_eq!(unscoped.status(), StatusCode::BAD_REQUEST);
    client.accepted(&scoped, &answer).await;
    let turn = stream.until_response(3).await;
    let reply = turn.last().unwrap();
    assert_eq!(reply["result"]["stopReason"], "end_turn", "{reply}");
    let echoed = turn.iter().any(|event| {
        event["params"]["update"]["sessionUpdate"] == "agent_message_chunk"
            && event["params"]["update"]["content"]["text"] == "over http"
    });
    assert!(echoed, "{turn:?}");
    assert!(
        turn.iter()
            .filter(|event| event.get("method").is_some())
            .all(|event| event["params"]["sessionId"] == session.as_str()),
        "{turn:?}"
    );
    served.stop().await;
}

#[tokio::test]
async fn a_session_is_resumed_on_a_new_connection_with_session_load() {
    let served = Served::start(&["--permission-mode", "disabled"]).await;
    let (first, connection, _events, session) = with_session(&served).await;
    let conn = [("acp-connection-id", connection.as_str())];
    assert_eq!(
        first.status(Method::DELETE, &conn, "").await,
        StatusCode::ACCEPTED
    );
    // The RFD's resume flow: a new connection opens the session's stream before session/load.
    let client = served.h2().await;
    let (connection, _) = client.initialize().await;
    let mut events = client.stream(&connection, None).await;
    let mut stream = client.stream(&connection, Some(&session)).await;
    let load = json!({"jsonrpc":"2.0","id":2,"method":"session/load","params":{"sessionId":session,"cwd":std::env::temp_dir(),"mcpServers":[]}});
    let scoped = [
        ("acp-connection-id", connection.as_str()),
        ("acp-session-id", session.as_str()),
    ];
    client.accepted(&scoped, &load).await;
    // The answer to session/load comes on the connection's stream.
    let answer = events.next().await;
    assert_eq!(answer["id"], 2, "{answer}");
    assert!(answer.get("result").is_some(), "{answer}");
    // The session works on the new connection: a turn's answer comes on its stream.
    client
        .accepted(&scoped, &prompt(3, &session, "resumed"))
        .await;
    let turn = stream.until_response(3).await;
    assert_eq!(turn.last().unwrap()["result"]["stopReason"], "end_turn");
    served.stop().await;
}

/// A request that must be refused: what it is, its method, headers and body, and the status.
type Case<'a> = (&'a str, Method, Vec<(&'a str, &'a str)>, String, StatusCode);

#[tokio::test]
async fn unknown_missing_and_malformed_requests_get_the_status_the_rfd_names() {
    let served = Served::start(&[]).await;
    let (client, connection, _events, session) = with_session(&served).await;
    let json = ("content-type", "application/json");
    let conn = ("acp-connection-id", connection.as_str());
    let sse = ("accept", "text/event-stream");
    let cases: Vec<Case<'_>> = vec![
        (
            "POST without a connection, not initialize",
            Method::POST,
            vec![json],
            session_new(5).to_string(),
            StatusCode::BAD_REQUEST,
        ),
        (
            "POST with an unknown connection",
            Method::POST,
            vec![json, ("acp-connection-id", "nope")],
            session_new(5).to_string(),
            StatusCode::NOT_FOUND,
        ),
        (
            "session-scoped POST without Acp-Session-Id",
            Method::POST,
            vec![json, conn],
            prompt(5, &session, "x").to_string(),
            StatusCode::BAD_REQUEST,
        ),
        (
            "Acp-Session-Id not the message's session",
            Method::POST,
            vec![json, conn, ("acp-session-id", "sess_other")],
            prompt(5, &session, "x").to_string(),
            StatusCode::BAD_REQUEST,
        ),
        (
            "POST for an unknown session",
            Method::POST,
            vec![json, conn, ("acp-session-id", "sess_nope")],
            prompt(5, "sess_nope", "x").to_string(),
            StatusCode::NOT_FOUND,
        ),
        (
            "a batch",
            Method::POST,
            vec![json, conn],
            format!("[{}]", session_new(5)),
            StatusCode::NOT_IMPLEMENTED,
        ),
        (
            "not JSON",
            Method::POST,
            vec![json, conn],
            "{".to_owned(),
            StatusCode::BAD_REQUEST,
        ),
        (
            "not application/json",
            Method::POST,
            vec![("content-type", "text/plain"), conn],
            session_new(5).to_string(),
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
        ),
        (
            "a protocol version not negotiated",
            Method::POST,
            vec![json, conn, ("acp-protocol-version", "7")],
            session_new(5).to_string(),
            StatusCode::BAD_REQUEST,
        ),
        (
            "GET without text/event-stream",
            Method::GET,
            vec![conn],
            String::new(),
            StatusCode::NOT_ACCEPTABLE,
        ),
        (
            "GET without a connection",
            Method::GET,
            vec![sse],
            String::new(),
            StatusCode::BAD_REQUEST,
        ),
        (
            "GET with an unknown connection",
            Method::GET,
            vec![sse, ("acp-connection-id", "nope")],
            String::new(),
            StatusCode::NOT_FOUND,
        ),
        (
            "GET with an unknown session",
            Method::GET,
            vec![sse, conn, ("acp-session-id", "sess_nope")],
            String::new(),
            StatusCode::NOT_FOUND,
        ),
        (
            "DELETE without a connection",
            Method::DELETE,
            vec![],
            String::new(),
            StatusCode::BAD_REQUEST,
        ),
        (
            "DELETE of an unknown connection",
            Method::DELETE,
            vec![("acp-connection-id", "nope")],
            String::new(),
            StatusCode::NOT_FOUND,
        ),
        (
            "another method",
            Method::PUT,
            vec![conn],
            String::new(),
            StatusCode::METHOD_NOT_ALLOWED,
        ),
    ];
    for (what, method, headers, body, expected) in cases {
        assert_eq!(
            client.status(method, &headers, &body).await,
            expected,
            "{what}"
        );
    }
    // The connection still works after all of that.
    client
        .accepted(&[conn, ("acp-protocol-version", "1")], &session_new(6))
        .await;
    served.stop().await;
}

#[tokio::test]
async fn delete_ends_the_connection_and_its_streams() {
    let served = Served::start(&[]).await;
    let (client, connection, mut events, _session) = with_session(&served).await;
    let conn = [("acp-connection-id", connection.as_str())];
    assert_eq!(
        client.status(Method::DELETE, &conn, "").await,
        StatusCode::ACCEPTED
    );
    assert_eq!(
        events.next_raw().await,
        None,
        "the connection's stream ends"
    );
    let after = client.post(&conn, &session_new(7)).await;
    assert_eq!(after.status(), StatusCode::NOT_FOUND);
    assert_eq!(
        client.status(Method::DELETE, &conn, "").await,
        StatusCode::NOT_FOUND
    );
    served.stop().await;
}

#[tokio::test]
async fn the_websocket_upgrade_names_the_connection_and_ignores_binary_frames() {
    let served = Served::start(&[]).await;
    let url = served.url.replacen("http://", "ws://", 1);
    let (mut socket, response) = within(
        "the upgrade",
        Box::pin(tokio_tungstenite::connect_async(url.as_str())),
    )
    .await
    .expect("upgrade");
    let connection = response.headers()["acp-connection-id"].to_str().unwrap();
    assert!(uuid_like(connection), "{connection}");
    socket
        .send(Frame::Binary(Bytes::from_static(b"{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"initialize\",\"params\":{\"protocolVersion\":1}}")))
        .await
        .unwrap();
    let initialize = json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}});
    socket
        .send(Frame::text(initialize.to_string()))
        .await
        .unwrap();
    // The first message back answers the text frame; the binary one got nothing.
    let answer = loop {
        match within("the initialize answer", socket.next())
            .await
            .expect("open")
            .unwrap()
        {
            Frame::Text(text) => break serde_json::from_str::<Value>(&text).unwrap(),
            _ => continue,
        }
    };
    assert_eq!(answer["id"], 1, "{answer}");
    assert_eq!(answer["result"]["protocolVersion"], 1);
    socket.close(None).await.unwrap();
    served.stop().await;
}

fn client_turn(url: &str, profile: &str) -> std::process::Output {
    std::process::Command::new(SKI)
        .args([
            "acp",
            "client",
            "connect",
            "--transport",
            "http",
            "--endpoint",
            url,
        ])
        .args([
            "--profile",
            profile,
            "--prompt",
            "hello remote",
            "--prompt",
            "again",
        ])
        .env_remove("RUST_LOG")
        .output()
        .expect("run ski acp client connect")
}

#[tokio::test]
async fn the_client_does_prompt_turns_against_serve_in_both_profiles() {
    let served = Served::start(&[]).await;
    for profile in ["http", "ws"] {
        let url = served.url.clone();
        let run = tokio::task::spawn_blocking(move || client_turn(&url, profile));
        let output = within("the client", run).await.unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(
            output.status.success(),
            "{profile}: {stdout}\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
        assert_eq!(
            stdout, "hello remote\nstopReason: end_turn\nagain\nstopReason: end_turn\n",
            "{profile}"
        );
    }
    served.stop().await;
}

/// What the proxy saw of one request: its method, `Cookie` and `Acp-Protocol-Version`.
type Seen = (Method, Option<String>, Option<String>);

/// The cookie the proxy sets on every answer.
const AFFINITY: &str = "affinity=node-7";

/// A proxy in front of `upstream` (HTTP/2 both ways) that sets [`AFFINITY`] on every answer and
/// records every request, in order.
async fn cookie_proxy(upstream: String) -> (String, Arc<Mutex<Vec<Seen>>>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let record = seen.clone();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let tcp = TcpStream::connect(&upstream).await.unwrap();
            let (send, connection) = hyper::client::conn::http2::handshake::<_, _, Full<Bytes>>(
                TokioExecutor::new(),
                TokioIo::new(tcp),
            )
            .await
            .unwrap();
            tokio::spawn(connection);
            let record = record.clone();
            let service = hyper::service::service_fn(move |request: Request<Incoming>| {
                let mut send = send.clone();
                let record = record.clone();
                async move {
                    let header = |name: &str| {
                        request
                            .headers()
                            .get(name)
                            .map(|value| value.to_str().unwrap().to_owned())
                    };
                    let seen = (
                        request.method().clone(),
                        header("cookie"),
                        header("acp-protocol-version"),
                    );
                    record.lock().unwrap().push(seen);
                    let (parts, body) = request.into_parts();
                    let body = body.collect().await?.to_bytes();
                    let forwarded = Request::from_parts(parts, Full::new(body));
                    send.ready().await?;
                    let mut response = send.send_request(forwarded).await?;
                    response
                        .headers_mut()
                        .insert("set-cookie", format!("{AFFINITY}; Path=/").parse().unwrap());
                    Ok::<_, hyper::Error>(response)
                }
            });
            tokio::spawn(async move {
                let builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
                let _ = builder
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    (format!("http://{address}/acp"), seen)
}

#[tokio::test]
async fn the_streamable_client_sends_cookies_and_the_protocol_version_on_every_later_request() {
    let served = Served::start(&[]).await;
    let (url, seen) = cookie_proxy(served.address().to_owned()).await;
    let run = tokio::task::spawn_blocking(move || client_turn(&url, "http"));
    let output = within("the client", run).await.unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let seen = seen.lock().unwrap().clone();
    // initialize, the connection's stream, session/new, the session's stream, two prompts,
    // permission answers, DELETE: all but the first carry the cookie and the negotiated version.
    assert!(seen.len() >= 6, "{seen:?}");
    assert_eq!(seen[0], (Method::POST, None, None), "{seen:?}");
    assert!(
        seen[1..].iter().all(|(_, cookie, version)| {
            cookie.as_deref() == Some(AFFINITY) && version.as_deref() == Some("1")
        }),
        "{seen:?}"
    );
    // The DELETE that ends the connection is among them (not always last to arrive: the
    // client's other connections, such as a stream's GET, may reach the proxy after it).
    assert!(
        seen.iter().any(|(method, _, _)| *method == Method::DELETE),
        "{seen:?}"
    );
    served.stop().await;
}

#[tokio::test]
async fn a_body_over_the_message_limit_is_refused_413() {
    let served = Served::start(&[]).await;
    let client = served.h2().await;
    let (connection, _) = client.initialize().await;
    let huge = format!(
        "{{\"jsonrpc\":\"2.0\",\"method\":\"x\",\"params\":\"{}\"}}",
        "a".repeat(33 * 1024 * 1024)
    );
    let status = client
        .status(
            Method::POST,
            &[
                ("content-type", "application/json"),
                ("acp-connection-id", &connection),
            ],
            &huge,
        )
        .await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
    served.stop().await;
}
