//! Slash commands (`/intercom <command> …`): parsing, session selection by channel (most recently
//! active first, or an id prefix), and the replies the operator reads.

use super::driver::Delivery;
use super::hub::Hub;
use super::store::Session;
use super::vocab::SessionStatus;

/// The longest command text accepted.
pub const MAX_TEXT: usize = 4000;

/// A parsed command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    Help,
    Sessions,
    Status(Option<String>),
    SessionStart(String),
    SessionStop(Option<String>),
    Steer(String),
    Unknown(String),
}

/// Splits the text: the first word is the command, the rest its argument; empty text is `help`.
pub fn parse(text: &str) -> Command {
    let text = text.trim();
    let (word, rest) = match text.split_once(char::is_whitespace) {
        Some((word, rest)) => (word, rest.trim()),
        None => (text, ""),
    };
    let optional = |rest: &str| (!rest.is_empty()).then(|| rest.to_string());
    match word {
        "" | "help" => Command::Help,
        "sessions" => Command::Sessions,
        "status" => Command::Status(optional(rest)),
        "session-start" => Command::SessionStart(unquote(rest).to_string()),
        "session-stop" => Command::SessionStop(optional(rest)),
        "steer" => Command::Steer(rest.to_string()),
        other => Command::Unknown(other.to_string()),
    }
}

fn unquote(text: &str) -> &str {
    let text = text.trim();
    text.strip_prefix('"')
        .and_then(|t| t.strip_suffix('"'))
        .unwrap_or(text)
}

/// The help text.
pub fn help(slash: &str) -> String {
    format!(
        "*Intercom commands*\n\
         `{slash} sessions` — active sessions in this channel\n\
         `{slash} status [id]` — one session (default: the most recently active here)\n\
         `{slash} steer <text>` — send the agent a message\n\
         `{slash} session-start <prompt>` — start an agent (ACP mode)\n\
         `{slash} session-stop [id]` — stop a session\n\
         `{slash} help` — this text"
    )
}

/// The reply for "nothing to act on here".
pub const NO_SESSION: &str = "No active session in this channel";

enum Choice {
    One(Box<Session>, usize),
    None,
    Ambiguous(Vec<Session>),
}

fn choose(hub: &Hub, channel: &str, id: Option<&str>) -> Result<Choice, String> {
    let sessions = match id {
        Some(prefix) => hub
            .store
            .active_by_prefix(prefix)
            .map_err(|e| e.to_string())?,
        None => hub
            .store
            .active_in_channel(channel)
            .map_err(|e| e.to_string())?,
    };
    let count = sessions.len();
    match (id, sessions.into_iter().next()) {
        (_, None) => Ok(Choice::None),
        (Some(_), Some(first)) if count > 1 => {
            let mut all = vec![first];
            all.extend(
                hub.store
                    .active_by_prefix(id.unwrap_or_default())
                    .map_err(|e| e.to_string())?
                    .into_iter()
                    .skip(1),
            );
            Ok(Choice::Ambiguous(all))
        }
        (_, Some(first)) => Ok(Choice::One(Box::new(first), count)),
    }
}

fn describe(hub: &Hub, session: &Session) -> String {
    let pending = hub
        .store
        .pending_approvals(&session.id)
        .map(|p| p.len())
        .unwrap_or(0);
    format!(
        "Session `{}` ({}) — status: {}, workspace: {}, mode: {}, pending approvals: {}, last activity: {}",
        session.id,
        session.protocol_mode.as_str().to_uppercase(),
        session.status,
        session.workspace_id.as_deref().unwrap_or("-"),
        session.mode,
        pending,
        session.last_activity_at.as_deref().unwrap_or("-"),
    )
}

