//! Feature 4, concurrency and load (TEAM-CC-01…05), black-box and without sleeps: every wait is
//! on an event the harness observes (a `ready` or `busy` line, a process exit, its own lock).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use futures::future::join_all;
use tokio::io::AsyncReadExt;

use super::adapter::{Adapter, Gated, LEAD, refusal};
use super::ledger::{self, WriteLock};
use crate::vocabulary::capability;
use crate::{Check, CheckError, CheckResult, Ctx, OrFail, ensure, ensure_eq};

const TEAM: &str = "alpha-squad";
/// Processes claiming one task in TEAM-CC-01: the lead and nine teammates (E-TEAM-18).
const CLAIMANTS: usize = 10;

/// The checks of this module.
pub fn checks() -> Vec<Check> {
    vec![
        Check::new(
            "TEAM-CC-01",
            "Ten gated processes (the lead and nine teammates) claim T1 while the harness holds the ledger's write lock; each reports ready, then busy (one that ends while the lock is held gave up on busy: a failure); after the lock is released exactly one succeeds and nine get already_claimed; the ledger shows that owner.",
            cc_01,
        ),
        Check::new(
            "TEAM-CC-02",
            "With the harness holding the write lock, a gated `task complete` must report busy and keep running (ending is a failure), then succeed once the lock is released; with teams-busy-trace, two busy events with a growing delayMs, and with a 300 ms budget and the lock kept it exits 5 with busy and changes nothing.",
            cc_02,
        ),
        Check::new(
            "TEAM-CC-03",
            "A message sent while a drain whose stdout is unread prints two large messages must stay in the inbox; then five writers send 20 messages each to one inbox while a sixth process loops `context inject` until they finish; injected plus left equals sent, no duplicates, each writer's messages in order.",
            cc_03,
        ),
        Check::new(
            "TEAM-CC-04",
            "Builds C <- B <- A; completing C makes B claimable while A stays blocked by B; completing B makes A claimable; every command finishes within the row's timeout.",
            cc_04,
        ),
        Check::new(
            "TEAM-CC-05",
            "With the harness keeping a connection open (so the WAL stays), 50 writes grow ledger.db-wal; `maintenance checkpoint` leaves it absent or empty and `task list` unchanged.",
            cc_05,
        ),
    ]
}

async fn cc_01(ctx: Ctx) -> CheckResult {
    let adapter = Adapter::new(&ctx);
    adapter.create_team(TEAM).await?;
    let mut keys: Vec<String> = (1..CLAIMANTS)
        .map(|i| format!("agent:worker{i}:main"))
        .collect();
    for (i, key) in keys.iter().enumerate() {
        adapter.join(TEAM, key, &format!("worker{i}")).await?;
    }
    keys.push(LEAD.to_owned());
    let task = adapter.create_task(TEAM, "T1", &[]).await?;
    let mut claimants: Vec<Gated> = Vec::new();
    for key in &keys {
        let mut args = vec!["--gate", "--trace", "task", "claim", TEAM, task.as_str()];
        if ctx.has(capability::TEAMS_BUSY_TRACE) {
            args.splice(2..2, ["--busy-timeout-ms", "60000"]);
        }
        claimants.push(adapter.start(key, &args)?);
    }
    for claimant in &mut claimants {
        let ready = ctx
            .within(
                "a ready event from every claimant",
                claimant.until_event("ready"),
            )
            .await?;
        ensure!(
            ready,
            "each claimant prints {\"event\":\"ready\"} once its ledger is open",
            "`{}` ended without it",
            claimant.command
        );
    }
    // Every claimant meets the harness's write lock, so each has done any read it makes before
    // writing by the time it reports busy: a read-then-write claim gets several winners every run.
    let lock = WriteLock::take(&ctx, &ledger::path(adapter.root(), TEAM)).await?;
    for claimant in &mut claimants {
        claimant.child.close_stdin();
    }
    for claimant in &mut claimants {
        waits_while_locked(&ctx, claimant).await?;
    }
    lock.release().await?;
    let mut outputs = Vec::new();
    for claimant in claimants {
        outputs.push(
            ctx.within("every claimant to exit", claimant.finish())
                .await??,
        );
    }
    let winners: Vec<usize> = (0..CLAIMANTS)
        .filter(|i| outputs[*i].code == Some(0))
        .collect();
    ensure_eq!(
        1,
        winners.len(),
        "successful claims among 10 (exits: {:?})",
        outputs.iter().map(|o| o.exit()).collect::<Vec<_>>()
    );
    let winner = winners[0];
    let value = outputs[winner].json()?;
    ensure_eq!(
        keys[winner].as_str(),
        value["task"]["owner"].as_str().unwrap_or(""),
        "the winner's task.owner"
    );
    let expected = ctx.text("already_claimed", "Task already claimed by another agent");
    for (i, output) in outputs.iter().enumerate() {
        if i == winner {
            continue;
        }
        let error = refusal(output, "already_claimed")?;
        ensure!(
            error["message"].as_str().unwrap_or("").contains(&expected),
            "each loser's message is the document's",
            "{}",
            error["message"]
        );
    }
    if ctx.has(capability::TEAMS_LEDGER_READ) {
        let row = ledger::task(&ctx, &ledger::path(adapter.root(), TEAM), &task)
            .await?
            .or_fail("T1's row")?;
        ensure_eq!(
            "in_progress",
            row.status.as_str(),
            "T1's status in the ledger"
        );
        ensure_eq!(
            Some(keys[winner].clone()),
            row.owner,
            "T1's owner in the ledger"
        );
        ensure!(
            row.claimed_at.is_some(),
            "T1's claimedAt is set in the ledger"
        );
    }
    Ok(())
}

