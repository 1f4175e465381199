//! The dispatch of every inbound line: decoded, then answered by the first script rule that
//! fires, by the recording in replay, or by the personality's built-in handling; and the rules
//! fired by a control command or a timer.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use serde_json::Value;
use serde_json::value::RawValue;
use ski::jsonrpc::{DecodeError, Message, VersionField, decode_with_params};
use tokio::sync::oneshot;

use super::inbound::Inbound;
use super::inline::{FirstPoll, poll_first};
use super::params::Params;
use super::state::{Reply, id_key};
use super::{Agent, sequence};
use crate::agent::personality;
use crate::agent::replay;
use crate::agent::script::{Personality, Trigger};
use crate::agent::transcript::Kind;

impl Agent {
    /// Handles one line read from stdin.
    pub async fn handle_line(self: &Arc<Self>, line: &[u8]) {
        self.transcript.line(Kind::In, line, None);
        self.state().lines_in += 1;
        let version = if self.config.personality == Personality::Intercom {
            VersionField::Optional
        } else {
            VersionField::Required
        };
        match decode_with_params::<Box<RawValue>>(line, version) {
            Err(error) => self.bad_input(line, error).await,
            Ok((Message::Response(response), _)) => self.on_response(response).await,
            Ok((Message::Request(request), jsonrpc)) => {
                self.on_call(Inbound {
                    method: request.method,
                    id: Some(request.id),
                    params: request.params.map(Params::new),
                    jsonrpc,
                })
                .await;
            }
            Ok((Message::Notification(notification), jsonrpc)) => {
                self.on_call(Inbound {
                    method: notification.method,
                    id: None,
                    params: notification.params.map(Params::new),
                    jsonrpc,
                })
                .await;
            }
        }
    }

    async fn bad_input(self: &Arc<Self>, line: &[u8], error: DecodeError) {
        if let Some(recording) = &self.config.script.recording
            && replay::answer_malformed(self, recording, line).await
        {
            return;
        }
        if self.config.personality == Personality::Intercom {
            self.log(&format!("skipping a malformed line: {error}"))
                .await;
            return;
        }
        match error.error_response() {
            Some(response) => {
                self.write_message(&Message::Response(response), true, None)
                    .await;
            }
            None => {
                self.log(&format!("ignoring a malformed response: {error}"))
                    .await
            }
        }
    }

