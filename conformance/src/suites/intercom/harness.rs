//! The world of one intercom scenario: an in-process fake Slack, the target's config file made
//! from the profile's templates, the target process (its readiness line, its log, its exit
//! code), the target's SQLite file opened read-only, and rmcp clients on its MCP endpoint.

use std::path::PathBuf;
use std::time::Duration;

use rmcp::model::{CallToolRequestParams, ClientConfig};
use rmcp::service::RunningService;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{Peer, RoleClient, ServiceExt};
use serde_json::{Value, json};
use ski::transport::child::{OutputStream, Watched};
use ski_mocks::slack::config::ChannelConfig;
use ski_mocks::slack::{Click, Config, FakeSlack, Message, SlashCommand};

use super::slack_hosts::{Reach, SLACK_API, SlackHosts};
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
    pub slack_hosts: Option<SlackHosts>,
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
        ctx.require("intercom-server")?;
        let mut config = Config::default();
        config.channels.push(ChannelConfig {
            id: CHANNEL_Z.into(),
            name: "third".into(),
            private: false,
            members: Vec::new(),
        });
        let reach = Reach::of(ctx)?;
        let slack = match reach {
            Reach::BaseUrl => FakeSlack::start(config).await,
            Reach::SlackHosts => FakeSlack::start_tls(config, None).await,
        }
        .or_error("start the fake slack")?;
        let slack_hosts = match reach {
            Reach::BaseUrl => None,
            Reach::SlackHosts => Some(SlackHosts::start(ctx, &slack).await?),
        };
        let world = World {
            ctx: ctx.clone(),
            slack,
            config: ctx.temp_dir().join("intercom.toml"),
            database: ctx.temp_dir().join("data").join("intercom.db"),
            slack_hosts,
        };
        world.write_config(WORKSPACES, "")?;
        Ok(world)
    }

    /// The slash command the target answers.
    pub fn slash(&self) -> Result<String, CheckError> {
        Ok(self
            .ctx
            .setting("slash_command")?
            .unwrap_or_else(|| "/intercom".into()))
    }

    fn raw_setting(&self, name: &str) -> Result<String, CheckError> {
        self.ctx
            .section()
            .settings
            .get(name)
            .cloned()
            .ok_or_else(|| CheckError::harness(format!("the profile has no settings.{name}")))
    }

    /// Renders the profile's `config` template with these workspaces and top-level lines.
    pub fn write_config(&self, workspaces: &[(&str, &str)], top: &str) -> Result<(), CheckError> {
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
        let text = self.ctx.render(
            &self.raw_setting("config_template")?,
            &[
                ("top", top),
                ("workspaces", &entries),
                ("api_base_url", &api),
                ("database", &database),
                ("authorized_user", ALICE),
            ],
        )?;
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
        match mode {
            None => self.command("server", &[("config", config.as_str())]),
            Some(mode) => self.command(
                "server_mode",
                &[("config", config.as_str()), ("mode", mode)],
            ),
        }
    }

    /// Runs the target until it exits by itself.
    pub async fn run_to_exit(&self, mode: Option<&str>) -> Result<Exit, CheckError> {
        let mut child = self.ctx.spawn(self.spec(mode)?)?;
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
        self.ctx
            .within("the target to exit on its own", collect)
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

    /// Starts the target and waits for its readiness line.
    pub async fn start(&self, mode: Option<&str>) -> Result<Server, CheckError> {
        let is_ready =
            |line: &str| serde_json::from_str::<Value>(line).is_ok_and(|v| v.is_object());
        let (process, ready) = Watched::start(self.ctx.spawn(self.spec(mode)?)?, is_ready);
        let ready = match self.ctx.within("the readiness line", ready).await? {
            Ok(line) => serde_json::from_str(&line).or_fail("a JSON readiness line")?,
            Err(_) => {
                return Err(Failure::expected("a readiness line on stdout")
                    .actual(format!(
                        "the target ended first; stderr: {}",
                        process.stderr().join("\n")
                    ))
                    .into());
            }
        };
        let mut ready: Value = ready;
        if let Some(url) = ready.get("mcp_url").and_then(Value::as_str) {
            ready["mcp_url"] = Value::String(self.reachable(url).await?);
        }
        Ok(Server {
            ctx: self.ctx.clone(),
            ready,
            process,
        })
    }

    /// A user types the slash command; answers the visible reply (the ack's text), `None` when
    /// the ack carries nothing.
    pub async fn slash_command(
        &self,
        channel: &str,
        user: &str,
        text: &str,
    ) -> Result<Option<String>, CheckError> {
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

    /// The target's database, read-only.
    pub fn db(&self) -> Result<rusqlite::Connection, CheckError> {
        rusqlite::Connection::open_with_flags(
            &self.database,
            rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
        )
        .or_fail("the database file opens read-only")
    }

    /// The session rows in insertion order.
    pub fn sessions(&self) -> Result<Vec<SessionRow>, CheckError> {
        let db = self.db()?;
        let mut statement = db
            .prepare(
                "SELECT id, protocol_mode, channel_id, thread_ts, status FROM session ORDER BY rowid",
            )
            .or_fail("a session table with protocol_mode, channel_id, thread_ts, status")?;
        let rows = statement
            .query_map([], |row| {
                Ok(SessionRow {
                    id: row.get(0)?,
                    protocol_mode: row.get(1)?,
                    channel_id: row.get(2)?,
                    thread_ts: row.get(3)?,
                    status: row.get(4)?,
                })
            })
            .or_fail("session rows")?
            .collect::<Result<Vec<_>, _>>()
            .or_fail("session rows")?;
        Ok(rows)
    }

    /// The session row at `index`, once it exists (see [`World::session_when`]).
    pub async fn session(&self, index: usize) -> Result<SessionRow, CheckError> {
        self.session_when(index, "exists", |_| true).await
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
        const REREAD: Duration = Duration::from_millis(10);
        let expected = format!("a session row #{} that {what}", index + 1);
        let wait = async {
            loop {
                if let Some(row) = self.sessions()?.into_iter().nth(index)
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
                    self.sessions()?
                ))
                .into()),
        }
    }
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
    pub ready: Value,
    process: Watched,
}

/// An MCP client session.
pub type Client = RunningService<RoleClient, ClientConfig>;

impl Server {
    /// The MCP endpoint from the readiness line, with `query`.
    pub fn mcp_url(&self, query: &str) -> Result<String, CheckError> {
        let base = self.ready["mcp_url"]
            .as_str()
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

    /// Every log line so far.
    pub fn log(&self) -> Vec<String> {
        self.process.stderr()
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
                self.process.until_stderr(find),
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
    let (value, is_error) = ctx
        .within("check_clearance to return", pending)
        .await?
        .or_error("the clearance task")??;
    if is_error {
        return Err(Failure::expected("check_clearance returns a decision")
            .actual(format!("a tool error: {value}"))
            .into());
    }
    Ok(value)
}

/// Whether a message carries a button with this action id.
pub fn has_button(message: &Message, action_id: &str) -> bool {
    message.message["blocks"]
        .to_string()
        .contains(&format!("\"{action_id}\""))
}
