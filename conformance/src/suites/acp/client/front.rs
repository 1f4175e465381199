//! The recording `/acp` front of the remote client rows (ACP-HTTP-018 to -027): the client under
//! test is pointed at a loopback port of the runner, behind which `ski-mock-agent --listen`
//! serves ACP's remote endpoint (Streamable HTTP and the WebSocket upgrade) with a script the
//! check writes. The runner's [`super::relay`] sits between the two: it records every HTTP
//! request the client makes (HTTP version, method, headers, body), every answer's status and
//! headers, and every WebSocket frame the client sends, and it sets the front's cookies.
//!
//! # Why a relay of the runner's own before ski's server
//!
//! The judge must see the wire as the client wrote it, whatever library serves the endpoint.
//! Hooking ski's `ski::acp::remote::server` would record what hyper made of the request (a
//! header list already merged, an HTTP version already negotiated) and would put the judge inside
//! the product the runner otherwise never links; and a server written again in the runner would
//! be a second implementation of the RFD's routing whose faults the client rows would inherit.
//! So the endpoint's behaviour is the one the ACP-HTTP agent rows (001 to 017) already hold ski's
//! server to, served by the mock agent's process as any other client row's agent is, and the
//! recording is the runner's own: HTTP/2 frames and HPACK blocks and HTTP/1.1 heads decoded by the
//! relay, byte by byte. The endpoint answers as the RFD says (`415`, `406`, `400`, `404` for the
//! faults the client rows look for), so a client that breaks a requirement meets the refusal a
//! strict server gives, and the row judges the request the relay recorded.
//!
//! # Cookies
//!
//! The front sets [`AFFINITY`] on the answer to the `initialize` POST and on every `101`, and
//! [`LATER`] on the answer to the POST of `session/new`: a client must return each on every request
//! it makes after the answer that set it (the RFD: for the duration of the connection).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use serde_json::Value;
use ski::transport::child::{Child, ChildSpec, OutputStream};

use super::relay::{Head, Hooks, Place, Relay, Version, WsFrame};
use crate::check::CheckError;
use crate::context::Ctx;
use crate::vocabulary::acp;

/// The cookie the front sets when a connection begins (the `initialize` answer, a `101`).
pub const AFFINITY: &str = "ski-front-affinity";

/// The cookie the front sets on the answer to `session/new`'s POST.
pub const LATER: &str = "ski-front-later";

/// One HTTP request the client made, as the relay saw it.
#[derive(Debug, Clone)]
pub struct Exchange {
    /// Where it came.
    pub place: Place,
    /// Its HTTP version.
    pub version: Version,
    /// Its order among every request and cookie of the front (counting up).
    pub seq: u64,
    /// Its head.
    pub head: Head,
    /// Its body, once it was whole.
    pub body: Option<Vec<u8>>,
    /// The answer's head.
    pub answer: Option<Head>,
    /// The answer's body, once it ended.
    pub answer_body: Option<Vec<u8>>,
    /// The WebSocket frames the client sent after this upgrade.
    pub frames: Vec<WsFrame>,
}

impl Exchange {
    /// The body as a JSON value.
    pub fn json(&self) -> Option<Value> {
        serde_json::from_slice(self.body.as_deref()?).ok()
    }

    /// The JSON-RPC method of the body.
    pub fn rpc_method(&self) -> Option<String> {
        Some(self.json()?.get("method")?.as_str()?.to_owned())
    }

    /// Whether this is a WebSocket upgrade.
    pub fn is_upgrade(&self) -> bool {
        self.head
            .get("upgrade")
            .is_some_and(|value| value.eq_ignore_ascii_case("websocket"))
    }

    /// One line for an Actual.
    pub fn describe(&self) -> String {
        let version = match self.version {
            Version::Http1 => "HTTP/1.1",
            Version::Http2 => "HTTP/2",
        };
        let body = self
            .body
            .as_deref()
            .map(|body| {
                super::super::connection::clip(&String::from_utf8_lossy(body), 160).to_string()
            })
            .unwrap_or_default();
        let fields = self
            .head
            .fields
            .iter()
            .map(|(name, value)| format!("{name}: {value}"))
            .collect::<Vec<_>>()
            .join(", ");
        let status = self
            .answer
            .as_ref()
            .map_or_else(|| "no answer".to_owned(), |a| a.status.to_string());
        format!(
            "#{} tcp {} {version} {} {} [{fields}] {body} -> {status}",
            self.seq, self.place.tcp, self.head.method, self.head.path
        )
    }
}

/// A cookie the front set: `name=value`, and the order of the answer that set it.
#[derive(Debug, Clone)]
pub struct SetCookie {
    /// The cookie's name.
    pub name: &'static str,
    /// Its value.
    pub value: String,
    /// The order of the answer that set it: requests after it must return it.
    pub seq: u64,
}

#[derive(Debug, Default)]
struct State {
    exchanges: Vec<Exchange>,
    by_place: HashMap<(usize, u32), usize>,
    seq: u64,
    set: Vec<SetCookie>,
    values: HashMap<&'static str, String>,
}

/// What the front recorded, shared with the relay's tasks.
#[derive(Debug, Default)]
struct Recorder {
    state: Mutex<State>,
}

