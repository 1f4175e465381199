//! ACP mode: the server spawns an agent per session and speaks a line protocol on its stdio.
//! [`AcpDriver`] is the [`AgentDriver`] of this mode; each live session runs in
//! [`agent::run`].
//!
//! - [`spawn`]: the agent's command line, environment and process group; leftovers of a killed
//!   server.
//! - [`wire`]: the lines read and written, in the stream dialect and in standard ACP.
//! - [`agent`]: one session's loop (stream, startup timeout, stall, offline queue, stop, restart).
//! - [`lane`]: one session's ordered, coalescing Slack posting.
//! - [`stall`]: the stall detector on an injectable clock.
//! - [`warnings`]: the rate limit of warnings about an agent's output.

pub mod agent;
pub mod lane;
pub mod spawn;
pub mod stall;
pub mod warnings;
pub mod wire;

use std::sync::{Arc, OnceLock, Weak};

use serde_json::json;

use self::agent::{Control, Link, Pending, Registry};
use super::config::{Dialect, Mode};
use super::driver::{
    AgentDriver, ClearanceDecision, Delivery, DriverError, DriverFuture, PromptDecision,
    SessionStart, WaitDecision,
};
use super::hub::Hub;
use super::vocab::Clearance;

/// The driver of spawned agents.
#[derive(Default)]
pub struct AcpDriver {
    hub: OnceLock<Weak<Hub>>,
    agents: Arc<Registry>,
}

impl AcpDriver {
    /// Connects the driver to the hub that holds it (once, right after both exist).
    pub fn attach(&self, hub: &Arc<Hub>) {
        let _ = self.hub.set(Arc::downgrade(hub));
    }

    fn hub(&self) -> Result<Arc<Hub>, DriverError> {
        self.hub
            .get()
            .and_then(Weak::upgrade)
            .ok_or_else(|| DriverError::Acp("the server is shutting down".into()))
    }

    fn link(&self, session_id: &str) -> Option<Arc<Link>> {
        self.agents
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(session_id)
            .cloned()
    }

    /// How many agents run.
    pub fn live(&self) -> usize {
        self.agents
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .len()
    }

    fn not_found(session_id: &str) -> DriverError {
        DriverError::NotFound(format!("no live agent for session {session_id}"))
    }
}

impl AgentDriver for AcpDriver {
    fn protocol_mode(&self) -> Mode {
        Mode::Acp
    }

    fn check_capacity(&self) -> Result<(), DriverError> {
        let max = self.hub()?.config().acp.max_sessions;
        if self.live() >= max as usize {
            return Err(DriverError::Limit(format!(
                "Maximum concurrent sessions reached ({max})"
            )));
        }
        Ok(())
    }

