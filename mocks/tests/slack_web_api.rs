//! The fake's Web API driven by the real slack-morphism client (and, for the request shapes other
//! clients send, by a plain HTTP client): state, Slack's field names, Slack's errors, faults.

use crate::slack_support;

use std::time::Duration;

use serde_json::{Value, json};
use ski_mocks::slack::{Config, FakeSlack, Fault, TokenKind};
use slack_morphism::errors::SlackClientError;
use slack_morphism::prelude::*;
use slack_support::{api, bot_token, morphism, raw};

const GENERAL: &str = "C0000000001";

/// A workspace whose `ts` values are the same in every run.
fn fixed_clock() -> Config {
    Config {
        clock_start: Some(1_700_000_000),
        ..Config::default()
    }
}

fn blocks(value: Value) -> Vec<SlackBlock> {
    serde_json::from_value(value).expect("blocks")
}

#[tokio::test]
async fn slack_morphism_posts_threads_updates_and_uploads() {
    let slack = FakeSlack::start(fixed_clock()).await.expect("start");
    let client = morphism(&slack);
    let token = bot_token();
    let session = client.open_session(&token);

    let auth = session.auth_test().await.expect("auth.test");
    assert_eq!(auth.user_id.to_string(), "U0000000001");
    assert_eq!(auth.team_id.to_string(), "T0000000001");
    assert_eq!(
        auth.bot_id.map(|id| id.to_string()).as_deref(),
        Some("B0000000001")
    );

    let content = SlackMessageContent::new().with_text("approve?".into()).with_blocks(blocks(json!([
        {"type": "section", "block_id": "question", "text": {"type": "mrkdwn", "text": "approve?"}},
        {"type": "actions", "block_id": "approval_1", "elements": [
            {"type": "button", "action_id": "approve_accept", "text": {"type": "plain_text", "text": "Accept"}, "value": "1"}
        ]}
    ])));
    let posted = session
        .chat_post_message(&SlackApiChatPostMessageRequest::new(
            GENERAL.into(),
            content,
        ))
        .await
        .expect("chat.postMessage");
    let parent = posted.ts.clone();
    assert_eq!(parent.to_string(), "1700000001.000001");

    let reply = session
        .chat_post_message(
            &SlackApiChatPostMessageRequest::new(
                GENERAL.into(),
                SlackMessageContent::new().with_text("in thread".into()),
            )
            .with_thread_ts(parent.clone()),
        )
        .await
        .expect("reply");
    let updated = session
        .chat_update(&SlackApiChatUpdateRequest::new(
            GENERAL.into(),
            SlackMessageContent::new().with_text("approved".into()),
            parent.clone(),
        ))
        .await
        .expect("chat.update");
    assert_eq!(updated.ts, parent);

    let history = session
        .conversations_history(
            &SlackApiConversationsHistoryRequest::new().with_channel(GENERAL.into()),
        )
        .await
        .expect("history");
    assert_eq!(
        history.messages.len(),
        1,
        "a thread reply is not in the history"
    );
    assert_eq!(
        history.messages[0].content.text.as_deref(),
        Some("approved")
    );
    let replies = session
        .conversations_replies(&SlackApiConversationsRepliesRequest::new(
            GENERAL.into(),
            parent.clone(),
        ))
        .await
        .expect("replies");
    let texts: Vec<_> = replies
        .messages
        .iter()
        .map(|m| m.content.text.clone().unwrap_or_default())
        .collect();
    assert_eq!(texts, ["approved", "in thread"]);

    let bytes = b"hello file".to_vec();
    let url = session
        .get_upload_url_external(&SlackApiFilesGetUploadUrlExternalRequest::new(
            "notes.txt".into(),
            bytes.len(),
        ))
        .await
        .expect("files.getUploadURLExternal");
    session
        .files_upload_via_url(&SlackApiFilesUploadViaUrlRequest::new(
            url.upload_url.clone(),
            bytes,
            "text/plain".into(),
        ))
        .await
        .expect("upload");
    let done = session
        .files_complete_upload_external(
            &SlackApiFilesCompleteUploadExternalRequest::new(vec![
                SlackApiFilesComplete::new(url.file_id.clone()).with_title("Notes".into()),
            ])
            .with_channel_id(GENERAL.into())
            .with_thread_ts(parent.clone()),
        )
        .await
        .expect("files.completeUploadExternal");
    assert_eq!(done.files[0].id, url.file_id);
    assert_eq!(done.files[0].title.as_deref(), Some("Notes"));

    let info = session
        .conversations_info(&SlackApiConversationsInfoRequest::new(GENERAL.into()))
        .await
        .expect("conversations.info");
    assert_eq!(info.channel.name.as_deref(), Some("general"));
    let user = session
        .users_info(&SlackApiUsersInfoRequest::new("U0000000002".into()))
        .await
        .expect("users.info");
    assert_eq!(user.user.name.as_deref(), Some("alice"));

    // The fake's own record agrees.
    let thread = slack.messages(GENERAL, Some(parent.as_ref()));
    assert_eq!(thread.len(), 3, "parent, reply and file share");
    assert_eq!(thread[1].ts(), reply.ts.to_string());
    assert_eq!(thread[2].message["files"][0]["size"], 10);
    assert_eq!(thread[0].message["reply_count"], 2);
    assert!(thread[0].message["edited"].is_object());
    let methods: Vec<String> = slack.requests().iter().map(|r| r.method.clone()).collect();
    assert_eq!(
        methods,
        [
            "auth.test",
            "chat.postMessage",
            "chat.postMessage",
            "chat.update",
            "conversations.history",
            "conversations.replies",
            "files.getUploadURLExternal",
            "upload",
            "files.completeUploadExternal",
            "conversations.info",
            "users.info",
        ]
    );
    assert!(
        slack
            .requests()
            .iter()
            .filter(|r| r.method != "upload")
            .all(|r| r.token_kind == TokenKind::Bot)
    );
}

