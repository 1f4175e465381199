//! Socket Mode through slack-morphism's listener: slash commands (answered in the ack),
//! interactions (acked at once, handled in a task), and the `hello` that tells the server Slack
//! is connected.

use std::sync::Arc;

use slack_morphism::errors::SlackClientError;
use slack_morphism::prelude::*;
use tokio::sync::watch;

use super::commands;
use super::hub::Hub;
use super::interactions;
use super::slack::Client;

/// What the callbacks find in the listener's user state.
struct State {
    hub: Arc<Hub>,
    connected: watch::Sender<bool>,
}

async fn state_of(states: &SlackClientEventsUserState) -> Option<(Arc<Hub>, watch::Sender<bool>)> {
    let guard = states.read().await;
    guard
        .get_user_state::<State>()
        .map(|state| (state.hub.clone(), state.connected.clone()))
}

// The hello event's type is not exported; the listener's signature fixes `E`.
async fn on_hello<E: Send + 'static>(
    _event: E,
    _client: Arc<Client>,
    states: SlackClientEventsUserState,
) {
    if let Some((_, connected)) = state_of(&states).await {
        tracing::info!("slack socket mode connected");
        connected.send_replace(true);
    }
}

fn reply(text: Option<String>) -> SlackCommandEventResponse {
    match text {
        Some(text) => SlackCommandEventResponse::new(SlackMessageContent::new().with_text(text))
            .with_response_type(SlackMessageResponseType::Ephemeral),
        // An empty payload: nothing is shown to anyone.
        None => SlackCommandEventResponse::new(SlackMessageContent::new()),
    }
}

async fn on_command(
    event: SlackCommandEvent,
    _client: Arc<Client>,
    states: SlackClientEventsUserState,
) -> UserCallbackResult<SlackCommandEventResponse> {
    let Some((hub, _)) = state_of(&states).await else {
        return Ok(reply(None));
    };
    let user = event.user_id.to_string();
    let channel = event.channel_id.to_string();
    let text = event.text.clone().unwrap_or_default();
    let expected = hub.config().slack.slash_command.clone();
    if event.command.0 != expected {
        tracing::warn!(command = %event.command.0, "ignored a slash command of another app");
        return Ok(reply(None));
    }
    if !hub.is_authorized(&user) {
        tracing::warn!(
            user,
            channel,
            "unauthorized slack user: command ignored by the authorization guard"
        );
        return Ok(reply(None));
    }
    tracing::info!(user, channel, command = %text.split_whitespace().next().unwrap_or("help"), "slash command");
    Ok(reply(Some(
        commands::run(&hub, &channel, &user, &text).await,
    )))
}

async fn on_interaction(
    event: SlackInteractionEvent,
    _client: Arc<Client>,
    states: SlackClientEventsUserState,
) -> UserCallbackResult<()> {
    let Some((hub, _)) = state_of(&states).await else {
        return Ok(());
    };
    let payload = match serde_json::to_value(&event) {
        Ok(payload) => payload,
        Err(error) => {
            tracing::warn!(%error, "an interaction that cannot be read");
            return Ok(());
        }
    };
    match event {
        SlackInteractionEvent::BlockActions(_) => {
            tokio::spawn(interactions::block_actions(hub, payload));
        }
        SlackInteractionEvent::ViewSubmission(_) => {
            tokio::spawn(interactions::view_submission(hub, payload));
        }
        _ => tracing::debug!("interaction ignored"),
    }
    Ok(())
}

async fn on_push(
    _event: SlackPushEventCallback,
    _client: Arc<Client>,
    _states: SlackClientEventsUserState,
) -> UserCallbackResult<()> {
    Ok(())
}

/// How much of a listener error (which quotes the whole offending frame) reaches the log.
const MAX_LOGGED_ERROR: usize = 1024;

/// `text` cut to at most `max` bytes on a character boundary, saying how much was cut.
fn truncated(text: &str, max: usize) -> std::borrow::Cow<'_, str> {
    if text.len() <= max {
        return text.into();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… ({} bytes cut)", &text[..end], text.len() - end).into()
}

fn on_error(
    error: Box<dyn std::error::Error + Send + Sync>,
    _client: Arc<Client>,
    _states: SlackClientEventsUserState,
) -> hyper::StatusCode {
    // A hostile frame (deep nesting, huge strings, wrong types) fails to parse here; the log
    // gets the reason and the start of the frame, never megabytes of it.
    let error = error.to_string();
    tracing::warn!(error = %truncated(&error, MAX_LOGGED_ERROR), "socket mode listener error");
    hyper::StatusCode::OK
}

/// A running listener.
pub struct Listener {
    inner: SlackClientSocketModeListener<super::slack::Connector>,
}

impl Listener {
    /// Stops every connection.
    pub async fn shutdown(self) {
        self.inner.shutdown().await;
    }
}

/// Opens Socket Mode with the app token; `connected` turns true at the first `hello`.
pub async fn listen(
    hub: Arc<Hub>,
    app_token: &str,
) -> Result<(Listener, watch::Receiver<bool>), SlackClientError> {
    let (connected, receiver) = watch::channel(false);
    let callbacks = SlackSocketModeListenerCallbacks::new()
        .with_hello_events(on_hello)
        .with_command_events(on_command)
        .with_interaction_events(on_interaction)
        .with_push_events(on_push);
    let environment = Arc::new(
        SlackClientEventsListenerEnvironment::new(hub.poster.client())
            .with_error_handler(on_error)
            .with_user_state(State {
                hub: hub.clone(),
                connected,
            }),
    );
    let config = SlackClientSocketModeConfig::new().with_max_connections_count(1);
    let inner = SlackClientSocketModeListener::new(&config, environment, callbacks);
    inner
        .listen_for(&SlackApiToken::new(app_token.to_string().into()))
        .await?;
    inner.start().await;
    Ok((Listener { inner }, receiver))
}

#[cfg(test)]
mod tests {
    use super::truncated;

    #[test]
    fn long_errors_are_cut_on_a_character_boundary() {
        assert_eq!(truncated("short", 10), "short");
        assert_eq!(truncated("ééé", 3), "é… (4 bytes cut)");
    }
}
