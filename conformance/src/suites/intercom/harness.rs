//! The world of one intercom scenario: an in-process fake Slack, the target's config file made
//! from the profile's templates, the target process (its readiness, its log, its exit code), the
//! target's SQLite file read through [`crate::sqlite`], and rmcp clients on its MCP endpoint. How a build shows
//! readiness, where it logs and whether its stdin stays open are the profile's knobs
//! ([`super::profile`]).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rmcp::model::{CallToolRequestParams, ClientConfig};
use rmcp::service::RunningService;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{Peer, RoleClient, ServiceExt};
use serde_json::{Value, json};
use ski::transport::child::{Child, OutputStream, Watched};
use ski_mocks::slack::config::ChannelConfig;
use ski_mocks::slack::{Click, Config, FakeSlack, Message, SlashCommand, UserMessage};

use super::profile::{Decision, Knobs, Readiness, Stdin};
use super::slack_hosts::{Reach, SLACK_API, SlackHosts, loopback_accepts};
use crate::sqlite::{self, Mode, Refused, Rows, Sqlite};
use crate::vocabulary::capability;
use crate::vocabulary::intercom;
use crate::{CheckError, Ctx, Failure, OrFail};

/// The operator the config authorizes.
pub const ALICE: &str = "U0000000002";
/// A workspace member the config does not authorize.
pub const BOB: &str = "U0000000003";
/// The channels of workspaces `myproj`, `other` and `third`.
pub const CHANNEL_X: &str = "C0000000001";
pub const CHANNEL_Y: &str = "C0000000002";
pub const CHANNEL_Z: &str = "C0000000003";

/// The default workspace mapping: `myproj` → X, `other` → Y, `third` → Z.
pub const WORKSPACES: &[(&str, &str)] = &[
    ("myproj", CHANNEL_X),
    ("other", CHANNEL_Y),
    ("third", CHANNEL_Z),
];

/// One scenario's fake Slack and config.
pub struct World {
    pub ctx: Ctx,
    pub slack: FakeSlack,
    pub config: PathBuf,
    pub database: PathBuf,
    /// With `slack = "slack-hosts"`: the namespace the target runs in.
    pub slack_hosts: Option<Arc<SlackHosts>>,
    /// A loopback port that was free when the world was made, rendered as `{mcp_port}`.
    pub mcp_port: u16,
    pub knobs: Knobs,
    /// The target runs in ACP mode: slash commands use `slash_command_acp` when set.
    pub acp_mode: bool,
    /// The stall detector's thresholds for the config's stall placeholders (`None`: off).
    pub stall: Option<(u64, u64, u32)>,
    /// The program that reads the target's database (see [`World::read`]), started on first use.
    reader: tokio::sync::Mutex<Option<Sqlite>>,
}

impl Drop for World {
    /// A failing row's report shows what the fake Slack saw beside the target's output.
    fn drop(&mut self) {
        super::slack_record::write(&self.ctx, &self.slack);
    }
}

/// What a target process printed and how it ended.
pub struct Exit {
    pub code: Option<i32>,
    pub stderr: String,
    pub stdout: String,
}

impl World {
    /// Starts the fake Slack (three channels) and writes a config with the default workspaces.
    pub async fn new(ctx: &Ctx) -> Result<World, CheckError> {
        ctx.require(capability::INTERCOM_SERVER)?;
        let mut config = Config::default();
        config.channels.push(ChannelConfig {
            id: CHANNEL_Z.into(),
            name: "third".into(),
            private: false,
            members: Vec::new(),
        });
        let knobs = Knobs::read(ctx)?;
        let reach = Reach::of(ctx)?;
        let slack = match reach {
            Reach::BaseUrl => FakeSlack::start(config).await,
            Reach::SlackHosts => FakeSlack::start_tls(config, None).await,
        }
        .or_error("start the fake slack")?;
        let slack_hosts = match reach {
            Reach::BaseUrl => None,
            Reach::SlackHosts => Some(Arc::new(SlackHosts::start(ctx, &slack).await?)),
        };
        // Bound, then released for the target to bind.
        let mcp_port = ctx
            .bind_loopback()
            .await?
            .local_addr()
            .or_error("a free loopback port")?
            .port();
        let world = World {
            ctx: ctx.clone(),
            slack,
            config: ctx.temp_dir().join("intercom.toml"),
            database: ctx.temp_dir().join("data").join("intercom.db"),
            slack_hosts,
            mcp_port,
            knobs,
            acp_mode: false,
            stall: None,
            reader: tokio::sync::Mutex::new(None),
        };
        world.write_config(WORKSPACES, "")?;
        Ok(world)
    }

