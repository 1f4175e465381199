//! The teams adapter as the checks drive it: the profile's `adapter` command, then the global
//! options `--root D --as KEY`, then the adapter's own command (`conformance/targets/teams-adapter.md`).
//!
//! One-shot calls collect stdout, stderr and the exit code; gated calls ([`Gated`]) keep the
//! process running so a check can wait for its `ready` and `busy` events and release its gate.

use std::path::{Path, PathBuf};

use serde_json::Value;
use ski::transport::child::{Child, OutputStream};

use crate::suites::aof::adapter::Output;
use crate::vocabulary::teams;
use crate::{CheckError, Ctx, Failure, OrFail};

/// The profile's command that starts the adapter.
pub const COMMAND: &str = "adapter";
/// The lead's session key in every scenario (the document's "agent:main:main").
pub const LEAD: &str = "agent:main:main";

/// The adapter of one scenario, bound to `{temp_dir}/state/teams`.
#[derive(Debug, Clone)]
pub struct Adapter {
    ctx: Ctx,
    root: PathBuf,
}

/// A running adapter process behind `--gate`.
pub struct Gated {
    /// The process.
    pub child: Child,
    /// The command, for messages.
    pub command: String,
    stdout: String,
    stderr: String,
    events: Vec<Value>,
    busy_seen: usize,
    ended: bool,
}

impl Gated {
    /// Reads one output line; false once the output has ended.
    async fn read_one(&mut self) -> bool {
        if self.ended {
            return false;
        }
        match self.child.next_output_line().await {
            Some((OutputStream::Stdout, line)) => {
                self.stdout.push_str(&line);
                self.stdout.push('\n');
            }
            Some((OutputStream::Stderr, line)) => {
                self.stderr.push_str(&line);
                self.stderr.push('\n');
                if let Ok(event) = serde_json::from_str::<Value>(&line)
                    && event.get("event").is_some()
                {
                    self.events.push(event);
                }
            }
            None => self.ended = true,
        }
        !self.ended
    }

    /// Waits until the process printed the event `name` (true) or closed its output (false).
    pub async fn until_event(&mut self, name: &str) -> bool {
        loop {
            if self.events.iter().any(|e| e["event"] == name) {
                return true;
            }
            if !self.read_one().await {
                return self.events.iter().any(|e| e["event"] == name);
            }
        }
    }

    /// Waits for the next `busy` event not yet returned; its `delayMs`, or `None` once the
    /// output ended.
    pub async fn until_next_busy(&mut self) -> Option<u64> {
        loop {
            let busy: Vec<&Value> = self
                .events
                .iter()
                .filter(|e| e["event"] == "busy")
                .collect();
            if busy.len() > self.busy_seen {
                let delay = busy[self.busy_seen]["delayMs"].as_u64().unwrap_or(0);
                self.busy_seen += 1;
                return Some(delay);
            }
            if !self.read_one().await {
                return None;
            }
        }
    }

    /// The trace events seen so far.
    pub fn events(&self) -> &[Value] {
        &self.events
    }

    /// Reads the rest of the output and waits for the exit.
    pub async fn finish(mut self) -> Result<Output, CheckError> {
        while self.read_one().await {}
        let status = self
            .child
            .wait()
            .await
            .or_error(format!("waiting for `{}`", self.command))?;
        Ok(Output {
            command: self.command,
            code: status.code(),
            stdout: self.stdout,
            stderr: self.stderr,
        })
    }
}

impl Adapter {
    /// The adapter over `{temp_dir}/state/teams` (not created: the adapter creates it).
    pub fn new(ctx: &Ctx) -> Self {
        Self {
            ctx: ctx.clone(),
            root: ctx.temp_dir().join("state").join("teams"),
        }
    }

    /// The teams root every command of this adapter uses.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The check's context.
    pub fn ctx(&self) -> &Ctx {
        &self.ctx
    }

    fn words(&self, caller: &str, args: &[&str]) -> Vec<String> {
        let mut words = vec![
            "--root".to_owned(),
            self.root.display().to_string(),
            "--as".to_owned(),
            caller.to_owned(),
        ];
        words.extend(args.iter().map(|a| (*a).to_owned()));
        words
    }

    /// Runs `adapter --root D --as CALLER ARGS…` to the end.
    ///
    /// What a command writes (ledger rows, inbox lines, config.json, a deleted directory) is in
    /// place when it exits: each command is one call of the implementation, which starts no work
    /// that outlives it. So the checks read files and the ledger once after a command, without
    /// waiting; while a gated command is held they read to see that nothing changed yet.
    pub async fn run(&self, caller: &str, args: &[&str]) -> Result<Output, CheckError> {
        let words = self.words(caller, args);
        let spec = self.ctx.command(COMMAND, &[])?.args(&words);
        let command = format!("{COMMAND} --as {caller} {}", args.join(" "));
        let mut child = self.ctx.spawn(spec)?;
        child.close_stdin();
        let what = format!("`{command}` to finish");
        self.ctx
            .within(&what, async { Output::collect(&mut child, &command).await })
            .await?
    }

