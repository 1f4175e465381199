//! Built-in behaviour: how the agent answers a message no rule took, per personality, and the
//! prompt turn they share.
//!
//! - [`standard`]: ACP v1 as the specification says.
//! - [`kiro`]: kiro-cli's extensions, ids and quirks on top of the standard behaviour.
//! - [`intercom`]: the intercom stream dialect, with the optional JSON-RPC handshake.
//! - [`v2`]: ACP v2 (draft) in the standard personality, when `initialize` settles on it.

pub mod intercom;
pub mod kiro;
pub mod kiro_sessions;
pub mod standard;
pub mod v2;

use std::borrow::Cow;
use std::sync::Arc;

use serde_json::{Value, json};
use ski::jsonrpc::RpcError;

use super::commands;
use super::runtime::Agent;
use super::runtime::ctx::Ctx;
use super::script::{Personality, PromptMode};

/// Runs the built-in handling of the context's trigger.
///
/// Every message's sequence holds this future and is moved whole into its box, so it is kept
/// the size of the standard personality's: the larger kiro and intercom handling run boxed.
pub async fn builtin(agent: &Arc<Agent>, ctx: &mut Ctx) {
    match agent.config.personality {
        Personality::Standard => standard::handle(agent, ctx).await,
        Personality::Kiro => Box::pin(kiro::handle(agent, ctx)).await,
        Personality::Intercom => Box::pin(intercom::handle(agent, ctx)).await,
    }
}

/// A quirk that ends the agent with code 0 and no answer: `note` in the transcript, `reason` as
/// the exit's, then the sequence waits for the exit.
pub async fn quirk_exit(agent: &Arc<Agent>, ctx: &mut Ctx, note: &str, reason: &str) {
    agent.transcript.note(note);
    agent.request_exit(0, reason);
    ctx.park();
    std::future::pending::<()>().await;
}

/// The `exit-on-missing-mcp-servers` quirk.
pub async fn exit_on_missing_mcp_servers(agent: &Arc<Agent>, ctx: &mut Ctx) {
    quirk_exit(
        agent,
        ctx,
        "quirk: session/new without mcpServers, exiting silently",
        "quirk: exit on missing mcpServers",
    )
    .await;
}

/// The `exit-on-unknown-load` quirk.
pub async fn exit_on_unknown_load(agent: &Arc<Agent>, ctx: &mut Ctx) {
    quirk_exit(
        agent,
        ctx,
        "quirk: session/load of an unknown session, exiting",
        "quirk: exit on unknown session/load",
    )
    .await;
}

/// Answers the trigger (if it is a request) and marks the context answered.
pub async fn reply(agent: &Arc<Agent>, ctx: &mut Ctx, result: Result<Value, RpcError>) {
    if ctx.v2_prompt {
        // An acknowledged v2 prompt has had its response: its end is the idle state.
        v2::end_turn(agent, ctx, &v2::stop_reason_of(&result)).await;
        return;
    }
    // The turn is over for the agent before the client can see its result, so a cancel sent
    // right after the result finds no running turn.
    ctx.turn.take();
    if let Some(trigger) = ctx.trigger.clone() {
        agent.respond(&trigger, result, None).await;
        ctx.answered = true;
    }
}

/// Answers the turn's prompt with `stop_reason` (once, as [`reply`]).
async fn reply_prompt_result(agent: &Arc<Agent>, ctx: &mut Ctx, stop_reason: &str) {
    if ctx.v2_prompt {
        v2::end_turn(agent, ctx, stop_reason).await;
        return;
    }
    ctx.turn.take();
    if let Some(trigger) = ctx.trigger.clone() {
        agent.respond_prompt_result(&trigger, stop_reason).await;
        ctx.answered = true;
    }
}

/// What the start of a prompt turn sends (kiro: a `turn_start` marker).
pub async fn begin_turn(agent: &Arc<Agent>, ctx: &Ctx) {
    if agent.config.personality == Personality::Kiro {
        // Boxed where they run, as every part a plain echo turn skips: the future every
        // message's sequence moves into its box stays small.
        Box::pin(kiro::turn_start(agent, ctx)).await;
    }
}

