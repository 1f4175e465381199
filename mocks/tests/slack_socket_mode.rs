//! Socket Mode: slack-morphism's own listener receives and acks a slash command, a button click
//! and an event; a raw WebSocket client checks `hello`, redelivery, pings, `disconnect`, and the
//! notes about acks.

use crate::slack_support;

use std::sync::Arc;
use std::time::Duration;

use futures::{SinkExt, StreamExt};
use serde_json::{Value, json};
use ski_mocks::slack::{
    Click, Config, Direction, DisconnectReason, EnvelopeKind, FakeSlack, SlashCommand, UserMessage,
};
use slack_morphism::prelude::*;
use slack_support::{app_token, bot_token, morphism};
use tokio_tungstenite::tungstenite::Message as Frame;

const GENERAL: &str = "C0000000001";
const ALICE: &str = "U0000000002";
const WAIT: Duration = Duration::from_secs(10);

async fn on_command(
    event: SlackCommandEvent,
    _client: Arc<SlackHyperClient>,
    _states: SlackClientEventsUserState,
) -> UserCallbackResult<SlackCommandEventResponse> {
    Ok(SlackCommandEventResponse::new(
        SlackMessageContent::new().with_text(format!(
            "got {} {}",
            event.command,
            event.text.unwrap_or_default()
        )),
    ))
}

async fn on_interaction(
    event: SlackInteractionEvent,
    _client: Arc<SlackHyperClient>,
    _states: SlackClientEventsUserState,
) -> UserCallbackResult<()> {
    match event {
        SlackInteractionEvent::BlockActions(_) => Ok(()),
        other => Err(format!("unexpected interaction {other:?}").into()),
    }
}

async fn on_push(
    _event: SlackPushEventCallback,
    _client: Arc<SlackHyperClient>,
    _states: SlackClientEventsUserState,
) -> UserCallbackResult<()> {
    Ok(())
}

type SlackHyperClient = SlackClient<slack_support::Connector>;

#[tokio::test]
async fn slack_morphism_listener_receives_and_acks_commands_clicks_and_events() {
    let slack = FakeSlack::start(Config::default()).await.expect("start");
    let client = morphism(&slack);
    let callbacks = SlackSocketModeListenerCallbacks::new()
        .with_command_events(on_command)
        .with_interaction_events(on_interaction)
        .with_push_events(on_push);
    let environment = Arc::new(SlackClientEventsListenerEnvironment::new(client.clone()));
    let config = SlackClientSocketModeConfig::new().with_max_connections_count(1);
    let listener = SlackClientSocketModeListener::new(&config, environment, callbacks);
    listener.listen_for(&app_token()).await.expect("listen");
    listener.start().await;
    slack.wait_for_connections(1, WAIT).await.expect("hello");

    let command = slack
        .slash_command(SlashCommand {
            command: "/ski".into(),
            text: "status".into(),
            channel: GENERAL.into(),
            user: ALICE.into(),
        })
        .expect("inject");
    let ack = command.ack(WAIT).await.expect("command ack");
    assert_eq!(
        ack.payload.as_ref().map(|p| p["text"].clone()),
        Some(json!("got /ski status"))
    );
    assert_eq!(
        slack.ephemerals()[0].text(),
        "got /ski status",
        "the ack payload is the visible reply"
    );

    let token = bot_token();
    let session = client.open_session(&token);
    let blocks: Vec<SlackBlock> = serde_json::from_value(json!([
        {"type": "actions", "block_id": "approval_7", "elements": [
            {"type": "button", "action_id": "approve_accept", "text": {"type": "plain_text", "text": "Accept"}, "value": "7"}
        ]}
    ]))
    .expect("blocks");
    let posted = session
        .chat_post_message(&SlackApiChatPostMessageRequest::new(
            GENERAL.into(),
            SlackMessageContent::new()
                .with_text("approve?".into())
                .with_blocks(blocks),
        ))
        .await
        .expect("post");
    let click = slack
        .click(Click {
            channel: GENERAL.into(),
            message_ts: posted.ts.to_string(),
            action_id: "approve_accept".into(),
            user: ALICE.into(),
        })
        .expect("click");
    let ack = click.ack(WAIT).await.expect("click ack");
    assert_eq!(ack.payload, None, "block_actions accept no payload");

    let message = slack
        .user_message(UserMessage {
            channel: GENERAL.into(),
            thread_ts: Some(posted.ts.to_string()),
            text: "<@U0000000001> go on".into(),
            user: ALICE.into(),
        })
        .expect("message");
    message.ack(WAIT).await.expect("event ack");
    let mention = message
        .mention_envelope_id
        .clone()
        .expect("a mention envelope");
    slack
        .await_ack(&mention, WAIT)
        .await
        .expect("app_mention ack");
    listener.shutdown().await;

    // The click envelope carries what the app posted.
    let frame = slack
        .frames()
        .into_iter()
        .filter(|f| f.direction == Direction::Out)
        .filter_map(|f| f.json())
        .find(|f| f["envelope_id"] == json!(click.envelope_id))
        .expect("click frame");
    assert_eq!(frame["payload"]["actions"][0]["block_id"], "approval_7");
    assert_eq!(frame["payload"]["actions"][0]["value"], "7");
    assert_eq!(frame["accepts_response_payload"], false);
}

