//! Helpers the intercom tests share: the in-process fake Slack, `ski intercom` as a real process
//! (its readiness line, its stderr log, its exit code), and the rmcp client.

use std::path::{Path, PathBuf};
use std::time::Duration;

use rmcp::model::{CallToolRequestParams, ClientConfig};
use rmcp::service::RunningService;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{RoleClient, ServiceExt};
use serde_json::{Value, json};
use ski::transport::child::{self, ChildSpec, Watched};
use ski_mocks::slack::config::ChannelConfig;
use ski_mocks::slack::{Config, FakeSlack};

pub const WAIT: Duration = Duration::from_secs(20);
pub const ALICE: &str = "U0000000002";
pub const BOB: &str = "U0000000003";
pub const CHANNEL_X: &str = "C0000000001";
pub const CHANNEL_Y: &str = "C0000000002";
pub const CHANNEL_Z: &str = "C0000000003";
pub const SLASH: &str = "/intercom";

/// A fake Slack with three channels.
pub async fn fake_slack() -> FakeSlack {
    let mut config = Config::default();
    config.channels.push(ChannelConfig {
        id: CHANNEL_Z.into(),
        name: "third".into(),
        private: false,
        members: Vec::new(),
    });
    FakeSlack::start(config).await.expect("fake slack")
}

/// A config file: workspaces `myproj` (X), `other` (Y), `third` (Z); Alice authorized.
pub fn write_config(dir: &Path, slack: &FakeSlack, extra: &str) -> PathBuf {
    let path = dir.join("intercom.toml");
    let text = format!(
        r#"{extra}
[[workspace]]
id = "myproj"
channel_id = "{CHANNEL_X}"
path = "ws-myproj"

[[workspace]]
id = "other"
channel_id = "{CHANNEL_Y}"

[[workspace]]
id = "third"
channel_id = "{CHANNEL_Z}"

[slack]
api_base_url = "{api}"
authorized_user_ids = ["{ALICE}"]

[mcp]
port = 0

[database]
path = "data/intercom.db"
"#,
        api = slack.api_base_url()
    );
    std::fs::write(&path, text).expect("write config");
    path
}

/// A running `ski intercom`.
pub struct Server {
    pub ready: Value,
    /// The server's process id (it leads its own process group).
    pub pid: u32,
    process: Watched,
}

fn spec(config: &Path, extra_args: &[&str]) -> ChildSpec {
    ChildSpec::new("intercom", env!("CARGO_BIN_EXE_ski"))
        .arg("intercom")
        .arg("--config")
        .arg(config)
        .args(extra_args)
        .arg("--log-format")
        .arg("json")
        .env("SLACK_BOT_TOKEN", "xoxb-fake-bot")
        .env("SLACK_APP_TOKEN", "xapp-fake-app")
        .env("RUST_LOG", "info")
}

/// Runs `ski intercom` to its exit; answers the exit code and stderr.
pub async fn run_to_exit(
    config: &Path,
    extra_args: &[&str],
    env: &[(&str, Option<&str>)],
) -> (Option<i32>, String) {
    let mut spec = spec(config, extra_args);
    for (key, value) in env {
        spec = match value {
            Some(value) => spec.env(key, value),
            None => spec.env_remove(key),
        };
    }
    let mut process = child::spawn(spec).expect("spawn");
    let mut stderr = String::new();
    while let Some(line) = tokio::time::timeout(WAIT, process.next_stderr_line())
        .await
        .expect("stderr closes")
    {
        stderr.push_str(&line);
        stderr.push('\n');
    }
    let status = tokio::time::timeout(WAIT, process.wait())
        .await
        .expect("exits")
        .expect("status");
    (status.code(), stderr)
}

impl Server {
    /// Starts the server and waits for its readiness line.
    pub async fn start(config: &Path, extra_args: &[&str]) -> Server {
        Server::start_with_env(config, extra_args, &[]).await
    }

    /// Starts the server with extra environment variables (they win over the defaults).
    pub async fn start_with_env(
        config: &Path,
        extra_args: &[&str],
        env: &[(&str, &str)],
    ) -> Server {
        let mut spec = spec(config, extra_args);
        for (key, value) in env {
            spec = spec.env(key, value);
        }
        let (process, ready) = Watched::start(child::spawn(spec).expect("spawn"), |_| true);
        let ready = match tokio::time::timeout(WAIT, ready).await {
            Ok(Ok(line)) => serde_json::from_str(&line).expect("readiness is json"),
            _ => panic!(
                "no readiness line; stderr:\n{}",
                process.stderr().join("\n")
            ),
        };
        Server {
            ready,
            pid: process.pid(),
            process,
        }
    }

    /// The MCP endpoint with a query string.
    pub fn mcp_url(&self, query: &str) -> String {
        let base = self.ready["mcp_url"].as_str().expect("mcp_url");
        if query.is_empty() {
            base.to_string()
        } else {
            format!("{base}?{query}")
        }
    }

