//! Client rows on WebSocket reconnect (E-ACP-13): the runner serves the client on loopback
//! through a scripted peer that bridges each WebSocket connection to one `ski-mock-agent`
//! process (so sessions outlive connections) and drops the first connection at a chosen moment.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures::{SinkExt, StreamExt};
use serde_json::Value;
use ski::transport::child::ChildSpec;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_tungstenite::tungstenite::Message;

use super::mock::{Mock, method_of, on_prompt, start_client};
use crate::check::{Check, CheckError, CheckResult};
use crate::context::Ctx;
use crate::vocabulary::acp;
use crate::{ensure, ensure_eq, fail};

/// The reconnect delay cap of E-ACP-13.
const CAP: Duration = Duration::from_secs(3);

/// The checks of this module.
pub fn checks() -> Vec<Check> {
    vec![
        Check::new(
            "WS-004",
            "The runner's WebSocket peer closes the client's first connection after reading the \
             first session/prompt, before answering; the client must reconnect after at least \
             the base delay and at most the 3 s cap, initialize again, resend the prompt and \
             report end_turn.",
            ws_004,
        ),
        Check::new(
            "WS-017",
            "Two runs against the runner's scripted WebSocket peer on loopback: it closes the first \
             connection right after the upgrade, and after reading the first request; each time \
             the client must reconnect within [base delay, cap], initialize first on the new \
             connection and finish the turn end_turn.",
            ws_017,
        ),
    ]
}

