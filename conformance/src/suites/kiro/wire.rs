//! BR-05 (the client's JSON-RPC wire rules) and the named format tests, judged from the lines
//! the client wrote as the `kiro-cli` stand-in recorded them in its transcript.

use serde_json::Value;

use super::harness::{Echo, Kiro};
use crate::{Check, CheckError, CheckResult, Ctx, Failure, ensure, ensure_eq};

/// The checks of this module.
pub fn checks() -> Vec<Check> {
    vec![
        Check::new(
            "BR-05.1",
            "Runs a turn with cancels and a permission request: the ids of the client's requests are integers, each greater than the one before.",
            br_05_1,
        ),
        Check::new(
            "BR-05.2",
            "The agent answers an id the client never used before the real response, and asks permission with a UUID id: the turn ends with the real response, and the client's answer carries the agent's id.",
            br_05_2,
        ),
        Check::new(
            "BR-05.3",
            "Every message the client sent without expecting an answer (session/cancel) has no id member at all.",
            br_05_3,
        ),
        Check::new(
            "BR-05.4",
            "`echo --cancel`: session/cancel goes out in READY and in BUSY (as the client reports); every one kiro-cli read is a notification (no id) naming the session, and the run ends without waiting for an answer to it.",
            br_05_4,
        ),
        Check::new(
            "BR-05.5",
            "Every other method the client sends (initialize, session/new, session/prompt) carries an id, and each got its response before stdin closed.",
            br_05_5,
        ),
        Check::new(
            "BR-05.6",
            "Every line the client wrote is exactly one JSON object; a chunk the agent writes in four flushed pieces arrives as one message.",
            br_05_6,
        ),
        Check::new(
            "BR-05.7",
            "Each request is answered before the client closes stdin, which a line without its newline would prevent; no line holds a newline inside or carries a trailing CR.",
            br_05_7,
        ),
        Check::new(
            "BR-T14",
            "test_json_rpc_request_format: each request has jsonrpc \"2.0\", an id, a method and params.",
            br_t14,
        ),
        Check::new(
            "BR-T15",
            "test_json_rpc_notification_format: session/cancel has jsonrpc \"2.0\", a method and params, and no id.",
            br_t15,
        ),
    ]
}

async fn busy_run(ctx: &Ctx, prompt: &str) -> Result<Echo, CheckError> {
    let kiro = Kiro::new(ctx)?;
    let echo = kiro.echo(prompt, &["--cancel"]).await?;
    echo.ensure_code(0)?;
    Ok(echo)
}

/// The client's requests: messages with a method and an id.
fn requests(sent: &[Value]) -> Vec<&Value> {
    sent.iter()
        .filter(|m| m.get("method").is_some() && m.get("id").is_some())
        .collect()
}

async fn br_05_1(ctx: Ctx) -> CheckResult {
    let echo = busy_run(&ctx, "permission").await?;
    let sent = echo.transcript()?.sent()?;
    let ids: Vec<&Value> = requests(&sent).iter().map(|m| &m["id"]).collect();
    let shown: Vec<String> = ids.iter().map(ToString::to_string).collect();
    ensure!(
        ids.len() >= 3,
        "the client made its requests",
        "ids [{}]",
        shown.join(", ")
    );
    let mut last: Option<i64> = None;
    for id in &ids {
        let Some(n) = id.as_i64() else {
            return Err(Failure::new("request ids are integers", "integer ids")
                .actual(format!("ids [{}]", shown.join(", ")))
                .into());
        };
        if let Some(previous) = last {
            ensure!(
                n > previous,
                "request ids increase monotonically per client",
                "ids in order: [{}]",
                shown.join(", ")
            );
        }
        last = Some(n);
    }
    Ok(())
}

