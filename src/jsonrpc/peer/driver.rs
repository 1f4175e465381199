//! The peer's three tasks: the read loop (classifies every inbound line and routes it without
//! ever waiting on a handler), the notification task (handles notifications in arrival order)
//! and the writer (drains the send queue, batching writes, and releases send permits).

use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Weak};

use futures::FutureExt;
use std::sync::atomic::Ordering;

use serde_json::Value;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::handler::{BoxFuture, CallFlags, NotificationContext, RequestContext};
use super::pending::Delivery;
use super::{CANCEL_REQUEST_METHOD, CallError, Peer, SendError, Shared, WriteCommand};
use crate::jsonrpc::error::RpcError;
use crate::jsonrpc::framing::FrameError;
use crate::jsonrpc::id::RequestId;
use crate::jsonrpc::message::{DecodeError, Message, Notification, Request, Response, decode};
use crate::jsonrpc::transport::{Input, Output};
use crate::jsonrpc::wire::{WireEvent, WireObserver};

/// Most messages written with one flush.
const MAX_BATCH: usize = 64;

tokio::task_local! {
    static IN_NOTIFICATION_HANDLER: ();
}

/// Whether the current task is running a notification handler.
pub(super) fn in_notification_handler() -> bool {
    IN_NOTIFICATION_HANDLER.try_with(|()| ()).is_ok()
}

pub(super) async fn read_loop(
    peer: Peer,
    mut input: Input,
    notifications: mpsc::UnboundedSender<Notification>,
) {
    let shared = peer.shared.clone();
    let mut notifications_seen: u64 = 0;
    loop {
        let item = tokio::select! {
            biased;
            () = shared.closing.cancelled() => break,
            item = input.next() => item,
        };
        match item {
            None => break,
            Some(Ok(bytes)) => {
                shared.observe(&WireEvent::Received(bytes));
                match decode(bytes, shared.config.version) {
                    Ok(message) => {
                        route(&peer, message, &notifications, &mut notifications_seen);
                    }
                    Err(error) => reject(&peer, error, notifications_seen),
                }
            }
            Some(Err(FrameError::Oversize { length, limit })) => {
                shared.observe(&WireEvent::Oversize { length });
                shared
                    .counters
                    .oversize_messages
                    .fetch_add(1, Ordering::Relaxed);
                tracing::warn!(length, limit, "oversize inbound message discarded");
                let error = RpcError::invalid_request(format!(
                    "message of {length} bytes exceeds the limit of {limit} bytes"
                ));
                answer_in_background(&peer, Response::error(RequestId::Null, error));
            }
            Some(Err(FrameError::Io(error))) => {
                tracing::warn!(%error, "reading failed; input closed");
                break;
            }
        }
    }
    shared.observe(&WireEvent::InputClosed);
    shared.pending.close(|| CallError::Eof);
    shared.input_done.cancel();
}

fn route(
    peer: &Peer,
    message: Message,
    notifications: &mpsc::UnboundedSender<Notification>,
    notifications_seen: &mut u64,
) {
    let shared = &peer.shared;
    match message {
        Message::Request(request) => dispatch_request(peer, request),
        Message::Notification(notification) if notification.method == CANCEL_REQUEST_METHOD => {
            cancel_inbound(shared, notification.params);
        }
        Message::Notification(notification) => {
            *notifications_seen += 1;
            // The notification task only stops at close, when nothing is routed any more.
            let _ = notifications.send(notification);
        }
        Message::Response(response) => deliver(
            shared,
            &response.id,
            response.result.map_err(CallError::Rpc),
            *notifications_seen,
        ),
    }
}

fn reject(peer: &Peer, error: DecodeError, notifications_seen: u64) {
    let shared = &peer.shared;
    match &error {
        DecodeError::Parse { .. } => {
            shared.counters.parse_errors.fetch_add(1, Ordering::Relaxed);
        }
        DecodeError::InvalidRequest { .. } | DecodeError::InvalidResponse { .. } => {
            shared
                .counters
                .invalid_messages
                .fetch_add(1, Ordering::Relaxed);
        }
    }
    tracing::warn!(%error, "invalid inbound message");
    if let DecodeError::InvalidResponse {
        id: Some(id),
        reason,
    } = &error
    {
        deliver(
            shared,
            id,
            Err(CallError::InvalidResponse(reason.clone())),
            notifications_seen,
        );
    }
    if let Some(response) = error.error_response() {
        answer_in_background(peer, response);
    }
}