    /// The database file.
    pub fn database(&self) -> PathBuf {
        PathBuf::from(self.ready["database"].as_str().expect("database"))
    }

    /// Every stderr log line so far.
    pub fn log(&self) -> Vec<String> {
        self.process.stderr()
    }

    /// Waits for a log line containing `needle`.
    pub async fn wait_log(&self, needle: &str) -> String {
        let find = |lines: &[String]| lines.iter().find(|l| l.contains(needle)).cloned();
        match tokio::time::timeout(WAIT, self.process.until_stderr(find)).await {
            Ok(line) => line,
            Err(_) => panic!("no log line with {needle:?}:\n{}", self.log().join("\n")),
        }
    }

    /// Every stdout line so far (the readiness line).
    pub fn stdout(&self) -> Vec<String> {
        self.process.stdout()
    }

    /// Waits until `count` log lines contain `needle`.
    pub async fn wait_log_count(&self, needle: &str, count: usize) {
        let enough = |lines: &[String]| {
            (lines.iter().filter(|l| l.contains(needle)).count() >= count).then_some(())
        };
        if tokio::time::timeout(WAIT, self.process.until_stderr(enough))
            .await
            .is_err()
        {
            panic!(
                "fewer than {count} log lines with {needle:?}:\n{}",
                self.log().join("\n")
            );
        }
    }

    /// SIGTERM; answers the exit code.
    pub async fn stop(self) -> Option<i32> {
        self.end(nix::sys::signal::Signal::SIGTERM).await
    }

    /// SIGKILL to the process group, as a crash would; answers once it is reaped.
    pub async fn kill(self) -> Option<i32> {
        self.end(nix::sys::signal::Signal::SIGKILL).await
    }

    async fn end(self, signal: nix::sys::signal::Signal) -> Option<i32> {
        tokio::time::timeout(WAIT, self.process.end(signal))
            .await
            .expect("exits")
    }
}

/// Alice clicks "approve" on an approval request posted in channel X.
pub fn approve(slack: &FakeSlack, request: &ski_mocks::slack::Message) {
    slack
        .click(ski_mocks::slack::Click {
            channel: CHANNEL_X.into(),
            message_ts: request.ts().into(),
            action_id: "approve_accept".into(),
            user: ALICE.into(),
        })
        .expect("click");
}

/// Starts a `check_clearance` call in a task (it blocks until the operator decides).
pub fn ask_clearance(
    client: &RunningService<RoleClient, ClientConfig>,
    args: Value,
) -> tokio::task::JoinHandle<(Value, bool)> {
    let peer: rmcp::Peer<RoleClient> = (**client).clone();
    tokio::spawn(async move { call(&peer, "check_clearance", args).await })
}

/// An rmcp client on the streamable HTTP transport.
pub async fn mcp_client(url: &str) -> RunningService<RoleClient, ClientConfig> {
    let _ = tokio_rustls::rustls::crypto::ring::default_provider().install_default();
    let transport = StreamableHttpClientTransport::from_config(
        StreamableHttpClientTransportConfig::with_uri(url.to_string()),
    );
    Box::pin(ClientConfig::default().serve(transport))
        .await
        .expect("mcp client connects")
}

/// Calls a tool; answers its JSON text and whether it was an error.
pub async fn call(client: &rmcp::Peer<RoleClient>, tool: &str, args: Value) -> (Value, bool) {
    let Value::Object(args) = args else {
        panic!("arguments must be an object")
    };
    let result = client
        .call_tool(CallToolRequestParams::new(tool.to_string()).with_arguments(args))
        .await
        .expect("tools/call");
    let result = serde_json::to_value(&result).expect("result json");
    let text = result["content"][0]["text"]
        .as_str()
        .unwrap_or("")
        .to_string();
    let is_error = result["isError"].as_bool().unwrap_or(false);
    let value = serde_json::from_str(&text).unwrap_or(Value::String(text));
    (value, is_error)
}

/// Opens the database read-only.
pub fn read_db(path: &Path) -> rusqlite::Connection {
    rusqlite::Connection::open_with_flags(path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
        .expect("open read-only")
}

/// A session row as JSON (the columns the tests look at).
pub fn session_rows(path: &Path) -> Vec<Value> {
    let db = read_db(path);
    let mut statement = db
        .prepare("SELECT id, protocol_mode, channel_id, thread_ts, status FROM session ORDER BY activity_seq")
        .expect("prepare");
    statement
        .query_map([], |row| {
            Ok(json!({
                "id": row.get::<_, String>(0)?,
                "protocol_mode": row.get::<_, String>(1)?,
                "channel_id": row.get::<_, Option<String>>(2)?,
                "thread_ts": row.get::<_, Option<String>>(3)?,
                "status": row.get::<_, String>(4)?,
            }))
        })
        .expect("query")
        .collect::<Result<_, _>>()
        .expect("rows")
}
