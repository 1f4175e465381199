//! TLS mode: slack-morphism with its default, https-only connector, which trusts the platform's
//! roots and so the fake's CA through `SSL_CERT_FILE`, posts, threads, updates and uploads over
//! HTTPS, and its Socket Mode listener receives and acks a slash command and a button click over
//! WSS.
//!
//! The same port serves a plain WebSocket client (slack_sdk's built-in client speaks plain
//! HTTP on any port but 443).
//!
//! The client runs in a process of its own, this test binary started again (filtered to the judge's
//! test, which then plays the client) with `SSL_CERT_FILE` in its environment from the start (the variable is read when the connector is made, and a
//! running test may not change its own environment). The test side runs the fake, judges what it
//! recorded, injects the Socket Mode envelopes and requires the client to exit 0.

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use ski::transport::child::{ChildSpec, spawn};
use ski_mocks::slack::{Click, Config, FakeSlack, SlashCommand};
use slack_morphism::prelude::*;
use tokio::io::AsyncBufReadExt;

const GENERAL: &str = "C0000000001";
const ALICE: &str = "U0000000002";
const WAIT: Duration = Duration::from_secs(10);
/// Set in the client process's environment to the fake's API base URL.
const CLIENT_ROLE: &str = "SKI_FAKE_SLACK_TLS_CLIENT_API";

/// The judge's test: in the client process (this test binary started again with [`CLIENT_ROLE`]
/// set and this test's exact name as its filter) it is the client instead, and exits with its code.
#[test]
fn slack_morphism_default_connector_works_over_https_and_wss() {
    if let Ok(api_base_url) = std::env::var(CLIENT_ROLE) {
        std::process::exit(client::run(&api_base_url));
    }
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime")
        .block_on(judge());
}

#[test]
fn the_wss_port_serves_a_plain_websocket_client_too() {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime")
        .block_on(plain_websocket_on_the_wss_port());
}

/// slack_sdk's built-in Socket Mode client uses TLS only on port 443, whatever the scheme, so on
/// the fake's `wss://` port it sends a plain HTTP upgrade: it gets `hello`, and its ack counts.
async fn plain_websocket_on_the_wss_port() {
    use futures::{SinkExt, StreamExt};
    use tokio_tungstenite::tungstenite::Message as Frame;

    let slack = FakeSlack::start_tls(Config::default(), None)
        .await
        .expect("start");
    let url = slack.socket_mode_url().replacen("wss://", "ws://", 1) + "?ticket=plain";
    let (mut socket, _) = tokio_tungstenite::connect_async(url.as_str())
        .await
        .expect("a plain WebSocket on the wss port");
    let hello = match socket.next().await {
        Some(Ok(Frame::Text(text))) => {
            serde_json::from_str::<serde_json::Value>(text.as_str()).expect("hello is JSON")
        }
        other => panic!("expected hello, got {other:?}"),
    };
    assert_eq!(hello["type"], "hello");
    let command = slack
        .slash_command(SlashCommand {
            command: "/ski".into(),
            text: "plain".into(),
            channel: GENERAL.into(),
            user: ALICE.into(),
        })
        .expect("inject");
    let envelope = loop {
        match socket.next().await {
            Some(Ok(Frame::Text(text))) => break text,
            Some(Ok(_)) => continue,
            other => panic!("expected the envelope, got {other:?}"),
        }
    };
    assert!(
        envelope.as_str().contains(&command.envelope_id),
        "{envelope}"
    );
    let ack = json!({ "envelope_id": command.envelope_id }).to_string();
    socket.send(Frame::text(ack)).await.expect("ack");
    command.ack(WAIT).await.expect("the ack over plain ws");
}

