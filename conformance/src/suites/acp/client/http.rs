//! The client rows of ACP's remote transport RFD (ACP-HTTP-018 to -027): the client under test
//! runs one prompt turn against the runner's recording [`super::front`] through the profile's
//! `client_http` (Streamable HTTP) or `client_http_ws` (the WebSocket upgrade) command with
//! `{url}` and `{prompt}`, and each row judges the requests the front recorded. The turn asks the
//! client's permission once, so a response to an agent request of a session is among them.

use serde_json::Value;

use super::front::{self, AFFINITY, Exchange, Front, LATER, SetCookie};
use super::mock::{ClientRun, Mock, end_turn_step, on_prompt, permission_step, start_client};
use super::relay::Version;
use crate::check::{Check, CheckResult};
use crate::context::Ctx;
use crate::{ensure, ensure_eq, fail};

/// The checks of this module.
pub fn checks() -> Vec<Check> {
    vec![
        Check::new(
            "ACP-HTTP-018",
            "client_http runs one turn against the runner's recording front; the client must \
             POST initialize, open the connection's GET stream, POST session/prompt and report \
             end_turn, without a WebSocket upgrade.",
            http_018,
        ),
        Check::new(
            "ACP-HTTP-019",
            "client_http_ws runs one turn against the runner's recording front; the client must \
             upgrade GET /acp to a WebSocket (101), send initialize over it and report end_turn.",
            http_019,
        ),
        Check::new(
            "ACP-HTTP-020",
            "Over Streamable HTTP the front sets one cookie on the initialize answer and another \
             on session/new's; every later request must carry each cookie set before it.",
            http_020,
        ),
        Check::new(
            "ACP-HTTP-021",
            "Over Streamable HTTP every POST the client makes must have Content-Type \
             application/json.",
            http_021,
        ),
        Check::new(
            "ACP-HTTP-022",
            "Over Streamable HTTP every GET stream the client opens must name text/event-stream \
             in Accept.",
            http_022,
        ),
        Check::new(
            "ACP-HTTP-023",
            "Over Streamable HTTP initialize must be POSTed without Acp-Connection-Id and every \
             later POST, GET and DELETE must carry the id its answer returned.",
            http_023,
        ),
        Check::new(
            "ACP-HTTP-024",
            "Over Streamable HTTP session/prompt and the answer to the agent's permission request \
             must carry Acp-Connection-Id and Acp-Session-Id naming the message's session.",
            http_024,
        ),
        Check::new(
            "ACP-HTTP-025",
            "Every Streamable HTTP request of the client must come over HTTP/2.",
            http_025,
        ),
        Check::new(
            "ACP-HTTP-026",
            "Over the WebSocket upgrade the client's first message must be initialize and every \
             message a text frame.",
            http_026,
        ),
        Check::new(
            "ACP-HTTP-027",
            "Over Streamable HTTP every request after initialize should carry \
             Acp-Protocol-Version naming the version initialize settled.",
            http_027,
        ),
    ]
}

/// What one run left: the client's output and every request the front recorded.
struct Session {
    run: ClientRun,
    exchanges: Vec<Exchange>,
    cookies: Vec<SetCookie>,
}

impl Session {
    /// The requests after the `initialize` POST's answer (upgrades excluded).
    fn after_initialize(&self) -> Vec<&Exchange> {
        let start = self
            .initialize()
            .and_then(|init| {
                self.cookies
                    .iter()
                    .find(|c| c.name == AFFINITY)
                    .map_or(Some(init.seq), |c| Some(c.seq))
            })
            .unwrap_or(u64::MAX);
        self.exchanges
            .iter()
            .filter(|e| e.seq > start && !e.is_upgrade())
            .collect()
    }

    fn initialize(&self) -> Option<&Exchange> {
        self.exchanges
            .iter()
            .find(|e| e.head.method == "POST" && e.rpc_method().as_deref() == Some("initialize"))
    }

    fn streamable(&self) -> Vec<&Exchange> {
        self.exchanges.iter().filter(|e| !e.is_upgrade()).collect()
    }

    fn describe(&self) -> String {
        format!(
            "requests:\n{}\nclient: {}",
            front::describe(&self.exchanges),
            self.run.describe()
        )
    }
}

