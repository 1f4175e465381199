//! Starting the ACP agent under test through the target profile, over stdio or WebSocket.
//!
//! The profile's `[suites.acp]` section describes the agent:
//!
//! - `commands.agent` starts it on stdio; `commands.agent_<variant>` starts a variant (the same
//!   agent configured to hold its turns, ask for permission, retry, ...). A variant the profile
//!   does not name falls back to `agent`.
//! - `settings.ws_args` are the words added to an agent command to serve WebSocket instead. The
//!   agent must then print its address (`ws://HOST:PORT/PATH`) on stdout or stderr; when the words
//!   use `{listen}`, `{host}` or `{port}`, the harness picks the address and starts the agent again
//!   on a new port when it reports the address in use.
//! - `urls.ws` is an agent that is already running (only the base variant).
//! - `settings.http_args` and `urls.http` do the same for ACP's remote endpoint (capability
//!   `acp-http`): the agent prints `http://HOST:PORT/acp`, and connections speak the profile
//!   [`remote_profile`] names (Streamable HTTP, or the WebSocket upgrade of the same URL).
//!
//! Rows that name no transport run over stdio when the target declares it, else over WebSocket,
//! else over the remote endpoint ([`pick`]).

use std::time::Duration;

use ski::transport::child::{Child, ChildSpec};
use tokio::io::AsyncReadExt;

use super::connection::Connection;
use super::remote::http::Endpoint;
use crate::check::{CheckError, Failure};
use crate::context::Ctx;
use crate::port::{StartError, says_addr_in_use};
use crate::target::split_words;
use crate::vocabulary::acp;
use crate::vocabulary::{Capability, capability};

/// How long an agent may take to start and report its WebSocket address.
const START_TIMEOUT: Duration = Duration::from_secs(15);

/// The transport a check talks to the agent over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    /// Newline-delimited JSON-RPC on the agent's stdin and stdout.
    Stdio,
    /// One JSON-RPC message per WebSocket text frame.
    Ws,
    /// ACP's remote `/acp` endpoint, in the profile [`remote_profile`] names.
    Http,
}

/// Which profile of the remote endpoint a connection speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RemoteProfile {
    /// POST, SSE GET streams and DELETE.
    Streamable,
    /// The WebSocket upgrade of `GET /acp`.
    WebSocket,
}

/// The profile connections to a remote endpoint use: `settings.http_profile` when set, else
/// Streamable HTTP when the target declares `acp-http-streamable`, else the WebSocket upgrade.
/// A profile the target does not declare is a harness error.
pub fn remote_profile(ctx: &Ctx) -> Result<RemoteProfile, CheckError> {
    let profile = match ctx.setting(&acp::HTTP_PROFILE)?.as_deref() {
        Some("streamable") => RemoteProfile::Streamable,
        Some("websocket") => RemoteProfile::WebSocket,
        Some(other) => {
            return Err(CheckError::Harness(format!(
                "settings.http_profile {other:?} is neither streamable nor websocket"
            )));
        }
        None if ctx.has(capability::ACP_HTTP_STREAMABLE) => RemoteProfile::Streamable,
        None => RemoteProfile::WebSocket,
    };
    let needed = match profile {
        RemoteProfile::Streamable => capability::ACP_HTTP_STREAMABLE,
        RemoteProfile::WebSocket => capability::ACP_HTTP_WS,
    };
    if !ctx.has(needed) {
        return Err(CheckError::Harness(format!(
            "target {} connects to its remote endpoint in a profile it does not declare ({needed})",
            ctx.target().name
        )));
    }
    Ok(profile)
}

impl Transport {
    /// The capability that declares it, which is also its name in reports.
    pub fn name(self) -> &'static str {
        match self {
            Transport::Stdio => "stdio",
            Transport::Ws => "ws",
            Transport::Http => "acp-http",
        }
    }

    /// The capability that declares it.
    pub fn capability(self) -> Capability {
        match self {
            Transport::Stdio => capability::STDIO,
            Transport::Ws => capability::WS,
            Transport::Http => capability::ACP_HTTP,
        }
    }
}

