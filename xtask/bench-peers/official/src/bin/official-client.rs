//! The benchmark client on the official Rust SDK. It connects to an agent (spawning it for
//! stdio, or over WebSocket), runs `initialize` and `session/new`, then the measurement that
//! ski's benchmark runs with its own client: `--warmup` untimed prompts, `--prompts` sequential
//! prompts timed one by one (each answered with one update), and one prompt with
//! `_meta.ski.floodChunks` set to `--flood`, timed until its result, with its updates counted.
//! It prints the figures as one JSON object on stdout:
//! `{"round_trips_ns": [...], "round_trip_updates": N, "flood_ns": N, "flood_updates": N}`.
//!
//! Usage: `official-client (--cmd PROG [ARGS...] | --endpoint ws://HOST:PORT/acp)
//! --prompts N --warmup N --flood N --text TEXT` (`--cmd` takes the rest of the line).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::schema::{
    ContentBlock, InitializeRequest, NewSessionRequest, PromptRequest, SessionNotification,
    SessionUpdate, StopReason,
};
use agent_client_protocol::{AcpAgent, Client, ConnectTo, on_receive_notification};
use anyhow::{Context, Result, bail};
use serde_json::json;
use ski_bench_official::ws_lines;

struct Options {
    prompts: usize,
    warmup: usize,
    flood: u64,
    text: String,
}

#[tokio::main]
async fn main() -> Result<()> {
    let mut args = std::env::args().skip(1);
    let mut options = Options {
        prompts: 1000,
        warmup: 50,
        flood: 100_000,
        text: "x".repeat(64),
    };
    let mut cmd = Vec::new();
    let mut endpoint = None;
    while let Some(arg) = args.next() {
        let mut value = |name: &str| args.next().with_context(|| format!("{name} needs a value"));
        match arg.as_str() {
            "--prompts" => options.prompts = value("--prompts")?.parse()?,
            "--warmup" => options.warmup = value("--warmup")?.parse()?,
            "--flood" => options.flood = value("--flood")?.parse()?,
            "--text" => options.text = value("--text")?,
            "--endpoint" => endpoint = Some(value("--endpoint")?),
            "--cmd" => {
                cmd = args.by_ref().collect();
            }
            other => bail!("unknown argument {other:?}"),
        }
    }
    let figures = match (endpoint, cmd.is_empty()) {
        (Some(url), true) => {
            let (ws, _) = tokio_tungstenite::connect_async(url.as_str())
                .await
                .with_context(|| format!("cannot connect to {url}"))?;
            measure(ws_lines(ws), &options).await?
        }
        (None, false) => {
            let agent = AcpAgent::from_args(cmd).map_err(|e| anyhow::anyhow!("{e}"))?;
            measure(agent, &options).await?
        }
        _ => bail!("give either --cmd PROG [ARGS...] or --endpoint URL"),
    };
    println!("{figures}");
    Ok(())
}

async fn measure(
    transport: impl ConnectTo<Client> + 'static,
    options: &Options,
) -> Result<serde_json::Value> {
    let chunks = Arc::new(AtomicU64::new(0));
    let counter = chunks.clone();
    Client
        .v1()
        .name("ski-bench-official-client")
        .on_receive_notification(
            async move |notification: SessionNotification, _cx| {
                if let SessionUpdate::AgentMessageChunk(_) = notification.update {
                    counter.fetch_add(1, Ordering::Relaxed);
                }
                Ok(())
            },
            on_receive_notification!(),
        )
        .connect_with(transport, async |cx| {
            cx.send_request(InitializeRequest::new(ProtocolVersion::V1))
                .block_task()
                .await?;
            let cwd = std::env::current_dir()
                .map_err(agent_client_protocol::Error::into_internal_error)?;
            let session = cx
                .send_request(NewSessionRequest::new(cwd))
                .block_task()
                .await?
                .session_id;
            let prompt = |meta: Option<serde_json::Value>| {
                let mut request = PromptRequest::new(
                    session.clone(),
                    vec![ContentBlock::from(options.text.clone())],
                );
                request.meta = meta.and_then(|meta| meta.as_object().cloned());
                request
            };
            for _ in 0..options.warmup {
                cx.send_request(prompt(None)).block_task().await?;
            }
            let before = chunks.load(Ordering::Relaxed);
            let mut round_trips = Vec::with_capacity(options.prompts);
            for _ in 0..options.prompts {
                let start = Instant::now();
                let response = cx.send_request(prompt(None)).block_task().await?;
                round_trips.push(start.elapsed().as_nanos() as u64);
                if response.stop_reason != StopReason::EndTurn {
                    return Err(agent_client_protocol::Error::internal_error()
                        .data("a prompt did not end with end_turn"));
                }
            }
            let round_trip_updates = chunks.load(Ordering::Relaxed) - before;
            let before = chunks.load(Ordering::Relaxed);
            let start = Instant::now();
            cx.send_request(prompt(Some(json!({"ski": {"floodChunks": options.flood}}))))
                .block_task()
                .await?;
            let flood_ns = start.elapsed().as_nanos() as u64;
            let flood_updates = chunks.load(Ordering::Relaxed) - before;
            Ok(json!({
                "round_trips_ns": round_trips,
                "round_trip_updates": round_trip_updates,
                "flood_ns": flood_ns,
                "flood_updates": flood_updates,
            }))
        })
        .await
        .map_err(|error| anyhow::anyhow!("{error}"))
}