    fn start_session(&self, start: SessionStart) -> DriverFuture<'_, ()> {
        Box::pin(async move {
            let hub = self.hub()?;
            let dialect = hub.config().acp.dialect;
            let (link, control) = Link::new(start.session_id.clone(), dialect);
            self.agents
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .insert(start.session_id.clone(), link.clone());
            tokio::spawn(agent::run(hub, self.agents.clone(), link, start, control));
            Ok(())
        })
    }

    fn resolve_clearance<'a>(
        &'a self,
        session_id: &'a str,
        request_id: &'a str,
        decision: ClearanceDecision,
    ) -> DriverFuture<'a, ()> {
        Box::pin(async move {
            let link = self
                .link(session_id)
                .ok_or_else(|| DriverError::NotFound(format!("clearance request {request_id}")))?;
            let Some(Pending::Clearance { raw_id, options }) = link.take_pending(request_id) else {
                return Err(DriverError::NotFound(format!(
                    "clearance request {request_id}"
                )));
            };
            let approved = decision.status == Clearance::Approved;
            let line = match options {
                None => wire::out::clearance_response(
                    &raw_id,
                    decision.status.as_str(),
                    decision.reason.as_deref(),
                ),
                Some(options) => {
                    let outcome = match wire::choose_option(&options, approved) {
                        Some(option) => json!({ "outcome": "selected", "optionId": option }),
                        None => json!({ "outcome": "cancelled" }),
                    };
                    wire::out::result(&raw_id, json!({ "outcome": outcome }))
                }
            };
            let written = link.write(line).await;
            link.send(Control::Answered);
            written
        })
    }

    fn resolve_prompt<'a>(
        &'a self,
        session_id: &'a str,
        prompt_id: &'a str,
        decision: PromptDecision,
    ) -> DriverFuture<'a, ()> {
        Box::pin(async move {
            let link = self
                .link(session_id)
                .ok_or_else(|| DriverError::NotFound(format!("prompt {prompt_id}")))?;
            let Some(Pending::Prompt { raw_id }) = link.take_pending(prompt_id) else {
                return Err(DriverError::NotFound(format!("prompt {prompt_id}")));
            };
            let written = link
                .write(wire::out::prompt_response(
                    &raw_id,
                    decision.decision.as_str(),
                    decision.instruction.as_deref(),
                ))
                .await;
            link.send(Control::Answered);
            written
        })
    }

    fn resolve_wait<'a>(
        &'a self,
        session_id: &'a str,
        decision: WaitDecision,
    ) -> DriverFuture<'a, ()> {
        Box::pin(async move {
            let link = self
                .link(session_id)
                .ok_or_else(|| Self::not_found(session_id))?;
            if link.dialect == Dialect::Acp {
                return Err(DriverError::Unsupported(
                    "standby is an MCP tool; ACP agents are steered with prompts".into(),
                ));
            }
            let text = decision.instruction.unwrap_or_else(|| "continue".into());
            link.write(wire::out::prompt_send(&text)).await
        })
    }

    fn send_prompt<'a>(&'a self, session_id: &'a str, text: &'a str) -> DriverFuture<'a, Delivery> {
        Box::pin(async move {
            let link = self
                .link(session_id)
                .ok_or_else(|| Self::not_found(session_id))?;
            if link.is_offline() {
                return Ok(Delivery::Offline);
            }
            match link.dialect {
                Dialect::Intercom => {
                    link.write(wire::out::prompt_send(text)).await?;
                    Ok(Delivery::Delivered)
                }
                // One turn at a time: the queued message goes out now or when the turn ends.
                Dialect::Acp => {
                    link.send(Control::Deliver);
                    Ok(Delivery::NextTurn)
                }
            }
        })
    }

    fn interrupt<'a>(&'a self, session_id: &'a str) -> DriverFuture<'a, ()> {
        Box::pin(async move {
            let Some(link) = self.link(session_id) else {
                return Ok(());
            };
            let (done, finished) = tokio::sync::oneshot::channel();
            if link.send(Control::Stop(done)) {
                let _ = finished.await;
            }
            Ok(())
        })
    }

    fn restart<'a>(&'a self, session_id: &'a str) -> DriverFuture<'a, ()> {
        Box::pin(async move {
            let link = self
                .link(session_id)
                .ok_or_else(|| Self::not_found(session_id))?;
            let (done, started) = tokio::sync::oneshot::channel();
            if !link.send(Control::Restart(done)) {
                return Err(Self::not_found(session_id));
            }
            started
                .await
                .map_err(|_| DriverError::Acp("the agent did not restart".into()))
        })
    }
}

/// Ends agents a killed earlier run left behind (by their recorded process groups); answers
/// how many processes were signalled.
pub fn end_leftovers(store: &super::store::Store) -> usize {
    let recorded = match store.recorded_agents() {
        Ok(recorded) => recorded,
        Err(error) => {
            tracing::error!(%error, "cannot read the recorded agents");
            return 0;
        }
    };
    let killed = recorded
        .iter()
        .map(|(session_id, pgid)| spawn::kill_leftover(session_id, *pgid))
        .sum();
    let _ = store.clear_agent_pids();
    killed
}
