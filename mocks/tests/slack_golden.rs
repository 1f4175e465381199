//! `golden/slack/snapshots/`: one Web API response per method and one Socket Mode frame per
//! kind, as the fake emits them, pinned with insta and decoded by slack-morphism's model types.
//!
//! After an intended change: `cargo insta review` (CI never writes snapshots).

use crate::slack_support;

use std::time::Duration;

use futures::StreamExt;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use ski_mocks::slack::{Click, Config, DisconnectReason, FakeSlack, SlashCommand, UserMessage};
use slack_morphism::prelude::*;
use slack_support::{api, raw};
use tokio_tungstenite::tungstenite::Message as Frame;

const GENERAL: &str = "C0000000001";
const ALICE: &str = "U0000000002";

/// Ports differ per run: the fixture says `PORT`.
const SNAPSHOTS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../golden/slack/snapshots");

fn stable(value: &Value) -> Value {
    let ports = regex::Regex::new(r"127\.0\.0\.1:\d+").expect("regex");
    serde_json::from_str(&ports.replace_all(&value.to_string(), "127.0.0.1:PORT")).expect("json")
}

/// Pins `value` as `golden/slack/snapshots/<name>.snap` and decodes it as `T`.
fn pin<T: DeserializeOwned>(name: &str, value: &Value) {
    pin_part::<T>(name, value, |value| value.clone());
}

/// Pins a Socket Mode frame and decodes its `payload` as `T` (slack-morphism does not export its
/// envelope type; its listener decoding the envelopes is proven in `slack_socket_mode.rs`).
fn pin_envelope<T: DeserializeOwned>(name: &str, frame: &Value) {
    assert!(
        frame["envelope_id"].is_string() && frame["accepts_response_payload"].is_boolean(),
        "{frame}"
    );
    pin_part::<T>(name, frame, |frame| frame["payload"].clone());
}

fn pin_part<T: DeserializeOwned>(name: &str, value: &Value, part: impl Fn(&Value) -> Value) {
    if let Err(error) = serde_json::from_value::<T>(part(value)) {
        panic!(
            "{name} does not decode as {}: {error}\n{value:#}",
            std::any::type_name::<T>()
        );
    }
    let value = stable(value);
    insta::with_settings!({ snapshot_path => SNAPSHOTS, prepend_module_to_snapshot => false, omit_expression => true }, {
        insta::assert_json_snapshot!(name, value);
    });
}

struct Caller {
    base: String,
}

impl Caller {
    async fn call(&self, method: &str, body: Value) -> Value {
        let url = format!("{}/{method}", self.base);
        let answer = api(
            &url,
            Some("application/json"),
            Some("xoxb-golden"),
            body.to_string().as_bytes(),
        )
        .await;
        assert_eq!(answer["ok"], true, "{method}: {answer}");
        answer
    }
}

