//! The AOF adapter as the checks drive it: one command template `adapter` of the profile, followed
//! by the adapter's own command and arguments (`conformance/targets/aof-adapter.md`).
//!
//! Every call starts one process through [`Ctx::spawn`], writes its stdin, collects stdout and
//! stderr until both close and returns the exit code with the output. When the target declares
//! [`BATCH`], the calls of one scenario go instead, one request line each, to a single
//! `adapter batch` process started on the first call. Nothing here knows how the target is
//! built; the checks judge the printed JSON, the exit code and the data dir.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{Value, json};
use ski::transport::child::Child;
use tokio::sync::Mutex;

use crate::vocabulary::{Capability, capability};
use crate::{CheckError, Ctx, Failure, OrFail};

/// The profile's command that starts the adapter.
pub const COMMAND: &str = "adapter";

/// The capability of an adapter that runs many commands in one process (`adapter batch`).
pub const BATCH: Capability = capability::AOF_BATCH;

/// Exit code of a successful command.
pub const EXIT_OK: i32 = 0;
/// Exit code of invalid input or a rejected message.
pub const EXIT_INVALID: i32 = 2;
/// Exit code of a handler or internal failure.
pub const EXIT_FAILED: i32 = 5;

/// What one adapter run left behind: its command line, exit code and output.
#[derive(Debug, Clone)]
pub struct Output {
    /// The adapter command and its arguments, for messages.
    pub command: String,
    /// The exit code; `None` when the process was ended by a signal.
    pub code: Option<i32>,
    /// Everything written to stdout.
    pub stdout: String,
    /// Everything written to stderr.
    pub stderr: String,
}

impl Output {
    /// Reads what `child`, whose stdin is closed, writes on stdout and stderr to their ends and
    /// waits for its exit; `command` names it in messages.
    pub async fn collect(
        child: &mut ski::transport::child::Child,
        command: &str,
    ) -> Result<Output, CheckError> {
        let mut stdout = String::new();
        let mut stderr = String::new();
        while let Some((stream, line)) = child.next_output_line().await {
            let buffer = match stream {
                ski::transport::child::OutputStream::Stdout => &mut stdout,
                ski::transport::child::OutputStream::Stderr => &mut stderr,
            };
            buffer.push_str(&line);
            buffer.push('\n');
        }
        let status = child
            .wait()
            .await
            .or_error(format!("waiting for `{command}`"))?;
        Ok(Output {
            command: command.to_owned(),
            code: status.code(),
            stdout,
            stderr,
        })
    }

    /// Stdout as one JSON document; a failure of the target when it is not one.
    pub fn json(&self) -> Result<Value, CheckError> {
        serde_json::from_str(self.stdout.trim()).map_err(|error| {
            Failure::new(
                format!("`{}` prints JSON", self.command),
                format!(
                    "`{}` prints exactly one JSON document on stdout",
                    self.command
                ),
            )
            .actual(format!(
                "{error}; stdout: {:?}; stderr: {:?}",
                clip(&self.stdout),
                clip(&self.stderr)
            ))
            .into()
        })
    }

    /// Stdout as one JSON object per non-empty line (`route --ndjson`).
    pub fn json_lines(&self) -> Result<Vec<Value>, CheckError> {
        self.stdout
            .lines()
            .filter(|line| !line.trim().is_empty())
            .map(|line| {
                serde_json::from_str(line).or_fail(format!(
                    "`{}` prints one JSON object per line, got {line:?}",
                    self.command
                ))
            })
            .collect()
    }

    /// The exit code in words: the number, or "a signal".
    pub fn exit(&self) -> String {
        self.code
            .map_or_else(|| "a signal".to_owned(), |c| c.to_string())
    }

    /// Fails unless the exit code is `code`.
    pub fn ensure_code(&self, code: i32) -> Result<(), CheckError> {
        if self.code == Some(code) {
            return Ok(());
        }
        Err(Failure::new(
            format!("`{}` exits {code}", self.command),
            format!("`{}` exits with code {code}", self.command),
        )
        .actual(format!(
            "exit {}; stdout: {:?}; stderr: {:?}",
            self.exit(),
            clip(&self.stdout),
            clip(&self.stderr)
        ))
        .into())
    }

    /// Fails unless the command succeeded, then parses stdout as JSON.
    pub fn ok_json(&self) -> Result<Value, CheckError> {
        self.ensure_code(EXIT_OK)?;
        self.json()
    }
}

/// Shortens long output for an Actual line.
fn clip(text: &str) -> String {
    const LIMIT: usize = 2000;
    let text = text.trim_end();
    match text.char_indices().nth(LIMIT) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text.to_owned(),
    }
}

