//! Client rows on request bookkeeping, judged through the client's scripted driver (E-ACP-11):
//! every request ends in exactly one outcome, the pending and timeout counters end at 0, ids
//! are unique and consecutive, close fails in-flight requests with EOF and later ones with
//! not_connected, and the send gate bounds in-flight sends in FIFO order (E-ACP-45).

use std::collections::BTreeSet;

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde_json::{Value, json};

use super::control::Control;
use super::mock::{ClientRun, Mock, is_request, method_of, run_drive, start_client};
use crate::check::{Check, CheckError, CheckResult};
use crate::context::Ctx;
use crate::vocabulary::acp;
use crate::{ensure, ensure_eq, fail};

/// The checks of this module.
pub fn checks() -> Vec<Check> {
    vec![
        Check::new(
            "WS-005",
            "Through the driver: the mock is stopped (SIGSTOP) during a turn, the driver issues 64 \
             requests of 64 KB, the stats while stalled must show every permit of the send gate \
             in use (the senders wait); after SIGCONT all must succeed and reach the mock in the \
             order they were issued.",
            ws_005,
        ),
        Check::new(
            "WS-009",
            "Through the driver: 40 concurrent session/new, which the mock answers in reverse \
             order (sent through its control channel once all 40 arrived); all 40 must end success with distinct ids and \
             the summary show pending 0 and timeouts 0.",
            ws_009,
        ),
        Check::new(
            "WS-010",
            "Through the driver: 5 requests the mock never answers are written, then close(); \
             all 5 must end eof and the summary show pending 0 and timeouts 0.",
            ws_010,
        ),
        Check::new(
            "WS-011",
            "Through the driver: a request with a 200 ms timeout the mock never answers must end \
             request_timeout alone; a request with a 60 s timeout cut by close() must end eof \
             alone; counters end at 0.",
            ws_011,
        ),
        Check::new(
            "WS-012",
            "Through the driver: close() twice, then a request; both closes must succeed, the \
             request end not_connected and never reach the mock.",
            ws_012,
        ),
        Check::new(
            "WS-014",
            "Through the driver: 200 concurrent requests; the ids of every request the client \
             wrote (read from the mock's transcript) must be distinct integers forming one \
             consecutive range, and all 200 succeed.",
            ws_014,
        ),
        Check::new(
            "WS-015",
            "Through the driver: 1000 sequential requests, then stats; all must succeed and both \
             the stats and the summary show pending 0 and timeouts 0.",
            ws_015,
        ),
        Check::new(
            "WS-016",
            "Through the driver with the mock stopped: the gate fills, one waiting sender is \
             cancelled and a new request issued; after SIGCONT every other request must succeed, \
             the cancelled one never reach the mock, and the gate end with every permit free.",
            ws_016,
        ),
        Check::new(
            "WS-018",
            "Through the driver: 100 answered and 100 unanswered requests (500 ms timeout), close() \
             at a random moment, then 10 more; every outcome must be success, eof, not_connected \
             or request_timeout, one per request, and the counters end at 0.",
            ws_018,
        ),
    ]
}

/// A mock that answers `_mock/ping` with `{}` and never answers `_mock/hang`.
const PING_HANG: &str = "[[on]]\nmethod = \"_mock/ping\"\ndo = [{ respond = {} }]\n\
    [[on]]\nmethod = \"_mock/hang\"\ndo = [{ hang = true }]\n";

async fn drive(ctx: &Ctx, script: &str, steps: &Value) -> Result<ClientRun, CheckError> {
    let mock = Mock::new(ctx, "mock", script, &[])?;
    run_drive(ctx, &mock, steps).await
}

/// Fails unless step `step` ended with exactly `expected` outcome names (any order).
fn expect_outcomes(run: &ClientRun, step: usize, expected: &[&str], what: &str) -> CheckResult {
    let mut got = run.outcome_names(step);
    got.sort();
    let mut want: Vec<String> = expected.iter().map(|s| (*s).to_owned()).collect();
    want.sort();
    if got != want {
        fail!(
            format!("{what}: outcomes {}", summarize(&want)),
            "{}; {}",
            summarize(&got),
            run.describe()
        );
    }
    Ok(())
}