    /// The slash command the target answers (in ACP mode `slash_command_acp`, for a build
    /// with a command of its own per mode).
    pub fn slash(&self) -> Result<String, CheckError> {
        let acp = if self.acp_mode {
            self.ctx.setting(&intercom::SLASH_COMMAND_ACP)?
        } else {
            None
        };
        Ok(match acp {
            Some(command) => command,
            None => self
                .ctx
                .setting(&intercom::SLASH_COMMAND)?
                .unwrap_or_else(|| "/intercom".into()),
        })
    }

    fn raw_setting(&self, name: &str) -> Result<String, CheckError> {
        self.ctx
            .section()
            .settings
            .get(name)
            .cloned()
            .ok_or_else(|| CheckError::harness(format!("the profile has no settings.{name}")))
    }

    /// Renders the profile's `config` template with these workspaces and top-level lines. With
    /// `agent_in_mcp_mode`, a config without top-level lines (an MCP-mode config) gets the
    /// agent part (`agent_template`, `acp_template`) as its top-level lines.
    pub fn write_config(&self, workspaces: &[(&str, &str)], top: &str) -> Result<(), CheckError> {
        if top.is_empty() && self.knobs.agent_in_mcp_mode {
            let agent = super::agents::mcp_mode_agent_part(&self.ctx)?;
            return self.write_config_exactly(workspaces, &agent);
        }
        self.write_config_exactly(workspaces, top)
    }

    /// Renders the profile's `config` template with exactly these top-level lines (none of the
    /// profile's agent settings unless `top` has them).
    pub fn write_config_exactly(
        &self,
        workspaces: &[(&str, &str)],
        top: &str,
    ) -> Result<(), CheckError> {
        let entry = self.raw_setting("workspace_template")?;
        let mut entries = String::new();
        for (id, channel) in workspaces {
            entries.push_str(
                &self
                    .ctx
                    .render(&entry, &[("workspace_id", id), ("channel_id", channel)])?,
            );
            entries.push('\n');
        }
        let database = self.database.display().to_string();
        let api = match self.slack_hosts {
            Some(_) => SLACK_API.to_string(),
            None => self.slack.api_base_url(),
        };
        let mcp_port = self.mcp_port.to_string();
        let stall = super::profile::stall_placeholders(self.stall);
        let mut pairs = vec![
            ("top", top),
            ("workspaces", entries.as_str()),
            ("api_base_url", api.as_str()),
            ("database", database.as_str()),
            ("authorized_user", ALICE),
            ("mcp_port", mcp_port.as_str()),
        ];
        pairs.extend(stall.iter().map(|(k, v)| (*k, v.as_str())));
        let text = self
            .ctx
            .render(&self.raw_setting("config_template")?, &pairs)?;
        std::fs::write(&self.config, text).or_error("write the config")?;
        Ok(())
    }

    /// The target's command `name` rendered (as [`Ctx::command`]), run inside the namespace
    /// with `slack = "slack-hosts"`.
    pub fn command(
        &self,
        name: &str,
        extra: &[(&str, &str)],
    ) -> Result<ski::transport::child::ChildSpec, CheckError> {
        let spec = self.ctx.command(name, extra)?;
        Ok(match &self.slack_hosts {
            Some(hosts) => hosts.wrap(spec),
            None => spec,
        })
    }

    /// A URL the target serves (its MCP endpoint) as the checks reach it: itself, or with
    /// `slack = "slack-hosts"` a relay into the namespace.
    pub async fn reachable(&self, url: &str) -> Result<String, CheckError> {
        match &self.slack_hosts {
            Some(hosts) => hosts.expose(url).await,
            None => Ok(url.to_string()),
        }
    }

    fn spec(&self, mode: Option<&str>) -> Result<ski::transport::child::ChildSpec, CheckError> {
        let config = self.config.display().to_string();
        let mcp_port = self.mcp_port.to_string();
        let mut extra = vec![("config", config.as_str()), ("mcp_port", mcp_port.as_str())];
        match mode {
            None => self.command("server", &extra),
            Some(mode) => {
                extra.push(("mode", mode));
                self.command("server_mode", &extra)
            }
        }
    }

    /// Starts the target; its stdin is closed at once when `stdin` says so.
    fn spawn(&self, mode: Option<&str>, stdin: Stdin) -> Result<Child, CheckError> {
        let mut child = self.ctx.spawn(self.spec(mode)?)?;
        if stdin == Stdin::Closed {
            drop(child.take_stdin());
        }
        Ok(child)
    }

