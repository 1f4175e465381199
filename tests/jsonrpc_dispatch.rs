//! The inbound side of the peer: answers to unknown methods and bad input, concurrent request
//! dispatch, `$/cancel_request`, notification order, responses after earlier notifications, the
//! send gate, and the tools for misbehaving on purpose (raw writes, suppressed responses).

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::FutureExt;
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Value, json};
use ski::jsonrpc::{
    Direction, ErrorCode, LineReader, Message, Peer, RequestId, RpcError, Transport, VersionField,
    decode, decode_params, decode_params_text,
};
use ski::transport::WireLog;
use tokio::sync::Notify;

use crate::jsonrpc_support;

use jsonrpc_support::{Lcg, connected_pair, echo_server, peer_with_remote, response_of};

#[tokio::test]
async fn unknown_methods_are_answered_method_not_found_naming_the_method() {
    let (_peer, mut remote) = peer_with_remote(echo_server());
    remote
        .send(r#"{"jsonrpc":"2.0","id":"x-1","method":"_vendor/thing","params":{}}"#)
        .await;
    let response = response_of(remote.recv().await);
    assert_eq!(response.id, RequestId::String("x-1".into()));
    let error = response.result.unwrap_err();
    assert_eq!(error.code, ErrorCode::METHOD_NOT_FOUND);
    assert_eq!(error.data, Some(json!({"method": "_vendor/thing"})));
}

#[tokio::test]
async fn bad_input_is_answered_and_the_stream_goes_on() {
    let (peer, mut remote) = peer_with_remote(echo_server());
    remote.send("this is not json").await;
    remote
        .send_bytes(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"\xff\"}\n")
        .await;
    remote
        .send(r#"[{"jsonrpc":"2.0","id":1,"method":"echo"}]"#)
        .await;
    remote.send(r#"{"id":5,"method":"echo"}"#).await;
    remote.send(r#"17"#).await;
    remote.send("   ").await;
    remote
        .send(r#"{"jsonrpc":"2.0","id":6,"method":"echo","params":["ok"]}"#)
        .await;
    // Error answers are sent in the background, so their order is not fixed.
    let mut answers = BTreeSet::new();
    for _ in 0..6 {
        let response = response_of(remote.recv().await);
        let code = match &response.result {
            Ok(value) => {
                assert_eq!(value, &json!(["ok"]));
                0
            }
            Err(error) => error.code.0,
        };
        answers.insert((response.id.to_string(), code, answers.len()));
    }
    let answers: Vec<(String, i64)> = answers.into_iter().map(|(id, c, _)| (id, c)).collect();
    let mut expected = vec![
        ("null".to_owned(), -32700),
        ("null".to_owned(), -32700),
        ("null".to_owned(), -32600),
        ("5".to_owned(), -32600),
        ("null".to_owned(), -32600),
        ("6".to_owned(), 0),
    ];
    let mut got = answers.clone();
    got.sort();
    expected.sort();
    assert_eq!(got, expected);
    let stats = peer.stats();
    assert_eq!(stats.parse_errors, 2);
    assert_eq!(stats.invalid_messages, 3);
}

#[tokio::test]
async fn an_oversize_line_is_answered_and_the_next_request_still_works() {
    let (peer, mut remote) = peer_with_remote(echo_server().max_message_bytes(256));
    let big = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"echo","params":["{}"]}}"#,
        "x".repeat(10_000)
    );
    remote.send(&big).await;
    remote
        .send(r#"{"jsonrpc":"2.0","id":2,"method":"echo","params":["small"]}"#)
        .await;
    let mut responses = [
        response_of(remote.recv().await),
        response_of(remote.recv().await),
    ];
    responses.sort_by_key(|r| r.id.to_string());
    assert_eq!(responses[0].id, RequestId::Number(2));
    assert_eq!(responses[0].result, Ok(json!(["small"])));
    assert_eq!(responses[1].id, RequestId::Null);
    assert_eq!(
        responses[1].result.as_ref().unwrap_err().code,
        ErrorCode::INVALID_REQUEST
    );
    assert_eq!(peer.stats().oversize_messages, 1);
}

#[tokio::test]
async fn cancel_request_answers_minus_32800_and_spares_other_requests() {
    let started = Arc::new(Notify::new());
    let builder = echo_server().on_request("slow", {
        let started = started.clone();
        move |_cx, _params: Option<Value>| {
            let started = started.clone();
            async move {
                started.notify_one();
                std::future::pending::<Result<Value, RpcError>>().await
            }
        }
    });
    let (peer, mut remote) = peer_with_remote(builder);
    remote
        .send(r#"{"jsonrpc":"2.0","id":1,"method":"slow"}"#)
        .await;
    started.notified().await;
    assert_eq!(peer.stats().inbound_requests, 1);
    remote
        .send(r#"{"jsonrpc":"2.0","id":2,"method":"echo","params":[2]}"#)
        .await;
    let echo = response_of(remote.recv().await);
    assert_eq!(
        (echo.id, echo.result),
        (RequestId::Number(2), Ok(json!([2])))
    );
    // Cancelling an unknown id does nothing.
    remote
        .send(r#"{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":"1"}}"#)
        .await;
    remote
        .send(r#"{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":1}}"#)
        .await;
    let cancelled = response_of(remote.recv().await);
    assert_eq!(cancelled.id, RequestId::Number(1));
    assert_eq!(
        cancelled.result.unwrap_err().code,
        ErrorCode::REQUEST_CANCELLED
    );
    peer.handlers_idle().await;
    assert_eq!(peer.stats().inbound_requests, 0);
}

#[tokio::test]
async fn handlers_idle_waits_for_the_last_running_handler() {
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    let started = Arc::new(Notify::new());
    let builder = Peer::builder().on_request("held", {
        let gate = gate.clone();
        let started = started.clone();
        move |_cx, _params: Option<Value>| {
            let gate = gate.clone();
            let started = started.clone();
            async move {
                started.notify_one();
                gate.acquire().await.unwrap().forget();
                Ok(Value::Null)
            }
        }
    });
    let (peer, mut remote) = peer_with_remote(builder);
    // Idle before any request.
    assert!(peer.handlers_idle().now_or_never().is_some());
    for id in 1..=2 {
        remote
            .send(&format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"held"}}"#))
            .await;
        started.notified().await;
    }
    let idle = peer.handlers_idle();
    tokio::pin!(idle);
    assert!((&mut idle).now_or_never().is_none());
    gate.add_permits(1);
    response_of(remote.recv().await);
    // One handler still runs.
    assert!((&mut idle).now_or_never().is_none());
    gate.add_permits(1);
    response_of(remote.recv().await);
    idle.await;
    assert_eq!(peer.stats().inbound_requests, 0);
}

#[tokio::test]
async fn a_handler_can_take_over_cancellation_and_answer_normally() {
    let builder = Peer::builder().on_request(
        "session/prompt",
        |cx: ski::jsonrpc::RequestContext, _params: Option<Value>| async move {
            cx.handle_cancellation();
            cx.cancellation().cancelled().await;
            Ok(json!({"stopReason": "cancelled"}))
        },
    );
    let (client, _server) = connected_pair(Peer::builder(), builder);
    let call = client
        .start_request("session/prompt", Some(json!({})), Default::default())
        .await
        .unwrap();
    client.cancel_request(call.id()).await.unwrap();
    assert_eq!(call.await.unwrap(), json!({"stopReason": "cancelled"}));
}

#[tokio::test]
async fn the_read_loop_keeps_reading_while_a_handler_waits_on_the_remote() {
    // The handler asks the remote a question and waits for the answer, as an agent does with a
    // permission request; meanwhile another request is answered.
    let builder = echo_server().on_request(
        "session/prompt",
        |cx: ski::jsonrpc::RequestContext, _params: Option<Value>| async move {
            let answer = cx
                .peer()
                .request("session/request_permission", Some(json!({"toolCall": "t"})))
                .await
                .map_err(|e| RpcError::internal_error(e.to_string()))?;
            Ok(json!({"stopReason": "end_turn", "permission": answer}))
        },
    );
    let (_peer, mut remote) = peer_with_remote(builder.first_id(100));
    remote
        .send(r#"{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{}}"#)
        .await;
    remote
        .send(r#"{"jsonrpc":"2.0","id":2,"method":"echo","params":[2]}"#)
        .await;
    let mut permission_id = None;
    let mut echo_answered = false;
    while permission_id.is_none() || !echo_answered {
        match remote.recv().await {
            Message::Request(request) => {
                assert_eq!(request.method, "session/request_permission");
                permission_id = Some(request.id);
            }
            Message::Response(response) => {
                assert_eq!(response.id, RequestId::Number(2));
                echo_answered = true;
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    let permission_id = permission_id.unwrap();
    assert_eq!(permission_id, RequestId::Number(100));
    remote
        .send_message(&Message::success(
            permission_id,
            json!({"outcome": {"outcome": "selected", "optionId": "allow"}}),
        ))
        .await;
    let prompt = response_of(remote.recv().await);
    assert_eq!(prompt.id, RequestId::Number(1));
    assert_eq!(
        prompt.result.unwrap(),
        json!({"stopReason": "end_turn", "permission": {"outcome": {"outcome": "selected", "optionId": "allow"}}})
    );
}

#[tokio::test]
async fn notifications_are_handled_one_at_a_time_in_arrival_order() {
    const N: u64 = 300;
    let seen = Arc::new(Mutex::new(Vec::new()));
    let all_seen = Arc::new(Notify::new());
    let builder = Peer::builder().on_notification("tick", {
        let seen = seen.clone();
        let all_seen = all_seen.clone();
        move |_cx, params: Option<Value>| {
            let seen = seen.clone();
            let all_seen = all_seen.clone();
            async move {
                let n = params.unwrap()["n"].as_u64().unwrap();
                // Handlers take different amounts of time; order must not depend on it.
                for _ in 0..(n * 7919) % 5 {
                    tokio::task::yield_now().await;
                }
                let mut seen = seen.lock().unwrap();
                seen.push(n);
                if seen.len() as u64 == N {
                    all_seen.notify_one();
                }
            }
        }
    });
    let (_peer, mut remote) = peer_with_remote(builder);
    let done = all_seen.notified();
    for n in 0..N {
        remote
            .send_message(&Message::notification("tick", Some(json!({"n": n}))))
            .await;
        // Unknown notifications are ignored without an answer.
        remote
            .send(r#"{"jsonrpc":"2.0","method":"_unknown/ext","params":{}}"#)
            .await;
    }
    done.await;
    assert_eq!(*seen.lock().unwrap(), (0..N).collect::<Vec<_>>());
}

#[tokio::test]
async fn a_response_is_delivered_after_the_notifications_sent_before_it() {
    let updates = Arc::new(Mutex::new(Vec::new()));
    let builder = Peer::builder()
        .first_id(1)
        .on_notification("session/update", {
            let updates = updates.clone();
            move |_cx, params: Option<Value>| {
                let updates = updates.clone();
                async move {
                    for _ in 0..3 {
                        tokio::task::yield_now().await;
                    }
                    updates.lock().unwrap().push(params.unwrap()["i"].clone());
                }
            }
        });
    let (_peer, mut remote, call) = prompt_in_flight(builder).await;
    let mut burst = String::new();
    for i in 0..50 {
        burst.push_str(
            &Message::notification("session/update", Some(json!({"i": i})))
                .to_line()
                .unwrap(),
        );
        burst.push('\n');
    }
    burst.push_str(r#"{"jsonrpc":"2.0","id":1,"result":{"stopReason":"end_turn"}}"#);
    remote.send(&burst).await;
    assert_eq!(call.await.unwrap(), json!({"stopReason": "end_turn"}));
    assert_eq!(updates.lock().unwrap().len(), 50);
}

#[tokio::test]
async fn a_notification_handler_may_call_the_remote_without_deadlock() {
    let answers = Arc::new(Mutex::new(Vec::new()));
    let done = Arc::new(Notify::new());
    let builder = Peer::builder().first_id(1).on_notification("ask", {
        let answers = answers.clone();
        let done = done.clone();
        move |cx: ski::jsonrpc::NotificationContext, _params: Option<Value>| {
            let answers = answers.clone();
            let done = done.clone();
            async move {
                let answer = cx.peer().request("question", None).await.unwrap();
                answers.lock().unwrap().push(answer);
                done.notify_one();
            }
        }
    });
    let (_peer, mut remote) = peer_with_remote(builder);
    let finished = done.notified();
    remote.send(r#"{"jsonrpc":"2.0","method":"ask"}"#).await;
    let Message::Request(question) = remote.recv().await else {
        panic!("expected the question");
    };
    remote
        .send_message(&Message::success(question.id, json!(42)))
        .await;
    finished.await;
    assert_eq!(*answers.lock().unwrap(), vec![json!(42)]);
}

#[tokio::test]
async fn typed_handlers_reject_bad_params_with_invalid_params() {
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct NewSession {
        cwd: String,
    }
    let builder = Peer::builder()
        .on_typed_request("session/new", |_cx, params: NewSession| async move {
            Ok(json!({"sessionId": format!("s:{}", params.cwd)}))
        });
    let (client, _server) = connected_pair(Peer::builder(), builder);
    let ok = client
        .request("session/new", Some(json!({"cwd": "/tmp"})))
        .await
        .unwrap();
    assert_eq!(ok, json!({"sessionId": "s:/tmp"}));
    let error = client
        .request("session/new", Some(json!({"cwd": 3})))
        .await
        .unwrap_err();
    let ski::jsonrpc::CallError::Rpc(error) = error else {
        panic!("expected an rpc error, got {error:?}");
    };
    assert_eq!(error.code, ErrorCode::INVALID_PARAMS);
}

#[tokio::test]
async fn text_handlers_get_params_as_sent_and_value_handlers_on_the_same_peer_get_values() {
    let notes = Arc::new(Mutex::new(Vec::new()));
    // Answers with the params it got, as text, and whether there were any.
    let builder = Peer::builder()
        .on_text_request("raw", |_cx, params: Option<Box<RawValue>>| async move {
            match params {
                Some(params) => Ok(params),
                None => Ok(RawValue::from_string("\"none\"".to_owned()).unwrap()),
            }
        })
        .on_request("value", |_cx, params: Option<Value>| async move {
            Ok(json!({ "got": params }))
        })
        .on_notification("note", {
            let notes = notes.clone();
            move |_cx, params: Option<Value>| {
                notes.lock().unwrap().push(params);
                async {}
            }
        });
    let (_peer, mut remote) = peer_with_remote(builder);
    let sent = r#"{"b": 1, "a":[1.50, "\u00e9", {"x":null}]}"#;
    remote
        .send(&format!(
            r#"{{"jsonrpc":"2.0","params":{sent},"id":1,"method":"raw"}}"#
        ))
        .await;
    // The params reach the handler byte for byte, and its text result goes out as it is.
    assert_eq!(
        remote.recv_line().await.unwrap(),
        format!(r#"{{"jsonrpc":"2.0","id":1,"result":{sent}}}"#)
    );
    remote
        .send(r#"{"jsonrpc":"2.0","id":2,"method":"raw"}"#)
        .await;
    assert_eq!(response_of(remote.recv().await).result, Ok(json!("none")));
    remote
        .send(r#"{"jsonrpc":"2.0","method":"note","params":{"n":[1, 2]}}"#)
        .await;
    remote
        .send(r#"{"jsonrpc":"2.0","id":3,"method":"value","params":{"b":1,"a":[1.5]}}"#)
        .await;
    assert_eq!(
        response_of(remote.recv().await).result,
        Ok(json!({"got": {"b": 1, "a": [1.5]}}))
    );
    assert_eq!(*notes.lock().unwrap(), vec![Some(json!({"n": [1, 2]}))]);
    // Params that are no object or array are refused before any handler runs, as always.
    remote
        .send(r#"{"jsonrpc":"2.0","id":4,"method":"raw","params":3}"#)
        .await;
    let response = response_of(remote.recv().await);
    assert_eq!(response.id, RequestId::Number(4));
    assert_eq!(
        response.result.unwrap_err().code,
        ErrorCode::INVALID_REQUEST
    );
}

#[test]
fn params_decoded_from_text_answer_as_params_decoded_from_a_value() {
    #[derive(Debug, PartialEq, Deserialize)]
    struct NewSession {
        cwd: String,
    }
    let decode_both = |text: &str| {
        let raw = RawValue::from_string(text.to_owned()).unwrap();
        let from_text = decode_params_text::<NewSession>(Some(&raw));
        let from_value = decode_params::<NewSession>(Some(serde_json::from_str(text).unwrap()));
        (from_text, from_value)
    };
    for text in [
        r#"{"cwd":"/tmp"}"#,
        r#"{"cwd":3}"#,
        r#"{"cwd":"/a","cwd":"/b"}"#,
        r#"{"other":true}"#,
        r#"[1]"#,
        r#"null"#,
    ] {
        let (from_text, from_value) = decode_both(text);
        assert_eq!(from_text, from_value, "{text}");
    }
    // A repeated member keeps its last value, as in a `Value`.
    assert_eq!(
        decode_both(r#"{"cwd":"/a","cwd":"/b"}"#).0,
        Ok(NewSession { cwd: "/b".into() })
    );
    assert_eq!(
        decode_params_text::<NewSession>(None),
        decode_params::<NewSession>(None)
    );
}

#[tokio::test]
async fn a_panicking_handler_is_answered_internal_error() {
    let builder = Peer::builder().on_request("boom", |_cx, params: Option<Value>| async move {
        if params.is_none() {
            panic!("handler failure on purpose");
        }
        Ok(Value::Null)
    });
    let (_peer, mut remote) = peer_with_remote(builder);
    remote
        .send(r#"{"jsonrpc":"2.0","id":9,"method":"boom"}"#)
        .await;
    let response = response_of(remote.recv().await);
    assert_eq!(response.id, RequestId::Number(9));
    assert_eq!(response.result.unwrap_err().code, ErrorCode::INTERNAL_ERROR);
}

#[tokio::test]
async fn the_send_gate_applies_backpressure_and_a_cancelled_waiter_takes_no_permit() {
    // A 16-byte pipe nobody reads yet: the first write blocks the writer.
    let (ours, theirs) = tokio::io::duplex(16);
    let (read, write) = tokio::io::split(ours);
    let peer = Peer::builder()
        .max_in_flight_sends(2)
        .spawn(Transport::bytes(read, write));
    let first = tokio::spawn({
        let peer = peer.clone();
        async move {
            peer.notify("first", Some(json!({"pad": "x".repeat(64)})))
                .await
        }
    });
    let second = tokio::spawn({
        let peer = peer.clone();
        async move { peer.notify("second", None).await }
    });
    while peer.stats().available_send_permits != 0 {
        tokio::task::yield_now().await;
    }
    // A third sender waits for a permit; it gives up before getting one.
    let mut waiter = Box::pin(peer.notify("cancelled", None));
    assert!((&mut waiter).now_or_never().is_none());
    drop(waiter);
    assert_eq!(peer.stats().available_send_permits, 0);
    let fourth = tokio::spawn({
        let peer = peer.clone();
        async move { peer.notify("fourth", None).await }
    });
    // Notifications return once queued; their permits stay taken until they are written, so
    // the fourth sender waits.
    tokio::task::yield_now().await;
    assert!(
        !fourth.is_finished(),
        "the fourth sender waits for a permit"
    );
    assert_eq!(peer.stats().available_send_permits, 0);
    // Now drain the pipe: everything but the cancelled message arrives, in order.
    let (their_read, _their_write) = tokio::io::split(theirs);
    let mut reader = LineReader::new(their_read);
    let mut methods = Vec::new();
    for _ in 0..3 {
        let line = reader.next_line().await.unwrap().unwrap();
        let message = decode(line, VersionField::Required).unwrap();
        methods.push(message.method().unwrap().to_owned());
    }
    assert_eq!(methods, ["first", "second", "fourth"]);
    first.await.unwrap().unwrap();
    second.await.unwrap().unwrap();
    fourth.await.unwrap().unwrap();
    assert_eq!(peer.stats().available_send_permits, 2);
    peer.close().await;
    assert!(
        reader.next_line().await.is_none(),
        "nothing else was written"
    );
}

#[tokio::test]
async fn raw_writes_suppressed_responses_and_the_wire_log() {
    let log = WireLog::new();
    let builder = Peer::builder().observer(log.observer("peer")).on_request(
        "misbehave",
        |cx: ski::jsonrpc::RequestContext, _params: Option<Value>| async move {
            // Answer with the wrong id by hand and suppress the real answer.
            cx.suppress_response();
            cx.peer()
                .send_message(&Message::success(
                    RequestId::String("wrong".into()),
                    json!(1),
                ))
                .await
                .map_err(|e| RpcError::internal_error(e.to_string()))?;
            Ok(json!("never sent"))
        },
    );
    let (peer, mut remote) = peer_with_remote(builder);
    remote
        .send(r#"{"jsonrpc":"2.0","id":1,"method":"misbehave"}"#)
        .await;
    let response = response_of(remote.recv().await);
    assert_eq!(response.id, RequestId::String("wrong".into()));
    // A fragmented line, then a line that is not JSON, written verbatim.
    peer.send_raw(&b"{\"jsonrpc\":\"2.0\","[..]).await.unwrap();
    peer.send_raw(&b"\"method\":\"joined\"}\nnot json\n"[..])
        .await
        .unwrap();
    assert_eq!(remote.recv().await, Message::notification("joined", None));
    assert_eq!(remote.recv_line().await.as_deref(), Some("not json"));
    peer.close().await;
    assert_eq!(remote.recv_line().await, None);
    assert_eq!(
        log.texts("peer", Direction::In),
        vec![r#"{"jsonrpc":"2.0","id":1,"method":"misbehave"}"#]
    );
    assert_eq!(
        log.texts("peer", Direction::Out),
        vec![
            r#"{"jsonrpc":"2.0","id":"wrong","result":1}"#,
            r#"{"jsonrpc":"2.0","#,
            "\"method\":\"joined\"}\nnot json\n",
        ]
    );
    let rendered = log.render();
    assert!(rendered.contains("peer in {\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"misbehave\"}"));
    assert!(rendered.contains("peer note output closed"), "{rendered}");
}

#[tokio::test]
async fn the_intercom_dialect_omits_the_version_field() {
    let (peer, mut remote) = peer_with_remote(echo_server().version_field(VersionField::Optional));
    remote
        .send(r#"{"id":"c-1","method":"echo","params":{"status":"approved"}}"#)
        .await;
    assert_eq!(
        remote.recv_line().await.as_deref(),
        Some(r#"{"id":"c-1","result":{"status":"approved"}}"#)
    );
    peer.notify("status/update", Some(json!({"message": "hi"})))
        .await
        .unwrap();
    assert_eq!(
        remote.recv_line().await.as_deref(),
        Some(r#"{"method":"status/update","params":{"message":"hi"}}"#)
    );
}

#[tokio::test]
async fn concurrent_requests_both_ways_between_two_peers() {
    let (left, right) = connected_pair(echo_server().first_id(1), echo_server().first_id(1));
    let mut rng = Lcg(11);
    let mut calls = Vec::new();
    for i in 0..100 {
        let peer = if rng.below(2) == 0 {
            left.clone()
        } else {
            right.clone()
        };
        calls.push(tokio::spawn(async move {
            peer.request("echo", Some(json!([i]))).await
        }));
    }
    for (i, call) in calls.into_iter().enumerate() {
        assert_eq!(call.await.unwrap().unwrap(), json!([i]));
    }
    tokio::time::timeout(Duration::from_secs(30), left.close())
        .await
        .expect("close returns");
    right.input_closed().await;
}

/// A request handler that registers state before its first await, followed in the same write by
/// a notification that looks the state up: the notification must always find it, because the
/// read loop polls the request's handler once before it dispatches the next message.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_notification_right_behind_a_request_sees_what_its_handler_registered_before_awaiting() {
    let running: Arc<Mutex<std::collections::HashMap<String, Arc<Notify>>>> = Arc::default();
    let (probes, mut probed) = tokio::sync::mpsc::unbounded_channel::<(String, bool)>();
    let builder = Peer::builder()
        .on_request("begin", {
            let running = running.clone();
            move |_cx, params: Option<Value>| {
                let running = running.clone();
                async move {
                    let key = params.unwrap_or_default()["key"]
                        .as_str()
                        .unwrap_or_default()
                        .to_owned();
                    let release = Arc::new(Notify::new());
                    running.lock().unwrap().insert(key.clone(), release.clone());
                    release.notified().await;
                    running.lock().unwrap().remove(&key);
                    Ok(json!(key))
                }
            }
        })
        .on_notification("probe", {
            let running = running.clone();
            move |_cx, params: Option<Value>| {
                let running = running.clone();
                let probes = probes.clone();
                async move {
                    let key = params.unwrap_or_default()["key"]
                        .as_str()
                        .unwrap_or_default()
                        .to_owned();
                    let release = running.lock().unwrap().get(&key).cloned();
                    if let Some(release) = &release {
                        release.notify_one();
                    }
                    let _ = probes.send((key, release.is_some()));
                }
            }
        });
    let (_peer, mut remote) = peer_with_remote(builder);
    for round in 0..200 {
        let key = format!("k{round}");
        let both = format!(
            "{}\n{}",
            json!({"jsonrpc": "2.0", "id": round, "method": "begin", "params": {"key": key}}),
            json!({"jsonrpc": "2.0", "method": "probe", "params": {"key": key}}),
        );
        remote.send(&both).await;
        let (probed_key, found) = tokio::time::timeout(Duration::from_secs(30), probed.recv())
            .await
            .expect("the probe was handled")
            .expect("the peer is alive");
        assert_eq!(probed_key, key);
        assert!(
            found,
            "round {round}: the probe ran before the request's handler"
        );
        let response = response_of(remote.recv().await);
        assert_eq!(response.id, RequestId::Number(round));
        assert_eq!(response.result.unwrap(), json!(key));
    }
}

#[tokio::test]
async fn a_panicking_notification_handler_spares_later_notifications_and_responses() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let builder = Peer::builder()
        .first_id(1)
        .on_notification("boom", |_cx, params: Option<Value>| async move {
            // Panics at its first poll (on the read loop) or after a suspension (on the
            // notification task).
            if params.is_some_and(|params| params["late"] == json!(true)) {
                tokio::task::yield_now().await;
            }
            panic!("handler bug");
        })
        .on_notification("tick", {
            let seen = seen.clone();
            move |_cx, params: Option<Value>| {
                let seen = seen.clone();
                async move { seen.lock().unwrap().push(params.unwrap()["n"].clone()) }
            }
        });
    let (peer, mut remote, call) = prompt_in_flight(builder).await;
    remote.send(r#"{"jsonrpc":"2.0","method":"boom"}"#).await;
    remote
        .send(r#"{"jsonrpc":"2.0","method":"tick","params":{"n":1}}"#)
        .await;
    remote
        .send(r#"{"jsonrpc":"2.0","method":"boom","params":{"late":true}}"#)
        .await;
    remote
        .send(r#"{"jsonrpc":"2.0","method":"tick","params":{"n":2}}"#)
        .await;
    remote.send(r#"{"jsonrpc":"2.0","id":1,"result":{}}"#).await;
    // The response waits for the four notifications before it, panics included; a peer whose
    // read loop died with the panic would never deliver it.
    let answer = tokio::time::timeout(Duration::from_secs(30), call)
        .await
        .expect("the response was never delivered");
    assert_eq!(answer.unwrap(), json!({}));
    assert_eq!(*seen.lock().unwrap(), vec![json!(1), json!(2)]);
    assert!(!peer.is_closed());
}

/// A peer from `builder` with a `session/prompt` (id 1 with `first_id(1)`) sent and read by the
/// remote end, waiting for its answer.
async fn prompt_in_flight(
    builder: ski::jsonrpc::PeerBuilder,
) -> (Peer, jsonrpc_support::Remote, ski::jsonrpc::ResponseFuture) {
    let (peer, mut remote) = peer_with_remote(builder);
    let call = peer
        .start_request("session/prompt", Some(json!({})), Default::default())
        .await
        .unwrap();
    let _ = remote.recv().await;
    (peer, remote, call)
}