/// Waits until `process` reports a wait for the ledger the harness has locked; a process that
/// ends first gave up on a locked ledger instead of retrying (the document's SQLITE_BUSY retry).
async fn waits_while_locked(ctx: &Ctx, process: &mut Gated) -> CheckResult {
    let waiting = ctx
        .within(
            "a busy event while the harness holds the ledger's write lock",
            process.until_event("busy"),
        )
        .await?;
    if !waiting {
        return Err(crate::Failure::expected(format!(
            "`{}` waits and retries while the ledger is locked (a busy event), not ends",
            process.command
        ))
        .actual(format!(
            "it ended without a busy event; events {:?}",
            process.events()
        ))
        .into());
    }
    Ok(())
}

async fn cc_02(ctx: Ctx) -> CheckResult {
    let adapter = Adapter::new(&ctx);
    adapter.create_team(TEAM).await?;
    let task = adapter.create_task(TEAM, "T1", &[]).await?;
    adapter.ok(LEAD, &["task", "claim", TEAM, &task]).await?;
    let path = ledger::path(adapter.root(), TEAM);
    let backoff = ctx.has(capability::TEAMS_BUSY_TRACE);
    let mut args = vec!["--gate", "--trace", "task", "complete", TEAM, task.as_str()];
    if backoff {
        args.splice(2..2, ["--busy-timeout-ms", "60000"]);
    }
    let mut update = adapter.start(LEAD, &args)?;
    let ready = ctx
        .within("a ready event", update.until_event("ready"))
        .await?;
    ensure!(
        ready,
        "the update prints {\"event\":\"ready\"} once its ledger is open",
        "`{}` ended without it",
        update.command
    );
    let lock = WriteLock::take(&ctx, &path).await?;
    update.child.close_stdin();
    waits_while_locked(&ctx, &mut update).await?;
    if backoff {
        // The busy events not yet returned, the one already seen first.
        let mut delays = Vec::new();
        while delays.len() < 2 {
            let seen = ctx
                .within(
                    "busy events while the ledger is locked",
                    update.until_next_busy(),
                )
                .await?;
            let Some(delay) = seen else {
                let output = update.finish().await?;
                return Err(crate::Failure::expected(
                    "the update waits while the ledger is locked (busy events), not exits",
                )
                .actual(format!(
                    "exit {}; stdout {}; stderr {}",
                    output.exit(),
                    output.stdout.trim(),
                    output.stderr.trim()
                ))
                .into());
            };
            delays.push(delay);
        }
        ensure!(
            delays[1] > delays[0],
            "the second busy wait is longer (exponential backoff)",
            "delayMs {delays:?}"
        );
    } else {
        ctx.note("teams-busy-trace not declared: the growth of the backoff is not judged");
    }
    ensure!(
        update.child.try_status().is_none(),
        "the update is still waiting while the lock is held"
    );
    lock.release().await?;
    let output = ctx
        .within("the update to finish", update.finish())
        .await??;
    let value = output.ok_json()?;
    ensure_eq!(
        "completed",
        value["task"]["status"].as_str().unwrap_or(""),
        "the task after the retried update"
    );
    let row = ledger::task(&ctx, &path, &task)
        .await?
        .or_fail("the task's row")?;
    ensure_eq!(
        "completed",
        row.status.as_str(),
        "the task's status in the ledger"
    );
    if !backoff {
        return Ok(());
    }

    // Bounded: a short budget with the lock kept gives up with busy (exit 5), nothing changed.
    let second = adapter.create_task(TEAM, "T2", &[]).await?;
    let lock = WriteLock::take(&ctx, &path).await?;
    let output = adapter
        .run(
            LEAD,
            &["--busy-timeout-ms", "300", "task", "claim", TEAM, &second],
        )
        .await?;
    lock.release().await?;
    output.ensure_code(5)?;
    refusal(&output, "busy")?;
    let row = ledger::task(&ctx, &path, &second)
        .await?
        .or_fail("T2's row")?;
    ensure_eq!("pending", row.status.as_str(), "T2 after the claim gave up");
    Ok(())
}

