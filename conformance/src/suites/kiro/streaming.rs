//! BR-07 (streaming) and BR-08 (stderr): judged from the events `echo` prints, the mock's
//! transcript, and the adapter's log on stderr.

use super::config::logged_marker;
use super::harness::{Kiro, Wrapper};
use crate::vocabulary::kiro;
use crate::{Check, CheckError, CheckResult, Ctx, ensure, ensure_eq};

/// The checks of this module.
pub fn checks() -> Vec<Check> {
    vec![
        Check::new(
            "BR-07.1",
            "The chunks of a turn are printed after the prompt was sent and before the end of the turn, including the ones written in the same write as the response.",
            br_07_1,
        ),
        Check::new(
            "BR-07.2",
            "The agent streams \"one \", \"two \", \"three\": exactly these three texts are printed, not cumulated.",
            br_07_2,
        ),
        Check::new(
            "BR-07.3",
            "The response ends the turn: one turn_end after the last chunk, carrying the response's stopReason unless the profile says `stop_reason = \"absent\"`, with kiro's turn_end marker (ignored) and without one (E-KIRO-01).",
            br_07_3,
        ),
        Check::new(
            "BR-07.4",
            "tool_call, tool_call_update and plan updates are reported and logged; the client sends nothing because of them and the turn goes on.",
            br_07_4,
        ),
        Check::new(
            "BR-07.5",
            "_session/terminate mid-turn is logged; the client sends nothing because of it and the turn goes on.",
            br_07_5,
        ),
        Check::new(
            "BR-08.1",
            "kiro-cli's stderr line appears in the adapter's log, and a 1 MiB burst of stderr mid-turn does not stall the turn.",
            br_08_1,
        ),
        Check::new(
            "BR-08.2",
            "With LOG_LEVEL WARNING and ERROR, kiro-cli's stderr line is logged at that level.",
            br_08_2,
        ),
        Check::new(
            "BR-08.3",
            "kiro-cli starts with its stderr already closed: the client stays alive, the turn ends normally.",
            br_08_3,
        ),
    ]
}

async fn br_07_1(ctx: Ctx) -> CheckResult {
    let kiro = Kiro::new(&ctx)?;
    let echo = kiro.echo("stream", &[]).await?;
    echo.ensure_code(0)?;
    let position = |name: &str| echo.events.iter().position(|e| e["event"] == name);
    let (prompt, end) = (position("prompt"), position("turn_end"));
    let chunks: Vec<usize> = echo
        .events
        .iter()
        .enumerate()
        .filter(|(_, e)| e["event"] == "chunk")
        .map(|(i, _)| i)
        .collect();
    ensure!(
        matches!((prompt, end), (Some(p), Some(e)) if chunks.len() == 3 && chunks.iter().all(|&c| p < c && c < e)),
        "every update is delivered between the prompt and its response",
        "{}",
        echo.summary()
    );
    Ok(())
}

async fn br_07_2(ctx: Ctx) -> CheckResult {
    let kiro = Kiro::new(&ctx)?;
    let echo = kiro.echo("stream", &[]).await?;
    echo.ensure_code(0)?;
    ensure_eq!(
        vec!["one ", "two ", "three"],
        echo.chunks(),
        "the chunk texts"
    );
    Ok(())
}

/// Whether the target's `turn_end` carries the response's `stopReason`: the profile's
/// `stop_reason` setting, `kept` (the default) or `absent` (the implementation drops it).
fn keeps_stop_reason(ctx: &Ctx) -> Result<bool, CheckError> {
    match ctx.setting(&kiro::STOP_REASON)?.as_deref() {
        None | Some("kept") => Ok(true),
        Some("absent") => Ok(false),
        Some(other) => Err(CheckError::harness(format!(
            "the setting stop_reason is {other:?}; expected \"kept\" or \"absent\""
        ))),
    }
}

async fn br_07_3(ctx: Ctx) -> CheckResult {
    let keeps_stop_reason = keeps_stop_reason(&ctx)?;
    let kiro = Kiro::new(&ctx)?;
    for prompt in ["Say exactly: marked", "stream"] {
        let echo = kiro.echo(prompt, &[]).await?;
        echo.ensure_code(0)?;
        let ends = echo.named("turn_end");
        ensure_eq!(1, ends.len(), "turn_end events for {prompt:?}");
        if keeps_stop_reason {
            ensure_eq!(
                "end_turn",
                ends[0]["stopReason"].as_str().unwrap_or(""),
                "the stopReason"
            );
        }
        let last_chunk = echo.events.iter().rposition(|e| e["event"] == "chunk");
        let end = echo.events.iter().position(|e| e["event"] == "turn_end");
        ensure!(
            matches!((last_chunk, end), (Some(c), Some(e)) if c < e),
            "turn_end comes after the last chunk",
            "{}",
            echo.summary()
        );
    }
    Ok(())
}

