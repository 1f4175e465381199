//! S059–S068: stall detection on millisecond thresholds (nudges, recovery, escalation with
//! Terminate and Restart), the offline queue it leads to (steering queued, delivered in order
//! when the agent speaks again), restart, and a crash with a pending clearance. The agent is a
//! script that never answers a nudge unless the check makes it speak. A build that takes whole
//! seconds gets the thresholds rounded up; the timing assertions use what it really got.

use std::time::Duration;

use serde_json::{Value, json};

use crate::{Check, CheckError, CheckResult, Ctx, OrFail, ensure, ensure_eq};

use super::agents::{AcpWorld, Dialect, Options, Started, each_dialect, ensure_reply_contains};
use super::harness::{ALICE, CHANNEL_X, has_button};
use super::lifecycle::{approval_message, prompt_method, prompt_text};
use super::profile::in_force_ms;

const BOTH: &[Dialect] = &[Dialect::Intercom, Dialect::Acp];
const STREAM: &[Dialect] = &[Dialect::Intercom];

/// The checks of this part.
pub fn checks() -> Vec<Check> {
    vec![
        Check::new(
            "S059",
            "Lets the agent stall past its nudges, then steers; expects \"Agent offline — message queued\" in the thread, the message queued (consumed = 0) and not written to the agent.",
            s059,
        ),
        Check::new(
            "S060",
            "Queues three steering messages for a stalled agent, then the agent speaks; expects all three delivered in order and marked consumed.",
            s060,
        ),
        Check::new(
            "S061",
            "Lets the agent stall past its nudges; expects \"switching to queue mode\" in the thread and the session's connectivity stalled.",
            s061,
        ),
        Check::new(
            "S062",
            "A stalled agent with two queued messages speaks again; expects \"Agent back online — delivering 2 queued messages\" and connectivity online.",
            s062,
        ),
        Check::new(
            "S063",
            "The agent reports status 300 ms into a 600 ms inactivity threshold; expects the first nudge no sooner than 600 ms after that status (the timer was reset) and last activity recorded.",
            s063,
        ),
        Check::new(
            "S064",
            "The agent stays silent past the inactivity threshold; expects a nudge on its stream and nudge_count 1.",
            s064,
        ),
        Check::new(
            "S065",
            "The agent speaks after a nudge; expects the recovery reported and nudge_count back to 0.",
            s065,
        ),
        Check::new(
            "S066",
            "The agent stays silent through max_retries = 2 nudges; expects \"Agent unresponsive after 2 nudge attempts\" with Terminate and Restart buttons, after exactly 2 nudges.",
            s066,
        ),
        Check::new(
            "S067",
            "Steers a stalled agent, then clicks Restart on the escalation; expects the old agent ended, a new process for the same session receiving the original prompt and then the queued message, and the same thread.",
            s067,
        ),
        Check::new(
            "S068",
            "The agent crashes while its clearance is pending; expects the approval's expiry and the crash in the thread, and the session interrupted (the approval row expired is INT-SKI-10).",
            s068,
        ),
    ]
}

/// A stream-dialect agent that greets, answers prompts, ignores nudges, and on "keepalive"
/// reports status 300 ms later.
const STALL_SCRIPT: &str = r#"name = "stall"
personality = "intercom"
[intercom]
handshake = "stream"
greeting = "ready"
heartbeat_ms = 0
[[on]]
method = "nudge"
do = [{ hang = true }]
[[on]]
prompt = "*keepalive*"
do = [{ sleep_ms = 300 }, { notify = "status/update", params = { message = "still working" } }]
"#;

/// The same agent after a JSON-RPC handshake, where nudges are prompts: it reports the first
/// prompt (a server may skip what comes before the handshake's end, a greeting too) and answers
/// no later one (a nudge is one), except that on "keepalive" it reports status 300 ms later.
const STALL_SCRIPT_JSONRPC: &str = r#"name = "stall"
personality = "intercom"
[intercom]
handshake = "jsonrpc"
heartbeat_ms = 0
[[on]]
prompt = "*keepalive*"
do = [{ sleep_ms = 300 }, { notify = "status/update", params = { message = "still working" } }]
[[on]]
method = "session/prompt"
once = true
do = [{ notify = "status/update", params = { message = "received the task" } }]
[[on]]
method = "session/prompt"
do = [{ hang = true }]
"#;