async fn next_json<S>(socket: &mut S) -> Value
where
    S: futures::Stream<Item = Result<Frame, tokio_tungstenite::tungstenite::Error>> + Unpin,
{
    loop {
        match tokio::time::timeout(Duration::from_secs(10), socket.next())
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
async fn golden_slack_fixtures() {
    let mut config = Config::default();
    config.socket_mode.ping_interval_ms = 0;
    config.clock_start = Some(1_700_000_000);
    let slack = FakeSlack::start(config).await.expect("start");
    let caller = Caller {
        base: slack.api_base_url(),
    };
    let url = format!("{}/apps.connections.open", slack.api_base_url());
    let opened = api(&url, None, Some("xapp-golden"), b"").await;
    pin::<SlackApiAppsConnectionOpenResponse>("apps.connections.open", &opened);
    let (mut socket, _) = Box::pin(tokio_tungstenite::connect_async(
        opened["url"].as_str().expect("url"),
    ))
    .await
    .expect("connect");
    pin::<Value>("socket_hello", &next_json(&mut socket).await);

    pin::<SlackApiAuthTestResponse>("auth.test", &caller.call("auth.test", json!({})).await);
    let posted = caller
        .call(
            "chat.postMessage",
            json!({"channel": GENERAL, "text": "approve?", "blocks": [
                {"type": "actions", "block_id": "approval_1", "elements": [
                    {"type": "button", "action_id": "approve_accept", "text": {"type": "plain_text", "text": "Accept"}, "value": "1", "style": "primary"}
                ]}
            ]}),
        )
        .await;
    pin::<SlackApiChatPostMessageResponse>("chat.postMessage", &posted);
    let ts = posted["ts"].as_str().expect("ts").to_string();
    let reply = caller
        .call(
            "chat.postMessage",
            json!({"channel": GENERAL, "text": "reply", "thread_ts": ts}),
        )
        .await;
    pin::<SlackApiChatPostMessageResponse>("chat.postMessage_thread", &reply);
    pin::<SlackApiChatUpdateResponse>(
        "chat.update",
        &caller
            .call(
                "chat.update",
                json!({"channel": GENERAL, "ts": ts, "text": "approve? (edited)"}),
            )
            .await,
    );
    pin::<SlackApiChatPostEphemeralResponse>(
        "chat.postEphemeral",
        &caller
            .call(
                "chat.postEphemeral",
                json!({"channel": GENERAL, "user": ALICE, "text": "only you"}),
            )
            .await,
    );
    pin::<SlackApiChatGetPermalinkResponse>(
        "chat.getPermalink",
        &caller
            .call(
                "chat.getPermalink",
                json!({"channel": GENERAL, "message_ts": ts}),
            )
            .await,
    );
    pin::<Value>(
        "reactions.add",
        &caller
            .call(
                "reactions.add",
                json!({"channel": GENERAL, "timestamp": ts, "name": "eyes"}),
            )
            .await,
    );
    pin::<SlackApiConversationsInfoResponse>(
        "conversations.info",
        &caller
            .call("conversations.info", json!({"channel": GENERAL}))
            .await,
    );
    pin::<SlackApiConversationsHistoryResponse>(
        "conversations.history",
        &caller
            .call("conversations.history", json!({"channel": GENERAL}))
            .await,
    );
    pin::<SlackApiConversationsRepliesResponse>(
        "conversations.replies",
        &caller
            .call(
                "conversations.replies",
                json!({"channel": GENERAL, "ts": ts}),
            )
            .await,
    );
    pin::<SlackApiConversationsListResponse>(
        "conversations.list",
        &caller.call("conversations.list", json!({})).await,
    );
    pin::<SlackApiConversationsMembersResponse>(
        "conversations.members",
        &caller
            .call("conversations.members", json!({"channel": GENERAL}))
            .await,
    );
    pin::<SlackApiUsersInfoResponse>(
        "users.info",
        &caller.call("users.info", json!({"user": ALICE})).await,
    );
    pin::<SlackApiUsersListResponse>("users.list", &caller.call("users.list", json!({})).await);
    let upload = caller
        .call(
            "files.getUploadURLExternal",
            json!({"filename": "notes.txt", "length": 5}),
        )
        .await;
    pin::<SlackApiFilesGetUploadUrlExternalResponse>("files.getUploadURLExternal", &upload);
    let (status, text) = raw(
        "POST",
        upload["upload_url"].as_str().expect("upload url"),
        Some("application/octet-stream"),
        None,
        b"hello",
    )
    .await;
    assert_eq!((status, text.as_str()), (200, "OK - 5"));
    let files = json!([{"id": upload["file_id"], "title": "Notes"}]);
    pin::<SlackApiFilesCompleteUploadExternalResponse>(
        "files.completeUploadExternal",
        &caller
            .call(
                "files.completeUploadExternal",
                json!({"files": files, "channel_id": GENERAL, "thread_ts": ts}),
            )
            .await,
    );

    let command = slack
        .slash_command(SlashCommand {
            command: "/ski".into(),
            text: "status".into(),
            channel: GENERAL.into(),
            user: ALICE.into(),
        })
        .expect("command");
    let frame = next_json(&mut socket).await;
    pin_envelope::<SlackCommandEvent>("envelope_slash_commands", &frame);
    let trigger = frame["payload"]["trigger_id"]
        .as_str()
        .expect("trigger")
        .to_string();
    let view = json!({"type": "modal", "callback_id": "refine", "title": {"type": "plain_text", "text": "Refine"},
        "submit": {"type": "plain_text", "text": "Send"},
        "blocks": [{"type": "input", "block_id": "instruction_block", "label": {"type": "plain_text", "text": "Instruction"},
            "element": {"type": "plain_text_input", "action_id": "instruction_text"}}]});
    let opened_view = caller
        .call("views.open", json!({"trigger_id": trigger, "view": view}))
        .await;
    pin::<SlackApiViewsOpenResponse>("views.open", &opened_view);
    let view_id = opened_view["view"]["id"]
        .as_str()
        .expect("view id")
        .to_string();
    pin::<SlackApiViewsUpdateResponse>(
        "views.update",
        &caller
            .call("views.update", json!({"view_id": view_id, "view": view}))
            .await,
    );
    drop(command);

    let click = slack
        .click(Click {
            channel: GENERAL.into(),
            message_ts: ts.clone(),
            action_id: "approve_accept".into(),
            user: ALICE.into(),
        })
        .expect("click");
    let frame = next_json(&mut socket).await;
    assert_eq!(frame["envelope_id"], json!(click.envelope_id));
    pin_envelope::<SlackInteractionEvent>("envelope_interactive_block_actions", &frame);
    let trigger = frame["payload"]["trigger_id"]
        .as_str()
        .expect("trigger")
        .to_string();
    pin::<SlackApiViewsPushResponse>(
        "views.push",
        &caller
            .call("views.push", json!({"trigger_id": trigger, "view": view}))
            .await,
    );

    slack
        .submit_view(
            &view_id,
            json!({"instruction_block": {"instruction_text": "use tabs"}}),
            ALICE,
        )
        .expect("submit");
    pin_envelope::<SlackInteractionEvent>(
        "envelope_interactive_view_submission",
        &next_json(&mut socket).await,
    );
    slack.close_view(&view_id, ALICE).expect("close");
    pin_envelope::<SlackInteractionEvent>(
        "envelope_interactive_view_closed",
        &next_json(&mut socket).await,
    );
    slack
        .user_message(UserMessage {
            channel: GENERAL.into(),
            thread_ts: Some(ts.clone()),
            text: "<@U0000000001> go on".into(),
            user: ALICE.into(),
        })
        .expect("message");
    pin_envelope::<SlackPushEventCallback>(
        "envelope_events_api_message",
        &next_json(&mut socket).await,
    );
    pin_envelope::<SlackPushEventCallback>(
        "envelope_events_api_app_mention",
        &next_json(&mut socket).await,
    );
    slack
        .user_reaction(ALICE, GENERAL, &ts, "thumbsup")
        .expect("reaction");
    pin_envelope::<SlackPushEventCallback>(
        "envelope_events_api_reaction_added",
        &next_json(&mut socket).await,
    );
    slack.disconnect(DisconnectReason::RefreshRequested);
    pin::<Value>("socket_disconnect", &next_json(&mut socket).await);

    pin::<SlackApiChatDeleteResponse>(
        "chat.delete",
        &caller
            .call("chat.delete", json!({"channel": GENERAL, "ts": ts}))
            .await,
    );
    let error = api(
        &format!("{}/chat.postMessage", slack.api_base_url()),
        Some("application/json"),
        Some("xoxb-golden"),
        br#"{"channel":"C404","text":"x"}"#,
    )
    .await;
    pin::<Value>("error_channel_not_found", &error);
}