/// Runs `command` for one turn that asks permission once, against a fresh front.
async fn session(ctx: &Ctx, command: &str) -> Result<Session, crate::CheckError> {
    let script = on_prompt(&[&permission_step("\"perm-1\""), &end_turn_step("end_turn")]);
    let front = Front::start(ctx, "front", &script).await?;
    // The client starts no agent here; {agent_cmd} is given for templates that name it.
    let mock = Mock {
        cmd: String::new(),
        argv: Vec::new(),
        transcript: ctx.temp_dir().join("no-transcript.ndjson"),
    };
    let client = start_client(
        ctx,
        command,
        &mock,
        &[("url", &front.url), ("prompt", "hello")],
    )?;
    let run = client.finish(ctx, &mock).await?;
    Ok(Session {
        run,
        exchanges: front.exchanges(),
        cookies: front.cookies(),
    })
}

async fn http_018(ctx: Ctx) -> CheckResult {
    let s = session(&ctx, "client_http").await?;
    let upgrades = s.exchanges.iter().filter(|e| e.is_upgrade()).count();
    ensure!(
        upgrades == 0 && s.initialize().is_some(),
        "the client speaks Streamable HTTP: initialize POSTed, no WebSocket upgrade",
        "{}",
        s.describe()
    );
    ensure!(
        s.exchanges
            .iter()
            .any(|e| e.head.method == "GET" && e.answer.as_ref().is_some_and(|a| a.status == 200)),
        "the client opens a GET event stream that the front answers 200",
        "{}",
        s.describe()
    );
    ensure!(
        s.exchanges
            .iter()
            .any(|e| e.rpc_method().as_deref() == Some("session/prompt")),
        "the client POSTs session/prompt",
        "{}",
        s.describe()
    );
    s.run
        .expect_turns(&["end_turn"], "the turn over Streamable HTTP ends end_turn")
}

async fn http_019(ctx: Ctx) -> CheckResult {
    let s = session(&ctx, "client_http_ws").await?;
    let upgraded = s.exchanges.iter().find(|e| {
        e.is_upgrade()
            && e.head.method == "GET"
            && e.answer.as_ref().is_some_and(|a| a.status == 101)
    });
    let Some(upgraded) = upgraded else {
        fail!(
            "the client upgrades GET /acp to a WebSocket, answered 101",
            "{}",
            s.describe()
        );
    };
    ensure!(
        upgraded.head.path.starts_with("/acp"),
        "the upgrade is of the endpoint's path /acp",
        "{}",
        upgraded.describe()
    );
    ensure!(
        s.exchanges.iter().all(|e| e.head.method != "POST"),
        "no Streamable HTTP POST beside the WebSocket",
        "{}",
        s.describe()
    );
    let methods = text_methods(upgraded);
    ensure!(
        methods.iter().any(|m| m == "session/prompt"),
        "the client sends its turn over the WebSocket",
        "methods {methods:?}"
    );
    s.run
        .expect_turns(&["end_turn"], "the turn over the WebSocket ends end_turn")
}

/// The methods of the text frames after an upgrade ("response" for a message without one).
fn text_methods(upgrade: &Exchange) -> Vec<String> {
    upgrade
        .frames
        .iter()
        .filter(|f| f.opcode == 1 || f.opcode == 2)
        .map(|f| {
            serde_json::from_slice::<Value>(&f.payload)
                .ok()
                .map(|v| {
                    v.get("method")
                        .and_then(Value::as_str)
                        .unwrap_or("response")
                        .to_owned()
                })
                .unwrap_or_else(|| "(not JSON)".to_owned())
        })
        .collect()
}

/// The `name=value` pairs of every `Cookie` field of a request.
fn cookie_pairs(exchange: &Exchange) -> Vec<(String, String)> {
    exchange
        .head
        .all("cookie")
        .into_iter()
        .flat_map(|value| value.split(';'))
        .filter_map(|pair| pair.split_once('='))
        .map(|(name, value)| (name.trim().to_owned(), value.trim().to_owned()))
        .collect()
}