/// Counts names: `eof x5, success x1`.
fn summarize(names: &[String]) -> String {
    let mut counts = std::collections::BTreeMap::new();
    for name in names {
        *counts.entry(name.as_str()).or_insert(0) += 1;
    }
    counts
        .iter()
        .map(|(k, v)| format!("{k} x{v}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The requests the client wrote with `method`.
fn wire_requests<'a>(run: &'a ClientRun, method: &str) -> Vec<&'a Value> {
    run.transcript.client_requests(method)
}

async fn ws_009(ctx: Ctx) -> CheckResult {
    let (mut control, args) = Control::listen(&ctx)?;
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let script = "[[on]]\nmethod = \"session/new\"\ndo = [{ hang = true }]\n";
    let mock = Mock::new(&ctx, "mock", script, &args)?;
    let steps = json!([
        {"op": "initialize"},
        {"op": "request", "method": "session/new",
         "params": {"cwd": ctx.temp_dir().display().to_string(), "mcpServers": []}, "count": 40},
        {"op": "stats"},
    ]);
    let path = super::mock::start_drive_script(&ctx, &steps)?;
    let client = start_client(&ctx, "client_drive", &mock, &[("script", &path)])?;
    control.accept(&ctx).await?;
    control.wait(&ctx, "session/new", 40).await?;
    let transcript = mock.transcript()?;
    let ids: Vec<Value> = transcript
        .client_requests("session/new")
        .iter()
        .map(|r| r["id"].clone())
        .collect();
    // The answers go out in reverse order, each with its own session id.
    let answers: Vec<Value> = ids
        .iter()
        .rev()
        .enumerate()
        .map(|(n, id)| json!({"respond": {"sessionId": format!("sess-rev-{n}")}, "id": id}))
        .collect();
    control.run(&ctx, Value::Array(answers)).await?;
    let run = client.finish(&ctx, &mock).await?;
    let answered: Vec<Value> = run
        .transcript
        .lines
        .iter()
        .filter(|l| !l.from_client)
        .filter_map(|l| l.value.as_ref())
        .filter(|v| v.pointer("/result/sessionId").is_some())
        .map(|v| v["id"].clone())
        .collect();
    if answered == ids {
        return Err(CheckError::Harness(
            "the mock answered session/new in request order; the scenario needs another order"
                .into(),
        ));
    }
    expect_outcomes(&run, 1, &["success"; 40], "40 concurrent session/new")?;
    let distinct: BTreeSet<String> = run
        .outcomes(1)
        .iter()
        .map(|o| o.get("id").map(Value::to_string).unwrap_or_default())
        .collect();
    ensure_eq!(
        40,
        distinct.len(),
        "distinct request ids among the outcomes"
    );
    run.expect_clear("pending and timeout state after the burst")?;
    Ok(())
}

async fn ws_010(ctx: Ctx) -> CheckResult {
    let steps = json!([
        {"op": "initialize"},
        {"op": "request", "method": "_mock/hang", "count": 5, "wait": false},
        {"op": "await_sent"},
        {"op": "close"},
    ]);
    let run = drive(&ctx, PING_HANG, &steps).await?;
    ensure_eq!(
        5,
        wire_requests(&run, "_mock/hang").len(),
        "requests in flight (received by the mock) before close"
    );
    expect_outcomes(&run, 1, &["eof"; 5], "in-flight requests at close()")?;
    run.expect_clear("pending and timeout state after close()")?;
    Ok(())
}

async fn ws_011(ctx: Ctx) -> CheckResult {
    let steps = json!([
        {"op": "initialize"},
        {"op": "request", "method": "_mock/hang", "timeoutMs": 200},
        {"op": "request", "method": "_mock/hang", "timeoutMs": 60000, "wait": false},
        {"op": "await_sent"},
        {"op": "close"},
    ]);
    let run = drive(&ctx, PING_HANG, &steps).await?;
    expect_outcomes(&run, 1, &["request_timeout"], "a timeout that fires first")?;
    expect_outcomes(&run, 2, &["eof"], "a close that comes first")?;
    run.expect_clear("pending and timeout state")?;
    Ok(())
}

async fn ws_012(ctx: Ctx) -> CheckResult {
    let steps = json!([
        {"op": "initialize"},
        {"op": "close"},
        {"op": "close"},
        {"op": "request", "method": "_mock/ping"},
    ]);
    let run = drive(&ctx, PING_HANG, &steps).await?;
    ensure_eq!(
        2,
        run.of_type("closed").len(),
        "close() calls that succeeded"
    );
    expect_outcomes(&run, 3, &["not_connected"], "a request after close()")?;
    ensure_eq!(
        0,
        wire_requests(&run, "_mock/ping").len(),
        "frames of the request after close() on the wire"
    );
    let error = run.summary().and_then(|s| s.get("error")).cloned();
    ensure!(
        error.as_ref().is_none_or(Value::is_null),
        "the second close has no side effect (the driver run has no error)",
        "{error:?}"
    );
    run.expect_clear("pending and timeout state")?;
    Ok(())
}

async fn ws_014(ctx: Ctx) -> CheckResult {
    let steps = json!([
        {"op": "initialize"},
        {"op": "request", "method": "_mock/ping", "count": 200},
    ]);
    let run = drive(&ctx, PING_HANG, &steps).await?;
    expect_outcomes(&run, 1, &["success"; 200], "200 concurrent requests")?;
    let ids: Vec<&Value> = run
        .transcript
        .from_client()
        .into_iter()
        .filter(|v| is_request(v))
        .map(|v| &v["id"])
        .collect();
    let numbers: Vec<i64> = ids.iter().filter_map(|v| v.as_i64()).collect();
    ensure!(
        numbers.len() == ids.len(),
        "every request id is an integer",
        "ids {:?}",
        ids.iter()
            .filter(|v| !v.is_i64())
            .take(5)
            .collect::<Vec<_>>()
    );
    let distinct: BTreeSet<i64> = numbers.iter().copied().collect();
    ensure_eq!(numbers.len(), distinct.len(), "distinct request ids");
    let (min, max) = (
        distinct.first().copied().unwrap_or(0),
        distinct.last().copied().unwrap_or(0),
    );
    ensure_eq!(
        i64::try_from(distinct.len()).unwrap_or(i64::MAX),
        max - min + 1,
        "the ids form one consecutive range ({min}..={max})"
    );
    Ok(())
}

async fn ws_015(ctx: Ctx) -> CheckResult {
    let steps = json!([
        {"op": "initialize"},
        {"op": "request", "method": "_mock/ping", "count": 1000, "mode": "sequential"},
        {"op": "stats"},
    ]);
    let run = drive(&ctx, PING_HANG, &steps).await?;
    expect_outcomes(&run, 1, &["success"; 1000], "1000 sequential requests")?;
    let stats = run.of_type("stats");
    let counters = stats
        .first()
        .map(|s| (s.get("pending").cloned(), s.get("timeouts").cloned()));
    ensure_eq!(
        Some((Some(json!(0)), Some(json!(0)))),
        counters,
        "(pending, timeouts) of the stats after the calls"
    );
    run.expect_clear("pending and timeout state")?;
    Ok(())
}

async fn ws_018(ctx: Ctx) -> CheckResult {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let pause = u64::from(nanos % 40);
    ctx.note(format!("close() after {pause} ms"));
    let steps = json!([
        {"op": "initialize"},
        {"op": "request", "method": "_mock/ping", "count": 100, "wait": false},
        {"op": "request", "method": "_mock/hang", "count": 100, "timeoutMs": 500, "wait": false},
        {"op": "sleep", "ms": pause},
        {"op": "close"},
        {"op": "request", "method": "_mock/ping", "count": 10, "wait": false},
    ]);
    let run = drive(&ctx, PING_HANG, &steps).await?;
    const ALLOWED: &[&str] = &["success", "eof", "not_connected", "request_timeout"];
    let mut names = Vec::new();
    for step in [1, 2, 5] {
        names.extend(run.outcome_names(step));
    }
    ensure_eq!(210, names.len(), "outcomes, one per request");
    let odd: Vec<&String> = names
        .iter()
        .filter(|n| !ALLOWED.contains(&n.as_str()))
        .collect();
    ensure!(
        odd.is_empty(),
        "only success, eof, not_connected and request_timeout",
        "{}",
        summarize(&odd.into_iter().cloned().collect::<Vec<_>>())
    );
    run.expect_clear("pending and timeout state after the random close")?;
    Ok(())
}

/// The mock's pid from its transcript's start record.
fn mock_pid(mock: &Mock) -> Result<i32, CheckError> {
    let text = std::fs::read_to_string(&mock.transcript)?;
    text.lines()
        .next()
        .and_then(|l| serde_json::from_str::<Value>(l).ok())
        .and_then(|v| v.get("pid").and_then(Value::as_i64))
        .and_then(|p| i32::try_from(p).ok())
        .ok_or_else(|| CheckError::Harness("no pid in the mock's transcript".into()))
}

fn signal(pid: i32, signal: Signal) -> Result<(), CheckError> {
    kill(Pid::from_raw(pid), signal)
        .map_err(|e| CheckError::Harness(format!("cannot send {signal} to the mock: {e}")))
}

/// A stalled run: the driver's steps up to and including a `stats` step at `stall`, which the
/// runner reads while the mock is stopped; then the mock continues. Returns the stall's stats
/// line and the whole run.
async fn stalled(
    ctx: &Ctx,
    flood: &[Value],
    stall: usize,
) -> Result<(Value, ClientRun), CheckError> {
    let (mut control, args) = Control::listen(ctx)?;
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let script = format!(
        "{PING_HANG}[[on]]\nprompt = \"*\"\ndo = [{{ wait_for = {{ method = \"session/cancel\", timeout_ms = 60000 }} }}, \
         {{ respond = {{ stopReason = \"cancelled\" }} }}]\n"
    );
    let mock = Mock::new(ctx, "mock", &script, &args)?;
    let mut steps = vec![
        json!({"op": "initialize"}),
        json!({"op": "new_session"}),
        json!({"op": "prompt", "text": "stall", "wait": false}),
        json!({"op": "wait_permission", "count": 1, "timeoutMs": 60000}),
    ];
    steps.extend(flood.iter().cloned());
    steps.extend([
        json!({"op": "await_sent"}),
        json!({"op": "cancel"}),
        json!({"op": "await"}),
        json!({"op": "stats"}),
    ]);
    let path = super::mock::start_drive_script(ctx, &Value::Array(steps))?;
    let mut client = start_client(ctx, "client_drive", &mock, &[("script", &path)])?;
    control.accept(ctx).await?;
    control.wait(ctx, "session/prompt", 1).await?;
    let pid = mock_pid(&mock)?;
    control
        .run(
            ctx,
            json!([{"request": "session/request_permission", "await": false, "params": {
                "sessionId": "${session}",
                "toolCall": {"toolCallId": "call-stall", "title": "Stall"},
                "options": [{"optionId": "opt-allow", "name": "Allow", "kind": "allow_once"}]}}]),
        )
        .await?;
    signal(pid, Signal::SIGSTOP)?;
    let stall_stats = ctx
        .within(
            "the driver's stats while the mock is stopped",
            client.next_json(|v| {
                v.get("type") == Some(&json!("stats"))
                    && v.get("step").and_then(Value::as_u64) == Some(stall as u64)
            }),
        )
        .await;
    let resumed = signal(pid, Signal::SIGCONT);
    let stall_stats = stall_stats?;
    resumed?;
    let run = client.finish(ctx, &mock).await?;
    match stall_stats {
        Some(stats) => Ok((stats, run)),
        None => fail!(
            "the driver reports stats while the mock is stopped",
            "{}",
            run.describe()
        ),
    }
}

/// A flood request step of `count` requests of 64 KB.
fn flood(count: usize) -> Value {
    json!({"op": "request", "method": "_mock/ping", "count": count, "wait": false,
        "params": {"pad": "x".repeat(65536)}})
}

/// The configured gate size: the driver's report, else `settings.max_in_flight_sends`.
fn gate_size(ctx: &Ctx, stats: &Value) -> Result<u64, CheckError> {
    if let Some(n) = stats.get("maxInFlightSends").and_then(Value::as_u64) {
        return Ok(n);
    }
    ctx.setting(&acp::MAX_IN_FLIGHT_SENDS)?
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| {
            CheckError::Harness(
                "the driver reports no maxInFlightSends and settings.max_in_flight_sends is unset"
                    .into(),
            )
        })
}