/// The `adapter batch` process of one scenario, started on its first call.
#[derive(Debug, Default)]
struct BatchProcess {
    child: Option<Child>,
}

/// The adapter of one scenario, bound to the scenario's data dir.
#[derive(Debug, Clone)]
pub struct Adapter {
    ctx: Ctx,
    data_dir: PathBuf,
    /// Set when the target declares [`BATCH`].
    batch: Option<Arc<Mutex<BatchProcess>>>,
}

impl Adapter {
    /// The adapter over `{temp_dir}/data`.
    pub fn new(ctx: &Ctx) -> Result<Self, CheckError> {
        Ok(Self {
            ctx: ctx.clone(),
            data_dir: ctx.data_dir()?,
            batch: ctx
                .has(BATCH)
                .then(|| Arc::new(Mutex::new(BatchProcess::default()))),
        })
    }

    /// Whether calls go to one `adapter batch` process.
    pub fn batched(&self) -> bool {
        self.batch.is_some()
    }

    /// The data dir every command of this adapter uses.
    pub fn data_dir(&self) -> &Path {
        &self.data_dir
    }

    /// The check's context.
    pub fn ctx(&self) -> &Ctx {
        &self.ctx
    }

    /// Runs `adapter ARGS…` with `stdin` as its input (nothing when `None`) and waits for it:
    /// a process of its own, or one request to the scenario's batch process.
    pub async fn run(&self, args: &[&str], stdin: Option<&str>) -> Result<Output, CheckError> {
        let command = format!("{} {}", COMMAND, args.join(" "));
        let command = command.trim_end().to_owned();
        match &self.batch {
            Some(batch) => self.run_batched(batch, args, stdin, command).await,
            None => self.run_alone(args, stdin, command).await,
        }
    }

    /// One request line to the batch process (started now when it is not running yet) and its
    /// answer line `{"code", "stdout", "stderr"}`.
    async fn run_batched(
        &self,
        batch: &Mutex<BatchProcess>,
        args: &[&str],
        stdin: Option<&str>,
        command: String,
    ) -> Result<Output, CheckError> {
        let mut batch = batch.lock().await;
        if batch.child.is_none() {
            let spec = self.ctx.command(COMMAND, &[])?.arg("batch");
            batch.child = Some(self.ctx.spawn(spec)?);
        }
        let Some(child) = batch.child.as_mut() else {
            return Err(CheckError::Harness("the batch process is gone".into()));
        };
        let request = json!({
            "args": args,
            "stdin": stdin.map(|text| format!("{text}\n")),
        });
        let what = format!("the batch answer to `{command}`");
        let line = self
            .ctx
            .within(&what, async {
                child
                    .send_line(&request.to_string())
                    .await
                    .or_fail(format!("`{COMMAND} batch` reads request lines on stdin"))?;
                child
                    .next_line()
                    .await
                    .or_fail(format!("`{COMMAND} batch` answers `{command}`"))
            })
            .await??;
        let Some(line) = line else {
            return Err(Failure::new(
                format!("`{COMMAND} batch` answers every request"),
                format!("one answer line for `{command}`"),
            )
            .actual("stdout closed")
            .into());
        };
        let answer: Value = serde_json::from_str(&line).or_fail(format!(
            "`{COMMAND} batch` answers with one JSON object per line, got {line:?}"
        ))?;
        let text = |key: &str| answer[key].as_str().unwrap_or_default().to_owned();
        let code = answer["code"].as_i64().and_then(|c| i32::try_from(c).ok());
        if code.is_none() {
            return Err(Failure::new(
                format!("`{COMMAND} batch` reports exit codes"),
                "an answer {\"code\": integer, \"stdout\": string, \"stderr\": string}",
            )
            .actual(line)
            .into());
        }
        Ok(Output {
            command,
            code,
            stdout: text("stdout"),
            stderr: text("stderr"),
        })
    }

    /// `adapter ARGS…` as a process of its own.
    async fn run_alone(
        &self,
        args: &[&str],
        stdin: Option<&str>,
        command: String,
    ) -> Result<Output, CheckError> {
        let spec = self.ctx.command(COMMAND, &[])?.args(args);
        let mut child = self.ctx.spawn(spec)?;
        let what = format!("`{command}` to finish");
        let output = self
            .ctx
            .within(&what, async {
                if let Some(text) = stdin {
                    child
                        .send_line(text)
                        .await
                        .or_fail(format!("`{command}` reads its input from stdin"))?;
                }
                child.close_stdin();
                Output::collect(&mut child, &command).await
            })
            .await??;
        Ok(output)
    }

