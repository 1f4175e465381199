//! `ski-mock-agent --listen`: the scripted agent on ACP's remote `/acp` endpoint (ski's own
//! server), a scripted turn driven by `ski acp client connect --transport http` in each profile,
//! the sessions the scripted agent names known to the endpoint, and SIGTERM ending it with 143.

use crate::agent_support;

use std::path::{Path, PathBuf};
use std::time::Duration;

use agent_support::{Agent, PATIENCE, Start, binary};
use nix::sys::signal::Signal;
use ski::transport::child::{ChildSpec, OutputStream, spawn};

/// `ski`, built beside the mock agent.
fn ski() -> PathBuf {
    let path = Path::new(binary()).with_file_name("ski");
    assert!(
        path.is_file(),
        "{} is missing: run `cargo build -p ski --bin ski`",
        path.display()
    );
    path
}

/// A script whose prompt `weather` is answered by a scripted chunk and stop reason.
const SCRIPT: &str = r#"
[[on]]
prompt = "weather"
do = [
  { update = { sessionUpdate = "agent_message_chunk", content = { type = "text", text = "scripted sunshine" } } },
  { respond = { stopReason = "max_tokens" } },
]
"#;

/// The mock agent with `--listen 127.0.0.1:0`, and the URL it prints.
async fn listening(script: &str) -> (Agent, String) {
    let mut agent = Agent::start(
        Start::args(&["--script", "{dir}/script.toml", "--listen", "127.0.0.1:0"])
            .file("script.toml", script),
    );
    let text = agent
        .stderr_until(|text| text.contains("listening on"))
        .await;
    let url = text
        .lines()
        .find_map(|line| line.strip_prefix("listening on "))
        .expect("the endpoint's URL")
        .trim()
        .to_owned();
    (agent, url)
}

/// `ski acp client connect` over `/acp` in `profile` with these prompts: its stdout.
async fn client(url: &str, profile: &str, prompts: &[&str]) -> String {
    let mut spec = ChildSpec::new("client", ski())
        .args(["acp", "client", "connect", "--transport", "http"])
        .args(["--endpoint", url, "--profile", profile])
        .grace(Duration::from_millis(500));
    for prompt in prompts {
        spec = spec.args(["--prompt", prompt]);
    }
    let mut child = spawn(spec).expect("ski acp client starts");
    child.close_stdin();
    let mut out = String::new();
    let mut err = String::new();
    let read = async {
        while let Some((stream, line)) = child.next_output_line().await {
            match stream {
                OutputStream::Stdout => {
                    out.push_str(&line);
                    out.push('\n');
                }
                OutputStream::Stderr => err.push_str(&line),
            }
        }
    };
    tokio::time::timeout(PATIENCE, read)
        .await
        .expect("the client ends");
    let status = child.wait().await.expect("an exit status");
    assert_eq!(status.code(), Some(0), "{profile}: {out}\n{err}");
    out
}

#[tokio::test]
async fn a_scripted_turn_over_each_profile_of_the_acp_endpoint() {
    let (agent, url) = listening(SCRIPT).await;
    assert!(
        url.starts_with("http://127.0.0.1:") && url.ends_with("/acp"),
        "{url}"
    );
    for profile in ["http", "ws"] {
        let out = client(&url, profile, &["weather", "echo me"]).await;
        // The scripted rule, then the standard personality's echo, on one connection.
        assert_eq!(
            out, "scripted sunshine\nstopReason: max_tokens\necho me\nstopReason: end_turn\n",
            "{profile}"
        );
    }
    agent.child.signal_group(Signal::SIGTERM).expect("SIGTERM");
    let status = tokio::time::timeout(PATIENCE, agent.child.wait())
        .await
        .expect("the agent ends on SIGTERM")
        .expect("an exit status");
    assert_eq!(status.code(), Some(143));
}

#[tokio::test]
async fn listen_refuses_a_transcript_which_belongs_to_one_client() {
    let agent = Agent::spawn(&["--listen", "127.0.0.1:0", "--transcript", "{dir}/t.ndjson"]);
    assert_eq!(agent.code().await, 2);
}