    /// Runs the target until it exits by itself.
    pub async fn run_to_exit(&self, mode: Option<&str>) -> Result<Exit, CheckError> {
        let mut child = self.spawn(mode, self.knobs.stdin)?;
        let mut stdout = String::new();
        let mut stderr = String::new();
        let collect = async {
            while let Some((stream, line)) = child.next_output_line().await {
                let into = match stream {
                    OutputStream::Stdout => &mut stdout,
                    OutputStream::Stderr => &mut stderr,
                };
                into.push_str(&line);
                into.push('\n');
            }
        };
        // Exiting at start-up is bounded as getting ready is: a set-up step, of a kind of its
        // own (a target that has never exited by itself in this run gets the short allowance).
        self.ctx
            .setup_of(
                Some("exit-at-start-up"),
                "the target to exit on its own",
                collect,
            )
            .await?;
        let status = self
            .ctx
            .within("the exit status", child.wait())
            .await?
            .or_error("wait for the target")?;
        Ok(Exit {
            code: status.code(),
            stderr,
            stdout,
        })
    }

    /// Starts the target and waits until it is ready, as the profile's `ready` says.
    pub async fn start(&self, mode: Option<&str>) -> Result<Server, CheckError> {
        self.start_with_stdin(mode, self.knobs.stdin).await
    }

    /// [`World::start`] with the target's stdin `stdin`, whatever the profile's `stdin` says.
    pub async fn start_with_stdin(
        &self,
        mode: Option<&str>,
        stdin: Stdin,
    ) -> Result<Server, CheckError> {
        let child = self.spawn(mode, stdin)?;
        let (process, ready) = match &self.knobs.ready {
            Readiness::Json => self.ready_by_json(child).await?,
            Readiness::Line(text) => self.ready_by_line(child, text).await?,
            Readiness::Port => self.ready_by_port(child).await?,
        };
        let mcp_url = match (
            ready.get("mcp_url").and_then(Value::as_str),
            &self.knobs.mcp_url,
        ) {
            (Some(url), _) => Some(url.to_string()),
            (None, Some(template)) => Some(
                self.ctx
                    .render(template, &[("mcp_port", &self.mcp_port.to_string())])?,
            ),
            (None, None) => None,
        };
        let mcp_url = match mcp_url {
            Some(url) => {
                let url = self.reachable(&url).await?;
                // In ACP mode the server speaks to its agents on their stdio: its MCP endpoint,
                // if it keeps one, is no channel the row needs, so it is not probed.
                if mode != Some("acp") {
                    super::refusal::ensure_mcp_answers(&self.ctx, &url).await?;
                }
                Some(url)
            }
            None => None,
        };
        Ok(Server {
            ctx: self.ctx.clone(),
            ready,
            mcp_url,
            mcp_port: self.mcp_port,
            log_stream: self.knobs.log_stream,
            process,
            slack_hosts: self.slack_hosts.clone(),
        })
    }

    /// The first JSON object on stdout is the readiness line.
    async fn ready_by_json(&self, child: Child) -> Result<(Watched, Value), CheckError> {
        let is_ready =
            |line: &str| serde_json::from_str::<Value>(line).is_ok_and(|v| v.is_object());
        let (process, ready) = Watched::start(child, is_ready);
        match self.ctx.setup("the readiness line", ready).await? {
            Ok(line) => {
                let ready = serde_json::from_str(&line).or_fail("a JSON readiness line")?;
                Ok((process, ready))
            }
            Err(_) => Err(ended_first(&process, "a readiness line on stdout")),
        }
    }

    /// The first line of stdout or stderr containing `text` says the target is ready.
    async fn ready_by_line(
        &self,
        child: Child,
        text: &str,
    ) -> Result<(Watched, Value), CheckError> {
        let needle = text.to_string();
        let (process, on_stdout) = Watched::start(child, move |line| line.contains(&needle));
        let on_stderr =
            process.until_stderr(|lines| lines.iter().find(|l| l.contains(text)).cloned());
        let expected = format!("a line containing {text:?} on stdout or stderr");
        let ready = self
            .ctx
            .setup(&expected, async {
                tokio::select! {
                    line = on_stdout => line.is_ok(),
                    _ = on_stderr => true,
                }
            })
            .await?;
        if !ready {
            return Err(ended_first(&process, &expected));
        }
        Ok((process, Value::Null))
    }

    /// A TCP connection to `{mcp_port}` succeeding says the target is ready.
    async fn ready_by_port(&self, child: Child) -> Result<(Watched, Value), CheckError> {
        const RETRY: Duration = Duration::from_millis(10);
        let (process, ended) = Watched::start(child, |_| false);
        let address = std::net::SocketAddr::from(([127, 0, 0, 1], self.mcp_port));
        let connects = async {
            while !loopback_accepts(self.slack_hosts.as_deref(), self.mcp_port).await {
                tokio::time::sleep(RETRY).await;
            }
        };
        let expected = format!("a connection to the MCP port {address}");
        let ready = self
            .ctx
            .setup(&expected, async {
                tokio::select! {
                    () = connects => true,
                    _ = ended => false,
                }
            })
            .await?;
        if !ready {
            return Err(ended_first(&process, &expected));
        }
        Ok((process, Value::Null))
    }

