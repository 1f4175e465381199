//! The harness side of `slack = "slack-hosts"`, for a build that calls Slack at its own host
//! names: the fake Slack in TLS mode, a namespace holder (`ski-conformance netns hold`) whose
//! `/etc/hosts` sends `slack.com` and friends to its loopback, where 443 and the fake's own port
//! numbers relay out to the fake; targets run inside it (`netns enter`) with the CA in the usual
//! variables, and the target's MCP endpoint is relayed back out for the checks.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use ski::transport::child::{Child, ChildSpec};
use ski_mocks::slack::FakeSlack;
use tokio::io::{AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream, UnixListener, UnixStream};
use tokio::task::JoinHandle;

use super::netns::{CONNECTED, INWARD_SOCKET, OUTWARD_SOCKET, READY, header, read_header};
use crate::vocabulary::intercom;
use crate::{CheckError, Ctx, OrFail};

/// The Web API base URL a target is given in this mode.
pub const SLACK_API: &str = "https://slack.com/api";
/// Slack's names the hosts file always maps: the Web API and the Socket Mode hosts.
pub const SLACK_HOSTS: &[&str] = &["slack.com", "wss-primary.slack.com", "wss-backup.slack.com"];
/// The variables that carry the CA file to common TLS stacks (rustls-native-certs and OpenSSL,
/// Python requests, Node, curl).
pub const CA_VARIABLES: &[&str] = &[
    "SSL_CERT_FILE",
    "REQUESTS_CA_BUNDLE",
    "NODE_EXTRA_CA_CERTS",
    "CURL_CA_BUNDLE",
];

/// How the target reaches the fake Slack.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reach {
    /// `{api_base_url}` is the fake's `http://127.0.0.1:PORT/api` (the default).
    BaseUrl,
    /// Slack's own names over TLS, inside a namespace.
    SlackHosts,
}

impl Reach {
    /// The profile's choice (`settings.slack`, default `base-url`).
    pub fn of(ctx: &Ctx) -> Result<Reach, CheckError> {
        match ctx.setting(&intercom::SLACK)?.as_deref() {
            None | Some("base-url") => Ok(Reach::BaseUrl),
            Some("slack-hosts") => Ok(Reach::SlackHosts),
            Some(other) => Err(CheckError::harness(format!(
                "settings.slack is {other:?}; it must be \"base-url\" or \"slack-hosts\""
            ))),
        }
    }
}

/// A running namespace holder and the relays to and from it.
pub struct SlackHosts {
    holder: Child,
    program: PathBuf,
    relay_dir: PathBuf,
    ca_file: PathBuf,
    tasks: Mutex<Vec<JoinHandle<()>>>,
}

impl Drop for SlackHosts {
    fn drop(&mut self) {
        let tasks = self.tasks.get_mut().map(std::mem::take).unwrap_or_default();
        for task in tasks {
            task.abort();
        }
        // Closing its stdin ends the holder; the runner's teardown ends it otherwise.
        self.holder.close_stdin();
    }
}

impl SlackHosts {
    /// Starts the holder for `slack` (started in TLS mode): its hosts file, the CA file, the
    /// outward relay to the fake's Web API (443 and its own port) and Socket Mode port.
    pub async fn start(ctx: &Ctx, slack: &FakeSlack) -> Result<SlackHosts, CheckError> {
        let ca = slack
            .ca_pem()
            .ok_or_else(|| CheckError::harness("the fake Slack is not in TLS mode"))?;
        let web = address_of(&slack.api_base_url())?;
        let socket = address_of(&slack.socket_mode_url())?;
        let routes = HashMap::from([(443, web), (web.port(), web), (socket.port(), socket)]);
        let relay_dir = tempfile::Builder::new()
            .prefix("netns-")
            .tempdir_in(ctx.temp_dir())
            .or_error("a relay directory")?
            .keep();
        let ca_file = relay_dir.join("ca.pem");
        std::fs::write(&ca_file, ca).or_error("write the CA file")?;
        let hosts = relay_dir.join("hosts");
        std::fs::write(&hosts, hosts_file(ctx)?).or_error("write the hosts file")?;
        let outward = UnixListener::bind(relay_dir.join(OUTWARD_SOCKET))
            .or_error("listen on the outward relay socket")?;
        let relay = tokio::spawn(relay_outward(outward, routes.clone()));

        let program = ctx.bin("ski-conformance");
        let mut spec = ChildSpec::new("netns", &program)
            .args(["netns", "hold", "--hosts"])
            .arg(&hosts)
            .arg("--relay-dir")
            .arg(&relay_dir);
        for port in routes.keys() {
            spec = spec.arg("--listen").arg(port.to_string());
        }
        let mut holder = ctx.spawn(spec)?;
        // The holder is the harness's own: a holder that never gets ready is an error, not a
        // failure of the target.
        let line = tokio::time::timeout(ctx.timeout(), holder.next_line())
            .await
            .map_err(|_| {
                CheckError::harness(format!(
                    "the namespace holder printed no {READY:?} within {:?}",
                    ctx.timeout()
                ))
            })?
            .or_error("read the namespace holder's stdout")?;
        if line.as_deref() != Some(READY) {
            relay.abort();
            // Ended (or about to be): what it said on stderr is the reason.
            let _ = holder.signal_group(nix::sys::signal::Signal::SIGKILL);
            let mut stderr = Vec::new();
            while let Some(line) = holder.next_stderr_line().await {
                stderr.push(line);
            }
            return Err(CheckError::harness(format!(
                "settings.slack = \"slack-hosts\": the namespace holder did not start: {}",
                stderr.join(" ")
            )));
        }
        ctx.note(format!(
            "slack-hosts: holder pid {}, 443 and {} -> {web}, {} -> {socket}",
            holder.pid(),
            web.port(),
            socket.port()
        ));
        Ok(SlackHosts {
            holder,
            program,
            relay_dir,
            ca_file,
            tasks: Mutex::new(vec![relay]),
        })
    }