#[tokio::test]
async fn slack_morphism_sees_slack_errors_and_faults_as_its_typed_errors() {
    let slack = FakeSlack::start(Config::default()).await.expect("start");
    let session_client = morphism(&slack);
    let token = bot_token();
    let session = session_client.open_session(&token);
    let post = |channel: &str, text: String| {
        SlackApiChatPostMessageRequest::new(
            channel.into(),
            SlackMessageContent::new().with_text(text),
        )
    };
    let code = |error: SlackClientError| match error {
        SlackClientError::ApiError(api) => api.code,
        other => panic!("not an api error: {other:?}"),
    };

    let error = session
        .chat_post_message(&post("C404", "x".into()))
        .await
        .expect_err("unknown channel");
    assert_eq!(code(error), "channel_not_found");
    let error = session
        .chat_post_message(&post(GENERAL, "x".repeat(40_001)))
        .await
        .expect_err("too long");
    assert_eq!(code(error), "msg_too_long");
    session
        .chat_post_message(&post(GENERAL, "x".repeat(40_000)))
        .await
        .expect("at the limit");
    let many: Vec<Value> = (0..51)
        .map(|i| json!({"type": "divider", "block_id": format!("d{i}")}))
        .collect();
    let error = session
        .chat_post_message(&SlackApiChatPostMessageRequest::new(
            GENERAL.into(),
            SlackMessageContent::new().with_blocks(blocks(json!(many))),
        ))
        .await
        .expect_err("51 blocks");
    assert_eq!(code(error), "invalid_blocks");
    let error = session
        .chat_update(&SlackApiChatUpdateRequest::new(
            GENERAL.into(),
            SlackMessageContent::new().with_text("x".into()),
            "1.0".into(),
        ))
        .await
        .expect_err("unknown message");
    assert_eq!(code(error), "message_not_found");

    slack.fail_next(
        "chat.postMessage",
        1,
        Fault::RateLimited {
            retry_after: Some(7),
        },
    );
    match session
        .chat_post_message(&post(GENERAL, "limited".into()))
        .await
    {
        Err(SlackClientError::RateLimitError(limit)) => {
            assert_eq!(limit.retry_after, Some(Duration::from_secs(7)))
        }
        other => panic!("expected a rate-limit error, got {other:?}"),
    }
    slack.fail_next("chat.postMessage", 1, Fault::Status { status: 500 });
    match session
        .chat_post_message(&post(GENERAL, "broken".into()))
        .await
    {
        Err(SlackClientError::HttpError(http)) => assert_eq!(http.status_code.as_u16(), 500),
        other => panic!("expected an http error, got {other:?}"),
    }
    slack.fail_next(
        "chat.postMessage",
        1,
        Fault::Error {
            error: "is_archived".into(),
        },
    );
    let error = session
        .chat_post_message(&post(GENERAL, "archived".into()))
        .await
        .expect_err("fault");
    assert_eq!(code(error), "is_archived");
    // Faults are used up: the next call succeeds.
    session
        .chat_post_message(&post(GENERAL, "fine".into()))
        .await
        .expect("after the faults");

    let app_token = slack_support::app_token();
    let app = session_client.open_session(&app_token);
    let error = app
        .chat_post_message(&post(GENERAL, "x".into()))
        .await
        .expect_err("app token");
    assert_eq!(code(error), "not_allowed_token_type");
    let error = session
        .apps_connections_open(&SlackApiAppsConnectionOpenRequest::new())
        .await
        .expect_err("bot token");
    assert_eq!(code(error), "not_allowed_token_type");
    let opened = app
        .apps_connections_open(&SlackApiAppsConnectionOpenRequest::new())
        .await
        .expect("xapp");
    assert!(
        opened
            .url
            .0
            .to_string()
            .starts_with(&slack.socket_mode_url())
    );
}