    /// A user types the slash command; answers the visible reply (the ack's text), `None` when
    /// the ack carries nothing.
    pub async fn slash_command(
        &self,
        channel: &str,
        user: &str,
        text: &str,
    ) -> Result<Option<String>, CheckError> {
        // The command reaches the target over its Socket Mode connection.
        self.socket_mode().await?;
        let injected = self
            .slack
            .slash_command(SlashCommand {
                command: self.slash()?,
                text: text.into(),
                channel: channel.into(),
                user: user.into(),
            })
            .or_error("inject the slash command")?;
        let ack = self
            .ctx
            .within("the slash command's ack", injected.ack(self.ctx.timeout()))
            .await?
            .or_fail("the slash command acked")?;
        Ok(ack
            .payload
            .and_then(|p| p.get("text").and_then(Value::as_str).map(str::to_string))
            .filter(|t| !t.is_empty()))
    }

    /// Waits until the target has opened its Socket Mode connection, as a set-up step of its
    /// own kind: a target that has not by the step's allowance fails here (and once the run has
    /// seen one never open, within the short allowance), not at a slash command's full wait.
    pub async fn socket_mode(&self) -> Result<(), CheckError> {
        self.ctx
            .setup_of(
                Some("socket-mode"),
                "the target's Socket Mode connection",
                self.slack.wait_for_connections(1, self.ctx.timeout()),
            )
            .await?
            .map_err(|e| {
                Failure::expected("the target opens Socket Mode")
                    .actual(e.to_string())
                    .into()
            })
    }

    /// A user clicks a button of a posted message.
    pub fn click(&self, message: &Message, action_id: &str, user: &str) -> Result<(), CheckError> {
        self.slack
            .click(Click {
                channel: message.channel.clone(),
                message_ts: message.ts().into(),
                action_id: action_id.into(),
                user: user.into(),
            })
            .or_fail(format!("a clickable {action_id} on the message"))?;
        Ok(())
    }

    /// Rejects through the modal the Reject button opens, with `reason`.
    pub async fn reject_with_reason(
        &self,
        message: &Message,
        reason: &str,
    ) -> Result<(), CheckError> {
        let before = self
            .slack
            .requests()
            .iter()
            .filter(|r| r.method == "views.open")
            .count();
        self.click(message, "approve_reject", ALICE)?;
        let opened = self
            .ctx
            .within(
                "a modal opened for the reason",
                self.slack
                    .wait_for_requests("views.open", before + 1, self.ctx.timeout()),
            )
            .await?
            .or_fail("views.open after Reject")?;
        let view_id = opened[before].response["view"]["id"]
            .as_str()
            .or_fail("views.open answered a view id")?
            .to_string();
        let view = self.slack.view(&view_id).or_fail("the opened view")?;
        // The modal's first input element is where the reason goes.
        let (block, action) = view["blocks"]
            .as_array()
            .and_then(|blocks| {
                blocks.iter().find_map(|b| {
                    Some((
                        b["block_id"].as_str()?.to_string(),
                        b["element"]["action_id"].as_str()?.to_string(),
                    ))
                })
            })
            .or_fail("an input block in the modal")?;
        self.slack
            .submit_view(&view_id, json!({ block: { action: reason } }), ALICE)
            .or_error("submit the modal")?;
        Ok(())
    }

    /// Whether `message` asks the operator to decide, in the profile's `approval` way: an
    /// Accept button, or (`reply`) the `approval_marker` in what it shows. Only for rows whose
    /// document says "approves" rather than "clicks" (S043, S048).
    pub fn asks_decision(&self, message: &Message) -> bool {
        match &self.knobs.decision {
            Decision::Buttons => has_button(message, "approve_accept"),
            Decision::Reply { marker, .. } => shows(message, marker),
        }
    }

    /// Waits for an approval request in `scope` (a message with an approval button, or one that
    /// asks for the decision the profile's way) and fails at once, showing it, unless it carries
    /// the button `button`: a build that asks in another way (text to reply to) shows that as
    /// soon as it posts, not at the end of the wait.
    pub async fn approval(
        &self,
        what: &str,
        scope: impl Fn(&Message) -> bool,
        button: &str,
    ) -> Result<Message, CheckError> {
        let message = self
            .message(what, |m| scope(m) && self.asks_approval(m))
            .await?;
        if !has_button(&message, button) {
            return Err(
                Failure::new(what, format!("{what}, with the {button} button"))
                    .actual(format!(
                        "an approval request without it: {:?}",
                        shown_text(&message)
                    ))
                    .into(),
            );
        }
        Ok(message)
    }