    async fn on_call(self: &Arc<Self>, inbound: Inbound) {
        let inbound = Arc::new(inbound);
        let searched = {
            let mut state = self.state();
            state.seen.push(&inbound);
            // Only a control channel reads the counts (its `state` and `wait` commands).
            if self.controlled {
                match state.method_counts.get_mut(&inbound.method) {
                    Some(count) => *count += 1,
                    None => {
                        state.method_counts.insert(inbound.method.clone(), 1);
                    }
                }
            }
            state.seen.is_kept()
        };
        // Waiters exist only for a kept log (`wait_for` steps, a control channel's `wait`).
        if searched {
            self.seen.notify_waiters();
        }

        // A bespoke reply (intercom `clearance/response`, `prompt/response`) to a request the
        // agent waits on.
        if let Some(id) = &inbound.id {
            let mut state = self.state();
            let key = (!state.pending.is_empty()).then(|| id_key(id));
            if let Some(key) = key
                && state
                    .pending
                    .get(&key)
                    .is_some_and(|p| p.reply_method.as_deref() == Some(inbound.method.as_str()))
                && let Some(pending) = state.pending.remove(&key)
            {
                let _ = pending.reply.send(Reply {
                    result: Ok(inbound.params_value().cloned().unwrap_or(Value::Null)),
                });
                return;
            }
        }

        let faults = &self.config.faults;
        if faults.exit_on.as_deref() == Some(inbound.method.as_str()) {
            self.transcript.note(&format!(
                "fault: exit with code {} on {}",
                faults.exit_code, inbound.method
            ));
            self.request_exit(
                faults.exit_code,
                &format!("fault: exit on {}", inbound.method),
            );
            return;
        }
        if faults.hang_on.contains(&inbound.method) {
            self.transcript
                .note(&format!("fault: never answering {}", inbound.method));
            return;
        }

        let replaying = self.config.script.recording.clone();
        if replaying.is_none()
            && matches!(
                inbound.method.as_str(),
                "session/cancel" | "$/cancel_request"
            )
            && !self.rule_matches(&inbound)
        {
            self.cancel(&inbound).await;
            return;
        }

        let mut ctx = self.context_for(&inbound);
        let (parker, parked) = oneshot::channel();
        ctx.parker = Some(parker);
        let agent = Arc::clone(self);
        let id = inbound.id.clone();
        let mut sequence: Pin<Box<dyn Future<Output = ()> + Send>> =
            if let Some((index, rule_once)) = self.matching_rule(&inbound, &mut ctx) {
                if rule_once {
                    self.state().fired.insert(index);
                }
                Box::pin(async move {
                    // In ACP v2 a prompt a rule takes is acknowledged before its steps (or
                    // refused, for a session the agent does not have, and its steps not run).
                    if personality::v2::acknowledge(&agent, &mut ctx).await {
                        let steps = agent.config.script.rules[index].steps.clone();
                        sequence::run_steps(&agent, &steps, &mut ctx).await;
                    }
                    agent.finish_running(ctx.trigger.as_deref());
                })
            } else if let Some(recording) = replaying {
                Box::pin(async move {
                    replay::answer(&agent, &recording, &mut ctx).await;
                    agent.finish_running(ctx.trigger.as_deref());
                })
            } else {
                Box::pin(async move {
                    personality::builtin(&agent, &mut ctx).await;
                    agent.finish_running(ctx.trigger.as_deref());
                })
            };
        // The sequence runs here until it first waits (see `inline::poll_first`).
        match poll_first(sequence.as_mut(), &self.reader_flushes) {
            FirstPoll::Ready => {}
            FirstPoll::Pending => {
                // It waits, maybe for an answer to what it queued: that goes out now.
                self.flush_wanted.notify_one();
                let task = self.spawn(sequence);
                self.track_running(id.as_ref(), task);
            }
            // As in a task of its own, a panicking sequence ends alone.
            FirstPoll::Panicked => self
                .transcript
                .note(&format!("the sequence for {} panicked", inbound.method)),
        }
        // The next input line is handled once this message's sequence ended or waits.
        let _ = parked.await;
    }

    /// Runs the rules with a `control` trigger of this name, one after the other; returns how
    /// many ran.
    pub async fn fire_control(self: &Arc<Self>, name: &str) -> usize {
        let indices: Vec<usize> = self
            .config
            .script
            .rules
            .iter()
            .enumerate()
            .filter(|(_, rule)| matches!(&rule.trigger, Trigger::Control(n) if n == name))
            .map(|(index, _)| index)
            .collect();
        let mut ran = 0;
        for index in indices {
            let rule = &self.config.script.rules[index];
            if rule.once {
                let mut state = self.state();
                if !state.fired.insert(index) {
                    continue;
                }
            }
            let mut ctx = self.detached_context();
            sequence::run_steps(self, &rule.steps.clone(), &mut ctx).await;
            ran += 1;
        }
        ran
    }

    /// Starts the timer rules.
    pub fn start_timers(self: &Arc<Self>) {
        for (index, rule) in self.config.script.rules.iter().enumerate() {
            let Trigger::Timer { after, every } = rule.trigger else {
                continue;
            };
            let agent = Arc::clone(self);
            self.spawn(async move {
                tokio::time::sleep(after).await;
                loop {
                    let steps = agent.config.script.rules[index].steps.clone();
                    let mut ctx = agent.detached_context();
                    sequence::run_steps(&agent, &steps, &mut ctx).await;
                    match every {
                        Some(period) if !agent.config.script.rules[index].once => {
                            tokio::time::sleep(period).await;
                        }
                        _ => break,
                    }
                }
            });
        }
    }
}
