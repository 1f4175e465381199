//! NDJSON framing throughput on a realistic mixed ACP corpus: decoding (framing, parsing and
//! classifying) against plain `serde_json::from_slice` over the same lines, and encoding against
//! plain `serde_json::to_writer`.
//!
//! Run it through `cargo xtask bench`, which collects the figures into `target/bench/report.json`.
//! Each benchmark group of this file is one `Suite` of `Bench`es (an id, a label, the id of its
//! baseline, and a function doing one iteration over the shared `Workload`). A new benchmark is a
//! new entry in `SUITES`; its row, and its paired ratio when it names a baseline, reach the report
//! without further changes.

use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput};
use serde_json::{Value, json};
use ski::jsonrpc::{LineReader, Message, VersionField, decode, encode_into};

/// One benchmark of a suite: one call of `run` is one iteration.
struct Bench {
    /// The criterion function id (a directory name: no spaces or colons).
    id: &'static str,
    /// The name shown in the report.
    label: &'static str,
    /// The benchmark this one is compared with, by id.
    baseline: Option<&'static str>,
    run: fn(&mut Workload),
}

/// A benchmark group and its benchmarks.
struct Suite {
    group: &'static str,
    benches: &'static [Bench],
}

const SUITES: &[Suite] = &[Suite {
    group: "ndjson",
    benches: &[
        Bench {
            id: "decode",
            label: "decode+parse (LineReader + decode)",
            baseline: Some("from_slice"),
            run: decode_stream,
        },
        Bench {
            id: "from_slice",
            label: "serde_json::from_slice (pre-split lines)",
            baseline: None,
            run: from_slice_lines,
        },
        Bench {
            id: "encode",
            label: "encode (encode_into + LF)",
            baseline: Some("to_writer"),
            run: encode_messages,
        },
        Bench {
            id: "to_writer",
            label: "serde_json::to_writer (+ LF)",
            baseline: None,
            run: to_writer_values,
        },
    ],
}];

/// Interleaved rounds for the paired ratio of a benchmark and its baseline.
const PAIRED_ROUNDS: usize = 31;

/// What the benchmarks work on: the corpus, a runtime for the async reader, an output buffer.
struct Workload {
    corpus: Corpus,
    runtime: tokio::runtime::Runtime,
    out: Vec<u8>,
}

/// The generated corpus: the NDJSON stream, its lines, and the messages it encodes.
struct Corpus {
    stream: Vec<u8>,
    line_ranges: Vec<(usize, usize)>,
    messages: Vec<Message>,
    values: Vec<Value>,
}

impl Corpus {
    fn bytes(&self) -> u64 {
        self.stream.len() as u64
    }

    fn count(&self) -> u64 {
        self.messages.len() as u64
    }
}

fn decode_stream(w: &mut Workload) {
    let corpus = &w.corpus;
    w.runtime.block_on(async {
        let mut reader = LineReader::new(corpus.stream.as_slice());
        let mut count = 0usize;
        while let Some(line) = reader.next_line().await {
            let line = line.expect("the corpus has no oversize line");
            let message = decode(line, VersionField::Required).expect("the corpus is valid");
            black_box(&message);
            count += 1;
        }
        assert_eq!(count, corpus.messages.len());
    });
}

fn from_slice_lines(w: &mut Workload) {
    for &(start, end) in &w.corpus.line_ranges {
        let value: Value =
            serde_json::from_slice(&w.corpus.stream[start..end]).expect("valid json");
        black_box(&value);
    }
}

fn encode_messages(w: &mut Workload) {
    w.out.clear();
    for message in &w.corpus.messages {
        encode_into(message, VersionField::Required, &mut w.out).expect("encodable");
        w.out.push(b'\n');
    }
    black_box(&w.out);
}

fn to_writer_values(w: &mut Workload) {
    w.out.clear();
    for value in &w.corpus.values {
        serde_json::to_writer(&mut w.out, value).expect("encodable");
        w.out.push(b'\n');
    }
    black_box(&w.out);
}

fn register(c: &mut Criterion, suite: &Suite, workload: &mut Workload) {
    let mut group = c.benchmark_group(suite.group);
    group.throughput(Throughput::ElementsAndBytes {
        elements: workload.corpus.count(),
        bytes: workload.corpus.bytes(),
    });
    for bench in suite.benches {
        group.bench_function(bench.id, |b| b.iter(|| (bench.run)(workload)));
    }
    group.finish();
}