/// Ends a prompt turn: the personality's closing messages, the result, and the faults that
/// send updates after it.
pub async fn finish_turn(agent: &Arc<Agent>, ctx: &mut Ctx, stop_reason: &str) {
    if agent.config.personality == Personality::Kiro {
        Box::pin(kiro::turn_end(agent, ctx, stop_reason)).await;
    }
    reply_prompt_result(agent, ctx, stop_reason).await;
    if agent.config.faults.updates_after_prompt_result {
        Box::pin(agent.update(
            &ctx.session_id(),
            json!({"sessionUpdate": "agent_message_chunk",
                   "content": {"type": "text", "text": "late update after the prompt result"}}),
        ))
        .await;
    }
    // The kiro quirk, as a profile any personality can switch on.
    kiro::after_turn(agent, ctx).await;
}

/// The stop reason of a turn that ran to its end: `cancelled` if the session was cancelled
/// meanwhile, else the configured one.
pub fn stop_reason<'a>(agent: &'a Agent, ctx: &Ctx) -> Cow<'a, str> {
    if ctx.cancelled() {
        Cow::Borrowed("cancelled")
    } else {
        ctx.vars.expand_text(&agent.config.stop_reason)
    }
}

/// The built-in prompt turn: echo, commands or silence, framed by the personality's markers.
pub async fn prompt_turn(agent: &Arc<Agent>, ctx: &mut Ctx) {
    let session = ctx.session.as_deref().unwrap_or_default();
    let known = agent.state().session(session).is_some();
    if !known {
        reply(
            agent,
            ctx,
            Err(RpcError::new(
                ski::jsonrpc::ErrorCode::RESOURCE_NOT_FOUND,
                "Resource not found",
            )
            .with_data(json!({ "sessionId": session }))),
        )
        .await;
        return;
    }
    // In ACP v2 the prompt is acknowledged before its turn runs (the session is known, checked
    // above, so it is not refused).
    v2::acknowledge(agent, ctx).await;
    match agent.config.prompt_mode {
        // Boxed: a command turn's future is larger than the echo turn every prompt of the
        // default mode runs.
        PromptMode::Commands => Box::pin(commands::run_prompt(agent, ctx)).await,
        PromptMode::Echo => {
            let text = ctx.vars.prompt.clone().unwrap_or_default();
            text_turn(agent, ctx, &text).await;
        }
        PromptMode::Silent => {
            begin_turn(agent, ctx).await;
            let reason = stop_reason(agent, ctx);
            finish_turn(agent, ctx, &reason).await;
        }
    }
}

/// `text` in pieces of at most `size` characters (the whole text when `size` is 0 or the text
/// is empty), so that joined they give `text` back.
pub fn chunks(text: &str, size: usize) -> impl Iterator<Item = &str> {
    let mut rest = Some(text);
    std::iter::from_fn(move || {
        let current = rest?;
        let end = match size {
            0 => current.len(),
            _ => current
                .char_indices()
                .nth(size)
                .map_or(current.len(), |(at, _)| at),
        };
        let (piece, tail) = current.split_at(end);
        rest = (!tail.is_empty()).then_some(tail);
        Some(piece)
    })
}

/// A whole prompt turn answering with `text`: in ACP one `agent_message_chunk` and the result
/// (with kiro's markers and metadata); in the intercom stream dialect a `status/update`.
pub async fn text_turn(agent: &Arc<Agent>, ctx: &mut Ctx, text: &Arc<str>) {
    if agent.config.personality == Personality::Intercom {
        intercom::text_turn(agent, ctx, text).await;
        return;
    }
    begin_turn(agent, ctx).await;
    // kiro's chunking, or a profile's (0 unless one is on).
    let size = agent.config.kiro.chunk_chars;
    let session = ctx.session.as_deref().unwrap_or_default();
    for chunk in chunks(text, size) {
        // A turn in one chunk (the usual one) keeps the text it was given in the history.
        let chunk = if chunk.len() == text.len() {
            Arc::clone(text)
        } else {
            Arc::from(chunk)
        };
        agent.message_chunk(session, &chunk).await;
    }
    let reason = stop_reason(agent, ctx);
    finish_turn(agent, ctx, &reason).await;
}
