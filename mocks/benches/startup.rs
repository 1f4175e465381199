//! Benchmark `mock_agent`: spawn to `initialize` response, median over many runs, for
//! `ski-mock-agent`, for `ski acp serve` (when the `ski` binary has that subcommand) and for an
//! echo agent written with the official TypeScript SDK (when node and npm are present).
//!
//! Each run starts the process, writes one `initialize` request at once and stops the clock
//! when the first line of the response arrives; the process is then ended. A `cat` row (which
//! echoes the request line) gives the floor: what starting any process and one pipe round trip
//! cost on this machine at this moment. Rows go to
//! `$SKI_BENCH_DIR/rows/startup.json` in the `cargo xtask bench` row format; a peer that cannot
//! run is skipped with a note. `SKI_BENCH_RUNS` sets the number of runs (default 200).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};
use ski::transport::child::{ChildSpec, spawn};

mod support;

const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}"#;

/// The TypeScript SDK version the echo agent is written against.
const TS_SDK: &str = "@agentclientprotocol/sdk@2.4.0";

/// A minimal echo agent on the TypeScript SDK (ESM), written into the bench directory.
const TS_ECHO_AGENT: &str = r#"import { Readable, Writable } from "node:stream";
import { agent, methods, ndJsonStream } from "@agentclientprotocol/sdk";

let sessions = 0;
agent({ name: "ts-echo" })
  .onRequest(methods.agent.initialize, () => ({ protocolVersion: 1, agentCapabilities: { loadSession: false } }))
  .onRequest(methods.agent.session.new, () => ({ sessionId: `ts-${++sessions}` }))
  .onRequest(methods.agent.session.prompt, async (cx) => {
    const text = cx.params.prompt.filter((b) => b.type === "text").map((b) => b.text).join(" ");
    await cx.client.notify(methods.client.session.update, {
      sessionId: cx.params.sessionId,
      update: { sessionUpdate: "agent_message_chunk", content: { type: "text", text } },
    });
    return { stopReason: "end_turn" };
  })
  .connect(ndJsonStream(Writable.toWeb(process.stdout), Readable.toWeb(process.stdin)));
"#;

struct Peer {
    id: &'static str,
    name: &'static str,
    program: PathBuf,
    args: Vec<String>,
    cwd: Option<PathBuf>,
}

struct Figures {
    median: Duration,
    p90: Duration,
    min: Duration,
    runs: usize,
}

async fn once(peer: &Peer) -> Result<Duration> {
    let mut spec = ChildSpec::new(peer.id, &peer.program)
        .args(&peer.args)
        .grace(Duration::from_secs(2));
    if let Some(cwd) = &peer.cwd {
        spec = spec.cwd(cwd);
    }
    let started = Instant::now();
    let mut child = spawn(spec)?;
    child.send_line(INITIALIZE).await?;
    let line = tokio::time::timeout(Duration::from_secs(30), child.next_line())
        .await
        .context("no initialize response within 30 s")??;
    let elapsed = started.elapsed();
    let Some(line) = line else {
        bail!("{} closed stdout without answering initialize", peer.id);
    };
    if !line.contains("\"protocolVersion\"") {
        bail!("{} answered initialize with {line}", peer.id);
    }
    child.close_stdin();
    let _ = child.shutdown().await;
    Ok(elapsed)
}

async fn measure(peer: &Peer, runs: usize) -> Result<Figures> {
    for _ in 0..runs.min(5) {
        once(peer).await?;
    }
    let mut times = Vec::with_capacity(runs);
    for _ in 0..runs {
        times.push(once(peer).await?);
    }
    times.sort();
    Ok(Figures {
        median: times[times.len() / 2],
        p90: times[times.len() * 9 / 10],
        min: times[0],
        runs,
    })
}

async fn ski_peer(notes: &mut Vec<String>) -> Option<Peer> {
    match support::ski_binary().await {
        Ok(program) => Some(Peer {
            id: "ski-acp-serve",
            name: "spawn to initialize response: ski acp serve",
            program,
            args: vec!["acp".into(), "serve".into()],
            cwd: None,
        }),
        Err(error) => {
            notes.push(format!("ski acp serve skipped: {error}"));
            None
        }
    }
}

