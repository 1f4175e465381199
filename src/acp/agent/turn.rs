//! One prompt turn, from the permission step to its outcome.
//!
//! A turn is owned by the agent rather than by the request that started it, so it ends the same
//! way whatever happens to the connection: it runs inside the prompt handler (no task switch on
//! the way to the answer) as a [`Detached`] future, which moves onto its own task if the handler
//! is dropped before the turn ended. Its order:
//!
//! 1. `queued`, once the request handler's session and concurrency checks passed.
//! 2. The permission step ([`super::permission`]); a refusal ends the turn `cancelled` with no
//!    content update and no model call.
//! 3. `running`, then the echo back end's attempts; a failed attempt is retried with
//!    `retrying` and `retry_update`, after a delay of the base delay times the attempt number.
//! 4. The content updates: `available_commands_update`, `plan`, a tool call lifecycle
//!    (`tool_call` then `tool_call_update`; the injected tool calls when there are any), what a
//!    scripted command sends (`/notice`, `/compact`: [`super::commands`]),
//!    `agent_message_chunk` with the reply (repeated `reply_chunks` times, a flood for
//!    benchmarks; every chunk of the reply carries the reply's one `messageId`, new for each
//!    turn and kept in the history with the prompt's own id, so that `session/load` replays
//!    both under the ids they had), `session_info_update` with a title after the session's first turn, and last the
//!    `usage_update` of the session's context.
//! 5. The terminal execution state (`completed`, `cancelled`, `timed_out` or `failed`), then the
//!    request handler answers.
//!
//! Once a turn is stopped (`session/cancel`, `session/stop`, `$/cancel_request`, its timeout,
//! or the session going away) it sends no further content update.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use serde_json::json;

use super::Inner;
use super::commands;
use super::config::{EchoConfig, TurnUpdates};
pub use super::control::{StopCause, TurnControl, TurnOutcome};
use super::model::{self, AttemptError};
use super::permission::{self, Decision};
use super::store::HistoryEntry;
use super::tools;
use crate::acp::{
    AvailableCommand, AvailableCommandInput, AvailableCommandsUpdate, ContentBlock,
    ExecutionStateKind, Extra, Nullable, Plan, PlanEntry, PlanEntryPriority, PlanEntryStatus,
    RetryInfo, RetryUpdate, SessionUpdate, ToolCall, ToolCallStatus, ToolCallUpdate, ToolKind,
};

/// A future that runs where it is awaited and, dropped before it finished, goes on running on a
/// task of its own (on the runtime it was dropped on; a runtime that is shutting down drops it).
pub(crate) struct Detached<T: Send + 'static> {
    rest: Option<Pin<Box<dyn Future<Output = T> + Send + 'static>>>,
}

impl<T: Send + 'static> Detached<T> {
    pub(crate) fn new(future: impl Future<Output = T> + Send + 'static) -> Self {
        Self {
            rest: Some(Box::pin(future)),
        }
    }
}

impl<T: Send + 'static> Future for Detached<T> {
    type Output = T;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<T> {
        let Some(rest) = self.rest.as_mut() else {
            panic!("a Detached future was polled after it finished");
        };
        let output = ready!(rest.as_mut().poll(cx));
        self.rest = None;
        Poll::Ready(output)
    }
}

impl<T: Send + 'static> Drop for Detached<T> {
    fn drop(&mut self) {
        if let Some(rest) = self.rest.take()
            && let Ok(runtime) = tokio::runtime::Handle::try_current()
        {
            runtime.spawn(rest);
        }
    }
}

/// Clears the session's running turn when the turn task ends in any way, panics included.
struct FinishGuard {
    agent: Arc<Inner>,
    session: String,
    control: Arc<TurnControl>,
}

impl Drop for FinishGuard {
    fn drop(&mut self) {
        self.agent.finish_turn(&self.session, &self.control);
        self.control.mark_finished();
    }
}

