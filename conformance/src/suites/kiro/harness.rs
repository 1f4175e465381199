//! A world of one kiro scenario, arranged in a fresh directory of its temp dir (the adapter's
//! working directory, where it finds `.env`): a template (`template/`), a home
//! (`home/`, so the kiro home is `home/.kiro`), a workspace base (`workspaces/`), and a `kiro-cli`
//! on `PATH` (`bin/kiro-cli`) that is `ski-mock-agent` with the scenario's script (`kiro.toml`),
//! recording one transcript per process under `transcripts/`. The adapter (`adapter` command of
//! the profile, `conformance/targets/kiro-adapter.md`) runs with exactly the configuration the
//! check sets; nothing of the runner's own environment leaks into the configuration keys.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::Value;
use ski::transport::child::group_alive;
use ski_mocks::testing::KIRO_RULES;

use crate::suites::aof::adapter::Output;
use crate::vocabulary::kiro;
use crate::{CheckError, Ctx, Failure, OrFail};

/// The profile's command that starts the adapter.
pub const COMMAND: &str = "adapter";
/// The agent name every scenario uses unless it sets another.
pub const AGENT: &str = "tg-acp";
/// The bot token every scenario uses; it must never be printed.
pub const TOKEN: &str = "tok-5ecr3t-never-printed";
/// The line the mock writes on stderr while answering `initialize`.
pub use ski_mocks::testing::KIRO_STDERR_MARKER as STDERR_MARKER;

/// The configuration keys of the document (BR-01).
pub const KEYS: [&str; 7] = [
    "BOT_TOKEN",
    "KIRO_AGENT_NAME",
    "KIRO_CONFIG_PATH",
    "WORKSPACE_BASE_PATH",
    "MAX_PROCESSES",
    "IDLE_TIMEOUT_SECONDS",
    "LOG_LEVEL",
];

/// How long a check waits for kiro-cli's process group to end once the adapter killed it or
/// exited (scaled): the document's kill grace (BR-06.6).
const GROUP_END: Duration = Duration::from_secs(5);
/// How often a check looks at a process group it waits for.
const GROUP_POLL: Duration = Duration::from_millis(10);

/// Waits until process group `pgid` has no live member (zombies do not count, E-KIRO-18), for at
/// most [`GROUP_END`]; whether it has none. A process ends a moment after the signal that kills
/// it is sent, and an adapter may report `killed` or exit as soon as it sent SIGKILL, or after
/// closing kiro-cli's stdin without waiting for it: the group is waited for, never looked at once.
pub async fn group_ended(ctx: &Ctx, pgid: u32) -> bool {
    if pgid == 0 {
        return false;
    }
    let deadline = Instant::now() + ctx.timeouts().scale(GROUP_END);
    loop {
        if !group_alive(pgid) {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(GROUP_POLL).await;
    }
}

/// How the `kiro-cli` on `PATH` starts the mock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wrapper {
    /// `exec` the mock.
    Plain,
    /// A shell that ignores SIGTERM runs the mock, then waits forever: only SIGKILL ends it.
    IgnoresTerm,
    /// The mock runs with stderr closed towards the adapter (`/dev/null`): stderr ends at once.
    NoStderr,
    /// Before the mock starts, the wrapper rewrites the `.env` file the adapter read.
    RewritesEnvFile,
}

/// One scenario's kiro world.
#[derive(Debug, Clone)]
pub struct Kiro {
    ctx: Ctx,
    root: PathBuf,
    env: BTreeMap<String, Option<String>>,
}

fn write(path: &Path, text: &str) -> Result<(), CheckError> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).or_error(format!("creating {}", parent.display()))?;
    }
    std::fs::write(path, text).or_error(format!("writing {}", path.display()))
}

