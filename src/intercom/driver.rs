//! The seam between the Slack side and the agents: [`AgentDriver`] is what Slack handlers call to
//! answer an agent, whatever protocol it speaks. [`McpDriver`] answers agents blocked in MCP tool
//! calls through oneshot channels; an ACP driver writes to a spawned agent's stdin instead.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Mutex;

use serde::Serialize;
use tokio::sync::oneshot;

use super::config::Mode;
use super::vocab::{Clearance, PromptAnswer, WaitAnswer};

/// Errors a driver reports.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DriverError {
    #[error("not found: {0}")]
    NotFound(String),
    #[error("{0}")]
    Unsupported(String),
    #[error("acp: {0}")]
    Acp(String),
    #[error("{0}")]
    Limit(String),
}

/// A boxed future every driver method returns.
pub type DriverFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, DriverError>> + Send + 'a>>;

/// The operator's answer to a clearance request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ClearanceDecision {
    pub status: Clearance,
    pub reason: Option<String>,
}

/// The operator's answer to a forwarded prompt (`transmit`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PromptDecision {
    pub decision: PromptAnswer,
    pub instruction: Option<String>,
}

/// The operator's answer to an agent on standby.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct WaitDecision {
    pub status: WaitAnswer,
    pub instruction: Option<String>,
}

/// How a prompt reached the agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delivery {
    /// Written to the agent now.
    Delivered,
    /// Queued; the agent takes it later (MCP agents on their next `ping`).
    Queued,
    /// Queued because the agent is offline (stalled); delivered when it speaks again.
    Offline,
    /// Queued behind the agent's running turn (ACP); sent when the turn ends.
    NextTurn,
}

/// What a new agent session is started with (ACP mode spawns an agent for it).
#[derive(Debug, Clone)]
pub struct SessionStart {
    pub session_id: String,
    pub prompt: String,
    pub workspace_path: Option<std::path::PathBuf>,
}

/// Everything the Slack side asks of an agent, protocol-agnostic. Ids of pending requests are
/// scoped by session: two sessions may both have a `req-001`.
pub trait AgentDriver: Send + Sync {
    /// `mcp` or `acp`, as stored in `session.protocol_mode`.
    fn protocol_mode(&self) -> Mode;
    /// Whether one more agent may start (ACP's concurrent-session limit).
    fn check_capacity(&self) -> Result<(), DriverError> {
        Ok(())
    }
    /// Starts an agent for a session the operator asked for.
    fn start_session(&self, start: SessionStart) -> DriverFuture<'_, ()>;
    /// Answers a clearance request.
    fn resolve_clearance<'a>(
        &'a self,
        session_id: &'a str,
        request_id: &'a str,
        decision: ClearanceDecision,
    ) -> DriverFuture<'a, ()>;
    /// Answers a forwarded prompt.
    fn resolve_prompt<'a>(
        &'a self,
        session_id: &'a str,
        prompt_id: &'a str,
        decision: PromptDecision,
    ) -> DriverFuture<'a, ()>;
    /// Wakes an agent on standby.
    fn resolve_wait<'a>(
        &'a self,
        session_id: &'a str,
        decision: WaitDecision,
    ) -> DriverFuture<'a, ()>;
    /// Sends an operator message (steering) to the agent.
    fn send_prompt<'a>(&'a self, session_id: &'a str, text: &'a str) -> DriverFuture<'a, Delivery>;
    /// Ends the agent's work: pending requests are answered as interrupted. Idempotent.
    fn interrupt<'a>(&'a self, session_id: &'a str) -> DriverFuture<'a, ()>;
    /// Replaces a session's agent by a new one with the original prompt (ACP).
    fn restart<'a>(&'a self, session_id: &'a str) -> DriverFuture<'a, ()> {
        Box::pin(async move {
            Err(DriverError::Unsupported(format!(
                "session {session_id}: restart needs a spawned agent"
            )))
        })
    }
}

type Key = (String, String);

/// MCP agents wait inside tool calls; each wait is a oneshot sender in one of these maps.
#[derive(Default)]
pub struct McpDriver {
    clearances: Mutex<HashMap<Key, oneshot::Sender<ClearanceDecision>>>,
    prompts: Mutex<HashMap<Key, oneshot::Sender<PromptDecision>>>,
    waits: Mutex<HashMap<String, oneshot::Sender<WaitDecision>>>,
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn key(session_id: &str, request_id: &str) -> Key {
    (session_id.to_string(), request_id.to_string())
}

impl McpDriver {
    /// Registers a tool call waiting for the operator's clearance decision.
    pub fn await_clearance(
        &self,
        session_id: &str,
        request_id: &str,
    ) -> oneshot::Receiver<ClearanceDecision> {
        let (sender, receiver) = oneshot::channel();
        lock(&self.clearances).insert(key(session_id, request_id), sender);
        receiver
    }

    /// Registers a tool call waiting for the operator's prompt decision.
    pub fn await_prompt(
        &self,
        session_id: &str,
        prompt_id: &str,
    ) -> oneshot::Receiver<PromptDecision> {
        let (sender, receiver) = oneshot::channel();
        lock(&self.prompts).insert(key(session_id, prompt_id), sender);
        receiver
    }

    /// Registers an agent on standby (one per session).
    pub fn await_wait(&self, session_id: &str) -> oneshot::Receiver<WaitDecision> {
        let (sender, receiver) = oneshot::channel();
        lock(&self.waits).insert(session_id.to_string(), sender);
        receiver
    }