    /// Waits for the approval requests, in any channel or thread, that show each of `titles`,
    /// asked at once: all of them within the wait, and once the first is posted, the others
    /// within [`SETTLED`] (a build that posts only some fails in seconds, naming the missing).
    /// Where each landed is for the row to judge. In the order of `titles`.
    pub async fn approvals_showing(&self, titles: &[&str]) -> Result<Vec<Message>, CheckError> {
        let started = Instant::now();
        let (limit, settled) = (self.ctx.timeout(), self.ctx.scaled(SETTLED));
        let mut first: Option<Instant> = None;
        loop {
            let posted = self.slack.all_messages();
            let found: Vec<Option<&Message>> = titles
                .iter()
                .map(|title| {
                    posted
                        .iter()
                        .find(|m| shows(m, title) && self.asks_approval(m))
                })
                .collect();
            if found.iter().all(Option::is_some) {
                return Ok(found.into_iter().flatten().cloned().collect());
            }
            let missing: Vec<&str> = titles
                .iter()
                .zip(&found)
                .filter(|(_, message)| message.is_none())
                .map(|(title, _)| *title)
                .collect();
            if first.is_none() && found.iter().any(Option::is_some) {
                first = Some(Instant::now());
            }
            let expected = format!("approval requests showing {titles:?}");
            match first {
                Some(at) if at.elapsed() >= settled => {
                    return Err(Failure::expected(expected)
                        .actual(format!(
                            "none showing {missing:?} {settled:?} after the first was posted"
                        ))
                        .into());
                }
                None if started.elapsed() >= limit => {
                    return Err(Failure::expected(expected)
                        .actual(format!("none after {limit:?}"))
                        .into());
                }
                _ => tokio::time::sleep(REREAD).await,
            }
        }
    }

    /// Whether `message` is an approval request: it has an approval button, or asks for the
    /// decision the profile's way.
    fn asks_approval(&self, message: &Message) -> bool {
        has_button(message, "approve_accept")
            || has_button(message, "approve_reject")
            || self.asks_decision(message)
    }

    /// The operator approves the request `message` shows: a click on Accept, or (`reply`) the
    /// `approve_reply` in its thread.
    pub fn approve(&self, message: &Message) -> Result<(), CheckError> {
        match &self.knobs.decision {
            Decision::Buttons => self.click(message, "approve_accept", ALICE),
            Decision::Reply { approve, .. } => self.reply_in_thread(message, approve, ""),
        }
    }

    /// The operator rejects the request `message` shows, with `reason`: Reject and its modal,
    /// or (`reply`) the `reject_reply` in its thread.
    pub async fn reject(&self, message: &Message, reason: &str) -> Result<(), CheckError> {
        match &self.knobs.decision {
            Decision::Buttons => self.reject_with_reason(message, reason).await,
            Decision::Reply { reject, .. } => self.reply_in_thread(message, reject, reason),
        }
    }

    /// ALICE replies in the thread of `message` with `template` (`{bot}` the bot's user id,
    /// `{reason}` the reason).
    fn reply_in_thread(
        &self,
        message: &Message,
        template: &str,
        reason: &str,
    ) -> Result<(), CheckError> {
        let thread = message.thread_ts().unwrap_or(message.ts());
        let root_there = self
            .slack
            .all_messages()
            .iter()
            .any(|m| m.channel == message.channel && m.ts() == thread);
        if !root_there {
            return Err(Failure::expected(format!(
                "the request's thread ({thread}) starts at a message in its channel {}",
                message.channel
            ))
            .actual(format!(
                "no message {thread} there: {:?}",
                shown_text(message)
            ))
            .into());
        }
        let text = template
            .replace("{bot}", &self.slack.config().bot.user_id)
            .replace("{reason}", reason);
        self.slack
            .user_message(UserMessage {
                channel: message.channel.clone(),
                thread_ts: Some(thread.to_string()),
                text: text.trim().to_string(),
                user: ALICE.into(),
            })
            .or_error("post the decision as a reply in the thread")?;
        Ok(())
    }

    /// Waits for a message matching `predicate`.
    pub async fn message(
        &self,
        what: &str,
        predicate: impl Fn(&Message) -> bool,
    ) -> Result<Message, CheckError> {
        self.ctx
            .within(
                what,
                self.slack.wait_for_message(predicate, self.ctx.timeout()),
            )
            .await?
            .or_fail(what.to_string())
    }