/// The transport for a row that names none: stdio when the target declares it, else WebSocket.
pub fn pick(ctx: &Ctx) -> Result<Transport, CheckError> {
    if ctx.has(capability::STDIO) {
        Ok(Transport::Stdio)
    } else if ctx.has(capability::WS) {
        Ok(Transport::Ws)
    } else if ctx.has(capability::ACP_HTTP) {
        Ok(Transport::Http)
    } else {
        Err(CheckError::Skip(format!(
            "target {} declares none of stdio, ws and acp-http for the acp suite",
            ctx.target().name
        )))
    }
}

/// Every transport the target declares, stdio first.
pub fn declared(ctx: &Ctx) -> Vec<Transport> {
    [Transport::Stdio, Transport::Ws, Transport::Http]
        .into_iter()
        .filter(|t| ctx.has(t.capability()))
        .collect()
}

/// A named configuration of the agent: `""` is the plain agent, anything else a variant the
/// profile may start with other arguments (`agent_<name>`).
pub type Variant = &'static str;

/// The plain agent.
pub const PLAIN: Variant = "";

/// The variant whose turns run until they are cancelled (the cancellation checks, the fake
/// model's held stream).
pub const HOLD: Variant = "hold";

/// A started agent (or an already running WebSocket endpoint) that checks connect to.
pub struct Agent {
    ctx: Ctx,
    transport: Transport,
    child: Option<Child>,
    url: Option<String>,
    connections: usize,
}

impl std::fmt::Debug for Agent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Agent")
            .field("transport", &self.transport)
            .field("url", &self.url)
            .finish_non_exhaustive()
    }
}

fn command_name(variant: Variant) -> String {
    if variant.is_empty() {
        "agent".to_owned()
    } else {
        format!("agent_{variant}")
    }
}

/// The name of the profile command that starts `variant`, falling back to the plain agent.
fn resolve_command(ctx: &Ctx, variant: Variant) -> Option<String> {
    let commands = &ctx.section().commands;
    let name = command_name(variant);
    if commands.contains_key(&name) {
        return Some(name);
    }
    if commands.contains_key("agent") {
        if !variant.is_empty() {
            ctx.note(format!(
                "the profile has no command {name}; variant {variant} uses the agent command"
            ));
        }
        return Some("agent".to_owned());
    }
    None
}

impl Agent {
    /// Starts the agent over the transport a row without a named transport uses.
    pub async fn start(ctx: &Ctx, variant: Variant) -> Result<Self, CheckError> {
        let transport = pick(ctx)?;
        Self::start_on(ctx, transport, variant).await
    }

    /// Starts `variant` of the agent over `transport`.
    pub async fn start_on(
        ctx: &Ctx,
        transport: Transport,
        variant: Variant,
    ) -> Result<Self, CheckError> {
        ctx.require(transport.capability())?;
        prerequisites(ctx)?;
        match transport {
            Transport::Stdio => {
                let name = resolve_command(ctx, variant).ok_or_else(|| {
                    CheckError::Harness(format!(
                        "target {} declares stdio but has no command agent",
                        ctx.target().name
                    ))
                })?;
                let model = super::model::prepare(ctx, variant).await?;
                let extra: Vec<(&str, &str)> = model
                    .iter()
                    .map(|(k, v)| (k.as_str(), v.as_str()))
                    .collect();
                let child = ctx.spawn_target(&name, &extra)?;
                Ok(Self {
                    ctx: ctx.clone(),
                    transport,
                    child: Some(child),
                    url: None,
                    connections: 0,
                })
            }
            Transport::Ws | Transport::Http => Self::start_listening(ctx, transport, variant).await,
        }
    }

