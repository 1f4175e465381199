//! The two rows that judge the runner itself (E-ACP-03, E-RUN-01): a WebSocket server under test
//! whose first candidate port is taken is started on another port (WS-063b), and after a
//! scenario every transport, process and listener it opened is gone (WS-064b).
//!
//! The server is the profile's `ws_listen` command (a WebSocket agent on `{listen}`), or, for a
//! target without one, this project's own `ski acp serve` from the bin dir as a stand-in: these
//! rows need nothing from the target.

use std::net::SocketAddr;

use ski::transport::child::{Child, ChildSpec};

use super::agent::find_ws_url;
use super::connection::Connection;
use super::exchange::{bare_capabilities, initialize, initialize_bare};
use crate::check::{Check, CheckError, CheckResult, Failure};
use crate::context::Ctx;
use crate::port::{PortAttempt, StartError, says_addr_in_use};
use crate::{ensure, ensure_eq};

/// The checks of this module.
pub fn checks() -> Vec<Check> {
    vec![
        Check::new(
            "WS-063b",
            "Holds a loopback port and starts a WebSocket server with that port as the first \
             candidate (through Ctx::spawn_listening, or the port allocator for the stand-in); \
             the run must move to another port and the server accept a connection there.",
            ws_063b,
        ),
        Check::new(
            "WS-064b",
            "Starts a WebSocket server, connects and initializes a client, then tears the \
             scenario down with Ctx::ensure_torn_down: every process group must be gone, the \
             port free and the client's transport closed.",
            ws_064b,
        ),
    ]
}

/// A WebSocket server started for these rows.
struct Server {
    child: Child,
    addr: SocketAddr,
    attempts: Vec<PortAttempt>,
    /// This project's `ski acp serve`, not the target: it knows nothing of the target's auth.
    stand_in: bool,
}

impl Server {
    /// Initializes a client of the server: as the profile says for the target's own server,
    /// without authenticating for the stand-in.
    async fn initialize(&self, conn: &mut Connection) -> Result<(), CheckError> {
        if self.stand_in {
            initialize_bare(conn, bare_capabilities()).await?;
        } else {
            initialize(conn).await?;
        }
        Ok(())
    }
}

async fn start(ctx: &Ctx, preferred: Option<u16>) -> Result<Server, CheckError> {
    if ctx.section().commands.contains_key("ws_listen") {
        let listening = ctx.spawn_listening("ws_listen", &[], preferred).await?;
        return Ok(Server {
            child: listening.child,
            addr: listening.addr,
            attempts: listening.attempts,
            stand_in: false,
        });
    }
    let ski = ctx.bin("ski");
    if !ski.exists() {
        return Err(CheckError::Harness(format!(
            "the stand-in server {} is missing; build the workspace's binaries",
            ski.display()
        )));
    }
    let started = ctx
        .ports()
        .start(preferred, |addr| {
            let spec = ChildSpec::new("stand-in", &ski)
                .args(["acp", "serve", "--transport", "ws", "--listen"])
                .arg(addr.to_string());
            async move {
                let mut child = ctx.spawn(spec).map_err(StartError::Other)?;
                let mut output = String::new();
                while let Some((_, line)) = child.next_output_line().await {
                    if find_ws_url(&line).is_some() {
                        return Ok(child);
                    }
                    output.push_str(&line);
                    output.push('\n');
                }
                if says_addr_in_use(&output) {
                    Err(StartError::AddrInUse(output))
                } else {
                    Err(StartError::Other(CheckError::Harness(format!(
                        "the stand-in server did not start: {output}"
                    ))))
                }
            }
        })
        .await;
    match started {
        Ok(started) => Ok(Server {
            child: started.value,
            addr: started.addr,
            attempts: started.attempts,
            stand_in: true,
        }),
        Err((StartError::Other(e), _)) => Err(e),
        Err((StartError::AddrInUse(detail), attempts)) => Err(CheckError::Harness(format!(
            "no free port after {} attempts: {detail}",
            attempts.len()
        ))),
    }
}

async fn ws_063b(ctx: Ctx) -> CheckResult {
    let busy = ctx.bind_loopback().await?;
    let port = busy.local_addr()?.port();
    let server = start(&ctx, Some(port)).await?;
    let tried: Vec<String> = server
        .attempts
        .iter()
        .map(|a| format!("{} {}", a.addr, a.result))
        .collect();
    ensure_eq!(
        Some(port),
        server.attempts.first().map(|a| a.addr.port()),
        "the first candidate port"
    );
    ensure!(
        server
            .attempts
            .first()
            .is_some_and(|a| a.result.starts_with("in use")),
        "the taken first candidate is seen as in use",
        "attempts {tried:?}"
    );
    ensure!(
        server.addr.port() != port,
        "the harness retries on a new port",
        "the server runs on the taken port {port}; attempts {tried:?}"
    );
    let url = format!("ws://{}/", server.addr);
    let mut conn = Connection::over_ws(&ctx, "ws1", &url).await?;
    server.initialize(&mut conn).await?;
    drop(busy);
    drop(server.child);
    Ok(())
}

async fn ws_064b(ctx: Ctx) -> CheckResult {
    let server = start(&ctx, None).await?;
    let pid = server.child.pid();
    let url = format!("ws://{}/", server.addr);
    let mut conn = Connection::over_ws(&ctx, "ws1", &url).await?;
    server.initialize(&mut conn).await?;
    let terminations = ctx.ensure_torn_down(&[server.addr]).await?;
    ensure!(
        terminations.iter().any(|t| t.pid == pid),
        "the server's process group is among those torn down",
        "{:?}",
        terminations
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
    );
    let closed = conn
        .wait_closed(ctx.timeouts().scale(std::time::Duration::from_secs(2)))
        .await;
    if !closed {
        return Err(Failure::new(
            "the client transport is closed after teardown",
            "the client's WebSocket ends when the server loop is torn down",
        )
        .actual("it is still open")
        .into());
    }
    drop(server.child);
    Ok(())
}