    /// Waits for a message matching `predicate` that a build posts as a session ends: until the
    /// row of the session `session` picks shows it ended (`terminated` or `interrupted`), then
    /// for at most [`SETTLED`] more. A build that ends the session without it fails in seconds,
    /// with the messages of the session's channel as evidence, not at the end of the wait.
    ///
    /// It polls rather than racing two waits: a read of the database is never dropped half-way
    /// (the SQLite helper's answer would go to the next query).
    pub async fn message_as_session_ends(
        &self,
        what: &str,
        session: impl Fn(&SessionRow) -> bool,
        predicate: impl Fn(&Message) -> bool,
    ) -> Result<Message, CheckError> {
        let started = Instant::now();
        let (limit, settled) = (self.ctx.timeout(), self.ctx.scaled(SETTLED));
        let mut ended: Option<(Instant, SessionRow)> = None;
        loop {
            if let Some(message) = self.slack.all_messages().into_iter().find(&predicate) {
                return Ok(message);
            }
            if ended.is_none()
                && let Some(row) = self.sessions().await?.into_iter().find(&session)
                && matches!(row.status.as_str(), "terminated" | "interrupted")
            {
                ended = Some((Instant::now(), row));
            }
            match &ended {
                Some((at, row)) if at.elapsed() >= settled => {
                    let posted: Vec<String> = self
                        .slack
                        .all_messages()
                        .iter()
                        .filter(|m| row.channel_id.as_deref().is_none_or(|c| c == m.channel))
                        .map(|m| m.text().to_string())
                        .collect();
                    return Err(Failure::expected(what)
                        .actual(format!(
                            "nothing {settled:?} after the session's row showed it {}; posted: {posted:?}",
                            row.status
                        ))
                        .into());
                }
                None if started.elapsed() >= limit => {
                    return Err(Failure::expected(what)
                        .actual(format!(
                            "timed out after {limit:?} waiting for a matching message"
                        ))
                        .into());
                }
                _ => tokio::time::sleep(REREAD).await,
            }
        }
    }

    /// Runs one query on the target's database, opened read-only for that query and closed
    /// after it, so each read sees the file as the target left it (even a file it replaced). A
    /// file that does not open is the target's failure; a refused query is the inner `Err`.
    pub async fn read(
        &self,
        sql: &str,
        params: &[Value],
    ) -> Result<Result<Rows, Refused>, CheckError> {
        let mut reader = self.reader.lock().await;
        let sqlite = match &mut *reader {
            Some(sqlite) => sqlite,
            empty => empty.insert(Sqlite::start(&self.ctx)?),
        };
        sqlite
            .open_file(&self.database, Mode::ReadOnly, 10_000)
            .await?
            .or_fail("the database file opens read-only")?;
        let rows = sqlite.query(sql, params).await?;
        sqlite.close_file().await?;
        Ok(rows)
    }

    /// The session rows in insertion order.
    pub async fn sessions(&self) -> Result<Vec<SessionRow>, CheckError> {
        let expected = "a session table with protocol_mode, channel_id, thread_ts, status";
        let rows = self
            .read(
                "SELECT id, protocol_mode, channel_id, thread_ts, status FROM session ORDER BY rowid",
                &[],
            )
            .await?
            .or_fail(expected)?;
        rows.iter()
            .map(|cells| {
                Ok(SessionRow {
                    id: sqlite::text(cells.first(), "id")?,
                    protocol_mode: sqlite::text(cells.get(1), "protocol_mode")?,
                    channel_id: sqlite::optional_text(cells.get(2), "channel_id")?,
                    thread_ts: sqlite::optional_text(cells.get(3), "thread_ts")?,
                    status: sqlite::text(cells.get(4), "status")?,
                })
            })
            .collect::<Result<Vec<_>, Refused>>()
            .or_fail("session rows")
    }

    /// The session row at `index`, once it exists (see [`World::session_when`]).
    pub async fn session(&self, index: usize) -> Result<SessionRow, CheckError> {
        self.session_when(index, "exists", |_| true).await
    }

    /// Waits until session row #`index + 1` has `channel_id` `channel`, as
    /// [`World::session_when`] does; once the row exists, for at most [`SETTLED`] more (a build
    /// places the session as it makes it, or a moment after): a build that never fills it fails
    /// in seconds, with the rows as evidence.
    pub async fn session_placed(
        &self,
        index: usize,
        channel: &str,
    ) -> Result<SessionRow, CheckError> {
        let started = Instant::now();
        let (limit, settled) = (self.ctx.timeout(), self.ctx.scaled(SETTLED));
        let mut written: Option<Instant> = None;
        loop {
            let rows = self.sessions().await?;
            if let Some(row) = rows.get(index) {
                if row.channel_id.as_deref() == Some(channel) {
                    return Ok(row.clone());
                }
                written.get_or_insert_with(Instant::now);
            }
            let expected = format!("a session row #{} that has channel_id {channel}", index + 1);
            match written {
                Some(at) if at.elapsed() >= settled => {
                    return Err(Failure::expected(expected)
                        .actual(format!(
                            "rows {settled:?} after the row was written: {rows:?}"
                        ))
                        .into());
                }
                None if started.elapsed() >= limit => {
                    return Err(Failure::expected(expected)
                        .actual(format!("rows after {limit:?}: {rows:?}"))
                        .into());
                }
                _ => tokio::time::sleep(REREAD).await,
            }
        }
    }