/// Fails if the client sent anything after its session/prompt besides answers and cancels.
fn nothing_sent_after_prompt(echo: &super::harness::Echo) -> CheckResult {
    let sent = echo.transcript()?.sent()?;
    let prompt = sent
        .iter()
        .position(|m| m["method"] == "session/prompt")
        .unwrap_or(sent.len());
    let after: Vec<String> = sent[prompt + 1..]
        .iter()
        .filter(|m| m.get("method").is_some())
        .map(ToString::to_string)
        .collect();
    ensure!(
        after.is_empty(),
        "the client acts on nothing of it in Unit 1",
        "it sent {after:?}"
    );
    Ok(())
}

async fn br_07_4(ctx: Ctx) -> CheckResult {
    let kiro = Kiro::new(&ctx)?;
    let echo = kiro.echo("stream", &[]).await?;
    echo.ensure_code(0)?;
    let kinds: Vec<String> = echo
        .named("update")
        .iter()
        .filter_map(|e| e["kind"].as_str().map(str::to_owned))
        .collect();
    ensure_eq!(
        vec!["tool_call", "tool_call_update", "plan"],
        kinds,
        "the other updates reported"
    );
    for kind in ["tool_call_update", "plan"] {
        ensure!(
            echo.output.stderr.contains(kind),
            format!("the {kind} update is logged"),
            "stderr {:?}",
            echo.output.stderr
        );
    }
    ensure_eq!(
        vec!["one ", "two ", "three"],
        echo.chunks(),
        "the chunks around them"
    );
    nothing_sent_after_prompt(&echo)
}

async fn br_07_5(ctx: Ctx) -> CheckResult {
    let kiro = Kiro::new(&ctx)?;
    let echo = kiro.echo("stream", &[]).await?;
    echo.ensure_code(0)?;
    ensure!(
        echo.output.stderr.contains("_session/terminate"),
        "_session/terminate is logged",
        "stderr {:?}",
        echo.output.stderr
    );
    ensure_eq!(
        Some("three".to_owned()),
        echo.chunks().last().cloned(),
        "the chunk after _session/terminate"
    );
    nothing_sent_after_prompt(&echo)
}

async fn br_08_1(ctx: Ctx) -> CheckResult {
    let kiro = Kiro::new(&ctx)?;
    let echo = kiro.echo("flood", &[]).await?;
    echo.ensure_code(0)?;
    ensure!(
        logged_marker(&echo.output.stderr).is_some(),
        "kiro-cli's stderr is captured and logged",
        "{}",
        echo.summary()
    );
    ensure_eq!(
        vec!["after the flood"],
        echo.chunks(),
        "the turn after 1 MiB of stderr"
    );
    Ok(())
}

async fn br_08_2(ctx: Ctx) -> CheckResult {
    for (level, tag) in [("WARNING", "WARN"), ("ERROR", "ERROR"), ("INFO", "INFO")] {
        let mut kiro = Kiro::new(&ctx)?;
        kiro.set("LOG_LEVEL", level);
        let echo = kiro.echo("Say exactly: HI", &[]).await?;
        echo.ensure_code(0)?;
        let line = logged_marker(&echo.output.stderr).unwrap_or("");
        ensure!(
            line.contains(tag),
            format!("with LOG_LEVEL={level} kiro-cli's stderr is logged at {level}"),
            "the line {line:?}; {}",
            echo.summary()
        );
    }
    Ok(())
}

async fn br_08_3(ctx: Ctx) -> CheckResult {
    let kiro = Kiro::new(&ctx)?;
    kiro.wrapper(Wrapper::NoStderr)?;
    let echo = kiro.echo("Say exactly: still here", &[]).await?;
    echo.ensure_code(0)?;
    ensure_eq!(
        vec!["still here"],
        echo.chunks(),
        "the turn after stderr ended"
    );
    let states = echo.states();
    ensure!(
        states.iter().rev().nth(1).is_some_and(|s| s == "READY"),
        "stderr EOF does not make the client DEAD",
        "states {states:?}"
    );
    Ok(())
}