async fn br_05_2(ctx: Ctx) -> CheckResult {
    let kiro = Kiro::new(&ctx)?;
    let echo = kiro.echo("stream", &[]).await?;
    echo.ensure_code(0)?;
    ensure_eq!(
        vec!["one ", "two ", "three"],
        echo.chunks(),
        "the chunks up to the real response"
    );
    echo.one("turn_end")?;

    let echo = kiro.echo("permission", &[]).await?;
    echo.ensure_code(0)?;
    let transcript = echo
        .transcripts
        .last()
        .ok_or_else(|| CheckError::harness("no transcript"))?;
    let asked = transcript
        .received()
        .into_iter()
        .find(|m| m["method"] == "session/request_permission")
        .ok_or_else(|| CheckError::harness("the mock did not ask for permission"))?;
    let answer = transcript
        .sent()?
        .into_iter()
        .find(|m| m.get("method").is_none() && m.get("id") == asked.get("id"));
    ensure!(
        answer.is_some(),
        "the client's response carries the id of the agent's request",
        "request {asked}; client sent {:?}",
        transcript.sent_texts()
    );
    ensure_eq!(
        vec!["permission allow-once"],
        echo.chunks(),
        "the turn after the permission answer (allow_once chosen)"
    );
    Ok(())
}

async fn br_05_3(ctx: Ctx) -> CheckResult {
    let echo = busy_run(&ctx, "Say exactly: HI").await?;
    let cancels = echo.transcript()?.sent_method("session/cancel")?;
    ensure!(
        !cancels.is_empty(),
        "the client sent its notifications",
        "none in {:?}",
        echo.transcript()?.sent_texts()
    );
    for cancel in cancels {
        ensure!(
            cancel.get("id").is_none(),
            "a notification has no id member",
            "{cancel}"
        );
    }
    Ok(())
}

/// The `session/cancel` messages of an `echo --cancel` run that kiro-cli read, after checking
/// that the client reports one sent in READY and one in BUSY.
///
/// The READY one precedes `session/prompt`, which kiro-cli answered, so it was read and must be
/// in the transcript. The BUSY one may legitimately never be read: a client may close or kill
/// kiro-cli as soon as the turn ends, while the line still waits in the pipe. So the transcript
/// must hold the READY cancel before the prompt and at most the two the client reports.
pub fn cancels_read(echo: &Echo) -> Result<Vec<Value>, CheckError> {
    let states: Vec<String> = echo
        .named("cancel_sent")
        .iter()
        .filter_map(|e| e["state"].as_str().map(str::to_owned))
        .collect();
    ensure_eq!(
        vec!["READY".to_owned(), "BUSY".to_owned()],
        states,
        "the states session/cancel was sent in"
    );
    let sent = echo.transcript()?.sent()?;
    let methods: Vec<&str> = sent.iter().filter_map(|m| m["method"].as_str()).collect();
    let first_cancel = methods.iter().position(|m| *m == "session/cancel");
    let prompt = methods.iter().position(|m| *m == "session/prompt");
    ensure!(
        matches!((first_cancel, prompt), (Some(c), Some(p)) if c < p),
        "the READY session/cancel reaches kiro-cli before session/prompt",
        "kiro-cli read {methods:?}"
    );
    let cancels: Vec<Value> = sent
        .into_iter()
        .filter(|m| m["method"] == "session/cancel")
        .collect();
    ensure!(
        cancels.len() <= 2,
        "no session/cancel beyond the two the client reports",
        "kiro-cli read {} of them",
        cancels.len()
    );
    Ok(cancels)
}

async fn br_05_4(ctx: Ctx) -> CheckResult {
    let echo = busy_run(&ctx, "Say exactly: HI").await?;
    let cancels = cancels_read(&echo)?;
    for cancel in &cancels {
        ensure!(
            cancel.get("id").is_none(),
            "session/cancel is a notification (no id)",
            "{cancel}"
        );
        ensure!(
            cancel["params"]["sessionId"].is_string(),
            "session/cancel names the session",
            "{cancel}"
        );
    }
    echo.one("closed")?;
    Ok(())
}