async fn judge() {
    let slack = FakeSlack::start_tls(Config::default(), None)
        .await
        .expect("start");
    assert!(slack.api_base_url().starts_with("https://127.0.0.1:"));
    assert!(slack.socket_mode_url().starts_with("wss://127.0.0.1:"));
    let dir = tempfile::tempdir().expect("tempdir");
    let ca_file = dir.path().join("ca.pem");
    std::fs::write(&ca_file, slack.ca_pem().expect("a CA in TLS mode")).expect("write CA");
    let program = std::env::current_exe().expect("this test binary");
    // This test alone, in one thread, its output not captured, in the terse format (which prints
    // no test name before the client's first line): the client's lines reach us.
    let this_test = concat!(
        module_path!(),
        "::slack_morphism_default_connector_works_over_https_and_wss"
    );
    let this_test = this_test
        .split_once("::")
        .map_or(this_test, |(_, path)| path);
    let mut client = spawn(
        ChildSpec::new("slack-morphism client", program)
            .args([
                "--exact",
                this_test,
                "--nocapture",
                "--quiet",
                "--test-threads",
                "1",
            ])
            .env(CLIENT_ROLE, slack.api_base_url())
            .env("SSL_CERT_FILE", &ca_file)
            .grace(Duration::from_secs(2)),
    )
    .expect("spawn the client");
    // The test harness's own header ("running 1 test" and blank lines) comes before the client's.
    let mut next = async || loop {
        match client.next_output_line().await {
            Some((_, line)) if line.is_empty() || line.starts_with("running ") => continue,
            Some((_, line)) => break line,
            None => panic!("the client ended early: {:?}", client.wait().await),
        }
    };

    let line = next().await;
    let posted_ts = line
        .strip_prefix("posted ")
        .unwrap_or_else(|| panic!("expected the posted ts, got {line:?}"))
        .to_owned();
    let thread = slack.messages(GENERAL, Some(&posted_ts));
    assert_eq!(thread.len(), 3, "parent, reply and file share: {thread:?}");
    assert_eq!(thread[0].text(), "approve now?");
    assert_eq!(thread[2].message["files"][0]["size"], 11);
    assert_eq!(next().await, "listening");
    slack
        .wait_for_connections(1, WAIT)
        .await
        .expect("hello over wss");

    let command = slack
        .slash_command(SlashCommand {
            command: "/ski".into(),
            text: "status".into(),
            channel: GENERAL.into(),
            user: ALICE.into(),
        })
        .expect("inject");
    let ack = command.ack(WAIT).await.expect("command ack over wss");
    assert_eq!(
        ack.payload.as_ref().map(|p| p["text"].clone()),
        Some(json!("secure status"))
    );
    let click = slack
        .click(Click {
            channel: GENERAL.into(),
            message_ts: posted_ts,
            action_id: "approve_accept".into(),
            user: ALICE.into(),
        })
        .expect("click");
    click.ack(WAIT).await.expect("click ack over wss");

    client.close_stdin();
    let status = client.wait().await.expect("client exit");
    assert!(status.success(), "the client failed: {status:?}");
    let methods: Vec<String> = slack.requests().iter().map(|r| r.method.clone()).collect();
    assert_eq!(
        methods,
        [
            "auth.test",
            "chat.postMessage",
            "chat.postMessage",
            "chat.update",
            "files.getUploadURLExternal",
            "upload",
            "files.completeUploadExternal",
            "apps.connections.open",
        ]
    );
}

/// The client process: slack-morphism exactly as an application configures it, with its default
/// connector and only the documented base-URL option changed.
mod client {
    use super::*;

    type DefaultClient = SlackClient<SlackClientHyperHttpsConnector>;

    /// Runs the Web API part, prints `posted <ts>`, starts the Socket Mode listener, prints
    /// `listening`, and stops when stdin closes. Answers the exit code.
    pub fn run(api_base_url: &str) -> i32 {
        // rustls's ring as the process default, as an application does whose build has two
        // providers (the workspace's test build also has aws-lc-rs, from the official ACP SDK's
        // HTTP client): the default connector takes the process default.
        let _ = tokio_rustls::rustls::crypto::ring::default_provider().install_default();
        let runtime = match tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
        {
            Ok(runtime) => runtime,
            Err(error) => {
                eprintln!("client: no runtime: {error}");
                return 1;
            }
        };
        match runtime.block_on(scenario(api_base_url)) {
            Ok(()) => 0,
            Err(error) => {
                eprintln!("client: {error}");
                1
            }
        }
    }