    /// `ARGS… --data-dir D` with `--now T` when given.
    pub async fn run_data(
        &self,
        args: &[&str],
        now: Option<&str>,
        stdin: Option<&str>,
    ) -> Result<Output, CheckError> {
        let data_dir = self.data_dir.display().to_string();
        let mut all: Vec<&str> = args.to_vec();
        all.extend(["--data-dir", data_dir.as_str()]);
        if let Some(now) = now {
            all.extend(["--now", now]);
        }
        self.run(&all, stdin).await
    }

    /// `validate --kind KIND` of `text`.
    pub async fn validate(&self, kind: &str, text: &str) -> Result<Output, CheckError> {
        self.run(&["validate", "--kind", kind], Some(text)).await
    }

    /// `route` of one message given as text.
    pub async fn route_text(&self, text: &str, now: &str) -> Result<Output, CheckError> {
        self.run_data(&["route"], Some(now), Some(text)).await
    }

    /// `route` of one message given as a JSON value (sent compact, on one line).
    pub async fn route(&self, message: &Value, now: &str) -> Result<Output, CheckError> {
        self.route_text(&message.to_string(), now).await
    }

    /// `route --ndjson` at `now` started as a process of its own (never through the batch
    /// process) with stdin left open: the caller writes one message per line and reads one
    /// report per line, so that it sees which process handles each message.
    pub fn route_stream(&self, now: &str) -> Result<Child, CheckError> {
        let data_dir = self.data_dir.display().to_string();
        let spec = self.ctx.command(COMMAND, &[])?.args([
            "route",
            "--ndjson",
            "--data-dir",
            data_dir.as_str(),
            "--now",
            now,
        ]);
        self.ctx.spawn(spec)
    }

    /// `run show --task ID`: `{taskId, dir, run, heartbeat, runResult}`.
    pub async fn run_show(&self, task: &str) -> Result<Value, CheckError> {
        self.run_data(&["run", "show", "--task", task], None, None)
            .await?
            .ok_json()
    }

    /// `run result --task ID` with `result` on stdin.
    pub async fn run_result(&self, task: &str, result: &Value) -> Result<Output, CheckError> {
        self.run_data(
            &["run", "result", "--task", task],
            None,
            Some(&result.to_string()),
        )
        .await
    }

    /// `run start --task ID --agent A` at `now`; the target's fault when it fails.
    pub async fn run_start(&self, task: &str, agent: &str, now: &str) -> Result<(), CheckError> {
        self.run_data(
            &["run", "start", "--task", task, "--agent", agent],
            Some(now),
            None,
        )
        .await?
        .ensure_code(EXIT_OK)
    }

    /// `run heartbeat --task ID --agent A --expires-at T2` at `now`.
    pub async fn run_heartbeat(
        &self,
        task: &str,
        agent: &str,
        expires_at: &str,
        now: &str,
    ) -> Result<(), CheckError> {
        self.run_data(
            &[
                "run",
                "heartbeat",
                "--task",
                task,
                "--agent",
                agent,
                "--expires-at",
                expires_at,
            ],
            Some(now),
            None,
        )
        .await?
        .ensure_code(EXIT_OK)
    }

    /// `poll` at `now` with a heartbeat TTL, optionally as a dry run.
    pub async fn poll(&self, now: &str, ttl_ms: u64, dry_run: bool) -> Result<Output, CheckError> {
        let ttl = ttl_ms.to_string();
        let mut args = vec!["poll", "--heartbeat-ttl-ms", ttl.as_str()];
        if dry_run {
            args.push("--dry-run");
        }
        self.run_data(&args, Some(now), None).await
    }

    /// `session-end` at `now`.
    pub async fn session_end(&self, now: &str) -> Result<Output, CheckError> {
        self.run_data(&["session-end"], Some(now), None).await
    }

    /// `resolve --status S --outcome O --review-required R`.
    pub async fn resolve(
        &self,
        status: &str,
        outcome: &str,
        review_required: bool,
    ) -> Result<Output, CheckError> {
        let review = review_required.to_string();
        self.run(
            &[
                "resolve",
                "--status",
                status,
                "--outcome",
                outcome,
                "--review-required",
                review.as_str(),
            ],
            None,
        )
        .await
    }

    /// `events`: the whole log as a JSON array.
    pub async fn events(&self) -> Result<Vec<Value>, CheckError> {
        let printed = self.run_data(&["events"], None, None).await?.ok_json()?;
        match printed {
            Value::Array(events) => Ok(events),
            other => Err(Failure::new(
                "`events` prints an array",
                "`events` prints a JSON array of events",
            )
            .actual(other.to_string())
            .into()),
        }
    }
}