async fn http_020(ctx: Ctx) -> CheckResult {
    let s = session(&ctx, "client_http").await?;
    for name in [AFFINITY, LATER] {
        let Some(cookie) = s.cookies.iter().find(|c| c.name == name) else {
            fail!(
                format!("the front set its cookie {name} (the client reached that answer)"),
                "{}",
                s.describe()
            );
        };
        let later: Vec<&Exchange> = s.exchanges.iter().filter(|e| e.seq > cookie.seq).collect();
        ensure!(
            !later.is_empty(),
            format!("the client makes a request after the answer that set {name}"),
            "{}",
            s.describe()
        );
        for exchange in later {
            let pairs = cookie_pairs(exchange);
            ensure!(
                pairs
                    .iter()
                    .any(|(n, v)| n == cookie.name && *v == cookie.value),
                format!(
                    "every request after the answer that set it carries Cookie {}={}",
                    cookie.name, cookie.value
                ),
                "{}\nall requests:\n{}",
                exchange.describe(),
                front::describe(&s.exchanges)
            );
        }
    }
    Ok(())
}

/// The media type of a header value without parameters, lower case.
fn essence(value: &str) -> String {
    value
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase()
}

async fn http_021(ctx: Ctx) -> CheckResult {
    let s = session(&ctx, "client_http").await?;
    let posts: Vec<&Exchange> = s
        .exchanges
        .iter()
        .filter(|e| e.head.method == "POST")
        .collect();
    ensure!(
        posts.len() >= 3,
        "the client POSTs initialize, session/new and session/prompt",
        "{}",
        s.describe()
    );
    for post in posts {
        let types = post.head.all("content-type");
        ensure!(
            types.len() == 1 && essence(types[0]) == "application/json",
            "every POST has Content-Type: application/json",
            "{}",
            post.describe()
        );
    }
    Ok(())
}

async fn http_022(ctx: Ctx) -> CheckResult {
    let s = session(&ctx, "client_http").await?;
    let gets: Vec<&Exchange> = s
        .exchanges
        .iter()
        .filter(|e| e.head.method == "GET" && !e.is_upgrade())
        .collect();
    ensure!(
        !gets.is_empty(),
        "the client opens a GET event stream",
        "{}",
        s.describe()
    );
    for get in gets {
        let named = get
            .head
            .all("accept")
            .iter()
            .flat_map(|value| value.split(','))
            .any(|item| essence(item) == "text/event-stream");
        ensure!(
            named,
            "every GET stream's Accept includes text/event-stream",
            "{}",
            get.describe()
        );
    }
    Ok(())
}

async fn http_023(ctx: Ctx) -> CheckResult {
    let s = session(&ctx, "client_http").await?;
    let Some(init) = s.initialize() else {
        fail!("the client POSTs initialize", "{}", s.describe());
    };
    ensure!(
        init.head.get("acp-connection-id").is_none(),
        "initialize is POSTed without Acp-Connection-Id",
        "{}",
        init.describe()
    );
    let Some(id) = init
        .answer
        .as_ref()
        .and_then(|a| a.get("acp-connection-id"))
        .map(str::to_owned)
    else {
        fail!(
            "the front's initialize answer carries Acp-Connection-Id",
            "{}",
            s.describe()
        );
    };
    let later = s.after_initialize();
    for method in ["POST", "GET"] {
        ensure!(
            later.iter().any(|e| e.head.method == method),
            format!("the client makes a {method} after initialize"),
            "{}",
            s.describe()
        );
    }
    for exchange in later {
        ensure_eq!(
            vec![id.as_str()],
            exchange.head.all("acp-connection-id"),
            "the Acp-Connection-Id of {} (every request after initialize names the connection)",
            exchange.describe()
        );
    }
    Ok(())
}

/// The session of a client POST: its params' `sessionId`, or for a response the session of the
/// agent request it answers (the permission request of the turn, id `perm-1`).
fn post_session(exchange: &Exchange, permission_session: Option<&str>) -> Option<String> {
    let body = exchange.json()?;
    if body.get("method").is_some() {
        let method = body.get("method").and_then(Value::as_str)?;
        if method == "session/new" || method == "initialize" {
            return None;
        }
        return Some(body.pointer("/params/sessionId")?.as_str()?.to_owned());
    }
    (body.get("id") == Some(&Value::from("perm-1")))
        .then(|| permission_session.map(str::to_owned))
        .flatten()
}