impl Kiro {
    /// Arranges the default world: a template with `agents/tg-acp.json`, an empty home, the
    /// mock as `kiro-cli` with the base script, and the configuration of a valid bot.
    pub fn new(ctx: &Ctx) -> Result<Self, CheckError> {
        // Each world of a check gets its own directory, so a check can arrange several.
        let mut index = 1;
        let root = loop {
            let candidate = ctx.temp_dir().join(format!("world-{index}"));
            if !candidate.exists() {
                break candidate;
            }
            index += 1;
        };
        std::fs::create_dir_all(&root).or_error("creating the scenario's world")?;
        let mut env = BTreeMap::new();
        for key in KEYS {
            env.insert(key.to_owned(), None);
        }
        let mut kiro = Self {
            ctx: ctx.clone(),
            root,
            env,
        };
        kiro.set("BOT_TOKEN", TOKEN);
        kiro.set("KIRO_AGENT_NAME", AGENT);
        kiro.set("KIRO_CONFIG_PATH", &kiro.template().display().to_string());
        kiro.set(
            "WORKSPACE_BASE_PATH",
            &kiro.root.join("workspaces").display().to_string(),
        );
        kiro.set("LOG_LEVEL", "DEBUG");
        kiro.set("HOME", &kiro.root.join("home").display().to_string());
        let path = std::env::var("PATH").unwrap_or_else(|_| "/usr/bin:/bin".to_owned());
        kiro.set(
            "PATH",
            &format!("{}:{path}", kiro.root.join("bin").display()),
        );
        std::fs::create_dir_all(kiro.root.join("home")).or_error("creating the home")?;
        std::fs::create_dir_all(kiro.root.join("transcripts")).or_error("creating transcripts")?;
        kiro.template_file(
            &format!("agents/{AGENT}.json"),
            &format!(
                r#"{{"name":"{AGENT}","description":"test agent","model":"auto","prompt":"be brief","resources":[{{"type":"knowledgeBase","source":"file://{{{{KIRO_HOME}}}}/steering/{AGENT}-context.md"}}],"tools":[],"allowedTools":["*"]}}"#
            ),
        )?;
        kiro.script("")?;
        kiro.wrapper(Wrapper::Plain)?;
        Ok(kiro)
    }

    /// The scenario's temp dir.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The template directory (`KIRO_CONFIG_PATH`).
    pub fn template(&self) -> PathBuf {
        self.root.join("template")
    }

    /// The kiro home the adapter syncs into: `$HOME/.kiro`.
    pub fn kiro_home(&self) -> PathBuf {
        self.root.join("home/.kiro")
    }

    /// Where the adapter reads its `.env` file: the profile's `env_file` setting, relative to the
    /// world (the adapter's working directory) unless absolute; by default `.env` in the world.
    pub fn env_file(&self) -> Result<PathBuf, CheckError> {
        let setting = self.ctx.setting(&kiro::ENV_FILE)?;
        Ok(self.root.join(setting.as_deref().unwrap_or(".env")))
    }

    /// Writes the `.env` file where the adapter reads it ([`Kiro::env_file`]).
    pub fn write_env_file(&self, text: &str) -> Result<(), CheckError> {
        write(&self.env_file()?, text)
    }

    /// Sets an environment variable of the adapter.
    pub fn set(&mut self, key: &str, value: &str) {
        self.env.insert(key.to_owned(), Some(value.to_owned()));
    }

    /// Removes an environment variable of the adapter.
    pub fn unset(&mut self, key: &str) {
        self.env.insert(key.to_owned(), None);
    }

    /// Writes a template file (relative to the template).
    pub fn template_file(&self, relative: &str, text: &str) -> Result<(), CheckError> {
        write(&self.template().join(relative), text)
    }

    /// Writes a file in the kiro home (relative to it).
    pub fn home_file(&self, relative: &str, text: &str) -> Result<(), CheckError> {
        write(&self.kiro_home().join(relative), text)
    }

    /// Writes the mock's script: `extra_rules` first (they win), then the shared kiro-cli rules.
    pub fn script(&self, extra_rules: &str) -> Result<(), CheckError> {
        let text = format!(
            "personality = \"kiro\"\n\n[kiro]\nquirks = [\"exit-on-missing-mcp-servers\", \"silent-malformed-load\"]\nsessions_on_disk = true\nrequire_agent = true\n{extra_rules}\n{KIRO_RULES}"
        );
        write(&self.root.join("kiro.toml"), &text)
    }

