//! The peer's three tasks: the read loop (classifies every inbound line and routes it, waiting
//! on a request handler only for its first poll), the notification task (handles notifications
//! in arrival order) and the writer (drains the send queue, batching writes, and releases send
//! permits).
//!
//! Ordering: the read loop polls each request's task once on its own task, before it reads the
//! next message, and spawns the rest only if the handler is still pending. A request handler thus
//! runs until its first await before any later message is dispatched: state it registers
//! synchronously is visible to a `$/cancel_request` or notification written right behind it.
//!
//! A notification that arrives while every earlier one is handled is started the same way, on
//! the read loop: a handler that finishes at its first poll (the usual case, such as handing an
//! update to a channel) costs no task switch; one still pending goes on to the notification
//! task, which finishes it before any later notification. Notifications thus still run one at a
//! time, in arrival order.
//!
//! Bounds: the read loop takes in no further message (responses and `$/cancel_request` included)
//! while the send gate is full (with an answer room: while the room is full or an answer waits
//! for it), nor while [`MAX_QUEUED_NOTIFICATIONS`] notifications it read
//! wait to be handled: a handler that waits, say for a slow consumer of what it hands on, thus
//! stops the reading, and a remote that floods notifications fills its own pipe or socket. The
//! one exception: while a notification handler waits for the answer to a request it sent the
//! remote, the read loop reads on, since that answer is behind what the remote sent before it;
//! otherwise the handler and the read loop would wait for each other.

use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Weak};

use futures::FutureExt;
use std::sync::atomic::Ordering;

use serde_json::Value;
use serde_json::value::RawValue;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::handler::{BoxFuture, CallFlags, NotificationContext, RequestContext, RequestRoute};
use super::params::Params;
use super::pending::Delivery;
use super::{
    CANCEL_REQUEST_METHOD, CallError, MAX_QUEUED_NOTIFICATIONS, Peer, SendError, Shared,
    WriteCommand, WriteDone,
};
use crate::jsonrpc::error::RpcError;
use crate::jsonrpc::framing::FrameError;
use crate::jsonrpc::id::RequestId;
use crate::jsonrpc::message::{
    DecodeError, Message, Notification, Request, Response, decode, decode_with_params,
};
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

/// A notification handed to the notification task.
pub(super) enum QueuedNotification {
    /// Not started: earlier notifications were still being handled when it arrived.
    Waiting(Notification),
    /// Started by the read loop and still running.
    Started(BoxFuture<()>),
}