/// Runs a turn to its outcome. The caller has registered `control` as the session's turn.
pub(crate) async fn run(
    agent: Arc<Inner>,
    session: String,
    prompt: Vec<ContentBlock>,
    control: Arc<TurnControl>,
    plan: EchoConfig,
) -> TurnOutcome {
    let guard = FinishGuard {
        agent: agent.clone(),
        session: session.clone(),
        control: control.clone(),
    };
    agent
        .execution_state(&session, ExecutionStateKind::Queued, None, None)
        .await;
    let steps = steps(&agent, &session, &prompt, &control, &plan);
    let outcome = match agent.config.prompt_timeout {
        Some(timeout) => {
            tokio::pin!(steps);
            tokio::select! {
                biased;
                outcome = &mut steps => outcome,
                () = tokio::time::sleep(timeout) => {
                    control.stop(StopCause::TimedOut);
                    steps.await
                }
            }
        }
        None => steps.await,
    };
    let outcome = match outcome {
        Ok(()) => TurnOutcome::EndTurn,
        Err(outcome) => outcome,
    };
    let message = match &outcome {
        TurnOutcome::Failed(message) => Some(message.clone()),
        _ => None,
    };
    agent
        .execution_state(&session, outcome.final_state(), None, message)
        .await;
    drop(guard);
    outcome
}

/// After a failed model attempt that will be retried: reports the retry and waits its delay.
async fn announce_retry(
    agent: &Arc<Inner>,
    session: &str,
    control: &TurnControl,
    attempt: u32,
    max_attempts: u32,
    message: String,
) -> Result<(), TurnOutcome> {
    agent
        .execution_state(
            session,
            ExecutionStateKind::Retrying,
            Some(attempt),
            Some(message.clone()),
        )
        .await;
    agent
        .update(
            session,
            SessionUpdate::RetryUpdate(RetryUpdate {
                retry: RetryInfo {
                    attempt,
                    max_attempts,
                    reason: Some(message),
                    extra: Extra::new(),
                },
                extra: Extra::new(),
            }),
        )
        .await;
    let delay = agent.config.retry_base_delay.saturating_mul(attempt);
    tokio::select! {
        biased;
        () = control.token().cancelled() => Err(TurnOutcome::stopped(control)),
        () = tokio::time::sleep(delay) => Ok(()),
    }
}

// The turn's future is moved into a box once per prompt, so its size is copied on every turn:
// the tool-call paths (several KiB each), the retry and full mode's extra updates are boxed
// where they run rather than inlined here.
async fn steps(
    agent: &Arc<Inner>,
    session: &str,
    prompt: &[ContentBlock],
    control: &TurnControl,
    plan: &EchoConfig,
) -> Result<(), TurnOutcome> {
    match permission::decide(agent, session, control).await {
        Decision::Allow => {}
        Decision::Deny => return Err(TurnOutcome::Denied),
        Decision::Fail(message) => return Err(TurnOutcome::Failed(message)),
        Decision::Stopped => return Err(TurnOutcome::stopped(control)),
    }
    if control.is_stopped() {
        return Err(TurnOutcome::stopped(control));
    }
    let messages = agent.turn_messages(session);
    agent.record(session, HistoryEntry::user(prompt, messages.user));
    let max_attempts = agent.config.max_retries.saturating_add(1);
    let mut attempt = 1;
    loop {
        if control.is_stopped() {
            return Err(TurnOutcome::stopped(control));
        }
        agent
            .execution_state(session, ExecutionStateKind::Running, Some(attempt), None)
            .await;
        match model::attempt(plan, attempt, control.token()).await {
            Ok(()) => break,
            Err(AttemptError::Stopped) => return Err(TurnOutcome::stopped(control)),
            Err(AttemptError::Failed(message)) => {
                tracing::info!(session, attempt, %message, "model attempt failed");
                if attempt >= max_attempts {
                    return Err(TurnOutcome::Failed(message));
                }
                // Rare, so boxed where it runs: the turn's future stays small.
                Box::pin(announce_retry(
                    agent,
                    session,
                    control,
                    attempt,
                    max_attempts,
                    message,
                ))
                .await?;
                attempt += 1;
            }
        }
    }

    let reply = model::reply(prompt);
    let full = agent.config.turn_updates == TurnUpdates::Full;
    if full {
        // Boxed where it runs, as the other optional parts: the turn's future stays small.
        Box::pin(async {
            agent
                .content(session, control, available_commands())
                .await?;
            agent.content(session, control, plan_update()).await
        })
        .await?;
    }
    if plan.tool_calls.is_empty() {
        if full {
            Box::pin(echo_tool_call(agent, session, control, prompt, &reply)).await?;
        }
    } else {
        for spec in &plan.tool_calls {
            Box::pin(tools::run(agent, session, control, spec, &reply)).await?;
        }
    }
    if plan.hold_tool_call {
        Box::pin(tools::held(agent, session, control)).await?;
    }
    Box::pin(commands::run(agent, session, control, prompt)).await?;
    let message_id = messages.agent;
    for _ in 0..plan.reply_chunks.max(1) {
        if control.is_stopped() {
            return Err(TurnOutcome::stopped(control));
        }
        agent.message_chunk(session, &reply, &message_id).await;
    }
    agent.record(session, HistoryEntry::agent(reply, message_id));
    if full && let Some(info) = agent.title_session(session, prompt) {
        control.report_update();
        agent
            .update(session, SessionUpdate::SessionInfoUpdate(info))
            .await;
    }
    if full && let Some(usage) = agent.usage(session) {
        agent
            .update(session, SessionUpdate::UsageUpdate(usage))
            .await;
    }
    Ok(())
}

