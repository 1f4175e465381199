//! ACP end to end: ski's client and reference agent against an agent and a client written with
//! the official Rust SDK (`agent-client-protocol`), over stdio and WebSocket.
//!
//! Each pair gets the same measurement: spawn the agent, `initialize`, `session/new`, some
//! untimed prompts, then [`PROMPTS`] sequential prompts timed one by one (each answered with one
//! `agent_message_chunk`), then one prompt with `_meta.ski.floodChunks` = [`FLOOD`], timed until
//! its result and every update consumed. Ours runs in this process, as a task (as in an
//! application, and as `ski acp client` runs it), on `ski::acp::client` against
//! `ski acp serve --turn-updates message --permission-mode disabled`; the official pair runs as
//! the `official-client` and `official-agent` programs of `xtask/bench-peers/official`, which
//! `cargo xtask bench` builds (outside the workspace) and names in `SKI_BENCH_OFFICIAL_BIN_DIR`;
//! the official client prints the same figures as JSON. Rounds alternate between the pairs.
//!
//! Rows (group `acp`): round trips per second with p50/p99 latency, and flood updates per second
//! with the median flood time, each of ours with the official pair as its baseline.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};
use serde_json::{Value, json};
use ski::acp::client::{Client, ClientConfig};
use ski::acp::{NewSessionRequest, PromptRequest, SessionUpdate, StopReason};
use ski::jsonrpc::Transport;
use ski::transport::child::{self, Child, ChildSpec};
use ski::transport::ws_client::WsConnector;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// Timed sequential prompts per round.
const PROMPTS: usize = 2000;
/// Untimed prompts before them.
const WARMUP: usize = 100;
/// Updates of the flood prompt.
const FLOOD: u64 = 100_000;
/// Rounds per pair and transport (the pairs alternate).
const ROUNDS: usize = 3;
/// The text of every prompt, echoed in every update: 64 characters.
const TEXT: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

/// What one round measured.
#[derive(Debug, Default)]
struct Figures {
    round_trips_ns: Vec<u64>,
    round_trip_updates: u64,
    flood_ns: u64,
    flood_updates: u64,
}

impl Figures {
    fn from_json(value: &Value) -> Result<Self> {
        let number = |key: &str| {
            value[key]
                .as_u64()
                .with_context(|| format!("official client output has no {key}: {value}"))
        };
        Ok(Figures {
            round_trips_ns: value["round_trips_ns"]
                .as_array()
                .context("official client output has no round_trips_ns")?
                .iter()
                .filter_map(Value::as_u64)
                .collect(),
            round_trip_updates: number("round_trip_updates")?,
            flood_ns: number("flood_ns")?,
            flood_updates: number("flood_updates")?,
        })
    }