    /// Installs `bin/kiro-cli`.
    pub fn wrapper(&self, wrapper: Wrapper) -> Result<(), CheckError> {
        let mock = match self.ctx.setting(&kiro::MOCK_AGENT)? {
            Some(path) => path,
            None => self.ctx.bin("ski-mock-agent").display().to_string(),
        };
        let run = format!(
            "'{mock}' --script '{}' --transcript '{}/transcripts/{{pid}}.jsonl' \"$@\"",
            self.root.join("kiro.toml").display(),
            self.root.display()
        );
        let body = match wrapper {
            Wrapper::Plain => format!("exec {run}"),
            Wrapper::IgnoresTerm => format!("trap '' TERM\n{run}\nwhile :; do sleep 1; done"),
            Wrapper::NoStderr => format!("exec 2>/dev/null\nexec {run}"),
            Wrapper::RewritesEnvFile => format!(
                "printf 'LOG_LEVEL=ERROR\\nKIRO_AGENT_NAME=changed-name\\n' > '{}'\nexec {run}",
                self.env_file()?.display()
            ),
        };
        let path = self.root.join("bin/kiro-cli");
        write(&path, &format!("#!/bin/sh\n{body}\n"))?;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))
            .or_error("making kiro-cli executable")
    }

    /// Removes `bin/kiro-cli` from `PATH`.
    pub fn remove_kiro_cli(&self) -> Result<(), CheckError> {
        std::fs::remove_file(self.root.join("bin/kiro-cli")).or_error("removing kiro-cli")
    }

    /// Runs `adapter ARGS…` in the temp dir and waits for it to finish.
    ///
    /// What the adapter writes itself (the kiro home, the workspace base) is in place when it
    /// exits, so checks read it once afterwards; only kiro-cli, a process of its own, may still
    /// be writing (its transcript), which [`Kiro::echo`] waits for.
    pub async fn run(&self, args: &[&str]) -> Result<Output, CheckError> {
        let mut spec = self.ctx.command(COMMAND, &[])?.args(args).cwd(&self.root);
        for (key, value) in &self.env {
            spec = match value {
                Some(value) => spec.env(key, value),
                None => spec.env_remove(key),
            };
        }
        let command = format!("{COMMAND} {}", args.join(" "));
        let mut child = self.ctx.spawn(spec)?;
        let what = format!("`{command}` to finish");
        self.ctx
            .within(&what, async {
                child.close_stdin();
                Output::collect(&mut child, &command).await
            })
            .await?
    }

    /// `check`.
    pub async fn check(&self) -> Result<Output, CheckError> {
        self.run(&["check"]).await
    }

    /// `provision`.
    pub async fn provision(&self) -> Result<Output, CheckError> {
        self.run(&["provision"]).await
    }

    /// `echo PROMPT` with extra flags; the profile's `grace_ms` setting is passed when set.
    pub async fn echo(&self, prompt: &str, flags: &[&str]) -> Result<Echo, CheckError> {
        let grace = self.ctx.setting(&kiro::GRACE_MS)?;
        let mut args = vec!["echo"];
        if let Some(grace) = &grace {
            args.extend(["--grace-ms", grace.as_str()]);
        }
        args.extend(flags);
        args.push(prompt);
        let output = self.run(&args).await?;
        let events = output.json_lines()?;
        // kiro-cli writes its transcript: an adapter may exit before kiro-cli has ended (and
        // recorded everything it read), so its groups are waited for first. One that outlives
        // the wait is judged by the rows on process groups; its transcript is read as it is.
        for pid in events
            .iter()
            .filter(|e| e["event"] == "spawned")
            .filter_map(|e| e["pid"].as_u64().and_then(|p| u32::try_from(p).ok()))
        {
            group_ended(&self.ctx, pid).await;
        }
        Ok(Echo {
            output,
            events,
            transcripts: self.transcripts()?,
        })
    }

    /// Every transcript the mock wrote, one per kiro-cli process, in start order.
    pub fn transcripts(&self) -> Result<Vec<Transcript>, CheckError> {
        let dir = self.root.join("transcripts");
        let mut found = Vec::new();
        for entry in std::fs::read_dir(&dir).or_error("listing transcripts")? {
            let path = entry.or_error("listing transcripts")?.path();
            let text = std::fs::read_to_string(&path).or_error("reading a transcript")?;
            let records: Vec<Value> = text
                .lines()
                .filter(|l| !l.trim().is_empty())
                .map(|l| serde_json::from_str(l).or_error("a transcript record"))
                .collect::<Result<_, _>>()?;
            found.push(Transcript { records });
        }
        found.sort_by_key(Transcript::start_pid);
        Ok(found)
    }
}

/// What the mock recorded of one kiro-cli process.
#[derive(Debug, Clone)]
pub struct Transcript {
    /// The records in order.
    pub records: Vec<Value>,
}

