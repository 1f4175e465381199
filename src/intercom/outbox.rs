//! The ordered, bounded outbox every `chat.postMessage` goes through: one worker sends the
//! posts one at a time in the order they were queued (so a thread's replies keep their order),
//! waits out a 429's `Retry-After`, retries server errors and broken connections with backoff,
//! and answers each caller with the message's `ts` or the error that survived the retries. A
//! full queue refuses the post (logged) instead of growing without bound.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};

/// How many posts may wait at once before new ones are refused.
pub const CAPACITY: usize = 256;
/// How often a post is tried in all when it meets server errors or broken connections.
pub const TRANSIENT_ATTEMPTS: u32 = 5;
/// How many 429 answers one post may meet before it is given up.
pub const RATE_LIMITED_ATTEMPTS: u32 = 20;
/// The longest wait between tries (and the cap on a 429's `Retry-After`).
pub const MAX_BACKOFF: Duration = Duration::from_secs(30);

/// The outcome of one try.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Attempt {
    /// Slack stored the message; its `ts`.
    Posted(String),
    /// 429: try again after this long (the `Retry-After`, or the backoff when absent).
    RateLimited(Option<Duration>),
    /// A 5xx, a broken connection or a transient API error: try again after a backoff.
    Transient(String),
    /// Anything else (bad channel, bad blocks): no retry.
    Fatal(String),
}

/// Why a post was not delivered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OutboxError {
    #[error("slack outbox full ({0} posts waiting); post refused")]
    Full(usize),
    #[error("slack outbox stopped")]
    Stopped,
    #[error("{0}")]
    Failed(String),
}

/// One try of one post.
pub type SendFuture = Pin<Box<dyn Future<Output = Attempt> + Send>>;
/// Sends one post once.
pub type SendFn<P> = Arc<dyn Fn(P) -> SendFuture + Send + Sync>;

struct Job<P> {
    post: P,
    reply: oneshot::Sender<Result<String, OutboxError>>,
}

/// The queue's sending side; cloning shares the one worker.
pub struct Outbox<P> {
    queue: mpsc::Sender<Job<P>>,
    capacity: usize,
}

impl<P> Clone for Outbox<P> {
    fn clone(&self) -> Self {
        Outbox {
            queue: self.queue.clone(),
            capacity: self.capacity,
        }
    }
}

fn backoff(attempt: u32) -> Duration {
    Duration::from_millis(200 * 2u64.pow(attempt.min(7))).min(MAX_BACKOFF)
}

impl<P: Clone + Send + 'static> Outbox<P> {
    /// Starts the worker on the current Tokio runtime; it ends when every `Outbox` is dropped.
    pub fn start(capacity: usize, send: SendFn<P>) -> Outbox<P> {
        let (queue, mut jobs) = mpsc::channel::<Job<P>>(capacity.max(1));
        tokio::spawn(async move {
            while let Some(job) = jobs.recv().await {
                let result = deliver(&send, job.post).await;
                let _ = job.reply.send(result);
            }
        });
        Outbox { queue, capacity }
    }

    /// Queues a post and waits for its outcome; a full queue answers [`OutboxError::Full`] at once.
    pub async fn post(&self, post: P) -> Result<String, OutboxError> {
        let (reply, answer) = oneshot::channel();
        match self.queue.try_send(Job { post, reply }) {
            Ok(()) => {}
            Err(mpsc::error::TrySendError::Full(_)) => {
                tracing::warn!(
                    capacity = self.capacity,
                    "slack outbox full; refusing a post instead of queueing it"
                );
                return Err(OutboxError::Full(self.capacity));
            }
            Err(mpsc::error::TrySendError::Closed(_)) => return Err(OutboxError::Stopped),
        }
        answer.await.unwrap_or(Err(OutboxError::Stopped))
    }
}