/// How many of the prompts an agent received came before any nudge: in a dialect that nudges
/// with the prompt method, the session's own first prompt.
fn prompts_before_nudges(dialect: Dialect) -> u64 {
    u64::from(dialect.nudge_method() == dialect.prompt_method())
}

/// Waits until the agent received `count` nudges, for at most the detector's schedule for them
/// ([`by_schedule`]); answers them.
async fn nudges(
    ctx: &Ctx,
    stall: (u64, u64, u32),
    started: &Started,
    dialect: Dialect,
    count: u64,
) -> Result<Vec<Value>, CheckError> {
    let method = dialect.nudge_method();
    let skip = prompts_before_nudges(dialect);
    let what = format!("{count} nudge(s) ({method}) written to the agent");
    by_schedule(
        ctx,
        schedule(ctx, stall, count),
        &what,
        started.agent.wait_method(method, count + skip),
    )
    .await?;
    Ok(started
        .agent
        .received_method(method)?
        .into_iter()
        .skip(usize::from(skip == 1))
        .collect())
}

/// A nudge's text: `params.message`, or the prompt's text where nudges are prompts.
fn nudge_text(nudge: &Value) -> String {
    nudge["params"]["message"]
        .as_str()
        .map_or_else(|| prompt_text(nudge), str::to_string)
}

/// A world whose detector uses these thresholds (ms) and retries, with a session started.
async fn stalling(
    ctx: &Ctx,
    dialect: Dialect,
    stall: (u64, u64, u32),
    prompt: &str,
) -> Result<(AcpWorld, Started), CheckError> {
    let script = ctx
        .temp_dir()
        .join(format!("stall-{}.toml", dialect.name()));
    let text = match dialect {
        Dialect::IntercomJsonrpc => STALL_SCRIPT_JSONRPC,
        Dialect::Intercom | Dialect::Acp => STALL_SCRIPT,
    };
    std::fs::write(&script, text).or_error("write the stall script")?;
    let mut options = Options::new(dialect);
    options.stall = Some(stall);
    options.script = Some(script.display().to_string());
    let world = AcpWorld::start(ctx, options).await?;
    let started = world.start_session(CHANNEL_X, prompt).await?;
    Ok((world, started))
}

/// When the detector has sent `nudges` nudges, as the build was given its thresholds: the
/// inactivity threshold, then one escalation interval per nudge after the first (each as in
/// force, whole seconds for a build that takes seconds).
fn schedule(ctx: &Ctx, (inactivity, escalation, _): (u64, u64, u32), nudges: u64) -> Duration {
    let inactivity = in_force_ms(ctx, inactivity, "inactivity_s");
    let escalation = in_force_ms(ctx, escalation, "escalation_s");
    Duration::from_millis(inactivity + escalation.saturating_mul(nudges.saturating_sub(1)))
}

/// Runs a wait for what the detector does by itself, for at most twice when it is `due` plus
/// 5 s (times the timeout multiplier): a build that never nudges or escalates fails in
/// seconds with "nothing after …", not at the long timeout, and the room left for contention is
/// many times the schedule (so the failure is an observation, not re-run).
async fn by_schedule<T>(
    ctx: &Ctx,
    due: Duration,
    what: &str,
    wait: impl Future<Output = Result<T, CheckError>>,
) -> Result<T, CheckError> {
    let limit = due.saturating_mul(2) + SCHEDULE_ROOM;
    ctx.observe_for(limit, &format!("{what}, due {due:?} in"), wait)
        .await
}

/// The fixed room [`by_schedule`] adds to twice a schedule.
const SCHEDULE_ROOM: Duration = Duration::from_secs(5);

/// Waits for the escalation message (the agent silent past all `nudges` nudges of `stall`).
async fn escalated(
    ctx: &Ctx,
    world: &AcpWorld,
    started: &Started,
    stall: (u64, u64, u32),
) -> Result<ski_mocks::slack::Message, CheckError> {
    let nudges = stall.2;
    let text = ctx.text(
        "escalation",
        &format!("Agent unresponsive after {nudges} nudge attempts"),
    );
    // The escalation follows the last nudge by one more escalation interval.
    let due = schedule(ctx, stall, u64::from(nudges) + 1);
    by_schedule(
        ctx,
        due,
        "the escalation",
        world.reply_with(&started.root, &text),
    )
    .await
}