/// A raw Socket Mode client: opens a connection URL with the app token and connects.
async fn connect(
    slack: &FakeSlack,
) -> tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>> {
    let client = morphism(slack);
    let token = app_token();
    let opened = client
        .open_session(&token)
        .apps_connections_open(&SlackApiAppsConnectionOpenRequest::new())
        .await
        .expect("apps.connections.open");
    let (socket, _) = Box::pin(tokio_tungstenite::connect_async(opened.url.0.as_str()))
        .await
        .expect("connect");
    socket
}

async fn next_json<S>(socket: &mut S) -> Value
where
    S: futures::Stream<Item = Result<Frame, tokio_tungstenite::tungstenite::Error>> + Unpin,
{
    loop {
        match tokio::time::timeout(WAIT, socket.next())
            .await
            .expect("a frame in time")
        {
            Some(Ok(Frame::Text(text))) => {
                return serde_json::from_str(text.as_str()).expect("json frame");
            }
            Some(Ok(_)) => continue,
            other => panic!("socket ended: {other:?}"),
        }
    }
}

#[tokio::test]
async fn hello_redelivery_acks_and_notes_on_a_raw_socket() {
    let mut config = Config::default();
    config.socket_mode.redelivery_ms = 50;
    config.socket_mode.ping_interval_ms = 0;
    let slack = FakeSlack::start(config).await.expect("start");

    // An envelope injected before any connection waits for one.
    let early = slack
        .user_message(UserMessage {
            channel: GENERAL.into(),
            thread_ts: None,
            text: "early".into(),
            user: ALICE.into(),
        })
        .expect("message");
    let mut socket = connect(&slack).await;
    let hello = next_json(&mut socket).await;
    assert_eq!(hello["type"], "hello");
    assert_eq!(hello["num_connections"], 1);
    assert_eq!(hello["connection_info"]["app_id"], "A0000000001");
    assert_eq!(hello["debug_info"]["host"], "ski-fake-slack");

    let first = next_json(&mut socket).await;
    assert_eq!(first["envelope_id"], json!(early.envelope_id));
    assert_eq!(first["type"], "events_api");
    assert_eq!(first["retry_attempt"], 0);
    assert_eq!(first["accepts_response_payload"], false);
    assert_eq!(first["payload"]["event"]["text"], "early");
    // Not acked: Slack sends it again with retry_attempt + 1.
    let again = next_json(&mut socket).await;
    assert_eq!(again["envelope_id"], json!(early.envelope_id));
    assert_eq!(again["retry_attempt"], 1);
    assert_eq!(again["retry_reason"], "timeout");
    assert_eq!(again["payload"]["event_id"], first["payload"]["event_id"]);

    socket
        .send(Frame::text(
            json!({"envelope_id": early.envelope_id, "payload": {"x": 1}}).to_string(),
        ))
        .await
        .expect("ack");
    let ack = early.ack(WAIT).await.expect("acked");
    assert_eq!(ack.payload, Some(json!({"x": 1})));
    socket
        .send(Frame::text(
            json!({"envelope_id": early.envelope_id}).to_string(),
        ))
        .await
        .expect("again");
    socket.send(Frame::text("not json")).await.expect("garbage");
    socket
        .send(Frame::text(json!({"envelope_id": "nope"}).to_string()))
        .await
        .expect("unknown");
    // A ping round trip orders the frames above before the checks.
    socket
        .send(Frame::Ping(b"probe".to_vec().into()))
        .await
        .expect("ping");
    loop {
        match socket.next().await {
            Some(Ok(Frame::Pong(payload))) => {
                assert_eq!(payload.as_ref(), b"probe");
                break;
            }
            Some(Ok(_)) => continue,
            other => panic!("no pong: {other:?}"),
        }
    }
    let notes = slack.notes().join("\n");
    assert!(
        notes.contains(&format!(
            "envelope {} not acked within 50 ms",
            early.envelope_id
        )),
        "{notes}"
    );
    assert!(
        notes.contains(&format!(
            "ack payload for envelope {}, which accepts none",
            early.envelope_id
        )),
        "{notes}"
    );
    assert!(
        notes.contains(&format!("duplicate ack for envelope {}", early.envelope_id)),
        "{notes}"
    );
    assert!(notes.contains("a frame that is not JSON"), "{notes}");
    assert!(notes.contains("ack for unknown envelope nope"), "{notes}");

    // A second connection; `disconnect` drains both.
    let mut second = connect(&slack).await;
    assert_eq!(next_json(&mut second).await["num_connections"], 2);
    slack.disconnect(DisconnectReason::Warning);
    for socket in [&mut socket, &mut second] {
        let frame = next_json(socket).await;
        assert_eq!(frame["type"], "disconnect");
        assert_eq!(frame["reason"], "warning");
        assert_eq!(frame["debug_info"]["host"], "ski-fake-slack");
    }
    // A command sent now waits for a fresh connection.
    let command = slack
        .slash_command(SlashCommand {
            command: "/ski".into(),
            text: String::new(),
            channel: "general".into(),
            user: ALICE.into(),
        })
        .expect("command");
    let mut third = connect(&slack).await;
    assert_eq!(next_json(&mut third).await["type"], "hello");
    let envelope = next_json(&mut third).await;
    assert_eq!(envelope["envelope_id"], json!(command.envelope_id));
    assert_eq!(envelope["accepts_response_payload"], true);
    assert_eq!(envelope["payload"]["channel_name"], "general");
    assert!(
        envelope.get("retry_attempt").is_none(),
        "only events_api carries retry fields"
    );
    assert!(
        command.ack(Duration::from_millis(20)).await.is_err(),
        "no ack yet is a timeout, not a failure of the fake"
    );
}