    /// Starts (or finds running) an agent that listens: on WebSocket or the remote endpoint.
    async fn start_listening(
        ctx: &Ctx,
        transport: Transport,
        variant: Variant,
    ) -> Result<Self, CheckError> {
        let (setting, key) = match transport {
            Transport::Http => (&acp::HTTP_ARGS, "http"),
            _ => (&acp::WS_ARGS, "ws"),
        };
        let ws_args = ctx.section().settings.get(setting.name).cloned();
        let name = resolve_command(ctx, variant);
        let (Some(name), Some(ws_args)) = (name, ws_args) else {
            let url = ctx.url(key)?.ok_or_else(|| {
                CheckError::Harness(format!(
                    "target {} declares {} but has neither settings.{} with an agent \
                     command nor urls.{key}",
                    ctx.target().name,
                    transport.name(),
                    setting.name
                ))
            })?;
            if !variant.is_empty() {
                ctx.note(format!(
                    "variant {variant} uses the running agent at {url}: no command starts it"
                ));
            }
            return Ok(Self {
                ctx: ctx.clone(),
                transport,
                child: None,
                url: Some(url),
                connections: 0,
            });
        };
        let words = split_words(&ws_args).map_err(|e| {
            CheckError::Harness(format!(
                "settings.{} {ws_args:?} is malformed: {e}",
                setting.name
            ))
        })?;
        let picks_address = words
            .iter()
            .any(|w| w.contains("{listen}") || w.contains("{port}") || w.contains("{host}"));
        if !picks_address {
            let spec = ws_spec(ctx, &name, &words, &[])?;
            let (child, url) = launch_ws(ctx, spec, transport).await.map_err(|e| match e {
                StartError::AddrInUse(output) => Failure::new(
                    "the agent starts",
                    format!(
                        "the agent starts and prints its {} address",
                        scheme(transport)
                    ),
                )
                .actual(format!("its address was in use: {output}"))
                .into(),
                StartError::Other(e) => e,
            })?;
            return Ok(Self::with_child(ctx, transport, child, url));
        }
        let started = ctx
            .ports()
            .start(None, |addr| {
                let listen = addr.to_string();
                let host = addr.ip().to_string();
                let port = addr.port().to_string();
                let spec = ws_spec(
                    ctx,
                    &name,
                    &words,
                    &[("listen", &listen), ("host", &host), ("port", &port)],
                );
                async move {
                    match spec {
                        Ok(spec) => launch_ws(ctx, spec, transport).await,
                        Err(e) => Err(StartError::Other(e)),
                    }
                }
            })
            .await;
        match started {
            Ok(started) => {
                let (child, url) = started.value;
                ctx.note(format!(
                    "{} agent on {url} after {} attempt(s)",
                    transport.name(),
                    started.attempts.len()
                ));
                Ok(Self::with_child(ctx, transport, child, url))
            }
            Err((StartError::Other(e), _)) => Err(e),
            Err((StartError::AddrInUse(detail), attempts)) => Err(CheckError::Harness(format!(
                "the {} agent could not get a free port: {detail} ({} attempts)",
                transport.name(),
                attempts.len()
            ))),
        }
    }

    fn with_child(ctx: &Ctx, transport: Transport, child: Child, url: String) -> Self {
        Self {
            ctx: ctx.clone(),
            transport,
            child: Some(child),
            url: Some(url),
            connections: 0,
        }
    }

    /// The transport.
    pub fn transport(&self) -> Transport {
        self.transport
    }

    /// The URL, for a WebSocket agent (`ws://`) or a remote endpoint (`http://`).
    pub fn url(&self) -> Option<&str> {
        self.url.as_deref()
    }

    /// The agent's process, when the harness started it.
    pub fn child(&self) -> Option<&Child> {
        self.child.as_ref()
    }

    /// The agent's process, mutably (to close its stdin or wait for it).
    pub fn child_mut(&mut self) -> Option<&mut Child> {
        self.child.as_mut()
    }

    /// Whether the agent process is still running (an agent the harness did not start counts
    /// as running).
    pub fn is_running(&self) -> bool {
        self.child.as_ref().is_none_or(|c| c.try_status().is_none())
    }