async fn session_value(
    world: &AcpWorld,
    session_id: &str,
    column: &str,
) -> Result<Value, CheckError> {
    let expected = format!("the session's {column}");
    let rows = world
        .world
        .read(
            &format!("SELECT {column} FROM session WHERE id = ?1"),
            &[json!(session_id)],
        )
        .await?
        .or_fail(expected.clone())?;
    let cell = rows.first().and_then(|row| row.first()).or_fail(expected)?;
    Ok(cell.clone())
}

async fn queued(world: &AcpWorld, session_id: &str) -> Result<Vec<(String, i64)>, CheckError> {
    let rows = world
        .world
        .read(
            "SELECT message, consumed FROM steering_message WHERE session_id = ?1 ORDER BY id",
            &[json!(session_id)],
        )
        .await?
        .or_fail("a steering_message table")?;
    rows.iter()
        .map(|cells| {
            Ok((
                crate::sqlite::text(cells.first(), "message")?,
                crate::sqlite::integer(cells.get(1), "consumed")?,
            ))
        })
        .collect::<Result<Vec<_>, crate::sqlite::Refused>>()
        .or_fail("steering rows")
}

async fn steer(world: &AcpWorld, text: &str) -> Result<String, CheckError> {
    world.slash(CHANNEL_X, &format!("steer {text}")).await
}

const FAST: (u64, u64, u32) = (200, 200, 2);

async fn s059(ctx: Ctx) -> CheckResult {
    each_dialect(&ctx, STREAM, |ctx, dialect| async move {
        let (world, started) = stalling(&ctx, dialect, FAST, "stall test").await?;
        escalated(&ctx, &world, &started, FAST).await?;
        let reply = steer(&world, "queued one").await?;
        let offline = ctx.text("offline", "Agent offline — message queued");
        world.reply_with(&started.root, &offline).await?;
        ensure_reply_contains(
            "the operator is told the agent is offline",
            &reply,
            &offline,
        )?;
        ensure_eq!(
            vec![("queued one".to_string(), 0)],
            queued(&world, &started.row.id).await?,
            "steering rows (message, consumed)"
        );
        let prompts = started.agent.received_method(prompt_method(dialect))?;
        ensure!(
            !prompts.iter().any(|p| prompt_text(p) == "queued one"),
            "the message is not written to an offline agent"
        );
        world.server.stop().await?;
        Ok(())
    })
    .await
}

async fn s060(ctx: Ctx) -> CheckResult {
    each_dialect(&ctx, STREAM, |ctx, dialect| async move {
        let (world, started) = stalling(&ctx, dialect, FAST, "stall test").await?;
        escalated(&ctx, &world, &started, FAST).await?;
        for text in ["one", "two", "three"] {
            steer(&world, text).await?;
        }
        started
            .agent
            .send(json!({"method": "status/update", "params": {"message": "I am back"}}))
            .await?;
        // The first prompt and, where nudges are prompts, the two nudges came before.
        let before = 1 + 2 * prompts_before_nudges(dialect);
        let method = prompt_method(dialect);
        started.agent.wait_method(method, before + 3).await?;
        let delivered: Vec<String> = started
            .agent
            .received_method(method)?
            .iter()
            .skip(usize::try_from(before).unwrap_or(usize::MAX))
            .map(prompt_text)
            .collect();
        ensure_eq!(
            vec!["one".to_string(), "two".to_string(), "three".to_string()],
            delivered,
            "the queued messages the agent received, in order"
        );
        world.reply_with(&started.root, "back online").await?;
        ensure_eq!(
            vec![
                ("one".to_string(), 1),
                ("two".to_string(), 1),
                ("three".to_string(), 1)
            ],
            queued(&world, &started.row.id).await?,
            "steering rows (message, consumed)"
        );
        world.server.stop().await?;
        Ok(())
    })
    .await
}

async fn s061(ctx: Ctx) -> CheckResult {
    each_dialect(&ctx, STREAM, |ctx, dialect| async move {
        let (world, started) = stalling(&ctx, dialect, FAST, "stall test").await?;
        let queue_mode = ctx.text("queue_mode", "switching to queue mode");
        by_schedule(
            &ctx,
            schedule(&ctx, FAST, u64::from(FAST.2) + 1),
            "queue mode",
            world.reply_with(&started.root, &queue_mode),
        )
        .await?;
        ensure_eq!(
            json!("stalled"),
            session_value(&world, &started.row.id, "connectivity_status").await?,
            "connectivity_status"
        );
        world.server.stop().await?;
        Ok(())
    })
    .await
}