#[tokio::test]
async fn server_pings_carry_a_payload() {
    let mut config = Config::default();
    config.socket_mode.ping_interval_ms = 20;
    let slack = FakeSlack::start(config).await.expect("start");
    let mut socket = connect(&slack).await;
    let mut payloads = Vec::new();
    while payloads.len() < 2 {
        match tokio::time::timeout(WAIT, socket.next())
            .await
            .expect("frame")
        {
            Some(Ok(Frame::Ping(payload))) => {
                payloads.push(String::from_utf8_lossy(&payload).into_owned())
            }
            Some(Ok(_)) => {}
            other => panic!("socket ended: {other:?}"),
        }
    }
    assert_eq!(payloads, ["ski-fake-slack:1", "ski-fake-slack:2"]);
}

#[tokio::test]
async fn response_urls_reply_replace_and_delete() {
    let mut config = Config::default();
    config.socket_mode.ping_interval_ms = 0;
    let slack = FakeSlack::start(config).await.expect("start");
    let mut socket = connect(&slack).await;
    assert_eq!(next_json(&mut socket).await["type"], "hello");
    let post = |url: String, body: Value| async move {
        slack_support::raw(
            "POST",
            &url,
            Some("application/json"),
            None,
            body.to_string().as_bytes(),
        )
        .await
    };

    slack
        .slash_command(SlashCommand {
            command: "/ski".into(),
            text: String::new(),
            channel: GENERAL.into(),
            user: ALICE.into(),
        })
        .expect("command");
    let envelope = next_json(&mut socket).await;
    let url = envelope["payload"]["response_url"]
        .as_str()
        .expect("response_url")
        .to_string();
    assert_eq!(
        post(url.clone(), json!({"text": "only you see this"})).await,
        (200, "ok".to_string())
    );
    assert_eq!(slack.ephemerals()[0].text(), "only you see this");
    assert_eq!(
        post(
            url.clone(),
            json!({"text": "everyone sees this", "response_type": "in_channel"})
        )
        .await
        .0,
        200
    );
    let shown = slack.messages(GENERAL, None);
    assert_eq!(
        shown.last().map(|m| m.text().to_string()).as_deref(),
        Some("everyone sees this")
    );

    let base = slack.api_base_url();
    let posted = slack_support::api(
        &format!("{base}/chat.postMessage"),
        Some("application/json"),
        Some("xoxb-1"),
        json!({"channel": GENERAL, "text": "pick", "blocks": [{"type": "section", "block_id": "b1", "text": {"type": "mrkdwn", "text": "pick"},
            "accessory": {"type": "button", "action_id": "pick_one", "text": {"type": "plain_text", "text": "One"}, "value": "1"}}]})
        .to_string()
        .as_bytes(),
    )
    .await;
    let ts = posted["ts"].as_str().expect("ts").to_string();
    slack
        .click(Click {
            channel: GENERAL.into(),
            message_ts: ts.clone(),
            action_id: "pick_one".into(),
            user: ALICE.into(),
        })
        .expect("click on an accessory");
    let envelope = next_json(&mut socket).await;
    assert_eq!(envelope["payload"]["actions"][0]["block_id"], "b1");
    let url = envelope["payload"]["response_url"]
        .as_str()
        .expect("response_url")
        .to_string();
    assert_eq!(
        post(
            url.clone(),
            json!({"text": "picked one", "replace_original": true})
        )
        .await
        .0,
        200
    );
    let replaced = slack
        .messages(GENERAL, None)
        .into_iter()
        .find(|m| m.ts() == ts)
        .expect("still there");
    assert_eq!(replaced.text(), "picked one");
    assert_eq!(
        post(url.clone(), json!({"delete_original": true})).await.0,
        200
    );
    assert!(slack.messages(GENERAL, None).iter().all(|m| m.ts() != ts));

    let unknown = format!("{}/response/R404", base.trim_end_matches("/api"));
    assert_eq!(post(unknown, json!({"text": "x"})).await.0, 404);
    let malformed =
        slack_support::raw("POST", &url, Some("application/json"), None, b"{not json").await;
    assert_eq!(malformed, (400, "invalid_payload".to_string()));
}

#[tokio::test]
async fn raw_envelopes_arrive_unchanged_whatever_their_payload() {
    let slack = FakeSlack::start(Config::default()).await.expect("start");
    let mut socket = connect(&slack).await;
    assert_eq!(next_json(&mut socket).await["type"], "hello");
    let hostile = json!({"type": "view_submission", "user": 5, "view": [[["deep"]]]});
    let injected = slack.raw_envelope(EnvelopeKind::Interactive, hostile.clone());
    let frame = next_json(&mut socket).await;
    assert_eq!(frame["envelope_id"], json!(injected.envelope_id));
    assert_eq!(frame["type"], "interactive");
    assert_eq!(frame["accepts_response_payload"], true);
    assert_eq!(frame["payload"], hostile);
    slack.raw_envelope(EnvelopeKind::SlashCommands, json!("text"));
    assert_eq!(next_json(&mut socket).await["payload"], "text");
}
