//! The read loop's bound on notifications waiting to be handled, on a paused clock: a sleep
//! there ends only once every task waits, so "the read loop stopped" is seen without timing.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, DuplexStream, ReadHalf, WriteHalf};
use tokio::sync::Semaphore;

use crate::jsonrpc::framing::READ_CHUNK;
use crate::jsonrpc::peer::{MAX_QUEUED_NOTIFICATIONS, NotificationContext, Peer, PeerBuilder};
use crate::jsonrpc::transport::Transport;

/// The in-memory pipe between the peer and the test's remote end, in bytes each way.
const PIPE_BYTES: usize = 4096;

/// How long a wait may last on the paused clock: a deadlock ends it at once, failing the test.
const PATIENCE: Duration = Duration::from_secs(600);

fn tick(n: usize) -> String {
    format!(
        "{}\n",
        json!({"jsonrpc": "2.0", "method": "tick", "params": {"n": n}})
    )
}

/// Starts `builder` over an in-memory pipe and returns the remote end.
fn spawn(builder: PeerBuilder) -> (Peer, ReadHalf<DuplexStream>, WriteHalf<DuplexStream>) {
    let (local, remote) = tokio::io::duplex(PIPE_BYTES);
    let (read, write) = tokio::io::split(local);
    let peer = builder.spawn(Transport::bytes(read, write));
    let (remote_read, remote_write) = tokio::io::split(remote);
    (peer, remote_read, remote_write)
}

/// Lets every task run until all of them wait: on the paused clock the sleep ends only then.
async fn until_everything_waits() {
    tokio::time::sleep(Duration::from_secs(1)).await;
}

#[tokio::test(start_paused = true)]
async fn notifications_queued_behind_a_waiting_handler_stop_the_reading() {
    // Taken in at most: the queue, the handler waiting, one read chunk in the line reader and
    // the pipe (a tick line is longer than 32 bytes).
    const BOUND: usize = MAX_QUEUED_NOTIFICATIONS + 1 + (READ_CHUNK + PIPE_BYTES) / 32 + 1;
    const TICKS: usize = 4 * BOUND;
    let release = Arc::new(Semaphore::new(0));
    let handled = Arc::new(AtomicUsize::new(0));
    let builder = Peer::builder().on_notification("tick", {
        let release = release.clone();
        let handled = handled.clone();
        move |_cx, _params: Option<Value>| {
            let release = release.clone();
            let handled = handled.clone();
            async move {
                if let Ok(permit) = release.acquire().await {
                    permit.forget();
                }
                handled.fetch_add(1, Ordering::SeqCst);
            }
        }
    });
    let (peer, _remote_read, mut remote_write) = spawn(builder);
    let written = Arc::new(AtomicUsize::new(0));
    let writer = tokio::spawn({
        let written = written.clone();
        async move {
            for n in 0..TICKS {
                remote_write.write_all(tick(n).as_bytes()).await.unwrap();
                written.fetch_add(1, Ordering::SeqCst);
            }
            remote_write
        }
    });

    until_everything_waits().await;
    let taken = written.load(Ordering::SeqCst);
    assert!(
        taken <= BOUND,
        "{taken} of {TICKS} notifications were taken in behind a waiting handler; the bound is \
         {BOUND}"
    );
    assert_eq!(handled.load(Ordering::SeqCst), 0);

    // Once the handlers go on, everything is read and handled, in order of arrival.
    release.add_permits(TICKS);
    let _remote_write = tokio::time::timeout(PATIENCE, writer)
        .await
        .expect("the reading goes on")
        .unwrap();
    let mut handled_all = peer.shared.notifications_handled.subscribe();
    tokio::time::timeout(PATIENCE, handled_all.wait_for(|n| *n >= TICKS as u64))
        .await
        .expect("every notification is handled")
        .unwrap();
    assert_eq!(handled.load(Ordering::SeqCst), TICKS);
}

#[tokio::test(start_paused = true)]
async fn a_handler_waiting_for_the_remote_is_answered_through_a_flood() {
    const TICKS: usize = 4 * MAX_QUEUED_NOTIFICATIONS;
    let ticks = Arc::new(AtomicUsize::new(0));
    let answers = Arc::new(AtomicUsize::new(0));
    let builder = Peer::builder()
        .on_notification("ask", {
            let answers = answers.clone();
            move |cx: NotificationContext, _params: Option<Value>| {
                let answers = answers.clone();
                async move {
                    if cx.peer().request("question", None).await.ok() == Some(json!(42)) {
                        answers.fetch_add(1, Ordering::SeqCst);
                    }
                }
            }
        })
        .on_notification("tick", {
            let ticks = ticks.clone();
            move |_cx, _params: Option<Value>| {
                ticks.fetch_add(1, Ordering::SeqCst);
                std::future::ready(())
            }
        });
    let (peer, remote_read, mut remote_write) = spawn(builder);
    let mut questions = BufReader::new(remote_read).lines();
    remote_write
        .write_all(b"{\"jsonrpc\":\"2.0\",\"method\":\"ask\"}\n")
        .await
        .unwrap();
    let question: Value = serde_json::from_str(&questions.next_line().await.unwrap().unwrap())
        .expect("the question is JSON");
    // The answer comes behind more notifications than the queue holds.
    let remote = tokio::spawn(async move {
        for n in 0..TICKS {
            remote_write.write_all(tick(n).as_bytes()).await.unwrap();
        }
        let answer = json!({"jsonrpc": "2.0", "id": question["id"], "result": 42});
        remote_write
            .write_all(format!("{answer}\n").as_bytes())
            .await
            .unwrap();
        remote_write
    });
    let _remote_write = tokio::time::timeout(PATIENCE, remote)
        .await
        .expect("the flood and the answer are read")
        .unwrap();
    let mut handled = peer.shared.notifications_handled.subscribe();
    tokio::time::timeout(PATIENCE, handled.wait_for(|n| *n > TICKS as u64))
        .await
        .expect("the handler got its answer and every tick was handled")
        .unwrap();
    assert_eq!(answers.load(Ordering::SeqCst), 1);
    assert_eq!(ticks.load(Ordering::SeqCst), TICKS);
}