/// The baseline's time over the benchmark's, as the median of interleaved rounds. On a shared
/// machine whose load drifts, this is steadier than comparing two separately measured medians.
fn paired_ratio(bench: &Bench, baseline: &Bench, workload: &mut Workload) -> f64 {
    (bench.run)(workload);
    (baseline.run)(workload);
    let mut ratios = Vec::with_capacity(PAIRED_ROUNDS);
    for _ in 0..PAIRED_ROUNDS {
        let started = Instant::now();
        (bench.run)(workload);
        let ours = started.elapsed().as_secs_f64();
        let started = Instant::now();
        (baseline.run)(workload);
        let theirs = started.elapsed().as_secs_f64();
        ratios.push(theirs / ours);
    }
    ratios.sort_by(f64::total_cmp);
    ratios[ratios.len() / 2]
}

/// A deterministic generator, so every run measures the same corpus.
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        self.0 >> 33
    }

    fn range(&mut self, low: usize, high: usize) -> usize {
        low + (self.next() as usize) % (high - low + 1)
    }

    /// Words of realistic text (escapes, non-ASCII) up to a length between `low` and `high`.
    fn text(&mut self, low: usize, high: usize) -> String {
        let length = self.range(low, high);
        const WORDS: &[&str] = &[
            "the",
            "agent",
            "reads",
            "file",
            "src/main.rs",
            "and",
            "runs",
            "cargo",
            "test",
            "error[E0308]:",
            "mismatched",
            "types",
            "—",
            "naïve",
            "→",
            "\"quoted\"",
            "tab\there",
            "line\nbreak",
            "{json}",
            "ok",
            "✓",
            "path\\to\\file",
            "résumé",
            "λ",
        ];
        let mut out = String::with_capacity(length + 16);
        while out.len() < length {
            out.push_str(WORDS[self.range(0, WORDS.len() - 1)]);
            out.push(' ');
        }
        out
    }
}

/// Builds about 12 000 messages in the proportions of a busy ACP session.
fn corpus() -> Corpus {
    let mut rng = Lcg(0x5eed);
    let mut messages = Vec::new();
    let mut next_id = 0i64;
    let session = "sess_4c1f9d0e-6b8a-4f3e-9e21-7d5a0c2b8f11";
    for _ in 0..12_000 {
        let roll = rng.range(0, 99);
        let message = match roll {
            0..=44 => update(
                session,
                json!({"sessionUpdate": "agent_message_chunk",
                       "content": {"type": "text", "text": rng.text(8, 160)}}),
            ),
            45..=54 => update(
                session,
                json!({"sessionUpdate": "agent_thought_chunk",
                       "content": {"type": "text", "text": rng.text(20, 300)}}),
            ),
            55..=64 => {
                let id = rng.next();
                update(
                    session,
                    json!({"sessionUpdate": "tool_call", "toolCallId": format!("call_{id:x}"),
                           "title": format!("Run cargo test -p crate{}", id % 17), "kind": "execute",
                           "status": "pending",
                           "rawInput": {"command": "cargo", "args": ["test", "-p", format!("crate{}", id % 17)],
                                        "cwd": "/home/dev/project"},
                           "locations": [{"path": "/home/dev/project/src/lib.rs", "line": id % 900}]}),
                )
            }
            65..=74 => {
                let id = rng.next();
                let content = if rng.range(0, 1) == 0 {
                    json!([{"type": "content", "content": {"type": "text", "text": rng.text(400, 4000)}}])
                } else {
                    json!([{"type": "diff", "path": "/home/dev/project/src/lib.rs",
                            "oldText": rng.text(200, 3000),
                            "newText": rng.text(200, 3000)}])
                };
                update(
                    session,
                    json!({"sessionUpdate": "tool_call_update", "toolCallId": format!("call_{id:x}"),
                           "status": "completed", "content": content,
                           "rawOutput": {"exitCode": 0, "durationMs": id % 5000}}),
                )
            }
            75..=79 => {
                next_id += 1;
                Message::request(
                    next_id,
                    "session/prompt",
                    Some(json!({"sessionId": session, "prompt": [
                        {"type": "text", "text": rng.text(100, 2000)},
                        {"type": "resource_link", "uri": "file:///home/dev/project/README.md",
                         "name": "README.md", "mimeType": "text/markdown"}]})),
                )
            }
            80..=84 => {
                Message::success(rng.next() as i64 % 1000, json!({"stopReason": "end_turn"}))
            }
            85..=86 => Message::success(
                rng.next() as i64 % 1000,
                json!({"sessionId": session, "modes": {"currentModeId": "code", "availableModes": [
                    {"id": "code", "name": "Code", "description": "Write and edit code"},
                    {"id": "ask", "name": "Ask", "description": "Answer questions only"}]}}),
            ),
            87..=89 => {
                next_id += 1;
                Message::request(
                    format!("perm-{next_id}"),
                    "session/request_permission",
                    Some(json!({"sessionId": session,
                        "toolCall": {"toolCallId": format!("call_{next_id:x}"), "title": "Write src/lib.rs",
                                     "kind": "edit", "status": "pending"},
                        "options": [
                            {"optionId": "allow-once", "name": "Allow once", "kind": "allow_once"},
                            {"optionId": "allow-always", "name": "Always allow", "kind": "allow_always"},
                            {"optionId": "reject-once", "name": "Reject", "kind": "reject_once"}]})),
                )
            }
            90..=92 => Message::success(
                format!("perm-{}", rng.range(1, 500)),
                json!({"outcome": {"outcome": "selected", "optionId": "allow-once"}}),
            ),
            93..=95 => update(
                session,
                json!({"sessionUpdate": "plan", "entries": (0..rng.range(2, 8)).map(|i| json!({
                    "content": rng.text(20, 80), "priority": "medium",
                    "status": if i < 2 { "completed" } else { "pending" }})).collect::<Vec<_>>()}),
            ),
            _ => Message::notification("session/cancel", Some(json!({"sessionId": session}))),
        };
        messages.push(message);
    }
    let mut stream = Vec::new();
    let mut line_ranges = Vec::with_capacity(messages.len());
    let mut values = Vec::with_capacity(messages.len());
    for message in &messages {
        let start = stream.len();
        encode_into(message, VersionField::Required, &mut stream).expect("encodable");
        line_ranges.push((start, stream.len()));
        values.push(serde_json::from_slice(&stream[start..]).expect("valid json"));
        stream.push(b'\n');
    }
    Corpus {
        stream,
        line_ranges,
        messages,
        values,
    }
}