/// Fails unless the flood's requests reached the mock in issue order.
fn expect_fifo(run: &ClientRun, step: usize) -> CheckResult {
    let mut by_index: Vec<(u64, Value)> = run
        .outcomes(step)
        .iter()
        .filter(|o| o.get("outcome") == Some(&json!("success")))
        .filter_map(|o| Some((o.get("index")?.as_u64()?, o.get("id")?.clone())))
        .collect();
    by_index.sort_by_key(|(i, _)| *i);
    let issued: Vec<Value> = by_index.into_iter().map(|(_, id)| id).collect();
    let wire: Vec<Value> = run
        .transcript
        .client_requests("_mock/ping")
        .iter()
        .map(|r| r["id"].clone())
        .filter(|id| issued.contains(id))
        .collect();
    ensure_eq!(
        issued,
        wire,
        "the ids on the wire, in the order the requests were issued (FIFO)"
    );
    Ok(())
}

async fn ws_005(ctx: Ctx) -> CheckResult {
    let (stats, run) = stalled(&ctx, &[flood(64), json!({"op": "stats"})], 5).await?;
    let n = gate_size(&ctx, &stats)?;
    ensure!(
        n < 64,
        "a gate smaller than the burst (the profile's maxInFlightSends below 64)",
        "maxInFlightSends {n}"
    );
    ensure_eq!(
        Some(&json!(0)),
        stats.get("sendPermitsAvailable"),
        "send permits free while the peer does not read (the gate of {n} is full)"
    );
    let early = run
        .outcomes(4)
        .iter()
        .position(|o| o.get("outcome") != Some(&json!("success")));
    ensure!(
        early.is_none(),
        "no request of the burst is dropped while senders wait",
        "{}",
        run.describe()
    );
    expect_outcomes(
        &run,
        4,
        &["success"; 64],
        "the burst once the peer reads again",
    )?;
    expect_fifo(&run, 4)?;
    run.expect_clear("pending and timeout state")?;
    Ok(())
}

