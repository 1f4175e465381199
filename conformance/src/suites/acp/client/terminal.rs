//! Client rows on the terminal methods (E-ACP-44), driven live: the mock holds a turn open on a
//! gate while the check sends it `terminal/*` requests through the mock's control channel, one
//! at a time, and reads each answer from the transcript before the next.

use serde_json::{Value, json};

use super::control::{Control, ask};
use super::mock::{ClientRun, Mock, Running, on_prompt, start_client};
use crate::check::{Check, CheckError, CheckResult};
use crate::context::Ctx;
use crate::vocabulary::capability;
use crate::{ensure, ensure_eq, fail};

/// The checks of this module.
pub fn checks() -> Vec<Check> {
    vec![
        Check::new(
            "WS-035",
            "During a held turn the mock creates a terminal (sh printing hello, exit 3), sends a \
             tool_call referencing its terminalId, then asks output, wait_for_exit and release; \
             the client must answer a terminalId, output holding hello, exitCode 3 and a release \
             result, and the turn end end_turn.",
            ws_035,
        ),
        Check::new(
            "WS-036",
            "The mock creates a terminal that prints and then sleeps, kills it, and asks output and \
             wait_for_exit before releasing it; both must still answer (the printed output, a \
             signal), and after release output for that id must fail with -32002 or -32602.",
            ws_036,
        ),
        Check::new(
            "WS-040",
            "The mock asks terminal/output of a running terminal and of one that exited 0; each \
             result must have output (string) and truncated (bool); exitStatus must be absent \
             while running and {exitCode: 0, signal: null} after the exit.",
            ws_040,
        ),
        Check::new(
            "WS-041",
            "The mock waits for a terminal that exits 5 and for one that kills itself with \
             SIGKILL; wait_for_exit must answer {exitCode: 5, signal: null} and {exitCode: null, \
             signal: <non-empty name>}.",
            ws_041,
        ),
    ]
}

/// A client held in a turn, with the mock's control channel.
struct Live {
    control: Control,
    mock: Mock,
    client: Running,
}

impl Live {
    async fn start(ctx: &Ctx) -> Result<Live, CheckError> {
        let (mut control, args) = Control::listen(ctx)?;
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let script = on_prompt(&[
            "{ gate = \"end\" }",
            "{ respond = { stopReason = \"end_turn\" } }",
        ]);
        let mock = Mock::new(ctx, "mock", &script, &args)?;
        let client = start_client(ctx, "client", &mock, &[("prompt", "terminals")])?;
        control.accept(ctx).await?;
        control.wait(ctx, "session/prompt", 1).await?;
        Ok(Live {
            control,
            mock,
            client,
        })
    }

    /// Sends one request; its answer (a missing answer fails the check).
    async fn ask(&mut self, ctx: &Ctx, method: &str, params: Value) -> Result<Value, CheckError> {
        let mut params = params;
        params["sessionId"] = json!("${session}");
        let (request, answer) = ask(ctx, &mut self.control, &self.mock, method, params).await?;
        match answer {
            Some(answer) => Ok(answer),
            None => fail!(
                format!("the client answers {method}"),
                "no answer to {request}"
            ),
        }
    }

    /// Creates a terminal running `sh -c script`; its id.
    async fn create(&mut self, ctx: &Ctx, script: &str) -> Result<String, CheckError> {
        let answer = self
            .ask(
                ctx,
                "terminal/create",
                json!({"command": "sh", "args": ["-c", script]}),
            )
            .await?;
        match answer.pointer("/result/terminalId").and_then(Value::as_str) {
            Some(id) => Ok(id.to_owned()),
            None => fail!("terminal/create answers {terminalId}", "{answer}"),
        }
    }

    async fn on(&mut self, ctx: &Ctx, method: &str, id: &str) -> Result<Value, CheckError> {
        self.ask(ctx, method, json!({"terminalId": id})).await
    }