/// A new message id, `msg_<uuid>`.
pub(crate) fn new_message_id() -> String {
    format!("msg_{}", uuid::Uuid::new_v4().simple())
}

fn available_commands() -> SessionUpdate {
    let mut available_commands = vec![AvailableCommand {
        name: "echo".to_owned(),
        description: "Reply with the text of the prompt".to_owned(),
        input: Some(AvailableCommandInput {
            hint: "the text to echo".to_owned(),
            extra: Extra::new(),
        }),
        extra: Extra::new(),
    }];
    available_commands.extend(commands::offered());
    SessionUpdate::AvailableCommandsUpdate(AvailableCommandsUpdate {
        available_commands,
        extra: Extra::new(),
    })
}

fn plan_update() -> SessionUpdate {
    let entry = |content: &str, priority, status| PlanEntry {
        content: content.to_owned(),
        priority,
        status,
        extra: Extra::new(),
    };
    SessionUpdate::Plan(Plan {
        entries: vec![
            entry(
                "Read the prompt",
                PlanEntryPriority::High,
                PlanEntryStatus::Completed,
            ),
            entry(
                "Reply with its text",
                PlanEntryPriority::Medium,
                PlanEntryStatus::InProgress,
            ),
        ],
        extra: Extra::new(),
    })
}

/// The tool call lifecycle of a turn without injected tool calls: the echo itself, reported
/// as a `think` step.
async fn echo_tool_call(
    agent: &Inner,
    session: &str,
    control: &TurnControl,
    prompt: &[ContentBlock],
    reply: &str,
) -> Result<(), TurnOutcome> {
    let id = tools::new_tool_call_id();
    let mut call = ToolCall::new(&id, "Prepare the echo reply");
    call.kind = Some(ToolKind::Think);
    call.status = Some(ToolCallStatus::InProgress);
    call.raw_input = Some(json!({ "blocks": prompt.len() }));
    agent
        .content(session, control, SessionUpdate::ToolCall(call))
        .await?;
    let mut update = ToolCallUpdate::new(&id);
    update.status = Nullable::Value(ToolCallStatus::Completed);
    update.raw_output = Nullable::Value(json!({ "characters": reply.chars().count() }));
    agent
        .content(session, control, SessionUpdate::ToolCallUpdate(update))
        .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_detached_future_runs_where_awaited_and_on_after_a_drop() {
        assert_eq!(Detached::new(async { 7 }).await, 7);
        let (release, released) = tokio::sync::oneshot::channel::<()>();
        let (finished, finish) = tokio::sync::oneshot::channel();
        let mut running = Detached::new(async move {
            let _ = released.await;
            let _ = finished.send("ran to its end");
        });
        // One poll starts it; then its owner gives up on it.
        assert!(futures::poll!(&mut running).is_pending());
        drop(running);
        release.send(()).unwrap();
        assert_eq!(finish.await.unwrap(), "ran to its end");
    }
}
