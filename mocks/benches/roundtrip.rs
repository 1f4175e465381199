//! Benchmark `roundtrip`: sequential ACP prompt round trips over stdio as a ratio of the pipe
//! and syscall floor.
//!
//! The meter is this program: it writes one `session/prompt` line and reads with blocking I/O
//! until its response, the agent answering each prompt with one `agent_message_chunk` first.
//! The floor is a zero-work canned responder, also this program (started with
//! `SKI_BENCH_CANNED_RESPONDER=1`): blocking reads, the request id copied into canned lines, one
//! write per answer. Against it run `ski acp serve --turn-updates message` and `ski-mock-agent`
//! (its `echo` script). Every agent is measured twice: pinned, meter and agent on one core
//! (`sched_setaffinity`, inherited by the agent), so the figure is the CPU cost of a round trip;
//! and unpinned, as a user runs them. Rounds alternate between the agents.
//!
//! Rows (group `stdio`): round trips per second with p50/p99 latency, each agent with the canned
//! responder of the same placement as its baseline (the ratio is the fraction of the floor).
//! `SKI_BENCH_PROMPTS` sets the timed prompts per round (default 5000).

mod support;

use std::fs::File;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::fd::OwnedFd;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use nix::sched::{CpuSet, sched_getaffinity, sched_setaffinity};
use nix::unistd::Pid;
use serde_json::{Value, json};
use ski::transport::child::{Child, ChildSpec, spawn};

/// Untimed prompts before the timed ones.
const WARMUP: usize = 200;
/// Rounds per agent and placement (the agents alternate).
const ROUNDS: usize = 3;
/// The text of every prompt: 64 characters.
const TEXT: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

/// Where the meter and the agent run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Placement {
    Pinned,
    Unpinned,
}

impl Placement {
    fn name(self) -> &'static str {
        match self {
            Placement::Pinned => "pinned",
            Placement::Unpinned => "unpinned",
        }
    }
}

/// One agent under measurement.
struct Agent {
    id: &'static str,
    name: &'static str,
    program: PathBuf,
    args: Vec<String>,
    env: Vec<(&'static str, &'static str)>,
}