    /// Starts `adapter --root D --as CALLER ARGS…` and leaves it running (stdin open).
    pub fn start(&self, caller: &str, args: &[&str]) -> Result<Gated, CheckError> {
        let words = self.words(caller, args);
        let spec = self.ctx.command(COMMAND, &[])?.args(&words);
        Ok(Gated {
            child: self.ctx.spawn(spec)?,
            command: format!("{COMMAND} --as {caller} {}", args.join(" ")),
            stdout: String::new(),
            stderr: String::new(),
            events: Vec::new(),
            busy_seen: 0,
            ended: false,
        })
    }

    /// Runs a command that must succeed; returns its JSON.
    pub async fn ok(&self, caller: &str, args: &[&str]) -> Result<Value, CheckError> {
        let output = self.run(caller, args).await?;
        let value = output.ok_json()?;
        if value["ok"] != Value::Bool(true) {
            return Err(Failure::new(
                format!("`{}` reports ok", output.command),
                format!("`{}` prints {{\"ok\": true, …}}", output.command),
            )
            .actual(value.to_string())
            .into());
        }
        Ok(value)
    }

    /// Runs a command that must be refused with `code`; returns the `error` object.
    pub async fn refused(
        &self,
        caller: &str,
        args: &[&str],
        code: &str,
    ) -> Result<Value, CheckError> {
        let output = self.run(caller, args).await?;
        refusal(&output, code)
    }

    /// Creates team `name` led by [`LEAD`].
    pub async fn create_team(&self, name: &str) -> Result<Value, CheckError> {
        self.ok(LEAD, &["team", "create", name]).await
    }

    /// Joins `key` into `team` under `name`.
    pub async fn join(&self, team: &str, key: &str, name: &str) -> Result<Value, CheckError> {
        self.ok(key, &["member", "join", team, name]).await
    }

    /// Creates a task as the lead; returns its id.
    pub async fn create_task(
        &self,
        team: &str,
        subject: &str,
        depends_on: &[&str],
    ) -> Result<String, CheckError> {
        let mut args = vec!["task", "create", team, "--subject", subject];
        if self.description_required()? {
            args.extend(["--description", subject]);
        }
        for dep in depends_on {
            args.extend(["--depends-on", dep]);
        }
        let value = self.ok(LEAD, &args).await?;
        value["task"]["id"]
            .as_str()
            .map(str::to_owned)
            .or_fail(format!("`task create` prints task.id, got {value}"))
    }

    /// Whether the profile's `task_description` setting is `required` (the implementation refuses
    /// a task without `--description`) rather than `optional` (the default, the reference's).
    pub fn description_required(&self) -> Result<bool, CheckError> {
        match self.ctx.setting(&teams::TASK_DESCRIPTION)?.as_deref() {
            None | Some("optional") => Ok(false),
            Some("required") => Ok(true),
            Some(other) => Err(CheckError::Harness(format!(
                "setting task_description is {other:?}; expected \"optional\" or \"required\""
            ))),
        }
    }

    /// `task show`: the task object.
    pub async fn task(&self, team: &str, id: &str) -> Result<Value, CheckError> {
        Ok(self.ok(LEAD, &["task", "show", team, id]).await?["task"].clone())
    }

    /// The inbox file of `key`, from `inbox path`.
    pub async fn inbox_file(&self, team: &str, key: &str) -> Result<PathBuf, CheckError> {
        let value = self.ok(LEAD, &["inbox", "path", team, key]).await?;
        let path = value["path"]
            .as_str()
            .or_fail(format!("`inbox path` prints path, got {value}"))?;
        Ok(self.root.join(path))
    }
}

/// Fails unless `output` is a refusal with error code `code`; returns the `error` object.
pub fn refusal(output: &Output, code: &str) -> Result<Value, CheckError> {
    let value = output.json()?;
    if output.code == Some(0) || value["error"]["code"] != code {
        return Err(Failure::new(
            format!("`{}` is refused with {code}", output.command),
            format!(
                "`{}` exits non-zero and prints {{\"ok\": false, \"error\": {{\"code\": \"{code}\", …}}}}",
                output.command
            ),
        )
        .actual(format!("exit {}; stdout: {}", output.exit(), output.stdout.trim()))
        .into());
    }
    Ok(value["error"].clone())
}

/// The JSON lines of an inbox file (none when it is absent).
pub fn inbox_lines(path: &Path) -> Result<Vec<Value>, CheckError> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => {
            return Err(CheckError::Harness(format!(
                "cannot read {}: {e}",
                path.display()
            )));
        }
    };
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|line| {
            serde_json::from_str(line).or_fail(format!(
                "every line of {} is one JSON object, got {line:?}",
                path.display()
            ))
        })
        .collect()
}

pub use ski_mocks::testing::tree;