async fn http_024(ctx: Ctx) -> CheckResult {
    let s = session(&ctx, "client_http").await?;
    let prompt = s
        .exchanges
        .iter()
        .find(|e| e.rpc_method().as_deref() == Some("session/prompt"));
    let Some(session_id) = prompt
        .and_then(Exchange::json)
        .and_then(|b| b.pointer("/params/sessionId")?.as_str().map(str::to_owned))
    else {
        fail!(
            "the client POSTs session/prompt with a sessionId",
            "{}",
            s.describe()
        );
    };
    let scoped: Vec<(&Exchange, String)> = s
        .exchanges
        .iter()
        .filter(|e| e.head.method == "POST")
        .filter_map(|e| post_session(e, Some(&session_id)).map(|id| (e, id)))
        .collect();
    ensure!(
        scoped
            .iter()
            .any(|(e, _)| e.json().is_some_and(|b| b.get("method").is_none())),
        "the client POSTs its answer to the agent's permission request",
        "{}",
        s.describe()
    );
    for (exchange, id) in scoped {
        ensure!(
            exchange.head.get("acp-connection-id").is_some(),
            "a session-scoped POST carries Acp-Connection-Id",
            "{}",
            exchange.describe()
        );
        ensure_eq!(
            vec![id.as_str()],
            exchange.head.all("acp-session-id"),
            "the Acp-Session-Id of {} (a session-scoped POST names its session)",
            exchange.describe()
        );
    }
    Ok(())
}

async fn http_025(ctx: Ctx) -> CheckResult {
    let s = session(&ctx, "client_http").await?;
    let requests = s.streamable();
    ensure!(
        !requests.is_empty(),
        "the client makes Streamable HTTP requests",
        "{}",
        s.describe()
    );
    for exchange in requests {
        ensure!(
            exchange.version == Version::Http2,
            "every Streamable HTTP request comes over HTTP/2",
            "{}",
            exchange.describe()
        );
    }
    Ok(())
}

async fn http_026(ctx: Ctx) -> CheckResult {
    let s = session(&ctx, "client_http_ws").await?;
    let Some(upgrade) = s
        .exchanges
        .iter()
        .find(|e| e.is_upgrade() && e.answer.as_ref().is_some_and(|a| a.status == 101))
    else {
        fail!(
            "the client upgrades GET /acp to a WebSocket",
            "{}",
            s.describe()
        );
    };
    let methods = text_methods(upgrade);
    ensure_eq!(
        Some("initialize"),
        methods.first().map(String::as_str),
        "the first message over the WebSocket (messages: {methods:?})"
    );
    let mut in_text = false;
    for frame in &upgrade.frames {
        match frame.opcode {
            1 => in_text = true,
            0 => ensure!(
                in_text,
                "a continuation frame continues a text message",
                "a continuation after a binary frame"
            ),
            2 => fail!(
                "every message is a text frame",
                "a binary frame of {} bytes: {}",
                frame.payload.len(),
                String::from_utf8_lossy(&frame.payload)
            ),
            _ => {}
        }
    }
    Ok(())
}

async fn http_027(ctx: Ctx) -> CheckResult {
    let s = session(&ctx, "client_http").await?;
    let Some(init) = s.initialize() else {
        fail!("the client POSTs initialize", "{}", s.describe());
    };
    let version = init
        .answer_body
        .as_deref()
        .and_then(|body| serde_json::from_slice::<Value>(body).ok())
        .and_then(|answer| answer.pointer("/result/protocolVersion").cloned())
        .and_then(|v| v.as_u64());
    let Some(version) = version else {
        fail!(
            "the initialize answer names a protocolVersion",
            "{}",
            s.describe()
        );
    };
    let later = s.after_initialize();
    ensure!(
        !later.is_empty(),
        "the client makes requests after initialize",
        "{}",
        s.describe()
    );
    let expected = version.to_string();
    for exchange in later {
        ensure_eq!(
            vec![expected.as_str()],
            exchange
                .head
                .all("acp-protocol-version")
                .iter()
                .map(|v| v.trim())
                .collect::<Vec<_>>(),
            "the Acp-Protocol-Version of {}",
            exchange.describe()
        );
    }
    Ok(())
}