    /// A new connection: on stdio the agent's stdin and stdout (only once), on WebSocket a new
    /// client connection to the agent's URL.
    pub async fn connect(&mut self) -> Result<Connection, CheckError> {
        self.connections += 1;
        match self.transport {
            Transport::Stdio => {
                if self.connections > 1 {
                    return Err(CheckError::Harness(
                        "an agent on stdio has exactly one connection".to_owned(),
                    ));
                }
                let child = self
                    .child
                    .as_mut()
                    .ok_or_else(|| CheckError::Harness("the stdio agent has no process".into()))?;
                Connection::over_stdio(&self.ctx, child)
            }
            Transport::Ws => {
                let url = self
                    .url
                    .clone()
                    .ok_or_else(|| CheckError::Harness("the ws agent has no url".into()))?;
                let channel = format!("ws{}", self.connections);
                Connection::over_ws(&self.ctx, &channel, &url).await
            }
            Transport::Http => {
                let url = self
                    .url
                    .clone()
                    .ok_or_else(|| CheckError::Harness("the remote agent has no url".into()))?;
                let channel = format!("http{}", self.connections);
                match remote_profile(&self.ctx)? {
                    RemoteProfile::Streamable => {
                        Connection::over_streamable(&self.ctx, &channel, &url)
                    }
                    RemoteProfile::WebSocket => {
                        let endpoint = Endpoint::parse(&url).map_err(CheckError::Harness)?;
                        Connection::over_ws(&self.ctx, &channel, &endpoint.ws_url()).await
                    }
                }
            }
        }
    }

    /// A new WebSocket connection to `path` on the agent's host instead of its advertised URL.
    pub async fn connect_path(&mut self, path: &str) -> Result<Connection, CheckError> {
        let url = self
            .url
            .clone()
            .ok_or_else(|| CheckError::Harness("the agent has no ws url".into()))?;
        let url = match self.transport {
            Transport::Http => Endpoint::parse(&url).map_err(CheckError::Harness)?.ws_url(),
            _ => url,
        };
        self.connections += 1;
        let channel = format!("ws{}", self.connections);
        Connection::over_ws(&self.ctx, &channel, &with_path(&url, path)).await
    }
}

/// Checks the profile's prerequisites before an agent is started: every program of
/// `settings.requires_programs` must be on the `PATH` (else the check is skipped, so a machine
/// without, say, Node.js runs the rest), and every path of `settings.requires_files` must exist
/// (else the harness fails: the target was not installed). `settings.install_hint` says how to
/// fix either.
pub fn prerequisites(ctx: &Ctx) -> Result<(), CheckError> {
    let hint = ctx
        .setting(&acp::INSTALL_HINT)?
        .map(|h| format!("; {h}"))
        .unwrap_or_default();
    if let Some(programs) = ctx.setting(&acp::REQUIRES_PROGRAMS)? {
        for program in programs.split_whitespace() {
            if !on_path(program) {
                return Err(CheckError::Skip(format!(
                    "the target needs the program {program}, which is not installed{hint}"
                )));
            }
        }
    }
    if let Some(files) = ctx.setting(&acp::REQUIRES_FILES)? {
        for file in files.split_whitespace() {
            if !std::path::Path::new(file).exists() {
                return Err(CheckError::Harness(format!(
                    "the target is not installed: {file} is missing{hint}"
                )));
            }
        }
    }
    Ok(())
}

/// Whether `program` names an existing file, or a file in a directory of `PATH`.
fn on_path(program: &str) -> bool {
    if program.contains('/') {
        return std::path::Path::new(program).is_file();
    }
    std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join(program).is_file()))
}

/// `url` with its path replaced by `path`.
pub fn with_path(url: &str, path: &str) -> String {
    let scheme_end = url.find("://").map_or(0, |i| i + 3);
    let authority_end = url[scheme_end..]
        .find('/')
        .map_or(url.len(), |i| scheme_end + i);
    format!("{}{}", &url[..authority_end], path)
}

fn ws_spec(
    ctx: &Ctx,
    name: &str,
    ws_words: &[String],
    extra: &[(&str, &str)],
) -> Result<ChildSpec, CheckError> {
    let mut spec = ctx.command(name, extra)?;
    for word in ws_words {
        spec = spec.arg(ctx.render(word, extra)?);
    }
    Ok(spec)
}

