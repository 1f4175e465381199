//! The control channel of a mock agent started with `--control-connect`: the check listens on a
//! Unix socket in its temp dir, the mock connects and takes commands (`mocks/README.md`, Control
//! channel), so a check can send agent-to-client requests, answers and gates while the client
//! under test runs.

use serde_json::Value;

use super::mock::Mock;
use crate::check::CheckError;
use crate::context::Ctx;

/// The control channel of a mock agent started with `--control-connect`: the harness listens,
/// the mock connects and takes commands (`mocks/README.md`, Control channel).
#[derive(Debug)]
pub struct Control {
    listener: tokio::net::UnixListener,
    stream: Option<tokio::io::BufStream<tokio::net::UnixStream>>,
    next_id: u64,
}

impl Control {
    /// Listens on a socket in the temp dir; returns it and the mock arguments that connect to it.
    pub fn listen(ctx: &Ctx) -> Result<(Control, Vec<String>), CheckError> {
        let path = ctx.temp_dir().join("ctl.sock");
        let listener = tokio::net::UnixListener::bind(&path)?;
        let args = vec!["--control-connect".to_owned(), path.display().to_string()];
        Ok((
            Control {
                listener,
                stream: None,
                next_id: 1,
            },
            args,
        ))
    }

    /// Waits for the mock to connect and say hello.
    pub async fn accept(&mut self, ctx: &Ctx) -> Result<(), CheckError> {
        use tokio::io::AsyncBufReadExt;
        let (stream, _) = ctx
            .within(
                "the mock agent to connect to the control socket",
                self.listener.accept(),
            )
            .await??;
        let mut stream = tokio::io::BufStream::new(stream);
        let mut hello = String::new();
        ctx.within("the mock agent's hello", stream.read_line(&mut hello))
            .await??;
        self.stream = Some(stream);
        Ok(())
    }

    /// Sends one command and returns its reply; a reply without `"ok":true` is a harness error.
    pub async fn cmd(&mut self, ctx: &Ctx, mut command: Value) -> Result<Value, CheckError> {
        use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
        let id = self.next_id;
        self.next_id += 1;
        command["id"] = Value::from(id);
        let stream = self
            .stream
            .as_mut()
            .ok_or_else(|| CheckError::Harness("the control channel is not connected".into()))?;
        stream.write_all(format!("{command}\n").as_bytes()).await?;
        stream.flush().await?;
        let what = format!("the mock agent's reply to {command}");
        loop {
            let mut line = String::new();
            let read = ctx.within(&what, stream.read_line(&mut line)).await??;
            if read == 0 {
                return Err(CheckError::Harness(format!(
                    "the control channel closed before the reply to {command}"
                )));
            }
            let Ok(reply) = serde_json::from_str::<Value>(&line) else {
                continue;
            };
            if reply.get("id") != Some(&Value::from(id)) {
                continue;
            }
            if reply.get("ok") != Some(&Value::Bool(true)) {
                return Err(CheckError::Harness(format!(
                    "the mock agent refused {command}: {reply}"
                )));
            }
            return Ok(reply);
        }
    }

    /// Runs steps (as JSON) in the mock and waits until they ran.
    pub async fn run(&mut self, ctx: &Ctx, steps: Value) -> Result<Value, CheckError> {
        self.cmd(ctx, serde_json::json!({"cmd": "run", "steps": steps}))
            .await
    }

    /// Waits until `count` messages with `method` arrived from the client.
    pub async fn wait(&mut self, ctx: &Ctx, method: &str, count: u64) -> Result<(), CheckError> {
        let timeout = u64::try_from(ctx.timeout().as_millis()).unwrap_or(u64::MAX);
        self.cmd(
            ctx,
            serde_json::json!({"cmd": "wait", "method": method, "count": count, "timeout_ms": timeout}),
        )
        .await
        .map(|_| ())
    }

    /// Releases a gate.
    pub async fn release(&mut self, ctx: &Ctx, gate: &str) -> Result<(), CheckError> {
        self.cmd(ctx, serde_json::json!({"cmd": "release", "gate": gate}))
            .await
            .map(|_| ())
    }
}

/// Runs one agent-to-client request through `control` and returns the client's answer to it
/// (the last request of `method` in the transcript and its answer).
pub async fn ask(
    ctx: &Ctx,
    control: &mut Control,
    mock: &Mock,
    method: &str,
    params: Value,
) -> Result<(Value, Option<Value>), CheckError> {
    control
        .run(
            ctx,
            serde_json::json!([{"request": method, "params": params, "timeout_ms": 15000}]),
        )
        .await?;
    let transcript = mock.transcript()?;
    let answers = transcript.answers_to(method);
    let (request, answer) = answers.last().ok_or_else(|| {
        CheckError::Harness(format!(
            "the mock's {method} request is not in its transcript"
        ))
    })?;
    Ok(((*request).clone(), answer.cloned()))
}