fn deliver(
    shared: &Shared,
    id: &RequestId,
    outcome: Result<Value, CallError>,
    notifications_before: u64,
) {
    let delivery = Delivery {
        outcome,
        notifications_before,
    };
    if !shared.pending.complete(id, delivery) {
        shared
            .counters
            .ignored_responses
            .fetch_add(1, Ordering::Relaxed);
        tracing::warn!(%id, "response to an unknown or already answered request ignored");
    }
}

/// Sends a response without making the read loop wait for a send permit.
fn answer_in_background(peer: &Peer, response: Response) {
    let peer = peer.clone();
    tokio::spawn(async move {
        if let Err(error) = peer.send_message(&Message::Response(response)).await {
            tracing::debug!(%error, "could not send an error response");
        }
    });
}

fn cancel_inbound(shared: &Shared, params: Option<Value>) {
    let id = params
        .as_ref()
        .and_then(|params| params.get("requestId"))
        .and_then(|id| serde_json::from_value::<RequestId>(id.clone()).ok());
    let Some(id) = id else {
        tracing::debug!("{CANCEL_REQUEST_METHOD} without a usable requestId ignored");
        return;
    };
    let token = shared
        .inbound_lock()
        .entries
        .get(&id)
        .map(|(_, token)| token.clone());
    match token {
        Some(token) => token.cancel(),
        None => tracing::debug!(%id, "{CANCEL_REQUEST_METHOD} for no running request ignored"),
    }
}

fn register_inbound(shared: &Shared, id: &RequestId, token: CancellationToken) -> u64 {
    let mut table = shared.inbound_lock();
    let generation = table.next_generation;
    table.next_generation += 1;
    table.entries.insert(id.clone(), (generation, token));
    shared.inbound_running.send_replace(table.entries.len());
    generation
}

fn unregister_inbound(shared: &Shared, id: &RequestId, generation: u64) {
    let mut table = shared.inbound_lock();
    if table.entries.get(id).is_some_and(|(g, _)| *g == generation) {
        table.entries.remove(id);
    }
    shared.inbound_running.send_replace(table.entries.len());
}

fn dispatch_request(peer: &Peer, request: Request) {
    let token = peer.shared.closing.child_token();
    let generation = register_inbound(&peer.shared, &request.id, token.clone());
    let peer = peer.clone();
    tokio::spawn(async move {
        let Request { id, method, params } = request;
        let shared = peer.shared.clone();
        let handler = shared.router.request(&method).cloned();
        let flags = Arc::new(CallFlags::default());
        let outcome = match handler {
            None => {
                tracing::debug!(%method, "request for an unknown method");
                Some(Err(RpcError::method_not_found(&method)))
            }
            Some(handler) => {
                let cx = RequestContext {
                    peer: peer.clone(),
                    id: id.clone(),
                    method: method.into(),
                    cancel: token.clone(),
                    flags: flags.clone(),
                };
                run_handler(handler.call(cx, params), &token, &flags, &shared.closing).await
            }
        };
        unregister_inbound(&shared, &id, generation);
        let Some(result) = outcome else {
            return;
        };
        if flags.suppressed.load(Ordering::SeqCst) {
            return;
        }
        match peer
            .send_message(&Message::Response(Response { id, result }))
            .await
        {
            Ok(()) | Err(SendError::NotConnected) => {}
            Err(error) => tracing::warn!(%error, "could not send a response"),
        }
    });
}

/// Runs a handler until it finishes, it is cancelled (then `-32800`, unless the handler took
/// over cancellation), or the peer closes (then `None`: no answer).
async fn run_handler(
    fut: BoxFuture<Result<Value, RpcError>>,
    token: &CancellationToken,
    flags: &CallFlags,
    closing: &CancellationToken,
) -> Option<Result<Value, RpcError>> {
    // A panicking handler is answered `-32603` instead of leaving the request unanswered.
    let mut fut = AssertUnwindSafe(fut)
        .catch_unwind()
        .map(|result| result.unwrap_or_else(|_| Err(RpcError::internal_error("handler panicked"))));
    tokio::select! {
        biased;
        result = &mut fut => return Some(result),
        () = token.cancelled() => {}
    }
    if closing.is_cancelled() {
        return None;
    }
    if flags.cooperative.load(Ordering::SeqCst) {
        tokio::select! {
            biased;
            result = fut => Some(result),
            () = closing.cancelled() => None,
        }
    } else {
        Some(Err(RpcError::request_cancelled()))
    }
}