    /// `spec` run inside the namespaces, with the CA file in [`CA_VARIABLES`].
    pub fn wrap(&self, spec: ChildSpec) -> ChildSpec {
        let mut wrapped = ChildSpec::new(spec.name(), &self.program)
            .args(["netns", "enter", "--pid"])
            .arg(self.holder.pid().to_string())
            .arg("--")
            .arg(spec.program())
            .args(spec.get_args());
        for (key, value) in spec.get_env() {
            wrapped = match value {
                Some(value) => wrapped.env(key, value),
                None => wrapped.env_remove(key),
            };
        }
        for key in CA_VARIABLES {
            wrapped = wrapped.env(key, &self.ca_file);
        }
        if let Some(cwd) = spec.get_cwd() {
            wrapped = wrapped.cwd(cwd);
        }
        wrapped
    }

    /// `url` (an `http://127.0.0.1:PORT/…` the target listens on inside) as the checks reach it:
    /// a listener outside (the same port when it is free) relaying into the namespace.
    pub async fn expose(&self, url: &str) -> Result<String, CheckError> {
        let (scheme, rest) = url
            .split_once("://")
            .or_fail(format!("an http URL, not {url:?}"))?;
        let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
        let inside: SocketAddr = authority
            .parse()
            .ok()
            .filter(|a: &SocketAddr| a.ip().is_loopback())
            .or_fail(format!("a loopback address with a port in {url:?}"))?;
        let listener = match TcpListener::bind(("127.0.0.1", inside.port())).await {
            Ok(listener) => listener,
            Err(_) => TcpListener::bind("127.0.0.1:0")
                .await
                .or_error("listen on a loopback port")?,
        };
        let outside = listener.local_addr().or_error("the exposed address")?;
        let inward = self.relay_dir.join(INWARD_SOCKET);
        let task = tokio::spawn(relay_inward(listener, inward, inside.port()));
        self.tasks
            .lock()
            .map_err(|_| CheckError::harness("the relay list is poisoned"))?
            .push(task);
        Ok(format!("{scheme}://{outside}{path}"))
    }
}

/// The hosts file: the loopback names, Slack's names and the profile's extra names.
fn hosts_file(ctx: &Ctx) -> Result<String, CheckError> {
    let extra = ctx
        .setting(&intercom::SLACK_EXTRA_HOSTS)?
        .unwrap_or_default();
    let names: Vec<&str> = SLACK_HOSTS
        .iter()
        .copied()
        .chain(extra.split_whitespace())
        .collect();
    Ok(format!(
        "127.0.0.1 localhost\n::1 localhost\n127.0.0.1 {}\n",
        names.join(" ")
    ))
}

/// The `host:port` of a URL of the fake (`https://127.0.0.1:PORT/api`, `wss://…/link`).
fn address_of(url: &str) -> Result<SocketAddr, CheckError> {
    url.split_once("://")
        .and_then(|(_, rest)| rest.split('/').next())
        .and_then(|authority| authority.parse().ok())
        .ok_or_else(|| CheckError::harness(format!("the fake Slack's URL {url:?} has no address")))
}

/// Connections from inside: each header names the port dialled inside, `routes` where it goes.
async fn relay_outward(listener: UnixListener, routes: HashMap<u16, SocketAddr>) {
    while let Ok((inside, _)) = listener.accept().await {
        let routes = routes.clone();
        tokio::spawn(async move {
            let mut inside = BufReader::new(inside);
            let Ok(port) = read_header(&mut inside).await else {
                return;
            };
            let Some(address) = routes.get(&port) else {
                return;
            };
            let Ok(mut fake) = TcpStream::connect(address).await else {
                return;
            };
            let _ = tokio::io::copy_bidirectional(&mut inside, &mut fake).await;
        });
    }
}

/// Connections from the checks to `port` inside the namespace.
async fn relay_inward(listener: TcpListener, inward: PathBuf, port: u16) {
    while let Ok((mut outside, _)) = listener.accept().await {
        let inward = inward.clone();
        tokio::spawn(async move {
            if let Some(mut inside) = connect_inside(&inward, port).await {
                let _ = tokio::io::copy_bidirectional(&mut outside, &mut inside).await;
            }
        });
    }
}

/// A connection to `port` on the loopback inside the namespace, `None` when nothing accepts it.
async fn connect_inside(inward: &Path, port: u16) -> Option<UnixStream> {
    let mut inside = UnixStream::connect(inward).await.ok()?;
    inside.write_all(header(port).as_bytes()).await.ok()?;
    let answer = inside.read_u8().await.ok()?;
    (answer == CONNECTED).then_some(inside)
}

/// Whether something accepts connections on loopback `port` where the target runs: inside the
/// namespace of `hosts`, or on this host's loopback without one.
pub async fn loopback_accepts(hosts: Option<&SlackHosts>, port: u16) -> bool {
    match hosts {
        Some(hosts) => connect_inside(&hosts.relay_dir.join(INWARD_SOCKET), port)
            .await
            .is_some(),
        None => TcpStream::connect(("127.0.0.1", port)).await.is_ok(),
    }
}