    /// Waits until session row #`index + 1` exists and `ready` holds for it, and answers it. A
    /// target may write the row, or a column of it, a moment after the event that causes it
    /// (the MCP handshake, the first post), so checks wait for it rather than read it once. The
    /// file is read again every few milliseconds: no other way shows a foreign build's writes.
    pub async fn session_when(
        &self,
        index: usize,
        what: &str,
        ready: impl Fn(&SessionRow) -> bool,
    ) -> Result<SessionRow, CheckError> {
        let expected = format!("a session row #{} that {what}", index + 1);
        let wait = async {
            loop {
                if let Some(row) = self.sessions().await?.into_iter().nth(index)
                    && ready(&row)
                {
                    return Ok::<_, CheckError>(row);
                }
                tokio::time::sleep(REREAD).await;
            }
        };
        match tokio::time::timeout(self.ctx.timeout(), wait).await {
            Ok(row) => row,
            Err(_) => Err(Failure::expected(expected)
                .actual(format!(
                    "rows after {:?}: {:?}",
                    self.ctx.timeout(),
                    self.sessions().await?
                ))
                .into()),
        }
    }
}

/// The failure of a target that ended before it was ready, with what it printed.
fn ended_first(process: &Watched, expected: &str) -> CheckError {
    Failure::expected(expected)
        .actual(format!(
            "the target ended first; stdout: {}; stderr: {}",
            process.stdout().join("\n"),
            process.stderr().join("\n")
        ))
        .into()
}

/// The columns of `session` the checks read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionRow {
    pub id: String,
    pub protocol_mode: String,
    pub channel_id: Option<String>,
    pub thread_ts: Option<String>,
    pub status: String,
}

impl SessionRow {
    /// The first eight characters of the id.
    pub fn short(&self) -> &str {
        self.id.get(..8).unwrap_or(&self.id)
    }
}

/// Connects an rmcp client to a streamable HTTP endpoint (initialize included).
pub async fn connect_url(ctx: &Ctx, url: &str) -> Result<Client, CheckError> {
    let _ = tokio_rustls::rustls::crypto::ring::default_provider().install_default();
    let transport = StreamableHttpClientTransport::from_config(
        StreamableHttpClientTransportConfig::with_uri(url.to_string()),
    );
    ctx.within(
        "the MCP handshake",
        Box::pin(ClientConfig::default().serve(transport)),
    )
    .await?
    .or_fail(format!("an MCP session at {url}"))
}

/// A running target.
pub struct Server {
    ctx: Ctx,
    /// The readiness object (`null` when the profile's readiness is a line or the port).
    pub ready: Value,
    mcp_url: Option<String>,
    mcp_port: u16,
    log_stream: OutputStream,
    process: Watched,
    slack_hosts: Option<Arc<SlackHosts>>,
}

/// An MCP client session.
pub type Client = RunningService<RoleClient, ClientConfig>;

impl Server {
    /// The MCP endpoint (from the readiness line, or the profile's `mcp_url`), with `query`.
    pub fn mcp_url(&self, query: &str) -> Result<String, CheckError> {
        let base = self
            .mcp_url
            .as_deref()
            .or_fail("mcp_url in the readiness line")?;
        Ok(if query.is_empty() {
            base.to_string()
        } else {
            format!("{base}?{query}")
        })
    }

    /// Connects an rmcp client (initialize included).
    pub async fn connect(&self, query: &str) -> Result<Client, CheckError> {
        connect_url(&self.ctx, &self.mcp_url(query)?).await
    }

    /// Whether the target serves an MCP endpoint: the readiness line names one, or (when the
    /// readiness is a line) its MCP port accepts a connection.
    pub async fn serves_mcp(&self) -> bool {
        if self.ready.is_object() {
            return self.ready.get("mcp_url").is_some();
        }
        loopback_accepts(self.slack_hosts.as_deref(), self.mcp_port).await
    }

    /// Every log line so far (the stream the profile's `log_stream` names).
    pub fn log(&self) -> Vec<String> {
        self.process.lines(self.log_stream)
    }