    async fn scenario(api_base_url: &str) -> Result<(), Box<dyn std::error::Error>> {
        let connector = SlackClientHyperConnector::new()?.with_slack_api_url(api_base_url);
        let client = Arc::new(SlackClient::new(connector));
        let token = SlackApiToken::new("xoxb-fake-bot".into());
        let session = client.open_session(&token);

        let auth = session.auth_test().await?;
        if auth.team_id.to_string() != "T0000000001" {
            return Err(format!("unexpected team {}", auth.team_id).into());
        }
        let blocks: Vec<SlackBlock> = serde_json::from_value(json!([
            {"type": "actions", "block_id": "approval_1", "elements": [
                {"type": "button", "action_id": "approve_accept", "text": {"type": "plain_text", "text": "Accept"}, "value": "1"}
            ]}
        ]))?;
        let posted = session
            .chat_post_message(&SlackApiChatPostMessageRequest::new(
                GENERAL.into(),
                SlackMessageContent::new()
                    .with_text("approve?".into())
                    .with_blocks(blocks),
            ))
            .await?;
        session
            .chat_post_message(
                &SlackApiChatPostMessageRequest::new(
                    GENERAL.into(),
                    SlackMessageContent::new().with_text("in thread".into()),
                )
                .with_thread_ts(posted.ts.clone()),
            )
            .await?;
        session
            .chat_update(&SlackApiChatUpdateRequest::new(
                GENERAL.into(),
                SlackMessageContent::new().with_text("approve now?".into()),
                posted.ts.clone(),
            ))
            .await?;
        let bytes = b"secure file".to_vec();
        let url = session
            .get_upload_url_external(&SlackApiFilesGetUploadUrlExternalRequest::new(
                "notes.txt".into(),
                bytes.len(),
            ))
            .await?;
        if url.upload_url.0.scheme() != "https" {
            return Err(format!("upload URL not on https: {}", url.upload_url.0).into());
        }
        session
            .files_upload_via_url(&SlackApiFilesUploadViaUrlRequest::new(
                url.upload_url.clone(),
                bytes,
                "text/plain".into(),
            ))
            .await?;
        session
            .files_complete_upload_external(
                &SlackApiFilesCompleteUploadExternalRequest::new(vec![SlackApiFilesComplete::new(
                    url.file_id.clone(),
                )])
                .with_channel_id(GENERAL.into())
                .with_thread_ts(posted.ts.clone()),
            )
            .await?;
        println!("posted {}", posted.ts);

        let callbacks = SlackSocketModeListenerCallbacks::new()
            .with_command_events(on_command)
            .with_interaction_events(on_interaction);
        let environment = Arc::new(SlackClientEventsListenerEnvironment::new(client.clone()));
        let config = SlackClientSocketModeConfig::new().with_max_connections_count(1);
        let listener = SlackClientSocketModeListener::new(&config, environment, callbacks);
        listener
            .listen_for(&SlackApiToken::new("xapp-fake-app".into()))
            .await?;
        listener.start().await;
        println!("listening");
        // The judge closes stdin when it has seen both acks.
        let mut stdin = tokio::io::BufReader::new(tokio::io::stdin());
        let mut line = String::new();
        while stdin.read_line(&mut line).await? > 0 {
            line.clear();
        }
        listener.shutdown().await;
        Ok(())
    }

    async fn on_command(
        event: SlackCommandEvent,
        _client: Arc<DefaultClient>,
        _states: SlackClientEventsUserState,
    ) -> UserCallbackResult<SlackCommandEventResponse> {
        Ok(SlackCommandEventResponse::new(
            SlackMessageContent::new()
                .with_text(format!("secure {}", event.text.unwrap_or_default())),
        ))
    }

    async fn on_interaction(
        event: SlackInteractionEvent,
        _client: Arc<DefaultClient>,
        _states: SlackClientEventsUserState,
    ) -> UserCallbackResult<()> {
        match event {
            SlackInteractionEvent::BlockActions(_) => Ok(()),
            other => Err(format!("unexpected interaction {other:?}").into()),
        }
    }
}