    /// Ends the turn and waits for the client.
    async fn finish(mut self, ctx: &Ctx) -> Result<ClientRun, CheckError> {
        self.control.release(ctx, "end").await?;
        let run = self.client.finish(ctx, &self.mock).await?;
        run.expect_turns(&["end_turn"], "the held turn ends end_turn")?;
        Ok(run)
    }
}

fn result(answer: &Value, what: &str) -> Result<Value, CheckError> {
    match answer.get("result") {
        Some(result) => Ok(result.clone()),
        None => fail!(format!("a result for {what}"), "{answer}"),
    }
}

/// Asks terminal/output until its output contains `text` (each round trip is the pause).
async fn output_until(
    live: &mut Live,
    ctx: &Ctx,
    id: &str,
    text: &str,
) -> Result<Value, CheckError> {
    ctx.within(&format!("terminal output holding {text:?}"), async {
        loop {
            let answer = live.on(ctx, "terminal/output", id).await?;
            let result = result(&answer, "terminal/output")?;
            if result
                .get("output")
                .and_then(Value::as_str)
                .is_some_and(|o| o.contains(text))
            {
                return Ok::<Value, CheckError>(result);
            }
        }
    })
    .await?
}

async fn ws_035(ctx: Ctx) -> CheckResult {
    let mut live = Live::start(&ctx).await?;
    let id = live.create(&ctx, "echo hello; exit 3").await?;
    live.control
        .run(
            &ctx,
            json!([{"update": {"sessionUpdate": "tool_call", "toolCallId": "call-term",
                "title": "Run sh", "kind": "execute", "status": "in_progress",
                "content": [{"type": "terminal", "terminalId": id}]}}]),
        )
        .await?;
    let exit = live.on(&ctx, "terminal/wait_for_exit", &id).await?;
    let exit = result(&exit, "terminal/wait_for_exit")?;
    ensure_eq!(
        Some(&json!(3)),
        exit.get("exitCode"),
        "wait_for_exit exitCode"
    );
    let output = live.on(&ctx, "terminal/output", &id).await?;
    let output = result(&output, "terminal/output")?;
    ensure!(
        output
            .get("output")
            .and_then(Value::as_str)
            .is_some_and(|o| o.contains("hello")),
        "terminal/output holds the command's output \"hello\"",
        "{output}"
    );
    let release = live.on(&ctx, "terminal/release", &id).await?;
    result(&release, "terminal/release")?;
    let run = live.finish(&ctx).await?;
    let errors: Vec<&Value> = run
        .transcript
        .from_client()
        .into_iter()
        .filter(|v| v.get("error").is_some())
        .collect();
    ensure!(
        errors.is_empty(),
        "the client accepts the lifecycle and the tool_call naming the terminalId",
        "{errors:?}"
    );
    if ctx.has(capability::CLIENT_ECHO_UPDATES) {
        let referenced = run.updates().iter().any(|u| {
            u.pointer("/content/0/terminalId").and_then(Value::as_str) == Some(id.as_str())
        });
        ensure!(
            referenced,
            "the client reports the tool_call whose content references the terminalId",
            "{}",
            run.describe()
        );
    }
    Ok(())
}