    /// Checks that the round did what it was asked: every prompt and every update.
    fn check(&self, pair: &str) -> Result<()> {
        if self.round_trips_ns.len() != PROMPTS || self.round_trip_updates != PROMPTS as u64 {
            bail!(
                "{pair}: {} round trips with {} updates, expected {PROMPTS} with one update each",
                self.round_trips_ns.len(),
                self.round_trip_updates
            );
        }
        if self.flood_updates != FLOOD {
            bail!(
                "{pair}: the flood delivered {} updates, expected {FLOOD}",
                self.flood_updates
            );
        }
        Ok(())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Wire {
    Stdio,
    Ws,
}

impl Wire {
    fn name(self) -> &'static str {
        match self {
            Wire::Stdio => "stdio",
            Wire::Ws => "ws",
        }
    }
}

fn main() -> Result<()> {
    // `cargo bench` passes `--bench`; a plain `cargo test --benches` passes nothing and only
    // checks that this target builds.
    if !std::env::args().any(|arg| arg == "--bench") {
        return Ok(());
    }
    let official = official_bin_dir()?;
    let ski = PathBuf::from(env!("CARGO_BIN_EXE_ski"));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let mut rows = Vec::new();
    for wire in [Wire::Stdio, Wire::Ws] {
        let mut ours = Vec::new();
        let mut theirs = Vec::new();
        for round in 0..ROUNDS {
            // Like an application (and `ski acp client`), the client code runs as a task.
            let figures = runtime.block_on(async {
                tokio::spawn(ours_round(ski.clone(), wire))
                    .await
                    .context("the measuring task failed")?
            })?;
            figures.check("ski pair")?;
            let other = runtime.block_on(official_round(&official, wire))?;
            other.check("official pair")?;
            eprintln!(
                "acp {} round {}: ski {:.0} rt/s, {:.0} flood msgs/s; official {:.0} rt/s, {:.0} flood msgs/s",
                wire.name(),
                round + 1,
                round_trips_per_s(std::slice::from_ref(&figures)),
                FLOOD as f64 / (figures.flood_ns as f64 / 1e9),
                round_trips_per_s(std::slice::from_ref(&other)),
                FLOOD as f64 / (other.flood_ns as f64 / 1e9),
            );
            ours.push(figures);
            theirs.push(other);
        }
        rows.extend(wire_rows(wire, &ours, &theirs));
    }
    write_rows(&rows)
}

/// The directory of `official-agent` and `official-client`.
fn official_bin_dir() -> Result<PathBuf> {
    let dir = std::env::var_os("SKI_BENCH_OFFICIAL_BIN_DIR").map(PathBuf::from).context(
        "SKI_BENCH_OFFICIAL_BIN_DIR is not set; run this benchmark through `cargo xtask bench`, which builds the official-SDK peers",
    )?;
    for program in ["official-agent", "official-client"] {
        if !dir.join(program).is_file() {
            bail!(
                "{} has no {program}; run `cargo xtask bench`",
                dir.display()
            );
        }
    }
    Ok(dir)
}

/// The rows of one transport: round trips and flood, ours with the official pair as baseline.
fn wire_rows(wire: Wire, ours: &[Figures], theirs: &[Figures]) -> Vec<Value> {
    let name = wire.name();
    let mut rows = Vec::new();
    for (side, figures, baseline) in [
        ("ski client + ski agent", ours, Some("official")),
        ("official SDK client + agent", theirs, None),
    ] {
        let id_side = if baseline.is_some() {
            "ski"
        } else {
            "official"
        };
        let mut latencies: Vec<u64> = figures
            .iter()
            .flat_map(|f| f.round_trips_ns.iter().copied())
            .collect();
        latencies.sort_unstable();
        let mut round_trip = json!({
            "group": "acp",
            "name": format!("round trips {name}: {side}"),
            "id": format!("rt-{name}-{id_side}"),
            "median_ns": percentile(&latencies, 0.50),
            "p50_ns": percentile(&latencies, 0.50),
            "p99_ns": percentile(&latencies, 0.99),
            "messages": latencies.len(),
            "msgs_per_s": round_trips_per_s(figures),
        });
        let mut floods: Vec<u64> = figures.iter().map(|f| f.flood_ns).collect();
        floods.sort_unstable();
        let flood_median = percentile(&floods, 0.50);
        let mut flood = json!({
            "group": "acp",
            "name": format!("flood {name}: {side}"),
            "id": format!("flood-{name}-{id_side}"),
            "median_ns": flood_median,
            "messages": FLOOD,
            "msgs_per_s": FLOOD as f64 / (flood_median as f64 / 1e9),
        });
        if let Some(baseline) = baseline {
            round_trip["baseline"] = json!(format!("rt-{name}-{baseline}"));
            flood["baseline"] = json!(format!("flood-{name}-{baseline}"));
        }
        rows.push(round_trip);
        rows.push(flood);
    }
    rows
}

/// Sequential round trips per second over every round: prompts over their summed latency.
fn round_trips_per_s(figures: &[Figures]) -> f64 {
    let count: usize = figures.iter().map(|f| f.round_trips_ns.len()).sum();
    let total: u64 = figures.iter().flat_map(|f| f.round_trips_ns.iter()).sum();
    count as f64 / (total as f64 / 1e9)
}

/// The value at quantile `q` of sorted values (nearest rank).
fn percentile(sorted: &[u64], q: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = ((sorted.len() as f64 * q).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

fn write_rows(rows: &[Value]) -> Result<()> {
    let dir = std::env::var_os("SKI_BENCH_DIR")
        .map(PathBuf::from)
        .context("SKI_BENCH_DIR is not set; run this benchmark through `cargo xtask bench`")?
        .join("rows");
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let path = dir.join("acp.json");
    std::fs::write(
        &path,
        serde_json::to_string_pretty(&json!({ "rows": rows }))?,
    )
    .with_context(|| format!("cannot write {}", path.display()))?;
    for row in rows {
        eprintln!("{row}");
    }
    Ok(())
}

/// One round of our pair: `ski acp serve` driven by `ski::acp::client`.
async fn ours_round(ski: PathBuf, wire: Wire) -> Result<Figures> {
    let mut args = vec![
        "acp",
        "serve",
        "--turn-updates",
        "message",
        "--permission-mode",
        "disabled",
        "--log-level",
        "warn",
    ];
    if wire == Wire::Ws {
        args.extend(["--transport", "ws", "--listen", "127.0.0.1:0"]);
    }
    let spec = ChildSpec::new("ski-agent", &ski).args(&args);
    let mut child = child::spawn(spec).context("cannot start ski acp serve")?;
    let client = match wire {
        Wire::Stdio => {
            let stdin = child.take_stdin()?;
            let stdout = child.take_stdout()?;
            let agent = Supervisor::start(child);
            let client = Client::over(Transport::bytes(stdout, stdin), ClientConfig::default());
            (client, agent)
        }
        Wire::Ws => {
            let url = listening_url(&mut child).await?;
            let agent = Supervisor::start(child);
            let connector = WsConnector::new(url)?;
            let client = Client::connect(Arc::new(connector), ClientConfig::default()).await?;
            (client, agent)
        }
    };
    let (client, agent) = client;
    let figures = measure_ours(&client).await;
    client.close().await;
    agent.stop().await;
    figures
}

/// The measurement of [`Figures`] with `ski::acp::client`.
async fn measure_ours(client: &Client) -> Result<Figures> {
    client.initialize().await?;
    let cwd = std::env::current_dir()?;
    let session = client
        .new_session(&NewSessionRequest::new(cwd.display().to_string()))
        .await?
        .session_id;
    let mut updates = client.follow(&session);
    let prompt = |meta: Option<Value>| {
        let mut request = PromptRequest::text(&session, TEXT);
        if let Some(Value::Object(meta)) = meta {
            request.extra.set_meta(meta);
        }
        request
    };
    let mut chunks = 0u64;
    let count = |updates: &mut ski::acp::client::SessionUpdates| {
        let mut seen = 0;
        while let Some(notification) = updates.try_next() {
            if let SessionUpdate::AgentMessageChunk(_) = notification.update {
                seen += 1;
            }
        }
        seen
    };
    for _ in 0..WARMUP {
        client.prompt(&prompt(None)).await?;
    }
    count(&mut updates);
    let mut figures = Figures {
        round_trips_ns: Vec::with_capacity(PROMPTS),
        ..Figures::default()
    };
    for _ in 0..PROMPTS {
        let start = Instant::now();
        let response = client.prompt(&prompt(None)).await?;
        chunks += count(&mut updates);
        figures.round_trips_ns.push(elapsed_ns(start));
        if response.stop_reason != StopReason::EndTurn {
            bail!("a prompt ended with {:?}", response.stop_reason);
        }
    }
    figures.round_trip_updates = chunks;
    // The flood's updates are taken while it runs, as a client must: a follower that takes
    // none makes the client stop reading the agent once its hand-off is full.
    let start = Instant::now();
    let flood_request = prompt(Some(json!({"ski": {"floodChunks": FLOOD}})));
    let flood = client.prompt(&flood_request);
    tokio::pin!(flood);
    let mut flood_updates = 0;
    loop {
        tokio::select! {
            biased;
            result = &mut flood => {
                result?;
                break;
            }
            Some(notification) = updates.next() => {
                if let SessionUpdate::AgentMessageChunk(_) = notification.update {
                    flood_updates += 1;
                }
            }
        }
    }
    figures.flood_updates = flood_updates + count(&mut updates);
    figures.flood_ns = elapsed_ns(start);
    Ok(figures)
}

/// One round of the official pair, measured by `official-client`.
async fn official_round(bin: &Path, wire: Wire) -> Result<Figures> {
    let mut command = tokio::process::Command::new(bin.join("official-client"));
    command
        .args(["--prompts", &PROMPTS.to_string()])
        .args(["--warmup", &WARMUP.to_string()])
        .args(["--flood", &FLOOD.to_string()])
        .args(["--text", TEXT])
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .kill_on_drop(true);
    let agent = match wire {
        Wire::Stdio => {
            command.arg("--agent-cmd").arg(bin.join("official-agent"));
            None
        }
        Wire::Ws => {
            let spec = ChildSpec::new("official-agent", bin.join("official-agent")).arg("--ws");
            let mut child = child::spawn(spec).context("cannot start official-agent --ws")?;
            let url = listening_url(&mut child).await?;
            command.args(["--endpoint", &url]);
            Some(Supervisor::start(child))
        }
    };
    let output = command
        .output()
        .await
        .context("cannot run official-client")?;
    if let Some(agent) = agent {
        agent.stop().await;
    }
    if !output.status.success() {
        bail!("official-client failed: {}", output.status);
    }
    let value: Value = serde_json::from_slice(&output.stdout)
        .map_err(|error| anyhow!("official-client printed no figures: {error}"))?;
    Figures::from_json(&value)
}

/// Reads the agent's stderr until it says where it listens.
async fn listening_url(child: &mut Child) -> Result<String> {
    let wait = async {
        while let Some(line) = child.next_stderr_line().await {
            if let Some(url) = line.split("listening on ").nth(1) {
                return Ok(url.trim().to_owned());
            }
        }
        bail!("the agent ended without saying where it listens")
    };
    tokio::time::timeout(Duration::from_secs(30), wait)
        .await
        .context("the agent did not start listening within 30 s")?
}

/// A spawned agent: its stderr passed through until it is stopped as a process group.
struct Supervisor {
    stop: oneshot::Sender<()>,
    task: JoinHandle<()>,
}

impl Supervisor {
    fn start(mut child: Child) -> Self {
        let (stop, mut stopped) = oneshot::channel();
        let task = tokio::spawn(async move {
            let mut stderr_open = true;
            loop {
                tokio::select! {
                    biased;
                    _ = &mut stopped => break,
                    line = child.next_stderr_line(), if stderr_open => match line {
                        Some(line) => eprintln!("{line}"),
                        None => stderr_open = false,
                    },
                }
            }
            if let Err(error) = child.shutdown().await {
                eprintln!("ending the agent failed: {error}");
            }
        });
        Supervisor { stop, task }
    }

    async fn stop(self) {
        let _ = self.stop.send(());
        let _ = self.task.await;
    }
}

fn elapsed_ns(start: Instant) -> u64 {
    u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX)
}