/// The scheme of the address a listening agent prints.
fn scheme(transport: Transport) -> &'static str {
    match transport {
        Transport::Http => "http://",
        _ => "ws://",
    }
}

/// Starts a listening agent and reads its output until it prints its URL (`ws://`, or
/// `http://` for the remote endpoint).
async fn launch_ws(
    ctx: &Ctx,
    spec: ChildSpec,
    transport: Transport,
) -> Result<(Child, String), StartError<CheckError>> {
    let find = match transport {
        Transport::Http => find_http_url,
        _ => find_ws_url,
    };
    let mut child = ctx.spawn(spec).map_err(StartError::Other)?;
    let mut output = String::new();
    let waited = tokio::time::timeout(ctx.timeouts().scale(START_TIMEOUT), async {
        while let Some((_, line)) = child.next_output_line().await {
            if let Some(url) = find(&line) {
                return Some(url);
            }
            output.push_str(&line);
            output.push('\n');
        }
        None
    })
    .await;
    match waited {
        Ok(Some(url)) => {
            // Nothing else reads stdout from now on; drain it so the agent never blocks on it.
            if let Ok(mut stdout) = child.take_stdout() {
                tokio::spawn(async move {
                    let mut sink = Vec::new();
                    let _ = stdout.read_to_end(&mut sink).await;
                });
            }
            Ok((child, url))
        }
        Ok(None) => {
            let status = child
                .wait()
                .await
                .map(|s| s.to_string())
                .unwrap_or_else(|_| "ended".to_owned());
            if says_addr_in_use(&output) {
                Err(StartError::AddrInUse(output))
            } else {
                Err(StartError::Other(
                    Failure::new(
                        "the agent starts",
                        format!(
                            "the agent starts and prints its {} address",
                            scheme(transport)
                        ),
                    )
                    .actual(format!("it exited ({status}) first; its output: {output}"))
                    .into(),
                ))
            }
        }
        Err(_) => Err(StartError::Other(
            Failure::new(
                "the agent starts",
                format!(
                    "the agent prints its {} address within {:?}",
                    scheme(transport),
                    ctx.timeouts().scale(START_TIMEOUT)
                ),
            )
            .actual(format!("no address; its output so far: {output}"))
            .into(),
        )),
    }
}

/// The first `http://` or `https://` URL in a line of output.
pub fn find_http_url(line: &str) -> Option<String> {
    let start = [line.find("https://"), line.find("http://")]
        .into_iter()
        .flatten()
        .min()?;
    let url: String = line[start..]
        .chars()
        .take_while(|c| !c.is_whitespace() && !matches!(c, '"' | '\'' | ',' | '}' | ')'))
        .collect();
    (url.len() > "http://".len()).then_some(url)
}

/// The first `ws://` or `wss://` URL in a line of output.
pub fn find_ws_url(line: &str) -> Option<String> {
    let start = [line.find("wss://"), line.find("ws://")]
        .into_iter()
        .flatten()
        .min()?;
    let url: String = line[start..]
        .chars()
        .take_while(|c| !c.is_whitespace() && !matches!(c, '"' | '\'' | ',' | '}' | ')'))
        .collect();
    (url.len() > "ws://".len()).then_some(url)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ws_urls_are_found_in_log_lines() {
        assert_eq!(
            find_ws_url("listening on ws://127.0.0.1:4000/acp").as_deref(),
            Some("ws://127.0.0.1:4000/acp")
        );
        assert_eq!(
            find_ws_url(r#"{"event":"listening","url":"wss://h:1/x"}"#).as_deref(),
            Some("wss://h:1/x")
        );
        assert_eq!(find_ws_url("no address here"), None);
        assert_eq!(
            find_http_url("listening on http://127.0.0.1:4000/acp").as_deref(),
            Some("http://127.0.0.1:4000/acp")
        );
        assert_eq!(find_http_url("listening on ws://127.0.0.1:4000/acp"), None);
    }

    #[test]
    fn paths_are_replaced() {
        assert_eq!(with_path("ws://h:1/acp", "/"), "ws://h:1/");
        assert_eq!(with_path("ws://h:1", "/acp"), "ws://h:1/acp");
    }
}