async fn s062(ctx: Ctx) -> CheckResult {
    each_dialect(&ctx, STREAM, |ctx, dialect| async move {
        let (world, started) = stalling(&ctx, dialect, FAST, "stall test").await?;
        escalated(&ctx, &world, &started, FAST).await?;
        steer(&world, "one").await?;
        steer(&world, "two").await?;
        started
            .agent
            .send(json!({"method": "status/update", "params": {"message": "I am back"}}))
            .await?;
        world
            .reply_with(
                &started.root,
                &ctx.text("back", "Agent back online — delivering 2 queued messages"),
            )
            .await?;
        let before = 1 + 2 * prompts_before_nudges(dialect);
        started
            .agent
            .wait_method(prompt_method(dialect), before + 2)
            .await?;
        ensure_eq!(
            json!("online"),
            session_value(&world, &started.row.id, "connectivity_status").await?,
            "connectivity_status"
        );
        world.server.stop().await?;
        Ok(())
    })
    .await
}

/// The `at` (seconds) of the agent's transcript record #`index` (0-based) matching `kind` and
/// `needle`.
fn transcript_at(
    started: &Started,
    kind: &str,
    needle: &str,
    index: usize,
) -> Result<f64, CheckError> {
    let path = started.agent.hello["transcript"]
        .as_str()
        .or_fail("the agent reports its transcript")?;
    let text = std::fs::read_to_string(path).or_fail("the agent's transcript")?;
    text.lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|r| r["kind"] == kind && r["text"].as_str().is_some_and(|t| t.contains(needle)))
        .nth(index)
        .and_then(|r| r["at"].as_f64())
        .or_fail(format!("a transcript record {kind} with {needle:?}"))
}

async fn s063(ctx: Ctx) -> CheckResult {
    each_dialect(&ctx, STREAM, |ctx, dialect| async move {
        let stall = (600, 60_000, 3);
        let (world, started) = stalling(&ctx, dialect, stall, "keepalive please").await?;
        nudges(&ctx, stall, &started, dialect, 1).await?;
        let status = transcript_at(&started, "out", "still working", 0)?;
        let method = format!("\"{}\"", dialect.nudge_method());
        let skip = usize::from(prompts_before_nudges(dialect) == 1);
        let nudge = transcript_at(&started, "in", &method, skip)?;
        let gap_ms = (nudge - status) * 1000.0;
        // 600 ms, or the whole second a build that takes seconds was given.
        let threshold = in_force_ms(&ctx, 600, "inactivity_s");
        let full_threshold = gap_ms >= threshold as f64 - 5.0;
        ensure!(
            full_threshold,
            format!(
                "the first nudge comes a full threshold ({threshold} ms) after the last activity"
            ),
            "{gap_ms:.0} ms after the status"
        );
        ensure!(
            !session_value(&world, &started.row.id, "last_activity_at")
                .await?
                .is_null(),
            "the session's last activity is recorded"
        );
        world.server.stop().await?;
        Ok(())
    })
    .await
}

async fn s064(ctx: Ctx) -> CheckResult {
    each_dialect(&ctx, STREAM, |ctx, dialect| async move {
        let stall = (300, 60_000, 3);
        let (world, started) = stalling(&ctx, dialect, stall, "stall test").await?;
        let nudges = nudges(&ctx, stall, &started, dialect, 1).await?;
        let first = nudges.first().or_fail("a nudge")?;
        ensure!(
            !nudge_text(first).is_empty(),
            "the nudge carries a message",
            "{}",
            first
        );
        world
            .reply_with(&started.root, &ctx.text("nudged", "Auto-nudge #1"))
            .await?;
        ensure_eq!(
            json!(1),
            session_value(&world, &started.row.id, "nudge_count").await?,
            "nudge_count"
        );
        world.server.stop().await?;
        Ok(())
    })
    .await
}