    /// Waits for a log line containing `needle` (case-insensitive).
    pub async fn wait_log(&self, needle: &str) -> Result<String, CheckError> {
        let needle = needle.to_lowercase();
        let find = |lines: &[String]| {
            lines
                .iter()
                .find(|l| l.to_lowercase().contains(&needle))
                .cloned()
        };
        self.ctx
            .within(
                &format!("a log line with {needle:?}"),
                self.process.until(self.log_stream, find),
            )
            .await
    }

    /// SIGTERM and the exit code.
    pub async fn stop(self) -> Result<Option<i32>, CheckError> {
        self.ctx
            .within_for(
                Duration::from_secs(15),
                "the target to exit after SIGTERM",
                self.process.end(nix::sys::signal::Signal::SIGTERM),
            )
            .await
    }
}

/// Calls a tool; answers its first text content parsed as JSON (a string when it is not JSON)
/// and whether the result is an error.
pub async fn call(
    client: &Peer<RoleClient>,
    tool: &str,
    args: Value,
) -> Result<(Value, bool), CheckError> {
    let Value::Object(args) = args else {
        return Err(CheckError::harness("tool arguments must be an object"));
    };
    let result = client
        .call_tool(CallToolRequestParams::new(tool.to_string()).with_arguments(args))
        .await
        .or_fail(format!("a tools/call {tool} result"))?;
    let result = serde_json::to_value(&result).or_error("tool result as json")?;
    let text = result["content"][0]["text"]
        .as_str()
        .unwrap_or("")
        .to_string();
    let is_error = result["isError"].as_bool().unwrap_or(false);
    Ok((
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
        is_error,
    ))
}

/// Starts a `check_clearance` call in a task (it blocks until the operator decides).
pub fn ask_clearance(
    client: &Client,
    title: &str,
) -> tokio::task::JoinHandle<Result<(Value, bool), CheckError>> {
    let peer: Peer<RoleClient> = (**client).clone();
    let title = title.to_string();
    tokio::spawn(async move {
        call(
            &peer,
            "check_clearance",
            json!({ "title": title, "diff": "fn main() {}\n", "file_path": "src/main.rs" }),
        )
        .await
    })
}

/// Awaits a clearance call started by [`ask_clearance`].
pub async fn clearance_answer(
    ctx: &Ctx,
    pending: tokio::task::JoinHandle<Result<(Value, bool), CheckError>>,
) -> Result<Value, CheckError> {
    // The answer is owed once the operator has decided: nothing within the row's timeout is an
    // observation of the target, as a message that never comes is (not a deadline to re-run).
    let limit = ctx.timeout();
    let (value, is_error) = tokio::time::timeout(limit, pending)
        .await
        .map_err(|_| {
            Failure::new(
                "check_clearance to return",
                format!("check_clearance to return within {limit:?}"),
            )
            .actual(format!("nothing after {limit:?}"))
        })?
        .or_error("the clearance task")??;
    if is_error {
        return Err(Failure::expected("check_clearance returns a decision")
            .actual(format!("a tool error: {value}"))
            .into());
    }
    Ok(value)
}

/// What a reader of the channel sees of a message: its `text` and the text of its blocks. A
/// message with blocks shows the blocks, and its `text` is only the notification fallback, so
/// a wording a row looks for may be in either (`🏁 *Session ended*` in a section block under a
/// `text` of "Session `ID` ended").
pub fn shown_text(message: &Message) -> String {
    fn block_texts(value: &Value, out: &mut String) {
        match value {
            Value::Object(map) => {
                for (key, inner) in map {
                    match inner {
                        Value::String(text) if key == "text" => {
                            out.push('\n');
                            out.push_str(text);
                        }
                        _ => block_texts(inner, out),
                    }
                }
            }
            Value::Array(items) => items.iter().for_each(|item| block_texts(item, out)),
            _ => {}
        }
    }
    let mut shown = message.text().to_string();
    block_texts(&message.message["blocks"], &mut shown);
    shown
}

/// Whether a reader sees `needle` in the message (see [`shown_text`]).
pub fn shows(message: &Message, needle: &str) -> bool {
    shown_text(message).contains(needle)
}

/// How often the polling waits read the session rows again.
const REREAD: Duration = Duration::from_millis(10);

/// How long [`World::message_as_session_ends`] waits for a session's last messages once its
/// row shows the session ended (times the timeout multiplier).
pub const SETTLED: Duration = Duration::from_secs(5);

/// Whether a message carries a button with this action id.
pub fn has_button(message: &Message, action_id: &str) -> bool {
    message.message["blocks"]
        .to_string()
        .contains(&format!("\"{action_id}\""))
}