impl Recorder {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Hooks for Recorder {
    fn request(&self, place: Place, version: Version, head: &mut Head) {
        let mut state = self.lock();
        state.seq += 1;
        let seq = state.seq;
        let index = state.exchanges.len();
        state.exchanges.push(Exchange {
            place,
            version,
            seq,
            head: head.clone(),
            body: None,
            answer: None,
            answer_body: None,
            frames: Vec::new(),
        });
        state.by_place.insert((place.tcp, place.stream), index);
    }

    fn body(&self, place: Place, body: &[u8]) {
        let mut state = self.lock();
        if let Some(&index) = state.by_place.get(&(place.tcp, place.stream)) {
            state.exchanges[index].body = Some(body.to_vec());
        }
    }

    fn answer(&self, place: Place, head: &mut Head) {
        let mut state = self.lock();
        let Some(&index) = state.by_place.get(&(place.tcp, place.stream)) else {
            return;
        };
        let exchange = &state.exchanges[index];
        let method = exchange.rpc_method();
        let cookie = match (
            exchange.head.method.as_str(),
            head.status,
            method.as_deref(),
        ) {
            ("GET", 101, _) | ("POST", 200, Some("initialize")) => Some(AFFINITY),
            ("POST", 200 | 202, Some("session/new")) => Some(LATER),
            _ => None,
        };
        state.exchanges[index].answer = Some(head.clone());
        if let Some(name) = cookie {
            state.seq += 1;
            let seq = state.seq;
            let count = state.set.len();
            let value = state
                .values
                .entry(name)
                .or_insert_with(|| cookie_value(count))
                .clone();
            head.fields.push((
                "set-cookie".to_owned(),
                format!("{name}={value}; Path=/; HttpOnly"),
            ));
            state.set.push(SetCookie { name, value, seq });
        }
    }

    fn answer_body(&self, place: Place, body: &[u8]) {
        let mut state = self.lock();
        if let Some(&index) = state.by_place.get(&(place.tcp, place.stream)) {
            state.exchanges[index].answer_body = Some(body.to_vec());
        }
    }

    fn ws_frame(&self, place: Place, frame: &mut WsFrame) {
        let mut state = self.lock();
        if let Some(&index) = state.by_place.get(&(place.tcp, place.stream)) {
            state.exchanges[index].frames.push(frame.clone());
        }
    }
}

/// A cookie value nobody could guess before the front set it.
fn cookie_value(salt: usize) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    format!("v{:x}{:x}{salt}", std::process::id(), nanos)
}

/// A running front: the mock agent's endpoint and the relay before it. Dropping it stops both.
#[derive(Debug)]
pub struct Front {
    /// The URL the client under test is given, `http://127.0.0.1:PORT/acp`.
    pub url: String,
    recorder: Arc<Recorder>,
    _relay: Relay,
    _agent: Child,
}

impl Front {
    /// Starts `ski-mock-agent --listen` with `script` (TOML) and the relay before it.
    pub async fn start(ctx: &Ctx, name: &str, script: &str) -> Result<Front, CheckError> {
        let path = ctx.temp_dir().join(format!("{name}.toml"));
        std::fs::write(&path, script)?;
        let program = match ctx.setting(&acp::MOCK_AGENT)? {
            Some(program) => std::path::PathBuf::from(program),
            None => ctx.bin("ski-mock-agent"),
        };
        let argv = [
            program.display().to_string(),
            "--script".to_owned(),
            path.display().to_string(),
            "--listen".to_owned(),
            "127.0.0.1:0".to_owned(),
        ];
        let spec = ChildSpec::from_argv(format!("{name}-mock"), &argv)
            .ok_or_else(|| CheckError::Harness("empty mock command".into()))?;
        let mut agent = ctx.spawn(spec)?;
        let upstream = ctx
            .within("the mock agent to print its http:// address", async {
                while let Some((stream, line)) = agent.next_output_line().await {
                    if stream == OutputStream::Stderr
                        && let Some(addr) = listening_addr(&line)
                    {
                        return Some(addr);
                    }
                }
                None
            })
            .await?
            .ok_or_else(|| {
                CheckError::Harness("the mock agent ended without printing its address".into())
            })?;
        let listener = ctx.bind_loopback().await?;
        let recorder = Arc::new(Recorder::default());
        let relay = Relay::start(listener, upstream, recorder.clone());
        Ok(Front {
            url: format!("http://{}/acp", relay.addr()),
            recorder,
            _relay: relay,
            _agent: agent,
        })
    }

    /// Every request so far, in the order they came.
    pub fn exchanges(&self) -> Vec<Exchange> {
        self.recorder.lock().exchanges.clone()
    }

    /// The cookies the front set so far.
    pub fn cookies(&self) -> Vec<SetCookie> {
        self.recorder.lock().set.clone()
    }
}

/// The address in the mock's `listening on http://HOST:PORT/acp` line.
fn listening_addr(line: &str) -> Option<SocketAddr> {
    let rest = line.split("listening on http://").nth(1)?;
    let authority = rest.split(['/', ' ']).next()?;
    authority.parse().ok()
}

/// Every exchange, one per line, for an Actual.
pub fn describe(exchanges: &[Exchange]) -> String {
    if exchanges.is_empty() {
        return "no request reached the front".to_owned();
    }
    exchanges
        .iter()
        .map(Exchange::describe)
        .collect::<Vec<_>>()
        .join("\n")
}