/// Runs a command typed by an authorized `user` in `channel`; answers the ephemeral reply.
pub async fn run(hub: &Hub, channel: &str, user: &str, text: &str) -> String {
    if text.len() > MAX_TEXT {
        return format!(
            "Error: command text too long ({} bytes, at most {MAX_TEXT})",
            text.len()
        );
    }
    let slash = hub.config().slack.slash_command.clone();
    match parse(text) {
        Command::Help => help(&slash),
        Command::Unknown(word) => {
            format!("Unknown command: `{word}`. Use `{slash} help` for available commands.")
        }
        Command::Sessions => match hub.store.active_in_channel(channel) {
            Ok(sessions) if sessions.is_empty() => "No active sessions.".into(),
            Ok(sessions) => {
                let mut reply = String::from("*Active sessions:*");
                for session in sessions {
                    reply.push_str(&format!(
                        "\n• `{}` — {} | owner: `{}` | workspace: {}",
                        session.id,
                        session.protocol_mode.as_str().to_uppercase(),
                        session.owner_user_id,
                        session.workspace_id.as_deref().unwrap_or("-")
                    ));
                }
                reply
            }
            Err(error) => format!("Error: {error}"),
        },
        Command::Status(id) => match choose(hub, channel, id.as_deref()) {
            Ok(Choice::One(session, count)) => {
                let mut reply = describe(hub, &session);
                if count > 1 {
                    reply.push_str(&format!(
                        "\n_Most recently active of {count} sessions in this channel; pass an id to pick another._"
                    ));
                }
                reply
            }
            Ok(Choice::None) => NO_SESSION.into(),
            Ok(Choice::Ambiguous(sessions)) => ambiguous(&sessions),
            Err(error) => format!("Error: {error}"),
        },
        Command::SessionStop(id) => match choose(hub, channel, id.as_deref()) {
            Ok(Choice::One(session, _)) => {
                hub.end_session(
                    &session.id,
                    SessionStatus::Terminated,
                    "stopped by operator",
                )
                .await;
                tracing::info!(session_id = %session.id, user, "session stopped from slack");
                format!("Session `{}` stopped.", session.id)
            }
            Ok(Choice::None) => NO_SESSION.into(),
            Ok(Choice::Ambiguous(sessions)) => ambiguous(&sessions),
            Err(error) => format!("Error: {error}"),
        },
        Command::Steer(message) => {
            if message.is_empty() {
                return format!("Error: usage: {slash} steer <text>");
            }
            match choose(hub, channel, None) {
                Ok(Choice::One(session, _)) => steer(hub, &session, channel, &message).await,
                Ok(Choice::None) => NO_SESSION.into(),
                Ok(Choice::Ambiguous(sessions)) => ambiguous(&sessions),
                Err(error) => format!("Error: {error}"),
            }
        }
        Command::SessionStart(prompt) => {
            if prompt.trim().is_empty() {
                return "Error: prompt must not be empty".into();
            }
            if hub.mode != super::config::Mode::Acp {
                return "Error: session-start is only available in ACP mode; in MCP mode agents \
                        connect to the server themselves"
                    .into();
            }
            match hub.start_agent_session(user, channel, &prompt).await {
                Ok(session) => format!("Starting session `{}`…", session.id),
                Err(error) => format!("Error: {error}"),
            }
        }
    }
}

fn ambiguous(sessions: &[Session]) -> String {
    let ids: Vec<String> = sessions.iter().map(|s| format!("`{}`", s.id)).collect();
    format!("That id matches several sessions: {}", ids.join(", "))
}

async fn steer(hub: &Hub, session: &Session, channel: &str, message: &str) -> String {
    let queued = match hub
        .store
        .queue_steering(&session.id, Some(channel), message)
    {
        Ok(queued) => queued,
        Err(error) => return format!("Error: {error}"),
    };
    match hub.driver.send_prompt(&session.id, message).await {
        Ok(Delivery::Delivered) => {
            let _ = hub.store.take_steering(&session.id);
            format!("Steering message delivered to session `{}`.", session.id)
        }
        Ok(Delivery::Queued) => format!(
            "Steering message queued ({queued} in queue) for session `{}`; the agent receives it on its next `ping`.",
            session.id
        ),
        Ok(Delivery::NextTurn) => format!(
            "Steering message queued ({queued} in queue) for session `{}`; it is sent as the agent's next turn.",
            session.id
        ),
        Ok(Delivery::Offline) => {
            let text = format!(
                "📥 Agent offline — message queued ({queued} in queue); it is delivered when the agent responds again."
            );
            hub.post_in_session(&session.id, &text, None).await;
            text
        }
        Err(error) => format!("Error: {error}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_parse_with_their_arguments() {
        assert_eq!(parse(""), Command::Help);
        assert_eq!(parse("status"), Command::Status(None));
        assert_eq!(parse("status abc"), Command::Status(Some("abc".into())));
        assert_eq!(
            parse("session-start \"build a web server\""),
            Command::SessionStart("build a web server".into())
        );
        assert_eq!(parse("steer  go left "), Command::Steer("go left".into()));
        assert_eq!(parse("frobnicate"), Command::Unknown("frobnicate".into()));
    }
}