impl Transcript {
    fn start_pid(&self) -> i64 {
        self.records
            .first()
            .and_then(|r| r["pid"].as_i64())
            .unwrap_or(0)
    }

    /// The raw texts of the lines the client wrote.
    pub fn sent_texts(&self) -> Vec<String> {
        self.records
            .iter()
            .filter(|r| r["kind"] == "in")
            .filter_map(|r| r["text"].as_str().map(str::to_owned))
            .collect()
    }

    /// The lines the client wrote, parsed; a failure when one is not one JSON object.
    pub fn sent(&self) -> Result<Vec<Value>, CheckError> {
        self.sent_texts()
            .into_iter()
            .map(|text| match serde_json::from_str::<Value>(&text) {
                Ok(value @ Value::Object(_)) => Ok(value),
                _ => Err(Failure::new(
                    "one line is one JSON message",
                    "every line the client writes is exactly one JSON object",
                )
                .actual(format!("the line {text:?}"))
                .into()),
            })
            .collect()
    }

    /// The messages the agent wrote that parse as JSON.
    pub fn received(&self) -> Vec<Value> {
        self.records
            .iter()
            .filter(|r| r["kind"] == "out")
            .filter_map(|r| r["text"].as_str())
            .filter_map(|t| serde_json::from_str(t).ok())
            .collect()
    }

    /// `(kind, message)` of every line in both directions, in order (notes as `note`).
    pub fn timeline(&self) -> Vec<(String, Value)> {
        self.records
            .iter()
            .filter_map(|r| {
                let kind = r["kind"].as_str()?;
                let text = r["text"].as_str().unwrap_or("");
                let value =
                    serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.to_owned()));
                Some((kind.to_owned(), value))
            })
            .collect()
    }

    /// The client's messages with `method`.
    pub fn sent_method(&self, method: &str) -> Result<Vec<Value>, CheckError> {
        Ok(self
            .sent()?
            .into_iter()
            .filter(|m| m["method"] == method)
            .collect())
    }
}

/// What one `echo` run left: the output, its events and the mock's transcripts.
#[derive(Debug, Clone)]
pub struct Echo {
    /// The adapter's output.
    pub output: Output,
    /// The JSON lines of stdout.
    pub events: Vec<Value>,
    /// One transcript per kiro-cli process.
    pub transcripts: Vec<Transcript>,
}

impl Echo {
    /// The events named `name`.
    pub fn named(&self, name: &str) -> Vec<&Value> {
        self.events.iter().filter(|e| e["event"] == name).collect()
    }

    /// The first event named `name`; a failure when there is none.
    pub fn one(&self, name: &str) -> Result<&Value, CheckError> {
        self.named(name).into_iter().next().ok_or_else(|| {
            Failure::new(
                format!("a {name} event"),
                format!("`echo` prints a {{\"event\":\"{name}\"}} line"),
            )
            .actual(self.summary())
            .into()
        })
    }

    /// The states printed, in order.
    pub fn states(&self) -> Vec<String> {
        self.named("state")
            .iter()
            .filter_map(|e| e["state"].as_str().map(str::to_owned))
            .collect()
    }

    /// The chunk texts, in order.
    pub fn chunks(&self) -> Vec<String> {
        self.named("chunk")
            .iter()
            .filter_map(|e| e["text"].as_str().map(str::to_owned))
            .collect()
    }

    /// The only transcript; a failure unless exactly one kiro-cli ran.
    pub fn transcript(&self) -> Result<&Transcript, CheckError> {
        match self.transcripts.as_slice() {
            [one] => Ok(one),
            other => Err(Failure::new(
                "one kiro-cli process",
                "`echo` starts kiro-cli exactly once",
            )
            .actual(format!("{} processes; {}", other.len(), self.summary()))
            .into()),
        }
    }

    /// Fails unless the exit code is `code`.
    pub fn ensure_code(&self, code: i32) -> Result<(), CheckError> {
        self.output.ensure_code(code)
    }

    /// The events and stderr, shortened, for an Actual line.
    pub fn summary(&self) -> String {
        let events: Vec<String> = self.events.iter().map(Value::to_string).collect();
        let stderr: String = self.output.stderr.chars().take(1500).collect();
        format!(
            "exit {}; events: [{}]; stderr: {stderr:?}",
            self.output.exit(),
            events.join(", ")
        )
    }
}