async fn ws_016(ctx: Ctx) -> CheckResult {
    let (stats, run) = stalled(
        &ctx,
        &[
            flood(16),
            json!({"op": "cancel_waiting", "count": 1}),
            json!({"op": "request", "method": "_mock/ping", "wait": false}),
            json!({"op": "stats"}),
        ],
        7,
    )
    .await?;
    let n = gate_size(&ctx, &stats)?;
    ensure!(
        n < 15,
        "a gate smaller than the burst (the profile's maxInFlightSends below 15)",
        "maxInFlightSends {n}"
    );
    let cancelled = run
        .of_type("cancel_waiting")
        .first()
        .and_then(|v| v.get("cancelled"))
        .cloned();
    ensure_eq!(Some(json!(1)), cancelled, "waiting senders cancelled");
    let mut want = vec!["success"; 15];
    want.push("cancelled");
    expect_outcomes(&run, 4, &want, "the burst with one waiter cancelled")?;
    expect_outcomes(
        &run,
        6,
        &["success"],
        "a send issued after the cancellation",
    )?;
    let cancelled_id = run
        .outcomes(4)
        .iter()
        .find(|o| o.get("outcome") == Some(&json!("cancelled")))
        .and_then(|o| o.get("id").cloned())
        .filter(|id| !id.is_null());
    if let Some(id) = cancelled_id {
        ensure!(
            !run.transcript
                .client_requests("_mock/ping")
                .iter()
                .any(|r| r["id"] == id),
            "the cancelled sender's request never reaches the peer",
            "id {id} is on the wire"
        );
    }
    let last = run.of_type("stats").into_iter().last().cloned();
    ensure_eq!(
        Some(json!(n)),
        last.as_ref()
            .and_then(|s| s.get("sendPermitsAvailable"))
            .cloned(),
        "free send permits at the end (the cancelled waiter took no quota)"
    );
    let methods: Vec<&str> = run
        .transcript
        .from_client()
        .into_iter()
        .filter_map(method_of)
        .collect();
    ensure!(
        methods.contains(&"session/cancel"),
        "the run ends normally after the stall",
        "{methods:?}"
    );
    Ok(())
}