async fn br_05_5(ctx: Ctx) -> CheckResult {
    let echo = busy_run(&ctx, "Say exactly: HI").await?;
    let transcript = echo.transcript()?;
    let sent = transcript.sent()?;
    let answered: Vec<Value> = transcript
        .received()
        .into_iter()
        .filter(|m| m.get("method").is_none())
        .filter_map(|m| m.get("id").cloned())
        .collect();
    for method in ["initialize", "session/new", "session/prompt"] {
        let message = sent.iter().find(|m| m["method"] == method);
        let Some(message) = message else {
            return Err(
                Failure::new(format!("{method} is sent"), format!("a {method} request"))
                    .actual(format!("{:?}", transcript.sent_texts()))
                    .into(),
            );
        };
        let id = message.get("id");
        ensure!(
            id.is_some_and(|id| !id.is_null()),
            format!("{method} is a request with an id"),
            "{message}"
        );
        ensure!(
            id.is_some_and(|id| answered.contains(id)),
            format!("{method} got its response"),
            "{message}"
        );
    }
    for message in &sent {
        if let Some(method) = message["method"].as_str() {
            ensure!(
                method == "session/cancel" || message.get("id").is_some(),
                "only session/cancel goes without an id",
                "{message}"
            );
        }
    }
    Ok(())
}

async fn br_05_6(ctx: Ctx) -> CheckResult {
    let kiro = Kiro::new(&ctx)?;
    let echo = kiro.echo("stream", &["--cancel"]).await?;
    echo.ensure_code(0)?;
    echo.transcript()?.sent()?;
    ensure_eq!(
        Some("three".to_owned()),
        echo.chunks().last().cloned(),
        "the chunk written in four pieces"
    );
    Ok(())
}

async fn br_05_7(ctx: Ctx) -> CheckResult {
    let echo = busy_run(&ctx, "Say exactly: HI").await?;
    let transcript = echo.transcript()?;
    let mut pending: Vec<Value> = Vec::new();
    let mut stdin_closed_with_pending = None;
    for (kind, message) in transcript.timeline() {
        match kind.as_str() {
            "in" if message.get("method").is_some() && message.get("id").is_some() => {
                pending.push(message["id"].clone())
            }
            "out" if message.get("method").is_none() => {
                pending.retain(|id| Some(id) != message.get("id"))
            }
            "note" if message.as_str() == Some("stdin closed") && !pending.is_empty() => {
                stdin_closed_with_pending = Some(pending.clone());
            }
            _ => {}
        }
    }
    ensure!(
        stdin_closed_with_pending.is_none(),
        "every request ends with a newline, so it is read before stdin closes",
        "unanswered at stdin close: {stdin_closed_with_pending:?}"
    );
    for text in transcript.sent_texts() {
        ensure!(
            !text.contains('\n') && !text.ends_with('\r'),
            "one message per line, newline-delimited",
            "{text:?}"
        );
    }
    Ok(())
}

async fn br_t14(ctx: Ctx) -> CheckResult {
    let echo = busy_run(&ctx, "Say exactly: HI").await?;
    let sent = echo.transcript()?.sent()?;
    for request in requests(&sent) {
        ensure!(
            request["jsonrpc"] == "2.0"
                && request["method"].is_string()
                && request.get("params").is_some_and(Value::is_object),
            "a request has jsonrpc, id, method and params",
            "{request}"
        );
    }
    Ok(())
}

async fn br_t15(ctx: Ctx) -> CheckResult {
    let echo = busy_run(&ctx, "Say exactly: HI").await?;
    let cancels = echo.transcript()?.sent_method("session/cancel")?;
    ensure!(!cancels.is_empty(), "session/cancel is sent", "none");
    for cancel in cancels {
        ensure!(
            cancel["jsonrpc"] == "2.0"
                && cancel.get("params").is_some_and(Value::is_object)
                && cancel.get("id").is_none(),
            "a notification has jsonrpc, method and params, and no id",
            "{cancel}"
        );
    }
    Ok(())
}