    /// Forgets a wait that ended on its own (timeout, cancelled call).
    pub fn forget(&self, session_id: &str, request_id: &str) {
        lock(&self.clearances).remove(&key(session_id, request_id));
        lock(&self.prompts).remove(&key(session_id, request_id));
    }

    /// How many clearance requests are waiting.
    pub fn pending_clearances(&self) -> usize {
        lock(&self.clearances).len()
    }
}

impl AgentDriver for McpDriver {
    fn protocol_mode(&self) -> Mode {
        Mode::Mcp
    }

    fn start_session(&self, _start: SessionStart) -> DriverFuture<'_, ()> {
        Box::pin(async {
            Err(DriverError::Unsupported(
                "session-start is only available in ACP mode; in MCP mode agents connect to the \
                 server themselves"
                    .into(),
            ))
        })
    }

    fn resolve_clearance<'a>(
        &'a self,
        session_id: &'a str,
        request_id: &'a str,
        decision: ClearanceDecision,
    ) -> DriverFuture<'a, ()> {
        Box::pin(async move {
            let sender = lock(&self.clearances)
                .remove(&key(session_id, request_id))
                .ok_or_else(|| DriverError::NotFound(format!("clearance request {request_id}")))?;
            sender
                .send(decision)
                .map_err(|_| DriverError::NotFound(format!("clearance request {request_id}")))
        })
    }

    fn resolve_prompt<'a>(
        &'a self,
        session_id: &'a str,
        prompt_id: &'a str,
        decision: PromptDecision,
    ) -> DriverFuture<'a, ()> {
        Box::pin(async move {
            let sender = lock(&self.prompts)
                .remove(&key(session_id, prompt_id))
                .ok_or_else(|| DriverError::NotFound(format!("prompt {prompt_id}")))?;
            sender
                .send(decision)
                .map_err(|_| DriverError::NotFound(format!("prompt {prompt_id}")))
        })
    }

    fn resolve_wait<'a>(
        &'a self,
        session_id: &'a str,
        decision: WaitDecision,
    ) -> DriverFuture<'a, ()> {
        Box::pin(async move {
            let sender = lock(&self.waits)
                .remove(session_id)
                .ok_or_else(|| DriverError::NotFound(format!("standby of session {session_id}")))?;
            sender
                .send(decision)
                .map_err(|_| DriverError::NotFound(format!("standby of session {session_id}")))
        })
    }

    fn send_prompt<'a>(
        &'a self,
        _session_id: &'a str,
        _text: &'a str,
    ) -> DriverFuture<'a, Delivery> {
        // The message is already in the steering queue; the agent's next `ping` takes it.
        Box::pin(async { Ok(Delivery::Queued) })
    }

    fn interrupt<'a>(&'a self, session_id: &'a str) -> DriverFuture<'a, ()> {
        Box::pin(async move {
            let clearances: Vec<_> = {
                let mut map = lock(&self.clearances);
                let keys: Vec<Key> = map.keys().filter(|k| k.0 == session_id).cloned().collect();
                keys.into_iter().filter_map(|k| map.remove(&k)).collect()
            };
            for sender in clearances {
                let _ = sender.send(ClearanceDecision {
                    status: Clearance::Interrupted,
                    reason: Some("session ended".into()),
                });
            }
            let prompts: Vec<_> = {
                let mut map = lock(&self.prompts);
                let keys: Vec<Key> = map.keys().filter(|k| k.0 == session_id).cloned().collect();
                keys.into_iter().filter_map(|k| map.remove(&k)).collect()
            };
            for sender in prompts {
                let _ = sender.send(PromptDecision {
                    decision: PromptAnswer::Stop,
                    instruction: Some("session ended".into()),
                });
            }
            if let Some(sender) = lock(&self.waits).remove(session_id) {
                let _ = sender.send(WaitDecision {
                    status: WaitAnswer::Stopped,
                    instruction: Some("session ended".into()),
                });
            }
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn approved() -> ClearanceDecision {
        ClearanceDecision {
            status: Clearance::Approved,
            reason: None,
        }
    }

    #[tokio::test]
    async fn clearances_are_scoped_by_session_and_unknown_ids_are_not_found() {
        let driver = McpDriver::default();
        let a = driver.await_clearance("A", "req-001");
        let b = driver.await_clearance("B", "req-001");
        driver
            .resolve_clearance(
                "B",
                "req-001",
                ClearanceDecision {
                    status: Clearance::Rejected,
                    reason: Some("wrong file".into()),
                },
            )
            .await
            .expect("resolve B");
        assert_eq!(b.await.expect("B answered").status, Clearance::Rejected);
        driver
            .resolve_clearance("A", "req-001", approved())
            .await
            .expect("resolve A");
        assert_eq!(a.await.expect("A answered"), approved());
        assert_eq!(driver.pending_clearances(), 0);
        assert!(matches!(
            driver.resolve_clearance("A", "req-999", approved()).await,
            Err(DriverError::NotFound(_))
        ));
    }

    #[tokio::test]
    async fn interrupt_answers_every_wait_of_the_session_and_is_idempotent() {
        let driver = McpDriver::default();
        let a = driver.await_clearance("A", "req-001");
        let other = driver.await_clearance("B", "req-001");
        driver.interrupt("A").await.expect("interrupt");
        driver.interrupt("A").await.expect("again");
        assert_eq!(a.await.expect("answered").status, Clearance::Interrupted);
        assert_eq!(driver.pending_clearances(), 1);
        drop(other);
    }
}