fn update(session: &str, update: Value) -> Message {
    Message::notification(
        "session/update",
        Some(json!({"sessionId": session, "update": update})),
    )
}

/// The median time of one criterion benchmark, in nanoseconds, read from its output directory.
fn median_ns(criterion_home: &Path, group: &str, id: &str) -> Option<f64> {
    let path = criterion_home
        .join(group)
        .join(id)
        .join("new")
        .join("estimates.json");
    let text = std::fs::read_to_string(path).ok()?;
    let estimates: Value = serde_json::from_str(&text).ok()?;
    estimates["median"]["point_estimate"].as_f64()
}

/// Writes this bench's rows for `cargo xtask bench` (see `xtask/src/bench.rs` for the format).
fn write_rows(
    bench_dir: &Path,
    criterion_home: &Path,
    workload: &mut Workload,
) -> std::io::Result<()> {
    let (bytes, count) = (workload.corpus.bytes(), workload.corpus.count());
    let mut rows = Vec::new();
    for suite in SUITES {
        for bench in suite.benches {
            let Some(median) = median_ns(criterion_home, suite.group, bench.id) else {
                eprintln!("no estimate for {}/{}; row skipped", suite.group, bench.id);
                continue;
            };
            let seconds = median / 1e9;
            let mut row = json!({
                "group": suite.group,
                "name": bench.label,
                "id": bench.id,
                "baseline": bench.baseline,
                "median_ns": median,
                "bytes": bytes,
                "messages": count,
                "mb_per_s": bytes as f64 / 1e6 / seconds,
                "msgs_per_s": count as f64 / seconds,
            });
            let baseline = bench
                .baseline
                .and_then(|id| suite.benches.iter().find(|b| b.id == id));
            if let Some(baseline) = baseline {
                row["ratio"] = json!(paired_ratio(bench, baseline, workload));
                row["ratio_method"] = json!(format!(
                    "median of {PAIRED_ROUNDS} interleaved rounds (baseline time / time)"
                ));
            }
            rows.push(row);
        }
    }
    let rows_dir = bench_dir.join("rows");
    std::fs::create_dir_all(&rows_dir)?;
    let text = serde_json::to_string_pretty(&json!({ "rows": rows }))?;
    std::fs::write(rows_dir.join("ndjson.json"), text)
}

fn main() {
    let mut workload = Workload {
        corpus: corpus(),
        runtime: tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("a tokio runtime"),
        out: Vec::new(),
    };
    let mut criterion = Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(4))
        .configure_from_args();
    for suite in SUITES {
        register(&mut criterion, suite, &mut workload);
    }
    criterion.final_summary();
    // Rows are written only when run by `cargo xtask bench`, which names both directories.
    let bench_dir = std::env::var_os("SKI_BENCH_DIR").map(PathBuf::from);
    let criterion_home = std::env::var_os("CRITERION_HOME").map(PathBuf::from);
    if let (Some(bench_dir), Some(criterion_home)) = (bench_dir, criterion_home)
        && let Err(error) = write_rows(&bench_dir, &criterion_home, &mut workload)
    {
        eprintln!("cannot write bench rows: {error}");
        std::process::exit(1);
    }
}