/// Tries one post until it is stored, fails for good, or runs out of tries.
async fn deliver<P: Clone>(send: &SendFn<P>, post: P) -> Result<String, OutboxError> {
    let mut transient = 0;
    let mut rate_limited = 0;
    loop {
        match send(post.clone()).await {
            Attempt::Posted(ts) => return Ok(ts),
            Attempt::Fatal(message) => return Err(OutboxError::Failed(message)),
            Attempt::RateLimited(retry_after) => {
                rate_limited += 1;
                if rate_limited >= RATE_LIMITED_ATTEMPTS {
                    return Err(OutboxError::Failed(format!(
                        "rate limited {rate_limited} times in a row"
                    )));
                }
                let delay = retry_after
                    .unwrap_or(backoff(rate_limited))
                    .min(MAX_BACKOFF);
                tracing::warn!(
                    ?delay,
                    rate_limited,
                    "slack answered 429; waiting Retry-After"
                );
                tokio::time::sleep(delay).await;
            }
            Attempt::Transient(message) => {
                transient += 1;
                if transient >= TRANSIENT_ATTEMPTS {
                    return Err(OutboxError::Failed(message));
                }
                let delay = backoff(transient);
                tracing::warn!(?delay, attempt = transient, error = %message, "slack post failed, retrying");
                tokio::time::sleep(delay).await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::VecDeque;
    use std::sync::Mutex;

    /// A scripted Slack: answers the scripted outcomes in order, then posts; records every try.
    fn scripted(script: Vec<Attempt>) -> (SendFn<u32>, Arc<Mutex<Vec<u32>>>) {
        let script = Arc::new(Mutex::new(VecDeque::from(script)));
        let tries = Arc::new(Mutex::new(Vec::new()));
        let log = tries.clone();
        let send: SendFn<u32> = Arc::new(move |post: u32| {
            log.lock().expect("log").push(post);
            let next = script.lock().expect("script").pop_front();
            Box::pin(async move { next.unwrap_or(Attempt::Posted(format!("ts-{post}"))) })
        });
        (send, tries)
    }

    #[tokio::test(start_paused = true)]
    async fn rate_limits_and_server_errors_are_retried_in_order_and_each_post_lands_once() {
        let (send, tries) = scripted(vec![
            Attempt::RateLimited(Some(Duration::from_secs(3))),
            Attempt::Transient("http 500".into()),
            Attempt::Posted("ts-1".into()),
            Attempt::Transient("http 503".into()),
        ]);
        let outbox = Outbox::start(8, send);
        let started = tokio::time::Instant::now();
        let (a, b, c) = tokio::join!(outbox.post(1), outbox.post(2), outbox.post(3));
        assert_eq!(a, Ok("ts-1".into()));
        assert_eq!(b, Ok("ts-2".into()));
        assert_eq!(c, Ok("ts-3".into()));
        assert_eq!(*tries.lock().expect("tries"), vec![1, 1, 1, 2, 2, 3]);
        assert!(
            started.elapsed() >= Duration::from_secs(3),
            "Retry-After honoured"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn fatal_errors_are_not_retried_and_transient_ones_give_up_after_the_bound() {
        let (send, tries) = scripted(
            std::iter::once(Attempt::Fatal("channel_not_found".into()))
                .chain(std::iter::repeat_n(
                    Attempt::Transient("http 500".into()),
                    TRANSIENT_ATTEMPTS as usize,
                ))
                .collect(),
        );
        let outbox = Outbox::start(8, send);
        assert_eq!(
            outbox.post(1).await,
            Err(OutboxError::Failed("channel_not_found".into()))
        );
        assert_eq!(
            outbox.post(2).await,
            Err(OutboxError::Failed("http 500".into()))
        );
        assert_eq!(
            tries.lock().expect("tries").len(),
            1 + TRANSIENT_ATTEMPTS as usize
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_full_queue_refuses_instead_of_growing() {
        let gate = Arc::new(tokio::sync::Semaphore::new(0));
        let (started_tx, mut started) = mpsc::unbounded_channel();
        let held = gate.clone();
        let send: SendFn<u32> = Arc::new(move |post: u32| {
            let held = held.clone();
            let _ = started_tx.send(post);
            Box::pin(async move {
                let _permit = held.acquire().await.expect("gate");
                Attempt::Posted(format!("ts-{post}"))
            })
        });
        let outbox = Outbox::start(1, send);
        let first = tokio::spawn({
            let outbox = outbox.clone();
            async move { outbox.post(1).await }
        });
        // The worker holds the first post at the gate; the second fills the one free place.
        assert_eq!(started.recv().await, Some(1));
        let second = tokio::spawn({
            let outbox = outbox.clone();
            async move { outbox.post(2).await }
        });
        while outbox.queue.capacity() > 0 {
            tokio::task::yield_now().await;
        }
        assert_eq!(outbox.post(3).await, Err(OutboxError::Full(1)));
        gate.add_permits(2);
        assert_eq!(first.await.expect("first"), Ok("ts-1".into()));
        assert_eq!(second.await.expect("second"), Ok("ts-2".into()));
        assert_eq!(started.recv().await, Some(2));
    }
}
