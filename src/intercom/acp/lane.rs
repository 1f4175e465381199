//! One session's Slack lane: what an agent asks to show is posted in its thread in the order it
//! was said, by a task of its own, so a slow Slack never stalls the agent's stream and one
//! session's flood never delays another's posts. Once a lane is behind, consecutive status
//! updates coalesce (the newest wins, the skipped ones are counted), so memory stays bounded
//! whatever the agent writes.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use serde_json::Value;
use tokio::sync::Notify;
use tokio::task::JoinHandle;

use crate::intercom::hub::Hub;

/// Items (other than coalesced statuses) a lane holds at most; beyond it posts are dropped and
/// logged.
pub const MAX_QUEUED_POSTS: usize = 1024;
/// Waiting items from which a new status replaces the waiting one instead of queueing: bursts
/// are posted one by one, floods coalesce.
pub const COALESCE_FROM: usize = 16;

enum Item {
    Status {
        text: String,
        skipped: u64,
    },
    Post {
        text: String,
        blocks: Option<Value>,
        /// The request id whose approval message this is (its `ts` is recorded).
        approval: Option<String>,
    },
}

#[derive(Default)]
struct Queue {
    items: VecDeque<Item>,
    closed: bool,
}

struct Shared {
    queue: Mutex<Queue>,
    notify: Notify,
}

/// The handle the stream side pushes into.
pub struct Lane {
    shared: Arc<Shared>,
    task: Option<JoinHandle<()>>,
}

impl Lane {
    /// Starts the posting task of `session_id`.
    pub fn start(hub: Arc<Hub>, session_id: String) -> Lane {
        let shared = Arc::new(Shared {
            queue: Mutex::new(Queue::default()),
            notify: Notify::new(),
        });
        let task = tokio::spawn(post_loop(hub, session_id, shared.clone()));
        Lane {
            shared,
            task: Some(task),
        }
    }

    fn queue(&self) -> std::sync::MutexGuard<'_, Queue> {
        self.shared
            .queue
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A status update; under pressure it replaces the status that is still waiting.
    pub fn status(&self, text: String) {
        {
            let mut queue = self.queue();
            let pressed = queue.items.len() >= COALESCE_FROM;
            if pressed
                && let Some(Item::Status {
                    text: waiting,
                    skipped,
                }) = queue.items.back_mut()
            {
                *waiting = text;
                *skipped += 1;
            } else {
                queue.items.push_back(Item::Status { text, skipped: 0 });
            }
        }
        self.shared.notify.notify_one();
    }

    /// A message (with blocks); `approval` names the request whose message it is.
    pub fn post(&self, text: String, blocks: Option<Value>, approval: Option<String>) {
        {
            let mut queue = self.queue();
            if queue.items.len() >= MAX_QUEUED_POSTS {
                tracing::error!(
                    dropped = %text,
                    "slack lane full: the agent asks faster than slack takes posts; message dropped"
                );
                return;
            }
            queue.items.push_back(Item::Post {
                text,
                blocks,
                approval,
            });
        }
        self.shared.notify.notify_one();
    }

    /// Waits until everything pushed so far is posted, then ends the task.
    pub async fn drain(mut self) {
        self.queue().closed = true;
        self.shared.notify.notify_one();
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

impl Drop for Lane {
    fn drop(&mut self) {
        self.queue().closed = true;
        self.shared.notify.notify_one();
    }
}

async fn post_loop(hub: Arc<Hub>, session_id: String, shared: Arc<Shared>) {
    loop {
        let notified = shared.notify.notified();
        let next = {
            let mut queue = shared
                .queue
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            match queue.items.pop_front() {
                Some(item) => Some(item),
                None if queue.closed => return,
                None => None,
            }
        };
        let Some(item) = next else {
            notified.await;
            continue;
        };
        match item {
            Item::Status { text, skipped } => {
                let text = if skipped == 0 {
                    text
                } else {
                    format!("{text}\n_({skipped} earlier status updates not shown)_")
                };
                hub.post_in_session(&session_id, &text, None).await;
            }
            Item::Post {
                text,
                blocks,
                approval,
            } => {
                let posted = hub
                    .post_in_session(&session_id, &text, blocks.as_ref())
                    .await;
                if let (Some(request_id), Some((channel, ts))) = (approval, posted)
                    && let Err(error) =
                        hub.store
                            .set_approval_message(&session_id, &request_id, &channel, &ts)
                {
                    tracing::error!(%error, "cannot record the approval message");
                }
            }
        }
    }
}