pub(super) async fn read_loop(
    peer: Peer,
    mut input: Input,
    notifications: mpsc::UnboundedSender<QueuedNotification>,
) {
    let shared = peer.shared.clone();
    let mut notifications_seen: u64 = 0;
    loop {
        let seen = notifications_seen;
        let item = tokio::select! {
            biased;
            () = shared.closing.cancelled() => break,
            item = async {
                writer_has_room(&shared).await;
                notifications_have_room(&shared, seen).await;
                input.next().await
            } => item,
        };
        match item {
            None => break,
            Some(Ok(bytes)) => {
                shared.observe(&WireEvent::Received(bytes));
                match decode_inbound(&shared, bytes) {
                    Ok(message) => {
                        if let Some(task) =
                            route(&peer, message, &notifications, &mut notifications_seen)
                            && let Some(rest) = poll_once(task)
                        {
                            tokio::spawn(rest);
                        }
                    }
                    Err(error) => {
                        if let Some(answer) = reject(&peer, error, notifications_seen) {
                            queue_answer(&peer, answer).await;
                        }
                    }
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
                queue_answer(&peer, Response::error(RequestId::Null, error)).await;
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

/// Decodes one inbound text, its params kept as text when some handler reads text (else parsed
/// into a `Value`, as [`decode`] does).
fn decode_inbound(shared: &Shared, bytes: &[u8]) -> Result<Message<Params>, DecodeError> {
    let version = shared.config.version;
    if shared.config.text_params {
        decode_with_params::<Box<RawValue>>(bytes, version)
            .map(|(message, _)| with_params(message, Params::Text))
    } else {
        decode(bytes, version).map(|message| with_params(message, Params::Value))
    }
}

fn with_params<P>(message: Message<P>, hold: fn(P) -> Params) -> Message<Params> {
    match message {
        Message::Request(Request { id, method, params }) => Message::Request(Request {
            id,
            method,
            params: params.map(hold),
        }),
        Message::Notification(Notification { method, params }) => {
            Message::Notification(Notification {
                method,
                params: params.map(hold),
            })
        }
        Message::Response(response) => Message::Response(response),
    }
}

/// Routes one message. A request yields its task, which the read loop starts before it reads on.
fn route(
    peer: &Peer,
    message: Message<Params>,
    notifications: &mpsc::UnboundedSender<QueuedNotification>,
    notifications_seen: &mut u64,
) -> Option<BoxFuture<()>> {
    let shared = &peer.shared;
    let notification = match message {
        Message::Request(request) => return Some(dispatch_request(peer, request)),
        Message::Response(response) => {
            deliver(
                shared,
                &response.id,
                response.result.map_err(CallError::Rpc),
                *notifications_seen,
            );
            return None;
        }
        Message::Notification(Notification { method, params }) => {
            match params.map(Params::into_value).transpose() {
                Ok(params) => Notification { method, params },
                Err(error) => {
                    tracing::warn!(%method, %error, "notification with unreadable params ignored");
                    return None;
                }
            }
        }
    };
    match notification {
        notification if notification.method == CANCEL_REQUEST_METHOD => {
            cancel_inbound(shared, notification.params);
        }
        notification => {
            let earlier_handled = *shared.notifications_handled.borrow() == *notifications_seen;
            *notifications_seen += 1;
            let queued = if earlier_handled {
                start_notification(peer, notification).map(QueuedNotification::Started)
            } else {
                Some(QueuedNotification::Waiting(notification))
            };
            // The notification task only stops at close, when nothing is routed any more.
            if let Some(queued) = queued {
                let _ = notifications.send(queued);
            }
        }
    }
    None
}

/// Polls a handler's task once, on the read loop, and returns it if it is still pending: a
/// request handler (then spawned) or a notification handler (then finished by the notification
/// task) thus runs until its first await before the next message is dispatched. Whoever takes a
/// pending task over polls it again, which registers its real waker, so no wake-up is lost. A
/// handler that blocks synchronously before its first await blocks the read loop: that is a bug
/// of the handler.
fn poll_once(mut task: BoxFuture<()>) -> Option<BoxFuture<()>> {
    let waker = futures::task::noop_waker();
    let first = task
        .as_mut()
        .poll(&mut std::task::Context::from_waker(&waker));
    first.is_pending().then_some(task)
}

/// Waits until the send gate has a free permit. The read loop takes in no further message while
/// the writer is backed up: a remote that writes without reading fills its own pipe or socket
/// instead of this process's memory, since every message read adds at most one sender waiting at
/// the gate, ahead of the read loop.
async fn writer_has_room(shared: &Shared) {
    if let Some((room, _)) = &shared.answer_room {
        // Fair: this waits behind every answer already waiting for room. The permit goes back
        // at once; an error means the room closed with the peer.
        let _ = room.acquire().await;
        return;
    }
    if shared.gate.available_permits() == 0 {
        // The permit goes back at once; an error means the gate closed with the peer.
        let _ = shared.gate.acquire().await;
    }
}

/// Waits until fewer than [`MAX_QUEUED_NOTIFICATIONS`] of the `seen` notifications wait to be
/// handled, or a notification handler waits for an answer from the remote (which only reading
/// on brings). A remote that floods notifications faster than they are handled thus fills its
/// own pipe or socket instead of this process's memory.
async fn notifications_have_room(shared: &Shared, seen: u64) {
    let has_room = |handled: u64, handler_calls: usize| {
        seen.saturating_sub(handled) < MAX_QUEUED_NOTIFICATIONS as u64 || handler_calls > 0
    };
    if has_room(
        *shared.notifications_handled.borrow(),
        *shared.handler_calls.borrow(),
    ) {
        return;
    }
    let mut handled = shared.notifications_handled.subscribe();
    let mut handler_calls = shared.handler_calls.subscribe();
    while !has_room(
        *handled.borrow_and_update(),
        *handler_calls.borrow_and_update(),
    ) {
        let changed = tokio::select! {
            changed = handled.changed() => changed,
            changed = handler_calls.changed() => changed,
        };
        // The senders live in `shared`, as long as the read loop: this does not happen.
        if changed.is_err() {
            return;
        }
    }
}

/// Counts and logs an invalid inbound message, fails the pending request a malformed response
/// names, and returns the answer owed, if any.
fn reject(peer: &Peer, error: DecodeError, notifications_seen: u64) -> Option<Response> {
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
    error.error_response()
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

/// Queues the answer to a message the read loop could not dispatch (not flushed: it leaves with
/// the next write), waiting for a send permit like any other sender.
async fn queue_answer(peer: &Peer, response: Response) {
    if let Err(error) = peer.queue_answer(response).await {
        tracing::debug!(%error, "could not send an error response");
    }
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
    generation
}

fn unregister_inbound(shared: &Shared, id: &RequestId, generation: u64) {
    let mut table = shared.inbound_lock();
    // A later request that reused the id holds the entry now: it stays.
    if let Some((other, token)) = table.entries.remove(id)
        && other != generation
    {
        table.entries.insert(id.clone(), (other, token));
    }
    if table.entries.is_empty() {
        shared.inbound_idle.notify_waiters();
    }
}

/// A request handler's result: a value, or the JSON text a [`super::TextRequestHandler`] wrote.
enum Answer {
    Value(Value),
    Text(Box<RawValue>),
}

/// Registers an inbound request (so that `$/cancel_request` finds it at once) and returns the task
/// that runs its handler and sends its answer.
fn dispatch_request(peer: &Peer, request: Request<Params>) -> BoxFuture<()> {
    let token = peer.shared.closing.child_token();
    let generation = register_inbound(&peer.shared, &request.id, token.clone());
    let peer = peer.clone();
    Box::pin(async move {
        let Request { id, method, params } = request;
        let shared = peer.shared.clone();
        let flags = Arc::new(CallFlags::default());
        let outcome = match shared.router.request(&method) {
            None => {
                tracing::debug!(%method, "request for an unknown method");
                Some(Err(RpcError::method_not_found(&method)))
            }
            Some(route) => {
                let cx = RequestContext {
                    peer: peer.clone(),
                    id: id.clone(),
                    method: method.into(),
                    cancel: token.clone(),
                    flags: flags.clone(),
                };
                let call: Result<BoxFuture<Result<Answer, RpcError>>, _> = match route {
                    RequestRoute::Value(handler) => {
                        params.map(Params::into_value).transpose().map(|params| {
                            let fut = handler.call(cx, params);
                            Box::pin(fut.map(|result| result.map(Answer::Value))) as BoxFuture<_>
                        })
                    }
                    RequestRoute::Text(handler) => {
                        params.map(Params::into_text).transpose().map(|params| {
                            let fut = handler.call(cx, params);
                            Box::pin(fut.map(|result| result.map(Answer::Text))) as BoxFuture<_>
                        })
                    }
                };
                match call {
                    Ok(fut) => run_handler(fut, &token, &flags, &shared.closing).await,
                    Err(error) => Some(Err(RpcError::invalid_params(error.to_string()))),
                }
            }
        };
        unregister_inbound(&shared, &id, generation);
        let Some(result) = outcome else {
            return;
        };
        if flags.suppressed.load(Ordering::SeqCst) {
            return;
        }
        // Queued, not flushed: a handler that finishes at its first poll then needs no task of
        // its own. A write that fails later closes the connection (and is logged there).
        let queued = match result {
            Ok(Answer::Text(text)) => peer.queue_answer_text(&id, &text).await,
            Ok(Answer::Value(value)) => peer.queue_answer(Response::success(id, value)).await,
            Err(error) => peer.queue_answer(Response::error(id, error)).await,
        };
        match queued {
            Ok(()) | Err(SendError::NotConnected) => {}
            Err(error) => tracing::warn!(%error, "could not send a response"),
        }
    })
}

/// Runs a handler until it finishes, it is cancelled (then `-32800`, unless the handler took
/// over cancellation), or the peer closes (then `None`: no answer).
async fn run_handler<T>(
    fut: BoxFuture<Result<T, RpcError>>,
    token: &CancellationToken,
    flags: &CallFlags,
    closing: &CancellationToken,
) -> Option<Result<T, RpcError>> {
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

/// Starts handling a notification on the read loop, every earlier one being handled: polls its
/// handler once and returns it if it is still pending (the notification task finishes it).
fn start_notification(peer: &Peer, notification: Notification) -> Option<BoxFuture<()>> {
    let pending = poll_once(notification_task(peer, notification)?);
    if pending.is_none() {
        mark_notification_handled(&peer.shared);
    }
    pending
}

/// The future that handles one notification (marked as running in a notification handler, a
/// panic logged), or `None` when no handler takes its method: it is then handled already.
fn notification_task(peer: &Peer, notification: Notification) -> Option<BoxFuture<()>> {
    let Notification { method, params } = notification;
    let Some(handler) = peer.shared.router.notification(&method).cloned() else {
        tracing::debug!(%method, "notification for an unknown method ignored");
        mark_notification_handled(&peer.shared);
        return None;
    };
    let method: Arc<str> = method.into();
    let cx = NotificationContext {
        peer: peer.clone(),
        method: method.clone(),
    };
    let run = AssertUnwindSafe(IN_NOTIFICATION_HANDLER.scope((), handler.call(cx, params)))
        .catch_unwind()
        .map(move |result| {
            if result.is_err() {
                tracing::error!(%method, "a notification handler panicked");
            }
        });
    Some(Box::pin(run))
}

fn mark_notification_handled(shared: &Shared) {
    shared
        .notifications_handled
        .send_modify(|handled| *handled = handled.saturating_add(1));
}

pub(super) async fn notification_loop(
    peer: Peer,
    mut notifications: mpsc::UnboundedReceiver<QueuedNotification>,
) {
    let shared = peer.shared.clone();
    loop {
        let queued = tokio::select! {
            biased;
            () = shared.closing.cancelled() => break,
            queued = notifications.recv() => match queued {
                Some(queued) => queued,
                None => break,
            },
        };
        let run = match queued {
            QueuedNotification::Started(run) => Some(run),
            QueuedNotification::Waiting(notification) => notification_task(&peer, notification),
        };
        if let Some(run) = run {
            tokio::select! {
                biased;
                () = shared.closing.cancelled() => break,
                () = run => {}
            }
            mark_notification_handled(&shared);
        }
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
        let shared = parts.shared.upgrade();
        for (done, permit) in batch.drain(..) {
            drop(permit);
            report_write(done, failure.as_ref(), shared.as_deref());
        }
        drop(shared);
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
        if let WriteCommand::Write {
            done: WriteDone::Waiter(done),
            ..
        } = command
        {
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

/// Tells whoever waits on a write how it ended: a waiter either way, a request's caller only
/// when it failed (the pending entry then ends with the write error).
fn report_write(done: WriteDone, failure: Option<&std::io::Error>, shared: Option<&Shared>) {
    let error = || {
        failure.map(|error| SendError::Write(std::io::Error::new(error.kind(), error.to_string())))
    };
    match done {
        WriteDone::Waiter(waiter) => {
            let _ = waiter.send(error().map_or(Ok(()), Err));
        }
        WriteDone::Request(id) => {
            if let (Some(error), Some(shared)) = (error(), shared) {
                shared.pending.complete(
                    &id,
                    Delivery {
                        outcome: Err(CallError::Send(error)),
                        notifications_before: 0,
                    },
                );
            }
        }
        WriteDone::Nobody => {}
    }
}

fn abandoned() -> std::io::Error {
    std::io::Error::other("close abandoned a blocked write")
}

#[cfg(test)]
mod tests;