pub(super) async fn notification_loop(
    peer: Peer,
    mut notifications: mpsc::UnboundedReceiver<Notification>,
) {
    let shared = peer.shared.clone();
    let mut handled: u64 = 0;
    loop {
        let notification = tokio::select! {
            biased;
            () = shared.closing.cancelled() => break,
            notification = notifications.recv() => match notification {
                Some(notification) => notification,
                None => break,
            },
        };
        let Notification { method, params } = notification;
        match shared.router.notification(&method).cloned() {
            Some(handler) => {
                let cx = NotificationContext {
                    peer: peer.clone(),
                    method: method.into(),
                };
                let run = IN_NOTIFICATION_HANDLER.scope((), handler.call(cx, params));
                tokio::select! {
                    biased;
                    () = shared.closing.cancelled() => break,
                    () = run => {}
                }
            }
            None => tracing::debug!(%method, "notification for an unknown method ignored"),
        }
        handled += 1;
        shared.notifications_handled.send_replace(handled);
    }
    // Nothing more will be handled: release every caller waiting for earlier notifications.
    shared.notifications_handled.send_replace(u64::MAX);
}

/// What the writer keeps of the peer. It holds the peer itself only weakly, so that a peer whose
/// handles, reader and handlers are all gone is dropped; its queue then closes and the writer
/// shuts the output down and ends.
pub(super) struct WriterParts {
    pub(super) shared: Weak<Shared>,
    pub(super) observers: Vec<Arc<dyn WireObserver>>,
    pub(super) abort_writes: CancellationToken,
    pub(super) writer_done: CancellationToken,
}

impl WriterParts {
    fn observe(&self, event: &WireEvent<'_>) {
        for observer in &self.observers {
            observer.observe(event);
        }
    }
}

pub(super) async fn write_loop(
    parts: WriterParts,
    mut output: Output,
    mut commands: mpsc::UnboundedReceiver<WriteCommand>,
) {
    let mut batch = Vec::with_capacity(MAX_BATCH);
    let mut shutdown = false;
    let mut failed = false;
    while let Some(first) = commands.recv().await {
        let mut next = Some(first);
        let mut failure = None;
        while let Some(command) = next.take() {
            match command {
                WriteCommand::Shutdown => {
                    shutdown = true;
                    break;
                }
                WriteCommand::Write {
                    bytes,
                    raw,
                    permit,
                    done,
                } => {
                    let event = if raw {
                        WireEvent::SentRaw(&bytes)
                    } else {
                        WireEvent::Sent(&bytes)
                    };
                    parts.observe(&event);
                    let queue = async {
                        if raw {
                            output.queue_raw(bytes).await
                        } else {
                            output.queue_line(bytes).await
                        }
                    };
                    let queued = tokio::select! {
                        biased;
                        queued = queue => queued,
                        () = parts.abort_writes.cancelled() => Err(abandoned()),
                    };
                    batch.push((done, permit));
                    if let Err(error) = queued {
                        failure = Some(error);
                        break;
                    }
                }
            }
            if batch.len() >= MAX_BATCH {
                break;
            }
            next = commands.try_recv().ok();
        }
        if failure.is_none() && !batch.is_empty() {
            let flushed = tokio::select! {
                biased;
                flushed = output.flush() => flushed,
                () = parts.abort_writes.cancelled() => Err(abandoned()),
            };
            failure = flushed.err();
        }
        for (done, permit) in batch.drain(..) {
            let result = match &failure {
                None => Ok(()),
                Some(error) => Err(SendError::Write(std::io::Error::new(
                    error.kind(),
                    error.to_string(),
                ))),
            };
            drop(permit);
            let _ = done.send(result);
        }
        if let Some(error) = failure {
            tracing::warn!(%error, "writing failed; connection closed");
            failed = true;
            break;
        }
        if shutdown {
            break;
        }
    }
    if let Some(shared) = parts.shared.upgrade() {
        shared.shut_down();
    }
    commands.close();
    while let Ok(command) = commands.try_recv() {
        if let WriteCommand::Write { done, .. } = command {
            let _ = done.send(Err(SendError::NotConnected));
        }
    }
    if !failed {
        tokio::select! {
            biased;
            result = output.shutdown() => {
                if let Err(error) = result {
                    tracing::debug!(%error, "shutting the output down failed");
                }
            }
            () = parts.abort_writes.cancelled() => {}
        }
    }
    parts.observe(&WireEvent::OutputClosed);
    parts.writer_done.cancel();
}

fn abandoned() -> std::io::Error {
    std::io::Error::other("close abandoned a blocked write")
}