/// When the peer drops the first connection.
#[derive(Debug, Clone, Copy)]
enum Cut {
    /// Right after the upgrade, before reading anything.
    AfterUpgrade,
    /// On the first frame (not forwarded).
    FirstFrame,
    /// On the first frame with this method (not forwarded).
    OnMethod(&'static str),
}

/// What the peer saw of each connection.
#[derive(Debug, Default)]
struct Seen {
    /// Per connection: when it was accepted, when it was dropped, the methods read.
    connections: Vec<(Instant, Option<Instant>, Vec<String>)>,
}

async fn scenario(ctx: &Ctx, run_name: &str, drop_at: Cut) -> CheckResult {
    let base = match ctx.setting(&acp::RECONNECT_BASE_DELAY_MS)? {
        Some(ms) => Duration::from_millis(ms.parse().map_err(|_| {
            CheckError::Harness(format!(
                "settings.reconnect_base_delay_ms {ms:?} is no number"
            ))
        })?),
        None => Duration::from_millis(200),
    };
    let mock = Mock::new(
        ctx,
        run_name,
        &on_prompt(&["{ turn = \"after reconnect\" }"]),
        &[],
    )?;
    let spec = ChildSpec::from_argv(format!("{run_name}-mock"), &mock.argv)
        .ok_or_else(|| CheckError::Harness("empty mock command".into()))?;
    let mut agent = ctx.spawn(spec)?;
    let mut stdin = agent.take_stdin().map_err(CheckError::harness)?;
    let stdout = agent.take_stdout().map_err(CheckError::harness)?;
    let (line_tx, mut lines) = mpsc::unbounded_channel::<String>();
    tokio::spawn(async move {
        let mut reader = BufReader::new(stdout).lines();
        while let Ok(Some(line)) = reader.next_line().await {
            if line_tx.send(line).is_err() {
                break;
            }
        }
    });
    let listener = ctx.bind_loopback().await?;
    let addr = listener.local_addr()?;
    let seen = Arc::new(Mutex::new(Seen::default()));
    let peer_seen = seen.clone();
    let peer = tokio::spawn(async move {
        let mut index = 0usize;
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                return;
            };
            let Ok(mut ws) = tokio_tungstenite::accept_async(tcp).await else {
                continue;
            };
            let first = index == 0;
            index += 1;
            let record = |f: &dyn Fn(&mut Seen)| {
                f(&mut peer_seen.lock().unwrap_or_else(PoisonError::into_inner));
            };
            record(&|s| s.connections.push((Instant::now(), None, Vec::new())));
            let conn = index - 1;
            let dropped = |s: &mut Seen| {
                if let Some(c) = s.connections.get_mut(conn) {
                    c.1 = Some(Instant::now());
                }
            };
            if first && matches!(drop_at, Cut::AfterUpgrade) {
                record(&dropped);
                drop(ws);
                continue;
            }
            loop {
                tokio::select! {
                    frame = ws.next() => {
                        let Some(Ok(frame)) = frame else { break };
                        let Message::Text(text) = frame else { continue };
                        let text = text.to_string();
                        let method = serde_json::from_str::<Value>(&text)
                            .ok()
                            .and_then(|v| method_of(&v).map(str::to_owned))
                            .unwrap_or_default();
                        record(&|s| {
                            if let Some(c) = s.connections.get_mut(conn) {
                                c.2.push(method.clone());
                            }
                        });
                        let cut = first && match drop_at {
                            Cut::FirstFrame => true,
                            Cut::OnMethod(m) => method == m,
                            Cut::AfterUpgrade => false,
                        };
                        if cut {
                            record(&dropped);
                            break;
                        }
                        if stdin.write_all(format!("{text}\n").as_bytes()).await.is_err()
                            || stdin.flush().await.is_err()
                        {
                            return;
                        }
                    }
                    line = lines.recv() => {
                        let Some(line) = line else { return };
                        if ws.send(Message::text(line)).await.is_err() {
                            break;
                        }
                    }
                }
            }
            drop(ws);
        }
    });
    let url = format!("ws://{addr}/");
    let client = start_client(
        ctx,
        "client_ws",
        &mock,
        &[("url", &url), ("prompt", "hello")],
    )?;
    let run = client.finish(ctx, &mock).await;
    peer.abort();
    let _ = peer.await;
    drop(agent);
    let run = run?;
    let seen = std::mem::take(&mut *seen.lock().unwrap_or_else(PoisonError::into_inner));
    let report = seen
        .connections
        .iter()
        .map(|(_, d, m)| format!("{m:?}{}", if d.is_some() { " dropped" } else { "" }))
        .collect::<Vec<_>>()
        .join("; ");
    run.expect_turns(
        &["end_turn"],
        &format!("{run_name}: the turn completes after the reconnect"),
    )?;
    ensure!(
        seen.connections.len() >= 2,
        format!("{run_name}: the client reconnects"),
        "connections: {report}"
    );
    let (_, dropped, _) = &seen.connections[0];
    let (accepted, _, methods) = &seen.connections[1];
    let Some(dropped) = dropped else {
        fail!(
            format!("{run_name}: the first connection is dropped"),
            "connections: {report}"
        );
    };
    let delay = accepted.saturating_duration_since(*dropped);
    let slack = Duration::from_millis(5);
    ensure!(
        delay + slack >= base,
        format!("{run_name}: the reconnect waits at least the base delay {base:?}"),
        "it reconnected after {delay:?}"
    );
    let cap = ctx.timeouts().scale(CAP) + ctx.timeouts().scale(Duration::from_millis(500));
    ensure!(
        delay <= cap,
        format!("{run_name}: the reconnect comes within the backoff cap"),
        "it reconnected after {delay:?} (limit {cap:?})"
    );
    ensure_eq!(
        Some("initialize"),
        methods.first().map(String::as_str),
        "{run_name}: the first request on the new connection"
    );
    ensure!(
        methods.iter().any(|m| m == "session/prompt"),
        format!("{run_name}: the prompt is sent on the new connection"),
        "connections: {report}"
    );
    Ok(())
}

async fn ws_004(ctx: Ctx) -> CheckResult {
    scenario(&ctx, "prompt-cut", Cut::OnMethod("session/prompt")).await
}

async fn ws_017(ctx: Ctx) -> CheckResult {
    scenario(&ctx, "after-upgrade", Cut::AfterUpgrade).await?;
    scenario(&ctx, "first-request", Cut::FirstFrame).await
}