async fn ts_peer(bench: &Path, notes: &mut Vec<String>) -> Option<Peer> {
    let node = PathBuf::from("node");
    if !support::succeeds(&node, &["--version"], None).await {
        notes.push("typescript sdk echo agent skipped: node is not installed".to_owned());
        return None;
    }
    let dir = bench.join("ts-echo");
    if std::fs::create_dir_all(&dir).is_err() {
        notes.push(format!(
            "typescript sdk echo agent skipped: cannot create {}",
            dir.display()
        ));
        return None;
    }
    let installed = dir.join("node_modules/@agentclientprotocol/sdk/package.json");
    if !installed.exists() {
        let _ = std::fs::write(
            dir.join("package.json"),
            r#"{"name":"ski-bench-ts-echo","private":true,"type":"module"}"#,
        );
        let ok = support::succeeds(
            Path::new("npm"),
            &["install", "--no-audit", "--no-fund", "--silent", TS_SDK],
            Some(&dir),
        )
        .await;
        if !ok || !installed.exists() {
            notes.push(format!(
                "typescript sdk echo agent skipped: npm install {TS_SDK} failed"
            ));
            return None;
        }
    }
    let script = dir.join("echo-agent.mjs");
    if std::fs::write(&script, TS_ECHO_AGENT).is_err() {
        notes.push("typescript sdk echo agent skipped: cannot write the agent".to_owned());
        return None;
    }
    Some(Peer {
        id: "ts-sdk-echo",
        name: "spawn to initialize response: TypeScript SDK 2.4.0 echo agent (node)",
        program: node,
        args: vec![script.display().to_string()],
        cwd: Some(dir),
    })
}

fn millis(duration: Duration) -> String {
    format!("{:.2} ms", duration.as_secs_f64() * 1e3)
}

async fn run() -> Result<()> {
    let runs: usize = std::env::var("SKI_BENCH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|n| *n > 0)
        .unwrap_or(200);
    let bench = support::bench_dir()?;
    std::fs::create_dir_all(bench.join("rows"))
        .with_context(|| format!("cannot create {}", bench.display()))?;
    let mut notes = Vec::new();
    let mut peers = vec![Peer {
        id: "ski-mock-agent",
        name: "spawn to initialize response: ski-mock-agent",
        program: PathBuf::from(env!("CARGO_BIN_EXE_ski-mock-agent")),
        args: Vec::new(),
        cwd: None,
    }];
    peers.push(Peer {
        id: "cat-floor",
        name: "spawn to first line: cat (process start floor)",
        program: PathBuf::from("cat"),
        args: Vec::new(),
        cwd: None,
    });
    if let Some(peer) = ski_peer(&mut notes).await {
        peers.push(peer);
    }
    if let Some(peer) = ts_peer(&bench, &mut notes).await {
        peers.push(peer);
    }
    let has_ts = peers.iter().any(|p| p.id == "ts-sdk-echo");
    let mut rows: Vec<Value> = Vec::new();
    println!("mock_agent: spawn to initialize response, {runs} runs each");
    for peer in &peers {
        let figures = measure(peer, runs)
            .await
            .with_context(|| format!("benchmark of {} failed", peer.id))?;
        println!(
            "  {:<16} median {:>10}  p90 {:>10}  min {:>10}",
            peer.id,
            millis(figures.median),
            millis(figures.p90),
            millis(figures.min)
        );
        let mut row = json!({
            "group": "mock_agent",
            "name": peer.name,
            "id": peer.id,
            "median_ns": u64::try_from(figures.median.as_nanos()).unwrap_or(u64::MAX),
            "p90_ns": u64::try_from(figures.p90.as_nanos()).unwrap_or(u64::MAX),
            "min_ns": u64::try_from(figures.min.as_nanos()).unwrap_or(u64::MAX),
            "runs": figures.runs,
        });
        if has_ts && peer.id != "ts-sdk-echo" && peer.id != "cat-floor" {
            row["baseline"] = json!("ts-sdk-echo");
        }
        // ski's own programs are also compared with the process-start floor: the ratio is the
        // floor's median over theirs (1/1.5 = 0.67 means "within 1.5x of the floor").
        if peer.id.starts_with("ski") {
            let mut versus_floor = row.clone();
            versus_floor["name"] = json!(format!("{} (vs the cat floor)", peer.name));
            versus_floor["id"] = json!(format!("{}-vs-floor", peer.id));
            versus_floor["baseline"] = json!("cat-floor");
            rows.push(row);
            rows.push(versus_floor);
            continue;
        }
        rows.push(row);
    }
    for note in &notes {
        println!("  note: {note}");
    }
    support::write_rows("startup", &rows, &notes)
}

fn main() -> Result<()> {
    // `cargo bench` passes `--bench`; `cargo test --benches` runs this target too, and then it
    // only checks that one run works.
    let quick = !std::env::args().any(|arg| arg == "--bench");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    if quick {
        return runtime.block_on(async {
            let peer = Peer {
                id: "ski-mock-agent",
                name: "",
                program: PathBuf::from(env!("CARGO_BIN_EXE_ski-mock-agent")),
                args: Vec::new(),
                cwd: None,
            };
            let elapsed = once(&peer).await?;
            println!("mock_agent: one run took {}", millis(elapsed));
            Ok(())
        });
    }
    runtime.block_on(run())
}