async fn s065(ctx: Ctx) -> CheckResult {
    each_dialect(&ctx, STREAM, |ctx, dialect| async move {
        let stall = (300, 60_000, 3);
        let (world, started) = stalling(&ctx, dialect, stall, "stall test").await?;
        nudges(&ctx, stall, &started, dialect, 1).await?;
        world
            .reply_with(&started.root, &ctx.text("nudged", "Auto-nudge #1"))
            .await?;
        started
            .agent
            .send(json!({"method": "status/update", "params": {"message": "back at it"}}))
            .await?;
        world
            .reply_with(
                &started.root,
                &ctx.text("recovered", "resumed after 1 nudge"),
            )
            .await?;
        ensure_eq!(
            json!(0),
            session_value(&world, &started.row.id, "nudge_count").await?,
            "nudge_count"
        );
        world.ensure_status(&started.row.id, "active").await?;
        world.server.stop().await?;
        Ok(())
    })
    .await
}

async fn s066(ctx: Ctx) -> CheckResult {
    each_dialect(&ctx, STREAM, |ctx, dialect| async move {
        let (world, started) = stalling(&ctx, dialect, FAST, "stall test").await?;
        let message = escalated(&ctx, &world, &started, FAST).await?;
        ensure!(
            has_button(&message, "stall_terminate") && has_button(&message, "stall_restart"),
            "the escalation has Terminate and Restart buttons",
            "{}",
            message.message["blocks"]
        );
        ensure_eq!(
            2,
            nudges(&ctx, FAST, &started, dialect, 2).await?.len(),
            "nudges before the escalation"
        );
        world.server.stop().await?;
        Ok(())
    })
    .await
}

async fn s067(ctx: Ctx) -> CheckResult {
    each_dialect(&ctx, STREAM, |ctx, dialect| async move {
        let stall = (200, 200, 1);
        let (world, started) = stalling(&ctx, dialect, stall, "original task").await?;
        let old_pid = started.agent.pid().or_fail("the agent's pid")?;
        let message = escalated(&ctx, &world, &started, stall).await?;
        steer(&world, "queued before restart").await?;
        world.world.click(&message, "stall_restart", ALICE)?;
        let second = world.agents.nth(1).await?;
        ensure_eq!(
            started.row.id.clone(),
            second.session_id.clone(),
            "the new agent's INTERCOM_SESSION_ID"
        );
        second.wait_method(prompt_method(dialect), 2).await?;
        // Where nudges are prompts, a nudge may follow them.
        let prompts: Vec<String> = second
            .received_method(prompt_method(dialect))?
            .iter()
            .take(2)
            .map(prompt_text)
            .collect();
        ensure_eq!(
            vec![
                "original task".to_string(),
                "queued before restart".to_string()
            ],
            prompts,
            "the new agent's prompts: the original, then the steering queued while offline"
        );
        world
            .reply_with(&started.root, &ctx.text("restarted", "restarted"))
            .await?;
        ensure!(
            !ski::transport::child::process_exists(old_pid),
            "the old agent process is gone"
        );
        let row = world.row(&started.row.id).await?;
        ensure_eq!("active".to_string(), row.status, "the session's status");
        ensure_eq!(
            Some(started.root.ts().to_string()),
            row.thread_ts,
            "the session's thread_ts"
        );
        world.server.stop().await?;
        Ok(())
    })
    .await
}

async fn s068(ctx: Ctx) -> CheckResult {
    each_dialect(&ctx, BOTH, |ctx, dialect| async move {
        let (world, started) = crash_with_pending_clearance(&ctx, dialect).await?;
        world.ensure_status(&started.row.id, "interrupted").await?;
        world.server.stop().await?;
        Ok(())
    })
    .await
}

/// A session whose agent crashed (exit code 1) while its clearance req-001 was pending, once the
/// expiry and the crash are in the thread (S068, INT-SKI-10).
pub async fn crash_with_pending_clearance(
    ctx: &Ctx,
    dialect: Dialect,
) -> Result<(AcpWorld, Started), CheckError> {
    let world = AcpWorld::start(ctx, Options::new(dialect)).await?;
    let started = world.start_session_asking_clearance(CHANNEL_X).await?;
    approval_message(&world, &started).await?;
    // The agent exits before it could reply to the command.
    started
        .agent
        .fire(json!({"cmd": "exit", "code": 1}))
        .await?;
    // Both notices come as the session ends.
    let session_id = started.row.id.clone();
    world
        .final_reply(&started.root, &session_id, &ctx.text("expired", "expired"))
        .await?;
    world
        .final_reply(
            &started.root,
            &session_id,
            &ctx.text("final", "Agent crashed (exit code: 1)"),
        )
        .await?;
    Ok((world, started))
}