async fn ws_036(ctx: Ctx) -> CheckResult {
    let mut live = Live::start(&ctx).await?;
    let id = live.create(&ctx, "echo before-kill; exec sleep 30").await?;
    output_until(&mut live, &ctx, &id, "before-kill").await?;
    let kill = live.on(&ctx, "terminal/kill", &id).await?;
    result(&kill, "terminal/kill")?;
    let exit = live.on(&ctx, "terminal/wait_for_exit", &id).await?;
    let exit = result(&exit, "terminal/wait_for_exit after kill")?;
    ensure!(
        exit.get("signal")
            .and_then(Value::as_str)
            .is_some_and(|s| !s.is_empty()),
        "wait_for_exit after kill names the signal",
        "{exit}"
    );
    let output = live.on(&ctx, "terminal/output", &id).await?;
    let output = result(&output, "terminal/output after kill")?;
    ensure!(
        output
            .get("output")
            .and_then(Value::as_str)
            .is_some_and(|o| o.contains("before-kill")),
        "the killed terminal keeps its output until release",
        "{output}"
    );
    ensure!(
        output.get("exitStatus").is_some_and(Value::is_object),
        "the killed terminal's output carries exitStatus",
        "{output}"
    );
    let release = live.on(&ctx, "terminal/release", &id).await?;
    result(&release, "terminal/release")?;
    let after = live.on(&ctx, "terminal/output", &id).await?;
    let code = after.pointer("/error/code").and_then(Value::as_i64);
    ensure!(
        code.is_some_and(|c| c == -32002 || c == -32602),
        "after release the terminalId is invalid (-32002 or -32602)",
        "{after}"
    );
    live.finish(&ctx).await?;
    Ok(())
}

fn shape(result: &Value, what: &str) -> Result<(), CheckError> {
    ensure!(
        result.get("output").is_some_and(Value::is_string),
        format!("{what}: output is a string"),
        "{result}"
    );
    ensure!(
        result.get("truncated").is_some_and(Value::is_boolean),
        format!("{what}: truncated is a boolean"),
        "{result}"
    );
    Ok(())
}

async fn ws_040(ctx: Ctx) -> CheckResult {
    let mut live = Live::start(&ctx).await?;
    let running = live.create(&ctx, "echo started; exec sleep 30").await?;
    let output = output_until(&mut live, &ctx, &running, "started").await?;
    shape(&output, "a running terminal")?;
    ensure!(
        output.get("exitStatus").is_none_or(Value::is_null),
        "no exitStatus while the command runs",
        "{output}"
    );
    live.on(&ctx, "terminal/release", &running).await?;
    let done = live.create(&ctx, "printf done").await?;
    live.on(&ctx, "terminal/wait_for_exit", &done).await?;
    let output = live.on(&ctx, "terminal/output", &done).await?;
    let output = result(&output, "terminal/output")?;
    shape(&output, "an exited terminal")?;
    ensure_eq!(
        Some(&json!({"exitCode": 0, "signal": null})),
        output.get("exitStatus"),
        "exitStatus of a command that exited 0"
    );
    ensure_eq!(Some(&json!("done")), output.get("output"), "the output");
    live.on(&ctx, "terminal/release", &done).await?;
    live.finish(&ctx).await?;
    Ok(())
}

async fn ws_041(ctx: Ctx) -> CheckResult {
    let mut live = Live::start(&ctx).await?;
    let normal = live.create(&ctx, "exit 5").await?;
    let exit = live.on(&ctx, "terminal/wait_for_exit", &normal).await?;
    let exit = result(&exit, "terminal/wait_for_exit")?;
    ensure_eq!(
        (Some(json!(5)), true),
        (
            exit.get("exitCode").cloned(),
            exit.get("signal").is_none_or(Value::is_null)
        ),
        "(exitCode, signal is null) for a normal exit 5: {exit}"
    );
    live.on(&ctx, "terminal/release", &normal).await?;
    let killed = live.create(&ctx, "kill -KILL $$").await?;
    let exit = live.on(&ctx, "terminal/wait_for_exit", &killed).await?;
    let exit = result(&exit, "terminal/wait_for_exit")?;
    ensure!(
        exit.get("exitCode").is_none_or(Value::is_null)
            && exit
                .get("signal")
                .and_then(Value::as_str)
                .is_some_and(|s| !s.is_empty()),
        "wait_for_exit for a signalled command: exitCode null and a non-empty signal",
        "{exit}"
    );
    live.on(&ctx, "terminal/release", &killed).await?;
    live.finish(&ctx).await?;
    Ok(())
}
