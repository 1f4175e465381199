//! The outgoing side of the peer over in-memory pipes: ids, the pending table, timeouts, close,
//! end of stream and noise responses.

use std::collections::BTreeSet;
use std::time::Duration;

use serde_json::json;
use ski::jsonrpc::{CallError, ErrorCode, IdStyle, Message, Peer, RequestId, RequestOptions};
use tokio::io::AsyncWriteExt;

use crate::jsonrpc_support;

use jsonrpc_support::{Lcg, connected_pair, echo_server, peer_with_remote, request_of};

#[tokio::test]
async fn request_and_response_between_two_peers() {
    let (client, _server) = connected_pair(Peer::builder(), echo_server());
    let result = client.request("echo", Some(json!({"x": 1}))).await.unwrap();
    assert_eq!(result, json!({"x": 1}));
    let error = client.request("nope", None).await.unwrap_err();
    let CallError::Rpc(error) = error else {
        panic!("expected an rpc error, got {error:?}");
    };
    assert_eq!(error.code, ErrorCode::METHOD_NOT_FOUND);
    assert_eq!(error.data, Some(json!({"method": "nope"})));
    assert_eq!(client.stats().pending_requests, 0);
}

#[tokio::test]
async fn ids_start_at_the_configured_value_and_can_be_strings() {
    let (peer, mut remote) = peer_with_remote(Peer::builder().first_id(1));
    let call = tokio::spawn({
        let peer = peer.clone();
        async move { peer.request("a", None).await }
    });
    let request = request_of(remote.recv().await);
    assert_eq!(request.id, RequestId::Number(1));
    remote
        .send_message(&Message::success(request.id, json!("ok")))
        .await;
    assert_eq!(call.await.unwrap().unwrap(), json!("ok"));

    let (peer, mut remote) = peer_with_remote(
        Peer::builder()
            .id_style(IdStyle::Prefixed("c-".into()))
            .first_id(7),
    );
    let call = tokio::spawn({
        let peer = peer.clone();
        async move { peer.request("a", None).await }
    });
    let request = request_of(remote.recv().await);
    assert_eq!(request.id, RequestId::String("c-7".into()));
    remote
        .send_message(&Message::success(request.id, json!(1)))
        .await;
    assert_eq!(call.await.unwrap().unwrap(), json!(1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_ids_are_unique_and_contiguous_with_out_of_order_answers() {
    const N: usize = 200;
    let (peer, mut remote) = peer_with_remote(
        Peer::builder()
            .first_id(1)
            .request_timeout(Some(Duration::from_secs(60))),
    );
    let calls: Vec<_> = (0..N)
        .map(|i| {
            let peer = peer.clone();
            tokio::spawn(async move { peer.request("session/new", Some(json!({"n": i}))).await })
        })
        .collect();
    let mut requests = Vec::new();
    for _ in 0..N {
        requests.push(request_of(remote.recv().await));
    }
    let ids: BTreeSet<i64> = requests
        .iter()
        .map(|r| match r.id {
            RequestId::Number(n) => n,
            ref other => panic!("expected an integer id, got {other}"),
        })
        .collect();
    assert_eq!(ids.len(), N, "ids must be unique");
    assert_eq!(
        ids,
        (1..=N as i64).collect(),
        "ids must be contiguous from 1"
    );
    assert_eq!(peer.stats().pending_requests, N);
    assert_eq!(peer.stats().pending_timeouts, N);
    Lcg(7).shuffle(&mut requests);
    for request in &requests {
        let params = request.params.clone().unwrap();
        remote
            .send_message(&Message::success(request.id.clone(), params))
            .await;
    }
    for (i, call) in calls.into_iter().enumerate() {
        assert_eq!(call.await.unwrap().unwrap(), json!({"n": i}));
    }
    let stats = peer.stats();
    assert_eq!((stats.pending_requests, stats.pending_timeouts), (0, 0));
    assert_eq!(stats.ignored_responses, 0);
}

#[tokio::test]
async fn a_thousand_sequential_calls_leave_nothing_pending() {
    let (client, server) = connected_pair(
        Peer::builder().request_timeout(Some(Duration::from_secs(60))),
        echo_server(),
    );
    for i in 0..1000 {
        let result = client.request("echo", Some(json!([i]))).await.unwrap();
        assert_eq!(result, json!([i]));
    }
    let stats = client.stats();
    assert_eq!((stats.pending_requests, stats.pending_timeouts), (0, 0));
    assert_eq!(server.stats().inbound_requests, 0);
}

#[tokio::test]
async fn close_fails_in_flight_requests_with_eof_and_is_idempotent() {
    let (peer, mut remote) =
        peer_with_remote(Peer::builder().request_timeout(Some(Duration::from_secs(60))));
    let calls: Vec<_> = (0..10)
        .map(|_| {
            let peer = peer.clone();
            tokio::spawn(async move { peer.request("slow", None).await })
        })
        .collect();
    for _ in 0..10 {
        request_of(remote.recv().await);
    }
    assert_eq!(peer.stats().pending_requests, 10);
    peer.close().await;
    for call in calls {
        let error = call.await.unwrap().unwrap_err();
        assert!(matches!(error, CallError::Eof), "{error:?}");
    }
    let stats = peer.stats();
    assert_eq!((stats.pending_requests, stats.pending_timeouts), (0, 0));
    // The output was shut down: the remote reads end of stream.
    assert_eq!(remote.recv_line().await, None);
    // A second close has no effect and returns.
    peer.close().await;
    assert!(peer.is_closed());
    let error = peer.request("again", None).await.unwrap_err();
    assert!(matches!(error, CallError::NotConnected), "{error:?}");
    let error = peer.notify("again", None).await.unwrap_err();
    assert!(
        matches!(error, ski::jsonrpc::SendError::NotConnected),
        "{error:?}"
    );
    let error = peer.send_raw("x\n").await.unwrap_err();
    assert!(
        matches!(error, ski::jsonrpc::SendError::NotConnected),
        "{error:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_timeout_clears_the_pending_entry_and_a_late_answer_is_ignored() {
    let (peer, mut remote) = peer_with_remote(Peer::builder());
    let call = tokio::spawn({
        let peer = peer.clone();
        async move {
            peer.request_with(
                "slow",
                None,
                RequestOptions::timeout(Duration::from_secs(30)),
            )
            .await
        }
    });
    let request = request_of(remote.recv().await);
    assert_eq!(peer.stats().pending_timeouts, 1);
    // Paused time advances to the deadline as soon as everything is idle.
    let error = call.await.unwrap().unwrap_err();
    match &error {
        CallError::Timeout { method, timeout } => {
            assert_eq!(method, "slow");
            assert_eq!(*timeout, Duration::from_secs(30));
        }
        other => panic!("expected a timeout, got {other:?}"),
    }
    let stats = peer.stats();
    assert_eq!((stats.pending_requests, stats.pending_timeouts), (0, 0));
    remote
        .send_message(&Message::success(request.id, json!("late")))
        .await;
    // A request sent after the late answer completes, so the late answer was read (and ignored).
    let next = tokio::spawn({
        let peer = peer.clone();
        async move { peer.request("next", None).await }
    });
    let request = request_of(remote.recv().await);
    remote
        .send_message(&Message::success(request.id, json!("ok")))
        .await;
    assert_eq!(next.await.unwrap().unwrap(), json!("ok"));
    assert_eq!(peer.stats().ignored_responses, 1);
}

#[tokio::test(start_paused = true)]
async fn close_versus_timeout_resolves_to_exactly_one_outcome() {
    // Close first: EOF, even though the timeout would fire later.
    let (peer, mut remote) = peer_with_remote(Peer::builder());
    let call = peer
        .start_request("a", None, RequestOptions::timeout(Duration::from_secs(5)))
        .await
        .unwrap();
    request_of(remote.recv().await);
    peer.close().await;
    assert!(matches!(call.await, Err(CallError::Eof)));

    // Timeout first: the timeout, and a later close changes nothing.
    let (peer, mut remote) = peer_with_remote(Peer::builder());
    let call = peer
        .start_request("a", None, RequestOptions::timeout(Duration::from_secs(5)))
        .await
        .unwrap();
    request_of(remote.recv().await);
    tokio::time::sleep(Duration::from_secs(6)).await;
    peer.close().await;
    assert!(matches!(call.await, Err(CallError::Timeout { .. })));

    // Both due at the same instant: exactly one of the two, and nothing left pending.
    for _ in 0..20 {
        let (peer, mut remote) = peer_with_remote(Peer::builder());
        let timeout = Duration::from_secs(5);
        let deadline = tokio::time::Instant::now() + timeout;
        let call = peer
            .start_request("a", None, RequestOptions::timeout(timeout))
            .await
            .unwrap();
        request_of(remote.recv().await);
        let closer = tokio::spawn({
            let peer = peer.clone();
            async move {
                tokio::time::sleep_until(deadline).await;
                peer.close().await;
            }
        });
        let outcome = call.await;
        assert!(
            matches!(outcome, Err(CallError::Eof | CallError::Timeout { .. })),
            "{outcome:?}"
        );
        closer.await.unwrap();
        let stats = peer.stats();
        assert_eq!((stats.pending_requests, stats.pending_timeouts), (0, 0));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_requests_with_a_random_close_end_in_allowed_outcomes_only() {
    for seed in 1..=5u64 {
        let mut rng = Lcg(seed);
        let (peer, mut remote) = peer_with_remote(
            Peer::builder().request_timeout(Some(Duration::from_millis(200 + seed * 50))),
        );
        let calls: Vec<_> = (0..200)
            .map(|i| {
                let peer = peer.clone();
                tokio::spawn(async move { peer.request("work", Some(json!([i]))).await })
            })
            .collect();
        let close_after = rng.below(200);
        let mut answered = 0;
        while answered < close_after {
            let request = request_of(remote.recv().await);
            if rng.below(4) != 0 {
                remote
                    .send_message(&Message::success(request.id, json!("done")))
                    .await;
            }
            answered += 1;
        }
        peer.close().await;
        let (mut ok, mut eof, mut not_connected, mut timeout) = (0, 0, 0, 0);
        for call in calls {
            match call.await.unwrap() {
                Ok(value) => {
                    assert_eq!(value, json!("done"));
                    ok += 1;
                }
                Err(CallError::Eof) => eof += 1,
                Err(CallError::NotConnected) => not_connected += 1,
                Err(CallError::Timeout { .. }) => timeout += 1,
                Err(other) => panic!("seed {seed}: outcome outside the allowed set: {other:?}"),
            }
        }
        assert_eq!(ok + eof + not_connected + timeout, 200);
        let stats = peer.stats();
        assert_eq!(
            (stats.pending_requests, stats.pending_timeouts),
            (0, 0),
            "seed {seed}"
        );
    }
}

#[tokio::test]
async fn noise_responses_are_ignored_and_matching_is_by_exact_id() {
    let (peer, mut remote) = peer_with_remote(Peer::builder().first_id(1));
    let first = peer
        .start_request("a", None, RequestOptions::default())
        .await
        .unwrap();
    let second = peer
        .start_request("b", None, RequestOptions::default())
        .await
        .unwrap();
    let a = request_of(remote.recv().await);
    let b = request_of(remote.recv().await);
    assert_eq!(
        (&a.id, &b.id),
        (&RequestId::Number(1), &RequestId::Number(2))
    );
    // Unknown ids, the string form of a real id, and a null id are all noise.
    remote
        .send(r#"{"jsonrpc":"2.0","id":99,"result":"noise"}"#)
        .await;
    remote
        .send(r#"{"jsonrpc":"2.0","id":"2","result":"noise"}"#)
        .await;
    remote
        .send(r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}"#)
        .await;
    // Out of order: the second first, then a duplicate of it.
    remote
        .send(r#"{"jsonrpc":"2.0","id":2,"result":"b"}"#)
        .await;
    remote
        .send(r#"{"jsonrpc":"2.0","id":2,"result":"b again"}"#)
        .await;
    remote
        .send(r#"{"jsonrpc":"2.0","id":1,"result":"a"}"#)
        .await;
    assert_eq!(second.await.unwrap(), json!("b"));
    assert_eq!(first.await.unwrap(), json!("a"));
    // A later request still works.
    let third = peer
        .start_request("c", None, RequestOptions::default())
        .await
        .unwrap();
    let c = request_of(remote.recv().await);
    remote
        .send_message(&Message::success(c.id, json!("c")))
        .await;
    assert_eq!(third.await.unwrap(), json!("c"));
    let stats = peer.stats();
    assert_eq!(stats.ignored_responses, 4);
    assert_eq!(stats.pending_requests, 0);
}

#[tokio::test]
async fn error_and_malformed_responses_fail_only_their_request() {
    let (peer, mut remote) = peer_with_remote(Peer::builder().first_id(1));
    let first = peer
        .start_request("a", None, RequestOptions::default())
        .await
        .unwrap();
    let second = peer
        .start_request("b", None, RequestOptions::default())
        .await
        .unwrap();
    request_of(remote.recv().await);
    request_of(remote.recv().await);
    remote
        .send(r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32002,"message":"Resource not found","data":{"sessionId":"s"}}}"#)
        .await;
    remote
        .send(r#"{"jsonrpc":"2.0","id":2,"error":{"code":"bad","message":"x"}}"#)
        .await;
    let CallError::Rpc(error) = first.await.unwrap_err() else {
        panic!("expected an rpc error");
    };
    assert_eq!(error.code, ErrorCode::RESOURCE_NOT_FOUND);
    assert_eq!(error.data, Some(json!({"sessionId": "s"})));
    assert!(matches!(
        second.await.unwrap_err(),
        CallError::InvalidResponse(_)
    ));
    // Malformed responses are never answered.
    peer.close().await;
    assert_eq!(remote.recv_line().await, None);
}

#[tokio::test]
async fn remote_end_of_stream_fails_pending_requests_and_refuses_new_ones() {
    let (peer, mut remote) = peer_with_remote(Peer::builder());
    let call = peer
        .start_request("a", None, RequestOptions::default())
        .await
        .unwrap();
    request_of(remote.recv().await);
    remote.writer.shutdown().await.unwrap();
    peer.input_closed().await;
    assert!(matches!(call.await, Err(CallError::Eof)));
    assert!(matches!(
        peer.request("b", None).await,
        Err(CallError::NotConnected)
    ));
    // The output still works until close.
    peer.notify("bye", None).await.unwrap();
    assert_eq!(remote.recv().await, Message::notification("bye", None));
    peer.close().await;
    assert_eq!(remote.recv_line().await, None);
}

#[tokio::test]
async fn a_caller_that_gives_up_leaves_nothing_pending() {
    let (peer, mut remote) =
        peer_with_remote(Peer::builder().request_timeout(Some(Duration::from_secs(60))));
    let call = peer
        .start_request("a", None, RequestOptions::default())
        .await
        .unwrap();
    let request = request_of(remote.recv().await);
    assert_eq!(peer.stats().pending_requests, 1);
    drop(call);
    let stats = peer.stats();
    assert_eq!((stats.pending_requests, stats.pending_timeouts), (0, 0));
    // Its answer, arriving later, is noise.
    remote
        .send_message(&Message::success(request.id, json!(1)))
        .await;
    remote.writer.shutdown().await.unwrap();
    peer.input_closed().await;
    assert_eq!(peer.stats().ignored_responses, 1);
}

#[tokio::test]
async fn a_finished_connection_without_handles_shuts_its_output() {
    let (peer, mut remote) = peer_with_remote(Peer::builder());
    drop(peer);
    // The peer lives on while its input is open: it still answers.
    remote
        .send(r#"{"jsonrpc":"2.0","id":1,"method":"unknown"}"#)
        .await;
    let Message::Response(response) = remote.recv().await else {
        panic!("expected a response");
    };
    assert_eq!(response.id, RequestId::Number(1));
    // Once the input ends and no handle is left, the output is shut down.
    remote.writer.shutdown().await.unwrap();
    assert_eq!(remote.recv_line().await, None);
}

/// An output whose every write fails, as a pipe whose reader is gone.
struct BrokenOutput;

impl tokio::io::AsyncWrite for BrokenOutput {
    fn poll_write(
        self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
        _buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        std::task::Poll::Ready(Err(std::io::ErrorKind::BrokenPipe.into()))
    }

    fn poll_flush(
        self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn poll_shutdown(
        self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }
}

#[tokio::test]
async fn a_request_whose_write_fails_ends_with_the_write_error_and_closes_the_peer() {
    // The input stays open, so only the failed write can end the request.
    let (input, _keep_open) = tokio::io::duplex(64);
    let peer = Peer::builder().spawn(ski::jsonrpc::Transport::bytes(input, BrokenOutput));
    let call = peer
        .start_request("a", None, RequestOptions::timeout(Duration::from_secs(60)))
        .await
        .expect("a request is queued while the peer is open");
    match call.await {
        Err(CallError::Send(ski::jsonrpc::SendError::Write(error))) => {
            assert_eq!(error.kind(), std::io::ErrorKind::BrokenPipe);
        }
        other => panic!("expected the write error, got {other:?}"),
    }
    assert!(matches!(
        peer.request("b", None).await,
        Err(CallError::NotConnected)
    ));
    assert!(matches!(
        peer.notify("c", None).await,
        Err(ski::jsonrpc::SendError::NotConnected)
    ));
}

#[tokio::test]
async fn a_notification_encoded_by_the_caller_goes_out_as_written_with_the_peers_version() {
    use ski::jsonrpc::{SendError, VersionField};
    let write = |jsonrpc: bool, out: &mut Vec<u8>| {
        let version: &[u8] = if jsonrpc { br#""jsonrpc":"2.0","# } else { b"" };
        out.extend_from_slice(b"{");
        out.extend_from_slice(version);
        out.extend_from_slice(br#""method":"tick","params":{"n":1}}"#);
        Ok(())
    };
    let (peer, mut remote) = peer_with_remote(Peer::builder());
    peer.notify_encoded(write).await.unwrap();
    assert_eq!(
        remote.recv_line().await.unwrap(),
        r#"{"jsonrpc":"2.0","method":"tick","params":{"n":1}}"#
    );
    let (peer, mut remote) =
        peer_with_remote(Peer::builder().version_field(VersionField::Optional));
    peer.notify_encoded(write).await.unwrap();
    assert_eq!(
        remote.recv_line().await.unwrap(),
        r#"{"method":"tick","params":{"n":1}}"#
    );
    let two_lines = |_: bool, out: &mut Vec<u8>| {
        out.extend_from_slice(b"{\"method\":\"a\"}\n{\"method\":\"b\"}");
        Ok(())
    };
    assert!(matches!(
        peer.notify_encoded(two_lines).await,
        Err(SendError::Encode(_))
    ));
    peer.notify("after", None).await.unwrap();
    assert_eq!(
        remote.recv_line().await.unwrap(),
        r#"{"method":"after"}"#,
        "nothing of the refused line was written"
    );
}