async fn cc_03(ctx: Ctx) -> CheckResult {
    const WRITERS: usize = 5;
    const PER_WRITER: usize = 20;
    ctx.require(capability::TEAMS_CONTEXT)?;
    let adapter = Adapter::new(&ctx);
    adapter.create_team(TEAM).await?;
    let reader = "agent:reader:main";
    adapter.join(TEAM, reader, "reader").await?;
    let writers: Vec<String> = (0..WRITERS)
        .map(|i| format!("agent:writer{i}:main"))
        .collect();
    for (i, key) in writers.iter().enumerate() {
        adapter.join(TEAM, key, &format!("writer{i}")).await?;
    }
    send_while_draining(&adapter, reader, &writers[0]).await?;
    let done = Arc::new(AtomicBool::new(false));
    let writing = {
        let adapter = adapter.clone();
        let writers = writers.clone();
        let done = Arc::clone(&done);
        async move {
            let results = join_all(writers.iter().map(|key| {
                let adapter = adapter.clone();
                async move {
                    for n in 0..PER_WRITER {
                        let content = format!("{key} #{n}");
                        adapter
                            .ok(
                                key,
                                &[
                                    "message",
                                    "send",
                                    TEAM,
                                    "--to",
                                    reader,
                                    "--content",
                                    &content,
                                ],
                            )
                            .await?;
                    }
                    Ok::<_, CheckError>(())
                }
            }))
            .await;
            done.store(true, Ordering::SeqCst);
            results.into_iter().collect::<Result<Vec<()>, CheckError>>()
        }
    };
    let draining = {
        let adapter = adapter.clone();
        let done = Arc::clone(&done);
        async move {
            let mut received: Vec<String> = Vec::new();
            let mut rounds = 0;
            while !done.load(Ordering::SeqCst) || rounds == 0 {
                rounds += 1;
                let value = adapter.ok(reader, &["context", "inject", TEAM]).await?;
                let block = value["block"].as_str().unwrap_or("");
                let elements =
                    super::xml::parse_block(block).or_fail("the injected block parses")?;
                received.extend(elements.into_iter().map(|e| e.text.trim().to_owned()));
            }
            Ok::<_, CheckError>(received)
        }
    };
    let (written, drained) = futures::join!(writing, draining);
    written?;
    let mut received = drained?;
    let rest = adapter.ok(reader, &["inbox", "read", TEAM]).await?;
    for message in rest["messages"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
    {
        received.push(message["content"].as_str().unwrap_or("").to_owned());
    }
    ensure_eq!(
        WRITERS * PER_WRITER,
        received.len(),
        "messages injected plus left (sent {})",
        WRITERS * PER_WRITER
    );
    for key in &writers {
        let numbers: Vec<usize> = received
            .iter()
            .filter_map(|c| {
                c.strip_prefix(key.as_str())
                    .and_then(|r| r.strip_prefix(" #"))
            })
            .filter_map(|n| n.parse().ok())
            .collect();
        ensure_eq!(
            (0..PER_WRITER).collect::<Vec<_>>(),
            numbers,
            "{key}'s messages, each once and in send order"
        );
    }
    Ok(())
}

/// Bytes of each of the two messages [`send_while_draining`] leaves in the inbox: together they
/// make the drain's output larger than a pipe holds (64 KiB on Linux).
const LARGE_MESSAGE: usize = 90_000;

/// The deterministic half of TEAM-CC-03: the reader's inbox holds two large messages and a drain
/// (`context inject`) starts with its stdout unread. Its first output byte proves it has read the
/// inbox; it cannot finish printing until the harness reads on. Meanwhile one more message is
/// sent. After the drain ends, that message must still be in the inbox: a drain that removes
/// what it did not read (reads, then deletes the file without the inbox lock) loses it every run.
async fn send_while_draining(adapter: &Adapter, reader: &str, sender: &str) -> CheckResult {
    let ctx = adapter.ctx();
    for n in 0..2 {
        let content = format!("large #{n} {}", "x".repeat(LARGE_MESSAGE));
        adapter
            .ok(
                sender,
                &[
                    "message",
                    "send",
                    TEAM,
                    "--to",
                    reader,
                    "--content",
                    &content,
                ],
            )
            .await?;
    }
    let mut drain = adapter.start(reader, &["context", "inject", TEAM])?;
    drain.child.close_stdin();
    let mut stdout = drain
        .child
        .take_stdout()
        .or_error("taking the drain's stdout")?;
    let mut printed = vec![0u8; 1];
    ctx.within(
        "the drain's first output byte",
        stdout.read_exact(&mut printed),
    )
    .await?
    .or_fail("the drain prints its JSON")?;
    adapter
        .ok(
            sender,
            &[
                "message",
                "send",
                TEAM,
                "--to",
                reader,
                "--content",
                "sent while draining",
            ],
        )
        .await?;
    ctx.within("the drain's output", stdout.read_to_end(&mut printed))
        .await?
        .or_fail("the drain's output can be read")?;
    let status = ctx.within("the drain to exit", drain.finish()).await??;
    ensure!(
        status.code == Some(0),
        "the drain succeeds",
        "exit {}; {}",
        status.exit(),
        status.stderr.trim()
    );
    let value: serde_json::Value =
        serde_json::from_slice(&printed).or_fail("the drain prints one JSON document")?;
    let drained = super::xml::parse_block(value["block"].as_str().unwrap_or(""))
        .or_fail("the injected block parses")?;
    let rest = adapter.ok(reader, &["inbox", "read", TEAM]).await?;
    let left: Vec<&str> = rest["messages"]
        .as_array()
        .map(|m| m.iter().filter_map(|m| m["content"].as_str()).collect())
        .unwrap_or_default();
    ensure_eq!(
        (2, vec!["sent while draining"]),
        (drained.len(), left),
        "(messages the drain injected, messages left after it) when one was sent while it printed"
    );
    Ok(())
}

async fn cc_04(ctx: Ctx) -> CheckResult {
    let adapter = Adapter::new(&ctx);
    adapter.create_team(TEAM).await?;
    let c = adapter.create_task(TEAM, "C", &[]).await?;
    let b = adapter.create_task(TEAM, "B", &[&c]).await?;
    let a = adapter.create_task(TEAM, "A", &[&b]).await?;
    adapter.ok(LEAD, &["task", "claim", TEAM, &c]).await?;
    adapter.ok(LEAD, &["task", "complete", TEAM, &c]).await?;
    let error = adapter
        .refused(LEAD, &["task", "claim", TEAM, &a], "blocked")
        .await?;
    ensure_eq!(
        serde_json::json!([b.clone()]),
        error["blockedBy"],
        "A's blockedBy once C is completed"
    );
    let available = adapter
        .ok(LEAD, &["task", "list", TEAM, "--available"])
        .await?;
    let ids: Vec<&str> = available["tasks"]
        .as_array()
        .map(|t| t.iter().filter_map(|t| t["id"].as_str()).collect())
        .unwrap_or_default();
    ensure_eq!(vec![b.as_str()], ids, "available tasks once C is completed");
    adapter.ok(LEAD, &["task", "claim", TEAM, &b]).await?;
    adapter.ok(LEAD, &["task", "complete", TEAM, &b]).await?;
    let claimed = adapter.ok(LEAD, &["task", "claim", TEAM, &a]).await?;
    ensure_eq!(
        "in_progress",
        claimed["task"]["status"].as_str().unwrap_or(""),
        "A after B is completed"
    );
    Ok(())
}

async fn cc_05(ctx: Ctx) -> CheckResult {
    ctx.require(capability::TEAMS_MAINTENANCE)?;
    ctx.require(capability::TEAMS_LEDGER_READ)?;
    let adapter = Adapter::new(&ctx);
    adapter.create_team(TEAM).await?;
    let path = ledger::path(adapter.root(), TEAM);
    let wal = adapter.root().join(TEAM).join("ledger.db-wal");
    // An idle reader keeps the WAL from being removed when each command closes its connection.
    let mut keeper = crate::sqlite::Sqlite::read_only(&ctx, &path).await?;
    keeper
        .query("SELECT COUNT(*) FROM tasks", &[])
        .await?
        .or_fail("table tasks can be read")?;
    for n in 0..50 {
        adapter
            .create_task(TEAM, &format!("write {n}"), &[])
            .await?;
    }
    let size = |p: &std::path::Path| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0);
    let before = size(&wal);
    ensure!(
        before > 0,
        "50 writes leave a non-empty ledger.db-wal while a reader is connected",
        "{before} bytes"
    );
    ensure!(
        before <= 4 * 1024 * 1024,
        "the WAL stays under 4 MiB (auto-checkpoint)",
        "{before} bytes"
    );
    let listed = adapter.ok(LEAD, &["task", "list", TEAM]).await?;
    let value = adapter
        .ok(LEAD, &["maintenance", "checkpoint", TEAM])
        .await?;
    ensure_eq!(
        0,
        size(&wal),
        "ledger.db-wal bytes after maintenance checkpoint (reported {value})"
    );
    ensure_eq!(
        listed["tasks"],
        adapter.ok(LEAD, &["task", "list", TEAM]).await?["tasks"],
        "task list after the checkpoint"
    );
    keeper.close().await?;
    Ok(())
}