#[tokio::test]
async fn parameters_arrive_as_form_query_json_or_nothing() {
    let slack = FakeSlack::start(Config::default()).await.expect("start");
    let base = slack.api_base_url();
    let form = "application/x-www-form-urlencoded";
    let bot = Some("xoxb-1");

    // The Node SDK: a form with blocks as a JSON string inside a field.
    let blocks = url_encode(r#"[{"type":"section","text":{"type":"mrkdwn","text":"hi"}}]"#);
    let body = format!("channel=general&text=from+node&blocks={blocks}");
    let answer = api(
        &format!("{base}/chat.postMessage"),
        Some(form),
        bot,
        body.as_bytes(),
    )
    .await;
    assert_eq!(answer["ok"], true, "{answer}");
    assert_eq!(answer["message"]["blocks"][0]["type"], "section");
    assert_eq!(
        answer["channel"], GENERAL,
        "a channel name resolves to its id"
    );

    // aiohttp: form parameters in the query string of a POST with an empty body.
    let answer = api(
        &format!("{base}/files.getUploadURLExternal?filename=a.txt&length=3"),
        Some(form),
        bot,
        b"",
    )
    .await;
    assert_eq!(answer["ok"], true, "{answer}");
    assert!(
        answer["upload_url"]
            .as_str()
            .is_some_and(|u| u.starts_with("http://127.0.0.1:"))
    );

    // Sync slack_sdk: a body-less call with a JSON content type.
    let answer = api(
        &format!("{base}/auth.test"),
        Some("application/json;charset=utf-8"),
        bot,
        b"",
    )
    .await;
    assert_eq!(answer["ok"], true, "{answer}");
    // The token as a form parameter (Bolt-JS's auth.test), and a base without /api.
    let origin = base.trim_end_matches("/api");
    let answer = api(
        &format!("{origin}/auth.test"),
        Some(form),
        None,
        b"token=xoxb-2",
    )
    .await;
    assert_eq!(answer["user_id"], "U0000000001");
    // GET with a query (slack-morphism's reads), and `/api//method`.
    let (status, text) = raw(
        "GET",
        &format!("{base}//users.info?user=U0000000003"),
        None,
        bot,
        b"",
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(
        serde_json::from_str::<Value>(&text).expect("json")["user"]["name"],
        "bob"
    );

    // Bad input gets Slack's error, with HTTP 200 and JSON.
    let answer = api(
        &format!("{base}/chat.postMessage"),
        Some("application/json"),
        bot,
        b"{\"channel\":",
    )
    .await;
    assert_eq!(answer, json!({"ok": false, "error": "invalid_json"}));
    let answer = api(
        &format!("{base}/chat.postMessage"),
        Some(form),
        bot,
        b"channel=general",
    )
    .await;
    assert_eq!(answer, json!({"ok": false, "error": "no_text"}));
    let answer = api(
        &format!("{base}/chat.postMessage"),
        Some(form),
        bot,
        b"channel=general&blocks=%5Bnot+json",
    )
    .await;
    assert_eq!(answer, json!({"ok": false, "error": "invalid_blocks"}));
    let answer = api(
        &format!("{base}/chat.postMessage"),
        Some(form),
        None,
        b"channel=general&text=x",
    )
    .await;
    assert_eq!(answer, json!({"ok": false, "error": "not_authed"}));
    let answer = api(
        &format!("{base}/chat.postMessage"),
        Some(form),
        Some("bogus"),
        b"channel=general&text=x",
    )
    .await;
    assert_eq!(answer, json!({"ok": false, "error": "invalid_auth"}));
    let answer = api(&format!("{base}/chat.nonsense"), Some(form), bot, b"").await;
    assert_eq!(answer, json!({"ok": false, "error": "unknown_method"}));
    let answer = api(
        &format!("{base}/views.open"),
        Some(form),
        bot,
        b"trigger_id=1.2.x&view=%7B%7D",
    )
    .await;
    assert_eq!(answer, json!({"ok": false, "error": "invalid_arguments"}));
    let answer = api(
        &format!("{base}/files.getUploadURLExternal"),
        Some(form),
        bot,
        b"filename=a.txt&length=many",
    )
    .await;
    assert_eq!(answer, json!({"ok": false, "error": "invalid_arguments"}));
}

#[tokio::test]
async fn reactions_ephemerals_permalinks_and_deletes() {
    let slack = FakeSlack::start(fixed_clock()).await.expect("start");
    let base = slack.api_base_url();
    let json_type = Some("application/json");
    let bot = Some("xoxb-1");
    let call = |method: &str, body: Value| {
        let url = format!("{base}/{method}");
        async move { api(&url, json_type, bot, body.to_string().as_bytes()).await }
    };
    let posted = call(
        "chat.postMessage",
        json!({"channel": GENERAL, "text": "react to me"}),
    )
    .await;
    let ts = posted["ts"].as_str().expect("ts").to_string();
    let add = json!({"channel": GENERAL, "timestamp": ts, "name": "eyes"});
    assert_eq!(call("reactions.add", add.clone()).await["ok"], true);
    assert_eq!(
        call("reactions.add", add.clone()).await["error"],
        "already_reacted"
    );
    assert_eq!(
        slack.messages(GENERAL, None)[0].message["reactions"][0]["count"],
        1
    );
    assert_eq!(call("reactions.remove", add.clone()).await["ok"], true);
    assert_eq!(call("reactions.remove", add).await["error"], "no_reaction");

    let ephemeral = call(
        "chat.postEphemeral",
        json!({"channel": GENERAL, "user": "U0000000002", "text": "psst"}),
    )
    .await;
    assert!(ephemeral["message_ts"].is_string(), "{ephemeral}");
    assert_eq!(slack.ephemerals()[0].text(), "psst");
    let missing = call(
        "chat.postEphemeral",
        json!({"channel": GENERAL, "user": "U404", "text": "psst"}),
    )
    .await;
    assert_eq!(
        missing["error"], "user_not_in_channel",
        "Slack answers an unknown id as a stranger to the channel"
    );

    let link = call(
        "chat.getPermalink",
        json!({"channel": GENERAL, "message_ts": ts}),
    )
    .await;
    assert_eq!(
        link["permalink"],
        format!(
            "https://ski-fake.slack.com/archives/{GENERAL}/p{}",
            ts.replace('.', "")
        )
    );
    let deleted = call("chat.delete", json!({"channel": GENERAL, "ts": ts})).await;
    assert_eq!(deleted["ts"], ts.as_str());
    assert!(slack.messages(GENERAL, None).is_empty());
    assert_eq!(
        call("chat.delete", json!({"channel": GENERAL, "ts": ts})).await["error"],
        "message_not_found"
    );

    let listed = call("conversations.list", json!({})).await;
    assert_eq!(listed["channels"].as_array().map(Vec::len), Some(2));
    let members = call("conversations.members", json!({"channel": GENERAL})).await;
    assert_eq!(
        members["members"],
        json!(["U0000000001", "U0000000002", "U0000000003"])
    );
    assert_eq!(
        call("users.list", json!({})).await["members"]
            .as_array()
            .map(Vec::len),
        Some(3)
    );

    // Paging: the cursor walks the history newest first and ends with an empty cursor.
    for n in 0..3 {
        call(
            "chat.postMessage",
            json!({"channel": GENERAL, "text": format!("m{n}")}),
        )
        .await;
    }
    let first = call(
        "conversations.history",
        json!({"channel": GENERAL, "limit": 2}),
    )
    .await;
    assert_eq!(first["has_more"], true);
    assert_eq!(first["messages"][0]["text"], "m2");
    let cursor = first["response_metadata"]["next_cursor"].clone();
    let second = call(
        "conversations.history",
        json!({"channel": GENERAL, "limit": 2, "cursor": cursor}),
    )
    .await;
    assert_eq!(second["messages"][0]["text"], "m0");
    assert_eq!(second["response_metadata"]["next_cursor"], "");

    slack.reset();
    assert!(slack.messages(GENERAL, None).is_empty());
    assert!(slack.requests().is_empty());
    let again = call(
        "chat.postMessage",
        json!({"channel": GENERAL, "text": "after reset"}),
    )
    .await;
    assert_eq!(
        again["ts"], "1700000001.000001",
        "ids start again after a reset"
    );
}

fn url_encode(text: &str) -> String {
    url::form_urlencoded::byte_serialize(text.as_bytes()).collect()
}