fn main() -> Result<()> {
    if std::env::var_os("SKI_BENCH_CANNED_RESPONDER").is_some() {
        return canned_responder();
    }
    // `cargo bench` passes `--bench`; `cargo test --benches` runs this target too, and then it
    // only checks that a short round works against every agent.
    let quick = !std::env::args().any(|arg| arg == "--bench");
    let prompts = if quick {
        20
    } else {
        std::env::var("SKI_BENCH_PROMPTS")
            .ok()
            .and_then(|text| text.parse().ok())
            .unwrap_or(5000)
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let _context = runtime.enter();
    let agents = agents(&runtime, quick)?;
    let all_cpus = sched_getaffinity(Pid::from_raw(0)).context("reading this thread's cpus")?;
    let mut rows = Vec::new();
    for placement in [Placement::Pinned, Placement::Unpinned] {
        match placement {
            Placement::Pinned => {
                let mut one = CpuSet::new();
                one.set(first_cpu(&all_cpus)?)?;
                sched_setaffinity(Pid::from_raw(0), &one).context("pinning to one cpu")?;
            }
            Placement::Unpinned => {
                sched_setaffinity(Pid::from_raw(0), &all_cpus).context("unpinning")?;
            }
        }
        let mut figures: Vec<Vec<u64>> = vec![Vec::new(); agents.len()];
        for round in 0..if quick { 1 } else { ROUNDS } {
            for (agent, latencies) in agents.iter().zip(&mut figures) {
                let round_figures = measure(&runtime, agent, prompts)?;
                eprintln!(
                    "stdio {} round {}: {} {:.0} rt/s",
                    placement.name(),
                    round + 1,
                    agent.id,
                    per_second(&round_figures)
                );
                latencies.extend(round_figures);
            }
        }
        if quick {
            continue;
        }
        for (agent, latencies) in agents.iter().zip(&mut figures) {
            rows.push(row(agent, placement, latencies));
        }
    }
    sched_setaffinity(Pid::from_raw(0), &all_cpus).context("unpinning")?;
    if quick {
        println!("roundtrip: every agent answered {prompts} prompts");
        return Ok(());
    }
    support::write_rows("roundtrip", &rows, &[])
}

fn first_cpu(set: &CpuSet) -> Result<usize> {
    (0..CpuSet::count())
        .find(|&cpu| set.is_set(cpu).unwrap_or(false))
        .context("this thread may run on no cpu")
}

/// The canned responder, this program's own path, then the agents under test (a quick check
/// leaves out `ski acp serve`, whose binary another package builds).
fn agents(runtime: &tokio::runtime::Runtime, quick: bool) -> Result<Vec<Agent>> {
    let mut agents = vec![
        Agent {
            id: "canned",
            name: "canned responder (zero work, blocking i/o)",
            program: std::env::current_exe().context("the bench's own path")?,
            args: Vec::new(),
            env: vec![("SKI_BENCH_CANNED_RESPONDER", "1")],
        },
        Agent {
            id: "ski-mock-agent",
            name: "ski-mock-agent (echo script)",
            program: PathBuf::from(env!("CARGO_BIN_EXE_ski-mock-agent")),
            args: Vec::new(),
            env: Vec::new(),
        },
    ];
    if quick {
        return Ok(agents);
    }
    let ski = runtime
        .block_on(support::ski_binary())
        .context("the ski binary is needed for `ski acp serve`")?;
    agents.insert(
        1,
        Agent {
            id: "ski-acp-serve",
            name: "ski acp serve --turn-updates message",
            program: ski,
            args: [
                "acp",
                "serve",
                "--turn-updates",
                "message",
                "--permission-mode",
                "disabled",
                "--log-level",
                "warn",
            ]
            .map(String::from)
            .to_vec(),
            env: Vec::new(),
        },
    );
    Ok(agents)
}

fn row(agent: &Agent, placement: Placement, latencies: &mut [u64]) -> Value {
    latencies.sort_unstable();
    let place = placement.name();
    let mut row = json!({
        "group": "stdio",
        "name": format!("round trips {place}: {}", agent.name),
        "id": format!("rt-{place}-{}", agent.id),
        "median_ns": percentile(latencies, 0.50),
        "p50_ns": percentile(latencies, 0.50),
        "p99_ns": percentile(latencies, 0.99),
        "messages": latencies.len(),
        "msgs_per_s": per_second(latencies),
    });
    if agent.id != "canned" {
        row["baseline"] = json!(format!("rt-{place}-canned"));
    }
    row
}

/// Sequential round trips per second: prompts over their summed latency.
fn per_second(latencies: &[u64]) -> f64 {
    let total: u64 = latencies.iter().sum();
    latencies.len() as f64 / (total as f64 / 1e9)
}

/// The agent's stdin and stdout as blocking files.
struct Pipes {
    to_agent: File,
    from_agent: BufReader<File>,
    line: String,
}

impl Pipes {
    fn take(child: &mut Child) -> Result<Self> {
        let stdin: OwnedFd = child.take_stdin()?.into_inner().into_owned_fd()?;
        let stdout: OwnedFd = child.take_stdout()?.into_inner().into_owned_fd()?;
        for fd in [&stdin, &stdout] {
            let flags = nix::fcntl::fcntl(fd, nix::fcntl::FcntlArg::F_GETFL)?;
            let mut flags = nix::fcntl::OFlag::from_bits_truncate(flags);
            flags.remove(nix::fcntl::OFlag::O_NONBLOCK);
            nix::fcntl::fcntl(fd, nix::fcntl::FcntlArg::F_SETFL(flags))?;
        }
        Ok(Self {
            to_agent: File::from(stdin),
            from_agent: BufReader::with_capacity(64 * 1024, File::from(stdout)),
            line: String::with_capacity(4096),
        })
    }

    /// Writes `request` and reads lines until the response to `id`; returns how many
    /// `session/update` notifications came before it.
    fn call(&mut self, request: &[u8], id: &str) -> Result<u64> {
        self.to_agent.write_all(request)?;
        let mut updates = 0;
        loop {
            self.line.clear();
            if self.from_agent.read_line(&mut self.line)? == 0 {
                bail!("the agent closed stdout before answering request {id}");
            }
            if self.line.contains("\"session/update\"") {
                updates += 1;
            } else if self.line.contains(id) {
                if self.line.contains("\"error\"") {
                    bail!("request {id} failed: {}", self.line.trim_end());
                }
                return Ok(updates);
            }
        }
    }
}

/// One round: start the agent, set up a session, time `prompts` sequential prompts.
fn measure(runtime: &tokio::runtime::Runtime, agent: &Agent, prompts: usize) -> Result<Vec<u64>> {
    let mut spec = ChildSpec::new(agent.id, &agent.program)
        .args(&agent.args)
        .grace(Duration::from_secs(2));
    for (key, value) in &agent.env {
        spec = spec.env(key, value);
    }
    let mut child = spawn(spec)?;
    let result = measure_child(&mut child, prompts);
    child.close_stdin();
    // The runtime's own block_on: only it drives the reactor and the child's reaping.
    let _ = runtime.block_on(child.shutdown());
    result.with_context(|| format!("measuring {}", agent.id))
}

fn measure_child(child: &mut Child, prompts: usize) -> Result<Vec<u64>> {
    let mut pipes = Pipes::take(child)?;
    pipes.call(
        b"{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\",\"params\":{\"protocolVersion\":1,\"clientCapabilities\":{}}}\n",
        "\"id\":0,",
    )?;
    pipes.call(
        b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"session/new\",\"params\":{\"cwd\":\"/\",\"mcpServers\":[]}}\n",
        "\"id\":1,",
    )?;
    let response: Value = serde_json::from_str(pipes.line.trim_end())?;
    let session = response["result"]["sessionId"]
        .as_str()
        .context("session/new answered no sessionId")?
        .to_owned();
    let total = WARMUP + prompts;
    // Every request line and the text that identifies its response are made before timing.
    let requests: Vec<(Vec<u8>, String)> = (0..total)
        .map(|n| {
            let id = n + 2;
            let line = format!(
                "{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"session/prompt\",\"params\":{{\"sessionId\":\"{session}\",\"prompt\":[{{\"type\":\"text\",\"text\":\"{TEXT}\"}}]}}}}\n"
            );
            (line.into_bytes(), format!("\"id\":{id},"))
        })
        .collect();
    let mut latencies = Vec::with_capacity(prompts);
    for (n, (request, id)) in requests.iter().enumerate() {
        let start = Instant::now();
        let updates = pipes.call(request, id)?;
        let elapsed = start.elapsed().as_nanos() as u64;
        if updates != 1 {
            bail!("prompt {id} came with {updates} updates, expected one");
        }
        if n >= WARMUP {
            latencies.push(elapsed);
        }
    }
    Ok(latencies)
}

/// The zero-work agent: canned answers with the request's id copied in, blocking i/o, one write
/// per answer.
fn canned_responder() -> Result<()> {
    let stdin = std::io::stdin();
    let mut input = BufReader::with_capacity(64 * 1024, stdin.lock());
    let mut output = std::io::stdout().lock();
    let mut line = Vec::with_capacity(4096);
    let mut answer = Vec::with_capacity(4096);
    loop {
        line.clear();
        if input.by_ref().read_until(b'\n', &mut line)? == 0 {
            return Ok(());
        }
        let Some(id) = id_of(&line) else { continue };
        answer.clear();
        if contains(&line, b"\"session/prompt\"") {
            answer.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"method\":\"session/update\",\"params\":{\"sessionId\":\"canned-1\",\"update\":{\"sessionUpdate\":\"agent_message_chunk\",\"content\":{\"type\":\"text\",\"text\":\"");
            answer.extend_from_slice(TEXT.as_bytes());
            answer.extend_from_slice(b"\"}}}}\n{\"jsonrpc\":\"2.0\",\"id\":");
            answer.extend_from_slice(id);
            answer.extend_from_slice(b",\"result\":{\"stopReason\":\"end_turn\"}}\n");
        } else if contains(&line, b"\"session/new\"") {
            answer.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":");
            answer.extend_from_slice(id);
            answer.extend_from_slice(b",\"result\":{\"sessionId\":\"canned-1\"}}\n");
        } else {
            answer.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":");
            answer.extend_from_slice(id);
            answer.extend_from_slice(
                b",\"result\":{\"protocolVersion\":1,\"agentCapabilities\":{}}}\n",
            );
        }
        output.write_all(&answer)?;
        output.flush()?;
    }
}

/// The digits after `"id":` in a request line.
fn id_of(line: &[u8]) -> Option<&[u8]> {
    let start = find(line, b"\"id\":")? + 5;
    let digits = line[start..]
        .iter()
        .take_while(|byte| byte.is_ascii_digit())
        .count();
    (digits > 0).then(|| &line[start..start + digits])
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack
        .windows(needle.len())
        .position(|window| window == needle)
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    find(haystack, needle).is_some()
}

/// The value at quantile `q` of sorted values (nearest rank).
pub fn percentile(sorted: &[u64], q: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = ((sorted.len() as f64 * q).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}
